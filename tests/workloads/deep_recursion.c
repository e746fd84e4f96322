/* Recurses DEPTH frames deep (or argv[1]), then burns CPU: the whole
 * stack must come through (more frames than one unwinder program run
 * takes), or, deeper than the frame limit, end with a truncation frame. */
#include <stdlib.h>
#define NOINLINE __attribute__((noinline))
#define DEPTH 150
static volatile unsigned long sink;

NOINLINE void deep_leaf(void) { for (;;) sink++; }
NOINLINE void recurse(int n)
{
	if (n == 0)
		deep_leaf();
	else
		recurse(n - 1);
	sink++; /* not a tail call */
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : DEPTH;
	recurse(depth - 1);
}
