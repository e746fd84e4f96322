//! Everything the profiler reads from ELF files, for native unwinding and
//! for naming what it finds.
//!
//! - [`ElfFile`] opens a file (mapped, or read for small files) or takes
//!   bytes already in memory (the vDSO), and checks and parses its headers.
//!   Only x86-64 ELF64 little-endian files are supported.
//! - [`file_id_of_path`] / [`file_id_of_bytes`] compute the
//!   [`profiler_trace::FileId`] content hash from the head and tail of a file.
//! - [`ElfFile::gnu_build_id`] and [`ElfFile::go_build_id`] read the build
//!   id notes (through sections, or `PT_NOTE` when sections are stripped);
//!   [`ElfFile::gnu_debuglink`] names the separate debug file.
//! - [`source`] opens files a profiled process controls: regular files
//!   only, bounded, resolved inside the process's root; and hashes their
//!   whole content into the [`profiler_trace::TableKey`] that per-file
//!   state is keyed by.
//! - [`SymbolIndex`] maps ELF virtual addresses to function names (16
//!   bytes a function, names read from the file when needed).
//! - [`ElfFile::go_version`] reads a Go executable's version from its
//!   build info ([`GoVersion`]).
//! - [`GoPclntab`] reads Go's `.gopclntab` (Go 1.16+, also in stripped
//!   binaries and without section headers): function, file, line and
//!   inlined functions of a pc, and the `pcsp` stack-pointer deltas a Go
//!   unwinder needs.
//! - [`LoadSegments`] turns a process address plus its `/proc/PID/maps`
//!   line into the ELF virtual address that the tables use.
//! - [`UnwindTable`] is the heart: `.eh_frame` and `.debug_frame` reduced
//!   to a sorted list of [`StackDelta`]s, each an [`UnwindRule`] the BPF
//!   unwinder can apply, with [`UnwindStats`] saying what could not be
//!   expressed; [`RuleInterner`] deduplicates rules across files.
//!
//! Malformed input never panics: file structures are bounds-checked and
//! reported as [`Error`]s; CFI problems leave a partial table and are
//! counted in [`UnwindStats::errors`].
//!
//! ```no_run
//! # fn main() -> Result<(), profiler_elf::Error> {
//! let elf = profiler_elf::ElfFile::open("/lib/x86_64-linux-gnu/libc.so.6")?;
//! let table = elf.unwind_table();
//! let symbols = elf.symbols()?;
//! if let Some(vaddr) = elf.elf_vaddr(0x7f00_0002_8a10, 0x7f00_0002_8000, 0x28000) {
//!     println!("{:?} {:?}", symbols.lookup(vaddr), table.lookup(vaddr));
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod arch;
mod error;
mod file;
mod fileid;
mod go_buildinfo;
mod gopclntab;
pub mod map_guard;
mod mapping;
mod notes;
pub mod source;
mod symbols;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod unwind;

pub use error::{Error, Result};
pub use file::{
    release_mapped, ElfFile, ProgramHeader, Section, ET_DYN, ET_EXEC, MAX_PROGRAM_HEADERS, MAX_SECTION_HEADERS, PF_X,
    PT_GNU_EH_FRAME, PT_INTERP, PT_LOAD, PT_NOTE, READ_INTO_MEMORY_BELOW, SHF_COMPRESSED, SHT_DYNSYM, SHT_NOBITS,
    SHT_NOTE, SHT_SYMTAB,
};
pub use fileid::{file_id_of_bytes, file_id_of_file, file_id_of_path};
pub use go_buildinfo::GoVersion;
pub use gopclntab::{
    may_be_go, GoFrame, GoFunc, GoPclntab, GoPclntabLayout, GoPclntabVersion, PcRange, PcValues, FUNC_FLAG_ASM,
    FUNC_FLAG_SP_WRITE, FUNC_FLAG_TOP_FRAME, GO116_MAGIC, GO118_MAGIC, GO120_MAGIC, MAX_GO_FUNCTIONS,
};
pub use mapping::{LoadSegment, LoadSegments};
pub use notes::{gnu_build_id_in_notes, kernel_build_id, DebugLink};
pub use symbols::{SymbolIndex, SymbolSource, SymbolTable};
pub use unwind::{
    with_go_tables, CfaBase, CfiError, CfiErrorKind, CfiSection, DeltaWalk, Deltas, DeltasBuilder, EhFrameSource,
    GoUnwindStats, IndexedIter, IntoIndexed, InvalidReason, RbpRule, RowCounts, RuleId, RuleInterner, StackDelta,
    UnwindRule, UnwindStats, UnwindTable, FOLLOWED_SWITCHES, MAX_ENTRY_LEN, MAX_KEPT_ERRORS, MAX_RULES_PER_TABLE,
};
