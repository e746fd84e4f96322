/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract between the eBPF programs and user space: every struct
 * that crosses a map or the ring buffer is defined here once. The Rust
 * side mirrors them in crates/bpf/src/types.rs with size asserts; change
 * both together.
 */
#ifndef EP_TYPES_H
#define EP_TYPES_H

/* Longest kernel stack we keep; bpf_get_stack's own cap is 127
 * (sysctl kernel.perf_event_max_stack). */
#define MAX_KERNEL_FRAMES 128
/* Longest user stack we keep. */
#define MAX_USER_FRAMES 128
#define COMM_LEN 16

/* One sample, as sent through the ring buffer. Only the header and the
 * used frame words are sent: frames[] holds kernel_frames kernel
 * addresses, then user_frames user addresses, leaf first. */
struct sample_event {
	__u32 pid;            /* tgid */
	__u32 tid;
	__u64 ktime_ns;       /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
	__u32 cpu;
	__u16 kernel_frames;
	__u16 user_frames;
	char comm[COMM_LEN];          /* the thread's name */
	char process_comm[COMM_LEN];  /* the thread group leader's name */
	__u64 frames[MAX_KERNEL_FRAMES + MAX_USER_FRAMES];
};

#define SAMPLE_EVENT_HEADER_SIZE 56
_Static_assert(__builtin_offsetof(struct sample_event, frames) == SAMPLE_EVENT_HEADER_SIZE,
	       "sample_event header layout is part of the Rust contract");

/* Indexes into the per-CPU counters array. Never renumber: the Rust side
 * names them by these values. Retired ids stay reserved. */
enum counter_id {
	/* perf event fired and the program ran */
	COUNTER_SAMPLES_TRIGGERED = 0,
	/* sample sent to the ring buffer */
	COUNTER_SAMPLES_SENT = 1,
	/* ring buffer full: sample lost */
	COUNTER_SAMPLES_LOST_RINGBUF = 2,
	/* the CPU was idle (pid 0): nothing to profile */
	COUNTER_SAMPLES_IDLE = 3,
	/* process not selected by the pid filter */
	COUNTER_SAMPLES_FILTERED = 4,
	/* bpf_get_stack failed for the kernel stack */
	COUNTER_KERNEL_STACK_ERROR = 5,
	/* bpf_get_stack failed for the user stack */
	COUNTER_USER_STACK_ERROR = 6,
	COUNTER_MAX = 16,
};

#endif
