/* Spends its time in the kernel (reading /dev/zero in 1 MiB blocks):
 * the samples' user stacks start from the registers saved at kernel
 * entry, not from the sampled (kernel) context. */
#include <fcntl.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
static char buffer[1 << 20];
static volatile long sink;

NOINLINE void read_block(int fd)
{
	sink += read(fd, buffer, sizeof(buffer));
}
NOINLINE void read_loop(int fd) { for (;;) read_block(fd); }

int main(void)
{
	int fd = open("/dev/zero", O_RDONLY);
	read_loop(fd);
}
