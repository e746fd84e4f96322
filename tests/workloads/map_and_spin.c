/* Maps argv[1] executable (argv[2] bytes, else the whole file), then
 * spins forever: a process the agent must load, with a mapping that is
 * not what it seems (/dev/zero, a crafted copy of a library). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define NOINLINE __attribute__((noinline))
static volatile unsigned long sink;

NOINLINE void spin_leaf(void) { for (int i = 0; i < 100000; i++) sink += i; }

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	size_t len = argc > 2 ? strtoul(argv[2], NULL, 0) : 0;
	if (!len) {
		struct stat st;
		fstat(fd, &st);
		len = st.st_size;
	}
	if (mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (;;)
		spin_leaf();
}
