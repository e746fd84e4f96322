/* Waits in known chains, for the off-CPU tests (tests/off_cpu.rs):
 *  - the main thread sleeps 100 ms at a time: main -> waiter -> nanosleep;
 *  - a thread blocks reading a pipe: pipe_reader_main -> read_pipe -> read;
 *  - a thread waits on a condition variable (a futex):
 *    cond_waiter_main -> wait_cond -> pthread_cond_wait;
 *  - a thread waits in epoll_wait on a second pipe:
 *    epoll_waiter_main -> wait_epoll -> epoll_wait;
 *    a pacing thread wakes the three every 100 ms
 *    (pipe_writer_main -> pace -> nanosleep);
 *  - a thread spins: busy_main -> spin (the on-CPU profile's chain).
 */
#include <pthread.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
static int pipe_fds[2];
static int epoll_pipe[2];
static int epoll_fd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tick = PTHREAD_COND_INITIALIZER;
static unsigned long ticks;
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

NOINLINE void wait_cond(void)
{
	pthread_mutex_lock(&lock);
	unsigned long seen = ticks;
	while (ticks == seen)
		pthread_cond_wait(&tick, &lock);
	pthread_mutex_unlock(&lock);
}

NOINLINE void *cond_waiter_main(void *arg)
{
	for (;;)
		wait_cond();
	return arg;
}

NOINLINE void wait_epoll(void)
{
	struct epoll_event event;
	char byte;
	if (epoll_wait(epoll_fd, &event, 1, -1) == 1)
		sink += read(epoll_pipe[0], &byte, 1);
	__asm__ volatile("" ::: "memory");
}

NOINLINE void *epoll_waiter_main(void *arg)
{
	for (;;)
		wait_epoll();
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
		sink += write(epoll_pipe[1], "x", 1);
		pthread_mutex_lock(&lock);
		ticks++;
		pthread_cond_signal(&tick);
		pthread_mutex_unlock(&lock);
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
	pthread_t reader, writer, busy, cond_waiter, epoll_waiter;
	struct epoll_event event = { .events = EPOLLIN };
	if (pipe(pipe_fds) || pipe(epoll_pipe))
		return 1;
	epoll_fd = epoll_create1(0);
	if (epoll_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, epoll_pipe[0], &event))
		return 1;
	pthread_create(&reader, NULL, pipe_reader_main, NULL);
	pthread_create(&cond_waiter, NULL, cond_waiter_main, NULL);
	pthread_create(&epoll_waiter, NULL, epoll_waiter_main, NULL);
	pthread_create(&writer, NULL, pipe_writer_main, NULL);
	pthread_create(&busy, NULL, busy_main, NULL);
	for (;;)
		waiter();
}
