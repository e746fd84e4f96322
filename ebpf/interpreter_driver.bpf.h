/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every unwinder that hands a sample on shares: the tail call that
 * ends a program run, and the driver of the interpreters whose frames
 * replace the native frames of their loop.
 *
 * Included once by profiler.bpf.c, after native_unwinder.bpf.h (its
 * unwind_frame, step results and tail-call budget) and before the
 * interpreter unwinders.
 *
 * The driver (interpreter_unwind_run) runs the rest of a sample from the
 * hand-over on: the native frames with unwind_frame, and at each loop
 * frame of its interpreter that interpreter's walk, one step at a time,
 * INTERP_STEPS_PER_PROGRAM steps per program run, resuming across tail
 * calls (the walk's state is in record->interp). A loop frame with no
 * frame of the walk left stays native (INTERP_NEXT_NATIVE); one whose
 * frames were recorded is unwound without being recorded
 * (INTERP_NEXT_SKIP): the step functions set which.
 */

/* Ends a program run that leaves the sample unfinished: tail-calls the
 * unwinder `slot` in `progs` within the sample's tail-call budget, else
 * sends the sample as it is (UNWIND_STOP_TAIL_CALLS). */
static __always_inline void unwinder_tail_call(void *ctx, void *progs, struct sample_record *record, u32 slot)
{
	if (record->state.tail_calls < MAX_NATIVE_TAIL_CALLS) {
		record->state.tail_calls++;
		if (slot == UNWINDER_NATIVE)
			count(COUNTER_NATIVE_TAIL_CALLS);
		else
			count_hand_over(slot);
		bpf_tail_call(ctx, progs, slot);
	}
	send_sample(&record->event, UNWIND_STOP_TAIL_CALLS);
}

/* Ends a program run whose steps ran out: the same unwinder (`slot`)
 * goes on in a new run, unless the stack is already full. */
static __always_inline void unwinder_run_again(void *ctx, void *progs, struct sample_record *record, u32 slot)
{
	if (record->event.user_frames >= MAX_USER_FRAMES) {
		send_sample(&record->event, UNWIND_STOP_MAX_FRAMES);
		return;
	}
	unwinder_tail_call(ctx, progs, record, slot);
}

/* Loop iterations per program run of interpreter_unwind_run: each
 * unwinds a native frame or takes one step of the interpreter's walk. */
#define INTERP_STEPS_PER_PROGRAM 64

/* What an interpreter brings to interpreter_unwind_run. All three are
 * __always_inline functions named by constants, so the calls are
 * inlined (BPF has no indirect calls). */
/* At the hand-over: reads the thread's interpreter state into
 * record->interp; false (counted by it) when there is none to walk. */
typedef bool (*interp_start_fn)(struct sample_record *record);
/* One step of the walk of the loop frame at pc: records or skips one of
 * its frames, or ends its frames (in_loop = 0, next set). Returns
 * STEP_CONTINUE or an unwind_stop reason. */
typedef int (*interp_step_fn)(struct sample_record *record);
/* The native stack reached another loop frame of this interpreter:
 * false when its walk has no frames left for it (it stays native). */
typedef bool (*interp_enter_fn)(struct interp_state *interp);

/* For interpreters whose walk goes on at any loop frame. */
static __always_inline bool interp_enter_always(struct interp_state *interp)
{
	return true;
}

/* Runs the rest of a sample whose stack reached a loop frame of the
 * interpreter `slot`: its frames in place of its loop frames, native
 * frames around them, one step at a time. A loop frame of another
 * interpreter stays a native frame: one unwinder runs per sample.
 * `progs` is the program array of the entry it runs under (perf_event
 * or off-CPU). */
static __always_inline int interpreter_unwind_run(void *ctx, void *progs, u32 slot, interp_start_fn start,
						  interp_step_fn step, interp_enter_fn enter)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return 0;
	struct interp_state *interp = &record->interp;
	u32 pid = record->event.pid;
	if (interp->mode == INTERP_MODE_NONE) {
		if (start(record)) {
			interp->mode = INTERP_MODE_ACTIVE;
			interp->in_loop = 1;
			interp->loop_frames = 0;
		} else {
			interp->mode = INTERP_MODE_UNAVAILABLE;
		}
	}
	int result = STEP_CONTINUE;
	for (int i = 0; i < INTERP_STEPS_PER_PROGRAM; i++) {
		if (interp->in_loop) {
			result = step(record);
		} else {
			result = unwind_frame(pid);
			if (result == STEP_INTERPRETER) {
				if (interp->unwinder == slot && enter(interp)) {
					/* The next loop frame: its frames
					 * continue the walk. */
					interp->in_loop = 1;
					interp->loop_frames = 0;
				} else {
					interp->next = INTERP_NEXT_NATIVE;
				}
				result = STEP_CONTINUE;
			}
		}
		if (result != STEP_CONTINUE)
			break;
	}
	if (result != STEP_CONTINUE) {
		send_sample(&record->event, result);
		return 0;
	}
	unwinder_run_again(ctx, progs, record, slot);
	return 0;
}
