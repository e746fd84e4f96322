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
