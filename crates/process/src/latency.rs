//! How late processes are loaded: a fixed histogram of delays (powers of
//! two of microseconds), so that a long run costs no more than a short
//! one; percentiles are read as the upper bound of their bucket.

/// Buckets: `[0, 1 µs)`, then `[2^(i-1), 2^i) µs`; the last one holds
/// everything from about 17 minutes on.
const BUCKETS: usize = 32;

/// See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: [u64; BUCKETS],
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: [0; BUCKETS], max_us: 0 }
    }
}

/// Percentiles of a [`LatencyHistogram`], in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Delays recorded.
    pub count: u64,
    /// Median (upper bound of its bucket).
    pub p50_us: u64,
    /// 99th percentile (upper bound of its bucket).
    pub p99_us: u64,
    /// Longest, exact.
    pub max_us: u64,
}

impl LatencyHistogram {
    /// Records one delay.
    pub fn record(&mut self, us: u64) {
        let bucket = ((u64::BITS - us.leading_zeros()) as usize).min(BUCKETS - 1);
        self.counts[bucket] += 1;
        self.max_us = self.max_us.max(us);
    }

    /// The percentiles.
    pub fn summary(&self) -> LatencySummary {
        let count: u64 = self.counts.iter().sum();
        LatencySummary {
            count,
            p50_us: self.quantile(count, 50),
            p99_us: self.quantile(count, 99),
            max_us: self.max_us,
        }
    }

    fn quantile(&self, count: u64, percent: u64) -> u64 {
        if count == 0 {
            return 0;
        }
        let rank = (count * percent).div_ceil(100).max(1);
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let upper = if i == 0 { 0 } else { (1u64 << i) - 1 };
                return upper.min(self.max_us);
            }
        }
        self.max_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_bucket_upper_bounds() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.summary(), LatencySummary::default());
        for _ in 0..98 {
            h.record(1000); // bucket [512, 1024)... 1000 < 1024
        }
        h.record(5000);
        h.record(70_000);
        let s = h.summary();
        assert_eq!(s, LatencySummary { count: 100, p50_us: 1023, p99_us: 8191, max_us: 70_000 });
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.summary().max_us, u64::MAX);
    }
}
