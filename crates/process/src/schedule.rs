//! The manager's work for later: loads after execs and re-reads of maps
//! after them, due on a coarse grid, and the budget of exec preloads.

use profiler_trace::Pid;
use std::time::{Duration, Instant};

/// Most loads and re-reads scheduled at once (more are dropped and
/// counted; a process missed this way is loaded at its first sample).
pub(crate) const MAX_SCHEDULED: usize = 16_384;

/// Scheduled work is due on a grid of this step, so that the loads and
/// re-reads of the processes started close together (a shell pipeline, a
/// build's burst, a churn of tens a second) take one wake-up of the
/// manager, not one each. The exec events queued meanwhile are handled
/// in the same wake-up ([`crate::queue::LAZY_DELAY`] is the same step).
pub(crate) const SCHEDULE_GRID: Duration = Duration::from_millis(50);

/// A load scheduled after an exec.
#[derive(Clone, Copy)]
pub(crate) struct ExecLoad {
    /// Kernel time of the exec event (0: unknown).
    pub(crate) ktime_ns: u64,
    /// The process was loaded before its exec (its load is not an exec
    /// preload, it needs no budget).
    pub(crate) was_loaded: bool,
}

/// Work for later: a load after an exec, or a re-read of maps.
#[derive(Clone, Copy)]
pub(crate) struct Scheduled {
    pub(crate) pid: Pid,
    pub(crate) at: Instant,
    pub(crate) exec: Option<ExecLoad>,
}

/// Scheduled work, bounded by [`MAX_SCHEDULED`], and the exec preload
/// budget (a token bucket).
pub(crate) struct Schedule {
    scheduled: Vec<Scheduled>,
    /// Where the grid of scheduled work starts ([`SCHEDULE_GRID`]).
    grid_origin: Instant,
    /// Exec preloads a second, and the most in a burst (at least one).
    preloads_per_second: f64,
    exec_tokens: f64,
    exec_tokens_at: Instant,
}

impl Schedule {
    /// Nothing scheduled, a full preload budget.
    pub(crate) fn new(preloads_per_second: f64) -> Schedule {
        let now = Instant::now();
        Schedule {
            scheduled: Vec::new(),
            grid_origin: now,
            preloads_per_second,
            exec_tokens: preloads_per_second,
            exec_tokens_at: now,
        }
    }

    /// Schedules work for `pid` after `after` (rounded up to the grid);
    /// false when too much is waiting already (nothing scheduled).
    pub(crate) fn push(&mut self, pid: Pid, after: Duration, exec: Option<ExecLoad>) -> bool {
        if self.scheduled.len() >= MAX_SCHEDULED {
            return false;
        }
        let at = on_schedule_grid(self.grid_origin, Instant::now() + after);
        self.scheduled.push(Scheduled { pid, at, exec });
        true
    }

    /// When work is next due, if ever.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.scheduled.iter().map(|r| r.at).min()
    }

    /// Takes the work due by `now`, in the order it was scheduled.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<Scheduled> {
        let due: Vec<Scheduled> = self.scheduled.iter().filter(|r| r.at <= now).copied().collect();
        self.scheduled.retain(|r| r.at > now);
        due
    }

    /// The work scheduled for `pid` (tests).
    #[cfg(test)]
    pub(crate) fn find(&self, pid: Pid) -> Option<&Scheduled> {
        self.scheduled.iter().find(|s| s.pid == pid)
    }

    /// Takes one exec preload from the budget, if there is one.
    pub(crate) fn take_exec_token(&mut self) -> bool {
        let rate = self.preloads_per_second;
        let now = Instant::now();
        let refill = now.duration_since(self.exec_tokens_at).as_secs_f64() * rate;
        self.exec_tokens = (self.exec_tokens + refill).min(rate.max(1.0));
        self.exec_tokens_at = now;
        if self.exec_tokens >= 1.0 {
            self.exec_tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// `at`, rounded up to the next point of [`SCHEDULE_GRID`] after `origin`.
fn on_schedule_grid(origin: Instant, at: Instant) -> Instant {
    let step = SCHEDULE_GRID.as_nanos();
    let since = at.saturating_duration_since(origin).as_nanos();
    let rounded = since.div_ceil(step).saturating_mul(step);
    origin + Duration::from_nanos(u64::try_from(rounded).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduled_work_falls_on_the_grid() {
        let origin = Instant::now();
        let at = |ms: u64| on_schedule_grid(origin, origin + Duration::from_micros(ms * 1000 + 300));
        assert_eq!(at(0), origin + SCHEDULE_GRID);
        assert_eq!(at(3), origin + SCHEDULE_GRID, "two starts 3 ms apart: one wake-up");
        assert_eq!(at(49), origin + SCHEDULE_GRID, "49 ms apart too");
        assert_eq!(at(50), origin + 2 * SCHEDULE_GRID);
        assert_eq!(on_schedule_grid(origin, origin + SCHEDULE_GRID), origin + SCHEDULE_GRID, "on the grid already");
        assert_eq!(on_schedule_grid(origin, origin), origin);
    }

    #[test]
    fn due_work_is_taken_once_and_the_rest_stays() {
        let mut s = Schedule::new(1.0);
        assert!(s.push(Pid(1), Duration::ZERO, None));
        assert!(s.push(Pid(2), Duration::from_secs(60), None));
        let first = s.next_deadline().expect("due");
        let due = s.take_due(first);
        assert_eq!(due.iter().map(|d| d.pid).collect::<Vec<_>>(), [Pid(1)]);
        assert!(s.take_due(first).is_empty());
        assert!(s.next_deadline().is_some_and(|d| d > first));
    }

    #[test]
    fn pushes_past_the_bound_are_refused() {
        let mut s = Schedule::new(1.0);
        for n in 0..MAX_SCHEDULED {
            assert!(s.push(Pid(n as u32), Duration::ZERO, None));
        }
        assert!(!s.push(Pid(0), Duration::ZERO, None));
    }

    #[test]
    fn the_preload_budget_allows_one_burst_then_its_rate() {
        let mut s = Schedule::new(2.0);
        assert!(s.take_exec_token());
        assert!(s.take_exec_token());
        assert!(!s.take_exec_token(), "a burst of the rate, then nothing at once");
        std::thread::sleep(Duration::from_millis(600));
        assert!(s.take_exec_token(), "refilled at 2 a second");
    }
}
