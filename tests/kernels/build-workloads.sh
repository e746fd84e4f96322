#!/usr/bin/env bash
# Builds the kernel smoke suite's workloads into DIR (argument), on the
# host, from the end-to-end tests' sources: the VM sees the host's files,
# so nothing is compiled inside the (possibly emulated) guest.
#   native_chain   gcc -O2 -fomit-frame-pointer: unwound from .eh_frame only
#   exec_target    the same program under another name, the target of an exec
#   go_chain       stripped Go (-ldflags='-s -w'): unwound from .gopclntab
#   prog_info      lists the loaded BPF programs with the verifier's counts
set -euo pipefail
out="${1:?usage: build-workloads.sh DIR}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
w="$repo/tests/workloads"
mkdir -p "$out/go_chain_src"
gcc -O2 -fomit-frame-pointer -pthread -o "$out/native_chain" "$w/native_chain.c"
cp "$out/native_chain" "$out/exec_target"
cp "$w/go_chain/"*.go "$out/go_chain_src/"
printf 'module go_chain\n\ngo 1.21\n' >"$out/go_chain_src/go.mod"
(cd "$out/go_chain_src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -ldflags='-s -w' -o "$out/go_chain" .)
cp "$w/python/chain.py" "$out/chain.py"
gcc -O2 -Wall -o "$out/prog_info" "$repo/tests/kernels/prog_info.c"
