/*
 * A process any local user could start to make the profiler's naming of
 * PHP frames expensive. Built as `php8.2` and exporting zend_execute_ex,
 * execute_ex and executor_globals, with PHP's version string in its
 * read-only data, it looks like PHP 8.2 (NTS) to the profiler; its
 * executor is made up, laid out as 8.2's: the frame chain is a ring of
 * RING frames (no ZEND_CALL_TOP, prev_execute_data loops), each running
 * one of FUNCTIONS user functions that look genuine (type, a method of a
 * class, a file, lines) but whose names, class name and file name are
 * 4 KiB each; the main loop moves every frame to other functions and
 * rewrites the names all the time, so that nothing the profiler cached
 * is found again. Each sample's frames would cost megabytes of reads.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RING 256
#define FUNCTIONS 8192
#define NAME_BYTES 4096

__attribute__((used)) const char php_version[] = "X-Powered-By: PHP/8.2.0";
void (*zend_execute_ex)(void *);
/* zend_executor_globals: current_execute_data at 488. */
char executor_globals[1024];

/* zend_execute_data: opline 0, func 24, This.u1.type_info 40,
 * prev_execute_data 48. */
static char frames[RING][64];
/* A zend_op: lineno at 24. */
static char opline[32];

/* A zend_string: len at 16, the bytes from 24. */
struct zstring {
	char head[24];
	char val[NAME_BYTES + 1];
};

/* A zend_op_array: type 0, function_name 8, scope 16, filename 152,
 * line_start 160, line_end 164. */
struct function {
	char head[168];
};

static struct function *functions;
static struct zstring *names;
static struct zstring class_name, file_name;
/* A zend_class_entry: name at 8. */
static char class_entry[16];

static void put(void *base, int offset, uint64_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void put32(void *base, int offset, uint32_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void make_string(struct zstring *s, char fill)
{
	put(s->head, 16, NAME_BYTES);
	memset(s->val, fill, NAME_BYTES);
	memcpy(s->val, "hostile", 7);
}

__attribute__((noinline)) long hostile_leaf(long n)
{
	volatile long x = 0;
	for (long i = 0; i < n; i++)
		x += i;
	return x;
}

__attribute__((noinline)) void execute_ex(void *n)
{
	hostile_leaf((long)n);
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	zend_execute_ex = execute_ex;
	functions = calloc(FUNCTIONS, sizeof(*functions));
	names = calloc(FUNCTIONS, sizeof(*names));
	if (!functions || !names)
		return 1;
	make_string(&class_name, 'C');
	make_string(&file_name, 'F');
	put(class_entry, 8, (uint64_t)&class_name);
	put32(opline, 24, 11);
	for (int i = 0; i < FUNCTIONS; i++) {
		struct function *f = &functions[i];
		make_string(&names[i], 'a' + i % 26);
		f->head[0] = 2; /* ZEND_USER_FUNCTION */
		put(f->head, 8, (uint64_t)&names[i]);
		put(f->head, 16, (uint64_t)class_entry);
		put(f->head, 152, (uint64_t)&file_name);
		put32(f->head, 160, 10);
		put32(f->head, 164, 20);
	}
	for (int i = 0; i < RING; i++) {
		put(frames[i], 0, (uint64_t)opline);
		put(frames[i], 48, (uint64_t)frames[(i + 1) % RING]);
	}
	put(executor_globals, 488, (uint64_t)frames[0]);
	for (uint64_t round = 0;; round++) {
		for (int i = 0; i < RING; i++)
			put(frames[i], 24, (uint64_t)&functions[(round * RING + i) % FUNCTIONS]);
		for (int i = 0; i < FUNCTIONS; i++)
			names[i].val[8 + round % 64] = 'a' + round % 26;
		zend_execute_ex((void *)200000);
	}
}
