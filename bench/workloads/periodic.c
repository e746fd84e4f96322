/* A process that wakes every 50 ms and burns about 0.2 ms of CPU, so the
 * profiler samples (and tracks) it now and then. Runs until killed. */
#include <time.h>

static volatile unsigned long sink;

int main(void)
{
	struct timespec pause = {0, 50 * 1000 * 1000};
	for (;;) {
		for (unsigned long i = 0; i < 200000; i++)
			sink += i;
		nanosleep(&pause, 0);
	}
}
