//! DWARF line tables and inline frames through `addr2line`, reading the
//! sections straight from the mapped file (decompressing `SHF_COMPRESSED`
//! zlib and zstd sections and legacy `.zdebug_*` zlib sections into
//! memory), with an account of the heap it holds.
//!
//! # Memory
//!
//! `addr2line` parses, when a file is loaded, every unit's header, its
//! abbreviations and its line program header (the *unit index*), and
//! then, on the first lookup in a unit, the unit's line table and
//! function list, and on the first lookup in a function its inline
//! tree; all of it is kept. [`Dwarf::cost`] accounts for both parts:
//!
//! - the index is estimated before it is built ([`estimate_index`]),
//!   from the sizes of the structures gimli and addr2line build, counted
//!   in the raw sections (abbreviations per table, file names per line
//!   program, units, address ranges), so that DWARF too large for the
//!   budget is never parsed ([`DwarfError::TooLarge`]);
//! - a unit parsed by a lookup is charged on the first lookup in it: its
//!   line program is run and its entries walked (nothing kept) to count
//!   the rows, functions and inlined calls addr2line holds for it, all
//!   functions counted as looked up (the `memory_breakdown` example
//!   compares the account with the heap really held).
//!
//! Readers are bare slices (see [`Reader`]) and abbreviation tables
//! shared by several units are parsed once: on rustc output this halves
//! the index.

use std::cell::{Cell, RefCell};
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

/// Heap of one parsed unit besides `gimli::Unit` itself (addr2line's
/// `ResUnit`: offsets, language, the lazy line and function cells).
const RES_UNIT_EXTRA: u64 = 160;
/// Heap of one unit address range (addr2line's `UnitRange`).
const UNIT_RANGE: u64 = 32;
/// Margin on the estimated unit index: addr2line also parses, at load,
/// the line tables of units without address ranges (measured: 10% of
/// the index of a rustc-built binary), and small tables are rounded.
const INDEX_MARGIN_PERCENT: u64 = 125;
/// Heap of one line table row (addr2line's `LineRow`).
const LINE_ROW: u64 = 24;
/// Heap of one line sequence (addr2line's `LineSequence`).
const LINE_SEQUENCE: u64 = 32;
/// Heap of one rendered file name (a `String`: header and path).
const LINE_FILE: u64 = 24 + 96;
/// Heap of one function of a unit's function list (addr2line's
/// `LazyFunction` and one `FunctionAddress`), with room for split
/// functions (several ranges).
const FUNCTION: u64 = 72 + 24 * 3 / 2;
/// Heap of a parsed function besides its inlined calls (its two lists).
const FUNCTION_PARSED: u64 = 64;
/// Heap of one inlined call, parsed with its function (addr2line's
/// `InlinedFunction` and `InlinedFunctionAddress`), with room for
/// several ranges.
const INLINED: u64 = 48 + 32 * 3 / 2;

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
/// bytes), because gimli and addr2line keep a reader in every file entry,
/// attribute and function name they hold; a reader that carries its
/// owner (an `Arc`) would make all of those three times larger.
///
/// The slices are `'static` only in name: they borrow from the
/// [`SectionBytes`] that [`Dwarf`] keeps next to its context.
pub(crate) type Reader = gimli::EndianSlice<'static, gimli::LittleEndian>;

/// A reader over `bytes`, to be kept only as long as `bytes` (or a clone).
fn reader(bytes: &SectionBytes) -> Reader {
    let slice: &[u8] = bytes;
    // SAFETY: the bytes live in a map or heap buffer behind an `Arc`
    // (`FileMap`, `ElfFile`, decompressed `Vec`) that never changes them;
    // moving or cloning a `SectionBytes` moves only the `Arc`, never the
    // bytes. The `Dwarf` that parses with this reader keeps a clone of
    // `bytes` in `owners` and drops its context first (field order), and
    // nothing it returns borrows from the context.
    let slice: &'static [u8] = unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) };
    gimli::EndianSlice::new(slice, gimli::LittleEndian)
}

/// One frame as DWARF names it.
pub(crate) struct DwarfFrame {
    /// Raw (possibly mangled) function name.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: u32,
}

/// The DWARF of one file, ready for lookups.
pub(crate) struct Dwarf {
    /// Declared first: dropped before `owners`, whose bytes it borrows.
    context: addr2line::Context<Reader>,
    /// The sections' bytes (see [`Reader`]).
    owners: Vec<SectionBytes>,
    /// Bytes decompressed into memory.
    owned_bytes: u64,
    /// Estimated heap of the unit index.
    index_bytes: u64,
    /// Units (by offset) and functions (by offset, bit 63 set) parsed.
    parsed: RefCell<HashSet<u64>>,
    /// Estimated heap of what lookups parsed.
    lazy_bytes: Cell<u64>,
    /// Sums over the parsed units: line program bytes, file names,
    /// `.debug_info` bytes (for the `memory_breakdown` example).
    parsed_sizes: Cell<[u64; 3]>,
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
        /// Estimated heap: decompressed sections and the unit index.
        estimated: u64,
        /// The limit ([`crate::DebugConfig::max_dwarf_bytes`]).
        limit: u64,
    },
}

impl Dwarf {
    /// Parses the unit index of `file`'s DWARF (the costly part: every
    /// unit header, abbreviation table, line program header and address
    /// range), leaving line tables and function trees to be parsed on
    /// first lookup in each unit; refuses (before parsing) when the
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
            let bytes = section_bytes(f, id.name())?;
            if let Backing::Owned(v) = &bytes.backing {
                owned_bytes += v.capacity() as u64;
            }
            let r = reader(&bytes);
            owners.push(bytes);
            Ok(r)
        };
        let mut dwarf = gimli::Dwarf::load(|id| load(file, id))?;
        if let Some(sup) = sup {
            dwarf.load_sup(|id| load(sup, id))?;
        }
        let mut index_bytes = estimate_index(&dwarf);
        if let Some(sup) = dwarf.sup() {
            index_bytes += estimate_index(sup);
        }
        if owned_bytes + index_bytes > max_bytes {
            return Err(DwarfError::TooLarge { estimated: owned_bytes + index_bytes, limit: max_bytes });
        }
        // Tables shared by several units (common in rustc output) are
        // then parsed once instead of once per unit.
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let context = addr2line::Context::from_dwarf(dwarf).map_err(DwarfError::Parse)?;
        Ok(Dwarf {
            context,
            owners,
            owned_bytes,
            index_bytes,
            parsed: RefCell::new(HashSet::new()),
            lazy_bytes: Cell::new(0),
            parsed_sizes: Cell::new([0; 3]),
        })
    }

    /// Accounted heap bytes: decompressed sections, the unit index, the
    /// units parsed by lookups so far.
    pub(crate) fn cost(&self) -> u64 {
        self.owned_bytes + self.index_bytes + self.lazy_bytes.get() + self.parsed_set_bytes()
    }

    /// Units parsed by lookups, and the sums of their line program
    /// bytes, file names and `.debug_info` bytes.
    pub(crate) fn parsed_units(&self) -> (u64, [u64; 3]) {
        let units = self.parsed.borrow().iter().filter(|k| **k >> 63 == 0).count();
        (units as u64, self.parsed_sizes.get())
    }

    /// The estimated heap of the unit index.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.index_bytes
    }

    /// The set of parsed units and functions itself.
    fn parsed_set_bytes(&self) -> u64 {
        crate::heap::table_bytes(self.parsed.borrow().capacity(), 8)
    }

    /// The files (maps, `ElfFile`s) sections are read from, possibly
    /// repeated.
    pub(crate) fn file_backings(&self) -> impl Iterator<Item = &Backing> {
        self.owners.iter().map(|o| &o.backing).filter(|b| !matches!(b, Backing::Owned(_)))
    }

    /// Gives the mapped pages read so far back (see
    /// [`crate::filemap::FileMap::release`]).
    /// Whether a file these sections come from shrank while mapped.
    pub(crate) fn changed(&self) -> bool {
        self.owners.iter().any(|o| o.backing.changed())
    }

    pub(crate) fn release_pages(&self) {
        let mut seen = HashSet::new();
        for o in &self.owners {
            if let Backing::Map(m) = &o.backing {
                if seen.insert(Arc::as_ptr(m)) {
                    m.release();
                }
            }
        }
    }

    /// The frames of `vaddr`, innermost first; empty when no unit covers
    /// it or the DWARF there is broken.
    pub(crate) fn frames(&self, vaddr: u64) -> Vec<DwarfFrame> {
        let mut out = Vec::new();
        let Ok(mut iter) = self.context.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        // A malformed tree could in principle loop; inline depth is small.
        let mut function_die = None;
        while out.len() < 128 {
            let frame = match iter.next() {
                Ok(Some(f)) => f,
                Ok(None) | Err(_) => break,
            };
            // The last frame's entry is the containing function's.
            function_die = frame.dw_die_offset;
            let function = frame.function.as_ref().and_then(|f| f.raw_name().ok()).map(|n| n.into_owned());
            let (file, line) = match &frame.location {
                Some(l) => (l.file.map(str::to_owned), l.line.unwrap_or(0)),
                None => (None, 0),
            };
            out.push(DwarfFrame { function, file, line });
        }
        self.charge(vaddr, function_die);
        out
    }

    /// Charges what the lookup of `vaddr` parsed for the first time: the
    /// unit holding it (line table, function list) and the function
    /// (entry `function`) with its inline tree.
    fn charge(&self, vaddr: u64, function: Option<gimli::UnitOffset<usize>>) {
        // The unit was parsed by the lookup just made: finding it again
        // is binary searches, no parsing.
        let Some(unit) = self.context.find_dwarf_and_unit(vaddr).skip_all_loads() else {
            return;
        };
        let unit_key = unit.header.offset().0 as u64;
        let mut bytes = 0;
        if self.parsed.borrow_mut().insert(unit_key) {
            let (program, files) = unit.line_program.as_ref().map_or((0, 0), |p| {
                let h = p.header();
                (h.raw_program_buf().len() as u64, h.file_names().len() as u64)
            });
            let info = unit.header.length_including_self() as u64;
            let [p, f, i] = self.parsed_sizes.get();
            self.parsed_sizes.set([p + program, f + files, i + info]);
            bytes += unit_bytes(unit).unwrap_or(program * LINE_ROW + info * 4);
        }
        if let Some(die) = function {
            // Function entries are unit-relative: key by the section offset.
            let key = (unit_key + die.0 as u64) | 1 << 63;
            if self.parsed.borrow_mut().insert(key) {
                bytes += function_bytes(unit, die).unwrap_or(0);
            }
        }
        self.lazy_bytes.set(self.lazy_bytes.get() + bytes);
    }
}

/// Heap addr2line holds once a unit is parsed: its line table (rows,
/// sequences, file names) and its function list. Counted by running the
/// line program and walking the unit's entries without keeping anything.
fn unit_bytes(unit: gimli::UnitRef<'_, Reader>) -> Result<u64, gimli::Error> {
    let mut lines = 0;
    if let Some(program) = unit.line_program.clone() {
        let files = program.header().file_names().len() as u64;
        let (mut rows, mut sequences) = (0u64, 0u64);
        let mut it = program.rows();
        while let Some((_, row)) = it.next_row()? {
            rows += 1;
            if row.end_sequence() {
                sequences += 1;
            }
        }
        lines = rows * LINE_ROW + sequences * LINE_SEQUENCE + files * LINE_FILE;
    }
    let mut functions = 0u64;
    let mut entries = unit.entries_raw(None)?;
    while !entries.is_empty() {
        let Some(abbrev) = entries.read_abbreviation()? else {
            continue;
        };
        if abbrev.tag() == gimli::DW_TAG_subprogram {
            functions += 1;
        }
        entries.skip_attributes(abbrev.attributes())?;
    }
    Ok(lines + functions * FUNCTION)
}

/// Heap addr2line holds once the function at entry `die` is parsed: its
/// inlined calls (the entries below it).
fn function_bytes(unit: gimli::UnitRef<'_, Reader>, die: gimli::UnitOffset<usize>) -> Result<u64, gimli::Error> {
    let mut entries = unit.entries_raw(Some(die))?;
    let depth = entries.next_depth();
    let mut inlined = 0u64;
    loop {
        let Some(abbrev) = entries.read_abbreviation()? else {
            if entries.next_depth() <= depth {
                break;
            }
            continue;
        };
        if abbrev.tag() == gimli::DW_TAG_inlined_subroutine {
            inlined += 1;
        }
        entries.skip_attributes(abbrev.attributes())?;
        if entries.next_depth() <= depth || entries.is_empty() {
            break;
        }
    }
    Ok(FUNCTION_PARSED + inlined * INLINED)
}

/// Capacity a `Vec` grown by `push` from empty reaches for `n` elements.
fn grown(n: u64) -> u64 {
    match n {
        0 => 0,
        1..=4 => 4,
        _ => n.next_power_of_two(),
    }
}

/// Estimated heap of the unit index addr2line builds for `dwarf`
/// (`Context::from_dwarf`), with abbreviation tables shared by several
/// units counted once. Reads headers only; allocates little.
pub(crate) fn estimate_index(dwarf: &gimli::Dwarf<Reader>) -> u64 {
    use std::mem::size_of;
    let mut units = 0u64;
    let mut tables: HashMap<u64, ()> = HashMap::new();
    let mut headers = dwarf.units();
    while let Ok(Some(h)) = headers.next() {
        if matches!(h.type_(), gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. }) {
            continue;
        }
        units += 1;
        tables.insert(h.debug_abbrev_offset().0 as u64, ());
    }
    let unit_bytes = units * (size_of::<gimli::Unit<Reader>>() as u64 + RES_UNIT_EXTRA);
    let abbrev = dwarf.debug_abbrev.reader().slice();
    let abbrev_bytes: u64 =
        tables.keys().map(|&off| abbreviations_bytes(abbrev.get(off as usize..).unwrap_or(&[]))).sum();
    let line_bytes = line_headers_bytes(&dwarf.debug_line);
    // One range per `.debug_aranges` entry (16 bytes each on 64-bit),
    // else a few per unit.
    let aranges = dwarf.debug_aranges.reader().len() as u64 / 16;
    let ranges = grown(aranges.max(units * 2)) * UNIT_RANGE;
    (unit_bytes + abbrev_bytes + line_bytes + ranges) * INDEX_MARGIN_PERCENT / 100
}

/// Heap of one parsed abbreviation table (gimli's `Abbreviations`, in
/// an `Arc`), counted from its raw bytes.
fn abbreviations_bytes(mut raw: &[u8]) -> u64 {
    use std::mem::size_of;
    let abbrev = size_of::<gimli::Abbreviation>() as u64;
    let spec = size_of::<gimli::AttributeSpecification>() as u64;
    let mut vec_len = 0u64;
    let mut in_map = 0u64;
    let mut heap_attrs = 0u64;
    // Bounded: a table ends at code 0; a malformed one at the section end.
    while let Some(code) = uleb(&mut raw).filter(|&c| c != 0) {
        if uleb(&mut raw).is_none() || raw.is_empty() {
            break;
        }
        raw = &raw[1..]; // DW_CHILDREN_*
        let mut attrs = 0u64;
        loop {
            let (Some(name), Some(form)) = (uleb(&mut raw), uleb(&mut raw)) else {
                return 0;
            };
            if name == 0 && form == 0 {
                break;
            }
            if form == gimli::DW_FORM_implicit_const.0 as u64 && uleb(&mut raw).is_none() {
                return 0;
            }
            attrs += 1;
        }
        // More than 5 attributes spill to a Vec: 10, then doubling.
        if attrs > 5 {
            let mut capacity = 10;
            while capacity < attrs {
                capacity *= 2;
            }
            heap_attrs += capacity * spec;
        }
        if code == vec_len + 1 {
            vec_len += 1;
        } else {
            in_map += 1;
        }
    }
    // The `Arc` and the struct, the Vec of sequential codes, B-tree
    // nodes (about 1.5 slots per entry) for the others.
    64 + grown(vec_len) * abbrev + in_map * (abbrev + 8) * 3 / 2 + heap_attrs
}

/// Heap of the parsed line program headers (file names, directories,
/// entry formats) of every program in `.debug_line`.
fn line_headers_bytes(debug_line: &gimli::DebugLine<Reader>) -> u64 {
    use std::mem::size_of;
    let file = size_of::<gimli::FileEntry<Reader>>() as u64;
    let dir = size_of::<gimli::AttributeValue<Reader>>() as u64;
    let format = size_of::<gimli::FileEntryFormat>() as u64;
    let data = debug_line.reader().slice();
    let mut offset = 0usize;
    let mut total = 0u64;
    while offset + 4 <= data.len() {
        let len32 = u32::from_le_bytes(data[offset..offset + 4].try_into().unwrap_or([0; 4]));
        let (len, header) = if len32 == 0xffff_ffff {
            let Some(b) = data.get(offset + 4..offset + 12) else {
                break;
            };
            (u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize, 12)
        } else {
            (len32 as usize, 4)
        };
        if len == 0 {
            break;
        }
        if let Ok(p) = debug_line.program(gimli::DebugLineOffset(offset), 8, None, None) {
            let h = p.header();
            total += grown(h.file_names().len() as u64) * file
                + grown(h.include_directories().len() as u64) * dir
                + (h.file_name_entry_format().len() + h.directory_entry_format().len()) as u64 * format;
        }
        // `len` is the file's (a 64-bit length can be anything).
        let Some(next) = len.checked_add(header).and_then(|n| offset.checked_add(n)) else {
            break;
        };
        offset = next;
    }
    total
}

/// Reads an unsigned LEB128.
fn uleb(raw: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let (&b, rest) = raw.split_first()?;
        *raw = rest;
        if shift < 64 {
            value |= u64::from(b & 0x7f) << shift;
        }
        shift += 7;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
}

/// Bytes the compressed DWARF sections of `elf` take once decompressed
/// (as their headers say).
fn inflated_size(elf: &ElfFile) -> u64 {
    // Saturating: declared sizes are the file's, any u64.
    elf.sections()
        .iter()
        .filter(|s| s.sh_type != SHT_NOBITS)
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
    let empty = || SectionBytes { backing: Backing::Owned(Arc::new(Vec::new())), start: 0, len: 0 };
    let section = elf.section_by_name(name).filter(|s| s.sh_type != SHT_NOBITS);
    let Some(section) = section else {
        // GNU's old convention: `.zdebug_info` = "ZLIB", big-endian u64
        // size, zlib stream.
        let zname = format!(".z{}", name.trim_start_matches('.'));
        let Some(z) = elf.section_by_name(&zname).filter(|s| s.sh_type != SHT_NOBITS) else {
            return Ok(empty());
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
        return Ok(empty());
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

    /// Found by the `dwarf_symbolize` fuzz target: a 64-bit unit length
    /// of all ones overflowed the next unit's offset.
    #[test]
    fn line_headers_with_a_huge_unit_length() {
        let mut data = vec![0xff; 12];
        data.extend_from_slice(&[0; 20]);
        let bytes = owned(data);
        let debug_line = gimli::DebugLine::from(reader(&bytes));
        assert_eq!(line_headers_bytes(&debug_line), 0);
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
