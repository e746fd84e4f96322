//! Malformed input: garbage DWARF, truncated files, truncated and
//! corrupted `.gopclntab`. Errors or empty answers, never a panic.

use std::path::Path;
use std::sync::Arc;

use profiler_elf::ElfFile;
use profiler_symbolize::{DebugConfig, DwarfError, FileSource, FileSymbolizer};

use crate::golang::go_build;
use crate::memory::{live, peak_since_last};
use crate::native_c::build_chain;
use crate::support::{have, run, test_dir};

/// A tiny deterministic generator (64-bit LCG, Knuth's MMIX constants).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Loads `data` and symbolizes `addrs`; must not panic. Returns how many
/// addresses got a name.
fn exercise(data: Vec<u8>, addrs: &[u64]) -> usize {
    let Ok(elf) = ElfFile::from_bytes(data) else {
        return 0;
    };
    let sym = FileSymbolizer::from_elf(
        Arc::new(elf),
        &FileSource::new("/nonexistent/for-debuglinks"),
        &DebugConfig { use_dwarf: true, debug_roots: vec![], ..DebugConfig::default() },
    );
    addrs.iter().filter(|&&a| sym.symbolize(a).is_some()).count()
}

/// `(offset, size)` of the named sections.
fn sections(path: &Path, names: &[&str]) -> Vec<(usize, usize)> {
    let elf = ElfFile::open(path).expect("open");
    names.iter().filter_map(|n| elf.section_by_name(n)).map(|s| (s.offset as usize, s.size as usize)).collect()
}

#[test]
fn garbage_dwarf_and_truncated_files() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("malformed-dwarf");
    let chain = build_chain(&dir);
    let data = std::fs::read(&chain.bin).expect("read");
    let elf = ElfFile::open(&chain.bin).expect("open");
    let text = elf.section_by_name(".text").expect("text").clone();
    drop(elf);
    let addrs: Vec<u64> = (0..400).map(|i| text.addr + i * text.size / 400).chain(chain.calls).collect();
    assert!(exercise(data.clone(), &addrs) > 300);
    let debug = sections(
        &chain.bin,
        &[".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_rnglists", ".debug_aranges"],
    );
    assert!(debug.len() >= 4, "{debug:?}");
    let mut rng = Lcg(42);
    // Sparse corruption keeps headers plausible; dense makes noise.
    for density in [1000, 100, 10, 1] {
        for _ in 0..8 {
            let mut d = data.clone();
            for &(off, size) in &debug {
                for b in &mut d[off..off + size] {
                    if rng.next().is_multiple_of(density) {
                        *b = rng.next() as u8;
                    }
                }
            }
            exercise(d, &addrs);
        }
    }
    // Every section of debug information replaced by garbage.
    let mut d = data.clone();
    for &(off, size) in &debug {
        for b in &mut d[off..off + size] {
            *b = rng.next() as u8;
        }
    }
    exercise(d, &addrs);
    // Truncated anywhere.
    for cut in (0..data.len()).step_by(data.len() / 97) {
        exercise(data[..cut].to_vec(), &addrs);
    }
}

#[test]
fn truncated_and_corrupted_gopclntab() {
    if !have("go") {
        return;
    }
    let dir = test_dir("malformed-go");
    let bin = go_build(&dir, "gochain", &["-ldflags=-s -w"]);
    let data = std::fs::read(&bin).expect("read");
    let (pcln_off, pcln_size) = sections(&bin, &[".gopclntab"])[0];
    let elf = ElfFile::open(&bin).expect("open");
    let text = elf.section_by_name(".text").expect("text").clone();
    drop(elf);
    let addrs: Vec<u64> = (0..2000).map(|i| text.addr + i * text.size / 2000).collect();
    assert!(exercise(data.clone(), &addrs) > 1900);

    // The file cut inside the table (section headers lost with the tail:
    // the table is found by scanning, and its end is missing).
    for frac in [1, 2, 3, 5, 8, 13] {
        let cut = pcln_off + pcln_size * frac / 16;
        exercise(data[..cut].to_vec(), &addrs);
    }
    // The section header claiming a shorter table.
    let elf = ElfFile::open(&bin).expect("open");
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let index = elf.sections().iter().position(|s| s.name == ".gopclntab").expect("index");
    drop(elf);
    for frac in [0, 1, 4, 8, 12, 15] {
        let mut d = data.clone();
        let size_at = shoff + index * 64 + 32;
        d[size_at..size_at + 8].copy_from_slice(&((pcln_size * frac / 16) as u64).to_le_bytes());
        exercise(d, &addrs);
    }
    // Corrupted bytes in the table.
    let mut rng = Lcg(7);
    for density in [10_000, 1000, 100, 10] {
        for _ in 0..4 {
            let mut d = data.clone();
            for b in &mut d[pcln_off..pcln_off + pcln_size] {
                if rng.next().is_multiple_of(density) {
                    *b = rng.next() as u8;
                }
            }
            exercise(d, &addrs);
        }
    }
}

/// Issue 19: a small file whose two zstd debug sections each declare
/// 2 GiB drove the symbolizer to 4.2 GB. Declared sizes over the limit or
/// implausible for their compressed size are refused before anything is
/// allocated for them, whatever `max_dwarf_bytes` allows; declared sizes
/// that overflow a sum are no panic.
#[test]
fn issue_19_compressed_sections_declaring_gigabytes() {
    if !have("gcc") || !have("objcopy") {
        return;
    }
    let dir = test_dir("malformed-zstd-bomb");
    let chain = build_chain(&dir);
    let out = dir.join("chain.zstd");
    run(std::process::Command::new("objcopy").arg("--compress-debug-sections=zstd").arg(&chain.bin).arg(&out));
    let clean = std::fs::read(&out).expect("read");
    let targets = sections(&out, &[".debug_info", ".debug_str"]);
    assert_eq!(targets.len(), 2);
    let declare = |sizes: &[u64]| {
        let mut data = clean.clone();
        for (&(off, _), size) in targets.iter().zip(sizes) {
            data[off + 8..off + 16].copy_from_slice(&size.to_le_bytes());
        }
        data
    };
    let load = |data: Vec<u8>, max_dwarf_bytes: u64| {
        let elf = Arc::new(ElfFile::from_bytes(data).expect("headers intact"));
        let config = DebugConfig { use_dwarf: true, debug_roots: vec![], max_dwarf_bytes };
        FileSymbolizer::from_elf(elf, &FileSource::new("/nonexistent/zstd-bomb"), &config)
    };
    // Even with no byte limit: refused, and the heap stays small.
    let base = live();
    peak_since_last();
    let sym = load(declare(&[2 << 30, 2 << 30]), u64::MAX);
    let peak = peak_since_last() - base;
    let error = sym.info().dwarf_error.clone().expect("refused");
    assert!(matches!(&*error, DwarfError::Decompress { .. }), "{error:?}");
    assert!(peak < 32 << 20, "peak heap {peak} bytes");
    drop(sym);
    // Sizes whose sum wraps around: over the limit, no overflow panic.
    let sym = load(declare(&[u64::MAX - (1 << 20), 2 << 30]), 8 << 20);
    let error = sym.info().dwarf_error.clone().expect("refused");
    assert!(matches!(&*error, DwarfError::TooLarge { .. }), "{error:?}");
    // The untouched file loads.
    let sym = load(clean.clone(), 8 << 20);
    assert!(sym.info().dwarf_error.is_none(), "{:?}", sym.info());
}
