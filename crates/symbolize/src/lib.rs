//! Naming frames on the host.
//!
//! - [`KernelSymbols`]: `/proc/kallsyms` (kernel, module and BPF program
//!   text symbols),
//!   parsed once into a compact sorted table and looked up by binary
//!   search; [`KernelSymbolizer`] caches it and reloads it, rate-limited,
//!   when an address falls outside every known symbol (a module loaded
//!   after start) or in BPF code (programs come and go).
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
//!
//! # Native frames in the profiler
//!
//! The thread that builds traces owns one [`NativeSymbolizer`] and, for
//! each user frame whose file and ELF virtual address it knows, calls
//! [`NativeSymbolizer::symbolize`] with the file's id, the address (of
//! the call: return address - 1) and a closure giving a [`FileSource`]
//! (e.g. [`FileSource::in_mapping`]). [`Symbolized::Lines`] fills the
//! frame's lines (a [`LineSource::GoPclntab`] answer marks Go code);
//! [`Symbolized::Pending`] and [`Symbolized::Unknown`] leave the frame
//! with its address only (a later sample gets the names). Nothing blocks:
//! files load on the symbolizer's own worker thread.
//!
//! ```no_run
//! use profiler_symbolize::{FileSource, LineSource, NativeConfig, NativeSymbolizer, Symbolized};
//! use profiler_trace::{FileId, Pid};
//!
//! let mut symbolizer = NativeSymbolizer::new(NativeConfig::default())?;
//! # let (file_id, pid, start, end, path, vaddr) = (FileId([0; 16]), Pid(1), 0, 0, "/bin/true", 0);
//! match symbolizer.symbolize(file_id, vaddr, || FileSource::in_mapping(pid, start, end, path)) {
//!     Symbolized::Lines { lines, source } => {
//!         let is_go = source == LineSource::GoPclntab;
//!         println!("{} lines, go: {is_go}", lines.len());
//!     }
//!     Symbolized::Pending | Symbolized::Unknown(_) => {}
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
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
pub use kallsyms::{BpfProgram, KallsymsError, KernelSymbol, KernelSymbolizer, KernelSymbols};
pub use native::{LoadHold, NativeConfig, NativeStats, NativeSymbolizer, Reason, Symbolized};
