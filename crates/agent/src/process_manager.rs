//! The process manager's threads: process events from the BPF programs,
//! drained into an [`EventQueue`] by one thread, drive a [`ProcessManager`] that loads unwinding state into the BPF
//! maps through [`BpfLoader`], which also shows the files it loads to the
//! interpreter runtimes ([`Interpreters`], over a
//! [`profiler_interpreters::Registry`]) and marks their evaluation loops
//! for their unwinders.

use profiler_bpf::{
    InterpreterMaps, InterpreterUnwinder, MappingRange, MappingTarget, PidSelection, ProcessEventKind,
    ProcessEventReader, UnwindMaps,
};
use profiler_elf::{DeltaWalk, ElfFile, RuleId, UnwindRule};
use profiler_interpreters::{
    BudgetLimits, BudgetStats, ExecutableMapping, Inspection, PidMemory, ReadBudget, Registry,
};
use profiler_process::{
    monotonic_ns, EventKind, EventQueue, ExecutableFile, LoadKind, LoaderError, ManagerStats, ProcessFilter,
    ProcessManager, QueueStats, UnwindLoader, UnwindMapping, UnwindTarget,
};
use profiler_trace::{Pid, TableKey};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the thread sleeps when no event comes (housekeeping period).
const TICK: Duration = Duration::from_millis(250);
/// Housekeeping at most this often.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Counters published at most this often.
const PUBLISH: Duration = Duration::from_millis(250);

/// [`UnwindLoader`] over the BPF maps.
pub(crate) struct BpfLoader {
    pub maps: UnwindMaps,
    pub interpreters: Interpreters,
    pub go_labels: crate::go_labels::GoLabels,
}

impl BpfLoader {
    pub(crate) fn new(
        maps: UnwindMaps,
        interpreters: Interpreters,
        go_labels: crate::go_labels::GoLabels,
    ) -> BpfLoader {
        BpfLoader { maps, interpreters, go_labels }
    }
}

impl UnwindLoader for BpfLoader {
    fn rule_capacity(&self) -> usize {
        self.maps.rules_capacity() as usize
    }

    fn set_rule(&mut self, id: RuleId, rule: &UnwindRule) -> Result<(), LoaderError> {
        Ok(self.maps.set_rule(id, rule)?)
    }

    fn load_file(&mut self, table_key: TableKey, deltas: &DeltaWalk<'_>) -> Result<(), LoaderError> {
        self.maps.load_file_streamed(table_key.bpf_id(), deltas)?;
        self.interpreters.file_loaded(table_key);
        Ok(())
    }

    fn unload_file(&mut self, table_key: TableKey) -> Result<(), LoaderError> {
        self.interpreters.file_unloaded(table_key);
        self.go_labels.file_unloaded(table_key);
        Ok(self.maps.unload_file(table_key.bpf_id())?)
    }

    fn set_process(&mut self, pid: Pid, mappings: &[UnwindMapping]) -> Result<(), LoaderError> {
        let mut ranges: Vec<MappingRange> = Vec::with_capacity(mappings.len());
        let mut files = Vec::new();
        for m in mappings {
            match m.target {
                UnwindTarget::File { table_key, bias } => {
                    self.interpreters.split(m.start, m.end, table_key, bias, &mut ranges);
                    files.push((table_key, bias));
                }
                UnwindTarget::NoUnwindInfo => {
                    ranges.push(MappingRange { start: m.start, end: m.end, target: MappingTarget::NoUnwindInfo })
                }
            }
        }
        self.interpreters.attach_budget.start_metering(pid.0);
        let memory = PidMemory(pid.0);
        let budgeted = self.interpreters.attach_budget.memory(pid.0, &memory);
        let notices = self.interpreters.registry.process_mapped(pid.0, &files, &budgeted);
        for notice in notices {
            self.interpreters.notice(notice);
        }
        let pending = self.interpreters.registry.attach_pending(pid.0);
        self.interpreters.retries.after_mapped(pid.0, pending, Instant::now());
        self.interpreters.mark_code(pid.0, mappings, &mut ranges);
        let budget = &self.interpreters.attach_budget;
        budget.stop_metering();
        for notice in budget.take_notices() {
            self.interpreters.notice(notice);
        }
        self.go_labels.process_mapped(pid.0, &files);
        Ok(self.maps.set_process(pid.0, &ranges)?)
    }

    fn due_again(&mut self) -> Vec<Pid> {
        self.interpreters.retries.due(Instant::now()).into_iter().map(Pid).collect()
    }

    fn remove_process(&mut self, pid: Pid) -> Result<(), LoaderError> {
        self.interpreters.registry.process_removed(pid.0);
        self.interpreters.retries.forget(pid.0);
        self.interpreters.attach_budget.forget(pid.0);
        self.go_labels.process_removed(pid.0);
        if self.interpreters.maps.remove_process(pid.0).is_err() {
            self.interpreters.stats.load_errors += 1;
        }
        Ok(self.maps.remove_process(pid.0)?)
    }

    fn inspect_file(&mut self, file: &ExecutableFile, elf: &ElfFile) {
        self.interpreters.inspect(file, elf);
        if let Some(notice) = self.go_labels.inspect(file.table_key, &file.path, elf) {
            self.interpreters.notice(notice);
        }
    }
}

/// Counters of the interpreters the process manager loads (the
/// per-runtime counters are the [`Registry`]'s).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct InterpreterStats {
    /// BPF map updates for interpreters that failed.
    pub load_errors: u64,
    /// Processes shown again to an interpreter that was not ready.
    pub attach_retries: u64,
    /// Processes given up after the last retry (or not kept: too many).
    pub attach_retries_given_up: u64,
    /// What reading processes' memory to attach to them was refused.
    pub attach_budget: BudgetStats,
}

/// Most notices kept for [`crate::Agent::notices`].
pub(crate) const MAX_NOTICES: usize = 64;

/// The process manager's dispatcher to the interpreter runtimes: each
/// file analysed is shown to every runtime ([`Registry::inspect`]); a
/// file holding one gets its map entry with its deltas, and its loops
/// marked in each process that maps it, for the runtime's unwinder; each
/// process that maps it is shown to it ([`Registry::process_mapped`]).
pub(crate) struct Interpreters {
    maps: InterpreterMaps,
    registry: Arc<Registry>,
    notices: Arc<Mutex<Vec<String>>>,
    stats: InterpreterStats,
    retries: AttachRetries,
    /// What reading a process's memory to attach may cost (a crafted
    /// runtime retried at each mapping change would otherwise cost a
    /// full read of its tables each time).
    attach_budget: ReadBudget,
}

/// Processes whose interpreter was not ready to attach (a JVM still
/// starting: `Attach::NotYet`), shown to it again with backoff even if
/// their mappings do not change: after 1, 2, 4, ... 32 s, then given up
/// (its frames stay native until its mappings change). Bounded; what it
/// drops or gives up is counted.
#[derive(Debug, Default)]
pub(crate) struct AttachRetries {
    /// pid -> (when next, tries so far).
    due: HashMap<u32, (Instant, u32)>,
    /// Processes shown again.
    pub retried: u64,
    /// Processes given up after the last try, or not kept (full).
    pub given_up: u64,
}

impl AttachRetries {
    const MAX_PROCESSES: usize = 1024;
    const MAX_TRIES: u32 = 6;

    /// `pid` was shown to the interpreters; `pending`: one was not ready.
    fn after_mapped(&mut self, pid: u32, pending: bool, now: Instant) {
        if !pending {
            self.due.remove(&pid);
        } else if !self.due.contains_key(&pid) {
            if self.due.len() >= Self::MAX_PROCESSES {
                self.given_up += 1;
                return;
            }
            self.due.insert(pid, (now + Duration::from_secs(1), 0));
        }
    }

    /// `pid` is gone.
    fn forget(&mut self, pid: u32) {
        self.due.remove(&pid);
    }

    /// The processes to show again now.
    fn due(&mut self, now: Instant) -> Vec<u32> {
        let mut out = Vec::new();
        let mut given_up = 0;
        self.due.retain(|&pid, (at, tries)| {
            if *at > now {
                return true;
            }
            *tries += 1;
            if *tries > Self::MAX_TRIES {
                given_up += 1;
                return false;
            }
            out.push(pid);
            *at = now + Duration::from_secs(1 << *tries);
            true
        });
        self.given_up += given_up;
        self.retried += out.len() as u64;
        out
    }
}

impl Interpreters {
    pub(crate) fn new(
        maps: InterpreterMaps,
        registry: Arc<Registry>,
        notices: Arc<Mutex<Vec<String>>>,
    ) -> Interpreters {
        Interpreters {
            maps,
            registry,
            notices,
            stats: InterpreterStats::default(),
            retries: AttachRetries::default(),
            attach_budget: ReadBudget::new(BudgetLimits::ATTACH, "attaching to it"),
        }
    }

    pub(crate) fn stats(&self) -> InterpreterStats {
        InterpreterStats {
            attach_retries: self.retries.retried,
            attach_retries_given_up: self.retries.given_up,
            attach_budget: self.attach_budget.stats(),
            ..self.stats
        }
    }

    fn inspect(&mut self, file: &ExecutableFile, elf: &ElfFile) {
        if let Inspection::Unsupported { notice: Some(notice), .. } =
            self.registry.inspect(file.table_key, elf, &file.path)
        {
            self.notice(notice);
        }
    }

    /// Keeps a notice for [`crate::Agent::notices`] (the first
    /// [`MAX_NOTICES`]).
    fn notice(&self, notice: String) {
        let mut notices = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        if notices.len() < MAX_NOTICES {
            notices.push(notice);
        }
    }

    fn file_loaded(&mut self, file_id: TableKey) {
        let Some(file) = self.registry.file_loaded(file_id) else { return };
        let Some(value) = file.file_value() else { return };
        if self.maps.set_file(file_id.bpf_id(), &value).is_err() {
            self.stats.load_errors += 1;
            // Its loops stay native frames.
            self.registry.file_unloaded(file_id);
        }
    }

    fn file_unloaded(&mut self, file_id: TableKey) {
        if self.registry.file_unloaded(file_id).is_some() && self.maps.remove_file(file_id.bpf_id()).is_err() {
            self.stats.load_errors += 1;
        }
    }

    /// The runtimes attached to process `pid` that unwind code in its
    /// anonymous memory (a JVM's code cache): their per-process map
    /// values set, and the parts of `ranges` without unwind tables in
    /// their code marked for their unwinders. A value that cannot be set
    /// leaves the code unmarked (counted). `mappings`: the process's
    /// executable mappings, as the process manager read them.
    fn mark_code(&mut self, pid: u32, mappings: &[UnwindMapping], ranges: &mut Vec<MappingRange>) {
        // Most processes run no runtime: no view of their maps is built.
        if !self.registry.is_attached(pid) {
            return;
        }
        let maps: Vec<ExecutableMapping<'_>> = mappings
            .iter()
            .map(|m| ExecutableMapping { start: m.start, end: m.end, path: &m.path, reserved_end: m.reserved_end })
            .collect();
        let maps = &maps[..];
        let memory = PidMemory(pid);
        let unwinding = self.registry.process_unwinding(pid, &self.attach_budget.memory(pid, &memory), maps);
        let mut code = Vec::new();
        let mut reserved = Vec::new();
        for u in &unwinding {
            if self.maps.set_process(pid, &u.value).is_err() {
                self.stats.load_errors += 1;
                continue;
            }
            code.extend(u.code.iter().map(|&(s, e)| (s, e, u.unwinder)));
            reserved.extend(u.reserved.iter().map(|&(s, e)| (s, e, u.unwinder)));
        }
        if code.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(ranges.len() + 2 * code.len());
        for r in ranges.drain(..) {
            if r.target != MappingTarget::NoUnwindInfo {
                out.push(r);
                continue;
            }
            split_code(r.start, r.end, &code, &mut out);
        }
        reserve_code(&reserved, &mut out);
        *ranges = out;
    }

    /// The ranges of one mapping of a loaded file: its interpreter's
    /// loop addresses, if it holds one, marked for its unwinder.
    fn split(&self, start: u64, end: u64, file_id: TableKey, bias: u64, out: &mut Vec<MappingRange>) {
        let native = MappingTarget::Native { file_id: file_id.bpf_id(), bias };
        match self.registry.loaded(&file_id) {
            Some(file) => split_loops(start, end, native, file.loop_ranges(), file.unwinder(), out),
            None => out.push(MappingRange { start, end, target: native }),
        }
    }
}

/// `[start, end)` of a mapping as ranges: the parts that hold the loops
/// (ELF ranges, moved by the mapping's bias) marked for `unwinder`, the
/// rest `native`.
fn split_loops(
    start: u64,
    end: u64,
    native: MappingTarget,
    loops: &[(u64, u64)],
    unwinder: InterpreterUnwinder,
    out: &mut Vec<MappingRange>,
) {
    let MappingTarget::Native { file_id, bias } = native else {
        out.push(MappingRange { start, end, target: native });
        return;
    };
    let mut loops: Vec<(u64, u64)> = loops
        .iter()
        .map(|&(s, e)| (s.wrapping_add(bias).max(start), e.wrapping_add(bias).min(end)))
        .filter(|(s, e)| s < e)
        .collect();
    loops.sort_unstable();
    let mut at = start;
    for (s, e) in loops {
        if s > at {
            out.push(MappingRange { start: at, end: s, target: native });
        }
        let s = s.max(at);
        if s < e {
            let target = MappingTarget::InterpreterLoop { file_id, bias, unwinder };
            out.push(MappingRange { start: s, end: e, target });
            at = e;
        }
    }
    if at < end {
        out.push(MappingRange { start: at, end, target: native });
    }
}

/// `[start, end)` of memory without unwind tables as ranges: the parts in
/// `code` (process addresses) marked for its unwinder, the rest
/// [`MappingTarget::NoUnwindInfo`].
fn split_code(start: u64, end: u64, code: &[(u64, u64, InterpreterUnwinder)], out: &mut Vec<MappingRange>) {
    let mut parts: Vec<(u64, u64, InterpreterUnwinder)> =
        code.iter().map(|&(s, e, u)| (s.max(start), e.min(end), u)).filter(|(s, e, _)| s < e).collect();
    parts.sort_unstable_by_key(|p| p.0);
    let mut at = start;
    for (s, e, unwinder) in parts {
        if s > at {
            out.push(MappingRange { start: at, end: s, target: MappingTarget::NoUnwindInfo });
        }
        let s = s.max(at);
        if s < e {
            out.push(MappingRange { start: s, end: e, target: MappingTarget::InterpreterCode { unwinder } });
            at = e;
        }
    }
    if at < end {
        out.push(MappingRange { start: at, end, target: MappingTarget::NoUnwindInfo });
    }
}

/// Marks the parts of `reserved` (a runtime's reservation for its code)
/// that no range covers: memory not executable yet when the maps were
/// read. A JVM commits its code cache bit by bit as it compiles, and
/// the maps are read again only after a sample meets an unknown pc: its
/// newest code would be cut at each commit meanwhile. Nothing else can
/// be mapped there, and a pc can be there only once committed.
fn reserve_code(reserved: &[(u64, u64, InterpreterUnwinder)], ranges: &mut Vec<MappingRange>) {
    if reserved.is_empty() {
        return;
    }
    let mut covered: Vec<(u64, u64)> = ranges.iter().map(|r| (r.start, r.end)).collect();
    covered.sort_unstable();
    for &(start, end, unwinder) in reserved {
        let mut at = start;
        for &(s, e) in &covered {
            if e <= at || s >= end {
                continue;
            }
            if s > at {
                ranges.push(MappingRange { start: at, end: s, target: MappingTarget::InterpreterCode { unwinder } });
            }
            at = at.max(e);
        }
        if at < end {
            ranges.push(MappingRange { start: at, end, target: MappingTarget::InterpreterCode { unwinder } });
        }
    }
}

/// The kinds of file refusal already told in the notices (each once).
#[derive(Default)]
struct Told {
    not_regular: bool,
    too_large: bool,
    mismatch: bool,
    escape: bool,
    no_openat2: bool,
    collision: bool,
}

impl Told {
    /// Adds a notice for each kind of refusal seen for the first time.
    fn notices(&mut self, stats: &ManagerStats, notices: &Mutex<Vec<String>>) {
        let r = &stats.files_refused;
        let kinds = [
            (
                r.not_regular,
                &mut self.not_regular,
                "a process maps a file that is not a regular file (device, FIFO): not read",
            ),
            (r.too_large, &mut self.too_large, "a process maps a file over the size limit: not read"),
            (
                r.mismatch,
                &mut self.mismatch,
                "a mapped file's path now names another file (replaced on disk): not used",
            ),
            (r.escape, &mut self.escape, "a mapped file's path tries to leave its process's root: refused"),
            (
                r.no_openat2,
                &mut self.no_openat2,
                "openat2 is missing: files are opened only through /proc/PID/map_files",
            ),
            (
                stats.file_id_collisions,
                &mut self.collision,
                "two different files share a FileId: each keeps its own unwind tables",
            ),
        ];
        for (count, told, text) in kinds {
            if count > 0 && !*told {
                *told = true;
                let mut notices = notices.lock().unwrap_or_else(|p| p.into_inner());
                if notices.len() < MAX_NOTICES {
                    notices.push(text.to_string());
                }
            }
        }
    }
}

/// What the threads publish for [`crate::Agent::stats`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ManagerReport {
    pub manager: ManagerStats,
    pub maps: profiler_bpf::UnwindMapsStats,
    pub interpreters: InterpreterStats,
    pub go_labels: crate::go_labels::GoLabelStats,
    pub queue: QueueStats,
    /// Ring buffer records that could not be decoded.
    pub events_malformed: u64,
    /// Where the manager's thread spent its CPU.
    pub cpu: ManagerCpu,
}

/// CPU time of the process manager's thread by kind of work, µs (thread
/// CPU time: what the work cost, however busy the machine), and how many
/// times the thread woke.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ManagerCpu {
    /// Loads asked by samples (a new pid, an unknown pc).
    pub loads_us: u64,
    /// Exec events (unloading the old program, scheduling the new one).
    pub execs_us: u64,
    /// Exit events.
    pub exits_us: u64,
    /// Scheduled work: loads after an exec, re-reads of maps.
    pub scheduled_us: u64,
    /// Analysed files loaded into the maps, then their processes.
    pub files_us: u64,
    /// Housekeeping, memory trims, counters published.
    pub housekeeping_us: u64,
    /// Times the thread went round its loop.
    pub wakeups: u64,
}

/// CPU time the calling thread has used, µs.
fn thread_cpu_us() -> u64 {
    u64::try_from(profiler_symbolize::thread_cpu().as_micros()).unwrap_or(u64::MAX)
}

/// Adds the thread CPU time since `*mark` to `to` and moves the mark.
fn charge(to: &mut u64, mark: &mut u64) {
    let now = thread_cpu_us();
    *to += now.saturating_sub(*mark);
    *mark = now;
}

/// Pids with pending work the event queue holds at most (each costs
/// about 50 bytes); beyond, events are dropped and counted, and a
/// dropped load comes again with the process's next sample.
pub(crate) const EVENT_QUEUE_CAPACITY: usize = 65_536;
/// How often the draining thread polls the ring buffer: exec and exit
/// events (sent without a wake-up) wait at most this long, so a burst of
/// them costs one wake-up; a sample waiting for its process wakes it at
/// once. 256 KiB of ring buffer hold 8192 events; a poll at 200 execs a
/// second finds about 40. An exec's load is due 50 ms after it, a sampled
/// process is loaded at once, an exited one stays loaded for a grace:
/// none needs the event sooner.
const EVENT_POLL: Duration = Duration::from_millis(100);
/// Pieces of work handled between two looks at the analysis results.
const WORK_BATCH: usize = 64;

/// How often every process is checked against the container and cgroup
/// filter (a process moved into a chosen cgroup without an exec).
const RESCAN_INTERVAL: Duration = Duration::from_secs(10);

/// Chooses the processes of the containers and cgroups the user named,
/// as they appear: at their exec (the programs report every exec under
/// such a filter) and by a rescan of `/proc` now and then; their new
/// processes are chosen by the programs at fork.
pub(crate) struct Chooser {
    filter: ProcessFilter,
    selection: PidSelection,
    rescanned: Instant,
}

impl Chooser {
    pub(crate) fn new(filter: ProcessFilter, selection: PidSelection) -> Chooser {
        Chooser { filter, selection, rescanned: Instant::now() }
    }

    /// Whether `pid`, which called execve, is profiled (chosen now if it
    /// is in a chosen container or cgroup).
    fn on_exec(&self, pid: Pid) -> bool {
        if self.selection.is_selected(pid.0) {
            return true;
        }
        self.filter.matches(Path::new("/proc"), pid) && self.choose(pid)
    }

    /// Selects `pid` (false when `selected_pids` is full).
    fn choose(&self, pid: Pid) -> bool {
        self.selection.select(pid.0).is_ok()
    }

    /// The processes that entered a chosen cgroup without an exec, at
    /// most every [`RESCAN_INTERVAL`]; returns them (to be loaded).
    fn rescan(&mut self) -> Vec<Pid> {
        if self.rescanned.elapsed() < RESCAN_INTERVAL {
            return Vec::new();
        }
        self.rescanned = Instant::now();
        let found = self.filter.scan(Path::new("/proc"), profiler_bpf::SELECTED_PIDS_MAX);
        found.into_iter().filter(|pid| !self.selection.is_selected(pid.0) && self.choose(*pid)).collect()
    }
}

/// The draining thread's body: the ring buffer into the event queue
/// until `stop`. It never waits on the manager, so the kernel's buffer
/// does not fill while files are analysed. With a `chooser`, execs of
/// processes outside the chosen containers and cgroups are dropped here
/// (the programs report them all).
pub(crate) fn drain(
    reader: &ProcessEventReader,
    queue: &EventQueue,
    stop: &AtomicBool,
    mut chooser: Option<Chooser>,
) -> Result<(), profiler_bpf::BpfError> {
    // Closed however this ends (even by a panic), so the manager stops.
    struct CloseOnDrop<'a>(&'a EventQueue);
    impl Drop for CloseOnDrop<'_> {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let _close = CloseOnDrop(queue);
    reader.run(EVENT_POLL, stop, |event| {
        match event {
            Some(e) => {
                let kind = match e.kind {
                    ProcessEventKind::New => EventKind::New,
                    ProcessEventKind::UnknownPc => EventKind::UnknownPc,
                    ProcessEventKind::Exit => EventKind::Exit,
                    ProcessEventKind::Exec => EventKind::Exec,
                };
                if kind != EventKind::Exec || chooser.as_ref().is_none_or(|c| c.on_exec(Pid(e.pid))) {
                    queue.push(kind, Pid(e.pid), e.ktime_ns);
                }
            }
            None => {
                if let Some(c) = chooser.as_mut() {
                    for pid in c.rescan() {
                        queue.push(EventKind::New, pid, 0);
                    }
                }
            }
        }
        EVENT_POLL
    })
}

/// The manager thread's body: follows the event queue (and the files
/// analysed) until `stop`, then unloads everything.
pub(crate) fn run(
    queue: Arc<EventQueue>,
    reader: &ProcessEventReader,
    mut manager: ProcessManager<BpfLoader>,
    load_delay: Duration,
    stop: &AtomicBool,
    report: &Mutex<ManagerReport>,
    panics: &AtomicU64,
) {
    let waker = queue.clone();
    manager.set_waker(Arc::new(move || waker.wake()));
    let mut told = Told::default();
    let mut cpu = ManagerCpu::default();
    let mut publish = |m: &ProcessManager<BpfLoader>, cpu: ManagerCpu| {
        let stats = m.stats();
        told.notices(&stats, &m.loader().interpreters.notices);
        let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
        r.manager = stats;
        r.maps = m.loader().maps.stats();
        r.interpreters = m.loader().interpreters.stats();
        r.go_labels = m.loader().go_labels.stats();
        r.queue = queue.stats();
        r.events_malformed = reader.malformed();
        r.cpu = cpu;
    };
    publish(&manager, cpu);
    let mut last_housekeeping = Instant::now();
    let mut trim = FreeMemoryTrim::default();
    let mut last_publish = Instant::now();
    // Until the stop, and the events read before it are handled too.
    while !stop.load(Ordering::Relaxed) || !queue.is_closed() {
        let timeout = manager.next_deadline().map_or(TICK, |d| d.saturating_duration_since(Instant::now())).min(TICK);
        let batch = queue.wait(timeout, WORK_BATCH);
        cpu.wakeups += 1;
        let mut mark = thread_cpu_us();
        for work in batch {
            if !load_delay.is_zero() && matches!(work.load, Some(LoadKind::New | LoadKind::Exec)) {
                std::thread::sleep(remaining_delay(load_delay, work.ktime_ns, monotonic_ns()));
            }
            // A load a sample waits for counts as one, also when it came
            // merged with an exec.
            let bucket = match (work.load, work.sampled) {
                (Some(_), true) | (Some(LoadKind::New | LoadKind::UnknownPc), false) => &mut cpu.loads_us,
                (Some(LoadKind::Exec), false) => &mut cpu.execs_us,
                (None, _) => &mut cpu.exits_us,
            };
            // A panic while handling one process (its files are anyone's)
            // costs that work, not the thread.
            let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| manager.on_work(work)));
            charge(bucket, &mut mark);
            // Files analysed meanwhile unblock their processes now.
            let collected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| manager.collect_analysed()));
            charge(&mut cpu.files_us, &mut mark);
            if handled.is_err() || collected.is_err() {
                panics.fetch_add(1, Ordering::Relaxed);
            }
        }
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            manager.collect_analysed();
            charge(&mut cpu.files_us, &mut mark);
            manager.run_due();
            charge(&mut cpu.scheduled_us, &mut mark);
            if last_housekeeping.elapsed() >= HOUSEKEEPING {
                last_housekeeping = Instant::now();
                manager.tick();
                trim.after_housekeeping(manager.stats().files_analysed);
            }
        }));
        if handled.is_err() {
            panics.fetch_add(1, Ordering::Relaxed);
        }
        if last_publish.elapsed() >= PUBLISH {
            last_publish = Instant::now();
            publish(&manager, cpu);
        }
        charge(&mut cpu.housekeeping_us, &mut mark);
    }
    manager.unload_all();
    publish(&manager, cpu);
}

/// What is left of the test knob's delay for work whose first event came
/// at `event_ns`: the delay counts from the event, so that work queued
/// behind other delayed work (a shell's short-lived children) is not
/// delayed once more for each of them. Unknown event times wait it all.
fn remaining_delay(delay: Duration, event_ns: u64, now_ns: u64) -> Duration {
    if event_ns == 0 {
        return delay;
    }
    delay.saturating_sub(Duration::from_nanos(now_ns.saturating_sub(event_ns)))
}

/// glibc keeps what threads free in their arenas: after a big file's
/// tables were built and loaded, most of the memory it took is free but
/// still counted in the agent's RSS. `malloc_trim` hands it back (a few
/// hundred µs); done after housekeeping when files were analysed since
/// the last trim (at most every [`FreeMemoryTrim::INTERVAL`]), and every
/// [`FreeMemoryTrim::IDLE_INTERVAL`] for what other threads free (the
/// symbolizer's evictions, the reporter's buffers).
#[derive(Default)]
struct FreeMemoryTrim {
    last: Option<Instant>,
    files_analysed: u64,
}

impl FreeMemoryTrim {
    const INTERVAL: Duration = Duration::from_secs(5);
    const IDLE_INTERVAL: Duration = Duration::from_secs(30);

    fn after_housekeeping(&mut self, files_analysed: u64) {
        let since = self.last.map_or(Duration::MAX, |t| t.elapsed());
        let due = if files_analysed != self.files_analysed { Self::INTERVAL } else { Self::IDLE_INTERVAL };
        if since < due {
            return;
        }
        self.files_analysed = files_analysed;
        self.last = Some(Instant::now());
        // SAFETY: malloc_trim only walks glibc's own free lists.
        unsafe { libc::malloc_trim(0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_load_delay_counts_from_the_event() {
        let d = Duration::from_secs(2);
        assert_eq!(remaining_delay(d, 1_000_000_000, 1_500_000_000), Duration::from_millis(1500));
        // Queued behind another delayed load: what is left, not 2 s more.
        assert_eq!(remaining_delay(d, 1_000_000_000, 3_500_000_000), Duration::ZERO);
        assert_eq!(remaining_delay(d, 0, 3_500_000_000), d, "no event time: the whole delay");
        assert_eq!(remaining_delay(d, 5_000_000_000, 1_000_000_000), d, "a clock behind the event");
    }

    #[test]
    fn processes_not_ready_are_shown_again_with_backoff_then_given_up() {
        let t0 = Instant::now();
        let mut r = AttachRetries::default();
        r.after_mapped(7, true, t0);
        r.after_mapped(8, false, t0);
        assert!(r.due(t0).is_empty(), "not at once");
        assert_eq!(r.due(t0 + Duration::from_secs(1)), vec![7]);
        r.after_mapped(7, true, t0 + Duration::from_secs(1)); // still not ready: keeps its schedule
        assert!(r.due(t0 + Duration::from_millis(2500)).is_empty(), "next after 2 s more");
        assert_eq!(r.due(t0 + Duration::from_secs(3)), vec![7]);
        let mut at = t0 + Duration::from_secs(3);
        for tries in 3..=AttachRetries::MAX_TRIES {
            at += Duration::from_secs(1 << (tries - 1));
            assert_eq!(r.due(at), vec![7], "try {tries}");
        }
        assert!(r.due(at + Duration::from_secs(3600)).is_empty());
        assert_eq!((r.retried, r.given_up), (u64::from(AttachRetries::MAX_TRIES), 1));
        // Ready, or gone: forgotten.
        r.after_mapped(9, true, t0);
        r.after_mapped(9, false, t0);
        assert!(r.due(t0 + Duration::from_secs(60)).is_empty());
    }

    fn ranges(start: u64, end: u64, loops: &[(u64, u64)]) -> Vec<(u64, u64, Option<InterpreterUnwinder>)> {
        let native = MappingTarget::Native { file_id: 7, bias: 0x1000 };
        let mut out = Vec::new();
        split_loops(start, end, native, loops, InterpreterUnwinder::Python, &mut out);
        out.iter()
            .map(|r| match r.target {
                MappingTarget::InterpreterLoop { file_id: 7, bias: 0x1000, unwinder } => {
                    (r.start, r.end, Some(unwinder))
                }
                MappingTarget::Native { file_id: 7, bias: 0x1000 } => (r.start, r.end, None),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn loops_are_marked_for_their_unwinder_and_the_rest_stays_native() {
        let py = Some(InterpreterUnwinder::Python);
        // Two loops (ELF vaddrs, moved by the bias), unsorted.
        assert_eq!(
            ranges(0x2000, 0x9000, &[(0x5000, 0x6000), (0x2000, 0x3000)]),
            vec![
                (0x2000, 0x3000, None),
                (0x3000, 0x4000, py),
                (0x4000, 0x6000, None),
                (0x6000, 0x7000, py),
                (0x7000, 0x9000, None)
            ]
        );
        // Clipped to the mapping; a loop outside it is ignored.
        assert_eq!(ranges(0x3800, 0x4000, &[(0x2000, 0x3000), (0x9000, 0xa000)]), vec![(0x3800, 0x4000, py)]);
        // Overlapping loops: no address twice.
        assert_eq!(
            ranges(0x2000, 0x6000, &[(0x2000, 0x3000), (0x2800, 0x3800)]),
            vec![(0x2000, 0x3000, None), (0x3000, 0x4000, py), (0x4000, 0x4800, py), (0x4800, 0x6000, None)]
        );
        assert_eq!(ranges(0x2000, 0x6000, &[]), vec![(0x2000, 0x6000, None)]);
    }

    #[test]
    fn code_in_anonymous_memory_is_marked_for_its_unwinder() {
        let hs = InterpreterUnwinder::Hotspot;
        let view = |start: u64, end: u64, code: &[(u64, u64, InterpreterUnwinder)]| {
            let mut out = Vec::new();
            split_code(start, end, code, &mut out);
            out.iter()
                .map(|r| match r.target {
                    MappingTarget::InterpreterCode { unwinder } => (r.start, r.end, Some(unwinder)),
                    MappingTarget::NoUnwindInfo => (r.start, r.end, None),
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<_>>()
        };
        // A code cache inside a larger mapping, and one that covers it.
        assert_eq!(
            view(0x1000, 0x9000, &[(0x2000, 0x4000, hs)]),
            vec![(0x1000, 0x2000, None), (0x2000, 0x4000, Some(hs)), (0x4000, 0x9000, None)]
        );
        assert_eq!(view(0x2000, 0x3000, &[(0x1000, 0x9000, hs)]), vec![(0x2000, 0x3000, Some(hs))]);
        assert_eq!(view(0x2000, 0x3000, &[(0x5000, 0x9000, hs)]), vec![(0x2000, 0x3000, None)]);
    }

    #[test]
    fn reserved_code_not_committed_yet_is_marked_too() {
        let hs = InterpreterUnwinder::Hotspot;
        let code = MappingTarget::InterpreterCode { unwinder: hs };
        let native = MappingTarget::Native { file_id: 9, bias: 0 };
        // The cache [0x10000, 0x20000): committed 0x10000-0x12000 and
        // 0x15000-0x16000 (marked from the maps); a file's mapping and
        // anonymous memory outside it are left alone.
        let mut ranges = vec![
            MappingRange { start: 0x1000, end: 0x2000, target: native },
            MappingRange { start: 0x10000, end: 0x12000, target: code },
            MappingRange { start: 0x15000, end: 0x16000, target: code },
            MappingRange { start: 0x30000, end: 0x31000, target: MappingTarget::NoUnwindInfo },
        ];
        reserve_code(&[(0x10000, 0x20000, hs)], &mut ranges);
        let mut view: Vec<(u64, u64, bool)> = ranges.iter().map(|r| (r.start, r.end, r.target == code)).collect();
        view.sort_unstable();
        assert_eq!(
            view,
            vec![
                (0x1000, 0x2000, false),
                (0x10000, 0x12000, true),
                (0x12000, 0x15000, true),
                (0x15000, 0x16000, true),
                (0x16000, 0x20000, true),
                (0x30000, 0x31000, false),
            ]
        );
        // Nothing committed yet: the whole reservation; nothing reserved:
        // nothing added.
        let mut ranges = Vec::new();
        reserve_code(&[(0x10000, 0x20000, hs)], &mut ranges);
        assert_eq!(ranges, vec![MappingRange { start: 0x10000, end: 0x20000, target: code }]);
        reserve_code(&[], &mut ranges);
        assert_eq!(ranges.len(), 1);
    }
}
