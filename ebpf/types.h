/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract between the eBPF programs and user space: every struct
 * that crosses a map or a ring buffer, every enum and limit both sides
 * use, is defined here once. The Rust side is generated from this file
 * (bindgen in crates/contract/build.rs) and uses it by name; a test
 * checks the layouts against this file compiled for the BPF target.
 * Keep it plain C: structs of fixed-size integers with explicit
 * reserved fields (no implicit padding), enums, integer #defines.
 */
#ifndef EP_TYPES_H
#define EP_TYPES_H

/* Longest kernel stack we keep; bpf_get_stack's own cap is 127
 * (sysctl kernel.perf_event_max_stack). */
#define MAX_KERNEL_FRAMES 128
/* Longest user stack we keep. */
#define MAX_USER_FRAMES 512
#define COMM_LEN 16

/* Set in a user frame word when the address is the exact pc of the
 * frame (the sampled instruction, or the instruction a signal
 * interrupted) rather than a return address. Symbolization steps back
 * one byte, into the call instruction, only for return addresses.
 * User addresses never reach bit 63. */
#define FRAME_EXACT_PC (1ULL << 63)

/* A user frame word with FRAME_INTERPRETED set (FRAME_EXACT_PC clear;
 * pcs never reach bit 62) is an interpreter's frame: its runtime's
 * unwinder slot (enum unwinder_program) and a payload whose layout is the
 * runtime's own. The slot is prefix-coded, so that the runtimes whose
 * payloads are widest keep the most bits:
 *
 *   bit 61 set                      slot 2 (FRAME_WIDE_SLOT), payload bits 0-60
 *   bits 61, 60 clear               slot 1 (FRAME_PLAIN_SLOT), payload bits 0-59
 *   bit 60 set, bits 57-59 = s>=3   slot s (3..7), payload bits 0-56
 *   bit 60 set, bits 57-59 = 0      slot = bits 49-56 (8..255), payload bits 0-48
 *
 * Bits 57-59 of 1 or 2 with bit 60 set, or an extended slot below 8, are
 * no word an unwinder writes (user space counts them as malformed).
 * frame_word_interpreted (frame_word.h) is the one encoder. */
#define FRAME_INTERPRETED (1ULL << 62)
#define FRAME_WIDE (1ULL << 61)
#define FRAME_WIDE_SLOT 2
#define FRAME_WIDE_PAYLOAD_BITS 61
#define FRAME_PLAIN_SLOT 1
#define FRAME_PLAIN_PAYLOAD_BITS 60
#define FRAME_COMPACT (1ULL << 60)
#define FRAME_COMPACT_SLOT_SHIFT 57
#define FRAME_COMPACT_SLOT_MASK 7ULL
#define FRAME_COMPACT_SLOT_MIN 3
#define FRAME_COMPACT_PAYLOAD_BITS 57
#define FRAME_EXTENDED_SLOT_SHIFT 49
#define FRAME_EXTENDED_SLOT_MASK 0xffULL
#define FRAME_EXTENDED_SLOT_MIN 8
#define FRAME_EXTENDED_PAYLOAD_BITS 49
/* The payload bits of a word of unwinder slot `slot`. */
#define FRAME_PAYLOAD_BITS(slot)                                                        \
	((slot) == FRAME_WIDE_SLOT ? FRAME_WIDE_PAYLOAD_BITS                            \
	 : (slot) == FRAME_PLAIN_SLOT ? FRAME_PLAIN_PAYLOAD_BITS                        \
	 : (slot) < FRAME_EXTENDED_SLOT_MIN ? FRAME_COMPACT_PAYLOAD_BITS               \
					    : FRAME_EXTENDED_PAYLOAD_BITS)

/* Each runtime's payload, and its width: <NAME>_FRAME_PAYLOAD_BITS, which
 * must fit its slot's (checked below for every line of runtimes.h, and
 * by crates/bpf's runtime test).
 *
 * CPython (slot 1): offset << PYTHON_FRAME_OFFSET_SHIFT | code >> 3: the
 * code object's address (8-aligned, below 2^47; 0 when it is not) and
 * the byte offset of the instruction in its bytecode (clamped to
 * PYTHON_FRAME_OFFSET_MAX). See python_unwinder.bpf.h. */
#define PYTHON_FRAME_OFFSET_SHIFT 44
#define PYTHON_FRAME_OFFSET_MAX ((1ULL << 16) - 1)
#define PYTHON_FRAME_CODE_MASK ((1ULL << PYTHON_FRAME_OFFSET_SHIFT) - 1)
#define PYTHON_FRAME_PAYLOAD_BITS 60
/* HotSpot (slot 2): an interpreted frame is bci <<
 * HOTSPOT_FRAME_OFFSET_SHIFT | Method* >> 3 (HOTSPOT_NO_BCI for none). A
 * compiled one (HOTSPOT_FRAME_COMPILED) is HOTSPOT_FRAME_COMPILED |
 * mark's low 16 bits << HOTSPOT_FRAME_OFFSET_SHIFT | mark's next 12 bits
 * << HOTSPOT_MARK_HIGH_SHIFT | [HOTSPOT_PC_EXACT] | pc - CodeCache's low
 * bound (31 bits; 0: unknown): the mark is the blob's generation (the
 * int at nmethod::_compile_id's offset, HOTSPOT_MARK_BITS of it), read
 * again when naming, so that a blob freed and replaced at the same place
 * is unknown, never another method. See hotspot_unwinder.bpf.h. */
#define HOTSPOT_FRAME_COMPILED (1ULL << 60)
#define HOTSPOT_FRAME_OFFSET_SHIFT 44
#define HOTSPOT_FRAME_OFFSET_MAX 0xffffULL
#define HOTSPOT_NO_BCI 0xffffULL
#define HOTSPOT_CODE_OFFSET_MAX ((1ULL << 31) - 1)
#define HOTSPOT_PC_EXACT (1ULL << 31)
#define HOTSPOT_MARK_HIGH_SHIFT 32
#define HOTSPOT_MARK_BITS 28
#define HOTSPOT_FRAME_PAYLOAD_BITS 61
/* CRuby (slot 4): pos << RUBY_FRAME_POS_SHIFT | pointer >> 3: an iseq
 * frame's iseq (a method's frame: its method entry, whose definition
 * runs that iseq) and the index of its pc in the iseq's encoded
 * instructions (clamped to RUBY_FRAME_POS_MAX, which means unknown), or
 * a C function frame's method entry (pos 0); user space tells them
 * apart by the imemo and method types. See ruby_unwinder.bpf.h. */
#define RUBY_FRAME_POS_SHIFT 44
#define RUBY_FRAME_POS_MAX 0x1fffULL
#define RUBY_FRAME_PAYLOAD_BITS 57
/* V8 (slot 3): [V8_FRAME_COMPILED] | offset << V8_FRAME_OFFSET_SHIFT |
 * function >> 3: the JSFunction of a JavaScript frame (untagged) and,
 * for an interpreted frame, its bytecode offset, for a compiled one the
 * pc's offset from its code's instruction start (V8_FRAME_OFFSET_MAX:
 * unknown). See v8_unwinder.bpf.h. */
#define V8_FRAME_COMPILED (1ULL << 56)
#define V8_FRAME_OFFSET_SHIFT 44
#define V8_FRAME_OFFSET_MAX 0xfffULL
/* V8 13+ (struct v8_process.compiled_by_pc): a compiled word whose bits
 * 47-55 are clear holds the pc itself (bits 0-46), not a function; with
 * the offset bits all set it is the function, offset unknown (builtins'
 * frames in node's .text). */
#define V8_FRAME_PC_MASK ((1ULL << 47) - 1)
#define V8_FRAME_PAYLOAD_BITS 57
/* PHP (slot 5): [PHP_FRAME_TOP] |
 * line << PHP_FRAME_LINE_SHIFT | function >> 3: the zend_function the
 * frame runs, the line of its current opline counted from the
 * function's line_start (PHP_FRAME_LINE_MAX: unknown or larger), and
 * whether the frame is the first of its execute_ex run (ZEND_CALL_TOP).
 * See php_unwinder.bpf.h. */
#define PHP_FRAME_LINE_SHIFT 44
#define PHP_FRAME_LINE_MAX 0xfffULL
#define PHP_FRAME_TOP (1ULL << 56)
#define PHP_FRAME_PAYLOAD_BITS 57
/* Perl (slot 6): line <<
 * PERL_FRAME_LINE_SHIFT | pointer >> 3: a sub's frame, its CV and the
 * line of its COP counted from the line of the sub's first op (its first
 * statement; PERL_FRAME_LINE_MAX: unknown or larger); or, with
 * PERL_FRAME_COP, a frame named by its COP (the pointer) alone: the
 * script's top level (line field PERL_COP_MAIN) or a string eval, require
 * or do FILE (PERL_COP_EVAL). See perl_unwinder.bpf.h. */
#define PERL_FRAME_LINE_SHIFT 44
#define PERL_FRAME_LINE_MAX 0xfffULL
#define PERL_FRAME_COP (1ULL << 56)
#define PERL_COP_MAIN 0
#define PERL_COP_EVAL 1
#define PERL_FRAME_PAYLOAD_BITS 57
/* BEAM (slot 7): [BEAM_FRAME_RETURN_ADDRESS] | pc: the pc of an Erlang
 * frame in the JIT's code (below 2^47); with the flag it is a return
 * address (a continuation pointer), named by pc - 1. The module, function
 * and line follow from the node's code index in user space. See
 * beam_unwinder.bpf.h. */
#define BEAM_FRAME_RETURN_ADDRESS (1ULL << 56)
#define BEAM_FRAME_PC_MASK ((1ULL << 47) - 1)
#define BEAM_FRAME_PAYLOAD_BITS 57

/* Why the user stack of a sample ends where it ends (sample_event's
 * unwind_stop, and the COUNTER_UNWIND_STOP_BASE + reason counters).
 * Never renumber: the Rust side names them by these values. */
enum unwind_stop {
	/* Reached the thread's root (a STOP rule: _start, clone, clone3,
	 * start_thread): the stack is complete. */
	UNWIND_STOP_ROOT = 0,
	/* A kernel thread: there is no user stack. */
	UNWIND_STOP_KERNEL_THREAD = 1,
	/* The process is not loaded yet (a new-process event was sent). */
	UNWIND_STOP_UNKNOWN_PID = 2,
	/* The pc is in no mapping the process manager loaded (an
	 * unknown-pc event was sent: dlopen, or a mapping made since). */
	UNWIND_STOP_UNKNOWN_PC = 3,
	/* The pc is in executable memory without unwind tables (JIT code,
	 * anonymous mappings, files that could not be read). */
	UNWIND_STOP_NO_UNWIND_INFO = 4,
	/* The file has no stack deltas for the pc's 64 KiB page. */
	UNWIND_STOP_NO_DELTAS = 5,
	/* The pc is between the FDEs of its file (no CFI covers it). */
	UNWIND_STOP_NO_COVERAGE = 6,
	/* The CFI for the pc cannot be expressed in our rules. */
	UNWIND_STOP_INVALID_RULE = 7,
	/* Reading the user stack failed (return address, saved register,
	 * signal frame). */
	UNWIND_STOP_READ_ERROR = 8,
	/* The stack pointer did not grow: a corrupt stack or a wrong rule. */
	UNWIND_STOP_BAD_SP = 9,
	/* MAX_USER_FRAMES frames were collected; the stack goes on. */
	UNWIND_STOP_MAX_FRAMES = 10,
	/* A tail call failed (the kernel's limit, or the program array). */
	UNWIND_STOP_TAIL_CALLS = 11,
	/* A map lookup that cannot fail did (a bug, or a table being
	 * replaced under our feet). */
	UNWIND_STOP_INTERNAL = 12,
	/* A return address of 0: the stack ends without a STOP rule. */
	UNWIND_STOP_ZERO_PC = 13,
	/* The user registers of a task in the kernel could not be read. */
	UNWIND_STOP_NO_USER_REGS = 14,
	/* A stack switch that cannot be followed (RULE_ID_UNFOLLOWED_SWITCH:
	 * Go's mcall, morestack, gogo), or more than MAX_STACK_SWITCHES
	 * switches: the frames so far are right, the callers are on a
	 * stack nothing here leads to. */
	UNWIND_STOP_STACK_SWITCH = 15,
	/* User space only (late unwinding of a stack copy, struct
	 * stack_copy): a read fell outside the copied window. */
	UNWIND_STOP_OUTSIDE_COPY = 16,
	/* A pc in a JVM's code cache that the HotSpot unwinder could not
	 * unwind (no code blob holds it, a frame could not be read): see
	 * the COUNTER_HOTSPOT_* counters. */
	UNWIND_STOP_HOTSPOT = 17,
	/* A frame this architecture's build cannot unwind yet (ebpf/arch.h:
	 * on arm64, a PLT stub or a signal frame). */
	UNWIND_STOP_ARCH_UNSUPPORTED = 18,
	UNWIND_STOP_COUNT = 19,
};

/* One sample, as sent through the samples ring buffer. Only the header
 * and the used frame words are sent: frames[] holds kernel_frames kernel
 * addresses, then user_frames user addresses (pcs; see FRAME_EXACT_PC),
 * leaf first. With SAMPLE_FLAG_STACK_COPY, a struct stack_copy and its
 * bytes follow the used frame words. */
struct sample_event {
	__u32 pid;            /* tgid */
	__u32 tid;
	__u64 ktime_ns;       /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
	__u32 cpu;
	__u16 kernel_frames;
	__u16 user_frames;
	char comm[COMM_LEN];          /* the thread's name */
	char process_comm[COMM_LEN];  /* the thread group leader's name */
	__u8 unwind_stop;             /* enum unwind_stop */
	__u8 flags;                   /* SAMPLE_FLAG_* */
	__u8 reserved[6];
	__u64 frames[MAX_KERNEL_FRAMES + MAX_USER_FRAMES];
};

/* A struct stack_copy follows the frame words. */
#define SAMPLE_FLAG_STACK_COPY 1

/* Most bytes of user stack copied for a sample whose process is not
 * loaded yet (UNWIND_STOP_UNKNOWN_PID, UNWIND_STOP_UNKNOWN_PC): user
 * space holds the sample until the process's tables are loaded, then
 * unwinds the rest of it from this window with the same rules. */
#define STACK_COPY_MAX 16384

/* The unwinder's state where it stopped (its frame at pc is the last
 * user frame of the sample: user space records it again when it goes
 * on), then `size` bytes of the user stack from sp up. */
struct stack_copy {
	__u64 pc;
	__u64 sp;
	__u64 fp;
	__u8 exact;           /* pc is exact, not a return address */
	__u8 stack_switches;  /* RULE_KIND_STACK_SWITCH frames so far */
	__u8 reserved[2];
	__u32 size;           /* bytes of stack that follow */
};

#define SAMPLE_EVENT_HEADER_SIZE 64
/* Bytes before frames[]: what is sent ahead of the used frame words. */
_Static_assert(__builtin_offsetof(struct sample_event, frames) == SAMPLE_EVENT_HEADER_SIZE,
	       "SAMPLE_EVENT_HEADER_SIZE is the offset of sample_event.frames");

/* What the process manager must hear about (process_events ring buffer). */
enum process_event_kind {
	/* A sample of a process the unwinder does not know. */
	PROCESS_EVENT_NEW = 1,
	/* A known process ran code in no mapping we loaded. */
	PROCESS_EVENT_UNKNOWN_PC = 2,
	/* The last thread of a process exited. */
	PROCESS_EVENT_EXIT = 3,
	/* A process called execve: its mappings are all new. */
	PROCESS_EVENT_EXEC = 4,
};

struct process_event {
	__u32 kind;      /* enum process_event_kind */
	__u32 pid;       /* tgid */
	__u64 ktime_ns;
	__u64 pc;        /* PROCESS_EVENT_UNKNOWN_PC: the pc; else 0 */
};

/* A process's executable memory is a sorted list of disjoint ranges,
 * each naming what is mapped there (struct pid_mapping). User space
 * writes it whole at each change: one process_ranges entry (the count,
 * and the first address of each chunk) and the chunks of
 * RANGES_PER_CHUNK ranges in process_range_chunks. A sample's pc is
 * found by two binary searches (mappings.bpf.h). Chunks are keyed by a
 * generation that alternates at each rewrite, so that new chunks go in
 * before the process_ranges entry points at them and old ones go out
 * after. A process_ranges entry with no ranges says "this pid is
 * known". */
#define RANGES_PER_CHUNK 64
#define RANGE_CHUNKS_MAX 64
#define PROCESS_RANGES_MAX (RANGES_PER_CHUNK * RANGE_CHUNKS_MAX)
/* The start of the slots after the last chunk or range (the searches
 * run over all 64). */
#define RANGE_START_UNUSED 0x7fffffffffffffffULL

/* Value of process_ranges (key: the pid). */
struct process_ranges {
	__u32 count;       /* ranges, at most PROCESS_RANGES_MAX */
	__u32 generation;  /* of the current chunks: 0 or 1 */
	__u64 chunk_start[RANGE_CHUNKS_MAX]; /* first address of each chunk, then RANGE_START_UNUSED */
};

/* Key of process_range_chunks. */
struct range_chunk_key {
	__u32 pid;
	__u32 chunk;       /* generation << 16 | index */
};


/* Entries of selected_pids (maps.h). */
#define SELECTED_PIDS_MAX 16384

enum mapping_kind {
	/* A file with stack deltas (file_deltas[file_id]). */
	MAPPING_KIND_NATIVE = 1,
	/* Executable memory without unwind tables. */
	MAPPING_KIND_NO_UNWIND_INFO = 2,
};

/* pid_mapping flags. */
/* The prefix covers an interpreter's evaluation loop (CPython's
 * _PyEval_EvalFrameDefault): the interpreter unwinder records the
 * interpreted frames that loop runs in place of its native frame. The
 * file's python_files entry says how. */
#define MAPPING_FLAG_INTERPRETER_LOOP 1
/* With MAPPING_FLAG_INTERPRETER_LOOP, bits 8-15 of the flags name the
 * unwinder of that interpreter (enum unwinder_program). */
#define MAPPING_UNWINDER_SHIFT 8
#define MAPPING_UNWINDER_MASK 0xff

/* The unwinder programs, by their slot in the program arrays
 * (interpreters.bpf.h): the native unwinder, then one slot per
 * interpreter unwinder of runtimes.h. */
enum unwinder_program {
	UNWINDER_NATIVE = 0,
#define RUNTIME(name, NAME, slot, map) UNWINDER_##NAME = slot,
#include "runtimes.h"
#undef RUNTIME
	/* 1 + the runtimes of runtimes.h */
	UNWINDER_COUNT = 1
#define RUNTIME(name, NAME, slot, map) +1
#include "runtimes.h"
#undef RUNTIME
	,
};
/* Slots are dense: each below UNWINDER_COUNT (and distinct: the
 * programs array's initializer rejects a slot given twice). */
#define RUNTIME(name, NAME, slot, map) \
	_Static_assert(slot > UNWINDER_NATIVE && slot < UNWINDER_COUNT, #name "'s slot is dense");
#include "runtimes.h"
#undef RUNTIME
/* Every runtime's frame words fit: its slot is one a frame word can name,
 * and its payload (<NAME>_FRAME_PAYLOAD_BITS, declared with its layout
 * above) fits that slot's payload bits. */
#define RUNTIME(name, NAME, slot, map)                                                              \
	_Static_assert(slot <= FRAME_EXTENDED_SLOT_MASK, #name "'s slot fits a frame word");          \
	_Static_assert(NAME##_FRAME_PAYLOAD_BITS <= FRAME_PAYLOAD_BITS(slot), #name "'s payload fits its slot");
#include "runtimes.h"
#undef RUNTIME

struct pid_mapping {
	__u64 file_id;   /* FileId::high64 */
	__u64 bias;      /* ELF virtual address = pc - bias */
	__u32 kind;      /* enum mapping_kind */
	__u32 flags;     /* MAPPING_FLAG_* */
};

/* One range of a process: [start, end) holds mapping. */
struct process_range {
	__u64 start;
	__u64 end;
	struct pid_mapping mapping;
};

/* Value of process_range_chunks: ranges sorted by start; the last chunk's
 * unused slots start at RANGE_START_UNUSED. */
struct range_chunk {
	struct process_range ranges[RANGES_PER_CHUNK];
};

/* Stack deltas are indexed by 64 KiB pages of ELF virtual addresses. */
#define DELTA_PAGE_BITS 16

/* Binary search steps in a page's deltas: ceil(log2(65536 entries per page)) + 1. */
#define DELTA_SEARCH_STEPS 17
/* Stack switches (RULE_KIND_STACK_SWITCH) followed per sample. Their CFA
 * is not checked against rsp, so this bound is what keeps a corrupt
 * frame-pointer chain from looping. A Go stack needs two per cgo
 * crossing (C -> Go callback -> goroutine stack, back) and one per
 * systemstack. */
#define MAX_STACK_SWITCHES 8

/* Key of delta_pages. */
struct delta_page_key {
	__u64 file_id;
	__u64 page;      /* ELF virtual address >> DELTA_PAGE_BITS */
};

/* The deltas of one page: file_deltas[file_id][first .. first + count),
 * sorted by page_offset, the first at offset 0 (it carries the rule in
 * effect at the page's start). */
struct delta_page {
	__u32 first;
	__u32 count;
};

/* One entry of a file's delta array. */
struct delta_entry {
	__u16 page_offset;  /* low DELTA_PAGE_BITS bits of the address */
	__u16 rule_id;      /* index into unwind_rules */
};
_Static_assert(sizeof(struct delta_entry) == 4, "delta entries are 4 bytes");

/* Rule ids with a fixed meaning (profiler_elf::RuleId); the unwinder
 * tests them without a lookup. */
#define RULE_ID_NO_COVERAGE 0
#define RULE_ID_INVALID 1
#define RULE_ID_STOP 2
#define RULE_ID_SIGNAL 3
/* A stack switch the unwinder cannot follow (UNWIND_STOP_STACK_SWITCH). */
#define RULE_ID_UNFOLLOWED_SWITCH 4
/* Go's runtime.morestack: on the goroutine's stack still, a frameless
 * function (CFA = rsp + 8); after its switch to the system stack, the
 * goroutine's pc, sp and bp saved in curg.sched (native_unwinder.bpf.h,
 * go_switch_caller). */
#define RULE_ID_GO_MORESTACK 5
/* Go's runtime.mcall after its first instruction: on the goroutine's
 * stack still, a frameless function; after its switch to the system
 * stack, the scheduler's stack of the thread (g0), whose caller is
 * runtime.mstart0 at g0.sched (go_switch_caller). */
#define RULE_ID_GO_MCALL 6

enum rule_kind {
	RULE_KIND_NONE = 0,
	/* CFA = base + cfa_offset */
	RULE_KIND_CFA = 1,
	/* CFA = *(base + cfa_offset) + deref_outer */
	RULE_KIND_CFA_DEREF = 2,
	/* CFA = rsp + 8 + ((pc & 15) >= plt_threshold ? 8 : 0) */
	RULE_KIND_PLT = 3,
	/* CFA = rbp + cfa_offset, and the CFA may lie on another stack (need
	 * not be above rsp): a function that switched stacks and keeps its
	 * frame pointer in rbp (Go's systemstack, asmcgocall, cgocallback,
	 * the vDSO callers). At most MAX_STACK_SWITCHES per sample. */
	RULE_KIND_STACK_SWITCH = 4,
};

enum cfa_base {
	CFA_BASE_RSP = 0,
	CFA_BASE_RBP = 1,
};

enum rbp_kind {
	/* rbp keeps the caller's value */
	RBP_UNCHANGED = 0,
	/* the caller's rbp is at CFA + rbp_offset */
	RBP_AT_CFA = 1,
	/* the caller's rbp is at rbp + rbp_offset */
	RBP_AT_RBP = 2,
};

/* One deduplicated unwind rule (unwind_rules[rule_id]). The return
 * address is at CFA - 8 and the caller's rsp is the CFA. */
struct unwind_rule {
	__u8 kind;           /* enum rule_kind */
	__u8 cfa_base;       /* enum cfa_base */
	__u8 rbp_kind;       /* enum rbp_kind */
	__u8 plt_threshold;
	__s32 cfa_offset;
	__s32 deref_outer;
	__s32 rbp_offset;
};

/* x86-64 signal frames: at the rt_sigreturn trampoline rsp points at the
 * struct ucontext of the rt_sigframe (the handler's return popped
 * pretcode). uc_mcontext (struct sigcontext) is at offset 40 (uc_flags,
 * uc_link, a 24-byte stack_t); in it rbp, rsp and rip are words 10, 15
 * and 16 (arch/x86/include/uapi/asm/sigcontext.h, checked against
 * glibc's offsetof(ucontext_t, uc_mcontext.gregs[REG_*])). */
#define UCONTEXT_RBP 120
#define UCONTEXT_RSP 160
#define UCONTEXT_RIP 168

/* Indexes into the per-CPU counters array. Never renumber: the Rust side
 * names them by these values. Retired ids stay reserved. */
enum counter_id {
	/* perf event fired and the program ran */
	COUNTER_SAMPLES_TRIGGERED = 0,
	/* sample sent to the ring buffer */
	COUNTER_SAMPLES_SENT = 1,
	/* ring buffer full: sample lost */
	COUNTER_SAMPLES_LOST_RINGBUF = 2,
	/* the CPU was idle (pid 0): nothing to profile */
	COUNTER_SAMPLES_IDLE = 3,
	/* process not selected by the pid filter */
	COUNTER_SAMPLES_FILTERED = 4,
	/* bpf_get_stack failed for the kernel stack */
	COUNTER_KERNEL_STACK_ERROR = 5,
	/* retired: bpf_get_stack failed for the user stack (frame-pointer
	 * unwinding, replaced by the native unwinder) */
	COUNTER_USER_STACK_ERROR = 6,
	/* process event sent to user space */
	COUNTER_PROCESS_EVENTS_SENT = 7,
	/* process event lost: its ring buffer was full */
	COUNTER_PROCESS_EVENTS_LOST = 8,
	/* process event not sent: one of its kind for the pid was sent
	 * just before (helpers.h: *_EVENT_INTERVAL_NS) */
	COUNTER_PROCESS_EVENTS_RATE_LIMITED = 9,
	/* user frames unwound (summed over samples) */
	COUNTER_USER_FRAMES = 10,
	/* tail calls into the native unwinder */
	COUNTER_NATIVE_TAIL_CALLS = 11,
	/* CPython frames recorded */
	COUNTER_PYTHON_FRAMES = 12,
	/* tail calls into the Python unwinder (hand-overs included) */
	COUNTER_PYTHON_TAIL_CALLS = 13,
	/* samples in a CPython evaluation loop whose thread state was not
	 * found (their loops stay native frames) */
	COUNTER_PYTHON_NO_THREAD_STATE = 14,
	/* a CPython frame could not be read (the rest of the stack's loops
	 * stay native frames) */
	COUNTER_PYTHON_READ_ERRORS = 15,
	/* samples sent with a stack copy (struct stack_copy) */
	COUNTER_STACK_COPIES = 16,
	/* samples that needed a stack copy and went without: the per-CPU
	 * budget was spent or the ring buffer was filling up */
	COUNTER_STACK_COPY_SKIPPED = 17,
	/* samples that needed a stack copy and no window could be read */
	COUNTER_STACK_COPY_FAILED = 18,
	/* bytes of user stack copied */
	COUNTER_STACK_COPY_BYTES = 19,
	/* A fork's child could not be selected: selected_pids is full */
	COUNTER_SELECTED_PIDS_FULL = 20,
	/* the agent runs in a nested PID namespace and the sampled task is
	 * not in it (nor in one below it): its /proc is not the agent's to
	 * read, so the sample is dropped */
	COUNTER_SAMPLES_OTHER_PID_NS = 22,
	/* HotSpot (hotspot_unwinder.bpf.h): Java frames recorded */
	COUNTER_HOTSPOT_FRAMES = 26,
	/* HotSpot: tail calls into its unwinder (hand-overs included) */
	COUNTER_HOTSPOT_TAIL_CALLS = 27,
	/* HotSpot: a pc in a JVM's anonymous code of a process without its
	 * hotspot_processes entry, or whose code cache is not set (the JVM
	 * is starting) */
	COUNTER_HOTSPOT_NO_PROCESS = 28,
	/* HotSpot: a pc in the code cache that no code blob holds (free
	 * space, or the segment map changed under the walk) */
	COUNTER_HOTSPOT_NO_BLOB = 29,
	/* HotSpot: a frame, blob or method could not be read */
	COUNTER_HOTSPOT_READ_ERRORS = 30,
	/* HotSpot: unwinding a Java frame gave a bad stack pointer */
	COUNTER_HOTSPOT_BAD_FRAMES = 31,
	/* HotSpot: compiled frames whose return address was patched to
	 * their nmethod's deoptimisation handler, named at the pc saved in
	 * the frame */
	COUNTER_HOTSPOT_DEOPT_FRAMES = 21,
	/* HotSpot: leaf frames sampled before their frame was built (entry,
	 * prologue) or after it was torn down (epilogue), unwound from what
	 * their instructions had pushed */
	COUNTER_HOTSPOT_FRAMELESS = 23,
	/* HotSpot: a leaf pc in a prologue whose instructions were not
	 * recognised, or a frame of a stub without a frame size that does
	 * not keep rbp as its frame pointer: the stack ends there */
	COUNTER_HOTSPOT_UNKNOWN_ENTRY = 24,
	/* HotSpot: frames of stubs without a frame size of their own (the
	 * StubRoutines blobs' stubs, C1's runtime stubs that push
	 * registers) unwound from a return address checked against the
	 * call that pushed it */
	COUNTER_HOTSPOT_STUB_FRAMES = 25,
	/* COUNTER_UNWIND_STOP_BASE + enum unwind_stop: how each user
	 * stack ended */
	COUNTER_UNWIND_STOP_BASE = 32,
	/* Off-CPU profiling (off_cpu.bpf.h), at the top of the range:
	 * scheduler switches seen */
	COUNTER_OFF_CPU_SWITCHES = 56,
	/* switch-outs of user threads sampled (their stack was sent) */
	COUNTER_OFF_CPU_SAMPLED = 57,
	/* struct off_cpu_end sent at the sampled thread's switch-in */
	COUNTER_OFF_CPU_ENDS_SENT = 58,
	/* struct off_cpu_end lost: the ring buffer was full */
	COUNTER_OFF_CPU_ENDS_LOST = 59,
	/* 64-127: one block of 8 per interpreter unwinder, in slot order:
	 * V8 64-71, CRuby 72-79, PHP 80-87, Perl 88-95, (Go labels
	 * 96-103), BEAM 104-111. */
	/* V8 (v8_unwinder.bpf.h): JavaScript frames recorded */
	COUNTER_V8_FRAMES = 64,
	/* V8: tail calls into its unwinder (hand-overs included) */
	COUNTER_V8_TAIL_CALLS = 65,
	/* V8: a pc in V8's code of a process without its v8_processes entry */
	COUNTER_V8_NO_PROCESS = 66,
	/* V8: a frame could not be read */
	COUNTER_V8_READ_ERRORS = 67,
	/* V8: a frame that is neither marked nor JavaScript, or whose
	 * caller's frame pointer is not above it */
	COUNTER_V8_BAD_FRAMES = 68,
	/* V8: marker frames passed (exit, stub, internal...: not recorded) */
	COUNTER_V8_MARKER_FRAMES = 69,
	/* V8: entry frames: back to the C++ that called JavaScript */
	COUNTER_V8_ENTRY_FRAMES = 70,
	/* CRuby (ruby_unwinder.bpf.h): Ruby frames recorded */
	COUNTER_RUBY_FRAMES = 72,
	/* CRuby: tail calls into its unwinder (hand-overs included) */
	COUNTER_RUBY_TAIL_CALLS = 73,
	/* CRuby: samples in rb_vm_exec whose thread's execution context was
	 * not found (TLS not set up, the thread is not a Ruby thread) */
	COUNTER_RUBY_NO_EC = 74,
	/* CRuby: a control frame, its environment or its iseq could not be
	 * read, or the VM stack is not where the context says (the rest of
	 * the stack's loops stay native frames) */
	COUNTER_RUBY_READ_ERRORS = 75,
	/* CRuby: control frames skipped (dummy frames, frames with no pc
	 * yet: they run no code) */
	COUNTER_RUBY_SKIPPED_FRAMES = 76,
	/* CRuby: a loop frame with no control frame left for it (its
	 * native frame is kept) */
	COUNTER_RUBY_EMPTY_LOOPS = 77,
	/* PHP (php_unwinder.bpf.h): PHP frames recorded */
	COUNTER_PHP_FRAMES = 80,
	/* PHP: tail calls into its unwinder (hand-overs included) */
	COUNTER_PHP_TAIL_CALLS = 81,
	/* PHP: samples in execute_ex with no current_execute_data (or its
	 * file's php_files entry missing): the runs stay native frames */
	COUNTER_PHP_NO_FRAMES = 82,
	/* PHP: a zend_execute_data could not be read (the rest of the
	 * stack's execute_ex runs stay native frames) */
	COUNTER_PHP_READ_ERRORS = 83,
	/* PHP: frames without a function skipped (VM-internal dummies) */
	COUNTER_PHP_SKIPPED_FRAMES = 84,
	/* PHP: an execute_ex frame with no PHP frame left for it (its
	 * native frame is kept) */
	COUNTER_PHP_EMPTY_LOOPS = 85,
	/* Perl (perl_unwinder.bpf.h): Perl frames recorded */
	COUNTER_PERL_FRAMES = 88,
	/* Perl: tail calls into its unwinder (hand-overs included) */
	COUNTER_PERL_TAIL_CALLS = 89,
	/* Perl: samples in Perl_runops_standard whose interpreter was not
	 * found (a thread other than the main one of a threaded perl, no
	 * perl_files entry, no stack yet): the runs stay native frames */
	COUNTER_PERL_NO_INTERPRETER = 90,
	/* Perl: a stack info or context could not be read (the rest of the
	 * stack's runs stay native frames) */
	COUNTER_PERL_READ_ERRORS = 91,
	/* Perl: a runops frame with no Perl frame left for it (its native
	 * frame is kept) */
	COUNTER_PERL_EMPTY_LOOPS = 92,
	/* Go pprof labels (go_labels.bpf.h), 96-103: samples of a Go
	 * process sent with the labels of their goroutine */
	COUNTER_GO_LABELS_SAMPLES = 96,
	/* Go: the thread pointer, g, g.m or m.curg could not be read (a
	 * thread not started by the Go runtime, or TLS not set up) */
	COUNTER_GO_LABELS_NO_G = 97,
	/* Go: the goroutine's label set could not be read */
	COUNTER_GO_LABELS_READ_ERRORS = 98,
	/* Go: more labels than GO_LABELS_MAX (the first ones are sent),
	 * a map's labels beyond the buckets read, or a key or value cut */
	COUNTER_GO_LABELS_TRUNCATED = 99,
	/* Go: stacks followed from runtime.morestack on the system stack to
	 * the goroutine that grows its stack (curg.sched) */
	COUNTER_GO_MORESTACK_FOLLOWED = 100,
	/* Go: stacks followed from runtime.mcall or runtime.morestack on the
	 * system stack, with no goroutine to follow, to the thread's root
	 * (m.g0.sched: runtime.mstart0, runtime.mstart) */
	COUNTER_GO_SCHEDULER_ROOTS = 101,
	/* BEAM (beam_unwinder.bpf.h): Erlang frames recorded */
	COUNTER_BEAM_FRAMES = 104,
	/* BEAM: tail calls into its unwinder (hand-overs included) */
	COUNTER_BEAM_TAIL_CALLS = 105,
	/* BEAM: a pc in the JIT's code of a process without its
	 * beam_processes entry (its frame ends the stack) */
	COUNTER_BEAM_NO_PROCESS = 106,
	/* BEAM: the Erlang stack could not be read */
	COUNTER_BEAM_READ_ERRORS = 107,
	/* BEAM: no continuation pointer within BEAM_SCAN_WORDS words above
	 * a frame's stack pointer (a frame larger than that, or not an
	 * Erlang stack): the stack ends there */
	COUNTER_BEAM_NO_CP = 108,
	/* BEAM: JIT code reached from C (a BIF, the garbage collector, the
	 * scheduler) on the scheduler's C stack: its frame is recorded, the
	 * Erlang frames above it are not followed */
	COUNTER_BEAM_FROM_C = 109,
	/* BEAM: stacks walked down to beam_normal_exit and on into the
	 * scheduler thread's native frames */
	COUNTER_BEAM_SCHEDULER_ROOTS = 110,
	/* BEAM: the bottom of the Erlang stack was reached but the
	 * scheduler's return address was not found (no rbx at the sample,
	 * or not native code there) */
	COUNTER_BEAM_NO_ROOT = 111,
	/* BEAM: of the COUNTER_BEAM_FROM_C frames, those whose Erlang
	 * stack pointer was found (in rbp or in the scheduler's current
	 * process, as the JIT's code at the return address reloads it) and
	 * whose Erlang frames were followed */
	COUNTER_BEAM_FROM_C_FOLLOWED = 112,
	COUNTER_MAX = 128,
};
_Static_assert(COUNTER_UNWIND_STOP_BASE + UNWIND_STOP_COUNT <= COUNTER_OFF_CPU_SWITCHES, "counters fit");

/* How a CPython version chains its frames (struct python_file). */
enum python_frame_model {
	/* 3.8-3.10: PyFrameObject, one per evaluation loop run
	 * (tstate->frame, f_back). */
	PYTHON_FRAMES_OBJECTS = 0,
	/* 3.11: _PyInterpreterFrame; a loop run ends at the frame whose
	 * is_entry is set (that frame is its first). */
	PYTHON_FRAMES_ENTRY_FLAG = 1,
	/* 3.12+: _PyInterpreterFrame; a loop run ends at the shim frame it
	 * pushed on the C stack (owner == FRAME_OWNED_BY_CSTACK). */
	PYTHON_FRAMES_CSTACK_OWNER = 2,
};

/* Where a CPython frame says which instruction runs. */
enum python_lasti {
	/* int f_lasti: a byte offset (3.8, 3.9) */
	PYTHON_LASTI_BYTES = 0,
	/* int f_lasti: an index of 2-byte code units (3.10) */
	PYTHON_LASTI_UNITS = 1,
	/* a pointer into the code object's co_code_adaptive (3.11+:
	 * prev_instr, instr_ptr) */
	PYTHON_LASTI_POINTER = 2,
};

/* _PyInterpreterFrame.owner of the shim frame an evaluation loop run
 * pushes on the C stack (FRAME_OWNED_BY_CSTACK in 3.12 and 3.13,
 * FRAME_OWNED_BY_INTERPRETER from 3.14). Owners above it (3.14's
 * FRAME_OWNED_BY_CSTACK) are not Python code either. */
#define PYTHON_OWNER_CSTACK 3
/* An offset that does not apply to the version. */
#define PYTHON_NO_OFFSET 0xffffffffU
/* Bytes of a frame read at once; every frame field lies below. */
#define PYTHON_FRAME_READ_MAX 128

/* What the unwinder needs of one CPython build (python_files[file_id],
 * set by user space from the ELF symbols and per-version layouts:
 * crates/interpreters). Offsets are in bytes. */
struct python_file {
	__u64 runtime_vaddr;             /* _PyRuntime, ELF virtual address */
	__u16 version;                   /* major << 8 | minor */
	__u8 frame_model;                /* enum python_frame_model */
	__u8 lasti_kind;                 /* enum python_lasti */
	__u32 frame_read_size;           /* bytes of a frame to read (<= PYTHON_FRAME_READ_MAX) */
	__u32 runtime_interpreters_head; /* _PyRuntimeState.interpreters.head */
	__u32 interp_next;               /* PyInterpreterState.next */
	__u32 interp_threads_head;       /* PyInterpreterState.tstate_head / threads.head */
	__u32 tstate_next;               /* PyThreadState.next */
	__u32 tstate_thread_id;          /* PyThreadState.thread_id (pthread_self) */
	__u32 tstate_frame;              /* PyThreadState.frame / cframe / current_frame */
	__u32 cframe_current_frame;      /* _PyCFrame.current_frame, or PYTHON_NO_OFFSET */
	__u32 frame_previous;            /* f_back / previous */
	__u32 frame_code;                /* f_code / f_executable */
	__u32 frame_lasti;               /* f_lasti / prev_instr / instr_ptr */
	__u32 frame_entry;               /* is_entry (3.11) / owner (3.12+) */
	__u32 code_adaptive;             /* PyCodeObject.co_code_adaptive (3.11+) */
	__u32 frame_code_tag_mask;       /* tag bits of f_executable (a _PyStackRef from 3.14), 0 before */
	__u32 reserved;
};

/* Off-CPU profiling (off_cpu.bpf.h). A sampled switch-out sends the
 * thread's stack as a sample_event with SAMPLE_FLAG_OFF_CPU (ktime_ns:
 * when it left the CPU); its switch-in sends a struct off_cpu_end
 * through the same ring buffer, after it (the thread cannot run again
 * before its switch-out's program returned). User space joins the two by
 * (tid, switch_out_ns). */
#define SAMPLE_FLAG_OFF_CPU 2

struct off_cpu_end {
	__u32 pid;            /* tgid */
	__u32 tid;
	__u64 switch_out_ns;  /* the ktime_ns of the switch-out's sample */
	__u64 off_cpu_ns;     /* from the switch-out to the switch-in */
};
/* Records of the samples ring buffer are told apart by length: every
 * sample_event is at least its header. */
_Static_assert(sizeof(struct off_cpu_end) < SAMPLE_EVENT_HEADER_SIZE, "off_cpu_end is shorter than a sample");

/* HotSpot (hotspot_unwinder.bpf.h). One code heap of a JVM's code
 * cache: [low, high), and its segment map (one byte per segment of
 * 2^log2_segment_size bytes: 0xff free, 0 a block's first segment, else
 * how many segments to step back). */
#define HOTSPOT_MAX_HEAPS 4

struct hotspot_heap {
	__u64 low;
	__u64 high;
	__u64 segmap;
	__u32 log2_segment_size;
	__u32 reserved;
};

/* What the HotSpot unwinder needs of one JVM process
 * (hotspot_processes[tgid], set by user space from the JVM's vmStructs
 * tables: crates/interpreters/src/hotspot). Addresses are the process's;
 * offsets are in bytes, slots in words from the frame pointer. The code
 * cache's bounds and heaps are set while the VM starts: user space gives
 * them when it could read them, else the unwinder reads them (through
 * the code_* addresses and offsets) and stores them here, once. */
struct hotspot_process {
	__u64 code_low;                  /* CodeCache::_low_bound (0: not read yet) */
	__u64 code_high;                 /* CodeCache::_high_bound */
	__u64 interpreter_code;          /* &AbstractInterpreter::_code (StubQueue*) */
	__u64 call_stub_return;          /* &StubRoutines::_call_stub_return_address */
	__u64 code_low_bound;            /* &CodeCache::_low_bound */
	__u64 code_high_bound;           /* &CodeCache::_high_bound */
	__u64 code_heaps;                /* &CodeCache::_heaps (GrowableArray<CodeHeap*>*) */
	__u32 growable_array_len;        /* GrowableArrayBase::_len (int) */
	__u32 growable_array_data;       /* GrowableArray<int>::_data */
	__u32 code_heap_memory;          /* CodeHeap::_memory (VirtualSpace) */
	__u32 code_heap_segmap;          /* CodeHeap::_segmap (VirtualSpace) */
	__u32 code_heap_log2_segment_size; /* CodeHeap::_log2_segment_size (int) */
	__u32 virtual_space_low;         /* VirtualSpace::_low_boundary */
	__u32 virtual_space_high;        /* VirtualSpace::_high_boundary */
	__u32 reserved2;
	struct hotspot_heap heaps[HOTSPOT_MAX_HEAPS];
	__u32 heap_count;                /* 0: not read yet */
	__u32 heap_block_size;           /* sizeof(HeapBlock): the blob follows */
	__u32 heap_block_used;           /* HeapBlock::_header._used */
	__u32 stub_queue_buffer;         /* StubQueue::_stub_buffer */
	__u32 stub_queue_limit;          /* StubQueue::_buffer_limit (int) */
	__u32 blob_frame_size;           /* CodeBlob::_frame_size (int, words) */
	__u32 method_const_method;       /* Method::_constMethod */
	__u32 const_method_size;         /* sizeof(ConstMethod): the bytecodes follow */
	__s32 interp_method_slot;        /* Method* at fp + 8 * slot */
	__s32 interp_bcp_slot;           /* bcp at fp + 8 * slot */
	__s32 interp_sender_sp_slot;     /* the caller's sp at fp + 8 * slot */
	__u32 nmethod_compile_id;        /* nmethod::_compile_id (int): a compiled frame's mark */
	__u32 nmethod_orig_pc_offset;    /* nmethod::_orig_pc_offset (int): bytes above a frame's sp */
	__u32 nmethod_deopt_handler;     /* the nmethod's deoptimisation handler (0: none): */
	__u32 deopt_handler_is_offset;   /* 0: a pointer there (JDK < 23); 1: an int, from the blob */
	/* Where a compiled frame's leaf pc may lie before its frame is built
	 * or after it is torn down (hotspot_leaf_shape): */
	__u32 blob_code_begin;           /* CodeBlob::_code_begin (pointer), or _code_offset (int, from the blob) */
	__u32 blob_frame_complete;       /* CodeBlob::_frame_complete_offset (from the code's start) */
	__u32 nmethod_verified_entry;    /* _verified_entry_point (pointer), or _verified_entry_offset (u16, from the code's start) */
	__u32 blob_kind;                 /* CodeBlob::_kind (u8), when HOTSPOT_HAS_KIND */
	__u32 blob_kind_nmethod;         /* CodeBlobKind::Nmethod */
	__u32 code_flags;                /* HOTSPOT_CODE_OFFSETS | HOTSPOT_ENTRY_OFFSETS | ... */
	__u32 reserved;
};

/* struct hotspot_process's code_flags. */
#define HOTSPOT_CODE_OFFSETS 1      /* blob_code_begin is _code_offset (JDK 23+) */
#define HOTSPOT_ENTRY_OFFSETS 2     /* nmethod_verified_entry is a u16 offset (JDK 23+) */
#define HOTSPOT_FRAME_COMPLETE_16 4 /* _frame_complete_offset is int16_t (JDK 23+) */
#define HOTSPOT_HAS_KIND 8          /* blob_kind is set (JDK 23+) */


/* CRuby (ruby_unwinder.bpf.h). How a build reaches ruby_current_ec, the
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

/* Words of a frame read at once: fp - 8 * V8_LOWEST_SLOT .. fp + 8. */
#define V8_FRAME_SLOTS 8
#define V8_LOWEST_SLOT (-6)
/* PHP (php_unwinder.bpf.h). Offsets (bytes) in a zend_execute_data
 * read at once: every field lies below PHP_EXECUTE_DATA_READ. */
#define PHP_EXECUTE_DATA_READ 64

/* What the PHP unwinder needs of one (non-ZTS) PHP build
 * (php_files[file_id], set by user space from the ELF symbols and the
 * version's layout: crates/interpreters/src/php). */
struct php_file {
	__u64 executor_globals_vaddr;    /* executor_globals, ELF virtual address */
	__u32 eg_current_execute_data;   /* zend_executor_globals.current_execute_data */
	__u32 ex_opline;                 /* zend_execute_data.opline */
	__u32 ex_func;                   /* zend_execute_data.func */
	__u32 ex_call_info;              /* zend_execute_data.This.u1.type_info */
	__u32 ex_prev;                   /* zend_execute_data.prev_execute_data */
	__u32 op_lineno;                 /* zend_op.lineno */
	__u32 call_top;                  /* ZEND_CALL_TOP in the call info */
	__u32 op_array_line_start;       /* zend_op_array.line_start */
};

/* Perl (perl_unwinder.bpf.h). Bytes of a PERL_CONTEXT (or a PERL_SI)
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

/* Go pprof labels (go_labels.bpf.h): the labels of the goroutine a
 * sampled thread of a Go process runs (pprof.Do, SetGoroutineLabels).
 * With SAMPLE_FLAG_GO_LABELS, a struct go_labels cut after its `count`
 * labels follows the frame words (and the stack copy, if any). Keys and
 * values are cut to GO_LABEL_KEY_LEN - 1 and GO_LABEL_VALUE_LEN - 1
 * bytes and NUL-terminated. */
#define SAMPLE_FLAG_GO_LABELS 4
#define GO_LABELS_MAX 10
#define GO_LABEL_KEY_LEN 32
#define GO_LABEL_VALUE_LEN 64

struct go_label {
	char key[GO_LABEL_KEY_LEN];
	char value[GO_LABEL_VALUE_LEN];
};

struct go_labels {
	__u8 count;
	__u8 reserved[7];
	struct go_label labels[GO_LABELS_MAX];
};
#define GO_LABELS_HEADER_SIZE 8
_Static_assert(__builtin_offsetof(struct go_labels, labels) == GO_LABELS_HEADER_SIZE, "go_labels header");

/* How a Go version keeps a goroutine's labels (g.labels points to it). */
enum go_labels_layout {
	/* Go 1.13-1.23: a *labelMap, a map[string]string (hmap). */
	GO_LABELS_HMAP = 0,
	/* Go 1.24+: a *labelMap holding a []label of {key, value string},
	 * sorted by key. */
	GO_LABELS_SLICE = 1,
};
/* hmap (runtime/map.go, Go 1.13-1.23): count, B and buckets. */
#define GO_HMAP_COUNT 0
#define GO_HMAP_LOG2_BUCKETS 9
#define GO_HMAP_BUCKETS 16
/* A bucket of a map[string]string: 8 tophash bytes, 8 keys, 8 values
 * (string headers), the overflow pointer. */
#define GO_BUCKET_SLOTS 8
#define GO_BUCKET_SIZE (8 + 2 * GO_BUCKET_SLOTS * 16 + 8)
/* Buckets of a label map read (2^B <= this; larger maps: the first
 * ones, counted as truncated). */
#define GO_HMAP_MAX_BUCKETS 4

/* What reading the labels needs of one Go process
 * (go_label_processes[tgid], set by user space from the executable's
 * Go version and code: crates/interpreters/src/go_labels). */
struct go_labels_process {
	__s32 tls_g;        /* the current g is at thread pointer + tls_g */
	__u32 g_m;          /* runtime.g.m */
	__u32 m_curg;       /* runtime.m.curg */
	__u32 g_labels;     /* runtime.g.labels */
	__u8 layout;        /* enum go_labels_layout */
	__u8 g_sched;       /* runtime.g.sched (a gobuf: sp at 0, pc at 8) */
	__u8 gobuf_bp;      /* runtime.gobuf.bp */
	__u8 reserved[5];
};

#endif
