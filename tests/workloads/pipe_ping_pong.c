/* A busy machine's switch rate, for off-CPU cost figures (docs/off-cpu.md):
 * PAIRS pairs of processes pass one byte back and forth over two pipes,
 * each side blocking in read between turns, so every turn is two
 * scheduler switches. Runs until killed. Usage: pipe_ping_pong [PAIRS]. */
#include <stdlib.h>
#include <unistd.h>

static void play(int in, int out, int serve)
{
	char byte = 'x';
	if (serve && write(out, &byte, 1) != 1)
		exit(1);
	for (;;) {
		if (read(in, &byte, 1) != 1 || write(out, &byte, 1) != 1)
			exit(1);
	}
}

int main(int argc, char **argv)
{
	int pairs = argc > 1 ? atoi(argv[1]) : 1;
	for (int i = 0; i < pairs; i++) {
		int ping[2], pong[2];
		if (pipe(ping) || pipe(pong))
			return 1;
		if (fork() == 0)
			play(ping[0], pong[1], 1);
		if (fork() == 0)
			play(pong[0], ping[1], 0);
	}
	for (;;)
		pause();
}
