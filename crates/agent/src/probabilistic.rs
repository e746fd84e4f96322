//! Probabilistic profiling (the reference agent's
//! `probabilistic_threshold`): at the start of every interval a number in
//! `0..PROBABILISTIC_THRESHOLD_MAX` is drawn; sampling runs on every CPU
//! for that interval when it is below the threshold, and is paused
//! otherwise (the perf events are disabled, so the programs do not run).

use crate::config::PROBABILISTIC_THRESHOLD_MAX;
use profiler_bpf::SamplingSwitch;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One probabilistic interval: from when sampling was switched, whether it
/// was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplingWindow {
    /// Wall-clock time the switch began, nanoseconds since the Unix epoch
    /// (read before the events were switched): the previous window ends
    /// somewhere between this and `start_unix_ns`.
    pub switch_began_unix_ns: u64,
    /// Wall-clock time the switch took effect, nanoseconds since the Unix
    /// epoch (read after the events were switched).
    pub start_unix_ns: u64,
    /// Whether sampling ran in this window.
    pub on: bool,
}

/// Windows kept for [`crate::Agent::sampling_windows`]; older ones are
/// dropped.
pub(crate) const MAX_WINDOWS: usize = 1024;

/// How often the switching thread looks at the stop flag while it waits.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Draws of `0..PROBABILISTIC_THRESHOLD_MAX` (SplitMix64; the seed need
/// not be secret, only differ between runs).
pub(crate) struct Draws(u64);

impl Draws {
    pub(crate) fn new(seed: u64) -> Draws {
        Draws(seed)
    }

    /// Whether the next interval samples.
    pub(crate) fn sample_next(&mut self, threshold: u32) -> bool {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % u64::from(PROBABILISTIC_THRESHOLD_MAX)) < u64::from(threshold)
    }
}

/// A seed that differs between runs.
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// Switches sampling every `interval` until `stop`, recording each window
/// in `windows` (bounded) and each failed switch in `notices` (once).
pub(crate) fn run(
    switch: SamplingSwitch,
    threshold: u32,
    interval: Duration,
    stop: &AtomicBool,
    windows: &Mutex<VecDeque<SamplingWindow>>,
    notices: &Mutex<Vec<String>>,
) {
    let mut draws = Draws::new(random_seed());
    let mut told = false;
    while !stop.load(Ordering::Relaxed) {
        let on = draws.sample_next(threshold);
        let switch_began_unix_ns = crate::unix_now_ns();
        if let Err(e) = switch.set(on) {
            if !std::mem::replace(&mut told, true) {
                crate::lock(notices).push(format!("probabilistic profiling could not switch sampling: {e}"));
            }
        }
        let start_unix_ns = crate::unix_now_ns();
        let mut w = crate::lock(windows);
        if w.len() == MAX_WINDOWS {
            w.pop_front();
        }
        w.push_back(SamplingWindow { switch_began_unix_ns, start_unix_ns, on });
        drop(w);
        // From the switch, not on a fixed cadence: a late wake-up (a
        // loaded machine) does not shorten the next window.
        let next = Instant::now() + interval;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(STOP_POLL));
        }
    }
}

/// Starts the switching thread.
pub(crate) fn spawn(
    switch: SamplingSwitch,
    threshold: u32,
    interval: Duration,
    stop: Arc<AtomicBool>,
    windows: Arc<Mutex<VecDeque<SamplingWindow>>>,
    notices: Arc<Mutex<Vec<String>>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ep-probabilistic".into())
        .spawn(move || run(switch, threshold, interval, &stop, &windows, &notices))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_the_threshold() {
        let mut d = Draws::new(1);
        assert!((0..1000).all(|_| d.sample_next(100)), "threshold 100 always samples");
        let mut d = Draws::new(2);
        let on = (0..10_000).filter(|_| d.sample_next(30)).count();
        assert!((2_700..3_300).contains(&on), "{on} of 10000 draws below 30");
        let mut d = Draws::new(3);
        let on = (0..10_000).filter(|_| d.sample_next(1)).count();
        assert!((50..150).contains(&on), "{on} of 10000 draws below 1");
    }
}
