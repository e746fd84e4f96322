//! HotSpot unwinding on the real eBPF programs: Java frames (interpreted,
//! then JIT-compiled with inlining) in place of the JVM's code cache,
//! native frames below them down to the thread's root, for each JDK on
//! this machine (Debian's OpenJDK 17, required under CI=true; Temurin 25
//! when installed).
//!
//! The workload (`workloads/java/HotspotSpin.java`, compiled by javac
//! here) runs `main -> a -> b -> c` on its main thread, `c` being a loop.
//! Each test asserts, in at least 95% of that thread's samples, the whole
//! chain: the launcher's thread root in libc and libjli, the JVM's
//! `JavaCalls` in libjvm, then exactly `HotspotSpin.main`, `a`, `b`, `c`
//! (named, with their source file), and only native or kernel code inside
//! `c`. Samples with no Java frame at all count as failures (the thread
//! runs Java code all the time).

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{in_ci, matches_chain, profile_with, serial, FrameDesc, Step, Workload};
use profiler_trace::{FrameKind, Trace};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 100;
const CHAIN: [&str; 4] = ["HotspotSpin.main", "HotspotSpin.a", "HotspotSpin.b", "HotspotSpin.c"];

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

/// Starts the workload with `flags`; returns it and its main thread's tid.
fn spawn(jdk: &Jdk, dir: &Path, flags: &[&str]) -> (Workload, u32) {
    let out_path = dir.join("stdout");
    let out = std::fs::File::create(&out_path).unwrap();
    let w = Workload::spawn(
        Command::new(jdk.home.join("bin/java"))
            .args(flags)
            .arg("-cp")
            .arg(dir)
            .arg("HotspotSpin")
            .stdout(out)
            .stderr(Stdio::inherit()),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        if let Some(tid) = text.lines().find_map(|l| l.strip_prefix("main-tid ")) {
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

/// The launcher's main Java thread below `main`: its thread root in libc,
/// libjli's JavaMain, libjvm's JNI and JavaCalls.
fn native_root() -> Vec<Step<String>> {
    vec![
        Step::ManyIn("libc.so.6".to_string()),
        Step::ManyIn("libjli.so".to_string()),
        Step::ManyIn("libjvm.so".to_string()),
    ]
}

fn check(traces: &[Trace], pid: u32, tid: u32) -> Completeness {
    let mut c = Completeness::default();
    for t in traces.iter().filter(|t| t.process.pid.0 == pid && t.tid.0 == tid) {
        let frames = expand(t);
        let java: Vec<usize> = (0..frames.len()).filter(|&i| frames[i].desc.kind == FrameKind::Jvm).collect();
        let (Some(&first), Some(&last)) = (java.first(), java.last()) else {
            c.fail(&frames);
            continue;
        };
        match frames[last].desc.name.as_deref() {
            None => {
                c.fail(&frames);
                continue;
            }
            Some(leaf) if leaf != CHAIN[3] => {
                c.elsewhere += 1;
                continue;
            }
            Some(_) => {}
        }
        if frames.iter().any(|f| f.inlined) {
            c.inlined += 1;
        }
        let root: Vec<FrameDesc> = frames[..first].iter().map(|f| f.desc.clone()).collect();
        let chain: Vec<&str> = frames[first..=last].iter().map(|f| f.desc.name.as_deref().unwrap_or("?")).collect();
        let sources_known = frames[first..=last].iter().all(|f| f.source_file.as_deref() == Some("HotspotSpin.java"));
        let leaf_side_native = frames[last + 1..].iter().all(|f| f.desc.kind != FrameKind::Jvm);
        if matches_chain(&root, &native_root()) && chain == CHAIN && sources_known && leaf_side_native {
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

/// Profiles the chain of `jdk` with `flags`, after `warm_up`.
fn chain_test(jdk: &Jdk, mode: &str, flags: &[&str], warm_up: Duration) -> Option<Completeness> {
    let _serial = serial();
    let dir = Scratch::new(mode);
    jdk.compile(&dir.0);
    let (w, tid) = spawn(jdk, &dir.0, flags);
    std::thread::sleep(warm_up);
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let (traces, stats) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))?;
    let c = check(&traces, w.pid(), tid);
    report(&format!("{} {mode} main -> a -> b -> c", jdk.name), &c, &stats);
    Some(c)
}

fn interpreted(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    chain_test(&jdk, "interpreted", &["-Xint"], Duration::from_millis(500));
}

fn compiled(jdk: Option<Jdk>) {
    let Some(jdk) = jdk else { return };
    // C2 compiles c() and main()'s loop (with a, b and c inlined) within
    // the first seconds.
    let Some(c) = chain_test(&jdk, "compiled", &[], Duration::from_secs(4)) else { return };
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

#[test]
fn jdk17_interpreted() {
    interpreted(jdk17());
}

#[test]
fn jdk17_compiled() {
    compiled(jdk17());
}

#[test]
fn jdk25_interpreted() {
    interpreted(jdk25());
}

#[test]
fn jdk25_compiled() {
    compiled(jdk25());
}
