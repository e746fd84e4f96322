//! Reads that failed, remembered for a while: a process whose memory
//! makes a read fail (a string without an end, a pointer into nothing)
//! makes it fail again at every sample, and each failure can cost as
//! much as a success.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a failure is remembered: long enough that a process cannot
/// make the agent repeat it at every sample, short enough that an
/// object still being built when first read (a function defined while
/// sampled) is named soon after.
pub const FAILURE_TTL: Duration = Duration::from_secs(10);

/// Most failures remembered by one cache (then it is emptied).
pub const MAX_FAILURES: usize = 4096;

/// Objects (by address) whose reading failed lately.
#[derive(Debug, Default)]
pub struct RecentFailures {
    at: HashMap<u64, Instant>,
    /// Reads not tried again because they failed lately.
    pub skipped: u64,
}

impl RecentFailures {
    /// Whether reading `address` failed less than [`FAILURE_TTL`] ago
    /// (counted in `skipped`).
    pub fn failed_lately(&mut self, address: u64) -> bool {
        match self.at.get(&address) {
            Some(when) if when.elapsed() < FAILURE_TTL => {
                self.skipped += 1;
                true
            }
            Some(_) => {
                self.at.remove(&address);
                false
            }
            None => false,
        }
    }

    /// Remembers that reading `address` failed now.
    pub fn record(&mut self, address: u64) {
        if self.at.len() >= MAX_FAILURES {
            self.at.clear();
        }
        self.at.insert(address, Instant::now());
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

    #[test]
    fn a_failure_is_skipped_until_it_expires_and_the_cache_is_bounded() {
        let mut f = RecentFailures::default();
        assert!(!f.failed_lately(8));
        f.record(8);
        assert!(f.failed_lately(8));
        assert!(f.failed_lately(8));
        assert_eq!(f.skipped, 2);
        assert!(!f.failed_lately(16), "another address");
        f.at.insert(8, Instant::now() - FAILURE_TTL);
        assert!(!f.failed_lately(8), "expired");
        assert!(f.is_empty());
        for a in 0..MAX_FAILURES as u64 + 1 {
            f.record(a);
        }
        assert!(f.len() <= MAX_FAILURES);
    }
}
