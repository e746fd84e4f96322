/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unwinder programs and the hand-over from the native unwinder to
 * the unwinder of an interpreter.
 *
 * Included once by profiler.bpf.c, before native_unwinder.bpf.h and the
 * interpreter unwinders (python_unwinder.bpf.h, ...).
 *
 * User space marks the process ranges (mappings.bpf.h) that cover an interpreter's
 * evaluation loop (MAPPING_FLAG_INTERPRETER_LOOP), or its code in
 * anonymous memory (a JVM's code cache: kind MAPPING_KIND_NO_UNWIND_INFO
 * with the flag), and names the loop's unwinder in the same flags (MAPPING_UNWINDER_SHIFT, enum
 * unwinder_program). When the native unwinder reaches such a frame it
 * calls interpreter_unwind, which tail-calls that unwinder; the native
 * unwinder itself names no interpreter.
 *
 * Adding an interpreter: its slot in enum unwinder_program (types.h),
 * its program below, its hand-over counter in count_hand_over. An
 * unwinder that walks the interpreter's frames one loop frame at a time
 * (Python, Ruby, PHP, Perl) runs in interpreter_unwind_run
 * (interpreter_driver.bpf.h) and brings only its start and step
 * functions.
 */

int native_unwind(struct bpf_perf_event_data *ctx);
int python_unwind(struct bpf_perf_event_data *ctx);
int hotspot_unwind(struct bpf_perf_event_data *ctx);
int v8_unwind(struct bpf_perf_event_data *ctx);
int ruby_unwind(struct bpf_perf_event_data *ctx);
int php_unwind(struct bpf_perf_event_data *ctx);
int perl_unwind(struct bpf_perf_event_data *ctx);

/* The unwinders, for tail calls; filled by libbpf at load. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, UNWINDER_COUNT);
	__uint(key_size, sizeof(u32));
	__array(values, int(void *));
} programs SEC(".maps") = {
	.values = {
		[UNWINDER_NATIVE] = (void *)&native_unwind,
		[UNWINDER_PYTHON] = (void *)&python_unwind,
		[UNWINDER_HOTSPOT] = (void *)&hotspot_unwind,
		[UNWINDER_V8] = (void *)&v8_unwind,
		[UNWINDER_RUBY] = (void *)&ruby_unwind,
		[UNWINDER_PHP] = (void *)&php_unwind,
		[UNWINDER_PERL] = (void *)&perl_unwind,
	},
};

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
	case UNWINDER_PYTHON:
		count(COUNTER_PYTHON_TAIL_CALLS);
		break;
	case UNWINDER_HOTSPOT:
		count(COUNTER_HOTSPOT_TAIL_CALLS);
		break;
	case UNWINDER_V8:
		count(COUNTER_V8_TAIL_CALLS);
		break;
	case UNWINDER_RUBY:
		count(COUNTER_RUBY_TAIL_CALLS);
		break;
	case UNWINDER_PHP:
		count(COUNTER_PHP_TAIL_CALLS);
		break;
	case UNWINDER_PERL:
		count(COUNTER_PERL_TAIL_CALLS);
		break;
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

/* A thread exits: every interpreter forgets what it cached of it. */
static __always_inline void interpreters_forget_thread(u64 thread_key)
{
	bpf_map_delete_elem(&python_thread_states, &thread_key);
}
