/* SPDX-License-Identifier: GPL-2.0 */
/* HotSpot's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(HOTSPOT_FRAMES, "Java frames recorded")
COUNTER(HOTSPOT_TAIL_CALLS, "tail calls into the HotSpot unwinder (hand-overs included)")
COUNTER(HOTSPOT_NO_PROCESS, "a pc in a JVM's anonymous code of a process without its hotspot_processes entry, or whose code cache is not set (the JVM is starting)")
COUNTER(HOTSPOT_NO_BLOB, "a pc in the code cache that no code blob holds (free space, or the segment map changed under the walk)")
COUNTER(HOTSPOT_READ_ERRORS, "a frame, blob or method could not be read")
COUNTER(HOTSPOT_BAD_FRAMES, "unwinding a Java frame gave a bad stack pointer")
COUNTER(HOTSPOT_DEOPT_FRAMES, "compiled frames whose return address was patched to their nmethod's deoptimisation handler, named at the pc saved in the frame")
COUNTER(HOTSPOT_FRAMELESS, "leaf frames sampled before their frame was built or after it was torn down, unwound from what their instructions had pushed")
COUNTER(HOTSPOT_UNKNOWN_ENTRY, "a leaf pc in an unrecognised prologue, or a frame of a stub without a frame size that does not keep rbp as its frame pointer: the stack ends there")
COUNTER(HOTSPOT_STUB_FRAMES, "frames of stubs without a frame size of their own, unwound from a return address checked against the call that pushed it")
