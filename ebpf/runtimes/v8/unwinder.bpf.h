/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The V8 unwinder: records the JavaScript frames a Node thread runs, in
 * place of V8's code (the embedded builtins in node's .text, the JIT
 * code in anonymous memory), so that native frames above and below
 * (node's C++, addons, libc) stay where they are.
 *
 * Included once by profiler.bpf.c, after interpreters.bpf.h and
 * native_unwinder.bpf.h.
 *
 * The hand-over: user space marks the process ranges of V8's code
 * for UNWINDER_V8 (the builtins blob as a loop range of the node file,
 * the process's anonymous executable memory as its code) and puts the
 * layout in v8_processes[tgid] (struct v8_process, from the binary's
 * v8dbg_* metadata). When the native unwinder reaches a pc there it
 * tail-calls v8_unwind, which follows the frame pointer chain (V8 keeps
 * rbp in all its frames) while the pc stays in V8's code (the driver:
 * jit_driver.bpf.h):
 *
 *  - [fp - 8] holds either a frame type marker (a Smi: low bit clear) or
 *    a JavaScript frame's context (a heap pointer: low bit set).
 *  - A JavaScript frame's function is at [fp - 16]. If [fp - 32] is a
 *    BytecodeArray the frame is interpreted (Ignition, or Sparkplug's
 *    frame of the same shape): the frame word is the function and the
 *    bytecode offset (the Smi at [fp - 40]). Otherwise it is compiled:
 *    the function and the pc's offset in the function's code.
 *  - Marker frames (exit, stub, internal...) are passed over; an entry
 *    frame (JSEntry: C++ called JavaScript) hands back to the native
 *    unwinder at its return address.
 *
 * The caller of every V8 frame: pc = [fp + 8], sp = fp + 16, fp = [fp].
 * Anything that cannot be followed ends the stack (UNWIND_STOP_READ_ERROR
 * or UNWIND_STOP_BAD_SP, with a COUNTER_V8_* reason): the frames so far
 * are kept.
 */

/* The slot at fp + off (off a multiple of 8 within the window read),
 * or 0. */
static __always_inline u64 v8_slot(struct interp_state *interp, s32 off)
{
	u32 index = (u32)(off - 8 * V8_LOWEST_SLOT) >> 3;
	if ((off & 7) || index >= V8_FRAME_SLOTS)
		return 0;
	return interp->v8.slots[index];
}

/* Appends a V8 frame word; false when the stack is full. */
static __always_inline bool v8_record(struct sample_record *record, u64 function, bool compiled, u64 offset)
{
	u64 pointer = function - 1;
	u64 bits = (pointer & 7) || (pointer >> 47) ? 0 : pointer >> 3;
	if (offset > V8_FRAME_OFFSET_MAX)
		offset = V8_FRAME_OFFSET_MAX;
	u64 payload = (compiled ? V8_FRAME_COMPILED : 0) | (offset << V8_FRAME_OFFSET_SHIFT) | bits;
	if (!append_user_frame(&record->event, frame_word_interpreted(UNWINDER_V8, payload)))
		return false;
	count(COUNTER_V8_FRAMES);
	return true;
}

/* Appends a V8 13+ compiled frame word holding its pc (below
 * V8_FRAME_PC_MASK); false when the stack is full. */
static __always_inline bool v8_record_pc(struct sample_record *record, u64 pc)
{
	if (!append_user_frame(&record->event,
			       frame_word_interpreted(UNWINDER_V8, V8_FRAME_COMPILED | (pc & V8_FRAME_PC_MASK))))
		return false;
	count(COUNTER_V8_FRAMES);
	return true;
}

/* The instance type of the heap object `tagged`, or 0. */
static __always_inline u16 v8_instance_type(struct v8_process *v8, u64 tagged)
{
	u64 map = 0;
	u16 type = 0;
	if ((tagged & 3) != 1 || read_user_u64(&map, tagged - 1 + v8->heap_object_map) || (map & 3) != 1)
		return 0;
	if (bpf_probe_read_user(&type, sizeof(type), (const void *)(map - 1 + v8->map_instance_type)))
		return 0;
	return type;
}

/* V8 13+: whether pc is in the Sparkplug code of `function` (its
 * SharedFunctionInfo's data, when that is a Code). */
static __always_inline bool v8_in_baseline_code(struct v8_process *v8, u64 function, u64 pc)
{
	u64 sfi = 0, data = 0, start = 0;
	s32 size = 0;
	if ((function & 3) != 1 || read_user_u64(&sfi, function - 1 + v8->js_function_shared) || (sfi & 3) != 1)
		return false;
	if (read_user_u64(&data, sfi - 1 + v8->sfi_function_data) || (data & 3) != 1)
		return false;
	if (read_user_u64(&start, data - 1 + (v8->code_instruction_start & ~V8_CODE_START_INLINE)))
		return false;
	if (bpf_probe_read_user(&size, sizeof(size), (const void *)(data - 1 + v8->code_instruction_size)))
		return false;
	return size > 0 && pc >= start && pc - start < (u64)size;
}

/* Records the JavaScript frame at fp running `function` (its pc:
 * state->pc). False when the stack is full. */
static __always_inline bool v8_js_frame(struct sample_record *record, struct v8_process *v8, u64 function)
{
	struct interp_state *interp = &record->interp;
	u64 bytecode = v8_slot(interp, v8->fp_bytecode_array);
	if (v8->type_bytecode_array && v8_instance_type(v8, bytecode) == v8->type_bytecode_array) {
		s64 smi = (s64)v8_slot(interp, v8->fp_bytecode_offset);
		/* V8 13+: an interpreter-shaped frame running JIT code runs
		 * Sparkplug code (the pc in its function's, which is the
		 * SharedFunctionInfo's data then) or optimised code entered by
		 * on-stack replacement: that one by its pc. */
		if (v8->osr_by_pc && v8->pc_in_jit && !(record->state.pc & ~V8_FRAME_PC_MASK) &&
		    !v8_in_baseline_code(v8, function, record->state.pc))
			return v8_record_pc(record, record->state.pc);
		s64 offset = (smi >> (v8->smi_shift & 63)) - (s64)v8->bytecode_offset_bias;
		return v8_record(record, function, false, offset < 0 ? V8_FRAME_OFFSET_MAX : (u64)offset);
	}
	u64 code = 0, start = 0, offset = V8_FRAME_OFFSET_MAX;
	if (v8->compiled_by_pc) {
		/* JIT code by its pc (bits 47-55 clear), builtins by their
		 * function (offset unknown: no positions to look up). */
		u64 pc = record->state.pc;
		if (!v8->pc_in_jit || (pc & ~V8_FRAME_PC_MASK))
			return v8_record(record, function, true, V8_FRAME_OFFSET_MAX);
		return v8_record_pc(record, pc);
	}
	u32 start_at = v8->code_instruction_start & ~V8_CODE_START_INLINE;
	if ((function & 3) == 1 && !read_user_u64(&code, function - 1 + v8->js_function_code) && (code & 3) == 1) {
		if (v8->code_instruction_start & V8_CODE_START_INLINE)
			start = code - 1 + start_at;
		else if (read_user_u64(&start, code - 1 + start_at))
			start = 0;
		if (start && record->state.pc >= start)
			offset = record->state.pc - start;
	}
	return v8_record(record, function, true, offset);
}

/* Unwinds the V8 frame at state->fp. */
static __always_inline int v8_step(struct sample_record *record, struct v8_process *v8)
{
	struct unwind_state *state = &record->state;
	struct interp_state *interp = &record->interp;
	u64 fp = state->fp;
	if (bpf_probe_read_user(interp->v8.slots, sizeof(interp->v8.slots), (const void *)(fp + 8 * V8_LOWEST_SLOT))) {
		count(COUNTER_V8_READ_ERRORS);
		return UNWIND_STOP_READ_ERROR;
	}
	u64 caller_fp = v8_slot(interp, 0);
	u64 return_address = v8_slot(interp, 8);
	u64 marker = v8_slot(interp, v8->fp_marker);
	bool entry = false;
	if (!(marker & 1)) {
		u64 type = marker >> 1;
		if (type >= 64) {
			count(COUNTER_V8_BAD_FRAMES);
			return UNWIND_STOP_BAD_SP;
		}
		entry = type == v8->marker_entry || type == v8->marker_construct_entry;
		count(entry ? COUNTER_V8_ENTRY_FRAMES : COUNTER_V8_MARKER_FRAMES);
	} else {
		u64 function = v8_slot(interp, v8->fp_function);
		if ((function & 3) != 1) {
			count(COUNTER_V8_BAD_FRAMES);
			return UNWIND_STOP_BAD_SP;
		}
		if (!v8_js_frame(record, v8, function))
			return UNWIND_STOP_MAX_FRAMES;
	}
	if (return_address == 0 || (!entry && (caller_fp <= fp || caller_fp - fp > V8_MAX_FRAME_SIZE))) {
		count(COUNTER_V8_BAD_FRAMES);
		return UNWIND_STOP_BAD_SP;
	}
	state->pc = return_address;
	state->sp = fp + 16;
	state->fp = caller_fp;
	state->exact = 0;
	return entry ? STEP_JIT_NATIVE : STEP_CONTINUE;
}

/* Whether the pc is in V8's code: its pid_mapping names this unwinder.
 * Notes in v8->pc_in_jit whether that is anonymous (JIT) memory. */
static __always_inline bool v8_code(struct unwind_state *state, u32 tgid, struct v8_process *v8)
{
	u64 pc = state->exact ? state->pc : state->pc - 1;
	struct pid_mapping *mapping = NULL;
	bool found = lookup_mapping(tgid, pc, &mapping) == MAPPING_FOUND && mapping &&
		     mapping_unwinder(mapping->flags) == UNWINDER_V8;
	v8->pc_in_jit = found && mapping->kind == MAPPING_KIND_NO_UNWIND_INFO;
	return found;
}

/* At the hand-over: v8_processes[tgid] copied into the scratch. */
static __always_inline int v8_attach(struct sample_record *record)
{
	u32 tgid = record->event.pid;
	struct v8_process *v8 = bpf_map_lookup_elem(&v8_processes, &tgid);
	if (!v8) {
		count(COUNTER_V8_NO_PROCESS);
		return STEP_JIT_STAYS_NATIVE;
	}
	record->interp.v8.process = *v8;
	return STEP_CONTINUE;
}

/* One frame (jit_frame_fn): STEP_JIT_NATIVE when the pc is not V8's
 * code (the hand-over's was checked by the native unwinder). */
__noinline int v8_frame(u32 hand_over)
{
	struct sample_record *record = scratch_record();
	if (!record)
		return UNWIND_STOP_INTERNAL;
	struct v8_process *v8 = &record->interp.v8.process;
	/* The hand-over's lookup still tells JIT memory apart. */
	if (!v8_code(&record->state, record->event.pid, v8) && !hand_over)
		return STEP_JIT_NATIVE;
	return v8_step(record, v8);
}

/* Runs the JavaScript frames of a sample whose stack reached V8's code,
 * then hands back to the native unwinder. */
static __always_inline int v8_unwind_run(void *ctx, void *progs)
{
	return jit_unwind_run(ctx, progs, UNWINDER_V8, v8_attach, v8_frame);
}

/* A thread exits: the v8 unwinder keeps nothing per thread. */
static __always_inline void v8_forget_thread(u64 thread_key)
{
}
