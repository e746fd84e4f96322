//! Naming frames on the host.
//!
//! - [`KernelSymbols`]: `/proc/kallsyms` (kernel and module text symbols),
//!   parsed once into a compact sorted table and looked up by binary
//!   search; [`KernelSymbolizer`] caches it and reloads it, rate-limited,
//!   when an address falls outside every known symbol (a module loaded
//!   after start).
//! - [`NativeSymbolizer`]: native and Go frames, `(FileId, ELF virtual
//!   address)` to [`SourceLine`](profiler_trace::SourceLine)s innermost
//!   first. Files load on a background worker (a lookup in a file still
//!   loading answers [`Symbolized::Pending`]); loaded files and answers
//!   live in bounded caches; [`NativeStats`] counts hits, misses, loads,
//!   drops and evictions.
//! - [`FileSymbolizer`]: the sources of one file, in the order they are
//!   tried: Go's `.gopclntab` (for Go code, with inlined functions),
//!   DWARF line tables with inline frames (in the file, or in a separate
//!   debug file found by build id or `.gnu_debuglink` under the
//!   [`DebugConfig`] roots), then `.symtab`/`.dynsym`.
//! - [`demangle`]: Rust (legacy and v0) and C++ (Itanium) names.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod cache;
mod debugfile;
mod demangle;
mod dwarf;
mod file;
mod kallsyms;
mod native;

pub use debugfile::DebugConfig;
pub use demangle::demangle;
pub use dwarf::DwarfError;
pub use file::{DwarfOrigin, FileInfo, FileSource, FileSymbolizer, LineSource, LoadError};
pub use kallsyms::{KallsymsError, KernelSymbol, KernelSymbolizer, KernelSymbols};
pub use native::{LoadHold, NativeConfig, NativeStats, NativeSymbolizer, Reason, Symbolized};
