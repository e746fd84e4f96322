//! The profiler as a library: [`Agent::start`] loads the BPF programs,
//! starts the reader and reporter threads, and hands results to the
//! outputs: [`TraceSink`]s given by the caller and, when
//! [`AgentConfig::otlp_batches`] is on, a bounded queue of serialized OTLP
//! requests pulled with [`Agent::next_otlp_batch`].
//!
//! Threads: the *reader* drains the BPF ring buffer into a bounded
//! channel (drops counted); the *reporter* turns samples into traces
//! (process snapshots, ELF symbols, kallsyms) and feeds the sinks, closing
//! a reporting interval every [`AgentConfig::reporter_interval`]; the
//! *process manager* follows the BPF programs' process events (new
//! process, unknown pc, exit) and loads unwind tables and process
//! mappings into the BPF maps for the native unwinder.
//!
//! Both front ends use only this API: the `ebpf-profiler` CLI and the C ABI
//! in `ffi/`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod config;
mod process_manager;
mod sink;
mod stats;
mod trace_builder;

pub use config::{
    AgentConfig, ConfigError, MAX_BATCH_QUEUE_CAPACITY, MAX_FILE_UNLOAD_GRACE_MS, MAX_PID, MAX_PIDS,
    MAX_REPORTER_INTERVAL_MS, MAX_SAMPLES_PER_SECOND, MIN_REPORTER_INTERVAL_MS,
};
pub use profiler_bpf::BpfError;
pub use sink::TraceSink;
pub use stats::Stats;

use crossbeam_channel::{Receiver, RecvTimeoutError, TrySendError};
use profiler_bpf::{Counters, RawSample, Sampler, SamplerOptions, UnwindStop};
use profiler_interpreters::python::{PythonRegistry, PythonSymbolizerStats};
use profiler_process::{ManagerLimits, ProcessManager, ProcessRegistry};
use profiler_symbolize::{KernelSymbolizer, NativeConfig, NativeStats, NativeSymbolizer};
use sink::{BatchCounters, OtlpBatchSink};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use trace_builder::TraceBuilder;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// A process given in `pids` does not exist.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// The BPF side could not be set up.
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// A thread could not be started.
    #[error("starting the {name} thread: {source}")]
    Thread {
        /// Which thread.
        name: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The answer of [`Agent::next_otlp_batch`].
#[derive(Debug)]
pub enum NextBatch {
    /// One serialized `ExportProfilesServiceRequest` (protobuf bytes).
    Batch(Vec<u8>),
    /// Nothing arrived within the timeout.
    Timeout,
    /// The agent has stopped and every batch has been handed out (or
    /// batches are not enabled).
    Stopped,
}

/// Capacity of the channel between the reader and the reporter, in
/// samples (a few seconds of 1000 Hz on 8 CPUs).
const SAMPLE_QUEUE_CAPACITY: usize = 32_768;
/// How often the reader drains the ring buffer when not woken earlier.
const READER_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Counters updated by the threads.
#[derive(Debug, Default)]
struct Shared {
    samples_dropped: AtomicU64,
    /// Panics caught per thread (see `Stats::panics_*`).
    panics_reader: AtomicU64,
    panics_reporter: AtomicU64,
    panics_process_manager: AtomicU64,
    samples_processed: AtomicU64,
    samples_malformed: AtomicU64,
    batches: Arc<BatchCounters>,
    unwind: Mutex<trace_builder::UnwindCounts>,
    manager: Mutex<process_manager::ManagerReport>,
    /// Published by the reporter at each interval's end and at stop.
    symbolizer: Mutex<NativeStats>,
    python_symbolizer: Mutex<PythonSymbolizerStats>,
    /// Things found while running, each told once (Agent::notices).
    notices: Arc<Mutex<Vec<String>>>,
}

struct Running {
    sampler: Sampler,
    stop: Arc<AtomicBool>,
    reader: JoinHandle<Result<(), BpfError>>,
    reporter: JoinHandle<()>,
    manager: JoinHandle<Result<(), BpfError>>,
}

/// A running profiler.
pub struct Agent {
    running: Mutex<Option<Running>>,
    /// Counters of the BPF programs, frozen at stop.
    final_counters: Mutex<Counters>,
    shared: Arc<Shared>,
    batches: Option<Receiver<Vec<u8>>>,
    warnings: Vec<String>,
    sampling_started: Instant,
}

impl Agent {
    /// Validates `config`, loads and attaches the BPF programs and starts
    /// the pipeline threads, with no outputs but the OTLP batch queue.
    pub fn start(config: AgentConfig) -> Result<Agent, StartError> {
        Self::start_with_sinks(config, Vec::new())
    }

    /// As [`Agent::start`], also feeding every trace to `sinks`.
    pub fn start_with_sinks(config: AgentConfig, mut sinks: Vec<Box<dyn TraceSink>>) -> Result<Agent, StartError> {
        config.validate()?;
        tune_allocator();
        for &pid in &config.pids {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(StartError::NoSuchProcess(pid));
            }
        }
        let mut warnings = Vec::new();
        let mut sampler = Sampler::open(&SamplerOptions {
            samples_per_second: config.samples_per_second,
            pids: (!config.pids.is_empty()).then(|| config.pids.clone()),
            ..SamplerOptions::default()
        })?;
        // Read after the programs are loaded, so that they are named.
        let kernel = match KernelSymbolizer::new() {
            Ok(k) => Some(k),
            Err(e) => {
                warnings.push(format!("kernel frames will not be named: {e}"));
                None
            }
        };

        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let batches = if config.otlp_batches {
            let (tx, rx) = crossbeam_channel::bounded(config.batch_queue_capacity);
            sinks.push(Box::new(OtlpBatchSink::new(
                config.samples_per_second,
                unix_now_ns(),
                tx,
                rx.clone(),
                shared.batches.clone(),
            )));
            Some(rx)
        } else {
            None
        };

        let (sample_tx, sample_rx) = crossbeam_channel::bounded::<RawSample>(SAMPLE_QUEUE_CAPACITY);
        let reader = {
            let sample_reader = sampler.sample_reader()?;
            let stop = stop.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ep-reader".into())
                .spawn(move || {
                    let result = sample_reader.run(READER_POLL_INTERVAL, &stop, |sample| {
                        if let Err(TrySendError::Full(_)) = sample_tx.try_send(sample) {
                            shared.samples_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    shared.samples_malformed.store(sample_reader.malformed(), Ordering::Relaxed);
                    shared.panics_reader.fetch_add(sample_reader.panics(), Ordering::Relaxed);
                    result
                })
                .map_err(|source| StartError::Thread { name: "reader", source })?
        };
        let registry = Arc::new(ProcessRegistry::new());
        let sampling_started;
        let python_builds = Arc::new(PythonRegistry::new());
        let manager = {
            let events = sampler.process_event_reader()?;
            let limits = ManagerLimits {
                file_unload_grace: Duration::from_millis(config.file_unload_grace_ms),
                open_via_map_files: config.open_via_map_files,
                ..ManagerLimits::default()
            };
            let interpreters = process_manager::Interpreters::new(
                sampler.interpreter_maps()?,
                python_builds.clone(),
                shared.notices.clone(),
            );
            let mut manager = ProcessManager::new(
                process_manager::BpfLoader::new(sampler.unwind_maps()?, interpreters),
                registry.clone(),
                limits,
            );
            // The selected processes are loaded before sampling starts, so
            // that their first samples unwind.
            for &pid in &config.pids {
                manager.on_new_process(profiler_trace::Pid(pid));
            }
            sampler.start_sampling()?;
            sampling_started = Instant::now();
            let stop = stop.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ep-procman".into())
                .spawn(move || {
                    process_manager::run(events, manager, &stop, &shared.manager, &shared.panics_process_manager)
                })
                .map_err(|source| StartError::Thread { name: "process manager", source })?
        };
        let reporter = {
            let shared = shared.clone();
            let native =
                NativeSymbolizer::new(NativeConfig { enabled: config.symbolize_native, ..NativeConfig::default() })
                    .or_else(|e| {
                        warnings.push(format!("native frames will be named from ELF symbols only: {e}"));
                        NativeSymbolizer::new(NativeConfig { enabled: false, ..NativeConfig::default() })
                    })
                    .map_err(|source| StartError::Thread { name: "symbolizer", source })?;
            let mut builder = TraceBuilder::new(registry, kernel, native, python_builds);
            builder.set_open_via_map_files(config.open_via_map_files);
            let interval = config.reporter_interval();
            std::thread::Builder::new()
                .name("ep-reporter".into())
                .spawn(move || report(sample_rx, builder, sinks, interval, &shared))
                .map_err(|source| StartError::Thread { name: "reporter", source })?
        };

        Ok(Agent {
            running: Mutex::new(Some(Running { sampler, stop, reader, reporter, manager })),
            final_counters: Mutex::new(Counters::default()),
            shared,
            batches,
            warnings,
            sampling_started,
        })
    }

    /// When the perf events were attached: the start of the profiled
    /// time (loading the programs and tables before it can take seconds).
    pub fn sampling_started(&self) -> Instant {
        self.sampling_started
    }

    /// Problems that did not prevent starting (e.g. kernel symbols
    /// unavailable), for the front end to show.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Things found while running that a user should hear of, each told
    /// once, oldest first (at most 64): e.g. an unsupported CPython whose
    /// frames are profiled as native code. The front end shows the ones
    /// past those it already showed.
    pub fn notices(&self) -> Vec<String> {
        lock(&self.shared.notices).clone()
    }

    /// Waits up to `timeout` for the next OTLP batch (only when
    /// [`AgentConfig::otlp_batches`] is on).
    pub fn next_otlp_batch(&self, timeout: Duration) -> NextBatch {
        let Some(batches) = &self.batches else { return NextBatch::Stopped };
        match batches.recv_timeout(timeout) {
            Ok(bytes) => {
                self.shared.batches.sent.fetch_add(1, Ordering::Relaxed);
                NextBatch::Batch(bytes)
            }
            Err(RecvTimeoutError::Timeout) => NextBatch::Timeout,
            Err(RecvTimeoutError::Disconnected) => NextBatch::Stopped,
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let counters = match &*lock(&self.running) {
            Some(running) => running.sampler.counters().unwrap_or_default(),
            None => *lock(&self.final_counters),
        };
        let s = &self.shared;
        let unwind = *lock(&s.unwind);
        let manager = *lock(&s.manager);
        let stop = |r: UnwindStop| counters.unwind_stop(r);
        let symbolizer = *lock(&s.symbolizer);
        let python = *lock(&s.python_symbolizer);
        let mut refused = manager.manager.files_refused;
        refused.add(&symbolizer.files_refused);
        Stats {
            samples: counters.sent,
            samples_lost: counters.lost_ring_buffer,
            samples_dropped: s.samples_dropped.load(Ordering::Relaxed),
            samples_processed: s.samples_processed.load(Ordering::Relaxed),
            samples_malformed: s.samples_malformed.load(Ordering::Relaxed),
            kernel_stack_errors: counters.kernel_stack_errors,
            user_stack_errors: counters.user_stack_errors,
            processes_seen: manager.manager.processes_loaded,
            batches_sent: s.batches.sent.load(Ordering::Relaxed),
            batches_dropped: s.batches.dropped.load(Ordering::Relaxed),
            symbolizer_files_loaded: symbolizer.files_loaded,
            symbolizer_loads_failed: symbolizer.loads_failed,
            symbolizer_queue_drops: symbolizer.queue_drops,
            symbolizer_file_evictions: symbolizer.file_evictions,
            symbolizer_load_ms_max: symbolizer.load_ms_max,
            user_stacks_complete: unwind.complete,
            user_stacks_truncated: unwind.truncated,
            user_frames_unresolved: unwind.unresolved_frames,
            unwind_stopped_root: stop(UnwindStop::Root),
            unwind_stopped_kernel_thread: stop(UnwindStop::KernelThread),
            unwind_stopped_unknown_pid: stop(UnwindStop::UnknownPid),
            unwind_stopped_unknown_pc: stop(UnwindStop::UnknownPc),
            unwind_stopped_no_unwind_info: stop(UnwindStop::NoUnwindInfo),
            unwind_stopped_no_deltas: stop(UnwindStop::NoDeltas),
            unwind_stopped_no_coverage: stop(UnwindStop::NoCoverage),
            unwind_stopped_invalid_rule: stop(UnwindStop::InvalidRule),
            unwind_stopped_read_error: stop(UnwindStop::ReadError),
            unwind_stopped_bad_sp: stop(UnwindStop::BadSp),
            unwind_stopped_max_frames: stop(UnwindStop::MaxFrames),
            unwind_stopped_tail_calls: stop(UnwindStop::TailCalls),
            unwind_stopped_internal: stop(UnwindStop::Internal),
            unwind_stopped_zero_pc: stop(UnwindStop::ZeroPc),
            unwind_stopped_no_user_regs: stop(UnwindStop::NoUserRegs),
            unwind_stopped_stack_switch: stop(UnwindStop::StackSwitch),
            user_frames: counters.user_frames,
            process_events: counters.process_events,
            process_events_lost: counters.process_events_lost,
            processes_loaded: manager.manager.processes,
            processes_exited: manager.manager.processes_exited,
            processes_rejected: manager.manager.processes_rejected,
            files_loaded: manager.manager.files,
            files_analysed: manager.manager.files_analysed,
            files_failed: manager.manager.files_failed,
            files_rejected: manager.manager.files_rejected,
            files_refused_not_regular: refused.not_regular,
            files_refused_too_large: refused.too_large,
            files_refused_mismatch: refused.mismatch,
            files_refused_escape: refused.escape,
            files_refused_no_openat2: refused.no_openat2,
            file_id_collisions: manager.manager.file_id_collisions,
            unwind_deltas: manager.maps.delta_entries,
            unwind_rules: manager.maps.rules,
            unwind_prefixes: manager.maps.prefixes,
            unwind_load_errors: manager.manager.load_errors + manager.interpreters.load_errors,
            unwind_analyse_ms: manager.manager.analyse_ms,
            python_files: manager.interpreters.python_files,
            python_unsupported: manager.interpreters.python_unsupported,
            python_frames: counters.python_frames,
            python_frames_named: python.frames,
            python_frames_unknown: python.unknown,
            python_code_reads: python.code_reads,
            python_no_thread_state: counters.python_no_thread_state,
            python_read_errors: counters.python_read_errors,
            python_tail_calls: counters.python_tail_calls,
            bpf_run_time_ns: counters.bpf_run_time_ns,
            bpf_runs: counters.bpf_runs,
            panics_reader: s.panics_reader.load(Ordering::Relaxed),
            panics_reporter: s.panics_reporter.load(Ordering::Relaxed),
            panics_process_manager: s.panics_process_manager.load(Ordering::Relaxed),
            panics_symbolizer: symbolizer.panics,
            files_changed_while_read: profiler_elf::map_guard::files_changed_while_read(),
        }
    }

    /// Stops sampling, drains what was sampled, closes the last interval
    /// (the sinks see it, and its OTLP batch stays pullable) and joins the
    /// threads. Idempotent. Returns the reader's error if it failed.
    pub fn stop(&self) -> Result<(), BpfError> {
        let Some(mut running) = lock(&self.running).take() else { return Ok(()) };
        running.sampler.detach();
        running.stop.store(true, Ordering::Relaxed);
        let read_result = running.reader.join().unwrap_or(Ok(()));
        let _ = running.reporter.join();
        let manager_result = running.manager.join().unwrap_or(Ok(()));
        *lock(&self.final_counters) = running.sampler.counters().unwrap_or_default();
        read_result.and(manager_result)
    }

    /// Entries in the native unwinder's maps, counted in the kernel:
    /// (pid_mappings prefixes, delta_pages, file_deltas). `None` once
    /// stopped. Iterates every key: for tests and diagnostics.
    pub fn unwind_map_entries(&self) -> Option<(usize, usize, usize)> {
        lock(&self.running).as_ref().and_then(|r| r.sampler.count_unwind_map_entries().ok())
    }

    /// The keys in the interpreter unwinders' maps, read in the kernel:
    /// (python_files: `TableKey::bpf_id` of each CPython build loaded,
    /// python_thread_states: `tgid << 32 | tid` of each thread whose
    /// thread state is cached). `None` once stopped. Iterates every key:
    /// for tests and diagnostics.
    pub fn interpreter_map_keys(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        lock(&self.running).as_ref().map(|r| r.sampler.interpreter_map_keys())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// glibc's malloc raises its mmap threshold (up to 32 MiB) each time a
/// large block is freed; after that, the large temporary buffers of
/// analysing a 100-200 MB library (unwind and symbol tables) come from
/// the heap, where they fragment it and are not given back: the agent
/// kept 70-90 MB instead of 40. A fixed threshold keeps every block of
/// 256 KiB or more its own mapping, returned to the system when freed.
/// Process-wide (the allocator is the process's), idempotent.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a malloc tunable; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// Gives memory freed inside malloc's heaps back to the system (glibc
/// keeps it otherwise), once per reporting interval.
fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory; safe at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Locks a mutex, recovering from a panic of another holder (the data
/// here stays consistent: plain counters and handles).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The reporter thread: samples -> traces -> sinks, interval by interval,
/// until the reader hangs up.
fn report(
    samples: Receiver<RawSample>,
    mut builder: TraceBuilder,
    mut sinks: Vec<Box<dyn TraceSink>>,
    interval: Duration,
    shared: &Shared,
) {
    let mut interval_start = unix_now_ns();
    let mut deadline = Instant::now() + interval;
    // A panic (a bug met by one process's data) costs the unit of work
    // it happened in, never the thread: reporting would stop silently.
    let guarded = |f: &mut dyn FnMut()| {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
            shared.panics_reporter.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        match samples.recv_deadline(deadline) {
            Ok(sample) => {
                guarded(&mut || {
                    let trace = builder.build(&sample);
                    for sink in &mut sinks {
                        sink.on_trace(&trace);
                    }
                    shared.samples_processed.fetch_add(1, Ordering::Relaxed);
                });
                *lock(&shared.unwind) = builder.counts();
            }
            Err(RecvTimeoutError::Timeout) => {
                trim_allocator();
                *lock(&shared.symbolizer) = builder.native_stats();
                *lock(&shared.python_symbolizer) = builder.python_stats();
                let end = unix_now_ns();
                for sink in &mut sinks {
                    guarded(&mut || sink.on_interval_end(interval_start, end));
                }
                interval_start = end;
                deadline += interval;
                if deadline < Instant::now() {
                    deadline = Instant::now() + interval;
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                *lock(&shared.symbolizer) = builder.native_stats();
                *lock(&shared.python_symbolizer) = builder.python_stats();
                let end = unix_now_ns();
                for sink in &mut sinks {
                    guarded(&mut || {
                        sink.on_interval_end(interval_start, end);
                        sink.on_stop();
                    });
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let builder =
            TraceBuilder::new(Arc::new(ProcessRegistry::new()), None, native, Arc::new(PythonRegistry::new()));
        let seen = Arc::new(Mutex::new((0, false)));
        let (tx, rx) = crossbeam_channel::bounded(8);
        for tid in 0..3 {
            tx.send(RawSample {
                pid: 1,
                tid,
                ktime_ns: 0,
                cpu: 0,
                comm: "t".into(),
                process_comm: "p".into(),
                kernel_frames: vec![],
                user_frames: vec![0x1000],
                unwind_stop: UnwindStop::UnknownPid,
            })
            .unwrap();
        }
        drop(tx);
        let shared = Shared::default();
        report(rx, builder, vec![Box::new(Fragile(seen.clone()))], Duration::from_secs(60), &shared);
        assert_eq!(shared.panics_reporter.load(Ordering::Relaxed), 1);
        assert_eq!(shared.samples_processed.load(Ordering::Relaxed), 2, "the other samples went on");
        assert_eq!(*lock(&seen), (3, true), "every sample reached the sink, then the stop");
    }
}
