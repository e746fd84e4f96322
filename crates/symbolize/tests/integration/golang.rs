//! A stripped Go binary (`-ldflags='-s -w'`): names, files and lines from
//! `.gopclntab`, inline frames included, compared with the Go runtime's
//! own symbolization of the same stacks.

use std::path::{Path, PathBuf};
use std::process::Command;

use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer, LineSource};

use crate::support::{elf_vaddr, have, hex_values, line_of, run, short, test_dir};

pub const GOCHAIN: &str = include_str!("data/gochain.go");
const CGO_MAIN: &str = include_str!("data/cgo/main.go");
const CGO_C: &str = include_str!("data/cgo/chain.c");

/// One logical frame as the Go runtime printed it.
#[derive(Clone, Debug, PartialEq)]
struct RuntimeFrame {
    pc: u64,
    function: String,
    file: String,
    line: u32,
}

/// Builds the program in `dir` with `flags`.
pub fn go_build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    std::fs::write(dir.join("gochain.go"), GOCHAIN).expect("write");
    std::fs::write(dir.join("go.mod"), "module example.com/gochain\ngo 1.21\n").expect("write");
    let bin = dir.join(name);
    run(Command::new("go")
        .current_dir(dir)
        .env("CGO_ENABLED", "0")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg("."));
    bin
}

fn runtime_frames(output: &str, tag: &str) -> Vec<RuntimeFrame> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("frame "))
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() == 5 && f[0] == tag)
        .map(|f| RuntimeFrame {
            pc: u64::from_str_radix(f[1], 16).expect("hex pc"),
            function: f[2].to_owned(),
            file: f[3].to_owned(),
            line: f[4].parse().expect("line"),
        })
        .collect()
}

/// Symbolizes the stack the runtime printed: each physical frame's pc
/// must expand to the runtime's logical frames, in order.
fn compare(sym: &FileSymbolizer, frames: &[RuntimeFrame], tag: &str) {
    assert!(!frames.is_empty(), "{tag}: no frames printed");
    let mut i = 0;
    while i < frames.len() {
        let (lines, source) =
            sym.symbolize(frames[i].pc).unwrap_or_else(|| panic!("{tag}: {:#x} not symbolized", frames[i].pc));
        assert_eq!(source, LineSource::GoPclntab);
        for (j, l) in lines.iter().enumerate() {
            let want =
                frames.get(i + j).unwrap_or_else(|| panic!("{tag}: more frames than the runtime at {i}: {lines:?}"));
            assert_eq!(
                (&*l.function, l.file.as_deref().unwrap_or(""), l.line),
                (want.function.as_str(), want.file.as_str(), want.line),
                "{tag}: frame {} (pc {:#x}, expansion {j} of {lines:?})",
                i + j,
                frames[i].pc
            );
        }
        i += lines.len();
    }
}

#[test]
fn stripped_go_binary_with_inline_frames() {
    if !have("go") {
        return;
    }
    let dir = test_dir("go-stripped");
    let bin = go_build(&dir, "gochain", &["-ldflags=-s -w"]);
    let out = run(&mut Command::new(&bin));
    let sym = FileSymbolizer::load(&FileSource::new(&bin), &DebugConfig::default()).expect("load");
    assert!(sym.info().go_pclntab.is_some());
    assert_eq!(sym.info().dwarf, None, "-w leaves no DWARF");

    let main = runtime_frames(&out, "main");
    compare(&sym, &main, "main");
    // The known chain, exactly.
    let src = |marker| ("gochain.go".to_owned(), line_of(GOCHAIN, marker));
    let chain: Vec<(String, (String, u32))> = main
        .iter()
        .take(4)
        .map(|f| {
            let file = f.file.rsplit('/').next().unwrap_or("").to_owned();
            (f.function.clone(), (file, f.line))
        })
        .collect();
    assert_eq!(
        chain,
        vec![
            ("main.leaf".to_owned(), src("LEAF_CALLS_REPORT")),
            ("main.inlined".to_owned(), src("INLINED_CALLS_LEAF")),
            ("main.middle".to_owned(), src("MIDDLE_CALLS_INLINED")),
            ("main.main".to_owned(), src("MAIN_CALLS_MIDDLE")),
        ]
    );
    // Our expansion of leaf's caller has the inline frame.
    let (lines, _) = sym.symbolize(main[1].pc).expect("inlined");
    assert_eq!(lines.iter().map(|l| &*l.function).collect::<Vec<_>>(), ["main.inlined", "main.middle"]);
    assert_eq!(main.last().map(|f| f.function.as_str()), Some("runtime.goexit"));

    // The goroutine: through sort's (partly inlined) functions.
    let goroutine = runtime_frames(&out, "goroutine");
    compare(&sym, &goroutine, "goroutine");
    let names: Vec<&str> = goroutine.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(names.first(), Some(&"main.sortWithCallback.func1"));
    assert!(names.iter().any(|n| n.starts_with("sort.")), "{names:?}");
    assert!(names.contains(&"main.sortWithCallback"), "{names:?}");
    assert_eq!(names.last(), Some(&"runtime.goexit"));
    assert_eq!(goroutine[0].line, line_of(GOCHAIN, "LESS_CALLS_REPORT"));
}

#[test]
fn unstripped_pure_go_binary_uses_only_the_function_table() {
    if !have("go") {
        return;
    }
    let dir = test_dir("go-full");
    let bin = go_build(&dir, "gochain", &[]);
    let out = run(&mut Command::new(&bin));
    let sym = FileSymbolizer::load(&FileSource::new(&bin), &DebugConfig::default()).expect("load");
    // DWARF and symbols would only cost memory: no code outside Go's.
    assert_eq!(sym.info().dwarf, None, "{:?}", sym.info());
    assert_eq!(sym.info().symbols, profiler_elf::SymbolSource::None);
    compare(&sym, &runtime_frames(&out, "main"), "main");
    compare(&sym, &runtime_frames(&out, "goroutine"), "goroutine");
}

#[test]
fn cgo_binary_names_go_and_c_frames() {
    if !have("go") || !have("gcc") {
        return;
    }
    let dir = test_dir("go-cgo");
    std::fs::write(dir.join("main.go"), CGO_MAIN).expect("write");
    std::fs::write(dir.join("chain.c"), CGO_C).expect("write");
    std::fs::write(dir.join("go.mod"), "module example.com/cgochain\ngo 1.21\n").expect("write");
    for (name, flags, c_named) in [("cgo", &[][..], true), ("cgo-stripped", &["-ldflags=-s -w"][..], false)] {
        let bin = dir.join(name);
        run(Command::new("go")
            .current_dir(&dir)
            .env("CGO_ENABLED", "1")
            .arg("build")
            .args(flags)
            .arg("-o")
            .arg(&bin)
            .arg("."));
        let out = run(&mut Command::new(&bin));
        let sym = FileSymbolizer::load(&FileSource::new(&bin), &DebugConfig::default()).expect("load");
        // The Go frames above and below the C ones, from pclntab.
        let frames = runtime_frames(&out, "cgo");
        compare(&sym, &frames, name);
        let names: Vec<&str> = frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(names.first(), Some(&"main.goCallback"), "{names:?}");
        assert!(names.contains(&"main.main"), "{names:?}");
        // The C frame, from DWARF (not in a stripped binary: c_entry is
        // not exported).
        let base = hex_values(&out, "base")[0];
        let ra = hex_values(&out, "ra")[0];
        let call = elf_vaddr(&bin, base, ra) - 1;
        match sym.symbolize(call) {
            Some((lines, source)) => {
                assert!(c_named, "{name}: {lines:?}");
                assert_eq!(source, LineSource::Dwarf);
                assert_eq!(
                    short(&lines),
                    vec![("c_entry".to_owned(), "chain.c".to_owned(), line_of(CGO_C, "C_ENTRY_CALLS_MIDDLE"))]
                );
            }
            None => assert!(!c_named, "{name}: c_entry not named"),
        }
    }
}
