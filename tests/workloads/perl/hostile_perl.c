/*
 * A process any local user could start to make the profiler's naming of
 * Perl frames expensive. Built as `perl` and exporting
 * Perl_runops_standard, PL_revision/PL_version/PL_subversion (5.36.0),
 * PL_thr_key and PL_curinterp, it looks like a threaded Perl 5.36 to the
 * profiler; its interpreter is made up, laid out as 5.36's: the current
 * context stack is its own predecessor (si_prev loops) and holds CONTEXTS
 * sub calls, each of one of SUBS subs that look genuine (a CV, a named
 * HEK of 1,000 characters in a named stash) but whose CvFILE, like every
 * COP's file, runs on for 64 KiB without a terminator. The main loop
 * moves every context to other subs and rewrites the names all the
 * time, so that neither the names nor the failures the profiler
 * remembers are found again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CONTEXTS 256
#define SUBS 16384
#define NAME_CHARS 1000
#define ENDLESS_FILE 65536

const unsigned char PL_revision = 5;
const unsigned char PL_version = 36;
const unsigned char PL_subversion = 0;
unsigned int PL_thr_key;
void *PL_curinterp;

/* 5.36, threaded: PerlInterpreter.Icurcop 0xd0, Icurstackinfo 0xe0. */
static char interpreter[0x100];
/* PERL_SI: si_cxstack 0x08, si_prev 0x10, si_cxix 0x20. */
static char stack_info[0x28];
/* PERL_CONTEXT (0x68 bytes): cx_type 0, blk_oldcop 0x10, blk_sub.cv 0x48. */
static char contexts[CONTEXTS][0x68];
/* COP: cop_line 0x24, cop_file (char *) 0x30. */
static char cops[CONTEXTS][0x38];

/* A CV: head (sv_any 0, sv_flags 0x0c = SVt_PVCV), body XPVCV
 * (xcv_stash 0x20, xcv_gv_u 0x38, xcv_file 0x40, xcv_flags 0x5c). */
struct sub {
	char head[0x18];
	char body[0x60];
};

/* A HEK: hek_len at 4, the key from 8. */
struct hek {
	char head[8];
	char key[NAME_CHARS + 1];
};

static struct sub *subs;
static struct hek *names;
static struct hek stash_name;
/* A stash: head (SVt_PVHV | SVf_OOK), body with the aux struct at 0x20
 * (xhv_name_u 0, xhv_name_count 0x1c). */
static char stash_head[0x18];
static char stash_body[0x60];
static char *endless_file;

static void put(void *base, int offset, uint64_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void put32(void *base, int offset, uint32_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void make_hek(struct hek *h, char fill)
{
	put32(h->head, 4, NAME_CHARS);
	memset(h->key, fill, NAME_CHARS);
	memcpy(h->key, "hostile", 7);
}

__attribute__((noinline)) long hostile_leaf(long n)
{
	volatile long x = 0;
	for (long i = 0; i < n; i++)
		x += i;
	return x;
}

__attribute__((noinline)) int Perl_runops_standard(long n)
{
	long r = hostile_leaf(n);
	__asm__ volatile("" ::: "memory");
	return (int)r + 1;
}

int main(void)
{
	subs = calloc(SUBS, sizeof(*subs));
	names = calloc(SUBS, sizeof(*names));
	endless_file = malloc(ENDLESS_FILE);
	if (!subs || !names || !endless_file)
		return 1;
	memset(endless_file, 'f', ENDLESS_FILE);
	make_hek(&stash_name, 'S');
	put(stash_head, 0, (uint64_t)stash_body);
	put32(stash_head, 0x0c, 12 | 0x02000000);
	put(stash_body, 0x20, (uint64_t)&stash_name);
	for (int i = 0; i < SUBS; i++) {
		struct sub *s = &subs[i];
		make_hek(&names[i], 'a' + i % 26);
		put(s->head, 0, (uint64_t)s->body);
		put32(s->head, 0x0c, 13);
		put(s->body, 0x20, (uint64_t)stash_head);
		put(s->body, 0x38, (uint64_t)&names[i]);
		put(s->body, 0x40, (uint64_t)endless_file);
		put32(s->body, 0x5c, 0x8000); /* CVf_NAMED */
	}
	for (int i = 0; i < CONTEXTS; i++) {
		put32(cops[i], 0x24, i + 1);
		put(cops[i], 0x30, (uint64_t)endless_file);
		contexts[i][0] = 9; /* CXt_SUB */
		put(contexts[i], 0x10, (uint64_t)cops[i]);
	}
	put(stack_info, 0x08, (uint64_t)contexts);
	put(stack_info, 0x10, (uint64_t)stack_info);
	put32(stack_info, 0x20, CONTEXTS - 1);
	put(interpreter, 0xd0, (uint64_t)cops[0]);
	put(interpreter, 0xe0, (uint64_t)stack_info);
	PL_curinterp = interpreter;
	for (uint64_t round = 0;; round++) {
		for (int i = 0; i < CONTEXTS; i++)
			put(contexts[i], 0x48, (uint64_t)&subs[(round * CONTEXTS + i) % SUBS]);
		for (int i = 0; i < SUBS; i++)
			names[i].key[8 + round % 64] = 'a' + round % 26;
		Perl_runops_standard(200000);
	}
}
