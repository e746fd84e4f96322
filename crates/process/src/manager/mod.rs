//! The process manager: turns process events (a new pid sampled, a pc in
//! no known mapping, an exec, an exit) into unwinding state for the
//! kernel, and keeps the [`ProcessRegistry`] that symbolization reads.
//!
//! For each process it reads `/proc/PID/maps`, finds the file each
//! executable mapping maps ([`crate::mapped_files`]: through
//! `/proc/PID/map_files/<range>`, so files of other mount namespaces are
//! reached and a file replaced on disk is still the one mapped, else as
//! `<path>` inside `/proc/PID/root`, resolved within that root and used
//! only when it is the inode the maps line names; always as
//! [`profiler_elf::source`] opens files a process controls: regular files
//! only, bounded, refusals counted; the vDSO from the process's memory),
//! and has each file analysed once per
//! content ([`TableKey`], a digest of the whole file computed once per
//! inode version; a [`FileId`] shared by two contents is counted, never
//! trusted) by a small pool of workers ([`crate::pool`]). The manager
//! alone updates the [`UnwindLoader`]: a file's rules, then its deltas,
//! then the mappings of the processes that map it. A process is loaded
//! at once with the files that are ready, and again as the others become
//! ready. Files are reference-counted by the processes that map them;
//! the ones nobody maps stay loaded, least recently used first out,
//! within a byte budget ([`crate::held_files`]). Loads after execs wait
//! on a coarse grid ([`crate::schedule`]). Everything is bounded by
//! [`ManagerLimits`] and counted in [`ManagerStats`].

use crate::files::{describe, ExecutableFile, FileKeys};
use crate::held_files::{FileState, HeldFiles};
use crate::latency::LatencyHistogram;
use crate::mapped_files::{MappedFile, MappedFiles};
use crate::maps::{parse_executable, query_executable, MapsEntry};
use crate::pool::{AnalysisPool, Done, InternedDeltas, Job, Table, Waker};
use crate::procfs::{read_proc_file, read_start_time};
use crate::queue::{LoadKind, PendingWork};
use crate::registry::{LazyProcessInfo, ProcessRegistry, ProcessSnapshot, SnapshotMapping};
use crate::schedule::{ExecLoad, Schedule, MAX_SCHEDULED};
use profiler_elf::{ElfFile, RuleId, RuleInterner, UnwindRule};
use profiler_trace::{Pid, TableKey};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod files;
mod limits;
mod loader;
mod processes;
#[cfg(test)]
mod tests;

pub use limits::{ManagerLimits, ManagerStats};
pub use loader::{LoaderError, UnwindLoader, UnwindMapping, UnwindTarget};

/// A file-backed (or anonymous) executable mapping of a process, as
/// last read from its maps.
#[derive(Clone)]
struct ProcessMapping {
    start: u64,
    end: u64,
    reserved_end: u64,
    file: Option<(TableKey, u64)>,
    path: Arc<str>,
}

struct ProcessState {
    start_time: Option<u64>,
    files: HashSet<TableKey>,
    mappings: Vec<ProcessMapping>,
    maps_read_at: Instant,
    /// Of the executable mappings last read (see [`maps_digest`]).
    maps_digest: u64,
    /// Kernel time of the event whose load is not complete yet.
    waiting_since_ns: Option<u64>,
}

/// What [`ProcessManager::analyse_mappings`] makes of a process's maps.
struct AnalysedMappings {
    /// For the loader.
    mappings: Vec<ProcessMapping>,
    /// For the registry, by start address.
    snapshot: Vec<SnapshotMapping>,
    /// The files mapped.
    files: HashSet<TableKey>,
}

/// Most of `/proc/PID/maps` read (a process at the default
/// `vm.max_map_count` has about 6 MB of it); the mappings beyond are not
/// loaded.
const MAX_MAPS_BYTES: usize = 32 << 20;
/// Most executable mappings asked of `PROCMAP_QUERY` (the default
/// `vm.max_map_count` is 65530 mappings of any kind).
const MAX_MAPPINGS: usize = 1 << 16;

/// When maps are read again after an exec (ms after it), for libraries
/// loaded by the program's start-up. Later ones (`dlopen` at run time)
/// come with their first sample, as an unknown pc. One re-read, not two:
/// in a minute of churn, 908 of the 1,795 reads of maps found nothing new.
const EXEC_RESYNC_MS: [u64; 1] = [500];

/// An exited process whose state is still in the loader.
struct Removal {
    pid: Pid,
    /// The files it held a reference to.
    files: HashSet<TableKey>,
    /// When it goes.
    at: Instant,
}

/// `CLOCK_MONOTONIC` now, ns: the clock of the kernel's event times.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// See the module documentation.
pub struct ProcessManager<L: UnwindLoader> {
    loader: L,
    registry: Arc<ProcessRegistry>,
    interner: Arc<Mutex<RuleInterner>>,
    pool: AnalysisPool,
    /// The files analysed, by content.
    held: HeldFiles,
    /// Which file a mapping maps.
    mapped: MappedFiles,
    processes: HashMap<Pid, ProcessState>,
    exited: Vec<(Pid, Instant)>,
    /// Exited processes whose unwinding state leaves the loader after
    /// [`ManagerLimits::unload_grace`], oldest first.
    removals: VecDeque<Removal>,
    last_liveness: Instant,
    /// Loads after execs and re-reads of maps after them, when the
    /// dynamic loader will have mapped the libraries.
    scheduled: Schedule,
    /// Kernel time of the event being handled (0: none, now is used).
    event_ktime_ns: u64,
    /// Whether the file being added is the one a process's own code is
    /// in (its analysis goes first).
    adding_urgent: bool,
    latency: LatencyHistogram,
    limits: ManagerLimits,
    stats: ManagerStats,
    proc_root: Arc<Path>,
}

impl<L: UnwindLoader> ProcessManager<L> {
    /// A manager loading into `loader` and publishing into `registry`.
    pub fn new(loader: L, registry: Arc<ProcessRegistry>, limits: ManagerLimits) -> ProcessManager<L> {
        let interner = Arc::new(Mutex::new(RuleInterner::with_capacity(loader.rule_capacity())));
        let proc_root: Arc<Path> = Arc::from(Path::new("/proc"));
        ProcessManager {
            loader,
            registry,
            pool: AnalysisPool::new(limits.analysis_workers, limits.max_deltas_per_file, interner.clone()),
            interner,
            held: HeldFiles::new(limits.max_files, limits.max_file_handles, limits.unused_files_budget),
            mapped: MappedFiles::new(proc_root.clone(), limits.open_via_map_files),
            processes: HashMap::new(),
            exited: Vec::new(),
            removals: VecDeque::new(),
            last_liveness: Instant::now(),
            scheduled: Schedule::new(limits.exec_preloads_per_second),
            event_ktime_ns: 0,
            adding_urgent: false,
            latency: LatencyHistogram::default(),
            limits,
            stats: ManagerStats::default(),
            proc_root,
        }
    }

    /// Calls `waker` (from a worker thread) whenever a file's analysis is
    /// done: the caller's loop should then call
    /// [`ProcessManager::collect_analysed`].
    pub fn set_waker(&self, waker: Waker) {
        self.pool.set_waker(waker);
    }

    /// The loader.
    pub fn loader(&self) -> &L {
        &self.loader
    }

    /// The counters.
    pub fn stats(&self) -> ManagerStats {
        let mut s = self.stats;
        s.processes = self.processes.len() as u64;
        self.held.count(&mut s);
        s.rules = self.interner.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
        s.analyse_ms = self.pool.stats().analyse_ms;
        s.load_latency = self.latency.summary();
        s
    }

    /// Whether `pid` is loaded.
    pub fn is_loaded(&self, pid: Pid) -> bool {
        self.processes.contains_key(&pid)
    }

    /// Handles the work the event queue merged for one pid: its exit,
    /// then the load asked after it.
    pub fn on_work(&mut self, work: PendingWork) {
        if work.exit {
            self.on_exit(work.pid);
        }
        self.event_ktime_ns = work.ktime_ns;
        match work.load {
            Some(LoadKind::New) => self.on_new_process(work.pid),
            Some(LoadKind::UnknownPc) => self.on_unknown_pc(work.pid, 0),
            Some(LoadKind::Exec) => {
                self.on_exec(work.pid);
                // A sample of the new program waits: load it now (and
                // again when the exec's load is due, for late libraries).
                if work.sampled {
                    self.on_new_process(work.pid);
                }
            }
            None => {}
        }
        self.event_ktime_ns = 0;
    }

    /// A sample of `pid` found it unknown: load it (again, when it was
    /// loaded long enough ago that the event is not ours in flight).
    pub fn on_new_process(&mut self, pid: Pid) {
        self.sync(pid, true);
    }

    /// `pid` ran code at `pc` in no loaded mapping (dlopen, mmap):
    /// re-read its maps.
    pub fn on_unknown_pc(&mut self, pid: Pid, _pc: u64) {
        self.sync(pid, false);
    }

    /// `pid` called execve: its mappings are all new. The old ones go at
    /// once; the new program is loaded a few milliseconds later, once
    /// ld.so has mapped its libraries, if it still runs then (most
    /// processes of a build's churn are gone by then, and cost nothing
    /// more). A process never sampled is loaded ahead of its first sample
    /// while the exec preload budget lasts (execs can come by the hundred
    /// per second on a build machine; most of those processes are never
    /// sampled, and the first sample loads them anyway). Its maps are
    /// read again 50 ms after the exec, for late libraries.
    pub fn on_exec(&mut self, pid: Pid) {
        let was_loaded = self.processes.contains_key(&pid);
        self.unload_process(pid, true); // the same process, a new program: not an exit
        let exec = ExecLoad { ktime_ns: self.event_ktime_ns, was_loaded };
        // From the exec, not from now: its event may have waited in the
        // queue (execs do not wake the manager at once).
        let waited = match self.event_ktime_ns {
            0 => Duration::ZERO,
            at => Duration::from_nanos(monotonic_ns().saturating_sub(at)),
        };
        self.schedule(pid, self.limits.exec_load_delay.saturating_sub(waited), Some(exec));
    }

    /// When [`ProcessManager::run_due`] next has work, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.scheduled.next_deadline()
    }

    /// Does the scheduled work that is due (loads after execs, re-reading
    /// maps after them).
    pub fn run_due(&mut self) {
        let now = Instant::now();
        self.remove_due(now);
        for s in self.scheduled.take_due(now) {
            match s.exec {
                Some(exec) => self.load_after_exec(s.pid, exec),
                None if self.processes.contains_key(&s.pid) => self.resync(s.pid),
                None => {}
            }
        }
    }

    /// Waits for every analysis under way and loads the results (tests,
    /// and callers that want everything loaded before going on).
    pub fn settle(&mut self) {
        loop {
            let done = self.pool.wait_idle();
            if done.is_empty() {
                return;
            }
            for d in done {
                self.finish_file(d);
            }
        }
    }

    /// The last thread of `pid` exited.
    pub fn on_exit(&mut self, pid: Pid) {
        self.process_exited(pid, false);
    }

    /// Housekeeping, to call about once a second: forgets exited
    /// processes after their grace, notices exits that were missed, keeps
    /// the unused files within their budget.
    pub fn tick(&mut self) {
        let now = Instant::now();
        let grace = self.limits.exit_grace;
        let registry = &self.registry;
        self.exited.retain(|&(pid, at)| {
            if now.duration_since(at) < grace {
                return true;
            }
            registry.remove(pid);
            false
        });
        if now.duration_since(self.last_liveness) >= self.limits.liveness_interval {
            self.last_liveness = now;
            let gone: Vec<Pid> = self
                .processes
                .iter()
                .filter(|(pid, p)| read_start_time(&self.proc_root, **pid) != p.start_time)
                .map(|(pid, _)| *pid)
                .collect();
            for pid in gone {
                self.process_exited(pid, false);
            }
        }
        self.held.evict_over_budget(&mut self.loader, &mut self.stats);
        for pid in self.loader.due_again() {
            self.push_mappings(pid);
        }
    }

    /// Unloads every process and file from the loader (the agent
    /// stopping). The registry keeps its snapshots: samples taken before
    /// the stop may still be on their way to the trace builder.
    pub fn unload_all(&mut self) {
        let pids: Vec<Pid> = self.processes.keys().copied().collect();
        for pid in pids {
            self.unload_process(pid, false); // still running: not counted as exited
        }
        while let Some(r) = self.removals.pop_front() {
            self.remove_from_loader(r.pid, &r.files);
        }
        self.exited.clear();
        self.held.clear(&mut self.loader, &mut self.stats);
    }
}

/// Whether `pid` exists (one syscall, no /proc read: most processes of a
/// build's churn are gone when their load is due).
fn is_running(pid: Pid) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid.0) else { return false };
    // SAFETY: signal 0 only checks that the process exists.
    raw > 0 && unsafe { libc::kill(raw, 0) } == 0
}

/// A digest of a process's executable mappings: equal digests, nothing
/// to load again.
fn maps_digest(entries: &[MapsEntry]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in entries {
        (e.start, e.end, e.reserved_end, e.offset, e.inode, &e.path).hash(&mut h);
    }
    h.finish()
}
