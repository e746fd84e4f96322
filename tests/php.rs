//! PHP unwinding on the real eBPF programs: PHP frames in place of the
//! Zend VM's `execute_ex` runs, native frames above and below them
//! (Debian's `/usr/bin/php`, NTS; skipped when missing, except under
//! CI=true where it is required).
//!
//! Each test asserts the whole chain of PHP frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost PHP frame is
//! the chain's leaf (samples with no PHP frame, or an unnamed one, count
//! as failures), and prints the measured completeness.

use profiler_agent::AgentConfig;
use profiler_tests::{in_ci, profile_with, serial, Workload};
use profiler_trace::{FrameKind, Trace};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;
const SECONDS: u64 = 3;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 25;
const PHP: &str = "/usr/bin/php";

/// A user frame, root first: PHP (`name`, `file`, `line`) or native.
#[derive(Debug)]
enum F {
    Php { name: Option<String>, file: Option<String>, line: u32 },
    Native,
}

fn frames(trace: &Trace) -> Vec<F> {
    let user = trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel);
    user.map(|f| match f.kind {
        FrameKind::Php => {
            let l = f.lines.last();
            F::Php {
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
        F::Php { name, line, .. } => format!("php:{}:{line}", name.as_deref().unwrap_or("?")),
        F::Native => "n".to_string(),
    };
    frames.iter().map(one).collect::<Vec<_>>().join(";")
}

/// One expected PHP frame.
struct Expect {
    name: &'static str,
    /// Its script (`None`: a function written in C, no file).
    file: Option<PathBuf>,
    lines: RangeInclusive<u32>,
    /// Whether native frames lie between it and the PHP frame before it
    /// (C code called back into PHP: a new `execute_ex` run).
    native_before: bool,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/php").join(name)
}

/// The line of `script` that ends with `// line:<marker>`.
fn line_of(script: &Path, marker: &str) -> u32 {
    let text = std::fs::read_to_string(script).unwrap();
    let tag = format!("// line:{marker}");
    let index = text.lines().position(|l| l.trim_end().ends_with(&tag)).unwrap_or_else(|| panic!("no {tag}"));
    index as u32 + 1
}

fn php_installed() -> bool {
    if Path::new(PHP).exists() {
        return true;
    }
    assert!(!in_ci(), "{PHP} is required under CI=true (apt-get install php-cli)");
    eprintln!("SKIPPED: {PHP} is not installed; under CI=true this fails");
    false
}

/// Whether `frames` are: native frames (the thread's root, the SAPI),
/// the expected PHP frames with native frames between them as said, then
/// native frames only.
fn matches(frames: &[F], expected: &[Expect]) -> bool {
    let php: Vec<usize> = (0..frames.len()).filter(|&i| matches!(frames[i], F::Php { .. })).collect();
    if php.len() != expected.len() || php.first().is_none_or(|&i| i == 0) {
        return false;
    }
    php.iter().zip(expected).enumerate().all(|(k, (&i, e))| {
        let F::Php { name, file, line } = &frames[i] else { return false };
        name.as_deref() == Some(e.name)
            && e.lines.contains(line)
            && file.as_deref().map(Path::new) == e.file.as_deref()
            && (k == 0 || (i - php[k - 1] > 1) == e.native_before)
    })
}

/// The innermost PHP frame's name (`Some(None)`: unnamed).
fn innermost(frames: &[F]) -> Option<Option<String>> {
    frames.iter().rev().find_map(|f| match f {
        F::Php { name, .. } => Some(name.clone()),
        F::Native => None,
    })
}

/// Runs `name` under PHP (opcache off, as the CLI has it by default),
/// profiles it for SECONDS and checks its main thread's samples whose
/// innermost PHP frame is the last of `expected`.
fn chain_test(name: &str, expected: &[Expect]) {
    let w = Workload::spawn(Command::new(PHP).args(["-d", "opcache.enable_cli=0"]).arg(script(name)));
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        panic!("no BPF here")
    };
    let leaf = expected.last().unwrap().name;
    let (mut at_leaf, mut complete, mut elsewhere, mut failures) = (0, 0, 0, Vec::new());
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == w.pid()) {
        let frames = frames(t);
        match innermost(&frames) {
            Some(Some(n)) if n != leaf => elsewhere += 1,
            Some(Some(_)) if matches(&frames, expected) => {
                at_leaf += 1;
                complete += 1;
            }
            // No PHP frame (the thread runs PHP all the time), an
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
    assert!(stats.runtimes.get("php", "frames") > 0);
    assert_eq!(stats.runtimes.get("php", "read_errors"), 0);
    assert_eq!(stats.runtimes.get("php", "unsupported"), 0);
}

#[test]
fn chain_main_a_b_c() {
    let _serial = serial();
    if !php_installed() {
        return;
    }
    let path = script("cpu_chain.php");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32| Expect { name, file: file.clone(), lines: line..=line, native_before: false };
    let expected = [
        one("{main}", at("main")),
        one("Chain\\a", at("a")),
        one("Chain\\Worker::b", at("b")),
        Expect { name: "Chain\\c", file: file.clone(), lines: at("c_first")..=at("c_last"), native_before: false },
    ];
    chain_test("cpu_chain.php", &expected);
}

#[test]
fn usort_callback_is_called_back_from_c() {
    let _serial = serial();
    if !php_installed() {
        return;
    }
    let path = script("usort_callback.php");
    let at = |m: &str| line_of(&path, m);
    let file = Some(path.clone());
    let one = |name, line: u32, native_before| Expect { name, file: file.clone(), lines: line..=line, native_before };
    let expected = [
        one("{main}", at("main"), false),
        one("Chain\\a", at("a"), false),
        // A function written in C: its frame stands where the VM called
        // it; its own native frames (zend_sort, zend_call_function, ...)
        // lie below it, up to the callback's execute_ex run.
        Expect { name: "usort", file: None, lines: 0..=0, native_before: false },
        one("Chain\\Worker::compare", at("compare"), true),
        Expect { name: "Chain\\c", file: file.clone(), lines: at("c_first")..=at("c_last"), native_before: false },
    ];
    chain_test("usort_callback.php", &expected);
}
