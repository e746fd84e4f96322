/* Benchmark workload with a known call chain:
 * main -> chain_a -> chain_b -> chain_c -> chain_d -> chain_e (leaf burns CPU).
 * `chain SECONDS` runs that long (0 = forever); `chain SECONDS DELAY` first
 * sleeps DELAY seconds (off CPU: no sample is taken before DELAY after
 * exec); `chain -n N` does a fixed amount of work (N leaf rounds) and
 * exits, for slowdown timing. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void chain_e(unsigned long rounds)
{
	for (unsigned long r = 0; r < rounds; r++)
		for (unsigned long i = 0; i < 100000; i++)
			sink += i ^ r;
}
__attribute__((noinline)) void chain_d(unsigned long rounds) { chain_e(rounds); sink++; }
__attribute__((noinline)) void chain_c(unsigned long rounds) { chain_d(rounds); sink++; }
__attribute__((noinline)) void chain_b(unsigned long rounds) { chain_c(rounds); sink++; }
__attribute__((noinline)) void chain_a(unsigned long rounds) { chain_b(rounds); sink++; }

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "-n") == 0) {
		chain_a(strtoul(argv[2], NULL, 10));
		return 0;
	}
	double seconds = argc > 1 ? atof(argv[1]) : 0;
	double delay = argc > 2 ? atof(argv[2]) : 0;
	if (delay > 0) {
		struct timespec pause = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
		nanosleep(&pause, 0);
	}
	double end = now() + seconds;
	while (seconds <= 0 || now() < end)
		chain_a(20);
	return 0;
}
