/* Waits in known chains, for the off-CPU tests (tests/off_cpu.rs):
 *  - the main thread sleeps 100 ms at a time: main -> waiter -> nanosleep;
 *  - a thread blocks reading a pipe: pipe_reader_main -> read_pipe -> read;
 *    a second thread writes one byte to it every 100 ms
 *    (pipe_writer_main -> pace -> nanosleep);
 *  - a thread spins: busy_main -> spin (the on-CPU profile's chain).
 */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
static int pipe_fds[2];
static volatile unsigned long sink;

static void sleep_100ms(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

NOINLINE void waiter(void)
{
	sleep_100ms();
	__asm__ volatile("" ::: "memory");
}

NOINLINE void read_pipe(void)
{
	char byte;
	sink += read(pipe_fds[0], &byte, 1);
	__asm__ volatile("" ::: "memory");
}

NOINLINE void *pipe_reader_main(void *arg)
{
	for (;;)
		read_pipe();
	return arg;
}

NOINLINE void pace(void)
{
	sleep_100ms();
	__asm__ volatile("" ::: "memory");
}

NOINLINE void *pipe_writer_main(void *arg)
{
	for (;;) {
		pace();
		sink += write(pipe_fds[1], "x", 1);
	}
	return arg;
}

NOINLINE void spin(void)
{
	for (unsigned long i = 0; i < 1000000; i++)
		sink += i;
}

NOINLINE void *busy_main(void *arg)
{
	for (;;)
		spin();
	return arg;
}

int main(void)
{
	pthread_t reader, writer, busy;
	if (pipe(pipe_fds))
		return 1;
	pthread_create(&reader, NULL, pipe_reader_main, NULL);
	pthread_create(&writer, NULL, pipe_writer_main, NULL);
	pthread_create(&busy, NULL, busy_main, NULL);
	for (;;)
		waiter();
}
