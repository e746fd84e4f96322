/* Calls clock_gettime in a loop: the time is spent in the vDSO. */
#include <time.h>

#define NOINLINE __attribute__((noinline))
static volatile long sink;

NOINLINE void read_clock(void)
{
	struct timespec ts;
	for (int i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += ts.tv_nsec;
	}
}
NOINLINE void clock_loop(void) { for (;;) read_clock(); }

int main(void) { clock_loop(); }
