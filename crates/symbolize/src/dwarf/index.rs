//! The unit index [`Dwarf::load`](super::Dwarf::load) builds once, in one
//! pass over all unit headers: each unit's address ranges ([`UnitRange`],
//! [`index_units`]) from its root entry ([`RangeAttrs`], with the
//! abbreviation tables units share parsed once, [`SharedAbbreviations`]),
//! `.debug_aranges` or its line program's sequences; the walk over the
//! headers that gives pages back ([`for_each_header`]); and the estimate
//! of the index's heap made before it is built ([`estimate_index`]).

use std::collections::HashMap;
use std::sync::Arc;

use gimli::Section;

use super::sections::Reader;
use super::{Allowance, Slot, Stop};

/// An address range of one unit, as the lookup searches them: sorted by
/// `end`, each with the lowest `begin` of itself and all after it.
pub(super) struct UnitRange {
    pub(super) begin: u64,
    pub(super) end: u64,
    pub(super) min_begin: u64,
    pub(super) unit: u32,
}

/// `.debug_info` bytes read (by the index pass, or by the units lookups
/// parse) between two releases of the mapped sections' pages, which
/// bounds the file pages a load or a burst of lookups keeps resident.
pub(super) const RELEASE_EVERY: u64 = 1 << 20;

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

/// An entry's address ranges, as its attributes give them.
#[derive(Default)]
pub(super) struct RangeAttrs {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges: Option<gimli::RangeListsOffset>,
}

impl RangeAttrs {
    /// Takes `attr` if it is one of the range attributes.
    pub(super) fn read(
        &mut self,
        unit: gimli::UnitRef<'_, Reader>,
        attr: &gimli::Attribute<Reader>,
    ) -> Result<(), gimli::Error> {
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
    pub(super) fn for_each(
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
pub(super) fn index_units(
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
pub(super) struct SharedAbbreviations {
    /// By `.debug_abbrev` offset: the units still to use it, and the
    /// table once parsed.
    pub(super) tables: HashMap<u64, (u32, Option<Arc<gimli::Abbreviations>>)>,
    /// The offsets of all units' tables, sorted: a shared table is read
    /// only up to the next one, so that the tables held at once never
    /// overlap (offsets into one table would each parse all its rest).
    offsets: Vec<u64>,
}

impl SharedAbbreviations {
    pub(super) fn new(dwarf: &gimli::Dwarf<Reader>, release: &mut dyn FnMut()) -> SharedAbbreviations {
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
    pub(super) fn get(
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
/// that `unit::parse_lines` keeps, keeping no row and rendering no file.
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

/// Capacity a `Vec` grown by `push` from empty reaches for `n` elements.
fn grown(n: u64) -> u64 {
    match n {
        0 => 0,
        1..=4 => 4,
        _ => n.next_power_of_two(),
    }
}

/// Heap of the unit index [`Dwarf::load`](super::Dwarf::load) builds for `dwarf`, estimated
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
