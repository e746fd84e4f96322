/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BEAM unwinder: records the Erlang frames an Erlang/OTP node's
 * scheduler thread runs in the JIT's code (x86-64, OTP 25 and 27), then
 * goes on with the scheduler thread's native frames.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the JIT's executable memory (the r-xs
 * /memfd:vmem mappings) for UNWINDER_BEAM and puts what the walk needs in
 * beam_processes[tgid] (struct beam_process). When the native unwinder
 * reaches a pc there it tail-calls beam_unwind (the driver:
 * jit_driver.bpf.h).
 *
 *  - The sampled pc (exact) is in JIT code: Erlang code runs on the
 *    Erlang process's own stack (rsp is the Erlang stack pointer), each
 *    frame [y registers][continuation pointer]. The caller's pc is the
 *    first word at or above rsp that is untagged (low two bits clear:
 *    y registers hold tagged terms) and lies in the JIT's code; rsp moves
 *    past it. (With frame pointers, erts_frame_layout FP_RA, the saved
 *    rbp between them is a stack address: outside the code when the JIT
 *    maps it twice (memfd views). A node that maps its code once (+JPperf
 *    on OTP 25) has several anonymous rwx areas whose hull may hold the
 *    process stacks: a word just above its slot, within the caller's
 *    frame, is a saved rbp, passed over.)
 *  - The continuation pointer beam_normal_exit ends every process stack.
 *    The scheduler's C stack holds its ErtsSchedulerRegisters (rbx points
 *    into them while Erlang code runs) just below the return address of
 *    process_main into the scheduler's C code: at rbx +
 *    scheduler_return (a constant of the release). The native unwinder
 *    goes on from there, to the thread's root.
 *  - A pc in JIT code reached as a return address from C (a BIF, the
 *    garbage collector, the scheduler loop calling into C): the C code
 *    ran on the scheduler's C stack, the Erlang stack pointer is not at
 *    hand. That frame is recorded and the stack ends
 *    (UNWIND_STOP_STACK_SWITCH, COUNTER_BEAM_FROM_C).
 *
 * Every other outcome ends the stack with its reason and counter; the
 * frames so far are kept.
 */

/* Appends the Erlang frame at pc; false when the stack is full. */
static __always_inline bool beam_record(struct sample_record *record, u64 pc, bool return_address)
{
	u64 payload = (pc & BEAM_FRAME_PC_MASK) | (return_address ? BEAM_FRAME_RETURN_ADDRESS : 0);
	if (!append_user_frame(&record->event, frame_word_interpreted(UNWINDER_BEAM, payload)))
		return false;
	count(COUNTER_BEAM_FRAMES);
	return true;
}

/* Whether `word` can be a continuation pointer: untagged, in the JIT's
 * code. */
static __always_inline bool beam_is_cp(struct beam_process *beam, u64 word)
{
	return (word & 3) == 0 && word > beam->code_low && word < beam->code_high;
}

/* erts_frame_layout's FP_RA: each frame pushes rbp below its CP. */
#define BEAM_FRAME_LAYOUT_FP_RA 1
/* With FP_RA, a saved rbp points to the caller's saved rbp, above it by
 * the caller's frame: its y registers and two words (room here for 8190
 * y registers). A word at most this far above its own slot is a stack
 * address; a CP that close would need the JIT's code to start right
 * above a process stack. */
#define BEAM_SAVED_FP_WINDOW (1ULL << 16)

/* Below this distance under the scheduler's registers a stack pointer
 * is the scheduler's C stack (the JIT's shared code runs C calls there),
 * not an Erlang stack (process heap memory). */
#define BEAM_C_STACK_WINDOW (1ULL << 20)

/* Whether the sampled stack pointer is on the scheduler's C stack. */
static __always_inline bool beam_on_c_stack(struct unwind_state *state, struct beam_process *beam)
{
	u64 bx = state->bx;
	return bx && state->sp < bx + beam->scheduler_return && state->sp + BEAM_C_STACK_WINDOW > bx;
}

/* beam_step's result besides STEP_CONTINUE and the unwind_stop
 * reasons: the bottom of the Erlang stack is reached. */
#define STEP_BEAM_BOTTOM 0xfb

/* Records the frame at state->pc (unless `recorded`: the frame C
 * returned to) and moves the state to its caller's continuation
 * pointer. */
static __always_inline int beam_step(struct sample_record *record, struct beam_process *beam, bool recorded)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	if (!recorded && !beam_record(record, state->pc, !state->exact))
		return UNWIND_STOP_MAX_FRAMES;
	u64 sp = state->sp;
	u32 words = BEAM_SCAN_WORDS;
	if (bpf_probe_read_user(interp->beam.words, sizeof(interp->beam.words), (const void *)sp)) {
		/* A process's stack ends at the end of its heap block, which
		 * may end a mapping: the outermost frames are within the
		 * page of sp. */
		u32 to_page_end = STACK_COPY_PAGE - (u32)(sp & (STACK_COPY_PAGE - 1));
		if (to_page_end >= sizeof(interp->beam.words) || to_page_end < 8 ||
		    bpf_probe_read_user(interp->beam.words, to_page_end & (sizeof(interp->beam.words) - 8),
					(const void *)sp)) {
			count(COUNTER_BEAM_READ_ERRORS);
			return UNWIND_STOP_READ_ERROR;
		}
		words = to_page_end / 8;
	}
	for (u32 i = 0; i < BEAM_SCAN_WORDS; i++) {
		if (i >= words)
			break;
		u64 word = interp->beam.words[i];
		if (!beam_is_cp(beam, word))
			continue;
		u64 slot = sp + 8 * i;
		if (beam->frame_layout == BEAM_FRAME_LAYOUT_FP_RA && word > slot &&
		    word - slot <= BEAM_SAVED_FP_WINDOW)
			continue;
		state->pc = word;
		state->sp = sp + 8 * (i + 1);
		state->exact = 0;
		return word == beam->normal_exit ? STEP_BEAM_BOTTOM : STEP_CONTINUE;
	}
	count(COUNTER_BEAM_NO_CP);
	return UNWIND_STOP_BAD_SP;
}

/* The JIT's code at a return from C to Erlang code: mov %rbp,%rsp (the
 * Erlang stack pointer kept in rbp, E_saved, across the call), or
 * mov disp8(%r13),%rsp (reloaded from c_p->stop, which the JIT stored
 * before the call; disp8 is process_stop). Little-endian words. */
#define BEAM_MOV_RSP_RBP 0xec8948
#define BEAM_MOV_RSP_C_P_MASK 0xffffff
#define BEAM_MOV_RSP_C_P 0x658b49
/* The scheduler's ErtsSchedulerData address lies right below its return
 * address into C (OTP 25 and 27, measured on live nodes). */
#define BEAM_SCHEDULER_DATA_SLOT 8

/* At a JIT pc C returned to (state: the native unwinder's, after C's
 * frames): C was called with the stack pointer at the start of the
 * scheduler's registers, runtime_stack below the JIT's rbx. The Erlang
 * stack pointer is where the JIT's code at pc takes it from: rbp
 * (restored by the native unwinder from C's frames), or the current
 * process's stop, the process found through the scheduler's data (whose
 * first field points back to the registers). Moves the state to the
 * Erlang stack, with rbx the JIT's; false when the code is neither, or
 * a read or a check fails. */
static __always_inline bool beam_resume_erlang(struct unwind_state *state, struct beam_process *beam)
{
	u32 code = 0;
	u64 r = state->sp, bx = state->sp + beam->runtime_stack, e = 0;
	if (!beam->runtime_stack || !beam->scheduler_return || (r & 7) ||
	    bpf_probe_read_user(&code, sizeof(code), (const void *)state->pc))
		return false;
	if ((code & BEAM_MOV_RSP_C_P_MASK) == BEAM_MOV_RSP_RBP && beam->frame_layout == 0) {
		e = state->fp;
	} else if ((code & BEAM_MOV_RSP_C_P_MASK) == BEAM_MOV_RSP_C_P && beam->process_stop &&
		   code >> 24 == beam->process_stop && beam->current_process) {
		u64 esdp = 0, registers = 0, c_p = 0;
		if (read_user_u64(&esdp, bx + beam->scheduler_return - BEAM_SCHEDULER_DATA_SLOT) || !esdp ||
		    read_user_u64(&registers, esdp) || registers != r ||
		    read_user_u64(&c_p, esdp + beam->current_process) || !c_p ||
		    read_user_u64(&e, c_p + beam->process_stop))
			return false;
	} else {
		return false;
	}
	/* An Erlang stack is process heap memory, not this C stack. */
	if (!e || (e & 7) || (e < bx + beam->scheduler_return && e + BEAM_C_STACK_WINDOW > bx))
		return false;
	state->bx = bx;
	state->sp = e;
	return true;
}

/* From the bottom of the Erlang stack to the scheduler's return address
 * into C (see above). */
static __always_inline int beam_scheduler_root(struct sample_record *record, struct beam_process *beam, u32 tgid)
{
	struct unwind_state *state = &record->state;
	u64 slot = state->bx + beam->scheduler_return;
	u64 return_address = 0;
	struct pid_mapping *mapping = NULL;
	if (!state->bx || !beam->scheduler_return || (slot & 7) || read_user_u64(&return_address, slot) ||
	    lookup_mapping(tgid, return_address - 1, &mapping) != MAPPING_FOUND || !mapping ||
	    mapping->kind != MAPPING_KIND_NATIVE) {
		count(COUNTER_BEAM_NO_ROOT);
		return UNWIND_STOP_STACK_SWITCH;
	}
	count(COUNTER_BEAM_SCHEDULER_ROOTS);
	/* rbx is the JIT's and callee-saved: the C code it returns to
	 * restores its own from its frame, not from here. rbp is not used by
	 * the JIT (RA layout) or cleared before scheduling (FP_RA): kept. */
	state->pc = return_address;
	state->sp = slot + 8;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* At the hand-over: beam_processes[tgid] copied into the scratch; a pc
 * C returned to (or shared code on the C stack) is recorded here, and
 * the walk resumes on the Erlang stack when it is at hand. */
static __always_inline int beam_attach(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct unwind_state *state = &record->state;
	u32 tgid = record->event.pid;
	struct beam_process *entry = bpf_map_lookup_elem(&beam_processes, &tgid);
	if (!entry) {
		/* Its frame stays native (and ends the stack there). */
		count(COUNTER_BEAM_NO_PROCESS);
		return STEP_JIT_STAYS_NATIVE;
	}
	interp->beam.process = *entry;
	struct beam_process *beam = &interp->beam.process;
	interp->beam.resumed = 0;
	if (state->exact && !beam_on_c_stack(state, beam))
		return STEP_CONTINUE;
	/* Returned into from C, or shared code running on the C stack. */
	count(COUNTER_BEAM_FROM_C);
	if (!beam_record(record, state->pc, true))
		return UNWIND_STOP_MAX_FRAMES;
	/* The Erlang stack pointer is not at hand for a sampled pc in
	 * shared code on the C stack. */
	if (state->exact || !beam_resume_erlang(state, beam))
		return UNWIND_STOP_STACK_SWITCH;
	count(COUNTER_BEAM_FROM_C_FOLLOWED);
	interp->beam.resumed = 1;
	return STEP_CONTINUE;
}

/* One frame (jit_frame_fn); at the bottom of the Erlang stack, the
 * scheduler's return address into C, and STEP_JIT_NATIVE. */
__noinline int beam_frame(u32 hand_over)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return UNWIND_STOP_INTERNAL;
	struct beam_scratch *beam = &record->interp.beam;
	/* The frame C returned to is recorded by beam_attach. */
	int result = beam_step(record, &beam->process, hand_over && beam->resumed);
	if (result != STEP_BEAM_BOTTOM)
		return result;
	result = beam_scheduler_root(record, &beam->process, record->event.pid);
	return result == STEP_CONTINUE ? STEP_JIT_NATIVE : result;
}

/* Runs the Erlang frames of a sample whose stack reached the JIT's code,
 * then hands back to the native unwinder. */
static __always_inline int beam_unwind_run(void *ctx, void *progs)
{
	return jit_unwind_run(ctx, progs, UNWINDER_BEAM, beam_attach, beam_frame);
}

/* A thread exits: the beam unwinder keeps nothing per thread. */
static __always_inline void beam_forget_thread(u64 thread_key)
{
}
