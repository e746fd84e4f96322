//! Names kept as references: a function's name as an 8-byte [`NameRef`]
//! into the section it is read from (or into a side table), copied out
//! only when a lookup returns it ([`Names`], `Dwarf::name`); the names
//! `DW_AT_abstract_origin` / `DW_AT_specification` lead to in other units
//! or the supplementary file ([`RefUnits`]); and strings and file paths
//! read only as far as they are kept ([`attr_str`], [`cut`],
//! [`join_path`]).

use std::collections::HashMap;

use gimli::Section;

use super::sections::Reader;
use super::unit::parse_unit_at;
use super::{Allowance, Dwarf, Stop};

/// Most `DW_AT_abstract_origin` / `DW_AT_specification` links followed
/// for a name.
const MAX_NAME_LINKS: usize = 16;
/// Most units kept parsed at once while names are resolved across units.
pub(super) const MAX_REF_UNITS: usize = 32;
/// A function name as a reference into the sections, resolved only when
/// a lookup returns it: the index in [`Dwarf::owners`] of the section
/// holding it (high 8 bits: `.debug_str`, `.debug_line_str`, an inline
/// string in `.debug_info`, the supplementary file's, whichever form led
/// there), its offset there (40 bits) and its length (16 bits); or, with
/// [`SIDE_NAME`] as the section, the index in [`InlineTree::names`](super::unit::InlineTree::names);
/// [`NO_NAME`] for none.
pub(super) type NameRef = u64;
/// No name.
pub(super) const NO_NAME: NameRef = u64::MAX;
/// The "section" of names kept in [`InlineTree::names`](super::unit::InlineTree::names).
const SIDE_NAME: u64 = 0xff;
/// Longest name kept (longer ones are cut): however long the string an
/// entry names, only this much of it is read, and each name fits a
/// [`NameRef`] (never copied for each entry naming it).
pub(super) const MAX_NAME_LEN: usize = 4 << 10;
// A `NameRef` holds lengths in 16 bits.
const _: () = assert!(MAX_NAME_LEN <= 0xffff);
/// Longest file name kept (longer ones are cut, as is each part read).
pub(super) const MAX_PATH_LEN: usize = 4 << 10;
/// Largest section offset a [`NameRef`] holds.
const MAX_NAME_OFFSET: usize = (1 << 40) - 1;

/// Turns the names read while an inline tree is parsed into [`NameRef`]s.
pub(super) struct Names<'a> {
    /// [`Dwarf::spans`].
    pub(super) spans: &'a [(usize, usize)],
    /// Names that cannot be referenced (becoming [`InlineTree::names`](super::unit::InlineTree::names)).
    pub(super) side: Vec<Box<str>>,
}

impl Names<'_> {
    /// `name` as a [`NameRef`]; one copied into the side table is taken
    /// from `allowance`.
    pub(super) fn add(&mut self, name: Option<Reader>, allowance: &mut Allowance) -> Result<NameRef, Stop> {
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
    pub(super) fn name(&self, side: &[Box<str>], name: NameRef) -> Option<String> {
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
pub(super) struct RefUnits<'a> {
    dwarf: &'a Dwarf,
    /// `.debug_info` offset of the unit being parsed.
    current: u64,
    /// By (in the supplementary file, unit offset), with when each was
    /// last used.
    pub(super) units: HashMap<(bool, u64), (gimli::Unit<Reader>, u64)>,
    /// Uses so far (the clock of `units`).
    uses: u64,
}

/// Which unit an entry reference leads to.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Place {
    /// The unit being parsed.
    Current,
    /// Another unit (in the supplementary file, unit offset).
    Other(bool, u64),
}

impl<'a> RefUnits<'a> {
    pub(super) fn new(dwarf: &'a Dwarf, current: u64) -> RefUnits<'a> {
        RefUnits { dwarf, current, units: HashMap::new(), uses: 0 }
    }

    /// The unit holding `.debug_info` offset `at` (of the supplementary
    /// file when `sup`), parsed, and the entry's offset in it.
    pub(super) fn find(&mut self, sup: bool, at: usize) -> Result<(Place, gimli::UnitOffset), ()> {
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

/// The first `max` bytes of `s`.
pub(super) fn cut(s: Reader, max: usize) -> Reader {
    let bytes = s.slice();
    gimli::EndianSlice::new(&bytes[..bytes.len().min(max)], gimli::LittleEndian)
}

/// The string attribute value `value` names, cut to its first `max`
/// bytes: a string in the sections is searched only that far for its
/// end (gimli's `attr_string` reads it whole, again for each entry
/// naming it).
pub(super) fn attr_str(
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
    // memchr: names are searched for their end in every entry parsed.
    let len = match memchr::memchr(0, &bytes[..bytes.len().min(max + 1)]) {
        Some(len) => len,
        None if bytes.len() > max => max,
        // Unterminated.
        None => return Err(out_of_bounds),
    };
    Ok(gimli::EndianSlice::new(&bytes[..len], gimli::LittleEndian))
}

/// Appends `part` to `path` with a separator (`\` when `path` is a
/// Windows path), or replaces `path` when `part` is absolute.
pub(super) fn join_path(path: &mut String, part: &str) {
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

/// Takes `attr` into `name` when it names the entry: a linkage name
/// always, a name or the target of an origin or specification when
/// there is none yet.
pub(super) fn read_name(
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
