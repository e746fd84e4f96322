//! Builds the unwind table of each file named on the command line and
//! prints how long it took, the peak RSS, and what the table holds.
//!
//! `cargo run --release --example unwind_table_stats -p profiler-elf -- FILE...`

use std::time::Instant;

use profiler_elf::{ElfFile, RuleInterner, UnwindTable};

/// `VmHWM` (peak resident set size) of this process in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: unwind_table_stats FILE...");
        std::process::exit(2);
    }
    let mut interner = RuleInterner::new();
    for path in files {
        let rss_before = peak_rss_kib().unwrap_or(0);
        let t0 = Instant::now();
        let elf = match ElfFile::open(&path) {
            Ok(elf) => elf,
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let table = UnwindTable::from_elf(&elf);
        let elapsed = t0.elapsed();
        let rss_after = peak_rss_kib().unwrap_or(0);
        let s = &table.stats;
        {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for d in table.deltas.iter() {
                d.address.hash(&mut h);
                d.rule.hash(&mut h);
            }
            println!("HASH {:x} {:?}", h.finish(), table.stats.rows);
        }
        println!("{path}");
        println!("  file size          {:>12} bytes", elf.data().len());
        println!("  time               {:>12.1} ms", elapsed.as_secs_f64() * 1e3);
        println!("  peak RSS (VmHWM)   {:>12} KiB (before: {rss_before} KiB)", rss_after);
        println!("  eh_frame           {:>12} bytes ({:?})", s.eh_frame_bytes, s.eh_frame_source);
        println!("  debug_frame        {:>12} bytes", s.debug_frame_bytes);
        println!(
            "  CIEs / FDEs        {:>12} / {} eh_frame + {} debug_frame",
            s.cies, s.fdes_eh_frame, s.fdes_debug_frame
        );
        println!("  FDEs signal/empty/overlapped {} / {} / {}", s.fdes_signal, s.fdes_empty, s.fdes_overlapped);
        println!("  rows               {:>12}", s.rows.total());
        println!(
            "    cfa {} cfa_deref {} plt {} signal {} stop {} invalid {}",
            s.rows.cfa, s.rows.cfa_deref, s.rows.plt, s.rows.signal, s.rows.stop, s.rows.invalid
        );
        for (reason, n) in s.invalid_by_reason() {
            println!("    invalid {:<16} {n}", reason.as_str());
        }
        println!("  deltas             {:>12} ({} bytes held)", table.deltas.len(), table.deltas.heap_bytes());
        if s.deltas_dropped > 0 {
            println!("  deltas dropped     {:>12}", s.deltas_dropped);
        }
        println!("  distinct rules     {:>12}", table.distinct_rules());
        println!("  errors             {:>12}", s.error_count);
        for e in &s.errors {
            println!("    {e}");
        }
        match table.deltas.rules().iter().try_for_each(|&r| interner.intern(r).map(drop)) {
            Ok(()) => println!("  interned so far    {:>12} distinct rules", interner.len()),
            Err(e) => println!("  interning: {e}"),
        }
    }
}
