# The eBPF programs built for arm64 and loaded on Debian's arm64 kernel
# under qemu-system-aarch64 (docs/kernels.md, "arm64"). The agent itself
# stays x86-64: crates/bpf/build.rs builds the host's object.
#   make bpf-arm64           target/bpf-arm64/profiler.bpf.o
#   make test-kernels-arm64  boots the arm64 kernel (TCG) and loads every
#                            program with the verifier (root, ~3-5 min)
.PHONY: bpf-arm64 test-kernels-arm64

BPF_ARM64_OBJECT := target/bpf-arm64/profiler.bpf.o
BPF_CLANG ?= clang-19

# libbpf's headers (bpf_helpers.h & co.) as the agent's build installed
# them (libbpf-sys, vendored): the newest such directory under target/.
bpf-arm64:
	@inc=$$(ls -td target/release/build/libbpf-sys-*/out/include target/debug/build/libbpf-sys-*/out/include 2>/dev/null | head -1); \
	if [ -z "$$inc" ]; then echo "bpf-arm64: no libbpf headers under target/ (make agent first)" >&2; exit 1; fi; \
	mkdir -p $(dir $(BPF_ARM64_OBJECT)) && \
	$(BPF_CLANG) -target bpf -D__TARGET_ARCH_arm64 -g -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
		-I"$$inc" -c ebpf/profiler.bpf.c -o $(BPF_ARM64_OBJECT) && \
	echo "bpf-arm64: $(BPF_ARM64_OBJECT)"

test-kernels-arm64: agent
	$(MAKE) bpf-arm64
	tests/kernels/arm64.sh $(BPF_ARM64_OBJECT)
