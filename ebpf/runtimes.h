/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interpreter unwinders, one line each:
 *
 *   RUNTIME(name, NAME, slot, map)
 *
 *   name  <name>_unwinder.bpf.h defines its body, <name>_unwind_run(ctx,
 *         progs); its programs are <name>_unwind (perf_event) and
 *         <name>_off_cpu (tp_btf/sched_switch).
 *   NAME  its constants: UNWINDER_<NAME> (= slot) and its counters,
 *         COUNTER_<NAME>_TAIL_CALLS among them (types.h).
 *   slot  its enum unwinder_program value: its index in the program
 *         arrays, named by mapping flags and frame words. Slots are dense
 *         from 1 (UNWINDER_NATIVE is 0) and never renumbered.
 *   map   files or processes: its map, <name>_files (file id -> struct
 *         <name>_file) or <name>_processes (tgid -> struct
 *         <name>_process), declared in maps.h.
 *
 * From this list follow enum unwinder_program (types.h), the maps
 * (maps.h), the program declarations, the programs array, the perf_event
 * entries and the hand-over counters (interpreters.bpf.h), and the
 * off-CPU entries (off_cpu.bpf.h). crates/bpf checks the Rust side
 * against it (src/runtimes.rs): a runtime missing there fails a test.
 *
 * No include guard: each includer defines RUNTIME, includes this file
 * and undefines RUNTIME.
 */
RUNTIME(python, PYTHON, 1, files)
RUNTIME(hotspot, HOTSPOT, 2, processes)
RUNTIME(v8, V8, 3, processes)
RUNTIME(ruby, RUBY, 4, files)
RUNTIME(php, PHP, 5, files)
RUNTIME(perl, PERL, 6, files)
RUNTIME(beam, BEAM, 7, processes)
