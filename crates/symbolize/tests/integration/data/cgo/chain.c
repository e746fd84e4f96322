#include <stdint.h>
#include "_cgo_export.h"

extern char __executable_start;
static volatile uintptr_t ra;

__attribute__((noinline, noclone)) void c_middle(int n) {
    goCallback(n);
    ra = (uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline, noclone)) void c_entry(int n) {
    c_middle(n + 1); /* C_ENTRY_CALLS_MIDDLE */
    ra += 0;
}

uintptr_t c_return_address(void) { return ra; }
uintptr_t c_executable_start(void) { return (uintptr_t)&__executable_start; }
