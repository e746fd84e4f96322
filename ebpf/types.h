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
/* Longest user stack we keep: real programs recurse deeper than 1,000
 * frames (a Go formatter ~1,900, a TypeScript compile on Node, erlc).
 * Bounded by the scratch record (a per-CPU map value, maps.h) and by the
 * program runs a sample gets (native_unwinder.bpf.h). */
#define MAX_USER_FRAMES 2048
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

/* Each runtime's part of the contract (ebpf/runtimes/<name>/types.h, for
 * every line of runtimes.h): its map value, the layout of its frame
 * words' payload and its width, <NAME>_FRAME_PAYLOAD_BITS, which must fit
 * its slot's (checked below, and by crates/bpf's runtime test), its
 * constants and its per-sample scratch (struct <name>_scratch). */
#define RUNTIME_FILE types.h
#include "runtime_files.h"
#undef RUNTIME_FILE

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
	/* A pc in a runtime's JIT code that its unwinder could not unwind
	 * (no code blob holds it, a frame could not be read): see that
	 * runtime's counters. */
	UNWIND_STOP_RUNTIME_CODE = 17,
	/* A frame this architecture's build cannot unwind yet (ebpf/arch.h:
	 * on arm64, a PLT stub or a signal frame). */
	UNWIND_STOP_ARCH_UNSUPPORTED = 18,
	UNWIND_STOP_COUNT = 19,
};

/* One sample, as sent through the samples ring buffer. Only the header
 * and the used frame words are sent: frames[] holds kernel_frames kernel
 * addresses, then user_frames user addresses (pcs; see FRAME_EXACT_PC),
 * leaf first. With SAMPLE_FLAG_STACK_COPY, a struct stack_copy and its
 * bytes follow the used frame words (in the scratch record they share
 * one area with the unused ones: maps.h). */
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
 * unwinds the rest of it from this window with the same rules. A
 * command-line interpreter may run its scripts 12-22 KiB above main's
 * frame (one frame alone can take 5 KiB); the scratch record that holds
 * the window is a per-CPU map value, at most 32 KiB (maps.h). Such a
 * sample has few frames (UNKNOWN_PID: none but the leaf); one with many
 * gets the room its frame words leave (STACK_COPY_DEEP_MAX, maps.h). */
#define STACK_COPY_MAX 24576

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
/* The prefix covers an interpreter's evaluation loop (or a runtime's JIT
 * code): the interpreter unwinder records the interpreted frames that
 * loop runs in place of its native frame. The file's <name>_files entry
 * (or the process's <name>_processes one) says how. */
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
#define RUNTIME_EACH(name, NAME, slot, map) UNWINDER_##NAME = slot,
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
	/* 1 + the runtimes of runtimes.h */
	UNWINDER_COUNT = 1
#define RUNTIME_EACH(name, NAME, slot, map) +1
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
	,
};
/* Slots are dense: each below UNWINDER_COUNT (and distinct: the
 * programs array's initializer rejects a slot given twice). */
#define RUNTIME_EACH(name, NAME, slot, map) \
	_Static_assert(slot > UNWINDER_NATIVE && slot < UNWINDER_COUNT, #name "'s slot is dense");
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
/* Every runtime's frame words fit: its slot is one a frame word can name,
 * and its payload (<NAME>_FRAME_PAYLOAD_BITS, declared with its layout
 * above) fits that slot's payload bits. */
#define RUNTIME_EACH(name, NAME, slot, map)                                                              \
	_Static_assert(slot <= FRAME_EXTENDED_SLOT_MASK, #name "'s slot fits a frame word");          \
	_Static_assert(NAME##_FRAME_PAYLOAD_BITS <= FRAME_PAYLOAD_BITS(slot), #name "'s payload fits its slot");
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH

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

/* Indexes into the per-CPU counters array. The shared ones are numbered
 * here and never renumbered (retired ids stay reserved); each runtime's
 * follow them. The Rust side names them all by bindgen's values. */
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
	/* Each runtime's counters (ebpf/runtimes/<name>/counters.h), in the
	 * order of runtimes.h, numbered from COUNTER_RUNTIMES_BASE on: their
	 * ids change with the list, the Rust side takes them from bindgen. */
	COUNTER_RUNTIMES_BASE = 104,
	COUNTER_RUNTIMES_BEFORE = COUNTER_RUNTIMES_BASE - 1,
#define COUNTER(id, doc) COUNTER_##id,
#define RUNTIME_FILE counters.h
#include "runtime_files.h"
#undef RUNTIME_FILE
#undef COUNTER
	/* One past the last counter: the size of the counters map. */
	COUNTER_MAX,
};
_Static_assert(COUNTER_UNWIND_STOP_BASE + UNWIND_STOP_COUNT <= COUNTER_OFF_CPU_SWITCHES, "counters fit");
_Static_assert(COUNTER_GO_SCHEDULER_ROOTS < COUNTER_RUNTIMES_BASE, "the runtimes' counters follow the shared ones");


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
