//! The process manager under churn, on the real eBPF programs: while
//! ~200 short-lived processes start every second (fork + exec of
//! `/bin/true`), whole-system profiling loses no process event (neither
//! in the kernel's ring buffer nor in the manager's queue), sees every
//! exec, and a frame-pointer-less program started in the middle unwinds
//! whole (its files were analysed at an earlier run and kept: no table
//! is built again for a program started again). Prints the load latency
//! the agent measured.

use profiler_agent::AgentConfig;
use profiler_tests::{build_workload, c_main_thread, completeness, profile_with, serial, Step};
use std::process::{Command, Stdio};
use std::time::Duration;
use Step::Fn;

const HZ: u32 = 99;
const EXECS_PER_SECOND: u32 = 200;
const CHURN_SECONDS: u32 = 4;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 25;
const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer"];

#[test]
fn churn_loses_no_process_event_and_a_new_program_unwinds_whole() {
    let _serial = serial();
    let churn = build_workload("gcc", "exec_churn.c", C_FLAGS, "exec_churn");
    let chain = build_workload("gcc", "short_lived.c", C_FLAGS, "churn_short_lived");
    let config = AgentConfig { samples_per_second: HZ, ..AgentConfig::default() };
    let mut started = 0u64;
    let mut chain_pid = 0;
    let Some((traces, stats)) = profile_with(config, |_| {
        // A first run has the program's files analysed; they stay loaded
        // after it exits (the unused tables' budget), so the run in the
        // churn below is loaded without analysis at its exec or first
        // sample.
        assert!(Command::new(&chain).status().expect("short_lived runs").success());
        let churner = Command::new(&churn)
            .args([EXECS_PER_SECOND.to_string(), CHURN_SECONDS.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("exec_churn starts");
        // The program to check starts in the middle of the churn.
        std::thread::sleep(Duration::from_millis(1500));
        let mut c = Command::new(&chain).spawn().expect("short_lived starts");
        chain_pid = c.id();
        assert!(c.wait().expect("short_lived ends").success());
        let out = churner.wait_with_output().expect("exec_churn ends");
        assert!(out.status.success());
        started = String::from_utf8_lossy(&out.stdout).trim().parse().expect("exec_churn prints its count");
        // Events of the last execs reach the manager.
        std::thread::sleep(Duration::from_millis(500));
    }) else {
        return;
    };
    eprintln!(
        "churn: {started} execs; process events {} sent, {} received, {} merged, {} cancelled; load latency \
         p50 {} µs, p99 {} µs, max {} µs over {} processes; {} files analysed in {} ms",
        stats.process_events,
        stats.process_events_received,
        stats.process_events_coalesced,
        stats.process_events_cancelled,
        stats.process_load_p50_us,
        stats.process_load_p99_us,
        stats.process_load_max_us,
        stats.process_loads_timed,
        stats.files_analysed,
        stats.unwind_analyse_ms
    );
    assert!(started >= u64::from(EXECS_PER_SECOND * CHURN_SECONDS) * 9 / 10, "only {started} execs");
    assert_eq!(
        (stats.process_events_lost, stats.process_events_dropped, stats.process_events_malformed),
        (0, 0, 0),
        "process events lost (ring buffer), dropped (queue), malformed; {stats:#?}"
    );
    // Every exec was reported and read (the churn's and the program's).
    assert!(stats.process_events_received > started, "{} events for {started} execs", stats.process_events_received);
    assert_eq!(stats.process_events_received, stats.process_events, "every event sent was read");
    assert!(stats.process_loads_timed > 0);

    let expected = c_main_thread(&[Fn("short_work"), Fn("short_leaf")]);
    let c = completeness(&traces, chain_pid, Fn("short_leaf"), &expected);
    eprintln!("completeness under churn: {}/{} = {:.1}%", c.complete, c.at_leaf, 100.0 * c.ratio());
    assert!(c.at_leaf >= MIN_SAMPLES, "only {} samples at the leaf; {stats:#?}", c.at_leaf);
    assert!(
        c.ratio() >= REQUIRED,
        "{} of {} samples carry the whole chain; some that do not (root first):\n{}\n{stats:#?}",
        c.complete,
        c.at_leaf,
        c.failures.join("\n")
    );
}
