/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interpreter unwinders, one line each: the one place that names
 * every runtime, for BPF and for Rust. Adding a runtime is its folder
 * ebpf/runtimes/<name>/, its Rust folder (crates/interpreters/src/<name>,
 * registered in crates/interpreters/src/lib.rs) and its line here.
 *
 *   RUNTIME(name, NAME, slot, map)
 *
 *   name  its folder, ebpf/runtimes/<name>/, which holds
 *           types.h         its part of the contract: its map value
 *                           (struct <name>_file or struct
 *                           <name>_process), the layout of its frame
 *                           words' payload (<NAME>_FRAME_PAYLOAD_BITS
 *                           wide), its constants, and its per-sample
 *                           scratch, struct <name>_scratch (a member of
 *                           struct interp_state's union, maps.h);
 *           counters.h      its counters, COUNTER(<NAME>_..., doc) lines
 *                           (enum counter_id, types.h), among them
 *                           <NAME>_FRAMES and <NAME>_TAIL_CALLS;
 *           unwinder.bpf.h  its body, <name>_unwind_run(ctx, progs), and
 *                           <name>_forget_thread(key) (a thread exits).
 *         Its programs are <name>_unwind (perf_event) and <name>_off_cpu
 *         (tp_btf/sched_switch).
 *   NAME  the prefix of its constants: UNWINDER_<NAME> (= slot), its
 *         counters COUNTER_<NAME>_*.
 *   slot  its enum unwinder_program value: its index in the program
 *         arrays, named by mapping flags and frame words. Slots are dense
 *         from 1 (UNWINDER_NATIVE is 0) and never renumbered.
 *   map   files or processes: its map, <name>_files (file id -> struct
 *         <name>_file) or <name>_processes (tgid -> struct
 *         <name>_process), declared in maps.h.
 *
 * RUNTIMES(X) expands X(name, NAME, slot, map) for each line: from it
 * follow enum unwinder_program and the counter ids (types.h), the maps
 * and the scratch union (maps.h), the program declarations, the programs
 * array, the perf_event entries and the hand-over counters
 * (interpreters.bpf.h), and the off-CPU entries (off_cpu.bpf.h); and
 * runtime_files.h includes one file of every folder (types.h, counters.h,
 * unwinder.bpf.h). On the Rust side, crates/contract/build.rs reads it
 * into profiler-bpf's InterpreterUnwinder (a variant per line, named
 * after name in camel case); the tests of crates/bpf/src/runtimes.rs,
 * crates/interpreters and go-receiver fail when a runtime lacks its
 * folder's files, its Rust folder or registration, or its Go config.
 *
 * Each line ends with a backslash; the list ends at the empty line.
 */
#ifndef EP_RUNTIMES_H
#define EP_RUNTIMES_H

#define RUNTIMES(RUNTIME)                       \
	RUNTIME(python, PYTHON, 1, files)       \
	RUNTIME(hotspot, HOTSPOT, 2, processes) \
	RUNTIME(v8, V8, 3, processes)           \
	RUNTIME(ruby, RUBY, 4, files)           \
	RUNTIME(php, PHP, 5, files)             \
	RUNTIME(perl, PERL, 6, files)           \
	RUNTIME(beam, BEAM, 7, processes)       \

/* How many runtimes the list has (usable in #if). */
#define RUNTIME_PLUS_ONE_(name, NAME, slot, map) +1
#define RUNTIME_COUNT (0 RUNTIMES(RUNTIME_PLUS_ONE_))

#endif
