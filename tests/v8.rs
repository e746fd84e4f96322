//! V8 unwinding on the real eBPF programs: Node's JavaScript frames in
//! place of V8's code (the embedded builtins in `node`'s .text, JIT code
//! in anonymous memory), native frames around them down to the thread's
//! root, on each Node of this machine: `/usr/bin/node` (Node 20),
//! Debian's Node 18 extracted beside it by `scripts/install-node18.sh`
//! (both required under CI=true), and the official releases cached by
//! `scripts/install-node-releases.sh` (Node 22; skipped when not cached).
//! Every test runs on each.
//!
//! The workload (`workloads/node/cpu_chain.js`) spins in top level ->
//! main -> a -> b -> c on the main thread. Each test asserts, in at least
//! 95% of the samples whose innermost JavaScript frame is `c`, the whole
//! stack: native frames of `node` and libc from the root, Node's loader
//! frames (from `node:internal/main/run_main_module` to `Module._compile`),
//! the workload's top level, then exactly main, a, b, c (named, from the
//! workload's script), and only native or kernel code inside c.

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{
    cold_and_warm_windows, in_ci, profile_with, report_runtime, serial, start_agent, Completeness, FrameDesc, Workload,
};
use profiler_trace::{FrameKind, Trace};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 30;
const NODE: &str = "/usr/bin/node";
/// Debian 12's `nodejs` 18 (`libnode.so.108`), from `scripts/install-node18.sh`.
const NODE18: &str = "/opt/ebpf-profiler/node18/bin/node";
/// Official Node releases cached by `scripts/install-node-releases.sh`,
/// tested when there (skipped when not, even under CI=true: they come
/// from the npm registry, not the distribution): 22, 24, 26 (V8 12.4,
/// 13.6, 14.6).
const NODE_RELEASES: [(&str, &str, &str); 3] = [
    ("node22", "/var/cache/ebpf-profiler-runtimes/node/22/bin/node", "EP_TEST_NODE22"),
    ("node24", "/var/cache/ebpf-profiler-runtimes/node/24/bin/node", "EP_TEST_NODE24"),
    ("node26", "/var/cache/ebpf-profiler-runtimes/node/26/bin/node", "EP_TEST_NODE26"),
];

/// One step of an expected stack, root first.
#[derive(Clone, Copy, Debug)]
enum P {
    /// One JavaScript frame of this function (the workload's own, and
    /// the top level `<anonymous>` when `ours`, from the workload's script).
    Js(&'static str, bool),
    /// Exactly this many frames of [`P::Js`].
    JsTimes(&'static str, usize),
    /// One JavaScript frame of this function without a script (a
    /// builtin's JSFunction).
    Builtin(&'static str),
    /// Zero or more JavaScript frames not of the workload's script (a
    /// worker's bootstrap and event loop frames).
    AnyJs,
    /// One or more native frames, each in a file of this pattern (`a|b`).
    Native(&'static str),
    /// Zero or more native or kernel frames of any file.
    AnyNative,
    /// What runs a microtask (below an async function resumed from a
    /// promise): zero or more of [`MICROTASK_RUNNERS`] and native frames,
    /// nothing else.
    Microtasks,
}

/// The JavaScript frames Node may show between the thread's root and the
/// microtask queue's run (Node's task queue, when a `process.nextTick`
/// callback is pending; the workload has none: a checkpoint runs them).
const MICROTASK_RUNNERS: &[&str] = &["processTicksAndRejections"];

/// Node's frames from its C++ entry to the workload's top level: Node
/// 18 and 20's, then Node 22's (`wrapModuleLoad` is new; the loader's
/// methods, functions assigned to properties, have no inferred name in
/// its snapshot: V8's own stack traces name them from the receiver,
/// `Module._compile`, `Object..js`, `Function._load`).
const LOADERS: [&[P]; 2] = [
    &[
        P::Js("<anonymous>", false), // node:internal/main/run_main_module
        P::Js("executeUserEntryPoint", false),
        P::Js("Module._load", false),
        P::Js("Module.load", false),
        P::Js("Module._extensions..js", false),
        P::Js("Module._compile", false),
    ],
    &[
        P::Js("<anonymous>", false),
        P::Js("executeUserEntryPoint", false),
        P::Js("wrapModuleLoad", false),
        P::Js("<anonymous>", false), // Module._load
        P::Js("<anonymous>", false), // Module.load
        P::Js("<anonymous>", false), // Module._extensions..js
        P::Js("<anonymous>", false), // Module._compile
    ],
];

/// A workload and the stack expected of it.
struct Spec {
    /// In `workloads/node/`.
    script: &'static str,
    /// What runs the chain's first function (below it: native frames
    /// from the thread's root, then these).
    from: From,
    /// Profile off-CPU time (every switch-out sampled): only the off-CPU
    /// samples are checked.
    off_cpu: bool,
    /// The JavaScript frames from `main` to the leaf (then only native
    /// code).
    frames: &'static [P],
    /// The leaf's name.
    leaf: &'static str,
    /// The line of each caller of ours: the line holding this text.
    calls: &'static [(&'static str, &'static str)],
    /// The leaf's lines: from the line holding the first text to the one
    /// holding the second.
    leaf_body: (&'static str, &'static str),
}

/// What calls the chain's first function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    /// The workload's top level, below the loader's frames.
    TopLevel,
    /// The event loop: setImmediate's callbacks, called by C++ through
    /// `processImmediate` (the workload is given the argument `immediate`).
    Immediate,
    /// A worker thread: whatever JavaScript frames below the chain (the
    /// worker's bootstrap and event loop); the samples checked are the
    /// other threads'.
    Worker,
    /// An async function resumed from the microtask queue: V8's
    /// RunMicrotasks (a builtin: no JavaScript frame of its own), called
    /// from C++ (a microtask checkpoint: `InternalCallbackScope::Close`)
    /// or from Node's `processTicksAndRejections` (through `runMicrotasks`,
    /// a C++ binding), then the await's resolve closure.
    Microtasks,
}

impl Spec {
    /// The expected stacks, root first (any of them).
    fn patterns(&self) -> Vec<Vec<P>> {
        let top_level = || LOADERS.map(|loader| [loader, &[P::Js("<anonymous>", true)]].concat());
        let below: Vec<Vec<P>> = match self.from {
            // Each turn from the worker's event loop, the first from its
            // top level.
            From::Worker => vec![vec![P::AnyJs], vec![P::AnyJs, P::Js("<anonymous>", true)]],
            // The first call comes from the top level, the others from
            // the event loop.
            From::Immediate => [vec![vec![P::Js("processImmediate", false)]], top_level().to_vec()].concat(),
            From::TopLevel => top_level().to_vec(),
            // The await's resolve closure (V8's builtin
            // AsyncFunctionAwaitResolveClosure, a JSFunction without a
            // name or script) resumes the async function.
            From::Microtasks => vec![vec![P::Microtasks, P::Builtin("<anonymous>")]],
        };
        below
            .into_iter()
            .map(|below| {
                let mut p = vec![P::Native("node|libnode.so.108|libuv.so.1.0.0|libc.so.6")];
                p.extend(below);
                p.extend(self.frames);
                p.push(P::AnyNative);
                p
            })
            .collect()
    }

    /// Whether samples without JavaScript are expected on its thread (the
    /// event loop between two callbacks, a GC task).
    fn idles(&self) -> bool {
        self.from != From::TopLevel
    }
}

/// main -> a -> b -> c, c spinning.
const fn abc(immediate: bool) -> Spec {
    Spec {
        script: "cpu_chain.js",
        from: if immediate { From::Immediate } else { From::TopLevel },
        off_cpu: false,
        frames: &[P::Js("main", true), P::Js("a", true), P::Js("b", true), P::Js("c", true)],
        leaf: "c",
        calls: &[("main", "sum += a("), ("a", "return b(n)"), ("b", "return c(n)")],
        leaf_body: ("function c(", "function b("),
    }
}

/// In a worker thread: workerMain -> wa -> wb -> wc, wc spinning.
const WORKER: Spec = Spec {
    script: "cpu_worker.js",
    from: From::Worker,
    off_cpu: false,
    frames: &[P::Js("workerMain", true), P::Js("wa", true), P::Js("wb", true), P::Js("wc", true)],
    leaf: "wc",
    calls: &[("workerMain", "sum += wa("), ("wa", "return wb(n)"), ("wb", "return wc(n)")],
    leaf_body: ("function wc(", "function wb("),
};

/// main -> rec x 100 -> leaf: more frames than one program run takes.
const DEEP: Spec = Spec {
    script: "cpu_deep.js",
    from: From::TopLevel,
    off_cpu: false,
    frames: &[P::Js("main", true), P::JsTimes("rec", 100), P::Js("leaf", true)],
    leaf: "leaf",
    calls: &[("main", "sum += rec(99)"), ("rec", "return n === 0")],
    leaf_body: ("function leaf(", "function rec("),
};

/// main -> a -> b -> c, c blocked in Atomics.wait (off-CPU).
const WAIT: Spec = Spec {
    script: "wait_chain.js",
    from: From::TopLevel,
    off_cpu: true,
    frames: &[P::Js("main", true), P::Js("a", true), P::Js("b", true), P::Js("c", true)],
    leaf: "c",
    calls: &[("main", "for (;;) a()"), ("a", "  b();"), ("b", "  c();")],
    leaf_body: ("function c(", "function b("),
};

/// An async function resumed from a promise: pump (its continuation after
/// `await`, run by the microtask queue) -> crunch -> mix -> leaf, leaf
/// spinning.
const ASYNC: Spec = Spec {
    script: "cpu_async.js",
    from: From::Microtasks,
    off_cpu: false,
    frames: &[P::Js("pump", true), P::Js("crunch", true), P::Js("mix", true), P::Js("leaf", true)],
    leaf: "leaf",
    calls: &[("pump", "sum += crunch("), ("crunch", "return mix(n)"), ("mix", "return leaf(n)")],
    leaf_body: ("function leaf(", "function mix("),
};

/// main -> sortAll -> Array.prototype.sort (a builtin: no script) ->
/// byValue, byValue spinning.
const SORT: Spec = Spec {
    script: "cpu_sort.js",
    from: From::Immediate,
    off_cpu: false,
    frames: &[P::Js("main", true), P::Js("sortAll", true), P::Js("sort", false), P::Js("byValue", true)],
    leaf: "byValue",
    calls: &[("main", "sortAll();"), ("sortAll", "sort(byValue)")],
    leaf_body: ("function byValue(", "function sortAll("),
};

/// One frame of a trace, root first, with a compiled frame's inlined
/// functions as frames of their own (outermost first).
#[derive(Clone, Debug)]
struct Expanded {
    desc: FrameDesc,
    script: Option<String>,
    line: u32,
    inlined: bool,
}

fn expand(trace: &Trace) -> Vec<Expanded> {
    let mut out = Vec::new();
    for f in trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel) {
        if f.kind == FrameKind::V8Js {
            for line in f.lines.iter().rev() {
                out.push(Expanded {
                    desc: FrameDesc { kind: FrameKind::V8Js, name: Some(line.function.to_string()), file: None },
                    script: line.file.as_deref().map(str::to_string),
                    line: line.line,
                    inlined: f.lines.len() > 1,
                });
            }
            if f.lines.is_empty() {
                let desc = FrameDesc { kind: FrameKind::V8Js, name: None, file: None };
                out.push(Expanded { desc, script: None, line: 0, inlined: false });
            }
            continue;
        }
        let mapping = f.mapping.as_ref().map(|m| m.file_name().to_string());
        let desc = FrameDesc { kind: f.kind, name: f.function_name().map(str::to_string), file: mapping };
        out.push(Expanded { desc, script: None, line: 0, inlined: false });
    }
    out
}

fn show(frames: &[Expanded]) -> String {
    frames
        .iter()
        .map(|f| match f.desc.kind {
            FrameKind::V8Js => format!("js:{}:{}", f.desc.name.as_deref().unwrap_or("?"), f.line),
            _ => f.desc.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn ours(script: Option<&str>, spec: &Spec) -> bool {
    script.is_some_and(|s| Path::new(s).file_name().is_some_and(|n| n == spec.script))
}

/// Whether `frames` (root first) are exactly `pattern`.
fn matches(frames: &[Expanded], pattern: &[P], spec: &Spec) -> bool {
    let Some((step, rest)) = pattern.split_first() else { return frames.is_empty() };
    let native = |f: &Expanded| f.desc.kind != FrameKind::V8Js;
    match step {
        P::Js(name, mine) => frames.first().is_some_and(|f| {
            f.desc.kind == FrameKind::V8Js
                && f.desc.name.as_deref() == Some(name)
                && ours(f.script.as_deref(), spec) == *mine
                && matches(&frames[1..], rest, spec)
        }),
        P::Builtin(name) => frames.first().is_some_and(|f| {
            f.desc.kind == FrameKind::V8Js
                && f.desc.name.as_deref() == Some(name)
                && f.script.is_none()
                && matches(&frames[1..], rest, spec)
        }),
        P::JsTimes(name, times) => {
            let run = frames
                .iter()
                .take(*times)
                .filter(|f| {
                    f.desc.kind == FrameKind::V8Js
                        && f.desc.name.as_deref() == Some(name)
                        && ours(f.script.as_deref(), spec)
                })
                .count();
            run == *times && matches(&frames[run..], rest, spec)
        }
        P::AnyJs => {
            let run = frames.iter().take_while(|f| !native(f) && !ours(f.script.as_deref(), spec)).count();
            (0..=run).any(|n| matches(&frames[n..], rest, spec))
        }
        P::Native(pattern) => {
            let run = frames
                .iter()
                .take_while(|f| {
                    native(f) && f.desc.file.as_deref().is_some_and(|file| pattern.split('|').any(|p| p == file))
                })
                .count();
            (1..=run).any(|n| matches(&frames[n..], rest, spec))
        }
        P::AnyNative => {
            let run = frames.iter().take_while(|f| native(f)).count();
            (0..=run).any(|n| matches(&frames[n..], rest, spec))
        }
        P::Microtasks => {
            let runner = |f: &Expanded| {
                native(f)
                    || (!ours(f.script.as_deref(), spec)
                        && f.desc.name.as_deref().is_some_and(|n| MICROTASK_RUNNERS.contains(&n)))
            };
            let run = frames.iter().take_while(|f| runner(f)).count();
            (0..=run).any(|n| matches(&frames[n..], rest, spec))
        }
    }
}

/// Which frames of the workload's must have their lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lines {
    All,
    /// The leaf only: its callers may run in Sparkplug code (named, no
    /// line: docs/v8.md).
    Leaf,
    None,
}

/// The line of `script` holding `text` (1-based).
fn line_of(script: &str, text: &str) -> u32 {
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node").join(script));
    let source = source.expect("the workload");
    let index = source.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("no {text:?} in {script}"));
    index as u32 + 1
}

/// Whether the workload's frames have their lines: the call of each
/// caller, a line of its body for the leaf.
fn lines_ok(frames: &[Expanded], spec: &Spec, lines: Lines) -> bool {
    let body = line_of(spec.script, spec.leaf_body.0)..line_of(spec.script, spec.leaf_body.1);
    frames.iter().filter(|f| ours(f.script.as_deref(), spec)).all(|f| match f.desc.name.as_deref() {
        Some(name) if name == spec.leaf => body.contains(&f.line),
        Some(_) if lines == Lines::Leaf => true,
        Some(name) => {
            spec.calls.iter().find(|(n, _)| *n == name).is_none_or(|&(_, text)| f.line == line_of(spec.script, text))
        }
        None => false,
    })
}

fn check(traces: &[Trace], pid: u32, spec: &Spec, lines: Lines) -> Completeness {
    let patterns = spec.patterns();
    let mut c = Completeness::default();
    // Node's main thread: tid == pid.
    let thread = |tid: u32| if spec.from == From::Worker { tid != pid } else { tid == pid };
    let kind = |t: &Trace| t.off_cpu_ns.is_some() == spec.off_cpu;
    for t in traces.iter().filter(|t| t.process.pid.0 == pid && thread(t.tid.0) && kind(t)) {
        let frames = expand(t);
        let shown = || show(&frames);
        let Some(innermost) = frames.iter().rev().find(|f| f.desc.kind == FrameKind::V8Js) else {
            if spec.idles() {
                // Between two callbacks: the event loop, a GC task.
                c.without_runtime += 1;
            } else {
                // Node's main thread runs JavaScript all the time here.
                c.fail(shown);
            }
            continue;
        };
        match innermost.desc.name.as_deref() {
            Some(name) if name == spec.leaf => {}
            Some(_) => {
                c.other(shown);
                continue;
            }
            None => {
                c.fail(shown);
                continue;
            }
        }
        if frames.iter().any(|f| f.inlined) {
            c.inlined += 1;
        }
        if patterns.iter().any(|p| matches(&frames, p, spec))
            && (lines == Lines::None || lines_ok(&frames, spec, lines))
        {
            c.pass(shown);
        } else {
            c.fail(shown);
        }
    }
    c
}

/// [`report_runtime`], and few samples without JavaScript.
fn report(what: &str, c: &Completeness, stats: &Stats) {
    eprintln!("{what}: {} samples without JavaScript", c.without_runtime);
    assert!(c.without_runtime * 4 <= c.at_leaf, "{what}: {} samples without JavaScript: {c:?}", c.without_runtime);
    report_runtime(what, "v8", c, MIN_SAMPLES, REQUIRED, stats);
}

/// The Nodes to test, each with a label: Node 20 ([`NODE`], or
/// `$EP_TEST_NODE`: another build to try), Node 18 ([`NODE18`], or
/// `$EP_TEST_NODE18`), each cached release of [`NODE_RELEASES`] (or its
/// variable). `$EP_TEST_NODES=node22,node18` keeps only those labels. One
/// missing is skipped, a failure under CI=true (.ci/run installs them all).
fn nodes() -> Vec<(&'static str, PathBuf)> {
    let mut found = Vec::new();
    let distributed = [("node20", NODE, "EP_TEST_NODE"), ("node18", NODE18, "EP_TEST_NODE18")];
    let only = std::env::var("EP_TEST_NODES").ok();
    for (i, (label, default, var)) in distributed.into_iter().chain(NODE_RELEASES).enumerate() {
        if only.as_ref().is_some_and(|only| !only.split(',').any(|l| l == label)) {
            continue;
        }
        let node = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
        if !node.exists() {
            let how =
                if i >= distributed.len() { "scripts/install-node-releases.sh" } else { "scripts/install-deps.sh" };
            assert!(!in_ci(), "{} is required under CI=true ({how})", node.display());
            eprintln!("SKIPPED: {} is not installed", node.display());
            continue;
        }
        found.push((label, node));
    }
    found
}

/// Profiles the workload run with `flags`, after `warm_up`, on each Node.
/// With `lines`, the workload's frames must have their lines too.
fn chain_test(spec: &Spec, mode: &str, flags: &[&str], lines: Lines, warm_up: Duration) -> Vec<Completeness> {
    nodes()
        .into_iter()
        .filter_map(|(label, node)| {
            chain_test_on(&node, label, spec, mode, Run { flags, lines, warm_up, only: |_| true })
        })
        .collect()
}

/// How a workload is run and which of its samples are checked.
struct Run<'a> {
    /// Node's flags.
    flags: &'a [&'a str],
    lines: Lines,
    /// Sampling starts this long after the workload says "ready".
    warm_up: Duration,
    /// The samples checked.
    only: fn(&Trace) -> bool,
}

/// Spawns `command`, a workload that prints "ready" once started, its
/// output in a file named after `tag`, and waits for that word.
fn spawn_ready(command: &mut Command, tag: &str) -> Workload {
    let out_path = std::env::temp_dir().join(format!("ep-v8-{tag}-{}", std::process::id()));
    let out = std::fs::File::create(&out_path).unwrap();
    let w = Workload::spawn(command.stdout(out).stderr(Stdio::inherit()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&out_path).unwrap_or_default().contains("ready") {
        assert!(Instant::now() < deadline, "node did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&out_path);
    w
}

/// A workload held in `awaitGo` until its go file exists, with the agent
/// on it ([`held_in_await_go`]).
struct Held {
    workload: Workload,
    /// The file whose creation ends the wait (`cold_and_warm_windows`).
    go: PathBuf,
    traces: Arc<Mutex<Vec<Trace>>>,
    agent: profiler_agent::Agent,
}

/// `script` (of workloads/node) on `node` after `flags`, spinning in
/// `awaitGo` until its go file exists; the agent started on it, and its
/// main thread seen in `awaitGo` (attached, `node` analysed, its maps
/// read). `None` when the agent cannot start here (outside CI).
fn held_in_await_go(node: &Path, flags: &[&str], script: &str, tag: &str) -> Option<Held> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node").join(script);
    let go = std::env::temp_dir().join(format!("ep-v8-{tag}-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let workload = spawn_ready(Command::new(node).args(flags).arg(&script).arg(&go), tag);
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![workload.pid()], ..AgentConfig::default() };
    let agent = start_agent(config, traces.clone())?;
    let waiting = |t: &Trace| t.frames.iter().any(|f| f.lines.iter().any(|l| &*l.function == "awaitGo"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !traces.lock().unwrap().iter().any(waiting) {
        assert!(Instant::now() < deadline, "node was never seen in awaitGo");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Held { workload, go, traces, agent })
}

/// [`chain_test`] on one Node.
fn chain_test_on(
    node: &Path,
    label: &str,
    spec: &Spec,
    mode: &str,
    Run { flags, lines, warm_up, only }: Run<'_>,
) -> Option<Completeness> {
    let _serial = serial();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node").join(spec.script);
    let mut command = Command::new(node);
    command.args(flags).arg(&script).args((spec.from == From::Immediate).then_some("immediate"));
    let w = spawn_ready(&mut command, mode);
    std::thread::sleep(warm_up);
    let off_cpu_threshold = if spec.off_cpu { 1.0 } else { 0.0 };
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold, ..AgentConfig::default() };
    let (traces, stats) = profile_with(config, |agent| {
        std::thread::sleep(Duration::from_secs(SECONDS));
        // A process over its naming budget has unnamed frames: say why.
        for notice in agent.notices().iter().filter(|n| n.contains("budget")) {
            eprintln!("{label} {mode}: {notice}");
        }
    })?;
    let kept: Vec<Trace> = traces.into_iter().filter(only).collect();
    let c = check(&kept, w.pid(), spec, lines);
    report(&format!("{label} {mode} {}", spec.script), &c, &stats);
    Some(c)
}

/// `--jitless`: every frame interpreted (Ignition), the leaf's pc in the
/// bytecode handlers of the embedded builtins.
#[test]
fn interpreted_chain() {
    chain_test(&abc(false), "interpreted", &["--jitless"], Lines::All, Duration::from_millis(300));
}

/// Sparkplug only (`--always-sparkplug --no-opt`: no TurboFan; Maglev is
/// off by default in both): baseline frames,
/// interpreter-shaped, their pcs in anonymous memory. Named, without
/// lines (their bytecode offset slot is stale: docs/v8.md).
#[test]
fn baseline_chain() {
    chain_test(&abc(false), "baseline", &["--always-sparkplug", "--no-opt"], Lines::None, Duration::from_millis(500));
}

/// Node's default tiers, warm: TurboFan compiles the loop of main with a,
/// b and c inlined (one machine frame, named innermost first).
#[test]
fn optimised_chain() {
    for c in chain_test(&abc(true), "optimised", &[], Lines::All, Duration::from_secs(3)) {
        assert!(c.inlined * 2 >= c.at_leaf, "the chain should come mostly from TurboFan code with inlining: {c:?}");
    }
}

/// A comparator called by the `Array.prototype.sort` builtin (through
/// stub frames), interpreted.
#[test]
fn comparator_under_sort_interpreted() {
    chain_test(&SORT, "interpreted", &["--jitless"], Lines::All, Duration::from_millis(300));
}

/// The same, warm: the comparator optimised (its callers, called a few
/// times per turn, stay in Sparkplug code: no lines).
#[test]
fn comparator_under_sort_optimised() {
    chain_test(&SORT, "optimised", &[], Lines::Leaf, Duration::from_secs(3));
}

/// An async function resumed from a promise (after `await` of a settled
/// one: its continuation runs from the microtask queue, not from its
/// caller), interpreted: pump, crunch, mix, leaf with their lines, below
/// them only the microtask runners and native code.
#[test]
fn async_resumed_interpreted() {
    chain_test(&ASYNC, "interpreted", &["--jitless"], Lines::All, Duration::from_millis(300));
}

/// The same, warm: pump's TurboFan code with crunch, mix and leaf inlined.
#[test]
fn async_resumed_optimised() {
    for c in chain_test(&ASYNC, "optimised", &[], Lines::All, Duration::from_secs(3)) {
        assert!(c.inlined * 2 >= c.at_leaf, "the chain should come mostly from TurboFan code with inlining: {c:?}");
    }
}

/// A worker thread's chain, interpreted: its own isolate and stack, the
/// same unwinder (nothing per isolate).
#[test]
fn worker_thread_interpreted() {
    chain_test(&WORKER, "interpreted", &["--jitless"], Lines::All, Duration::from_secs(2));
}

/// The same, warm (wa, wb, wc inlined into workerMain's TurboFan code).
#[test]
fn worker_thread_optimised() {
    chain_test(&WORKER, "optimised", &[], Lines::All, Duration::from_secs(3));
}

/// Off-CPU samples (the tp_btf entry of the unwinder, `v8_off_cpu`) of a
/// chain blocked in `Atomics.wait`: from the futex through the builtin's
/// C++ into c, b, a, main, interpreted.
#[test]
fn off_cpu_chain() {
    chain_test(&WAIT, "off-CPU", &["--jitless"], Lines::All, Duration::from_millis(300));
}

/// main -> a -> b -> c, c calling gc(): a full collection.
const GC: Spec = Spec {
    script: "gc_chain.js",
    from: From::TopLevel,
    off_cpu: false,
    frames: &[P::Js("main", true), P::Js("a", true), P::Js("b", true), P::Js("c", true)],
    leaf: "c",
    calls: &[("main", "sum += a()"), ("a", "return b() + 1"), ("b", "return c() + 1")],
    leaf_body: ("function c(", "function b("),
};

/// V8's conservative stack scan: hand-written, without CFI.
const STACK_SCAN: &str = "PushAllRegistersAndIterateStack";

/// The samples of a full collection called from JavaScript, those under
/// V8's conservative stack scan ([`STACK_SCAN`], described from its
/// code: docs/native-unwinding.md), reach the root through it, their
/// JavaScript callers whole. On the official releases of
/// [`NODE_RELEASES`] (V8 12+: Node 20's V8 collects without it).
#[test]
fn garbage_collection_called_from_javascript() {
    for (label, node) in nodes().into_iter().filter(|(l, _)| NODE_RELEASES.iter().any(|r| r.0 == *l)) {
        let elf = profiler_elf::ElfFile::open(&node).expect("node");
        assert!(elf.defines_symbols(&[STACK_SCAN])[0], "{label}: {} does not name {STACK_SCAN}", node.display());
        let run = Run {
            flags: &["--jitless", "--expose-gc"],
            lines: Lines::All,
            warm_up: Duration::from_millis(300),
            only: |t| t.frames.iter().any(|f| f.function_name() == Some(STACK_SCAN)),
        };
        chain_test_on(&node, label, &GC, "interpreted", run);
    }
}

/// How long a Node started after the agent is given to get its frames
/// (the analysis of `node`, ~100 MB, on a loaded machine).
const LATE_START: Duration = Duration::from_secs(10);

/// A Node started after the agent: attached as soon as its mappings are
/// loaded (nothing is read from the process); from its first sample with
/// a JavaScript frame, its chain is whole. Its samples from before its
/// load (the analysis of `node` takes seconds) are unwound late, through
/// V8's frames too: they carry the chain, so the first one with a
/// JavaScript frame comes within V8's start-up, not at the load.
#[test]
fn started_after_the_agent() {
    for (label, node) in nodes() {
        started_after_the_agent_on(label, &node);
    }
}

fn started_after_the_agent_on(label: &str, node: &Path) {
    let _serial = serial();
    let spec = abc(false);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node").join(spec.script);
    let mut w = Workload::spawn_gated(&format!("exec {} --jitless {} > /dev/null", node.display(), script.display()));
    let pid = w.pid();
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| {
        w.release();
        std::thread::sleep(LATE_START + Duration::from_secs(SECONDS));
    }) else {
        return;
    };
    let js = |t: &&Trace| t.frames.iter().any(|f| f.kind == FrameKind::V8Js);
    let since = traces.iter().filter(js).map(|t| t.timestamp_unix_ns).min().unwrap_or(u64::MAX);
    let main = |t: &&Trace| t.process.pid.0 == pid && t.tid.0 == pid && t.off_cpu_ns.is_none();
    let before = traces.iter().filter(main).filter(|t| t.timestamp_unix_ns < since).count();
    eprintln!(
        "{label} started after the agent: {before} main-thread samples before the first with JavaScript; late: \
         {} stacks through V8's frames, {} JavaScript frames, {} ended there",
        stats.late_unwind_v8_samples, stats.late_unwind_v8_frames, stats.late_unwind_v8_stops
    );
    assert!(stats.late_unwind_v8_frames > 0, "{label}: no JavaScript frame unwound late: {stats:#?}");
    // V8's start-up before the first JavaScript runs: well under a
    // second of samples (the load takes seconds).
    assert!(before < HZ as usize / 2, "{label}: {before} samples before the first with JavaScript");
    let later: Vec<Trace> = traces.into_iter().filter(|t| t.timestamp_unix_ns >= since).collect();
    let c = check(&later, pid, &spec, Lines::All);
    report(&format!("{label} started after the agent"), &c, &stats);
}

/// 100 recursive frames: the unwinder goes on in further runs of itself
/// (tail calls), every frame named with its line.
#[test]
fn deep_chain_interpreted() {
    chain_test(&DEEP, "interpreted", &["--jitless"], Lines::All, Duration::from_millis(300));
}

/// The unseen program's main thread: quoteBatch (each event loop turn)
/// -> quoteRoute -> legCost -> fuelSurcharge.
const FREIGHT_MAIN: Spec = Spec {
    script: "freight_desk.js",
    from: From::Immediate,
    off_cpu: false,
    frames: &[
        P::Js("quoteBatch", true),
        P::Js("quoteRoute", true),
        P::Js("legCost", true),
        P::Js("fuelSurcharge", true),
    ],
    leaf: "fuelSurcharge",
    calls: &[
        ("quoteBatch", "ledger = (ledger + quoteRoute(route))"),
        ("quoteRoute", "total += legCost(leg)"),
        ("legCost", "return base + fuelSurcharge("),
    ],
    leaf_body: ("function fuelSurcharge(", "function legCost("),
};

/// Its worker thread: rankCarriers -> sortCarriers ->
/// Array.prototype.sort -> byReliability -> reliabilityScore.
const FREIGHT_RANKER: Spec = Spec {
    script: "freight_desk.js",
    from: From::Worker,
    off_cpu: false,
    frames: &[
        P::Js("rankCarriers", true),
        P::Js("sortCarriers", true),
        P::Js("sort", false),
        P::Js("byReliability", true),
        P::Js("reliabilityScore", true),
    ],
    leaf: "reliabilityScore",
    calls: &[
        ("rankCarriers", "sortCarriers(carriers)"),
        ("sortCarriers", "sort(byReliability)"),
        ("byReliability", "return reliabilityScore(left)"),
    ],
    leaf_body: ("function reliabilityScore(", "function byReliability("),
};

/// The unseen program's first seconds (Ignition, Sparkplug, then TurboFan).
const COLD: Duration = Duration::from_secs(5);
/// When its warm window starts (after its start) and how long it lasts.
const WARM_AFTER: Duration = Duration::from_secs(20);
const WARM: Duration = Duration::from_secs(6);

/// Issue 13's closing measurement, on a program written apart from the
/// other workloads (`workloads/node/freight_desk.js`): Node starts (default
/// tiers) and spins in `awaitGo` until the agent names that frame; then
/// both chains start at once, the main thread's and a comparator called
/// from `Array.prototype.sort` in a worker thread. At 99 Hz, cold (the
/// first 5 s) and warm (6 s from 20 s on), >= 95% of each chain's leaf
/// samples carry the whole chain, every function named (inlined ones
/// included) from the program's script, the leaf with its line; the share
/// with every caller's line too is printed (Sparkplug frames have none:
/// docs/v8.md).
#[test]
fn unseen_program_cold_and_warm() {
    for (label, node) in nodes() {
        unseen_program_on(label, &node);
    }
}

fn unseen_program_on(label: &str, node: &Path) {
    let _serial = serial();
    let Some(Held { workload: w, go, traces, agent }) = held_in_await_go(node, &[], "freight_desk.js", "unseen") else {
        return;
    };
    let pid = w.pid();
    let (cold, warm) = cold_and_warm_windows(&go, COLD, WARM_AFTER, WARM);
    agent.stop().expect("reader ran without error");
    let _ = std::fs::remove_file(&go);
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    let mut results = Vec::new();
    for (when, window) in [("cold", &cold), ("warm", &warm)] {
        let in_window: Vec<Trace> = traces.iter().filter(|t| window.contains(&t.timestamp_unix_ns)).cloned().collect();
        for (chain, spec) in [("main", &FREIGHT_MAIN), ("sort comparator", &FREIGHT_RANKER)] {
            let what = format!("{label} unseen program, {when}, {chain} chain");
            let c = check(&in_window, pid, spec, Lines::Leaf);
            let all_lines = check(&in_window, pid, spec, Lines::All);
            eprintln!(
                "{what}: with every caller's line too: {}/{} = {:.1}%",
                all_lines.complete,
                all_lines.at_leaf,
                100.0 * all_lines.ratio(),
            );
            results.push((what, when, c));
        }
    }
    for (what, when, c) in &results {
        report(what, c, &stats);
        if *when == "warm" {
            assert!(c.inlined * 2 >= c.at_leaf, "{what}: mostly TurboFan code with inlining expected: {c:?}");
        }
    }
}

/// main -> a -> b -> c, a, b and c compiled afresh each round of 40 ms.
const FRESH: Spec = Spec {
    script: "cpu_fresh_code.js",
    from: From::TopLevel,
    off_cpu: false,
    frames: &[P::Js("main", true), P::Js("a", true), P::Js("b", true), P::Js("c", true)],
    leaf: "c",
    calls: &[],
    leaf_body: ("function c(", "function b("),
};

/// `pid`'s anonymous executable mappings, and whether its code range is
/// not executable whole: an anonymous executable mapping followed by at
/// least 1 MiB of inaccessible anonymous memory, and none of 64 MiB or
/// more (Node 24 and 26 map their 512 MiB range executable at once).
fn anonymous_code(pid: u32) -> (usize, bool) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let rows: Vec<(u64, u64, String, bool)> = maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (s, e) = f.first()?.split_once('-')?;
            let anonymous = f.len() == 5 && f[4] == "0";
            Some((u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?, f[1].to_string(), anonymous))
        })
        .collect();
    let code = |r: &(u64, u64, String, bool)| r.3 && r.2.as_bytes().get(2) == Some(&b'x');
    let reserved = rows.windows(2).any(|w| code(&w[0]) && w[1].3 && w[1].2 == "---p" && w[1].1 - w[1].0 >= 1 << 20)
        && !rows.iter().any(|r| code(r) && r.1 - r.0 >= 64 << 20);
    (rows.iter().filter(|r| code(r)).count(), reserved)
}

/// JIT code in pages V8 makes executable after the agent read the
/// process's maps (Node 22 reserves its 512 MiB code range and commits
/// 256 KiB pages of it as it compiles; Node 24 and 26 map theirs
/// executable whole): `cpu_fresh_code.js` (`--always-sparkplug`) compiles
/// a, b, c and filler code afresh every 40 ms, so the chain mostly runs
/// in pages committed a moment before, several a second, where the maps
/// are read again at most twice a second. From the moment it starts, for
/// 4 s, >= 95% of c's samples carry the whole chain (each page is V8's
/// as soon as it is committed: the reservation is marked for the V8
/// unwinder when the maps are read; without it, 82% on Node 22 and 91%
/// on Node 20, the rest cut at an unknown pc).
#[test]
fn code_committed_after_the_maps_were_read() {
    for (label, node) in nodes() {
        code_committed_after_the_maps_were_read_on(label, &node);
    }
}

fn code_committed_after_the_maps_were_read_on(label: &str, node: &Path) {
    let _serial = serial();
    let Some(Held { workload: w, go, traces, agent }) =
        held_in_await_go(node, &["--always-sparkplug"], FRESH.script, "fresh")
    else {
        return;
    };
    let pid = w.pid();
    let (before, reserved) = anonymous_code(pid);
    let (window, _) = cold_and_warm_windows(&go, Duration::from_secs(SECONDS), Duration::ZERO, Duration::ZERO);
    let (after, _) = anonymous_code(pid);
    agent.stop().expect("reader ran without error");
    let _ = std::fs::remove_file(&go);
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    eprintln!("{label}: anonymous executable mappings {before} before, {after} after; code range reserved: {reserved}");
    if reserved {
        // Else the test would not test what it says.
        assert!(after >= before + 4, "{label}: V8 committed few new code pages: {before} -> {after}");
    }
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    let in_window: Vec<Trace> = traces.into_iter().filter(|t| window.contains(&t.timestamp_unix_ns)).collect();
    let c = check(&in_window, pid, &FRESH, Lines::None);
    report(&format!("{label} code committed after the maps were read"), &c, &stats);
}
