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
//! Where things are: this file starts and stops the threads and gathers
//! [`Stats`]; `reader.rs` paces the reader and bounds its hand-over;
//! `reporter.rs` is the reporter's loop; `trace_builder.rs` names a
//! sample's frames; `late_unwind.rs` holds samples whose process is not
//! loaded yet; `process_manager.rs` runs the [`ProcessManager`] against
//! the BPF maps; `sink.rs` and `batch_queue.rs` carry the results;
//! `config.rs`, `stats.rs`, `off_cpu.rs`, `probabilistic.rs` and
//! `go_labels.rs` are what their names say.
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
mod stats;
mod trace_builder;

pub use config::{
    AgentConfig, ConfigError, MAX_BATCH_QUEUE_CAPACITY, MAX_PID, MAX_PIDS, MAX_PROBABILISTIC_INTERVAL_MS,
    MAX_REPORTER_INTERVAL_MS, MAX_SAMPLES_PER_SECOND, MAX_UNUSED_TABLES_BUDGET_MIB, MIN_PROBABILISTIC_INTERVAL_MS,
    MIN_REPORTER_INTERVAL_MS, PROBABILISTIC_THRESHOLD_MAX,
};
pub use probabilistic::SamplingWindow;
pub use profiler_bpf::{BpfError, UnwindStop};
pub use profiler_elf::kernel_build_id;
pub use sink::TraceSink;
pub use stats::{RuntimeCounters, Stats, UnwindStops};

use crossbeam_channel::Receiver;

use crate::batch_queue::{batch_queue, RecvTimeoutError};
use late_unwind::{LateUnwindCounts, LateUnwinder};
use profiler_bpf::{Counters, OffCpuJoinCounts, RawSample, Sampler, SamplerOptions, SELECTED_PIDS_MAX};
use profiler_interpreters::{NamerStats, Refusal, Registry};
use profiler_process::{EventQueue, ManagerLimits, ProcessManager, ProcessRegistry};
use profiler_symbolize::{KernelSymbolizer, KernelSymbolizerStats, NativeConfig, NativeStats, NativeSymbolizer};
use reader::{
    hand_over, reader_poll_interval, ring_buffer_bytes, sample_queue_capacity, ReaderPace, SAMPLE_BATCH_QUEUE,
};
use reporter::report;
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
        // Containers or cgroups named: the processes in them now, then
        // those the kernel and the event thread add as they appear.
        let filter = config.process_filter()?;
        let mut selected = config.pids.clone();
        if filter.is_active() {
            let mut seen: std::collections::HashSet<u32> = selected.iter().copied().collect();
            for pid in filter.scan(std::path::Path::new("/proc"), SELECTED_PIDS_MAX) {
                if seen.insert(pid.0) {
                    selected.push(pid.0);
                }
            }
            selected.truncate(SELECTED_PIDS_MAX);
        }
        let cpus = online_cpus();
        let mut sampler = Sampler::open(&SamplerOptions {
            samples_per_second: config.samples_per_second,
            pids: (!config.pids.is_empty() || filter.is_active()).then(|| selected.clone()),
            follow_selection: filter.is_active(),
            ring_buffer_bytes: ring_buffer_bytes(config.samples_per_second, cpus),
            off_cpu_threshold: config.off_cpu_threshold_scaled(),
            ..SamplerOptions::default()
        })?;
        let pid_namespace = sampler.pid_namespace();
        if !pid_namespace.is_init() {
            warnings.push(format!(
                "running in a nested PID namespace (pid:[{}]): pids are this namespace's, and only its processes \
                 (and those of the namespaces below it) are profiled",
                pid_namespace.inode
            ));
        }
        if let Some(why) = sampler.off_cpu_unavailable() {
            warnings.push(format!("off-CPU profiling is not available on this kernel, profiling on-CPU only: {why}"));
        }
        // Read after the programs are loaded, so that they are named.
        let kernel = match KernelSymbolizer::new() {
            Ok(k) => Some(k),
            Err(e) => {
                warnings.push(format!("kernel frames will not be named: {e}"));
                None
            }
        };

        let shared = Arc::new(Shared {
            interpreters: Arc::new(Registry::new(profiler_interpreters::runtimes_except(
                &config.disabled_interpreters,
            ))),
            ..Shared::default()
        });
        let stop = Arc::new(AtomicBool::new(false));
        let manager_stop = Arc::new(AtomicBool::new(false));
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

        let off_cpu = config.off_cpu_threshold > 0.0;
        let capacity = sample_queue_capacity(config.samples_per_second, cpus, off_cpu);
        let pace = ReaderPace::new(reader_poll_interval(config.samples_per_second, cpus, off_cpu));
        // Start-up: every file is new, until the reporter says otherwise.
        shared.poll_soon.store(true, Ordering::Relaxed);
        let (sample_tx, sample_rx) = batch_queue::<Vec<RawSample>>(SAMPLE_BATCH_QUEUE);
        let reader = {
            let sample_reader = sampler.sample_reader()?;
            *lock(&shared.off_cpu_join) = sample_reader.off_cpu_counts();
            let stop = stop.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ep-reader".into())
                .spawn(move || {
                    let result = sample_reader.run(
                        || pace.interval(shared.poll_soon.load(Ordering::Relaxed), Instant::now()),
                        &stop,
                        |batch| {
                            pace.saw(batch, Instant::now());
                            hand_over(&shared, capacity, &sample_tx, batch)
                        },
                    );
                    shared.samples_malformed.store(sample_reader.malformed(), Ordering::Relaxed);
                    shared.panics_reader.fetch_add(sample_reader.panics(), Ordering::Relaxed);
                    result
                })
                .map_err(|source| StartError::Thread { name: "reader", source })?
        };
        let registry = Arc::new(ProcessRegistry::new());
        let sampling_started;
        let mut probabilistic = None;
        let manager_queue = Arc::new(EventQueue::new(process_manager::EVENT_QUEUE_CAPACITY));
        let (manager, events) = {
            let reader = Arc::new(sampler.process_event_reader()?);
            let queue = manager_queue.clone();
            let limits = ManagerLimits {
                unused_files_budget: config.unused_tables_budget_mib << 20,
                open_via_map_files: config.open_via_map_files,
                include_env_vars: config.env_var_names(),
                max_file_handles: file_handle_budget(ManagerLimits::default().max_file_handles),
                ..ManagerLimits::default()
            };
            let interpreters = process_manager::Interpreters::new(
                sampler.interpreter_maps()?,
                shared.interpreters.clone(),
                shared.notices.clone(),
            );
            let mut manager = ProcessManager::new(
                process_manager::BpfLoader::new(
                    sampler.unwind_maps()?,
                    interpreters,
                    go_labels::GoLabels::new(sampler.go_label_maps()?),
                ),
                registry.clone(),
                limits,
            );
            // The selected processes are loaded before sampling starts, so
            // that their first samples unwind.
            for &pid in &selected {
                manager.on_new_process(profiler_trace::Pid(pid));
            }
            manager.settle();
            let chooser = match filter.is_active() {
                true => Some(process_manager::Chooser::new(filter, sampler.pid_selection()?)),
                false => None,
            };
            let events = {
                let (reader, queue, stop) = (reader.clone(), queue.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("ep-procevents".into())
                    .spawn(move || process_manager::drain(&reader, &queue, &stop, chooser))
                    .map_err(|source| StartError::Thread { name: "process events", source })?
            };
            sampler.start_sampling()?;
            sampling_started = Instant::now();
            if config.probabilistic_threshold < PROBABILISTIC_THRESHOLD_MAX {
                probabilistic = Some(
                    probabilistic::spawn(
                        sampler.sampling_switch(),
                        config.probabilistic_threshold,
                        Duration::from_millis(config.probabilistic_interval_ms),
                        stop.clone(),
                        shared.sampling_windows.clone(),
                        shared.notices.clone(),
                    )
                    .map_err(|source| StartError::Thread { name: "probabilistic", source })?,
                );
            }
            let load_delay = Duration::from_millis(config.process_load_delay_ms);
            let stop = manager_stop.clone();
            let shared = shared.clone();
            let manager = std::thread::Builder::new()
                .name("ep-procman".into())
                .spawn(move || {
                    let panics = &shared.panics_process_manager;
                    process_manager::run(queue, &reader, manager, load_delay, &stop, &shared.manager, panics)
                })
                .map_err(|source| StartError::Thread { name: "process manager", source })?;
            (manager, events)
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
            let late = LateUnwinder::new(sampler.map_tables()?);
            let mut builder = TraceBuilder::new(registry.clone(), kernel, native, shared.interpreters.clone());
            builder.set_open_via_map_files(config.open_via_map_files);
            builder.set_include_env_vars(config.env_var_names());
            let interval = config.reporter_interval();
            std::thread::Builder::new()
                .name("ep-reporter".into())
                .spawn(move || report(sample_rx, builder, sinks, late, registry, interval, &shared))
                .map_err(|source| StartError::Thread { name: "reporter", source })?
        };

        Ok(Agent {
            running: Mutex::new(Some(Running {
                sampler,
                stop,
                manager_stop,
                manager_queue,
                reader,
                reporter,
                manager,
                events,
                probabilistic,
            })),
            final_counters: Mutex::new(Counters::default()),
            final_off_cpu_runs: Mutex::new((0, 0)),
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

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let (counters, off_cpu_runs) = match &*lock(&self.running) {
            Some(running) => {
                (running.sampler.counters().unwrap_or_default(), running.sampler.off_cpu_program_run_stats())
            }
            None => (*lock(&self.final_counters), *lock(&self.final_off_cpu_runs)),
        };
        let join = lock(&self.shared.off_cpu_join).clone();
        let naming = *lock(&self.shared.naming_budget);
        let s = &self.shared;
        let unwind = *lock(&s.unwind);
        let manager = *lock(&s.manager);
        let late = lock(&s.late).clone();
        let naming_wait = *lock(&s.naming_wait);
        let symbolizer = *lock(&s.symbolizer);
        let kernel_symbols = *lock(&s.kernel_symbols);
        let namers = lock(&s.interpreter_namers).clone();
        let runtimes = runtime_counters(&s.interpreters.stats(), &namers, &counters);
        let mut refused = manager.manager.files_refused;
        refused.add(&symbolizer.files_refused);
        Stats {
            samples: counters.sent,
            samples_lost: counters.lost_ring_buffer,
            samples_dropped: s.samples_dropped.load(Ordering::Relaxed),
            samples_dropped_at_stop: s.samples_dropped_at_stop.load(Ordering::Relaxed),
            samples_processed: s.samples_processed.load(Ordering::Relaxed),
            samples_malformed: s.samples_malformed.load(Ordering::Relaxed),
            samples_other_pid_namespace: counters.other_pid_namespace,
            kernel_stack_errors: counters.kernel_stack_errors,
            user_stack_errors: counters.user_stack_errors,
            processes_seen: manager.manager.processes_loaded,
            batches_sent: s.batches.sent.load(Ordering::Relaxed),
            batches_dropped: s.batches.dropped.load(Ordering::Relaxed),
            symbolizer_files_loaded: symbolizer.files_loaded,
            symbolizer_loads_failed: symbolizer.loads_failed,
            symbolizer_queue_drops: symbolizer.queue_drops,
            symbolizer_file_evictions: symbolizer.file_evictions,
            symbolizer_cold_files_dropped: symbolizer.cold_files_dropped,
            symbolizer_load_ms_max: symbolizer.load_ms_max,
            symbolizer_loads: symbolizer.loads_done,
            symbolizer_reloads: symbolizer.reloads,
            symbolizer_load_ms_total: symbolizer.load_ms_total,
            symbolizer_address_hits: symbolizer.address_hits,
            symbolizer_address_misses: symbolizer.address_misses,
            symbolizer_dwarf_units_parsed: symbolizer.dwarf_units_parsed,
            symbolizer_dwarf_units_dropped: symbolizer.dwarf_units_dropped,
            symbolizer_dwarf_units_shed: symbolizer.dwarf_units_shed,
            symbolizer_dwarf_units_reparsed: symbolizer.dwarf_units_reparsed,
            symbolizer_budget_bytes: symbolizer.budget_bytes,
            symbolizer_budget_raises: symbolizer.budget_raises,
            kernel_symbols_reloads: kernel_symbols.reloads,
            kernel_symbols_bpf_checks: kernel_symbols.bpf_checks,
            user_stacks_complete: unwind.complete,
            user_stacks_truncated: unwind.truncated,
            user_stacks_frame_limit: unwind.frame_limit,
            interpreted_frames_named_after_exit: unwind.named_after_exit,
            user_frames_unresolved: unwind.unresolved_frames,
            user_frames_malformed: unwind.malformed_frames,
            unwind_stopped: UnwindStops::new(UnwindStop::ALL.map(|r| (r, counters.unwind_stop(r)))),
            user_frames: counters.user_frames,
            process_events: counters.process_events,
            process_events_lost: counters.process_events_lost,
            process_events_received: manager.queue.received,
            process_events_coalesced: manager.queue.coalesced,
            process_events_cancelled: manager.queue.cancelled,
            process_events_dropped: manager.queue.dropped,
            process_events_malformed: manager.events_malformed,
            process_loads_timed: manager.manager.load_latency.count,
            process_load_p50_us: manager.manager.load_latency.p50_us,
            process_load_p99_us: manager.manager.load_latency.p99_us,
            process_load_max_us: manager.manager.load_latency.max_us,
            manager_cpu_loads_us: manager.cpu.loads_us,
            manager_cpu_execs_us: manager.cpu.execs_us,
            manager_cpu_exits_us: manager.cpu.exits_us,
            manager_cpu_scheduled_us: manager.cpu.scheduled_us,
            manager_cpu_files_us: manager.cpu.files_us,
            manager_cpu_housekeeping_us: manager.cpu.housekeeping_us,
            manager_wakeups: manager.cpu.wakeups,
            processes_loaded: manager.manager.processes,
            processes_exited: manager.manager.processes_exited,
            processes_rejected: manager.manager.processes_rejected,
            maps_reads: manager.manager.maps_reads,
            maps_unchanged: manager.manager.maps_unchanged,
            exec_preloads_gone: manager.manager.exec_preloads_gone,
            exec_preloads_skipped: manager.manager.exec_preloads_skipped,
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
            files_pending: manager.manager.files_pending,
            files_unused: manager.manager.files_unused,
            files_unused_bytes: manager.manager.files_unused_bytes,
            files_evicted: manager.manager.files_evicted,
            unwind_deltas: manager.maps.delta_entries,
            unwind_rules: manager.maps.rules,
            unwind_ranges: manager.maps.ranges,
            unwind_ranges_dropped: manager.maps.ranges_dropped,
            unwind_load_errors: manager.manager.load_errors + manager.interpreters.load_errors,
            interpreter_attach_retries: manager.interpreters.attach_retries,
            interpreter_attach_given_up: manager.interpreters.attach_retries_given_up,
            naming_reads_refused: naming.reads_refused,
            naming_overdrafts: naming.overdrafts,
            naming_processes_over: naming.processes_over,
            naming_failures_skipped: namers.iter().map(|(_, n)| n.failures_skipped).sum(),
            attach_reads_refused: manager.interpreters.attach_budget.reads_refused,
            attach_overdrafts: manager.interpreters.attach_budget.overdrafts,
            attach_processes_over: manager.interpreters.attach_budget.processes_over,
            unwind_analyse_ms: manager.manager.analyse_ms,
            runtimes,
            bpf_run_time_ns: counters.bpf_run_time_ns,
            bpf_runs: counters.bpf_runs,
            off_cpu_switches: counters.off_cpu_switches,
            off_cpu_sampled: counters.off_cpu_sampled,
            off_cpu_ends: counters.off_cpu_ends,
            off_cpu_ends_lost: counters.off_cpu_ends_lost,
            off_cpu_joined: join.joined.load(Ordering::Relaxed),
            off_cpu_joins_missed: join.ends_unmatched.load(Ordering::Relaxed),
            off_cpu_stacks_dropped: join.stacks_dropped.load(Ordering::Relaxed),
            off_cpu_bpf_run_time_ns: off_cpu_runs.0,
            off_cpu_bpf_runs: off_cpu_runs.1,
            go_labels_samples: counters.go_labels_samples,
            go_labels_no_g: counters.go_labels_no_g,
            go_labels_read_errors: counters.go_labels_read_errors,
            go_labels_truncated: counters.go_labels_truncated,
            go_morestack_followed: counters.go_morestack_followed,
            go_scheduler_roots: counters.go_scheduler_roots,
            go_label_files: manager.go_labels.files,
            go_label_files_skipped: manager.go_labels.files_skipped,
            go_label_processes: manager.go_labels.processes,
            go_label_load_errors: manager.go_labels.load_errors,
            late_unwind_copies: counters.stack_copies,
            late_unwind_copy_bytes: counters.stack_copy_bytes,
            late_unwind_copies_skipped: counters.stack_copies_skipped,
            late_unwind_copies_failed: counters.stack_copies_failed,
            late_unwind_complete: late.stops.get(&UnwindStop::Root).copied().unwrap_or(0),
            late_unwind_truncated: late.stops.iter().filter(|(r, _)| **r != UnwindStop::Root).map(|(_, n)| n).sum(),
            late_unwind_stops: late.stops.iter().map(|(r, n)| (r.as_str().to_string(), *n)).collect(),
            late_unwind_dropped_queue_full: late.dropped_queue_full + s.stack_copies_backlogged.load(Ordering::Relaxed),
            late_unwind_timed_out: late.timed_out,
            late_unwind_map_lookups: late.lookups.map_lookups,
            late_unwind_cached_lookups: late.lookups.cache_hits,
            names_waited: naming_wait.held,
            names_waited_frames_named: naming_wait.frames_named,
            names_wait_timed_out: naming_wait.timed_out,
            names_wait_dropped_full: naming_wait.dropped_full,
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

/// glibc's malloc raises its mmap threshold (up to 32 MiB) each time a
/// large block is freed; after that, the large temporary buffers of
/// analysing a 100-200 MB library (unwind and symbol tables) come from
/// the heap, where they fragment it and are not given back: the agent
/// kept 70-90 MB instead of 40. A fixed threshold keeps every block of
/// 256 KiB or more its own mapping, returned to the system when freed.
/// And two arenas, not eight per core: each arena keeps what its threads
/// freed, and the agent's ten threads mostly take turns (the reader, the
/// process manager, the analysis workers; little contention). Threads
/// that already have an arena (a host process's) keep it.
/// Process-wide (the allocator is the process's), idempotent.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a malloc tunable; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// How many files the process manager may keep open for the symbolizer
/// (at most `wanted`): raises the soft limit of open files to the hard
/// one (Go's runtime does the same in the Collector) and leaves half of
/// it to everything else. Process-wide, idempotent.
fn file_handle_budget(wanted: usize) -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: lim is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        // SAFETY: raised is a valid rlimit; failure leaves the old limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim = raised;
        }
    }
    usize::try_from(lim.rlim_cur / 2).unwrap_or(usize::MAX).min(wanted)
}

/// Online CPUs (every one is sampled).
fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a system value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Locks a mutex, recovering from a panic of another holder (the data
/// here stays consistent: plain counters and handles).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Each registered runtime's counters: the registry's, its namer's (by
/// frame kind) and its BPF unwinder's.
fn runtime_counters(
    runtimes: &[profiler_interpreters::RuntimeStats],
    namers: &[(profiler_trace::FrameKind, NamerStats)],
    counters: &profiler_bpf::Counters,
) -> RuntimeCounters {
    RuntimeCounters(
        runtimes
            .iter()
            .map(|r| {
                let namer = namers.iter().find(|(k, _)| *k == r.frame_kind).map(|(_, n)| *n).unwrap_or_default();
                let mut c = vec![
                    ("files", r.files),
                    ("unsupported", r.unsupported),
                    ("attach_failures", r.attach_failures),
                    ("frames_named", namer.frames),
                    ("frames_unknown", namer.unknown),
                    ("code_reads", namer.reads),
                    ("cache_clears", r.cache_clears),
                ];
                c.extend(Refusal::COUNTERS.into_iter().zip(r.refused_by_reason));
                c.extend(namer.unknown_by_reason.iter().copied().filter(|(name, _)| !name.is_empty()));
                c.extend(counters.interpreter(r.unwinder));
                (r.unwinder.name(), c)
            })
            .collect(),
    )
}

/// A sample of thread `tid` with `copied` bytes of stack copy (tests).
#[cfg(test)]
pub(crate) fn test_sample(tid: u32, copied: usize) -> RawSample {
    let stack = (copied > 0).then(|| profiler_bpf::StackCopy {
        pc: 0x1000,
        sp: 0x7000,
        fp: 0,
        exact: true,
        stack_switches: 0,
        bytes: vec![0; copied],
    });
    RawSample {
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
