//! Symbol lookup against `nm`.

use std::path::Path;
use std::process::Command;

use profiler_elf::{ElfFile, SymbolSource};

use crate::support::{compile, run, test_dir, LIBC};
use crate::unwind::SHAPES_C;

/// Function symbols as `nm --defined-only -S` lists them: (addr, size, name).
fn nm_functions(path: &Path, dynamic: bool) -> Vec<(u64, u64, String)> {
    let mut cmd = Command::new("nm");
    cmd.args(["--defined-only", "-S"]);
    if dynamic {
        cmd.arg("-D");
    }
    let out = run(cmd.arg(path));
    out.lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let (addr, size, kind, name) = match t.as_slice() {
                [a, s, k, n] => (a, Some(s), k, n),
                [a, k, n] => (a, None, k, n),
                _ => return None,
            };
            if !matches!(*kind, "T" | "t" | "i") {
                return None;
            }
            let size = size.map_or(0, |s| u64::from_str_radix(s, 16).expect("hex"));
            let name = name.split('@').next().expect("name").to_owned();
            Some((u64::from_str_radix(addr, 16).expect("hex"), size, name))
        })
        .collect()
}

#[test]
fn lookup_agrees_with_nm() {
    let dir = test_dir("symbols");
    let bin = compile(&dir, "shapes", SHAPES_C, &["-O2"]);
    let elf = ElfFile::open(&bin).expect("open");
    let table = elf.symbols().expect("symbols");
    assert_eq!(table.source(), SymbolSource::Symtab);
    let nm = nm_functions(&bin, false);
    assert!(nm.len() >= 6, "{nm:?}");
    for (addr, size, name) in &nm {
        let aliases: Vec<&str> = nm.iter().filter(|s| s.0 == *addr).map(|s| s.2.as_str()).collect();
        let (got, off) = table.lookup(*addr).unwrap_or_else(|| panic!("{name} at {addr:#x} not found"));
        assert!(aliases.contains(&&*got) && off == 0, "{name}: got {got}+{off}");
        if *size > 1 {
            assert_eq!(table.lookup(addr + size - 1).map(|(_, o)| o), Some(size - 1), "{name} last byte");
        }
        assert_eq!(table.find(name).map(|s| s.0), Some(*addr));
        // The lookup by name that copies nothing finds the same function.
        assert_eq!(elf.function_symbol(name), Some((*addr, *size)), "{name}");
    }
    // Defined data and missing names are not functions; a name is matched
    // whole, not as a prefix.
    assert_eq!(elf.function_symbol("no_such_function"), None);
    assert_eq!(elf.function_symbol("lea"), None);
    assert!(elf.symbol_address("_IO_stdin_used").is_some());
    assert_eq!(elf.function_symbol("_IO_stdin_used"), None);
    // Past the end of a sized symbol that no other symbol follows: a miss.
    let (leaf, size) = table.find("leaf").expect("leaf");
    let next = nm.iter().map(|s| s.0).filter(|&a| a > leaf).min().expect("a symbol after leaf");
    if next > leaf + size {
        assert_eq!(table.lookup(leaf + size), None);
    }
    assert_eq!(table.lookup(0), None);
}

#[test]
fn libc_falls_back_to_dynsym() {
    let elf = ElfFile::open(LIBC).expect("libc");
    let table = elf.symbols().expect("symbols");
    assert_eq!(table.source(), SymbolSource::Dynsym);
    let (qsort, size) = table.find("qsort").expect("qsort");
    assert_eq!(elf.function_symbol("qsort"), Some((qsort, size)));
    assert!(size > 3);
    assert_eq!(table.lookup(qsort + 3), Some(("qsort".into(), 3)));
    let nm = nm_functions(Path::new(LIBC), true);
    let mut checked = 0;
    for (addr, _, name) in nm.iter().step_by(37) {
        let aliases: Vec<&str> = nm.iter().filter(|s| s.0 == *addr).map(|s| s.2.as_str()).collect();
        let (got, off) = table.lookup(*addr).expect("found");
        assert!(aliases.contains(&&*got) && off == 0, "{name}: {got}+{off}");
        checked += 1;
    }
    assert!(checked > 20);
}

/// The index keeps addresses as 32-bit offsets from its lowest symbol: a
/// function placed 8 GiB above the others (only a crafted file does that)
/// is left out, and the others are found as before.
#[test]
fn a_symbol_4_gib_above_the_others_is_left_out() {
    let dir = test_dir("symbols-far");
    let source = "__attribute__((section(\".far\"), noinline)) int far_away(int x) { return x * 3; }\n\
                  __attribute__((noinline)) int near_by(int x) { return x + 1; }\n\
                  int main(int argc, char **argv) { (void)argv; return near_by(argc) + far_away(argc); }\n";
    let bin = compile(
        &dir,
        "far",
        source,
        &[
            "-O1",
            "-no-pie",
            "-mcmodel=large",
            "-fno-asynchronous-unwind-tables",
            "-Wl,--section-start=.far=0x200400000",
        ],
    );
    let nm = nm_functions(&bin, false);
    let far = nm.iter().find(|s| s.2 == "far_away").expect("far_away in nm").0;
    let near = nm.iter().find(|s| s.2 == "near_by").expect("near_by in nm").0;
    assert!(far - near > 1 << 32, "{far:#x} {near:#x}");
    let elf = ElfFile::open(&bin).expect("open");
    let table = elf.symbols().expect("symbols");
    assert_eq!(table.lookup(near).map(|(n, o)| (n.into_owned(), o)), Some(("near_by".to_owned(), 0)));
    assert_ne!(table.lookup(far).map(|(n, _)| n.into_owned()), Some("far_away".to_owned()));
    assert_eq!(table.find("far_away"), None);
}

/// Resident KiB of this process's mapping that starts at `start` (from
/// `/proc/self/smaps`).
fn resident_kib(start: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let from = line.split_once('-').and_then(|(from, _)| usize::from_str_radix(from, 16).ok());
        if let Some(from) = from.filter(|_| line.contains(' ')) {
            inside = from == start;
        } else if let Some(kib) = line.strip_prefix("Rss:").filter(|_| inside) {
            return kib.trim().trim_end_matches(" kB").parse().expect("Rss value");
        }
    }
    panic!("no mapping at {start:#x}");
}

/// A scan of the symbol tables by name reads a page of the string table
/// for every few entries: on the large libraries of build machines
/// (20-25 MB of `.symtab` and `.strtab`) those pages stayed in the
/// agent's resident set until the file was dropped. Every scan gives
/// them back, and still finds what it looks for.
#[test]
fn scans_by_name_give_the_pages_they_read_back() {
    let dir = test_dir("symbols-release");
    // 30,000 functions of 300-character names: 9 MB of `.strtab` and
    // as much of `.dynstr`.
    const COUNT: usize = 30_000;
    let name = |i: usize| format!("f{i:06}_{}", "x".repeat(292));
    let mut asm = String::from("__asm__(\".text\\n\"\n");
    for i in 0..COUNT {
        let n = name(i);
        asm.push_str(&format!("\".globl {n}\\n.type {n},@function\\n{n}: ret\\n.size {n},1\\n\"\n"));
    }
    asm.push_str(");\n");
    let lib = compile(&dir, "libmany.so", &asm, &["-shared", "-nostdlib", "-fPIC"]);
    let elf = ElfFile::open(&lib).expect("open");
    assert!(elf.data().len() > 16 << 20, "{} bytes", elf.data().len());
    let start = elf.data().as_ptr() as usize;

    let last = name(COUNT - 1);
    assert_eq!(elf.defines_symbols(&["no_such_symbol", &name(0), &last]), [false, true, true]);
    let after_scan = resident_kib(start);
    assert_eq!(elf.function_symbol(&last).map(|(_, size)| size), Some(1));
    let after_lookup = resident_kib(start);
    assert_eq!(elf.symbol_address("no_such_symbol"), None);
    let after_miss = resident_kib(start);
    // The section headers and what follows the last release: far less
    // than one release interval's ~2.5 MB of names.
    for (what, kib) in [("defines_symbols", after_scan), ("function_symbol", after_lookup), ("miss", after_miss)] {
        assert!(kib < 512, "{what}: {kib} KiB of the file resident");
    }
}
