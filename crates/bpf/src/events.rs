//! Draining the process events ring buffer (new processes, unknown pcs,
//! execs, exits) for the process manager's queue.

use crate::types::ProcessEvent;
use crate::BpfError;
use libbpf_rs::{MapHandle, RingBufferBuilder};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Reads process events. Create it with
/// [`crate::Sampler::process_event_reader`] and call
/// [`ProcessEventReader::run`] on a thread that does nothing else (it
/// must never wait on file analysis, or the buffer fills).
pub struct ProcessEventReader {
    map: MapHandle,
    malformed: AtomicU64,
}

impl ProcessEventReader {
    pub(crate) fn new(map: MapHandle) -> ProcessEventReader {
        ProcessEventReader { map, malformed: AtomicU64::new(0) }
    }

    /// Until `stop` is set: sleeps until events arrive (the programs wake
    /// this reader for a sample waiting for its process; execs and exits
    /// wait for the timeout) or the timeout passes, then calls
    /// `handle` with each event, then with `None` (for housekeeping),
    /// whose answer is the next timeout (at most `tick`).
    pub fn run(
        &self,
        tick: Duration,
        stop: &AtomicBool,
        mut handle: impl FnMut(Option<ProcessEvent>) -> Duration,
    ) -> Result<(), BpfError> {
        let pending: RefCell<Vec<ProcessEvent>> = RefCell::new(Vec::new());
        let malformed = &self.malformed;
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&self.map, |data: &[u8]| {
                // Called from C (libbpf): nothing may unwind out of here;
                // a record that panics is counted as malformed.
                let parsed = std::panic::catch_unwind(|| ProcessEvent::parse(data)).ok().flatten();
                match parsed {
                    Some(event) => {
                        if let Ok(mut pending) = pending.try_borrow_mut() {
                            pending.push(event);
                        }
                    }
                    None => {
                        malformed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                0
            })
            .map_err(|source| BpfError::Map { map: "process_events", source })?;
        let ring = builder.build().map_err(|source| BpfError::Map { map: "process_events", source })?;
        let mut timeout = tick;
        while !stop.load(Ordering::Relaxed) {
            crate::ring::poll(&ring, timeout, "process_events")?;
            // Events sent without a wake-up are not seen by the poll.
            ring.consume().map_err(|source| BpfError::Map { map: "process_events", source })?;
            let events = std::mem::take(&mut *pending.borrow_mut());
            for event in events {
                handle(Some(event));
            }
            timeout = handle(None).min(tick);
        }
        // What came between the last poll and the stop (the programs are
        // detached first): read too, so the counters add up.
        ring.consume().map_err(|source| BpfError::Map { map: "process_events", source })?;
        let events = std::mem::take(&mut *pending.borrow_mut());
        for event in events {
            handle(Some(event));
        }
        Ok(())
    }

    /// Records that could not be decoded.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }
}
