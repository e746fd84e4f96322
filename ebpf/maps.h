/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every shared map of the programs, with what it is for (a runtime's own
 * maps, other than its <name>_files or <name>_processes, are in its
 * unwinder.bpf.h). Sizes marked "set by user space" are overridden
 * before load (crates/bpf/src/sampler.rs).
 */
#ifndef EP_MAPS_H
#define EP_MAPS_H

#include "types.h"
#include "runtimes.h"

/* Samples for user space. Size set by user space at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} samples SEC(".maps");

/* New processes, unknown pcs and exits, for the process manager. Small,
 * and read with wake-ups (not on a timer) so that a new process's tables
 * are loaded within milliseconds of its first sample. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18); /* 8192 events: bursts of execs */
} process_events SEC(".maps");

/* The tgids to profile when filter_pids is set (value unused). Sized
 * for select_descendants (a container's processes), beyond the 1024 of
 * an explicit pid list. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SELECTED_PIDS_MAX);
	__type(key, u32);
	__type(value, u8);
} selected_pids SEC(".maps");

/* Unwind state and the sample being built, per CPU: the entry program
 * fills it and the native unwinder's tail calls carry it on (perf_event
 * programs do not nest on one CPU). Too big for the 512-byte stack. */
struct unwind_state {
	u64 pc;
	u64 sp;
	u64 fp;
	/* rbx at the sample (x86-64; 0 elsewhere or after the leaf): a
	 * JIT may keep its own registers there */
	u64 bx;
	/* pc is exact (leaf, or interrupted by a signal), not a return
	 * address: its rule is looked up at pc, not pc - 1 */
	u8 exact;
	u8 tail_calls;
	/* RULE_KIND_STACK_SWITCH frames unwound so far */
	u8 stack_switches;
	/* The sample wakes user space at once (finish_sample): set at
	 * UNWIND_STOP_UNKNOWN_PID when the process event went out. */
	u8 wake_reader;
	u8 reserved[4];
};

/* Whether this sample's interpreter loops are unwound as such. */
enum interp_mode {
	/* No loop met yet: the first one hands over. */
	INTERP_MODE_NONE = 0,
	/* The interpreter unwinder runs the sample (it found the
	 * thread's frames). */
	INTERP_MODE_ACTIVE = 1,
	/* The frames could not be found or read: loops are native frames. */
	INTERP_MODE_UNAVAILABLE = 2,
};

/* What unwind_step does at the next interpreter loop frame. */
enum interp_next {
	/* Hand over to the interpreter unwinder (STEP_INTERPRETER). */
	INTERP_NEXT_HAND_OVER = 0,
	/* Its interpreted frames are recorded: unwind it without
	 * recording it. */
	INTERP_NEXT_SKIP = 1,
	/* No interpreted frames for it: record it as a native frame. */
	INTERP_NEXT_NATIVE = 2,
};

/* The interpreter unwinder's part of the unwind state
 * (interpreters.bpf.h, interpreter_driver.bpf.h). */
struct interp_state {
	/* enum interp_mode */
	u8 mode;
	/* enum interp_next: what the native unwinder does at the next
	 * frame of an interpreter loop */
	u8 next;
	/* the interpreter unwinder is recording the frames of the loop at pc */
	u8 in_loop;
	/* frames recorded for the loop at pc (saturating) */
	u8 loop_frames;
	/* enum unwinder_program of the loop handed over */
	u8 unwinder;
	u8 reserved[3];
	/* The interpreter file (its process range) the hand-over came from. */
	u64 file_id;
	u64 bias;
	/* Each interpreter unwinder's own state, struct <name>_scratch of
	 * its types.h, as member <name>: the one place where they share the
	 * per-CPU scratch (only one runs at a time). */
	union {
#define RUNTIME_SCRATCH(name, NAME, slot, map) struct name##_scratch name;
		RUNTIMES(RUNTIME_SCRATCH)
#undef RUNTIME_SCRATCH
	};
};

/* The kernel's bound on a per-CPU map value (PCPU_MIN_UNIT_SIZE): scratch
 * cannot be created above it. */
#define SCRATCH_RECORD_MAX 32768
#define SAMPLE_WORDS_MAX (MAX_KERNEL_FRAMES + MAX_USER_FRAMES)

/* The members of struct sample_record before its tail room (all of
 * them multiples of 8 bytes: no padding, checked below). */
#define SAMPLE_HEAD_BYTES (sizeof(struct unwind_state) + sizeof(struct interp_state) + sizeof(struct sample_event))

/* The sample goes out in one piece: its header, the used frame words,
 * then a struct stack_copy and its window, then a struct go_labels. The
 * unused frame words and tail_room are one area for what follows the
 * used words: a stack as deep as MAX_USER_FRAMES and a full stack copy
 * do not both fit in a per-CPU value, and a sample has one or the other
 * (a stack copy is taken where the unwinder stopped early). */
struct sample_record {
	struct unwind_state state;
	struct interp_state interp;
	struct sample_event event;
	u8 tail_room[SCRATCH_RECORD_MAX - SAMPLE_HEAD_BYTES];
};
_Static_assert(sizeof(struct sample_record) == SCRATCH_RECORD_MAX, "the scratch record is a per-CPU map value");

/* Bytes from frames[0] to the end of the record. */
#define SAMPLE_AREA_BYTES (SAMPLE_WORDS_MAX * 8 + SCRATCH_RECORD_MAX - SAMPLE_HEAD_BYTES)
/* Of them, what the frame words and a stack copy (header and window)
 * may take: the Go labels' room is kept after them. */
#define SAMPLE_COPY_AREA (SAMPLE_AREA_BYTES - sizeof(struct go_labels) - sizeof(struct stack_copy))
/* Frame words (kernel and user) below which a full STACK_COPY_MAX
 * window fits after them. */
#define STACK_COPY_FULL_WORDS ((SAMPLE_COPY_AREA - STACK_COPY_MAX) / 8)
/* The window after more words: what the most frame words leave. */
#define STACK_COPY_DEEP_MAX (SAMPLE_COPY_AREA - SAMPLE_WORDS_MAX * 8)
_Static_assert(SAMPLE_COPY_AREA >= SAMPLE_WORDS_MAX * 8, "the frame words fit with the Go labels");
_Static_assert(STACK_COPY_FULL_WORDS >= MAX_KERNEL_FRAMES + 256,
	       "a full stack copy fits after a kernel stack and 256 user frames");
_Static_assert(STACK_COPY_DEEP_MAX >= 8192 && STACK_COPY_DEEP_MAX < STACK_COPY_MAX,
	       "a stack copy after the most frames is at least two pages");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sample_record);
} scratch SEC(".maps");

/* This CPU's scratch record (NULL only in the verifier's view). */
static __always_inline struct sample_record *scratch_record(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&scratch, &zero);
}

/* Stack copies are bounded per CPU: at most stack_copy_budget_bytes in
 * each STACK_COPY_BUDGET_NS window (helpers.h), so that a burst of new
 * processes (a fork bomb) cannot flood the samples ring buffer. */
struct stack_copy_budget {
	u64 window_start_ns;
	u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct stack_copy_budget);
} stack_copy_budgets SEC(".maps");

/* Why samples ended the way they did; see enum counter_id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

/* pid -> its executable ranges: their count and the first address of
 * each chunk (struct process_ranges, types.h). Hash maps without
 * preallocation allocate an entry when it is written, and 16 bytes of
 * bucket per max_entries up front. Set by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 14);
	__type(key, u32);
	__type(value, struct process_ranges);
} process_ranges SEC(".maps");

/* (pid, generation, chunk index) -> RANGES_PER_CHUNK of its ranges,
 * sorted. Set by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 15);
	__type(key, struct range_chunk_key);
	__type(value, struct range_chunk);
} process_range_chunks SEC(".maps");

/* The deduplicated unwind rules of every loaded file, by rule id
 * (profiler_elf::RuleInterner). Set by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 15);
	__type(key, u32);
	__type(value, struct unwind_rule);
} unwind_rules SEC(".maps");

/* (file, 64 KiB page) -> the page's slice of the file's deltas: 65536
 * pages are 4 GiB of text. (Hash maps allocate their buckets up front,
 * 16 bytes per entry of max_entries, even without preallocation.) Set by
 * user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct delta_page_key);
	__type(value, struct delta_page);
} delta_pages SEC(".maps");

/* The template of the per-file delta arrays: user space creates one
 * array per file, sized exactly (BPF_F_INNER_MAP lets sizes differ).
 * Each element holds two struct delta_entry (entry i is the low half of
 * element i / 2 when i is even, the high half when odd): array elements
 * take 8 bytes even when their value is 4, so pairs halve the memory. */
struct file_delta_array {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
};

/* file id -> its delta array. Set by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 13);
	__type(key, u64);
	__array(values, struct file_delta_array);
} file_deltas SEC(".maps");

/* Each interpreter unwinder's map (runtimes.h), by its kind:
 *
 * files: <name>_files, file id -> struct <name>_file: how to walk the
 * frames of the runtime's build in a loaded file. Set by user space
 * with the file's deltas, removed with them.
 *
 * processes: <name>_processes, tgid -> struct <name>_process: what the
 * unwinder needs of a runtime understood from a process's memory (its
 * debug metadata). Set by user space when the
 * process maps the runtime, removed when the process is unloaded. */
#define RUNTIME_MAP_files(name)                         \
	struct {                                        \
		__uint(type, BPF_MAP_TYPE_HASH);        \
		__uint(map_flags, BPF_F_NO_PREALLOC);   \
		__uint(max_entries, 1 << 10);           \
		__type(key, u64);                       \
		__type(value, struct name##_file);      \
	} name##_files SEC(".maps");                    \
	_Static_assert(sizeof(struct name##_file) > 0, "struct " #name "_file is defined");
#define RUNTIME_MAP_processes(name)                     \
	struct {                                        \
		__uint(type, BPF_MAP_TYPE_HASH);        \
		__uint(map_flags, BPF_F_NO_PREALLOC);   \
		__uint(max_entries, 1 << 12);           \
		__type(key, u32);                       \
		__type(value, struct name##_process);   \
	} name##_processes SEC(".maps");                \
	_Static_assert(sizeof(struct name##_process) > 0, "struct " #name "_process is defined");
#define RUNTIME_MAP(name, NAME, slot, map) RUNTIME_MAP_##map(name)
RUNTIMES(RUNTIME_MAP)
#undef RUNTIME_MAP

/* Go: tgid -> how to read its goroutines' pprof labels (struct
 * go_labels_process). Set by user space when the process's executable
 * is a Go program, removed when the process is unloaded. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 12);
	__type(key, u32);
	__type(value, struct go_labels_process);
} go_label_processes SEC(".maps");

/* The labels of the sample being built (SAMPLE_FLAG_GO_LABELS), read
 * by its entry program and appended when it is sent; and the string
 * headers read on the way. Per CPU, like scratch. */
struct go_labels_work {
	struct go_labels labels;
	/* a bucket of a label map (GO_LABELS_HMAP), or the {key, value}
	 * string headers of a label slice (GO_LABELS_SLICE) */
	u64 words[GO_LABELS_MAX * 4];
};
_Static_assert(GO_LABELS_MAX * 4 * 8 >= GO_BUCKET_SIZE, "a map bucket fits");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct go_labels_work);
} go_labels_scratch SEC(".maps");

/* When a process event of each kind was last sent for a pid (key
 * pid << 32 | kind), to rate-limit them (helpers.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 12);
	__type(key, u64);
	__type(value, u64);
} process_event_times SEC(".maps");

#endif
