//! Malformed input: errors or partial tables, never a panic.

use profiler_elf::{ElfFile, Error, UnwindRule};

use crate::support::{compile, strip_section_headers, test_dir};
use crate::unwind::SHAPES_C;

/// Everything a caller might ask of a file; must not panic.
fn exercise(data: Vec<u8>) -> Option<u64> {
    let elf = ElfFile::from_bytes(data).ok()?;
    let _ = elf.gnu_build_id();
    let _ = elf.go_build_id();
    if let Ok(symbols) = elf.symbols() {
        let _ = symbols.lookup(0x1139);
    }
    let _ = elf.elf_vaddr(0x5555_5555_5139, 0x5555_5555_5000, 0x1000);
    let table = elf.unwind_table();
    let _ = table.lookup(0x1139);
    Some(table.stats.error_count)
}

/// A tiny deterministic generator (64-bit LCG, Knuth's MMIX constants).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn shapes_binary(name: &str) -> (std::path::PathBuf, Vec<u8>) {
    let dir = test_dir(name);
    let bin = compile(&dir, "shapes", SHAPES_C, &["-O2", "-fomit-frame-pointer"]);
    let data = std::fs::read(&bin).expect("read");
    (dir, data)
}

#[test]
fn every_truncation_point() {
    let (dir, data) = shapes_binary("malformed-truncate");
    let stripped = std::fs::read(strip_section_headers(&dir.join("shapes"), &dir.join("stripped"))).expect("read");
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let full = ElfFile::from_bytes(data.clone()).expect("valid").unwind_table();
    let mut parsed = 0;
    for cut in 0..data.len() {
        let result = ElfFile::from_bytes(data[..cut].to_vec());
        // The section header table is at the end: a cut in it leaves the
        // program headers usable and the section table ignored; a cut
        // before it (sections past the end) is an error or a partial file.
        match result {
            Err(Error::NotElf | Error::Truncated { .. }) => assert!(cut < shoff, "cut {cut}"),
            Ok(elf) if cut >= shoff => {
                assert!(
                    matches!(
                        elf.sections_ignored(),
                        Some(Error::Truncated { what: "section header table" | "section header 0", .. })
                    ),
                    "cut {cut}: {:?}",
                    elf.sections_ignored()
                );
                assert!(elf.sections().is_empty());
                assert!(!elf.program_headers().is_empty());
            }
            Ok(_) => {}
            other => panic!("cut {cut}: {other:?}"),
        }
        if exercise(stripped[..cut].to_vec()).is_some() {
            parsed += 1;
        }
    }
    // Without section headers, truncations after the program headers open
    // and give partial tables.
    assert!(parsed > data.len() / 2, "{parsed}");
    assert!(matches!(exercise(stripped), Some(0)));
    // Cut just inside the section header table: unwinding still finds
    // .eh_frame through PT_GNU_EH_FRAME, and the table is the full one.
    let elf = ElfFile::from_bytes(data[..shoff + 100].to_vec()).expect("program headers are intact");
    let table = elf.unwind_table();
    assert_eq!(table.deltas, full.deltas);
    assert!(table.stats.sections_ignored && !full.stats.sections_ignored);
}

/// Issue 19: a section header table claiming 10^9 entries (the count in
/// section 0, `e_shnum` = 0), in a sparse file long enough to hold them,
/// aborted the agent allocating 88 GB. It is ignored; the program headers
/// are kept.
#[test]
fn issue_19_sparse_file_with_a_billion_sections() {
    let (dir, data) = shapes_binary("malformed-sparse-sections");
    let full = ElfFile::from_bytes(data.clone()).expect("valid").unwind_table();
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let mut d = data.clone();
    d[60..62].fill(0); // e_shnum = 0: the count is section 0's sh_size
    d[shoff + 32..shoff + 40].copy_from_slice(&1_000_000_000u64.to_le_bytes());
    let path = dir.join("sparse");
    std::fs::write(&path, &d).expect("write");
    let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open");
    file.set_len(shoff as u64 + 64 * 1_000_000_000).expect("sparse extend");
    drop(file);
    // Opened by path, a file this large is refused before it is read
    // (elf::source's size bound); the parser must cope on its own too.
    assert!(ElfFile::open(&path).is_err(), "a 64 GB file is over the executable size bound");
    let len = std::fs::metadata(&path).expect("stat").len();
    let elf = ElfFile::from_file(std::fs::File::open(&path).expect("open"), len).expect("program headers are fine");
    assert!(
        matches!(elf.sections_ignored(), Some(Error::OverLimit { what: "e_shnum", value: 1_000_000_000, .. })),
        "{:?}",
        elf.sections_ignored()
    );
    assert!(elf.sections().is_empty());
    assert_eq!(elf.unwind_table().deltas, full.deltas, "unwinding needs the program headers only");
    let _ = std::fs::remove_file(&path);
}

/// A program header count over the limit (through `PN_XNUM` and section
/// 0's `sh_info`) is refused without allocating for it.
#[test]
fn program_header_count_over_the_limit() {
    let (_, data) = shapes_binary("malformed-phnum");
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let mut d = data.clone();
    d[56..58].copy_from_slice(&0xffffu16.to_le_bytes());
    d[shoff + 44..shoff + 48].copy_from_slice(&u32::MAX.to_le_bytes());
    match ElfFile::from_bytes(d) {
        Err(Error::OverLimit { what: "e_phnum", value, limit }) => {
            assert_eq!((value, limit), (u64::from(u32::MAX), profiler_elf::MAX_PROGRAM_HEADERS))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn garbage() {
    let mut rng = Lcg(42);
    for len in [0usize, 1, 4, 16, 63, 64, 65, 200, 4096, 65536] {
        for round in 0..20 {
            let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if round % 2 == 1 && len >= 20 {
                // A plausible header so parsing goes further.
                data[..4].copy_from_slice(b"\x7fELF");
                data[4] = 2;
                data[5] = 1;
                data[18] = 62;
                data[19] = 0;
            }
            let _ = exercise(data);
        }
    }
    // Headers with huge counts and offsets.
    let (_, data) = shapes_binary("malformed-garbage");
    for (at, bytes) in [
        (32usize, vec![0xff; 8]),
        (40, vec![0xff; 8]),
        (56, vec![0xff, 0xff]),
        (60, vec![0xff, 0xff]),
        (54, vec![0x10, 0]),
        (58, vec![0x10, 0]),
        (62, vec![0xfe, 0xff]),
    ] {
        let mut d = data.clone();
        d[at..at + bytes.len()].copy_from_slice(&bytes);
        let _ = exercise(d);
    }
}

/// The file offset and size of a section, read with the crate itself.
fn section_range(data: &[u8], name: &str) -> (usize, usize) {
    let elf = ElfFile::from_bytes(data.to_vec()).expect("valid");
    let s = elf.section_by_name(name).expect("section");
    (s.offset as usize, s.size as usize)
}

#[test]
fn corrupt_eh_frame() {
    let (_, data) = shapes_binary("malformed-eh-frame");
    let (off, size) = section_range(&data, ".eh_frame");
    // Every byte of .eh_frame set to a few values, alone.
    let mut with_errors = 0;
    for i in off..off + size {
        for value in [0x00, 0xff, 0x80, data[i] ^ 0x55, data[i].wrapping_add(1)] {
            let mut d = data.clone();
            d[i] = value;
            if exercise(d).expect("headers intact") > 0 {
                with_errors += 1;
            }
        }
    }
    assert!(with_errors > 0, "no corruption was noticed");
    // Random bytes over the whole section.
    let mut rng = Lcg(7);
    for _ in 0..200 {
        let mut d = data.clone();
        for b in &mut d[off..off + size] {
            *b = rng.next() as u8;
        }
        exercise(d).expect("headers intact");
    }
}

#[test]
fn eh_frame_section_out_of_bounds_or_cut() {
    let (_, data) = shapes_binary("malformed-eh-frame-size");
    let elf = ElfFile::from_bytes(data.clone()).expect("valid");
    let full = elf.unwind_table();
    let index = elf.sections().iter().position(|s| s.name == ".eh_frame").expect(".eh_frame");
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let size_field = shoff + index * 64 + 32;
    let offset_field = shoff + index * 64 + 24;

    // Size past the end of the file: counted, empty table.
    let mut d = data.clone();
    d[size_field..size_field + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let table = ElfFile::from_bytes(d).expect("headers").unwind_table();
    assert_eq!(table.stats.error_count, 1, "{:?}", table.stats.errors);
    assert!(table.deltas.is_empty());

    // Offset near u64::MAX.
    let mut d = data.clone();
    d[offset_field..offset_field + 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    assert_eq!(ElfFile::from_bytes(d).expect("headers").unwind_table().stats.error_count, 1);

    // Cut in the middle of an entry: the entries before it stay.
    let (_, size) = section_range(&data, ".eh_frame");
    let mut d = data.clone();
    d[size_field..size_field + 8].copy_from_slice(&((size / 2) as u64).to_le_bytes());
    let table = ElfFile::from_bytes(d).expect("headers").unwind_table();
    assert!(table.stats.error_count >= 1, "{:?}", table.stats);
    assert!(!table.deltas.is_empty());
    assert!(table.deltas.len() < full.deltas.len());
    // What is there agrees with the full table.
    for d in table.deltas.iter() {
        if d.rule != UnwindRule::NoCoverage {
            assert_eq!(full.lookup(d.address), d.rule, "{:#x}", d.address);
        }
    }
}
