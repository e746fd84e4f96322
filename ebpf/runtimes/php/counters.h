/* SPDX-License-Identifier: GPL-2.0 */
/* PHP's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(PHP_FRAMES, "PHP frames recorded")
COUNTER(PHP_TAIL_CALLS, "tail calls into the PHP unwinder (hand-overs included)")
COUNTER(PHP_NO_FRAMES, "samples in execute_ex with no current_execute_data (or no php_files entry): the runs stay native frames")
COUNTER(PHP_READ_ERRORS, "a zend_execute_data could not be read (the rest of the stack's execute_ex runs stay native frames)")
COUNTER(PHP_SKIPPED_FRAMES, "frames without a function skipped (VM-internal dummies)")
COUNTER(PHP_EMPTY_LOOPS, "an execute_ex frame with no PHP frame left for it (its native frame is kept)")
