//! The agent in a nested PID namespace: the real CLI runs under
//! `unshare -pf --mount-proc` beside a C chain workload started in the
//! same namespace, and must unwind and name the workload's chain whole.
//! Only the namespace's pids let the agent read the workload's /proc, so
//! whole chains show that the programs reported the namespace's pids.

use profiler_tests::{build_workload, in_ci, serial};
use std::path::PathBuf;
use std::process::Command;

const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: u64 = 25;
const CHAIN: &str = "main;chain_1;chain_2;chain_3;chain_4;chain_leaf";

/// The CLI binary cargo built in this workspace's target directory (the
/// release one first), if any.
fn agent_binary() -> Option<PathBuf> {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
    ["release", "debug"].iter().map(|p| target.join(p).join("ebpf-profiler")).find(|p| p.exists())
}

fn skip(why: &str) {
    assert!(!in_ci(), "{why}");
    eprintln!("SKIPPED: {why}; under CI=true this fails");
}

#[test]
fn agent_in_a_nested_pid_namespace_unwinds_its_namespace_processes() {
    let _serial = serial();
    let Some(agent) = agent_binary() else {
        return skip("no ebpf-profiler binary (cargo build -p ebpf-profiler)");
    };
    if Command::new("unshare").arg("--version").output().is_err() {
        return skip("unshare is missing");
    }
    let workload =
        build_workload("gcc", "native_chain.c", &["-O2", "-fomit-frame-pointer", "-pthread"], "native_chain");
    let output = std::env::temp_dir().join(format!("ep-pidns-{}.folded", std::process::id()));
    // The shell is pid 1 of the new namespace; the workload is its pid 2.
    let script = format!(
        "{w} & sleep 0.3; {a} --samples-per-second 99 --duration 4s --pid 2 --output {o}; rc=$?; kill $!; exit $rc",
        w = workload.display(),
        a = agent.display(),
        o = output.display()
    );
    let run = Command::new("unshare").args(["-pf", "--mount-proc", "sh", "-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() && stderr.contains("BPF") && !in_ci() {
        return skip(&format!("the agent could not start: {stderr}"));
    }
    assert!(run.status.success(), "the agent failed: {stderr}");
    assert!(stderr.contains("running in a nested PID namespace"), "no notice of the namespace: {stderr}");

    let folded = std::fs::read_to_string(&output).unwrap();
    let _ = std::fs::remove_file(&output);
    let (mut whole, mut at_leaf) = (0u64, 0u64);
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else { continue };
        let count: u64 = count.parse().unwrap();
        if stack.ends_with(";chain_leaf") {
            at_leaf += count;
        }
        if stack.ends_with(CHAIN) && stack.starts_with("native_chain;_start;") {
            whole += count;
        }
    }
    // Raw addresses are what kernel pids gave (unknown_pid): failures.
    let unresolved: u64 = folded
        .lines()
        .filter(|l| l.starts_with("native_chain;0x"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    let total = at_leaf + unresolved;
    eprintln!("nested PID namespace: {whole} of {total} samples at the chain's leaf carry the whole chain");
    assert!(total >= MIN_SAMPLES, "too few samples: {folded}");
    assert!(whole as f64 >= REQUIRED * total as f64, "{whole} of {total} whole:\n{folded}\n{stderr}");
}
