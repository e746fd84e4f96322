/* SPDX-License-Identifier: GPL-2.0 */
/* V8's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(V8_FRAMES, "JavaScript frames recorded")
COUNTER(V8_TAIL_CALLS, "tail calls into the V8 unwinder (hand-overs included)")
COUNTER(V8_NO_PROCESS, "a pc in V8's code of a process without its v8_processes entry")
COUNTER(V8_READ_ERRORS, "a frame could not be read")
COUNTER(V8_BAD_FRAMES, "a frame that is neither marked nor JavaScript, or whose caller's frame pointer is not above it")
COUNTER(V8_MARKER_FRAMES, "marker frames passed (exit, stub, internal...: not recorded)")
COUNTER(V8_ENTRY_FRAMES, "entry frames: back to the C++ that called JavaScript")
