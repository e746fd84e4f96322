//! Integration tests of `profiler-elf` against real files: programs built
//! here with gcc, the system libc, and readelf/sha256sum as independent
//! oracles. They need gcc, binutils and coreutils, nothing else.

mod support;

mod fileid;
mod gopclntab;
mod malformed;
mod map_guard;
mod mapping;
mod notes;
mod symbols;
mod unwind;
