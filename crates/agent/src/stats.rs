//! Counters the agent exposes (exit summary, C ABI `stats`, benchmarks).

use serde::Serialize;

/// A snapshot of the agent's counters. Counters only grow.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Samples the BPF program took (sent to the ring buffer).
    pub samples: u64,
    /// Samples lost because the ring buffer was full.
    pub samples_lost: u64,
    /// Distinct processes seen.
    pub processes_seen: u64,
    /// OTLP batches handed out through the batch queue.
    pub batches_sent: u64,
    /// OTLP batches dropped because nobody pulled them in time.
    pub batches_dropped: u64,
}
