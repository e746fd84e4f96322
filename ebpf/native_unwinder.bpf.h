/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The native unwinder: walks a user stack without frame pointers, with
 * the stack deltas user space built from .eh_frame/.debug_frame.
 *
 * Included once by profiler.bpf.c: libbpf-cargo builds one object per
 * skeleton, and the programs share their maps.
 *
 * How one frame is unwound (the state is pc, rsp and rbp):
 *  1. (pid, pc) -> the process's ranges (mappings.bpf.h) -> the file and
 *     its load bias;
 *     vaddr = pc - bias. For a return address the caller's call
 *     instruction is what matters, so pc - 1 is looked up (a call may be
 *     the last instruction of a function).
 *  2. (file, vaddr >> 16) -> delta_pages -> the page's slice of the
 *     file's delta array; a binary search (at most 17 steps: a page holds
 *     at most 65536 entries) finds the last entry at or below vaddr's
 *     offset in the page. Its rule id is the rule in effect.
 *  3. The rule gives the CFA (rsp|rbp + offset, a dereference, or the
 *     PLT formula); the return address is at CFA - 8, the caller's rsp is
 *     the CFA, and the caller's rbp is unchanged, at CFA + n or at
 *     rbp + n. A signal trampoline instead restores pc, rsp and rbp from
 *     the ucontext the kernel saved on the stack; a STOP rule means the
 *     thread's root is reached. The CFA must lie above rsp (stacks grow
 *     down), except for a STACK_SWITCH rule: Go's stack switches keep
 *     the caller's frame in rbp, on another stack (docs/go-unwinding.md).
 * Every other outcome ends the stack with its enum unwind_stop reason.
 *
 * NATIVE_FRAMES_PER_PROGRAM frames are unwound per program run, then the
 * program tail-calls itself (the kernel allows 33 tail calls) until the
 * stack ends or MAX_USER_FRAMES are collected.
 */

/* Frames unwound per program run (each costs up to 21 map lookups). The
 * verifier's cost grows about linearly with it (limit 1M): see
 * docs/native-unwinding.md for the counts per kernel. 64 frames per run
 * take MAX_USER_FRAMES within the tail calls. */
#define NATIVE_FRAMES_PER_PROGRAM 64
/* Tail calls per sample: the entry program's call into the unwinder
 * plus these stay within the kernel's MAX_TAIL_CALL_CNT (32, 33 since
 * Linux 5.17). */
#define MAX_NATIVE_TAIL_CALLS 31
_Static_assert(NATIVE_FRAMES_PER_PROGRAM * (MAX_NATIVE_TAIL_CALLS + 1) >= MAX_USER_FRAMES,
	       "enough program runs to collect MAX_USER_FRAMES frames");
/* DELTA_SEARCH_STEPS, MAX_STACK_SWITCHES: types.h (user space's late
 * unwinding follows the same bounds). */

/* Step results. */
#define STEP_CONTINUE 0xff
/* The pc is in an interpreter loop: the interpreter unwinder takes over
 * (the state is unchanged; the frame is not recorded; interp.unwinder
 * names the unwinder, interpreters.bpf.h). */
#define STEP_INTERPRETER 0xfe

static __always_inline int read_user_u64(u64 *out, u64 address)
{
	return bpf_probe_read_user(out, sizeof(*out), (const void *)address);
}

/* Entry `index` of a delta array (two entries per element), or -1. */
static __always_inline long delta_at(void *deltas, u32 index)
{
	u32 key = index >> 1;
	u64 *pair = bpf_map_lookup_elem(deltas, &key);
	if (!pair)
		return -1;
	return (index & 1) ? (u32)(*pair >> 32) : (u32)*pair;
}

/* The rule id in effect at vaddr of file_id, or an unwind_stop reason
 * (as a negative number). */
static __always_inline int find_rule(u64 file_id, u64 vaddr)
{
	struct delta_page_key page_key = {
		.file_id = file_id,
		.page = vaddr >> DELTA_PAGE_BITS,
	};
	struct delta_page *page = bpf_map_lookup_elem(&delta_pages, &page_key);
	if (!page)
		return -UNWIND_STOP_NO_DELTAS;
	void *deltas = bpf_map_lookup_elem(&file_deltas, &file_id);
	if (!deltas)
		return -UNWIND_STOP_NO_DELTAS;
	u32 first = page->first;
	u32 n = page->count;
	u16 target = vaddr & ((1 << DELTA_PAGE_BITS) - 1);
	u32 lo = 0;
	/* Invariant: entry first + lo is at or below target (the first entry
	 * of a page is at offset 0); the answer is in [lo, lo + n). */
	for (int i = 0; i < DELTA_SEARCH_STEPS; i++) {
		if (n <= 1)
			break;
		u32 half = n / 2;
		long entry = delta_at(deltas, first + lo + half);
		if (entry < 0)
			return -UNWIND_STOP_INTERNAL;
		/* struct delta_entry: page_offset is the low half */
		if ((u16)entry <= target)
			lo += half;
		n -= half;
	}
	long entry = delta_at(deltas, first + lo);
	if (entry < 0)
		return -UNWIND_STOP_INTERNAL;
	return (u16)(entry >> 16);
}

#if defined(__TARGET_ARCH_x86)
/* The scheduler's stack of an M (its g0) below runtime.mcall's or
 * runtime.morestack's frame there, when no goroutine is followed: both
 * move rsp to m.g0.sched.sp (mcall pushes one word first) and call on
 * from there. runtime.mstart1 set g0.sched to return into
 * runtime.mstart0, whose frame lies above that sp, and mstart is the
 * thread's root. Followed only when the frame sits right at g0.sched.sp
 * within g0's stack, and the word at g0.sched.sp is not a stack address
 * at or above it: a cgo callback moves g0.sched.sp to its own frame and
 * saves the old value there, while g0.sched.pc stays mstart0's. */
static __always_inline int go_g0_root(struct unwind_state *state, struct go_labels_process *go, u64 m)
{
	/* runtime.m.g0 is m's first field in every Go version */
	u64 g0 = 0;
	if (read_user_u64(&g0, m) || !g0)
		return UNWIND_STOP_STACK_SWITCH;
	u64 bounds[2], sched[2], bp, saved;
	if (bpf_probe_read_user(bounds, sizeof(bounds), (const void *)g0) ||
	    bpf_probe_read_user(sched, sizeof(sched), (const void *)(g0 + go->g_sched)) ||
	    read_user_u64(&bp, g0 + go->g_sched + go->gobuf_bp))
		return UNWIND_STOP_READ_ERROR;
	u64 sp = sched[0], pc = sched[1];
	/* morestack calls at sp (its frame's CFA is sp), mcall at sp - 8 */
	if (state->sp > sp || sp - state->sp > 8 || state->sp <= bounds[0] || sp >= bounds[1] || (sp & 7))
		return UNWIND_STOP_STACK_SWITCH;
	if (read_user_u64(&saved, sp))
		return UNWIND_STOP_READ_ERROR;
	if (saved >= sp && saved <= bounds[1])
		return UNWIND_STOP_STACK_SWITCH;
	if (pc == 0)
		return UNWIND_STOP_ZERO_PC;
	count(COUNTER_GO_SCHEDULER_ROOTS);
	state->pc = pc;
	state->sp = sp;
	state->fp = bp;
	state->exact = 0;
	return STEP_CONTINUE;
}
#endif

/* runtime.morestack (RULE_ID_GO_MORESTACK) and runtime.mcall
 * (RULE_ID_GO_MCALL), x86-64. Until they switch to the system stack the
 * current g is the goroutine and they have no frame: the return address
 * is at rsp. After (the current g is then g0), morestack's caller, the
 * function growing its stack, has its pc, sp and bp in curg.sched, where
 * morestack saved them before switching; mcall's fn (park_m,
 * gopreempt_m, ...) drops the goroutine or schedules another, so neither
 * is followed to a goroutine (Go's traceback does not either): both go
 * on down the system stack (go_g0_root). The offsets come from
 * go_label_processes (go_labels.bpf.h). */
static __always_inline int go_switch_caller(struct unwind_state *state, u32 tgid, bool morestack)
{
#if defined(__TARGET_ARCH_x86)
	struct go_labels_process *go = bpf_map_lookup_elem(&go_label_processes, &tgid);
	if (!go)
		return UNWIND_STOP_STACK_SWITCH;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	u64 fsbase = arch_thread_pointer(task);
	u64 g = 0, m = 0, curg = 0;
	if (!fsbase || read_user_u64(&g, fsbase + (s64)go->tls_g) || !g || read_user_u64(&m, g + go->g_m) || !m ||
	    read_user_u64(&curg, m + go->m_curg))
		return UNWIND_STOP_STACK_SWITCH;
	u64 pc, sp, bp;
	if (curg && g == curg) {
		if (read_user_u64(&pc, state->sp))
			return UNWIND_STOP_READ_ERROR;
		sp = state->sp + 8;
		bp = state->fp;
	} else {
		if (!morestack || !curg)
			return go_g0_root(state, go, m);
		if (state->stack_switches >= MAX_STACK_SWITCHES)
			return UNWIND_STOP_STACK_SWITCH;
		/* curg.stack is {lo, hi} at 0; gobuf: sp at 0, pc at 8 */
		u64 bounds[2], sched[2], curg_m = 0;
		if (read_user_u64(&curg_m, curg + go->g_m) ||
		    bpf_probe_read_user(bounds, sizeof(bounds), (const void *)curg) ||
		    bpf_probe_read_user(sched, sizeof(sched), (const void *)(curg + go->g_sched)) ||
		    read_user_u64(&bp, curg + go->g_sched + go->gobuf_bp))
			return UNWIND_STOP_READ_ERROR;
		sp = sched[0];
		pc = sched[1];
		/* On the goroutine's own stack and thread, as Go's traceback
		 * requires; else the scheduler has moved on (newstack
		 * preempting the goroutine): the system stack goes on. */
		if (curg_m != m || sp <= bounds[0] || sp > bounds[1] || (sp & 7))
			return go_g0_root(state, go, m);
		state->stack_switches++;
		count(COUNTER_GO_MORESTACK_FOLLOWED);
	}
	if (pc == 0)
		return UNWIND_STOP_ZERO_PC;
	state->pc = pc;
	state->sp = sp;
	state->fp = bp;
	state->exact = 0;
	return STEP_CONTINUE;
#else
	return UNWIND_STOP_STACK_SWITCH;
#endif
}

/* Unwinds one frame: records the current pc, then moves the state to the
 * caller. Returns STEP_CONTINUE or the unwind_stop reason that ends the
 * stack. */
static __always_inline int unwind_step(struct sample_record *record, u32 pid)
{
	struct unwind_state *state = &record->state;
	struct sample_event *event = &record->event;
	/* The frames before this one: a loop frame dropped below goes back
	 * to it. */
	u32 n = event->user_frames;
	u64 pc = state->pc;
	if (!append_user_frame(event, state->exact ? pc | FRAME_EXACT_PC : pc))
		return UNWIND_STOP_MAX_FRAMES;

	u64 lookup_pc = state->exact ? pc : pc - 1;
	struct pid_mapping *mapping = NULL;
	enum mapping_lookup found = lookup_mapping(pid, lookup_pc, &mapping);
	if (found == MAPPING_UNKNOWN_PID) {
		/* Its first sample (and one each event interval) wakes the
		 * reader: a process never loaded (over the manager's limit)
		 * does not wake it at every sample. */
		state->wake_reader = send_process_event(PROCESS_EVENT_NEW, pid, 0, true);
		return UNWIND_STOP_UNKNOWN_PID;
	}
	if (found != MAPPING_FOUND || !mapping) {
		send_process_event(PROCESS_EVENT_UNKNOWN_PC, pid, lookup_pc, true);
		return UNWIND_STOP_UNKNOWN_PC;
	}
	u8 unwinder = mapping_unwinder(mapping->flags);
	if (unwinder != UNWINDER_NATIVE) {
		struct interp_state *interp = &record->interp;
		u8 next = interp->next;
		interp->next = INTERP_NEXT_HAND_OVER;
		if (next == INTERP_NEXT_SKIP) {
			/* Its interpreted frames stand in its place. */
			event->user_frames = n;
		} else if (next == INTERP_NEXT_HAND_OVER && interp->mode != INTERP_MODE_UNAVAILABLE) {
			event->user_frames = n;
			interp->file_id = mapping->file_id;
			interp->bias = mapping->bias;
			interp->unwinder = unwinder;
			return STEP_INTERPRETER;
		}
	}
	/* (An interpreter's code in anonymous memory that its unwinder did
	 * not take ends here too.) */
	if (mapping->kind != MAPPING_KIND_NATIVE)
		return UNWIND_STOP_NO_UNWIND_INFO;

	int rule_id = find_rule(mapping->file_id, lookup_pc - mapping->bias);
	if (rule_id < 0)
		return -rule_id;
	switch (rule_id) {
	case RULE_ID_NO_COVERAGE:
		return UNWIND_STOP_NO_COVERAGE;
	case RULE_ID_INVALID:
		return UNWIND_STOP_INVALID_RULE;
	case RULE_ID_STOP:
		return UNWIND_STOP_ROOT;
	case RULE_ID_UNFOLLOWED_SWITCH:
		return UNWIND_STOP_STACK_SWITCH;
	case RULE_ID_GO_MORESTACK:
		return go_switch_caller(state, pid, true);
	case RULE_ID_GO_MCALL:
		return go_switch_caller(state, pid, false);
	case RULE_ID_SIGNAL: {
		/* The trampoline is not a frame of its own: the interrupted
		 * code is, with an exact pc. */
		event->user_frames = n;
		if (!ARCH_HAS_X86_SIGNAL_FRAME)
			return UNWIND_STOP_ARCH_UNSUPPORTED;
		u64 regs[(UCONTEXT_RIP - UCONTEXT_RBP) / 8 + 1];
		if (bpf_probe_read_user(regs, sizeof(regs), (const void *)(state->sp + UCONTEXT_RBP)))
			return UNWIND_STOP_READ_ERROR;
		state->fp = regs[0];
		state->sp = regs[(UCONTEXT_RSP - UCONTEXT_RBP) / 8];
		state->pc = regs[(UCONTEXT_RIP - UCONTEXT_RBP) / 8];
		state->exact = 1;
		if (state->pc == 0)
			return UNWIND_STOP_ZERO_PC;
		return STEP_CONTINUE;
	}
	}

	u32 rule_key = rule_id;
	struct unwind_rule *rule = bpf_map_lookup_elem(&unwind_rules, &rule_key);
	if (!rule)
		return UNWIND_STOP_INTERNAL;
	u64 base = rule->cfa_base == CFA_BASE_RBP ? state->fp : state->sp;
	u64 cfa;
	switch (rule->kind) {
	case RULE_KIND_CFA:
		cfa = base + (s64)rule->cfa_offset;
		break;
	case RULE_KIND_CFA_DEREF:
		if (read_user_u64(&cfa, base + (s64)rule->cfa_offset))
			return UNWIND_STOP_READ_ERROR;
		cfa += (s64)rule->deref_outer;
		break;
	case RULE_KIND_PLT:
		if (!ARCH_HAS_X86_PLT_RULE)
			return UNWIND_STOP_ARCH_UNSUPPORTED;
		cfa = state->sp + 8 + ((pc & 15) >= rule->plt_threshold ? 8 : 0);
		break;
	case RULE_KIND_STACK_SWITCH:
		/* The caller is on the stack rbp points into, anywhere. */
		if (state->stack_switches >= MAX_STACK_SWITCHES)
			return UNWIND_STOP_STACK_SWITCH;
		state->stack_switches++;
		cfa = state->fp + (s64)rule->cfa_offset;
		if (cfa & 7)
			return UNWIND_STOP_BAD_SP;
		break;
	default:
		return UNWIND_STOP_INTERNAL;
	}
	if (cfa <= state->sp && rule->kind != RULE_KIND_STACK_SWITCH)
		return UNWIND_STOP_BAD_SP;
	u64 return_address;
	if (read_user_u64(&return_address, cfa - ARCH_RETURN_ADDRESS_BELOW_CFA))
		return UNWIND_STOP_READ_ERROR;
	switch (rule->rbp_kind) {
	case RBP_AT_CFA:
		if (read_user_u64(&state->fp, cfa + (s64)rule->rbp_offset))
			return UNWIND_STOP_READ_ERROR;
		break;
	case RBP_AT_RBP:
		if (read_user_u64(&state->fp, state->fp + (s64)rule->rbp_offset))
			return UNWIND_STOP_READ_ERROR;
		break;
	default:
		break;
	}
	if (return_address == 0)
		return UNWIND_STOP_ZERO_PC;
	state->pc = return_address;
	state->sp = cfa;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* unwind_step as a global function: the verifier checks it once, where
 * inlined it checked it again at each frame of a run's loop (32 frames
 * took 400k of the 1M instructions it allows). It takes no pointer (a
 * global function's arguments are checked by type alone): the record is
 * the scratch one. */
__noinline int unwind_frame(u32 pid)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return UNWIND_STOP_INTERNAL;
	return unwind_step(record, pid);
}

/* One run of the native unwinder. Its entries (native_unwind in
 * interpreters.bpf.h, native_off_cpu in off_cpu.bpf.h) differ only in their program
 * type: a tail call stays within the program array of its entry's type
 * (progs). */
static __always_inline int native_unwind_run(void *ctx, void *progs)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return 0;
	u32 pid = record->event.pid;
	int result = STEP_CONTINUE;
	for (int i = 0; i < NATIVE_FRAMES_PER_PROGRAM; i++) {
		result = unwind_frame(pid);
		if (result == STEP_INTERPRETER) {
			/* The interpreter's unwinder runs the rest of the
			 * sample. */
			if (record->state.tail_calls < MAX_NATIVE_TAIL_CALLS) {
				record->state.tail_calls++;
				interpreter_unwind(ctx, progs, record);
			}
			/* It cannot: the loops are native frames. */
			record->interp.mode = INTERP_MODE_UNAVAILABLE;
			result = STEP_CONTINUE;
			continue;
		}
		if (result != STEP_CONTINUE)
			break;
	}
	/* Once, after the loop: the verifier need not check it per frame. */
	if (result != STEP_CONTINUE) {
		finish_sample(record, result);
		return 0;
	}
	if (record->event.user_frames >= MAX_USER_FRAMES) {
		send_sample(&record->event, UNWIND_STOP_MAX_FRAMES);
		return 0;
	}
	if (record->state.tail_calls < MAX_NATIVE_TAIL_CALLS) {
		record->state.tail_calls++;
		count(COUNTER_NATIVE_TAIL_CALLS);
		bpf_tail_call(ctx, progs, UNWINDER_NATIVE);
	}
	send_sample(&record->event, UNWIND_STOP_TAIL_CALLS);
	return 0;
}
