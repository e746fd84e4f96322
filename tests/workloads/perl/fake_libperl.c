/* A library that looks like libperl to detection: the op loop, the three
 * version bytes, and the state symbols of a threaded or non-threaded
 * build, chosen with -D. Built by crates/interpreters/tests/perl_live.rs. */
const unsigned char PL_revision = 5;
const unsigned char PL_version = MINOR;
const unsigned char PL_subversion = 1;

#ifdef THREADED
unsigned int PL_thr_key;
#ifndef NO_CURINTERP
void *PL_curinterp;
#endif
#else
void *PL_curcop;
void *PL_curstackinfo;
#endif

int Perl_runops_standard(void *interp) {
    return interp != 0;
}
