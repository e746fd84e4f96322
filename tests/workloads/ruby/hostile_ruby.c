/*
 * A process any local user could start to make the profiler's naming of
 * Ruby frames expensive. Built twice: with -DLIBRUBY as a shared library
 * `libruby-3.1.so.3.1` exporting ruby_api_version {3, 1, 0},
 * ruby_version "3.1.7", rb_vm_exec, ruby_global_symbols and the
 * thread-local ruby_current_ec (reached through the general dynamic TLS
 * model, as Debian's build does: R_X86_64_DTPMOD64/DTPOFF64), it looks
 * like CRuby 3.1 to the profiler; without it, as `ruby`, a main that
 * runs the library's hostile_ruby_main. The VM is made up, laid out as
 * 3.1's (control frames of 64 bytes):
 *
 *  - the thread's execution context claims a VM stack of 2^24 values;
 *    its CONTROL_FRAMES control frames never carry VM_FRAME_FLAG_FINISH,
 *    so every sample's walk runs to the unwinder's frame limit, and the
 *    environments' ep[-1] links form a ring;
 *  - a quarter of the frames are methods recorded as their method entry,
 *    whose owner is one of CLASSES classes, each with an ivar table of
 *    256 entries (none `__classpath__`) keyed by distinct ids: naming a
 *    class names 256 ids; a quarter are C functions (an id and an owner
 *    to name); a quarter plain iseq frames; a quarter iseq pointers into
 *    nothing;
 *  - ISEQS iseqs whose bodies move to other bodies at every turn, with
 *    labels and paths of 4 KiB (the most the agent reads), partly bytes
 *    that are not UTF-8, rewritten all the time; some strings claim
 *    2^40 bytes; line tables of 2^20 entries; the symbol table claims
 *    2^18 ids, all of 4 KiB names;
 *  - the main loop moves every frame to other iseqs and classes at each
 *    turn, so that nothing the profiler cached is found again.
 *
 * With -DSCAN as well, the library does not name ruby_global_symbols
 * (Debian's does not either: the profiler looks for it in the writable
 * segment) and that segment is 63 MiB of words that each look like a
 * symbol table (a last id below 2^32, an ids array at a low address),
 * whose arrays lead to 4 KiB names that are never "+": every word of the
 * segment costs a dozen reads and 4 KiB to rule out.
 *
 * Each sample's frames would cost hundreds of megabytes of reads.
 */
#ifdef LIBRUBY
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CONTROL_FRAMES 512
#define ISEQS 32768
#define BODIES 257
#define CLASSES 512
#define IVARS 256
#define NAMES 64
#define NAME_BYTES 4096
/* Serials of the ids: 2^18, 512 a unit. */
#define ID_UNITS 512
#define LINE_ENTRIES (1 << 20)

/* Ruby 3.1's constants (crates/interpreters/src/ruby/layout.rs). */
#define T_CLASS 0x02
#define T_STRING 0x05
#define T_ARRAY 0x07
#define T_IMEMO 0x1a
#define FL_USER1 (1 << 13)
#define IMEMO_MENT 6
#define IMEMO_ISEQ 7
#define MAGIC_METHOD 0x11110001ULL
#define MAGIC_BLOCK 0x22220001ULL
#define MAGIC_CFUNC 0x55550001ULL
#define ENV_LOCAL 0x2

const int ruby_api_version[3] = {3, 1, 0};
const char ruby_version[32] = "3.1.7";
/* rb_symbols_t: last_id (u32) at 0, ids at 16. */
#ifdef SCAN
#include <sys/mman.h>
#define ruby_global_symbols hidden_symbols
static uint64_t ruby_global_symbols[8];
/* Below 2^32, as a last id must be. */
#define DECOY 0x10000000ULL
/* Not static: stores to it must stay. */
__attribute__((visibility("hidden"))) uint64_t decoys[(63 << 20) / 8];
#else
uint64_t ruby_global_symbols[8];
#endif
__thread void *ruby_current_ec;

struct rstring {
	uint64_t flags, klass, len, ptr;
};
struct rarray {
	uint64_t flags, klass, len, aux, ptr;
};
/* An imemo iseq: flags, body at 16. */
struct iseq {
	uint64_t flags, wrapper, body, pad;
};
/* rb_iseq_constant_body: type 0, iseq_size 4, iseq_encoded 8, pathobj
 * 64, label 80, first_lineno 88, insns_info 120 (body), 128 (positions),
 * 136 (size), 144 (succ_index_table). */
struct body {
	char b[160];
};
/* An imemo ment: def 16, called_id 24, owner 32. */
struct ment {
	uint64_t flags, pad, def, called_id, owner;
};
/* rb_method_definition_t: type (low 4 bits) 0, iseq 8. */
struct def {
	uint64_t type, iseq;
};
/* A class: ext at 24 -> iv_tbl at 8 -> st_table (entries_start 32,
 * entries_bound 40, entries 48) of (hash, key, value). */
struct klass {
	uint64_t flags, klass, pad, ext;
	uint64_t ext_body[2];
	uint64_t table[7];
	uint64_t entries[IVARS][3];
};

static uint64_t ec[4];
static uint64_t *vm_stack;
static uint64_t stack_words;
static uint64_t (*frames)[8];
static uint64_t (*envs)[4];
static struct iseq *iseqs;
static struct body *bodies;
static struct ment *ments;
static struct def *defs;
static struct def cfunc_def = {1, 0};
static struct klass *classes;
static char (*name_bytes)[NAME_BYTES];
static struct rstring names[NAMES];
static struct rstring too_long;
static struct rarray paths[NAMES];
static struct rarray id_table, id_unit;
static uint64_t *unit_words;
static uint64_t code[8192];

static void put(void *base, int offset, uint64_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

static void put32(void *base, int offset, uint32_t value)
{
	memcpy((char *)base + offset, &value, sizeof(value));
}

__attribute__((noinline)) long hostile_leaf(long n)
{
	volatile long x = 0;
	for (long i = 0; i < n; i++)
		x += i;
	return x;
}

__attribute__((noinline)) long rb_vm_exec(long n)
{
	long r = hostile_leaf(n);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static void make_names(void)
{
	for (int i = 0; i < NAMES; i++) {
		/* "hostile", then bytes that are not UTF-8 (each is three
		 * bytes once made a Rust string), then letters. */
		memset(name_bytes[i], 0xff, NAME_BYTES / 2);
		memset(name_bytes[i] + NAME_BYTES / 2, 'a' + i % 26, NAME_BYTES / 2);
		memcpy(name_bytes[i], "hostile", 7);
		names[i] = (struct rstring){T_STRING | FL_USER1, 0, NAME_BYTES, (uint64_t)name_bytes[i]};
		/* [path, realpath], embedded. */
		paths[i] = (struct rarray){T_ARRAY | FL_USER1 | (2 << 15), 0, (uint64_t)&names[i],
					   (uint64_t)&names[(i + 1) % NAMES], 0};
	}
	too_long = (struct rstring){T_STRING | FL_USER1, 0, 1ULL << 40, (uint64_t)name_bytes[0]};
}

static void make_symbols(void)
{
	unit_words = calloc(1024, sizeof(uint64_t));
	uint64_t *units = calloc(ID_UNITS, sizeof(uint64_t));
	for (int i = 0; i < 1024; i += 2)
		unit_words[i] = (uint64_t)&names[(i / 2) % NAMES];
	id_unit = (struct rarray){T_ARRAY, 0, 1024, 0, (uint64_t)unit_words};
	for (int i = 0; i < ID_UNITS; i++)
		units[i] = (uint64_t)&id_unit;
	id_table = (struct rarray){T_ARRAY, 0, ID_UNITS, 0, (uint64_t)units};
	put32(ruby_global_symbols, 0, ID_UNITS * 512 - 1);
	put(ruby_global_symbols, 16, (uint64_t)&id_table);
}

#ifdef SCAN
/* At DECOY: an array of 2^20 entries, each a 4 KiB string. */
static int make_decoys(void)
{
	uint64_t *at = mmap((void *)DECOY, 1 << 20, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (at != (uint64_t *)DECOY)
		return -1;
	struct rarray *array = (struct rarray *)at;
	uint64_t *elements = at + 64;
	*array = (struct rarray){T_ARRAY, 0, 1 << 20, 0, (uint64_t)elements};
	for (int i = 0; i < (1 << 16); i++)
		elements[i] = (uint64_t)&names[i % NAMES];
	for (uint64_t i = 0; i < sizeof(decoys) / 8; i++)
		decoys[i] = DECOY;
	return 0;
}
#endif

static void make_classes(void)
{
	for (int c = 0; c < CLASSES; c++) {
		struct klass *k = &classes[c];
		k->flags = T_CLASS;
		k->ext = (uint64_t)k->ext_body;
		k->ext_body[1] = (uint64_t)k->table;
		k->table[4] = 0;
		k->table[5] = IVARS;
		k->table[6] = (uint64_t)k->entries;
		for (int e = 0; e < IVARS; e++) {
			k->entries[e][0] = e + 1;
			k->entries[e][1] = (uint64_t)(200 + c * IVARS + e) << 4;
			k->entries[e][2] = (uint64_t)&names[e % NAMES];
		}
	}
}

static void make_bodies(void)
{
	uint64_t *positions = calloc(LINE_ENTRIES, 4);
	char *lines = calloc(LINE_ENTRIES, 12);
	for (int i = 0; i < BODIES; i++) {
		struct body *b = &bodies[i];
		put32(b->b, 0, 1); /* ISEQ_TYPE_METHOD */
		put32(b->b, 4, 0xffffffff);
		put(b->b, 8, (uint64_t)code);
		put(b->b, 64, i % 3 ? (uint64_t)&paths[i % NAMES] : (uint64_t)&too_long);
		put(b->b, 80, (uint64_t)&names[(i * 7) % NAMES]);
		put(b->b, 88, (1ULL << 40) | 1);
		put(b->b, 120, (uint64_t)lines);
		put(b->b, 128, (uint64_t)positions);
		put32(b->b, 136, LINE_ENTRIES);
	}
	for (int i = 0; i < ISEQS; i++)
		iseqs[i] = (struct iseq){T_IMEMO | (IMEMO_ISEQ << 12), 0, (uint64_t)&bodies[i % BODIES], 0};
}

/* The control frames, the newest at ec.cfp, growing down from the
 * stack's end; each frame's environment in envs. */
static void make_frames(void)
{
	for (int j = 0; j < CONTROL_FRAMES; j++) {
		uint64_t *env = envs[j];
		/* ep[-2] me, ep[-1] the next environment (a ring), ep[0]
		 * flags. */
		uint64_t *ep = &env[2];
		env[1] = (uint64_t)&envs[(j + 1) % CONTROL_FRAMES][2];
		switch (j % 4) {
		case 0:
			ep[0] = MAGIC_METHOD | ENV_LOCAL;
			env[0] = (uint64_t)&ments[j];
			ments[j].def = (uint64_t)&defs[j];
			break;
		case 1:
			ep[0] = MAGIC_CFUNC | ENV_LOCAL;
			env[0] = (uint64_t)&ments[j];
			ments[j].def = (uint64_t)&cfunc_def;
			break;
		default:
			ep[0] = MAGIC_BLOCK;
			break;
		}
		ments[j].flags = T_IMEMO | (IMEMO_MENT << 12);
		ments[j].called_id = (uint64_t)(300 + j) << 4;
		frames[j][0] = (uint64_t)&code[1 + j % 4000];
		frames[j][4] = (uint64_t)ep;
	}
	ec[0] = (uint64_t)vm_stack;
	ec[1] = stack_words;
	ec[2] = (uint64_t)frames[0];
}

/* Moves every frame to other iseqs, bodies and classes. */
static void turn(uint64_t round)
{
	for (int j = 0; j < CONTROL_FRAMES; j++) {
		uint64_t k = (round * CONTROL_FRAMES + j) % ISEQS;
		uint64_t iseq = j % 4 == 3 ? 0x7ff000000000ULL + 64 * k : (uint64_t)&iseqs[k];
		frames[j][2] = iseq;
		defs[j].iseq = iseq;
		ments[j].owner = (uint64_t)&classes[(round * 13 + j) % CLASSES];
		ments[j].called_id = (uint64_t)(300 + (round * CONTROL_FRAMES + j) % (ID_UNITS * 500)) << 4;
	}
	for (int i = 0; i < ISEQS; i++)
		iseqs[i].body = (uint64_t)&bodies[(i + round) % BODIES];
	for (int i = 0; i < NAMES; i++)
		name_bytes[i][NAME_BYTES / 2 + 8 + round % 64] = 'a' + round % 26;
}

int hostile_ruby_main(void)
{
	/* Environments, then the control frames up to the stack's end. */
	stack_words = CONTROL_FRAMES * 4 + CONTROL_FRAMES * 8;
	vm_stack = calloc(stack_words, sizeof(uint64_t));
	iseqs = calloc(ISEQS, sizeof(*iseqs));
	bodies = calloc(BODIES, sizeof(*bodies));
	ments = calloc(CONTROL_FRAMES, sizeof(*ments));
	defs = calloc(CONTROL_FRAMES, sizeof(*defs));
	classes = calloc(CLASSES, sizeof(*classes));
	name_bytes = calloc(NAMES, NAME_BYTES);
	if (!vm_stack || !iseqs || !bodies || !ments || !defs || !classes || !name_bytes)
		return 1;
	envs = (uint64_t(*)[4])vm_stack;
	frames = (uint64_t(*)[8])(vm_stack + CONTROL_FRAMES * 4);
	make_names();
	make_symbols();
#ifdef SCAN
	if (make_decoys())
		return 1;
#endif
	make_classes();
	make_bodies();
	make_frames();
	/* The stack claims far more than it holds. */
	ec[1] = 1 << 24;
	ruby_current_ec = ec;
	for (uint64_t round = 0;; round++) {
		turn(round);
		rb_vm_exec(200000);
	}
}
#else
int hostile_ruby_main(void);

int main(void)
{
	return hostile_ruby_main();
}
#endif
