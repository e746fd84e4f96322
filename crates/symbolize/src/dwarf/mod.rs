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
//! references into the sections they are read from ([`NameRef`](names::NameRef):
//! section, offset, length), copied out only when a lookup returns them.
//!
//! The frames of an address are the inlined calls holding it, innermost
//! first, then the function: the innermost frame's file and line from
//! the line table, each outer one's from the call file and line of the
//! frame inside it. Lookups, file name rendering and the range fallback
//! follow `addr2line` 0.27 (which the symbolizer used before): a
//! differential test (`diff_tests.rs`) checks that every
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

mod index;
mod names;
mod sections;
mod unit;

pub(crate) use sections::DwarfFile;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use profiler_elf::SHT_NOBITS;

use index::{estimate_index, index_units, UnitRange};
use sections::{
    empty_section, inflated_size, reader, release_maps, section_bytes, Reader, SectionBytes, READ_SECTIONS,
};
use unit::{Found, ParsedUnit};

use crate::filemap::Backing;

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
/// "None" in the compact tables' `u32` fields.
const NONE: u32 = u32::MAX;

/// Lookups so far in the DWARF of every file: the clock of the parsed
/// units' last use. One clock for all files, so that the symbolizer's
/// budget gives up the units least recently used by any file first
/// (a file's hot unit outlives another's cold ones).
static UNIT_CLOCK: AtomicU64 = AtomicU64::new(0);

/// The clock of the parsed units' last use now: what a file's last
/// lookup is compared with when the budget gives up whole files among
/// units (`NativeSymbolizer`).
pub(crate) fn unit_clock() -> u64 {
    UNIT_CLOCK.load(Ordering::Relaxed)
}

/// A unit as lookups left it.
enum Slot {
    /// Not parsed (yet, or again since it was dropped for the file's
    /// limit).
    Unparsed,
    /// Given up for the symbolizer's budget ([`Dwarf::give_up_unit`]):
    /// parsing it again is work the budget caused.
    GivenUp,
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
    /// Most heap the parsed units may hold: beyond, the least recently
    /// used are dropped (parsed again if looked up again), and a unit
    /// that alone would hold more is not kept ([`Slot::Broken`]). What
    /// is left of `max_bytes` after the sections and the index, so that
    /// a file's DWARF never holds more than it was admitted with.
    max_parsed_bytes: u64,
    /// Parsed units dropped for `max_parsed_bytes`.
    units_dropped: Cell<u64>,
    /// Units parsed again after being given up for the budget.
    units_reparsed: Cell<u64>,
    /// The sections' bytes (see [`Reader`]).
    owners: Vec<SectionBytes>,
    /// Where each of `owners`' bytes are: (address, length), to turn a
    /// name read from them into a [`NameRef`](names::NameRef).
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
    /// given back ([`RELEASE_EVERY`](index::RELEASE_EVERY)).
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
            max_parsed_bytes: max_bytes - owned_bytes - index_bytes,
            units_dropped: Cell::new(0),
            units_reparsed: Cell::new(0),
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
                break;
            };
            if let Slot::Parsed(p) = std::mem::replace(&mut parsed[i], Slot::Unparsed) {
                self.lazy_bytes.set(self.lazy_bytes.get().saturating_sub(p.heap_bytes()));
                self.units_dropped.set(self.units_dropped.get() + 1);
            }
        }
    }

    /// Appends (last use, index) of every parsed unit but the one used
    /// last, for the symbolizer to give up the least recently used units
    /// of all files first ([`Self::give_up_unit`]).
    pub(crate) fn unit_uses(&self, out: &mut Vec<(u64, u32)>) {
        let parsed = self.parsed.borrow();
        let start = out.len();
        out.extend(parsed.iter().enumerate().filter_map(|(i, s)| s.parsed().map(|p| (p.used, i as u32))));
        // The newest stays: the lookup under way may be using it.
        if let Some(newest) = out[start..].iter().enumerate().max_by_key(|(_, u)| u.0).map(|(i, _)| start + i) {
            out.swap_remove(newest);
        }
    }

    /// Gives parsed unit `unit` up (parsed again when an address not in
    /// the address cache falls in it); the heap bytes freed.
    pub(crate) fn give_up_unit(&self, unit: u32) -> u64 {
        let mut parsed = self.parsed.borrow_mut();
        let Some(slot) = parsed.get_mut(unit as usize) else {
            return 0;
        };
        if !matches!(slot, Slot::Parsed(_)) {
            return 0;
        }
        let Slot::Parsed(p) = std::mem::replace(slot, Slot::GivenUp) else {
            return 0;
        };
        let freed = p.heap_bytes().min(self.lazy_bytes.get());
        self.lazy_bytes.set(self.lazy_bytes.get() - freed);
        freed
    }

    /// Parsed units dropped to stay within the file's DWARF limit.
    pub(crate) fn units_dropped(&self) -> u64 {
        self.units_dropped.get()
    }

    /// Units parsed again after being given up for the budget.
    pub(crate) fn units_reparsed(&self) -> u64 {
        self.units_reparsed.get()
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
        let now = UNIT_CLOCK.fetch_add(1, Ordering::Relaxed) + 1;
        for unit in candidates {
            let mut parsed = self.parsed.borrow_mut();
            let Some(slot) = parsed.get_mut(unit) else {
                return out;
            };
            if let Slot::Unparsed | Slot::GivenUp = slot {
                if let Slot::GivenUp = slot {
                    self.units_reparsed.set(self.units_reparsed.get() + 1);
                }
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
}

#[cfg(test)]
mod diff_tests;

#[cfg(test)]
mod limit_tests;
