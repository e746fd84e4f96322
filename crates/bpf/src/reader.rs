//! Draining the sample ring buffer.

use crate::off_cpu::{OffCpuEnd, OffCpuJoin, OffCpuJoinCounts, MAX_PENDING_OFF_CPU, OFF_CPU_END_SIZE};
use crate::sample::RawSample;
use crate::BpfError;
use libbpf_rs::{MapHandle, RingBufferBuilder};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Reads samples from the ring buffer. Create it with
/// [`crate::Sampler::sample_reader`] and call [`SampleReader::run`] on a
/// thread of its own.
pub struct SampleReader {
    map: MapHandle,
    malformed: AtomicU64,
    panics: AtomicU64,
    off_cpu: Arc<OffCpuJoinCounts>,
}

impl SampleReader {
    pub(crate) fn new(map: MapHandle) -> SampleReader {
        SampleReader { map, malformed: AtomicU64::new(0), panics: AtomicU64::new(0), off_cpu: Arc::default() }
    }

    /// Delivers the samples to `on_batch` until `stop` is set, then
    /// drains what is left. The programs wake the reader only when the
    /// buffer fills up or at the first sample of a process not loaded yet (to keep
    /// wake-ups off the hot path), so it also polls, `interval()` after
    /// each drain. The samples of one drain go together (one
    /// hand-over, one wake-up of whoever takes them, not one a sample);
    /// `on_batch` takes what it keeps out of the vector. An off-CPU sample
    /// is delivered when the thread's switch-in arrives, with its time off
    /// the CPU.
    pub fn run(
        &self,
        interval: impl Fn() -> Duration,
        stop: &AtomicBool,
        mut on_batch: impl FnMut(&mut Vec<RawSample>),
    ) -> Result<(), BpfError> {
        let (malformed, panics) = (&self.malformed, &self.panics);
        let mut join = OffCpuJoin::new(MAX_PENDING_OFF_CPU, &self.off_cpu);
        let batch = RefCell::new(Vec::new());
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&self.map, |data: &[u8]| {
                // Called from C (libbpf): a panic must not unwind out of
                // here. It costs the one sample.
                let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let sample = if data.len() == OFF_CPU_END_SIZE {
                        OffCpuEnd::parse(data).map(|end| join.end(end))
                    } else {
                        RawSample::parse(data).map(|sample| match sample.off_cpu_ns {
                            Some(_) => {
                                join.hold(sample);
                                None
                            }
                            None => Some(sample),
                        })
                    };
                    match sample {
                        Some(Some(sample)) => batch.borrow_mut().push(sample),
                        Some(None) => {}
                        None => {
                            malformed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }));
                if handled.is_err() {
                    panics.fetch_add(1, Ordering::Relaxed);
                }
                0
            })
            .map_err(|source| BpfError::Map { map: "samples", source })?;
        let ring = builder.build().map_err(|source| BpfError::Map { map: "samples", source })?;
        let mut hand_over = || {
            let mut batch = batch.borrow_mut();
            if !batch.is_empty() {
                on_batch(&mut batch);
                batch.clear();
            }
        };
        while !stop.load(Ordering::Relaxed) {
            // poll() only consumes after a wake-up; consume() takes what
            // arrived without one.
            crate::ring::poll(&ring, interval(), "samples")?;
            ring.consume().map_err(|source| BpfError::Map { map: "samples", source })?;
            hand_over();
        }
        ring.consume().map_err(|source| BpfError::Map { map: "samples", source })?;
        hand_over();
        Ok(())
    }

    /// What joining off-CPU stacks with their ends did; live while
    /// [`SampleReader::run`] runs.
    pub fn off_cpu_counts(&self) -> Arc<OffCpuJoinCounts> {
        self.off_cpu.clone()
    }

    /// Records that were shorter than their header announced.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Samples whose decoding or handling panicked (each dropped).
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }
}
