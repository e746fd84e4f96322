/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Perl unwinder: records the Perl frames a thread runs in place of
 * the native frames of Perl's op loop (Perl_runops_standard) that runs
 * them, so that native frames above and below (pp_sort, XS code, libc)
 * stay where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges that cover
 * Perl_runops_standard (MAPPING_FLAG_INTERPRETER_LOOP, unwinder
 * UNWINDER_PERL) and puts the build's layout in perl_files
 * (crates/interpreters/src/perl). When the native unwinder reaches such
 * a frame it tail-calls perl_unwind, which from then on runs the rest of
 * the sample, native frames included (unwind_step):
 *
 *  1. Once per sample: the interpreter's PL_curcop (the statement running
 *     now) and PL_curstackinfo (the current context stack). Threaded
 *     builds: fields of the thread's interpreter, its thread-local
 *     PL_current_context (5.36+, in a perl executable's static TLS block,
 *     at a fixed offset from the thread pointer: fsbase); without it,
 *     *PL_curinterp for the main thread (tid == tgid) only, other threads
 *     keeping native frames (COUNTER_PERL_NO_INTERPRETER).
 *  2. At each runops frame (innermost first): the contexts of one stack
 *     info, top down. A sort sub or block, a signal handler or an
 *     overload runs on a stack info of its own, in a nested runops: each
 *     runops frame owns one stack info, then the walk moves to si_prev.
 *     A sub context (CXt_SUB, CXt_FORMAT; not a regex's fake sub) is a
 *     frame: its CV, at the current COP; a string eval, require or do
 *     FILE (CXt_EVAL, not eval {} or try {}) is a frame named by the
 *     COP. The COP of the next frame out is the context's blk_oldcop
 *     (the call site). Other contexts (loops, blocks) belong to the sub
 *     around them. Below the last stack info, the script's top level is
 *     a frame at the last COP. The runops frame itself is then unwound
 *     without being recorded.
 *  3. A runops frame with no Perl frame left, or contexts that cannot be
 *     read, stay native frames (COUNTER_PERL_*).
 *
 * Steps are bounded per program run and by the tail-call budget: a
 * corrupt or cyclic chain ends the sample, it cannot loop.
 */

static __always_inline void perl_end_loop(struct interp_state *interp)
{
	if (!interp->loop_frames)
		count(COUNTER_PERL_EMPTY_LOOPS);
	interp->next = interp->loop_frames ? INTERP_NEXT_SKIP : INTERP_NEXT_NATIVE;
	interp->in_loop = 0;
	interp->loop_frames = 0;
}

/* A field of the context or stack info just read, at an offset user
 * space gave (0 if it lies outside what was read). */
static __always_inline u64 perl_buf_u64(struct interp_state *interp, u32 offset)
{
	if (offset > PERL_CONTEXT_READ - sizeof(u64))
		return 0;
	return *(u64 *)(interp->perl.buf + offset);
}

static __always_inline u32 perl_buf_u32(struct interp_state *interp, u32 offset)
{
	if (offset > PERL_CONTEXT_READ - sizeof(u32))
		return 0;
	return *(u32 *)(interp->perl.buf + offset);
}

static __always_inline u8 perl_buf_u8(struct interp_state *interp, u32 offset)
{
	if (offset > PERL_CONTEXT_READ - 1)
		return 0;
	return interp->perl.buf[offset];
}

/* Makes `si` the stack info walked: its context array and top index.
 * False when it cannot be read. */
static __always_inline bool perl_enter_stack(struct interp_state *interp, u64 si)
{
	struct perl_file *perl = &interp->perl.file;
	if (!si || (si & 7) || bpf_probe_read_user(interp->perl.buf, PERL_SI_READ, (const void *)si))
		return false;
	interp->perl.si = si;
	interp->perl.cxstack = perl_buf_u64(interp, perl->si_cxstack);
	interp->perl.cxix = (s32)perl_buf_u32(interp, perl->si_cxix);
	return interp->perl.cxstack != 0;
}

/* The build's layout, the current COP and stack info. False when there
 * is none to walk. */
static __always_inline bool perl_find_interpreter(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct perl_file *info = bpf_map_lookup_elem(&perl_files, &interp->file_id);
	if (!info)
		return false;
	interp->perl.file = *info;
	struct perl_file *perl = &interp->perl.file;
	u64 cop_at, si_at;
	if (perl->threaded) {
		u64 interpreter = 0;
		if (perl->has_tls) {
			/* The thread's own (static TLS of the executable). */
			struct task_struct *task = (struct task_struct *)bpf_get_current_task();
			u64 fsbase = arch_thread_pointer(task);
			if (fsbase && read_user_u64(&interpreter, fsbase + perl->tls_offset))
				interpreter = 0;
		}
		/* PL_curinterp is the main thread's interpreter only. */
		if (!interpreter && record->event.tid == record->event.pid &&
		    read_user_u64(&interpreter, interp->bias + perl->curinterp_vaddr))
			interpreter = 0;
		if (!interpreter)
			return false;
		cop_at = interpreter + perl->interp_curcop;
		si_at = interpreter + perl->interp_curstackinfo;
	} else {
		cop_at = interp->bias + perl->curcop_vaddr;
		si_at = interp->bias + perl->curstackinfo_vaddr;
	}
	u64 si = 0;
	interp->perl.cop = 0;
	if (read_user_u64(&interp->perl.cop, cop_at) || read_user_u64(&si, si_at))
		return false;
	interp->perl.main_done = 0;
	return perl_enter_stack(interp, si);
}

/* At the hand-over: perl_find_interpreter, counted when there is none. */
static __always_inline bool perl_start(struct sample_record *record)
{
	if (perl_find_interpreter(record))
		return true;
	count(COUNTER_PERL_NO_INTERPRETER);
	return false;
}

/* Appends a Perl frame word; false when the stack is full. */
static __always_inline bool perl_record(struct sample_record *record, u64 own_bits)
{
	struct interp_state *interp = &record->interp;
	if (!append_user_frame(&record->event, frame_word_interpreted(UNWINDER_PERL, own_bits)))
		return false;
	count(COUNTER_PERL_FRAMES);
	if (interp->loop_frames < 255)
		interp->loop_frames++;
	return true;
}

static __always_inline u64 perl_pointer_bits(u64 pointer)
{
	return (pointer & 7) || (pointer >> 47) ? 0 : pointer >> 3;
}

/* A frame named by its COP: the top level or an eval. */
static __always_inline u64 perl_cop_bits(u64 cop, u64 kind)
{
	return PERL_FRAME_COP | (kind << PERL_FRAME_LINE_SHIFT) | perl_pointer_bits(cop);
}

/* Reads one context (or ends the runops frame's stack info) of the
 * runops frame at pc. Returns STEP_CONTINUE or an unwind_stop reason. */
static __always_inline int perl_step(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct perl_file *perl = &interp->perl.file;
	s32 cxix = interp->perl.cxix;
	if (cxix < 0) {
		/* This stack info is done: its caller's is the next runops
		 * frame's, or this was the bottom one and the script's top
		 * level is the last frame. */
		u64 prev = 0;
		if (interp->perl.si)
			read_user_u64(&prev, interp->perl.si + perl->si_prev);
		if (prev) {
			if (!perl_enter_stack(interp, prev)) {
				count(COUNTER_PERL_READ_ERRORS);
				interp->mode = INTERP_MODE_UNAVAILABLE;
			}
		} else {
			if (!interp->perl.main_done && interp->perl.cop &&
			    !perl_record(record, perl_cop_bits(interp->perl.cop, PERL_COP_MAIN)))
				return UNWIND_STOP_MAX_FRAMES;
			interp->perl.main_done = 1;
			interp->perl.si = 0;
		}
		perl_end_loop(interp);
		return STEP_CONTINUE;
	}
	u64 cx = interp->perl.cxstack + (u64)(u32)cxix * perl->cx_size;
	if (bpf_probe_read_user(interp->perl.buf, sizeof(interp->perl.buf), (const void *)cx)) {
		count(COUNTER_PERL_READ_ERRORS);
		interp->mode = INTERP_MODE_UNAVAILABLE;
		perl_end_loop(interp);
		return STEP_CONTINUE;
	}
	interp->perl.cxix = cxix - 1;
	u8 type = perl_buf_u8(interp, perl->cx_type);
	u8 kind = type & PERL_CXTYPEMASK;
	u64 own_bits;
	if ((kind == PERL_CXT_SUB && !(type & PERL_CXP_SUB_RE_FAKE)) || kind == PERL_CXT_FORMAT) {
		u64 cv = perl_buf_u64(interp, perl->cx_blk_sub_cv);
		/* The line from the line of the sub's first op (CvSTART: its
		 * first statement; user space reads the same): 12 bits then
		 * reach 4094 lines into a sub, wherever it lies in its file.
		 * The CV's body is its head's first word (sv_any). */
		u64 line = PERL_FRAME_LINE_MAX;
		u32 cop_line = 0, start_line = 0;
		u64 body = 0, start = 0;
		if (interp->perl.cop &&
		    !bpf_probe_read_user(&cop_line, sizeof(cop_line), (const void *)(interp->perl.cop + perl->cop_line)) &&
		    !read_user_u64(&body, cv) && body && !read_user_u64(&start, body + perl->xcv_start) && start &&
		    !bpf_probe_read_user(&start_line, sizeof(start_line), (const void *)(start + perl->cop_line)) &&
		    cop_line >= start_line && cop_line - start_line < PERL_FRAME_LINE_MAX)
			line = cop_line - start_line;
		own_bits = (line << PERL_FRAME_LINE_SHIFT) | perl_pointer_bits(cv);
	} else if (kind == PERL_CXT_EVAL && !(type & (PERL_CXP_EVALBLOCK | PERL_CXP_TRY))) {
		own_bits = perl_cop_bits(interp->perl.cop, PERL_COP_EVAL);
	} else {
		/* A loop or block: part of the sub around it. */
		return STEP_CONTINUE;
	}
	if (!perl_record(record, own_bits))
		return UNWIND_STOP_MAX_FRAMES;
	interp->perl.cop = perl_buf_u64(interp, perl->cx_blk_oldcop);
	return STEP_CONTINUE;
}

/* The next runops frame takes the next stack info; none is left once
 * the walk is done (the top level recorded): it stays native. */
static __always_inline bool perl_enter(struct interp_state *interp)
{
	return interp->perl.si != 0;
}

/* Runs the rest of a sample whose stack reached Perl's op loop: Perl
 * frames in place of its runs, native frames around them. `progs` is the
 * program array of the entry it runs under (perf_event or off-CPU). */
static __always_inline int perl_unwind_run(void *ctx, void *progs)
{
	return interpreter_unwind_run(ctx, progs, UNWINDER_PERL, perl_start, perl_step, perl_enter);
}

/* A thread exits: the perl unwinder keeps nothing per thread. */
static __always_inline void perl_forget_thread(u64 thread_key)
{
}
