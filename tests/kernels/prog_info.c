/* Prints one JSON object per loaded BPF program: id, type, name, sizes,
 * run count and the verifier's instruction count (verified_insns, Linux
 * 5.16+; null on older kernels, whose bpf_prog_info ends before it).
 * bpftool 7.1 (Debian 12) does not print verified_insns. */
#include <errno.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int main(void)
{
	__u32 id = 0;
	for (;;) {
		union bpf_attr attr;
		memset(&attr, 0, sizeof(attr));
		attr.start_id = id;
		if (sys_bpf(BPF_PROG_GET_NEXT_ID, &attr) != 0)
			return errno == ENOENT ? 0 : 1;
		id = attr.next_id;

		memset(&attr, 0, sizeof(attr));
		attr.prog_id = id;
		int fd = (int)sys_bpf(BPF_PROG_GET_FD_BY_ID, &attr);
		if (fd < 0)
			continue; /* unloaded meanwhile */
		struct bpf_prog_info info;
		memset(&info, 0, sizeof(info));
		memset(&attr, 0, sizeof(attr));
		attr.info.bpf_fd = (__u32)fd;
		attr.info.info_len = sizeof(info);
		attr.info.info = (__u64)(unsigned long)&info;
		long r = sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr);
		close(fd);
		if (r != 0)
			continue;
		char name[sizeof(info.name) + 1] = { 0 };
		memcpy(name, info.name, sizeof(info.name));
		/* The kernel reports how much of the struct it filled. */
		int has_verified = attr.info.info_len >= offsetof(struct bpf_prog_info, verified_insns) + sizeof(__u32);
		printf("{\"id\": %u, \"type\": %u, \"name\": \"%s\", \"xlated_bytes\": %u, \"jited_bytes\": %u, "
		       "\"run_cnt\": %llu, \"verified_insns\": ",
		       info.id, info.type, name, info.xlated_prog_len, info.jited_prog_len,
		       (unsigned long long)info.run_cnt);
		if (has_verified)
			printf("%u}\n", info.verified_insns);
		else
			printf("null}\n");
	}
}
