#!/usr/bin/env bash
# `make test-kernels-arm64`: boots Debian 12's arm64 kernel under
# qemu-system-aarch64 (-M virt -cpu max, TCG: there is no arm64 KVM here)
# with a minimal initramfs (Debian's arm64 busybox-static and a static
# loader built from tests/kernels/arm64_loader.c against Debian's arm64
# libbpf-dev), and loads every program of the arm64 BPF object with the
# settings the agent uses on 6.1. Passes when all of them verify; prints
# each program's verified instruction count. Root.
#   arm64.sh OBJECT          (make bpf-arm64 builds target/bpf-arm64/profiler.bpf.o)
#   ARM64_KERNEL=package     (default below; the -cloud flavour: smaller,
#                            and it has PL011, PCI and BTF built in)
#   ARM64_TIMEOUT=seconds    how long the VM may run (default 1200)
# Packages come from Debian's archive through apt-get download with a
# private arm64 apt configuration (the host's dpkg architectures and
# sources are left alone), cached in /var/cache/ebpf-profiler-kernels/arm64.
# Under CI=true a missing tool, a failed download or a VM that does not
# come up fails like a failed assertion (it always does: nothing is skipped).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
object="${1:?usage: arm64.sh OBJECT}"
[ -f "$object" ] || { echo "test-kernels-arm64: no object at $object (make bpf-arm64)" >&2; exit 1; }
package="${ARM64_KERNEL:-linux-image-6.1.0-50-cloud-arm64}"
version="${package#linux-image-}"
cache="${KERNEL_CACHE:-/var/cache/ebpf-profiler-kernels}/arm64"
run="$repo/target/test-kernels-arm64"
timeout_s="${ARM64_TIMEOUT:-1200}"

# Host tools: the emulator, an aarch64 C toolchain for the loader, and
# busybox for cpio.
host_packages=(qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross busybox-static)
missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-kernels-arm64: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The guest's packages, arm64, unpacked once into $cache/root.
guest_packages=("$package" busybox-static libbpf-dev libelf-dev zlib1g-dev)
root="$cache/root"
if [ ! -f "$root/boot/vmlinuz-$version" ] || [ ! -f "$root/usr/lib/aarch64-linux-gnu/libbpf.a" ] \
  || [ ! -x "$root/bin/busybox" ]; then
  apt_dir="$cache/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/etc" "$cache/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg arch=arm64] http://deb.debian.org/debian bookworm main" \
    >"$apt_dir/etc/sources.list"
  apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/etc/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o Dir::State::status=/dev/null
    -o APT::Architecture=arm64 -o APT::Architectures=arm64 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" -qq update >&2
  rm -f "$cache/debs/"*.deb
  (cd "$cache/debs" && apt-get "${apt_opts[@]}" -qq download "${guest_packages[@]}" >&2)
  rm -rf "$root.tmp" && mkdir -p "$root.tmp"
  for deb in "$cache/debs/"*.deb; do dpkg-deb -x "$deb" "$root.tmp"; done
  rm -rf "$root" && mv "$root.tmp" "$root"
  rm -f "$cache/debs/"*.deb
fi

rm -rf "$run" && mkdir -p "$run/initramfs/bin" "$run/initramfs/proc" "$run/initramfs/sys" \
  "$run/initramfs/dev"
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -static -I "$root/usr/include" \
  -o "$run/initramfs/bin/arm64_loader" "$repo/tests/kernels/arm64_loader.c" \
  -L "$root/usr/lib/aarch64-linux-gnu" -lbpf -lelf -lz
cp "$root/bin/busybox" "$run/initramfs/bin/busybox"
cp "$object" "$run/initramfs/profiler.bpf.o"
# What the agent sets before load on 6.1 (crates/bpf/src/sampler.rs):
# bpf_task_pt_regs is there, off-CPU sampling on (1 %).
cat >"$run/initramfs/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t bpf bpf /sys/fs/bpf
echo "ARM64 kernel $(/bin/busybox uname -r) $(/bin/busybox uname -m)"
/bin/arm64_loader /profiler.bpf.o have_task_pt_regs=1 off_cpu_threshold=42949672 \
  && echo "ARM64 RESULT ok" || echo "ARM64 RESULT failed"
/bin/busybox poweroff -f
EOF
chmod +x "$run/initramfs/init"
(cd "$run/initramfs" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$run/initramfs.gz"

console="$run/console.log"
echo "== arm64 kernel $version (qemu-system-aarch64, TCG)"
start=$(date +%s)
qemu_rc=0
timeout "$timeout_s" qemu-system-aarch64 -M virt -cpu max -m 1G -smp 1 -nographic -no-reboot \
  -kernel "$root/boot/vmlinuz-$version" -initrd "$run/initramfs.gz" \
  -append "console=ttyAMA0 panic=-1 quiet" >"$console" 2>&1 </dev/null || qemu_rc=$?
echo "  (VM ran $(( $(date +%s) - start )) s; qemu exit code $qemu_rc)"
tr -d '\r' <"$console" | grep -a '^ARM64 kernel\|^PROG \|^LOADED ' || true
if ! tr -d '\r' <"$console" | grep -aq '^ARM64 RESULT ok'; then
  echo "test-kernels-arm64: the programs did not load on $version; the end of the console:" >&2
  tr -d '\r' <"$console" | tail -c 8000 >&2
  exit 1
fi
# Every program of the object (its global functions outside .text, where
# the global BPF subprograms the programs call live) verified, and
# reported a count.
text=$(llvm-readelf-19 -S --wide "$object" | sed -n 's/^ *\[ *\([0-9]*\)\] \.text .*/\1/p')
expected=$(llvm-readelf-19 -s --wide "$object" | awk -v text="${text:-none}" '$4 == "FUNC" && $5 == "GLOBAL" && $7 != text' | wc -l)
loaded=$(tr -d '\r' <"$console" | sed -n 's/^LOADED \([0-9]*\)$/\1/p')
counted=$(tr -d '\r' <"$console" | grep -ac '^PROG [a-z_0-9]* verified_insns [1-9]') || true
if [ "$loaded" != "$expected" ] || [ "$counted" != "$expected" ]; then
  echo "test-kernels-arm64: the object has $expected programs; $loaded loaded, $counted with a count" >&2
  exit 1
fi
echo "test-kernels-arm64: $loaded programs verified on $version"
