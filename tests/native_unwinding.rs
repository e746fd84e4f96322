//! Native unwinding without frame pointers, on the real eBPF programs:
//! workloads built with `-O2 -fomit-frame-pointer` (and C++, Rust) whose
//! call chains must come through whole, down to the thread's root.

use profiler_agent::AgentConfig;
use profiler_tests::{build_c_workload, profile_with, serial, Workload};
use profiler_trace::Trace;
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;

#[test]
fn debug_chain() {
    let _serial = serial();
    let exe = build_c_workload("native_chain.c", &["-O2", "-fomit-frame-pointer", "-pthread"]);
    let w = Workload::spawn(&mut Command::new(&exe));
    std::thread::sleep(Duration::from_millis(200));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(3))) else { return };
    eprintln!("{stats:#?}");
    eprintln!("{} traces", traces.len());
    let _ = traces.iter().map(|t: &Trace| t.frames.len()).sum::<usize>();
}
