#!/usr/bin/env bash
# Builds the container image of otelcol-ebpf-profiler offline: no base
# image is pulled. The root file system is assembled here from the binary
# and the shared libraries `ldd` lists (plus /etc/passwd, /etc/group, CA
# certificates and /tmp), packed as a tar and imported with `docker
# import`, tagged with builder-config.yaml's dist.version.
#
#   deploy/image/build.sh [--rootfs-only DIR]   (make image)
#
# IMAGE_NAME (default ebpf-profiler/otelcol-ebpf-profiler) names the image;
# it also gets the tag `latest`. --rootfs-only writes the tar to DIR and
# stops (no Docker needed), for the structural test.
set -euo pipefail
cd "$(dirname "$0")/../.."

image_name=${IMAGE_NAME:-ebpf-profiler/otelcol-ebpf-profiler}
version=$(sed -n 's/^  version: *//p' builder-config.yaml | head -n1)
[ -n "$version" ] || { echo "image: no dist.version in builder-config.yaml" >&2; exit 1; }
bin=./otelcol-ebpf-profiler
[ -x "$bin" ] || { echo "image: $bin missing: run make otelcol-ebpf-profiler" >&2; exit 1; }

rootfs_only=
if [ "${1:-}" = --rootfs-only ]; then rootfs_only=${2:?--rootfs-only DIR}; fi

work=$(mktemp -d /tmp/image.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs"/{etc,tmp} "$rootfs/etc/ssl/certs"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin" "$rootfs/otelcol-ebpf-profiler"
strip --strip-debug "$rootfs/otelcol-ebpf-profiler" 2>/dev/null || true

# The shared libraries, at the paths the dynamic loader looks for them.
# ldd prints "name => /path (addr)" and the loader as "/path (addr)".
ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u |
while read -r lib; do
  real=$(readlink -f "$lib")
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$real" "$rootfs$lib"
done

# Users: root (the DaemonSet runs as uid 0 with a few capabilities) and
# nonroot (65532), the image's default user.
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' \
  > "$rootfs/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' > "$rootfs/etc/group"
mkdir -p "$rootfs/home/nonroot" && chown 65532:65532 "$rootfs/home/nonroot"
# TLS to backends.
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
fi

tar --numeric-owner --sort=name --mtime=@0 -C "$rootfs" -cf "$work/rootfs.tar" .
if [ -n "$rootfs_only" ]; then
  mkdir -p "$rootfs_only" && cp "$work/rootfs.tar" "$rootfs_only/rootfs.tar"
  echo "image: root file system in $rootfs_only/rootfs.tar ($(du -h "$work/rootfs.tar" | cut -f1))"
  exit 0
fi

command -v docker >/dev/null || { echo "image: docker is not installed (apt-get install docker.io)" >&2; exit 1; }
docker import \
  --change 'ENTRYPOINT ["/otelcol-ebpf-profiler"]' \
  --change 'USER 65532:65532' \
  --change 'WORKDIR /' \
  --change "LABEL org.opencontainers.image.title=otelcol-ebpf-profiler org.opencontainers.image.version=$version" \
  "$work/rootfs.tar" "$image_name:$version" >/dev/null
docker tag "$image_name:$version" "$image_name:latest"
size=$(docker image inspect -f '{{.Size}}' "$image_name:$version")
echo "image: $image_name:$version ($((size / 1024 / 1024)) MiB)"
