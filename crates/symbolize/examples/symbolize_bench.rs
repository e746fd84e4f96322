//! Measures native symbolization of one file: load time and memory, cold
//! lookups (first lookup of each address: lazy DWARF parsing included),
//! and cached lookups through `NativeSymbolizer`.
//!
//! `cargo run --release -p profiler-symbolize --example symbolize_bench -- [--no-dwarf] FILE [ADDRESSES]`
//!
//! Addresses are taken from the file's function symbols (or Go function
//! table): up to ADDRESSES (default 20,000) functions, 8 bytes in. Run one
//! file per process for clean memory figures.

use std::time::Instant;

use profiler_elf::source::table_key_of_path;
use profiler_elf::{ElfFile, GoPclntab};
use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer, NativeConfig, NativeSymbolizer, Symbolized};

/// (RssAnon, RssFile) in KiB.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("RssAnon:"), field("RssFile:"))
}

fn addresses(path: &str, max: usize) -> Vec<u64> {
    let elf = ElfFile::open(path).expect("open");
    let mut addrs: Vec<u64> = match elf.symbols() {
        Ok(s) if !s.is_empty() => s.iter().filter(|(_, size, _)| *size > 8).map(|(a, _, _)| a + 8).collect(),
        _ => match GoPclntab::find(&elf) {
            Ok(Some(t)) => t.funcs().map(|f| f.entry + 8).collect(),
            _ => Vec::new(),
        },
    };
    addrs.dedup();
    let step = (addrs.len() / max.max(1)).max(1);
    addrs.into_iter().step_by(step).take(max).collect()
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let use_dwarf = args.next_if_eq("--no-dwarf").is_none();
    let debug = DebugConfig { use_dwarf, ..DebugConfig::default() };
    let path = args.next().expect("usage: symbolize_bench [--no-dwarf] FILE [ADDRESSES]");
    let max: usize = args.next().map_or(20_000, |a| a.parse().expect("count"));
    let addrs = addresses(&path, max);

    let (anon0, file0) = rss();
    let t = Instant::now();
    let sym = FileSymbolizer::load(&FileSource::new(&path), &debug).expect("load");
    let load = t.elapsed();
    let (anon1, file1) = rss();
    println!("file: {path}");
    println!("info: {:?}", sym.info());
    println!(
        "load: {:.1} ms, RssAnon +{} KiB, RssFile +{} KiB, estimated cost {} KiB",
        load.as_secs_f64() * 1e3,
        anon1.saturating_sub(anon0),
        file1.saturating_sub(file0),
        sym.cost() / 1024
    );

    let t = Instant::now();
    let mut named = 0;
    let mut lines = 0;
    for &a in &addrs {
        if let Some((l, _)) = sym.symbolize(a) {
            named += 1;
            lines += l.len();
        }
    }
    let cold = t.elapsed();
    let (anon2, file2) = rss();
    println!(
        "cold lookups: {} addresses, {named} named ({lines} lines), {:.2} us each; then RssAnon +{} KiB, RssFile +{} KiB over the load, estimated cost {} KiB",
        addrs.len(),
        cold.as_secs_f64() * 1e6 / addrs.len().max(1) as f64,
        anon2.saturating_sub(anon1),
        file2.saturating_sub(file1),
        sym.cost() / 1024
    );
    drop(sym);

    // Cached lookups through the background symbolizer.
    let id = table_key_of_path(&path).expect("file id");
    let mut native = NativeSymbolizer::new(NativeConfig { debug, ..NativeConfig::default() }).expect("start");
    let t = Instant::now();
    let first = native.symbolize(id, addrs[0], || FileSource::new(&path));
    assert_eq!(first, Symbolized::Pending);
    native.wait_for_loads(std::time::Duration::from_secs(600));
    let background = t.elapsed();
    for &a in &addrs {
        native.symbolize(id, a, || unreachable!());
    }
    let rounds = (2_000_000 / addrs.len().max(1)).max(1);
    let t = Instant::now();
    let mut n = 0u64;
    for _ in 0..rounds {
        for &a in &addrs {
            if let Symbolized::Lines { lines, .. } = native.symbolize(id, a, || unreachable!()) {
                n += lines.len() as u64;
            }
        }
    }
    let warm = t.elapsed();
    let lookups = (rounds * addrs.len()) as f64;
    println!(
        "background load (request to installed): {:.1} ms; cached lookups: {:.1} M/s ({} lines seen); stats {:?}",
        background.as_secs_f64() * 1e3,
        lookups / warm.as_secs_f64() / 1e6,
        n,
        native.stats()
    );
}
