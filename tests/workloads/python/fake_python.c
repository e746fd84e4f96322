/*
 * Looks like CPython 3.11 to the profiler (built as `python3.11`, it
 * exports _PyEval_EvalFrameDefault, _PyRuntime and PyCode_Type) but its
 * runtime state is made up, laid out as 3.11's: a thread state for the
 * main thread whose frame chain loops (frame A -> B -> A ...) over a
 * "code object" that is not one. With the argument `nothread` no thread
 * state matches the thread instead. The unwinder must stay bounded, the
 * agent must name no frame from garbage, and must not crash.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

uint64_t PyCode_Type[52];
char _PyRuntime[4096];
static char interp[64];
static char tstate[256];
static char cframe[32];
static char frames[2][80];
static uint64_t not_code[32];

__attribute__((noinline)) long fake_leaf(long n)
{
	volatile long x = 0;
	for (long i = 0; i < n; i++)
		x += i;
	return x;
}

__attribute__((noinline)) long _PyEval_EvalFrameDefault(long n)
{
	long r = fake_leaf(n);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static void put(void *base, int offset, uint64_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

int main(int argc, char **argv)
{
	int nothread = argc > 1 && strcmp(argv[1], "nothread") == 0;
	/* 3.11: _PyRuntime.interpreters.head at 40; PyInterpreterState
	 * next 0, threads.head 16; PyThreadState next 8, thread_id 152,
	 * cframe 56; _PyCFrame.current_frame 8; _PyInterpreterFrame f_code
	 * 32, previous 48, prev_instr 56, is_entry 68. */
	put(_PyRuntime, 40, (uint64_t)interp);
	put(interp, 16, (uint64_t)tstate);
	put(tstate, 152, nothread ? 1 : (uint64_t)pthread_self());
	put(tstate, 56, (uint64_t)cframe);
	put(cframe, 8, (uint64_t)frames[0]);
	for (int i = 0; i < 2; i++) {
		put(frames[i], 32, (uint64_t)not_code);
		put(frames[i], 48, (uint64_t)frames[1 - i]);
		put(frames[i], 56, (uint64_t)(not_code + 4));
		frames[i][68] = 0;
	}
	for (;;)
		_PyEval_EvalFrameDefault(1000000);
}
