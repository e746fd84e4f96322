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
 * for the pid within its interval; whether it was sent. */
static __always_inline bool send_process_event(u32 kind, u32 pid, u64 pc, bool rate_limited)
{
	u64 now = bpf_ktime_get_ns();
	u64 key = ((u64)pid << 32) | kind;
	if (rate_limited) {
		u64 *last = bpf_map_lookup_elem(&process_event_times, &key);
		u64 interval = kind == PROCESS_EVENT_UNKNOWN_PC ? UNKNOWN_PC_EVENT_INTERVAL_NS
							       : NEW_PROCESS_EVENT_INTERVAL_NS;
		if (last && now - *last < interval) {
			count(COUNTER_PROCESS_EVENTS_RATE_LIMITED);
			return false;
		}
		bpf_map_update_elem(&process_event_times, &key, &now, BPF_ANY);
	}
	struct process_event event = {
		.kind = kind,
		.pid = pid,
		.ktime_ns = now,
		.pc = pc,
	};
	/* A sample waiting for its process wakes the reader; execs and exits
	 * wait for its next poll (EVENT_POLL, crates/agent/src/process_manager.rs), so a burst of them
	 * costs one wake-up. */
	u64 wakeup = kind == PROCESS_EVENT_NEW || kind == PROCESS_EVENT_UNKNOWN_PC ? 0 : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&process_events, &event, sizeof(event), wakeup) < 0) {
		count(COUNTER_PROCESS_EVENTS_LOST);
		return false;
	}
	count(COUNTER_PROCESS_EVENTS_SENT);
	return true;
}

/* Copies the sample's Go labels (go_labels.bpf.h) to `to`, in the
 * record's room after the frame words and stack copy. Returns the bytes
 * added. */
static __always_inline u32 append_go_labels(u8 *to)
{
	u32 zero = 0;
	struct go_labels_work *work = bpf_map_lookup_elem(&go_labels_scratch, &zero);
	if (!work)
		return 0;
	u32 labels = work->labels.count;
	if (labels > GO_LABELS_MAX)
		return 0;
	u32 size = GO_LABELS_HEADER_SIZE + labels * sizeof(struct go_label);
	/* The verifier's bound of the product is loose: clamp (after a
	 * barrier, or clang drops the clamp it proves useless). */
	barrier_var(size);
	if (size > sizeof(struct go_labels))
		size = sizeof(struct go_labels);
	if (bpf_probe_read_kernel(to, size, &work->labels))
		return 0;
	count(COUNTER_GO_LABELS_SAMPLES);
	return size;
}

/* Sends the finished sample: the header, the used frame words, then
 * `extra` bytes that follow them in the record (a stack copy). `wake`
 * wakes user space now rather than at its next poll. */
static __always_inline void send_sample_sized(struct sample_event *event, u8 stop, u32 extra, bool wake)
{
	event->unwind_stop = stop;
	if (stop < UNWIND_STOP_COUNT)
		count(COUNTER_UNWIND_STOP_BASE + stop);
	count_n(COUNTER_USER_FRAMES, event->user_frames);
	u64 words = (u64)event->kernel_frames + event->user_frames;
	u64 size = SAMPLE_EVENT_HEADER_SIZE + words * sizeof(u64);
	if (size > sizeof(*event))
		size = sizeof(*event);
	if (extra > sizeof(struct stack_copy) + STACK_COPY_MAX)
		extra = 0;
	/* A stack copy takes the room its frame words leave
	 * (append_stack_copy); the verifier knows the two bounds apart only:
	 * bound their sum (after a barrier, or clang drops the check). */
	u64 total = size + extra;
	barrier_var(total);
	if (total > SAMPLE_EVENT_HEADER_SIZE + SAMPLE_COPY_AREA + sizeof(struct stack_copy))
		total = size;
	size = total;
	if (event->flags & SAMPLE_FLAG_GO_LABELS) {
		u32 added = append_go_labels((u8 *)event + size);
		if (!added)
			event->flags &= ~SAMPLE_FLAG_GO_LABELS;
		size += added;
	}
	/* Bounded again where it is used: Linux 6.12's verifier loses the
	 * upper bound of a register tied to the sum above by an offset
	 * (refused as an unbounded read). Never true: the header alone then. */
	barrier_var(size);
	if (size > SAMPLE_EVENT_HEADER_SIZE + SAMPLE_COPY_AREA + sizeof(struct stack_copy) + sizeof(struct go_labels))
		size = SAMPLE_EVENT_HEADER_SIZE;
	if (bpf_ringbuf_output(&samples, event, size, wake ? BPF_RB_FORCE_WAKEUP : wakeup_flag()) < 0)
		count(COUNTER_SAMPLES_LOST_RINGBUF);
	else
		count(COUNTER_SAMPLES_SENT);
}

/* Sends the finished sample (header and the used frame words only). */
static __always_inline void send_sample(struct sample_event *event, u8 stop)
{
	send_sample_sized(event, stop, 0, false);
}

/* The stack copy budget of each CPU (struct stack_copy_budget): bytes
 * per STACK_COPY_BUDGET_NS. Set by user space before load to a full
 * window per sample of the CPU (one new process per CPU fully covered,
 * more with smaller windows). */
#define STACK_COPY_BUDGET_NS (1000ULL * 1000 * 1000)
const volatile u64 stack_copy_budget_bytes = 20 * STACK_COPY_MAX;
/* A window is STACK_COPY_MAX bytes from sp; where that read fails (the
 * stack mapping ends within it) it ends at a page boundary: the end of
 * sp's page plus fewer of the STACK_COPY_EXTRA_PAGES pages, the most
 * that can be read. */
#define STACK_COPY_PAGE 4096
#define STACK_COPY_EXTRA_PAGES 6
_Static_assert(STACK_COPY_PAGE * STACK_COPY_EXTRA_PAGES >= STACK_COPY_MAX,
	       "the first try is a whole window, whatever sp's offset in its page");

/* Puts a struct stack_copy of the unwinder's state and the user stack
 * from its sp right after the used frame words. Returns the bytes added
 * (0: no copy, counted why). */
static __always_inline u32 append_stack_copy(struct sample_record *record)
{
	struct sample_event *event = &record->event;
	u64 words = (u64)event->kernel_frames + event->user_frames;
	if (words > SAMPLE_WORDS_MAX)
		return 0;
	/* The window fits in the room the frame words leave (maps.h): a full
	 * one after a few, less after many. Each branch gives the verifier
	 * both bounds. */
	u32 most = STACK_COPY_MAX;
	if (words > STACK_COPY_FULL_WORDS)
		most = STACK_COPY_DEEP_MAX;
	u32 zero = 0;
	struct stack_copy_budget *budget = bpf_map_lookup_elem(&stack_copy_budgets, &zero);
	if (!budget)
		return 0;
	u64 now = event->ktime_ns;
	if (now - budget->window_start_ns >= STACK_COPY_BUDGET_NS) {
		budget->window_start_ns = now;
		budget->bytes = 0;
	}
	if (budget->bytes + STACK_COPY_MAX > stack_copy_budget_bytes ||
	    bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE) / 2) {
		count(COUNTER_STACK_COPY_SKIPPED);
		return 0;
	}
	struct stack_copy *copy = (struct stack_copy *)&event->frames[words];
	u8 *window = (u8 *)(copy + 1);
	u64 sp = record->state.sp;
	u32 head = STACK_COPY_PAGE - (u32)(sp & (STACK_COPY_PAGE - 1));
	u32 size = 0;
	for (int pages = STACK_COPY_EXTRA_PAGES; pages >= 0; pages--) {
		u32 want = head + pages * STACK_COPY_PAGE;
		if (want > most)
			want = most;
		if (bpf_probe_read_user(window, want, (const void *)sp) == 0) {
			size = want;
			break;
		}
	}
	if (size == 0) {
		count(COUNTER_STACK_COPY_FAILED);
		return 0;
	}
	copy->pc = record->state.pc;
	copy->sp = sp;
	copy->fp = record->state.fp;
	copy->exact = record->state.exact;
	copy->stack_switches = record->state.stack_switches;
	copy->reserved[0] = 0;
	copy->reserved[1] = 0;
	copy->size = size;
	event->flags |= SAMPLE_FLAG_STACK_COPY;
	budget->bytes += size;
	count(COUNTER_STACK_COPIES);
	count_n(COUNTER_STACK_COPY_BYTES, size);
	return sizeof(struct stack_copy) + size;
}

/* Sends a sample whose user stack ended with `stop`. A process or
 * mapping the process manager has not loaded yet gets a copy of its
 * stack, which user space unwinds once it is loaded; other samples cost
 * nothing more. The first sample of a process not loaded yet (one each
 * NEW_PROCESS_EVENT_INTERVAL_NS) wakes user space at once, where the
 * samples of loaded ones wait for its poll (up to 500 ms at low rates):
 * without a stack copy (the budget spent) the reporter reads what the
 * process is from /proc while a short-lived one still runs; with one,
 * the held stack makes the reader poll every 100 ms until the process's
 * tables are in. */
static __always_inline void finish_sample(struct sample_record *record, u8 stop)
{
	u32 extra = 0;
	if (stop == UNWIND_STOP_UNKNOWN_PID || stop == UNWIND_STOP_UNKNOWN_PC)
		extra = append_stack_copy(record);
	send_sample_sized(&record->event, stop, extra, record->state.wake_reader);
}

#endif
