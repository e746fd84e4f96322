/* SPDX-License-Identifier: GPL-2.0 */
/* Perl's counters: COUNTER(id, doc), id without its COUNTER_ prefix,
 * numbered by enum counter_id (types.h) after the shared ones; reported
 * as <id in lower case> (python_frames). No include guard. */
COUNTER(PERL_FRAMES, "Perl frames recorded")
COUNTER(PERL_TAIL_CALLS, "tail calls into the Perl unwinder (hand-overs included)")
COUNTER(PERL_NO_INTERPRETER, "samples in Perl_runops_standard whose interpreter was not found (not the main thread of a threaded perl, no perl_files entry, no stack yet)")
COUNTER(PERL_READ_ERRORS, "a stack info or context could not be read (the rest of the stack's runs stay native frames)")
COUNTER(PERL_EMPTY_LOOPS, "a runops frame with no Perl frame left for it (its native frame is kept)")
