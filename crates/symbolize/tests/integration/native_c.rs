//! C built `-O2 -g` with an always-inline function in a known chain: the
//! inline frame with file and line from DWARF in the file, from a debug
//! file found by `.gnu_debuglink` (next to the file, in `.debug/`, under a
//! debug root) and by build id under a debug root.

use std::path::{Path, PathBuf};
use std::process::Command;

use profiler_symbolize::{DebugConfig, DwarfOrigin, FileSource, FileSymbolizer, LineSource};

use crate::support::{compile, copy, elf_vaddr, have, hex_values, line_of, run, short, test_dir};

pub const CHAIN_C: &str = include_str!("data/chain.c");

/// The chain program built in `dir`, and the ELF addresses of the two
/// recorded calls (leaf's return address - 1, middle's - 1).
pub struct Chain {
    pub bin: PathBuf,
    pub calls: [u64; 2],
}

pub fn build_chain(dir: &Path) -> Chain {
    let bin = compile(dir, "gcc", "chain.c", CHAIN_C, "chain", &["-O2", "-g"]);
    let out = run(&mut Command::new(&bin));
    let base = hex_values(&out, "base")[0];
    let ras = hex_values(&out, "ra");
    assert_eq!(ras.len(), 2, "{out}");
    let calls = [elf_vaddr(&bin, base, ras[0]) - 1, elf_vaddr(&bin, base, ras[1]) - 1];
    Chain { bin, calls }
}

/// What the two calls must symbolize to.
fn expected() -> [Vec<(String, String, u32)>; 2] {
    let at = |f: &str, marker: &str| (f.to_owned(), "chain.c".to_owned(), line_of(CHAIN_C, marker));
    [vec![at("helper", "HELPER_CALLS_LEAF"), at("middle", "MIDDLE_CALLS_HELPER")], vec![at("top", "TOP_CALLS_MIDDLE")]]
}

fn check(sym: &FileSymbolizer, chain: &Chain, source: LineSource, what: &str) {
    for (call, want) in chain.calls.iter().zip(expected()) {
        let (lines, got_source) =
            sym.symbolize(*call).unwrap_or_else(|| panic!("{what}: {call:#x} not symbolized ({:?})", sym.info()));
        assert_eq!(short(&lines), want, "{what}: {call:#x}");
        assert_eq!(got_source, source, "{what}");
    }
}

#[test]
fn inline_frames_from_dwarf_in_the_file() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("c-inline");
    let chain = build_chain(&dir);
    let sym = FileSymbolizer::load(&FileSource::new(&chain.bin), &DebugConfig::default()).expect("load");
    assert_eq!(sym.info().dwarf, Some(DwarfOrigin::InFile));
    check(&sym, &chain, LineSource::Dwarf, "-O2 -g");

    // Without DWARF (use_dwarf off): the ELF symbol of the containing
    // function only.
    let no_dwarf = DebugConfig { use_dwarf: false, ..DebugConfig::default() };
    let sym = FileSymbolizer::load(&FileSource::new(&chain.bin), &no_dwarf).expect("load");
    let (lines, source) = sym.symbolize(chain.calls[0]).expect("symbol");
    assert_eq!(source, LineSource::Symbols);
    assert_eq!(short(&lines), vec![("middle".to_owned(), String::new(), 0)]);
}

/// `objcopy --only-keep-debug`, `strip`, and optionally
/// `objcopy --add-gnu-debuglink`: returns (stripped binary, debug file).
fn split(dir: &Path, bin: &Path, link: bool) -> (PathBuf, PathBuf) {
    let debug = dir.join("chain.debug");
    run(Command::new("objcopy").arg("--only-keep-debug").arg(bin).arg(&debug));
    let stripped = dir.join("chain.stripped");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(bin));
    if link {
        // The link records the file name and the CRC of the debug file.
        run(Command::new("objcopy").current_dir(dir).arg("--add-gnu-debuglink=chain.debug").arg(&stripped));
    }
    (stripped, debug)
}

fn roots(root: &Path) -> DebugConfig {
    DebugConfig { use_dwarf: true, debug_roots: vec![root.to_owned()], ..DebugConfig::default() }
}

#[test]
fn stripped_with_debuglink_is_fully_symbolized() {
    if !have("gcc") || !have("objcopy") || !have("strip") {
        return;
    }
    let dir = test_dir("c-debuglink");
    let chain = build_chain(&dir);
    let (stripped, debug) = split(&dir, &chain.bin, true);
    let nowhere = roots(&dir.join("no-debug-root"));

    // 1. Next to the file.
    let sym = FileSymbolizer::load(&FileSource::new(&stripped), &nowhere).expect("load");
    assert_eq!(sym.info().dwarf, Some(DwarfOrigin::DebugFile));
    assert_eq!(sym.info().debug_file.as_deref(), Some(debug.as_path()));
    check(&sym, &chain, LineSource::DebugFile, "debuglink next to the file");

    // 2. In `.debug/` next to the file, opened through another path (as
    // through /proc/PID/map_files) with the process's view of its path.
    let d2 = dir.join("dotdebug");
    copy(&stripped, &d2.join("bin/chain"));
    copy(&debug, &d2.join("bin/.debug/chain.debug"));
    let source = FileSource {
        open_path: d2.join("bin/chain"),
        path: "/bin/chain".into(),
        root: Some(d2.clone()),
        memory: None,
        identity: None,
        handle: None,
    };
    let sym = FileSymbolizer::load(&source, &nowhere).expect("load");
    check(&sym, &chain, LineSource::DebugFile, ".debug/ under the process root");

    // 3. Under a debug root: <root>/<dir of the file>/chain.debug.
    let d3 = dir.join("root3");
    copy(&stripped, &d3.join("opt/app/chain"));
    copy(&debug, &d3.join("debugroot/opt/app/chain.debug"));
    let source = FileSource {
        open_path: d3.join("opt/app/chain"),
        path: "/opt/app/chain".into(),
        root: None,
        memory: None,
        identity: None,
        handle: None,
    };
    let sym = FileSymbolizer::load(&source, &roots(&d3.join("debugroot"))).expect("load");
    check(&sym, &chain, LineSource::DebugFile, "debug root + directory");

    // 4. A debug file with the right name and the wrong CRC is refused.
    let d4 = dir.join("badcrc");
    copy(&stripped, &d4.join("chain"));
    let mut bad = std::fs::read(&debug).expect("read");
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    std::fs::write(d4.join("chain.debug"), bad).expect("write");
    let sym = FileSymbolizer::load(&FileSource::new(d4.join("chain")), &nowhere).expect("load");
    assert_eq!(sym.info().dwarf, None);
    assert!(sym.info().debug_file.is_none());
    // No DWARF, no .symtab, and these functions are not exported.
    assert_eq!(sym.symbolize(chain.calls[0]), None);
}

#[test]
fn stripped_with_build_id_under_a_debug_root() {
    if !have("gcc") || !have("objcopy") || !have("strip") {
        return;
    }
    let dir = test_dir("c-build-id");
    let chain = build_chain(&dir);
    let (stripped, debug) = split(&dir, &chain.bin, false);
    let id = profiler_elf::ElfFile::open(&stripped)
        .expect("open")
        .gnu_build_id()
        .expect("notes")
        .expect("gcc writes a build id");
    let root = dir.join("debugroot");
    copy(&debug, &root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..])));
    let sym = FileSymbolizer::load(&FileSource::new(&stripped), &roots(&root)).expect("load");
    assert_eq!(sym.info().dwarf, Some(DwarfOrigin::DebugFile));
    check(&sym, &chain, LineSource::DebugFile, "build id");
    // The debug file's .symtab names functions outside the DWARF too.
    assert_eq!(sym.info().symbols, profiler_elf::SymbolSource::Symtab);

    // A process in a container: the debug root is looked up under its
    // root first.
    let container = dir.join("container");
    copy(&stripped, &container.join("usr/bin/chain"));
    copy(&debug, &container.join("usr/lib/debug/.build-id").join(&id[..2]).join(format!("{}.debug", &id[2..])));
    let source = FileSource {
        open_path: container.join("usr/bin/chain"),
        path: "/usr/bin/chain".into(),
        root: Some(container.clone()),
        memory: None,
        identity: None,
        handle: None,
    };
    let sym = FileSymbolizer::load(&source, &DebugConfig::default()).expect("load");
    check(&sym, &chain, LineSource::DebugFile, "build id in the process root");

    // Without any debug root holding it: nothing.
    let sym = FileSymbolizer::load(&FileSource::new(&stripped), &roots(&dir.join("empty"))).expect("load");
    assert_eq!(sym.info().dwarf, None);
}

#[test]
fn compressed_debug_sections() {
    if !have("gcc") || !have("objcopy") {
        return;
    }
    let dir = test_dir("c-compressed");
    let chain = build_chain(&dir);
    // zlib-gnu: legacy .zdebug_* sections; zlib (gABI) and zstd:
    // SHF_COMPRESSED sections with an Elf64_Chdr.
    for kind in ["zlib-gnu", "zlib", "zstd"] {
        let out = dir.join(format!("chain.{kind}"));
        run(Command::new("objcopy").arg(format!("--compress-debug-sections={kind}")).arg(&chain.bin).arg(&out));
        let sym = FileSymbolizer::load(&FileSource::new(&out), &DebugConfig::default()).expect("load");
        assert!(sym.info().dwarf_error.is_none(), "{kind}: {:?}", sym.info());
        assert_eq!(sym.info().dwarf, Some(DwarfOrigin::InFile), "{kind}");
        check(&sym, &chain, LineSource::Dwarf, kind);
    }
}

#[test]
fn dwz_supplementary_file() {
    if !have("gcc") || !have("dwz") {
        return;
    }
    let dir = test_dir("c-dwz");
    let chain = build_chain(&dir);
    // A second program sharing most of the debug information.
    let other = compile(&dir, "gcc", "chain.c", CHAIN_C, "other", &["-O2", "-g", "-DOTHER"]);
    // Common DIEs move to common.debug; each file gets a
    // .gnu_debugaltlink naming it (relative to the file) and its build id.
    run(Command::new("dwz")
        .current_dir(&dir)
        .args(["-m", "common.debug", "-M", "common.debug"])
        .arg(&chain.bin)
        .arg(&other));
    let altlink = profiler_elf::ElfFile::open(&chain.bin).expect("open").section_by_name(".gnu_debugaltlink").is_some();
    if !altlink {
        eprintln!("SKIPPED: dwz found nothing to share");
        return;
    }
    let sym = FileSymbolizer::load(&FileSource::new(&chain.bin), &DebugConfig::default()).expect("load");
    assert!(sym.info().dwarf_error.is_none(), "{:?}", sym.info());
    check(&sym, &chain, LineSource::Dwarf, "dwz");

    // Found by build id under a debug root when the path does not lead
    // to it.
    let id = profiler_elf::ElfFile::open(dir.join("common.debug"))
        .expect("open")
        .gnu_build_id()
        .expect("notes")
        .expect("dwz writes a build id");
    let root = dir.join("debugroot");
    copy(&dir.join("common.debug"), &root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..])));
    let moved = dir.join("moved");
    copy(&chain.bin, &moved.join("chain"));
    let sym = FileSymbolizer::load(&FileSource::new(moved.join("chain")), &roots(&root)).expect("load");
    check(&sym, &chain, LineSource::Dwarf, "dwz by build id");
}

/// ld.so's entry point (`_start`, then `_dl_start_user`: the outermost
/// frames of a process's start-up) is named `_start` from the untyped
/// label of its debug file's `.symtab` (libc6-dbg); without that file
/// it has no name.
#[test]
fn ld_so_entry_point_is_named_from_its_debug_file() {
    let path = Path::new("/lib64/ld-linux-x86-64.so.2");
    let f = FileSymbolizer::load(&FileSource::new(path), &DebugConfig::default()).expect("load ld.so");
    let entry = profiler_elf::ElfFile::open(path).expect("open").entry();
    if f.info().debug_file.is_none() {
        // scripts/install-deps.sh installs it: under CI a missing one fails.
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
            "no debug file for ld.so under CI=true (apt-get install libc6-dbg)"
        );
        eprintln!("SKIPPED: no debug file for ld.so (apt-get install libc6-dbg)");
        return;
    }
    for vaddr in [entry, entry + 8] {
        let (lines, _) = f.symbolize(vaddr).unwrap_or_else(|| panic!("{vaddr:#x} unnamed"));
        assert_eq!(lines.last().map(|l| &*l.function), Some("_start"), "{vaddr:#x}: {lines:?}");
    }
}
