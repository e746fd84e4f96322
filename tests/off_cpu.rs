//! Off-CPU profiling on the real BPF programs (`ebpf/off_cpu.bpf.h`): a
//! thread sleeping in `nanosleep` and one blocked reading a pipe show in
//! the off-CPU profile with their whole chain, the blocking call's kernel
//! frames at the leaf, and about the time they waited; the on-CPU profile
//! of a busy thread of the same process is unchanged.

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{
    build_workload, completeness, kernel_frames, matches_chain, profile_with, serial, user_frames, Step, Workload,
};
use profiler_trace::Trace;
use std::process::Command;
use std::time::{Duration, Instant};
use Step::{Fn, In, ManyIn};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-pthread"];
const LIBC: &str = "libc.so.6";

/// The profile of the off_cpu_wait workload with every switch-out
/// sampled, and the wall time sampling was attached.
fn profile_waits() -> Option<(Workload, Vec<Trace>, Stats, Duration)> {
    let exe = build_workload("gcc", "off_cpu_wait.c", C_FLAGS, "off_cpu_wait");
    let w = Workload::spawn(&mut Command::new(&exe));
    std::thread::sleep(Duration::from_millis(200));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold: 1.0, ..AgentConfig::default() };
    let mut window = Duration::ZERO;
    let (traces, stats) = profile_with(config, |agent| {
        assert!(agent.warnings().iter().all(|w| !w.contains("off-CPU")), "{:?}", agent.warnings());
        let started = agent.sampling_started().max(Instant::now() - Duration::from_secs(1));
        std::thread::sleep(Duration::from_secs(SECONDS));
        window = started.elapsed();
    })?;
    Some((w, traces, stats, window))
}

fn describe(trace: &Trace) -> String {
    let names = |frames: Vec<profiler_tests::FrameDesc>| frames.iter().map(|f| f.to_string()).collect::<Vec<_>>();
    format!("{} | {}", names(user_frames(trace)).join(";"), names(kernel_frames(trace)).join(";"))
}

/// The off-CPU traces of thread `tid`: how many match `chain` with a
/// kernel frame named one of `kernel_call` (names vary by kernel), and
/// their total time off the CPU.
fn check_thread(
    what: &str,
    off: &[&Trace],
    tid: u32,
    chain: &[Step],
    kernel_call: &[&str],
    window: Duration,
    stats: &Stats,
) {
    let of_thread: Vec<&Trace> = off.iter().copied().filter(|t| t.tid.0 == tid).collect();
    // Kernel frames leaf first: __schedule (the tracepoint's and the
    // program's own frames are trimmed), then the blocking call within a
    // few frames.
    let whole = |t: &&&Trace| {
        let kernel: Vec<Option<String>> = kernel_frames(t).into_iter().rev().map(|f| f.name).collect();
        matches_chain(&user_frames(t), chain)
            && kernel.first().is_some_and(|leaf| leaf.as_deref() == Some("__schedule"))
            && kernel.iter().take(8).any(|f| f.as_deref().is_some_and(|n| kernel_call.contains(&n)))
    };
    let complete = of_thread.iter().filter(whole).count();
    let total_ns: u64 = of_thread.iter().filter(whole).map(|t| t.off_cpu_ns.unwrap_or(0)).sum();
    let waited = total_ns as f64 / 1e9;
    eprintln!(
        "{what}: {complete}/{} off-CPU traces whole, {waited:.3} s off the CPU in a window of {:.3} s",
        of_thread.len(),
        window.as_secs_f64()
    );
    let failures: Vec<String> = of_thread.iter().filter(|t| !whole(t)).take(5).map(|t| describe(t)).collect();
    assert!(of_thread.len() >= 20, "{what}: only {} off-CPU traces; {stats:#?}", of_thread.len());
    assert!(
        complete as f64 >= 0.95 * of_thread.len() as f64,
        "{what}: {complete} of {} off-CPU traces carry the chain and {kernel_call:?}; some that do not \
         (user root first | kernel root first):\n{}",
        of_thread.len(),
        failures.join("\n")
    );
    let ratio = waited / window.as_secs_f64();
    assert!((0.8..=1.2).contains(&ratio), "{what}: off the CPU {waited:.3} s of {:.3} s", window.as_secs_f64());
}

#[test]
fn off_cpu_profile_carries_the_waits_and_their_time() {
    let _serial = serial();
    let Some((w, traces, stats, window)) = profile_waits() else { return };
    let pid = w.pid();
    let ours: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == pid).collect();
    let off: Vec<&Trace> = ours.iter().copied().filter(|t| t.off_cpu_ns.is_some()).collect();
    eprintln!("{} traces, {} off-CPU; {stats:#?}", ours.len(), off.len());
    assert!(stats.off_cpu_sampled > 0 && stats.off_cpu_joined > 0, "{stats:#?}");

    // The main thread: main -> waiter -> nanosleep (libc's nanosleep and
    // clock_nanosleep, matched by file), in do_nanosleep in the kernel.
    let sleeper = [Fn("_start"), In(LIBC), In(LIBC), Fn("main"), Fn("waiter"), ManyIn(LIBC)];
    check_thread("main -> waiter -> nanosleep", &off, pid, &sleeper, &["do_nanosleep"], window, &stats);

    // The pipe reader, found by its chain; in pipe_read in the kernel
    // (anon_pipe_read since 6.15).
    let reader = [In(LIBC), In(LIBC), Fn("pipe_reader_main"), Fn("read_pipe"), ManyIn(LIBC)];
    let reader_tid = off
        .iter()
        .find(|t| matches_chain(&user_frames(t), &reader))
        .map(|t| t.tid.0)
        .unwrap_or_else(|| panic!("no off-CPU trace of the pipe reader; {stats:#?}"));
    check_thread(
        "pipe_reader_main -> read_pipe -> read",
        &off,
        reader_tid,
        &reader,
        &["pipe_read", "anon_pipe_read"],
        window,
        &stats,
    );

    // On-CPU: the busy thread's samples are whole, and no off-CPU trace
    // went to the on-CPU profile.
    let on: Vec<Trace> = ours.iter().filter(|t| t.off_cpu_ns.is_none()).map(|t| (*t).clone()).collect();
    let busy = [In(LIBC), In(LIBC), Fn("busy_main"), Fn("spin")];
    let c = completeness(&on, pid, Fn("spin"), &busy);
    c.assert_whole("on-CPU busy thread", 25, 0.95, &stats);
    let sleeping_on_cpu =
        on.iter().filter(|t| kernel_frames(t).iter().any(|f| f.name.as_deref() == Some("do_nanosleep"))).count();
    assert!(sleeping_on_cpu <= on.len() / 20, "{sleeping_on_cpu} of {} on-CPU samples sleeping", on.len());
}
