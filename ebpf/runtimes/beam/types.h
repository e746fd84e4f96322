/* SPDX-License-Identifier: GPL-2.0 */
/*
 * BEAM's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_BEAM_TYPES_H
#define EP_RUNTIME_BEAM_TYPES_H

/* BEAM (slot 7): [BEAM_FRAME_RETURN_ADDRESS] | pc: the pc of an Erlang
 * frame in the JIT's code (below 2^47); with the flag it is a return
 * address (a continuation pointer), named by pc - 1. The module, function
 * and line follow from the node's code index in user space. See
 * unwinder.bpf.h. */
#define BEAM_FRAME_RETURN_ADDRESS (1ULL << 56)
#define BEAM_FRAME_PC_MASK ((1ULL << 47) - 1)
#define BEAM_FRAME_PAYLOAD_BITS 57

/* What the BEAM unwinder needs of one Erlang node (beam_processes[tgid],
 * set by user space: crates/interpreters/src/beam). */
struct beam_process {
	/* The code address in beam_normal_exit: the continuation pointer at
	 * the bottom of every Erlang process's stack. */
	__u64 normal_exit;
	/* The JIT's executable code [code_low, code_high): its r-xs
	 * /memfd:vmem mappings (a continuation pointer lies in it). */
	__u64 code_low;
	__u64 code_high;
	/* From rbx (the JIT keeps its ErtsSchedulerRegisters there while
	 * Erlang code runs) to the slot of the scheduler thread's return
	 * address into C (process_main's entry stack pointer), per release;
	 * 0: unknown (the stack ends at the bottom of the Erlang stack). */
	__u32 scheduler_return;
	/* erts_frame_layout: 0 (RA) or 1 (FP_RA, rbp chains the frames). */
	__u32 frame_layout;
	/* From the stack pointer the JIT calls C with (the start of the
	 * scheduler's ErtsSchedulerRegisters: the C stack grows down from
	 * there) to rbx, per release; 0: unknown (stacks in C called from
	 * Erlang end at the JIT frame C returns to). */
	__u32 runtime_stack;
	/* ErtsSchedulerData.current_process (the process the scheduler
	 * runs, c_p) and Process.stop (its Erlang stack pointer, stored
	 * when the JIT calls C that may look at the stack), per release;
	 * 0: unknown. */
	__u16 current_process;
	__u16 process_stop;
};
/* Words above a BEAM frame's stack pointer searched for its
 * continuation pointer (its y registers lie below it). */
#define BEAM_SCAN_WORDS 32

/* The BEAM unwinder's scratch (struct interp_state, maps.h). */
struct beam_scratch {
	/* beam_processes[tgid], copied at the hand-over. */
	struct beam_process process;
	/* The hand-over's frame, which C returned to, is recorded and the
	 * walk resumed on the Erlang stack (beam_attach). */
	__u32 resumed;
	__u32 reserved;
	/* The words above a frame's stack pointer, as read. */
	__u64 words[BEAM_SCAN_WORDS];
};

#endif
