//! Processes any local user can start, shaped to make the agent's naming
//! of their frames expensive (docs/untrusted-input.md, "Process
//! memory"): the agent profiles them beside genuine workloads, their
//! frames go unnamed once they cost more than their budget, they are
//! told once, and the genuine workloads keep their whole named chains.
//! Each run prints the agent's CPU time and peak memory for the record
//! (measured by `make bench`, never asserted).

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{in_ci, serial, start_agent, user_frames, wait_for_traces, Workload};
use profiler_trace::{FrameKind, Trace};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
/// The share of a genuine workload's samples at its leaf that must carry
/// its whole chain.
const REQUIRED: f64 = 0.95;
/// The unprivileged user the crafted processes run as.
const NOBODY: u32 = 65534;

/// Builds `workloads/<source>` as `<name>` in a directory of its own that
/// any user can read.
fn build_as(source: &str, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(source);
    let dir = std::env::temp_dir().join(format!("ep-hostile-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-rdynamic", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running gcc: {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// The agent's process (this test's): CPU seconds so far and peak RSS.
fn own_cpu_and_peak() -> (f64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    (profiler_tests::cpu_seconds(std::process::id()), hwm)
}

/// The share of `pid`'s samples whose innermost CPython frame is `chain`'s
/// last function that carry all of `chain`'s functions in order (root
/// first, native frames between them allowed), and how many such samples
/// there were.
fn python_chain_share(traces: &[Trace], pid: u32, chain: &[&str]) -> (f64, usize) {
    let leaf = chain.last().unwrap();
    let (mut at_leaf, mut whole) = (0, 0);
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let python: Vec<Option<String>> =
            user_frames(t).into_iter().filter(|f| f.kind == FrameKind::CPython).map(|f| f.name).collect();
        if python.last().and_then(|n| n.as_deref()) != Some(*leaf) {
            continue;
        }
        at_leaf += 1;
        let names: Vec<&str> = python.iter().filter_map(|n| n.as_deref()).collect();
        if names == chain {
            whole += 1;
        }
    }
    (if at_leaf == 0 { 0.0 } else { whole as f64 / at_leaf as f64 }, at_leaf)
}

/// What one run with a crafted process beside a genuine one gave.
struct Run {
    traces: Vec<Trace>,
    stats: Stats,
    notices: Vec<String>,
    /// How long `Agent::stop` took.
    stop: Duration,
}

/// Profiles `hostile` and `genuine` for `seconds`, then stops the agent.
fn run_beside(hostile: &Workload, genuine: &Workload, seconds: u64) -> Option<Run> {
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![hostile.pid(), genuine.pid()], ..AgentConfig::default() };
    let (cpu_before, _) = own_cpu_and_peak();
    let agent = start_agent(config, traces.clone())?;
    let started = Instant::now();
    wait_for_traces(&traces, Duration::from_secs(seconds), Duration::from_secs(seconds), |_| true);
    let asked = Instant::now();
    agent.stop().expect("reader ran without error");
    let stop = asked.elapsed();
    let (cpu_after, hwm_kib) = own_cpu_and_peak();
    let stats = agent.stats();
    let notices = agent.notices();
    eprintln!(
        "agent: {:.1}% of a core over {:.1} s, VmHWM {} MiB, stop in {} ms; samples {} dropped {} at stop {}",
        100.0 * (cpu_after - cpu_before) / started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64(),
        hwm_kib / 1024,
        stop.as_millis(),
        stats.samples,
        stats.samples_dropped,
        stats.samples_dropped_at_stop,
    );
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    Some(Run { traces, stats, notices, stop })
}

fn system_python() -> Option<PathBuf> {
    let python = PathBuf::from("/usr/bin/python3");
    if python.exists() {
        return Some(python);
    }
    assert!(!in_ci(), "/usr/bin/python3 is required under CI=true");
    eprintln!("SKIPPED: /usr/bin/python3 is not installed; under CI=true this fails");
    None
}

/// CPython's frames looping over code objects that look genuine, with
/// 1,000-character names rewritten all the time and 64 KiB line tables,
/// moved to other code objects at every turn: every sample's frames
/// would cost megabytes of reads. Its frames are left unnamed once over
/// budget (one notice), a genuine CPython beside it keeps its chain, and
/// the agent stops at once.
#[test]
fn a_crafted_cpython_is_held_to_its_budget() {
    let _serial = serial();
    let Some(python) = system_python() else { return };
    let exe = build_as("python/hostile_python.c", "python3.11");
    let hostile = Workload::spawn(Command::new(&exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python/chain.py");
    let genuine = Workload::spawn(Command::new(&python).arg(script).env("PYTHONDONTWRITEBYTECODE", "1"));
    std::thread::sleep(Duration::from_millis(500));
    let Some(run) = run_beside(&hostile, &genuine, 6) else { return };
    let s = &run.stats;
    assert_eq!(s.samples_lost + s.samples_dropped, 0, "the reporter kept up: {s:#?}");
    assert_eq!(s.naming_processes_over, 1, "{s:#?}");
    assert!(s.naming_reads_refused > 0, "{s:#?}");
    let told: Vec<&String> = run.notices.iter().filter(|n| n.contains("over its budget")).collect();
    assert_eq!(told.len(), 1, "{:?}", run.notices);
    assert!(told[0].contains(&format!("process {}", hostile.pid())), "{told:?}");
    // The crafted process was sampled and walked: its made-up frames are
    // there, named or not.
    let crafted: Vec<&Trace> = run.traces.iter().filter(|t| t.process.pid.0 == hostile.pid()).collect();
    assert!(crafted.len() >= 100, "{} samples of the crafted process", crafted.len());
    assert!(crafted.iter().any(|t| t.frames.iter().any(|f| f.kind == FrameKind::CPython)), "walked");
    // The genuine process: its whole chain, and no name of the other's.
    let (share, at_leaf) = python_chain_share(&run.traces, genuine.pid(), &["<module>", "f1", "f2", "f3"]);
    assert!(at_leaf >= 100 && share >= REQUIRED, "genuine chain in {share:.3} of {at_leaf} samples at f3");
    for t in run.traces.iter().filter(|t| t.process.pid.0 == genuine.pid()) {
        assert!(
            t.frames.iter().flat_map(|f| &f.lines).all(|l| !l.function.starts_with("hostile")),
            "a genuine frame named from the crafted process's memory"
        );
    }
    assert!(run.stop < Duration::from_secs(2), "stopped in {:?}", run.stop);
}
