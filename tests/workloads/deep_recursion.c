/* Recurses DEPTH frames deep, then burns CPU: the whole stack must come
 * through (more frames than one unwinder program run takes). */
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

int main(void) { recurse(DEPTH - 1); }
