#!/usr/bin/env bash
# Builds the seed corpus of every fuzz target from real files on this
# machine (nothing large is committed): system binaries, test programs
# built here with gcc and go (with .debug_frame, compressed DWARF, Go
# tables), CPython line tables and 3.13 debug offsets, sample records.
# Usage: fuzz/seed.sh [corpus dir] (default fuzz/corpus). Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${1:-$here/corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets=(elf_file unwind_table gopclntab dwarf_symbolize python sample_decoder)
for t in "${targets[@]}"; do mkdir -p "$out/$t"; done

# prefix MODE_BYTE FILE OUT: OUT = one mode byte (octal escape) + FILE.
prefix() { { printf "$1"; cat "$2"; } > "$3"; }
# section FILE NAME OUT: the raw bytes of section NAME (empty if absent).
section() { objcopy -O binary --only-section="$2" "$1" "$3" 2>/dev/null || : > "$3"; }
have() { command -v "$1" > /dev/null 2>&1; }

# Native programs: as built, with .debug_frame, with compressed DWARF.
bins=(/bin/true /usr/bin/env)
if have gcc; then
    gcc -O2 -fomit-frame-pointer -g -o "$work/chain" "$repo/tests/workloads/native_chain.c" 2>/dev/null && bins+=("$work/chain")
    gcc -O2 -g -fno-asynchronous-unwind-tables -o "$work/debugframe" "$repo/tests/workloads/native_chain.c" 2>/dev/null \
        && bins+=("$work/debugframe")
    gcc -O1 -g -o "$work/signal" "$repo/tests/workloads/signal_handler.c" 2>/dev/null && bins+=("$work/signal")
    for kind in zlib zlib-gnu zstd; do
        if [ -f "$work/chain" ] && objcopy --compress-debug-sections=$kind "$work/chain" "$work/chain.$kind" 2>/dev/null; then
            bins+=("$work/chain.$kind")
        fi
    done
fi
gobin=""
if have go; then
    (cd "$repo/tests/workloads/go_chain" && GOFLAGS=-mod=mod GO111MODULE=off CGO_ENABLED=0 go build -ldflags='-s -w' -o "$work/gochain" main.go) \
        && gobin="$work/gochain" && bins+=("$gobin")
fi
i=0
for b in "${bins[@]}"; do
    i=$((i + 1))
    name=$(basename "$b")
    cp "$b" "$out/elf_file/$i-$name"
    prefix '\000' "$b" "$out/unwind_table/$i-$name"
    prefix '\000' "$b" "$out/dwarf_symbolize/$i-$name"
    section "$b" .eh_frame "$work/eh"
    [ -s "$work/eh" ] && prefix '\001' "$work/eh" "$out/unwind_table/$i-$name.eh_frame"
    section "$b" .debug_frame "$work/df"
    [ -s "$work/df" ] && prefix '\002' "$work/df" "$out/unwind_table/$i-$name.debug_frame"
    section "$b" .eh_frame_hdr "$work/hdr"
    if [ -s "$work/hdr" ] && [ -s "$work/eh" ]; then
        { printf '\003'; cat "$work/hdr"; printf 'EHFR'; cat "$work/eh"; } > "$out/unwind_table/$i-$name.eh_frame_hdr"
    fi
    # DWARF sections in the order the target splits them.
    if section "$b" .debug_info "$work/di" && [ -s "$work/di" ]; then
        {
            printf '\001'
            first=1
            for s in .debug_info .debug_abbrev .debug_line .debug_str .debug_aranges .debug_rnglists \
                .debug_line_str .debug_ranges .debug_str_offsets; do
                [ $first = 1 ] || printf '|SEC|'
                first=0
                section "$b" $s "$work/s"
                cat "$work/s"
            done
        } > "$out/dwarf_symbolize/$i-$name.sections"
    fi
done
if [ -n "$gobin" ]; then
    prefix '\000' "$gobin" "$out/gopclntab/go-whole"
    section "$gobin" .gopclntab "$work/pcln"
    section "$gobin" .text "$work/text"
    { printf '\001'; cat "$work/pcln"; printf 'TEXT'; head -c 262144 "$work/text"; } > "$out/gopclntab/go-sections"
fi
prefix '\000' /bin/true "$out/gopclntab/not-go"

# CPython: line tables of each format (mode 0), the running 3.13's debug
# offsets (mode 1), a code object's neighbourhood (mode 2).
py=""
for v in 3.13.0 3.13; do
    if PYENV_VERSION=$v python3.13 -c '' 2> /dev/null; then py="env PYENV_VERSION=$v python3.13"; break; fi
done
[ -z "$py" ] && have python3 && py=python3
if [ -n "$py" ]; then
    $py -W ignore - "$out/python" << 'PYEOF'
import ctypes, sys, os
out = sys.argv[1]
src = "def f(a):\n    x = a + 1\n    if x:\n        return [i for i in range(x)]\n    return None\n"
code = compile(src, "seed.py", "exec").co_consts[0]
tables = {"locations": (2, getattr(code, "co_linetable", b"")), "lnotab": (0, getattr(code, "co_lnotab", b""))}
for name, (fmt, table) in tables.items():
    with open(os.path.join(out, "linetable-" + name), "wb") as f:
        f.write(bytes([0, fmt]) + table)
try:
    runtime = ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime")
    data = ctypes.string_at(ctypes.addressof(runtime), 584)
    if data.startswith(b"xdebugpy"):
        with open(os.path.join(out, "debug-offsets-313"), "wb") as f:
            f.write(b"\x01" + data)
except (ValueError, AttributeError):
    pass
addr = id(code)
with open(os.path.join(out, "code-object"), "wb") as f:
    f.write(bytes([2, sys.version_info.minor - 8]) + ctypes.string_at(addr, 256))
PYEOF
fi

# Sample records: a header and a few frames, and a truncated one.
{
    printf '\x2a\x00\x00\x00\x2b\x00\x00\x00'  # pid, tid
    printf '\xd2\x04\x00\x00\x00\x00\x00\x00'  # ktime
    printf '\x01\x00\x00\x00\x02\x00\x01\x00'  # cpu, kernel frames 2, user frames 1
    printf 'worker\0\0\0\0\0\0\0\0\0\0python3\0\0\0\0\0\0\0\0\0'
    printf '\x03\0\0\0\0\0\0\0'
    printf '\x01\x00\xff\xff\xff\xff\xff\xff\x02\x00\xff\xff\xff\xff\xff\xff\x00\x10\x40\x00\x00\x00\x00\x00'
} > "$out/sample_decoder/three-frames"
head -c 70 "$out/sample_decoder/three-frames" > "$out/sample_decoder/truncated"

# Committed regression inputs join the corpus.
for t in "${targets[@]}"; do
    [ -d "$here/regressions/$t" ] && cp "$here/regressions/$t"/* "$out/$t/" 2> /dev/null || true
done
for t in "${targets[@]}"; do echo "$t: $(ls "$out/$t" | wc -l) seeds"; done
