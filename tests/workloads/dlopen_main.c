/* Runs a while, then dlopens the library given as argv[1] and calls its
 * plugin_entry forever: the library is mapped after the profiler loaded
 * the process. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
static volatile int sink;

NOINLINE void run_plugin(void (*entry)(void))
{
	entry();
	sink++; /* not a tail call */
}

int main(int argc, char **argv)
{
	struct timespec wait = { 0, 300 * 1000 * 1000 };
	nanosleep(&wait, NULL);
	void *lib = dlopen(argc > 1 ? argv[1] : "./libplugin.so", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	void (*entry)(void) = (void (*)(void))dlsym(lib, "plugin_entry");
	run_plugin(entry);
}
