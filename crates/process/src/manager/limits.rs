//! The manager's bounds and timings, and its counters.

use crate::latency::LatencySummary;
use profiler_elf::source::Refusals;
use std::sync::Arc;
use std::time::Duration;

/// Bounds and timings of the manager.
#[derive(Clone, Debug)]
pub struct ManagerLimits {
    /// Most processes loaded at once; more are refused (and counted).
    pub max_processes: usize,
    /// Most files analysed and held at once (the unused ones are evicted
    /// first to make room); more are refused (their mappings stop
    /// unwinding) and counted.
    pub max_files: usize,
    /// Files with more stack deltas are not loaded (counted).
    pub max_deltas_per_file: usize,
    /// How long an exited process's snapshot stays for samples still in
    /// flight.
    pub exit_grace: Duration,
    /// Bytes the files nobody maps may hold (their deltas in the kernel,
    /// 4 bytes each, and their state here) before the least recently
    /// used are unloaded: a program started again finds its tables.
    pub unused_files_budget: u64,
    /// Threads analysing files.
    pub analysis_workers: usize,
    /// A new-process event for a process loaded less than this ago is
    /// ignored (it was sent before the load finished).
    pub maps_refresh_interval: Duration,
    /// How often loaded processes are checked for having exited unseen
    /// (a lost exit event).
    pub liveness_interval: Duration,
    /// Processes never sampled that are loaded after their exec, per
    /// second (more are loaded at their first sample).
    pub exec_preloads_per_second: f64,
    /// How long after its exec a process never sampled is loaded, if it
    /// still runs then. Most processes of a build's churn (shell
    /// pipelines, compiler drivers, `rustc -vV`) are gone within 100 ms
    /// and cost no load at all; one sampled before is loaded at its first
    /// sample, whose stack copy is unwound once its tables are in.
    pub exec_load_delay: Duration,
    /// How long an exited process's unwinding state stays in the loader:
    /// its samples copied before it was loaded are unwound from it (a
    /// short-lived process often exits before the reporter looks again).
    pub unload_grace: Duration,
    /// Open mapped files through `/proc/PID/map_files` when allowed
    /// (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). False forces
    /// the path inside the process's root, checked against the maps
    /// line's device and inode, as without those capabilities.
    pub open_via_map_files: bool,
    /// Environment variables to report of each process (read once, when
    /// it is loaded).
    pub include_env_vars: Arc<[Arc<str>]>,
    /// Most files kept open for the symbolizer
    /// ([`ExecutableFile::handle`]): one descriptor each, so this stays
    /// well under the open files limit.
    pub max_file_handles: usize,
}

impl Default for ManagerLimits {
    fn default() -> Self {
        ManagerLimits {
            max_processes: 8192,
            max_files: 8192,
            max_deltas_per_file: 8 << 20,
            exit_grace: Duration::from_secs(5),
            unused_files_budget: 64 << 20,
            analysis_workers: 2,
            maps_refresh_interval: Duration::from_millis(500),
            liveness_interval: Duration::from_secs(5),
            exec_preloads_per_second: 20.0,
            exec_load_delay: Duration::from_millis(50),
            unload_grace: Duration::from_millis(500),
            open_via_map_files: true,
            include_env_vars: Arc::new([]),
            max_file_handles: 4096,
        }
    }
}

/// The manager's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManagerStats {
    /// Processes loaded now.
    pub processes: u64,
    /// Processes ever loaded.
    pub processes_loaded: u64,
    /// Processes unloaded after exiting.
    pub processes_exited: u64,
    /// Processes not loaded because `max_processes` were.
    pub processes_rejected: u64,
    /// Pid reuse seen (same pid, another process).
    pub pid_reuse: u64,
    /// Reads of `/proc/PID/maps`.
    pub maps_reads: u64,
    /// Processes that vanished or could not be read.
    pub maps_read_failures: u64,
    /// Reads that found no executable mapping (an exited process not
    /// reaped yet, a kernel thread): not loaded, or unloaded.
    pub maps_empty: u64,
    /// Reads of maps whose executable mappings had not changed (nothing
    /// else done).
    pub maps_unchanged: u64,
    /// Files held now (analysed or being analysed).
    pub files: u64,
    /// Files being analysed now.
    pub files_pending: u64,
    /// Files analysed (opened, tables built).
    pub files_analysed: u64,
    /// Files that could not be opened or parsed.
    pub files_failed: u64,
    /// Files refused by `max_files` or `max_deltas_per_file` (or whose
    /// 64-bit BPF id another held content already has).
    pub files_rejected: u64,
    /// Files held now that no process maps.
    pub files_unused: u64,
    /// Bytes those hold (see [`ManagerLimits::unused_files_budget`]).
    pub files_unused_bytes: u64,
    /// Unused files unloaded to stay within the budget or the file limit.
    pub files_evicted: u64,
    /// Stack deltas of the files held now.
    pub deltas: u64,
    /// Distinct unwind rules.
    pub rules: u64,
    /// Errors of the loader (BPF map updates).
    pub load_errors: u64,
    /// Time spent analysing files (summed over the workers), ms.
    pub analyse_ms: u64,
    /// Execs of processes never sampled not loaded ahead (over budget).
    pub exec_preloads_skipped: u64,
    /// Execs whose process was gone when its load was due.
    pub exec_preloads_gone: u64,
    /// Loads and re-reads not scheduled (too many waiting).
    pub scheduled_dropped: u64,
    /// From a process's event (kernel time) to the moment its mappings
    /// were in the loader with every file's table ready.
    pub load_latency: LatencySummary,
    /// Mapped files refused, by reason (not regular, too large, not the
    /// mapped inode, path leaving the process's root, ...).
    pub files_refused: Refusals,
    /// Files whose [`FileId`] (head, tail, length) equals another held
    /// file's while their contents differ: each keeps its own tables.
    pub file_id_collisions: u64,
}
