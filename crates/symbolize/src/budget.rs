//! The byte budget of the loaded files, raised while what the budget
//! made the symbolizer give up costs CPU to redo, and lowered again once
//! it has been cheap for a while.
//!
//! Giving up a parsed DWARF unit or a loaded file saves memory, but a
//! lookup that needs it again pays for it: parsing the unit, loading
//! the file. How much depends on how many distinct addresses are looked
//! up (the sampling rate, how many programs run), which no fixed budget
//! fits: 8 MiB holds a 20 Hz machine's files with room to spare, and at
//! 1000 Hz parsing given-up units again can take a quarter of the
//! agent's CPU. So the budget starts small and follows the measured
//! cost of redoing work, within a ceiling.

use std::time::{Duration, Instant};

/// How long each review measures.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);
/// Redoing work for at least this share of a window (per mille of its
/// wall time: 1% of a core) raises the budget one step. Work is counted
/// in CPU time ([`thread_cpu`]): on a loaded machine a lookup's wall
/// time is mostly waiting for a CPU, which a bigger budget would not
/// save (counted in wall time, a loaded machine raised it at 20 Hz).
const RAISE_AT_PERMILLE: u128 = 10;
/// Under this share (0.1% of a core) a window counts as calm.
const CALM_BELOW_PERMILLE: u128 = 1;
/// Calm windows in a row before the budget is lowered one step, at
/// first; each raise doubles it (up to [`MAX_CALM_WINDOWS`]), so that a
/// workload that needed the room does not lose it and thrash again.
const CALM_WINDOWS: u32 = 6;
/// At most about 10 minutes of calm before a lowering.
const MAX_CALM_WINDOWS: u32 = 64;

/// CPU time the calling thread has used (zero if the clock cannot be read).
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// The budget and its measurements.
#[derive(Debug)]
pub(crate) struct Budget {
    floor: u64,
    ceiling: u64,
    step: u64,
    bytes: u64,
    window_start: Instant,
    /// Time spent redoing given-up work in this window.
    rework: Duration,
    calm: u32,
    calm_needed: u32,
    raises: u64,
}

impl Budget {
    /// A budget of `floor` bytes that may grow to `ceiling` (no growth
    /// when `ceiling <= floor`), in steps of half the floor.
    pub(crate) fn new(floor: u64, ceiling: u64, now: Instant) -> Budget {
        Budget {
            floor,
            ceiling: ceiling.max(floor),
            step: (floor / 2).max(1),
            bytes: floor,
            window_start: now,
            rework: Duration::ZERO,
            calm: 0,
            calm_needed: CALM_WINDOWS,
            raises: 0,
        }
    }

    /// The budget now.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Times the budget was raised.
    pub(crate) fn raises(&self) -> u64 {
        self.raises
    }

    /// Counts `spent` CPU time redoing work the budget gave up (a unit
    /// parsed again, a file loaded again).
    pub(crate) fn rework(&mut self, spent: Duration) {
        self.rework = self.rework.saturating_add(spent);
    }

    /// Closes the window once [`WINDOW`] is over (reviews come with
    /// lookups: a longer window is the time since the last): raises the
    /// budget a step when redoing work took [`RAISE_AT_PERMILLE`] of it,
    /// lowers it a step after enough calm windows.
    pub(crate) fn review(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < WINDOW {
            return;
        }
        let permille = self.rework.as_nanos() * 1000 / elapsed.as_nanos().max(1);
        self.window_start = now;
        self.rework = Duration::ZERO;
        if permille >= RAISE_AT_PERMILLE {
            self.calm = 0;
            if self.bytes < self.ceiling {
                self.bytes = self.bytes.saturating_add(self.step).min(self.ceiling);
                self.raises += 1;
                self.calm_needed = (self.calm_needed * 2).min(MAX_CALM_WINDOWS);
            }
        } else if permille < CALM_BELOW_PERMILLE {
            // A quiet spell with no lookups counts as all its windows.
            let windows = elapsed.as_nanos() / WINDOW.as_nanos();
            self.calm = self.calm.saturating_add(u32::try_from(windows).unwrap_or(u32::MAX));
            if self.calm >= self.calm_needed && self.bytes > self.floor {
                self.bytes = self.bytes.saturating_sub(self.step).max(self.floor);
                self.calm = 0;
            }
        } else {
            self.calm = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Runs one window that spent `rework` redoing work; the budget after.
    fn window(b: &mut Budget, now: &mut Instant, rework: Duration) -> u64 {
        b.rework(rework);
        *now += WINDOW;
        b.review(*now);
        b.bytes()
    }

    #[test]
    fn costly_rework_raises_the_budget_up_to_the_ceiling() {
        let mut now = Instant::now();
        let mut b = Budget::new(8 * MIB, 24 * MIB, now);
        assert_eq!(b.bytes(), 8 * MIB);
        // No review before the window is over.
        b.rework(Duration::from_secs(1));
        b.review(now + WINDOW / 2);
        assert_eq!(b.bytes(), 8 * MIB);
        // 100 ms in 10 s is 1%: a step of half the floor.
        let raised: Vec<u64> = (0..5).map(|_| window(&mut b, &mut now, Duration::from_millis(100)) / MIB).collect();
        assert_eq!(raised, [12, 16, 20, 24, 24]);
        assert_eq!(b.raises(), 4);
        // Just under 1%: not raised, and not calm either.
        let mut b = Budget::new(8 * MIB, 24 * MIB, now);
        assert_eq!(window(&mut b, &mut now, Duration::from_millis(99)), 8 * MIB);
        assert_eq!(b.raises(), 0);
    }

    #[test]
    fn calm_lowers_the_budget_back_to_the_floor_more_slowly_after_each_raise() {
        let mut now = Instant::now();
        let mut b = Budget::new(8 * MIB, 24 * MIB, now);
        window(&mut b, &mut now, Duration::from_millis(500));
        assert_eq!(b.bytes(), 12 * MIB);
        // One raise: 12 calm windows (0.09% each) before a step down.
        for i in 0..11 {
            assert_eq!(window(&mut b, &mut now, Duration::from_millis(9)), 12 * MIB, "window {i}");
        }
        assert_eq!(window(&mut b, &mut now, Duration::ZERO), 8 * MIB);
        // Never under the floor.
        for _ in 0..100 {
            window(&mut b, &mut now, Duration::ZERO);
        }
        assert_eq!(b.bytes(), 8 * MIB);
        // Two more raises: 48 calm windows, and a window between calm
        // and costly starts the count again.
        window(&mut b, &mut now, Duration::from_millis(100));
        window(&mut b, &mut now, Duration::from_millis(100));
        assert_eq!(b.bytes(), 16 * MIB);
        for _ in 0..47 {
            window(&mut b, &mut now, Duration::ZERO);
        }
        window(&mut b, &mut now, Duration::from_millis(50));
        for _ in 0..47 {
            window(&mut b, &mut now, Duration::ZERO);
        }
        assert_eq!(b.bytes(), 16 * MIB);
        assert_eq!(window(&mut b, &mut now, Duration::ZERO), 12 * MIB);
        // A quiet 10 minutes with no lookup to review it: one review
        // counts all its windows.
        now += WINDOW * 60;
        b.review(now);
        assert_eq!(b.bytes(), 8 * MIB);
    }

    #[test]
    fn thread_cpu_counts_work_not_waiting() {
        let start = thread_cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu() - start;
        let mut x = 0u64;
        assert!(slept < Duration::from_millis(10), "{slept:?}");
        // Work advances it (however long other threads hold the CPUs).
        let mark = thread_cpu();
        let give_up = Instant::now() + Duration::from_secs(30);
        while thread_cpu() - mark < Duration::from_millis(20) && Instant::now() < give_up {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu() - mark >= Duration::from_millis(20));
    }

    #[test]
    fn a_ceiling_at_the_floor_keeps_the_budget_fixed() {
        let mut now = Instant::now();
        let mut b = Budget::new(8 * MIB, 0, now);
        assert_eq!(window(&mut b, &mut now, Duration::from_secs(10)), 8 * MIB);
        assert_eq!(b.raises(), 0);
    }
}
