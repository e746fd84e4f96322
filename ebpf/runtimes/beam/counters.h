/* SPDX-License-Identifier: GPL-2.0 */
/* BEAM's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(BEAM_FRAMES, "Erlang frames recorded")
COUNTER(BEAM_TAIL_CALLS, "tail calls into the BEAM unwinder (hand-overs included)")
COUNTER(BEAM_NO_PROCESS, "a pc in the JIT's code of a process without its beam_processes entry (its frame ends the stack)")
COUNTER(BEAM_READ_ERRORS, "the Erlang stack could not be read")
COUNTER(BEAM_NO_CP, "no continuation pointer within BEAM_SCAN_WORDS words above a frame's stack pointer: the stack ends there")
COUNTER(BEAM_FROM_C, "JIT code reached from C on the scheduler's C stack (its frame is recorded)")
COUNTER(BEAM_SCHEDULER_ROOTS, "stacks walked down to beam_normal_exit and on into the scheduler thread's native frames")
COUNTER(BEAM_NO_ROOT, "the bottom of the Erlang stack was reached but the scheduler's return address was not found")
COUNTER(BEAM_FROM_C_FOLLOWED, "of the beam_from_c frames, those whose Erlang stack pointer was found (in rbp, or in the scheduler's current process, as the JIT's code at the return address reloads it) and whose Erlang frames were followed")
