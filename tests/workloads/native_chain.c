/* A main-thread chain of noinline functions, and a second thread whose
 * comparison callback runs under libc's qsort. Built -O2
 * -fomit-frame-pointer by tests/native_unwinding.rs. */
#include <pthread.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void chain_leaf(void) { for (int i = 0; i < 100000; i++) sink += i * 7; }
NOINLINE void chain_4(void) { chain_leaf(); sink++; }
NOINLINE void chain_3(void) { chain_4(); sink++; }
NOINLINE void chain_2(void) { chain_3(); sink++; }
NOINLINE void chain_1(void) { chain_2(); sink++; }

NOINLINE int compare_leaf(int a, int b)
{
	for (int i = 0; i < 200; i++)
		sink += i;
	return (a > b) - (a < b);
}
NOINLINE int compare(const void *a, const void *b)
{
	int r = compare_leaf(*(const int *)a, *(const int *)b);
	sink++;
	return r;
}
NOINLINE void sort_worker(void)
{
	int v[512];
	for (;;) {
		for (int i = 0; i < 512; i++)
			v[i] = rand();
		qsort(v, 512, sizeof(int), compare);
	}
}
NOINLINE void *thread_main(void *arg)
{
	sort_worker();
	return arg;
}

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, thread_main, NULL);
	for (;;)
		chain_1();
}
