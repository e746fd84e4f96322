/* SPDX-License-Identifier: GPL-2.0 */
/* CRuby's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(RUBY_FRAMES, "Ruby frames recorded")
COUNTER(RUBY_TAIL_CALLS, "tail calls into the CRuby unwinder (hand-overs included)")
COUNTER(RUBY_NO_EC, "samples in rb_vm_exec whose thread's execution context was not found (TLS not set up, not a Ruby thread)")
COUNTER(RUBY_READ_ERRORS, "a control frame, its environment or its iseq could not be read, or the VM stack is not where the context says (the rest of the stack's loops stay native frames)")
COUNTER(RUBY_SKIPPED_FRAMES, "control frames skipped (dummy frames, frames with no pc yet: they run no code)")
COUNTER(RUBY_EMPTY_LOOPS, "a loop frame with no control frame left for it (its native frame is kept)")
