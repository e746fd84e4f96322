/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Off-CPU profiling: where threads wait, and for how long.
 *
 * on_sched_switch runs at every scheduler switch (tp_btf/sched_switch;
 * no kprobes needed). The thread leaving the CPU (prev) is still the
 * current task there, so its stack is taken like a tick's: kernel stack,
 * user registers saved at kernel entry, then the same unwinders as
 * on_cpu_sample, through tail calls. A tail call stays within programs of
 * one type, so every unwinder has a tp_btf entry of its own
 * (<name>_off_cpu: native_off_cpu, then one per line of runtimes.h) in
 * off_cpu_programs, sharing its body (<name>_unwind_run) with its
 * perf_event entry. User space fills off_cpu_programs, and loads these
 * programs only when off-CPU profiling is on.
 *
 * A switch-out is sampled with probability (off_cpu_threshold + 1) /
 * 2^32, as the reference agent does (its off_cpu_threshold, a fraction in
 * [0, 1], scaled to u32). Its stack goes out at once, flagged
 * SAMPLE_FLAG_OFF_CPU, and the thread's switch-out time is kept in
 * off_cpu_starts; when the thread is switched in again, a 24-byte
 * struct off_cpu_end says how long it was off the CPU, and user space
 * joins the two. Keeping the stack in a map until the switch-in instead
 * would cost ~3 KiB of map per waiting thread and a second copy of it;
 * this way a waiting thread costs one 16-byte entry, an unsampled switch
 * one hash lookup (is next waiting?) and one random number.
 *
 * The scratch record is shared with on_cpu_sample: the cpu-clock tick is
 * a hard interrupt, and the switch runs with interrupts off, so the two
 * never interleave on a CPU.
 */

/* Sampled switch-outs: P = (off_cpu_threshold + 1) / 2^32. Set by user
 * space before load. */
const volatile u32 off_cpu_threshold = 0;

/* task_struct.flags (include/linux/sched.h) */
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

/* (tgid << 32 | tid) -> when a sampled thread left the CPU (ns). An LRU:
 * a thread that never runs again (or waits while 4096 newer ones do)
 * loses its entry, and user space drops its stack after a while. Size set
 * by user space (1 when off-CPU profiling is off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, u64);
} off_cpu_starts SEC(".maps");

/* The unwinders' tp_btf entries by enum unwinder_program, for the tail
 * calls of off-CPU samples. Filled by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, UNWINDER_COUNT);
	__type(key, u32);
	__type(value, u32);
} off_cpu_programs SEC(".maps");

/* Every unwinder's off-CPU entry (native, then those of runtimes.h). */
#define UNWINDER_OFF_CPU_ENTRY(name)                               \
	SEC("tp_btf/sched_switch")                                 \
	int name##_off_cpu(u64 *ctx)                               \
	{                                                          \
		return name##_unwind_run(ctx, &off_cpu_programs);  \
	}
UNWINDER_OFF_CPU_ENTRY(native)
#define RUNTIME_EACH(name, NAME, slot, map) UNWINDER_OFF_CPU_ENTRY(name)
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH

/* next is about to run: if its switch-out was sampled, say how long it
 * was off the CPU. */
static __always_inline void off_cpu_switch_in(struct task_struct *next, u64 now)
{
	u32 tgid, tid;
	if (!agent_pids(next, &tgid, &tid))
		return;
	u64 key = ((u64)tgid << 32) | tid;
	u64 *start = bpf_map_lookup_elem(&off_cpu_starts, &key);
	if (!start)
		return;
	struct off_cpu_end end = {
		.pid = key >> 32,
		.tid = (u32)key,
		.switch_out_ns = *start,
		.off_cpu_ns = now - *start,
	};
	bpf_map_delete_elem(&off_cpu_starts, &key);
	if (bpf_ringbuf_output(&samples, &end, sizeof(end), wakeup_flag()) < 0)
		count(COUNTER_OFF_CPU_ENDS_LOST);
	else
		count(COUNTER_OFF_CPU_ENDS_SENT);
}

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct
 * *next[, unsigned int prev_state since 5.18]). Preempted threads are
 * sampled too (waiting for a CPU is off-CPU time), as the reference
 * does. */
SEC("tp_btf/sched_switch")
int on_sched_switch(u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	count(COUNTER_OFF_CPU_SWITCHES);
	off_cpu_switch_in(next, bpf_ktime_get_ns());

	if (bpf_get_prandom_u32() > off_cpu_threshold)
		return 0;
	/* The idle task, kernel threads (no user stack), and threads on
	 * their way out (they will not run again). */
	if (BPF_CORE_READ(prev, tgid) == 0 || (BPF_CORE_READ(prev, flags) & (PF_KTHREAD | PF_EXITING)))
		return 0;
	u32 tgid, tid;
	if (!agent_pids(prev, &tgid, &tid)) {
		count(COUNTER_SAMPLES_OTHER_PID_NS);
		return 0;
	}
	if (filter_pids && !bpf_map_lookup_elem(&selected_pids, &tgid))
		return 0;

	struct sample_record *record = scratch_record();
	if (!record)
		return 0;
	begin_sample(ctx, record, tgid, tid);
	record->event.flags = SAMPLE_FLAG_OFF_CPU;
	read_go_labels(&record->event, tgid);
	u64 key = ((u64)tgid << 32) | tid;
	u64 start = record->event.ktime_ns;
	if (bpf_map_update_elem(&off_cpu_starts, &key, &start, BPF_ANY))
		return 0;
	count(COUNTER_OFF_CPU_SAMPLED);
	int result = saved_user_registers(&record->state);
	if (result != STEP_CONTINUE) {
		send_sample(&record->event, result);
		return 0;
	}
	bpf_tail_call(ctx, &off_cpu_programs, UNWINDER_NATIVE);
	send_sample(&record->event, UNWIND_STOP_TAIL_CALLS);
	return 0;
}
