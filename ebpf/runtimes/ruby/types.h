/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CRuby's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_RUBY_TYPES_H
#define EP_RUNTIME_RUBY_TYPES_H

/* CRuby (slot 4): pos << RUBY_FRAME_POS_SHIFT | pointer >> 3: an iseq
 * frame's iseq (a method's frame: its method entry, whose definition
 * runs that iseq) and the index of its pc in the iseq's encoded
 * instructions (clamped to RUBY_FRAME_POS_MAX, which means unknown), or
 * a C function frame's method entry (pos 0); user space tells them
 * apart by the imemo and method types. See unwinder.bpf.h. */
#define RUBY_FRAME_POS_SHIFT 44
#define RUBY_FRAME_POS_MAX 0x1fffULL
#define RUBY_FRAME_PAYLOAD_BITS 57

/* CRuby (unwinder.bpf.h). How a build reaches ruby_current_ec, the
 * thread's execution context, from the thread pointer. */
enum ruby_tls_model {
	/* General dynamic (libruby.so): the module id ld.so writes at
	 * tls_vaddr, the thread's DTV (fsbase + 8) gives its TLS block, the
	 * variable is at tls_offset in it. */
	RUBY_TLS_DYNAMIC = 0,
	/* Initial exec: ld.so writes the variable's offset from the thread
	 * pointer at tls_vaddr. */
	RUBY_TLS_INITIAL_EXEC = 1,
};

/* Magic and flags of a control frame, in ep[0] (vm_core.h, 3.x). */
#define RUBY_FRAME_MAGIC_MASK 0x7fff0001ULL
#define RUBY_FRAME_MAGIC_METHOD 0x11110001ULL
#define RUBY_FRAME_MAGIC_CFUNC 0x55550001ULL
#define RUBY_FRAME_MAGIC_DUMMY 0x79990001ULL
/* The frame's VM run returns to C when it returns (the first frame of an
 * rb_vm_exec run). */
#define RUBY_FRAME_FLAG_FINISH 0x20ULL
/* The method-level environment: ep[-2] is the frame's method entry. */
#define RUBY_ENV_FLAG_LOCAL 0x2ULL
/* Largest VM stack, in VALUEs (Ruby's default is 128 Ki). */
#define RUBY_MAX_VM_STACK (1ULL << 24)

/* What the unwinder needs of one CRuby build (ruby_files[file_id], set by
 * user space from the ELF's relocations and per-version layouts:
 * crates/interpreters/src/ruby). Offsets are in bytes. */
struct ruby_file {
	__u64 tls_vaddr;        /* the GOT slot of ruby_current_ec (see tls_model) */
	__u64 tls_offset;       /* RUBY_TLS_DYNAMIC: the variable in the module's block */
	__u8 tls_model;         /* enum ruby_tls_model */
	__u8 reserved[3];
	__u32 ec_vm_stack;      /* rb_execution_context_t.vm_stack */
	__u32 ec_vm_stack_size; /* .vm_stack_size (VALUEs) */
	__u32 ec_cfp;           /* .cfp */
	__u32 cfp_size;         /* sizeof(rb_control_frame_t) (<= RUBY_CFP_READ_MAX) */
	__u32 cfp_pc;           /* rb_control_frame_t.pc */
	__u32 cfp_iseq;         /* .iseq */
	__u32 cfp_ep;           /* .ep */
	__u32 iseq_body;        /* rb_iseq_t.body */
	__u32 body_iseq_encoded; /* rb_iseq_constant_body.iseq_encoded */
	__u32 me_def;           /* rb_method_entry_t.def */
	__u32 def_iseq;         /* rb_method_definition_t.body.iseq.iseqptr */
};
/* Bytes of a control frame read at once. */
#define RUBY_CFP_READ_MAX 64

/* The CRuby unwinder's scratch (struct interp_state, maps.h). */
struct ruby_scratch {
	/* The next control frame to record, and the end of the VM stack
	 * (the control frames grow down from it). */
	__u64 cfp;
	__u64 stack_end;
	/* ruby_files[file_id], copied at the hand-over. */
	struct ruby_file file;
	/* One control frame, as read. */
	__u8 buf[RUBY_CFP_READ_MAX];
};

#endif
