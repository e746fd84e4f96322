/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unwinder programs and the hand-over from the native unwinder to
 * the unwinder of an interpreter.
 *
 * Included once by profiler.bpf.c, before native_unwinder.bpf.h and the
 * interpreter unwinders (ebpf/runtimes/<name>/unwinder.bpf.h).
 *
 * User space marks the process ranges (mappings.bpf.h) that cover an interpreter's
 * evaluation loop (MAPPING_FLAG_INTERPRETER_LOOP), or its code in
 * anonymous memory (a JVM's code cache: kind MAPPING_KIND_NO_UNWIND_INFO
 * with the flag), and names the loop's unwinder in the same flags (MAPPING_UNWINDER_SHIFT, enum
 * unwinder_program). When the native unwinder reaches such a frame it
 * calls interpreter_unwind, which tail-calls that unwinder; the native
 * unwinder itself names no interpreter.
 *
 * Every unwinder is its body, <name>_unwind_run(ctx, progs) in its own
 * file, run by two entries that differ only in their program type (a
 * tail call stays within programs of one type): <name>_unwind here
 * (perf_event, in programs) and <name>_off_cpu (tp_btf, in
 * off_cpu_programs: off_cpu.bpf.h). Both, their slots and the hand-over
 * counters follow from the list of runtimes.h: adding an interpreter is
 * its line there and its folder. An unwinder that walks the interpreter's
 * frames one loop frame at a time runs in
 * interpreter_unwind_run (interpreter_driver.bpf.h) and brings only its
 * start and step functions; one of a JIT runtime, which walks the
 * frames of its code, runs in jit_unwind_run (jit_driver.bpf.h) and
 * brings its attach and frame functions.
 */

/* The unwinders' bodies, defined in their files (included after this
 * one). */
static __always_inline int native_unwind_run(void *ctx, void *progs);
#define RUNTIME_EACH(name, NAME, slot, map) static __always_inline int name##_unwind_run(void *ctx, void *progs);
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH

/* Their perf_event entries. */
int native_unwind(struct bpf_perf_event_data *ctx);
#define RUNTIME_EACH(name, NAME, slot, map) int name##_unwind(struct bpf_perf_event_data *ctx);
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH

/* The unwinders, for tail calls; filled by libbpf at load. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, UNWINDER_COUNT);
	__uint(key_size, sizeof(u32));
	__array(values, int(void *));
} programs SEC(".maps") = {
	.values = {
		[UNWINDER_NATIVE] = (void *)&native_unwind,
#define RUNTIME_EACH(name, NAME, slot, map) [UNWINDER_##NAME] = (void *)&name##_unwind,
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
	},
};

#define UNWINDER_PERF_ENTRY(name)                                  \
	SEC("perf_event")                                          \
	int name##_unwind(struct bpf_perf_event_data *ctx)         \
	{                                                          \
		return name##_unwind_run(ctx, &programs);          \
	}
UNWINDER_PERF_ENTRY(native)
#define RUNTIME_EACH(name, NAME, slot, map) UNWINDER_PERF_ENTRY(name)
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH

/* The interpreter unwinder named by a pid_mapping's flags, or
 * UNWINDER_NATIVE when the mapping is not an interpreter loop. */
static __always_inline u8 mapping_unwinder(u32 flags)
{
	if (!(flags & MAPPING_FLAG_INTERPRETER_LOOP))
		return UNWINDER_NATIVE;
	u32 slot = (flags >> MAPPING_UNWINDER_SHIFT) & MAPPING_UNWINDER_MASK;
	return slot < UNWINDER_COUNT ? slot : UNWINDER_NATIVE;
}

/* Counts a tail call into an interpreter unwinder. */
static __always_inline void count_hand_over(u32 slot)
{
	switch (slot) {
#define RUNTIME_EACH(name, NAME, slot, map)             \
	case UNWINDER_##NAME:                      \
		count(COUNTER_##NAME##_TAIL_CALLS); \
		break;
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
	default:
		break;
	}
}

/* Tail-calls the unwinder of the interpreter whose loop the native
 * unwinder reached (record->interp.unwinder) in the program array of
 * the sample's entry (progs: programs, or off_cpu_programs); the caller
 * has checked the tail-call budget. Returns only if the call could not
 * be made. */
static __always_inline void interpreter_unwind(void *ctx, void *progs, struct sample_record *record)
{
	u32 slot = record->interp.unwinder;
	if (slot == UNWINDER_NATIVE || slot >= UNWINDER_COUNT)
		return;
	count_hand_over(slot);
	bpf_tail_call(ctx, progs, slot);
}

/* A thread exits: every interpreter forgets what it cached of it
 * (<name>_forget_thread, in its unwinder.bpf.h). */
#define RUNTIME_EACH(name, NAME, slot, map) static __always_inline void name##_forget_thread(u64 thread_key);
RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
static __always_inline void interpreters_forget_thread(u64 thread_key)
{
#define RUNTIME_EACH(name, NAME, slot, map) name##_forget_thread(thread_key);
	RUNTIMES(RUNTIME_EACH)
#undef RUNTIME_EACH
}
