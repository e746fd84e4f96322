//! Perl unwinding on the real eBPF programs: Perl frames in place of
//! `Perl_runops_standard` runs, native frames above and below them
//! (Debian's `/usr/bin/perl`, threaded, libperl linked in; skipped when
//! missing, except under CI=true where it is required).
//!
//! Each test asserts the whole chain of Perl frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost Perl frame
//! is the chain's leaf (samples with no Perl frame, or an unnamed one,
//! count as failures), and prints the measured completeness.

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{in_ci, profile_with, serial, Workload};
use profiler_trace::{FrameKind, Trace};
use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;
const SECONDS: u64 = 3;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 25;
const PERL: &str = "/usr/bin/perl";

/// A user frame, root first: Perl (`name`, `file`, `line`) or native.
#[derive(Debug)]
enum F {
    Perl { name: Option<String>, file: Option<String>, line: u32 },
    Native,
}

fn frames(trace: &Trace) -> Vec<F> {
    let user = trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel);
    user.map(|f| match f.kind {
        FrameKind::Perl => {
            let l = f.lines.last();
            F::Perl {
                name: l.map(|l| l.function.to_string()),
                file: l.and_then(|l| l.file.as_deref().map(str::to_string)),
                line: l.map_or(0, |l| l.line),
            }
        }
        _ => F::Native,
    })
    .collect()
}

fn show(frames: &[F]) -> String {
    let one = |f: &F| match f {
        F::Perl { name, line, .. } => format!("pl:{}:{line}", name.as_deref().unwrap_or("?")),
        F::Native => "n".to_string(),
    };
    frames.iter().map(one).collect::<Vec<_>>().join(";")
}

/// One expected Perl frame.
struct Expect {
    name: &'static str,
    /// Its script.
    file: Option<PathBuf>,
    lines: RangeInclusive<u32>,
    /// Whether native frames lie between it and the Perl frame before it
    /// (C code called back into Perl: a nested op loop).
    native_before: bool,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/perl").join(name)
}

/// The line of `script` that ends with `# line:<marker>`.
fn line_of(script: &Path, marker: &str) -> u32 {
    let text = std::fs::read_to_string(script).unwrap();
    let tag = format!("# line:{marker}");
    let index = text.lines().position(|l| l.trim_end().ends_with(&tag)).unwrap_or_else(|| panic!("no {tag}"));
    index as u32 + 1
}

fn perl_installed() -> bool {
    if Path::new(PERL).exists() {
        return true;
    }
    assert!(!in_ci(), "{PERL} is required under CI=true (apt-get install perl)");
    eprintln!("SKIPPED: {PERL} is not installed; under CI=true this fails");
    false
}

/// Whether `frames` are: native frames (the thread's root, perl_run),
/// the expected Perl frames with native frames between them as said, then
/// native frames only.
fn matches(frames: &[F], expected: &[Expect]) -> bool {
    let perl: Vec<usize> = (0..frames.len()).filter(|&i| matches!(frames[i], F::Perl { .. })).collect();
    if perl.len() != expected.len() || perl.first().is_none_or(|&i| i == 0) {
        return false;
    }
    perl.iter().zip(expected).enumerate().all(|(k, (&i, e))| {
        let F::Perl { name, file, line } = &frames[i] else { return false };
        name.as_deref() == Some(e.name)
            && e.lines.contains(line)
            && file.as_deref().map(Path::new) == e.file.as_deref()
            && (k == 0 || (i - perl[k - 1] > 1) == e.native_before)
    })
}

/// The innermost Perl frame's name (`Some(None)`: unnamed).
fn innermost(frames: &[F]) -> Option<Option<String>> {
    frames.iter().rev().find_map(|f| match f {
        F::Perl { name, .. } => Some(name.clone()),
        F::Native => None,
    })
}

/// Runs `name` under Perl and profiles it for SECONDS.
fn profile(name: &str) -> (Workload, Vec<Trace>, Stats) {
    let w = Workload::spawn(Command::new(PERL).arg(script(name)));
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        panic!("no BPF here")
    };
    (w, traces, stats)
}

/// Profiles `name` and checks its main thread against `expected`.
fn chain_test(name: &str, expected: &[Expect]) {
    let (w, traces, stats) = profile(name);
    check(name, &traces, &stats, w.pid(), w.pid(), expected);
}

/// Checks the samples of thread `tid` of `pid` whose innermost Perl
/// frame is the last of `expected`.
fn check(name: &str, traces: &[Trace], stats: &Stats, pid: u32, tid: u32, expected: &[Expect]) {
    let leaf = expected.last().unwrap().name;
    let (mut at_leaf, mut complete, mut elsewhere, mut failures) = (0, 0, 0, Vec::new());
    for t in traces.iter().filter(|t| t.process.pid.0 == pid && t.tid.0 == tid) {
        let frames = frames(t);
        match innermost(&frames) {
            Some(Some(n)) if n != leaf => elsewhere += 1,
            Some(Some(_)) if matches(&frames, expected) => {
                at_leaf += 1;
                complete += 1;
            }
            // No Perl frame (the thread runs Perl all the time), an
            // unnamed one, or a wrong chain.
            _ => {
                at_leaf += 1;
                if failures.len() < 5 {
                    failures.push(show(&frames));
                }
            }
        }
    }
    let ratio = if at_leaf == 0 { 0.0 } else { complete as f64 / at_leaf as f64 };
    eprintln!("completeness {name}: {complete}/{at_leaf} = {:.1}% ({elsewhere} elsewhere)", 100.0 * ratio);
    assert!(at_leaf >= MIN_SAMPLES, "{name}: only {at_leaf} samples at the leaf; {stats:#?}");
    assert!(
        ratio >= REQUIRED,
        "{name}: {complete} of {at_leaf} samples at the leaf carry the whole chain; some that do not (root \
         first):\n{}\n{:?}",
        failures.join("\n"),
        stats.runtimes
    );
    assert!(stats.runtimes.get("perl", "frames") > 0);
    assert_eq!(stats.runtimes.get("perl", "read_errors"), 0);
    assert_eq!(stats.runtimes.get("perl", "no_interpreter"), 0, "every thread's interpreter is found");
    assert_eq!(stats.runtimes.get("perl", "unsupported"), 0);
}

#[test]
fn chain_main_a_b_c() {
    let _serial = serial();
    if !perl_installed() {
        return;
    }
    let path = script("cpu_chain.pl");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32| Expect { name, file: file.clone(), lines: line..=line, native_before: false };
    let expected = [
        one("main", at("main")),
        one("Chain::a", at("a")),
        one("Chain::Worker::b", at("b")),
        Expect { name: "Chain::c", file: file.clone(), lines: at("c_first")..=at("c_last"), native_before: false },
    ];
    chain_test("cpu_chain.pl", &expected);
}

#[test]
fn sort_sub_is_called_back_from_c() {
    let _serial = serial();
    if !perl_installed() {
        return;
    }
    let path = script("sort_sub.pl");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32, native_before| Expect { name, file: file.clone(), lines: line..=line, native_before };
    let expected = [
        one("main", at("main"), false),
        one("Chain::a", at("a"), false),
        // pp_sort (C) runs the comparison sub in a nested op loop, on a
        // stack info of its own: native frames between.
        one("Chain::by_value", at("by_value"), true),
        Expect { name: "Chain::c", file: file.clone(), lines: at("c_first")..=at("c_last"), native_before: false },
    ];
    chain_test("sort_sub.pl", &expected);
}

/// Ithreads: each thread's interpreter is its own (`PL_current_context`,
/// thread-local), so each shows its own chain, down to `main` at the
/// statement that created it.
#[test]
fn each_thread_shows_its_own_chain() {
    let _serial = serial();
    if !perl_installed() {
        return;
    }
    let threads = Command::new(PERL).args(["-Mthreads", "-e1"]).status();
    if !threads.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "perl's threads module is required under CI=true (apt-get install perl)");
        eprintln!("SKIPPED: perl has no threads module");
        return;
    }
    let path = script("threads.pl");
    let at = |m: &str| line_of(&path, m);
    let (w, traces, stats) = profile("threads.pl");
    let mut by_leaf: HashMap<String, HashSet<u32>> = HashMap::new();
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid()) {
        if let Some(Some(name)) = innermost(&frames(t)) {
            by_leaf.entry(name).or_default().insert(t.tid.0);
        }
    }
    let tids = |leaf: &str| by_leaf.get(leaf).cloned().unwrap_or_default();
    let (a, b) = (tids("Chain::a_leaf"), tids("Chain::b_leaf"));
    assert!(a.len() == 1 && b.len() == 1 && a != b, "one thread per leaf: {by_leaf:?}");
    assert!(!a.contains(&w.pid()) && !b.contains(&w.pid()), "not the main thread");
    let file = Some(path.clone());
    for (worker, leaf, tids) in [("worker_a", "a", &a), ("worker_b", "b", &b)] {
        let expected = [
            Expect { name: "main", file: file.clone(), lines: at("threads")..=at("threads"), native_before: false },
            Expect {
                name: if leaf == "a" { "Chain::worker_a" } else { "Chain::worker_b" },
                file: file.clone(),
                lines: at(worker)..=at(worker),
                native_before: false,
            },
            Expect {
                name: if leaf == "a" { "Chain::a_leaf" } else { "Chain::b_leaf" },
                file: file.clone(),
                lines: at(&format!("{leaf}_first"))..=at(&format!("{leaf}_last")),
                native_before: false,
            },
        ];
        let tid = *tids.iter().next().unwrap();
        check(&format!("threads.pl {worker}"), &traces, &stats, w.pid(), tid, &expected);
    }
}
