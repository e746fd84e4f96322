// The C half of the cgo workload: a chain that calls back into Go, and
// a thread of its own that does the same.
#include <pthread.h>

#include "_cgo_export.h"
#include "callback.h"

volatile long c_sink;

__attribute__((noinline, noclone)) long c_inner(long n) {
	long s = 0;
	for (long i = 0; i < 2; i++)
		s += goCallback(n + i);
	return s;
}

__attribute__((noinline, noclone)) long c_outer(long n) {
	return c_inner(n) + 1;
}

__attribute__((noinline, noclone)) void c_thread_work(long n) {
	c_sink += goThreadCallback(n);
}

static void *c_thread_main(void *arg) {
	(void)arg;
	for (;;)
		c_thread_work(1 << 16);
	return 0;
}

void start_c_thread(void) {
	pthread_t t;
	pthread_create(&t, 0, c_thread_main, 0);
}
