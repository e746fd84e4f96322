//! Loads the programs, samples every CPU for two seconds at 99 Hz and
//! prints the counters and the first samples: a quick check that the
//! programs load and attach on this kernel. Run as root:
//! `cargo run -p profiler-bpf --example sample_dump`.

use profiler_bpf::{Sampler, SamplerOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn main() {
    let sampler = match Sampler::load(&SamplerOptions { samples_per_second: 99, ..Default::default() }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let reader = sampler.sample_reader().expect("reader");
    let stop = AtomicBool::new(false);
    let mut shown = 0;
    let mut total = 0u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            stop.store(true, Ordering::Relaxed);
        });
        reader
            .run(
                || Duration::from_millis(100),
                &stop,
                |sample| {
                    total += 1;
                    if shown < 5 {
                        shown += 1;
                        println!("{sample:x?}");
                    }
                },
            )
            .expect("read");
    });
    println!("received {total}; counters {:?}", sampler.counters().unwrap());
}
