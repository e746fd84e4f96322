#!/usr/bin/env bash
# Fetches the kernels listed in tests/kernels/kernels.txt with apt-get
# download (Debian's archive, through a private apt configuration that
# leaves the host's sources alone) and unpacks each into
#   $KERNEL_CACHE/root/<version>/{boot/vmlinuz-<version>,lib/modules/<version>}
# A kernel already unpacked is not fetched again. Prints nothing else on
# stdout than one "<version> <expectation>" line per kernel.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
list="${KERNEL_LIST:-$repo/tests/kernels/kernels.txt}"
cache="${KERNEL_CACHE:-/var/cache/ebpf-profiler-kernels}"
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/etc" "$cache/root" "$cache/debs"

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
  for suite in bookworm bookworm-backports bullseye; do
    echo "deb [signed-by=$keyring] http://deb.debian.org/debian $suite main"
  done
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian-security bullseye-security main"
} >"$apt_dir/etc/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/etc/sources.list" -o Dir::Etc::sourceparts=-
  -o "Dir::State::lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o APT::Architecture=amd64
  -o APT::Sandbox::User=root)

updated=no
grep -v '^\s*#' "$list" | while read -r package expectation _suite; do
  [ -n "$package" ] || continue
  version="${package#linux-image-}"
  root="$cache/root/$version"
  if [ ! -f "$root/boot/vmlinuz-$version" ] || [ ! -d "$root/lib/modules/$version" ]; then
    if [ "$updated" = no ]; then
      apt-get "${apt_opts[@]}" -qq update >&2
      updated=yes
    fi
    (cd "$cache/debs" && apt-get "${apt_opts[@]}" -qq download "$package" >&2)
    deb=$(ls "$cache/debs/${package}_"*.deb)
    rm -rf "$root.tmp" && mkdir -p "$root.tmp"
    dpkg-deb -x "$deb" "$root.tmp"
    rm -rf "$root" && mv "$root.tmp" "$root"
    rm -f "$deb"
  fi
  echo "$version $expectation"
done
