//! C++ and Rust names demangled, from DWARF and from ELF symbols alone.

use std::path::Path;
use std::process::Command;

use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer, LineSource};

use crate::support::{compile, elf_vaddr, have, hex_values, line_of, run, short, test_dir};

/// `(function, file name, line)`.
type Short = (String, String, u32);

const WIDGET_CPP: &str = include_str!("data/widget.cpp");
const RUST_DEMO: &str = include_str!("data/rust_demo.rs");

/// Runs `bin` and returns the ELF addresses of its recorded calls.
fn calls(bin: &Path) -> Vec<u64> {
    let out = run(&mut Command::new(bin));
    let base = hex_values(&out, "base")[0];
    hex_values(&out, "ra").into_iter().map(|ra| elf_vaddr(bin, base, ra) - 1).collect()
}

/// The outermost function at each call, and the lines, per source.
fn symbolize_all(bin: &Path, calls: &[u64], use_dwarf: bool) -> Vec<(Vec<Short>, LineSource)> {
    let config = DebugConfig { use_dwarf, ..DebugConfig::default() };
    let sym = FileSymbolizer::load(&FileSource::new(bin), &config).expect("load");
    calls
        .iter()
        .map(|&c| {
            let (lines, source) = sym.symbolize(c).unwrap_or_else(|| panic!("{bin:?}: {c:#x} not symbolized"));
            (short(&lines), source)
        })
        .collect()
}

#[test]
fn cpp_names_from_dwarf_and_symbols() {
    if !have("g++") {
        return;
    }
    let dir = test_dir("cpp-names");
    let bin = compile(&dir, "g++", "widget.cpp", WIDGET_CPP, "widget", &["-O2", "-g"]);
    let calls = calls(&bin);
    let file = "widget.cpp".to_owned();
    let want = [
        ("ns::Widget::compute(int) const", line_of(WIDGET_CPP, "COMPUTE_CALLS_TWICE")),
        ("run(ns::Widget const&)", line_of(WIDGET_CPP, "RUN_CALLS_COMPUTE")),
        ("main", line_of(WIDGET_CPP, "MAIN_CALLS_RUN")),
    ];
    let got = symbolize_all(&bin, &calls, true);
    for ((lines, source), (function, line)) in got.iter().zip(want) {
        assert_eq!(*source, LineSource::Dwarf);
        assert_eq!(lines.last(), Some(&(function.to_owned(), file.clone(), line)), "{lines:?}");
    }
    // The same names from .symtab alone.
    let got = symbolize_all(&bin, &calls, false);
    for ((lines, source), (function, _)) in got.iter().zip(want) {
        assert_eq!(*source, LineSource::Symbols);
        assert_eq!(lines, &vec![(function.to_owned(), String::new(), 0)]);
    }
    // The template instance, looked up at its entry.
    let elf = profiler_elf::ElfFile::open(&bin).expect("open");
    let symbols = elf.symbols().expect("symbols");
    let (twice, _) = symbols.find("_ZN2ns6detail5twiceIiEET_S2_").expect("twice<int> symbol");
    let sym = FileSymbolizer::load(&FileSource::new(&bin), &DebugConfig::default()).expect("load");
    let (lines, _) = sym.symbolize(twice).expect("twice");
    assert_eq!(lines.last().map(|l| &*l.function), Some("int ns::detail::twice<int>(int)"));
}

fn rust_names(mangling: &str, want: [&str; 2]) {
    if !have("rustc") {
        return;
    }
    let dir = test_dir(&format!("rust-names-{mangling}"));
    let mut args = vec!["-O", "-g", "-C", "force-frame-pointers=yes", "--crate-name", "rust_demo"];
    // Legacy is stable rustc's default (the flag needs -Z unstable-options).
    let v0 = format!("symbol-mangling-version={mangling}");
    if mangling != "legacy" {
        args.extend(["-C", &v0]);
    }
    let bin = compile(&dir, "rustc", "rust_demo.rs", RUST_DEMO, "rust_demo", &args);
    let calls = calls(&bin);
    let lines = [line_of(RUST_DEMO, "GET_CALLS_LEAF"), line_of(RUST_DEMO, "AREA_CALLS_GET")];
    let got = symbolize_all(&bin, &calls, true);
    for ((frames, source), (function, line)) in got.iter().zip(want.iter().zip(lines)) {
        assert_eq!(*source, LineSource::Dwarf, "{mangling}");
        assert_eq!(
            frames.last(),
            Some(&(function.to_string(), "rust_demo.rs".to_owned(), line)),
            "{mangling}: {frames:?}"
        );
    }
    let got = symbolize_all(&bin, &calls, false);
    for ((frames, source), function) in got.iter().zip(want) {
        assert_eq!(*source, LineSource::Symbols, "{mangling}");
        assert_eq!(frames, &vec![(function.to_owned(), String::new(), 0)], "{mangling}");
    }
}

#[test]
fn rust_legacy_names() {
    rust_names("legacy", ["rust_demo::Holder<T>::get", "<rust_demo::Holder<u32> as rust_demo::Shape>::area"]);
}

#[test]
fn rust_v0_names() {
    rust_names("v0", ["<rust_demo::Holder<u32>>::get", "<rust_demo::Holder<u32> as rust_demo::Shape>::area"]);
}
