//! The workers that analyse files (ELF reading, unwind tables, rule
//! interning) off the manager's thread, so that a process whose files
//! are known or small is loaded while a 190 MB library is being
//! analysed. Jobs run in priority order (a process's executable first,
//! then smaller files first); at most one big file is analysed at a time
//! (it bounds the peak memory) and one worker is kept for small files. Results go back to the manager, which alone updates the
//! loader (rules before files, files before processes).

use crate::files::{analyse, ExecutableFile, FileKeys};
use profiler_elf::{Deltas, ElfFile, RuleId, RuleInterner};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

/// Files at least this large are "big": one at a time.
pub(crate) const BIG_FILE: u64 = 32 << 20;
/// Files at least this large are "large": they leave one worker (of two
/// or more) to the small files, so that a new program waits for one
/// small file's analysis at most.
pub(crate) const LARGE_FILE: u64 = 4 << 20;

/// Called by a worker when a result is ready (wakes the manager's loop).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// A file to analyse.
pub(crate) struct Job {
    pub keys: FileKeys,
    pub path: Arc<str>,
    pub elf: ElfFile,
    /// The file kept open ([`ExecutableFile::handle`]).
    pub handle: Option<Arc<std::fs::File>>,
    /// Lower runs first.
    pub urgent: bool,
}

/// What became of a file's table.
pub(crate) enum Table {
    /// The compact deltas and the global ids of their rules.
    Deltas(InternedDeltas),
    /// More deltas than the limit.
    TooLarge,
    /// The rule table is full.
    RulesFull,
}

/// A file's compact deltas (sorted by address, each naming one of the
/// table's own rules) and the interner's id of each of those rules, so
/// that the manager hands them to the loader as `(address, rule id)`
/// pairs without a second copy of the table.
pub(crate) struct InternedDeltas {
    pub deltas: Deltas,
    /// `rule_ids[i]` is the id of `deltas.rules()[i]`.
    pub rule_ids: Vec<RuleId>,
}

/// An analysed file, for the manager to load.
pub(crate) struct Done {
    pub file: Arc<ExecutableFile>,
    /// Kept for [`crate::UnwindLoader::inspect_file`].
    pub elf: ElfFile,
    pub table: Table,
}

/// Pool counters.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PoolStats {
    /// Analysis time summed over the workers, ms.
    pub analyse_ms: u64,
}

struct Queue {
    jobs: BTreeMap<JobKey, Job>,
    running: usize,
    busy: Busy,
    done: Vec<Done>,
    seq: u64,
    shutdown: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    work: Condvar,
    idle: Condvar,
    interner: Arc<Mutex<RuleInterner>>,
    max_deltas: usize,
    analyse_us: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// See the module documentation.
pub(crate) struct AnalysisPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl AnalysisPool {
    /// `workers` threads (at least one) interning into `interner`.
    pub fn new(workers: usize, max_deltas: usize, interner: Arc<Mutex<RuleInterner>>) -> AnalysisPool {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: BTreeMap::new(),
                running: 0,
                busy: Busy { big: false, large: 0, large_slots: workers.max(2) - 1 },
                done: Vec::new(),
                seq: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
            interner,
            max_deltas,
            analyse_us: AtomicU64::new(0),
            waker: Mutex::new(None),
        });
        let workers = (0..workers.max(1))
            .filter_map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new().name(format!("file-analysis-{i}")).spawn(move || work(&shared)).ok()
            })
            .collect();
        AnalysisPool { shared, workers }
    }

    /// Calls `waker` whenever a result is ready.
    pub fn set_waker(&self, waker: Waker) {
        *self.shared.waker.lock().unwrap_or_else(|p| p.into_inner()) = Some(waker);
    }

    /// Queues a file.
    pub fn submit(&self, job: Job) {
        if self.workers.is_empty() {
            // No thread could be started: analysed here, late but not lost.
            let done = run(&self.shared, job);
            self.shared.lock().done.push(done);
            return;
        }
        let mut q = self.shared.lock();
        q.seq += 1;
        let key = (!job.urgent, job.elf.data().len() as u64, q.seq);
        q.jobs.insert(key, job);
        drop(q);
        self.shared.work.notify_all();
    }

    /// The results ready now.
    pub fn take_done(&self) -> Vec<Done> {
        std::mem::take(&mut self.shared.lock().done)
    }

    /// Waits until no job is queued or running, then takes the results.
    pub fn wait_idle(&self) -> Vec<Done> {
        let mut q = self.shared.lock();
        while !q.jobs.is_empty() || q.running > 0 {
            q = self.shared.idle.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        std::mem::take(&mut q.done)
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats { analyse_ms: self.shared.analyse_us.load(Ordering::Relaxed) / 1000 }
    }
}

impl Drop for AnalysisPool {
    /// Queued jobs are dropped; a worker in the middle of a big file is
    /// not waited for (that can take seconds, and the agent's stop must
    /// not): it finishes that file, drops it and exits.
    fn drop(&mut self) {
        {
            let mut q = self.shared.lock();
            q.shutdown = true;
            q.jobs.clear();
        }
        self.shared.work.notify_all();
        for w in self.workers.drain(..) {
            if w.is_finished() {
                let _ = w.join();
            }
        }
    }
}

/// A worker: the most urgent job it may run (not a second big file),
/// analysed, then handed back.
fn work(shared: &Shared) {
    lower_priority();
    let mut q = shared.lock();
    loop {
        if q.shutdown {
            return;
        }
        let Some(key) = pick(&q.jobs, q.busy) else {
            q = shared.work.wait(q).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let Some(job) = q.jobs.remove(&key) else { continue };
        let size = key.1;
        q.running += 1;
        q.busy.start(size);
        drop(q);

        let started = Instant::now();
        let done = run(shared, job);
        shared.analyse_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);

        q = shared.lock();
        if q.shutdown {
            return;
        }
        q.running -= 1;
        q.busy.end(size);
        q.done.push(done);
        let idle = q.jobs.is_empty() && q.running == 0;
        drop(q);
        if size >= LARGE_FILE {
            shared.work.notify_all();
        }
        if idle {
            shared.idle.notify_all();
        }
        if let Some(w) = shared.waker.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            w();
        }
        q = shared.lock();
    }
}

/// Job keys: (not urgent, file size, arrival).
type JobKey = (bool, u64, u64);

/// What the workers are analysing, by size.
#[derive(Clone, Copy, Debug)]
struct Busy {
    /// A big file.
    big: bool,
    /// Large files (big ones included).
    large: usize,
    /// Most large files at once.
    large_slots: usize,
}

impl Busy {
    fn allows(&self, size: u64) -> bool {
        (size < BIG_FILE || !self.big) && (size < LARGE_FILE || self.large < self.large_slots)
    }
    fn start(&mut self, size: u64) {
        self.big |= size >= BIG_FILE;
        self.large += usize::from(size >= LARGE_FILE);
    }
    fn end(&mut self, size: u64) {
        if size >= BIG_FILE {
            self.big = false;
        }
        if size >= LARGE_FILE {
            self.large -= 1;
        }
    }
}

/// The job to run next: the first in key order (urgent, then smaller,
/// then older) that `busy` allows.
fn pick<V>(jobs: &BTreeMap<JobKey, V>, busy: Busy) -> Option<JobKey> {
    jobs.keys().find(|k| busy.allows(k.1)).copied()
}

fn run(shared: &Shared, job: Job) -> Done {
    let mut analysed = analyse(&job.elf, job.keys, &job.path, job.handle.clone());
    let deltas = std::mem::take(&mut analysed.table.deltas);
    let table = if deltas.len() > shared.max_deltas {
        Table::TooLarge
    } else {
        // A table has a few hundred distinct rules: interned under one
        // short lock, whatever the number of deltas.
        let interned: profiler_elf::Result<Vec<RuleId>> = {
            let mut interner = shared.interner.lock().unwrap_or_else(|p| p.into_inner());
            deltas.rules().iter().map(|&rule| interner.intern(rule)).collect()
        };
        match interned {
            Ok(rule_ids) => Table::Deltas(InternedDeltas { deltas, rule_ids }),
            Err(_) => Table::RulesFull,
        }
    };
    Done { file: analysed.file, elf: job.elf, table }
}

/// Analysis is batch work: `SCHED_BATCH` keeps its fair share of the CPU
/// (a lower nice value starved it on a busy machine, and new processes
/// waited seconds for their tables) but lets interactive tasks preempt it.
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is valid for the call; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_first_then_small_files_and_one_worker_kept_for_small_files() {
        const URGENT: bool = false; // the key's first field is "not urgent"
        const LATER: bool = true;
        let idle = Busy { big: false, large: 0, large_slots: 1 };
        let mut jobs = BTreeMap::new();
        jobs.insert((URGENT, BIG_FILE * 2, 4), "big executable");
        jobs.insert((LATER, BIG_FILE * 5, 1), "libLLVM");
        jobs.insert((LATER, 2 << 20, 2), "libc");
        jobs.insert((LATER, 200 << 10, 3), "ld.so");
        jobs.insert((LATER, 200 << 10, 5), "another small file");
        let mut order = Vec::new();
        while let Some(k) = pick(&jobs, idle) {
            order.push(jobs.remove(&k).unwrap());
        }
        assert_eq!(order, ["big executable", "ld.so", "another small file", "libc", "libLLVM"]);

        // One worker is on a big file: the other takes small files only.
        let mut busy = idle;
        busy.start(BIG_FILE * 5);
        jobs.insert((URGENT, BIG_FILE, 2), "big executable");
        jobs.insert((LATER, LARGE_FILE, 3), "large library");
        assert_eq!(pick(&jobs, busy), None, "the large ones wait");
        jobs.insert((LATER, LARGE_FILE - 1, 4), "small");
        assert_eq!(pick(&jobs, busy).map(|k| jobs[&k]), Some("small"));
        busy.end(BIG_FILE * 5);
        assert_eq!(pick(&jobs, busy).map(|k| jobs[&k]), Some("big executable"));

        // With three workers, two may analyse large files, one of them big.
        let mut busy = Busy { big: false, large: 0, large_slots: 2 };
        busy.start(BIG_FILE);
        assert!(busy.allows(LARGE_FILE) && !busy.allows(BIG_FILE));
        busy.start(LARGE_FILE);
        assert!(!busy.allows(LARGE_FILE) && busy.allows(LARGE_FILE - 1));
    }

    #[test]
    fn analyses_and_interns_on_a_worker() {
        let interner = Arc::new(Mutex::new(RuleInterner::new()));
        let pool = AnalysisPool::new(2, 8 << 20, interner.clone());
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let id = profiler_elf::file_id_of_path(&exe).unwrap();
        let keys = FileKeys { file_id: id, table_key: profiler_trace::TableKey([3; 32]), identity: None };
        let elf = ElfFile::open(&exe).unwrap();
        pool.submit(Job { keys, path: Arc::from("self"), elf, handle: None, urgent: true });
        let done = pool.wait_idle();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].file.file_id, id);
        let Table::Deltas(interned) = &done[0].table else { panic!("no deltas") };
        assert_eq!(interned.deltas.len() as u64, done[0].file.deltas);
        assert_eq!(interned.rule_ids.len(), interned.deltas.rules().len());
        let interner = interner.lock().unwrap();
        for (rule, id) in interned.deltas.rules().iter().zip(&interned.rule_ids) {
            assert_eq!(interner.get(*id), Some(*rule), "every rule interned under its id");
        }
        let addresses: Vec<u64> = interned.deltas.iter().map(|d| d.address).collect();
        assert!(addresses.windows(2).all(|w| w[0] <= w[1]), "sorted");
    }
}
