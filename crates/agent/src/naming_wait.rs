//! Traces waiting for their native names: the first samples of a process
//! (or of a file it just mapped) are built while the symbolizer still
//! loads the file, which names nothing until its symbols are in
//! (milliseconds; a second for the largest libraries). Such a trace is
//! held here, bounded, and its unnamed frames are named again as loads
//! finish; it goes on to the sinks once every frame is named or its
//! file cannot name it, or after [`MAX_WAIT`] as it is. Only native
//! names wait: interpreted frames were named when the trace was built,
//! from the process's memory of that moment.

use crate::trace_builder::{TraceBuilder, UnnamedFrame};
use profiler_trace::{Frame, Trace};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a trace waits for its files at most: a library's symbols
/// load in milliseconds, the largest (libjvm, libnode) in about a second
/// on a busy machine.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(3);
/// Bounds on the traces held, count and estimated bytes (the oldest
/// goes on as it is when a new one does not fit): 1024 traces are 5 s of
/// two busy CPUs at 99 Hz; the bytes bound a deep stack's share.
const MAX_TRACES: usize = 1024;
const MAX_BYTES: usize = 4 << 20;
/// How often held traces are named again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Counters of the wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NamingWaitCounts {
    /// Traces held for their native names.
    pub held: u64,
    /// Frames of held traces named while they waited.
    pub frames_named: u64,
    /// Traces that went on with frames still unnamed after
    /// [`MAX_WAIT`] (or at the agent's stop).
    pub timed_out: u64,
    /// Traces that went on with frames still unnamed because the bounds
    /// were reached (oldest first).
    pub dropped_full: u64,
}

struct Held {
    trace: Trace,
    unnamed: Vec<UnnamedFrame>,
    arrived: Instant,
    bytes: usize,
}

/// The traces waiting for names.
#[derive(Default)]
pub(crate) struct NamingWait {
    queue: VecDeque<Held>,
    bytes: usize,
    counts: NamingWaitCounts,
}

/// What a held trace is counted to cost.
fn trace_bytes(trace: &Trace, unnamed: &[UnnamedFrame]) -> usize {
    std::mem::size_of::<Held>()
        + trace.frames.len() * std::mem::size_of::<Frame>()
        + trace.frames.iter().map(|f| f.lines.len() * 48).sum::<usize>()
        + unnamed.len() * (std::mem::size_of::<UnnamedFrame>() + 64)
}

impl NamingWait {
    pub(crate) fn counts(&self) -> NamingWaitCounts {
        self.counts
    }

    /// When held traces should be named again, if any are held.
    pub(crate) fn next_poll(&self, now: Instant) -> Option<Instant> {
        (!self.queue.is_empty()).then(|| now + POLL_INTERVAL)
    }

    /// Holds `trace`, whose frames in `unnamed` wait for their files;
    /// what no longer fits goes to `ready` (oldest first).
    pub(crate) fn hold(&mut self, trace: Trace, unnamed: Vec<UnnamedFrame>, now: Instant, ready: &mut Vec<Trace>) {
        let bytes = trace_bytes(&trace, &unnamed);
        while !self.queue.is_empty() && (self.queue.len() >= MAX_TRACES || self.bytes + bytes > MAX_BYTES) {
            if let Some(old) = self.queue.pop_front() {
                self.bytes -= old.bytes;
                self.counts.dropped_full += 1;
                ready.push(old.trace);
            }
        }
        if bytes > MAX_BYTES {
            self.counts.dropped_full += 1;
            ready.push(trace);
            return;
        }
        self.counts.held += 1;
        self.bytes += bytes;
        self.queue.push_back(Held { trace, unnamed, arrived: now, bytes });
    }

    /// Names the held traces again with what the symbolizer has loaded;
    /// those complete, or waiting past [`MAX_WAIT`] (all with `flush`),
    /// go to `ready` in the order they came.
    pub(crate) fn poll(&mut self, builder: &mut TraceBuilder, now: Instant, flush: bool, ready: &mut Vec<Trace>) {
        if self.queue.is_empty() {
            return;
        }
        builder.install_finished_loads();
        let mut kept = VecDeque::with_capacity(self.queue.len());
        for mut held in self.queue.drain(..) {
            self.counts.frames_named += builder.name_again(&mut held.trace, &mut held.unnamed) as u64;
            if held.unnamed.is_empty() {
                self.bytes -= held.bytes;
                ready.push(held.trace);
            } else if flush || now.duration_since(held.arrived) >= MAX_WAIT {
                self.bytes -= held.bytes;
                self.counts.timed_out += 1;
                ready.push(held.trace);
            } else {
                kept.push_back(held);
            }
        }
        self.queue = kept;
    }

    /// Whether traces are held.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
