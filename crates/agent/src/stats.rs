//! Counters the agent exposes (exit summary, C ABI `stats`, benchmarks).

use profiler_bpf::UnwindStop;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// A snapshot of the agent's counters. Counters only grow.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Samples the BPF program took and sent to user space.
    pub samples: u64,
    /// Samples lost in the kernel because the ring buffer was full.
    pub samples_lost: u64,
    /// Samples dropped in user space because the reporter fell behind.
    pub samples_dropped: u64,
    /// Samples still queued a second after the agent was asked to stop,
    /// dropped so that it stops in bounded time.
    pub samples_dropped_at_stop: u64,
    /// Samples turned into traces and handed to the outputs.
    pub samples_processed: u64,
    /// Ring buffer records that could not be decoded.
    pub samples_malformed: u64,
    /// Samples of tasks outside the agent's PID namespace (it runs in a
    /// nested one: their /proc is not its to read), not sent.
    pub samples_other_pid_namespace: u64,
    /// Kernel stacks the BPF program could not read.
    pub kernel_stack_errors: u64,
    /// Retired (frame-pointer stacks that could not be read); always 0.
    pub user_stack_errors: u64,
    /// Processes the process manager loaded for unwinding (ever).
    pub processes_seen: u64,
    /// OTLP batches handed out through the batch queue.
    pub batches_sent: u64,
    /// OTLP batches dropped because nobody pulled them in time.
    pub batches_dropped: u64,
    /// Files whose symbols (pclntab, DWARF, ELF) the native symbolizer holds.
    pub symbolizer_files_loaded: u64,
    /// Symbol loads that failed (file gone, unreadable).
    pub symbolizer_loads_failed: u64,
    /// Symbol loads not queued because the loader was busy (retried later).
    pub symbolizer_queue_drops: u64,
    /// Files whose symbols were evicted to stay within the memory budget.
    pub symbolizer_file_evictions: u64,
    /// Of those, files cheap to load again that were dropped before the
    /// parsed DWARF units of files used more lately.
    pub symbolizer_cold_files_dropped: u64,
    /// Longest single symbol load, ms.
    pub symbolizer_load_ms_max: u64,
    /// Symbol loads done (a file loaded again after an eviction counts
    /// again).
    pub symbolizer_loads: u64,
    /// Loads of files evicted lately: the symbolizer's budget is short
    /// of what is in use.
    pub symbolizer_reloads: u64,
    /// Time spent in symbol loads, ms.
    pub symbolizer_load_ms_total: u64,
    /// Native frame lookups answered from the address cache / not.
    pub symbolizer_address_hits: u64,
    /// See `symbolizer_address_hits`.
    pub symbolizer_address_misses: u64,
    /// DWARF units parsed by lookups (again after being given up or
    /// dropped included): the symbolizer's parsing work.
    pub symbolizer_dwarf_units_parsed: u64,
    /// DWARF units parsed by lookups and dropped again to keep a file's
    /// DWARF within its limit (parsed again when looked up).
    pub symbolizer_dwarf_units_dropped: u64,
    /// DWARF units parsed by lookups and given up again to keep all
    /// files within the symbolizer's budget before dropping a file.
    pub symbolizer_dwarf_units_shed: u64,
    /// DWARF units parsed again after being given up for the budget.
    pub symbolizer_dwarf_units_reparsed: u64,
    /// The symbolizer's byte budget now (raised while redoing what it
    /// gave up costs CPU).
    pub symbolizer_budget_bytes: u64,
    /// Times the symbolizer's budget was raised.
    pub symbolizer_budget_raises: u64,
    /// Times `/proc/kallsyms` was read again (a miss, or BPF programs
    /// that came or went).
    pub kernel_symbols_reloads: u64,
    /// Times a frame in BPF code found the loaded BPF programs and links
    /// unchanged, so `/proc/kallsyms` was not read again.
    pub kernel_symbols_bpf_checks: u64,

    /// Processed samples whose user stack reached the thread's root.
    pub user_stacks_complete: u64,
    /// Processed samples whose user stack ended early (the
    /// `unwind_stopped_*` counters say why).
    pub user_stacks_truncated: u64,
    /// Of those, the stacks cut at the unwinders' frame limit
    /// (`MAX_USER_FRAMES`, or the tail calls ran out), which end with a
    /// frame named `[truncated]`.
    pub user_stacks_frame_limit: u64,
    /// Interpreted frames of processes that had exited by the time their
    /// samples were processed (their memory gone), named as the same
    /// frames were in the processes' earlier samples.
    pub interpreted_frames_named_after_exit: u64,
    /// User frames in no mapping known to user space.
    pub user_frames_unresolved: u64,
    /// User frame words marked interpreted whose slot coding no unwinder
    /// writes (`UserFrame::Malformed`); kept as unnamed frames.
    pub user_frames_malformed: u64,
    /// How the BPF unwinder's user stacks ended, by reason: one
    /// `unwind_stopped_<reason>` field per `enum unwind_stop` in the JSON.
    #[serde(flatten)]
    pub unwind_stopped: UnwindStops,
    /// User frames unwound in the kernel.
    pub user_frames: u64,
    /// Process events (new, unknown pc, exit) the programs sent.
    pub process_events: u64,
    /// Process events lost (ring buffer full).
    pub process_events_lost: u64,
    /// Process events read from the ring buffer into the manager's queue.
    pub process_events_received: u64,
    /// Process events merged into work already queued for their pid.
    pub process_events_coalesced: u64,
    /// Queued loads cancelled by their process's exit.
    pub process_events_cancelled: u64,
    /// Process events dropped because the manager's queue was full.
    pub process_events_dropped: u64,
    /// Process event records that could not be decoded.
    pub process_events_malformed: u64,
    /// Processes whose load was timed (event to mappings in the BPF maps
    /// with every file's table ready).
    pub process_loads_timed: u64,
    /// Median of those delays, µs (upper bound of a power-of-two bucket).
    pub process_load_p50_us: u64,
    /// 99th percentile of those delays, µs (upper bound of its bucket).
    pub process_load_p99_us: u64,
    /// Longest of those delays, µs.
    pub process_load_max_us: u64,
    /// CPU time of the process manager's thread, µs, by kind of work:
    /// loads asked by samples (new pid, unknown pc).
    pub manager_cpu_loads_us: u64,
    /// ... exec events.
    pub manager_cpu_execs_us: u64,
    /// ... exit events.
    pub manager_cpu_exits_us: u64,
    /// ... scheduled work (loads after exec, re-reads of maps).
    pub manager_cpu_scheduled_us: u64,
    /// ... analysed files loaded into the maps.
    pub manager_cpu_files_us: u64,
    /// ... housekeeping (liveness, evictions, trims, counters).
    pub manager_cpu_housekeeping_us: u64,
    /// Times the process manager's thread woke.
    pub manager_wakeups: u64,
    /// Processes loaded for unwinding now.
    pub processes_loaded: u64,
    /// Processes unloaded after they exited.
    pub processes_exited: u64,
    /// Processes not loaded because of the process limit.
    pub processes_rejected: u64,
    /// Processes shown again to an interpreter that was not ready to be
    /// read (a JVM starting), their mappings unchanged.
    pub interpreter_attach_retries: u64,
    /// Of those, processes given up after the last retry (their frames
    /// stay native until their mappings change).
    pub interpreter_attach_given_up: u64,
    /// Reads of a process's memory refused because naming its
    /// interpreted frames went over its budget (its frames unnamed).
    pub naming_reads_refused: u64,
    /// Times a process went over its naming budget.
    pub naming_overdrafts: u64,
    /// Processes that went over their naming budget (one notice each).
    pub naming_processes_over: u64,
    /// Reads of a process's memory not tried again, to name a frame,
    /// because the same object failed to read moments before (its wait doubles, 50 ms to 10 s)
    /// (PHP's and Perl's namers remember failures: a process whose
    /// memory makes a read fail makes it fail at every sample).
    pub naming_failures_skipped: u64,
    /// Likewise for attaching to processes (the process manager's reads
    /// of a runtime's tables in memory).
    pub attach_reads_refused: u64,
    /// See `naming_overdrafts`.
    pub attach_overdrafts: u64,
    /// See `naming_processes_over`.
    pub attach_processes_over: u64,
    /// Reads of `/proc/PID/maps` (loads, re-reads after an exec, after
    /// an unknown pc).
    pub maps_reads: u64,
    /// Of those, reads whose executable mappings had not changed.
    pub maps_unchanged: u64,
    /// Execs whose process had exited when its load was due (they cost
    /// one liveness check).
    pub exec_preloads_gone: u64,
    /// Execs of processes never sampled not loaded ahead (over budget).
    pub exec_preloads_skipped: u64,
    /// Files whose unwind tables are held now.
    pub files_loaded: u64,
    /// Files analysed (ELF read, unwind table built).
    pub files_analysed: u64,
    /// Files that could not be opened or parsed.
    pub files_failed: u64,
    /// Files refused by the file or table size limits.
    pub files_rejected: u64,
    /// Files refused because they are not regular files (FIFOs, devices,
    /// sockets, directories), whether mapped or named by a debug link:
    /// the process manager's and the symbolizer's.
    pub files_refused_not_regular: u64,
    /// Files refused for their size (2 GiB for executables and
    /// libraries, 4 GiB for debug files).
    pub files_refused_too_large: u64,
    /// Files refused because the path led to another file than the one
    /// mapped (replaced on disk) or analysed.
    pub files_refused_mismatch: u64,
    /// Paths refused because they tried to leave the process's root
    /// (magic links, symlink loops).
    pub files_refused_escape: u64,
    /// Files inside a process's root not opened because `openat2` is
    /// missing (Linux before 5.6).
    pub files_refused_no_openat2: u64,
    /// Files sharing another held file's FileId (head, tail, length)
    /// with different content: each kept its own tables.
    pub file_id_collisions: u64,
    /// Files being analysed now.
    pub files_pending: u64,
    /// Files no process maps whose tables are kept now (within
    /// `unused_tables_budget_mib`).
    pub files_unused: u64,
    /// Bytes those count against the budget.
    pub files_unused_bytes: u64,
    /// Unused files unloaded to stay within the budget.
    pub files_evicted: u64,
    /// Stack delta entries in the BPF maps now.
    pub unwind_deltas: u64,
    /// Distinct unwind rules in the BPF maps.
    pub unwind_rules: u64,
    /// Executable ranges of processes in the BPF maps now.
    pub unwind_ranges: u64,
    /// Ranges left out (overlapping, or beyond 4096 in one process).
    pub unwind_ranges_dropped: u64,
    /// Failed BPF map updates of the process manager.
    pub unwind_load_errors: u64,
    /// Time spent analysing files (tables, symbols), ms.
    pub unwind_analyse_ms: u64,

    /// The counters of each interpreter runtime (CPython, HotSpot), one
    /// `<runtime>_<counter>` field each in the JSON (`python_frames`,
    /// `hotspot_frames`, ...): see [`RuntimeCounters`].
    #[serde(flatten)]
    pub runtimes: RuntimeCounters,
    /// Time the kernel spent in the sampling programs, ns (0 unless the
    /// `kernel.bpf_stats_enabled` sysctl is 1). Divided by `bpf_runs`:
    /// the BPF cost of one sample.
    pub bpf_run_time_ns: u64,
    /// Runs counted in `bpf_run_time_ns`.
    pub bpf_runs: u64,

    /// Off-CPU profiling (`off_cpu_threshold`): scheduler switches the
    /// off-CPU program saw.
    pub off_cpu_switches: u64,
    /// Switch-outs of user threads sampled (their stack was sent).
    pub off_cpu_sampled: u64,
    /// Ends of off-CPU periods sent (a sampled thread ran again).
    pub off_cpu_ends: u64,
    /// Ends lost in the kernel (the ring buffer was full).
    pub off_cpu_ends_lost: u64,
    /// Off-CPU stacks joined with their end: off-CPU traces made.
    pub off_cpu_joined: u64,
    /// Ends whose stack was not waiting (it was lost or dropped): joins
    /// missed.
    pub off_cpu_joins_missed: u64,
    /// Off-CPU stacks dropped before their end came (too many threads
    /// waiting, an end lost, or still waiting at stop).
    pub off_cpu_stacks_dropped: u64,
    /// Time the kernel spent in the off-CPU program, ns, over every
    /// switch (sampled ones' unwinding included); 0 unless
    /// `kernel.bpf_stats_enabled` is 1.
    pub off_cpu_bpf_run_time_ns: u64,
    /// Runs counted in `off_cpu_bpf_run_time_ns` (one per switch).
    pub off_cpu_bpf_runs: u64,

    /// Go pprof labels (`ebpf/go_labels.bpf.h`): samples sent with the
    /// labels of their goroutine.
    pub go_labels_samples: u64,
    /// Samples of Go processes whose current goroutine was not found.
    pub go_labels_no_g: u64,
    /// Label sets that could not be read (their samples went without).
    pub go_labels_read_errors: u64,
    /// Label sets cut short (more than 10 labels, keys over 31 bytes,
    /// values over 63).
    pub go_labels_truncated: u64,
    /// Go stacks followed from `runtime.morestack` on the system stack to
    /// the goroutine growing its stack (`g.m.curg.sched`).
    pub go_morestack_followed: u64,
    /// Go stacks followed from `runtime.mcall` or `runtime.morestack` on
    /// the system stack, with no goroutine to follow, to the thread's
    /// root (`g.m.g0.sched`: `runtime.mstart0`, `runtime.mstart`).
    pub go_scheduler_roots: u64,
    /// Go executables whose labels are read.
    pub go_label_files: u64,
    /// Go executables whose labels are not read (unsupported version,
    /// or too many).
    pub go_label_files_skipped: u64,
    /// Processes whose labels are read now.
    pub go_label_processes: u64,
    /// Their map updates that failed.
    pub go_label_load_errors: u64,

    /// Samples of a process (or pc) not loaded yet that the programs sent
    /// with a copy of their user stack, to unwind in user space once the
    /// process is loaded.
    pub late_unwind_copies: u64,
    /// Bytes of user stack copied for them.
    pub late_unwind_copy_bytes: u64,
    /// Such samples sent without a copy: the per-CPU budget was spent or
    /// the ring buffer was filling up (a burst of new processes).
    pub late_unwind_copies_skipped: u64,
    /// Such samples sent without a copy because no stack could be read.
    pub late_unwind_copies_failed: u64,
    /// Samples unwound in user space to the thread's root.
    pub late_unwind_complete: u64,
    /// Samples unwound in user space that stopped early
    /// (`late_unwind_stops` says why).
    pub late_unwind_truncated: u64,
    /// Samples unwound in user space, by how their stack ended (the
    /// `unwind_stopped_*` names, plus `outside_copy`: a read fell outside
    /// the copied window).
    pub late_unwind_stops: BTreeMap<String, u64>,
    /// Copies given up because the pending bounds were reached (oldest
    /// first); their samples went on with their leaf only.
    pub late_unwind_dropped_queue_full: u64,
    /// Copies given up because their process was not loaded in time; their
    /// samples went on with their leaf only.
    pub late_unwind_timed_out: u64,
    /// Lookups the late unwinder made in the unwinder's BPF maps to unwind
    /// (one system call each).
    pub late_unwind_map_lookups: u64,
    /// Lookups it made to ask whether a held sample's process was loaded
    /// yet (once per distinct leaf per poll while samples wait).
    pub late_unwind_readiness_lookups: u64,
    /// Rule ids, rules, and a sample's process ranges the late unwinder
    /// took from its caches instead of the maps.
    pub late_unwind_cached_lookups: u64,
    /// Reads of a process's memory by the late unwinder (V8's heap: one
    /// system call each).
    pub late_unwind_memory_reads: u64,
    /// Samples unwound in user space whose walk went through V8's frames
    /// (a Node process's first moments).
    pub late_unwind_v8_samples: u64,
    /// JavaScript frames those walks recorded.
    pub late_unwind_v8_frames: u64,
    /// Those whose stack ended within V8's frames (`late_unwind_stops`
    /// counts them by reason too).
    pub late_unwind_v8_stops: u64,
    /// Samples unwound in user space whose walk went through HotSpot's
    /// frames (a JVM's first moments).
    pub late_unwind_hotspot_samples: u64,
    /// Java frames those walks recorded.
    pub late_unwind_hotspot_frames: u64,
    /// Those whose stack ended within HotSpot's frames, by why
    /// (`compiled_leaf`, `no_blob`, `unknown_stub`, `bad_frame`,
    /// `read_error`, `outside_copy`, `max_frames`).
    pub late_unwind_hotspot_stops: BTreeMap<String, u64>,
    /// Traces held because files that name their native frames were
    /// still loading (the first samples of a process or a library).
    pub names_waited: u64,
    /// Native frames of held traces named while they waited.
    pub names_waited_frames_named: u64,
    /// Held traces that went on with frames still unnamed: their files
    /// took longer than the wait's bound, or the agent stopped.
    pub names_wait_timed_out: u64,
    /// Held traces that went on with frames unnamed because the wait's
    /// bounds (count, bytes) were reached.
    pub names_wait_dropped_full: u64,
    /// Panics caught on the ring buffer reader thread (each cost one
    /// sample; the thread went on).
    pub panics_reader: u64,
    /// Panics caught on the reporter thread (each cost one sample or one
    /// interval's output).
    pub panics_reporter: u64,
    /// Panics caught on the process manager thread (each cost one process
    /// event or one housekeeping round).
    pub panics_process_manager: u64,
    /// Panics caught on the symbolizer's loader thread (each cost one
    /// file's symbols).
    pub panics_symbolizer: u64,
    /// Files that shrank while mapped and parsed (their tables and names
    /// discarded instead of a SIGBUS).
    pub files_changed_while_read: u64,
}

/// Stacks by how they ended ([`UnwindStop`], which `ebpf/types.h`
/// defines): a reason added there shows up here, in the JSON and in the
/// CLI without a line of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindStops(BTreeMap<UnwindStop, u64>);

impl UnwindStops {
    /// From `(reason, stacks)` pairs; reasons not given count 0.
    pub fn new(counts: impl IntoIterator<Item = (UnwindStop, u64)>) -> UnwindStops {
        UnwindStops(counts.into_iter().collect())
    }

    /// Stacks that ended for `reason`.
    pub fn get(&self, reason: UnwindStop) -> u64 {
        self.0.get(&reason).copied().unwrap_or(0)
    }

    /// Every known reason with its count, in `enum unwind_stop` order.
    pub fn iter(&self) -> impl Iterator<Item = (UnwindStop, u64)> + '_ {
        UnwindStop::ALL.into_iter().map(|r| (r, self.get(r)))
    }
}

impl Serialize for UnwindStops {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(UnwindStop::ALL.len()))?;
        for (reason, n) in self.iter() {
            map.serialize_entry(&format!("unwind_stopped_{}", reason.as_str()), &n)?;
        }
        map.end()
    }
}

/// The counters of each interpreter runtime, derived from the registry
/// of runtimes, their frame namers and their BPF unwinder's counters; a
/// runtime added there shows up here without a line of its own. By
/// runtime (its unwinder's name: `python`, `hotspot`), then counter:
///
/// - `files`: loaded files holding a build it unwinds, now;
/// - `unsupported`: files holding a build it does not (profiled as native
///   code, each told once in `Agent::notices`);
/// - `attach_failures`: processes whose runtime state could not be read;
/// - `refused_version`, `_unknown_version`, `_symbol`, `_build`,
///   `_layout`, `_unreadable`: the two above by reason
///   ([`profiler_interpreters::Refusal`]);
/// - `frames_named`, `frames_unknown`: frames named (function, file,
///   line) or not (the process had exited, the code was unreadable or
///   freed since); some namers also count `frames_unknown` by reason
///   (BEAM: `frames_unknown_no_module`, `_no_function`, `_unreadable`,
///   `_bad_data`);
/// - `code_reads`: objects read from process memory to name them;
/// - `cache_clears`: times its process objects emptied their caches
///   together, at the bound on what they cache;
/// - then its BPF unwinder's counters (`frames` recorded, `tail_calls`,
///   `read_errors`, and its own: CPython's `no_thread_state`, HotSpot's
///   `no_process`, `no_blob`, `bad_frames`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeCounters(pub Vec<(&'static str, Vec<(&'static str, u64)>)>);

impl RuntimeCounters {
    /// Counter `counter` of `runtime`; 0 when there is none.
    pub fn get(&self, runtime: &str, counter: &str) -> u64 {
        self.0
            .iter()
            .filter(|(r, _)| *r == runtime)
            .flat_map(|(_, counters)| counters.iter())
            .find(|(c, _)| *c == counter)
            .map_or(0, |(_, n)| *n)
    }
}

impl Serialize for RuntimeCounters {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (runtime, counters) in &self.0 {
            for (counter, n) in counters {
                map.serialize_entry(&format!("{runtime}_{counter}"), n)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwind_stops_serialize_as_one_field_per_reason() {
        let stats = Stats {
            unwind_stopped: UnwindStops::new([(UnwindStop::Root, 7), (UnwindStop::BadSp, 2)]),
            ..Stats::default()
        };
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["unwind_stopped_root"], 7);
        assert_eq!(json["unwind_stopped_bad_sp"], 2);
        assert_eq!(json["unwind_stopped_no_deltas"], 0);
        let names = json.as_object().unwrap().keys().filter(|k| k.starts_with("unwind_stopped_")).count();
        assert_eq!(names, UnwindStop::ALL.len());
        assert_eq!(stats.unwind_stopped.get(UnwindStop::BadSp), 2);
        assert!(json.get("unwind_stopped").is_none(), "flattened");
    }

    #[test]
    fn runtime_counters_serialize_as_one_field_each() {
        let stats = Stats {
            runtimes: RuntimeCounters(vec![
                ("python", vec![("files", 2), ("frames", 30)]),
                ("hotspot", vec![("frames", 7), ("no_blob", 1)]),
            ]),
            ..Stats::default()
        };
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!((json["python_files"].as_u64(), json["python_frames"].as_u64()), (Some(2), Some(30)));
        assert_eq!((json["hotspot_frames"].as_u64(), json["hotspot_no_blob"].as_u64()), (Some(7), Some(1)));
        assert_eq!(stats.runtimes.get("hotspot", "no_blob"), 1);
        assert_eq!(stats.runtimes.get("hotspot", "files"), 0);
        assert_eq!(stats.runtimes.get("ruby", "frames"), 0);
    }
}
