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
//!
//! Where things are: this file holds the public types, what the threads
//! share and the agent's short methods (stop, batches, notices);
//! `start.rs` is [`Agent::start_with_sinks`], which loads the programs
//! and starts the threads; `stats_snapshot.rs` is [`Agent::stats`], which
//! gathers [`Stats`] from every counter; `reader.rs` paces the reader and
//! bounds its hand-over; `reporter.rs` is the reporter's loop;
//! `trace_builder.rs` names a sample's frames; `late_unwind.rs` holds
//! samples whose process is not loaded yet; `process_manager.rs` runs the
//! [`ProcessManager`](profiler_process::ProcessManager) against the BPF
//! maps; `sink.rs` and `batch_queue.rs` carry the results; `config.rs`,
//! `stats.rs`, `off_cpu.rs`, `probabilistic.rs` and `go_labels.rs` are
//! what their names say.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod batch_queue;
mod config;
mod go_labels;
mod late_unwind;
mod naming_wait;
mod off_cpu;
mod probabilistic;
mod process_manager;
mod reader;
mod reporter;
mod sink;
mod start;
mod stats;
mod stats_snapshot;
mod trace_builder;

pub use config::{
    AgentConfig, ConfigError, MAX_BATCH_QUEUE_CAPACITY, MAX_PID, MAX_PIDS, MAX_PROBABILISTIC_INTERVAL_MS,
    MAX_REPORTER_INTERVAL_MS, MAX_SAMPLES_PER_SECOND, MAX_UNUSED_TABLES_BUDGET_MIB, MIN_PROBABILISTIC_INTERVAL_MS,
    MIN_REPORTER_INTERVAL_MS, PROBABILISTIC_THRESHOLD_MAX,
};
pub use late_unwind::MAX_PENDING_BYTES as LATE_UNWIND_MAX_PENDING_BYTES;
pub use probabilistic::SamplingWindow;
pub use profiler_bpf::{BpfError, UnwindStop};
pub use profiler_elf::kernel_build_id;
/// The names of the interpreter runtimes, as `disabled_interpreters`
/// takes them (the lines of `ebpf/runtimes.h`).
pub use profiler_interpreters::runtime_names;
pub use sink::TraceSink;
pub use stats::{RuntimeCounters, Stats, UnwindStops};

use crossbeam_channel::Receiver;

use crate::batch_queue::RecvTimeoutError;
use late_unwind::LateUnwindCounts;
use profiler_bpf::{Counters, OffCpuJoinCounts, Sampler};
use profiler_interpreters::{NamerStats, Registry};
use profiler_process::EventQueue;
use profiler_symbolize::{KernelSymbolizerStats, NativeStats};
use sink::BatchCounters;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// Counters updated by the threads.
#[derive(Debug, Default)]
struct Shared {
    samples_dropped: AtomicU64,
    /// Set when the agent is asked to stop: the reporter drains what is
    /// queued for at most [`STOP_DRAIN`].
    stopping: AtomicBool,
    /// Samples still queued at [`STOP_DRAIN`] after the stop, dropped.
    samples_dropped_at_stop: AtomicU64,
    /// At start-up, and while the reporter waits for file loads or for
    /// processes' tables: the reader polls every [`READER_POLL_SOON`].
    poll_soon: AtomicBool,
    /// Samples in the channel from the reader to the reporter.
    samples_queued: AtomicU64,
    /// The reader's joins of off-CPU stacks with their ends.
    off_cpu_join: Mutex<Arc<OffCpuJoinCounts>>,
    /// Panics caught per thread (see `Stats::panics_*`).
    panics_reader: AtomicU64,
    panics_reporter: AtomicU64,
    panics_process_manager: AtomicU64,
    samples_processed: AtomicU64,
    samples_malformed: AtomicU64,
    /// Bytes of stack copies sent to the reporter and not received yet.
    stack_bytes_in_flight: AtomicU64,
    /// Stack copies dropped because too many bytes were in flight.
    stack_copies_backlogged: AtomicU64,
    late: Mutex<LateUnwindCounts>,
    /// Counters of the traces that waited for native names.
    naming_wait: Mutex<naming_wait::NamingWaitCounts>,
    batches: Arc<BatchCounters>,
    unwind: Mutex<trace_builder::UnwindCounts>,
    manager: Mutex<process_manager::ManagerReport>,
    /// Published by the reporter at each interval's end and at stop.
    symbolizer: Mutex<NativeStats>,
    /// Likewise, how often the kernel's symbol table was read again.
    kernel_symbols: Mutex<KernelSymbolizerStats>,
    /// Counters of each runtime's frame namer, with its frames' kind.
    interpreter_namers: Mutex<Vec<(profiler_trace::FrameKind, NamerStats)>>,
    /// Counters of the reporter's naming budget.
    naming_budget: Mutex<profiler_interpreters::BudgetStats>,
    /// The interpreter runtimes and what they found in the files
    /// processes map (the process manager writes, the trace builder reads).
    interpreters: Arc<Registry>,
    /// Things found while running, each told once (Agent::notices).
    notices: Arc<Mutex<Vec<String>>>,
    /// Probabilistic profiling's windows, newest last (bounded).
    sampling_windows: Arc<Mutex<std::collections::VecDeque<SamplingWindow>>>,
}

struct Running {
    sampler: Sampler,
    stop: Arc<AtomicBool>,
    /// The process manager's stop, set once the reporter has built the
    /// last sample: what the manager unloads at its stop (the processes
    /// the interpreters attached to) names those samples.
    manager_stop: Arc<AtomicBool>,
    /// The manager's queue, woken to see that stop.
    manager_queue: Arc<EventQueue>,
    reader: JoinHandle<Result<(), BpfError>>,
    reporter: JoinHandle<()>,
    manager: JoinHandle<()>,
    events: JoinHandle<Result<(), BpfError>>,
    probabilistic: Option<JoinHandle<()>>,
}

/// A running profiler.
pub struct Agent {
    running: Mutex<Option<Running>>,
    /// Counters of the BPF programs, frozen at stop.
    final_counters: Mutex<Counters>,
    /// The off-CPU program's (run time ns, runs), frozen at stop.
    final_off_cpu_runs: Mutex<(u64, u64)>,
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

    /// Probabilistic profiling's windows so far, oldest first (the last
    /// 1024); empty when it is off.
    pub fn sampling_windows(&self) -> Vec<SamplingWindow> {
        lock(&self.shared.sampling_windows).iter().copied().collect()
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

    /// Stops sampling, drains what was sampled, closes the last interval
    /// (the sinks see it, and its OTLP batch stays pullable) and joins the
    /// threads. Idempotent. Returns the reader's error if it failed.
    pub fn stop(&self) -> Result<(), BpfError> {
        let Some(mut running) = lock(&self.running).take() else { return Ok(()) };
        running.sampler.detach();
        self.shared.stopping.store(true, Ordering::Relaxed);
        running.stop.store(true, Ordering::Relaxed);
        let read_result = running.reader.join().unwrap_or(Ok(()));
        let _ = running.reporter.join();
        let events_result = running.events.join().unwrap_or(Ok(()));
        // Only now: the reporter names its last samples with the
        // processes' interpreter states, which the manager's stop unloads.
        running.manager_stop.store(true, Ordering::Relaxed);
        running.manager_queue.wake();
        let _ = running.manager.join();
        if let Some(probabilistic) = running.probabilistic {
            let _ = probabilistic.join();
        }
        *lock(&self.final_counters) = running.sampler.counters().unwrap_or_default();
        *lock(&self.final_off_cpu_runs) = running.sampler.off_cpu_program_run_stats();
        read_result.and(events_result)
    }

    /// Entries in the native unwinder's maps, counted in the kernel:
    /// (process ranges and chunks, delta_pages, file_deltas). `None` once
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

/// Locks a mutex, recovering from a panic of another holder (the data
/// here stays consistent: plain counters and handles).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// A sample of thread `tid` with `copied` bytes of stack copy (tests).
#[cfg(test)]
pub(crate) fn test_sample(tid: u32, copied: usize) -> profiler_bpf::RawSample {
    let stack = (copied > 0).then(|| profiler_bpf::StackCopy {
        pc: 0x1000,
        sp: 0x7000,
        fp: 0,
        exact: true,
        stack_switches: 0,
        bytes: vec![0; copied],
    });
    profiler_bpf::RawSample {
        pid: 1,
        tid,
        ktime_ns: 0,
        cpu: 0,
        comm: "t".into(),
        process_comm: "p".into(),
        kernel_frames: vec![],
        user_frames: vec![0x1000],
        unwind_stop: UnwindStop::UnknownPid,
        stack,
        off_cpu_ns: None,
        go_labels: Vec::new(),
    }
}
