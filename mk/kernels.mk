# The agent on the kernels users run: boots each kernel of
# tests/kernels/kernels.txt in a VM (virtme-ng, KVM when a guest runs on
# it, emulation otherwise) and runs the kernel smoke suite inside.
# Kernels come from Debian's archive through apt-get download, cached in
# /var/cache/ebpf-profiler-kernels (never in the repo). Root.
.PHONY: test-kernels

test-kernels: agent
	tests/kernels/run.sh
