//! Counters the agent exposes (exit summary, C ABI `stats`, benchmarks).

use serde::Serialize;

/// A snapshot of the agent's counters. Counters only grow.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Samples the BPF program took and sent to user space.
    pub samples: u64,
    /// Samples lost in the kernel because the ring buffer was full.
    pub samples_lost: u64,
    /// Samples dropped in user space because the reporter fell behind.
    pub samples_dropped: u64,
    /// Samples turned into traces and handed to the outputs.
    pub samples_processed: u64,
    /// Ring buffer records that could not be decoded.
    pub samples_malformed: u64,
    /// Kernel stacks the BPF program could not read.
    pub kernel_stack_errors: u64,
    /// User stacks the BPF program could not read.
    pub user_stack_errors: u64,
    /// Distinct processes seen.
    pub processes_seen: u64,
    /// OTLP batches handed out through the batch queue.
    pub batches_sent: u64,
    /// OTLP batches dropped because nobody pulled them in time.
    pub batches_dropped: u64,
}
