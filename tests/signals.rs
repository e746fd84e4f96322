//! A signal that interrupts the agent's waits (`strace` attaching, a
//! debugger, SIGSTOP/SIGCONT) is not an error: the ring buffer readers
//! wait again, and sampling goes on.

use profiler_agent::AgentConfig;
use profiler_tests::{build_c_workload, serial, start_agent, wait_for_traces, Workload};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

extern "C" fn ignore(_: libc::c_int) {}

/// The ids of this process's threads named `name`.
fn threads_named(name: &str) -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            (comm.trim_end() == name).then(|| t.file_name().to_str()?.parse().ok()).flatten()
        })
        .collect()
}

#[test]
fn interrupted_waits_are_waited_again() {
    let _serial = serial();
    let exe = build_c_workload("busy_loop.c", &["-O2"]);
    let workload = Workload::spawn(&mut Command::new(&exe));
    // A handler, so that the signal interrupts the wait (EINTR) instead
    // of ending the test process; installed without SA_RESTART, as a
    // tracer's signals act.
    // SAFETY: a zeroed sigaction with a handler that does nothing.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as *const () as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()), 0);
    }
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: 99, pids: vec![workload.pid()], ..AgentConfig::default() };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    assert!(wait_for_traces(&traces, Duration::from_millis(500), Duration::from_secs(10), |t| !t.is_empty()));
    let readers = [threads_named("ep-reader"), threads_named("ep-procevents")].concat();
    assert_eq!(readers.len(), 2, "one sample reader and one process event reader: {readers:?}");
    for _ in 0..20 {
        for &tid in &readers {
            // SAFETY: tgkill to a thread of this process, with a handled signal.
            unsafe { libc::syscall(libc::SYS_tgkill, std::process::id() as libc::c_int, tid, libc::SIGUSR1) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = traces.lock().unwrap().len();
    let more =
        wait_for_traces(&traces, Duration::from_millis(500), Duration::from_secs(10), |t| t.len() >= before + 50);
    let result = agent.stop();
    assert!(result.is_ok(), "a reader stopped on the signal: {result:?}");
    assert!(more, "no samples after the signals: {} then {}", before, traces.lock().unwrap().len());
    assert_eq!(threads_named("ep-reader").len(), 0, "stopped");
}
