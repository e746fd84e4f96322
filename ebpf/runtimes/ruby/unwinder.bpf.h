/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The CRuby unwinder: records the Ruby frames a thread runs, in place of
 * the native frames of the VM's rb_vm_exec that runs them, so that native
 * frames above and below (C methods, C extensions, rb_yield from C back
 * into Ruby) stay where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges that cover
 * rb_vm_exec (MAPPING_FLAG_INTERPRETER_LOOP, unwinder UNWINDER_RUBY) and
 * puts the build's layout in ruby_files. When the native unwinder reaches
 * such a frame it tail-calls ruby_unwind, which from then on runs the
 * whole rest of the sample, native frames included (unwind_step):
 *
 *  1. Once per sample: the thread's execution context, the thread-local
 *     ruby_current_ec, found from the thread pointer (the task's fsbase)
 *     as ld.so laid out the TLS (struct ruby_file, enum ruby_tls_model):
 *     every thread's own, not only the main thread's. Its cfp is the
 *     newest control frame; the control frames are an array growing
 *     down from the end of the VM stack (vm_stack + 8 * vm_stack_size).
 *  2. At each rb_vm_exec frame (innermost first), the control frames
 *     that run of the VM owns, newest first, up to and including the
 *     first one flagged VM_FRAME_FLAG_FINISH (the frame the run was
 *     entered with: returning from it returns to C). An iseq frame is
 *     recorded as its iseq and the index of its pc in the iseq's
 *     instructions (a method's frame, VM_FRAME_MAGIC_METHOD, as its
 *     method entry ep[-2] instead, when that entry's definition runs the
 *     frame's iseq: user space names its class from it); a C function
 *     frame (VM_FRAME_MAGIC_CFUNC) as its method entry, ep[-2]; dummy
 *     frames and frames with no pc yet run
 *     no code and are skipped. The rb_vm_exec native frame itself is
 *     then unwound without being recorded (vm_exec_core, which it calls,
 *     stays a native frame).
 *  3. An rb_vm_exec frame with no control frame left, or frames that
 *     cannot be read, stay native frames: the sample is never lost, only
 *     less detailed (COUNTER_RUBY_*).
 *
 * A C function called from Ruby runs on top of its own control frame and
 * below rb_vm_exec's: its frame is recorded at the next rb_vm_exec down
 * the native stack, after the C code's native frames, where it belongs.
 */

/* A u64 of the control frame just read, at a byte offset user space
 * gave. */
static __always_inline u64 ruby_buf_u64(struct interp_state *interp, u32 offset)
{
	if (offset > RUBY_CFP_READ_MAX - sizeof(u64))
		return 0;
	return *(u64 *)(interp->ruby.buf + offset);
}

/* The control frames of the rb_vm_exec frame at pc are all recorded (or
 * cannot be): its native frame is unwound without being recorded if any
 * were, else recorded as native. */
static __always_inline void ruby_end_loop(struct interp_state *interp)
{
	if (!interp->loop_frames)
		count(COUNTER_RUBY_EMPTY_LOOPS);
	interp->next = interp->loop_frames ? INTERP_NEXT_SKIP : INTERP_NEXT_NATIVE;
	interp->in_loop = 0;
	interp->loop_frames = 0;
}

/* The thread's rb_execution_context_t (0 if none). */
static __always_inline u64 ruby_execution_context(struct interp_state *interp)
{
	struct ruby_file *rb = &interp->ruby.file;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	u64 fsbase = arch_thread_pointer(task);
	if (!fsbase)
		return 0;
	u64 slot = interp->bias + rb->tls_vaddr;
	u64 variable = 0;
	if (rb->tls_model == RUBY_TLS_INITIAL_EXEC) {
		/* The variable's (negative) offset from the thread pointer. */
		u64 offset = 0;
		if (read_user_u64(&offset, slot))
			return 0;
		variable = fsbase + offset;
	} else {
		/* glibc: tcbhead_t.dtv at ARCH_TLS_DTV_OFFSET; dtv_t entries
		 * are 16 bytes, the module's block pointer first (-1 while
		 * not allocated). */
		u64 module = 0, dtv = 0, block = 0;
		if (read_user_u64(&module, slot) || module == 0 || module > 0xffff)
			return 0;
		if (read_user_u64(&dtv, fsbase + ARCH_TLS_DTV_OFFSET) || !dtv)
			return 0;
		if (read_user_u64(&block, dtv + 16 * module) || !block || block == (u64)-1)
			return 0;
		variable = block + rb->tls_offset;
	}
	u64 ec = 0;
	if (read_user_u64(&ec, variable))
		return 0;
	return ec;
}

/* At the hand-over: the build's layout and the thread's newest control
 * frame. False when there is none to walk. */
static __always_inline bool ruby_start(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct ruby_file *info = bpf_map_lookup_elem(&ruby_files, &interp->file_id);
	if (!info)
		return false;
	interp->ruby.file = *info;
	struct ruby_file *rb = &interp->ruby.file;
	if (rb->cfp_size == 0 || rb->cfp_size > RUBY_CFP_READ_MAX)
		return false;
	u64 ec = ruby_execution_context(interp);
	if (!ec) {
		count(COUNTER_RUBY_NO_EC);
		return false;
	}
	u64 stack = 0, words = 0, cfp = 0;
	if (read_user_u64(&stack, ec + rb->ec_vm_stack) || read_user_u64(&words, ec + rb->ec_vm_stack_size) ||
	    read_user_u64(&cfp, ec + rb->ec_cfp)) {
		count(COUNTER_RUBY_READ_ERRORS);
		return false;
	}
	u64 end = stack + 8 * words;
	if (!stack || words == 0 || words > RUBY_MAX_VM_STACK || end < stack || cfp < stack || cfp >= end) {
		count(COUNTER_RUBY_READ_ERRORS);
		return false;
	}
	interp->ruby.cfp = cfp;
	interp->ruby.stack_end = end;
	return true;
}

/* Appends a Ruby frame word; false when the stack is full. */
static __always_inline bool ruby_record(struct sample_record *record, u64 pointer, u64 pos)
{
	u64 bits = (pointer & 7) || (pointer >> 47) ? 0 : pointer >> 3;
	if (pos > RUBY_FRAME_POS_MAX)
		pos = RUBY_FRAME_POS_MAX;
	if (!append_user_frame(&record->event, frame_word_interpreted(UNWINDER_RUBY, (pos << RUBY_FRAME_POS_SHIFT) | bits)))
		return false;
	count(COUNTER_RUBY_FRAMES);
	return true;
}

/* Looks at the next control frame of the rb_vm_exec run at pc: records
 * it, skips it, or ends the run's frames. Returns STEP_CONTINUE or an
 * unwind_stop reason. */
static __always_inline int ruby_step(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct ruby_file *rb = &interp->ruby.file;
	u64 cfp = interp->ruby.cfp;
	u32 size = rb->cfp_size;
	if (size == 0 || size > RUBY_CFP_READ_MAX || cfp + size > interp->ruby.stack_end) {
		/* No control frame left (more runs than frames). */
		ruby_end_loop(interp);
		return STEP_CONTINUE;
	}
	u64 env[3] = {};
	if (bpf_probe_read_user(interp->ruby.buf, size, (const void *)cfp)) {
		count(COUNTER_RUBY_READ_ERRORS);
		goto broken;
	}
	u64 pc = ruby_buf_u64(interp, rb->cfp_pc);
	u64 iseq = ruby_buf_u64(interp, rb->cfp_iseq);
	u64 ep = ruby_buf_u64(interp, rb->cfp_ep);
	/* ep[-2] (the method entry), ep[-1], ep[0] (magic and flags). */
	if (ep < 16 || (ep & 7) || bpf_probe_read_user(env, sizeof(env), (const void *)(ep - 16))) {
		count(COUNTER_RUBY_READ_ERRORS);
		goto broken;
	}
	interp->ruby.cfp = cfp + size;
	u64 flags = env[2];
	u64 magic = flags & RUBY_FRAME_MAGIC_MASK;
	bool last = (flags & RUBY_FRAME_FLAG_FINISH) != 0;
	bool recorded = true;
	if (magic == RUBY_FRAME_MAGIC_CFUNC) {
		recorded = ruby_record(record, env[0], 0);
	} else if (iseq && pc && magic != RUBY_FRAME_MAGIC_DUMMY) {
		u64 body = 0, encoded = 0;
		u64 pos = RUBY_FRAME_POS_MAX;
		if (!read_user_u64(&body, iseq + rb->iseq_body) && body &&
		    !read_user_u64(&encoded, body + rb->body_iseq_encoded) && pc >= encoded)
			pos = (pc - encoded) / 8;
		/* A method's frame: its method entry names the class, if its
		 * definition runs this very iseq. */
		u64 pointer = iseq;
		u64 me = env[0], def = 0, def_iseq = 0;
		if (magic == RUBY_FRAME_MAGIC_METHOD && (flags & RUBY_ENV_FLAG_LOCAL) && me &&
		    !read_user_u64(&def, me + rb->me_def) && def && !read_user_u64(&def_iseq, def + rb->def_iseq) &&
		    def_iseq == iseq)
			pointer = me;
		recorded = ruby_record(record, pointer, pos);
	} else {
		count(COUNTER_RUBY_SKIPPED_FRAMES);
		if (last)
			ruby_end_loop(interp);
		return STEP_CONTINUE;
	}
	if (!recorded)
		return UNWIND_STOP_MAX_FRAMES;
	if (interp->loop_frames < 255)
		interp->loop_frames++;
	if (last)
		ruby_end_loop(interp);
	return STEP_CONTINUE;
broken:
	/* The chain is broken: the runs further down are native. */
	interp->mode = INTERP_MODE_UNAVAILABLE;
	ruby_end_loop(interp);
	return STEP_CONTINUE;
}

/* Runs the rest of a sample whose stack reached rb_vm_exec: Ruby frames
 * in place of its runs, native frames around them. */
static __always_inline int ruby_unwind_run(void *ctx, void *progs)
{
	return interpreter_unwind_run(ctx, progs, UNWINDER_RUBY, ruby_start, ruby_step, interp_enter_always);
}

/* A thread exits: the ruby unwinder keeps nothing per thread. */
static __always_inline void ruby_forget_thread(u64 thread_key)
{
}
