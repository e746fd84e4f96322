//! DWARF line tables and inline frames through an index of our own built
//! on `gimli`, reading the sections straight from the mapped file
//! (decompressing `SHF_COMPRESSED` zlib and zstd sections and legacy
//! `.zdebug_*` zlib sections into memory), with an account of the heap
//! it holds.
//!
//! # The index
//!
//! At load, one pass over the unit headers: each unit's abbreviations
//! are parsed only to read its root entry, for the unit's address ranges
//! (`DW_AT_ranges`, else `.debug_aranges`, else `DW_AT_low_pc`/`high_pc`,
//! else, for a unit that declares none, the sequences of its line
//! program, run once at load), then dropped (a table several units
//! share is parsed once, and dropped after the last of them). What is
//! kept: each unit's `.debug_info` offset (8 bytes) and lookup slot (16
//! bytes), and one 32-byte entry per unit range.
//!
//! On the first lookup in a unit, the unit is parsed again (its
//! abbreviations and line program header, dropped afterwards) into
//! compact tables ([`ParsedUnit`]): the line rows by sequence (8 bytes
//! each: the address as an offset from the sequence's start, the line;
//! the file index where it changes), the file names rows and calls use,
//! rendered once (at most 4 KiB each); each `DW_TAG_subprogram` with
//! addresses, its name and entry offset. A function's inline tree (each
//! `DW_TAG_inlined_subroutine`: name, call file and line, ranges with
//! their inline depth) is parsed on the first lookup in the function
//! (the unit's abbreviations parsed again for it), with the call files
//! it names, and kept with the unit, charged to it. Names are the
//! linkage name, else the name, else those of the `DW_AT_abstract_origin` /
//! `DW_AT_specification` target (at most 16 links, into other units
//! through `DW_FORM_ref_addr` and into the supplementary file of `dwz`,
//! each such unit parsed for the while), cut at 4 KiB and kept as 8-byte
//! references into the sections they are read from ([`NameRef`]:
//! section, offset, length), copied out only when a lookup returns them.
//!
//! The frames of an address are the inlined calls holding it, innermost
//! first, then the function: the innermost frame's file and line from
//! the line table, each outer one's from the call file and line of the
//! frame inside it. Lookups, file name rendering and the range fallback
//! follow `addr2line` 0.27 (which the symbolizer used before): a
//! differential test (`dwarf_diff_tests.rs`) checks that every
//! line-table address of real files gives the same frames.
//!
//! Everything read is untrusted: loops end with the bytes they read,
//! inline depth, name links, frames, names and paths are capped, strings
//! are read only as far as kept, and malformed DWARF gives fewer or no
//! frames (a unit or function whose entries do not parse answers
//! nothing), never a panic.
//!
//! # Memory
//!
//! [`Dwarf::cost`] is the decompressed sections (only those the index
//! reads: locations, macros and type units are never decompressed), the
//! index (from the lengths of its boxed slices) and, for each unit
//! parsed by a lookup, the lengths of its tables and strings, inline
//! trees parsed so far included ([`ParsedUnit::heap_bytes`]; allocator
//! rounding left out). Before anything is parsed, the index is estimated
//! from the unit headers and `.debug_aranges` ([`estimate_index`]) and
//! DWARF whose sections and index would exceed the limit is refused
//! ([`DwarfError::TooLarge`]); so is DWARF whose index outgrows the
//! limit as it is built (units can share one long range list or line
//! program, which no estimate sees: each range is taken from an
//! [`Allowance`], and so is a byte for each entry read and not kept, so
//! that the work of a load is bounded too).
//!
//! Lookups never grow a file's DWARF past that limit either: the parsed
//! units share what the sections and index leave of it, and beyond, the
//! least recently used are dropped ([`Dwarf::units_dropped`]) and parsed
//! again if looked up again. A unit is parsed within that share (its
//! rows, functions, names and files, and later each inline tree with
//! the unit, taken from an [`Allowance`]): one that does not fit is not
//! kept ([`Slot::Broken`], its addresses named from symbols), nor a tree
//! that does not (its function's addresses named from symbols). Without
//! this, at 1000 Hz one library's units (pyenv's libpython: 20 MB under
//! addr2line) filled the whole symbolizer budget and every other file
//! was evicted and loaded again, several times a second.
//!
//! Readers are bare slices (see [`Reader`]); nothing kept borrows them.

use std::cell::{Cell, OnceCell, RefCell};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::sync::Arc;

use gimli::Section;
use profiler_elf::{ElfFile, SHF_COMPRESSED, SHT_NOBITS};

use crate::filemap::Backing;

/// `ch_type` of zlib-compressed sections (`ELFCOMPRESS_ZLIB`).
const ELFCOMPRESS_ZLIB: u32 = 1;
/// `ch_type` of zstd-compressed sections (`ELFCOMPRESS_ZSTD`).
const ELFCOMPRESS_ZSTD: u32 = 2;
/// Size of `Elf64_Chdr`.
const CHDR_SIZE: usize = 24;
/// Largest section we decompress (a guard against decompression bombs).
const MAX_DECOMPRESSED_SECTION: u64 = 512 << 20;
/// Largest ratio of a section's declared decompressed size to its
/// compressed size that we accept (DWARF compresses 3-10x; zstd's RLE
/// blocks let a few KB claim gigabytes).
const MAX_COMPRESSION_RATIO: u64 = 64;
/// Sections this small are accepted whatever their ratio.
const SMALL_SECTION: u64 = 64 << 10;
/// The sections the index reads; `gimli::Dwarf::load` asks for others
/// too (locations, macros, type units, name indexes), which are left
/// empty: neither decompressed nor counted against the limit.
const READ_SECTIONS: [gimli::SectionId; 10] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
];

/// One file whose DWARF sections are read: its headers, and the bytes
/// uncompressed sections are served from (a map the symbolizer can
/// release, or the `ElfFile`'s own bytes).
pub(crate) struct DwarfFile {
    pub elf: Arc<ElfFile>,
    pub bytes: Backing,
}

/// The bytes of one DWARF section: cheap to clone, and they stay where
/// they are while any clone lives.
#[derive(Clone)]
pub(crate) struct SectionBytes {
    backing: Backing,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SectionBytes({} bytes)", self.len)
    }
}

impl Deref for SectionBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.backing.data().get(self.start..self.start + self.len).unwrap_or(&[])
    }
}

/// The reader every DWARF section is parsed with: a bare slice (16
/// bytes).
///
/// The slices are `'static` only in name: they borrow from the
/// [`SectionBytes`] that [`Dwarf`] keeps next to its sections; what the
/// index keeps is copied out of them (file names) or refers to them by
/// offset (names, [`NameRef`]).
pub(crate) type Reader = gimli::EndianSlice<'static, gimli::LittleEndian>;

/// A reader over `bytes`, to be kept only as long as `bytes` (or a clone).
fn reader(bytes: &SectionBytes) -> Reader {
    let slice: &[u8] = bytes;
    // SAFETY: the bytes live in a map or heap buffer behind an `Arc`
    // (`FileMap`, `ElfFile`, decompressed `Vec`) that never changes them;
    // moving or cloning a `SectionBytes` moves only the `Arc`, never the
    // bytes. The `Dwarf` that parses with this reader keeps a clone of
    // `bytes` in `owners` and drops its sections first (field order);
    // its tables hold copies (file names) or offsets (names), never a
    // reader or pointer, and the units parsed for a lookup or an inline
    // tree are dropped before it returns.
    let slice: &'static [u8] = unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) };
    gimli::EndianSlice::new(slice, gimli::LittleEndian)
}

/// One frame as DWARF names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DwarfFrame {
    /// Raw (possibly mangled) function name.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: u32,
}

/// Most frames one address yields (a malformed tree could claim more).
const MAX_FRAMES: usize = 128;
/// Deepest inlined call kept (deeper ones are dropped).
const MAX_INLINE_DEPTH: usize = 128;
// Inline depths are kept in 8 bits (`InlinedAddress::call`).
const _: () = assert!(MAX_INLINE_DEPTH < 256);
/// Most `DW_AT_abstract_origin` / `DW_AT_specification` links followed
/// for a name.
const MAX_NAME_LINKS: usize = 16;
/// Most units kept parsed at once while names are resolved across units.
const MAX_REF_UNITS: usize = 32;
/// "None" in the compact tables' `u32` fields.
const NONE: u32 = u32::MAX;

/// An address range of one unit, as the lookup searches them: sorted by
/// `end`, each with the lowest `begin` of itself and all after it.
struct UnitRange {
    begin: u64,
    end: u64,
    min_begin: u64,
    unit: u32,
}

/// A unit as lookups left it.
enum Slot {
    /// Not parsed (yet, or again since it was dropped).
    Unparsed,
    /// Malformed, or its tables alone would hold more than the parsed
    /// units may: lookups in it find nothing (the symbols name the
    /// address), and it is not parsed again.
    Broken,
    Parsed(Box<ParsedUnit>),
}

impl Slot {
    fn parsed(&self) -> Option<&ParsedUnit> {
        match self {
            Slot::Parsed(p) => Some(p),
            _ => None,
        }
    }
}

/// A unit once parsed by a lookup: its line table and functions in
/// compact form (no reader, no abbreviation, no gimli structure).
struct ParsedUnit {
    /// `None`: the unit has no line program.
    lines: Option<Lines>,
    functions: Functions,
    /// The names that cannot be referenced in the sections (none, unless
    /// a section is over 1 TiB), by [`NameRef`] index.
    names: Box<[Box<str>]>,
    /// The lookup count when it was last used.
    used: u64,
}

/// Why parsing stopped.
#[derive(Debug)]
enum Stop {
    /// The DWARF is malformed.
    Malformed,
    /// What it parsed would hold more than its [`Allowance`].
    OverAllowance,
}

impl From<gimli::Error> for Stop {
    fn from(_: gimli::Error) -> Stop {
        Stop::Malformed
    }
}

/// `.debug_info` bytes read (by the index pass, or by the units lookups
/// parse) between two releases of the mapped sections' pages, which
/// bounds the file pages a load or a burst of lookups keeps resident.
const RELEASE_EVERY: u64 = 1 << 20;

/// Calls `f` with each unit header of `dwarf`, calling `release` after
/// each [`RELEASE_EVERY`] bytes of `.debug_info`: a header a unit is a
/// page each of a large file's section.
fn for_each_header(
    dwarf: &gimli::Dwarf<Reader>,
    release: &mut dyn FnMut(),
    mut f: impl FnMut(&gimli::UnitHeader<Reader>),
) {
    let mut released_at = 0;
    let mut headers = dwarf.units();
    while let Ok(Some(h)) = headers.next() {
        f(&h);
        let offset = h.debug_info_offset().map_or(0, |o| o.0 as u64);
        if offset.saturating_sub(released_at) >= RELEASE_EVERY {
            release();
            released_at = offset;
        }
    }
}

/// What [`Allowance::read`] takes for an entry read and not kept.
const READ_COST: usize = 1;

/// Heap a parse may take: entries of its tables are taken from it
/// before they are kept (as the tables' lengths count them), so that
/// entries sharing one range list, line program or string cannot
/// multiply it past the file's DWARF limit; entries read and not kept
/// take [`READ_COST`] each, which bounds the work of a parse too.
struct Allowance {
    limit: u64,
    /// Taken so far (over `limit` once it refused).
    taken: u64,
}

impl Allowance {
    fn new(limit: u64) -> Allowance {
        Allowance { limit, taken: 0 }
    }

    fn take(&mut self, bytes: usize) -> Result<(), Stop> {
        self.taken = self.taken.saturating_add(bytes as u64);
        if self.taken > self.limit {
            return Err(Stop::OverAllowance);
        }
        Ok(())
    }

    /// Takes [`READ_COST`] for an entry read and not kept (an empty
    /// range, a line row between sequences, a line program header's
    /// entry): entries sharing one long list of those would otherwise
    /// cost CPU without bound while keeping nothing.
    fn read(&mut self, entries: usize) -> Result<(), Stop> {
        self.take(entries.saturating_mul(READ_COST))
    }

    /// Gives back what was taken for entries then not kept.
    fn give_back(&mut self, bytes: usize) {
        self.taken = self.taken.saturating_sub(bytes as u64);
    }
}

/// A function name as a reference into the sections, resolved only when
/// a lookup returns it: the index in [`Dwarf::owners`] of the section
/// holding it (high 8 bits: `.debug_str`, `.debug_line_str`, an inline
/// string in `.debug_info`, the supplementary file's, whichever form led
/// there), its offset there (40 bits) and its length (16 bits); or, with
/// [`SIDE_NAME`] as the section, the index in [`ParsedUnit::names`];
/// [`NO_NAME`] for none.
type NameRef = u64;
/// No name.
const NO_NAME: NameRef = u64::MAX;
/// The "section" of names kept in [`ParsedUnit::names`].
const SIDE_NAME: u64 = 0xff;
/// Longest name kept (longer ones are cut): however long the string an
/// entry names, only this much of it is read, and each name fits a
/// [`NameRef`] (never copied for each entry naming it).
const MAX_NAME_LEN: usize = 4 << 10;
// A `NameRef` holds lengths in 16 bits.
const _: () = assert!(MAX_NAME_LEN <= 0xffff);
/// Longest file name kept (longer ones are cut, as is each part read).
const MAX_PATH_LEN: usize = 4 << 10;
/// Largest section offset a [`NameRef`] holds.
const MAX_NAME_OFFSET: usize = (1 << 40) - 1;

/// A unit's line table.
struct Lines {
    /// Rendered file names by file index (only those rows name, and
    /// those the calls of the inline trees parsed so far name).
    files: RefCell<Vec<Option<Box<str>>>>,
    /// Sequences sorted by start.
    sequences: Box<[Sequence]>,
    /// All sequences' rows, each sequence's sorted by address.
    rows: Box<[Row]>,
    /// The file of the rows: (first row, file index) where it changes.
    file_runs: Box<[(u32, u32)]>,
}

struct Sequence {
    start: u64,
    end: u64,
    first_row: u32,
    rows: u32,
}

/// A line row: its address (as an offset from its sequence's start)
/// and line; its file is in [`Lines::file_runs`].
struct Row {
    offset: u32,
    line: u32,
}

/// A unit's functions (`DW_TAG_subprogram` entries with addresses).
struct Functions {
    /// Sorted by begin.
    addresses: Box<[FunctionAddress]>,
    functions: Box<[Function]>,
}

struct FunctionAddress {
    begin: u64,
    end: u64,
    function: u32,
}

struct Function {
    name: NameRef,
    /// Offset of its `DW_TAG_subprogram` entry in the unit.
    offset: u32,
    /// Its entry or inline tree is malformed, or the tree would not fit
    /// with the unit in what parsed units may hold: lookups in it find
    /// nothing.
    broken: Cell<bool>,
    /// Its inline tree, parsed on the first lookup in the function.
    tree: OnceCell<Box<InlineTree>>,
}

/// The inlined calls of one function.
struct InlineTree {
    inlined: Box<[Inlined]>,
    /// Sorted by (depth, begin).
    inlined_addresses: Box<[InlinedAddress]>,
    /// The calls' names that cannot be referenced (see [`NameRef`]).
    names: Box<[Box<str>]>,
}

struct Inlined {
    name: NameRef,
    call_file: u32,
    call_line: u32,
}

/// An address range of an inlined call, `begin..begin + len` (a range
/// over 4 GiB, which no compiler emits, is left out), with the call's
/// depth (high 8 bits of `call`) and index in [`InlineTree::inlined`] (low
/// 24 bits).
struct InlinedAddress {
    begin: u64,
    len: u32,
    call: u32,
}

/// Most inlined calls kept for one function (the index's 24 bits).
const MAX_INLINED: usize = 1 << 24;

impl InlinedAddress {
    fn end(&self) -> u64 {
        self.begin + u64::from(self.len)
    }

    fn depth(&self) -> u32 {
        self.call >> 24
    }

    fn inlined(&self) -> usize {
        (self.call & 0xff_ffff) as usize
    }
}

/// The DWARF of one file, ready for lookups.
pub(crate) struct Dwarf {
    /// Declared first: dropped before `owners`, whose bytes it borrows.
    sections: gimli::Dwarf<Reader>,
    /// `.debug_info` offsets of the file's units (type units left out),
    /// ascending.
    units: Box<[u64]>,
    /// `.debug_info` offsets of the supplementary file's units.
    sup_units: Box<[u64]>,
    /// The units' address ranges.
    ranges: Box<[UnitRange]>,
    /// The units as lookups left them, by index in `units`.
    parsed: RefCell<Box<[Slot]>>,
    /// Lookups so far (the clock of `parsed`).
    lookups: Cell<u64>,
    /// Most heap the parsed units may hold: beyond, the least recently
    /// used are dropped (parsed again if looked up again), and a unit
    /// that alone would hold more is not kept ([`Slot::Broken`]). What
    /// is left of `max_bytes` after the sections and the index, so that
    /// a file's DWARF never holds more than it was admitted with.
    max_parsed_bytes: u64,
    /// Parsed units dropped for `max_parsed_bytes`.
    units_dropped: Cell<u64>,
    /// The sections' bytes (see [`Reader`]).
    owners: Vec<SectionBytes>,
    /// Where each of `owners`' bytes are: (address, length), to turn a
    /// name read from them into a [`NameRef`].
    spans: Box<[(usize, usize)]>,
    /// Bytes decompressed into memory.
    owned_bytes: u64,
    /// Heap of the unit index (`units`, `sup_units`, `ranges`, `parsed`).
    index_bytes: u64,
    /// Heap of the parsed units.
    lazy_bytes: Cell<u64>,
    /// Units parsed, and the sums over them of line program bytes, file
    /// names and `.debug_info` bytes (for the `memory_breakdown` example).
    parsed_sizes: Cell<(u64, [u64; 3])>,
    /// `.debug_info` bytes of the units parsed since the pages were last
    /// given back ([`RELEASE_EVERY`]).
    info_since_release: Cell<u64>,
}

/// Why the DWARF of a file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DwarfError {
    /// The file has no `.debug_info`.
    #[error("no .debug_info")]
    Missing,
    /// A compressed section uses another format than zlib or zstd.
    #[error("{section}: unsupported compression type {kind}")]
    UnsupportedCompression {
        /// Section name.
        section: String,
        /// `ch_type`.
        kind: u32,
    },
    /// A compressed section does not decompress.
    #[error("{section}: corrupt compressed data")]
    Decompress {
        /// Section name.
        section: String,
    },
    /// The units could not be parsed.
    #[error("malformed DWARF")]
    Parse(#[source] gimli::Error),
    /// Loading would take more heap than allowed.
    #[error("about {estimated} bytes once loaded, over the {limit} bytes allowed")]
    TooLarge {
        /// Estimated heap: decompressed sections and the unit index (when
        /// the index outgrew the limit as it was built: what it had
        /// reached).
        estimated: u64,
        /// The limit ([`crate::DebugConfig::max_dwarf_bytes`]).
        limit: u64,
    },
}

impl Dwarf {
    /// Indexes `file`'s DWARF: one pass over the unit headers, reading
    /// each unit's root entry (its abbreviations parsed for that and
    /// dropped) for its address ranges, leaving line tables and
    /// functions to be parsed on the first lookup in each unit; refuses
    /// (before parsing, or as soon as the index outgrows it) when the
    /// decompressed sections and the index would take more than
    /// `max_bytes` of heap.
    ///
    /// `sup` is the supplementary file `.gnu_debugaltlink` names (DWARF
    /// shared between files by `dwz`), when found.
    pub(crate) fn load(file: &DwarfFile, sup: Option<&DwarfFile>, max_bytes: u64) -> Result<Dwarf, DwarfError> {
        let has_info =
            file.elf.sections().iter().any(|s| {
                (s.name == ".debug_info" || s.name == ".zdebug_info") && s.size > 0 && s.sh_type != SHT_NOBITS
            });
        if !has_info {
            return Err(DwarfError::Missing);
        }
        // Compressed sections say how large they become: refuse before
        // decompressing anything when that alone is over the limit.
        let inflated = inflated_size(&file.elf) + sup.map_or(0, |s| inflated_size(&s.elf));
        if inflated > max_bytes {
            return Err(DwarfError::TooLarge { estimated: inflated, limit: max_bytes });
        }
        let mut owned_bytes = 0u64;
        let mut owners = Vec::new();
        let mut load = |f: &DwarfFile, id: gimli::SectionId| -> Result<Reader, DwarfError> {
            let bytes = if READ_SECTIONS.contains(&id) { section_bytes(f, id.name())? } else { empty_section() };
            if let Backing::Owned(v) = &bytes.backing {
                owned_bytes += v.capacity() as u64;
            }
            let r = reader(&bytes);
            owners.push(bytes);
            Ok(r)
        };
        let mut sections = gimli::Dwarf::load(|id| load(file, id))?;
        if let Some(sup) = sup {
            sections.load_sup(|id| load(sup, id))?;
        }
        let estimated = estimate_index(&sections, &mut || release_maps(&owners));
        if owned_bytes + estimated > max_bytes {
            return Err(DwarfError::TooLarge { estimated: owned_bytes + estimated, limit: max_bytes });
        }
        let mut sup_units = Vec::new();
        if let Some(s) = sections.sup() {
            let mut headers = s.units();
            while let Ok(Some(h)) = headers.next() {
                if let Some(offset) = h.debug_info_offset() {
                    sup_units.push(offset.0 as u64);
                }
            }
        }
        let sup_units = sup_units.into_boxed_slice();
        let spans: Box<[(usize, usize)]> = owners
            .iter()
            .map(|o| {
                let bytes: &[u8] = o;
                (bytes.as_ptr() as usize, bytes.len())
            })
            .collect();
        // The estimate cannot see ranges that many units share: the index
        // stops once it would take more than what is left.
        let fixed = owned_bytes + (sup_units.len() * 8 + spans.len() * size_of::<(usize, usize)>()) as u64;
        let mut allowance = Allowance::new(max_bytes.saturating_sub(fixed));
        let (units, ranges) = index_units(&sections, &mut allowance, &mut || release_maps(&owners))
            .map_err(|_| DwarfError::TooLarge { estimated: fixed + allowance.taken, limit: max_bytes })?;
        let units = units.into_boxed_slice();
        let parsed: Box<[Slot]> = (0..units.len()).map(|_| Slot::Unparsed).collect();
        let index_bytes = (units.len() * 8
            + sup_units.len() * 8
            + parsed.len() * size_of::<Slot>()
            + spans.len() * size_of::<(usize, usize)>()
            + ranges.len() * size_of::<UnitRange>()) as u64;
        if owned_bytes + index_bytes > max_bytes {
            return Err(DwarfError::TooLarge { estimated: owned_bytes + index_bytes, limit: max_bytes });
        }
        Ok(Dwarf {
            sections,
            units,
            sup_units,
            ranges,
            parsed: RefCell::new(parsed),
            lookups: Cell::new(0),
            max_parsed_bytes: max_bytes - owned_bytes - index_bytes,
            units_dropped: Cell::new(0),
            owners,
            spans,
            owned_bytes,
            index_bytes,
            lazy_bytes: Cell::new(0),
            parsed_sizes: Cell::new((0, [0; 3])),
            info_since_release: Cell::new(0),
        })
    }

    /// Accounted heap bytes: decompressed sections, the unit index, the
    /// units parsed by lookups so far.
    pub(crate) fn cost(&self) -> u64 {
        self.owned_bytes + self.index_bytes + self.lazy_bytes.get()
    }

    /// Drops the least recently used parsed units, `keep` aside, until
    /// those left fit in [`Self::max_parsed_bytes`] (`keep` alone does:
    /// a unit that would not is never kept).
    fn drop_old_units(&self, parsed: &mut [Slot], keep: usize) {
        while self.lazy_bytes.get() > self.max_parsed_bytes {
            let oldest = parsed
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != keep)
                .filter_map(|(i, s)| s.parsed().map(|p| (p.used, i)))
                .min();
            let Some((_, i)) = oldest else {
                return;
            };
            if let Slot::Parsed(p) = std::mem::replace(&mut parsed[i], Slot::Unparsed) {
                self.lazy_bytes.set(self.lazy_bytes.get().saturating_sub(p.heap_bytes()));
                self.units_dropped.set(self.units_dropped.get() + 1);
            }
        }
    }

    /// Parsed units dropped to stay within the file's DWARF limit.
    pub(crate) fn units_dropped(&self) -> u64 {
        self.units_dropped.get()
    }

    /// Units parsed by lookups, and the sums of their line program
    /// bytes, file names and `.debug_info` bytes.
    pub(crate) fn parsed_units(&self) -> (u64, [u64; 3]) {
        self.parsed_sizes.get()
    }

    /// The heap of the unit index.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.index_bytes
    }

    /// The files (maps, `ElfFile`s) sections are read from, possibly
    /// repeated.
    pub(crate) fn file_backings(&self) -> impl Iterator<Item = &Backing> {
        self.owners.iter().map(|o| &o.backing).filter(|b| !matches!(b, Backing::Owned(_)))
    }

    /// Whether a file these sections come from shrank while mapped.
    pub(crate) fn changed(&self) -> bool {
        self.owners.iter().any(|o| o.backing.changed())
    }

    /// Gives the mapped pages read so far back (see
    /// [`crate::filemap::FileMap::release`]).
    pub(crate) fn release_pages(&self) {
        self.info_since_release.set(0);
        release_maps(&self.owners);
    }

    /// The frames of `vaddr`, innermost first; empty when no unit covers
    /// it or the DWARF there is broken.
    pub(crate) fn frames(&self, vaddr: u64) -> Vec<DwarfFrame> {
        let mut out = Vec::new();
        let Some(high) = vaddr.checked_add(1) else {
            return out;
        };
        // The units whose ranges hold `vaddr` (several when ranges
        // overlap), in the order of their ranges' ends: the first with a
        // function or a line there answers.
        let start = match self.ranges.binary_search_by_key(&vaddr, |r| r.end) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        let candidates = self.ranges[start..]
            .iter()
            .take_while(|r| high > r.min_begin)
            .filter(|r| vaddr < r.end && high > r.begin)
            .map(|r| r.unit as usize);
        let now = self.lookups.get() + 1;
        self.lookups.set(now);
        for unit in candidates {
            let mut parsed = self.parsed.borrow_mut();
            let Some(slot) = parsed.get_mut(unit) else {
                return out;
            };
            if let Slot::Unparsed = slot {
                *slot = match self.parse_unit(unit) {
                    Ok(p) => {
                        self.lazy_bytes.set(self.lazy_bytes.get() + p.heap_bytes());
                        Slot::Parsed(Box::new(p))
                    }
                    Err(_) => Slot::Broken,
                };
                self.drop_old_units(&mut parsed, unit);
            }
            let Slot::Parsed(p) = &mut parsed[unit] else {
                // Broken: no frames.
                return out;
            };
            p.used = now;
            let (found, added) = p.frames(self, self.units[unit], vaddr, &mut out);
            if added > 0 {
                // An inline tree parsed: charged like the unit.
                self.lazy_bytes.set(self.lazy_bytes.get() + added);
                self.drop_old_units(&mut parsed, unit);
            }
            match found {
                Found::Yes | Found::Broken => return out,
                Found::No => {}
            }
        }
        out
    }

    /// Parses unit `index` into its compact tables (abbreviations and
    /// line program header parsed for that, then dropped), within what
    /// the parsed units may hold.
    fn parse_unit(&self, index: usize) -> Result<ParsedUnit, Stop> {
        let mut allowance = Allowance::new(self.max_parsed_bytes);
        allowance.take(size_of::<ParsedUnit>())?;
        let offset = *self.units.get(index).ok_or(Stop::Malformed)?;
        let unit = parse_unit_at(&self.sections, offset)?;
        let unit = gimli::UnitRef::new(&self.sections, &unit);
        let (program, files) = unit.line_program.as_ref().map_or((0, 0), |p| {
            let h = p.header();
            (h.raw_program_buf().len() as u64, h.file_names().len() as u64)
        });
        let info = unit.header.length_including_self() as u64;
        let (n, [p, f, i]) = self.parsed_sizes.get();
        self.parsed_sizes.set((n + 1, [p + program, f + files, i + info]));
        // A burst of lookups (the first report of a big program) parses
        // many units before the `symbolize-pages` thread's next turn.
        self.info_since_release.set(self.info_since_release.get() + info);
        if self.info_since_release.get() >= RELEASE_EVERY {
            self.release_pages();
        }

        let lines = match unit.line_program.clone() {
            None => None,
            Some(program) => Some(parse_lines(unit, program, &mut allowance)?),
        };
        let mut names = Names { spans: &self.spans, side: Vec::new() };
        let mut refs = RefUnits::new(self, offset);
        let functions = parse_functions(unit, &mut names, &mut refs, &mut allowance)?;
        drop(refs);
        Ok(ParsedUnit { lines, functions, names: names.side.into_boxed_slice(), used: 0 })
    }
}

/// Gives back the pages read so far of the maps `owners` are read from.
fn release_maps(owners: &[SectionBytes]) {
    let mut seen = HashSet::new();
    for o in owners {
        if let Backing::Map(m) = &o.backing {
            if seen.insert(Arc::as_ptr(m)) {
                m.release();
            }
        }
    }
}

/// The unit at `.debug_info` offset `offset` of `dwarf`, parsed (its
/// abbreviations and line program header with it).
fn parse_unit_at(dwarf: &gimli::Dwarf<Reader>, offset: u64) -> Result<gimli::Unit<Reader>, gimli::Error> {
    let offset = usize::try_from(offset).map_err(|_| gimli::Error::OffsetOutOfBounds(0))?;
    let header = dwarf.unit_header(gimli::DebugInfoOffset(offset))?;
    dwarf.unit(header)
}

/// Whether a parsed unit answered a lookup.
enum Found {
    /// With frames (possibly one without a function).
    Yes,
    /// No function and no line there: the next unit covering the address
    /// may have them.
    No,
    /// The DWARF there is malformed: no frames.
    Broken,
}

impl ParsedUnit {
    /// Pushes the frames of `probe` onto `out`, innermost first.
    /// `unit` is the unit's `.debug_info` offset; with whether it
    /// answered, the heap added (an inline tree parsed).
    fn frames(&self, dwarf: &Dwarf, unit: u64, probe: u64, out: &mut Vec<DwarfFrame>) -> (Found, u64) {
        let functions = &self.functions;
        let function = functions.find(probe).and_then(|i| functions.functions.get(i));
        if function.is_some_and(|f| f.broken.get()) {
            return (Found::Broken, 0);
        }
        let lines = self.lines.as_ref();
        let Some(f) = function else {
            return (self.frames_in(dwarf, None, lines, probe, out), 0);
        };
        let mut added = 0;
        if f.tree.get().is_none() {
            // The unit with the tree (and the call files it renders)
            // within what the parsed units may hold.
            let before = self.heap_bytes();
            let mut allowance = Allowance::new(dwarf.max_parsed_bytes.saturating_sub(before));
            match dwarf.parse_inline_tree(unit, f.offset, lines, &mut allowance) {
                Ok(t) => drop(f.tree.set(Box::new(t))),
                Err(_) => f.broken.set(true),
            }
            added = self.heap_bytes().saturating_sub(before);
        }
        let Some(tree) = f.tree.get() else {
            return (Found::Broken, added);
        };
        (self.frames_in(dwarf, Some((f, tree)), lines, probe, out), added)
    }

    fn frames_in(
        &self,
        dwarf: &Dwarf,
        function: Option<(&Function, &InlineTree)>,
        lines: Option<&Lines>,
        probe: u64,
        out: &mut Vec<DwarfFrame>,
    ) -> Found {
        let location = lines.and_then(|l| l.find(probe));
        let file = |i: u32| lines.and_then(|l| l.file(i));
        let Some((function, tree)) = function else {
            let Some((f, line)) = location else {
                return Found::No;
            };
            out.push(DwarfFrame { function: None, file: file(f), line });
            return Found::Yes;
        };
        let (mut file_here, mut line_here) = match location {
            Some((f, l)) => (file(f), l),
            None => (None, 0),
        };
        let chain = tree.find_inlined(probe);
        for &i in chain.iter().rev() {
            if out.len() + 1 >= MAX_FRAMES {
                break;
            }
            let Some(inlined) = tree.inlined.get(i) else {
                break;
            };
            let name = dwarf.name(&tree.names, inlined.name);
            out.push(DwarfFrame { function: name, file: file_here, line: line_here });
            file_here = file(inlined.call_file);
            line_here = inlined.call_line;
        }
        out.push(DwarfFrame { function: dwarf.name(&self.names, function.name), file: file_here, line: line_here });
        Found::Yes
    }

    /// Heap held (from the tables' lengths: they are boxed slices).
    fn heap_bytes(&self) -> u64 {
        let mut bytes = size_of::<ParsedUnit>() as u64;
        bytes += names_bytes(&self.names);
        if let Some(l) = &self.lines {
            let files = l.files.borrow();
            bytes += (files.capacity() * size_of::<Option<Box<str>>>()) as u64;
            bytes += files.iter().map(|f| f.as_ref().map_or(0, |f| f.len() as u64)).sum::<u64>();
            bytes += (l.sequences.len() * size_of::<Sequence>()
                + l.rows.len() * size_of::<Row>()
                + l.file_runs.len() * 8) as u64;
        }
        let f = &self.functions;
        bytes += (f.addresses.len() * size_of::<FunctionAddress>()) as u64;
        bytes += f
            .functions
            .iter()
            .map(|f| size_of::<Function>() as u64 + f.tree.get().map_or(0, |t| t.heap_bytes()))
            .sum::<u64>();
        bytes
    }
}

/// Heap of a names side table.
fn names_bytes(names: &[Box<str>]) -> u64 {
    names.iter().map(|n| 16 + n.len() as u64).sum::<u64>()
}

impl InlineTree {
    /// Heap held, itself included.
    fn heap_bytes(&self) -> u64 {
        use std::mem::size_of;
        (size_of::<InlineTree>()
            + self.inlined.len() * size_of::<Inlined>()
            + self.inlined_addresses.len() * size_of::<InlinedAddress>()) as u64
            + names_bytes(&self.names)
    }
}

/// Where the range `begin..end` stands relative to `probe`, for binary
/// searches of sorted ranges: `Equal` when it holds `probe`.
fn range_order(begin: u64, end: u64, probe: u64) -> Ordering {
    if probe < begin {
        Ordering::Greater
    } else if probe >= end {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

impl Lines {
    /// The file index and line of `probe`.
    fn find(&self, probe: u64) -> Option<(u32, u32)> {
        let s = self.sequences.binary_search_by(|s| range_order(s.start, s.end, probe)).ok()?;
        let s = &self.sequences[s];
        let first = s.first_row as usize;
        let rows = self.rows.get(first..first + s.rows as usize)?;
        let i = match rows.binary_search_by(|r| (s.start + u64::from(r.offset)).cmp(&probe)) {
            Ok(i) => i,
            Err(0) => return None,
            Err(i) => i - 1,
        };
        let row = first + i;
        let run = self.file_runs.partition_point(|r| r.0 as usize <= row).checked_sub(1)?;
        Some((self.file_runs[run].1, rows[i].line))
    }

    fn file(&self, index: u32) -> Option<String> {
        self.files.borrow().get(index as usize)?.as_deref().map(str::to_owned)
    }
}

impl Functions {
    fn find(&self, probe: u64) -> Option<usize> {
        let i = self.addresses.binary_search_by(|a| range_order(a.begin, a.end, probe)).ok()?;
        Some(self.addresses[i].function as usize)
    }
}

impl InlineTree {
    /// The inlined calls holding `probe`, outermost first.
    fn find_inlined(&self, probe: u64) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut addresses = &self.inlined_addresses[..];
        while chain.len() < MAX_INLINE_DEPTH {
            let depth = chain.len() as u32;
            let found = addresses
                .binary_search_by(|a| a.depth().cmp(&depth).then_with(|| range_order(a.begin, a.end(), probe)));
            let Ok(i) = found else {
                break;
            };
            chain.push(addresses[i].inlined());
            addresses = &addresses[i + 1..];
        }
        chain
    }
}

/// Turns the names read while a unit is parsed into [`NameRef`]s.
struct Names<'a> {
    /// [`Dwarf::spans`].
    spans: &'a [(usize, usize)],
    /// Names that cannot be referenced (becoming [`ParsedUnit::names`]).
    side: Vec<Box<str>>,
}

impl Names<'_> {
    /// `name` as a [`NameRef`]; one copied into the side table is taken
    /// from `allowance`.
    fn add(&mut self, name: Option<Reader>, allowance: &mut Allowance) -> Result<NameRef, Stop> {
        let Some(name) = name else {
            return Ok(NO_NAME);
        };
        let name = cut(name, MAX_NAME_LEN);
        let bytes = name.slice();
        let (at, len) = (bytes.as_ptr() as usize, bytes.len());
        // The section holding the name (the readers are slices of
        // `Dwarf::owners`).
        let section = self
            .spans
            .iter()
            .position(|&(start, size)| at >= start && at - start <= size && len <= size - (at - start));
        if let Some(section) = section.filter(|&s| (s as u64) < SIDE_NAME) {
            let offset = at - self.spans[section].0;
            if offset <= MAX_NAME_OFFSET {
                return Ok((section as u64) << 56 | (offset as u64) << 16 | len as u64);
            }
        }
        let index = self.side.len() as u64;
        if index >= (1 << 56) - 1 {
            return Ok(NO_NAME);
        }
        allowance.take(size_of::<Box<str>>() + len)?;
        self.side.push(name.to_string_lossy().into());
        Ok(SIDE_NAME << 56 | index)
    }
}

impl Dwarf {
    /// The name `name` refers to, read from the sections (bounded by the
    /// length it was read with) or `unit`'s side table.
    fn name(&self, side: &[Box<str>], name: NameRef) -> Option<String> {
        if name == NO_NAME {
            return None;
        }
        let section = name >> 56;
        if section == SIDE_NAME {
            return side.get((name & ((1 << 56) - 1)) as usize).map(|n| n.to_string());
        }
        let offset = ((name >> 16) as usize) & MAX_NAME_OFFSET;
        let len = (name & 0xffff) as usize;
        let bytes = self.owners.get(section as usize)?.get(offset..offset + len)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Units parsed while one unit's names are resolved (references into
/// other units, `DW_FORM_ref_addr`, or into the supplementary file),
/// dropped with it.
struct RefUnits<'a> {
    dwarf: &'a Dwarf,
    /// `.debug_info` offset of the unit being parsed.
    current: u64,
    /// By (in the supplementary file, unit offset), with when each was
    /// last used.
    units: HashMap<(bool, u64), (gimli::Unit<Reader>, u64)>,
    /// Uses so far (the clock of `units`).
    uses: u64,
}

/// Which unit an entry reference leads to.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The unit being parsed.
    Current,
    /// Another unit (in the supplementary file, unit offset).
    Other(bool, u64),
}

impl<'a> RefUnits<'a> {
    fn new(dwarf: &'a Dwarf, current: u64) -> RefUnits<'a> {
        RefUnits { dwarf, current, units: HashMap::new(), uses: 0 }
    }

    /// The unit holding `.debug_info` offset `at` (of the supplementary
    /// file when `sup`), parsed, and the entry's offset in it.
    fn find(&mut self, sup: bool, at: usize) -> Result<(Place, gimli::UnitOffset), ()> {
        let list = if sup { &self.dwarf.sup_units } else { &self.dwarf.units };
        let i = match list.binary_search(&(at as u64)) {
            Ok(_) | Err(0) => return Err(()),
            Err(i) => i - 1,
        };
        let start = list[i];
        let place = if !sup && start == self.current { Place::Current } else { Place::Other(sup, start) };
        if let Place::Other(..) = place {
            self.uses += 1;
            if let Some((_, used)) = self.units.get_mut(&(sup, start)) {
                *used = self.uses;
            } else {
                let dwarf = if sup { self.dwarf.sections.sup().ok_or(())? } else { &self.dwarf.sections };
                let unit = parse_unit_at(dwarf, start).map_err(drop)?;
                if self.units.len() >= MAX_REF_UNITS {
                    // The least recently used goes (names often lead to
                    // the same few units again).
                    let oldest = self.units.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k);
                    if let Some(k) = oldest {
                        self.units.remove(&k);
                    }
                }
                self.units.insert((sup, start), (unit, self.uses));
            }
        }
        let header = match place {
            Place::Current => None,
            Place::Other(s, o) => Some(&self.units.get(&(s, o)).ok_or(())?.0.header),
        };
        let offset = gimli::DebugInfoOffset(at);
        let offset = match header {
            Some(h) => offset.to_unit_offset(h),
            None => {
                let h = self.dwarf.sections.unit_header(gimli::DebugInfoOffset(start as usize)).map_err(drop)?;
                offset.to_unit_offset(&h)
            }
        };
        Ok((place, offset.ok_or(())?))
    }

    /// The name an `DW_AT_abstract_origin` or `DW_AT_specification`
    /// value leads to, in `unit` (the unit being parsed): the target's
    /// linkage name, else its name, else its own origin's, at most
    /// [`MAX_NAME_LINKS`] links away. `Err` when a reference or an entry
    /// is malformed.
    fn name(
        &mut self,
        unit: gimli::UnitRef<'_, Reader>,
        value: gimli::AttributeValue<Reader>,
    ) -> Result<Option<Reader>, ()> {
        let mut value = value;
        let mut place = Place::Current;
        let mut sup = false;
        for _ in 0..MAX_NAME_LINKS {
            let offset = match value {
                gimli::AttributeValue::UnitRef(o) => o,
                gimli::AttributeValue::DebugInfoRef(o) => {
                    let (p, o) = self.find(sup, o.0)?;
                    place = p;
                    o
                }
                gimli::AttributeValue::DebugInfoRefSup(o) => {
                    if sup || self.dwarf.sections.sup().is_none() {
                        return Ok(None);
                    }
                    sup = true;
                    let (p, o) = self.find(true, o.0)?;
                    place = p;
                    o
                }
                _ => return Ok(None),
            };
            let target = match place {
                Place::Current => unit,
                Place::Other(s, o) => {
                    let dwarf = if s { self.dwarf.sections.sup().ok_or(())? } else { &self.dwarf.sections };
                    gimli::UnitRef::new(dwarf, &self.units.get(&(s, o)).ok_or(())?.0)
                }
            };
            let mut entries = target.entries_raw(Some(offset)).map_err(drop)?;
            let abbrev = entries.read_abbreviation().map_err(drop)?.ok_or(())?;
            let mut name = None;
            let mut next = None;
            for spec in abbrev.attributes() {
                let attr = entries.read_attribute(*spec).map_err(drop)?;
                match attr.name() {
                    gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                        if let Ok(n) = attr_str(target, attr.value(), MAX_NAME_LEN) {
                            return Ok(Some(n));
                        }
                    }
                    gimli::DW_AT_name => {
                        if let Ok(n) = attr_str(target, attr.value(), MAX_NAME_LEN) {
                            name = Some(n);
                        }
                    }
                    gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => next = Some(attr.value()),
                    _ => {}
                }
            }
            if name.is_some() {
                return Ok(name);
            }
            match next {
                Some(n) => value = n,
                None => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// An entry's address ranges, as its attributes give them.
#[derive(Default)]
struct RangeAttrs {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges: Option<gimli::RangeListsOffset>,
}

impl RangeAttrs {
    /// Takes `attr` if it is one of the range attributes.
    fn read(&mut self, unit: gimli::UnitRef<'_, Reader>, attr: &gimli::Attribute<Reader>) -> Result<(), gimli::Error> {
        match (attr.name(), attr.value()) {
            (gimli::DW_AT_low_pc, gimli::AttributeValue::Addr(a)) => self.low_pc = Some(a),
            (gimli::DW_AT_low_pc, gimli::AttributeValue::DebugAddrIndex(i)) => self.low_pc = Some(unit.address(i)?),
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Addr(a)) => self.high_pc = Some(a),
            (gimli::DW_AT_high_pc, gimli::AttributeValue::DebugAddrIndex(i)) => self.high_pc = Some(unit.address(i)?),
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Udata(s)) => self.size = Some(s),
            (gimli::DW_AT_ranges, v) => self.ranges = unit.attr_ranges_offset(v)?,
            _ => {}
        }
        Ok(())
    }

    /// Calls `f` with each non-empty range (stopping at its error);
    /// whether there was one. Empty ranges are read from `allowance`.
    fn for_each(
        &self,
        unit: gimli::UnitRef<'_, Reader>,
        allowance: &mut Allowance,
        mut f: impl FnMut(&mut Allowance, u64, u64) -> Result<(), Stop>,
    ) -> Result<bool, Stop> {
        let mut any = false;
        let mut add = |begin: u64, end: u64| {
            if begin < end {
                any = true;
                return f(allowance, begin, end);
            }
            allowance.read(1)
        };
        if let Some(offset) = self.ranges {
            let mut list = unit.ranges(offset)?;
            // Raw, so that the entries gimli's `next` would skip (empty,
            // tombstones, base addresses) are read from the allowance too.
            while let Some(raw) = list.next_raw()? {
                match list.convert_raw(raw)? {
                    Some(r) => add(r.begin, r.end)?,
                    None => add(0, 0)?,
                }
            }
        } else if let (Some(begin), Some(end)) = (self.low_pc, self.high_pc) {
            add(begin, end)?;
        } else if let (Some(begin), Some(size)) = (self.low_pc, self.size) {
            // A tombstone low_pc (-1) wraps around and is left out.
            add(begin, begin.wrapping_add(size))?;
        }
        Ok(any)
    }
}

/// The index of `dwarf`'s units: their `.debug_info` offsets (type units
/// left out) and their address ranges, from, in order of preference,
/// the root entry's `DW_AT_ranges`, `.debug_aranges`, the root's
/// `DW_AT_low_pc`/`DW_AT_high_pc`, and for a unit with none of these its
/// line program's sequences. Each unit's abbreviations are parsed for its
/// root entry ([`SharedAbbreviations`]), then dropped. Malformed units
/// are left out. Each unit (its
/// offset and [`Slot`]) and range is taken from `allowance`: many units
/// may share one long range list or line program.
fn index_units(
    dwarf: &gimli::Dwarf<Reader>,
    allowance: &mut Allowance,
    release: &mut dyn FnMut(),
) -> Result<(Vec<u64>, Box<[UnitRange]>), Stop> {
    // The `.debug_aranges` sets, by the unit they describe.
    let mut aranges = Vec::new();
    let mut sets = dwarf.debug_aranges.headers();
    while let Ok(Some(set)) = sets.next() {
        aranges.push((set.debug_info_offset().0 as u64, set.offset()));
    }
    aranges.sort_unstable_by_key(|a| a.0);

    let mut abbreviations = SharedAbbreviations::new(dwarf, release);
    let mut units = Vec::new();
    let mut ranges: Vec<UnitRange> = Vec::new();
    let mut headers = dwarf.units();
    let mut released_at = 0;
    while let Ok(Some(header)) = headers.next() {
        let Some(offset) = header.debug_info_offset() else {
            continue;
        };
        let offset = offset.0 as u64;
        // Every page of the sections the pass reads would otherwise stay
        // resident until it ends (~40 MB of a 58 MB Rust binary's DWARF).
        if offset.saturating_sub(released_at) >= RELEASE_EVERY {
            release();
            released_at = offset;
        }
        let Some(wants_ranges) = wants_ranges(&header) else {
            continue;
        };
        let Ok(id) = u32::try_from(units.len()) else {
            break;
        };
        allowance.take(8 + size_of::<Slot>())?;
        units.push(offset);
        if !wants_ranges {
            continue;
        }
        let unit =
            abbreviations.get(dwarf, &header).and_then(|a| gimli::Unit::new_with_abbreviations(dwarf, header, a));
        let Ok(unit) = unit else {
            continue;
        };
        let unit = gimli::UnitRef::new(dwarf, &unit);
        // Units may share one line program header, parsed with each.
        if let Some(program) = &unit.line_program {
            let header = program.header();
            allowance.read(header.file_names().len().saturating_add(header.include_directories().len()))?;
        }
        let before = ranges.len();
        let mut add = |allowance: &mut Allowance, begin: u64, end: u64| -> Result<(), Stop> {
            allowance.take(size_of::<UnitRange>())?;
            ranges.push(UnitRange { begin, end, min_begin: 0, unit: id });
            Ok(())
        };
        let result = match unit_ranges(unit, offset, &aranges, allowance, &mut add) {
            // No ranges declared: the line program's sequences, if it
            // runs without error.
            Ok(false) => match unit.line_program.clone() {
                Some(program) => line_sequences(program, allowance, &mut add),
                None => Ok(()),
            },
            other => other.map(drop),
        };
        match result {
            Ok(()) => {}
            Err(Stop::Malformed) => {
                allowance.give_back((ranges.len() - before) * size_of::<UnitRange>());
                ranges.truncate(before);
            }
            Err(Stop::OverAllowance) => return Err(Stop::OverAllowance),
        }
    }
    ranges.sort_unstable_by_key(|r| (r.end, r.unit));
    let mut min = u64::MAX;
    for r in ranges.iter_mut().rev() {
        min = min.min(r.begin);
        r.min_begin = min;
    }
    Ok((units, ranges.into_boxed_slice()))
}

/// Whether [`index_units`] reads the ranges of the unit `header` starts;
/// `None` for a type unit, which it leaves out.
fn wants_ranges(header: &gimli::UnitHeader<Reader>) -> Option<bool> {
    match header.type_() {
        gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => None,
        // Partial units are only referred to; they have no code.
        gimli::UnitType::Partial => Some(false),
        _ => Some(true),
    }
}

/// The abbreviation tables several units use (`dwz` and linkers that
/// merge units share them; GCC and Clang give each unit its own), parsed
/// once while the units are indexed, each dropped after its last unit.
struct SharedAbbreviations {
    /// By `.debug_abbrev` offset: the units still to use it, and the
    /// table once parsed.
    tables: HashMap<u64, (u32, Option<Arc<gimli::Abbreviations>>)>,
    /// The offsets of all units' tables, sorted: a shared table is read
    /// only up to the next one, so that the tables held at once never
    /// overlap (offsets into one table would each parse all its rest).
    offsets: Vec<u64>,
}

impl SharedAbbreviations {
    fn new(dwarf: &gimli::Dwarf<Reader>, release: &mut dyn FnMut()) -> SharedAbbreviations {
        let mut offsets = Vec::new();
        for_each_header(dwarf, release, |header| {
            if wants_ranges(header) == Some(true) {
                offsets.push(header.debug_abbrev_offset().0 as u64);
            }
        });
        offsets.sort_unstable();
        let mut tables = HashMap::new();
        for run in offsets.chunk_by(|a, b| a == b).filter(|run| run.len() > 1) {
            tables.insert(run[0], (u32::try_from(run.len()).unwrap_or(u32::MAX), None));
        }
        offsets.dedup();
        SharedAbbreviations { tables, offsets }
    }

    /// The abbreviations of the unit `header` starts.
    fn get(
        &mut self,
        dwarf: &gimli::Dwarf<Reader>,
        header: &gimli::UnitHeader<Reader>,
    ) -> Result<Arc<gimli::Abbreviations>, gimli::Error> {
        let offset = header.debug_abbrev_offset().0 as u64;
        let Some((left, table)) = self.tables.get_mut(&offset) else {
            return dwarf.abbreviations(header);
        };
        *left = left.saturating_sub(1);
        let parsed = match table {
            Some(t) => Ok(t.clone()),
            None => {
                let next = self.offsets.partition_point(|&o| o <= offset);
                let section = dwarf.debug_abbrev.reader().slice();
                let end = self.offsets.get(next).map_or(section.len(), |&o| o as usize);
                let upto = gimli::DebugAbbrev::new(section.get(..end).unwrap_or(section), gimli::LittleEndian);
                let parsed = upto.abbreviations(gimli::DebugAbbrevOffset(offset as usize)).map(Arc::new);
                if let Ok(t) = &parsed {
                    *table = Some(t.clone());
                }
                parsed
            }
        };
        if *left == 0 {
            self.tables.remove(&offset);
        }
        parsed
    }
}

/// Calls `f` with the address ranges of `unit`'s root entry
/// (`DW_AT_ranges`, else `.debug_aranges`, else low/high pc); whether
/// there was one.
fn unit_ranges(
    unit: gimli::UnitRef<'_, Reader>,
    offset: u64,
    aranges: &[(u64, gimli::DebugArangesOffset)],
    allowance: &mut Allowance,
    mut f: impl FnMut(&mut Allowance, u64, u64) -> Result<(), Stop>,
) -> Result<bool, Stop> {
    let mut entries = unit.entries_raw(None)?;
    let Some(abbrev) = entries.read_abbreviation()? else {
        return Err(Stop::Malformed);
    };
    let mut attrs = RangeAttrs::default();
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        attrs.read(unit, &attr)?;
    }
    if attrs.ranges.is_none() {
        let first = aranges.partition_point(|a| a.0 < offset);
        let mut found = false;
        for (_, set) in aranges[first..].iter().take_while(|a| a.0 == offset) {
            let set = unit.dwarf.debug_aranges.header(*set)?;
            let mut entries = set.entries();
            // Entries in error (an address overflow) are skipped; the
            // iterator ends after errors it cannot skip.
            while let Some(entry) = entries.next().transpose() {
                let Ok(entry) = entry else {
                    continue;
                };
                if entry.length() != 0 {
                    let r = entry.range();
                    f(allowance, r.begin, r.end)?;
                    found = true;
                }
            }
        }
        if found {
            return Ok(true);
        }
    }
    attrs.for_each(unit, allowance, f)
}

/// Calls `f` with the address range of each sequence of a line program
/// that [`parse_lines`] keeps, keeping no row and rendering no file.
fn line_sequences(
    program: gimli::IncompleteLineProgram<Reader>,
    allowance: &mut Allowance,
    mut f: impl FnMut(&mut Allowance, u64, u64) -> Result<(), Stop>,
) -> Result<(), Stop> {
    // The sequence being run: its first address, and whether each row's
    // address fits a 32-bit offset from it.
    let mut sequence: Option<(u64, bool)> = None;
    let mut rows = program.rows();
    while let Some((_, row)) = rows.next_row()? {
        // Units may share one line program: each row run is read.
        allowance.read(1)?;
        let address = row.address();
        if row.end_sequence() {
            if let Some((start, fits)) = sequence.take() {
                if start < address && fits {
                    f(allowance, start, address)?;
                }
            }
            continue;
        }
        match &mut sequence {
            None => sequence = Some((address, true)),
            Some((start, fits)) => *fits &= address >= *start && address - *start <= u64::from(u32::MAX),
        }
    }
    Ok(())
}

/// Runs `unit`'s line program into a compact table, taken from
/// `allowance` as it grows; `Err` when it is malformed or a file name
/// its rows use does not render.
fn parse_lines(
    unit: gimli::UnitRef<'_, Reader>,
    program: gimli::IncompleteLineProgram<Reader>,
    allowance: &mut Allowance,
) -> Result<Lines, Stop> {
    let mut sequences = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut file_runs: Vec<(u32, u32)> = Vec::new();
    // The rows of the sequence being run: address, file, line.
    let mut current: Vec<(u64, u32, u32)> = Vec::new();
    let mut it = program.rows();
    while let Some((_, row)) = it.next_row()? {
        if row.end_sequence() {
            if let Some(&(start, _, _)) = current.first() {
                let end = row.address();
                // Rows are kept as 32-bit offsets from the start: a
                // sequence going backwards or over 4 GiB (not produced
                // by compilers) is left out.
                let fits = current.iter().all(|r| r.0 >= start && r.0 - start <= u64::from(u32::MAX));
                if start < end && fits {
                    // Below 2^32: checked as rows were taken.
                    let first_row = rows.len() as u32;
                    for &(address, file, line) in &current {
                        if file_runs.last().is_none_or(|r| r.1 != file) {
                            allowance.take(size_of::<(u32, u32)>())?;
                            file_runs.push((rows.len() as u32, file));
                        }
                        rows.push(Row { offset: (address - start) as u32, line });
                    }
                    allowance.take(size_of::<Sequence>())?;
                    sequences.push(Sequence { start, end, first_row, rows: current.len() as u32 });
                } else {
                    allowance.give_back(current.len() * size_of::<Row>());
                }
            }
            current.clear();
            continue;
        }
        let address = row.address();
        let file = u32::try_from(row.file_index()).unwrap_or(NONE - 1);
        // Truncated as addr2line does.
        let line = row.line().map_or(0, |l| l.get() as u32);
        if let Some(last) = current.last_mut().filter(|l| l.0 == address) {
            *last = (address, file, line);
            continue;
        }
        // Taken as they come: the rows' cap is the allowance (their
        // indices are 32-bit).
        allowance.take(size_of::<Row>())?;
        if rows.len() + current.len() >= u32::MAX as usize {
            return Err(Stop::OverAllowance);
        }
        current.push((address, file, line));
    }
    // Rows of a sequence never ended are not kept.
    allowance.give_back(current.len() * size_of::<Row>());
    sequences.sort_unstable_by_key(|s| s.start);

    // Only the files rows name are rendered (those calls name are, with
    // their inline trees): a header may list many more, each naming one
    // long directory.
    let header = it.header();
    let mut used: Vec<u32> = file_runs.iter().map(|r| r.1).collect();
    used.sort_unstable();
    used.dedup();
    let mut files = Vec::new();
    for index in used {
        let Some(name) = file_name(unit, header, index)? else {
            continue;
        };
        let index = index as usize;
        allowance.take((index + 1 - files.len()) * size_of::<Option<Box<str>>>() + name.len())?;
        files.resize(index + 1, None);
        files[index] = Some(name);
    }
    files.shrink_to_fit();
    Ok(Lines {
        files: RefCell::new(files),
        sequences: sequences.into_boxed_slice(),
        rows: rows.into_boxed_slice(),
        file_runs: file_runs.into_boxed_slice(),
    })
}

/// The name of file `index` of `header`, rendered; `None` when it has no
/// such file.
fn file_name(
    unit: gimli::UnitRef<'_, Reader>,
    header: &gimli::LineProgramHeader<Reader>,
    index: u32,
) -> Result<Option<Box<str>>, gimli::Error> {
    match header.file(u64::from(index)) {
        Some(f) => Ok(Some(render_file(unit, f, header)?.into_boxed_str())),
        // DWARF 4 numbers files from 1: index 0 is then an empty name.
        None if index == 0 => Ok(Some(Box::from(""))),
        None => Ok(None),
    }
}

/// A file's full name: the unit's directory, the file's directory (when
/// not the unit's own, index 0) and its name, each absolute part
/// replacing what comes before it; cut to [`MAX_PATH_LEN`] bytes.
fn render_file(
    unit: gimli::UnitRef<'_, Reader>,
    file: &gimli::FileEntry<Reader>,
    header: &gimli::LineProgramHeader<Reader>,
) -> Result<String, gimli::Error> {
    #[cfg(test)]
    RENDERED.with(|n| n.set(n.get() + 1));
    let mut path = match unit.comp_dir {
        Some(dir) => cut(dir, MAX_PATH_LEN).to_string_lossy().into_owned(),
        None => String::new(),
    };
    if file.directory_index() != 0 {
        if let Some(dir) = file.directory(header) {
            join_path(&mut path, &attr_str(unit, dir, MAX_PATH_LEN)?.to_string_lossy());
        }
    }
    join_path(&mut path, &attr_str(unit, file.path_name(), MAX_PATH_LEN)?.to_string_lossy());
    let mut end = path.len().min(MAX_PATH_LEN);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    path.truncate(end);
    Ok(path)
}

#[cfg(test)]
thread_local! {
    /// File names rendered by this thread.
    static RENDERED: Cell<u64> = const { Cell::new(0) };
}

/// The first `max` bytes of `s`.
fn cut(s: Reader, max: usize) -> Reader {
    let bytes = s.slice();
    gimli::EndianSlice::new(&bytes[..bytes.len().min(max)], gimli::LittleEndian)
}

/// The string attribute value `value` names, cut to its first `max`
/// bytes: a string in the sections is searched only that far for its
/// end (gimli's `attr_string` reads it whole, again for each entry
/// naming it).
fn attr_str(
    unit: gimli::UnitRef<'_, Reader>,
    value: gimli::AttributeValue<Reader>,
    max: usize,
) -> Result<Reader, gimli::Error> {
    use gimli::AttributeValue as Value;
    let dwarf = unit.dwarf;
    let (section, offset) = match value {
        // Read with its entry.
        Value::String(s) => return Ok(cut(s, max)),
        Value::DebugStrRef(o) => (dwarf.debug_str.reader(), o.0),
        Value::DebugStrRefSup(o) => {
            (dwarf.sup().ok_or(gimli::Error::ExpectedStringAttributeValue)?.debug_str.reader(), o.0)
        }
        Value::DebugLineStrRef(o) => (dwarf.debug_line_str.reader(), o.0),
        Value::DebugStrOffsetsIndex(i) => (dwarf.debug_str.reader(), dwarf.string_offset(unit.unit, i)?.0),
        _ => return Err(gimli::Error::ExpectedStringAttributeValue),
    };
    let out_of_bounds = gimli::Error::OffsetOutOfBounds(offset as u64);
    let bytes = section.slice().get(offset..).ok_or(out_of_bounds)?;
    let len = match bytes.iter().take(max + 1).position(|&b| b == 0) {
        Some(len) => len,
        None if bytes.len() > max => max,
        // Unterminated.
        None => return Err(out_of_bounds),
    };
    Ok(gimli::EndianSlice::new(&bytes[..len], gimli::LittleEndian))
}

/// Appends `part` to `path` with a separator (`\` when `path` is a
/// Windows path), or replaces `path` when `part` is absolute.
fn join_path(path: &mut String, part: &str) {
    let unix_root = |p: &str| p.starts_with('/') || p.get(1..3) == Some(":/");
    let windows_root = |p: &str| p.starts_with('\\') || p.get(1..3) == Some(":\\");
    if unix_root(part) || windows_root(part) {
        *path = part.to_owned();
        return;
    }
    let separator = if windows_root(path) { '\\' } else { '/' };
    if !path.is_empty() && !path.ends_with(separator) {
        path.push(separator);
    }
    path.push_str(part);
}

/// The functions of `unit`: every `DW_TAG_subprogram` with addresses,
/// with its name, taken from `allowance` (functions may share one long
/// range list).
fn parse_functions(
    unit: gimli::UnitRef<'_, Reader>,
    names: &mut Names,
    refs: &mut RefUnits<'_>,
    allowance: &mut Allowance,
) -> Result<Functions, Stop> {
    let mut offsets = Vec::new();
    let mut addresses = Vec::new();
    let mut entries = unit.entries_raw(None)?;
    while !entries.is_empty() {
        let offset = entries.next_offset();
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        if abbrev.tag() != gimli::DW_TAG_subprogram {
            entries.skip_attributes(abbrev.attributes())?;
            continue;
        }
        let mut attrs = RangeAttrs::default();
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec)?;
            attrs.read(unit, &attr)?;
        }
        let function = u32::try_from(offsets.len()).map_err(|_| Stop::OverAllowance)?;
        let any = attrs.for_each(unit, allowance, |allowance, begin, end| {
            allowance.take(size_of::<FunctionAddress>())?;
            addresses.push(FunctionAddress { begin, end, function });
            Ok(())
        })?;
        if any {
            allowance.take(size_of::<Function>())?;
            offsets.push(offset);
        }
    }
    addresses.sort_unstable_by_key(|a| a.begin);
    let mut functions = Vec::with_capacity(offsets.len());
    for o in offsets {
        let offset = u32::try_from(o.0).ok();
        let name = match offset.map(|_| function_name(unit, o, names, refs, allowance)) {
            Some(Ok(name)) => Some(name),
            Some(Err(Stop::OverAllowance)) => return Err(Stop::OverAllowance),
            Some(Err(Stop::Malformed)) | None => None,
        };
        functions.push(Function {
            name: name.unwrap_or(NO_NAME),
            offset: offset.unwrap_or(0),
            broken: Cell::new(name.is_none()),
            tree: OnceCell::new(),
        });
    }
    Ok(Functions { addresses: addresses.into_boxed_slice(), functions: functions.into_boxed_slice() })
}

/// The name of the function at `offset`.
fn function_name(
    unit: gimli::UnitRef<'_, Reader>,
    offset: gimli::UnitOffset,
    names: &mut Names,
    refs: &mut RefUnits<'_>,
    allowance: &mut Allowance,
) -> Result<NameRef, Stop> {
    let mut entries = unit.entries_raw(Some(offset))?;
    let abbrev = entries.read_abbreviation()?.ok_or(Stop::Malformed)?;
    let mut name = None;
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        read_name(unit, &attr, &mut name, refs)?;
    }
    names.add(name, allowance)
}

impl Dwarf {
    /// The inline tree of the function at `offset` of the unit at
    /// `.debug_info` offset `unit` (parsed again for it, with its
    /// abbreviations and line program header, dropped afterwards),
    /// rendering the call files `lines` lacks, taken from `allowance`.
    fn parse_inline_tree(
        &self,
        unit: u64,
        offset: u32,
        lines: Option<&Lines>,
        allowance: &mut Allowance,
    ) -> Result<InlineTree, Stop> {
        allowance.take(size_of::<InlineTree>())?;
        let parsed = parse_unit_at(&self.sections, unit)?;
        let u = gimli::UnitRef::new(&self.sections, &parsed);
        let mut names = Names { spans: &self.spans, side: Vec::new() };
        let mut refs = RefUnits::new(self, unit);
        let offset = gimli::UnitOffset(offset as usize);
        let (inlined, addresses) = parse_inline_tree(u, offset, &mut names, &mut refs, allowance)?;
        drop(refs);
        if let (Some(lines), Some(program)) = (lines, &u.line_program) {
            let header = program.header();
            let mut files = lines.files.borrow_mut();
            // Each missing file once, however many calls name it.
            let mut missing: Vec<u32> = inlined
                .iter()
                .map(|c| c.call_file)
                .filter(|&i| !files.get(i as usize).is_some_and(Option::is_some))
                .collect();
            missing.sort_unstable();
            missing.dedup();
            for index in missing {
                // A file that does not render is left unnamed.
                if let Ok(Some(name)) = file_name(u, header, index) {
                    let index = index as usize;
                    let slots = (index + 1).saturating_sub(files.len());
                    allowance.take(slots * size_of::<Option<Box<str>>>() + name.len())?;
                    if slots > 0 {
                        // Exactly: the unit's heap counts the capacity.
                        files.reserve_exact(slots);
                        files.resize(index + 1, None);
                    }
                    files[index] = Some(name);
                }
            }
        }
        Ok(InlineTree {
            inlined: inlined.into_boxed_slice(),
            inlined_addresses: addresses.into_boxed_slice(),
            names: names.side.into_boxed_slice(),
        })
    }
}

/// The inlined calls of the function at `offset`, and their ranges
/// sorted by (depth, begin), taken from `allowance` (calls may share one
/// long range list).
fn parse_inline_tree(
    unit: gimli::UnitRef<'_, Reader>,
    offset: gimli::UnitOffset,
    names: &mut Names,
    refs: &mut RefUnits<'_>,
    allowance: &mut Allowance,
) -> Result<(Vec<Inlined>, Vec<InlinedAddress>), Stop> {
    let mut entries = unit.entries_raw(Some(offset))?;
    let depth = entries.next_depth();
    let abbrev = entries.read_abbreviation()?.ok_or(Stop::Malformed)?;
    entries.skip_attributes(abbrev.attributes())?;
    let mut inlined = Vec::new();
    let mut addresses = Vec::new();
    // Entry depths of the inlined calls the next entry may be inside.
    let mut open: Vec<isize> = Vec::new();
    loop {
        let next = entries.next_depth();
        if next <= depth {
            break;
        }
        while open.last().is_some_and(|&d| d >= next) {
            open.pop();
        }
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        match abbrev.tag() {
            gimli::DW_TAG_subprogram => {
                // A nested function: listed on its own, skipped here.
                entries.skip_attributes(abbrev.attributes())?;
                while entries.next_depth() > next {
                    if let Some(a) = entries.read_abbreviation()? {
                        entries.skip_attributes(a.attributes())?;
                    }
                }
            }
            gimli::DW_TAG_inlined_subroutine if open.len() < MAX_INLINE_DEPTH => {
                let mut attrs = RangeAttrs::default();
                let mut name = None;
                let (mut call_file, mut call_line) = (NONE, 0);
                for spec in abbrev.attributes() {
                    let attr = entries.read_attribute(*spec)?;
                    attrs.read(unit, &attr)?;
                    read_name(unit, &attr, &mut name, refs)?;
                    match (attr.name(), attr.value()) {
                        // DWARF 4 numbers files from 1.
                        (gimli::DW_AT_call_file, gimli::AttributeValue::FileIndex(f))
                            if f > 0 || unit.header.version() >= 5 =>
                        {
                            call_file = u32::try_from(f).unwrap_or(NONE - 1);
                        }
                        (gimli::DW_AT_call_line, _) => call_line = attr.udata_value().unwrap_or(0) as u32,
                        _ => {}
                    }
                }
                if inlined.len() >= MAX_INLINED {
                    return Err(Stop::OverAllowance);
                }
                // Below 2^24 and 2^7 (MAX_INLINE_DEPTH): they fit.
                let call = (open.len() as u32) << 24 | inlined.len() as u32;
                allowance.take(size_of::<Inlined>())?;
                let name = names.add(name, allowance)?;
                inlined.push(Inlined { name, call_file, call_line });
                attrs.for_each(unit, allowance, |allowance, begin, end| {
                    let Ok(len) = u32::try_from(end - begin) else {
                        return allowance.read(1);
                    };
                    allowance.take(size_of::<InlinedAddress>())?;
                    addresses.push(InlinedAddress { begin, len, call });
                    Ok(())
                })?;
                open.push(next);
            }
            _ => entries.skip_attributes(abbrev.attributes())?,
        }
    }
    addresses.sort_unstable_by(|a, b| a.depth().cmp(&b.depth()).then(a.begin.cmp(&b.begin)));
    Ok((inlined, addresses))
}

/// Takes `attr` into `name` when it names the entry: a linkage name
/// always, a name or the target of an origin or specification when
/// there is none yet.
fn read_name(
    unit: gimli::UnitRef<'_, Reader>,
    attr: &gimli::Attribute<Reader>,
    name: &mut Option<Reader>,
    refs: &mut RefUnits<'_>,
) -> Result<(), Stop> {
    match attr.name() {
        gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
            if let Ok(n) = attr_str(unit, attr.value(), MAX_NAME_LEN) {
                *name = Some(n);
            }
        }
        gimli::DW_AT_name if name.is_none() => *name = attr_str(unit, attr.value(), MAX_NAME_LEN).ok(),
        gimli::DW_AT_abstract_origin | gimli::DW_AT_specification if name.is_none() => {
            *name = refs.name(unit, attr.value()).map_err(|()| Stop::Malformed)?;
        }
        _ => {}
    }
    Ok(())
}

/// Capacity a `Vec` grown by `push` from empty reaches for `n` elements.
fn grown(n: u64) -> u64 {
    match n {
        0 => 0,
        1..=4 => 4,
        _ => n.next_power_of_two(),
    }
}

/// Heap of the unit index [`Dwarf::load`] builds for `dwarf`, estimated
/// before it is built from the unit headers and `.debug_aranges` (no
/// abbreviation parsed); allocates nothing.
pub(crate) fn estimate_index(dwarf: &gimli::Dwarf<Reader>, release: &mut dyn FnMut()) -> u64 {
    let mut count = |d: &gimli::Dwarf<Reader>| {
        let mut n = 0u64;
        for_each_header(d, release, |_| n += 1);
        n
    };
    let units = count(dwarf);
    let sup_units = dwarf.sup().map_or(0, &mut count);
    // One range per `.debug_aranges` entry (16 bytes each on 64-bit),
    // else a few per unit; the vector grows by doubling.
    let aranges = dwarf.debug_aranges.reader().len() as u64 / 16;
    let ranges = grown(aranges.max(units * 2)) * std::mem::size_of::<UnitRange>() as u64;
    // Offsets (growth included) and parsed-unit slots.
    grown(units) * 8 + units * size_of::<Slot>() as u64 + grown(sup_units) * 8 + ranges
}

/// Whether `name` is one of [`READ_SECTIONS`], or its legacy `.zdebug`
/// form.
fn is_read_section(name: &str) -> bool {
    let name = name.strip_prefix(".z").unwrap_or(name.strip_prefix('.').unwrap_or(name));
    READ_SECTIONS.iter().any(|id| id.name().strip_prefix('.') == Some(name))
}

/// Bytes the compressed DWARF sections of `elf` that the index reads
/// take once decompressed (as their headers say).
fn inflated_size(elf: &ElfFile) -> u64 {
    // Saturating: declared sizes are the file's, any u64.
    elf.sections()
        .iter()
        .filter(|s| s.sh_type != SHT_NOBITS && is_read_section(&s.name))
        .filter_map(|s| {
            let data = elf.section_data(s).ok()?;
            if s.name.starts_with(".debug_") && s.flags & SHF_COMPRESSED != 0 {
                Some(u64::from_le_bytes(data.get(8..16)?.try_into().ok()?))
            } else if s.name.starts_with(".zdebug_") && data.starts_with(b"ZLIB") {
                Some(u64::from_be_bytes(data.get(4..12)?.try_into().ok()?))
            } else {
                None
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// Whether `declared` bytes could come out of `compressed` bytes: under
/// [`MAX_DECOMPRESSED_SECTION`] and [`MAX_COMPRESSION_RATIO`] times the
/// input. Checked before anything is allocated for the output.
fn plausible_size(declared: u64, compressed: usize) -> bool {
    declared <= MAX_DECOMPRESSED_SECTION
        && declared <= (compressed as u64).saturating_mul(MAX_COMPRESSION_RATIO).max(SMALL_SECTION)
}

/// The bytes of section `name` (or its legacy `.zdebug` form),
/// decompressed when needed; empty when the file lacks it.
fn section_bytes(file: &DwarfFile, name: &str) -> Result<SectionBytes, DwarfError> {
    let elf = &file.elf;
    let section = elf.section_by_name(name).filter(|s| s.sh_type != SHT_NOBITS);
    let Some(section) = section else {
        // GNU's old convention: `.zdebug_info` = "ZLIB", big-endian u64
        // size, zlib stream.
        let zname = format!(".z{}", name.trim_start_matches('.'));
        let Some(z) = elf.section_by_name(&zname).filter(|s| s.sh_type != SHT_NOBITS) else {
            return Ok(empty_section());
        };
        let data = elf.section_data(z).unwrap_or(&[]);
        let bad = || DwarfError::Decompress { section: zname.clone() };
        if data.len() < 12 || &data[..4] != b"ZLIB" {
            return Err(bad());
        }
        let size = u64::from_be_bytes(data[4..12].try_into().map_err(|_| bad())?);
        return inflate(&data[12..], size).map_err(|_| bad()).map(owned);
    };
    let Ok(data) = elf.section_data(section) else {
        // A section past the end of the file: treat it as absent.
        return Ok(empty_section());
    };
    if section.flags & SHF_COMPRESSED == 0 {
        let start = section.offset as usize;
        return Ok(SectionBytes { backing: file.bytes.clone(), start, len: data.len() });
    }
    let bad = || DwarfError::Decompress { section: name.to_owned() };
    if data.len() < CHDR_SIZE {
        return Err(bad());
    }
    let kind = u32::from_le_bytes(data[0..4].try_into().map_err(|_| bad())?);
    let size = u64::from_le_bytes(data[8..16].try_into().map_err(|_| bad())?);
    let body = &data[CHDR_SIZE..];
    match kind {
        ELFCOMPRESS_ZLIB => inflate(body, size).map_err(|_| bad()).map(owned),
        ELFCOMPRESS_ZSTD => unzstd(body, size).map_err(|_| bad()).map(owned),
        _ => Err(DwarfError::UnsupportedCompression { section: name.to_owned(), kind }),
    }
}

/// A section the file lacks (or that is not read).
fn empty_section() -> SectionBytes {
    SectionBytes { backing: Backing::Owned(Arc::new(Vec::new())), start: 0, len: 0 }
}

fn owned(v: Vec<u8>) -> SectionBytes {
    let len = v.len();
    SectionBytes { backing: Backing::Owned(Arc::new(v)), start: 0, len }
}

/// Inflates a zlib stream that must produce exactly `size` bytes, into a
/// buffer of exactly that size (growing a buffer would leave the
/// allocator holding up to twice the memory). The size is checked first
/// ([`plausible_size`]); the zeroed buffer is untouched (not resident)
/// beyond what the stream writes, and the stream cannot write past it.
fn inflate(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if !plausible_size(size, data.len()) {
        return Err(());
    }
    // One byte more than announced, to notice a stream that is longer.
    let mut out = vec![0u8; size as usize + 1];
    let n = miniz_oxide::inflate::decompress_slice_iter_to_slice(&mut out, std::iter::once(data), true, false)
        .map_err(|_| ())?;
    if n as u64 != size {
        return Err(());
    }
    out.truncate(n);
    Ok(out)
}

/// Decompresses zstd frames that must produce exactly `size` bytes.
fn unzstd(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if !plausible_size(size, data.len()) {
        return Err(());
    }
    let mut out = vec![0u8; size as usize + 1];
    let n = ruzstd::decoding::FrameDecoder::new().decode_all(data, &mut out).map_err(|_| ())?;
    if n as u64 != size {
        return Err(());
    }
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflate_checks_size() {
        // zlib stream of b"hello" (stored block).
        let z = [0x78, 0x01, 0x01, 0x05, 0x00, 0xfa, 0xff, b'h', b'e', b'l', b'l', b'o', 0x06, 0x2c, 0x02, 0x15];
        assert_eq!(inflate(&z, 5), Ok(b"hello".to_vec()));
        assert!(inflate(&z, 4).is_err());
        assert!(inflate(&z, 6).is_err());
        assert!(inflate(&z[..8], 5).is_err());
        assert!(inflate(&z, MAX_DECOMPRESSED_SECTION + 1).is_err());
        assert!(inflate(&z, SMALL_SECTION + 1).is_err(), "over the ratio");
    }

    #[test]
    fn unzstd_rejects_garbage() {
        assert!(unzstd(&[], 0).is_ok());
        assert!(unzstd(&[0x28, 0xb5, 0x2f, 0xfd, 0xff], 5).is_err());
        assert!(unzstd(b"not zstd at all", 5).is_err());
        assert!(unzstd(&[], MAX_DECOMPRESSED_SECTION + 1).is_err());
        assert!(unzstd(&[0; 1000], 1000 * MAX_COMPRESSION_RATIO + 1).is_err(), "over the ratio");
    }
}

#[cfg(test)]
#[path = "dwarf_diff_tests.rs"]
mod diff_tests;

#[cfg(test)]
#[path = "dwarf_limit_tests.rs"]
mod limit_tests;
