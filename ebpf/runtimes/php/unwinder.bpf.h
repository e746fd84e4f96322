/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The PHP unwinder: records the PHP frames a thread runs in place of the
 * native frames of the Zend VM's loop (execute_ex) that runs them, so
 * that native frames above and below (internal functions such as usort,
 * the SAPI, libc) stay where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges that cover
 * execute_ex (MAPPING_FLAG_INTERPRETER_LOOP, unwinder UNWINDER_PHP) and
 * puts the build's layout in php_files (crates/interpreters/src/php: NTS
 * builds only, whose executor_globals is one global). When the native
 * unwinder reaches such a frame it tail-calls php_unwind, which from then
 * on runs the rest of the sample, native frames included (unwind_step):
 *
 *  1. Once per sample: executor_globals.current_execute_data, the
 *     innermost zend_execute_data (0: no PHP code runs).
 *  2. At each execute_ex frame (innermost first): the frames of the
 *     prev_execute_data chain from where the previous execute_ex stopped,
 *     down to and including the first one whose call info has
 *     ZEND_CALL_TOP (the frame that execute_ex run was entered with:
 *     zend_execute for the script, zend_call_function for a callback
 *     from C, e.g. usort's comparison). Internal functions (usort) are
 *     in the chain too and recorded as PHP frames; their own native
 *     frames stay as well. Frames without a function are VM dummies:
 *     skipped. The execute_ex frame itself is then unwound without being
 *     recorded.
 *  3. An execute_ex frame with no PHP frame left, or frames that cannot
 *     be read, stay native frames: the sample is never lost, only less
 *     detailed (COUNTER_PHP_*).
 *
 * A PHP frame is one word (slot UNWINDER_PHP, types.h): the
 * zend_function, the line of the frame's opline (in a caller, the call
 * being made) and ZEND_CALL_TOP; user space reads the function's names.
 * The chain's length is bounded by MAX_USER_FRAMES (a cycle fills the
 * stack and ends it with UNWIND_STOP_MAX_FRAMES).
 */

/* The PHP frames of the execute_ex at pc are all recorded (or cannot
 * be): its native frame is unwound without being recorded if any were,
 * else recorded as native. */
static __always_inline void php_end_loop(struct interp_state *interp)
{
	if (!interp->loop_frames)
		count(COUNTER_PHP_EMPTY_LOOPS);
	interp->next = interp->loop_frames ? INTERP_NEXT_SKIP : INTERP_NEXT_NATIVE;
	interp->in_loop = 0;
	interp->loop_frames = 0;
}

/* A field of the zend_execute_data just read, at an offset user space
 * gave (0 if it lies outside what was read). */
static __always_inline u64 php_buf_u64(struct interp_state *interp, u32 offset)
{
	if (offset > PHP_EXECUTE_DATA_READ - sizeof(u64))
		return 0;
	return *(u64 *)(interp->php.buf + offset);
}

static __always_inline u32 php_buf_u32(struct interp_state *interp, u32 offset)
{
	if (offset > PHP_EXECUTE_DATA_READ - sizeof(u32))
		return 0;
	return *(u32 *)(interp->php.buf + offset);
}

/* The build's layout and the innermost frame. False when there is none
 * to walk. */
static __always_inline bool php_first_frame(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct php_file *info = bpf_map_lookup_elem(&php_files, &interp->file_id);
	if (!info)
		return false;
	interp->php.file = *info;
	u64 ex = 0;
	u64 at = interp->bias + interp->php.file.executor_globals_vaddr + interp->php.file.eg_current_execute_data;
	if (read_user_u64(&ex, at) || !ex)
		return false;
	interp->php.ex = ex;
	return true;
}

/* At the hand-over: php_first_frame, counted when there is none. */
static __always_inline bool php_start(struct sample_record *record)
{
	if (php_first_frame(record))
		return true;
	count(COUNTER_PHP_NO_FRAMES);
	return false;
}

/* Records (or skips) the next PHP frame of the execute_ex at pc, or ends
 * that run's frames. Returns STEP_CONTINUE or an unwind_stop reason. */
static __always_inline int php_step(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct php_file *php = &interp->php.file;
	struct sample_event *event = &record->event;
	u64 ex = interp->php.ex;
	if (!ex) {
		/* More execute_ex runs than chains of frames. */
		php_end_loop(interp);
		return STEP_CONTINUE;
	}
	if ((ex & 7) || bpf_probe_read_user(interp->php.buf, sizeof(interp->php.buf), (const void *)ex)) {
		/* The chain is broken: the runs further up are native. */
		count(COUNTER_PHP_READ_ERRORS);
		interp->mode = INTERP_MODE_UNAVAILABLE;
		php_end_loop(interp);
		return STEP_CONTINUE;
	}
	u64 func = php_buf_u64(interp, php->ex_func);
	u64 opline = php_buf_u64(interp, php->ex_opline);
	bool top = (php_buf_u32(interp, php->ex_call_info) & php->call_top) != 0;
	interp->php.ex = php_buf_u64(interp, php->ex_prev);
	if (!func) {
		count(COUNTER_PHP_SKIPPED_FRAMES);
		if (top)
			php_end_loop(interp);
		return STEP_CONTINUE;
	}
	/* The line from the function's first (user space adds it back):
	 * 12 bits then reach 4094 lines into a function, wherever it lies
	 * in its file. */
	u64 line = PHP_FRAME_LINE_MAX;
	u32 lineno = 0, line_start = 0;
	if (opline && !bpf_probe_read_user(&lineno, sizeof(lineno), (const void *)(opline + php->op_lineno)) &&
	    !bpf_probe_read_user(&line_start, sizeof(line_start), (const void *)(func + php->op_array_line_start)) &&
	    lineno >= line_start && lineno - line_start < PHP_FRAME_LINE_MAX)
		line = lineno - line_start;
	u64 func_bits = (func & 7) || (func >> 47) ? 0 : func >> 3;

	u64 payload = (top ? PHP_FRAME_TOP : 0) | (line << PHP_FRAME_LINE_SHIFT) | func_bits;
	if (!append_user_frame(event, frame_word_interpreted(UNWINDER_PHP, payload)))
		return UNWIND_STOP_MAX_FRAMES;
	count(COUNTER_PHP_FRAMES);
	if (interp->loop_frames < 255)
		interp->loop_frames++;
	if (top)
		php_end_loop(interp);
	return STEP_CONTINUE;
}

/* Runs the rest of a sample whose stack reached execute_ex: PHP frames
 * in place of its runs, native frames around them. `progs` is the
 * program array of the entry it runs under (perf_event or off-CPU). */
static __always_inline int php_unwind_run(void *ctx, void *progs)
{
	return interpreter_unwind_run(ctx, progs, UNWINDER_PHP, php_start, php_step, interp_enter_always);
}

/* A thread exits: the php unwinder keeps nothing per thread. */
static __always_inline void php_forget_thread(u64 thread_key)
{
}
