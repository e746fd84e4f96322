/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The driver of the JIT runtimes' unwinders (their folders'
 * unwinder.bpf.h call jit_unwind_run): their code has no unwind tables,
 * and each of their frames tells its caller by the runtime's own layout,
 * so their unwinder replaces the native unwinder while the pc stays in
 * the runtime's code, then hands back.
 *
 * Included once by profiler.bpf.c, after interpreter_driver.bpf.h (its
 * tail calls) and before the runtimes' unwinders.
 *
 * The driver (jit_unwind_run) runs from the hand-over on: the runtime's
 * attach reads what the walk needs (its <name>_processes entry, copied
 * into its scratch: no map lookup per frame), then its frame function
 * unwinds one frame at a time, JIT_FRAMES_PER_PROGRAM per program run,
 * resuming across tail calls (in_loop set), until the caller is native
 * code or the stack ends.
 */

/* Frames unwound per program run of jit_unwind_run. */
#define JIT_FRAMES_PER_PROGRAM 64

/* Step results besides STEP_CONTINUE and the unwind_stop reasons
 * (native_unwinder.bpf.h): the caller is native code, unwound by the
 * native unwinder; */
#define STEP_JIT_NATIVE 0xfd
/* (attach) the handed-over frame stays native: the runtime's code is
 * unwound as memory without unwind tables (no process entry yet, or the
 * pc is not the runtime's code). */
#define STEP_JIT_STAYS_NATIVE 0xfc

/* What a JIT runtime brings to jit_unwind_run, named by constants so
 * that the calls are direct (BPF has no indirect calls). */
/* At the hand-over (an __always_inline function): copies the process's
 * entry into the runtime's scratch and reads what the sample's frames
 * share. STEP_CONTINUE: the walk starts at record->state;
 * STEP_JIT_STAYS_NATIVE; or an unwind_stop reason that ends the
 * sample. */
typedef int (*jit_attach_fn)(struct sample_record *record);
/* Unwinds the frame at record->state (a global function: the verifier
 * checks it once, not at each frame of a run): records it and moves the
 * state to its caller. `hand_over`: the frame is the hand-over's (attach
 * has seen it; it must be read: clang leaves an unused argument of a
 * global function unset, which the verifier refuses). STEP_CONTINUE,
 * STEP_JIT_NATIVE or an unwind_stop reason. */
typedef int (*jit_frame_fn)(u32 hand_over);

/* Runs the frames of the JIT runtime `slot` from a hand-over of the
 * native unwinder, then hands back to it. `progs` is the program array
 * of the entry it runs under (perf_event or off-CPU). */
static __always_inline int jit_unwind_run(void *ctx, void *progs, u32 slot, jit_attach_fn attach, jit_frame_fn frame)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return 0;
	struct interp_state *interp = &record->interp;
	/* A hand-over, or this program going on (in_loop is set by this
	 * program before it calls itself, with the process copied). */
	bool hand_over = !interp->in_loop;
	interp->in_loop = 0;
	int result = STEP_CONTINUE;
	if (hand_over) {
		result = attach(record);
		if (result == STEP_JIT_STAYS_NATIVE) {
			interp->next = INTERP_NEXT_NATIVE;
			goto call_native;
		}
		if (result != STEP_CONTINUE)
			goto send;
	}
	/* The first frame apart: hand_over is dead in the loop, which the
	 * verifier then follows once, not once per value of it. */
	result = frame(hand_over);
	for (int i = 1; i < JIT_FRAMES_PER_PROGRAM && result == STEP_CONTINUE; i++)
		result = frame(0);
	if (result == STEP_JIT_NATIVE)
		goto native;
	if (result != STEP_CONTINUE)
		goto send;
	/* This program goes on (the sample's next begin_sample clears
	 * in_loop if it cannot). */
	interp->in_loop = 1;
	unwinder_run_again(ctx, progs, record, slot);
	return 0;

send:
	send_sample(&record->event, result);
	return 0;
native:
	/* The next frame is native code. */
	interp->next = INTERP_NEXT_HAND_OVER;
call_native:
	unwinder_tail_call(ctx, progs, record, UNWINDER_NATIVE);
	return 0;
}
