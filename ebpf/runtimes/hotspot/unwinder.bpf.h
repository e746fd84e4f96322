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
 * code cache, then tail-calls the native unwinder again (the driver:
 * jit_driver.bpf.h):
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
 * Anything that cannot be followed ends the stack (UNWIND_STOP_RUNTIME_CODE,
 * with a COUNTER_HOTSPOT_* reason): the frames so far are kept.
 */

/* Segment map steps to a blob's first segment: each step goes back at
 * most 254 segments (of 64 or 128 bytes), so 32 steps cover blobs of at
 * least 500 KiB; the interpreter, the largest, is not looked up so. */
#define HOTSPOT_SEGMAP_STEPS 32

/* The slot `slot` (words from fp) of the interpreted frame read in
 * interp->hotspot.slots, or 0 if user space gave a slot outside them. */
static __always_inline u64 hotspot_slot(struct interp_state *interp, s32 slot)
{
	u32 index = (u32)(slot - HOTSPOT_LOWEST_SLOT);
	if (index >= HOTSPOT_FRAME_SLOTS)
		return 0;
	return interp->hotspot.slots[index];
}

/* Appends a HotSpot frame word; false when the stack is full. */
static __always_inline bool hotspot_record(struct sample_record *record, u64 word)
{
	if (!append_user_frame(&record->event, word))
		return false;
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
	return frame_word_interpreted(UNWINDER_HOTSPOT, (bci << HOTSPOT_FRAME_OFFSET_SHIFT) | bits);
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
	return frame_word_interpreted(UNWINDER_HOTSPOT, HOTSPOT_FRAME_COMPILED | (low << HOTSPOT_FRAME_OFFSET_SHIFT) |
							  (high << HOTSPOT_MARK_HIGH_SHIFT) |
							  (exact ? HOTSPOT_PC_EXACT : 0) | offset);
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
	if (bpf_probe_read_user(interp->hotspot.slots, sizeof(interp->hotspot.slots),
				(const void *)(fp + 8 * HOTSPOT_LOWEST_SLOT))) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_RUNTIME_CODE;
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
	/* The saved rbp is checked by no one: a compiled caller (C2 uses rbp
	 * as any other register) may have left any value there. */
	if (sender_sp <= state->sp || return_address == 0) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	state->pc = return_address;
	state->sp = sender_sp;
	state->fp = caller_fp;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* Where a compiled frame's caller is, by what the frame's code has done
 * at its pc (hotspot_leaf_shape). Only the sampled pc (the leaf) can be
 * in an entry, a prologue or an epilogue: a return address is always in
 * a built frame. */
enum hotspot_shape {
	/* The frame is built: its blob's _frame_size gives the caller. */
	HOTSPOT_SHAPE_FRAME = 0,
	/* Nothing pushed yet (entry, inline cache check, stack bang) or all
	 * popped (at the return, the return poll): the return address at sp,
	 * rbp still the caller's. */
	HOTSPOT_SHAPE_RETURN_AT_SP = 1,
	/* rbp pushed, nothing else (or all else popped): the caller's rbp at
	 * sp, the return address above it. */
	HOTSPOT_SHAPE_RBP_PUSHED = 2,
	/* The frame allocated, the caller's rbp not stored in it yet: sizes
	 * from _frame_size, rbp still the caller's. */
	HOTSPOT_SHAPE_FRAME_RBP_LIVE = 3,
	/* A stub without a frame size that set up rbp (enter()): the caller
	 * from rbp. */
	HOTSPOT_SHAPE_RBP_FRAME = 4,
	/* A prologue not recognised, or a stub without a frame size that
	 * does not set up rbp: stop (COUNTER_HOTSPOT_UNKNOWN_ENTRY). */
	HOTSPOT_SHAPE_UNKNOWN = 5,
	/* A stub whose return address was found (and checked against the
	 * call before it) at sp + 8 * interp.hotspot.leaf_slot, its caller's pushed
	 * arguments (interp.hotspot.leaf_pushed words) above it; rbp the caller's,
	 * or at sp (interp.hotspot.leaf_fp_at_sp). */
	HOTSPOT_SHAPE_STUB_SLOT = 6,
	/* StubRoutines' nmethod entry barrier with its rbp frame built: the
	 * caller's rbp at fp, the barrier's cookie at fp + 8, the return
	 * address at fp + 16. */
	HOTSPOT_SHAPE_BARRIER_FRAME = 7,
	/* The frame is built and has pushed interp.hotspot.leaf_pushed words of
	 * arguments for a call it makes or has just returned from (C1's
	 * calls of slow_subtype_check): its frame size counts from above
	 * them. */
	HOTSPOT_SHAPE_FRAME_PUSHED = 8,
};

/* Code bytes read at a time to recognise a prologue or an epilogue. */
#define HOTSPOT_CODE_WINDOW 64

/* The bytes of code scratch: the interpreted frame's slot buffer, unused
 * until the leaf is unwound. */
static __always_inline u8 *hotspot_code_buffer(struct sample_record *record)
{
	_Static_assert(sizeof(record->interp.hotspot.slots) >= HOTSPOT_CODE_WINDOW + 8, "code window");
	return (u8 *)record->interp.hotspot.slots;
}

static __always_inline bool hotspot_is_push(u8 b)
{
	return b >= 0x50 && b <= 0x57 && b != 0x54;
}

static __always_inline bool hotspot_is_pop_byte(u8 b)
{
	return b >= 0x58 && b <= 0x5f && b != 0x5c;
}

/* The length of the push or pop (r64, with or without REX.B) ending at
 * w[end], or 0. */
#define HOTSPOT_OP_ENDING(w, end, is_op) (is_op((w)[(end) - 1]) ? ((w)[(end) - 2] == 0x41 ? 2 : 1) : 0)

/* Whether the call rel32 at w[at] (5 bytes, at `pc`) calls code in the
 * code cache (a stub). */
static __always_inline bool hotspot_calls_stub(struct hotspot_process *jvm, const u8 *w, u32 at, u64 pc)
{
	if (w[at & 15] != 0xe8)
		return false;
	s32 rel = (s32)((u32)w[(at + 1) & 15] | (u32)w[(at + 2) & 15] << 8 | (u32)w[(at + 3) & 15] << 16 |
			(u32)w[(at + 4) & 15] << 24);
	u64 target = pc + 5 + (s64)rel;
	return target >= jvm->code_low && target < jvm->code_high;
}

/* A built compiled frame at `pc` that may have pushed a call's arguments
 * (C1: push, push, call slow_subtype_check, pop, pop): the words pushed
 * at pc (interp.hotspot.leaf_pushed) and HOTSPOT_SHAPE_FRAME_PUSHED, else
 * HOTSPOT_SHAPE_FRAME. */
static __always_inline int hotspot_arguments_shape(struct sample_record *record, struct hotspot_process *jvm, u64 pc)
{
	u8 w[16] = {};
	if (bpf_probe_read_user(w, sizeof(w), (const void *)(pc - 8)))
		return HOTSPOT_SHAPE_FRAME;
	u32 pushed = 0;
	u32 last = HOTSPOT_OP_ENDING(w, 8, hotspot_is_push);
	u32 first = 0;
	if (last == 1)
		first = HOTSPOT_OP_ENDING(w, 7, hotspot_is_push);
	else if (last == 2)
		first = HOTSPOT_OP_ENDING(w, 6, hotspot_is_push);
	if (last && hotspot_calls_stub(jvm, w, 8, pc)) {
		/* At the call: both pushes done (or one). */
		pushed = first ? 2 : 1;
	} else if (last && hotspot_is_push(w[8]) && hotspot_calls_stub(jvm, w, 9, pc + 1)) {
		/* At the second push. */
		pushed = 1;
	} else if (last && w[8] == 0x41 && hotspot_is_push(w[9]) && hotspot_calls_stub(jvm, w, 10, pc + 2)) {
		pushed = 1;
	} else {
		bool pop_here = hotspot_is_pop_byte(w[8]) || (w[8] == 0x41 && hotspot_is_pop_byte(w[9]));
		u32 here = hotspot_is_pop_byte(w[8]) ? 1 : 2;
		bool pop_next = here == 1 ? (hotspot_is_pop_byte(w[9]) || (w[9] == 0x41 && hotspot_is_pop_byte(w[10])))
					  : (hotspot_is_pop_byte(w[10]) || (w[10] == 0x41 && hotspot_is_pop_byte(w[11])));
		u32 popped = HOTSPOT_OP_ENDING(w, 8, hotspot_is_pop_byte);
		if (!pop_here)
			return HOTSPOT_SHAPE_FRAME;
		if (hotspot_calls_stub(jvm, w, 3, pc - 5))
			/* Right after the call: the pops to come. */
			pushed = pop_next ? 2 : 1;
		else if ((popped == 1 && hotspot_calls_stub(jvm, w, 2, pc - 6)) ||
			 (popped == 2 && hotspot_calls_stub(jvm, w, 1, pc - 7)))
			/* At the second pop. */
			pushed = 1;
	}
	if (!pushed)
		return HOTSPOT_SHAPE_FRAME;
	record->interp.hotspot.leaf_pushed = pushed;
	return HOTSPOT_SHAPE_FRAME_PUSHED;
}

/* The shape of the leaf frame at `pc` in the blob at `blob` when its pc
 * is past the frame's completion (or the blob has none): its epilogue,
 * from the instructions at pc. The epilogue of compiled code (C1, C2,
 * native wrappers) is [vzeroupper] add rsp,N (or leave) pop rbp, the
 * return poll (cmp rsp,[r15+poll]; ja stub; JDK 11: test of the polling
 * page) and ret. */
static __always_inline int hotspot_epilogue_shape(struct sample_record *record, struct hotspot_process *jvm, u64 pc)
{
	u8 *code = hotspot_code_buffer(record);
	if (bpf_probe_read_user(code, 16, (const void *)pc))
		return HOTSPOT_SHAPE_FRAME;
	u8 b0 = code[0], b1 = code[1], b2 = code[2];
	if (b0 == 0xc3 || b0 == 0xc2) /* ret */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	if (b0 == 0x5d) /* pop rbp */
		return HOTSPOT_SHAPE_RBP_PUSHED;
	if (b0 == 0x49 && b1 == 0x3b && (b2 == 0xa7 || b2 == 0x67)) /* cmp rsp,[r15+poll] */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	if ((b0 == 0x0f && b1 == 0x87 && code[6] == 0xc3) || (b0 == 0x77 && b2 == 0xc3)) /* ja stub; ret */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	if (b0 == 0x85 && b1 == 0x05 && code[6] == 0xc3) /* test eax,[rip+page]; ret */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	if (b0 == 0x41 && b1 == 0x85 && b2 == 0x02 && code[3] == 0xc3) /* test eax,[r10]; ret */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	if (b0 == 0x4d && b1 == 0x8b && b2 == 0x97 && code[7] == 0x41 && code[8] == 0x85 && code[9] == 0x02 &&
	    code[10] == 0xc3) /* mov r10,[r15+poll]; test eax,[r10]; ret */
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	return hotspot_arguments_shape(record, jvm, pc);
}

/* Whether the code at `at` in the window is a stack bang,
 * mov [rsp-N],eax; its length, else 0. */
static __always_inline u32 hotspot_bang_length(u8 *code, u32 at)
{
	u8 b0 = code[at & (HOTSPOT_CODE_WINDOW - 1)], b1 = code[(at + 1) & (HOTSPOT_CODE_WINDOW - 1)],
	   b2 = code[(at + 2) & (HOTSPOT_CODE_WINDOW - 1)];
	if (b0 != 0x89 || b2 != 0x24)
		return 0;
	return b1 == 0x84 ? 7 : b1 == 0x44 ? 4 : 0;
}

/* The shape of a frame whose pc lies in its prologue, from `start` (the
 * verified entry, or a stub's first instruction). The prologues of
 * compiled code on x86-64 are one of two templates, matched from start
 * without a loop (each step at most once or thrice: the verifier follows
 * every combination):
 *  - the stack bang(s) (mov [rsp-N],eax), push rbp, [mov rbp,rsp],
 *    [sub rsp,N]: C1, C2 when it bangs the stack, native wrappers, stubs'
 *    enter();
 *  - sub rsp,imm32 then mov [rsp+N],rbp: C2 without a stack bang (small
 *    leaf methods).
 * Anything else is not guessed. */
static __always_inline int hotspot_prologue_shape(struct sample_record *record, u64 start, u64 pc, bool sized)
{
	u8 *code = hotspot_code_buffer(record);
	if (bpf_probe_read_user(code, HOTSPOT_CODE_WINDOW, (const void *)start))
		return HOTSPOT_SHAPE_UNKNOWN;
	u64 d = pc - start;
	u32 at = 0;
	/* Nothing has run yet (whatever the entry is: a patched one jumps
	 * away). */
	if (d == 0)
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	/* Template 2: sub rsp,imm32; mov [rsp+disp8|disp32],rbp. */
	if (code[0] == 0x48 && code[1] == 0x81 && code[2] == 0xec && code[7] == 0x48 && code[8] == 0x89 &&
	    (code[9] == 0x6c || code[9] == 0xac) && code[10] == 0x24) {
		u32 end = code[9] == 0x6c ? 12 : 15;
		return d < end ? HOTSPOT_SHAPE_FRAME_RBP_LIVE : HOTSPOT_SHAPE_FRAME;
	}
	/* Template 1. */
	at += hotspot_bang_length(code, at);
	at += hotspot_bang_length(code, at);
	at += hotspot_bang_length(code, at);
	if (code[at & (HOTSPOT_CODE_WINDOW - 1)] != 0x55)
		return HOTSPOT_SHAPE_UNKNOWN;
	if (d <= at)
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	at += 1;
	bool framed = false;
	/* mov rbp,rsp: 48 8b ec as HotSpot's assembler writes it, or 48 89 e5. */
	u8 m1 = code[(at + 1) & (HOTSPOT_CODE_WINDOW - 1)], m2 = code[(at + 2) & (HOTSPOT_CODE_WINDOW - 1)];
	if (code[at & (HOTSPOT_CODE_WINDOW - 1)] == 0x48 && ((m1 == 0x8b && m2 == 0xec) || (m1 == 0x89 && m2 == 0xe5))) {
		at += 3;
		framed = true;
	}
	if (code[at & (HOTSPOT_CODE_WINDOW - 1)] == 0x48 && code[(at + 2) & (HOTSPOT_CODE_WINDOW - 1)] == 0xec) {
		u8 op = code[(at + 1) & (HOTSPOT_CODE_WINDOW - 1)];
		at += op == 0x83 ? 4 : op == 0x81 ? 7 : 0;
	}
	/* Until the frame is allocated, only rbp is pushed (and may be the
	 * frame pointer already). */
	if (d < at)
		return HOTSPOT_SHAPE_RBP_PUSHED;
	if (!sized)
		return framed ? HOTSPOT_SHAPE_RBP_FRAME : HOTSPOT_SHAPE_UNKNOWN;
	return HOTSPOT_SHAPE_FRAME;
}

/* The start of the blob's code; 0 if it cannot be read. */
static __always_inline u64 hotspot_code_begin(struct hotspot_process *jvm, u64 blob)
{
	u64 begin = 0;
	if (jvm->code_flags & HOTSPOT_CODE_OFFSETS) {
		s32 offset = 0;
		if (bpf_probe_read_user(&offset, sizeof(offset), (const void *)(blob + jvm->blob_code_begin)) ||
		    offset <= 0)
			return 0;
		begin = blob + (u32)offset;
	} else if (read_user_u64(&begin, blob + jvm->blob_code_begin)) {
		return 0;
	}
	return begin > blob ? begin : 0;
}

/* Whether a stub without a frame size (_frame_size < 0) starts with
 * enter() (push rbp; mov rbp,rsp), so that rbp is its frame pointer: C1's
 * runtime stubs that call into the VM or are GC barriers do; others
 * (slow_subtype_check, unwind_exception) push registers or nothing and
 * cannot be unwound. */
static __always_inline bool hotspot_stub_enters(struct hotspot_process *jvm, u64 blob)
{
	u64 begin = hotspot_code_begin(jvm, blob);
	u8 code[4] = {};
	if (!begin || bpf_probe_read_user(code, sizeof(code), (const void *)begin))
		return false;
	return code[0] == 0x55 && code[1] == 0x48 &&
	       ((code[2] == 0x8b && code[3] == 0xec) || (code[2] == 0x89 && code[3] == 0xe5));
}

/* The longest stub whose frame is recognised from its first
 * instructions (StubRoutines' nmethod entry barrier: 429 bytes on JDK
 * 25). */
#define HOTSPOT_STUB_MAX 4096
/* Stack words searched for the return address of a C1 runtime stub that
 * pushes registers (slow_subtype_check: 4 registers, then 4 words). */
#define HOTSPOT_STUB_SCAN 9

/* The target of the call that ends just before `ret`: `call rel32` (C1,
 * the stubs, C2's calls within the code cache) or `mov r10,imm64; call
 * r10` (C2's runtime calls); 0 for any other code. */
static __always_inline u64 hotspot_call_target(u64 ret)
{
	u8 c[16] = {};
	if (bpf_probe_read_user(c, 13, (const void *)(ret - 13)))
		return 0;
	if (c[8] == 0xe8) {
		s32 rel = (s32)((u32)c[9] | (u32)c[10] << 8 | (u32)c[11] << 16 | (u32)c[12] << 24);
		return ret + (s64)rel;
	}
	if (c[0] == 0x49 && c[1] == 0xba && c[10] == 0x41 && c[11] == 0xff && c[12] == 0xd2) {
		u64 target = 0;
		__builtin_memcpy(&target, &c[2], 8);
		return target;
	}
	return 0;
}

/* Whether the code at `at` is StubRoutines' nmethod entry barrier (push
 * -1, a cookie it overwrites to deoptimise the caller, then enter():
 * push rbp; mov rbp,rsp) or, with !barrier, a stub that starts with
 * enter(). */
static __always_inline bool hotspot_stub_starts(u64 at, bool barrier)
{
	u8 c[16] = {};
	if (bpf_probe_read_user(c, 9, (const void *)at))
		return false;
	if (barrier)
		return c[0] == 0x68 && c[1] == 0xff && c[2] == 0xff && c[3] == 0xff && c[4] == 0xff && c[5] == 0x55 &&
		       c[6] == 0x48 && ((c[7] == 0x8b && c[8] == 0xec) || (c[7] == 0x89 && c[8] == 0xe5));
	return c[0] == 0x55 && c[1] == 0x48 && ((c[2] == 0x8b && c[3] == 0xec) || (c[2] == 0x89 && c[3] == 0xe5));
}

/* Whether `ret` returns from a call to a stub of the blob (from `begin`)
 * near `pc` that starts with the barrier's or enter()'s code. The stub
 * may lie after pc: a conjoint arraycopy stub builds its frame, then
 * jumps into the disjoint one, generated before it. */
static __always_inline bool hotspot_returns_from(u64 ret, u64 begin, u64 pc, bool barrier)
{
	u64 target = hotspot_call_target(ret);
	return target && target >= begin &&
	       (target <= pc ? pc - target < HOTSPOT_STUB_MAX : target - pc < HOTSPOT_STUB_MAX) &&
	       hotspot_stub_starts(target, barrier);
}

/* The shape of a frame at `pc` in a blob whose frame size (0) is not its
 * stubs' (the StubRoutines blobs: one blob, many stubs): a stub that
 * built an rbp frame (enter(), or the nmethod entry barrier's cookie and
 * enter()) when the return address that frame gives returns from a call
 * to such a stub in this blob; else nothing pushed (the return address
 * at sp), as for vtable stubs and adapters. For the sampled pc, the
 * instructions around it tell a frame being built or torn down. */
static __always_inline int hotspot_stub_shape(struct sample_record *record, struct hotspot_process *jvm, u64 blob,
					      u64 pc, bool exact)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 begin = hotspot_code_begin(jvm, blob);
	if (!begin)
		return HOTSPOT_SHAPE_FRAME;
	u64 words[3] = {};
	if (state->fp >= state->sp && state->fp - state->sp < (1 << 16) &&
	    !bpf_probe_read_user(words, sizeof(words), (const void *)state->fp)) {
		if (hotspot_returns_from(words[2], begin, pc, true)) {
			count(COUNTER_HOTSPOT_STUB_FRAMES);
			return HOTSPOT_SHAPE_BARRIER_FRAME;
		}
		if (hotspot_returns_from(words[1], begin, pc, false)) {
			count(COUNTER_HOTSPOT_STUB_FRAMES);
			return HOTSPOT_SHAPE_RBP_FRAME;
		}
	}
	if (!exact)
		return HOTSPOT_SHAPE_FRAME;
	/* The instructions before and at pc: 8 bytes each. */
	u8 w[16] = {};
	if (bpf_probe_read_user(w, sizeof(w), (const void *)(pc - 8)))
		return HOTSPOT_SHAPE_FRAME;
	bool cookie = w[3] == 0x68 && w[4] == 0xff && w[5] == 0xff && w[6] == 0xff && w[7] == 0xff;
	bool cookie_before_push = w[2] == 0x68 && w[3] == 0xff && w[4] == 0xff && w[5] == 0xff && w[6] == 0xff;
	u32 slot = 0;
	bool fp_at_sp = false, barrier = true;
	u64 start = 0;
	if (cookie && w[8] == 0x55) {
		/* The barrier's cookie pushed. */
		slot = 1;
		start = pc - 5;
	} else if (cookie_before_push && w[7] == 0x55 && w[8] == 0x48) {
		/* The barrier's cookie and rbp pushed. */
		slot = 2;
		fp_at_sp = true;
		start = pc - 6;
	} else if (w[7] == 0x55 && w[8] == 0x48 && ((w[9] == 0x8b && w[10] == 0xec) || (w[9] == 0x89 && w[10] == 0xe5))) {
		/* enter()'s push rbp done. */
		slot = 1;
		fp_at_sp = true;
		start = pc - 1;
		barrier = false;
	} else if (w[7] == 0xc9 && w[8] == 0x48 && w[9] == 0x83 && w[10] == 0xc4 && w[11] == 0x08 && w[12] == 0xc3) {
		/* The barrier after leave: the cookie left to pop. */
		slot = 1;
	} else {
		return HOTSPOT_SHAPE_FRAME;
	}
	u64 ret = 0;
	if (read_user_u64(&ret, state->sp + 8 * slot))
		return HOTSPOT_SHAPE_FRAME;
	u64 target = hotspot_call_target(ret);
	if (!target || (start ? target != start : !hotspot_returns_from(ret, begin, pc, barrier)))
		return HOTSPOT_SHAPE_FRAME;
	interp->hotspot.leaf_slot = slot;
	interp->hotspot.leaf_pushed = 0;
	interp->hotspot.leaf_fp_at_sp = fp_at_sp;
	count(COUNTER_HOTSPOT_STUB_FRAMES);
	return HOTSPOT_SHAPE_STUB_SLOT;
}

/* Caller words pushed as arguments before a call that returns to `ret`,
 * popped by the caller right after it (C1 calls slow_subtype_check
 * so: push, push, call, pop, pop): at most 2. */
static __always_inline bool hotspot_is_pop(u8 b)
{
	return b >= 0x58 && b <= 0x5f;
}

static __always_inline u32 hotspot_pushed_arguments(u64 ret)
{
	u8 c[4] = {};
	if (bpf_probe_read_user(c, sizeof(c), (const void *)ret))
		return 0;
	/* pop r64 (58+r), or with REX.B (41 58+r). */
	if (hotspot_is_pop(c[0]))
		return 1 + (hotspot_is_pop(c[1]) || (c[1] == 0x41 && hotspot_is_pop(c[2])));
	if (c[0] == 0x41 && hotspot_is_pop(c[1]))
		return 1 + (hotspot_is_pop(c[2]) || (c[2] == 0x41 && hotspot_is_pop(c[3])));
	return 0;
}

/* The shape of a frame in a C1 runtime stub without a frame size that
 * does not keep rbp (slow_subtype_check pushes registers;
 * unwind_exception is jumped to with the return address at sp). Sampled
 * in it: the first stack word that returns from a call to this very stub
 * (a runtime stub is one blob) is its return address; else, a stub that
 * was not called, the return address at sp, or above the word
 * call_VM_leaf pushes to align the stack. Returned to from the C++ it
 * called (a return address in it): that alignment word is there when
 * the next instruction removes it (add rsp,8). The word taken must be
 * in the code cache (a Java caller's); else the stack ends. */
static __always_inline int hotspot_pushing_stub_shape(struct sample_record *record, struct hotspot_process *jvm,
						      u64 blob, u64 pc, bool exact)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 begin = hotspot_code_begin(jvm, blob);
	if (!begin)
		return HOTSPOT_SHAPE_UNKNOWN;
	u64 *stack = interp->hotspot.slots;
	_Static_assert(sizeof(interp->hotspot.slots) >= 8 * HOTSPOT_STUB_SCAN, "stub scan");
	if (bpf_probe_read_user(stack, 8 * HOTSPOT_STUB_SCAN, (const void *)state->sp))
		return HOTSPOT_SHAPE_UNKNOWN;
	u32 slot = HOTSPOT_STUB_SCAN;
	if (exact) {
		for (u32 i = 0; i < HOTSPOT_STUB_SCAN; i++) {
			u64 word = stack[i];
			if (word < jvm->code_low || word >= jvm->code_high)
				continue;
			if (hotspot_call_target(word) == begin) {
				slot = i;
				break;
			}
		}
	}
	u32 pushed = 0;
	if (slot < HOTSPOT_STUB_SCAN) {
		pushed = hotspot_pushed_arguments(stack[slot < HOTSPOT_STUB_SCAN ? slot : 0]);
	} else {
		u8 code[4] = {};
		if (bpf_probe_read_user(code, sizeof(code), (const void *)pc))
			return HOTSPOT_SHAPE_UNKNOWN;
		/* jmp or call through a register: the stub leaves (its return
		 * address popped) or calls out. */
		if (code[0] == 0xff || (code[0] == 0x41 && code[1] == 0xff))
			return HOTSPOT_SHAPE_UNKNOWN;
		bool aligned = code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xc4 && code[3] == 0x08;
		slot = exact ? (stack[0] >= jvm->code_low && stack[0] < jvm->code_high ? 0 : 1) : (aligned ? 1 : 0);
		u64 word = stack[slot & 1];
		if (word < jvm->code_low || word >= jvm->code_high)
			return HOTSPOT_SHAPE_UNKNOWN;
	}
	interp->hotspot.leaf_slot = slot;
	interp->hotspot.leaf_pushed = pushed;
	interp->hotspot.leaf_fp_at_sp = 0;
	count(COUNTER_HOTSPOT_STUB_FRAMES);
	return HOTSPOT_SHAPE_STUB_SLOT;
}

/* The shape of the sampled (leaf) frame at `pc` in the blob at `blob`:
 * in an nmethod, a pc before its verified entry is in the inline cache
 * check (nothing pushed), one before _frame_complete_offset in its
 * prologue (decoded), any other may be in its epilogue. A stub without
 * a frame size (_frame_size < 0: C1's runtime stubs) is an rbp frame once
 * its enter() has run. */
static __always_inline int hotspot_leaf_shape(struct sample_record *record, struct hotspot_process *jvm, u64 blob,
					      u64 pc, s32 frame_size)
{
	/* A blob of 0 words (vtable stubs, method handle intrinsics,
	 * adapters) pushes nothing: its return address is at sp; unless it
	 * is one of StubRoutines' blobs, whose stubs may build frames. */
	if (frame_size == 0)
		return hotspot_stub_shape(record, jvm, blob, pc, true);
	if (frame_size < 0 && !hotspot_stub_enters(jvm, blob))
		return hotspot_pushing_stub_shape(record, jvm, blob, pc, true);
	u64 begin = hotspot_code_begin(jvm, blob);
	if (!begin)
		return HOTSPOT_SHAPE_UNKNOWN;
	s32 complete = -1;
	if (jvm->code_flags & HOTSPOT_FRAME_COMPLETE_16) {
		s16 value = -1;
		bpf_probe_read_user(&value, sizeof(value), (const void *)(blob + jvm->blob_frame_complete));
		complete = value;
	} else {
		bpf_probe_read_user(&complete, sizeof(complete), (const void *)(blob + jvm->blob_frame_complete));
	}
	if (pc < begin)
		return HOTSPOT_SHAPE_UNKNOWN;
	bool sized = frame_size >= 0;
	/* Past the frame's completion, or in a stub that never tells it (-1)
	 * beyond its first instructions: a built frame or an epilogue. */
	if ((complete > 0 && pc >= begin + (u32)complete) ||
	    (complete <= 0 && pc - begin >= HOTSPOT_CODE_WINDOW - 8))
		return hotspot_epilogue_shape(record, jvm, pc);
	if (complete <= 0) {
		/* A stub's first instructions: its prologue when it has the
		 * template (C1's runtime stubs), else as past it. */
		int shape = hotspot_prologue_shape(record, begin, pc, sized);
		return shape == HOTSPOT_SHAPE_UNKNOWN ? hotspot_epilogue_shape(record, jvm, pc) : shape;
	}
	/* The nmethod's verified entry: code before it is the inline cache
	 * check, which pushes nothing. */
	u64 start = begin;
	bool nmethod = false;
	if (jvm->code_flags & HOTSPOT_HAS_KIND) {
		u8 kind = 0;
		bpf_probe_read_user(&kind, 1, (const void *)(blob + jvm->blob_kind));
		nmethod = kind == jvm->blob_kind_nmethod;
	}
	u64 entry = 0;
	if (jvm->code_flags & HOTSPOT_ENTRY_OFFSETS) {
		u16 offset = 0;
		if (nmethod && !bpf_probe_read_user(&offset, sizeof(offset),
						    (const void *)(blob + jvm->nmethod_verified_entry)))
			entry = begin + offset;
	} else {
		read_user_u64(&entry, blob + jvm->nmethod_verified_entry);
	}
	/* JDK < 23 tells nmethods by name: a stub's bytes there are no
	 * entry inside its prologue. */
	if (complete > 0 && entry >= begin && entry < begin + (u32)complete)
		start = entry;
	if (pc < start)
		return HOTSPOT_SHAPE_RETURN_AT_SP;
	return hotspot_prologue_shape(record, start, pc, sized);
}

/* A compiled frame (or a stub's) in the blob at `blob`; the leaf's
 * shape (hotspot_leaf_shape) is in the scratch when the pc is the
 * sampled one. */
static __always_inline int hotspot_compiled(struct sample_record *record, struct hotspot_process *jvm, u64 blob)
{
	struct unwind_state *state = &record->state;
	u32 shape = *(volatile u32 *)&record->interp.hotspot.leaf_shape;
	s32 frame_size = 0;
	if (bpf_probe_read_user(&frame_size, sizeof(frame_size), (const void *)(blob + jvm->blob_frame_size))) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	u32 mark = 0;
	bpf_probe_read_user(&mark, sizeof(mark), (const void *)(blob + jvm->nmethod_compile_id));
	u64 pc = state->pc;
	if (!state->exact) {
		u64 saved = hotspot_deopt_pc(jvm, blob, pc, state->sp);
		if (saved)
			pc = saved;
		/* A return address: the frame is built. */
		shape = HOTSPOT_SHAPE_FRAME;
		if (frame_size == 0)
			shape = hotspot_stub_shape(record, jvm, blob, pc, false);
	}
	if (!hotspot_record(record, hotspot_compiled_word(jvm, pc, state->exact, mark)))
		return UNWIND_STOP_MAX_FRAMES;
	if (frame_size < 0 && (shape == HOTSPOT_SHAPE_FRAME || shape == HOTSPOT_SHAPE_RBP_FRAME))
		shape = hotspot_stub_enters(jvm, blob) ? HOTSPOT_SHAPE_RBP_FRAME
						       : hotspot_pushing_stub_shape(record, jvm, blob, pc, state->exact);
	if (shape == HOTSPOT_SHAPE_FRAME_PUSHED && frame_size <= 0)
		shape = HOTSPOT_SHAPE_FRAME;
	if (shape == HOTSPOT_SHAPE_UNKNOWN) {
		count(COUNTER_HOTSPOT_UNKNOWN_ENTRY);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	if (frame_size > (1 << 16) ||
	    (frame_size < 0 && shape != HOTSPOT_SHAPE_RBP_FRAME && shape != HOTSPOT_SHAPE_RETURN_AT_SP &&
	     shape != HOTSPOT_SHAPE_RBP_PUSHED && shape != HOTSPOT_SHAPE_STUB_SLOT)) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	if (shape == HOTSPOT_SHAPE_RETURN_AT_SP || shape == HOTSPOT_SHAPE_RBP_PUSHED ||
	    shape == HOTSPOT_SHAPE_FRAME_RBP_LIVE || shape == HOTSPOT_SHAPE_FRAME_PUSHED)
		count(COUNTER_HOTSPOT_FRAMELESS);
	/* Where the return address and the caller's saved rbp (0: rbp is
	 * still the caller's) are, and the caller's sp. */
	u64 caller_sp = 0, ret_at = 0, fp_at = 0;
	if (shape == HOTSPOT_SHAPE_RETURN_AT_SP) {
		caller_sp = state->sp + 8;
	} else if (shape == HOTSPOT_SHAPE_RBP_PUSHED) {
		caller_sp = state->sp + 16;
		fp_at = state->sp;
	} else if (shape == HOTSPOT_SHAPE_RBP_FRAME || shape == HOTSPOT_SHAPE_BARRIER_FRAME) {
		if (state->fp < state->sp || state->fp - state->sp > (1 << 20)) {
			count(COUNTER_HOTSPOT_BAD_FRAMES);
			return UNWIND_STOP_RUNTIME_CODE;
		}
		/* The barrier's cookie lies between the saved rbp and the
		 * return address. */
		caller_sp = state->fp + (shape == HOTSPOT_SHAPE_BARRIER_FRAME ? 24 : 16);
		fp_at = state->fp;
	} else if (shape == HOTSPOT_SHAPE_STUB_SLOT) {
		u64 slot = record->interp.hotspot.leaf_slot & 15;
		ret_at = state->sp + 8 * slot;
		caller_sp = ret_at + 8 + 8 * (u64)(record->interp.hotspot.leaf_pushed & 3);
		if (record->interp.hotspot.leaf_fp_at_sp)
			fp_at = state->sp;
	} else {
		/* A frame of 0 words: a leaf stub that pushed nothing. */
		caller_sp = state->sp + 8 * (frame_size > 0 ? (u64)frame_size : 1);
		if (shape == HOTSPOT_SHAPE_FRAME_PUSHED)
			caller_sp += 8 * (u64)(record->interp.hotspot.leaf_pushed & 3);
		if (frame_size >= 2 && (shape == HOTSPOT_SHAPE_FRAME || shape == HOTSPOT_SHAPE_FRAME_PUSHED))
			fp_at = caller_sp - 16;
	}
	if (!ret_at)
		ret_at = caller_sp - 8;
	u64 words[2] = {};
	if (read_user_u64(&words[1], ret_at) || (fp_at && read_user_u64(&words[0], fp_at))) {
		count(COUNTER_HOTSPOT_READ_ERRORS);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	if (fp_at)
		state->fp = words[0];
	if (words[1] == 0) {
		count(COUNTER_HOTSPOT_BAD_FRAMES);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	state->pc = words[1];
	state->sp = caller_sp;
	state->exact = 0;
	return STEP_CONTINUE;
}

/* Unwinds one frame at a pc in the code cache. Returns STEP_CONTINUE,
 * STEP_JIT_NATIVE when the caller is native code, or an unwind_stop
 * reason. */
static __always_inline int hotspot_step(struct sample_record *record, struct hotspot_process *jvm)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 pc = state->pc;
	if (pc == interp->hotspot.call_stub_return && pc) {
		/* The entry frame: C called Java here. */
		u64 words[2];
		if (bpf_probe_read_user(words, sizeof(words), (const void *)state->fp)) {
			count(COUNTER_HOTSPOT_READ_ERRORS);
			return UNWIND_STOP_RUNTIME_CODE;
		}
		if (state->fp + 16 <= state->sp || words[1] == 0) {
			count(COUNTER_HOTSPOT_BAD_FRAMES);
			return UNWIND_STOP_RUNTIME_CODE;
		}
		state->sp = state->fp + 16;
		state->fp = words[0];
		state->pc = words[1];
		state->exact = 0;
		return STEP_JIT_NATIVE;
	}
	if (pc >= interp->hotspot.interpreter_low && pc < interp->hotspot.interpreter_high)
		return hotspot_interpreted(record, jvm);
	u64 blob = hotspot_find_blob(jvm, state->exact ? pc : pc - 1);
	if (!blob) {
		count(COUNTER_HOTSPOT_NO_BLOB);
		return UNWIND_STOP_RUNTIME_CODE;
	}
	return hotspot_compiled(record, jvm, blob);
}

/* At the hand-over: hotspot_processes[tgid] copied into the scratch,
 * what the frames of this sample share read from the JVM (the template
 * interpreter's code and the call stub's return address, set while it
 * starts), and the sampled frame's shape. */
static __always_inline int hotspot_attach(struct sample_record *record)
{
	struct interp_state *interp = &record->interp;
	struct unwind_state *state = &record->state;
	u32 tgid = record->event.pid;
	struct hotspot_process *entry = bpf_map_lookup_elem(&hotspot_processes, &tgid);
	if (!entry || !hotspot_code_cache(entry)) {
		/* Not attached, or its code cache not set, yet: the code
		 * stays memory without unwind tables. */
		count(COUNTER_HOTSPOT_NO_PROCESS);
		return STEP_JIT_STAYS_NATIVE;
	}
	struct hotspot_process *jvm = &interp->hotspot.process;
	*jvm = *entry;
	/* Handed memory that is not the code cache (user space marks every
	 * anonymous code of a JVM until it knows the cache): it stays
	 * native. */
	if (state->pc < jvm->code_low || state->pc >= jvm->code_high)
		return STEP_JIT_STAYS_NATIVE;
	interp->hotspot.interpreter_low = 0;
	interp->hotspot.interpreter_high = 0;
	interp->hotspot.call_stub_return = 0;
	u64 queue = 0;
	if (!read_user_u64(&queue, jvm->interpreter_code) && queue) {
		u64 buffer = 0;
		s32 limit = 0;
		if (!read_user_u64(&buffer, queue + jvm->stub_queue_buffer) &&
		    !bpf_probe_read_user(&limit, sizeof(limit), (const void *)(queue + jvm->stub_queue_limit)) &&
		    limit > 0) {
			interp->hotspot.interpreter_low = buffer;
			interp->hotspot.interpreter_high = buffer + (u32)limit;
		}
	}
	read_user_u64(&interp->hotspot.call_stub_return, jvm->call_stub_return);

	/* The sampled pc may be in a compiled frame not built yet, or torn
	 * down: its shape is found once, here, outside the frame loop. */
	u32 leaf_shape = HOTSPOT_SHAPE_FRAME;
	if (state->exact && state->pc != interp->hotspot.call_stub_return &&
	    !(state->pc >= interp->hotspot.interpreter_low && state->pc < interp->hotspot.interpreter_high)) {
		u64 blob = hotspot_find_blob(jvm, state->pc);
		s32 frame_size = 0;
		if (blob && !bpf_probe_read_user(&frame_size, sizeof(frame_size),
						 (const void *)(blob + jvm->blob_frame_size)))
			leaf_shape = hotspot_leaf_shape(record, jvm, blob, state->pc, frame_size);
	}
	/* Kept in the scratch and read back as an unknown value: else the
	 * verifier follows the frame loop once per shape. */
	interp->hotspot.leaf_shape = leaf_shape;
	return STEP_CONTINUE;
}

/* One frame (jit_frame_fn): STEP_JIT_NATIVE when the pc left the code
 * cache (the hand-over's is checked by hotspot_attach). */
__noinline int hotspot_frame(u32 hand_over)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return UNWIND_STOP_INTERNAL;
	struct hotspot_process *jvm = &record->interp.hotspot.process;
	if (!hand_over && (record->state.pc < jvm->code_low || record->state.pc >= jvm->code_high))
		return STEP_JIT_NATIVE;
	return hotspot_step(record, jvm);
}

/* Runs the Java frames of a sample whose stack reached the code cache,
 * then hands back to the native unwinder. */
static __always_inline int hotspot_unwind_run(void *ctx, void *progs)
{
	return jit_unwind_run(ctx, progs, UNWINDER_HOTSPOT, hotspot_attach, hotspot_frame);
}

/* A thread exits: the hotspot unwinder keeps nothing per thread. */
static __always_inline void hotspot_forget_thread(u64 thread_key)
{
}
