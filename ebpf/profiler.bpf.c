// SPDX-License-Identifier: GPL-2.0
/*
 * Entry program: runs on every CPU at each tick of the cpu-clock perf
 * event, records who was running and their kernel and user stacks, and
 * sends the sample to user space through a ring buffer.
 */
#include "include/vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "types.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load: only sample tgids present in
 * selected_pids (the --pid option). */
const volatile bool filter_pids = false;

/* Samples for user space. Size set by user space at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} samples SEC(".maps");

/* The tgids to profile when filter_pids is set (value unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u8);
} selected_pids SEC(".maps");

/* Scratch space to build one sample; too big for the 512-byte BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sample_event);
} scratch SEC(".maps");

/* Why samples ended the way they did; see enum counter_id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void count(enum counter_id id)
{
	u32 key = id;
	u64 *value = bpf_map_lookup_elem(&counters, &key);
	if (value)
		*value += 1;
}

/* User space polls the ring buffer on a timer; wake it early only when
 * the buffer is filling up, so a busy machine costs no wake-up per sample
 * and a burst cannot overflow the buffer before the next poll. */
static __always_inline u64 wakeup_flag(void)
{
	u64 avail = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA);
	u64 size = bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE);
	return avail > size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	count(COUNTER_SAMPLES_TRIGGERED);

	u64 pid_tgid = bpf_get_current_pid_tgid();
	u32 tgid = pid_tgid >> 32;
	u32 tid = (u32)pid_tgid;
	if (tgid == 0) {
		count(COUNTER_SAMPLES_IDLE);
		return 0;
	}
	if (filter_pids && !bpf_map_lookup_elem(&selected_pids, &tgid)) {
		count(COUNTER_SAMPLES_FILTERED);
		return 0;
	}

	u32 zero = 0;
	struct sample_event *event = bpf_map_lookup_elem(&scratch, &zero);
	if (!event)
		return 0;

	event->pid = tgid;
	event->tid = tid;
	event->ktime_ns = bpf_ktime_get_ns();
	event->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(event->comm, sizeof(event->comm));
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct task_struct *leader = BPF_CORE_READ(task, group_leader);
	if (!leader || bpf_probe_read_kernel_str(event->process_comm, sizeof(event->process_comm),
						 &leader->comm) < 0)
		__builtin_memcpy(event->process_comm, event->comm, COMM_LEN);

	long kernel_bytes = bpf_get_stack(ctx, event->frames, MAX_KERNEL_FRAMES * sizeof(u64), 0);
	if (kernel_bytes < 0) {
		count(COUNTER_KERNEL_STACK_ERROR);
		kernel_bytes = 0;
	}
	u32 kernel_frames = (u32)kernel_bytes / sizeof(u64);
	if (kernel_frames > MAX_KERNEL_FRAMES)
		kernel_frames = MAX_KERNEL_FRAMES;
	event->kernel_frames = kernel_frames;

	/* User frames: for now what bpf_get_stack gives (frame pointers);
	 * the native unwinder replaces this. */
	long user_bytes = bpf_get_stack(ctx, &event->frames[kernel_frames],
					MAX_USER_FRAMES * sizeof(u64), BPF_F_USER_STACK);
	if (user_bytes < 0) {
		count(COUNTER_USER_STACK_ERROR);
		user_bytes = 0;
	}
	u32 user_frames = (u32)user_bytes / sizeof(u64);
	if (user_frames > MAX_USER_FRAMES)
		user_frames = MAX_USER_FRAMES;
	event->user_frames = user_frames;

	/* Send the header and the used frame words only. */
	u64 size = SAMPLE_EVENT_HEADER_SIZE + (u64)(kernel_frames + user_frames) * sizeof(u64);
	if (size > sizeof(*event))
		size = sizeof(*event);
	if (bpf_ringbuf_output(&samples, event, size, wakeup_flag()) < 0)
		count(COUNTER_SAMPLES_LOST_RINGBUF);
	else
		count(COUNTER_SAMPLES_SENT);
	return 0;
}
