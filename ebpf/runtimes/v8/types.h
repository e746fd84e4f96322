/* SPDX-License-Identifier: GPL-2.0 */
/*
 * V8's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_V8_TYPES_H
#define EP_RUNTIME_V8_TYPES_H

/* V8 (slot 3): [V8_FRAME_COMPILED] | offset << V8_FRAME_OFFSET_SHIFT |
 * function >> 3: the JSFunction of a JavaScript frame (untagged) and,
 * for an interpreted frame, its bytecode offset, for a compiled one the
 * pc's offset from its code's instruction start (V8_FRAME_OFFSET_MAX:
 * unknown). See unwinder.bpf.h. */
#define V8_FRAME_COMPILED (1ULL << 56)
#define V8_FRAME_OFFSET_SHIFT 44
#define V8_FRAME_OFFSET_MAX 0xfffULL
/* V8 13+ (struct v8_process.compiled_by_pc): a compiled word whose bits
 * 47-55 are clear holds the pc itself (bits 0-46), not a function; with
 * the offset bits all set it is the function, offset unknown (builtins'
 * frames in node's .text). */
#define V8_FRAME_PC_MASK ((1ULL << 47) - 1)
#define V8_FRAME_PAYLOAD_BITS 57

/* What the V8 unwinder needs of one Node (V8) process (v8_processes[tgid],
 * set by user space from the v8dbg_* metadata of the node binary:
 * crates/interpreters/src/v8). Offsets are in bytes from fp or from an
 * untagged object. */
struct v8_process {
	__s32 fp_marker;          /* the context or frame marker slot (-8) */
	__s32 fp_function;        /* the JSFunction slot (-16) */
	__s32 fp_bytecode_array;  /* the BytecodeArray slot (-32) */
	__s32 fp_bytecode_offset; /* the bytecode offset slot (-40, a Smi) */
	__u32 marker_entry;       /* StackFrame::ENTRY */
	__u32 marker_construct_entry; /* StackFrame::CONSTRUCT_ENTRY */
	__u32 smi_shift;          /* a Smi's value is word >> smi_shift (32) */
	__u32 bytecode_offset_bias; /* the Smi - this = the bytecode index */
	__u32 heap_object_map;    /* HeapObject::map */
	__u32 map_instance_type;  /* Map::instance_type (u16) */
	__u32 js_function_code;   /* JSFunction::code */
	__u32 code_instruction_start; /* Code::instruction_start */
	__u16 type_bytecode_array; /* BYTECODE_ARRAY_TYPE */
	/* V8 12+: a compiled frame whose pc is in JIT memory is recorded by
	 * its pc (V8_FRAME_PC_MASK), user space finds the code around it:
	 * exact in code of any size, and in code its function no longer
	 * runs (from 13 on, leaptiering, there is no JSFunction::code). */
	__u16 compiled_by_pc;
	/* The unwinder's own: whether the pc of the frame being unwound is
	 * in anonymous (JIT) memory (set in its copy at each frame). */
	__u16 pc_in_jit;
	/* V8 13+: an interpreter-shaped frame in JIT memory outside its
	 * function's Sparkplug code (the SharedFunctionInfo's data) runs
	 * optimised code entered by on-stack replacement: by its pc. */
	__u16 osr_by_pc;
	/* V8 13+: JSFunction::shared, SharedFunctionInfo's (trusted)
	 * function data (its Sparkplug Code when it has one),
	 * Code::instruction_size (i32): tell a Sparkplug frame from
	 * optimised code entered by on-stack replacement from it. */
	__u32 js_function_shared;
	__u32 sfi_function_data;
	__u32 code_instruction_size;
	__u32 reserved2;
};

/* Largest distance from a frame to its caller's (V8's own limit on a
 * frame is far below). Here, not in unwinder.bpf.h: user space's late
 * walk (crates/bpf/src/late_v8.rs) follows the same bound. */
#define V8_MAX_FRAME_SIZE (1ULL << 20)
/* Set in code_instruction_start when a Code holds its instructions
 * itself, after its header (V8 before 11.x, Node 18): the instructions
 * start at that offset in the object, not at the address kept there. */
#define V8_CODE_START_INLINE (1U << 31)

/* Words of a frame read at once: fp - 8 * V8_LOWEST_SLOT .. fp + 8. */
#define V8_FRAME_SLOTS 8
#define V8_LOWEST_SLOT (-6)

/* The V8 unwinder's scratch (struct interp_state, maps.h). */
struct v8_scratch {
	/* v8_processes[tgid], copied at the hand-over. */
	struct v8_process process;
	/* A frame's slots fp - 48 .. fp + 8, as read. */
	__u64 slots[V8_FRAME_SLOTS];
};

#endif
