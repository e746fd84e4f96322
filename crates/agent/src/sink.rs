//! Where traces go: the reporter thread hands every trace to each sink,
//! and tells them when a reporting interval ends and when the agent stops.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use profiler_report::otlp::{encode, OtlpAggregator, OtlpConfig};
use profiler_trace::Trace;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A consumer of traces, run on the agent's reporter thread.
pub trait TraceSink: Send {
    /// One sampled, symbolized trace.
    fn on_trace(&mut self, trace: &Trace);
    /// The reporting interval `[start, end)` (Unix ns) is over.
    fn on_interval_end(&mut self, _start_unix_ns: u64, _end_unix_ns: u64) {}
    /// The agent is stopping; the last interval was closed just before.
    fn on_stop(&mut self) {}
}

/// Counters of the OTLP batch queue, shared with [`crate::Agent::stats`].
#[derive(Debug, Default)]
pub(crate) struct BatchCounters {
    /// Batches handed to the caller of next_otlp_batch.
    pub sent: AtomicU64,
    /// Batches dropped because the queue was full.
    pub dropped: AtomicU64,
}

/// Aggregates each interval into one OTLP request and queues its bytes for
/// [`crate::Agent::next_otlp_batch`]. The queue is bounded: when full, the
/// oldest batch is dropped (and counted) so the newest data survives.
pub(crate) struct OtlpBatchSink {
    aggregator: OtlpAggregator,
    queue: Sender<Vec<u8>>,
    // Used to drop the oldest batch when the queue is full.
    oldest: Receiver<Vec<u8>>,
    counters: Arc<BatchCounters>,
}

impl OtlpBatchSink {
    pub(crate) fn new(
        samples_per_second: u32,
        start_unix_ns: u64,
        queue: Sender<Vec<u8>>,
        oldest: Receiver<Vec<u8>>,
        counters: Arc<BatchCounters>,
    ) -> OtlpBatchSink {
        OtlpBatchSink {
            aggregator: OtlpAggregator::new(
                OtlpConfig::new(samples_per_second).with_kernel_build_id(profiler_elf::kernel_build_id()),
                start_unix_ns,
            ),
            queue,
            oldest,
            counters,
        }
    }
}

impl TraceSink for OtlpBatchSink {
    fn on_trace(&mut self, trace: &Trace) {
        self.aggregator.add(trace);
    }

    fn on_interval_end(&mut self, _start_unix_ns: u64, end_unix_ns: u64) {
        let Some(request) = self.aggregator.flush(end_unix_ns) else { return };
        let mut bytes = encode(&request);
        loop {
            match self.queue.try_send(bytes) {
                Ok(()) => return,
                Err(TrySendError::Full(back)) => {
                    if self.oldest.try_recv().is_ok() {
                        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    bytes = back;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}
