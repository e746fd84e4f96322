/*
 * A process any local user could start to make the profiler's naming of
 * CPython frames expensive. Built as `python3.11` and exporting
 * _PyEval_EvalFrameDefault, _PyRuntime and PyCode_Type, it looks like
 * CPython 3.11 to the profiler; its runtime state is made up, laid out as
 * 3.11's: the main thread's frame chain loops over RING frames, each
 * pointing at one of CODES code objects that look genuine (the right
 * type, 1,000-character names and file names, a 64 KiB line table), and
 * the main loop moves every frame to another code object and rewrites
 * the names all the time, so that nothing the profiler cached is found
 * again. Each sample's frames would cost megabytes of reads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RING 512
#define CODES 2048
#define NAME_CHARS 1000
#define LINE_TABLE 65536

uint64_t PyCode_Type[52];
char _PyRuntime[4096];
static char interp[64];
static char tstate[256];
static char cframe[32];
static char frames[RING][80];

/* A compact ASCII str as 3.11 lays it out: length at 16, state at 32
 * (kind 1, compact, ascii), characters from 48. */
struct str {
	char head[48];
	char text[NAME_CHARS + 1];
};

/* A code object: type at 8, co_filename 112, co_name 120, co_qualname
 * 128, co_firstlineno 72, co_linetable 136, the bytecode from 184. */
struct code {
	char head[184];
	uint16_t bytecode[64];
};

static struct code *codes;
static struct str *names;
static char *line_table;

static void put(void *base, int offset, uint64_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void make_str(struct str *s, char fill)
{
	put(s->head, 16, NAME_CHARS);
	uint32_t state = (1u << 2) | (1u << 5) | (1u << 6);
	memcpy(s->head + 32, &state, sizeof(state));
	memset(s->text, fill, NAME_CHARS);
	memcpy(s->text, "hostile", 7);
}

__attribute__((noinline)) long hostile_leaf(long n)
{
	volatile long x = 0;
	for (long i = 0; i < n; i++)
		x += i;
	return x;
}

__attribute__((noinline)) long _PyEval_EvalFrameDefault(long n)
{
	long r = hostile_leaf(n);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

int main(void)
{
	codes = calloc(CODES, sizeof(*codes));
	names = calloc(2 * CODES, sizeof(*names));
	/* A bytes object: size at 16, data from 32. */
	line_table = calloc(1, 32 + LINE_TABLE);
	if (!codes || !names || !line_table)
		return 1;
	put(line_table, 16, LINE_TABLE);
	memset(line_table + 32, 0x80, LINE_TABLE);
	for (int i = 0; i < CODES; i++) {
		struct code *c = &codes[i];
		make_str(&names[2 * i], 'a' + i % 26);
		make_str(&names[2 * i + 1], 'A' + i % 26);
		put(c->head, 8, (uint64_t)PyCode_Type);
		put(c->head, 112, (uint64_t)&names[2 * i + 1]);
		put(c->head, 120, (uint64_t)&names[2 * i]);
		put(c->head, 128, (uint64_t)&names[2 * i]);
		put(c->head, 72, 1);
		put(c->head, 136, (uint64_t)line_table);
	}
	/* 3.11: _PyRuntime.interpreters.head at 40; PyInterpreterState
	 * threads.head 16; PyThreadState next 8, thread_id 152, cframe 56;
	 * _PyCFrame.current_frame 8; _PyInterpreterFrame f_code 32,
	 * previous 48, prev_instr 56, is_entry 68. */
	put(_PyRuntime, 40, (uint64_t)interp);
	put(interp, 16, (uint64_t)tstate);
	put(tstate, 152, (uint64_t)pthread_self());
	put(tstate, 56, (uint64_t)cframe);
	put(cframe, 8, (uint64_t)frames[0]);
	for (int i = 0; i < RING; i++) {
		put(frames[i], 48, (uint64_t)frames[(i + 1) % RING]);
		frames[i][68] = 0;
	}
	for (uint64_t round = 0;; round++) {
		for (int i = 0; i < RING; i++) {
			struct code *c = &codes[(round * RING + i) % CODES];
			put(frames[i], 32, (uint64_t)c);
			put(frames[i], 56, (uint64_t)&c->bytecode[round % 64]);
		}
		for (int i = 0; i < 2 * CODES; i++)
			names[i].text[8 + round % 64] = 'a' + round % 26;
		_PyEval_EvalFrameDefault(200000);
	}
}
