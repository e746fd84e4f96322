/* SPDX-License-Identifier: GPL-2.0 */
/* CPython's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(PYTHON_FRAMES, "CPython frames recorded")
COUNTER(PYTHON_TAIL_CALLS, "tail calls into the Python unwinder (hand-overs included)")
COUNTER(PYTHON_NO_THREAD_STATE, "samples in an evaluation loop whose thread state was not found (their loops stay native frames)")
COUNTER(PYTHON_READ_ERRORS, "a frame could not be read (the rest of the stack's loops stay native frames)")
