/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `make test-kernels-arm64`'s loader, run inside the arm64 VM: opens a
 * BPF object, sets read-only variables the way the agent does before
 * load (NAME=VALUE arguments: a bool, u32 or u64 of .rodata), loads every
 * program and prints one line per program:
 *   PROG <name> verified_insns <n>
 * then LOADED <count>. On a rejected program libbpf prints the verifier's
 * log and the loader exits 1. (bpftool 7.1, Debian 12's, can neither set
 * .rodata nor print verified_insns.) Built statically with Debian's
 * arm64 libbpf-dev (tests/kernels/arm64.sh).
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets variable `name` of the object's .rodata to `value`. */
static int set_rodata(struct bpf_object *obj, const char *name, unsigned long long value)
{
	struct bpf_map *rodata = NULL, *map;
	bpf_object__for_each_map(map, obj) {
		const char *map_name = bpf_map__name(map);
		size_t len = strlen(map_name);
		if (len >= 7 && strcmp(map_name + len - 7, ".rodata") == 0)
			rodata = map;
	}
	struct btf *btf = bpf_object__btf(obj);
	if (!rodata || !btf) {
		fprintf(stderr, "arm64_loader: no .rodata or no BTF\n");
		return -1;
	}
	size_t size = 0;
	const void *initial = bpf_map__initial_value(rodata, &size);
	int sec_id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (!initial || sec_id < 0)
		return -1;
	/* libbpf 1.1 hands out the initial value read-only: a copy is
	 * changed and set back. */
	unsigned char data[4096];
	if (size > sizeof(data))
		return -1;
	memcpy(data, initial, size);
	const struct btf_type *sec = btf__type_by_id(btf, sec_id);
	const struct btf_var_secinfo *vars = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++) {
		const struct btf_type *var = btf__type_by_id(btf, vars[i].type);
		if (strcmp(btf__name_by_offset(btf, var->name_off), name) != 0)
			continue;
		if (vars[i].offset + vars[i].size > size)
			return -1;
		unsigned char *at = data + vars[i].offset;
		unsigned int value32 = (unsigned int)value;
		switch (vars[i].size) {
		case 1:
			*at = (unsigned char)value;
			break;
		case 4:
			memcpy(at, &value32, 4);
			break;
		case 8:
			memcpy(at, &value, 8);
			break;
		default:
			return -1;
		}
		return bpf_map__set_initial_value(rodata, data, size);
	}
	fprintf(stderr, "arm64_loader: no .rodata variable %s\n", name);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: arm64_loader OBJECT [NAME=VALUE ...]\n");
		return 2;
	}
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "arm64_loader: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq) {
			fprintf(stderr, "arm64_loader: %s is not NAME=VALUE\n", argv[i]);
			return 2;
		}
		*eq = 0;
		if (set_rodata(obj, argv[i], strtoull(eq + 1, NULL, 0)))
			return 1;
	}
	int err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "arm64_loader: load failed: %s\n", strerror(-err));
		return 1;
	}
	int loaded = 0;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		unsigned int len = sizeof(info);
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
			fprintf(stderr, "arm64_loader: no info for %s\n", bpf_program__name(prog));
			return 1;
		}
		printf("PROG %s verified_insns %u\n", bpf_program__name(prog), info.verified_insns);
		loaded++;
	}
	printf("LOADED %d\n", loaded);
	bpf_object__close(obj);
	return 0;
}
