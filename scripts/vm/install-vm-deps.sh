#!/usr/bin/env bash
# What `make test-kernels` needs on the host, idempotent (root):
#   qemu-system-x86  the VM (KVM when it works, emulation otherwise)
#   busybox-static   virtme-ng's initramfs
#   kmod             depmod, for the modules of a kernel unpacked from a .deb
#   virtme-ng        (PyPI) boots a kernel on a read-only view of the host's files
set -euo pipefail
packages=(qemu-system-x86 busybox-static kmod)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-vm-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
VIRTME_NG_VERSION=1.42
if ! command -v vng >/dev/null || [ "$(vng --version 2>/dev/null | awk '{print $NF}')" != "$VIRTME_NG_VERSION" ]; then
  echo "install-vm-deps: pip install virtme-ng==$VIRTME_NG_VERSION" >&2
  python3 -m pip install -q "virtme-ng==$VIRTME_NG_VERSION" >&2
fi
