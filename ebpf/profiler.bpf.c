// SPDX-License-Identifier: GPL-2.0
/*
 * Entry program: runs on every CPU at each tick of the cpu-clock perf
 * event, records who was running and their kernel stack, takes the user
 * registers and hands over to the native unwinder (native_unwinder.bpf.h),
 * which sends the sample to user space through a ring buffer.
 *
 * Also here: the process exit and exec tracepoints that tell the process
 * manager to drop or reload a process's unwinding state.
 */
#include "include/vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "arch.h"
#include "types.h"
#include "maps.h"
#include "helpers.h"
#include "frame_word.h"
#include "mappings.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load: only sample tgids present in
 * selected_pids (the --pid option). */
const volatile bool filter_pids = false;
/* With filter_pids: the selection follows processes (user space selects
 * the processes of chosen containers or cgroups as they appear): a new
 * process of a selected one is selected at its fork, an exiting one is
 * unselected, and every exec is reported (a process may have entered a
 * chosen cgroup before it). */
const volatile bool select_descendants = false;

/* Set by user space before load when the kernel has bpf_task_pt_regs
 * (Linux 5.15). Without it, the user registers of a task sampled in the
 * kernel are found at the top of its kernel stack: task->stack +
 * thread_size - ARCH_SAVED_REGS_SIZE (arch.h). The verifier drops the
 * branch not taken, so the helper need not exist when unused. */
const volatile bool have_task_pt_regs = false;
/* THREAD_SIZE of the running kernel: 16 KiB on x86-64, 32 KiB with
 * KASAN. Only used without bpf_task_pt_regs. */
const volatile u64 thread_size = 16384;

/* Set by user space before load when the agent runs in a PID namespace
 * other than the init one (a container without hostPID, a kind node):
 * that namespace's inode (/proc/self/ns/pid). Every pid the programs
 * key by or report is then the one the agent's /proc shows; 0 (the init
 * namespace) keeps the kernel's own ids, as they are those. */
const volatile u32 pid_ns_inum = 0;

/* How many PID namespaces a task may be below the agent's and still be
 * profiled: its containers, and theirs (kind pods, docker-in-docker). */
#define PID_NS_SEARCH_DEPTH 4

/* The address of pid's number at level (struct upid). */
static __always_inline struct upid *pid_number(struct pid *pid, u32 level)
{
	const void *numbers = (const void *)pid + bpf_core_field_offset(struct pid, numbers);
	return (struct upid *)(numbers + level * bpf_core_type_size(struct upid));
}

/* The level at which pid is numbered in the agent's PID namespace, or -1
 * when the agent does not see it (a task of a parent namespace or of a
 * sibling's, or too deep). The kernel numbers a task in its own
 * namespace and each one above it (numbers[], init's first); searched
 * from the task's own, so that the agent's namespace's tasks match at
 * the first step. (bpf_get_ns_current_pid_tgid matches the task's own
 * namespace only: it would lose the agent's containers.) */
static __always_inline int agent_ns_level(struct pid *pid)
{
	if (!pid)
		return -1;
	int level = BPF_CORE_READ(pid, level);
#pragma unroll
	for (int up = 0; up < PID_NS_SEARCH_DEPTH; up++) {
		if (level - up < 0)
			return -1;
		struct pid_namespace *ns = BPF_CORE_READ(pid_number(pid, level - up), ns);
		if (ns && BPF_CORE_READ(ns, ns.inum) == pid_ns_inum)
			return level - up;
	}
	return -1;
}

/* task's (tgid, tid) as the agent's /proc numbers them; false when the
 * agent does not see it. */
static __always_inline bool agent_pids(struct task_struct *task, u32 *tgid, u32 *tid)
{
	if (pid_ns_inum == 0) {
		*tgid = BPF_CORE_READ(task, tgid);
		*tid = BPF_CORE_READ(task, pid);
		return true;
	}
	struct pid *thread = BPF_CORE_READ(task, thread_pid);
	int level = agent_ns_level(thread);
	if (level < 0)
		return false;
	/* A thread group shares one PID namespace: the leader's number is
	 * at the same level. */
	struct pid *leader = BPF_CORE_READ(task, group_leader, thread_pid);
	if (!leader)
		return false;
	*tid = BPF_CORE_READ(pid_number(thread, level), nr);
	*tgid = BPF_CORE_READ(pid_number(leader, level), nr);
	return *tid != 0 && *tgid != 0;
}

#include "interpreters.bpf.h"
#include "native_unwinder.bpf.h"
#include "interpreter_driver.bpf.h"
#include "jit_driver.bpf.h"
/* Each runtime's unwinder (ebpf/runtimes/<name>/unwinder.bpf.h). */
#define RUNTIME_FILE unwinder.bpf.h
#include "runtime_files.h"
#undef RUNTIME_FILE
#include "go_labels.bpf.h"

/* The user registers the current task saved on entering the kernel.
 * Returns an unwind_stop reason, or STEP_CONTINUE when state is set. */
static __always_inline int saved_user_registers(struct unwind_state *state)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	if (!BPF_CORE_READ(task, mm))
		return UNWIND_STOP_KERNEL_THREAD;
	/* The kernel's pt_regs starts with the user registers (arch.h). */
	bpf_user_pt_regs_t regs;
	const void *saved;
	if (have_task_pt_regs) {
		saved = (const void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	} else {
		void *stack = BPF_CORE_READ(task, stack);
		saved = stack + thread_size - ARCH_SAVED_REGS_SIZE;
	}
	if (!saved || bpf_probe_read_kernel(&regs, sizeof(regs), saved))
		return UNWIND_STOP_NO_USER_REGS;
	/* A task that never ran in user space (or a corrupt frame). */
	if (!arch_user_mode(&regs))
		return UNWIND_STOP_NO_USER_REGS;
	state->pc = arch_regs_pc(&regs);
	state->sp = arch_regs_sp(&regs);
	state->fp = arch_regs_fp(&regs);
	state->bx = arch_regs_bx(&regs);
	return STEP_CONTINUE;
}

/* The user registers of the current task: from the perf context when the
 * tick interrupted user mode, else the ones saved at kernel entry.
 * Returns an unwind_stop reason, or STEP_CONTINUE when state is set. */
static __always_inline int user_registers(struct bpf_perf_event_data *ctx, struct unwind_state *state)
{
	if (arch_user_mode(&ctx->regs)) {
		state->pc = arch_regs_pc(&ctx->regs);
		state->sp = arch_regs_sp(&ctx->regs);
		state->fp = arch_regs_fp(&ctx->regs);
		state->bx = arch_regs_bx(&ctx->regs);
		return STEP_CONTINUE;
	}
	return saved_user_registers(state);
}

/* Starts the sample of the current task in record: the header, the
 * kernel stack (bpf_get_stack of ctx, the entry's context), a fresh
 * unwind state. The caller sets the user registers. */
static __always_inline void begin_sample(void *ctx, struct sample_record *record, u32 tgid, u32 tid)
{
	struct sample_event *event = &record->event;
	event->pid = tgid;
	event->tid = tid;
	event->ktime_ns = bpf_ktime_get_ns();
	event->cpu = bpf_get_smp_processor_id();
	event->user_frames = 0;
	event->flags = 0;
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

	struct unwind_state *state = &record->state;
	state->exact = 1;
	state->tail_calls = 0;
	state->stack_switches = 0;
	state->wake_reader = 0;
	record->interp.mode = INTERP_MODE_NONE;
	record->interp.next = INTERP_NEXT_HAND_OVER;
	record->interp.in_loop = 0;
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
	/* Dropped by the verifier in the init namespace. */
	if (pid_ns_inum != 0 && !agent_pids((struct task_struct *)bpf_get_current_task(), &tgid, &tid)) {
		count(COUNTER_SAMPLES_OTHER_PID_NS);
		return 0;
	}
	if (filter_pids && !bpf_map_lookup_elem(&selected_pids, &tgid)) {
		count(COUNTER_SAMPLES_FILTERED);
		return 0;
	}

	struct sample_record *record = scratch_record();
	if (!record)
		return 0;
	begin_sample(ctx, record, tgid, tid);
	read_go_labels(&record->event, tgid);
	int result = user_registers(ctx, &record->state);
	if (result != STEP_CONTINUE) {
		send_sample(&record->event, result);
		return 0;
	}
	bpf_tail_call(ctx, &programs, UNWINDER_NATIVE);
	send_sample(&record->event, UNWIND_STOP_TAIL_CALLS);
	return 0;
}

#include "off_cpu.bpf.h"

/* The last thread of a process exits: tell the process manager, if the
 * unwinder knows the pid or was told about it. */
SEC("tp_btf/sched_process_exit")
int on_process_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	u32 tgid, tid;
	if (!agent_pids(task, &tgid, &tid))
		return 0;
	/* Every thread: the interpreter unwinders forget it. */
	interpreters_forget_thread(((u64)tgid << 32) | tid);
	/* do_exit decrements signal->live before this tracepoint; 0 means
	 * this was the group's last thread. (6.16 added a group_dead
	 * argument; reading the counter works on every kernel.) */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (select_descendants)
		bpf_map_delete_elem(&selected_pids, &tgid);
	u64 new_key = ((u64)tgid << 32) | PROCESS_EVENT_NEW;
	u64 pc_key = ((u64)tgid << 32) | PROCESS_EVENT_UNKNOWN_PC;
	bool asked = bpf_map_lookup_elem(&process_event_times, &new_key) != NULL;
	if (!asked && !bpf_map_lookup_elem(&process_ranges, &tgid))
		return 0;
	bpf_map_delete_elem(&process_event_times, &new_key);
	bpf_map_delete_elem(&process_event_times, &pc_key);
	send_process_event(PROCESS_EVENT_EXIT, tgid, 0, false);
	return 0;
}

/* A process replaced its program: its old mappings are gone. Telling the
 * process manager now (not at the next sample) lets it load the new
 * program before the program's first samples. Every exec of a selected
 * process (or of any process without a pid filter) is reported; execs
 * are rare next to samples. */
SEC("tp_btf/sched_process_exec")
int on_process_exec(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	u32 tgid, tid;
	if (!agent_pids(task, &tgid, &tid))
		return 0;
	if (filter_pids && !select_descendants && !bpf_map_lookup_elem(&selected_pids, &tgid))
		return 0;
	send_process_event(PROCESS_EVENT_EXEC, tgid, 0, false);
	return 0;
}

/* With select_descendants: a new process (not a thread) of a selected
 * process is selected too. Attached only then. */
SEC("tp_btf/sched_process_fork")
int on_process_fork(u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	u32 child_tgid, child_tid, parent_tgid, parent_tid;
	if (!select_descendants || !agent_pids(child, &child_tgid, &child_tid) || child_tid != child_tgid)
		return 0;
	if (!agent_pids(parent, &parent_tgid, &parent_tid) || !bpf_map_lookup_elem(&selected_pids, &parent_tgid))
		return 0;
	u8 one = 1;
	if (bpf_map_update_elem(&selected_pids, &child_tgid, &one, BPF_ANY) < 0)
		count(COUNTER_SELECTED_PIDS_FULL);
	return 0;
}
