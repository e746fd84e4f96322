//! Measures [`ElfFile::defines_symbols`] (one pass over both symbol
//! tables for the interpreters' marker symbols): `cargo run --release -p
//! profiler-elf --example symbol_scan_speed -- FILE...`. Prints the
//! first run (the file's pages first touched through this map), the
//! fastest and the median of 20 runs per file.
use profiler_elf::ElfFile;
use std::time::Instant;

/// The runtimes' marker symbols (`Runtime::marker_symbols`).
const MARKERS: &[&str] = &[
    "_PyEval_EvalFrameDefault",
    "ruby_current_vm_ptr",
    "ruby_current_execution_context_ptr",
    "zend_execute_ex",
    "Perl_runops_standard",
    "v8dbg_SmiTagMask",
];

fn main() {
    for path in std::env::args().skip(1) {
        let elf = ElfFile::open(std::path::Path::new(&path)).expect("open");
        let mut found = Vec::new();
        let mut times: Vec<f64> = (0..20)
            .map(|_| {
                let start = Instant::now();
                found = elf.defines_symbols(MARKERS);
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let first = times[0];
        times.sort_by(f64::total_cmp);
        println!(
            "{path}: first {first:.2} ms, fastest {:.2} ms, median {:.2} ms; found {found:?}",
            times[0], times[10]
        );
    }
}
