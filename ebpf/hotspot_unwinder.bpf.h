/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The HotSpot unwinder: records the Java frames a JVM thread runs, in
 * place of the code of the JVM's code cache (anonymous memory without
 * unwind tables), so that native frames above and below (the JVM's own
 * C++ code, JNI libraries, the launcher, libc) stay where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges of a JVM's
 * code cache (MAPPING_KIND_NO_UNWIND_INFO, MAPPING_FLAG_INTERPRETER_LOOP,
 * unwinder UNWINDER_HOTSPOT) and puts what this unwinder needs of the
 * process in hotspot_processes[tgid] (struct hotspot_process: read from
 * the JVM's vmStructs tables by crates/interpreters/src/hotspot). When
 * the native unwinder reaches a pc in the code cache it tail-calls
 * hotspot_unwind, which unwinds Java frames while the pc stays in the
 * code cache, then tail-calls the native unwinder again:
 *
 *  - a pc in the template interpreter (AbstractInterpreter::_code's
 *    buffer) is an interpreted frame: its Method* and bcp are in the
 *    frame's slots below fp; the frame word is the Method* and the
 *    bytecode index (bcp - the ConstMethod's bytecodes). Its caller:
 *    pc = [fp + 8], fp = [fp], sp = the sender sp slot.
 *  - StubRoutines::_call_stub_return_address is the entry frame (C
 *    called Java through the call stub, an rbp frame): its caller is
 *    native code, pc = [fp + 8], sp = fp + 16, fp = [fp]; not recorded.
 *  - any other pc: the CodeBlob holding it, found through its code
 *    heap's segment map (at most HOTSPOT_SEGMAP_STEPS steps back); the
 *    frame word is the pc (its offset in the code cache) and the blob's
 *    mark (the low bits of its compile id, checked again when naming;
 *    user space finds the blob again, tells nmethods from stubs, and
 *    names the methods inlined at the pc). A return address patched to
 *    the nmethod's deoptimisation handler stands for the pc saved in the
 *    frame (at sp + _orig_pc_offset): the word carries that pc. Its
 *    caller: sp = sp + 8 * CodeBlob::_frame_size, the return address and
 *    the saved rbp in the two words below.
 *
 * Anything that cannot be followed ends the stack (UNWIND_STOP_HOTSPOT,
 * with a COUNTER_HOTSPOT_* reason): the frames so far are kept.
 */

/* Java frames unwound per program run. */
#define HOTSPOT_FRAMES_PER_PROGRAM 12
/* Segment map steps to a blob's first segment: each step goes back at
 * most 254 segments (of 64 or 128 bytes), so 32 steps cover blobs of at
 * least 500 KiB; the interpreter, the largest, is not looked up so. */
#define HOTSPOT_SEGMAP_STEPS 32

/* Step result: the pc left the code cache, the native unwinder goes on. */
#define STEP_HOTSPOT_NATIVE 0xfd

/* The slot `slot` (words from fp) of the interpreted frame read in
 * interp->slots, or 0 if user space gave a slot outside them. */
static __always_inline u64 hotspot_slot(struct interp_state *interp, s32 slot)
{
	u32 index = (u32)(slot - HOTSPOT_LOWEST_SLOT);
	if (index >= HOTSPOT_FRAME_SLOTS)
		return 0;
	return interp->slots[index];
}

/* Appends a HotSpot frame word; false when the stack is full. */
static __always_inline bool hotspot_record(struct sample_record *record, u64 word)
{
	struct sample_event *event = &record->event;
	u32 n = event->user_frames;
	if (n >= MAX_USER_FRAMES)
		return false;
	u32 slot = event->kernel_frames + n;
	if (slot >= MAX_KERNEL_FRAMES + MAX_USER_FRAMES)
		return false;
	event->frames[slot] = word;
	event->user_frames = n + 1;
	count(COUNTER_HOTSPOT_FRAMES);
	return true;
}

/* An interpreted frame's word: `method` (8-aligned, below 2^47, else
 * encoded as 0) and `bci` (clamped). */
static __always_inline u64 hotspot_word(u64 method, u64 bci)
{
	u64 bits = (method & 7) || (method >> 47) ? 0 : method >> 3;
	if (bci > HOTSPOT_FRAME_OFFSET_MAX)
		bci = HOTSPOT_FRAME_OFFSET_MAX;
	return FRAME_INTERPRETED | FRAME_HOTSPOT | (bci << HOTSPOT_FRAME_OFFSET_SHIFT) | bits;
}

/* A compiled frame's word: `pc`'s offset in the code cache (0 if it is
 * not in it), whether it is the sampled instruction, and the blob's
 * mark (ebpf/types.h). */
static __always_inline u64 hotspot_compiled_word(struct hotspot_process *jvm, u64 pc, bool exact, u32 mark)
{
	u64 offset = pc - jvm->code_low;
	if (pc < jvm->code_low || offset > HOTSPOT_CODE_OFFSET_MAX)
		offset = 0;
	u64 low = mark & 0xffff;
	u64 high = (mark >> 16) & ((1U << (HOTSPOT_MARK_BITS - 16)) - 1);
	return FRAME_INTERPRETED | FRAME_HOTSPOT | FRAME_HOTSPOT_COMPILED | (low << HOTSPOT_FRAME_OFFSET_SHIFT) |
	       (high << HOTSPOT_MARK_HIGH_SHIFT) | (exact ? HOTSPOT_PC_EXACT : 0) | offset;
}

/* The pc a compiled frame at sp stands for, when `return_address` is its
 * nmethod's deoptimisation handler (the JVM patched it so that the frame
 * is deoptimised when its callee returns; the frame's own pc was saved
 * in it, at _orig_pc_offset bytes above its sp); else 0. */
static __always_inline u64 hotspot_deopt_pc(struct hotspot_process *jvm, u64 blob, u64 return_address, u64 sp)
{
	if (!jvm->nmethod_deopt_handler)
		return 0;
	u64 handler = 0;
	if (jvm->deopt_handler_is_offset) {
		u32 offset = 0;
		if (bpf_probe_read_user(&offset, sizeof(offset), (const void *)(blob + jvm->nmethod_deopt_handler)))
			return 0;
		handler = blob + offset;
	} else if (read_user_u64(&handler, blob + jvm->nmethod_deopt_handler)) {
		return 0;
	}
	if (handler != return_address)
		return 0;
	s32 orig_pc_offset = 0;
	u64 pc = 0;
	if (bpf_probe_read_user(&orig_pc_offset, sizeof(orig_pc_offset),
				(const void *)(blob + jvm->nmethod_orig_pc_offset)) ||
	    orig_pc_offset < 0 || orig_pc_offset > (1 << 20) || read_user_u64(&pc, sp + (u64)orig_pc_offset) ||
	    pc <= blob) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return 0;
	}
	count(COUNTER_HOTSPOT_DEOPT_FRAMES);
	return pc;
}

/* The CodeBlob holding `pc`, through its heap's segment map; 0 if none. */
static __always_inline u64 hotspot_find_blob(struct hotspot_process *jvm, u64 pc)
{
	u64 low = 0, segmap = 0;
	u32 log2 = 0;
	for (int i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		if ((u32)i >= jvm->heap_count)
			break;
		struct hotspot_heap *heap = &jvm->heaps[i];
		if (pc >= heap->low && pc < heap->high) {
			low = heap->low;
			segmap = heap->segmap;
			log2 = heap->log2_segment_size & 31;
			break;
		}
	}
	if (!segmap)
		return 0;
	u64 segment = (pc - low) >> log2;
	for (int i = 0; i < HOTSPOT_SEGMAP_STEPS; i++) {
		u8 step = 0xff;
		if (bpf_probe_read_user(&step, 1, (const void *)(segmap + segment)))
			return 0;
		if (step == 0xff)
			return 0;
		if (step == 0) {
			u64 block = low + (segment << log2);
			u8 used = 0;
			if (bpf_probe_read_user(&used, 1, (const void *)(block + jvm->heap_block_used)) || !used)
				return 0;
			return block + jvm->heap_block_size;
		}
		if (segment < step)
			return 0;
		segment -= step;
	}
	return 0;
}

/* The code cache's bounds and heaps: from the entry, or read from the
 * JVM once they are set (while it starts) and stored in the entry. False
 * when they are not set yet. */
static __always_inline bool hotspot_code_cache(struct hotspot_process *jvm)
{
	if (jvm->code_low && jvm->heap_count)
		return true;
	u64 low = 0, high = 0, array = 0, data = 0;
	s32 len = 0;
	if (read_user_u64(&low, jvm->code_low_bound) || read_user_u64(&high, jvm->code_high_bound) || !low ||
	    high <= low)
		return false;
	if (read_user_u64(&array, jvm->code_heaps) || !array)
		return false;
	if (bpf_probe_read_user(&len, sizeof(len), (const void *)(array + jvm->growable_array_len)) || len <= 0)
		return false;
	if (read_user_u64(&data, array + jvm->growable_array_data) || !data)
		return false;
	u32 count = 0;
	for (int i = 0; i < HOTSPOT_MAX_HEAPS; i++) {
		if (i >= len)
			break;
		u64 heap = 0, heap_low = 0, heap_high = 0, segmap = 0;
		s32 log2 = 0;
		if (read_user_u64(&heap, data + 8 * i) || !heap)
			return false;
		if (read_user_u64(&heap_low, heap + jvm->code_heap_memory + jvm->virtual_space_low) ||
		    read_user_u64(&heap_high, heap + jvm->code_heap_memory + jvm->virtual_space_high) ||
		    read_user_u64(&segmap, heap + jvm->code_heap_segmap + jvm->virtual_space_low) ||
		    bpf_probe_read_user(&log2, sizeof(log2), (const void *)(heap + jvm->code_heap_log2_segment_size)))
			return false;
		if (log2 < 4 || log2 > 20 || heap_low >= heap_high || !segmap)
			return false;
		jvm->heaps[i].low = heap_low;
		jvm->heaps[i].high = heap_high;
		jvm->heaps[i].segmap = segmap;
		jvm->heaps[i].log2_segment_size = log2;
		count++;
	}
	jvm->code_low = low;
	jvm->code_high = high;
	jvm->heap_count = count;
	return true;
}

/* An interpreted frame at fp. */
static __always_inline int hotspot_interpreted(struct sample_record *record, struct hotspot_process *jvm)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 fp = state->fp;
	if (bpf_probe_read_user(interp->slots, sizeof(interp->slots),
				(const void *)(fp + 8 * HOTSPOT_LOWEST_SLOT))) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_HOTSPOT;
	}
	u64 method = hotspot_slot(interp, jvm->interp_method_slot);
	u64 bcp = hotspot_slot(interp, jvm->interp_bcp_slot);
	u64 sender_sp = hotspot_slot(interp, jvm->interp_sender_sp_slot);
	u64 caller_fp = hotspot_slot(interp, 0);
	u64 return_address = hotspot_slot(interp, 1);
	u64 bci = HOTSPOT_NO_BCI;
	u64 const_method = 0;
	if (method && !read_user_u64(&const_method, method + jvm->method_const_method)) {
		u64 codes = const_method + jvm->const_method_size;
		if (bcp >= codes && bcp - codes < HOTSPOT_NO_BCI)
			bci = bcp - codes;
	}
	if (!hotspot_record(record, hotspot_word(method, bci)))
		return UNWIND_STOP_MAX_FRAMES;
	if (sender_sp <= state->sp || caller_fp <= fp || return_address == 0) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_HOTSPOT;
	}
	state->pc = return_address;
	state->sp = sender_sp;
	state->fp = caller_fp;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* A compiled frame (or a stub's) in the blob at `blob`. */
static __always_inline int hotspot_compiled(struct sample_record *record, struct hotspot_process *jvm, u64 blob)
{
	struct unwind_state *state = &record->state;
	s32 frame_size = 0;
	if (bpf_probe_read_user(&frame_size, sizeof(frame_size), (const void *)(blob + jvm->blob_frame_size))) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_HOTSPOT;
	}
	u32 mark = 0;
	bpf_probe_read_user(&mark, sizeof(mark), (const void *)(blob + jvm->nmethod_compile_id));
	u64 pc = state->pc;
	if (!state->exact) {
		u64 saved = hotspot_deopt_pc(jvm, blob, pc, state->sp);
		if (saved)
			pc = saved;
	}
	if (!hotspot_record(record, hotspot_compiled_word(jvm, pc, state->exact, mark)))
		return UNWIND_STOP_MAX_FRAMES;
	if (frame_size < 0 || frame_size > (1 << 16)) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_HOTSPOT;
	}
	/* A frame of 0 words: a leaf stub that pushed nothing. */
	u64 caller_sp = state->sp + 8 * (frame_size ? (u64)frame_size : 1);
	u64 words[2] = {};
	if (frame_size >= 2) {
		if (bpf_probe_read_user(words, sizeof(words), (const void *)(caller_sp - 16))) {
			count(COUNTER_HOTSPOT_READ_ERRORS);
			return UNWIND_STOP_HOTSPOT;
		}
		state->fp = words[0];
	} else if (read_user_u64(&words[1], caller_sp - 8)) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_HOTSPOT;
	}
	if (words[1] == 0) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_HOTSPOT;
	}
	state->pc = words[1];
	state->sp = caller_sp;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* Unwinds one frame at a pc in the code cache. Returns STEP_CONTINUE,
 * STEP_HOTSPOT_NATIVE when the caller is native code, or an
 * unwind_stop reason. */
static __always_inline int hotspot_step(struct sample_record *record, struct hotspot_process *jvm)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 pc = state->pc;
	if (pc == interp->call_stub_return && pc) {
		/* The entry frame: C called Java here. */
		u64 words[2];
		if (bpf_probe_read_user(words, sizeof(words), (const void *)state->fp)) {
			count(COUNTER_HOTSPOT_READ_ERRORS);
			return UNWIND_STOP_HOTSPOT;
		}
		if (state->fp + 16 <= state->sp || words[1] == 0) {
			count(COUNTER_HOTSPOT_BAD_FRAMES);
			return UNWIND_STOP_HOTSPOT;
		}
		state->sp = state->fp + 16;
		state->fp = words[0];
		state->pc = words[1];
		state->exact = 0;
		return STEP_HOTSPOT_NATIVE;
	}
	if (pc >= interp->interpreter_low && pc < interp->interpreter_high)
		return hotspot_interpreted(record, jvm);
	u64 blob = hotspot_find_blob(jvm, state->exact ? pc : pc - 1);
	if (!blob) {
		count(COUNTER_HOTSPOT_NO_BLOB);
		return UNWIND_STOP_HOTSPOT;
	}
	return hotspot_compiled(record, jvm, blob);
}

/* Runs the Java frames of a sample whose stack reached the code cache,
 * then hands back to the native unwinder; `progs` is the program array
 * of the entry it runs under (perf_event or off-CPU tp_btf). */
static __always_inline int hotspot_unwind_run(void *ctx, void *progs)
{
	u32 zero = 0;
	struct sample_record *record = bpf_map_lookup_elem(&scratch, &zero);
	if (!record)
		return 0;
	struct interp_state *interp = &record->interp;
	struct unwind_state *state = &record->state;
	u32 tgid = record->event.pid;
	/* A hand-over, or this program going on (in_loop is clear at a
	 * hand-over, and set by this program before it calls itself). */
	bool fresh = !interp->in_loop;
	interp->in_loop = 0;
	struct hotspot_process *jvm = bpf_map_lookup_elem(&hotspot_processes, &tgid);
	if (!jvm || !hotspot_code_cache(jvm)) {
		/* Not attached, or its code cache not set, yet: the code
		 * stays memory without unwind tables. */
		count(COUNTER_HOTSPOT_NO_PROCESS);
		interp->next = INTERP_NEXT_NATIVE;
		goto call_native;
	}
	/* Set while the JVM starts: read at each run. */
	interp->interpreter_low = 0;
	interp->interpreter_high = 0;
	interp->call_stub_return = 0;
	u64 queue = 0;
	if (!read_user_u64(&queue, jvm->interpreter_code) && queue) {
		u64 buffer = 0;
		s32 limit = 0;
		if (!read_user_u64(&buffer, queue + jvm->stub_queue_buffer) &&
		    !bpf_probe_read_user(&limit, sizeof(limit), (const void *)(queue + jvm->stub_queue_limit)) &&
		    limit > 0) {
			interp->interpreter_low = buffer;
			interp->interpreter_high = buffer + (u32)limit;
		}
	}
	read_user_u64(&interp->call_stub_return, jvm->call_stub_return);

	for (int i = 0; i < HOTSPOT_FRAMES_PER_PROGRAM; i++) {
		if (state->pc < jvm->code_low || state->pc >= jvm->code_high) {
			if (i == 0 && fresh) {
				/* Handed memory that is not the code cache (user
				 * space marks every anonymous code of a JVM until
				 * it knows the cache): it stays native. */
				interp->next = INTERP_NEXT_NATIVE;
				goto call_native;
			}
			goto native;
		}
		int result = hotspot_step(record, jvm);
		if (result == STEP_HOTSPOT_NATIVE)
			goto native;
		if (result != STEP_CONTINUE) {
			send_sample(&record->event, result);
			return 0;
		}
	}
	/* This program goes on (the sample's next begin_sample clears
	 * in_loop if it cannot). */
	interp->in_loop = 1;
	unwinder_run_again(ctx, progs, record, UNWINDER_HOTSPOT);
	return 0;

native:
	/* The next frame is native code (or, when the JVM is not attached,
	 * the code cache seen as memory without unwind tables). */
	interp->next = INTERP_NEXT_HAND_OVER;
call_native:
	unwinder_tail_call(ctx, progs, record, UNWINDER_NATIVE);
	return 0;
}
