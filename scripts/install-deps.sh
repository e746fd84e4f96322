#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need. Idempotent;
# run as root (CI does). Rust and Go come from the machine's toolchains.
#   clang-19            compiles the eBPF C (Debian 12 has no plain `clang`)
#   libclang1-19        bindgen (crates/bpf/build.rs) reads ebpf/types.h with it (clang-19 pulls it in too)
#   libelf-dev zlib1g-dev  static libelf.a / libz.a linked into the binaries
#   pkg-config make gcc libbpf-sys builds the vendored libbpf
#   protobuf-compiler   protoc, for crates that generate protobuf code
#   linux-perf bpftool  make bench: perf side by side, BPF program and map stats
#   dwz                 symbolization tests of dwz-compressed debug info
#   openjdk-17-jdk-headless  java/javac for the HotSpot tests (crates/interpreters/tests/hotspot_live.rs)
#   ruby                the Ruby tests (tests/ruby.rs, crates/interpreters/tests/ruby_live.rs)
#   php-cli             the PHP tests (crates/interpreters/tests/php_live.rs)
#   php-fpm             tests/php.rs's PHP-FPM worker test (php-fpm8.2)
#   erlang-base elixir  the BEAM tests (tests/beam.rs: erl, erlc, beam.smp of OTP 25; elixir 1.14)
#   perl                the Perl tests (perl_live.rs; its ithread test needs the threads module of libperl)
#   python3-venv xz-utils  make bench-accuracy: pylint and py-spy in a venv from PyPI; xz is its native program
#   perltidy libdevel-nytprof-perl php-codesniffer php-excimer  make bench-accuracy: the Perl and PHP programs and their profilers
set -euo pipefail
packages=(clang-19 libclang1-19 llvm-19 libelf-dev zlib1g-dev pkg-config make gcc g++ protobuf-compiler linux-perf bpftool dwz openjdk-17-jdk-headless ruby php-cli php-fpm perl erlang-base elixir python3-venv xz-utils perltidy libdevel-nytprof-perl php-codesniffer php-excimer libc6-dbg)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Node 18 (Debian's `nodejs`) extracted beside /usr/bin/node's Node 20 for tests/v8.rs
"$(dirname "$0")/install-node18.sh"
