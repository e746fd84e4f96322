//! Memory: what the symbolizer accounts for a file against the heap it
//! really holds (measured by this test binary's counting allocator, per
//! thread), the byte budget of `NativeSymbolizer`, DWARF over the size
//! limit served from symbols, symbols answering while DWARF loads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use profiler_elf::source::table_key_of_path;
use profiler_elf::ElfFile;
use profiler_symbolize::{
    DebugConfig, DwarfError, FileSource, FileSymbolizer, LineSource, NativeConfig, NativeStats, NativeSymbolizer,
    Reason, Symbolized,
};
use profiler_trace::{Pid, TableKey};

use crate::native_c::build_chain;
use crate::support::{compile, have, short, test_dir};

/// Counts the heap each thread allocates minus what it frees: exact for
/// work done on one thread with no frees of another thread's blocks
/// (each test measures on its own thread, tests run in parallel).
pub struct PerThread;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    let _ = LIVE.try_with(|l| {
        let now = l.get() + delta;
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

/// The most heap this thread held since the last call (from what it holds now).
pub fn peak_since_last() -> i64 {
    let now = LIVE.with(Cell::get);
    PEAK.with(|p| p.replace(now))
}

// SAFETY: forwards every call to `System` unchanged; the counter is a
// const-initialized thread local without destructor (no allocation).
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's guarantees, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's guarantees, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Heap this thread holds now.
pub fn live() -> i64 {
    LIVE.with(Cell::get)
}

/// Up to `max` addresses 8 bytes into the functions of `bin`.
fn function_addresses(bin: &Path, max: usize) -> Vec<u64> {
    let elf = ElfFile::open(bin).expect("open");
    let symbols = elf.symbols().expect("symbols");
    let all: Vec<u64> = symbols.iter().filter(|(_, size, _)| *size > 8).map(|(a, _, _)| a + 8).collect();
    let step = (all.len() / max).max(1);
    all.into_iter().step_by(step).take(max).collect()
}

/// A symbolizer config whose budget stays `bytes` (it does not grow for
/// the work it causes: the tests count what a fixed budget gives up).
fn fixed_budget(bytes: u64, debug: DebugConfig) -> NativeConfig {
    NativeConfig { max_file_bytes: bytes, max_file_bytes_busy: 0, debug, ..NativeConfig::default() }
}

/// `vaddr` of `path` symbolized, after its load when that is needed.
fn symbolize_loaded(s: &mut NativeSymbolizer, id: TableKey, vaddr: u64, path: &Path) -> Symbolized {
    let answer = s.symbolize(id, vaddr, || FileSource::new(path));
    if answer != Symbolized::Pending {
        return answer;
    }
    assert!(s.wait_for_loads(Duration::from_secs(600)));
    s.symbolize(id, vaddr, || FileSource::new(path))
}

/// Checks that what `FileSymbolizer::cost` accounts covers the heap the
/// file holds, after loading and after lookups (the lazily parsed DWARF
/// units), without overstating it wildly.
fn check_account(what: &str, source: &FileSource, config: &DebugConfig, addrs: &[u64]) {
    let before = live();
    let file = FileSymbolizer::load(source, config).expect("load");
    let held = live() - before;
    let cost = file.cost() as i64;
    assert!(cost >= held, "{what}: loaded, holds {held} bytes, accounts {cost}");
    let mut named = 0;
    for &a in addrs {
        if file.symbolize(a).is_some() {
            named += 1;
        }
    }
    assert!(named > addrs.len() / 2, "{what}: {named} of {} named", addrs.len());
    let held = live() - before;
    let cost = file.cost() as i64;
    eprintln!("{what}: {held} bytes held, {cost} accounted ({:?})", file.info().dwarf);
    assert!(cost >= held, "{what}: after {} lookups, holds {held} bytes, accounts {cost}", addrs.len());
    assert!(cost <= 3 * held + (256 << 10), "{what}: accounts {cost} for {held} bytes held");
    drop(file);
}

/// A C program of 12 units of 40 functions each (units of one size,
/// unlike a Rust program's, where the standard library's unit is most
/// of the DWARF), built `-O1 -g`.
fn many_units_program(dir: &Path) -> PathBuf {
    let mut args = vec!["-O1".to_string(), "-g".to_string()];
    let mut decls = String::from("#include <stdlib.h>\n");
    let mut main = String::from("int main(int argc, char **argv) {\n    int x = argc;\n");
    for unit in 0..12 {
        let mut src = String::new();
        for f in 0..40 {
            src += &format!(
                "__attribute__((noinline)) int u{unit}_f{f}(int x) {{\n    int s = 0;\n    \
                 for (int i = 0; i < x; i++) {{\n        s += i * {f} + (s >> 3);\n    }}\n    return s;\n}}\n"
            );
            decls += &format!("int u{unit}_f{f}(int x);\n");
            main += &format!("    x ^= u{unit}_f{f}(x & 7);\n");
        }
        let name = format!("unit{unit}.c");
        std::fs::write(dir.join(&name), src).expect("write unit");
        args.push(name);
    }
    main += "    return x == 12345 ? EXIT_FAILURE : EXIT_SUCCESS;\n}\n";
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(dir, "gcc", "main.c", &(decls + &main), "many-units", &args)
}

/// A Rust program with the standard library's debug information (many
/// units, inline frames), built `-O -g`.
fn rust_program(dir: &Path) -> Option<PathBuf> {
    if !have("rustc") {
        return None;
    }
    let src = "use std::collections::HashMap;\n\
               fn main() {\n\
                   let mut m = HashMap::new();\n\
                   for (i, a) in std::env::args().enumerate() { m.insert(a, i); }\n\
                   let mut v: Vec<_> = m.into_iter().collect();\n\
                   v.sort();\n\
                   println!(\"{v:?} {}\", format!(\"{:?}\", std::time::Instant::now()));\n\
               }\n";
    Some(compile(dir, "rustc", "prog.rs", src, "prog", &["-O", "-g"]))
}

#[test]
fn accounted_bytes_cover_the_heap_held() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-account");
    let chain = build_chain(&dir);
    let config = DebugConfig::default();
    let addrs = function_addresses(&chain.bin, 1000);
    check_account("C -O2 -g", &FileSource::new(&chain.bin), &config, &addrs);
    if let Some(bin) = rust_program(&dir) {
        // Large enough DWARF for the index to matter: let it load.
        let config = DebugConfig { max_dwarf_bytes: 1 << 30, ..DebugConfig::default() };
        let addrs = function_addresses(&bin, 2000);
        check_account("Rust -O -g", &FileSource::new(&bin), &config, &addrs);
        // Symbols only.
        let config = DebugConfig { use_dwarf: false, ..DebugConfig::default() };
        check_account("Rust, symbols", &FileSource::new(&bin), &config, &addrs);
    }
}

#[test]
fn dwarf_over_the_limit_is_served_from_symbols() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-dwarf-limit");
    let chain = build_chain(&dir);
    // The unit index of one small unit is a few hundred bytes.
    let small = DebugConfig { max_dwarf_bytes: 64, ..DebugConfig::default() };
    let file = FileSymbolizer::load(&FileSource::new(&chain.bin), &small).expect("load");
    assert_eq!(file.info().dwarf, None);
    assert!(
        matches!(file.info().dwarf_error.as_deref(), Some(DwarfError::TooLarge { limit: 64, .. })),
        "{:?}",
        file.info()
    );
    let (lines, source) = file.symbolize(chain.calls[1]).expect("named");
    assert_eq!(source, LineSource::Symbols);
    assert_eq!(short(&lines), vec![("top".to_owned(), String::new(), 0)]);

    let mut s = NativeSymbolizer::new(NativeConfig { debug: small, ..NativeConfig::default() }).expect("start");
    let id = table_key_of_path(&chain.bin).expect("id");
    assert_eq!(s.symbolize(id, chain.calls[1], || FileSource::new(&chain.bin)), Symbolized::Pending);
    assert!(s.wait_for_loads(Duration::from_secs(600)));
    match s.symbolize(id, chain.calls[1], || panic!("loaded")) {
        Symbolized::Lines { source, .. } => assert_eq!(source, LineSource::Symbols),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.stats().dwarf_too_large, 1);
}

#[test]
fn the_byte_budget_holds_over_many_files() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-budget");
    let chain = build_chain(&dir);
    // Distinct files (distinct keys) with the same code.
    let files: Vec<_> = (0..8u8)
        .map(|i| {
            let p = dir.join(format!("copy{i}"));
            let mut data = std::fs::read(&chain.bin).expect("read");
            data.push(i);
            std::fs::write(&p, data).expect("write");
            (table_key_of_path(&p).expect("id"), p)
        })
        .collect();
    // What one loaded, looked-up file accounts.
    let one = {
        let f = FileSymbolizer::load(&FileSource::new(&files[0].1), &DebugConfig::default()).expect("load");
        f.symbolize(chain.calls[0]);
        f.symbolize(chain.calls[1]);
        f.cost()
    };
    let budget = 3 * one;
    let mut s = NativeSymbolizer::new(fixed_budget(budget, DebugConfig::default())).expect("start");
    for round in 0..2 {
        for (id, path) in &files {
            for (i, &call) in chain.calls.iter().enumerate() {
                // A new address each round: never from the address cache.
                let vaddr = call - round;
                let answer = symbolize_loaded(&mut s, *id, vaddr, path);
                assert!(matches!(answer, Symbolized::Lines { .. }), "round {round}, call {i}: {answer:?}");
                let st = s.stats();
                assert!(st.file_bytes <= budget, "{} > {budget}: {st:?}", st.file_bytes);
            }
        }
    }
    let st = s.stats();
    assert!(st.file_evictions >= 5, "{st:?}");
    assert!(st.files_loaded <= 3, "{st:?}");

    // A budget smaller than one file: it answers, then is given up for a
    // while instead of being loaded again at every address.
    let mut s = NativeSymbolizer::new(fixed_budget(one / 4, DebugConfig::default())).expect("start");
    let (id, path) = &files[0];
    assert_eq!(s.symbolize(*id, chain.calls[0], || FileSource::new(path)), Symbolized::Pending);
    assert!(s.wait_for_loads(Duration::from_secs(600)));
    assert_eq!(s.stats().file_bytes, 0);
    assert_eq!(
        s.symbolize(*id, chain.calls[1], || panic!("not loaded again")),
        Symbolized::Unknown(Reason::LoadFailed)
    );
}

#[test]
fn parsed_units_are_given_up_before_the_file() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-shed");
    let bin = many_units_program(&dir);
    let debug = DebugConfig { max_dwarf_bytes: 1 << 30, ..DebugConfig::default() };
    let addrs = function_addresses(&bin, 2000);
    // Every answer with no budget, and what the file takes loaded and
    // once every lookup parsed its unit.
    let unlimited = FileSymbolizer::load(&FileSource::new(&bin), &debug).expect("load");
    let loaded = unlimited.cost();
    let expected: Vec<_> = addrs.iter().map(|&a| unlimited.symbolize(a)).collect();
    let grown = unlimited.cost();
    drop(unlimited);
    // Room for half of the parsed units: the others are given up as
    // lookups go, and the file itself stays.
    let budget = loaded + (grown - loaded) / 2;
    let id = table_key_of_path(&bin).expect("id");
    let mut s = NativeSymbolizer::new(fixed_budget(budget, debug)).expect("start");
    let mut shed_before = 0;
    // Twice over: the second round finds the units of the first's
    // addresses given up, parses them again, gives others up.
    for round in 0..2u64 {
        for (&a, want) in addrs.iter().zip(&expected) {
            // A new address each round: never from the address cache.
            let vaddr = a - round;
            let answer = symbolize_loaded(&mut s, id, vaddr, &bin);
            if round == 0 {
                let got = match &answer {
                    Symbolized::Lines { lines, .. } => Some(lines.to_vec()),
                    _ => None,
                };
                let want = want.as_ref().map(|(lines, _)| lines.clone());
                assert_eq!(got, want, "{a:#x}");
            } else {
                assert!(matches!(answer, Symbolized::Lines { .. }) || want.is_none(), "{vaddr:#x}: {answer:?}");
            }
            let st = s.stats();
            assert!(st.file_bytes <= budget, "{} > {budget}: {st:?}", st.file_bytes);
        }
        let st = s.stats();
        assert!(st.dwarf_units_shed > shed_before, "round {round}: {st:?}");
        shed_before = st.dwarf_units_shed;
    }
    let st = s.stats();
    assert_eq!((st.file_evictions, st.reloads, st.loads_requested, st.loads_failed), (0, 0, 1, 0), "{st:?}");
    assert_eq!(st.files_loaded, 1, "{st:?}");
}

/// Copies of `bin`, each with its name appended: distinct files
/// (distinct keys) with the same code.
fn distinct_copies<const N: usize>(dir: &Path, bin: &Path, names: [&str; N]) -> [(TableKey, PathBuf); N] {
    names.map(|name| {
        let p = dir.join(name);
        let mut data = std::fs::read(bin).expect("read");
        data.extend_from_slice(name.as_bytes());
        std::fs::write(&p, data).expect("write");
        (table_key_of_path(&p).expect("id"), p)
    })
}

/// An address inside `u{unit}_f{function}` of [`many_units_program`].
fn unit_function_address(elf: &ElfFile, unit: u32, function: u32) -> u64 {
    elf.symbol_address(&format!("u{unit}_f{function}")).expect("function symbol") + 8
}

/// Looks `vaddr` up in `file`, which must name it `u{unit}_f{function}`,
/// within `budget`; the stats after it.
fn look_within(
    s: &mut NativeSymbolizer,
    (id, path): &(TableKey, PathBuf),
    (unit, function): (u32, u32),
    vaddr: u64,
    budget: u64,
) -> NativeStats {
    let answer = symbolize_loaded(s, *id, vaddr, path);
    let Symbolized::Lines { lines, .. } = &answer else {
        panic!("u{unit}_f{function}: {answer:?}");
    };
    assert_eq!(&*lines.last().expect("a line").function, format!("u{unit}_f{function}"));
    let st = s.stats();
    assert!(st.file_bytes <= budget, "{} > {budget}: {st:?}", st.file_bytes);
    st
}

/// The units given up for the budget are the least recently used of all
/// files: two units of one file used at every step outlive the cold units
/// another file's lookups sweep through, however recently that other
/// file was used. (Ordered file by file, the first file's older unit was
/// given up at every step and parsed again at the next.)
#[test]
fn the_hot_units_of_one_file_outlive_the_cold_units_of_another() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-shed-order");
    let bin = many_units_program(&dir);
    let debug = DebugConfig { max_dwarf_bytes: 1 << 30, ..DebugConfig::default() };
    let [hot, cold] = distinct_copies(&dir, &bin, ["hot", "cold"]);
    let elf = ElfFile::open(&bin).expect("open");
    let address = |unit, function| unit_function_address(&elf, unit, function);
    // What a file takes loaded, and what each unit's first lookup adds
    // (its tables, the names it interns).
    let (loaded, unit_max) = {
        let f = FileSymbolizer::load(&FileSource::new(&bin), &debug).expect("load");
        let loaded = f.cost();
        let mut unit_max = 0;
        for unit in 0..12 {
            let before = f.cost();
            assert!(f.symbolize(address(unit, 0)).is_some(), "unit {unit}");
            unit_max = unit_max.max(f.cost() - before);
        }
        (loaded, unit_max)
    };
    // Both files, the hot file's two units, room for about 4 of the cold
    // file's 12 (and the names 40 more functions of each hot unit intern).
    let budget = 2 * loaded + 6 * unit_max + 8192;
    let mut s = NativeSymbolizer::new(fixed_budget(budget, debug)).expect("start");
    let mut look = |file: &(TableKey, PathBuf), unit, function| {
        look_within(&mut s, file, (unit, function), address(unit, function), budget)
    };
    // Both files loaded, nothing parsed by a lookup yet: the first lookup
    // of each answers from symbols while DWARF loads.
    look(&hot, 11, 39);
    let before = look(&cold, 11, 39);
    // Three sweeps of the cold file's units, each step a new address in
    // each of the hot file's two units: never from the address cache.
    let steps = 36;
    for step in 0..steps {
        look(&hot, 0, step % 40);
        look(&hot, 1, step % 40);
        look(&cold, step % 12, step / 12);
    }
    let st = look(&cold, 11, 39);
    // The hot units are parsed once; every cold step parses its unit
    // again (it was given up since the sweep's last visit).
    assert_eq!(st.dwarf_units_parsed - before.dwarf_units_parsed, 2 + u64::from(steps), "{st:?}");
    assert!(st.dwarf_units_shed - before.dwarf_units_shed >= u64::from(steps) - 12, "{st:?}");
    assert_eq!((st.file_evictions, st.loads_requested, st.loads_failed), (0, 2, 0), "{st:?}");
}

/// A file looked up once and cheap to load again is dropped whole before
/// the units of a file in use are given up (libm's debug file, 1.9 MB of
/// decompressed DWARF, made the 20 Hz churn parse libpython's units again
/// and again); with `cheap_reload` zero it stays and the busy file's
/// units are parsed again instead.
#[test]
fn a_file_looked_up_once_is_dropped_before_the_units_of_a_file_in_use() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-cold-file");
    let bin = many_units_program(&dir);
    let debug = DebugConfig { max_dwarf_bytes: 1 << 30, ..DebugConfig::default() };
    let [stale, busy] = distinct_copies(&dir, &bin, ["stale", "busy"]);
    let elf = ElfFile::open(&bin).expect("open");
    let address = |unit, function| unit_function_address(&elf, unit, function);
    // Three sweeps of the busy file's 12 units, a new function each time.
    let sweeps: Vec<(u32, u32)> = (0..3).flat_map(|round| (0..12).map(move |unit| (unit, round))).collect();
    // What the busy file holds once every sweep is done: the budget.
    let budget = {
        let f = FileSymbolizer::load(&FileSource::new(&bin), &debug).expect("load");
        for &(unit, function) in &sweeps {
            assert!(f.symbolize(address(unit, function)).is_some(), "u{unit}_f{function}");
        }
        f.cost() + 4096
    };
    let run = |cheap_reload: Duration| {
        let config = NativeConfig { cheap_reload, ..fixed_budget(budget, debug.clone()) };
        let mut s = NativeSymbolizer::new(config).expect("start");
        let mut look = |file: &(TableKey, PathBuf), unit, function| {
            look_within(&mut s, file, (unit, function), address(unit, function), budget)
        };
        look(&stale, 5, 39);
        for &(unit, function) in &sweeps {
            look(&busy, unit, function);
        }
        // The stale file answers again (loaded again if it was dropped).
        look(&stale, 6, 39)
    };
    let st = run(Duration::from_secs(60));
    assert_eq!((st.cold_files_dropped, st.file_evictions, st.reloads), (1, 1, 1), "{st:?}");
    assert_eq!((st.dwarf_units_reparsed, st.loads_requested, st.loads_failed), (0, 3, 0), "{st:?}");
    let st = run(Duration::ZERO);
    assert_eq!((st.cold_files_dropped, st.file_evictions, st.loads_requested), (0, 0, 2), "{st:?}");
    assert!(st.dwarf_units_reparsed >= 12, "{st:?}");
}

/// Shedding parsed units cannot help a file whose newest unit alone does
/// not fit next to what its load takes: the file is dropped.
#[test]
fn a_file_its_lookups_grow_over_the_budget_is_loaded_again() {
    let dir = test_dir("memory-regrow");
    let Some(bin) = rust_program(&dir) else {
        return; // skipped without rustc, failed under CI (have)
    };
    let debug = DebugConfig { max_dwarf_bytes: 1 << 30, ..DebugConfig::default() };
    let addrs = function_addresses(&bin, 2000);
    // What it takes loaded, and after every lookup (the DWARF units parsed).
    let (loaded, grown) = {
        let f = FileSymbolizer::load(&FileSource::new(&bin), &debug).expect("load");
        let loaded = f.cost();
        for &a in &addrs {
            f.symbolize(a);
        }
        (loaded, f.cost())
    };
    // Its load fits in 3/4 of the budget; its lookups do not fit.
    let budget = loaded / 3 * 4 + 4096;
    assert!(grown > budget + (budget >> 3), "lookups grow {loaded} to {grown} only: the test needs more");
    let id = table_key_of_path(&bin).expect("id");
    let mut s = NativeSymbolizer::new(fixed_budget(budget, debug)).expect("start");
    let mut named = 0;
    for &a in &addrs {
        let answer = symbolize_loaded(&mut s, id, a, &bin);
        assert_ne!(answer, Symbolized::Unknown(Reason::LoadFailed), "{a:#x}: given up");
        if matches!(answer, Symbolized::Lines { .. }) {
            named += 1;
        }
        let st = s.stats();
        assert!(st.file_bytes <= budget, "{} > {budget}: {st:?}", st.file_bytes);
    }
    let st = s.stats();
    assert!(named > addrs.len() / 2, "{named} of {} named: {st:?}", addrs.len());
    assert!(st.file_evictions >= 1 && st.reloads >= 1, "{st:?}");
    assert_eq!(st.loads_failed, 0, "{st:?}");
}

#[test]
fn symbols_answer_while_dwarf_loads() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("memory-two-steps");
    let chain = build_chain(&dir);
    let id = table_key_of_path(&chain.bin).expect("id");
    let call = chain.calls[1];
    let mut s = NativeSymbolizer::new(NativeConfig::default()).expect("start");
    let hold = s.hold_dwarf_loads();
    assert_eq!(s.symbolize(id, call, || FileSource::new(&chain.bin)), Symbolized::Pending);
    // The symbols step arrives (no timing assumption: poll, generously).
    let deadline = Instant::now() + Duration::from_secs(600);
    let lines = loop {
        match s.symbolize(id, call, || panic!("one load")) {
            Symbolized::Lines { lines, source } => {
                assert_eq!(source, LineSource::Symbols);
                break lines;
            }
            Symbolized::Pending if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(short(&lines), vec![("top".to_owned(), String::new(), 0)]);
    // Not cached: the next answer comes from the file again.
    assert!(matches!(
        s.symbolize(id, call, || panic!("one load")),
        Symbolized::Lines { source: LineSource::Symbols, .. }
    ));
    let st = s.stats();
    assert_eq!((st.loads_done, st.files_loaded, st.address_hits), (0, 1, 0));
    drop(hold);
    assert!(s.wait_for_loads(Duration::from_secs(600)));
    match s.symbolize(id, call, || panic!("loaded")) {
        Symbolized::Lines { lines, source } => {
            assert_eq!(source, LineSource::Dwarf);
            assert_eq!(lines[0].line, crate::support::line_of(crate::native_c::CHAIN_C, "TOP_CALLS_MIDDLE"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.stats().loads_done, 1);
}

#[test]
fn the_vdso_is_read_from_memory() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let Some(range) = maps.lines().find(|l| l.ends_with("[vdso]")).map(|l| {
        let r = l.split_whitespace().next().expect("range");
        let (a, b) = r.split_once('-').expect("a-b");
        (u64::from_str_radix(a, 16).expect("hex"), u64::from_str_radix(b, 16).expect("hex"))
    }) else {
        eprintln!("SKIPPED: no vDSO");
        return;
    };
    let source = FileSource::in_memory(Pid(std::process::id()), range.0, range.1, "[vdso]");
    let file = FileSymbolizer::load(&source, &DebugConfig::default()).expect("load");
    // Its own table says where clock_gettime is.
    let bytes = {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0u8; (range.1 - range.0) as usize];
        std::fs::File::open("/proc/self/mem").expect("mem").read_exact_at(&mut b, range.0).expect("read");
        b
    };
    let elf = ElfFile::from_bytes(bytes).expect("elf");
    let (addr, _) = elf.symbols().expect("symbols").find("__vdso_clock_gettime").expect("__vdso_clock_gettime");
    let (lines, source) = file.symbolize(addr + 4).expect("named");
    assert_eq!(source, LineSource::Symbols);
    assert!(lines[0].function.contains("clock_gettime"), "{:?}", lines[0].function);
}
