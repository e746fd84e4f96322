#!/usr/bin/env python3
"""Prints C that defines every `v8dbg_*` constant of a V8 build (`node`)
with the build's value, and its V8 version string: what makes a crafted
program (`hostile_v8.c`) look like that build to a profiler's detection.

Usage: v8dbg_of.py /usr/bin/node > v8dbg.c
"""
import struct
import subprocess
import sys


def segments(elf):
    """(vaddr, filesz, offset) of each PT_LOAD of an ELF64 file."""
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    out = []
    for i in range(phnum):
        p_type, _, offset, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if p_type == 1:
            out.append((vaddr, filesz, offset))
    return out


def value_at(elf, loads, vaddr):
    """The i32 at `vaddr`, 0 when it has no file bytes (.bss)."""
    for start, size, offset in loads:
        if start <= vaddr and vaddr + 4 <= start + size:
            return struct.unpack_from("<i", elf, offset + vaddr - start)[0]
    return 0


def main():
    path = sys.argv[1]
    with open(path, "rb") as f:
        elf = f.read()
    loads = segments(elf)
    names = subprocess.run(["nm", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in names.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("v8dbg_"):
            symbols[parts[2]] = int(parts[0], 16)
    marker = elf.find(b"-node.")
    while marker > 0:
        start = marker
        while start > 0 and (elf[start - 1:start].isdigit() or elf[start - 1:start] == b"."):
            start -= 1
        if elf[start - 1] == 0 and start < marker:
            end = elf.index(b"\0", marker)
            version = elf[start:end].decode()
            break
        marker = elf.find(b"-node.", marker + 1)
    else:
        sys.exit(f"{path}: no V8 version string")
    print(f"/* Generated from {path} by v8dbg_of.py: {len(symbols)} constants. */")
    # The NUL before it: detection takes a version that starts a string.
    print(f'__attribute__((used)) const char v8_version_string[] = "\\0" "{version}";')
    for name in sorted(symbols):
        print(f"const int {name} = {value_at(elf, loads, symbols[name])};")


main()
