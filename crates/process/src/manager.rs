//! The process manager: turns process events (a new pid sampled, a pc in
//! no known mapping, an exit) into unwinding state for the kernel, and
//! keeps the [`ProcessRegistry`] that symbolization reads.
//!
//! For each process it reads `/proc/PID/maps`, opens each executable file
//! through `/proc/PID/map_files/<range>` (so files of other mount
//! namespaces are reached, and a file replaced on disk is still the one
//! mapped), else as `<path>` inside `/proc/PID/root` (resolved within
//! that root, and used only when it is the inode the maps line names),
//! always as [`profiler_elf::source`] opens files a process controls
//! (regular files only, bounded; refusals counted). It reads the vDSO
//! from the process's memory, and analyses each file once per content
//! ([`TableKey`], a digest of the whole file, computed once per inode
//! version; a [`FileId`] shared by two contents is counted, never
//! trusted): its unwind table is interned and loaded through the
//! [`UnwindLoader`], then the process's mappings are. Files are reference-counted by the
//! processes that map them and unloaded a grace period after the last
//! one goes. Everything is bounded by [`ManagerLimits`] and counted in
//! [`ManagerStats`].

use crate::files::{analyse, empty_symbols, ExecutableFile, FileKeys};
use crate::maps::{parse_executable, MapsEntry};
use crate::procfs::{read_info, read_memory, read_start_time};
use crate::registry::{ProcessRegistry, ProcessSnapshot, SnapshotMapping};
use profiler_elf::source::{
    open_in_root, open_regular, path_in_root, table_key_of_bytes, table_key_of_file, FileIdentity, OpenError,
    OpenedFile, Purpose, Refusals,
};
use profiler_elf::{file_id_of_bytes, file_id_of_file, ElfFile, RuleId, RuleInterner, UnwindRule};
use profiler_trace::{FileId, Pid, TableKey};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An error of the [`UnwindLoader`] (the BPF maps).
pub type LoaderError = Box<dyn std::error::Error + Send + Sync>;

/// What an executable mapping is, for the unwinder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnwindTarget {
    /// A file whose deltas are loaded; `ELF vaddr = pc - bias`.
    File {
        /// The file's content.
        table_key: TableKey,
        /// Load bias.
        bias: u64,
    },
    /// Executable memory without unwind tables.
    NoUnwindInfo,
}

/// One executable mapping `[start, end)` of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnwindMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// What is there.
    pub target: UnwindTarget,
}

/// Where the manager puts unwinding state: the BPF maps in the agent, a
/// recorder in tests.
pub trait UnwindLoader {
    /// Makes rule `id` known (called before any file using it is loaded;
    /// may be called again for the same id).
    fn set_rule(&mut self, id: RuleId, rule: &UnwindRule) -> Result<(), LoaderError>;
    /// Loads a file's deltas (sorted `(ELF vaddr, rule)` pairs).
    fn load_file(&mut self, table_key: TableKey, deltas: &[(u64, RuleId)]) -> Result<(), LoaderError>;
    /// Unloads a file's deltas.
    fn unload_file(&mut self, table_key: TableKey) -> Result<(), LoaderError>;
    /// Sets (replaces) the executable mappings of `pid`.
    fn set_process(&mut self, pid: Pid, mappings: &[UnwindMapping]) -> Result<(), LoaderError>;
    /// Removes everything of `pid`.
    fn remove_process(&mut self, pid: Pid) -> Result<(), LoaderError>;
    /// A file was analysed, before its deltas are loaded: a chance to
    /// find an interpreter in it (the agent looks for CPython). Does
    /// nothing by default.
    fn inspect_file(&mut self, _file: &ExecutableFile, _elf: &ElfFile) {}
}

/// Bounds and timings of the manager.
#[derive(Clone, Debug)]
pub struct ManagerLimits {
    /// Most processes loaded at once; more are refused (and counted).
    pub max_processes: usize,
    /// Most files analysed and held at once; more are refused (their
    /// mappings stop unwinding) and counted.
    pub max_files: usize,
    /// Files with more stack deltas are not loaded (counted).
    pub max_deltas_per_file: usize,
    /// How long an exited process's snapshot stays for samples still in
    /// flight.
    pub exit_grace: Duration,
    /// How long a file nobody maps stays loaded (a process restarting
    /// finds it still there).
    pub file_unload_grace: Duration,
    /// A new-process event for a process loaded less than this ago is
    /// ignored (it was sent before the load finished).
    pub maps_refresh_interval: Duration,
    /// How often loaded processes are checked for having exited unseen
    /// (a lost exit event).
    pub liveness_interval: Duration,
    /// Processes never sampled that are loaded at their exec, per second
    /// (more are loaded at their first sample).
    pub exec_preloads_per_second: f64,
    /// Open mapped files through `/proc/PID/map_files` when allowed
    /// (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). False forces
    /// the path inside the process's root, checked against the maps
    /// line's device and inode, as without those capabilities.
    pub open_via_map_files: bool,
}

impl Default for ManagerLimits {
    fn default() -> Self {
        ManagerLimits {
            max_processes: 8192,
            max_files: 8192,
            max_deltas_per_file: 8 << 20,
            exit_grace: Duration::from_secs(5),
            file_unload_grace: Duration::from_secs(30),
            maps_refresh_interval: Duration::from_millis(500),
            liveness_interval: Duration::from_secs(5),
            exec_preloads_per_second: 20.0,
            open_via_map_files: true,
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
    /// Files held now.
    pub files: u64,
    /// Files analysed (opened, tables built).
    pub files_analysed: u64,
    /// Files that could not be opened or parsed.
    pub files_failed: u64,
    /// Files refused by `max_files` or `max_deltas_per_file`.
    pub files_rejected: u64,
    /// Files unloaded after their grace period.
    pub files_unloaded: u64,
    /// Stack deltas of the files held now.
    pub deltas: u64,
    /// Distinct unwind rules.
    pub rules: u64,
    /// Errors of the loader (BPF map updates).
    pub load_errors: u64,
    /// Time spent analysing files, ms.
    pub analyse_ms: u64,
    /// Execs of processes never sampled not loaded ahead (over budget).
    pub exec_preloads_skipped: u64,
    /// Mapped files refused, by reason (not regular, too large, not the
    /// mapped inode, path leaving the process's root, ...).
    pub files_refused: Refusals,
    /// Files whose [`FileId`] (head, tail, length) equals another held
    /// file's while their contents differ: each keeps its own tables.
    pub file_id_collisions: u64,
}

struct FileEntry {
    file: Arc<ExecutableFile>,
    /// Processes mapping it.
    refs: usize,
    /// When refs last dropped to 0.
    unused_since: Option<Instant>,
    /// Deltas in the loader.
    loaded: bool,
}

struct ProcessState {
    start_time: Option<u64>,
    files: HashSet<TableKey>,
    maps_read_at: Instant,
}

/// Identity of a file on disk, to skip hashing it again.
type DiskKey = FileIdentity;

/// When maps are read again after an exec (ms after it).
const EXEC_RESYNC_MS: [u64; 3] = [5, 25, 100];

/// Bound of the (device, inode, ...) -> FileId cache and of the set of
/// files known to fail.
const MAX_DISK_KEYS: usize = 65_536;

/// See the module documentation.
pub struct ProcessManager<L: UnwindLoader> {
    loader: L,
    registry: Arc<ProcessRegistry>,
    interner: RuleInterner,
    files: HashMap<TableKey, FileEntry>,
    /// The content of each held file's [`FileId`], to notice collisions.
    file_ids: HashMap<FileId, TableKey>,
    disk_keys: HashMap<DiskKey, (FileId, TableKey)>,
    failed: HashSet<DiskKey>,
    processes: HashMap<Pid, ProcessState>,
    exited: Vec<(Pid, Instant)>,
    last_liveness: Instant,
    /// Re-reads of maps scheduled after an exec, when the dynamic loader
    /// will have mapped the libraries.
    resyncs: Vec<(Pid, Instant)>,
    /// Budget of exec preloads of processes never sampled (token bucket).
    exec_tokens: f64,
    exec_tokens_at: Instant,
    limits: ManagerLimits,
    stats: ManagerStats,
    proc_root: PathBuf,
}

impl<L: UnwindLoader> ProcessManager<L> {
    /// A manager loading into `loader` and publishing into `registry`.
    pub fn new(loader: L, registry: Arc<ProcessRegistry>, limits: ManagerLimits) -> ProcessManager<L> {
        ProcessManager {
            loader,
            registry,
            interner: RuleInterner::new(),
            files: HashMap::new(),
            file_ids: HashMap::new(),
            disk_keys: HashMap::new(),
            failed: HashSet::new(),
            processes: HashMap::new(),
            exited: Vec::new(),
            last_liveness: Instant::now(),
            resyncs: Vec::new(),
            exec_tokens: limits.exec_preloads_per_second,
            exec_tokens_at: Instant::now(),
            limits,
            stats: ManagerStats::default(),
            proc_root: PathBuf::from("/proc"),
        }
    }

    /// The loader.
    pub fn loader(&self) -> &L {
        &self.loader
    }

    /// The counters.
    pub fn stats(&self) -> ManagerStats {
        let mut s = self.stats;
        s.processes = self.processes.len() as u64;
        s.files = self.files.len() as u64;
        s.deltas = self.files.values().filter(|f| f.loaded).map(|f| f.file.deltas).sum();
        s.rules = self.interner.len() as u64;
        s
    }

    /// Whether `pid` is loaded.
    pub fn is_loaded(&self, pid: Pid) -> bool {
        self.processes.contains_key(&pid)
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

    /// `pid` called execve: its mappings are all new. A loaded process is
    /// reloaded; a process never sampled is loaded ahead of its first
    /// sample while the exec preload budget lasts (execs can come by the
    /// hundred per second on a build machine; most of those processes are
    /// never sampled, and the first sample loads them anyway). Either way
    /// its maps are read again a few times in the next 100 ms, as the
    /// dynamic loader maps the libraries.
    pub fn on_exec(&mut self, pid: Pid) {
        let known = self.processes.contains_key(&pid);
        if !known && !self.take_exec_token() {
            self.stats.exec_preloads_skipped += 1;
            return;
        }
        self.unload_process(pid, true);
        self.sync(pid, false);
        let now = Instant::now();
        for ms in EXEC_RESYNC_MS {
            self.resyncs.push((pid, now + Duration::from_millis(ms)));
        }
    }

    /// When [`ProcessManager::run_due`] next has work, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.resyncs.iter().map(|r| r.1).min()
    }

    /// Does the scheduled work that is due (re-reading maps after execs).
    pub fn run_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Pid> = self.resyncs.iter().filter(|r| r.1 <= now).map(|r| r.0).collect();
        self.resyncs.retain(|r| r.1 > now);
        for pid in due {
            if self.processes.contains_key(&pid) {
                self.sync(pid, false);
            }
        }
    }

    fn take_exec_token(&mut self) -> bool {
        let rate = self.limits.exec_preloads_per_second;
        let now = Instant::now();
        let refill = now.duration_since(self.exec_tokens_at).as_secs_f64() * rate;
        self.exec_tokens = (self.exec_tokens + refill).min(rate.max(1.0));
        self.exec_tokens_at = now;
        if self.exec_tokens >= 1.0 {
            self.exec_tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The last thread of `pid` exited.
    pub fn on_exit(&mut self, pid: Pid) {
        self.unload_process(pid, false);
    }

    /// Housekeeping, to call about once a second: forgets exited
    /// processes after their grace, unloads files nobody maps, notices
    /// exits that were missed.
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
                self.unload_process(pid, false);
            }
        }
        let unload_grace = self.limits.file_unload_grace;
        let unused: Vec<TableKey> = self
            .files
            .iter()
            .filter(|(_, f)| f.refs == 0 && f.unused_since.is_some_and(|t| now.duration_since(t) >= unload_grace))
            .map(|(id, _)| *id)
            .collect();
        for id in unused {
            if let Some(entry) = self.files.remove(&id) {
                if self.file_ids.get(&entry.file.file_id) == Some(&id) {
                    self.file_ids.remove(&entry.file.file_id);
                }
                if entry.loaded {
                    if let Err(_e) = self.loader.unload_file(id) {
                        self.stats.load_errors += 1;
                    }
                }
                self.stats.files_unloaded += 1;
            }
        }
    }

    /// Unloads every process and file from the loader (the agent
    /// stopping). The registry keeps its snapshots: samples taken before
    /// the stop may still be on their way to the trace builder.
    pub fn unload_all(&mut self) {
        let pids: Vec<Pid> = self.processes.keys().copied().collect();
        for pid in pids {
            self.unload_process(pid, false);
        }
        self.exited.clear();
        self.file_ids.clear();
        for (id, entry) in std::mem::take(&mut self.files) {
            if entry.loaded && self.loader.unload_file(id).is_err() {
                self.stats.load_errors += 1;
            }
        }
    }

    fn unload_process(&mut self, pid: Pid, immediately: bool) {
        let Some(state) = self.processes.remove(&pid) else { return };
        if self.loader.remove_process(pid).is_err() {
            self.stats.load_errors += 1;
        }
        self.release_files(&state.files);
        self.stats.processes_exited += 1;
        if immediately {
            self.registry.remove(pid);
        } else {
            self.exited.push((pid, Instant::now()));
        }
    }

    fn release_files(&mut self, files: &HashSet<TableKey>) {
        let now = Instant::now();
        for id in files {
            if let Some(entry) = self.files.get_mut(id) {
                entry.refs = entry.refs.saturating_sub(1);
                if entry.refs == 0 {
                    entry.unused_since = Some(now);
                }
            }
        }
    }

    fn sync(&mut self, pid: Pid, new_event: bool) {
        let start_time = read_start_time(&self.proc_root, pid);
        if start_time.is_none() {
            // Gone already (or never was): nothing to load.
            self.stats.maps_read_failures += 1;
            return;
        }
        if let Some(state) = self.processes.get(&pid) {
            if state.start_time != start_time {
                self.stats.pid_reuse += 1;
                self.unload_process(pid, true);
            } else if new_event && state.maps_read_at.elapsed() < self.limits.maps_refresh_interval {
                // A sample taken before our load finished; the kernel
                // rate-limits unknown-pc events itself.
                return;
            }
        } else if self.processes.len() >= self.limits.max_processes {
            self.stats.processes_rejected += 1;
            return;
        }

        self.stats.maps_reads += 1;
        let maps_path = self.proc_root.join(pid.0.to_string()).join("maps");
        let Ok(text) = std::fs::read_to_string(&maps_path) else {
            self.stats.maps_read_failures += 1;
            return;
        };
        let entries = parse_executable(&text);

        let mut snapshot_mappings = Vec::with_capacity(entries.len());
        let mut unwind_mappings = Vec::with_capacity(entries.len());
        let mut files = HashSet::new();
        for entry in &entries {
            let file = if entry.is_anonymous() { None } else { self.file_for(pid, entry) };
            let bias = file.as_ref().and_then(|f| f.segments.executable_bias(entry.start, entry.offset));
            let loaded = file.as_ref().is_some_and(|f| self.files.get(&f.table_key).is_some_and(|e| e.loaded));
            let target = match (&file, bias) {
                (Some(f), Some(bias)) if loaded => UnwindTarget::File { table_key: f.table_key, bias },
                _ => UnwindTarget::NoUnwindInfo,
            };
            unwind_mappings.push(UnwindMapping { start: entry.start, end: entry.end, target });
            if let Some(f) = &file {
                files.insert(f.table_key);
            }
            let mut mapping = entry.to_mapping();
            if let Some(f) = &file {
                mapping.file_id = Some(f.file_id);
                mapping.gnu_build_id = f.gnu_build_id.clone();
                mapping.go_build_id = f.go_build_id.clone();
            }
            snapshot_mappings.push(SnapshotMapping { mapping: Arc::new(mapping), file, bias });
        }
        snapshot_mappings.sort_by_key(|m| m.mapping.start);

        if self.loader.set_process(pid, &unwind_mappings).is_err() {
            self.stats.load_errors += 1;
        }
        // References: take the new ones before releasing the old ones.
        let now = Instant::now();
        let old = match self.processes.get_mut(&pid) {
            Some(state) => {
                state.maps_read_at = now;
                std::mem::replace(&mut state.files, files.clone())
            }
            None => {
                self.stats.processes_loaded += 1;
                self.processes.insert(pid, ProcessState { start_time, files: files.clone(), maps_read_at: now });
                HashSet::new()
            }
        };
        for id in files.difference(&old) {
            if let Some(e) = self.files.get_mut(id) {
                e.refs += 1;
                e.unused_since = None;
            }
        }
        let released: HashSet<TableKey> = old.difference(&files).copied().collect();
        self.release_files(&released);

        let comm = std::fs::read_to_string(self.proc_root.join(pid.0.to_string()).join("comm")).unwrap_or_default();
        let info = read_info(&self.proc_root, pid, comm.trim_end());
        self.registry.set(pid, ProcessSnapshot { info: Arc::new(info), mappings: snapshot_mappings });
    }

    /// The analysed file behind a file-backed mapping (analysing and
    /// loading it on first sight).
    fn file_for(&mut self, pid: Pid, entry: &MapsEntry) -> Option<Arc<ExecutableFile>> {
        if entry.is_vdso() {
            let bytes = read_memory(&self.proc_root, pid, entry.start, entry.end).ok()?;
            let keys =
                FileKeys { file_id: file_id_of_bytes(&bytes), table_key: table_key_of_bytes(&bytes), identity: None };
            if let Some(e) = self.files.get(&keys.table_key) {
                return Some(e.file.clone());
            }
            return self.add_file(keys, "[vdso]", || ElfFile::from_bytes(bytes).ok());
        }
        let opened = match self.open_mapped(pid, entry) {
            Ok(opened) => opened,
            Err(e) => {
                self.stats.files_refused.count(&e);
                if !e.is_refusal() {
                    self.stats.files_failed += 1;
                }
                return None;
            }
        };
        let key: DiskKey = opened.identity;
        if self.failed.contains(&key) {
            return None;
        }
        let keys = match self.disk_keys.get(&key) {
            Some(&(file_id, table_key)) => FileKeys { file_id, table_key, identity: Some(key) },
            None => {
                let Some(keys) = file_keys(&opened) else {
                    // Not ELF, or unreadable: nothing hashed beyond 4 bytes.
                    self.stats.files_failed += 1;
                    self.remember_failed(key);
                    return None;
                };
                if self.disk_keys.len() >= MAX_DISK_KEYS {
                    self.disk_keys.clear();
                }
                self.disk_keys.insert(key, (keys.file_id, keys.table_key));
                keys
            }
        };
        if let Some(e) = self.files.get(&keys.table_key) {
            return Some(e.file.clone());
        }
        let size = opened.identity.size;
        let file = self.add_file(keys, &entry.path, || ElfFile::from_file(opened.file, size).ok());
        if file.is_none() && !self.files.contains_key(&keys.table_key) {
            self.remember_failed(key);
        }
        file
    }

    fn remember_failed(&mut self, key: DiskKey) {
        if self.failed.len() >= MAX_DISK_KEYS {
            self.failed.clear();
        }
        self.failed.insert(key);
    }

    /// Opens the file a mapping maps: through `map_files` (the mapped
    /// file itself), else by its path inside the process's root, which
    /// must then be the inode the maps line names.
    fn open_mapped(&self, pid: Pid, entry: &MapsEntry) -> Result<OpenedFile, OpenError> {
        let dir = self.proc_root.join(pid.0.to_string());
        if self.limits.open_via_map_files {
            let by_range = dir.join("map_files").join(format!("{:x}-{:x}", entry.start, entry.end));
            match open_regular(&by_range, Purpose::Executable) {
                Ok(opened) => return Ok(opened),
                // What is mapped is itself unacceptable (a device, ...).
                Err(e) if e.is_refusal() => return Err(e),
                // Not allowed to read map_files: by path below.
                Err(_) => {}
            }
        }
        let root = dir.join("root");
        let path = path_in_root(&root, Path::new(&entry.path));
        let opened = open_in_root(&root, &path, Purpose::Executable)?;
        if !opened.identity.is_mapped(entry.dev.0, entry.dev.1, entry.inode, opened.on_overlay) {
            return Err(OpenError::Mismatch);
        }
        Ok(opened)
    }

    fn add_file(
        &mut self,
        keys: FileKeys,
        path: &str,
        open: impl FnOnce() -> Option<ElfFile>,
    ) -> Option<Arc<ExecutableFile>> {
        if self.files.len() >= self.limits.max_files {
            self.stats.files_rejected += 1;
            return None;
        }
        let started = Instant::now();
        let Some(elf) = open() else {
            self.stats.files_failed += 1;
            return None;
        };
        let mut analysed = analyse(&elf, keys, path);
        self.loader.inspect_file(&analysed.file, &elf);
        drop(elf);
        // The symbols were for inspect_file only (see ExecutableFile).
        if let Some(f) = Arc::get_mut(&mut analysed.file) {
            f.symbols = empty_symbols();
        }
        self.stats.files_analysed += 1;
        let mut loaded = false;
        let deltas = std::mem::take(&mut analysed.table.deltas);
        if deltas.len() > self.limits.max_deltas_per_file {
            self.stats.files_rejected += 1;
        } else if !deltas.is_empty() {
            loaded = self.load_table(keys.table_key, deltas);
        }
        self.stats.analyse_ms += started.elapsed().as_millis() as u64;
        match self.file_ids.get(&keys.file_id) {
            Some(other) if *other != keys.table_key => self.stats.file_id_collisions += 1,
            Some(_) => {}
            None => {
                self.file_ids.insert(keys.file_id, keys.table_key);
            }
        }
        self.files.insert(
            keys.table_key,
            FileEntry { file: analysed.file.clone(), refs: 0, unused_since: Some(Instant::now()), loaded },
        );
        Some(analysed.file)
    }

    fn load_table(&mut self, table_key: TableKey, deltas: Vec<profiler_elf::StackDelta>) -> bool {
        let Ok(interned) = intern_consuming(&mut self.interner, deltas) else {
            self.stats.files_rejected += 1;
            return false;
        };
        let mut ids: Vec<RuleId> = interned.iter().map(|d| d.1).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let Some(rule) = self.interner.get(id) else { continue };
            if self.loader.set_rule(id, &rule).is_err() {
                self.stats.load_errors += 1;
                return false;
            }
        }
        match self.loader.load_file(table_key, &interned) {
            Ok(()) => true,
            Err(_) => {
                self.stats.load_errors += 1;
                false
            }
        }
    }
}

/// The wire id and content key of an opened file, when it is ELF (the
/// whole file is hashed only then).
fn file_keys(opened: &OpenedFile) -> Option<FileKeys> {
    let mut magic = [0u8; 4];
    opened.file.read_exact_at(&mut magic, 0).ok()?;
    if &magic != b"\x7fELF" {
        return None;
    }
    let size = opened.identity.size;
    Some(FileKeys {
        file_id: file_id_of_file(&opened.file, size).ok()?,
        table_key: table_key_of_file(&opened.file, size).ok()?,
        identity: Some(opened.identity),
    })
}

/// Deltas interned per chunk at a time by [`intern_consuming`].
const INTERN_CHUNK: usize = 64 * 1024;

/// `interner.intern_deltas(&deltas)`, giving `deltas`' memory back as
/// it goes: for a 150 MB library both tables take 35 MB each, so holding
/// both at once would double the manager's peak. Consumed from the end,
/// chunk by chunk, shrinking `deltas` (large blocks are their own
/// mappings: shrinking returns the pages); the output is allocated whole
/// up front but its pages only become resident as they are written.
fn intern_consuming(
    interner: &mut RuleInterner,
    mut deltas: Vec<profiler_elf::StackDelta>,
) -> profiler_elf::Result<Vec<(u64, RuleId)>> {
    let mut out = Vec::with_capacity(deltas.len());
    while !deltas.is_empty() {
        let tail = deltas.split_off(deltas.len().saturating_sub(INTERN_CHUNK));
        deltas.shrink_to_fit();
        out.extend(interner.intern_deltas(&tail)?.into_iter().rev());
    }
    out.reverse();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// Records what the manager loads.
    #[derive(Default)]
    struct Recorder {
        rules: HashSet<RuleId>,
        files: HashMap<TableKey, usize>,
        processes: HashMap<Pid, Vec<UnwindMapping>>,
    }

    impl UnwindLoader for Recorder {
        fn set_rule(&mut self, id: RuleId, _rule: &UnwindRule) -> Result<(), LoaderError> {
            self.rules.insert(id);
            Ok(())
        }
        fn load_file(&mut self, file_id: TableKey, deltas: &[(u64, RuleId)]) -> Result<(), LoaderError> {
            assert!(deltas.iter().all(|d| self.rules.contains(&d.1)), "rules set before the file");
            assert!(self.files.insert(file_id, deltas.len()).is_none(), "loaded twice");
            Ok(())
        }
        fn unload_file(&mut self, file_id: TableKey) -> Result<(), LoaderError> {
            self.files.remove(&file_id).map(|_| ()).ok_or_else(|| "not loaded".into())
        }
        fn set_process(&mut self, pid: Pid, mappings: &[UnwindMapping]) -> Result<(), LoaderError> {
            for m in mappings {
                if let UnwindTarget::File { table_key, .. } = m.target {
                    assert!(self.files.contains_key(&table_key), "file loaded before the process");
                }
            }
            self.processes.insert(pid, mappings.to_vec());
            Ok(())
        }
        fn remove_process(&mut self, pid: Pid) -> Result<(), LoaderError> {
            self.processes.remove(&pid);
            Ok(())
        }
    }

    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A `sleep` whose libraries are mapped (ld.so works after exec).
    fn sleeper() -> Kill {
        let k = Kill(Command::new("sleep").arg("30").spawn().unwrap());
        let maps = format!("/proc/{}/maps", k.0.id());
        for _ in 0..200 {
            if std::fs::read_to_string(&maps).unwrap_or_default().contains("libc.so") {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        k
    }

    fn quick() -> ManagerLimits {
        ManagerLimits {
            exit_grace: Duration::ZERO,
            file_unload_grace: Duration::ZERO,
            maps_refresh_interval: Duration::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn loads_shares_and_unloads_files() {
        let registry = Arc::new(ProcessRegistry::new());
        let mut m = ProcessManager::new(Recorder::default(), registry.clone(), quick());
        let (a, b) = (sleeper(), sleeper());
        let (pa, pb) = (Pid(a.0.id()), Pid(b.0.id()));
        m.on_new_process(pa);
        let files_after_one = m.loader().files.len();
        assert!(files_after_one >= 2, "sleep, libc, ld.so, vdso: {files_after_one}");
        m.on_new_process(pb);
        assert_eq!(m.loader().files.len(), files_after_one, "the second sleep shares every file");
        assert_eq!(m.stats().processes, 2);
        let snap = registry.get(pa).unwrap();
        assert_eq!(&*snap.info.executable_name, "sleep");
        let libc = snap.mappings.iter().find(|s| s.mapping.path.contains("libc.so")).expect("libc mapped");
        assert!(libc.mapping.file_id.is_some() && libc.mapping.gnu_build_id.is_some());
        assert!(m.loader().processes[&pa].iter().any(|u| matches!(u.target, UnwindTarget::File { .. })));
        assert!(snap.mappings.iter().any(|s| s.mapping.path.as_ref() == "[vdso]" && s.file.is_some()));

        m.on_exit(pa);
        m.tick();
        assert!(registry.get(pa).is_none());
        assert_eq!(m.loader().files.len(), files_after_one, "b still maps them");
        drop(b);
        m.on_exit(pb);
        m.tick();
        assert!(m.loader().files.is_empty(), "{:?}", m.loader().files);
        assert!(m.loader().processes.is_empty());
        assert!(registry.is_empty());
        let s = m.stats();
        assert_eq!((s.processes, s.files, s.processes_exited), (0, 0, 2));
    }

    #[test]
    fn vanished_and_missed_exits_are_handled() {
        let registry = Arc::new(ProcessRegistry::new());
        let limits = ManagerLimits { liveness_interval: Duration::ZERO, ..quick() };
        let mut m = ProcessManager::new(Recorder::default(), registry.clone(), limits);
        m.on_new_process(Pid(u32::MAX - 1));
        assert_eq!(m.stats().maps_read_failures, 1);
        let a = sleeper();
        let pa = Pid(a.0.id());
        m.on_new_process(pa);
        assert!(m.is_loaded(pa));
        drop(a); // exits, and no exit event comes
        m.tick();
        m.tick();
        assert!(!m.is_loaded(pa));
        assert!(m.loader().files.is_empty());
    }

    #[test]
    fn exec_preloads_within_budget_and_resyncs() {
        let registry = Arc::new(ProcessRegistry::new());
        let limits = ManagerLimits { exec_preloads_per_second: 1.0, ..quick() };
        let mut m = ProcessManager::new(Recorder::default(), registry, limits);
        let (a, b) = (sleeper(), sleeper());
        m.on_exec(Pid(a.0.id()));
        assert!(m.is_loaded(Pid(a.0.id())));
        assert!(m.next_deadline().is_some(), "maps are read again after an exec");
        m.on_exec(Pid(b.0.id()));
        assert!(!m.is_loaded(Pid(b.0.id())), "over budget: loaded at its first sample");
        assert_eq!(m.stats().exec_preloads_skipped, 1);
        std::thread::sleep(Duration::from_millis(110));
        let reads = m.stats().maps_reads;
        m.run_due();
        assert_eq!(m.stats().maps_reads, reads + 3);
        assert_eq!(m.next_deadline(), None);
    }

    #[test]
    fn interning_while_consuming_keeps_order() {
        use profiler_elf::{StackDelta, UnwindRule};
        let rules = [UnwindRule::Stop, UnwindRule::Signal, UnwindRule::UnfollowedSwitch];
        let deltas: Vec<StackDelta> = (0..3 * INTERN_CHUNK as u64 + 17)
            .map(|i| StackDelta { address: 0x1000 + 4 * i, rule: rules[(i % 7 % 3) as usize] })
            .collect();
        let want = RuleInterner::new().intern_deltas(&deltas).unwrap();
        let got = intern_consuming(&mut RuleInterner::new(), deltas).unwrap();
        assert_eq!(got, want);
    }

    /// A copy of `sleep` in a temp dir, running, its maps read.
    fn copied_sleeper(dir: &Path) -> (Kill, PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let exe = dir.join("sleepy");
        let sleep = Command::new("sh").arg("-c").arg("command -v sleep").output().unwrap();
        let sleep = String::from_utf8(sleep.stdout).unwrap();
        std::fs::copy(sleep.trim(), &exe).unwrap();
        let k = Kill(Command::new(&exe).arg("30").spawn().unwrap());
        let maps = format!("/proc/{}/maps", k.0.id());
        for _ in 0..200 {
            if std::fs::read_to_string(&maps).unwrap_or_default().contains("libc.so") {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (k, exe)
    }

    fn mapping_of<'a>(registry: &'a ProcessSnapshot, name: &str) -> &'a SnapshotMapping {
        registry.mappings.iter().find(|m| m.mapping.path.ends_with(name)).expect("mapped")
    }

    #[test]
    fn without_map_files_only_the_mapped_inode_is_used() {
        let dir = std::env::temp_dir().join(format!("ep-manager-{}-swap", std::process::id()));
        let (k, exe) = copied_sleeper(&dir);
        let pid = Pid(k.0.id());
        let registry = Arc::new(ProcessRegistry::new());
        let limits = ManagerLimits { open_via_map_files: false, ..quick() };
        let mut m = ProcessManager::new(Recorder::default(), registry.clone(), limits);
        m.on_new_process(pid);
        let snap = registry.get(pid).unwrap();
        let first = mapping_of(&snap, "sleepy").file.clone().expect("opened by path, same inode");
        assert_eq!(m.stats().files_refused, Refusals::default());

        // Replaced on disk (by rename, as package managers do): the path
        // now names another inode, which is refused.
        let new = dir.join("new");
        std::fs::copy("/proc/self/exe", &new).unwrap();
        std::fs::rename(&new, &exe).unwrap();
        m.on_unknown_pc(pid, 0);
        let snap = registry.get(pid).unwrap();
        assert!(mapping_of(&snap, "sleepy").file.is_none(), "the new file is not the mapped one");
        assert_eq!(m.stats().files_refused.mismatch, 1);
        assert!(first.identity.is_some(), "a file on disk carries the inode it was read from");

        // Replaced by a FIFO: refused without blocking.
        std::fs::remove_file(&exe).unwrap();
        let c = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        m.on_unknown_pc(pid, 0);
        assert_eq!(m.stats().files_refused.not_regular, 1);
        assert!(m.is_loaded(pid));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn same_file_id_different_content_gets_its_own_table() {
        // Two copies of `sleep` with the same head, tail and length but a
        // different middle: one FileId, two contents.
        let dir = std::env::temp_dir().join(format!("ep-manager-{}-collide", std::process::id()));
        let (a, exe) = copied_sleeper(&dir.join("a"));
        let mut bytes = std::fs::read(&exe).unwrap();
        assert!(bytes.len() > 3 * 4096);
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid - 64..mid + 64] {
            *b ^= 0x5a;
        }
        let crafted_dir = dir.join("b");
        std::fs::create_dir_all(&crafted_dir).unwrap();
        let crafted = crafted_dir.join("sleepy");
        std::fs::write(&crafted, &bytes).unwrap();
        std::fs::set_permissions(&crafted, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let b = Kill(Command::new(&crafted).arg("30").spawn().unwrap());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(profiler_elf::file_id_of_path(&exe).unwrap(), profiler_elf::file_id_of_path(&crafted).unwrap());

        let registry = Arc::new(ProcessRegistry::new());
        let mut m = ProcessManager::new(Recorder::default(), registry.clone(), quick());
        m.on_new_process(Pid(b.0.id()));
        m.on_new_process(Pid(a.0.id()));
        let fa = mapping_of(&registry.get(Pid(a.0.id())).unwrap(), "sleepy").file.clone().unwrap();
        let fb = mapping_of(&registry.get(Pid(b.0.id())).unwrap(), "sleepy").file.clone().unwrap();
        assert_eq!(fa.file_id, fb.file_id, "the wire id is shared");
        assert_ne!(fa.table_key, fb.table_key, "the tables are not");
        assert!(m.loader().files.contains_key(&fa.table_key) && m.loader().files.contains_key(&fb.table_key));
        assert_eq!(m.stats().file_id_collisions, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn process_limit_is_counted() {
        let registry = Arc::new(ProcessRegistry::new());
        let limits = ManagerLimits { max_processes: 1, ..quick() };
        let mut m = ProcessManager::new(Recorder::default(), registry, limits);
        let (a, b) = (sleeper(), sleeper());
        m.on_new_process(Pid(a.0.id()));
        m.on_new_process(Pid(b.0.id()));
        assert_eq!(m.stats().processes, 1);
        assert_eq!(m.stats().processes_rejected, 1);
    }
}
