//! Erlang (the BEAM) on the real eBPF programs: the emulator is detected
//! with a notice naming its release, and a pc sampled in the JIT's code
//! is named `module:function/arity` from the node's code index
//! (`profile.frame.type` `beam`). Erlang frames are not unwound yet: the
//! JIT's code has no unwind tables, so a stack ends at its innermost
//! Erlang function, which is what these tests check.
//!
//! The workload `workloads/beam/chain.erl` (compiled by the test with
//! `erlc`) runs two Erlang processes: `a/1 -> b/1 -> c/1 -> leaf_spin/2`
//! and a `lists:sort/2` comparator calling `cmp_spin/2`. Run with the
//! host's `erl` (Debian 12: OTP 25, package `erlang-base`) and with
//! Debian 13's (OTP 27) in its root file system; skipped when missing,
//! except under CI=true.

use profiler_agent::AgentConfig;
use profiler_tests::{in_ci, profile_with, serial, RuntimeRoot};
use profiler_trace::{FrameKind, Trace};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long each node is profiled.
const SECONDS: u64 = 6;
/// Sampling frequency.
const HZ: u32 = 99;

/// A running node, killed when dropped.
struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Compiles the workload into the root's `/tmp` (or the host's) with the
/// root's `erlc`; the directory as the node sees it.
fn compile(root: &RuntimeRoot) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/beam/chain.erl");
    let dir = root.temp_dir().join(format!("ep-beam-{}", std::process::id()));
    let host_dir = root.host_path(&dir);
    std::fs::create_dir_all(&host_dir).unwrap();
    std::fs::copy(&src, host_dir.join("chain.erl")).unwrap();
    let out = root
        .command("/usr/bin/erlc")
        .arg("-o")
        .arg(&dir)
        .arg(dir.join("chain.erl"))
        .output()
        .unwrap_or_else(|e| panic!("running erlc: {e}"));
    assert!(out.status.success(), "erlc failed: {}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// Starts `chain:main()` and waits until the pid is the emulator.
fn start(root: &RuntimeRoot, dir: &Path) -> Node {
    let child = root
        .command("/usr/bin/erl")
        .args(["-noshell", "-pa"])
        .arg(dir)
        .args(["-eval", "chain:main()"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting erl: {e}"));
    let node = Node(child);
    let pid = node.0.id();
    let start = Instant::now();
    loop {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.to_string_lossy().ends_with("beam.smp") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "erl did not exec beam.smp: {exe:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Loaded and running its two processes.
    std::thread::sleep(Duration::from_millis(1500));
    node
}

/// A normal scheduler thread: `1_scheduler` (OTP 25), `erts_sched_1`
/// (OTP 27).
fn is_scheduler(name: &str) -> bool {
    name.ends_with("_scheduler") || name.starts_with("erts_sched_")
}

/// The innermost user frame of a trace.
fn leaf(trace: &Trace) -> Option<&profiler_trace::Frame> {
    trace.frames.iter().find(|f| f.kind != FrameKind::Kernel)
}

fn is_jit(frame: &profiler_trace::Frame) -> bool {
    frame.kind == FrameKind::Beam || frame.mapping.as_ref().is_some_and(|m| m.path.contains("memfd:vmem"))
}

/// Profiles the node of `root`, asserts the notice of release `otp`,
/// and that the leaves in JIT code are named, the chain's and the
/// comparator's leaf among them.
fn leaves_are_named(root: RuntimeRoot, otp: u32) {
    let _serial = serial();
    let dir = compile(&root);
    let node = start(&root, &dir);
    let pid = node.0.id();
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let mut notices = Vec::new();
    let Some((traces, stats)) = profile_with(config, |agent| {
        std::thread::sleep(Duration::from_secs(SECONDS));
        notices = agent.notices();
    }) else {
        return;
    };
    drop(node);
    let notice =
        notices.iter().find(|n| n.starts_with("BEAM ")).unwrap_or_else(|| panic!("no BEAM notice: {notices:?}"));
    assert!(notice.starts_with(&format!("BEAM OTP {otp} (ERTS ")), "{notice}");
    let on_schedulers: Vec<&Trace> =
        traces.iter().filter(|t| t.process.pid.0 == pid && is_scheduler(&t.thread_name)).collect();
    let jit: Vec<&profiler_trace::Frame> = on_schedulers.iter().filter_map(|t| leaf(t)).filter(|f| is_jit(f)).collect();
    let named: Vec<&str> = jit.iter().filter(|f| f.kind == FrameKind::Beam).filter_map(|f| f.function_name()).collect();
    // The leaves' lines: the clauses of leaf_spin/2 and cmp_spin/2 in the
    // file as erlc was given it.
    let source = std::fs::read_to_string(root.host_path(&dir.join("chain.erl"))).unwrap();
    let lines_of = |prefix: &str| -> Vec<u32> {
        (1..).zip(source.lines()).filter(|(_, l)| l.starts_with(prefix)).map(|(n, _)| n).collect()
    };
    let file = dir.join("chain.erl").to_string_lossy().into_owned();
    for (function, clauses) in
        [("chain:leaf_spin/2", lines_of("leaf_spin(")), ("chain:cmp_spin/2", lines_of("cmp_spin("))]
    {
        assert_eq!(clauses.len(), 2, "{function}'s two clauses in chain.erl");
        for f in jit.iter().filter(|f| f.function_name() == Some(function)) {
            let line = &f.lines[0];
            // OTP 27's compiler keeps the path relative to its working
            // directory (/ under chroot), OTP 25's as given.
            let recorded = line.file.as_deref().unwrap_or_default();
            assert!(recorded == file || Some(recorded) == file.strip_prefix('/'), "{function}: {line:?}, not {file}");
            assert!(clauses.contains(&line.line), "{function} at line {}, its clauses at {clauses:?}", line.line);
        }
    }
    let count = |name: &str| named.iter().filter(|n| **n == name).count();
    let (leaf_spin, cmp_spin) = (count("chain:leaf_spin/2"), count("chain:cmp_spin/2"));
    let mut others: Vec<&str> = named.iter().copied().filter(|n| !n.starts_with("chain:")).collect();
    others.sort_unstable();
    others.dedup();
    eprintln!(
        "OTP {otp}: {} scheduler samples, {} with their leaf in JIT code, {} named ({leaf_spin} leaf_spin/2, \
         {cmp_spin} cmp_spin/2); other functions: {others:?}; notice: {notice}",
        on_schedulers.len(),
        jit.len(),
        named.len()
    );
    let expected = (SECONDS * u64::from(HZ)) as usize;
    assert!(
        jit.len() >= expected / 2,
        "too few samples in JIT code: {} of about {}: {stats:?}",
        jit.len(),
        2 * expected
    );
    // Every leaf in a loaded module's code is named; the JIT's shared
    // fragments (outside every module) are not.
    assert!(named.len() * 100 >= jit.len() * 95, "{} of {} JIT leaves named", named.len(), jit.len());
    // Each Erlang process is busy in its leaf (two schedulers, one each).
    assert!(leaf_spin * 4 >= named.len(), "chain:leaf_spin/2 in {leaf_spin} of {}", named.len());
    assert!(cmp_spin * 10 >= named.len(), "chain:cmp_spin/2 in {cmp_spin} of {}", named.len());
    assert!(named.iter().all(|n| n.contains(':') && n.contains('/')), "module:function/arity: {named:?}");
    // The agent's counters say as much (all its samples were this node's).
    assert!(stats.runtimes.get("beam", "frames_named") >= named.len() as u64, "{:?}", stats.runtimes);
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}

/// The host's OTP (Debian 12: 25), or the release of EP_RUNTIME_ROOT's
/// root (the runtime matrix, tests/runtimes/matrix.py).
#[test]
fn names_jit_leaves() {
    let root = RuntimeRoot::from_env();
    if !root.host_path(Path::new("/usr/bin/erl")).exists() {
        assert!(!in_ci(), "erl is required under CI=true (apt-get install erlang-base)");
        eprintln!("SKIPPED: no /usr/bin/erl (apt-get install erlang-base)");
        return;
    }
    let release = root
        .command("/usr/bin/erl")
        .args(["-noshell", "-eval", "io:put_chars(erlang:system_info(otp_release)), halt()."])
        .output()
        .expect("erl runs");
    let otp: u32 = String::from_utf8_lossy(&release.stdout).trim().parse().expect("an OTP release");
    leaves_are_named(root, otp);
}

/// Debian 13's OTP 27, in its root file system.
#[test]
fn otp_27_of_debian_13_names_jit_leaves() {
    let Some(root) = RuntimeRoot::debian("trixie", "/usr/bin/erl") else { return };
    leaves_are_named(root, 27);
}
