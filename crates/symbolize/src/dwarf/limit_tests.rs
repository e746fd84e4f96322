//! Crafted DWARF that, read naively, makes the index allocate without
//! bound (entries sharing one range list, line program or string):
//! each is refused ([`DwarfError::TooLarge`]) or answers less, within
//! the file's DWARF limit. Inputs are built in memory: DWARF 4 by hand
//! in a minimal ELF file.

use std::sync::Arc;

use profiler_elf::{ElfFile, SHF_COMPRESSED};

use super::index::{index_units, SharedAbbreviations, RELEASE_EVERY};
use super::names::{Place, RefUnits, MAX_NAME_LEN, MAX_PATH_LEN, MAX_REF_UNITS};
use super::sections::ELFCOMPRESS_ZLIB;
use super::unit::RENDERED;
use super::*;

/// A little-endian byte writer.
#[derive(Default)]
struct Bytes(Vec<u8>);

impl Bytes {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn uleb(&mut self, mut v: u64) -> &mut Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return self;
            }
            self.0.push(byte | 0x80);
        }
    }

    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
}

/// A minimal x86-64 ELF file holding `sections` (name, bytes; those
/// named in `compressed` marked `SHF_COMPRESSED`), as the symbolizer
/// reads it.
fn elf(sections: &[(&str, Vec<u8>)], compressed: &[&str]) -> DwarfFile {
    let mut shstrtab = vec![0u8];
    let mut data = vec![0u8; 64];
    // (name offset, type, flags, offset, size)
    let mut headers = vec![(0u32, 0u32, 0u64, 0u64, 0u64)];
    for (name, bytes) in sections {
        let name_at = shstrtab.len() as u32;
        shstrtab.extend_from_slice(name.as_bytes());
        shstrtab.push(0);
        let flags = if compressed.contains(name) { SHF_COMPRESSED } else { 0 };
        headers.push((name_at, 1, flags, data.len() as u64, bytes.len() as u64));
        data.extend_from_slice(bytes);
    }
    let shstrndx = headers.len();
    headers.push((shstrtab.len() as u32, 3, 0, data.len() as u64, 0));
    shstrtab.extend_from_slice(b".shstrtab\0");
    let last = headers.len() - 1;
    headers[last].4 = shstrtab.len() as u64;
    data.extend_from_slice(&shstrtab);
    while !data.len().is_multiple_of(8) {
        data.push(0);
    }
    let shoff = data.len() as u64;
    let mut w = Bytes(data);
    for (name, kind, flags, offset, size) in &headers {
        w.u32(*name).u32(*kind).u64(*flags).u64(0).u64(*offset).u64(*size).u32(0).u32(0).u64(1).u64(0);
    }
    let mut data = w.0;
    let mut h = Bytes::default();
    h.bytes(b"\x7fELF\x02\x01\x01").bytes(&[0; 9]);
    h.u16(1).u16(62).u32(1).u64(0).u64(0).u64(shoff).u32(0);
    h.u16(64).u16(56).u16(0).u16(64).u16(headers.len() as u16).u16(shstrndx as u16);
    data[..64].copy_from_slice(&h.0);
    let elf = Arc::new(ElfFile::from_bytes(data).expect("crafted ELF"));
    DwarfFile { bytes: Backing::Elf(elf.clone()), elf }
}

/// `bytes` zlib-compressed as an `SHF_COMPRESSED` section (`Elf64_Chdr`
/// first).
fn compressed(bytes: &[u8]) -> Vec<u8> {
    let mut w = Bytes::default();
    w.u32(ELFCOMPRESS_ZLIB).u32(0).u64(bytes.len() as u64).u64(1);
    w.bytes(&miniz_oxide::deflate::compress_to_vec_zlib(bytes, 1));
    w.0
}

// DWARF constants (DWARF 4).
const DW_TAG_COMPILE_UNIT: u64 = 0x11;
const DW_TAG_SUBPROGRAM: u64 = 0x2e;
const DW_TAG_INLINED_SUBROUTINE: u64 = 0x1d;
const DW_AT_NAME: u64 = 0x03;
const DW_AT_STMT_LIST: u64 = 0x10;
const DW_AT_LOW_PC: u64 = 0x11;
const DW_AT_HIGH_PC: u64 = 0x12;
const DW_AT_COMP_DIR: u64 = 0x1b;
const DW_AT_RANGES: u64 = 0x55;
const DW_FORM_ADDR: u64 = 0x01;
const DW_FORM_DATA8: u64 = 0x07;
const DW_FORM_STRP: u64 = 0x0e;
const DW_FORM_SEC_OFFSET: u64 = 0x17;

/// Abbreviation codes of [`abbrevs`].
const CU_RANGES: u64 = 1;
/// Compile unit with children: low pc, high pc (size), stmt list, comp dir.
const CU_FULL: u64 = 2;
const SUB_RANGES: u64 = 3;
/// Subprogram with children: name, low pc, high pc (size).
const SUB_PARENT: u64 = 4;
const INLINED_RANGES: u64 = 5;
const CU_LINES: u64 = 6;
/// Subprogram without children: name, low pc, high pc (size).
const SUB_LEAF: u64 = 7;

/// An abbreviation: code, tag, whether it has children, (attribute,
/// form)s.
type Abbrev = (u64, u64, bool, &'static [(u64, u64)]);

/// The one abbreviation table every unit uses (offset 0).
fn abbrevs() -> Vec<u8> {
    let table: [Abbrev; 7] = [
        (CU_RANGES, DW_TAG_COMPILE_UNIT, false, &[(DW_AT_RANGES, DW_FORM_SEC_OFFSET)]),
        (
            CU_FULL,
            DW_TAG_COMPILE_UNIT,
            true,
            &[
                (DW_AT_LOW_PC, DW_FORM_ADDR),
                (DW_AT_HIGH_PC, DW_FORM_DATA8),
                (DW_AT_STMT_LIST, DW_FORM_SEC_OFFSET),
                (DW_AT_COMP_DIR, DW_FORM_STRP),
            ],
        ),
        (SUB_RANGES, DW_TAG_SUBPROGRAM, false, &[(DW_AT_NAME, DW_FORM_STRP), (DW_AT_RANGES, DW_FORM_SEC_OFFSET)]),
        (
            SUB_PARENT,
            DW_TAG_SUBPROGRAM,
            true,
            &[(DW_AT_NAME, DW_FORM_STRP), (DW_AT_LOW_PC, DW_FORM_ADDR), (DW_AT_HIGH_PC, DW_FORM_DATA8)],
        ),
        (
            INLINED_RANGES,
            DW_TAG_INLINED_SUBROUTINE,
            false,
            &[(DW_AT_NAME, DW_FORM_STRP), (DW_AT_RANGES, DW_FORM_SEC_OFFSET)],
        ),
        (CU_LINES, DW_TAG_COMPILE_UNIT, false, &[(DW_AT_STMT_LIST, DW_FORM_SEC_OFFSET)]),
        (
            SUB_LEAF,
            DW_TAG_SUBPROGRAM,
            false,
            &[(DW_AT_NAME, DW_FORM_STRP), (DW_AT_LOW_PC, DW_FORM_ADDR), (DW_AT_HIGH_PC, DW_FORM_DATA8)],
        ),
    ];
    let mut w = Bytes::default();
    for (code, tag, children, attrs) in table {
        w.uleb(code).uleb(tag).u8(u8::from(children));
        for &(name, form) in attrs {
            w.uleb(name).uleb(form);
        }
        w.u8(0).u8(0);
    }
    w.u8(0);
    w.0
}

/// A DWARF 4 unit (64-bit addresses, abbreviations at 0) whose entries
/// are `entries`.
fn unit(entries: &[u8]) -> Vec<u8> {
    unit_with_abbrevs(entries, 0)
}

/// [`unit`] with its abbreviations at `abbrevs`.
fn unit_with_abbrevs(entries: &[u8], abbrevs: u32) -> Vec<u8> {
    let mut w = Bytes::default();
    w.u32(7 + entries.len() as u32).u16(4).u32(abbrevs).u8(8).bytes(entries);
    w.0
}

/// A compile unit covering `begin..begin + size` with the line program
/// at 0, `comp_dir` the string at `.debug_str` offset 0, and the
/// entries `children`.
fn full_unit(begin: u64, size: u64, children: &[u8]) -> Vec<u8> {
    full_unit_with_lines(begin, size, 0, children)
}

/// [`full_unit`] with the line program at `lines`.
fn full_unit_with_lines(begin: u64, size: u64, lines: u32, children: &[u8]) -> Vec<u8> {
    let mut w = Bytes::default();
    w.uleb(CU_FULL).u64(begin).u64(size).u32(lines).u32(0).bytes(children).u8(0);
    unit(&w.0)
}

/// A `.debug_ranges` list of `count` ranges of 8 bytes, 16 apart, from
/// `begin`.
fn range_list(begin: u64, count: u64) -> Vec<u8> {
    let mut w = Bytes::default();
    for i in 0..count {
        w.u64(begin + 16 * i).u64(begin + 16 * i + 8);
    }
    w.u64(0).u64(0);
    w.0
}

/// A DWARF 4 line program naming `files` files ("f", in the unit's
/// directory), then running `program` (opcodes, see [`Program`]).
fn line_program(files: u64, program: &[u8]) -> Vec<u8> {
    let mut header = Bytes::default();
    header.u8(1).u8(1).u8(1).u8(-5i8 as u8).u8(14).u8(13);
    header.bytes(&[0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
    header.u8(0); // no include directories
    for _ in 0..files {
        header.bytes(b"f\0").u8(0).u8(0).u8(0);
    }
    header.u8(0);
    let mut w = Bytes::default();
    let length = 2 + 4 + header.0.len() + program.len();
    w.u32(length as u32).u16(4).u32(header.0.len() as u32).bytes(&header.0).bytes(program);
    w.0
}

/// Line program opcodes.
#[derive(Default)]
struct Program(Bytes);

impl Program {
    fn set_address(&mut self, address: u64) -> &mut Self {
        self.0.u8(0).uleb(9).u8(2).u64(address);
        self
    }

    fn set_file(&mut self, file: u64) -> &mut Self {
        self.0.u8(4).uleb(file);
        self
    }

    /// Appends a row.
    fn copy(&mut self) -> &mut Self {
        self.0.u8(1);
        self
    }

    fn advance_pc(&mut self, by: u64) -> &mut Self {
        self.0.u8(2).uleb(by);
        self
    }

    /// Advances the address by one and appends a row (a special
    /// opcode: one byte).
    fn step(&mut self) -> &mut Self {
        self.0.u8(13 + 5 + 14);
        self
    }

    fn end_sequence(&mut self) -> &mut Self {
        self.0.u8(0).uleb(1).u8(1);
        self
    }
}

#[test]
fn unread_sections_are_neither_decompressed_nor_counted() {
    // Poorly compressible bytes, so that the ratio guard passes.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut sub = Bytes::default();
    sub.uleb(SUB_LEAF).u32(5).u64(0x1000).u64(0x10);
    let mut sections = vec![
        (".debug_abbrev", abbrevs()),
        (".debug_info", full_unit(0x1000, 0x100, &sub.0)),
        (".debug_line", line_program(1, &[])),
        (".debug_str", b"/src\0main\0".to_vec()),
    ];
    let unread = [".debug_loc", ".debug_loclists", ".debug_macro", ".debug_macinfo", ".debug_types", ".debug_names"];
    for name in unread {
        sections.push((name, compressed(&noise)));
    }
    let file = elf(&sections, &unread);
    assert_eq!(inflated_size(&file.elf), 0);
    // Six MiB declared, none of it read: loads within 512 KiB, holding
    // no decompressed byte.
    let dwarf = Dwarf::load(&file, None, 512 << 10).expect("loads");
    assert_eq!(dwarf.owned_bytes, 0);
    let frames = dwarf.frames(0x1008);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].function.as_deref(), Some("main"));
    // A section the index reads still counts.
    sections.push((".debug_ranges", compressed(&noise)));
    let file = elf(&sections, &[&unread[..], &[".debug_ranges"]].concat());
    assert_eq!(inflated_size(&file.elf), 1 << 20);
    assert!(matches!(Dwarf::load(&file, None, 512 << 10), Err(DwarfError::TooLarge { .. })));
}

/// A string of `len` bytes 'x' (and its NUL).
fn long_string(len: usize) -> Vec<u8> {
    let mut s = vec![b'x'; len];
    s.push(0);
    s
}

#[test]
fn long_names_are_cut_and_referenced_never_copied_per_entry() {
    // A thousand functions named by one 1 MiB string, in a unit whose
    // directory is that string too: read naively, 1 GiB of names.
    const FUNCTIONS: u64 = 1000;
    let mut children = Bytes::default();
    for i in 0..FUNCTIONS {
        children.uleb(SUB_LEAF).u32(0).u64(0x1000 + 16 * i).u64(16);
    }
    let mut program = Program::default();
    program.set_address(0x1000).set_file(1).copy().advance_pc(16 * FUNCTIONS).end_sequence();
    let file = elf(
        &[
            (".debug_abbrev", abbrevs()),
            (".debug_info", full_unit(0x1000, 16 * FUNCTIONS, &children.0)),
            (".debug_line", line_program(1, &program.0 .0)),
            (".debug_str", long_string(1 << 20)),
        ],
        &[],
    );
    let dwarf = Dwarf::load(&file, None, 64 << 20).expect("loads");
    for i in [0, FUNCTIONS / 2, FUNCTIONS - 1] {
        let frames = dwarf.frames(0x1000 + 16 * i + 4);
        assert_eq!(frames.len(), 1, "{frames:?}");
        let name = frames[0].function.as_deref().expect("a name");
        assert_eq!(name.len(), MAX_NAME_LEN);
        let path = frames[0].file.as_deref().expect("a file");
        assert_eq!(path.len(), MAX_PATH_LEN);
        assert!(path.bytes().all(|b| b == b'x'), "{path}");
    }
    let parsed = dwarf.parsed.borrow();
    let unit = parsed[0].parsed().expect("parsed");
    let trees: Vec<_> = unit.functions.functions.iter().filter_map(|f| f.tree.get()).collect();
    assert_eq!(trees.len(), 3, "the functions looked up, and only these, have their names read");
    assert!(trees.iter().all(|t| t.names.is_empty()), "names copied");
    // Functions (16 bytes) and their addresses (24), one path.
    assert!(unit.heap_bytes() < 64 * FUNCTIONS + 8192, "{} bytes", unit.heap_bytes());
}

#[test]
fn only_the_files_rows_use_are_rendered() {
    // A line program listing 100,000 files, each in the unit's 1 MiB
    // directory; its rows name one. Rendered in full: 100 GiB.
    const FILES: u64 = 100_000;
    let mut program = Program::default();
    program.set_address(0x1000).set_file(FILES / 2).copy().advance_pc(16).end_sequence();
    let mut children = Bytes::default();
    children.uleb(SUB_LEAF).u32(0).u64(0x1000).u64(16);
    let file = elf(
        &[
            (".debug_abbrev", abbrevs()),
            (".debug_info", full_unit(0x1000, 16, &children.0)),
            (".debug_line", line_program(FILES, &program.0 .0)),
            (".debug_str", long_string(1 << 20)),
        ],
        &[],
    );
    let dwarf = Dwarf::load(&file, None, 64 << 20).expect("loads");
    let rendered = RENDERED.with(Cell::get);
    let frames = dwarf.frames(0x1004);
    assert_eq!(RENDERED.with(Cell::get) - rendered, 1);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].file.as_ref().map(String::len), Some(MAX_PATH_LEN));
    let parsed = dwarf.parsed.borrow();
    let unit = parsed[0].parsed().expect("parsed");
    let Some(lines) = &unit.lines else {
        panic!("no line table");
    };
    assert_eq!(lines.files.borrow().iter().flatten().count(), 1);
    // The slots up to the file used (16 bytes each) and its name.
    assert!(unit.heap_bytes() < 16 * FILES + 2 * MAX_PATH_LEN as u64, "{} bytes", unit.heap_bytes());
}

/// `file`'s sections, and their owners (to keep while they are read).
fn sections(file: &DwarfFile) -> (gimli::Dwarf<Reader>, Vec<SectionBytes>) {
    let mut owners = Vec::new();
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, DwarfError> {
        let bytes = section_bytes(file, id.name())?;
        let r = reader(&bytes);
        owners.push(bytes);
        Ok(r)
    })
    .expect("sections");
    (dwarf, owners)
}

/// What [`estimate_index`] makes of `file`'s index.
fn estimate(file: &DwarfFile) -> u64 {
    estimate_index(&sections(file).0, &mut || {})
}

/// Loads `file` within `limit`: refused as too large, with the heap it
/// had reached.
fn refused(file: &DwarfFile, limit: u64) -> u64 {
    match Dwarf::load(file, None, limit) {
        Err(DwarfError::TooLarge { estimated, limit: l }) => {
            assert_eq!(l, limit);
            assert!(estimated > limit, "{estimated}");
            estimated
        }
        Err(e) => panic!("{e}"),
        Ok(d) => panic!("loaded, {} bytes", d.cost()),
    }
}

/// `units` units whose root entries all name one range list, `list`.
fn units_sharing_ranges(units: usize, list: &[u8]) -> DwarfFile {
    let mut entries = Bytes::default();
    entries.uleb(CU_RANGES).u32(0);
    elf(
        &[
            (".debug_abbrev", abbrevs()),
            (".debug_info", unit(&entries.0).repeat(units)),
            (".debug_ranges", list.to_vec()),
        ],
        &[],
    )
}

/// `units` units without ranges that all name one line program, of
/// `program`'s opcodes.
fn units_sharing_lines(units: usize, program: &Program) -> DwarfFile {
    let mut entries = Bytes::default();
    entries.uleb(CU_LINES).u32(0);
    elf(
        &[
            (".debug_abbrev", abbrevs()),
            (".debug_info", unit(&entries.0).repeat(units)),
            (".debug_line", line_program(1, &program.0 .0)),
        ],
        &[],
    )
}

/// `crafted` looks small from its headers, yet its load is refused once
/// it has taken `limit` (and at most `slack` more).
fn assert_refused_near_the_limit(crafted: &DwarfFile, limit: u64, slack: u64) {
    assert!(estimate(crafted) < limit);
    let reached = refused(crafted, limit);
    assert!(reached < limit + slack, "{reached}");
}

#[test]
fn units_sharing_a_range_list_are_refused_over_the_limit() {
    // 10,000 units naming one list of 10,000 ranges: 3.2 GB of index,
    // where the estimate from the headers sees 20,000 ranges.
    let list = range_list(0x1000, 10_000);
    let limit = 16 << 20;
    // Stopped about where it reached the limit.
    assert_refused_near_the_limit(&units_sharing_ranges(10_000, &list), limit, 4096);
    // Two of them fit, with all their ranges.
    let dwarf = Dwarf::load(&units_sharing_ranges(2, &list), None, limit).expect("loads");
    assert_eq!(dwarf.ranges.len(), 20_000);
    assert!(dwarf.cost() <= limit && dwarf.index_bytes >= 20_000 * 32, "{}", dwarf.index_bytes);
}

#[test]
fn units_sharing_a_line_program_are_refused_over_the_limit() {
    // 10,000 units naming one line program of 10,000 sequences: their
    // ranges come from it, 3.2 GB of them.
    let mut program = Program::default();
    for i in 0..10_000 {
        program.set_address(0x1000 + 16 * i).copy().advance_pc(8).end_sequence();
    }
    let limit = 16 << 20;
    assert_refused_near_the_limit(&units_sharing_lines(10_000, &program), limit, 4096);
    let dwarf = Dwarf::load(&units_sharing_lines(2, &program), None, limit).expect("loads");
    assert_eq!(dwarf.ranges.len(), 20_000);
    assert!(dwarf.cost() <= limit);
    let frames = dwarf.frames(0x1000 + 16 * 77 + 4);
    assert_eq!(frames, [DwarfFrame { function: None, file: Some("f".into()), line: 1 }]);
}

/// A `.debug_ranges` list of `count` empty ranges (nothing to keep).
fn empty_range_list(count: u64) -> Vec<u8> {
    let mut w = Bytes::default();
    for i in 0..count {
        w.u64(0x1000 + 16 * i).u64(0x1000 + 16 * i);
    }
    w.u64(0).u64(0);
    w.0
}

#[test]
fn units_sharing_a_list_of_empty_ranges_are_refused_not_read_for_ever() {
    // 20,000 units naming one list of 20,000 empty ranges keep
    // nothing, but reading them all is 4 * 10^8 entries: each one read
    // takes a byte of the allowance, so the load stops after about
    // `limit` of them.
    let list = empty_range_list(20_000);
    let limit = 4 << 20;
    assert_refused_near_the_limit(&units_sharing_ranges(20_000, &list), limit, 64);
    // Ten of them: 200,000 entries read, no range kept.
    let dwarf = Dwarf::load(&units_sharing_ranges(10, &list), None, limit).expect("loads");
    assert_eq!(dwarf.ranges.len(), 0);
}

#[test]
fn units_sharing_rows_outside_any_sequence_are_refused_not_run_for_ever() {
    // 20,000 units naming one line program of 20,000 rows that end no
    // sequence: no range is kept, each row run takes a byte.
    let mut program = Program::default();
    program.set_address(0x1000);
    for _ in 0..20_000 {
        program.copy();
    }
    let limit = 4 << 20;
    assert_refused_near_the_limit(&units_sharing_lines(20_000, &program), limit, 64);
    let dwarf = Dwarf::load(&units_sharing_lines(10, &program), None, limit).expect("loads");
    assert_eq!(dwarf.ranges.len(), 0);
}

/// A unit at 0x1000 with the line program `lines` holding `children`,
/// and after it, at 0x100_0000, a small unit with one function, "main"
/// (and an empty line program); the range list at 0 has `ranges` ranges
/// from 0x1000.
fn with_small_unit(children: &[u8], ranges: u64, lines: Vec<u8>) -> DwarfFile {
    let mut info = full_unit(0x1000, 0x10_0000, children);
    let mut main = Bytes::default();
    main.uleb(SUB_LEAF).u32(5).u64(0x100_0000).u64(16);
    info.extend(full_unit_with_lines(0x100_0000, 16, lines.len() as u32, &main.0));
    elf(
        &[
            (".debug_abbrev", abbrevs()),
            (".debug_info", info),
            (".debug_line", [lines, line_program(1, &[])].concat()),
            (".debug_ranges", range_list(0x1000, ranges)),
            (".debug_str", b"/src\0main\0".to_vec()),
        ],
        &[],
    )
}

/// Looks up `broken` (in a unit or function over the limit) and `fine`
/// (in the small unit) in turn: `broken` answers nothing, `fine` "main",
/// each unit is parsed once, and the parsed units stay within the limit.
fn check_over_the_limit(dwarf: &Dwarf, broken: u64, fine: u64) {
    for _ in 0..3 {
        assert_eq!(dwarf.frames(broken), []);
        let frames = dwarf.frames(fine);
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].function.as_deref(), Some("main"));
        assert!(dwarf.lazy_bytes.get() <= dwarf.max_parsed_bytes, "{}", dwarf.lazy_bytes.get());
    }
    assert_eq!(dwarf.parsed_units().0, 2);
    assert_eq!(dwarf.units_dropped(), 0);
    assert!(dwarf.lazy_bytes.get() < 64 << 10, "{}", dwarf.lazy_bytes.get());
}

#[test]
fn functions_sharing_a_range_list_leave_their_unit_broken() {
    // 2,000 functions naming one list of 10,000 ranges: 480 MB of
    // function addresses in one unit.
    let mut children = Bytes::default();
    for _ in 0..2000 {
        children.uleb(SUB_RANGES).u32(5).u32(0);
    }
    let limit = 8 << 20;
    let dwarf = Dwarf::load(&with_small_unit(&children.0, 10_000, line_program(1, &[])), None, limit).expect("loads");
    check_over_the_limit(&dwarf, 0x1004, 0x100_0004);
    assert!(matches!(dwarf.parsed.borrow()[0], Slot::Broken));
}

#[test]
fn inlined_calls_sharing_a_range_list_leave_their_function_broken() {
    // One function with 5,000 inlined calls naming one list of 10,000
    // ranges: 800 MB of inlined ranges in one tree.
    let mut children = Bytes::default();
    children.uleb(SUB_PARENT).u32(5).u64(0x1000).u64(0x10_0000);
    for _ in 0..5000 {
        children.uleb(INLINED_RANGES).u32(5).u32(0);
    }
    children.u8(0);
    let limit = 8 << 20;
    let dwarf = Dwarf::load(&with_small_unit(&children.0, 10_000, line_program(1, &[])), None, limit).expect("loads");
    check_over_the_limit(&dwarf, 0x1004, 0x100_0004);
    let parsed = dwarf.parsed.borrow();
    let unit = parsed[0].parsed().expect("the unit is kept");
    let function = &unit.functions.functions[0];
    assert!(function.broken.get() && function.tree.get().is_none());
}

#[test]
fn a_unit_over_the_limit_is_kept_as_a_placeholder() {
    // One sequence of 2 M rows (one byte each): 16 MB of rows in one
    // unit, over the 4 MiB the file may hold.
    let mut program = Program::default();
    program.set_address(0x1000);
    for _ in 0..2 << 20 {
        program.step();
    }
    program.end_sequence();
    let limit = 4 << 20;
    let dwarf = Dwarf::load(&with_small_unit(&[], 1, line_program(1, &program.0 .0)), None, limit).expect("loads");
    assert!(dwarf.max_parsed_bytes > limit - (64 << 10), "{}", dwarf.max_parsed_bytes);
    check_over_the_limit(&dwarf, 0x1004, 0x100_0004);
    assert!(matches!(dwarf.parsed.borrow()[0], Slot::Broken));
    // With room for it, the rows are there.
    let dwarf = Dwarf::load(&with_small_unit(&[], 1, line_program(1, &program.0 .0)), None, 64 << 20).expect("loads");
    assert_eq!(dwarf.frames(0x1004), [DwarfFrame { function: None, file: Some("/src/f".into()), line: 1 }]);
    assert!(dwarf.lazy_bytes.get() > 16 << 20);
}

#[test]
fn abbreviations_units_share_are_parsed_once_at_load() {
    // Three units on the table at 0, one on its own table after it.
    let mut entries = Bytes::default();
    entries.uleb(CU_RANGES).u32(0);
    let own = abbrevs().len() as u32;
    let info = [unit(&entries.0).repeat(3), unit_with_abbrevs(&entries.0, own)].concat();
    let file = elf(
        &[(".debug_abbrev", abbrevs().repeat(2)), (".debug_info", info), (".debug_ranges", range_list(0x1000, 1))],
        &[],
    );
    let (dwarf, _owners) = sections(&file);
    let mut shared = SharedAbbreviations::new(&dwarf, &mut || {});
    assert_eq!(shared.tables.len(), 1);
    let mut headers = dwarf.units();
    let mut tables = Vec::new();
    while let Ok(Some(header)) = headers.next() {
        tables.push(shared.get(&dwarf, &header).expect("abbreviations"));
    }
    assert!(Arc::ptr_eq(&tables[0], &tables[1]) && Arc::ptr_eq(&tables[1], &tables[2]));
    assert!(!Arc::ptr_eq(&tables[2], &tables[3]));
    // Dropped after its last unit.
    assert!(shared.tables.is_empty());
    assert_eq!(Arc::strong_count(&tables[0]), 3);
    // And the index is the same as with a table for each.
    let dwarf = Dwarf::load(&file, None, 1 << 20).expect("loads");
    assert_eq!(dwarf.units.len(), 4);
    assert_eq!(dwarf.ranges.len(), 4);
}

#[test]
fn units_parsed_for_names_are_dropped_one_at_a_time() {
    // Looking names up in 40 other units, 32 kept: the least recently
    // used goes, the others stay parsed.
    let mut entries = Bytes::default();
    entries.uleb(CU_RANGES).u32(0);
    let one = unit(&entries.0);
    let file = elf(
        &[(".debug_abbrev", abbrevs()), (".debug_info", one.repeat(41)), (".debug_ranges", range_list(0x1000, 1))],
        &[],
    );
    let dwarf = Dwarf::load(&file, None, 1 << 20).expect("loads");
    let mut refs = RefUnits::new(&dwarf, 0);
    let root = |i: usize| i * one.len() + 11;
    for i in 1..=40 {
        // The first unit is used again and again: it stays.
        for j in [1, i] {
            let (place, _) = refs.find(false, root(j)).expect("found");
            assert!(place == Place::Other(false, (j * one.len()) as u64));
        }
    }
    assert_eq!(refs.units.len(), MAX_REF_UNITS);
    assert!(refs.units.contains_key(&(false, one.len() as u64)));
    assert!((10..=40).all(|i| refs.units.contains_key(&(false, (i * one.len()) as u64))));
}

#[test]
fn the_passes_at_load_give_pages_back_every_mib_of_units() {
    // 3.5 MiB of units, each covering 16 bytes of its own.
    let mut info = Vec::new();
    let mut begin = 0x1000;
    while info.len() < 7 << 19 {
        info.extend(full_unit(begin, 16, &[]));
        begin += 16;
    }
    let units = begin.saturating_sub(0x1000) / 16;
    let file = elf(&[(".debug_abbrev", abbrevs()), (".debug_info", info), (".debug_line", line_program(1, &[]))], &[]);
    let (dwarf, _owners) = sections(&file);
    let mut releases = 0;
    estimate_index(&dwarf, &mut || releases += 1);
    assert_eq!(releases, 3, "header pass");
    releases = 0;
    let (indexed, ranges) = index_units(&dwarf, &mut Allowance::new(64 << 20), &mut || releases += 1).expect("indexed");
    // Its walk for shared abbreviations, then its own.
    assert_eq!(releases, 6, "index pass");
    assert_eq!((indexed.len() as u64, ranges.len() as u64), (units, units));
    // Lookups parsing units: given back after each MiB of them.
    let dwarf = Dwarf::load(&file, None, 64 << 20).expect("loads");
    let mut most = 0;
    for u in 0..units {
        dwarf.frames(0x1000 + 16 * u);
        most = most.max(dwarf.info_since_release.get());
    }
    assert_eq!(dwarf.parsed_units().0, units);
    assert!(most < RELEASE_EVERY && dwarf.info_since_release.get() < most, "{most}");
}

/// Fuzzer finding `fuzz/regressions/dwarf_symbolize/line-program-unit-length-overflow`:
/// a line program whose 64-bit unit length is all ones overflowed the
/// offset of the next one while the header pass estimated the index.
/// Now the estimate and the load end, and nothing is indexed from it.
#[test]
fn a_line_program_with_a_huge_unit_length_is_not_indexed() {
    let mut lines = Bytes::default();
    lines.u32(0xffff_ffff).u64(u64::MAX).0.extend([0u8; 64]);
    let mut entries = Bytes::default();
    entries.uleb(CU_LINES).u32(0);
    let file = elf(
        &[(".debug_abbrev", abbrevs()), (".debug_info", unit(&entries.0).repeat(2)), (".debug_line", lines.0)],
        &[],
    );
    assert!(estimate(&file) < 1 << 20);
    let dwarf = Dwarf::load(&file, None, 16 << 20).expect("loads");
    assert_eq!(dwarf.ranges.len(), 0);
    assert_eq!(dwarf.frames(0x1000), []);
}
