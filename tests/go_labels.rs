//! Go pprof labels on the real eBPF programs: a Go program runs one hot
//! chain under `pprof.Do(request=r1, tenant=blue)`, another under
//! `pprof.Do(request=r2)`, a third without labels and a fourth with 12
//! labels (more than are kept), each on its own thread. The labels of each goroutine must reach at least 95% of the
//! samples at its chain's leaf, and no sample may carry another
//! goroutine's labels; so must the off-CPU samples of its thread (its
//! preemptions). Built with the installed Go (1.24+: a label set is
//! a slice), with Go 1.24 (the first with slices, `m.curg` where it was
//! before 1.25) and with Go 1.22 (a label set is a `map[string]string`),
//! the last two through the Go toolchain download (`GOTOOLCHAIN`).

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{in_ci, profile_with, serial, user_frames, Workload};
use profiler_trace::Trace;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;
const SECONDS: u64 = 10;
const REQUIRED: f64 = 0.95;
/// Fewer samples at a leaf than this says nothing.
const MIN_SAMPLES: usize = 25;
/// The Go release with the old label layout, fetched by the go command.
const OLD_GO: &str = "go1.22.12";
/// The first release with label slices (and the old `m` layout).
const FIRST_SLICE_GO: &str = "go1.24.13";

/// Builds `workloads/go_labels` with `toolchain` (`None`: the installed
/// Go); `None` (skip) without Go outside CI.
fn build(toolchain: Option<&str>) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/go_labels/main.go");
    let tag = toolchain.unwrap_or("local");
    let dir = std::env::temp_dir().join(format!("ep-go-labels-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&src, dir.join("main.go")).unwrap();
    std::fs::write(dir.join("go.mod"), "module go_labels\n\ngo 1.21\n").unwrap();
    let out = dir.join("go_labels");
    let mut command = Command::new("go");
    command.args(["build", "-o"]).arg(&out).arg(".").current_dir(&dir).env("CGO_ENABLED", "0");
    if let Some(t) = toolchain {
        command.env("GOTOOLCHAIN", t);
    }
    match command.output() {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) if !in_ci() && toolchain.is_some() => {
            eprintln!("SKIPPED: {tag} unavailable ({}); under CI=true this fails", String::from_utf8_lossy(&o.stderr));
            None
        }
        Ok(o) => panic!("go build ({tag}) failed:\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) if !in_ci() => {
            eprintln!("SKIPPED: no Go toolchain ({e}); under CI=true this fails");
            None
        }
        Err(e) => panic!("running go: {e}"),
    }
}

/// The labels of a trace, sorted (a Go map's order is not defined).
fn labels(trace: &Trace) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = trace.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    l.sort();
    l
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Checks the samples of `pid` at `leaf`: at least REQUIRED of them carry
/// exactly `want`, and none carries `wrong` labels.
fn check_leaf(traces: &[Trace], pid: u32, leaf: &str, want: &[(&str, &str)], stats: &Stats) {
    let at_leaf: Vec<&Trace> = traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .filter(|t| user_frames(t).last().and_then(|f| f.name.clone()).as_deref() == Some(leaf))
        .collect();
    let want = pairs(want);
    let right = at_leaf.iter().filter(|t| labels(t) == want).count();
    let wrong: Vec<Vec<(String, String)>> =
        at_leaf.iter().map(|t| labels(t)).filter(|l| !l.is_empty() && *l != want).collect();
    let ratio = right as f64 / at_leaf.len().max(1) as f64;
    eprintln!("{leaf}: {right}/{} samples carry {want:?} ({:.1}%)", at_leaf.len(), 100.0 * ratio);
    assert!(at_leaf.len() >= MIN_SAMPLES, "{leaf}: only {} samples; {stats:#?}", at_leaf.len());
    assert!(wrong.is_empty(), "{leaf}: samples with another goroutine's labels: {:?}", &wrong[..wrong.len().min(5)]);
    if want.is_empty() {
        assert_eq!(right, at_leaf.len(), "{leaf}: samples without labels only");
    } else {
        assert!(ratio >= REQUIRED, "{leaf}: {right} of {} samples carry {want:?}; {stats:#?}", at_leaf.len());
    }
}

fn labels_reach_their_goroutines_samples(toolchain: Option<&str>) {
    let _serial = serial();
    let Some(exe) = build(toolchain) else { return };
    // Killed when the test ends; long enough for a slow agent start.
    let w = Workload::spawn(Command::new(&exe).arg("300s"));
    std::thread::sleep(Duration::from_millis(300));
    // Off-CPU too: the busy threads are preempted (four of them on the
    // CPUs), and their switch-outs carry the goroutine's labels as well.
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold: 0.1, ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    eprintln!(
        "go labels: files {} processes {} samples {} no_g {} read_errors {} truncated {}",
        stats.go_label_files,
        stats.go_label_processes,
        stats.go_labels_samples,
        stats.go_labels_no_g,
        stats.go_labels_read_errors,
        stats.go_labels_truncated
    );
    assert_eq!(stats.go_label_files, 1, "the Go executable was recognised: {stats:#?}");
    check_leaf(&traces, w.pid(), "main.requestLeaf", &[("request", "r1"), ("tenant", "blue")], &stats);
    check_leaf(&traces, w.pid(), "main.otherLeaf", &[("request", "r2")], &stats);
    check_leaf(&traces, w.pid(), "main.plainLeaf", &[], &stats);
    check_many_labels(&traces, w.pid(), &stats);
    let off_cpu_labelled = traces
        .iter()
        .filter(|t| t.process.pid.0 == w.pid() && t.off_cpu_ns.is_some())
        .filter(|t| labels(t) == pairs(&[("request", "r1"), ("tenant", "blue")]))
        .count();
    eprintln!("off-CPU traces with request=r1: {off_cpu_labelled}");
    assert!(off_cpu_labelled > 0, "switch-outs of the labelled goroutine's thread carry its labels: {stats:#?}");
}

/// The goroutine with 12 labels (a Go 1.22 map of two buckets): its
/// samples carry 10 of them, right, k05's 70-byte value cut to 63 bytes,
/// and the cuts are counted.
fn check_many_labels(traces: &[Trace], pid: u32, stats: &Stats) {
    let all: Vec<(String, String)> = (0..12)
        .map(|i| {
            let value = if i == 5 { format!("v05{}", "x".repeat(60)) } else { format!("v{i:02}") };
            (format!("k{i:02}"), value)
        })
        .collect();
    let at_leaf: Vec<&Trace> = traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .filter(|t| user_frames(t).last().and_then(|f| f.name.clone()).as_deref() == Some("main.manyLeaf"))
        .collect();
    let ten = at_leaf.iter().filter(|t| t.labels.len() == 10).count();
    let ratio = ten as f64 / at_leaf.len().max(1) as f64;
    eprintln!("main.manyLeaf: {ten}/{} samples carry 10 labels ({:.1}%)", at_leaf.len(), 100.0 * ratio);
    assert!(at_leaf.len() >= MIN_SAMPLES, "main.manyLeaf: only {} samples; {stats:#?}", at_leaf.len());
    assert!(ratio >= REQUIRED, "main.manyLeaf: {ten} of {} samples carry 10 labels", at_leaf.len());
    for t in &at_leaf {
        for label in labels(t) {
            assert!(all.contains(&label), "main.manyLeaf: a label it does not have: {label:?}");
        }
    }
    assert!(stats.go_labels_truncated > 0, "the cuts are counted: {stats:#?}");
}

#[test]
fn go_labels_installed_go_slice_layout() {
    labels_reach_their_goroutines_samples(None);
}

#[test]
fn go_labels_go_1_22_map_layout() {
    labels_reach_their_goroutines_samples(Some(OLD_GO));
}

#[test]
fn go_labels_go_1_24_first_slice_layout() {
    labels_reach_their_goroutines_samples(Some(FIRST_SLICE_GO));
}
