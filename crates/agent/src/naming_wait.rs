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
/// How often the symbolizer's finished loads are checked for held
/// traces (they are named again only when one was installed).
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
    /// The symbolizer's installed loads when the held traces were last
    /// named again: until it changes, they would get the same answers.
    named_at: Option<u64>,
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
        let installed = builder.loads_installed();
        if self.named_at == Some(installed) && !flush {
            // Nothing new to name them with: only the oldest may have
            // waited long enough (the queue is in arrival order), so a
            // poll costs nothing for the traces still in their wait.
            while self.queue.front().is_some_and(|held| now.duration_since(held.arrived) >= MAX_WAIT) {
                if let Some(held) = self.queue.pop_front() {
                    self.let_go(held, true, ready);
                }
            }
            return;
        }
        self.named_at = Some(installed);
        let mut kept = VecDeque::with_capacity(self.queue.len());
        for mut held in std::mem::take(&mut self.queue) {
            self.counts.frames_named += builder.name_again(&mut held.trace, &mut held.unnamed) as u64;
            if held.unnamed.is_empty() {
                self.let_go(held, false, ready);
            } else if flush || now.duration_since(held.arrived) >= MAX_WAIT {
                self.let_go(held, true, ready);
            } else {
                kept.push_back(held);
            }
        }
        self.queue = kept;
    }

    /// Sends `held` on to `ready` (`timed_out`: with frames unnamed).
    fn let_go(&mut self, held: Held, timed_out: bool, ready: &mut Vec<Trace>) {
        self.bytes -= held.bytes;
        self.counts.timed_out += u64::from(timed_out);
        ready.push(held.trace);
    }

    /// Whether traces are held.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sample as sample;
    use profiler_interpreters::Registry;
    use profiler_process::ProcessRegistry;
    use profiler_symbolize::{FileSource, LoadHold, NativeConfig, NativeSymbolizer};
    use profiler_trace::{FrameKind, TableKey};
    use std::sync::Arc;

    /// A trace builder whose symbolizer starts no load until the hold
    /// is dropped.
    fn builder_with_loads_held() -> (LoadHold, TraceBuilder) {
        let native = NativeSymbolizer::new(NativeConfig::default()).expect("new");
        let gate = native.hold_loads();
        (gate, TraceBuilder::new(Arc::new(ProcessRegistry::new()), None, native, Arc::new(Registry::default())))
    }

    fn held_trace(builder: &mut TraceBuilder, file: &str) -> (Trace, Vec<UnnamedFrame>) {
        let mut trace = builder.build(&sample(1, 0));
        trace.frames = vec![Frame { kind: FrameKind::Native, address: 0x10, mapping: None, lines: vec![] }];
        (trace, vec![UnnamedFrame::new(0, TableKey([7; 32]), 0x10, FileSource::new(file))])
    }

    #[test]
    fn held_traces_go_on_when_full_after_the_wait_or_once_their_file_answers() {
        let (gate, mut builder) = builder_with_loads_held();
        let missing = "/nonexistent/early-naming-wait";
        let mut wait = NamingWait::default();
        let (mut ready, start) = (Vec::new(), Instant::now());
        for _ in 0..=MAX_TRACES {
            let (trace, unnamed) = held_trace(&mut builder, missing);
            wait.hold(trace, unnamed, start, &mut ready);
        }
        assert_eq!(ready.len(), 1, "the oldest went on when the bound was reached");
        assert_eq!((wait.counts().held, wait.counts().dropped_full), (MAX_TRACES as u64 + 1, 1));
        // The file is loading (its load held): they wait, then go on as
        // they are.
        wait.poll(&mut builder, start + Duration::from_millis(1), false, &mut ready);
        assert_eq!(ready.len(), 1);
        assert!(wait.next_poll(start).is_some());
        wait.poll(&mut builder, start + MAX_WAIT, false, &mut ready);
        assert_eq!(ready.len(), MAX_TRACES + 1);
        assert!(wait.is_empty() && wait.next_poll(start).is_none());
        assert_eq!(wait.counts().timed_out, MAX_TRACES as u64);
        assert_eq!(wait.bytes, 0, "every byte held was given back");
        // Once the load ends (it fails: no such file), a held trace goes
        // on at the next poll, unnamed but not timed out.
        drop(gate);
        let (trace, unnamed) = held_trace(&mut builder, missing);
        wait.hold(trace, unnamed, Instant::now(), &mut ready);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !wait.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            wait.poll(&mut builder, Instant::now(), false, &mut ready);
        }
        assert!(wait.is_empty());
        assert_eq!(ready.len(), MAX_TRACES + 2);
        assert_eq!((wait.counts().timed_out, wait.counts().frames_named), (MAX_TRACES as u64, 0));
    }

    #[test]
    fn with_nothing_new_loaded_held_traces_go_as_their_wait_ends() {
        let (_gate, mut builder) = builder_with_loads_held();
        let mut wait = NamingWait::default();
        let (mut ready, start) = (Vec::new(), Instant::now());
        let second = Duration::from_secs(1);
        for i in 0..3 {
            let (mut trace, unnamed) = held_trace(&mut builder, "/nonexistent/early-in-order");
            trace.cpu = i;
            wait.hold(trace, unnamed, start + second * i, &mut ready);
        }
        // The first poll names them again (their load is held: in vain);
        // the next ones have nothing new and let the oldest go in order.
        wait.poll(&mut builder, start, false, &mut ready);
        assert!(ready.is_empty());
        wait.poll(&mut builder, start + MAX_WAIT, false, &mut ready);
        assert_eq!(ready.iter().map(|t| t.cpu).collect::<Vec<_>>(), vec![0]);
        wait.poll(&mut builder, start + second * 2 + MAX_WAIT, false, &mut ready);
        assert_eq!(ready.iter().map(|t| t.cpu).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(wait.is_empty());
        assert_eq!((wait.counts().timed_out, wait.bytes), (3, 0));
    }

    #[test]
    fn a_flush_lets_every_held_trace_go() {
        let (_gate, mut builder) = builder_with_loads_held();
        let mut wait = NamingWait::default();
        let mut ready = Vec::new();
        for _ in 0..3 {
            let (trace, unnamed) = held_trace(&mut builder, "/nonexistent/early-flush");
            wait.hold(trace, unnamed, Instant::now(), &mut ready);
        }
        wait.poll(&mut builder, Instant::now(), true, &mut ready);
        assert_eq!((ready.len(), wait.counts().timed_out), (3, 3));
    }
}
