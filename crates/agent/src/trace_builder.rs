//! Turns a raw sample from the ring buffer into a [`Trace`]: process
//! identity, kernel frames named from kallsyms, user frames resolved to
//! their mapping and ELF virtual address (with the process snapshots the
//! process manager publishes) and named by the native symbolizer (Go
//! pclntab, DWARF with inline frames, ELF symbols), which answers from a
//! file's symbols while its DWARF loads in the background. Interpreted
//! frames (recorded by an interpreter's unwinder in place of its
//! evaluation loop) are named by the object of the runtime that owns them
//! for the process ([`ProcessObject`], in the interpreters' [`Registry`]).

use profiler_bpf::{RawSample, UnwindStop};
use profiler_interpreters::{
    BudgetLimits, BudgetStats, NamerStats, PidMemory, ProcessObject, ReadBudget, Registry, RuntimeId,
};
use profiler_process::{procfs, ProcessRegistry, ProcessSnapshot};
use profiler_symbolize::{FileSource, KernelSymbolizer, LineSource, NativeSymbolizer, Reason, Symbolized};
use profiler_trace::{CodeAddress, Frame, FrameKind, Pid, ProcessInfo, SourceLine, Tid, Trace, UserFrame};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Bound on processes the manager did not load (kernel threads, first
/// samples) whose identity is cached here.
const MAX_UNLOADED_PROCESSES: usize = 4096;

/// Bound on the interpreted frames whose last names are kept (see
/// `TraceBuilder::last_names`); emptied when full.
const MAX_LAST_NAMES: usize = 16_384;
/// Bound on the bytes of those names (counted as if none were shared
/// with the namers' caches: a process that rewrites kilobyte names all
/// the time would otherwise keep them alive here); emptied when full.
const MAX_LAST_NAMES_BYTES: usize = 4 << 20;

/// Counts of how the user stacks of the processed samples ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnwindCounts {
    /// Samples whose user stack reached the thread's root.
    pub complete: u64,
    /// Samples with a user stack that ended early.
    pub truncated: u64,
    /// User frames with no known mapping.
    pub unresolved_frames: u64,
    /// Interpreted frame words with a slot coding no unwinder writes.
    pub malformed_frames: u64,
    /// Samples whose user stack was cut at the frame limit (ended with
    /// [`Frame::truncated`]).
    pub frame_limit: u64,
    /// Interpreted frames of a process that had exited by the time they
    /// were named, named as they were in its earlier samples.
    pub named_after_exit: u64,
}

/// A native frame of the last built trace that its file could not name
/// yet (the file still loading, or its load not queued: the queue was
/// full): what naming it again takes ([`TraceBuilder::name_again`]).
#[derive(Clone, Debug)]
pub(crate) struct UnnamedFrame {
    /// Its index in the trace's frames.
    pub index: usize,
    table_key: profiler_trace::TableKey,
    vaddr: u64,
    source: FileSource,
}

#[cfg(test)]
impl UnnamedFrame {
    pub(crate) fn new(index: usize, table_key: profiler_trace::TableKey, vaddr: u64, source: FileSource) -> Self {
        UnnamedFrame { index, table_key, vaddr, source }
    }
}

/// What the symbolizer's answer made of a native frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Naming {
    /// Named (a Go function's frame is then of kind Go).
    Named,
    /// Not yet: its file is loading, or its load could not be queued.
    Later,
    /// Its file cannot name it.
    Never,
}

/// Names `frame` with the symbolizer's `answer` for its address.
fn name_native(frame: &mut Frame, answer: Symbolized) -> Naming {
    match answer {
        Symbolized::Lines { lines, source } => {
            frame.lines = lines.to_vec();
            if source == LineSource::GoPclntab {
                frame.kind = FrameKind::Go;
            }
            Naming::Named
        }
        Symbolized::Pending | Symbolized::Unknown(Reason::QueueFull) => Naming::Later,
        Symbolized::Unknown(_) => Naming::Never,
    }
}

pub(crate) struct TraceBuilder {
    registry: Arc<ProcessRegistry>,
    kernel: Option<KernelSymbolizer>,
    native: NativeSymbolizer,
    // Identity of processes the manager has not loaded.
    unloaded: HashMap<Pid, Arc<ProcessInfo>>,
    // Thread names are few; share one allocation per distinct name.
    names: HashMap<String, Arc<str>>,
    counts: UnwindCounts,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, to date samples.
    realtime_offset_ns: i128,
    /// What the interpreter runtimes found in the files processes map.
    interpreters: Arc<Registry>,
    /// The naming counters of each runtime, by [`RuntimeId`].
    namer_stats: Vec<NamerStats>,
    /// What naming each process's interpreted frames may cost: a process
    /// whose memory is shaped to make it expensive gets its frames
    /// unnamed, and every other process keeps its names.
    naming_budget: ReadBudget,
    /// The lines each interpreted frame word was last named with, by
    /// (pid, word). Names come from the process's memory, which is gone
    /// once it exits, while its last samples (a fraction of a second of
    /// them) are still on their way here: those are named as the same
    /// words were while it ran. Only then: a running process's words are
    /// named from its memory every time (an object's address may be
    /// another's later).
    last_names: HashMap<(u32, u64), Vec<SourceLine>>,
    /// The bytes of `last_names` (see [`MAX_LAST_NAMES_BYTES`]).
    last_names_bytes: usize,
    /// Open files for symbols through `/proc/PID/map_files` (else by
    /// path inside the process's root).
    open_via_map_files: bool,
    /// Environment variables reported of processes read here (those the
    /// manager has not loaded).
    include_env_vars: Arc<[Arc<str>]>,
    /// The native frames of the last built trace whose files could not
    /// name them yet ([`TraceBuilder::take_unnamed`]).
    unnamed: Vec<UnnamedFrame>,
}

impl TraceBuilder {
    pub(crate) fn new(
        registry: Arc<ProcessRegistry>,
        kernel: Option<KernelSymbolizer>,
        native: NativeSymbolizer,
        interpreters: Arc<Registry>,
    ) -> TraceBuilder {
        TraceBuilder {
            namer_stats: interpreters.runtimes().iter().map(|r| r.naming_counters()).collect(),
            naming_budget: ReadBudget::new(BudgetLimits::NAMING, "naming its frames"),
            last_names: HashMap::new(),
            last_names_bytes: 0,
            interpreters,
            registry,
            kernel,
            native,
            unloaded: HashMap::new(),
            names: HashMap::new(),
            counts: UnwindCounts::default(),
            realtime_offset_ns: realtime_offset_ns(),
            open_via_map_files: true,
            include_env_vars: Arc::new([]),
            unnamed: Vec::new(),
        }
    }

    /// See [`crate::AgentConfig::include_env_vars`].
    pub(crate) fn set_include_env_vars(&mut self, names: Arc<[Arc<str>]>) {
        self.include_env_vars = names;
    }

    /// See [`crate::AgentConfig::open_via_map_files`].
    pub(crate) fn set_open_via_map_files(&mut self, on: bool) {
        self.open_via_map_files = on;
    }

    pub(crate) fn counts(&self) -> UnwindCounts {
        self.counts
    }

    /// Installs the symbolizer's file loads that finished (see
    /// [`NativeSymbolizer::install_finished_loads`]).
    pub(crate) fn install_finished_loads(&mut self) {
        self.native.install_finished_loads();
    }

    /// Whether frames would be named later than now: files are being
    /// loaded by the symbolizer (as of the last
    /// [`TraceBuilder::install_finished_loads`] or lookup).
    pub(crate) fn names_pending(&self) -> bool {
        self.native.loads_in_flight() > 0
    }

    /// Changes when the symbolizer installs a load result: frames that
    /// waited for their files may be named then, not before.
    pub(crate) fn loads_installed(&self) -> u64 {
        self.native.loads_installed()
    }

    /// The native frames of the trace [`TraceBuilder::build`] returned
    /// last that their files could not name yet but may in a moment:
    /// the file is loading, or its load could not be queued.
    pub(crate) fn take_unnamed(&mut self) -> Vec<UnnamedFrame> {
        std::mem::take(&mut self.unnamed)
    }

    /// Names again the frames of `trace` in `unnamed` (taken with
    /// [`TraceBuilder::take_unnamed`] when it was built); keeps in
    /// `unnamed` those still waiting for their file. Returns how many
    /// were named.
    pub(crate) fn name_again(&mut self, trace: &mut Trace, unnamed: &mut Vec<UnnamedFrame>) -> usize {
        let mut named = 0;
        unnamed.retain(|u| {
            let Some(frame) = trace.frames.get_mut(u.index) else { return false };
            match name_native(frame, self.native.symbolize(u.table_key, u.vaddr, || u.source.clone())) {
                Naming::Named => {
                    named += 1;
                    false
                }
                Naming::Later => true,
                Naming::Never => false,
            }
        });
        named
    }

    pub(crate) fn native_stats(&self) -> profiler_symbolize::NativeStats {
        self.native.stats()
    }

    pub(crate) fn kernel_stats(&self) -> profiler_symbolize::KernelSymbolizerStats {
        self.kernel.as_ref().map(KernelSymbolizer::stats).unwrap_or_default()
    }

    /// The counters of each runtime's namer, with the kind of its frames.
    pub(crate) fn interpreter_stats(&self) -> Vec<(FrameKind, NamerStats)> {
        let runtimes = self.interpreters.runtimes();
        runtimes.iter().zip(&self.namer_stats).map(|(r, n)| (r.frame_kind(), *n)).collect()
    }

    /// Drops what is kept of processes that exited (those the manager
    /// no longer holds and `/proc` no longer has), and the runtimes'
    /// objects of those that exited a while ago.
    pub(crate) fn forget_exited_processes(&mut self) {
        let registry = &self.registry;
        let alive = |pid: u32| registry.get(Pid(pid)).is_some() || Path::new(&format!("/proc/{pid}")).exists();
        self.interpreters.forget_exited();
        self.last_names.retain(|(pid, _), _| alive(*pid));
        self.last_names_bytes = self.last_names.values().map(|l| lines_bytes(l)).sum();
        self.naming_budget.forget_processes(&alive);
    }

    /// The counters of the naming budget.
    pub(crate) fn budget_stats(&self) -> BudgetStats {
        self.naming_budget.stats()
    }

    /// What to tell of processes over their naming budget (once each).
    pub(crate) fn take_budget_notices(&self) -> Vec<String> {
        self.naming_budget.take_notices()
    }

    pub(crate) fn build(&mut self, sample: &RawSample) -> Trace {
        self.unnamed.clear();
        let pid = Pid(sample.pid);
        let snapshot = self.registry.get(pid);
        let process = match &snapshot {
            Some(s) => s.info.get(&sample.process_comm),
            None => self.unloaded_info(pid, &sample.process_comm),
        };
        let mut frames = Vec::with_capacity(sample.kernel_frames.len() + sample.user_frames.len());
        for (i, &address) in sample.kernel_frames.iter().enumerate() {
            frames.push(self.kernel_frame(CodeAddress::kernel(i, address)));
        }
        let builds = self.prefetch(pid, snapshot.as_deref(), &sample.user_frames);
        // The CPU time naming this sample's interpreted frames takes is
        // charged to the process's budget as it goes (every few reads:
        // the thread's clock is a system call), so that one sample of
        // costly frames cannot spend far beyond it.
        let mut metering = false;
        // Interpreted frames named in this sample, by word: the same word
        // again (a recursion) is the same frame at the same instant, named
        // once (a deep recursion would cost the process's naming budget
        // its reads at every level).
        let mut named_here: HashMap<u64, usize> = HashMap::new();
        // Whether the process has exited: asked once, when a frame
        // cannot be named.
        let mut gone = None;
        for &word in &sample.user_frames {
            match UserFrame::decode(word) {
                UserFrame::Native(pc) => {
                    let frame = self.user_frame(snapshot.as_deref(), pc, frames.len());
                    frames.push(frame);
                    continue;
                }
                UserFrame::Malformed(_) => self.counts.malformed_frames += 1,
                UserFrame::Interpreted { .. } => {}
            }
            let Some(runtime) = self.interpreters.runtime_of_frame(word) else {
                // A frame word no runtime claims: kept, unnamed.
                frames.push(Frame { kind: FrameKind::Native, address: word, mapping: None, lines: vec![] });
                continue;
            };
            if let Some(&at) = named_here.get(&word) {
                let same = frames[at].clone();
                frames.push(same);
                continue;
            }
            if !metering {
                self.naming_budget.start_metering(pid.0);
                metering = true;
            }
            let build = builds.iter().find(|(r, _)| *r == runtime).and_then(|(_, build)| build.clone());
            named_here.insert(word, frames.len());
            frames.push(self.interpreted_frame(pid, runtime, build, word, &mut gone));
        }
        if metering {
            self.naming_budget.stop_metering();
        }
        for (runtime, _) in &builds {
            self.interpreters.runtime(*runtime).name_from_context(&mut frames);
        }
        if sample.off_cpu_ns.is_some() {
            crate::off_cpu::trim_switch_frames(&mut frames);
        }
        if matches!(sample.unwind_stop, UnwindStop::MaxFrames | UnwindStop::TailCalls) && !sample.user_frames.is_empty()
        {
            // The stack goes on: say so where its root would be.
            frames.push(Frame::truncated());
            self.counts.frame_limit += 1;
        }
        if !sample.user_frames.is_empty() {
            if sample.unwind_stop == UnwindStop::Root {
                self.counts.complete += 1;
            } else {
                self.counts.truncated += 1;
            }
        }
        Trace {
            process,
            tid: Tid(sample.tid),
            thread_name: self.intern(&sample.comm),
            cpu: sample.cpu,
            timestamp_unix_ns: (i128::from(sample.ktime_ns) + self.realtime_offset_ns).max(0) as u64,
            frames,
            off_cpu_ns: sample.off_cpu_ns,
            labels: sample.go_labels.iter().map(|(k, v)| (self.intern(k), self.intern(v))).collect(),
        }
    }

    fn unloaded_info(&mut self, pid: Pid, comm: &str) -> Arc<ProcessInfo> {
        // A reused pid most often comes with another name: read again.
        if let Some(info) = self.unloaded.get(&pid) {
            if info.executable_path.is_empty() || info.executable_name.starts_with(comm) {
                return info.clone();
            }
        }
        let info = Arc::new(procfs::read_info(Path::new("/proc"), pid, comm, &self.include_env_vars));
        if self.unloaded.len() >= MAX_UNLOADED_PROCESSES {
            self.unloaded.clear();
        }
        self.unloaded.insert(pid, info.clone());
        info
    }

    /// A user frame, looked up (and reported) at [`CodeAddress::lookup`].
    /// `index` is its place in the trace's frames (recorded when its file
    /// cannot name it yet).
    fn user_frame(&mut self, snapshot: Option<&ProcessSnapshot>, pc: CodeAddress, index: usize) -> Frame {
        let lookup = pc.lookup();
        let Some(resolved) = snapshot.and_then(|s| s.resolve(lookup)) else {
            self.counts.unresolved_frames += 1;
            return Frame { kind: FrameKind::Native, address: lookup, mapping: None, lines: vec![] };
        };
        let mapping = resolved.mapping.clone();
        let Some(vaddr) = resolved.vaddr else {
            // Without the file's segments, the file offset is all we have.
            let address = lookup - mapping.start + mapping.file_offset;
            return Frame { kind: FrameKind::Native, address, mapping: Some(mapping), lines: vec![] };
        };
        let mut frame =
            Frame { kind: FrameKind::Native, address: vaddr, mapping: Some(mapping.clone()), lines: vec![] };
        if let (Some(file), true) = (resolved.file, self.native.enabled()) {
            let pid = snapshot.map(|s| s.info.pid()).unwrap_or(Pid(0));
            let by_map_files = self.open_via_map_files;
            let source = || match &*mapping.path {
                // No file to open: the image in the process's memory.
                "[vdso]" => FileSource::in_memory(pid, mapping.start, mapping.end, &mapping.path),
                // The file analysed, and nothing else: its inode and version
                // are checked when it is opened.
                path if by_map_files => FileSource::in_mapping(pid, mapping.start, mapping.end, path)
                    .with_identity(file.identity)
                    .with_handle(file.handle.clone()),
                path => FileSource::in_process(pid, path).with_identity(file.identity).with_handle(file.handle.clone()),
            };
            // The symbolizer loads a file's symbols first (milliseconds)
            // and answers from them while its DWARF loads; until then
            // (Pending) the frame keeps its address, and is recorded to
            // be named again once the file is in.
            let mut opened = None;
            let opener = || opened.insert(source()).clone();
            if name_native(&mut frame, self.native.symbolize(file.table_key, vaddr, opener)) == Naming::Later {
                let source = opened.unwrap_or_else(source);
                self.unnamed.push(UnnamedFrame { index, table_key: file.table_key, vaddr, source });
            }
        }
        frame
    }

    /// The object of each runtime with frames in a sample's
    /// `user_frames`, for the process it maps; each is given its frame
    /// words before it is asked to name them (it reads what it can of
    /// them together: one system call rather than one a frame), its CPU
    /// time charged to the process's naming budget.
    fn prefetch(
        &self,
        pid: Pid,
        snapshot: Option<&ProcessSnapshot>,
        user_frames: &[u64],
    ) -> Vec<(RuntimeId, Option<ProcessObject>)> {
        let mut words: Vec<(RuntimeId, Vec<u64>)> = Vec::new();
        for &word in user_frames {
            if matches!(UserFrame::decode(word), UserFrame::Native(_)) {
                continue;
            }
            let Some(runtime) = self.interpreters.runtime_of_frame(word) else { continue };
            match words.iter_mut().find(|(r, _)| *r == runtime) {
                Some((_, of_runtime)) => of_runtime.push(word),
                None => words.push((runtime, vec![word])),
            }
        }
        if words.is_empty() {
            return Vec::new();
        }
        let budget = &self.naming_budget;
        budget.start_metering(pid.0);
        let builds = words
            .into_iter()
            .map(|(runtime, words)| {
                let build = self.interpreter_build(runtime, snapshot);
                if let Some(object) = build.as_ref().filter(|_| budget.allows(pid.0)) {
                    self.interpreters.prefetch(object, &budget.memory(pid.0, &PidMemory(pid.0)), &words);
                }
                (runtime, build)
            })
            .collect();
        budget.stop_metering();
        builds
    }

    /// The object of `runtime` for `snapshot`'s process, attached for a
    /// build it maps.
    fn interpreter_build(&self, runtime: RuntimeId, snapshot: Option<&ProcessSnapshot>) -> Option<ProcessObject> {
        let snapshot = snapshot?;
        let maps = |key: &profiler_trace::TableKey| {
            snapshot.mappings.iter().any(|m| m.file.as_ref().is_some_and(|f| f.table_key == *key))
        };
        self.interpreters.find(runtime, snapshot.info.pid().0, maps)
    }

    /// An interpreted frame, named by its runtime from the process's
    /// memory (unnamed when it cannot be: the process exited, or the
    /// frame was garbage). Its address is the frame word's payload as
    /// the runtime's unwinder recorded it.
    fn interpreted_frame(
        &mut self,
        pid: Pid,
        runtime: RuntimeId,
        build: Option<ProcessObject>,
        word: u64,
        gone: &mut Option<bool>,
    ) -> Frame {
        let kind = self.interpreters.runtime(runtime).frame_kind();
        let address = self.interpreters.runtime(runtime).frame_address(word);
        let stats = &mut self.namer_stats[runtime.index()];
        let budget = &self.naming_budget;
        let mut lines = match build {
            Some(object) if budget.allows(pid.0) => {
                self.interpreters.lines(&object, &budget.memory(pid.0, &PidMemory(pid.0)), word, stats)
            }
            _ => vec![],
        };
        if lines.is_empty() && *gone.get_or_insert_with(|| process_gone(pid)) {
            if let Some(last) = self.last_names.get(&(pid.0, word)) {
                lines = last.clone();
                self.counts.named_after_exit += 1;
            }
        } else if !lines.is_empty() && self.last_names.get(&(pid.0, word)) != Some(&lines) {
            let bytes = lines_bytes(&lines);
            if self.last_names.len() >= MAX_LAST_NAMES || self.last_names_bytes + bytes > MAX_LAST_NAMES_BYTES {
                self.last_names.clear();
                self.last_names_bytes = 0;
            }
            if let Some(old) = self.last_names.insert((pid.0, word), lines.clone()) {
                self.last_names_bytes -= lines_bytes(&old);
            }
            self.last_names_bytes += bytes;
        }
        if lines.is_empty() {
            if let Some(name) = self.interpreters.runtime(runtime).unnamed_frame(word) {
                lines.push(SourceLine { function: self.intern(name), file: None, line: 0, approximate: false });
            }
        }
        Frame { kind, address, mapping: None, lines }
    }

    /// A kernel frame, named by the kernel symbolizer (which caches its
    /// names: the one cache of kernel names).
    fn kernel_frame(&mut self, pc: CodeAddress) -> Frame {
        let function = self.kernel.as_mut().and_then(|k| k.function(pc.lookup()));
        let lines = function
            .map(|function| vec![SourceLine { function, file: None, line: 0, approximate: false }])
            .unwrap_or_default();
        Frame { kind: FrameKind::Kernel, address: pc.pc, mapping: None, lines }
    }

    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        if self.names.len() < 65_536 {
            self.names.insert(name.to_owned(), n.clone());
        }
        n
    }
}

/// Whether `pid` has exited: its `/proc` entry gone, or a zombie (its
/// memory is gone).
fn process_gone(pid: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", pid.0)) else { return true };
    // The state follows the command's closing parenthesis.
    matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z' | 'X'))
}

/// What `lines` costs kept in `TraceBuilder::last_names`, its strings
/// counted in full.
fn lines_bytes(lines: &[SourceLine]) -> usize {
    let strings: usize = lines.iter().map(|l| l.function.len() + l.file.as_ref().map_or(0, |f| f.len())).sum();
    std::mem::size_of::<(u32, u64, Vec<SourceLine>)>() + std::mem::size_of_val(lines) + strings
}

fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// bpf_ktime_get_ns() reads CLOCK_MONOTONIC; this turns it into wall time.
fn realtime_offset_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_MONOTONIC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sample as sample;
    use profiler_bpf::FRAME_INTERPRETED;
    use profiler_interpreters::Registry;
    use profiler_symbolize::{NativeConfig, NativeSymbolizer};

    #[test]
    fn malformed_frame_words_are_kept_unnamed_and_counted() {
        let native = NativeSymbolizer::new(NativeConfig { enabled: false, ..NativeConfig::default() }).expect("new");
        let mut builder =
            TraceBuilder::new(Arc::new(ProcessRegistry::new()), None, native, Arc::new(Registry::default()));
        // Compact slot field 1: no unwinder writes it.
        let malformed = FRAME_INTERPRETED | (1 << 60) | (1 << 57) | 0x40;
        // A valid word of a slot no runtime registered here.
        let unclaimed = UserFrame::interpreted_word(200, 0x40);
        let trace = builder.build(&RawSample { user_frames: vec![malformed, unclaimed, 0x1000], ..sample(1, 0) });
        assert_eq!(trace.frames.len(), 3);
        assert_eq!(trace.frames[0].address, malformed);
        assert_eq!(trace.frames[1].address, unclaimed);
        assert_eq!(builder.counts().malformed_frames, 1);
    }
}
