//! Off-CPU profiling on the real BPF programs (`ebpf/off_cpu.bpf.h`):
//! threads waiting in `nanosleep`, a pipe `read`, a futex
//! (`pthread_cond_wait`) and `epoll_wait` show in the off-CPU profile with
//! their whole chain, the blocking call's kernel frames at the leaf, and
//! about the time they waited; the on-CPU profile of a busy thread of the
//! same process is unchanged.

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{
    build_workload, completeness, kernel_frames, matches_chain, profile_with, serial, user_frames, Step, Workload,
};
use profiler_trace::Trace;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use Step::{Fn, In, ManyIn};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const WARM_UP: Duration = Duration::from_secs(1);
const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-pthread"];
const LIBC: &str = "libc.so.6";

/// The profile of the off_cpu_wait workload with every switch-out
/// sampled: the traces of switch-outs after a warm-up (the executable's
/// symbols load in the background meanwhile; its first stacks may be
/// unnamed), and the wall time from the warm-up's end to the stop.
fn profile_waits() -> Option<(Workload, Vec<Trace>, Stats, Duration)> {
    let exe = build_workload("gcc", "off_cpu_wait.c", C_FLAGS, "off_cpu_wait");
    let w = Workload::spawn(&mut Command::new(&exe));
    std::thread::sleep(Duration::from_millis(200));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold: 1.0, ..AgentConfig::default() };
    let mut window = Duration::ZERO;
    let mut measured_from = 0;
    let (traces, stats) = profile_with(config, |agent| {
        assert!(agent.warnings().iter().all(|w| !w.contains("off-CPU")), "{:?}", agent.warnings());
        std::thread::sleep(WARM_UP);
        let started = Instant::now();
        measured_from = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_nanos() as u64;
        std::thread::sleep(Duration::from_secs(SECONDS));
        window = started.elapsed();
    })?;
    let traces = traces.into_iter().filter(|t| t.timestamp_unix_ns >= measured_from).collect();
    Some((w, traces, stats, window))
}

fn describe(trace: &Trace) -> String {
    let names = |frames: Vec<profiler_tests::FrameDesc>| frames.iter().map(|f| f.to_string()).collect::<Vec<_>>();
    format!("{} | {}", names(user_frames(trace)).join(";"), names(kernel_frames(trace)).join(";"))
}

/// Checks the off-CPU traces of thread `tid`: their user stacks carry
/// `chain` under kernel frames starting at `__schedule` (the tracepoint's
/// and the program's own frames are trimmed); most are in the blocking
/// call (a kernel frame named one of `kernel_call`, within a few frames of
/// the leaf; names vary by kernel), the others preempted (on a loaded
/// machine, on the way back to user space); the time off the CPU in the
/// call is the window's, within 20%.
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
    let kernel_leaf_first =
        |t: &Trace| -> Vec<Option<String>> { kernel_frames(t).into_iter().rev().map(|f| f.name).collect() };
    let whole = |t: &&&Trace| {
        matches_chain(&user_frames(t), chain)
            && kernel_leaf_first(t).first().is_some_and(|leaf| leaf.as_deref() == Some("__schedule"))
    };
    let in_call = |t: &&&Trace| {
        kernel_leaf_first(t).iter().take(8).any(|f| f.as_deref().is_some_and(|n| kernel_call.contains(&n)))
    };
    let complete = of_thread.iter().filter(whole).count();
    let blocked = of_thread.iter().filter(in_call).count();
    let total_ns: u64 = of_thread.iter().filter(in_call).map(|t| t.off_cpu_ns.unwrap_or(0)).sum();
    let waited = total_ns as f64 / 1e9;
    eprintln!(
        "{what}: {complete}/{n} off-CPU traces whole, {blocked}/{n} in {kernel_call:?}, {waited:.3} s off the CPU \
         there in a window of {:.3} s",
        window.as_secs_f64(),
        n = of_thread.len(),
    );
    let sample = |keep: &dyn std::ops::Fn(&&&Trace) -> bool| -> String {
        of_thread.iter().filter(|t| keep(t)).take(5).map(|t| describe(t)).collect::<Vec<_>>().join("\n")
    };
    if complete < of_thread.len() {
        eprintln!("  not whole:\n{}", sample(&|t| !whole(t)));
    }
    assert!(of_thread.len() >= 20, "{what}: only {} off-CPU traces; {stats:#?}", of_thread.len());
    assert!(
        complete as f64 >= 0.95 * of_thread.len() as f64,
        "{what}: {complete} of {} off-CPU traces carry the chain under __schedule; some that do not \
         (user root first | kernel root first):\n{}",
        of_thread.len(),
        sample(&|t| !whole(t))
    );
    assert!(
        blocked as f64 >= 0.75 * of_thread.len() as f64,
        "{what}: {blocked} of {} off-CPU traces in {kernel_call:?}; some that are not:\n{}",
        of_thread.len(),
        sample(&|t| !in_call(t))
    );
    let ratio = waited / window.as_secs_f64();
    assert!((0.8..=1.2).contains(&ratio), "{what}: off the CPU {waited:.3} s of {:.3} s", window.as_secs_f64());
}

/// The thread of the first off-CPU trace carrying `chain`.
fn tid_of(off: &[&Trace], chain: &[Step]) -> u32 {
    let found = off.iter().find(|t| matches_chain(&user_frames(t), chain)).map(|t| t.tid.0);
    found.unwrap_or_else(|| panic!("no off-CPU trace with the chain {chain:?}"))
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

    // A futex (futex_wait_queue_me before 5.16) and epoll_wait (ep_poll,
    // inlined into do_epoll_wait on some builds).
    let futex = [In(LIBC), In(LIBC), Fn("cond_waiter_main"), Fn("wait_cond"), ManyIn(LIBC)];
    let futex_calls = ["futex_wait_queue", "futex_wait_queue_me", "futex_wait"];
    check_thread(
        "cond_waiter_main -> wait_cond -> futex",
        &off,
        tid_of(&off, &futex),
        &futex,
        &futex_calls,
        window,
        &stats,
    );
    let epoll = [In(LIBC), In(LIBC), Fn("epoll_waiter_main"), Fn("wait_epoll"), ManyIn(LIBC)];
    check_thread(
        "epoll_waiter_main -> wait_epoll -> epoll_wait",
        &off,
        tid_of(&off, &epoll),
        &epoll,
        &["ep_poll", "do_epoll_wait"],
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
