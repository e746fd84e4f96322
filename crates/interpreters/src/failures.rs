//! Reads that failed, remembered for a while: a process whose memory
//! makes a read fail (a string without an end, a pointer into nothing)
//! makes it fail again at every sample, and each failure can cost as
//! much as a success.
//!
//! The wait before an address is tried again doubles with each failure
//! in a row, from [`FIRST_RETRY`] to [`LONGEST_WAIT`]. An object caught
//! while it is built or freed (a PHP request's op array, reused at the
//! same address by the next request) is read again a moment later; an
//! address that never reads costs a handful of tries, then one each
//! [`LONGEST_WAIT`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The wait after a first failure.
pub const FIRST_RETRY: Duration = Duration::from_millis(50);

/// The longest wait: long enough that a process cannot make the agent
/// repeat a failing read at every sample.
pub const LONGEST_WAIT: Duration = Duration::from_secs(10);

/// Most failures remembered by one cache (then it is emptied).
pub const MAX_FAILURES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Failure {
    last: Instant,
    /// Failures in a row.
    times: u32,
}

impl Failure {
    fn wait(&self) -> Duration {
        FIRST_RETRY.saturating_mul(1 << self.times.saturating_sub(1).min(16)).min(LONGEST_WAIT)
    }
}

/// Objects (by address) whose reading failed lately.
#[derive(Debug, Default)]
pub struct RecentFailures {
    at: HashMap<u64, Failure>,
    /// Reads not tried again because they failed lately.
    pub skipped: u64,
}

impl RecentFailures {
    /// Whether `address` is still waiting after its last failure
    /// (counted in `skipped`).
    pub fn failed_lately(&mut self, address: u64) -> bool {
        let waiting = self.at.get(&address).is_some_and(|f| f.last.elapsed() < f.wait());
        self.skipped += u64::from(waiting);
        waiting
    }

    /// Remembers that reading `address` failed now. A failure long after
    /// the last one (twice the longest wait) starts a new run.
    pub fn record(&mut self, address: u64) {
        if self.at.len() >= MAX_FAILURES && !self.at.contains_key(&address) {
            self.at.clear();
        }
        let now = Instant::now();
        let f = self.at.entry(address).or_insert(Failure { last: now, times: 0 });
        if now.duration_since(f.last) > 2 * LONGEST_WAIT {
            f.times = 0;
        }
        f.last = now;
        f.times = f.times.saturating_add(1);
    }

    /// Forgets `address`'s failures (it has just been read).
    pub fn forget(&mut self, address: u64) {
        self.at.remove(&address);
    }

    /// Records how a read of `address` went: a failure waits, a success
    /// ends the run of failures.
    pub fn outcome(&mut self, address: u64, read: bool) {
        if read {
            self.forget(address)
        } else {
            self.record(address)
        }
    }

    /// Failures remembered now.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back_date(f: &mut RecentFailures, address: u64, by: Duration) {
        let e = f.at.get_mut(&address).unwrap();
        e.last -= by;
    }

    #[test]
    fn the_wait_doubles_with_each_failure_up_to_the_longest() {
        let mut f = RecentFailures::default();
        assert!(!f.failed_lately(8));
        f.record(8);
        assert!(f.failed_lately(8));
        assert!(f.failed_lately(8));
        assert_eq!(f.skipped, 2);
        assert!(!f.failed_lately(16), "another address");
        back_date(&mut f, 8, FIRST_RETRY);
        assert!(!f.failed_lately(8), "tried again after the first wait");
        f.record(8);
        back_date(&mut f, 8, FIRST_RETRY);
        assert!(f.failed_lately(8), "the second wait is twice the first");
        back_date(&mut f, 8, FIRST_RETRY);
        assert!(!f.failed_lately(8));
        for _ in 0..20 {
            f.record(8);
        }
        back_date(&mut f, 8, LONGEST_WAIT - Duration::from_millis(1));
        assert!(f.failed_lately(8), "capped at the longest wait, not less");
        back_date(&mut f, 8, Duration::from_millis(1));
        assert!(!f.failed_lately(8));
        back_date(&mut f, 8, 2 * LONGEST_WAIT);
        f.record(8);
        back_date(&mut f, 8, FIRST_RETRY);
        assert!(!f.failed_lately(8), "a failure long after the last starts a new run");
        f.forget(8);
        assert!(f.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut f = RecentFailures::default();
        for a in 0..MAX_FAILURES as u64 + 1 {
            f.record(a);
        }
        assert!(f.len() <= MAX_FAILURES);
        assert!(f.failed_lately(MAX_FAILURES as u64), "the newest is kept");
    }
}
