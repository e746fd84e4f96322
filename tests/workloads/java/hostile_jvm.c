// A crafted HotSpot for tests/hostile_runtimes.rs and bench/hostile.py
// (issue 43): built with -DLIBJVM as `libjvm.so` (the name the agent's
// HotSpot detection looks for) exporting the Serviceability Agent's table
// symbols, and without as the `java` that links it.
//
// Its tables are as costly to read as the agent allows and never done:
// entries of the largest stride the agent accepts (256 bytes), each
// naming a type, field or constant of its own (255 characters, so no
// name is read twice); the structs, types and int constants tables end
// one entry short of the most entries the agent reads (20,000), the long
// constants table has no end, so every attach reads ~80,000 entries and
// ~100,000 names and fails as "not ready": it is tried again. The main
// thread maps a new RWX page every 0.3 s and runs a loop copied into it
// (a JIT's behaviour): each one is a new mapping of the process, each a
// reason to look at it again.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

// The agent's bounds (crates/interpreters/src/hotspot/vmstructs.rs).
#define MAX_ENTRIES 20000
#define MAX_NAME 256
#define STRIDE 256

#ifdef LIBJVM

#define EXPORT __attribute__((visibility("default")))

EXPORT void *gHotSpotVMStructs;
EXPORT uint64_t gHotSpotVMStructEntryArrayStride;
EXPORT uint64_t gHotSpotVMStructEntryTypeNameOffset;
EXPORT uint64_t gHotSpotVMStructEntryFieldNameOffset;
EXPORT uint64_t gHotSpotVMStructEntryIsStaticOffset;
EXPORT uint64_t gHotSpotVMStructEntryOffsetOffset;
EXPORT uint64_t gHotSpotVMStructEntryAddressOffset;

EXPORT void *gHotSpotVMTypes;
EXPORT uint64_t gHotSpotVMTypeEntryArrayStride;
EXPORT uint64_t gHotSpotVMTypeEntryTypeNameOffset;
EXPORT uint64_t gHotSpotVMTypeEntrySizeOffset;

EXPORT void *gHotSpotVMIntConstants;
EXPORT uint64_t gHotSpotVMIntConstantEntryArrayStride;
EXPORT uint64_t gHotSpotVMIntConstantEntryNameOffset;
EXPORT uint64_t gHotSpotVMIntConstantEntryValueOffset;

EXPORT void *gHotSpotVMLongConstants;
EXPORT uint64_t gHotSpotVMLongConstantEntryArrayStride;
EXPORT uint64_t gHotSpotVMLongConstantEntryNameOffset;
EXPORT uint64_t gHotSpotVMLongConstantEntryValueOffset;

static uint64_t names_made;

// A name of MAX_NAME - 1 characters no other entry has.
static char *new_name(const char *what) {
    char *name = malloc(MAX_NAME);
    int n = snprintf(name, MAX_NAME, "hostile_%s_%08llu_", what, (unsigned long long)names_made++);
    memset(name + n, 'x', MAX_NAME - 1 - n);
    name[MAX_NAME - 1] = 0;
    return name;
}

// A table of `entries` entries of STRIDE bytes; names at the offsets in
// `name_at` (`names` of them); `ends`: a NULL entry after the last one.
static void *table(int entries, int ends, const uint64_t *name_at, int names, const char *what) {
    uint8_t *t = calloc((size_t)(entries + 1), STRIDE);
    for (int i = 0; i < entries; i++) {
        for (int j = 0; j < names; j++) {
            char *name = new_name(what);
            memcpy(t + (size_t)i * STRIDE + name_at[j], &name, sizeof name);
        }
    }
    if (!ends) {
        // The entry after the last one read is never looked at; nothing
        // ends the table before it.
        char *name = new_name(what);
        memcpy(t + (size_t)entries * STRIDE, &name, sizeof name);
    }
    return t;
}

EXPORT void hostile_jvm_init(void) {
    gHotSpotVMStructEntryTypeNameOffset = 0;
    gHotSpotVMStructEntryFieldNameOffset = 8;
    gHotSpotVMStructEntryIsStaticOffset = 16;
    gHotSpotVMStructEntryOffsetOffset = 24;
    gHotSpotVMStructEntryAddressOffset = 32;
    uint64_t struct_names[] = {0, 8};
    gHotSpotVMStructs = table(MAX_ENTRIES - 1, 1, struct_names, 2, "struct");

    gHotSpotVMTypeEntryTypeNameOffset = 0;
    gHotSpotVMTypeEntrySizeOffset = 8;
    uint64_t one_name[] = {0};
    gHotSpotVMTypes = table(MAX_ENTRIES - 1, 1, one_name, 1, "type");

    gHotSpotVMIntConstantEntryNameOffset = 0;
    gHotSpotVMIntConstantEntryValueOffset = 8;
    gHotSpotVMIntConstants = table(MAX_ENTRIES - 1, 1, one_name, 1, "int");

    gHotSpotVMLongConstantEntryNameOffset = 0;
    gHotSpotVMLongConstantEntryValueOffset = 8;
    gHotSpotVMLongConstants = table(MAX_ENTRIES, 0, one_name, 1, "long");

    // The strides last: zero strides read as a VM still starting.
    gHotSpotVMStructEntryArrayStride = STRIDE;
    gHotSpotVMTypeEntryArrayStride = STRIDE;
    gHotSpotVMIntConstantEntryArrayStride = STRIDE;
    gHotSpotVMLongConstantEntryArrayStride = STRIDE;
}

#else

void hostile_jvm_init(void);

// mov ecx, 4000000; l: dec ecx; jnz l; ret
static const unsigned char LOOP[] = {0xb9, 0x00, 0x09, 0x3d, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void) {
    hostile_jvm_init();
    // At most this many pages are kept mapped; the oldest goes first.
    enum { KEPT = 4096 };
    static void *pages[KEPT];
    unsigned long made = 0;
    for (;;) {
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        memcpy(page, LOOP, sizeof LOOP);
        if (pages[made % KEPT]) {
            munmap(pages[made % KEPT], 4096);
        }
        pages[made % KEPT] = page;
        made++;
        void (*run)(void) = (void (*)(void))page;
        double until = now() + 0.3;
        while (now() < until) {
            run();
        }
    }
}

#endif
