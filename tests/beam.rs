//! Erlang (the BEAM) on the real eBPF programs: the BEAM unwinder walks
//! the Erlang frames of a scheduler thread from the sampled pc in the
//! JIT's code to the bottom of the Erlang process's stack, then the
//! scheduler's native frames to the thread's root; each Erlang frame is
//! named `module:function/arity` with its file and line from the node's
//! code index (`profile.frame.type` `beam`).
//!
//! The workload `workloads/beam/chain.erl` (compiled by the test with
//! `erlc`) runs two Erlang processes: `a/1 -> b/1 -> c/1 -> leaf_spin/2`
//! and a `lists:sort/2` comparator calling `cmp_spin/2`; it is profiled
//! running before the agent and started after it. `chain.exs` is the
//! same chain in Elixir (`Ex.Chain.a/1`); `hot.erl` is reloaded while
//! the agent runs (`reload.erl`). Run with the host's `erl` and `elixir`
//! (Debian 12: OTP 25, packages `erlang-base` and `elixir`) and with
//! Debian 13's (OTP 27, Elixir 1.18) in its root file system; skipped
//! when missing, except under CI=true.

use profiler_agent::{Agent, AgentConfig, Stats};
use profiler_tests::{in_ci, profile_with, serial, RuntimeRoot, Workload};
use profiler_trace::{FrameKind, Trace};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// Copies the workloads `files` into a directory of the root's `/tmp`
/// (or the host's), compiling the `.erl` ones with the root's `erlc`; the
/// directory as the node sees it.
fn compile(root: &RuntimeRoot, tag: &str, files: &[&str]) -> PathBuf {
    let dir = root.temp_dir().join(format!("ep-beam-{tag}-{}", std::process::id()));
    let host_dir = root.host_path(&dir);
    std::fs::create_dir_all(&host_dir).unwrap();
    for file in files {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/beam").join(file);
        std::fs::copy(&src, host_dir.join(file)).unwrap();
        if !file.ends_with(".erl") {
            continue;
        }
        let out = root
            .command("/usr/bin/erlc")
            .arg("-o")
            .arg(&dir)
            .arg(dir.join(file))
            .output()
            .unwrap_or_else(|e| panic!("running erlc: {e}"));
        assert!(out.status.success(), "erlc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    dir
}

/// Waits until process `pid` is the emulator.
fn wait_for_emulator(pid: u32) {
    let start = Instant::now();
    loop {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.to_string_lossy().ends_with("beam.smp") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "erl did not exec beam.smp: {exe:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `binary args` of the root, waits until the pid is the emulator
/// and its code is loaded and running.
fn start(root: &RuntimeRoot, binary: &str, args: &[&std::ffi::OsStr]) -> Node {
    let child = root
        .command(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {binary}: {e}"));
    let node = Node(child);
    wait_for_emulator(node.0.id());
    // Loaded and running (Elixir compiles the script's module first).
    std::thread::sleep(Duration::from_millis(2500));
    node
}

/// `chain:main()` of `dir`, the emulator given `flags` too.
fn start_chain_with(root: &RuntimeRoot, dir: &Path, flags: &[&str]) -> Node {
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(|f| f.as_ref()).collect();
    args.extend(["-noshell".as_ref(), "-pa".as_ref(), dir.as_os_str(), "-eval".as_ref(), "chain:main()".as_ref()]);
    start(root, "/usr/bin/erl", &args)
}

/// Profiles `node` for [`SECONDS`] (then calls `after` with the agent,
/// the node still running) and kills it; fails if the agent noticed
/// anything of the BEAM (`what` says of which node). `None`: BPF is
/// unavailable (outside CI).
fn profile_node(node: Node, what: &str, after: impl FnOnce(&Agent)) -> Option<(Vec<Trace>, Stats)> {
    let config = AgentConfig { samples_per_second: HZ, pids: vec![node.0.id()], ..AgentConfig::default() };
    let mut notices = Vec::new();
    let profiled = profile_with(config, |agent| {
        std::thread::sleep(Duration::from_secs(SECONDS));
        notices = agent.notices();
        after(agent);
    });
    drop(node);
    assert!(!notices.iter().any(|n| n.starts_with("BEAM ")), "{what}: {notices:?}");
    profiled
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
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

/// Whether `name` is an Erlang frame's name: `module:function/arity`, or
/// `Module.function/arity` for an Elixir module.
fn is_named(name: &str) -> bool {
    name.contains('/') && (name.contains(':') || name.contains('.'))
}

/// The user frames of a trace, root first.
fn user_frames(trace: &Trace) -> Vec<&profiler_trace::Frame> {
    trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel).collect()
}

/// Whether a scheduler's stack (root first) is whole: native frames from
/// the thread's root (libc's, then the emulator's scheduler loop in
/// beam.smp), then Erlang frames only, every one named
/// ([`is_named`]), ending with `chain` (innermost last).
fn is_whole(frames: &[&profiler_trace::Frame], chain: &[&str]) -> bool {
    let first_erlang = frames.iter().position(|f| f.kind == FrameKind::Beam).unwrap_or(frames.len());
    let (native, erlang) = frames.split_at(first_erlang);
    let file = |f: &profiler_trace::Frame| f.mapping.as_ref().map(|m| m.file_name().to_string()).unwrap_or_default();
    native.len() >= 2
        && native.iter().all(|f| f.kind == FrameKind::Native)
        && file(native[0]).starts_with("libc.so")
        && file(native[native.len() - 1]) == "beam.smp"
        && erlang.len() >= chain.len()
        && erlang.iter().all(|f| f.kind == FrameKind::Beam && f.function_name().is_some_and(is_named))
        && erlang[erlang.len() - chain.len()..].iter().zip(chain).all(|(f, want)| f.function_name() == Some(*want))
}

/// Of `pid`'s scheduler samples whose leaf is `chain`'s last function:
/// (at the leaf, whole, a failing stack, a whole stack).
fn completeness(traces: &[Trace], pid: u32, chain: &[&str]) -> (usize, usize, Option<String>, Option<String>) {
    completeness_in(traces, pid, chain, 0..u64::MAX)
}

/// [`completeness`] of the samples taken in `window` (unix ns).
fn completeness_in(
    traces: &[Trace],
    pid: u32,
    chain: &[&str],
    window: std::ops::Range<u64>,
) -> (usize, usize, Option<String>, Option<String>) {
    let leaf = chain[chain.len() - 1];
    let (mut at_leaf, mut whole, mut failure, mut example) = (0, 0, None, None);
    let ours =
        |t: &&Trace| t.process.pid.0 == pid && is_scheduler(&t.thread_name) && window.contains(&t.timestamp_unix_ns);
    for t in traces.iter().filter(ours) {
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

/// That every frame of `pid` named `function` is at a line of `source`
/// starting with its `clause` (callers: at their call), in `file` (as the
/// node sees it). A sample's innermost Erlang frame may also be at its
/// function's head: the reduction check on entry, where a process
/// yields (after a tail call to itself, say).
fn assert_lines(traces: &[Trace], pid: u32, what: &str, source: &str, file: &Path, functions: &[(&str, &str)]) {
    let lines_of = |prefix: &str| -> Vec<u32> {
        (1..).zip(source.lines()).filter(|(_, l)| l.starts_with(prefix)).map(|(n, _)| n).collect()
    };
    let file = file.to_string_lossy().into_owned();
    // (frame, whether it is its sample's innermost Erlang frame)
    let frames: Vec<(&profiler_trace::Frame, bool)> = traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .flat_map(|t| {
            let innermost = t.frames.iter().position(|f| f.kind == FrameKind::Beam);
            t.frames.iter().enumerate().map(move |(i, f)| (f, Some(i) == innermost))
        })
        .collect();
    for (function, clause) in functions {
        let lines = lines_of(clause);
        assert!(!lines.is_empty(), "{function}: {clause:?} in {file}");
        let heads = head_lines(source, function);
        let frames: Vec<_> = frames.iter().filter(|(f, _)| f.function_name() == Some(function)).collect();
        assert!(!frames.is_empty(), "{what}: no frame of {function}");
        for (f, innermost) in frames {
            let line = &f.lines[0];
            // OTP 27's compiler keeps the path relative to its working
            // directory (/ under chroot), OTP 25's as given.
            let recorded = line.file.as_deref().unwrap_or_default();
            assert!(recorded == file || Some(recorded) == file.strip_prefix('/'), "{function}: {line:?}, not {file}");
            let at_head = *innermost && heads.contains(&line.line);
            assert!(
                lines.contains(&line.line) || at_head,
                "{what}: {function} at line {}, not {lines:?} (head {heads:?}, innermost: {innermost})",
                line.line
            );
        }
    }
}

/// The lines of `source` where `function` ("chain:a/1", "Ex.Chain.loop/0")
/// has a head: an Erlang clause (`a(`) or an Elixir `def a`. A sample's
/// innermost frame may be there: at the reduction check on entry, where
/// a process yields.
fn head_lines(source: &str, function: &str) -> Vec<u32> {
    let name = function.rsplit([':', '.']).next().and_then(|n| n.split('/').next()).unwrap_or_default();
    let head = |l: &str| {
        l.starts_with(&format!("{name}(")) || l.trim_start().strip_prefix("def ").is_some_and(|d| d.starts_with(name))
    };
    (1..).zip(source.lines()).filter(|(_, l)| head(l)).map(|(n, _)| n).collect()
}

/// Profiles the node of `root` (release `otp`): the chain's and the
/// comparator's leaf samples carry their whole stacks, every Erlang
/// frame named with its file and line, down to the scheduler thread's
/// root.
fn chains_are_whole(root: RuntimeRoot, otp: u32) {
    chains_are_whole_with(root, otp, &[])
}

/// [`chains_are_whole`] of a node started with the emulator's `flags`.
fn chains_are_whole_with(root: RuntimeRoot, otp: u32, flags: &[&str]) {
    let _serial = serial();
    let dir = compile(&root, "chain", &["chain.erl"]);
    let node = start_chain_with(&root, &dir, flags);
    let pid = node.0.id();
    let otp = format!("{otp}{}", if flags.is_empty() { String::new() } else { format!(" ({})", flags.join(" ")) });
    if flags.contains(&"+JPperf") {
        // What the test is about: the JIT's code mapped once, anonymous
        // and writable, not the two views of a memfd.
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        assert!(!maps.contains("/memfd:vmem"), "OTP {otp}: the JIT's code is in a memfd:\n{maps}");
        assert!(maps.lines().any(|l| l.split_whitespace().nth(1) == Some("rwxp")), "OTP {otp}: no rwx memory");
    }
    let mut rss = String::new();
    let profiled = profile_node(node, &format!("OTP {otp}"), |_| {
        // The agent runs in this process: its resident memory, the node busy.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        rss = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default().to_string();
    });
    // The map perf support writes (+JPperf), in the node's /tmp.
    let _ = std::fs::remove_file(root.host_path(Path::new(&format!("/tmp/perf-{pid}.map"))));
    let Some((traces, stats)) = profiled else { return };
    // The lines: each function's clauses in the file as erlc was given it.
    let source = std::fs::read_to_string(root.host_path(&dir.join("chain.erl"))).unwrap();
    assert_lines(&traces, pid, &format!("OTP {otp}"), &source, &dir.join("chain.erl"), &CHAIN_LINES);
    let chain = CHAIN;
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

/// The chain of `chain.erl`'s first process, root first.
const CHAIN: [&str; 5] = ["chain:chain_loop/0", "chain:a/1", "chain:b/1", "chain:c/1", "chain:leaf_spin/2"];

/// The functions of `chain.erl` and the start of their lines.
const CHAIN_LINES: [(&str, &str); 7] = [
    ("chain:leaf_spin/2", "leaf_spin("),
    ("chain:c/1", "c(N)"),
    ("chain:b/1", "b(N)"),
    ("chain:a/1", "a(N)"),
    ("chain:chain_loop/0", "    _ = a(2000)"),
    ("chain:cmp_spin/2", "cmp_spin("),
    ("chain:compare/2", "compare(X, Y)"),
];

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

/// A node with the emulator's perf support (`+JPperf true`: the JIT's
/// code mapped once in anonymous rwx memory, frame pointers pushed by
/// every Erlang frame, erts_frame_layout FP_RA), as profiled beside perf
/// (`make bench-accuracy`'s beam cases): whole chains, every Erlang
/// frame named (a saved frame pointer taken for a return address is an
/// unnamed frame).
#[test]
fn erlang_with_perf_support_chains_to_the_scheduler_root() {
    let root = RuntimeRoot::from_env();
    if !has(&root, "/usr/bin/erl", "erlang-base") {
        return;
    }
    let release = root
        .command("/usr/bin/erl")
        .args(["-noshell", "-eval", "io:put_chars(erlang:system_info(otp_release)), halt()."])
        .output()
        .expect("erl runs");
    let otp: u32 = String::from_utf8_lossy(&release.stdout).trim().parse().expect("an OTP release");
    chains_are_whole_with(root, otp, &["+JPperf", "true"]);
}

/// The Erlang chain of `cpath.erl`, root first, above the C it calls.
const CPATH_CHAIN: [&str; 3] = ["cpath:loop/2", "cpath:outer/2", "cpath:inner/2"];

/// The functions of `cpath.erl` and the start of their lines (callers:
/// of their call; `inner/2`: its head, as its comparison has no line of
/// its own).
const CPATH_LINES: [(&str, &str); 3] =
    [("cpath:inner/2", "inner(L, M)"), ("cpath:outer/2", "outer(L, M)"), ("cpath:loop/2", "    _ = outer(L, M)")];

/// Whether a scheduler's stack (root first) in C called from Erlang is
/// whole: native frames from the thread's root (as [`is_whole`]), then
/// Erlang frames, each named, ending with `chain` and at most one
/// unnamed frame after it (the JIT's shared fragment that called C),
/// then only native frames of beam.smp, at least one of them
/// `c_function`.
fn is_whole_in_c(frames: &[&profiler_trace::Frame], chain: &[&str], c_function: &str) -> bool {
    let Some(last_erlang) = frames.iter().rposition(|f| f.kind == FrameKind::Beam) else {
        return false;
    };
    let (upper, c) = frames.split_at(last_erlang + 1);
    let file = |f: &profiler_trace::Frame| f.mapping.as_ref().map(|m| m.file_name().to_string()).unwrap_or_default();
    let upper = match upper.last() {
        Some(f) if f.function_name().is_none() => &upper[..upper.len() - 1],
        _ => upper,
    };
    !c.is_empty()
        && c.iter().all(|f| f.kind == FrameKind::Native && file(f) == "beam.smp")
        && c.iter().any(|f| f.function_name() == Some(c_function))
        && is_whole(upper, chain)
}

/// A process whose time is in C called from Erlang (`cpath.erl`: the
/// emulator's term comparison, `erts_cmp_compound`, called by the JIT's
/// code): the samples in that C carry the Erlang frames above it and the
/// scheduler thread's native frames to its root. The Erlang stack
/// pointer is found in rbp, where the JIT keeps it across the call; with
/// `+JPperf true` (frame layout FP_RA) in the process the scheduler runs
/// (`c_p->stop`).
#[test]
fn erlang_stacks_in_c_reach_the_scheduler_root() {
    let root = RuntimeRoot::from_env();
    if !has(&root, "/usr/bin/erl", "erlang-base") {
        return;
    }
    stacks_in_c_are_whole(&root, &[]);
    stacks_in_c_are_whole(&root, &["+JPperf", "true"]);
}

/// [`erlang_stacks_in_c_reach_the_scheduler_root`] of a node started
/// with the emulator's `flags`.
fn stacks_in_c_are_whole(root: &RuntimeRoot, flags: &[&str]) {
    let _serial = serial();
    let dir = compile(root, "cpath", &["cpath.erl"]);
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(|f| f.as_ref()).collect();
    args.extend(["-noshell".as_ref(), "-pa".as_ref(), dir.as_os_str(), "-eval".as_ref(), "cpath:main()".as_ref()]);
    let node = start(root, "/usr/bin/erl", &args);
    let pid = node.0.id();
    let what = format!("{} {}", root.host_path(Path::new("/usr/bin/erl")).display(), flags.join(" "));
    let profiled = profile_node(node, &what, |_| {});
    let _ = std::fs::remove_file(root.host_path(Path::new(&format!("/tmp/perf-{pid}.map"))));
    let Some((traces, stats)) = profiled else { return };
    let c_function = "erts_cmp_compound";
    let (mut in_c, mut whole, mut failure, mut example) = (0, 0, None, None);
    let ours = |t: &&Trace| t.process.pid.0 == pid && is_scheduler(&t.thread_name);
    for t in traces.iter().filter(ours) {
        let frames = user_frames(t);
        if !frames.iter().any(|f| f.function_name() == Some(c_function)) {
            continue;
        }
        in_c += 1;
        let text = || frames.iter().map(|f| shown(f)).collect::<Vec<_>>().join(";");
        if is_whole_in_c(&frames, &CPATH_CHAIN, c_function) {
            whole += 1;
            example.get_or_insert_with(text);
        } else {
            failure.get_or_insert_with(text);
        }
    }
    eprintln!(
        "{what}: {whole} of {in_c} samples in {c_function} whole; e.g. {example:?}; a failure: {failure:?}; {:?}",
        stats.runtimes.0.last()
    );
    assert!(in_c >= 30, "{what}: {in_c} samples in {c_function} of up to {}", SECONDS * u64::from(HZ));
    assert!(whole * 100 >= in_c * 95, "{what}: {whole} of {in_c} whole; a failure: {failure:?}");
    let source = std::fs::read_to_string(root.host_path(&dir.join("cpath.erl"))).unwrap();
    assert_lines(&traces, pid, &what, &source, &dir.join("cpath.erl"), &CPATH_LINES);
    assert!(stats.runtimes.get("beam", "from_c_followed") * 100 >= stats.runtimes.get("beam", "from_c") * 90);
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}

/// Whether the root has `binary`; if not, SKIPPED (a failure under
/// CI=true).
fn has(root: &RuntimeRoot, binary: &str, package: &str) -> bool {
    if root.host_path(Path::new(binary)).exists() {
        return true;
    }
    assert!(!in_ci(), "{binary} is required under CI=true (apt-get install {package})");
    eprintln!("SKIPPED: no {binary} (apt-get install {package})");
    false
}

/// The chain of `chain.exs`, root first: Elixir names its modules
/// `Elixir.Ex.Chain`, shown as Elixir writes them.
const ELIXIR_CHAIN: [&str; 5] =
    ["Ex.Chain.loop/0", "Ex.Chain.a/1", "Ex.Chain.b/1", "Ex.Chain.c/1", "Ex.Chain.leaf_spin/2"];

/// The Elixir script `chain.exs` (its module compiled by `elixir` as it
/// starts): the chain's leaf samples carry the whole chain to the
/// scheduler thread's root, each frame `Ex.Chain.f/N` at its line of the
/// script.
fn elixir_chain_is_whole(root: RuntimeRoot, what: &str) {
    let _serial = serial();
    let dir = compile(&root, "elixir", &["chain.exs"]);
    let script = dir.join("chain.exs");
    let node = start(&root, "/usr/bin/elixir", &[script.as_os_str()]);
    let pid = node.0.id();
    let Some((traces, stats)) = profile_node(node, what, |_| {}) else { return };
    let source = std::fs::read_to_string(root.host_path(&script)).unwrap();
    assert_lines(
        &traces,
        pid,
        what,
        &source,
        &script,
        &[
            ("Ex.Chain.leaf_spin/2", "  def leaf_spin("),
            ("Ex.Chain.c/1", "  def c(n)"),
            ("Ex.Chain.b/1", "  def b(n)"),
            ("Ex.Chain.a/1", "  def a(n)"),
            ("Ex.Chain.loop/0", "    _ = a(2000)"),
        ],
    );
    let (at_leaf, whole, failure, example) = completeness(&traces, pid, &ELIXIR_CHAIN);
    eprintln!(
        "{what}: {whole} of {at_leaf} leaf samples whole; e.g. {example:?}; a failure: {failure:?}; {:?}{}",
        stats.runtimes.0.last(),
        profiler_tests::bpf_cost(&stats)
    );
    assert!(at_leaf >= 30, "{what}: {at_leaf} leaf samples of up to {}", SECONDS * u64::from(HZ));
    assert!(whole * 100 >= at_leaf * 95, "{what}: {whole} of {at_leaf} whole");
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}

/// The host's Elixir (Debian 12: 1.14 on OTP 25), or EP_RUNTIME_ROOT's.
#[test]
fn elixir_chain_to_the_scheduler_root() {
    let root = RuntimeRoot::from_env();
    if has(&root, "/usr/bin/elixir", "elixir") {
        elixir_chain_is_whole(root, "Elixir");
    }
}

/// How long after its first sample with an Erlang frame a node started
/// after the agent may have incomplete stacks (it is attached once its
/// emulator has set `beam_normal_exit`).
const LATE_START: Duration = Duration::from_secs(1);

/// A node started after the agent (its pid known, the emulator not yet
/// executed): from [`LATE_START`] after its first sample with an Erlang
/// frame, the chain's leaf samples carry the whole chain.
#[test]
fn erlang_node_started_after_the_agent() {
    let root = RuntimeRoot::from_env();
    if !has(&root, "/usr/bin/erl", "erlang-base") {
        return;
    }
    let _serial = serial();
    let dir = compile(&root, "late", &["chain.erl"]);
    let erl = match root.path() {
        Some(r) => format!("chroot {} /usr/bin/erl", r.display()),
        None => "/usr/bin/erl".to_string(),
    };
    let mut w = Workload::spawn_gated(&format!(
        "exec {erl} -noshell -pa {} -eval 'chain:main()' >/dev/null 2>&1",
        dir.display()
    ));
    let pid = w.pid();
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| {
        w.release();
        wait_for_emulator(pid);
        std::thread::sleep(LATE_START + Duration::from_secs(SECONDS));
    }) else {
        return;
    };
    drop(w);
    let erlang = |t: &&Trace| t.process.pid.0 == pid && t.frames.iter().any(|f| f.kind == FrameKind::Beam);
    let first = traces.iter().filter(erlang).map(|t| t.timestamp_unix_ns).min().expect("samples with Erlang frames");
    let since = first + LATE_START.as_nanos() as u64;
    let early = completeness_in(&traces, pid, &CHAIN, first..since);
    let (at_leaf, whole, failure, example) = completeness_in(&traces, pid, &CHAIN, since..u64::MAX);
    eprintln!(
        "started after the agent: in the first {LATE_START:?} {} of {} leaf samples whole (a failure: {:?}); then \
         {whole} of {at_leaf}; e.g. {example:?}; a failure: {failure:?}; {:?}",
        early.1,
        early.0,
        early.2,
        stats.runtimes.0.last(),
    );
    assert!(at_leaf >= 30, "{at_leaf} leaf samples of up to {}", SECONDS * u64::from(HZ));
    assert!(whole * 100 >= at_leaf * 95, "{whole} of {at_leaf} whole");
    let source = std::fs::read_to_string(root.host_path(&dir.join("chain.erl"))).unwrap();
    assert_lines(&traces, pid, "started after the agent", &source, &dir.join("chain.erl"), &CHAIN_LINES);
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}

/// The chain of `hot.erl`, root first.
const HOT_CHAIN: [&str; 3] = ["hot:run/0", "hot:outer/1", "hot:spin/2"];

/// Hot code loading while the agent runs: `hot` is running (v1, from
/// `hot.erl`), then v2 (`v2/hot.erl`: its body changed, its lines moved
/// down) is compiled, loaded and v1 purged. Samples before the load name
/// v1's file and lines (or are unknown, counted by reason: a v1 frame
/// named after the purge is in no module); samples after it v2's, never
/// v1's, with the whole chain.
#[test]
fn hot_code_loading_names_the_new_code() {
    let root = RuntimeRoot::from_env();
    if !has(&root, "/usr/bin/erl", "erlang-base") {
        return;
    }
    let _serial = serial();
    let dir = compile(&root, "hot", &["hot.erl", "reload.erl"]);
    let v1 = std::fs::read_to_string(root.host_path(&dir.join("hot.erl"))).unwrap();
    assert!(v1.contains("Acc * 7"));
    let v2 = format!("{}{}", "%% v2: moved down, its body changed\n".repeat(20), v1.replace("Acc * 7", "Acc * 5"));
    let new = dir.join("v2/hot.erl");
    std::fs::create_dir_all(root.host_path(&dir.join("v2"))).unwrap();
    std::fs::write(root.host_path(&new), &v2).unwrap();
    let child = root
        .command("/usr/bin/erl")
        .args(["-noshell", "-pa"])
        .arg(&dir)
        .args(["-run", "reload", "main"])
        .arg(&new)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting erl: {e}"));
    let mut node = Node(child);
    let pid = node.0.id();
    let mut stdin = node.0.stdin.take().unwrap();
    let stdout = node.0.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait = |want: &str| loop {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line == want => break,
            Ok(_) => continue,
            Err(e) => panic!("the node did not print {want:?}: {e}"),
        }
    };
    wait_for_emulator(pid);
    wait("running");
    std::thread::sleep(Duration::from_millis(500));
    let (mut load, mut loaded) = (0, 0);
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| {
        std::thread::sleep(Duration::from_secs(3));
        load = unix_now_ns();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
        wait("reloaded");
        loaded = unix_now_ns();
        std::thread::sleep(Duration::from_secs(4));
    }) else {
        return;
    };
    drop(node);
    let lines_of = |source: &str, prefixes: &[&str]| -> Vec<u32> {
        (1..).zip(source.lines()).filter(|(_, l)| prefixes.iter().any(|p| l.starts_with(p))).map(|(n, _)| n).collect()
    };
    let (old_file, new_file) = (dir.join("hot.erl"), new.clone());
    let same_file = |recorded: &str, file: &Path| {
        let file = file.to_string_lossy();
        recorded == file || Some(recorded) == file.strip_prefix('/')
    };
    // Clock skew between the agent's timestamps and this clock.
    let margin = 20_000_000;
    let (mut before, mut after, mut unknown_before, mut unknown_after) = (0, 0, 0, 0);
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        for (i, f) in t.frames.iter().filter(|f| f.kind == FrameKind::Beam).enumerate() {
            let Some(line) = f.lines.first() else {
                match t.timestamp_unix_ns {
                    ts if ts < load => unknown_before += 1,
                    ts if ts > loaded + margin => unknown_after += 1,
                    _ => {}
                }
                continue;
            };
            let Some(&(_, clause)) =
                // run/0's leaf samples may be at its tail call.
                [
                    ("hot:spin/2", &["spin("][..]),
                    ("hot:outer/1", &["outer(N)"]),
                    ("hot:run/0", &["    _ = outer(2000)", "    hot:run()"]),
                ]
                .iter()
                .find(|(name, _)| *name == &*line.function)
            else {
                continue;
            };
            let recorded = line.file.as_deref().unwrap_or_default();
            let (v, source, file) = if t.timestamp_unix_ns + margin < load {
                before += 1;
                ("v1", &v1, &old_file)
            } else if t.timestamp_unix_ns > loaded + margin {
                after += 1;
                ("v2", &v2, &new_file)
            } else {
                continue;
            };
            assert!(same_file(recorded, file), "{v}: {line:?} not in {}", file.display());
            let lines = lines_of(source, clause);
            let at_head = i == 0 && head_lines(source, &line.function).contains(&line.line);
            assert!(
                lines.contains(&line.line) || at_head,
                "{v}: {} at line {}, not {lines:?} (innermost: {})",
                line.function,
                line.line,
                i == 0
            );
        }
    }
    let (at_leaf, whole, failure, example) = completeness_in(&traces, pid, &HOT_CHAIN, loaded + margin..u64::MAX);
    let unknown = stats.runtimes.get("beam", "frames_unknown");
    let reasons: Vec<(&str, u64)> = ["no_module", "no_function", "unreadable", "bad_data"]
        .iter()
        .map(|r| (*r, stats.runtimes.get("beam", &format!("frames_unknown_{r}"))))
        .collect();
    eprintln!(
        "hot code loading: {before} frames of v1 named before the load, {after} of v2 after it ({} ms to load \
         and purge); unnamed Erlang frames: {unknown_before} before, {unknown_after} after; the namer's unknown: \
         {unknown} {reasons:?}; after the load {whole} of {at_leaf} leaf samples whole, e.g. {example:?}; a \
         failure: {failure:?}",
        (loaded - load) / 1_000_000
    );
    assert!(before >= 10 && after >= 30, "{before} v1 frames before the load, {after} v2 frames after it");
    assert!(at_leaf >= 30 && whole * 100 >= at_leaf * 95, "after the load {whole} of {at_leaf} whole");
    assert_eq!(reasons.iter().map(|(_, n)| n).sum::<u64>(), unknown, "every unknown frame has its reason");
    assert!(unknown >= unknown_before + unknown_after, "{unknown} unknown to the namer");
    let _ = std::fs::remove_dir_all(root.host_path(&dir));
}
