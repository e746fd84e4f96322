//! CRuby unwinding on the real eBPF programs: Ruby frames in place of
//! the VM's `rb_vm_exec` runs, native frames above and below them
//! (Debian's `/usr/bin/ruby`; skipped when missing, except under CI=true
//! where it is required).
//!
//! Each test asserts the whole chain of Ruby frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost Ruby frame
//! is the chain's leaf (samples with no Ruby frame, or an unnamed one,
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
const RUBY: &str = "/usr/bin/ruby";

/// A user frame, root first: Ruby (`name`, source `file`, `line`) or
/// native.
#[derive(Debug)]
enum F {
    Ruby { name: Option<String>, file: Option<String>, line: u32 },
    Native,
}

fn frames(trace: &Trace) -> Vec<F> {
    trace
        .frames
        .iter()
        .rev()
        .filter(|f| f.kind != FrameKind::Kernel)
        .map(|f| match f.kind {
            FrameKind::Ruby => {
                let l = f.lines.last();
                F::Ruby {
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
        F::Ruby { name, line, .. } => format!("rb:{}:{line}", name.as_deref().unwrap_or("?")),
        F::Native => "n".to_string(),
    };
    frames.iter().map(one).collect::<Vec<_>>().join(";")
}

/// One expected Ruby frame: its name, its file (`None`: a C function,
/// no file) and its line range.
struct Expect {
    name: &'static str,
    file: Option<PathBuf>,
    lines: RangeInclusive<u32>,
    /// Native frames between it and the previous Ruby frame: none (one
    /// run of the VM), or some (C code called back into Ruby).
    native_before: bool,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/ruby").join(name)
}

/// The line of `script` that ends with `# line:<marker>`.
fn line_of(script: &Path, marker: &str) -> u32 {
    let text = std::fs::read_to_string(script).unwrap();
    let tag = format!("# line:{marker}");
    let index = text.lines().position(|l| l.trim_end().ends_with(&tag)).unwrap_or_else(|| panic!("no {tag}"));
    index as u32 + 1
}

fn ruby_installed() -> bool {
    if Path::new(RUBY).exists() {
        return true;
    }
    assert!(!in_ci(), "{RUBY} is required under CI=true (apt-get install ruby)");
    eprintln!("SKIPPED: {RUBY} is not installed; under CI=true this fails");
    false
}

/// Whether `frames` are: native frames (the thread's root), the expected
/// Ruby frames with native frames between them as said, then native
/// frames only (the VM's own, C code at the leaf).
fn matches(frames: &[F], expected: &[Expect]) -> bool {
    let ruby: Vec<usize> = (0..frames.len()).filter(|&i| matches!(frames[i], F::Ruby { .. })).collect();
    if ruby.len() != expected.len() || ruby.first().is_none_or(|&i| i == 0) {
        return false;
    }
    for (k, (&i, e)) in ruby.iter().zip(expected).enumerate() {
        let F::Ruby { name, file, line } = &frames[i] else { unreachable!() };
        if name.as_deref() != Some(e.name) || !e.lines.contains(line) {
            return false;
        }
        if file.as_deref().map(Path::new) != e.file.as_deref() {
            return false;
        }
        if k > 0 && (i - ruby[k - 1] > 1) != e.native_before {
            return false;
        }
    }
    true
}

/// Runs `script` and profiles it for SECONDS.
fn profile(name: &str) -> (Workload, Vec<Trace>, Stats) {
    let w = Workload::spawn(Command::new(RUBY).arg(script(name)));
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        panic!("no BPF here")
    };
    (w, traces, stats)
}

/// The innermost Ruby frame's name (`Some(None)`: unnamed).
fn innermost(frames: &[F]) -> Option<Option<String>> {
    frames.iter().rev().find_map(|f| match f {
        F::Ruby { name, .. } => Some(name.clone()),
        F::Native => None,
    })
}

/// Checks the samples of thread `tid` of `pid` whose innermost Ruby
/// frame is the last of `expected`.
fn check(what: &str, traces: &[Trace], stats: &Stats, pid: u32, tid: u32, expected: &[Expect]) {
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
            // No Ruby frame (the thread runs Ruby code all the time), an
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
    let cost = if stats.bpf_runs > 0 {
        format!("; BPF {:.0} ns per sample (all processes)", stats.bpf_run_time_ns as f64 / stats.bpf_runs as f64)
    } else {
        String::new()
    };
    eprintln!("completeness {what}: {complete}/{at_leaf} = {:.1}% ({elsewhere} elsewhere){cost}", 100.0 * ratio);
    assert!(at_leaf >= MIN_SAMPLES, "{what}: only {at_leaf} samples at the leaf; {stats:#?}");
    assert!(
        ratio >= REQUIRED,
        "{what}: {complete} of {at_leaf} samples at the leaf carry the whole chain; some that do not (root \
         first):\n{}\n{:?}",
        failures.join("\n"),
        stats.runtimes
    );
    assert!(stats.runtimes.get("ruby", "frames") > 0);
    assert_eq!(stats.runtimes.get("ruby", "no_ec"), 0, "every Ruby thread's context is found");
    assert_eq!(stats.runtimes.get("ruby", "unsupported"), 0);
}

/// Profiles `name` and checks its main thread against `expected`.
fn chain_test(name: &str, expected: &[Expect]) {
    let (w, traces, stats) = profile(name);
    check(name, &traces, &stats, w.pid(), w.pid(), expected);
}

#[test]
fn chain_main_a_b_c() {
    let _serial = serial();
    if !ruby_installed() {
        return;
    }
    let path = script("cpu_chain.rb");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32, native_before| Expect { name, file: file.clone(), lines: line..=line, native_before };
    let expected = [
        one("<main>", at("main"), false),
        one("Object#a", at("a"), false),
        one("Chain::Worker#b", at("b"), false),
        Expect { name: "Object#c", file: file.clone(), lines: at("c_first")..=at("c_last"), native_before: false },
    ];
    chain_test("cpu_chain.rb", &expected);
}

#[test]
fn sort_block_is_called_back_from_c() {
    let _serial = serial();
    if !ruby_installed() {
        return;
    }
    let path = script("sort_block.rb");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32, native_before| Expect { name, file: file.clone(), lines: line..=line, native_before };
    let expected = [
        one("<main>", at("main"), false),
        one("Object#caller", at("caller"), false),
        // A C function: its frame stands where the VM called it, its own
        // native frames (ruby_qsort, rb_yield, ...) below it.
        Expect { name: "Array#sort", file: None, lines: 0..=0, native_before: false },
        one("block in caller", at("caller"), true),
        Expect {
            name: "Object#cmp",
            file: file.clone(),
            lines: at("cmp_first")..=at("cmp_last"),
            native_before: false,
        },
    ];
    chain_test("sort_block.rb", &expected);
}

#[test]
fn each_thread_shows_its_own_chain() {
    let _serial = serial();
    if !ruby_installed() {
        return;
    }
    let path = script("threads.rb");
    let at = |m: &str| line_of(&path, m);
    let (w, traces, stats) = profile("threads.rb");
    // Which threads ran which leaf: each thread must show its own.
    let mut by_leaf: HashMap<String, HashSet<u32>> = HashMap::new();
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid()) {
        if let Some(Some(name)) = innermost(&frames(t)) {
            by_leaf.entry(name).or_default().insert(t.tid.0);
        }
    }
    let tids = |leaf: &str| by_leaf.get(leaf).cloned().unwrap_or_default();
    let (a, b) = (tids("Object#a_leaf"), tids("Object#b_leaf"));
    assert!(a.len() == 1 && b.len() == 1 && a != b, "one thread per leaf: {by_leaf:?}");
    assert!(!a.contains(&w.pid()) && !b.contains(&w.pid()), "not the main thread");
    let file = Some(path.clone());
    for (worker, leaf, tids) in [("worker_a", "a", &a), ("worker_b", "b", &b)] {
        let expected = [
            Expect {
                name: "block in <main>",
                file: file.clone(),
                lines: at("threads")..=at("threads"),
                native_before: false,
            },
            Expect {
                name: if leaf == "a" { "Object#worker_a" } else { "Object#worker_b" },
                file: file.clone(),
                lines: at(worker)..=at(worker),
                native_before: false,
            },
            Expect {
                name: if leaf == "a" { "Object#a_leaf" } else { "Object#b_leaf" },
                file: file.clone(),
                lines: at(&format!("{leaf}_first"))..=at(&format!("{leaf}_last")),
                native_before: false,
            },
        ];
        let tid = *tids.iter().next().unwrap();
        check(&format!("threads.rb {worker}"), &traces, &stats, w.pid(), tid, &expected);
    }
}

/// YJIT (off by default; `--yjit`): its machine code lies in anonymous
/// memory without unwind tables, so a stack through it ends there
/// (`unwind_stopped.no_unwind_info`): its Ruby frames are lost, never
/// named wrongly.
#[test]
fn yjit_code_ends_stacks_without_misnaming() {
    let _serial = serial();
    if !ruby_installed() {
        return;
    }
    let path = script("cpu_chain.rb");
    let yjit = Command::new(RUBY).args(["--yjit", "-e", "exit(RubyVM::YJIT.enabled? ? 0 : 1)"]).status();
    if !yjit.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "{RUBY} --yjit is required under CI=true (Debian's Ruby 3.1 has it)");
        eprintln!("SKIPPED: {RUBY} has no YJIT");
        return;
    }
    let w = Workload::spawn(Command::new(RUBY).arg("--yjit").arg(&path));
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        panic!("no BPF here")
    };
    let known = ["<main>", "Object#a", "Chain::Worker#b", "Object#c"];
    let mut samples = 0;
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == w.pid()) {
        samples += 1;
        for f in frames(t) {
            if let F::Ruby { name, .. } = f {
                let name = name.unwrap_or_else(|| panic!("an unnamed Ruby frame: {}", show(&frames(t))));
                assert!(known.contains(&name.as_str()), "{name} is not a frame of the script");
            }
        }
    }
    let jit_ends = stats.unwind_stopped.get(profiler_bpf::UnwindStop::NoUnwindInfo);
    eprintln!("yjit: {samples} main-thread samples, {jit_ends} stacks ended in code without unwind tables");
    assert!(samples >= MIN_SAMPLES, "only {samples} samples");
    assert!(jit_ends > samples as u64 / 2, "most stacks end in YJIT code: {:?}", stats.unwind_stopped);
}

/// Off-CPU (`ruby_off_cpu`, the same walk at a scheduler switch): every
/// switch-out of a thread waiting in `Kernel#sleep` carries its chain.
#[test]
fn off_cpu_waits_carry_the_ruby_chain() {
    let _serial = serial();
    if !ruby_installed() {
        return;
    }
    let path = script("sleep_chain.rb");
    let at = |m: &str| line_of(&path, m);
    let w = Workload::spawn(Command::new(RUBY).arg(&path));
    std::thread::sleep(Duration::from_millis(500));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold: 1.0, ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        panic!("no BPF here")
    };
    let off: Vec<Trace> = traces.into_iter().filter(|t| t.off_cpu_ns.is_some()).collect();
    let file = Some(path.clone());
    let one = |name, line: u32| Expect { name, file: file.clone(), lines: line..=line, native_before: false };
    let expected = [
        one("<main>", at("main")),
        one("Object#a", at("a")),
        one("Object#b", at("b")),
        Expect { name: "Kernel#sleep", file: None, lines: 0..=0, native_before: false },
    ];
    check("sleep_chain.rb off-CPU", &off, &stats, w.pid(), w.pid(), &expected);
}
