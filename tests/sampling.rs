//! Whole-system sampling with the real eBPF programs: attribution of
//! samples to processes and named kernel stacks.

use profiler_tests::{build_c_workload, kernel_frames, matches_chain, profile, serial, Step, Workload};
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;
const SECONDS: u64 = 4;

/// A busy single-threaded process gets one sample per tick of the CPU
/// time it used (one busy CPU's worth on an idle machine), all attributed
/// to its pid and comm. Comparing with its measured CPU time, not with
/// wall time, keeps the test true on a loaded machine.
#[test]
fn busy_process_gets_one_cpu_worth_of_samples() {
    let _serial = serial();
    let exe = build_c_workload("busy_loop.c", &["-O2"]);
    let busy = Workload::spawn(&mut Command::new(&exe));
    std::thread::sleep(Duration::from_millis(200));
    let Some(profile) = profile(&[busy.pid()], HZ, Duration::from_secs(SECONDS)) else { return };
    let traces = &profile.traces;

    let expected = profile.expected_samples(busy.pid(), HZ);
    assert!(expected >= 0.3 * f64::from(HZ) * SECONDS as f64, "the workload barely ran: {expected} samples expected");
    let ours: Vec<_> = traces.iter().filter(|t| t.process.pid.0 == busy.pid()).collect();
    assert_eq!(ours.len(), traces.len(), "the pid filter let other processes through");
    let share = ours.len() as f64 / expected;
    assert!((0.80..=1.10).contains(&share), "{} samples for {} expected ({:.0}%)", ours.len(), expected, share * 100.0);
    for t in &ours {
        assert_eq!(t.tid.0, busy.pid());
        assert_eq!(&*t.thread_name, "busy_loop");
        assert_eq!(&*t.process.executable_name, "busy_loop");
        assert_eq!(&*t.process.executable_path, exe.to_str().unwrap());
    }
}

/// dd reading /dev/zero spends its time in the kernel under
/// ksys_read -> vfs_read -> read_zero; the kernel frames must be named
/// and in that order (root first).
#[test]
fn dd_reading_dev_zero_shows_the_read_chain() {
    let _serial = serial();
    // 1 MiB blocks: clearing the buffer dominates the syscall overhead.
    // (With 64 KiB blocks this VM's syscall entry/exit mitigations take
    // ~40% of dd's time, in perf's view as in ours.)
    let dd = Workload::spawn(
        Command::new("dd").args(["if=/dev/zero", "of=/dev/null", "bs=1M"]).stderr(std::process::Stdio::null()),
    );
    std::thread::sleep(Duration::from_millis(200));
    let Some(profile) = profile(&[dd.pid()], HZ, Duration::from_secs(SECONDS)) else { return };

    let dd_traces: Vec<_> = profile.traces.iter().filter(|t| t.process.pid.0 == dd.pid()).collect();
    let expected = profile.expected_samples(dd.pid(), HZ);
    assert!(
        dd_traces.len() as f64 >= 0.8 * expected,
        "only {} samples of dd for {expected:.0} expected from its CPU time",
        dd_traces.len()
    );
    assert!(dd_traces.iter().all(|t| &*t.thread_name == "dd"));
    // Consecutive kernel frames anywhere in the stack.
    let read_chain =
        [Step::AnyOrNone, Step::Fn("ksys_read"), Step::Fn("vfs_read"), Step::Fn("read_zero"), Step::AnyOrNone];
    let with_chain = dd_traces.iter().filter(|t| matches_chain(&kernel_frames(t), &read_chain)).count();
    let share = with_chain as f64 / dd_traces.len() as f64;
    assert!(
        share >= 0.80,
        "{with_chain} of {} dd samples carry ksys_read -> vfs_read -> read_zero ({:.0}%); first: {:?}",
        dd_traces.len(),
        share * 100.0,
        dd_traces.first().map(|t| kernel_frames(t).iter().map(|f| f.to_string()).collect::<Vec<_>>())
    );
}
