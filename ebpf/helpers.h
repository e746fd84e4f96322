/* SPDX-License-Identifier: GPL-2.0 */
/* Small helpers shared by the programs. */
#ifndef EP_HELPERS_H
#define EP_HELPERS_H

#include "maps.h"

/* At most one new-process event per pid in this interval: enough for the
 * process manager to act, bounded when it cannot (an unreadable
 * process). */
#define NEW_PROCESS_EVENT_INTERVAL_NS (500ULL * 1000 * 1000)
/* At most one unknown-pc event per pid in this interval: short, because
 * a program starting up maps its libraries one after the other (and the
 * stacks in between stop short until the manager re-reads the maps). */
#define UNKNOWN_PC_EVENT_INTERVAL_NS (50ULL * 1000 * 1000)

static __always_inline void count(enum counter_id id)
{
	u32 key = id;
	u64 *value = bpf_map_lookup_elem(&counters, &key);
	if (value)
		*value += 1;
}

static __always_inline void count_n(enum counter_id id, u64 n)
{
	u32 key = id;
	u64 *value = bpf_map_lookup_elem(&counters, &key);
	if (value)
		*value += n;
}

/* User space polls the samples ring buffer on a timer; wake it early
 * only when the buffer is filling up, so a busy machine costs no wake-up
 * per sample and a burst cannot overflow the buffer before the next
 * poll. */
static __always_inline u64 wakeup_flag(void)
{
	u64 avail = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA);
	u64 size = bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE);
	return avail > size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* Sends a process event, if rate_limited unless one of its kind went out
 * for the pid within its interval. */
static __always_inline void send_process_event(u32 kind, u32 pid, u64 pc, bool rate_limited)
{
	u64 now = bpf_ktime_get_ns();
	u64 key = ((u64)pid << 32) | kind;
	if (rate_limited) {
		u64 *last = bpf_map_lookup_elem(&process_event_times, &key);
		u64 interval = kind == PROCESS_EVENT_UNKNOWN_PC ? UNKNOWN_PC_EVENT_INTERVAL_NS
							       : NEW_PROCESS_EVENT_INTERVAL_NS;
		if (last && now - *last < interval) {
			count(COUNTER_PROCESS_EVENTS_RATE_LIMITED);
			return;
		}
		bpf_map_update_elem(&process_event_times, &key, &now, BPF_ANY);
	}
	struct process_event event = {
		.kind = kind,
		.pid = pid,
		.ktime_ns = now,
		.pc = pc,
	};
	/* Default wake-up: the process manager sleeps on this buffer. */
	if (bpf_ringbuf_output(&process_events, &event, sizeof(event), 0) < 0)
		count(COUNTER_PROCESS_EVENTS_LOST);
	else
		count(COUNTER_PROCESS_EVENTS_SENT);
}

/* Sends the finished sample (header and the used frame words only). */
static __always_inline void send_sample(struct sample_event *event, u8 stop)
{
	event->unwind_stop = stop;
	if (stop < UNWIND_STOP_COUNT)
		count(COUNTER_UNWIND_STOP_BASE + stop);
	count_n(COUNTER_USER_FRAMES, event->user_frames);
	u64 words = (u64)event->kernel_frames + event->user_frames;
	u64 size = SAMPLE_EVENT_HEADER_SIZE + words * sizeof(u64);
	if (size > sizeof(*event))
		size = sizeof(*event);
	if (bpf_ringbuf_output(&samples, event, size, wakeup_flag()) < 0)
		count(COUNTER_SAMPLES_LOST_RINGBUF);
	else
		count(COUNTER_SAMPLES_SENT);
}

#endif
