/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Perl's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_PERL_TYPES_H
#define EP_RUNTIME_PERL_TYPES_H

/* Perl (slot 6): line <<
 * PERL_FRAME_LINE_SHIFT | pointer >> 3: a sub's frame, its CV and the
 * line of its COP counted from the line of the sub's first op (its first
 * statement; PERL_FRAME_LINE_MAX: unknown or larger); or, with
 * PERL_FRAME_COP, a frame named by its COP (the pointer) alone: the
 * script's top level (line field PERL_COP_MAIN) or a string eval, require
 * or do FILE (PERL_COP_EVAL). See unwinder.bpf.h. */
#define PERL_FRAME_LINE_SHIFT 44
#define PERL_FRAME_LINE_MAX 0xfffULL
#define PERL_FRAME_COP (1ULL << 56)
#define PERL_COP_MAIN 0
#define PERL_COP_EVAL 1
#define PERL_FRAME_PAYLOAD_BITS 57

/* Perl (unwinder.bpf.h). Bytes of a PERL_CONTEXT (or a PERL_SI)
 * read at once: every field used lies below. */
#define PERL_CONTEXT_READ 96
#define PERL_SI_READ 40
/* cx_type bits (cop.h), the same in every supported release. */
#define PERL_CXTYPEMASK 0xf
#define PERL_CXT_SUB 9
#define PERL_CXT_FORMAT 10
#define PERL_CXT_EVAL 11
#define PERL_CXP_SUB_RE_FAKE 0x80
#define PERL_CXP_EVALBLOCK 0x40
#define PERL_CXP_TRY 0x80

/* What the Perl unwinder needs of one Perl build (perl_files[file_id],
 * set by user space from the ELF symbols and the release's layout:
 * crates/interpreters/src/perl). Threaded builds: a thread's
 * interpreter is its thread-local PL_current_context (5.36+, perl
 * executables: at tls_offset from the thread pointer), else, for the
 * main thread only, *PL_curinterp; its curcop and curstackinfo are at
 * offsets in it. Non-threaded: the two globals. */
struct perl_file {
	__u64 curinterp_vaddr;       /* PL_curinterp (threaded), ELF virtual address */
	__u64 curcop_vaddr;          /* PL_curcop (non-threaded) */
	__u64 curstackinfo_vaddr;    /* PL_curstackinfo (non-threaded) */
	__s64 tls_offset;            /* PL_current_context - the thread pointer (has_tls) */
	__u8 threaded;
	__u8 has_tls;
	__u8 reserved[2];
	__u32 interp_curcop;         /* PerlInterpreter.Icurcop (threaded) */
	__u32 interp_curstackinfo;   /* PerlInterpreter.Icurstackinfo (threaded) */
	__u32 si_cxstack;            /* PERL_SI.si_cxstack */
	__u32 si_prev;               /* PERL_SI.si_prev */
	__u32 si_cxix;               /* PERL_SI.si_cxix (I32) */
	__u32 cx_type;               /* PERL_CONTEXT.cx_type (a byte) */
	__u32 cx_blk_oldcop;         /* PERL_CONTEXT.blk_oldcop */
	__u32 cx_blk_sub_cv;         /* PERL_CONTEXT.blk_sub.cv */
	__u32 cx_size;               /* sizeof(PERL_CONTEXT), at least PERL_CONTEXT_READ */
	__u32 cop_line;              /* COP.cop_line */
	__u32 xcv_start;             /* XPVCV.xcv_start_u: a sub's first op */
};

/* The Perl unwinder's scratch (struct interp_state, maps.h). */
struct perl_scratch {
	/* The stack info being walked, its context array and the index of
	 * its next context (-1: none left). */
	__u64 si;
	__u64 cxstack;
	__s32 cxix;
	/* the script's top level was recorded */
	__u8 main_done;
	__u8 reserved[3];
	/* The COP of the next frame recorded (the statement it runs, or the
	 * call it makes). */
	__u64 cop;
	/* perl_files[file_id], copied at the hand-over. */
	struct perl_file file;
	/* One context (or stack info), as read. */
	__u8 buf[PERL_CONTEXT_READ];
};

#endif
