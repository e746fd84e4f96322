//! What a lookup parses per unit: its compact tables ([`ParsedUnit`]: the
//! line rows by sequence and the file names they use, [`Lines`]; the
//! functions with addresses, [`Functions`]), each function's inline tree
//! ([`InlineTree`], parsed on the first lookup in the function), and the
//! searches of these tables that give the frames of an address.

use std::cell::{Cell, OnceCell, RefCell};
use std::cmp::Ordering;

use super::index::{RangeAttrs, RELEASE_EVERY};
use super::names::{attr_str, cut, join_path, read_name, NameRef, Names, RefUnits, MAX_PATH_LEN};
use super::sections::Reader;
use super::{Allowance, Dwarf, DwarfFrame, Stop, MAX_FRAMES, MAX_INLINE_DEPTH, NONE};

/// A unit once parsed by a lookup: its line table and functions in
/// compact form (no reader, no abbreviation, no gimli structure).
pub(super) struct ParsedUnit {
    /// `None`: the unit has no line program.
    pub(super) lines: Option<Lines>,
    pub(super) functions: Functions,
    /// The lookup count when it was last used.
    pub(super) used: u64,
}

/// A unit's line table.
pub(super) struct Lines {
    /// Rendered file names by file index (only those rows name, and
    /// those the calls of the inline trees parsed so far name).
    pub(super) files: RefCell<Vec<Option<Box<str>>>>,
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
pub(super) struct Functions {
    /// Sorted by begin.
    addresses: Box<[FunctionAddress]>,
    pub(super) functions: Box<[Function]>,
}

struct FunctionAddress {
    begin: u64,
    end: u64,
    function: u32,
}

/// Its name is read with its inline tree, on the first lookup in it: most
/// functions of a unit are never looked up, and a name often takes a
/// reference to another entry (or unit) to find.
pub(super) struct Function {
    /// Offset of its `DW_TAG_subprogram` entry in the unit.
    offset: u32,
    /// Its entry or inline tree is malformed, or the tree would not fit
    /// with the unit in what parsed units may hold: lookups in it find
    /// nothing.
    pub(super) broken: Cell<bool>,
    /// Its inline tree, parsed on the first lookup in the function.
    pub(super) tree: OnceCell<Box<InlineTree>>,
}

/// The name and inlined calls of one function.
pub(super) struct InlineTree {
    name: NameRef,
    inlined: Box<[Inlined]>,
    /// Sorted by (depth, begin).
    inlined_addresses: Box<[InlinedAddress]>,
    /// The names that cannot be referenced (see [`NameRef`]: none,
    /// unless a section is over 1 TiB).
    pub(super) names: Box<[Box<str>]>,
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

impl Dwarf {
    /// Parses unit `index` into its compact tables (abbreviations and
    /// line program header parsed for that, then dropped), within what
    /// the parsed units may hold.
    pub(super) fn parse_unit(&self, index: usize) -> Result<ParsedUnit, Stop> {
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
        let functions = parse_functions(unit, &mut allowance)?;
        Ok(ParsedUnit { lines, functions, used: 0 })
    }
}

/// The unit at `.debug_info` offset `offset` of `dwarf`, parsed (its
/// abbreviations and line program header with it).
pub(super) fn parse_unit_at(dwarf: &gimli::Dwarf<Reader>, offset: u64) -> Result<gimli::Unit<Reader>, gimli::Error> {
    let offset = usize::try_from(offset).map_err(|_| gimli::Error::OffsetOutOfBounds(0))?;
    let header = dwarf.unit_header(gimli::DebugInfoOffset(offset))?;
    dwarf.unit(header)
}

/// Whether a parsed unit answered a lookup.
pub(super) enum Found {
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
    pub(super) fn frames(&self, dwarf: &Dwarf, unit: u64, probe: u64, out: &mut Vec<DwarfFrame>) -> (Found, u64) {
        let functions = &self.functions;
        let function = functions.find(probe).and_then(|i| functions.functions.get(i));
        if function.is_some_and(|f| f.broken.get()) {
            return (Found::Broken, 0);
        }
        let lines = self.lines.as_ref();
        let Some(f) = function else {
            return (Self::frames_in(dwarf, None, lines, probe, out), 0);
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
        (Self::frames_in(dwarf, Some(tree), lines, probe, out), added)
    }

    fn frames_in(
        dwarf: &Dwarf,
        tree: Option<&InlineTree>,
        lines: Option<&Lines>,
        probe: u64,
        out: &mut Vec<DwarfFrame>,
    ) -> Found {
        let location = lines.and_then(|l| l.find(probe));
        let file = |i: u32| lines.and_then(|l| l.file(i));
        let Some(tree) = tree else {
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
        out.push(DwarfFrame { function: dwarf.name(&tree.names, tree.name), file: file_here, line: line_here });
        Found::Yes
    }

    /// Heap held (from the tables' lengths: they are boxed slices).
    pub(super) fn heap_bytes(&self) -> u64 {
        let mut bytes = size_of::<ParsedUnit>() as u64;
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
    pub(super) static RENDERED: Cell<u64> = const { Cell::new(0) };
}

/// The functions of `unit`: every `DW_TAG_subprogram` with addresses,
/// taken from `allowance` (functions may share one long range list).
fn parse_functions(unit: gimli::UnitRef<'_, Reader>, allowance: &mut Allowance) -> Result<Functions, Stop> {
    let mut functions = Vec::new();
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
        let function = u32::try_from(functions.len()).map_err(|_| Stop::OverAllowance)?;
        let any = attrs.for_each(unit, allowance, |allowance, begin, end| {
            allowance.take(size_of::<FunctionAddress>())?;
            addresses.push(FunctionAddress { begin, end, function });
            Ok(())
        })?;
        if any {
            allowance.take(size_of::<Function>())?;
            let offset = u32::try_from(offset.0).ok();
            functions.push(Function {
                offset: offset.unwrap_or(0),
                broken: Cell::new(offset.is_none()),
                tree: OnceCell::new(),
            });
        }
    }
    addresses.sort_unstable_by_key(|a| a.begin);
    Ok(Functions { addresses: addresses.into_boxed_slice(), functions: functions.into_boxed_slice() })
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
        let (name, inlined, addresses) = parse_inline_tree(u, offset, &mut names, &mut refs, allowance)?;
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
            name,
            inlined: inlined.into_boxed_slice(),
            inlined_addresses: addresses.into_boxed_slice(),
            names: names.side.into_boxed_slice(),
        })
    }
}

/// The name of the function at `offset`, its inlined calls, and their
/// ranges sorted by (depth, begin), taken from `allowance` (calls may
/// share one long range list).
fn parse_inline_tree(
    unit: gimli::UnitRef<'_, Reader>,
    offset: gimli::UnitOffset,
    names: &mut Names,
    refs: &mut RefUnits<'_>,
    allowance: &mut Allowance,
) -> Result<(NameRef, Vec<Inlined>, Vec<InlinedAddress>), Stop> {
    let mut entries = unit.entries_raw(Some(offset))?;
    let depth = entries.next_depth();
    let abbrev = entries.read_abbreviation()?.ok_or(Stop::Malformed)?;
    let mut name = None;
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        read_name(unit, &attr, &mut name, refs)?;
    }
    let name = names.add(name, allowance)?;
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
    Ok((name, inlined, addresses))
}
