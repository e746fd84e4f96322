//! Starting the agent: validates the configuration, loads the BPF
//! programs, loads the selected processes, and spawns the pipeline's
//! threads (reader, process events, process manager, reporter, and the
//! probabilistic switch) with what each one owns.

use crate::batch_queue::batch_queue;
use crate::late_unwind::LateUnwinder;
use crate::reader::{
    hand_over, reader_poll_interval, ring_buffer_bytes, sample_queue_capacity, ReaderPace, SAMPLE_BATCH_QUEUE,
};
use crate::reporter::report;
use crate::sink::OtlpBatchSink;
use crate::trace_builder::TraceBuilder;
use crate::{
    go_labels, lock, probabilistic, process_manager, unix_now_ns, Agent, AgentConfig, Running, Shared, StartError,
    TraceSink, PROBABILISTIC_THRESHOLD_MAX,
};
use profiler_bpf::{Counters, RawSample, Sampler, SamplerOptions, SELECTED_PIDS_MAX};
use profiler_interpreters::Registry;
use profiler_process::{EventQueue, ManagerLimits, ProcessManager, ProcessRegistry};
use profiler_symbolize::{KernelSymbolizer, NativeConfig, NativeSymbolizer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl Agent {
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
