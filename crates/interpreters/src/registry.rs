//! The one record of the interpreters found in files: written where
//! files are analysed and loaded (the process manager), read where frames
//! are named (the trace builder).
//!
//! A file's entry lives from its analysis to its unloading: the process
//! manager unloads a file when no process maps it any more (or at stop).
//! A file analysed but never loaded is forgotten at the next analysis
//! (the manager loads a file right after analysing it, or not at all).
//! The number of entries is bounded; files beyond are profiled as native
//! code and counted.
//!
//! Each process mapping a loaded build gets the runtime's object for it
//! ([`RuntimeProcess`], made by [`InterpreterFile::attach`]), which holds
//! the build and names the process's frames. It lives while the process
//! maps the file; when the process exits, samples taken before may still
//! be in the reporter's queue, so its objects are kept for naming a
//! little longer (at most [`MAX_EXITED`] processes, [`EXITED_FOR`]), then
//! dropped. What the objects of one runtime cache is counted together
//! against the runtime's [`Runtime::cache_bound`]: past it, every one of
//! them empties its caches (counted in [`RuntimeStats::cache_clears`]).

use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use crate::runtime::{
    Attach, CacheUse, ExecutableMapping, FileDetection, InterpreterFile, NamerStats, ProcessUnwinding, Runtime,
    RuntimeProcess,
};
use profiler_bpf::InterpreterUnwinder;
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine, TableKey};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most files with an interpreter held at once.
pub const MAX_INTERPRETER_FILES: usize = 4096;
/// Most exited processes whose objects are kept for naming the samples
/// still queued.
pub const MAX_EXITED: usize = 256;
/// How long an exited process's objects are kept for them.
pub const EXITED_FOR: Duration = Duration::from_secs(30);
/// Most processes whose runtime objects ([`InterpreterFile::attach`])
/// are kept.
pub const MAX_ATTACHED_PROCESSES: usize = 16_384;
/// Most files with an unsupported build remembered (each is told once).
const MAX_REPORTED: usize = 4096;

/// A registered runtime: its index in [`Registry::runtimes`] (only the
/// registry makes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuntimeId(usize);

impl RuntimeId {
    /// Its index in [`Registry::runtimes`].
    pub fn index(self) -> usize {
        self.0
    }
}

/// Counters of one runtime in a [`Registry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeStats {
    /// [`Runtime::name`].
    pub name: &'static str,
    /// [`Runtime::frame_kind`].
    pub frame_kind: FrameKind,
    /// [`Runtime::unwinder`].
    pub unwinder: InterpreterUnwinder,
    /// Loaded files holding a build it unwinds, now.
    pub files: u64,
    /// Files holding a build it does not unwind (told once each).
    pub unsupported: u64,
    /// `unsupported` and `attach_failures` together, by reason: one per
    /// [`Refusal::COUNTERS`] (`refused_*`).
    pub refused_by_reason: [u64; Refusal::COUNTERS.len()],
    /// Processes whose state could not be read (their frames stay
    /// unnamed).
    pub attach_failures: u64,
    /// Times its process objects emptied their caches, together, at its
    /// [`Runtime::cache_bound`].
    pub cache_clears: u64,
}

/// What [`Registry::inspect`] found in a file.
#[derive(Debug, PartialEq, Eq)]
pub enum Inspection {
    /// No runtime.
    Nothing,
    /// A build of the runtime, held until the file is unloaded.
    Found(RuntimeId),
    /// A build not to unwind; `notice` is set the first time the file is
    /// seen (what to tell the user, once).
    Unsupported {
        /// The runtime.
        runtime: RuntimeId,
        /// "CPython 3.99 in /usr/bin/python3.99 is not supported (...)".
        notice: Option<String>,
    },
    /// A build to unwind, but the registry is full: profiled as native.
    Dropped(RuntimeId),
}

struct Entry {
    runtime: RuntimeId,
    file: Arc<dyn InterpreterFile>,
    loaded: bool,
}

/// A runtime's object for one process, shared by the process manager
/// ([`RuntimeProcess::sync`]) and the trace builder (naming).
type Shared = Arc<Mutex<Slot>>;

struct Slot {
    object: Box<dyn RuntimeProcess>,
    /// Dropped by the registry (the process exited or unmapped the file)
    /// while a sample being named still holds it: no longer counted, and
    /// it caches nothing more.
    released: bool,
}

/// A file a process maps, and its runtime's object for the process.
struct Attached {
    file: TableKey,
    bias: u64,
    runtime: RuntimeId,
    /// `None`: attaching failed; not tried again while the process maps
    /// the file so.
    process: Option<Shared>,
}

/// A runtime's object for one process ([`Registry::find`]), to name its
/// frames with ([`Registry::lines`]).
#[derive(Clone)]
pub struct ProcessObject {
    runtime: RuntimeId,
    process: Shared,
}

#[derive(Default)]
struct State {
    files: HashMap<TableKey, Entry>,
    reported: HashSet<TableKey>,
    /// Builds whose failure to attach was told.
    attach_told: HashSet<TableKey>,
    /// Per process, the files it maps that hold loaded builds.
    processes: HashMap<u32, Vec<Attached>>,
    /// Exited processes' objects, oldest first, with when they exited.
    exited: VecDeque<(u32, Vec<Attached>, Instant)>,
    /// Processes with a build that was not ready to attach at the last
    /// [`Registry::process_mapped`] (bounded as `processes`).
    not_yet: HashSet<u32>,
    unsupported: Vec<u64>,
    attach_failures: Vec<u64>,
    refused_by_reason: Vec<[u64; Refusal::COUNTERS.len()]>,
    cache_clears: Vec<u64>,
    dropped: u64,
}

/// What the objects of one runtime cache now, together.
#[derive(Default)]
struct CacheCount {
    entries: AtomicUsize,
    bytes: AtomicUsize,
}

/// The registered runtimes and the builds they found in the files
/// processes map now.
pub struct Registry {
    runtimes: Vec<Box<dyn Runtime>>,
    state: Mutex<State>,
    /// By [`RuntimeId`]: what its objects cache (changed under each
    /// object's lock, with the change it counts).
    cached: Vec<CacheCount>,
}

fn lock_slot(slot: &Shared) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// A registry of `runtimes` (see [`crate::runtimes`]).
    pub fn new(runtimes: Vec<Box<dyn Runtime>>) -> Registry {
        let state = State {
            unsupported: vec![0; runtimes.len()],
            attach_failures: vec![0; runtimes.len()],
            refused_by_reason: vec![[0; Refusal::COUNTERS.len()]; runtimes.len()],
            cache_clears: vec![0; runtimes.len()],
            ..State::default()
        };
        let cached = runtimes.iter().map(|_| CacheCount::default()).collect();
        Registry { runtimes, state: Mutex::new(state), cached }
    }

    /// `slot`'s cache went from `before` to what it holds now.
    fn count(&self, runtime: RuntimeId, slot: &Slot, before: CacheUse) {
        if slot.released {
            return;
        }
        let (c, after) = (&self.cached[runtime.0], slot.object.cached());
        // Added first: the count never goes below zero.
        c.entries.fetch_add(after.entries, Ordering::Relaxed);
        c.entries.fetch_sub(before.entries, Ordering::Relaxed);
        c.bytes.fetch_add(after.bytes, Ordering::Relaxed);
        c.bytes.fetch_sub(before.bytes, Ordering::Relaxed);
    }

    /// What `runtime`'s objects cache now.
    pub fn cached(&self, runtime: RuntimeId) -> CacheUse {
        let c = &self.cached[runtime.0];
        CacheUse { entries: c.entries.load(Ordering::Relaxed), bytes: c.bytes.load(Ordering::Relaxed) }
    }

    /// Objects the registry no longer holds: their caches emptied and no
    /// longer counted (a sample being named may hold one a moment more).
    fn release(&self, dropped: impl IntoIterator<Item = Attached>) {
        for a in dropped {
            let Some(process) = a.process else { continue };
            let mut slot = lock_slot(&process);
            self.clear_slot(a.runtime, &mut slot);
            let left = slot.object.cached();
            let c = &self.cached[a.runtime.0];
            c.entries.fetch_sub(left.entries, Ordering::Relaxed);
            c.bytes.fetch_sub(left.bytes, Ordering::Relaxed);
            slot.released = true;
        }
    }

    /// Empties `slot`'s caches, counted.
    fn clear_slot(&self, runtime: RuntimeId, slot: &mut Slot) {
        let before = slot.object.cached();
        slot.object.clear();
        self.count(runtime, slot, before);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registered runtimes, by [`RuntimeId`].
    pub fn runtimes(&self) -> &[Box<dyn Runtime>] {
        &self.runtimes
    }

    /// The runtime `id`.
    pub fn runtime(&self, id: RuntimeId) -> &dyn Runtime {
        &*self.runtimes[id.0]
    }

    /// Looks for every runtime in a file just analysed (the first that
    /// recognises it wins) and holds what it found until
    /// [`Registry::file_loaded`] or the next inspection.
    pub fn inspect(&self, file_id: TableKey, elf: &ElfFile, path: &str) -> Inspection {
        let markers: Vec<&str> = self.runtimes.iter().flat_map(|r| r.marker_symbols().iter().copied()).collect();
        let defined = elf.defines_symbols(&markers);
        let mut next_marker = 0;
        let found = self.runtimes.iter().enumerate().find_map(|(i, r)| {
            let count = r.marker_symbols().len();
            let marked = count == 0 || defined[next_marker..next_marker + count].iter().any(|&d| d);
            next_marker += count;
            if !marked {
                return None;
            }
            match r.detect_file(elf, path) {
                FileDetection::NotFound => None,
                other => Some((RuntimeId(i), other)),
            }
        });
        let mut state = self.lock();
        // An earlier file analysed and never loaded is not coming.
        state.files.retain(|id, e| e.loaded || *id == file_id);
        let Some((runtime, detection)) = found else { return Inspection::Nothing };
        match detection {
            FileDetection::NotFound => Inspection::Nothing,
            FileDetection::Found(file) => {
                if state.files.len() >= MAX_INTERPRETER_FILES && !state.files.contains_key(&file_id) {
                    state.dropped += 1;
                    return Inspection::Dropped(runtime);
                }
                state.files.insert(file_id, Entry { runtime, file, loaded: false });
                Inspection::Found(runtime)
            }
            FileDetection::Unsupported { version, reason } => {
                if state.reported.len() >= MAX_REPORTED {
                    state.reported.clear();
                }
                if !state.reported.insert(file_id) {
                    return Inspection::Unsupported { runtime, notice: None };
                }
                state.unsupported[runtime.0] += 1;
                state.refused_by_reason[runtime.0][reason.index()] += 1;
                let name = self.runtimes[runtime.0].name();
                let version = version.unwrap_or_else(|| "of unknown version".to_string());
                let notice = format!(
                    "{name} {version} in {path} is not supported ({reason}): its frames are profiled as native code"
                );
                Inspection::Unsupported { runtime, notice: Some(notice) }
            }
        }
    }

    /// The file's tables are loaded: its build, if it holds one, is in
    /// use from now on (its BPF map entry is to be set).
    pub fn file_loaded(&self, file_id: TableKey) -> Option<Arc<dyn InterpreterFile>> {
        let mut state = self.lock();
        let entry = state.files.get_mut(&file_id)?;
        entry.loaded = true;
        Some(entry.file.clone())
    }

    /// The file is unloaded (no process maps it), or its build could not
    /// be loaded: it is no longer [loaded](Registry::loaded) (the objects
    /// of processes that mapped it, kept a while after they exit, hold
    /// its build for naming the samples already taken). Returns what was
    /// held.
    pub fn file_unloaded(&self, file_id: TableKey) -> Option<Arc<dyn InterpreterFile>> {
        Some(self.lock().files.remove(&file_id)?.file)
    }

    /// The build in a loaded file, if any.
    pub fn loaded(&self, file_id: &TableKey) -> Option<Arc<dyn InterpreterFile>> {
        self.lock().files.get(file_id).filter(|e| e.loaded).map(|e| e.file.clone())
    }

    /// The object of `runtime` for process `pid` (a live process first,
    /// else one that exited lately), attached for a file that `maps`
    /// (the files the process maps, as the trace builder knows them):
    /// for naming frames. Asks `maps` only of that pid's objects of that
    /// runtime, so nothing is collected under the lock.
    pub fn find(&self, runtime: RuntimeId, pid: u32, maps: impl Fn(&TableKey) -> bool) -> Option<ProcessObject> {
        let state = self.lock();
        if state.processes.is_empty() && state.exited.is_empty() {
            return None;
        }
        let live = state.processes.get(&pid).into_iter().flatten();
        let exited = state.exited.iter().rev().filter(|(p, _, _)| *p == pid).flat_map(|(_, a, _)| a);
        live.chain(exited).filter(|a| a.runtime == runtime && maps(&a.file)).find_map(|a| {
            let process = a.process.clone()?;
            Some(ProcessObject { runtime, process })
        })
    }

    /// The lines of frame `word` (of `object`'s runtime), named by
    /// `object` ([`RuntimeProcess::lines`]) from `memory`, counted in
    /// `stats`. What the object caches is counted; past its runtime's
    /// bound, every object of the runtime empties its caches.
    pub fn lines(
        &self,
        object: &ProcessObject,
        memory: &dyn ProcessMemory,
        word: u64,
        stats: &mut NamerStats,
    ) -> Vec<SourceLine> {
        self.with_object(object, |o| o.lines(memory, word, stats))
    }

    /// Gives `object` the words of one sample it is about to name
    /// ([`RuntimeProcess::prefetch`]), counted as [`Registry::lines`]
    /// counts.
    pub fn prefetch(&self, object: &ProcessObject, memory: &dyn ProcessMemory, words: &[u64]) {
        self.with_object(object, |o| o.prefetch(memory, words));
    }

    /// Runs `f` on `object` under its lock, with what it caches counted;
    /// past its runtime's bound, every object of the runtime empties its
    /// caches.
    fn with_object<T>(&self, object: &ProcessObject, f: impl FnOnce(&mut dyn RuntimeProcess) -> T) -> T {
        let runtime = object.runtime;
        let out = {
            let mut slot = lock_slot(&object.process);
            let before = slot.object.cached();
            let out = f(&mut *slot.object);
            if slot.released {
                slot.object.clear();
            }
            self.count(runtime, &slot, before);
            out
        };
        let bound = self.runtimes[runtime.0].cache_bound();
        if self.cached(runtime).exceeds(bound) {
            self.clear_caches(runtime, &object.process, bound);
        }
        out
    }

    /// Empties the caches of `runtime`'s objects, `keep`'s last (the one
    /// naming now: emptied only if it alone is past `bound`).
    fn clear_caches(&self, runtime: RuntimeId, keep: &Shared, bound: CacheUse) {
        let objects: Vec<Shared> = {
            let mut state = self.lock();
            state.cache_clears[runtime.0] += 1;
            let live = state.processes.values().flatten();
            let exited = state.exited.iter().flat_map(|(_, a, _)| a);
            live.chain(exited).filter(|a| a.runtime == runtime).filter_map(|a| a.process.clone()).collect()
        };
        let clear = |process: &Shared| self.clear_slot(runtime, &mut lock_slot(process));
        objects.iter().filter(|o| !Arc::ptr_eq(o, keep)).for_each(clear);
        if self.cached(runtime).exceeds(bound) {
            clear(keep);
        }
    }

    /// Process `pid` maps `files` (file, bias) now, and only them: the
    /// objects of files it no longer maps so go, and each loaded build
    /// without an object for the process (nor a failure to make one) makes
    /// it ([`InterpreterFile::attach`], outside the lock).
    ///
    /// Returns a notice for each build that failed to attach for the
    /// first time (once per build: the process's frames of it stay
    /// native code, as an unsupported build's).
    pub fn process_mapped(&self, pid: u32, files: &[(TableKey, u64)], memory: &dyn ProcessMemory) -> Vec<String> {
        let mut unmapped = Vec::new();
        let todo: Vec<(TableKey, u64, RuntimeId, Arc<dyn InterpreterFile>)> = {
            let mut state = self.lock();
            if let Some(attached) = state.processes.get_mut(&pid) {
                let (kept, gone) =
                    std::mem::take(attached).into_iter().partition(|a| files.contains(&(a.file, a.bias)));
                *attached = kept;
                unmapped = gone;
                if attached.is_empty() {
                    state.processes.remove(&pid);
                }
            }
            let attached = state.processes.get(&pid);
            let mut seen = HashSet::new();
            files
                .iter()
                .filter(|(id, _)| seen.insert(*id))
                .filter(|(id, _)| !attached.is_some_and(|a| a.iter().any(|a| a.file == *id)))
                .filter_map(|(id, bias)| {
                    let e = state.files.get(id).filter(|e| e.loaded)?;
                    Some((*id, *bias, e.runtime, e.file.clone()))
                })
                .collect()
        };
        self.release(unmapped);
        let mut notices = Vec::new();
        let mut not_yet = false;
        for (id, bias, runtime, file) in todo {
            let (kept, failure) = match file.attach(pid, memory, bias) {
                // Not kept: asked again at the next change of mappings,
                // or when the caller asks again (`attach_pending`).
                Attach::NotYet => {
                    not_yet = true;
                    continue;
                }
                Attach::Attached(object) => (Some(Arc::new(Mutex::new(Slot { object, released: false }))), None),
                Attach::Failed(reason) => (None, Some(reason)),
            };
            let mut state = self.lock();
            if let Some(reason) = failure {
                state.attach_failures[runtime.0] += 1;
                state.refused_by_reason[runtime.0][reason.index()] += 1;
                if state.attach_told.len() >= MAX_REPORTED {
                    state.attach_told.clear();
                }
                if state.attach_told.insert(id) {
                    let name = self.runtimes[runtime.0].name();
                    notices.push(format!(
                        "{name} in process {pid} is not read ({reason}): its frames are profiled as native code \
                         (told once per build)"
                    ));
                }
            }
            if state.processes.len() >= MAX_ATTACHED_PROCESSES && !state.processes.contains_key(&pid) {
                state.dropped += 1;
                continue;
            }
            if let Some(process) = &kept {
                self.count(runtime, &lock_slot(process), CacheUse::default());
            }
            state.processes.entry(pid).or_default().push(Attached { file: id, bias, runtime, process: kept });
        }
        let mut state = self.lock();
        if !not_yet {
            state.not_yet.remove(&pid);
        } else if state.not_yet.len() < MAX_ATTACHED_PROCESSES {
            state.not_yet.insert(pid);
        } else {
            state.dropped += 1;
        }
        notices
    }

    /// Whether a build `pid` maps was not ready to attach at the last
    /// [`Registry::process_mapped`] (a JVM still starting): the caller
    /// asks again later, its mappings unchanged.
    pub fn attach_pending(&self, pid: u32) -> bool {
        self.lock().not_yet.contains(&pid)
    }

    /// What the unwinders need of process `pid`, from each object
    /// attached to it ([`RuntimeProcess::sync`], outside the registry's
    /// lock).
    pub fn process_unwinding(
        &self,
        pid: u32,
        memory: &dyn ProcessMemory,
        maps: &[ExecutableMapping<'_>],
    ) -> Vec<ProcessUnwinding> {
        let attached: Vec<(RuntimeId, Shared)> = {
            let state = self.lock();
            let Some(files) = state.processes.get(&pid) else { return Vec::new() };
            files.iter().filter_map(|a| Some((a.runtime, a.process.clone()?))).collect()
        };
        attached
            .iter()
            .filter_map(|(runtime, process)| {
                let mut slot = lock_slot(process);
                let before = slot.object.cached();
                let unwinding = slot.object.sync(memory, maps);
                self.count(*runtime, &slot, before);
                unwinding
            })
            .collect()
    }

    /// Whether a build `pid` maps is attached to it (has an object).
    pub fn is_attached(&self, pid: u32) -> bool {
        self.lock().processes.get(&pid).is_some_and(|files| files.iter().any(|a| a.process.is_some()))
    }

    /// Process `pid` is gone: its objects are kept a while for naming
    /// the samples already taken ([`MAX_EXITED`], [`EXITED_FOR`]), then
    /// dropped.
    pub fn process_removed(&self, pid: u32) {
        let mut dropped = Vec::new();
        {
            let mut state = self.lock();
            state.not_yet.remove(&pid);
            if let Some(attached) = state.processes.remove(&pid) {
                if state.exited.len() >= MAX_EXITED {
                    dropped.extend(state.exited.pop_front().into_iter().flat_map(|(_, a, _)| a));
                }
                state.exited.push_back((pid, attached, Instant::now()));
            }
            dropped.extend(Self::expired(&mut state));
        }
        self.release(dropped);
    }

    /// Drops the objects of the processes that exited more than
    /// [`EXITED_FOR`] ago (also done as processes exit).
    pub fn forget_exited(&self) {
        let expired = Self::expired(&mut self.lock());
        self.release(expired);
    }

    fn expired(state: &mut State) -> Vec<Attached> {
        let now = Instant::now();
        let mut expired = Vec::new();
        while state.exited.front().is_some_and(|(_, _, at)| now.duration_since(*at) > EXITED_FOR) {
            expired.extend(state.exited.pop_front().into_iter().flat_map(|(_, a, _)| a));
        }
        expired
    }

    /// Processes with something kept of them.
    pub fn attached_processes(&self) -> usize {
        self.lock().processes.len()
    }

    /// The runtime whose unwinder recorded a user frame word, if any.
    pub fn runtime_of_frame(&self, word: u64) -> Option<RuntimeId> {
        self.runtimes.iter().position(|r| r.owns_frame(word)).map(RuntimeId)
    }

    /// Files held (loaded or just analysed; not the unloaded ones kept
    /// for naming).
    pub fn len(&self) -> usize {
        self.lock().files.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.lock().files.is_empty()
    }

    /// Builds to unwind, or processes' states, not held because the
    /// registry was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Counters of each runtime, by [`RuntimeId`].
    pub fn stats(&self) -> Vec<RuntimeStats> {
        let state = self.lock();
        let mut files = vec![0u64; self.runtimes.len()];
        for e in state.files.values().filter(|e| e.loaded) {
            files[e.runtime.0] += 1;
        }
        self.runtimes
            .iter()
            .enumerate()
            .map(|(i, r)| RuntimeStats {
                name: r.name(),
                frame_kind: r.frame_kind(),
                unwinder: r.unwinder(),
                files: files[i],
                unsupported: state.unsupported[i],
                attach_failures: state.attach_failures[i],
                refused_by_reason: state.refused_by_reason[i],
                cache_clears: state.cache_clears[i],
            })
            .collect()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.runtimes.iter().map(|r| r.name()).collect();
        f.debug_struct("Registry").field("runtimes", &names).field("files", &self.len()).finish()
    }
}

impl Default for Registry {
    /// Every runtime of [`crate::runtimes`].
    fn default() -> Registry {
        Registry::new(crate::runtimes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::RuntimeMapValue;
    use std::sync::atomic::AtomicU32;

    /// Attachments, by the number of the fake file.
    type Attaches = Arc<[AtomicU32; 8]>;

    /// A runtime found in files by their path: "fake<n>" is one to
    /// unwind, "old" one that is not. Its objects cache one entry per
    /// word they name, at most `bound` together.
    #[derive(Default)]
    struct Fake {
        attaches: Attaches,
        bound: Option<usize>,
    }

    /// Its number says what it needs per process: 1 fails... see
    /// `attach`; it counts its attachments.
    #[derive(Debug)]
    struct FakeFile(u64, Attaches);

    /// What a fake file keeps of a process, and the words it named.
    struct FakeProcess {
        pid: u32,
        bias: u64,
        words: HashSet<u64>,
    }

    impl InterpreterFile for FakeFile {
        fn unwinder(&self) -> InterpreterUnwinder {
            InterpreterUnwinder::Python
        }
        fn loop_ranges(&self) -> &[(u64, u64)] {
            &[]
        }
        fn file_value(&self) -> Option<RuntimeMapValue> {
            unreachable!("not loaded in these tests")
        }
        fn attach(self: Arc<Self>, pid: u32, _memory: &dyn ProcessMemory, bias: u64) -> Attach {
            self.1[self.0 as usize % 8].fetch_add(1, Ordering::Relaxed);
            match self.0 {
                2 => Attach::Failed(Refusal::Unreadable("the state")),
                3 => Attach::NotYet,
                _ => Attach::Attached(Box::new(FakeProcess { pid, bias, words: HashSet::new() })),
            }
        }
    }

    impl RuntimeProcess for FakeProcess {
        fn lines(&mut self, _memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
            stats.frames += 1;
            self.words.insert(word);
            let function = format!("{}:{:#x}", self.pid, self.bias).into();
            vec![SourceLine { function, file: None, line: word as u32, approximate: false }]
        }
        fn prefetch(&mut self, _memory: &dyn ProcessMemory, words: &[u64]) {
            self.words.extend(words);
        }
        fn sync(&mut self, _memory: &dyn ProcessMemory, _maps: &[ExecutableMapping<'_>]) -> Option<ProcessUnwinding> {
            let value =
                RuntimeMapValue::new(InterpreterUnwinder::Hotspot, &profiler_contract::c::hotspot_process::default());
            Some(ProcessUnwinding::new(InterpreterUnwinder::Hotspot, vec![(self.bias, self.bias + 0x100)], value))
        }
        fn cached(&self) -> CacheUse {
            CacheUse { entries: self.words.len(), bytes: 8 * self.words.len() }
        }
        fn clear(&mut self) {
            self.words.clear();
        }
    }

    impl Runtime for Fake {
        fn name(&self) -> &'static str {
            "Fake"
        }
        fn frame_kind(&self) -> FrameKind {
            FrameKind::Ruby
        }
        fn unwinder(&self) -> InterpreterUnwinder {
            InterpreterUnwinder::Hotspot
        }
        fn owns_frame(&self, word: u64) -> bool {
            word == 7
        }
        fn frame_address(&self, word: u64) -> u64 {
            word
        }
        fn detect_file(&self, _elf: &ElfFile, path: &str) -> FileDetection {
            match path.strip_prefix("fake") {
                Some(n) => FileDetection::Found(Arc::new(FakeFile(n.parse().unwrap_or(0), self.attaches.clone()))),
                None if path.starts_with("old") => FileDetection::Unsupported {
                    version: Some("0.1".into()),
                    reason: Refusal::Version { supported: "1 to 2".into() },
                },
                None => FileDetection::NotFound,
            }
        }
        fn cache_bound(&self) -> CacheUse {
            CacheUse::entries(self.bound.unwrap_or(usize::MAX))
        }
    }

    struct Named(&'static str);
    impl Runtime for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn frame_kind(&self) -> FrameKind {
            FrameKind::Php
        }
        fn unwinder(&self) -> InterpreterUnwinder {
            InterpreterUnwinder::Python
        }
        fn owns_frame(&self, word: u64) -> bool {
            word == 9
        }
        fn frame_address(&self, word: u64) -> u64 {
            word
        }
        fn detect_file(&self, _elf: &ElfFile, _path: &str) -> FileDetection {
            FileDetection::NotFound
        }
        fn cache_bound(&self) -> CacheUse {
            CacheUse::default()
        }
    }

    fn elf() -> ElfFile {
        ElfFile::open(std::fs::read_link("/proc/self/exe").unwrap()).unwrap()
    }

    fn key(n: u64) -> TableKey {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&n.to_le_bytes());
        TableKey(b)
    }

    fn registry() -> Registry {
        Registry::new(vec![Box::new(Named("Other")), Box::new(Fake::default())])
    }

    /// The registry, and the attachments of its fake runtime's files.
    fn counting(bound: Option<usize>) -> (Registry, Attaches) {
        let fake = Fake { bound, ..Fake::default() };
        let attaches = fake.attaches.clone();
        (Registry::new(vec![Box::new(Named("Other")), Box::new(fake)]), attaches)
    }

    /// The function `r` names word 7 of `pid` with, by the object of the
    /// fake runtime attached for file `k`.
    fn named(r: &Registry, pid: u32, k: u64) -> Option<String> {
        let object = r.find(RuntimeId(1), pid, |f: &TableKey| *f == key(k))?;
        let memory = crate::memory::fake::FakeMemory::default();
        let lines = r.lines(&object, &memory, 7, &mut NamerStats::default());
        Some(lines[0].function.to_string())
    }

    #[test]
    fn a_file_lives_from_its_load_to_its_unload() {
        let (r, elf) = (registry(), elf());
        let memory = crate::memory::fake::FakeMemory::default();
        assert_eq!(r.inspect(key(1), &elf, "fake1"), Inspection::Found(RuntimeId(1)));
        assert!(r.loaded(&key(1)).is_none(), "not loaded yet");
        r.process_mapped(1, &[(key(1), 0x10)], &memory);
        assert!(named(&r, 1, 1).is_none(), "no process is attached to an unloaded file");
        assert!(r.file_loaded(key(1)).is_some());
        r.process_mapped(1, &[(key(1), 0x10)], &memory);
        assert_eq!(named(&r, 1, 1).as_deref(), Some("1:0x10"));
        assert!(r.find(RuntimeId(1), 1, |f: &TableKey| *f == key(9)).is_none(), "a file the process does not map");
        assert!(r.find(RuntimeId(0), 1, |f: &TableKey| *f == key(1)).is_none(), "another runtime's file");
        assert_eq!(r.stats()[1].files, 1);
        assert!(r.file_unloaded(key(1)).is_some());
        assert!(r.loaded(&key(1)).is_none());
        assert!(r.is_empty(), "an unloaded file is forgotten");
        assert_eq!(r.stats()[1].files, 0);
        assert_eq!(named(&r, 1, 1).as_deref(), Some("1:0x10"), "its process's object holds the build");
        assert!(r.file_unloaded(key(1)).is_none(), "unloaded once");
        assert_eq!(r.inspect(key(2), &elf, "native"), Inspection::Nothing);
        assert!(r.is_empty());
    }

    /// `Fake` behind marker symbols: asked only about a file that defines
    /// one of them (the test binary defines `main`, not the other).
    struct Marked(&'static [&'static str]);
    impl Runtime for Marked {
        fn name(&self) -> &'static str {
            "Marked"
        }
        fn frame_kind(&self) -> FrameKind {
            Fake::default().frame_kind()
        }
        fn unwinder(&self) -> InterpreterUnwinder {
            Fake::default().unwinder()
        }
        fn owns_frame(&self, word: u64) -> bool {
            Fake::default().owns_frame(word)
        }
        fn frame_address(&self, word: u64) -> u64 {
            Fake::default().frame_address(word)
        }
        fn marker_symbols(&self) -> &'static [&'static str] {
            self.0
        }
        fn detect_file(&self, elf: &ElfFile, path: &str) -> FileDetection {
            Fake::default().detect_file(elf, path)
        }
        fn cache_bound(&self) -> CacheUse {
            CacheUse::default()
        }
    }

    #[test]
    fn runtimes_see_only_files_with_their_marker_symbols() {
        let elf = elf();
        let absent: &'static [&'static str] = &["no_such_symbol_in_any_file", "nor_this"];
        let r = Registry::new(vec![Box::new(Marked(absent)), Box::new(Marked(&["nor_this", "main"]))]);
        assert_eq!(r.inspect(key(1), &elf, "fake1"), Inspection::Found(RuntimeId(1)));
        let r = Registry::new(vec![Box::new(Marked(absent)), Box::new(Named("Other"))]);
        assert_eq!(r.inspect(key(2), &elf, "fake1"), Inspection::Nothing);
        assert_eq!(elf.defines_symbols(&["main", "no_such_symbol_in_any_file", "mai"]), [true, false, false]);
    }

    #[test]
    fn a_file_analysed_and_never_loaded_is_forgotten_at_the_next_analysis() {
        let (r, elf) = (registry(), elf());
        r.inspect(key(1), &elf, "fake1");
        r.inspect(key(2), &elf, "fake2");
        r.file_loaded(key(2));
        r.inspect(key(3), &elf, "native");
        assert_eq!(r.len(), 1);
        assert!(r.loaded(&key(2)).is_some());
        assert!(r.file_loaded(key(1)).is_none());
    }

    #[test]
    fn unsupported_builds_are_told_once_per_file() {
        let (r, elf) = (registry(), elf());
        let Inspection::Unsupported { runtime, notice: Some(notice) } = r.inspect(key(1), &elf, "old/bin") else {
            panic!("a notice the first time")
        };
        assert_eq!(runtime, RuntimeId(1));
        assert_eq!(
            notice,
            "Fake 0.1 in old/bin is not supported (only 1 to 2 are read): its frames are profiled as native code"
        );
        assert_eq!(r.inspect(key(1), &elf, "old/bin"), Inspection::Unsupported { runtime, notice: None });
        assert!(matches!(r.inspect(key(2), &elf, "old/lib"), Inspection::Unsupported { notice: Some(_), .. }));
        let stats = r.stats();
        assert_eq!((stats[1].name, stats[1].unsupported, stats[1].files), ("Fake", 2, 0));
        assert_eq!(stats[1].refused_by_reason, [2, 0, 0, 0, 0, 0], "both refused for their version");
        assert_eq!((stats[0].name, stats[0].unsupported), ("Other", 0));
        assert!(r.is_empty());
    }

    #[test]
    fn the_registry_is_bounded_and_counts_what_it_drops() {
        let (r, elf) = (registry(), elf());
        for i in 0..MAX_INTERPRETER_FILES {
            let k = key(i as u64);
            assert_eq!(r.inspect(k, &elf, "fake"), Inspection::Found(RuntimeId(1)));
            r.file_loaded(k);
        }
        let over = key(u64::MAX);
        assert_eq!(r.inspect(over, &elf, "fake"), Inspection::Dropped(RuntimeId(1)));
        assert!(r.file_loaded(over).is_none(), "profiled as native");
        assert_eq!((r.len(), r.dropped()), (MAX_INTERPRETER_FILES, 1));
        r.file_unloaded(key(0));
        assert_eq!(r.inspect(over, &elf, "fake"), Inspection::Found(RuntimeId(1)), "room again");
    }

    #[test]
    fn exited_processes_are_kept_for_naming_boundedly() {
        let (r, elf) = (registry(), elf());
        let memory = crate::memory::fake::FakeMemory::default();
        r.inspect(key(1), &elf, "fake1");
        r.file_loaded(key(1));
        for pid in 0..MAX_EXITED as u32 + 10 {
            r.process_mapped(pid, &[(key(1), 0x10)], &memory);
            assert_eq!(named(&r, pid, 1).as_deref(), Some(format!("{pid}:0x10").as_str()));
            r.process_removed(pid);
        }
        assert_eq!(r.attached_processes(), 0);
        assert!(named(&r, 9, 1).is_none(), "the oldest are forgotten");
        assert_eq!(named(&r, 10, 1).as_deref(), Some("10:0x10"), "kept a while for the samples already taken");
        assert!(named(&r, MAX_EXITED as u32 + 9, 1).is_some());
        assert_eq!(r.lock().exited.len(), MAX_EXITED);
        assert_eq!(r.cached(RuntimeId(1)).entries, MAX_EXITED, "the kept ones' caches are counted");
        // A new process with an exited one's pid: its own object first.
        r.process_mapped(10, &[(key(1), 0x20)], &memory);
        assert_eq!(named(&r, 10, 1).as_deref(), Some("10:0x20"));
        r.lock().exited.iter_mut().for_each(|(_, _, at)| *at -= EXITED_FOR + Duration::from_secs(1));
        r.forget_exited();
        assert!(r.lock().exited.is_empty() && named(&r, 11, 1).is_none(), "dropped after EXITED_FOR");
        assert_eq!(r.cached(RuntimeId(1)).entries, 1, "only the live process's cache is counted");
    }

    #[test]
    fn processes_are_attached_once_and_forgotten_at_their_exit() {
        let ((r, attaches), elf) = (counting(None), elf());
        let memory = crate::PidMemory(std::process::id());
        for (k, path) in [(0, "fake0"), (1, "fake1"), (2, "fake2")] {
            r.inspect(key(k), &elf, path);
            r.file_loaded(key(k));
        }
        r.inspect(key(3), &elf, "fake1"); // analysed, not loaded
        let files = [(key(0), 0x10), (key(1), 0x1000), (key(2), 0x20), (key(3), 0x30), (key(9), 0), (key(1), 0x1000)];
        let notices = r.process_mapped(5, &files, &memory);
        assert_eq!(
            notices,
            ["Fake in process 5 is not read (the state could not be read): its frames are profiled as native code \
              (told once per build)"]
        );
        assert!(r.process_mapped(5, &files, &memory).is_empty());
        let attachments = |n: usize| attaches[n].load(Ordering::Relaxed);
        assert_eq!((attachments(0), attachments(1), attachments(2)), (1, 1, 1), "once while the process lives");
        assert_eq!(named(&r, 5, 1).as_deref(), Some("5:0x1000"));
        assert_eq!(named(&r, 5, 0).as_deref(), Some("5:0x10"));
        assert!(named(&r, 5, 2).is_none(), "failed to attach");
        assert!(named(&r, 6, 1).is_none(), "another process");
        assert_eq!(r.stats()[1].attach_failures, 1);
        assert_eq!(r.stats()[1].refused_by_reason, [0, 0, 0, 0, 0, 1], "unreadable");
        assert_eq!(r.attached_processes(), 1);
        r.process_removed(5);
        assert_eq!(r.attached_processes(), 0);
        r.process_mapped(5, &files, &memory);
        assert_eq!(attachments(1), 2, "a new process with the pid is attached again");
        // Unmapped, then mapped elsewhere: attached again, at its new bias.
        r.process_mapped(5, &[(key(1), 0x1000)], &memory);
        r.process_mapped(5, &[], &memory);
        assert_eq!(r.attached_processes(), 0, "maps none of them");
        assert_eq!(r.cached(RuntimeId(1)), CacheUse { entries: 2, bytes: 16 }, "only the exited one's caches");
        r.process_mapped(5, &[(key(1), 0x5000)], &memory);
        assert_eq!(attachments(1), 3);
        assert_eq!(named(&r, 5, 1).as_deref(), Some("5:0x5000"));
        assert!(r.process_mapped(7, &files, &memory).is_empty(), "a failure is told once per build");
    }

    /// A registry whose fake runtime's objects cache at most `bound`
    /// entries together, with file 1 loaded; a memory to attach with.
    fn bounded(bound: usize) -> (Registry, crate::memory::fake::FakeMemory) {
        let ((r, _), elf) = (counting(Some(bound)), elf());
        r.inspect(key(1), &elf, "fake1");
        r.file_loaded(key(1));
        (r, crate::memory::fake::FakeMemory::default())
    }

    /// What the objects of a runtime cache is counted together: past the
    /// runtime's bound, all of them empty their caches (the one naming
    /// kept), counted; dropped objects leave the count.
    #[test]
    fn the_objects_of_a_runtime_cache_within_its_bound() {
        let (r, memory) = bounded(5);
        let mut stats = NamerStats::default();
        for pid in 1..=3 {
            r.process_mapped(pid, &[(key(1), 0x10)], &memory);
        }
        let name = |pid: u32, word: u64, stats: &mut NamerStats| {
            let object = r.find(RuntimeId(1), pid, |f: &TableKey| *f == key(1)).unwrap();
            r.lines(&object, &memory, word, stats);
        };
        for (pid, word) in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)] {
            name(pid, word, &mut stats);
        }
        assert_eq!(r.cached(RuntimeId(1)), CacheUse { entries: 5, bytes: 40 });
        assert_eq!(r.stats()[1].cache_clears, 0);
        name(3, 2, &mut stats);
        assert_eq!(r.cached(RuntimeId(1)).entries, 2, "all emptied but the one naming");
        assert_eq!(r.stats()[1].cache_clears, 1);
        assert_eq!(stats.frames, 6);
        name(1, 1, &mut stats);
        r.process_removed(1);
        r.process_mapped(3, &[], &memory);
        assert_eq!(r.cached(RuntimeId(1)).entries, 1, "the exited process's object is kept a while");
        r.lock().exited.iter_mut().for_each(|(_, _, at)| *at -= EXITED_FOR + Duration::from_secs(1));
        r.forget_exited();
        assert_eq!(r.cached(RuntimeId(1)), CacheUse::default());
        // An object dropped while a sample holds it names, uncounted.
        let object = r.find(RuntimeId(1), 2, |f: &TableKey| *f == key(1)).unwrap();
        r.process_removed(2);
        r.lock().exited.iter_mut().for_each(|(_, _, at)| *at -= EXITED_FOR + Duration::from_secs(1));
        r.forget_exited();
        assert_eq!(r.lines(&object, &memory, 9, &mut stats).len(), 1);
        assert_eq!(r.cached(RuntimeId(1)), CacheUse::default());
    }

    /// A sample's words reach its object before it names them, and what
    /// the object keeps of them counts against its runtime's bound.
    #[test]
    fn prefetched_words_reach_the_object_and_are_counted() {
        let (r, memory) = bounded(5);
        r.process_mapped(1, &[(key(1), 0x10)], &memory);
        let object = r.find(RuntimeId(1), 1, |f: &TableKey| *f == key(1)).unwrap();
        r.prefetch(&object, &memory, &[1, 2, 3]);
        assert_eq!(r.cached(RuntimeId(1)), CacheUse { entries: 3, bytes: 24 });
        r.prefetch(&object, &memory, &[3, 4, 5, 6]);
        assert_eq!(r.cached(RuntimeId(1)), CacheUse::default(), "6 words: past the bound, emptied");
        assert_eq!(r.stats()[1].cache_clears, 1);
    }

    #[test]
    fn frames_go_to_the_runtime_that_owns_them() {
        let r = registry();
        assert_eq!(r.runtime_of_frame(9), Some(RuntimeId(0)));
        assert_eq!(r.runtime_of_frame(7), Some(RuntimeId(1)));
        assert_eq!(r.runtime_of_frame(8), None);
        assert_eq!(r.runtime(RuntimeId(1)).frame_kind(), FrameKind::Ruby);
    }

    #[test]
    fn cpython_is_registered() {
        let r = Registry::default();
        assert!(r.runtimes().iter().any(|rt| rt.name() == "CPython" && rt.frame_kind() == FrameKind::CPython));
    }

    #[test]
    fn a_runtime_not_ready_is_attached_at_a_later_mapping_change() {
        let ((r, attaches), elf) = (counting(None), elf());
        let memory = crate::PidMemory(std::process::id());
        r.inspect(key(3), &elf, "fake3");
        r.file_loaded(key(3));
        r.process_mapped(5, &[(key(3), 0x10)], &memory);
        r.process_mapped(5, &[(key(3), 0x10)], &memory);
        assert!(named(&r, 5, 3).is_none(), "nothing kept");
        assert_eq!(attaches[3].load(Ordering::Relaxed), 2);
        assert_eq!(r.stats()[1].attach_failures, 0, "not a failure");
        assert!(r.process_unwinding(5, &memory, &[]).is_empty());
        assert!(r.attach_pending(5) && !r.attach_pending(6), "to be asked again");
        r.process_mapped(5, &[], &memory);
        assert!(!r.attach_pending(5), "no longer mapped");
        r.process_mapped(5, &[(key(3), 0x10)], &memory);
        r.process_removed(5);
        assert!(!r.attach_pending(5), "gone");
    }

    #[test]
    fn attached_processes_give_their_unwinding() {
        let (r, elf) = (registry(), elf());
        let memory = crate::PidMemory(std::process::id());
        for (k, path) in [(1, "fake1"), (2, "fake2")] {
            r.inspect(key(k), &elf, path);
            r.file_loaded(key(k));
        }
        r.process_mapped(5, &[(key(1), 0x1000), (key(2), 0x2000)], &memory);
        let unwinding = r.process_unwinding(5, &memory, &[]);
        assert_eq!(unwinding.len(), 1, "the failed attachment gives nothing");
        assert_eq!(unwinding[0].code, vec![(0x1000, 0x1100)]);
        assert!(r.process_unwinding(6, &memory, &[]).is_empty());
        r.process_removed(5);
        assert!(r.process_unwinding(5, &memory, &[]).is_empty());
    }
}
