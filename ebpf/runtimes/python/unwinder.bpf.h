/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The CPython unwinder: records the Python frames a thread runs, in
 * place of the native frames of the interpreter's evaluation loop
 * (_PyEval_EvalFrameDefault) that runs them, so that native frames above
 * and below (C extensions, ctypes, libffi, callbacks into Python) stay
 * where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges (mappings.bpf.h) that
 * cover the evaluation loop (MAPPING_FLAG_INTERPRETER_LOOP, unwinder
 * UNWINDER_PYTHON: interpreters.bpf.h) and puts the
 * build's layout in python_files (crates/interpreters knows 3.8-3.15).
 * When the native unwinder reaches such a frame it tail-calls
 * python_unwind, which from then on runs the whole rest of the sample,
 * native frames included (unwind_step), so one hand-over costs one tail
 * call however many loops the stack holds:
 *
 *  1. Once per sample: the thread's PyThreadState. Its thread_id is
 *     pthread_self(), which on x86-64 is the thread pointer: the task's
 *     fsbase. The interpreters' thread lists are walked for it (at most
 *     PYTHON_THREAD_WALK_STEPS reads) and the answer is cached per thread
 *     in python_thread_states, checked again at each use. Its current
 *     frame: tstate->frame (3.8-3.10), tstate->cframe->current_frame
 *     (3.11, 3.12), tstate->current_frame (3.13+).
 *  2. At each loop frame (innermost first), the Python frames that loop
 *     run is evaluating, innermost first: one PyFrameObject up to 3.10
 *     (one loop run per Python call); up to 3.11's is_entry frame, or up
 *     to 3.12's C-stack shim frame (not a frame of its own), since 3.11
 *     inlines Python-to-Python calls into one loop run. The loop's own
 *     native frame is then unwound without being recorded.
 *  3. A loop frame with no Python frame left, or frames that cannot be
 *     read, stay native frames: the sample is never lost, only less
 *     detailed (COUNTER_PYTHON_*).
 *
 * A Python frame is one word (FRAME_INTERPRETED): the code object and the
 * byte offset of its current instruction; user space reads the code
 * object's names and line table from the process's memory.
 */

/* (tgid << 32 | tid) -> the thread's PyThreadState, found once by
 * walking the interpreter's thread list and checked at each use; a
 * thread's entry goes when it exits (on_process_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 12);
	__type(key, u64);
	__type(value, u64);
} python_thread_states SEC(".maps");

/* A thread exits (on_process_exit): its cached thread state goes. */
static __always_inline void python_forget_thread(u64 thread_key)
{
	bpf_map_delete_elem(&python_thread_states, &thread_key);
}

/* Reads spent looking for a thread's PyThreadState: threads of all
 * interpreters, two reads per thread. */
#define PYTHON_THREAD_WALK_STEPS 160

/* A u64 of the frame just read, at a byte offset user space gave. */
static __always_inline u64 interp_buf_u64(struct interp_state *interp, u32 offset)
{
	if (offset > PYTHON_FRAME_READ_MAX - sizeof(u64))
		return 0;
	return *(u64 *)(interp->python.buf + offset);
}

static __always_inline u32 interp_buf_u32(struct interp_state *interp, u32 offset)
{
	if (offset > PYTHON_FRAME_READ_MAX - sizeof(u32))
		return 0;
	return *(u32 *)(interp->python.buf + offset);
}

static __always_inline u8 interp_buf_u8(struct interp_state *interp, u32 offset)
{
	if (offset > PYTHON_FRAME_READ_MAX - 1)
		return 0;
	return interp->python.buf[offset];
}

/* The Python frames of the loop at pc are all recorded (or cannot be):
 * its native frame is unwound without being recorded if any were, else
 * recorded as native. */
static __always_inline void python_end_loop(struct interp_state *interp)
{
	interp->next = interp->loop_frames ? INTERP_NEXT_SKIP : INTERP_NEXT_NATIVE;
	interp->in_loop = 0;
	interp->loop_frames = 0;
}

/* The PyThreadState of the current thread (0 if none is found). */
static __always_inline u64 python_thread_state(struct interp_state *interp, u64 thread_key, u64 fsbase)
{
	struct python_file *py = &interp->python.file;
	u64 id = 0;
	u64 *cached = bpf_map_lookup_elem(&python_thread_states, &thread_key);
	if (cached) {
		u64 tstate = *cached;
		if (!read_user_u64(&id, tstate + py->tstate_thread_id) && id == fsbase)
			return tstate;
	}
	u64 interpreter = 0;
	if (read_user_u64(&interpreter, interp->bias + py->runtime_vaddr + py->runtime_interpreters_head))
		return 0;
	u64 tstate = 0;
	for (int i = 0; i < PYTHON_THREAD_WALK_STEPS; i++) {
		if (!tstate) {
			/* The next interpreter's threads. */
			if (!interpreter)
				return 0;
			if (read_user_u64(&tstate, interpreter + py->interp_threads_head))
				return 0;
			if (read_user_u64(&interpreter, interpreter + py->interp_next))
				interpreter = 0;
			continue;
		}
		if (read_user_u64(&id, tstate + py->tstate_thread_id))
			return 0;
		if (id == fsbase) {
			bpf_map_update_elem(&python_thread_states, &thread_key, &tstate, BPF_ANY);
			return tstate;
		}
		if (read_user_u64(&tstate, tstate + py->tstate_next))
			return 0;
	}
	return 0;
}

/* At the hand-over: the build's layout and the thread's current frame.
 * False when there is none to walk. */
static __always_inline bool python_start(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct python_file *info = bpf_map_lookup_elem(&python_files, &interp->file_id);
	if (!info)
		return false;
	interp->python.file = *info;
	struct python_file *py = &interp->python.file;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	u64 fsbase = arch_thread_pointer(task);
	u64 thread_key = ((u64)record->event.pid << 32) | record->event.tid;
	u64 tstate = python_thread_state(interp, thread_key, fsbase);
	if (!tstate) {
		count(COUNTER_PYTHON_NO_THREAD_STATE);
		return false;
	}
	u64 frame = 0;
	if (read_user_u64(&frame, tstate + py->tstate_frame))
		return false;
	if (py->cframe_current_frame != PYTHON_NO_OFFSET && frame &&
	    read_user_u64(&frame, frame + py->cframe_current_frame))
		return false;
	interp->python.frame = frame;
	return true;
}

/* Records the next Python frame of the loop at pc, or ends the loop's
 * frames. Returns STEP_CONTINUE or an unwind_stop reason. */
static __always_inline int python_step(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct python_file *py = &interp->python.file;
	struct sample_event *event = &record->event;
	u64 frame = interp->python.frame;
	if (!frame) {
		/* No Python frame left (more loops than Python frames, when
		 * no frame was recorded for this one). */
		python_end_loop(interp);
		return STEP_CONTINUE;
	}
	u32 size = py->frame_read_size;
	if (size == 0 || size > PYTHON_FRAME_READ_MAX ||
	    bpf_probe_read_user(interp->python.buf, size, (const void *)frame)) {
		/* The chain is broken: the loops further up are native. */
		count(COUNTER_PYTHON_READ_ERRORS);
		interp->mode = INTERP_MODE_UNAVAILABLE;
		python_end_loop(interp);
		return STEP_CONTINUE;
	}
	/* 3.14+: f_executable is a _PyStackRef, a tagged pointer. */
	u64 code = interp_buf_u64(interp, py->frame_code) & ~(u64)py->frame_code_tag_mask;
	interp->python.frame = interp_buf_u64(interp, py->frame_previous);
	bool last = false;
	bool record_it = true;
	switch (py->frame_model) {
	case PYTHON_FRAMES_OBJECTS:
		last = true;
		break;
	case PYTHON_FRAMES_ENTRY_FLAG:
		last = interp_buf_u8(interp, py->frame_entry) != 0;
		break;
	default: {
		u8 owner = interp_buf_u8(interp, py->frame_entry);
		if (owner == PYTHON_OWNER_CSTACK)
			last = true;
		record_it = owner < PYTHON_OWNER_CSTACK;
		break;
	}
	}
	if (!record_it || !code) {
		if (last)
			python_end_loop(interp);
		return STEP_CONTINUE;
	}

	s64 offset;
	switch (py->lasti_kind) {
	case PYTHON_LASTI_BYTES:
		offset = (s32)interp_buf_u32(interp, py->frame_lasti);
		break;
	case PYTHON_LASTI_UNITS:
		offset = 2 * (s64)(s32)interp_buf_u32(interp, py->frame_lasti);
		break;
	default:
		offset = (s64)(interp_buf_u64(interp, py->frame_lasti) - (code + py->code_adaptive));
		break;
	}
	/* Before the first instruction (-1, or one unit before the code). */
	if (offset < 0)
		offset = 0;
	if (offset > (s64)PYTHON_FRAME_OFFSET_MAX)
		offset = PYTHON_FRAME_OFFSET_MAX;
	u64 code_bits = (code & 7) || (code >> 47) ? 0 : code >> 3;

	u64 payload = ((u64)offset << PYTHON_FRAME_OFFSET_SHIFT) | code_bits;
	if (!append_user_frame(event, frame_word_interpreted(UNWINDER_PYTHON, payload)))
		return UNWIND_STOP_MAX_FRAMES;
	count(COUNTER_PYTHON_FRAMES);
	if (interp->loop_frames < 255)
		interp->loop_frames++;
	if (last)
		python_end_loop(interp);
	return STEP_CONTINUE;
}

/* Runs the rest of a sample whose stack reached an interpreter loop:
 * Python frames in place of the loops, native frames around them. */
static __always_inline int python_unwind_run(void *ctx, void *progs)
{
	return interpreter_unwind_run(ctx, progs, UNWINDER_PYTHON, python_start, python_step, interp_enter_always);
}
