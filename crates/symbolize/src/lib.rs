//! Naming frames on the host.
//!
//! - [`KernelSymbols`]: `/proc/kallsyms` (kernel, module and BPF program
//!   text symbols),
//!   parsed once into a compact sorted table and looked up by binary
//!   search; [`KernelSymbolizer`] caches it and reloads it, rate-limited,
//!   when an address falls outside every known symbol (a module loaded
//!   after start) or in BPF code (programs come and go).
//! - [`NativeSymbolizer`]: native and Go frames, `(TableKey, ELF virtual
//!   address)` to [`SourceLine`](profiler_trace::SourceLine)s innermost
//!   first. Files load on a background worker in two steps, symbols
//!   first, DWARF after (a lookup in a file still loading answers
//!   [`Symbolized::Pending`], or from its symbols while its DWARF
//!   loads); loaded files live within a memory budget, answers in a
//!   bounded cache; [`NativeStats`] counts hits, misses, loads, drops and
//!   evictions.
//! - [`FileSymbolizer`]: the sources of one file, in the order they are
//!   tried: Go's `.gopclntab` (for Go code, with inlined functions),
//!   DWARF line tables with inline frames (in the file, or in a separate
//!   debug file found by build id or `.gnu_debuglink` under the
//!   [`DebugConfig`] roots), then `.symtab`/`.dynsym`.
//! - [`demangle`](fn@demangle): Rust (legacy and v0) and C++ (Itanium) names.
//!
//! # Native frames in the profiler
//!
//! The thread that builds traces owns one [`NativeSymbolizer`] and, for
//! each user frame whose file and ELF virtual address it knows, calls
//! [`NativeSymbolizer::symbolize`] with the file's content key, the address (of
//! the call: return address - 1) and a closure giving a [`FileSource`]
//! (e.g. [`FileSource::in_mapping`]). [`Symbolized::Lines`] fills the
//! frame's lines (a [`LineSource::GoPclntab`] answer marks Go code);
//! [`Symbolized::Pending`] and [`Symbolized::Unknown`] leave the frame
//! with its address only (a later sample gets the names). Nothing blocks:
//! files load on the symbolizer's own worker thread.
//!
//! ```no_run
//! use profiler_symbolize::{FileSource, LineSource, NativeConfig, NativeSymbolizer, Symbolized};
//! use profiler_trace::{Pid, TableKey};
//!
//! let mut symbolizer = NativeSymbolizer::new(NativeConfig::default())?;
//! # let (file_id, pid, start, end, path, vaddr) = (TableKey([0; 32]), Pid(1), 0, 0, "/bin/true", 0);
//! match symbolizer.symbolize(file_id, vaddr, || FileSource::in_mapping(pid, start, end, path)) {
//!     Symbolized::Lines { lines, source } => {
//!         let is_go = source == LineSource::GoPclntab;
//!         println!("{} lines, go: {is_go}", lines.len());
//!     }
//!     Symbolized::Pending | Symbolized::Unknown(_) => {}
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Memory
//!
//! The symbolizer is the part of the profiler whose memory grows with
//! what runs on the machine, so it has a budget,
//! [`NativeConfig::max_file_bytes`] (8 MiB by default), over what
//! [`FileSymbolizer::cost`] accounts for each loaded file:
//!
//! - symbols: 12 bytes each, names left in the file (read when a lookup
//!   needs one, then interned and counted);
//! - DWARF: decompressed sections (those the index reads), the unit
//!   index built at load (our own, on gimli: 24 bytes a unit and 32 an
//!   address range; no abbreviation table is kept), and the compact
//!   line, function and inline tables of each unit the first time a
//!   lookup parses it (counted from their lengths). DWARF that would
//!   take more than [`DebugConfig::max_dwarf_bytes`] (8 MiB) is not
//!   loaded, nor DWARF whose index outgrows it as it is built: the file
//!   is named from its symbols (counted in
//!   [`NativeStats::dwarf_too_large`]). Lookups never take it past that
//!   limit: the least recently used units are dropped
//!   ([`NativeStats::dwarf_units_dropped`]), and a unit (or an inline
//!   tree with its unit) that alone would not fit in what the sections
//!   and index leave is not kept: its addresses are named from symbols;
//! - files are mapped, not read (only those under a page are read into
//!   memory): the pages lookups read are given back to the page cache a
//!   second after the reads (the `symbolize-pages` thread, `release.rs`).
//!
//! Beyond the budget, the units lookups parsed are given up first, the
//! least recently used of all files first (one clock for all), each
//! file's last one used aside ([`NativeStats::dwarf_units_shed`]; parsed
//! again when an address not in the address cache falls in one,
//! [`NativeStats::dwarf_units_parsed`]); only when that is not enough are
//! the least recently used files dropped (their answers stay cached); a
//! file whose load alone takes more than 3/4 of
//! the budget is given up for [`NativeConfig::retry_failed_after`], one
//! that its lookups grew over the budget is dropped and loaded again at
//! the next new address. The `memory_breakdown`
//! example measures all of this file by file with a counting allocator;
//! `docs/memory.md` has the figures.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod budget;
mod cache;
mod debugfile;
mod demangle;
mod dwarf;
mod file;
mod filemap;
mod heap;
mod kallsyms;
mod native;
mod release;
mod source;
mod symtab;

pub use budget::thread_cpu;
pub use cache::CacheStats;
pub use debugfile::DebugConfig;
pub use demangle::demangle;
pub use dwarf::DwarfError;
pub use file::{DwarfOrigin, FileInfo, FileSymbolizer, LineSource};
pub use kallsyms::{BpfProgram, KallsymsError, KernelSymbol, KernelSymbolizer, KernelSymbolizerStats, KernelSymbols};
pub use native::{LoadHold, NativeConfig, NativeStats, NativeSymbolizer, Reason, Symbolized};
pub use source::{FileSource, KeptFile, LoadError};
