/* A shared library whose constructor spins about 700 ms of CPU: ld.so
 * runs it from `_dl_init`, called by `_dl_start_user` right after its
 * `_start` (code without CFI), before the program's own `_start`. */
#include <time.h>

#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void ctor_leaf(void) { for (int i = 0; i < 100000; i++) sink += i; }

__attribute__((constructor)) NOINLINE void ctor_spin(void)
{
	struct timespec ts;
	do {
		ctor_leaf();
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec == 0 && ts.tv_nsec < 700 * 1000 * 1000);
}

int ctor_spun(void) { return sink != 0; }
