//! The reporter thread: samples -> traces -> sinks, interval by
//! interval. Samples with a stack copy wait for their process's tables
//! ([`LateUnwinder`]), traces with native frames whose files are still
//! loading wait for their names ([`NamingWait`]); a stop drains what is
//! queued for at most [`STOP_DRAIN`]; a panic costs one unit of work,
//! never the thread.

use crate::batch_queue::{BatchReceiver, RecvTimeoutError};
use crate::late_unwind::{LateTables, LateUnwinder};
use crate::naming_wait::NamingWait;
use crate::trace_builder::TraceBuilder;
use crate::{lock, process_manager, unix_now_ns, Shared, TraceSink};
use profiler_bpf::RawSample;
use profiler_process::ProcessRegistry;
use profiler_trace::Trace;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the reporter goes on with what is queued once the agent is
/// asked to stop: the rest is dropped and counted, so a stop never waits
/// on samples that are slow to name.
pub(crate) const STOP_DRAIN: Duration = Duration::from_secs(1);

/// Gives memory freed inside malloc's heaps back to the system (glibc
/// keeps it otherwise), once per reporting interval.
fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory; safe at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The reporter thread: samples -> traces -> sinks, interval by interval,
/// until the reader hangs up; samples with a stack copy wait in `late`
/// for their process.
pub(crate) fn report<T: LateTables>(
    samples: BatchReceiver<Vec<RawSample>>,
    builder: TraceBuilder,
    sinks: Vec<Box<dyn TraceSink>>,
    late: LateUnwinder<T>,
    registry: Arc<ProcessRegistry>,
    interval: Duration,
    shared: &Shared,
) {
    Reporter { builder, sinks, late, naming: NamingWait::default(), registry, shared, stop_deadline: None }
        .run(samples, interval);
}

/// The reporter thread's state.
struct Reporter<'a, T> {
    builder: TraceBuilder,
    sinks: Vec<Box<dyn TraceSink>>,
    late: LateUnwinder<T>,
    naming: NamingWait,
    registry: Arc<ProcessRegistry>,
    shared: &'a Shared,
    /// When what is still queued at a stop is dropped ([`STOP_DRAIN`]
    /// after the reporter first saw the stop).
    stop_deadline: Option<Instant>,
}

/// A panic (a bug met by one process's data) costs the reporter's unit
/// of work it happened in, never the thread: reporting would stop
/// silently. Counted in `panics_reporter`. A free function so that the
/// work may borrow the reporter's other fields.
fn guarded(shared: &Shared, f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        shared.panics_reporter.fetch_add(1, Ordering::Relaxed);
    }
}

impl<T: LateTables> Reporter<'_, T> {
    /// Runs until the reader hangs up.
    fn run(&mut self, samples: BatchReceiver<Vec<RawSample>>, interval: Duration) {
        let mut interval_start = unix_now_ns();
        let mut deadline = Instant::now() + interval;
        let mut ready = Vec::new();
        loop {
            let mut wake = self.late.next_poll().map_or(deadline, |p| p.min(deadline));
            if let Some(p) = self.naming.next_poll(Instant::now()) {
                wake = wake.min(p);
            }
            match samples.recv_deadline(wake) {
                Ok(batch) => {
                    self.shared.samples_queued.fetch_sub(batch.len() as u64, Ordering::Relaxed);
                    let mut batch = batch.into_iter();
                    while let Some(sample) = batch.next() {
                        if self.past_stop_deadline() {
                            let left = 1 + batch.len() as u64;
                            self.shared.samples_dropped_at_stop.fetch_add(left, Ordering::Relaxed);
                            break;
                        }
                        if let Some(copy) = &sample.stack {
                            self.shared.stack_bytes_in_flight.fetch_sub(copy.bytes.len() as u64, Ordering::Relaxed);
                            self.late.hold(sample, Instant::now(), &mut ready);
                        } else {
                            self.emit(&sample);
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let registry = &self.registry;
                    let late = &mut self.late;
                    guarded(self.shared, || {
                        late.flush(|pid, address| snapshot_covers(registry, pid, address), &mut ready)
                    });
                    self.emit_all(&mut ready);
                    *lock(&self.shared.late) = self.late.counts();
                    self.drain_naming_wait();
                    self.publish_symbolizer_stats();
                    let end = unix_now_ns();
                    for sink in std::mem::take(&mut self.sinks) {
                        let mut sink = sink;
                        guarded(self.shared, || {
                            sink.on_interval_end(interval_start, end);
                            sink.on_stop();
                        });
                    }
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let registry = &self.registry;
            let late = &mut self.late;
            guarded(self.shared, || {
                late.poll(Instant::now(), |pid, address| snapshot_covers(registry, pid, address), &mut ready)
            });
            if !ready.is_empty() {
                self.emit_all(&mut ready);
                *lock(&self.shared.late) = self.late.counts();
            }
            // Installed first (the poll installs them too): a count of
            // loads that finished long ago would hold the short poll.
            self.builder.install_finished_loads();
            self.poll_naming_wait(false);
            let waiting = self.builder.names_pending() || self.late.next_poll().is_some() || !self.naming.is_empty();
            self.shared.poll_soon.store(waiting, Ordering::Relaxed);
            if Instant::now() >= deadline {
                let builder = &mut self.builder;
                guarded(self.shared, || builder.forget_exited_processes());
                trim_allocator();
                self.publish_symbolizer_stats();
                let end = unix_now_ns();
                for sink in &mut self.sinks {
                    guarded(self.shared, || sink.on_interval_end(interval_start, end));
                }
                interval_start = end;
                deadline += interval;
                if deadline < Instant::now() {
                    deadline = Instant::now() + interval;
                }
            }
        }
    }

    /// Whether the agent was asked to stop more than [`STOP_DRAIN`] ago:
    /// what is still queued is dropped (counted), so that the agent
    /// stops in bounded time whatever the samples cost to name.
    fn past_stop_deadline(&mut self) -> bool {
        if !self.shared.stopping.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        now >= *self.stop_deadline.get_or_insert(now + STOP_DRAIN)
    }

    /// Builds the trace of `sample` and hands it to the sinks, or holds
    /// it while files that name its native frames load.
    fn emit(&mut self, sample: &RawSample) {
        let (builder, naming) = (&mut self.builder, &mut self.naming);
        let shared = self.shared;
        let mut ready = Vec::new();
        guarded(shared, || {
            let trace = builder.build(sample);
            let unnamed = builder.take_unnamed();
            if unnamed.is_empty() {
                ready.push(trace);
            } else {
                naming.hold(trace, unnamed, Instant::now(), &mut ready);
            }
        });
        self.send(ready);
        *lock(&shared.unwind) = self.builder.counts();
    }

    /// Hands finished traces to the sinks.
    fn send(&mut self, traces: Vec<Trace>) {
        for trace in traces {
            let sinks = &mut self.sinks;
            let shared = self.shared;
            guarded(shared, || {
                for sink in sinks.iter_mut() {
                    sink.on_trace(&trace);
                }
                shared.samples_processed.fetch_add(1, Ordering::Relaxed);
            });
        }
    }

    /// Names held traces again; sends those done (all with `flush`).
    fn poll_naming_wait(&mut self, flush: bool) {
        let (builder, naming) = (&mut self.builder, &mut self.naming);
        let mut ready = Vec::new();
        guarded(self.shared, || naming.poll(builder, Instant::now(), flush, &mut ready));
        self.send(ready);
        *lock(&self.shared.naming_wait) = self.naming.counts();
    }

    /// At the stop: the held traces get what loads finish within the
    /// stop's drain time, then go on as they are.
    fn drain_naming_wait(&mut self) {
        let until = *self.stop_deadline.get_or_insert_with(|| Instant::now() + STOP_DRAIN);
        while !self.naming.is_empty() && Instant::now() < until {
            self.poll_naming_wait(false);
            if self.naming.is_empty() || !self.builder.names_pending() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.poll_naming_wait(true);
    }

    fn emit_all(&mut self, ready: &mut Vec<RawSample>) {
        let mut samples = ready.drain(..);
        while let Some(sample) = samples.next() {
            if self.past_stop_deadline() {
                let left = 1 + samples.len() as u64;
                self.shared.samples_dropped_at_stop.fetch_add(left, Ordering::Relaxed);
                break;
            }
            self.emit(&sample);
        }
    }

    fn publish_symbolizer_stats(&self) {
        *lock(&self.shared.symbolizer) = self.builder.native_stats();
        *lock(&self.shared.kernel_symbols) = self.builder.kernel_stats();
        *lock(&self.shared.interpreter_namers) = self.builder.interpreter_stats();
        *lock(&self.shared.naming_budget) = self.builder.budget_stats();
        let told = self.builder.take_budget_notices();
        if !told.is_empty() {
            let mut notices = lock(&self.shared.notices);
            for notice in told {
                if notices.len() < process_manager::MAX_NOTICES {
                    notices.push(notice);
                }
            }
        }
    }
}

/// Whether the process snapshot user space holds for `pid` maps
/// `address` (the trace builder names frames with it).
fn snapshot_covers(registry: &ProcessRegistry, pid: u32, address: u64) -> bool {
    registry.get(profiler_trace::Pid(pid)).is_some_and(|s| s.resolve(address).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_queue::batch_queue;
    use crate::late_unwind;
    use crate::test_sample as sample;
    use profiler_interpreters::Registry;
    use profiler_symbolize::{NativeConfig, NativeSymbolizer};
    use std::sync::Mutex;

    /// Panics on the first trace, records the others and the stop.
    struct Fragile(Arc<Mutex<(u32, bool)>>);

    impl TraceSink for Fragile {
        fn on_trace(&mut self, _trace: &profiler_trace::Trace) {
            let mut seen = lock(&self.0);
            seen.0 += 1;
            if seen.0 == 1 {
                drop(seen);
                panic!("a bug met by one sample");
            }
        }
        fn on_stop(&mut self) {
            lock(&self.0).1 = true;
        }
    }

    #[test]
    fn the_reporter_survives_a_panic_in_one_sample() {
        let native = NativeSymbolizer::new(NativeConfig { enabled: false, ..NativeConfig::default() }).expect("new");
        let builder = TraceBuilder::new(Arc::new(ProcessRegistry::new()), None, native, Arc::new(Registry::default()));
        let seen = Arc::new(Mutex::new((0, false)));
        let (tx, rx) = batch_queue(8);
        for tid in 0..3 {
            assert!(tx.try_send(vec![sample(tid, 0)]).is_ok());
        }
        drop(tx);
        let shared = Shared::default();
        let sinks: Vec<Box<dyn TraceSink>> = vec![Box::new(Fragile(seen.clone()))];
        let late = LateUnwinder::new(late_unwind::NoTables);
        report(rx, builder, sinks, late, Arc::new(ProcessRegistry::new()), Duration::from_secs(60), &shared);
        assert_eq!(shared.panics_reporter.load(Ordering::Relaxed), 1);
        assert_eq!(shared.samples_processed.load(Ordering::Relaxed), 2, "the other samples went on");
        assert_eq!(*lock(&seen), (3, true), "every sample reached the sink, then the stop");
    }
}
