//! [`Agent::stats`]: one [`Stats`] from the counters of the BPF
//! programs and of every thread, read at the call (the BPF ones frozen at
//! stop).

use crate::{lock, Agent, RuntimeCounters, Stats, UnwindStops};
use profiler_bpf::UnwindStop;
use profiler_interpreters::{NamerStats, Refusal};
use std::sync::atomic::Ordering;

impl Agent {
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
            late_unwind_readiness_lookups: late.lookups.readiness_lookups,
            late_unwind_memory_reads: late.lookups.memory_reads,
            late_unwind_v8_samples: late.v8_samples,
            late_unwind_v8_frames: late.v8_frames,
            late_unwind_v8_stops: late.v8_stops,
            late_unwind_hotspot_samples: late.hotspot_samples,
            late_unwind_hotspot_frames: late.hotspot_frames,
            late_unwind_hotspot_stops: late.hotspot_stops.iter().map(|(r, n)| (r.as_str().to_string(), *n)).collect(),
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
