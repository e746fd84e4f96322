//! The background loader: pending answers while a file loads, bounds,
//! drops, failures, the off switch. No timing thresholds: tests hold the
//! worker or wait for it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use profiler_elf::source::table_key_of_path;
use profiler_elf::ElfFile;
use profiler_symbolize::{demangle, FileSource, LineSource, NativeConfig, NativeSymbolizer, Reason, Symbolized};
use profiler_trace::TableKey;

use crate::native_c::build_chain;
use crate::support::{have, in_ci, run, short, test_dir};

/// Generous: a safety net against a hung worker, not a measurement.
const WAIT: Duration = Duration::from_secs(600);

fn source(path: &Path) -> impl FnOnce() -> FileSource + '_ {
    move || FileSource::new(path)
}

/// The largest shared library of the Rust toolchain (librustc_driver,
/// ~150 MB with a full .symtab), or `None`.
fn large_library() -> Option<PathBuf> {
    let sysroot = run(Command::new("rustc").arg("--print").arg("sysroot"));
    let lib = Path::new(sysroot.trim()).join("lib");
    std::fs::read_dir(&lib).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("librustc_driver-") && n.ends_with(".so"))
    })
}

#[test]
fn a_large_file_is_pending_then_named() {
    if !have("rustc") {
        return;
    }
    let Some(lib) = large_library() else {
        assert!(!in_ci(), "no librustc_driver in the Rust sysroot: required under CI=true");
        eprintln!("SKIPPED: no librustc_driver in the Rust sysroot; under CI=true this fails");
        return;
    };
    // An address inside a sized function, and its expected name (the
    // table's choice among aliases: identical functions are folded).
    let elf = ElfFile::open(&lib).expect("open");
    let symbols = elf.symbols().expect("symbols");
    let (addr, _, _) =
        symbols.iter().filter(|(_, size, name)| *size > 64 && name.starts_with("_ZN")).nth(1000).expect("a function");
    let vaddr = addr + 8;
    let want = demangle(&symbols.lookup(vaddr).expect("named").0).into_owned();
    let file_id = table_key_of_path(&lib).expect("file id");
    drop(elf);

    let mut s = NativeSymbolizer::new(NativeConfig::default()).expect("start");
    let hold = s.hold_loads();
    assert_eq!(s.symbolize(file_id, vaddr, source(&lib)), Symbolized::Pending);
    // Right after: still loading, and the source is not asked for again.
    assert_eq!(s.symbolize(file_id, vaddr, || panic!("no second load request")), Symbolized::Pending);
    assert_eq!(s.symbolize(file_id, vaddr + 1, || panic!("no second load request")), Symbolized::Pending);
    let st = s.stats();
    assert_eq!((st.loads_requested, st.pending, st.loads_done), (1, 3, 0));
    drop(hold);
    assert!(s.wait_for_loads(WAIT), "load finished");
    match s.symbolize(file_id, vaddr, || panic!("loaded")) {
        Symbolized::Lines { lines, source } => {
            assert_eq!(source, LineSource::Symbols);
            assert_eq!(short(&lines), vec![(want, String::new(), 0)]);
        }
        other => panic!("expected lines, got {other:?}"),
    }
    // Again: from the address cache.
    assert!(matches!(s.symbolize(file_id, vaddr, || panic!("cached")), Symbolized::Lines { .. }));
    let st = s.stats();
    assert_eq!((st.loads_done, st.files_loaded, st.address_hits), (1, 1, 1));
    assert!(st.file_bytes > 1 << 20, "{st:?}");
}

#[test]
fn bounds_drops_failures_and_the_off_switch() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("background-bounds");
    let chain = build_chain(&dir);
    // Three distinct files (distinct content, distinct keys).
    let mut files = Vec::new();
    for i in 0..3u8 {
        let p = dir.join(format!("copy{i}"));
        let mut data = std::fs::read(&chain.bin).expect("read");
        data.push(i);
        std::fs::write(&p, data).expect("write");
        files.push((table_key_of_path(&p).expect("id"), p));
    }
    let call = chain.calls[1];

    // Off: nothing is loaded.
    let mut off = NativeSymbolizer::new(NativeConfig { enabled: false, ..NativeConfig::default() }).expect("new");
    assert!(!off.enabled());
    assert_eq!(off.symbolize(files[0].0, call, || panic!("disabled")), Symbolized::Unknown(Reason::Disabled));

    // One file at most: loading a second evicts the first.
    let mut s = NativeSymbolizer::new(NativeConfig { max_files: 1, ..NativeConfig::default() }).expect("new");
    for (id, path) in &files[..2] {
        assert_eq!(s.symbolize(*id, call, source(path)), Symbolized::Pending);
        assert!(s.wait_for_loads(WAIT));
        let Symbolized::Lines { lines, source } = s.symbolize(*id, call, || panic!("loaded")) else {
            panic!("not named");
        };
        assert_eq!(source, LineSource::Dwarf);
        assert_eq!(&*lines[0].function, "top");
    }
    let st = s.stats();
    assert_eq!((st.files_loaded, st.file_evictions, st.loads_done), (1, 1, 2));
    // The evicted file's answers stay cached; a new address reloads it.
    assert!(matches!(s.symbolize(files[0].0, call, || panic!("cached")), Symbolized::Lines { .. }));
    assert_eq!(s.symbolize(files[0].0, call + 1, source(&files[0].1)), Symbolized::Pending);
    assert!(s.wait_for_loads(WAIT));

    // A full queue drops the request (counted) and answers QueueFull.
    let mut s = NativeSymbolizer::new(NativeConfig { queue_capacity: 1, ..NativeConfig::default() }).expect("new");
    let hold = s.hold_loads();
    let answers: Vec<Symbolized> = files.iter().map(|(id, path)| s.symbolize(*id, call, source(path))).collect();
    // The worker holds at most one request, the queue one more: of
    // three, at least one is dropped. Which ones is a race (the worker
    // may take the first request before or after the second arrives).
    assert_eq!(answers[0], Symbolized::Pending);
    assert_eq!(answers.len(), 3);
    let full = answers.iter().filter(|a| **a == Symbolized::Unknown(Reason::QueueFull)).count();
    assert!((1..=2).contains(&full), "{answers:?}");
    let expected = |a: &Symbolized| matches!(a, Symbolized::Pending | Symbolized::Unknown(Reason::QueueFull));
    assert!(answers.iter().all(expected), "{answers:?}");
    assert_eq!(s.stats().queue_drops, full as u64);
    drop(hold);
    assert!(s.wait_for_loads(WAIT));
    // A dropped request, asked again later, loads.
    let dropped = answers.iter().position(|a| *a == Symbolized::Unknown(Reason::QueueFull)).expect("a drop");
    let (id, path) = &files[dropped];
    assert_eq!(s.symbolize(*id, call, source(path)), Symbolized::Pending);
    assert!(s.wait_for_loads(WAIT));
    assert!(matches!(s.symbolize(*id, call, || panic!("loaded")), Symbolized::Lines { .. }));

    // A file that cannot be opened fails, and is not retried at once.
    let missing = TableKey([7; 32]);
    let nowhere = dir.join("missing");
    assert_eq!(s.symbolize(missing, 0x1000, source(&nowhere)), Symbolized::Pending);
    assert!(s.wait_for_loads(WAIT));
    assert_eq!(s.symbolize(missing, 0x1000, || panic!("not retried yet")), Symbolized::Unknown(Reason::LoadFailed));
    assert_eq!(s.stats().loads_failed, 1);
    // An address outside every source.
    assert_eq!(s.symbolize(*id, 0xdead_0000, || panic!("loaded")), Symbolized::Unknown(Reason::UnknownAddress));
}

#[test]
fn files_from_bytes_and_path_fallback() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("background-insert");
    let chain = build_chain(&dir);
    let call = chain.calls[1];
    let mut s = NativeSymbolizer::new(NativeConfig::default()).expect("new");

    // A file the caller has as bytes (the vDSO): installed directly,
    // answered at once.
    let bytes = std::fs::read(&chain.bin).expect("read");
    let id = profiler_elf::source::table_key_of_bytes(&bytes);
    let elf = std::sync::Arc::new(ElfFile::from_bytes(bytes).expect("elf"));
    let file = profiler_symbolize::FileSymbolizer::from_elf(
        elf,
        &FileSource::new("[vdso]"),
        &profiler_symbolize::DebugConfig::default(),
    );
    s.insert(id, file);
    let Symbolized::Lines { lines, .. } = s.symbolize(id, call, || panic!("inserted")) else {
        panic!("not named");
    };
    assert_eq!(&*lines[0].function, "top");
    assert_eq!(s.stats().files_loaded, 1);

    // /proc/PID/map_files not readable: the path under the root is used.
    let other = TableKey([9; 32]);
    let source = || FileSource {
        open_path: dir.join("no-such-map-file"),
        path: "/chain".into(),
        root: Some(dir.clone()),
        memory: None,
        identity: None,
        handle: None,
    };
    assert_eq!(s.symbolize(other, call, source), Symbolized::Pending);
    assert!(s.wait_for_loads(WAIT));
    assert!(matches!(s.symbolize(other, call, || panic!("loaded")), Symbolized::Lines { .. }));
}
