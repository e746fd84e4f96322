/* The library dlopen_main.c loads. */
#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void plugin_leaf(void) { for (int i = 0; i < 100000; i++) sink += i; }
NOINLINE void plugin_step(void) { plugin_leaf(); sink++; }
NOINLINE void plugin_entry(void) { for (;;) plugin_step(); }
