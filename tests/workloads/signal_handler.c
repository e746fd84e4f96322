/* The main thread spins in spin_inner; a SIGPROF timer interrupts it
 * every 10 ms of CPU time and the handler burns CPU in handler_leaf, so
 * samples in the handler must unwind through the signal frame into the
 * interrupted spin_inner and on to the root. */
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void handler_leaf(void) { for (int i = 0; i < 8000000; i++) sink += i; }
NOINLINE void handler_work(void) { handler_leaf(); sink++; }
NOINLINE void on_signal(int sig) { handler_work(); sink += sig; }

NOINLINE void spin_inner(void) { for (;;) sink++; }
NOINLINE void spin_outer(void) { spin_inner(); sink++; }

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval t = { { 0, 10000 }, { 0, 10000 } };
	setitimer(ITIMER_PROF, &t, NULL);
	spin_outer();
}
