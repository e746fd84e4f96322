//! Probabilistic profiling with the real perf events: sampling is on for
//! the intervals whose draw is below the threshold, off for the others,
//! on every CPU.

use profiler_agent::AgentConfig;
use profiler_tests::{build_c_workload, profile_with, serial, Workload};
use std::process::Command;
use std::time::Duration;

const HZ: u32 = 99;
const INTERVAL_MS: u64 = 300;
const INTERVALS: usize = 20;
/// Slack at window edges for the wall clock derived from the BPF clock
/// and the time between a switch and its being recorded.
const EDGE_NS: u64 = 3_000_000;

/// Threshold 50 over 20 intervals: about half the intervals carry samples
/// (the count is binomial(20, 0.5): within 3..=17 with probability
/// 0.9997), every "on" interval has samples of the busy process and no
/// "off" interval has any.
#[test]
fn threshold_50_samples_about_half_the_intervals() {
    let _serial = serial();
    let exe = build_c_workload("busy_loop.c", &["-O2"]);
    let busy = Workload::spawn(&mut Command::new(&exe));
    std::thread::sleep(Duration::from_millis(200));
    let config = AgentConfig {
        samples_per_second: HZ,
        pids: vec![busy.pid()],
        probabilistic_threshold: 50,
        probabilistic_interval_ms: INTERVAL_MS,
        ..AgentConfig::default()
    };
    let mut windows = Vec::new();
    let Some((traces, _stats)) = profile_with(config, |agent| {
        // INTERVALS whole windows: the one after the last closes it.
        let deadline = std::time::Instant::now() + Duration::from_millis(INTERVAL_MS * (INTERVALS as u64 + 5));
        while agent.sampling_windows().len() <= INTERVALS && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        windows = agent.sampling_windows();
    }) else {
        return;
    };
    assert!(windows.len() > INTERVALS, "{} windows in {} intervals' time", windows.len(), INTERVALS + 5);
    for w in windows.windows(2) {
        let gap = w[1].start_unix_ns - w[0].start_unix_ns;
        assert!(gap >= INTERVAL_MS * 1_000_000 - EDGE_NS, "windows {gap} ns apart");
    }

    let mut per_window = vec![0usize; INTERVALS];
    for t in traces.iter().filter(|t| t.process.pid.0 == busy.pid()) {
        let ts = t.timestamp_unix_ns;
        let Some(i) = windows.iter().rposition(|w| w.start_unix_ns <= ts) else { continue };
        if i >= INTERVALS {
            continue;
        }
        // A window runs from its switch taking effect to the next switch
        // beginning; a sample between a switch's two reads of the clock
        // (the switching thread preempted on a busy machine) is in neither.
        let (start, end) = (windows[i].start_unix_ns, windows[i + 1].switch_began_unix_ns);
        if ts < start + EDGE_NS || ts + EDGE_NS > end {
            continue;
        }
        per_window[i] += 1;
    }
    let on: Vec<bool> = windows[..INTERVALS].iter().map(|w| w.on).collect();
    for (i, (&n, &on)) in per_window.iter().zip(&on).enumerate() {
        if on {
            assert!(n > 0, "window {i} was on and has no sample: {per_window:?} {on:?}");
        } else {
            assert_eq!(n, 0, "window {i} was off and has samples: {per_window:?}");
        }
    }
    let on_count = on.iter().filter(|&&o| o).count();
    assert!((3..=17).contains(&on_count), "{on_count} of {INTERVALS} intervals sampled with threshold 50");
}
