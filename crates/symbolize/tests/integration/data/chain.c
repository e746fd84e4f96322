/* A known call chain with an always-inline function in the middle:
 * main -> top -> middle -> [helper, inlined] -> leaf.
 * leaf and middle record their return addresses; the test symbolizes
 * them (minus one, the call instruction) and expects the lines marked
 * below. Built -O2 -g by the tests. */
#include <stdint.h>
#include <stdio.h>

extern char __executable_start;
static volatile int sink;
static uintptr_t ras[2];

__attribute__((noinline, noclone)) void leaf(int n) {
    ras[0] = (uintptr_t)__builtin_return_address(0);
    sink += n;
}

static inline __attribute__((always_inline)) void helper(int n) {
    leaf(n + 1); /* HELPER_CALLS_LEAF */
    sink += 2;
}

__attribute__((noinline, noclone)) void middle(int n) {
    ras[1] = (uintptr_t)__builtin_return_address(0);
    helper(n); /* MIDDLE_CALLS_HELPER */
    sink += 3;
}

__attribute__((noinline, noclone)) void top(int n) {
    middle(n * 2); /* TOP_CALLS_MIDDLE */
    sink += 4;
}

int main(void) {
    top(1);
    printf("base %lx\n", (unsigned long)(uintptr_t)&__executable_start);
    printf("ra %lx\n", (unsigned long)ras[0]);
    printf("ra %lx\n", (unsigned long)ras[1]);
    return 0;
}
