//! HotSpot unwinding on the real eBPF programs: Java frames (interpreted,
//! then JIT-compiled with inlining) in place of the JVM's code cache,
//! native frames around them down to the thread's root, for each JDK on
//! this machine (Debian's OpenJDK 17, required under CI=true; Temurin 25
//! when installed).
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
use profiler_tests::{in_ci, profile_with, serial, FrameDesc, Workload};
use profiler_trace::{FrameKind, Trace};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

/// One step of an expected stack, root first.
#[derive(Clone, Copy, Debug)]
enum P {
    /// One Java frame of one of these methods (the workload's own are
    /// checked to come from [`SOURCE`]).
    Java(&'static [&'static str]),
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
    pattern: &'static [P],
}

const MAIN: Chain = Chain {
    arg: "main",
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

impl Chain {
    /// The name of its leaf's method.
    fn leaf(&self) -> &'static str {
        self.pattern.iter().rev().find_map(|p| if let P::Java(names) = p { Some(names[0]) } else { None }).unwrap()
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
        if !home.join("bin/java").exists() || !home.join("bin/javac").exists() {
            assert!(!(required && in_ci()), "{name} ({}) is required under CI=true", home.display());
            eprintln!("SKIPPED: {name} is not installed at {}", home.display());
            return None;
        }
        Some(Jdk { home, name })
    }

    /// Compiles the workload into a fresh directory.
    fn compile(&self, dir: &Path) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/java/HotspotSpin.java");
        let out = Command::new(self.home.join("bin/javac"))
            .arg("-d")
            .arg(dir)
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
        let dir = std::env::temp_dir().join(format!("ep-hotspot-{what}-{}", std::process::id()));
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
        .arg(format!("-I{}", jdk.home.join("include").display()))
        .arg(format!("-I{}", jdk.home.join("include/linux").display()))
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
        Command::new(jdk.home.join("bin/java"))
            .args(flags)
            .arg("-cp")
            .arg(dir)
            .arg("HotspotSpin")
            .arg(chain.arg)
            .stdout(out)
            .stderr(Stdio::inherit()),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let marker = format!("{}-tid ", chain.arg);
    loop {
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        if let Some(tid) = text.lines().find_map(|l| l.strip_prefix(marker.as_str())) {
            return (w, tid.trim().parse().expect("a tid"));
        }
        assert!(Instant::now() < deadline, "{}: the workload did not start", jdk.name);
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
                });
            }
            continue;
        }
        let mapping = f.mapping.as_ref().map(|m| m.file_name().to_string());
        let desc = FrameDesc { kind: f.kind, name: f.function_name().map(str::to_string), file: mapping };
        out.push(Expanded { desc, source_file: None, inlined: false });
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

#[derive(Debug, Default)]
struct Completeness {
    /// One whole stack, for the log.
    example: Option<String>,
    at_leaf: usize,
    complete: usize,
    /// Samples whose innermost Java frame is another method.
    elsewhere: usize,
    /// Samples with a Java frame inlined into another one.
    inlined: usize,
    failures: Vec<String>,
}

impl Completeness {
    fn fail(&mut self, frames: &[Expanded]) {
        self.at_leaf += 1;
        if self.failures.len() < 6 {
            self.failures.push(show(frames));
        }
    }

    fn ratio(&self) -> f64 {
        if self.at_leaf == 0 {
            0.0
        } else {
            self.complete as f64 / self.at_leaf as f64
        }
    }
}

/// Whether `file` is matched by `pattern` (`a|b`, `prefix*`).
fn file_matches(pattern: &str, file: &str) -> bool {
    pattern.split('|').any(|p| match p.strip_suffix('*') {
        Some(start) => file.starts_with(start),
        None => file == p,
    })
}

/// Whether `frames` (root first) are exactly `pattern`.
fn matches(frames: &[Expanded], pattern: &[P]) -> bool {
    let Some((step, rest)) = pattern.split_first() else { return frames.is_empty() };
    let native = |f: &Expanded| f.desc.kind != FrameKind::Jvm;
    match step {
        P::Java(names) => frames.first().is_some_and(|f| {
            let name = f.desc.name.as_deref().unwrap_or("");
            let ours = name.starts_with("HotspotSpin");
            f.desc.kind == FrameKind::Jvm
                && names.contains(&name)
                && (!ours || f.source_file.as_deref() == Some(SOURCE))
                && matches(&frames[1..], rest)
        }),
        P::OptJava(name) => {
            let here =
                frames.first().is_some_and(|f| f.desc.kind == FrameKind::Jvm && f.desc.name.as_deref() == Some(name));
            (here && matches(&frames[1..], rest)) || matches(frames, rest)
        }
        P::Native(pattern) => {
            let run = frames
                .iter()
                .take_while(|f| native(f) && f.desc.file.as_deref().is_some_and(|file| file_matches(pattern, file)))
                .count();
            (1..=run).any(|n| matches(&frames[n..], rest))
        }
        P::AnyNative => {
            let run = frames.iter().take_while(|f| native(f)).count();
            (0..=run).any(|n| matches(&frames[n..], rest))
        }
    }
}

fn check(traces: &[Trace], pid: u32, tid: u32, chain: &Chain) -> Completeness {
    check_since(traces, pid, tid, chain, 0)
}

/// [`check`] for the samples taken at or after `since_unix_ns`.
fn check_since(traces: &[Trace], pid: u32, tid: u32, chain: &Chain, since_unix_ns: u64) -> Completeness {
    let mut c = Completeness::default();
    let samples = traces.iter().filter(|t| t.process.pid.0 == pid && t.tid.0 == tid);
    for t in samples.filter(|t| t.timestamp_unix_ns >= since_unix_ns) {
        let frames = expand(t);
        let Some(innermost) = frames.iter().rev().find(|f| f.desc.kind == FrameKind::Jvm) else {
            c.fail(&frames);
            continue;
        };
        match innermost.desc.name.as_deref() {
            None => {
                c.fail(&frames);
                continue;
            }
            Some(leaf) if leaf != chain.leaf() => {
                c.elsewhere += 1;
                continue;
            }
            Some(_) => {}
        }
        if frames.iter().any(|f| f.inlined) {
            c.inlined += 1;
        }
        if matches(&frames, chain.pattern) {
            c.at_leaf += 1;
            c.complete += 1;
            c.example.get_or_insert_with(|| show(&frames));
        } else {
            c.fail(&frames);
        }
    }
    c
}

fn report(what: &str, c: &Completeness, stats: &Stats) {
    let cost = if stats.bpf_runs > 0 {
        format!("; BPF {:.0} ns per sample (all processes)", stats.bpf_run_time_ns as f64 / stats.bpf_runs as f64)
    } else {
        String::new()
    };
    eprintln!(
        "completeness {what}: {}/{} = {:.1}% ({} samples elsewhere, {} with inlined frames){cost}",
        c.complete,
        c.at_leaf,
        100.0 * c.ratio(),
        c.elsewhere,
        c.inlined
    );
    eprintln!("  e.g. {}", c.example.as_deref().unwrap_or("-"));
    let hotspot = stats.runtimes.0.iter().find(|(r, _)| *r == "hotspot").map(|(_, c)| c.clone());
    eprintln!("  hotspot counters: {hotspot:?}");
    let counter = |name| stats.runtimes.get("hotspot", name);
    assert!(counter("frames") > 0 && counter("tail_calls") > 0, "{what}: no Java frame recorded: {stats:#?}");
    assert!(counter("frames_named") >= counter("frames_unknown"), "{what}: mostly unnamed: {stats:#?}");
    assert_eq!(counter("unsupported") + counter("attach_failures"), 0, "{what}: {stats:#?}");
    assert!(c.at_leaf >= MIN_SAMPLES, "{what}: only {} samples at the leaf; {stats:#?}", c.at_leaf);
    assert!(
        c.ratio() >= REQUIRED,
        "{what}: {} of {} samples at the leaf carry the whole chain ({:.1}%); some that do not (root \
         first):\n{}\n{stats:#?}",
        c.complete,
        c.at_leaf,
        100.0 * c.ratio(),
        c.failures.join("\n")
    );
}

/// Profiles `chain` on `jdk` with `flags`, after `warm_up`.
fn chain_test(jdk: &Jdk, chain: &Chain, mode: &str, flags: &[&str], warm_up: Duration) -> Option<Completeness> {
    let _serial = serial();
    let dir = Scratch::new(&format!("{}-{mode}", chain.arg));
    jdk.compile(&dir.0);
    let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    if chain.arg == "jni" {
        let lib = build_jni(jdk, &dir.0)?;
        flags.push(format!("-Dhotspot.jni={}", lib.display()));
    }
    let (w, tid) = spawn(jdk, &dir.0, chain, &flags);
    std::thread::sleep(warm_up);
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let (traces, stats) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))?;
    let c = check(&traces, w.pid(), tid, chain);
    report(&format!("{} {mode} {} chain", jdk.name, chain.arg), &c, &stats);
    Some(c)
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

/// A JVM started after the agent (attached while it starts, once its
/// tables are set and `libjvm.so` analysed; the unwinder reads the code
/// cache itself when it is set after that): from its first sample with a
/// Java frame (within [`LATE_START`] and [`SECONDS`] of its `main()`),
/// its chain is whole.
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
    let since = traces.iter().filter(java).map(|t| t.timestamp_unix_ns).min().unwrap_or(u64::MAX);
    let c = check_since(&traces, pid, tid, &MAIN, since);
    report(&format!("{} started after the agent, main chain", jdk.name), &c, &stats);
}

#[test]
fn jdk17_started_after_the_agent() {
    started_after_the_agent(jdk17());
}

#[test]
fn jdk25_started_after_the_agent() {
    started_after_the_agent(jdk25());
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
    jdk25_sort_interpreted: interpreted(jdk25, SORT);
    jdk25_sort_compiled: compiled(jdk25, SORT);
    jdk25_jni_interpreted: interpreted(jdk25, JNI);
    jdk25_jni_compiled: compiled(jdk25, JNI);
}
