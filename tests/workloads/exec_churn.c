/* Starts RATE short-lived processes per second (fork + exec of
 * /bin/true) for SECONDS seconds, then prints how many it started. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long rate = argc > 1 ? atol(argv[1]) : 200;
	long seconds = argc > 2 ? atol(argv[2]) : 4;
	if (rate <= 0 || seconds <= 0)
		return 2;
	long period_ns = 1000000000L / rate;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	long started = 0;
	for (long i = 0; i < rate * seconds; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			started++;
		/* Reap whatever has finished; never wait for a child. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		next.tv_nsec += period_ns;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	while (wait(NULL) > 0)
		;
	printf("%ld\n", started);
	return 0;
}
