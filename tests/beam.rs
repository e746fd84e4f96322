//! Erlang (the BEAM) on the real eBPF programs: the BEAM unwinder walks
//! the Erlang frames of a scheduler thread from the sampled pc in the
//! JIT's code to the bottom of the Erlang process's stack, then the
//! scheduler's native frames to the thread's root; each Erlang frame is
//! named `module:function/arity` with its file and line from the node's
//! code index (`profile.frame.type` `beam`).
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

/// A frame as the checks print it: `module:function/arity` for an
/// Erlang frame, else the native function or `file+?`.
fn shown(frame: &profiler_trace::Frame) -> String {
    match (frame.function_name(), &frame.mapping) {
        (Some(name), _) if frame.kind == FrameKind::Beam => format!("erl:{name}"),
        (Some(name), _) => name.to_string(),
        (None, Some(m)) => format!("{}+?", m.file_name()),
        (None, None) => "?".to_string(),
    }
}

/// The user frames of a trace, root first.
fn user_frames(trace: &Trace) -> Vec<&profiler_trace::Frame> {
    trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel).collect()
}

/// Whether a scheduler's stack (root first) is whole: native frames from
/// the thread's root (libc's, then the emulator's scheduler loop in
/// beam.smp), then Erlang frames only, every one named
/// `module:function/arity`, ending with `chain` (innermost last).
fn is_whole(frames: &[&profiler_trace::Frame], chain: &[&str]) -> bool {
    let first_erlang = frames.iter().position(|f| f.kind == FrameKind::Beam).unwrap_or(frames.len());
    let (native, erlang) = frames.split_at(first_erlang);
    let file = |f: &profiler_trace::Frame| f.mapping.as_ref().map(|m| m.file_name().to_string()).unwrap_or_default();
    native.len() >= 2
        && native.iter().all(|f| f.kind == FrameKind::Native)
        && file(native[0]).starts_with("libc.so")
        && file(native[native.len() - 1]) == "beam.smp"
        && erlang.len() >= chain.len()
        && erlang
            .iter()
            .all(|f| f.kind == FrameKind::Beam && f.function_name().is_some_and(|n| n.contains(':') && n.contains('/')))
        && erlang[erlang.len() - chain.len()..].iter().zip(chain).all(|(f, want)| f.function_name() == Some(*want))
}

/// Of `pid`'s scheduler samples whose leaf is `chain`'s last function:
/// (at the leaf, whole, a failing stack, a whole stack).
fn completeness(traces: &[Trace], pid: u32, chain: &[&str]) -> (usize, usize, Option<String>, Option<String>) {
    let leaf = chain[chain.len() - 1];
    let (mut at_leaf, mut whole, mut failure, mut example) = (0, 0, None, None);
    for t in traces.iter().filter(|t| t.process.pid.0 == pid && is_scheduler(&t.thread_name)) {
        let frames = user_frames(t);
        if frames.last().and_then(|f| f.function_name()) != Some(leaf) {
            continue;
        }
        at_leaf += 1;
        let text = || frames.iter().map(|f| shown(f)).collect::<Vec<_>>().join(";");
        if is_whole(&frames, chain) {
            whole += 1;
            example.get_or_insert_with(text);
        } else {
            failure.get_or_insert_with(text);
        }
    }
    (at_leaf, whole, failure, example)
}

/// Profiles the node of `root` (release `otp`): the chain's and the
/// comparator's leaf samples carry their whole stacks, every Erlang
/// frame named with its file and line, down to the scheduler thread's
/// root.
fn chains_are_whole(root: RuntimeRoot, otp: u32) {
    let _serial = serial();
    let dir = compile(&root);
    let node = start(&root, &dir);
    let pid = node.0.id();
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let mut notices = Vec::new();
    let mut rss = String::new();
    let Some((traces, stats)) = profile_with(config, |agent| {
        std::thread::sleep(Duration::from_secs(SECONDS));
        notices = agent.notices();
        // The agent runs in this process: its resident memory, the node busy.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        rss = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default().to_string();
    }) else {
        return;
    };
    drop(node);
    assert!(!notices.iter().any(|n| n.starts_with("BEAM ")), "OTP {otp}: {notices:?}");
    // The lines: each function's clauses in the file as erlc was given it.
    let source = std::fs::read_to_string(root.host_path(&dir.join("chain.erl"))).unwrap();
    let lines_of = |prefix: &str| -> Vec<u32> {
        (1..).zip(source.lines()).filter(|(_, l)| l.starts_with(prefix)).map(|(n, _)| n).collect()
    };
    let file = dir.join("chain.erl").to_string_lossy().into_owned();
    let erlang: Vec<&profiler_trace::Frame> =
        traces.iter().filter(|t| t.process.pid.0 == pid).flat_map(|t| &t.frames).collect();
    for (function, clause) in [
        ("chain:leaf_spin/2", "leaf_spin("),
        ("chain:c/1", "c(N)"),
        ("chain:b/1", "b(N)"),
        ("chain:a/1", "a(N)"),
        ("chain:chain_loop/0", "    _ = a(2000)"),
        ("chain:cmp_spin/2", "cmp_spin("),
        ("chain:compare/2", "compare(X, Y)"),
    ] {
        let lines = lines_of(clause);
        assert!(!lines.is_empty(), "{function}: {clause:?} in chain.erl");
        let frames: Vec<_> = erlang.iter().filter(|f| f.function_name() == Some(function)).collect();
        assert!(!frames.is_empty(), "OTP {otp}: no frame of {function}");
        for f in frames {
            let line = &f.lines[0];
            // OTP 27's compiler keeps the path relative to its working
            // directory (/ under chroot), OTP 25's as given.
            let recorded = line.file.as_deref().unwrap_or_default();
            assert!(recorded == file || Some(recorded) == file.strip_prefix('/'), "{function}: {line:?}, not {file}");
            assert!(lines.contains(&line.line), "OTP {otp}: {function} at line {}, not {lines:?}", line.line);
        }
    }
    let chain = ["chain:chain_loop/0", "chain:a/1", "chain:b/1", "chain:c/1", "chain:leaf_spin/2"];
    let sorter = ["chain:sorter/0", "lists:sort/2"];
    let (at_leaf, whole, failure, example) = completeness(&traces, pid, &chain);
    eprintln!("OTP {otp} chain: {whole} of {at_leaf} leaf samples whole; e.g. {example:?}; a failure: {failure:?}");
    let cmp = completeness(&traces, pid, &["chain:compare/2", "chain:cmp_spin/2"]);
    eprintln!(
        "OTP {otp} comparator: {} of {} leaf samples whole; e.g. {:?}; a failure: {:?}",
        cmp.1, cmp.0, cmp.3, cmp.2
    );
    let mut leaves: std::collections::BTreeMap<String, usize> = Default::default();
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let key = format!("{} {}", t.thread_name, user_frames(t).last().map(|f| shown(f)).unwrap_or_default());
        *leaves.entry(key).or_default() += 1;
    }
    eprintln!(
        "OTP {otp}: {} samples: {leaves:?}; {:?}; test process (agent) {rss}{}",
        traces.len(),
        stats.runtimes.0.last(),
        profiler_tests::bpf_cost(&stats)
    );
    // Each Erlang process keeps a scheduler busy: up to SECONDS * HZ leaf
    // samples each, far fewer on a machine shared with other work.
    for (what, at_leaf, whole) in [("chain", at_leaf, whole), ("comparator", cmp.0, cmp.1)] {
        assert!(at_leaf >= 30, "OTP {otp} {what}: {at_leaf} leaf samples of up to {}", SECONDS * u64::from(HZ));
        assert!(whole * 100 >= at_leaf * 95, "OTP {otp} {what}: {whole} of {at_leaf} whole");
    }
    // The comparator is called from lists:sort/2's code in the sorter.
    let sorted = traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .map(user_frames)
        .filter(|f| f.last().and_then(|f| f.function_name()) == Some("chain:cmp_spin/2"))
        .filter(|f| f.iter().any(|f| f.function_name() == Some(sorter[0])))
        .filter(|f| f.iter().any(|f| f.function_name().is_some_and(|n| n.starts_with("lists:"))))
        .count();
    assert!(
        sorted * 100 >= cmp.0 * 95,
        "OTP {otp}: {sorted} of {} comparator samples under sorter/0 and lists:",
        cmp.0
    );
    assert!(stats.runtimes.get("beam", "frames") > 0 && stats.runtimes.get("beam", "scheduler_roots") > 0);
    assert!(stats.runtimes.get("beam", "frames_named") >= stats.runtimes.get("beam", "frames_unknown"));
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}

/// The host's OTP (Debian 12: 25), or the release of EP_RUNTIME_ROOT's
/// root (the runtime matrix, tests/runtimes/matrix.py).
#[test]
fn erlang_chains_to_the_scheduler_root() {
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
    chains_are_whole(root, otp);
}

/// Debian 13's OTP 27, in its root file system.
#[test]
fn otp_27_of_debian_13_erlang_chains() {
    let Some(root) = RuntimeRoot::debian("trixie", "/usr/bin/erl") else { return };
    chains_are_whole(root, 27);
}
