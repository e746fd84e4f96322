//! Where the agent's memory goes, file by file: heap held and heap peak
//! of each per-file structure the agent builds, measured with a counting
//! global allocator (exact live bytes, not RSS), next to what the
//! symbolizer accounts for it ([`FileSymbolizer::cost`]).
//!
//! `cargo run --release -p profiler-symbolize --example memory_breakdown -- [--lookups N] [--no-dwarf] [--max-dwarf-mib N] (--system | FILE...)`
//!
//! Per file, one after the other (each dropped before the next):
//! - `elf symbols`: `profiler_elf::SymbolIndex` (the one symbol index,
//!   12 bytes a function: what `load` holds for the file's symbols);
//! - `unwind`: the file's stack delta table while it is built;
//! - `load`: `FileSymbolizer::load` (symbols, DWARF unit index, debug
//!   file), held and peak, and its accounted cost;
//! - `lookups`: N addresses (function symbols spread over the file, 8
//!   bytes in; default 2,000) looked up cold: what lazily parsed DWARF
//!   adds, and the accounted cost after.
//!
//! `--system` takes every executable file mapped by a running process
//! (root reads them all), the biggest first.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::atomic::{AtomicIsize, Ordering};

use profiler_elf::{ElfFile, GoPclntab};
use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer};

/// Counts live heap bytes and their high-water mark.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(delta: isize) {
    let now = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; only counters
// are updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        grew(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f`; returns its result, the heap it left allocated and the
/// highest heap above the start while it ran (bytes).
fn measure<T>(f: impl FnOnce() -> T) -> (T, i64, i64) {
    let start = LIVE.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let t = f();
    let held = LIVE.load(Ordering::Relaxed) - start;
    let peak = PEAK.load(Ordering::Relaxed) - start;
    (t, held as i64, peak as i64)
}

/// RssFile of this process, KiB.
fn rss_file() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn mib(b: i64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

/// Up to `max` function addresses spread over the file, 8 bytes in.
fn addresses(elf: &ElfFile, max: usize) -> Vec<u64> {
    let mut addrs: Vec<u64> = match elf.symbols() {
        Ok(s) if !s.is_empty() => s.iter().filter(|(_, size, _)| *size > 8).map(|(a, _, _)| a + 8).collect(),
        _ => match GoPclntab::find(elf) {
            Ok(Some(t)) => t.funcs().map(|f| f.entry + 8).collect(),
            _ => Vec::new(),
        },
    };
    addrs.dedup();
    // 0: every function.
    let max = if max == 0 { addrs.len() } else { max };
    let step = (addrs.len() / max.max(1)).max(1);
    addrs.into_iter().step_by(step).take(max).collect()
}

/// Every file mapped executable by a running process: (path to open,
/// path as the process sees it), one per (device, inode), biggest first.
fn system_files() -> Vec<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
                continue;
            }
            let open = format!("/proc/{pid}/map_files/{}", f[0]);
            let Ok(meta) = std::fs::metadata(&open) else {
                continue;
            };
            if seen.insert((meta.dev(), meta.ino())) {
                out.push((meta.len(), open, f[5].to_owned()));
            }
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.0));
    out.into_iter().map(|(_, o, p)| (o, p)).collect()
}

#[derive(Default)]
struct Totals {
    symbols: i64,
    load: i64,
    lookups: i64,
    cost: i64,
    peak: i64,
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut lookups = 2_000;
    if let Some(i) = args.iter().position(|a| a == "--lookups") {
        lookups = args.get(i + 1).and_then(|n| n.parse().ok()).expect("--lookups N");
        args.drain(i..i + 2);
    }
    let mut debug = DebugConfig::default();
    if let Some(i) = args.iter().position(|a| a == "--no-dwarf") {
        debug.use_dwarf = false;
        args.remove(i);
    }
    if let Some(i) = args.iter().position(|a| a == "--max-dwarf-mib") {
        debug.max_dwarf_bytes = args.get(i + 1).and_then(|n| n.parse::<u64>().ok()).expect("--max-dwarf-mib N") << 20;
        args.drain(i..i + 2);
    }
    let files: Vec<(String, String)> = if args.iter().any(|a| a == "--system") {
        system_files()
    } else {
        args.iter().map(|a| (a.clone(), a.clone())).collect()
    };
    println!(
        "{:<60} {:>7} | {:>7} {:>7} | {:>7} {:>7} | {:>7} {:>7} {:>7} | {:>7} {:>7} | {:>6} | sources",
        "file (MiB below)",
        "size",
        "elfsym",
        "peak",
        "unwind",
        "peak",
        "load",
        "peak",
        "cost",
        "+lookup",
        "cost",
        "RssF",
    );
    let mut t = Totals::default();
    for (open, path) in files {
        let size = std::fs::metadata(&open).map(|m| m.len() as i64).unwrap_or(0);
        let Ok(elf) = ElfFile::open(&open) else {
            continue;
        };
        let (syms, sym_held, sym_peak) = measure(|| elf.symbols());
        drop(syms);
        let (table, _, unwind_peak) = measure(|| elf.unwind_table());
        let unwind_held = table.deltas.heap_bytes() as i64;
        drop(table);
        let addrs = addresses(&elf, lookups);
        drop(elf);
        let rss0 = rss_file();
        let mut source = FileSource::new(&open);
        source.path = path.clone();
        let (loaded, load_held, load_peak) = measure(|| FileSymbolizer::load(&source, &debug));
        let Ok(file) = loaded else {
            continue;
        };
        let cost_loaded = file.cost() as i64;
        let (_, lookup_held, lookup_peak) = measure(|| {
            for &a in &addrs {
                std::hint::black_box(file.symbolize(a));
            }
        });
        let cost = file.cost() as i64;
        let rss1 = rss_file();
        if let Some((index, units, [program, files, info])) = file.dwarf_accounting() {
            eprintln!(
                "  {path}: dwarf index {} MiB; lookups parsed {units} units: {} MiB of line programs, {files} file names, {} MiB of .debug_info",
                mib(index as i64),
                mib(program as i64),
                mib(info as i64)
            );
        }
        let info = file.info();
        let sources = format!(
            "{}{}{:?}({})",
            if info.go_pclntab.is_some() { "go " } else { "" },
            match info.dwarf {
                Some(d) => format!("dwarf:{d:?} "),
                None => String::new(),
            },
            info.symbols,
            info.symbol_count
        );
        drop(file);
        println!(
            "{:<60} {:>7} | {:>7} {:>7} | {:>7} {:>7} | {:>7} {:>7} {:>7} | {:>7} {:>7} | {:>6} | {}",
            path.chars().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<String>(),
            mib(size),
            mib(sym_held),
            mib(sym_peak),
            mib(unwind_held),
            mib(unwind_peak),
            mib(load_held),
            mib(load_peak),
            mib(cost_loaded),
            mib(lookup_held),
            mib(cost),
            mib((rss1 - rss0) << 10),
            sources
        );
        t.symbols += sym_held;
        t.load += load_held;
        t.lookups += lookup_held;
        t.cost += cost;
        t.peak = t.peak.max(load_peak.max(lookup_peak + load_held));
    }
    println!(
        "total: elf symbols {} MiB; symbolizer: loaded {} MiB + lookups {} MiB = {} MiB held, {} MiB accounted; largest single-file peak {} MiB",
        mib(t.symbols),
        mib(t.load),
        mib(t.lookups),
        mib(t.load + t.lookups),
        mib(t.cost),
        mib(t.peak)
    );
}
