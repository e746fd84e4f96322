/* A main-thread chain whose frames hold 17 KiB of locals between the
 * leaf and main, as PHP's CLI does (do_cli's 4.9 KiB frame 12-22 KiB
 * above the running script's): a stack copy must reach main's frame.
 * Built -O2 -fomit-frame-pointer by tests/late_unwinding.rs. */
#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void big_leaf(void)
{
	for (;;)
		sink++;
}
/* The arrays are written through a volatile pointer so that each frame
 * keeps them (and the pages are touched, as a real frame's are). */
NOINLINE void big_inner(void)
{
	char locals[9000];
	volatile char *p = locals;
	for (int i = 0; i < (int)sizeof(locals); i += 512)
		p[i] = (char)i;
	big_leaf();
	sink += p[0];
}
NOINLINE void big_outer(void)
{
	char locals[8000];
	volatile char *p = locals;
	for (int i = 0; i < (int)sizeof(locals); i += 512)
		p[i] = (char)i;
	big_inner();
	sink += p[0];
}

int main(void)
{
	big_outer();
	return 0;
}
