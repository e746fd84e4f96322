/* Lives about 700 ms (of CPU time) in a chain, then exits. */
#include <time.h>

#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void short_leaf(void) { for (int i = 0; i < 100000; i++) sink += i; }
NOINLINE void short_work(void) { short_leaf(); sink++; }

int main(void)
{
	struct timespec ts;
	do {
		short_work();
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec == 0 && ts.tv_nsec < 700 * 1000 * 1000);
	return 0;
}
