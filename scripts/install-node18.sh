#!/usr/bin/env bash
# Node 18 beside the machine's Node 20, for the V8 tests (tests/v8.rs runs
# its chains on each Node present). Debian 12's `nodejs` 18 is not installed
# (it would replace /usr/bin/node): its packages are downloaded and
# extracted into $NODE18_DIR, with the libraries it needs that the machine
# lacks, and run through the wrapper $NODE18_DIR/bin/node (LD_LIBRARY_PATH).
# Debian's build loads a few bundled JavaScript modules from fixed paths
# under /usr/share/nodejs: those are copied there when missing (no other
# file of the system changes). Idempotent; run as root.
set -euo pipefail
NODE18_DIR="${NODE18_DIR:-/opt/ebpf-profiler/node18}"
wrapper="$NODE18_DIR/bin/node"
if [ -x "$wrapper" ] && "$wrapper" -e 'process.exit(process.versions.node.startsWith("18.") ? 0 : 1)' 2>/dev/null; then
  exit 0
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
chown _apt "$scratch" 2>/dev/null || true
apt-get update -qq
# Debian's newest 18.x (the security update when there is one): libnode108
# is Debian's only, `nodejs` may also come from another repository.
version="$(apt-cache madison libnode108 | awk 'NR == 1 { print $3 }')"
case "$version" in 18.*) ;; *) echo "install-node18: no Debian libnode108 18.x (found '$version')" >&2; exit 1 ;; esac
# The binary, its library, and the shared libraries of the library's
# Depends that are not installed here (a fresh Debian 12 lacks some).
debs=("nodejs=$version" "libnode108=$version")
for p in libuv1 libc-ares2 libnghttp2-14 libbrotli1 libicu72 libssl3 zlib1g; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || debs+=("$p")
done
apt-get download -qq "${debs[@]}" node-acorn node-cjs-module-lexer node-undici
rm -rf "$NODE18_DIR"
mkdir -p "$NODE18_DIR/root" "$NODE18_DIR/bin" js
for d in nodejs_*.deb libnode108_*.deb; do dpkg-deb -x "$d" "$NODE18_DIR/root"; done
for d in *.deb; do
  case "$d" in nodejs_*|libnode108_*|node-*) ;; *) dpkg-deb -x "$d" "$NODE18_DIR/root" ;; esac
done
for d in node-*.deb; do dpkg-deb -x "$d" js; done
mkdir -p /usr/share/nodejs
for m in cjs-module-lexer undici acorn acorn-walk; do
  [ -e "/usr/share/nodejs/$m" ] || cp -a "js/usr/share/nodejs/$m" /usr/share/nodejs/
done
cat > "$wrapper" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$NODE18_DIR/root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$NODE18_DIR/root/usr/bin/node" "\$@"
WRAP
chmod 755 "$wrapper"
"$wrapper" -p '"install-node18: node " + process.version + ", V8 " + process.versions.v8'
