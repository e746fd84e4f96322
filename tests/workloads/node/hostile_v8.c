// A crafted Node for tests/hostile_runtimes.rs and bench/hostile.py
// (issue 43), built as `node` with the C that v8dbg_of.py generates from
// the machine's real node (every `v8dbg_*` constant with the same value,
// and the V8 version string): to the agent's detection it is that build.
// Its "embedded builtins blob" (`v8_Default_embedded_blob_code_` and its
// size, in .text) is a loop the main thread spins in with rbp pointing
// at a chain of made-up interpreted frames, which the BPF V8 unwinder
// walks; the heap objects they lead to (maps, JSFunctions,
// SharedFunctionInfos, Scripts, strings) are laid out at the offsets the
// same constants give.
//
// Default: 512 interpreted frames (more than a sample holds: only the
// depth limit stops the walk) over 4,096 functions; another thread moves
// every frame to another function and bytecode offset all the time, and
// renames them, so no frame is ever named
// from what was named before: each costs its full check and its function
// read again.
//
// -DCONS: 64 frames over 4,096 functions, each of its own script without
// `line_ends` whose source is a cons-string tree of 8 Mi newlines (7
// levels over one 64 KiB leaf, the deepest and longest the agent reads),
// so every function names a script whose line ends are computed from
// 8 MiB of source: 8 Mi lines.

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

// The build's layout (v8dbg.c, generated from V8 11.3's names).
extern const int v8dbg_class_HeapObject__map__Map;
extern const int v8dbg_class_Map__instance_type__uint16_t;
extern const int v8dbg_class_JSFunction__shared__SharedFunctionInfo;
extern const int v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object;
extern const int v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject;
extern const int v8dbg_class_SharedFunctionInfo__function_data__Object;
extern const int v8dbg_class_Script__name__Object;
extern const int v8dbg_class_Script__source__Object;
extern const int v8dbg_class_Script__line_ends__Object;
extern const int v8dbg_class_String__length__int32_t;
extern const int v8dbg_class_SeqOneByteString__chars__char;
extern const int v8dbg_class_ConsString__first__String;
extern const int v8dbg_class_ConsString__second__String;
extern const int v8dbg_class_BytecodeArray__data__uintptr_t;
extern const int v8dbg_off_fp_context_or_frame_type;
extern const int v8dbg_off_fp_function;
extern const int v8dbg_off_fp_bytecode_array;
extern const int v8dbg_off_fp_bytecode_offset;
extern const int v8dbg_type_JSFunction__JS_FUNCTION_TYPE;
extern const int v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE;
extern const int v8dbg_type_Script__SCRIPT_TYPE;
extern const int v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE;
extern const int v8dbg_type_SeqOneByteString__ONE_BYTE_STRING_TYPE;
extern const int v8dbg_type_ConsString__CONS_ONE_BYTE_STRING_TYPE;
extern const int v8dbg_type_Map__MAP_TYPE;

#define FUNCTIONS 4096
#ifdef CONS
#define FRAMES 64
#else
#define FRAMES 512
#endif
// Bytes of stack per made-up frame (the slots below fp and fp, ret).
#define FRAME_SIZE 64
#define LEAF_CHARS (64 << 10)
#define CONS_LEVELS 7

// The blob: the main thread's loop, with rbp at the innermost frame;
// every frame's return address is in it too.
__asm__(".text\n"
        ".globl v8_Default_embedded_blob_code_\n"
        ".type v8_Default_embedded_blob_code_, @function\n"
        "v8_Default_embedded_blob_code_:\n"
        "  mov innermost_fp(%rip), %rbp\n"
        "1: pause\n"
        "  jmp 1b\n"
        ".globl blob_return\n"
        "blob_return:\n"
        "  .skip 64, 0x90\n"
        "  jmp 1b\n"
        "blob_end:\n"
        ".section .rodata\n"
        ".globl v8_Default_embedded_blob_code_size_\n"
        "v8_Default_embedded_blob_code_size_:\n"
        "  .long blob_end - v8_Default_embedded_blob_code_\n"
        ".text\n");

void v8_Default_embedded_blob_code_(void);
extern char blob_return[];
uint64_t innermost_fp;

static uint8_t *arena;
static size_t arena_used, arena_size;

// A zeroed object of `size` bytes; its tagged pointer.
static uint64_t object(size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (arena_used + size > arena_size) {
        fprintf(stderr, "arena full\n");
        exit(1);
    }
    uint64_t at = (uint64_t)(arena + arena_used);
    arena_used += size;
    return at + 1;
}

static void set64(uint64_t tagged, int offset, uint64_t value) {
    memcpy((void *)(tagged - 1 + offset), &value, 8);
}

static void set32(uint64_t tagged, int offset, uint32_t value) {
    memcpy((void *)(tagged - 1 + offset), &value, 4);
}

static uint64_t smi(int64_t v) { return (uint64_t)v << 32; }

// A map of instance type `type`, and an object of that map.
static uint64_t map_of(int type) {
    static uint64_t meta;
    if (!meta) {
        meta = object(64);
        set64(meta, v8dbg_class_HeapObject__map__Map, meta);
        uint16_t t = (uint16_t)v8dbg_type_Map__MAP_TYPE;
        memcpy((void *)(meta - 1 + v8dbg_class_Map__instance_type__uint16_t), &t, 2);
    }
    uint64_t map = object(64);
    set64(map, v8dbg_class_HeapObject__map__Map, meta);
    uint16_t t = (uint16_t)type;
    memcpy((void *)(map - 1 + v8dbg_class_Map__instance_type__uint16_t), &t, 2);
    return map;
}

static uint64_t typed(uint64_t map, size_t size) {
    uint64_t o = object(size);
    set64(o, v8dbg_class_HeapObject__map__Map, map);
    return o;
}

static uint64_t one_byte_map;

static uint64_t one_byte(const char *text, size_t len) {
    uint64_t s = typed(one_byte_map, (size_t)v8dbg_class_SeqOneByteString__chars__char + len);
    set32(s, v8dbg_class_String__length__int32_t, (uint32_t)len);
    memcpy((void *)(s - 1 + v8dbg_class_SeqOneByteString__chars__char), text, len);
    return s;
}

static uint64_t functions[FUNCTIONS];
// Each function's SharedFunctionInfo and its two names.
static uint64_t infos[FUNCTIONS], names[FUNCTIONS][2];
static uint64_t bytecode;
static uint64_t *frames[FRAMES];

// Moves every frame to another function and bytecode offset, all the
// time: no frame word repeats.
static void *rotate(void *unused) {
    (void)unused;
    struct timespec pause = {0, 200 * 1000};
    for (uint64_t turn = 1;; turn++) {
        for (int i = 0; i < FRAMES; i++) {
            uint64_t *fp = frames[i];
            uint64_t f = (turn * 7 + (uint64_t)i) % FUNCTIONS;
            fp[v8dbg_off_fp_function / 8] = functions[f];
            // Another name: the function is read again, not taken from
            // what was read before.
            set64(infos[f], v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object, names[f][turn & 1]);
            int64_t offset = v8dbg_class_BytecodeArray__data__uintptr_t - 1 + (int64_t)((turn + i) % 1000);
            fp[v8dbg_off_fp_bytecode_offset / 8] = smi(offset);
        }
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(void) {
    arena_size = 64 << 20;
    arena = mmap(NULL, arena_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    one_byte_map = map_of(v8dbg_type_SeqOneByteString__ONE_BYTE_STRING_TYPE);
    uint64_t function_map = map_of(v8dbg_type_JSFunction__JS_FUNCTION_TYPE);
    uint64_t sfi_map = map_of(v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE);
    uint64_t script_map = map_of(v8dbg_type_Script__SCRIPT_TYPE);
    bytecode = typed(map_of(v8dbg_type_BytecodeArray__BYTECODE_ARRAY_TYPE), 128);

    // Sources: a few lines, or the cons tree of 8 Mi newlines.
    const char *small = "function hostile() {\n  return 1;\n}\n";
    uint64_t source = one_byte(small, strlen(small));
#ifdef CONS
    char *newlines = malloc(LEAF_CHARS);
    memset(newlines, '\n', LEAF_CHARS);
    source = one_byte(newlines, LEAF_CHARS);
    uint64_t cons_map = map_of(v8dbg_type_ConsString__CONS_ONE_BYTE_STRING_TYPE);
    for (int level = 0; level < CONS_LEVELS; level++) {
        uint64_t node = typed(cons_map, 32);
        set32(node, v8dbg_class_String__length__int32_t, (uint32_t)LEAF_CHARS << (level + 1));
        set64(node, v8dbg_class_ConsString__first__String, source);
        set64(node, v8dbg_class_ConsString__second__String, source);
        source = node;
    }
#endif
    uint64_t script_name = one_byte("/tmp/hostile.js", strlen("/tmp/hostile.js"));
    uint64_t script = 0;
    for (int i = 0; i < FUNCTIONS; i++) {
        // One script for all, or one each (every one's line ends
        // computed anew).
#ifndef CONS
        if (!script)
#endif
        {
            script = typed(script_map, 128);
            set64(script, v8dbg_class_Script__name__Object, script_name);
            set64(script, v8dbg_class_Script__source__Object, source);
            set64(script, v8dbg_class_Script__line_ends__Object, smi(0));
        }
        char name[64];
        for (int n = 0; n < 2; n++) {
            int len = snprintf(name, sizeof name, "hostile_v8_%d_%c", i, 'a' + n);
            names[i][n] = one_byte(name, (size_t)len);
        }
        uint64_t sfi = typed(sfi_map, 64);
        infos[i] = sfi;
        set64(sfi, v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object, names[i][0]);
        set64(sfi, v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject, script);
        set64(sfi, v8dbg_class_SharedFunctionInfo__function_data__Object, smi(0));
        uint64_t function = typed(function_map, 64);
        set64(function, v8dbg_class_JSFunction__shared__SharedFunctionInfo, sfi);
        functions[i] = function;
    }

    // The frames, innermost first at increasing addresses: each one's
    // caller is the next, its return address in the blob; the outermost
    // one's caller is beyond the stack (not reached: the depth limit is).
    size_t stack_size = (size_t)(FRAMES + 2) * FRAME_SIZE;
    uint8_t *stack = (uint8_t *)(object(stack_size) - 1);
    for (int i = 0; i < FRAMES; i++) {
        uint64_t *fp = (uint64_t *)(stack + FRAME_SIZE * (size_t)(i + 1));
        frames[i] = fp;
        fp[0] = (uint64_t)(stack + FRAME_SIZE * (size_t)(i + 2));
        fp[1] = (uint64_t)blob_return;
        fp[v8dbg_off_fp_context_or_frame_type / 8] = script; // any heap object
        fp[v8dbg_off_fp_function / 8] = functions[i % FUNCTIONS];
        fp[v8dbg_off_fp_bytecode_array / 8] = bytecode;
        fp[v8dbg_off_fp_bytecode_offset / 8] = smi(v8dbg_class_BytecodeArray__data__uintptr_t - 1);
    }
    innermost_fp = (uint64_t)frames[0];

    pthread_t thread;
    if (pthread_create(&thread, NULL, rotate, NULL)) {
        perror("pthread_create");
        return 1;
    }
    v8_Default_embedded_blob_code_();
    return 0;
}
