//! Native symbolization off the caller's thread: files load on a
//! background worker, lookups answer from bounded caches, and a lookup in
//! a file still loading says so ([`Symbolized::Pending`]) instead of
//! waiting.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use profiler_elf::source::Refusals;
use profiler_trace::{SourceLine, TableKey};

use crate::budget::{thread_cpu, Budget};
use crate::cache::NameCache;
use crate::debugfile::DebugConfig;
use crate::file::{DwarfPart, FileSymbolizer, LineSource};
use crate::release::PageReleaser;
use crate::source::{FileSource, LoadError};

/// Settings of a [`NativeSymbolizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeConfig {
    /// Symbolize native frames at all. When false, nothing is loaded, no
    /// thread is started, and every lookup is
    /// `Unknown(Reason::Disabled)`. Default true.
    pub enabled: bool,
    /// DWARF use and where separate debug files are looked for.
    pub debug: DebugConfig,
    /// Most files kept loaded (least recently used ones are dropped).
    /// Default 256.
    pub max_files: usize,
    /// The memory budget of loaded files: most heap bytes they hold, as
    /// accounted by [`FileSymbolizer::cost`] (symbols, decompressed and
    /// parsed DWARF including the units lookups parse later, interned
    /// names). Beyond it, the DWARF units lookups parsed are given up
    /// first (the least recently used of all files; parsed again when an
    /// address not in the address cache needs them), then the least
    /// recently used files are dropped; a file that alone grows beyond
    /// it is dropped too (its answers stay in the address cache; a new
    /// address loads it again). DWARF too large for
    /// [`DebugConfig::max_dwarf_bytes`] is not loaded at all. The budget
    /// grows while that costs CPU ([`Self::max_file_bytes_busy`]).
    ///
    /// Default 8 MiB: the symbols of a few hundred files (a 150 MB
    /// library's 100,000 symbols: 1.2 MiB) and the DWARF of a few. Not
    /// more: the DWARF units lookups parse keep coming as new addresses
    /// are sampled, so a larger budget only fills more slowly, and the
    /// agent's RSS rises with it for as long as it runs.
    pub max_file_bytes: u64,
    /// Most the budget grows to: while parsing again the units it gave
    /// up and loading again the files it dropped takes 1% of a core or
    /// more (their threads' CPU time over 10 s), the budget grows by half of
    /// [`Self::max_file_bytes`]; after a minute or more under 0.1%, it
    /// shrinks by as much (more slowly after each growth). At most
    /// `max_file_bytes` keeps the budget fixed.
    ///
    /// Default 24 MiB: at high sampling rates 8 MiB makes parsing
    /// given-up units again a large share of the agent's CPU, while
    /// twice that holds the files in use; 24 MiB leaves room above it.
    pub max_file_bytes_busy: u64,
    /// Most cached (file, address) answers (about 150 bytes each).
    /// Default 16,384.
    pub max_addresses: usize,
    /// Most loads waiting for the worker; further requests are dropped
    /// (counted) and asked again by a later lookup. Default 64.
    pub queue_capacity: usize,
    /// How long a file that failed to load is not tried again. Default 10 s.
    pub retry_failed_after: Duration,
    /// Over the budget, a file whose load took less CPU than this
    /// (a small library or debug file: milliseconds; librustc_driver's
    /// symbols take a second) is dropped whole among the parsed DWARF
    /// units once its last lookup is older than theirs. Default 20 ms;
    /// zero keeps every file until giving up units is not enough.
    pub cheap_reload: Duration,
}

impl Default for NativeConfig {
    fn default() -> NativeConfig {
        NativeConfig {
            enabled: true,
            debug: DebugConfig::default(),
            max_files: 256,
            max_file_bytes: 8 << 20,
            max_file_bytes_busy: 24 << 20,
            max_addresses: 16_384,
            queue_capacity: 64,
            retry_failed_after: Duration::from_secs(10),
            cheap_reload: Duration::from_millis(20),
        }
    }
}

/// The answer for one address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Symbolized {
    /// Named: source lines innermost (inlined) first, the containing
    /// function last (never empty), and which source named them.
    Lines {
        /// The lines, shared with the cache.
        lines: Arc<[SourceLine]>,
        /// Where they came from ([`LineSource::GoPclntab`] marks Go code).
        source: LineSource,
    },
    /// The file is being loaded; ask again later (e.g. next interval).
    Pending,
    /// Not named, and why.
    Unknown(Reason),
}

/// Why an address has no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Native symbolization is turned off.
    Disabled,
    /// The file is loaded but no source covers the address.
    UnknownAddress,
    /// The file could not be opened or parsed (tried again after
    /// [`NativeConfig::retry_failed_after`]).
    LoadFailed,
    /// The load queue was full; a later lookup asks again.
    QueueFull,
}

/// Counters and gauges of a [`NativeSymbolizer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeStats {
    /// Lookups answered from the address cache.
    pub address_hits: u64,
    /// Lookups not in the address cache.
    pub address_misses: u64,
    /// Address cache entries dropped to stay within its bound.
    pub address_evictions: u64,
    /// Lookups answered [`Symbolized::Pending`].
    pub pending: u64,
    /// Loads handed to the worker.
    pub loads_requested: u64,
    /// Loads finished successfully.
    pub loads_done: u64,
    /// Loads that failed.
    pub loads_failed: u64,
    /// Load requests dropped because the queue was full.
    pub queue_drops: u64,
    /// Loaded files dropped to stay within the bounds.
    pub file_evictions: u64,
    /// Of those, files cheap to load again dropped among parsed DWARF
    /// units because their last lookup was older than the units'.
    pub cold_files_dropped: u64,
    /// Loads of a file evicted lately (of the last 256 evicted): the
    /// budget is short of what is in use.
    pub reloads: u64,
    /// Files whose DWARF was not loaded because it would take more than
    /// [`DebugConfig::max_dwarf_bytes`] (named from symbols instead).
    pub dwarf_too_large: u64,
    /// DWARF units parsed by lookups and dropped again, least recently
    /// used first, to keep a file's DWARF within
    /// [`DebugConfig::max_dwarf_bytes`] (parsed again when looked up).
    pub dwarf_units_dropped: u64,
    /// DWARF units parsed by lookups (again after being given up or
    /// dropped included): the parsing work lookups did.
    pub dwarf_units_parsed: u64,
    /// DWARF units parsed by lookups and given up again, the least
    /// recently used of all files first, to keep all files within
    /// [`NativeConfig::max_file_bytes`] before any file is dropped
    /// (parsed again when looked up).
    pub dwarf_units_shed: u64,
    /// Sum of load times, milliseconds.
    pub load_ms_total: u64,
    /// Longest load, milliseconds.
    pub load_ms_max: u64,
    /// Files (and separate debug file candidates) refused: not regular,
    /// too large, not the file analysed, a path leaving the process's
    /// root.
    pub files_refused: Refusals,
    /// Files loaded now.
    pub files_loaded: u64,
    /// Heap bytes of the loaded files now, as accounted
    /// ([`FileSymbolizer::cost`]); at most [`Self::budget_bytes`] once a
    /// lookup or load has made room.
    pub file_bytes: u64,
    /// The byte budget now: [`NativeConfig::max_file_bytes`], raised
    /// while redoing what it gave up costs CPU (at most
    /// [`NativeConfig::max_file_bytes_busy`]).
    pub budget_bytes: u64,
    /// Times the budget was raised.
    pub budget_raises: u64,
    /// DWARF units parsed again after being given up for the budget.
    pub dwarf_units_reparsed: u64,
    /// Addresses cached now.
    pub addresses_cached: u64,
    /// Loads whose parsing panicked in the worker thread (the file is
    /// dropped, the worker goes on).
    pub panics: u64,
}

/// A cached answer: the lines and their source.
type Named = (Arc<[SourceLine]>, LineSource);

enum State {
    Loading,
    /// Loaded; `complete` is false while its DWARF still loads (lookups
    /// answer from its symbols, without caching the answer).
    Loaded {
        file: Box<FileSymbolizer>,
        complete: bool,
    },
    Failed(Instant),
}

struct Slot {
    state: State,
    last_used: u64,
    cost: u64,
    /// The cost once loaded, before lookups parsed DWARF units: what
    /// loading it again takes.
    loaded_cost: u64,
    /// Its DWARF units dropped for the file's limit, as last counted.
    units_dropped: u64,
    /// Its DWARF units parsed by lookups, as last counted.
    units_parsed: u64,
    /// Its DWARF units parsed again after being given up, as last counted.
    units_reparsed: u64,
    /// Loaded again after being evicted: its load is work the budget
    /// caused.
    reload: bool,
    /// The DWARF unit clock ([`crate::dwarf::unit_clock`]) at its last
    /// lookup past the address cache, or at its load.
    looked_up: u64,
    /// The worker's CPU time for its load (both steps).
    load_cpu: Duration,
}

impl Slot {
    fn new(state: State, tick: u64, cost: u64) -> Slot {
        Slot {
            state,
            last_used: tick,
            cost,
            loaded_cost: cost,
            units_dropped: 0,
            units_parsed: 0,
            units_reparsed: 0,
            reload: false,
            looked_up: crate::dwarf::unit_clock(),
            load_cpu: Duration::ZERO,
        }
    }

    /// Marks the file failed (given up for a while) and hands out what it
    /// held, its state and cost, as a slot of their own to be dropped;
    /// its counters stay.
    fn give_up(&mut self) -> Slot {
        Slot {
            state: std::mem::replace(&mut self.state, State::Failed(Instant::now())),
            last_used: 0,
            cost: std::mem::take(&mut self.cost),
            ..*self
        }
    }
}

/// Files evicted lately, remembered to count the ones loaded again
/// ([`NativeStats::reloads`]).
const RECENTLY_EVICTED: usize = 256;

struct LoadRequest {
    file_id: TableKey,
    source: FileSource,
}

/// What the worker sends: a load in one step (`Done`), or in two
/// (`Symbols`, then `Dwarf`).
enum Step {
    /// The whole load.
    Done(Result<FileSymbolizer, LoadError>),
    /// Symbols and Go's table; the DWARF step follows.
    Symbols(FileSymbolizer),
    /// The DWARF step.
    Dwarf(DwarfPart),
}

struct LoadResult {
    file_id: TableKey,
    step: Step,
    elapsed: Duration,
    /// The worker's CPU time for it (what a reload costs the budget).
    cpu: Duration,
}

/// Blocks the worker while held; see [`NativeSymbolizer::hold_loads`].
#[derive(Default)]
struct Gate {
    holds: Mutex<u32>,
    released: Condvar,
}

impl Gate {
    fn wait_open(&self) {
        let mut holds = self.holds.lock().unwrap_or_else(|p| p.into_inner());
        while *holds > 0 {
            holds = self.released.wait(holds).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Gate {
    fn hold(self: &Arc<Gate>) -> LoadHold {
        let mut holds = self.holds.lock().unwrap_or_else(|p| p.into_inner());
        *holds += 1;
        LoadHold { gate: self.clone() }
    }
}

/// The worker's gates: before a load, and before a load's DWARF step.
#[derive(Default)]
struct Gates {
    load: Arc<Gate>,
    dwarf: Arc<Gate>,
}

/// While this lives, the worker starts no load, or no DWARF step (for
/// tests that need a file to stay pending, or named from its symbols).
pub struct LoadHold {
    gate: Arc<Gate>,
}

impl Drop for LoadHold {
    fn drop(&mut self) {
        let mut holds = self.gate.holds.lock().unwrap_or_else(|p| p.into_inner());
        *holds -= 1;
        self.gate.released.notify_all();
    }
}

/// Names native frames: `(TableKey, ELF virtual address)` to source lines
/// (keyed by the file's content digest, so two files sharing a
/// [`profiler_trace::FileId`] never share names),
/// from DWARF (with inline frames), separate debug files, Go's function
/// table and ELF symbols, with C++ and Rust names demangled.
///
/// Owned by one thread (methods take `&mut self`); files load on a
/// worker thread it starts. A lookup never waits for a load: the first
/// lookup in a file queues its load and answers [`Symbolized::Pending`],
/// as do lookups until the load is done; the loaded file then answers
/// every later lookup. Loaded files are kept in an LRU bounded by count
/// and estimated bytes, answers in a bounded address cache.
///
/// ```no_run
/// use profiler_symbolize::{FileSource, NativeConfig, NativeSymbolizer, Symbolized};
/// # let file_id = profiler_trace::TableKey([0; 32]);
/// let mut symbolizer = NativeSymbolizer::new(NativeConfig::default())?;
/// let path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
/// match symbolizer.symbolize(file_id, 0x2a1c9, || FileSource::new(path)) {
///     Symbolized::Lines { lines, .. } => println!("{}", lines[lines.len() - 1].function),
///     Symbolized::Pending => println!("later"),
///     Symbolized::Unknown(reason) => println!("{reason:?}"),
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct NativeSymbolizer {
    config: NativeConfig,
    files: HashMap<TableKey, Slot>,
    loading: usize,
    tick: u64,
    addresses: NameCache<(TableKey, u64), Option<Named>>,
    requests: Option<Sender<LoadRequest>>,
    results: Receiver<LoadResult>,
    gates: Arc<Gates>,
    stats: NativeStats,
    budget: Budget,
    /// Ids of the files evicted last, oldest first.
    recently_evicted: VecDeque<TableKey>,
    /// Drops the file pages lookups read a moment later (None when
    /// disabled).
    releaser: Option<PageReleaser>,
    /// Files whose maps wait for the releaser's next release
    /// ([`PageReleaser::generation`] `queued_at`).
    queued: HashSet<TableKey>,
    queued_at: u64,
    /// Load results installed so far ([`NativeSymbolizer::loads_installed`]).
    installed: u64,
}

impl std::fmt::Debug for NativeSymbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeSymbolizer")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl NativeSymbolizer {
    /// A symbolizer with `config`; starts the load worker thread
    /// (`symbolize-load`) unless disabled. Fails only if the thread
    /// cannot be started.
    pub fn new(config: NativeConfig) -> std::io::Result<NativeSymbolizer> {
        // Every request yields at most two results and at most queue + 1
        // requests are outstanding (queued, plus the one loading), so the
        // result channel never blocks the worker.
        let capacity = config.queue_capacity.max(1);
        let (result_tx, results) = crossbeam_channel::bounded(2 * (capacity + 1));
        let gates = Arc::new(Gates::default());
        let requests = if config.enabled {
            let (tx, rx) = crossbeam_channel::bounded::<LoadRequest>(capacity);
            let debug = config.debug.clone();
            let gates = gates.clone();
            std::thread::Builder::new()
                .name("symbolize-load".into())
                .spawn(move || worker(rx, result_tx, debug, gates))?;
            Some(tx)
        } else {
            None
        };
        let releaser = if config.enabled { Some(PageReleaser::start()?) } else { None };
        let budget = Budget::new(config.max_file_bytes, config.max_file_bytes_busy, Instant::now());
        Ok(NativeSymbolizer {
            addresses: NameCache::new(config.max_addresses),
            config,
            files: HashMap::new(),
            loading: 0,
            tick: 0,
            requests,
            results,
            gates,
            stats: NativeStats::default(),
            budget,
            recently_evicted: VecDeque::new(),
            releaser,
            queued: HashSet::new(),
            queued_at: 0,
            installed: 0,
        })
    }

    /// Installs the loads the loader threads finished since the last
    /// call or lookup, so that [`NativeSymbolizer::loads_in_flight`]
    /// counts only those still running (lookups install them too).
    pub fn install_finished_loads(&mut self) {
        if self.requests.is_some() {
            self.collect_results();
        }
    }

    /// Files being loaded now (their lookups answer
    /// [`Symbolized::Pending`]), as of the last
    /// [`NativeSymbolizer::install_finished_loads`] or lookup.
    pub fn loads_in_flight(&self) -> usize {
        self.loading
    }

    /// How many load results (a file's symbols, its DWARF, a failure)
    /// have been installed so far: while it stays the same, a lookup that
    /// answered [`Symbolized::Pending`] or `Unknown(QueueFull)` answers
    /// the same again.
    pub fn loads_installed(&self) -> u64 {
        self.installed
    }

    /// Whether native symbolization is on.
    pub fn enabled(&self) -> bool {
        self.requests.is_some()
    }

    /// Names `vaddr`, an ELF virtual address in the file `file_id`. For a
    /// return address pass the call's address (return address - 1).
    ///
    /// `source` says how to open the file; it is called only when the
    /// file must be (re)loaded, so the common path allocates nothing.
    /// Never blocks on a load.
    pub fn symbolize(&mut self, file_id: TableKey, vaddr: u64, source: impl FnOnce() -> FileSource) -> Symbolized {
        if self.requests.is_none() {
            return Symbolized::Unknown(Reason::Disabled);
        }
        self.collect_results();
        self.tick += 1;
        let key = (file_id, vaddr);
        if let Some(answer) = self.addresses.get(&key) {
            if let Some(slot) = self.files.get_mut(&file_id) {
                slot.last_used = self.tick;
            }
            return match answer {
                Some((lines, source)) => Symbolized::Lines { lines, source },
                None => Symbolized::Unknown(Reason::UnknownAddress),
            };
        }
        let tick = self.tick;
        let retry = self.config.retry_failed_after;
        enum Next {
            Answer(Symbolized),
            Looked {
                answer: Option<Named>,
                cost: u64,
                units_dropped: u64,
                units_parsed: u64,
                units_reparsed: u64,
                spent: Duration,
                complete: bool,
            },
            Broken,
            Request,
        }
        let next = match self.files.get_mut(&file_id) {
            None => Next::Request,
            Some(slot) => {
                slot.last_used = tick;
                match &slot.state {
                    State::Loaded { file, complete } => {
                        if let Some(releaser) = &self.releaser {
                            let generation = releaser.generation();
                            if generation != self.queued_at {
                                self.queued.clear();
                                self.queued_at = generation;
                            }
                            if self.queued.insert(file_id) {
                                releaser.queue(file.maps());
                            }
                        }
                        // Lookups parse DWARF; a bug there must not take
                        // the caller down: the file is then given up.
                        let started = thread_cpu();
                        let looked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.symbolize(vaddr)));
                        match looked {
                            Ok(answer) => Next::Looked {
                                answer: answer.map(|(lines, source)| (Arc::<[SourceLine]>::from(lines), source)),
                                // Lazily parsed DWARF grows the file's cost.
                                cost: file.cost(),
                                units_dropped: file.dwarf_units_dropped(),
                                units_parsed: file.dwarf_units_parsed(),
                                units_reparsed: file.dwarf_units_reparsed(),
                                spent: thread_cpu().saturating_sub(started),
                                complete: *complete,
                            },
                            Err(_) => Next::Broken,
                        }
                    }
                    State::Loading => Next::Answer(Symbolized::Pending),
                    State::Failed(at) if at.elapsed() < retry => Next::Answer(Symbolized::Unknown(Reason::LoadFailed)),
                    State::Failed(_) => Next::Request,
                }
            }
        };
        match next {
            Next::Answer(a) => {
                if a == Symbolized::Pending {
                    self.stats.pending += 1;
                }
                a
            }
            Next::Looked { answer, cost, units_dropped, units_parsed, units_reparsed, spent, complete } => {
                if let Some(slot) = self.files.get_mut(&file_id) {
                    slot.looked_up = crate::dwarf::unit_clock();
                    self.stats.file_bytes = self.stats.file_bytes - slot.cost + cost;
                    slot.cost = cost;
                    self.stats.dwarf_units_dropped += units_dropped.saturating_sub(slot.units_dropped);
                    slot.units_dropped = units_dropped;
                    self.stats.dwarf_units_parsed += units_parsed.saturating_sub(slot.units_parsed);
                    slot.units_parsed = units_parsed;
                    if units_reparsed > slot.units_reparsed {
                        self.stats.dwarf_units_reparsed += units_reparsed - slot.units_reparsed;
                        self.budget.rework(spent);
                    }
                    slot.units_reparsed = units_reparsed;
                }
                self.evict(Some(file_id));
                if !complete {
                    // Named from symbols while DWARF loads: not cached,
                    // DWARF may name it better in a moment.
                    return match answer {
                        Some((lines, source)) => Symbolized::Lines { lines, source },
                        None => {
                            self.stats.pending += 1;
                            Symbolized::Pending
                        }
                    };
                }
                self.addresses.insert(key, answer.clone());
                match answer {
                    Some((lines, source)) => Symbolized::Lines { lines, source },
                    None => Symbolized::Unknown(Reason::UnknownAddress),
                }
            }
            Next::Broken => {
                if let Some(slot) = self.files.get_mut(&file_id) {
                    if let State::Loaded { complete, .. } = slot.state {
                        self.stats.files_loaded -= 1;
                        self.stats.file_bytes -= slot.cost;
                        if !complete {
                            self.loading -= 1;
                        }
                    }
                    slot.cost = 0;
                    slot.state = State::Failed(Instant::now());
                }
                self.stats.loads_failed += 1;
                Symbolized::Unknown(Reason::LoadFailed)
            }
            Next::Request => self.request(file_id, source()),
        }
    }

    /// Queues a load of `file_id`.
    fn request(&mut self, file_id: TableKey, source: FileSource) -> Symbolized {
        let Some(tx) = &self.requests else {
            return Symbolized::Unknown(Reason::Disabled);
        };
        match tx.try_send(LoadRequest { file_id, source }) {
            Ok(()) => {
                self.stats.loads_requested += 1;
                self.stats.pending += 1;
                self.loading += 1;
                let mut slot = Slot::new(State::Loading, self.tick, 0);
                if self.recently_evicted.contains(&file_id) {
                    self.stats.reloads += 1;
                    slot.reload = true;
                }
                self.files.insert(file_id, slot);
                self.evict(Some(file_id));
                Symbolized::Pending
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.queue_drops += 1;
                Symbolized::Unknown(Reason::QueueFull)
            }
        }
    }

    /// Installs finished loads.
    fn collect_results(&mut self) {
        while let Ok(r) = self.results.try_recv() {
            self.installed += 1;
            self.install(r);
        }
    }

    fn install(&mut self, r: LoadResult) {
        let Some(slot) = self.files.get_mut(&r.file_id) else {
            // Evicted while loading: drop the result.
            return;
        };
        let (elapsed, cpu, reload) = (r.elapsed, r.cpu, slot.reload);
        slot.load_cpu = slot.load_cpu.saturating_add(cpu);
        slot.looked_up = crate::dwarf::unit_clock();
        let done = |stats: &mut NativeStats, budget: &mut Budget| {
            let ms = elapsed.as_millis() as u64;
            stats.load_ms_total += ms;
            stats.load_ms_max = stats.load_ms_max.max(ms);
            if reload {
                budget.rework(cpu);
            }
        };
        match (r.step, &mut slot.state) {
            (Step::Done(result), State::Loading) => {
                self.loading -= 1;
                done(&mut self.stats, &mut self.budget);
                match result {
                    Ok(file) => {
                        self.stats.loads_done += 1;
                        self.stats.files_loaded += 1;
                        slot.cost = file.cost();
                        slot.loaded_cost = slot.cost;
                        self.stats.file_bytes += slot.cost;
                        slot.state = State::Loaded { file: Box::new(file), complete: true };
                    }
                    Err(e) => {
                        if let LoadError::Refused { reason, .. } = &e {
                            self.stats.files_refused.count(reason);
                        }
                        self.stats.loads_failed += 1;
                        if matches!(e, LoadError::Panicked { .. }) {
                            self.stats.panics += 1;
                        }
                        slot.state = State::Failed(Instant::now());
                    }
                }
            }
            (Step::Symbols(file), State::Loading) => {
                self.stats.files_loaded += 1;
                slot.cost = file.cost();
                slot.loaded_cost = slot.cost;
                self.stats.file_bytes += slot.cost;
                slot.state = State::Loaded { file: Box::new(file), complete: false };
            }
            (Step::Dwarf(part), State::Loaded { file, complete: complete @ false }) => {
                self.loading -= 1;
                done(&mut self.stats, &mut self.budget);
                self.stats.loads_done += 1;
                self.stats.files_refused.add(&part.refusals());
                if matches!(part.error(), Some(crate::DwarfError::TooLarge { .. })) {
                    self.stats.dwarf_too_large += 1;
                }
                if part.panicked {
                    self.stats.panics += 1;
                }
                file.attach(part);
                *complete = true;
                let cost = file.cost();
                self.stats.file_bytes = self.stats.file_bytes - slot.cost + cost;
                slot.cost = cost;
                slot.loaded_cost = cost;
            }
            // A result for a state it does not belong to (the slot was
            // replaced): ignored.
            _ => return,
        }
        self.evict(Some(r.file_id));
    }

    /// Gives up parsed DWARF units while over the byte budget: the least
    /// recently used of all files first, the unit each file used last
    /// aside. A file cheap to load again ([`NativeConfig::cheap_reload`]) is
    /// dropped whole in the same order, when its last lookup is older
    /// than the units left: a debug file looked up once (libm's from
    /// libc6-dbg holds 1.9 MB of decompressed DWARF) must not push out
    /// the units of a file in use (libpython's, parsed again and again
    /// at 20 Hz churn). Other files are dropped only when that is not
    /// enough: loading one again (a 150 MB library's symbols) costs far
    /// more than parsing a unit again. One order for all files keeps the
    /// units in use (libpython's eval loop, libc's) however many other
    /// files lookups touch in between.
    fn shed_dwarf_units(&mut self, keep: Option<TableKey>) {
        if self.stats.file_bytes <= self.budget.bytes() {
            return;
        }
        // (last use, file, unit; `None`: the whole file).
        let mut items: Vec<(u64, TableKey, Option<u32>)> = Vec::new();
        let mut uses = Vec::new();
        for (id, slot) in &self.files {
            if let State::Loaded { file, complete } = &slot.state {
                uses.clear();
                file.dwarf_unit_uses(&mut uses);
                items.extend(uses.iter().map(|&(used, unit)| (used, *id, Some(unit))));
                if *complete && Some(*id) != keep && slot.load_cpu < self.config.cheap_reload {
                    items.push((slot.looked_up, *id, None));
                }
            }
        }
        items.sort_unstable();
        for (_, id, unit) in items {
            if self.stats.file_bytes <= self.budget.bytes() {
                break;
            }
            let Some(unit) = unit else {
                if self.drop_file(id) {
                    self.stats.cold_files_dropped += 1;
                }
                continue;
            };
            let Some(slot) = self.files.get_mut(&id) else {
                continue;
            };
            let State::Loaded { file, .. } = &slot.state else {
                continue;
            };
            if file.give_up_dwarf_unit(unit) > 0 {
                let cost = file.cost();
                self.stats.file_bytes = self.stats.file_bytes - slot.cost + cost;
                slot.cost = cost;
                self.stats.dwarf_units_shed += 1;
            }
        }
    }

    /// Drops least recently used files beyond the bounds, sparing `keep`
    /// unless it alone is over the byte budget, once giving up parsed
    /// DWARF units was not enough.
    fn evict(&mut self, keep: Option<TableKey>) {
        self.budget.review(Instant::now());
        self.shed_dwarf_units(keep);
        let budget = self.budget.bytes();
        while self.files.len() > self.config.max_files.max(1) || self.stats.file_bytes > budget {
            // Over the byte budget only, a slot that holds nothing (a load
            // under way: librustc_driver's takes a second) frees nothing:
            // dropping it would only throw that work away.
            let bytes_only = self.files.len() <= self.config.max_files.max(1);
            let victim = self
                .files
                .iter()
                .filter(|(id, s)| Some(**id) != keep && !(bytes_only && s.cost == 0))
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id)
                .or(keep.filter(|_| self.stats.file_bytes > budget));
            let Some(victim) = victim else {
                break;
            };
            // A file whose lookups grew it over the budget (the DWARF
            // units they parsed), while loading it takes at most 3/4 of
            // it, is dropped like any other: a new address loads it again
            // (its answers so far stay cached) and it has a quarter of
            // the budget to grow into before the next drop. Giving it up
            // would leave its frames unnamed for `retry_failed_after`.
            let regrows = self.files.get(&victim).is_some_and(|s| s.loaded_cost <= budget / 4 * 3);
            if Some(victim) == keep && !regrows {
                // Over the budget on its own: given up for a while (as a
                // failed load), rather than loaded again at the next
                // address.
                let Some(slot) = self.files.get_mut(&victim) else {
                    break;
                };
                let held = slot.give_up();
                self.release(held, true);
            } else if !self.drop_file(victim) {
                break;
            }
        }
    }

    /// Removes `victim` (remembered as evicted, to count a reload) and
    /// releases what it held; whether it was there.
    fn drop_file(&mut self, victim: TableKey) -> bool {
        let Some(slot) = self.files.remove(&victim) else {
            return false;
        };
        if self.recently_evicted.len() >= RECENTLY_EVICTED {
            self.recently_evicted.pop_front();
        }
        self.recently_evicted.push_back(victim);
        self.release(slot, true);
        true
    }

    /// Takes what an evicted, given-up or replaced slot held off the
    /// counts; a loaded file counts as evicted when `evicted`.
    fn release(&mut self, slot: Slot, evicted: bool) {
        match slot.state {
            State::Loaded { complete, .. } => {
                if evicted {
                    self.stats.file_evictions += 1;
                }
                self.stats.files_loaded -= 1;
                self.stats.file_bytes -= slot.cost;
                // Its DWARF step's result will be ignored.
                if !complete {
                    self.loading -= 1;
                }
            }
            // Its result will be ignored when it arrives.
            State::Loading => self.loading -= 1,
            State::Failed(_) => {}
        }
    }

    /// Installs a file loaded by the caller, e.g. the vDSO built from
    /// bytes read out of a process with [`FileSymbolizer::from_elf`]
    /// (there is no path to load it from). Replaces what was known of
    /// `file_id`; no-op when disabled.
    pub fn insert(&mut self, file_id: TableKey, file: FileSymbolizer) {
        if self.requests.is_none() {
            return;
        }
        self.collect_results();
        self.tick += 1;
        if let Some(old) = self.files.remove(&file_id) {
            self.release(old, false);
        }
        let cost = file.cost();
        self.stats.files_loaded += 1;
        self.stats.file_bytes += cost;
        let mut slot = Slot::new(State::Loaded { file: Box::new(file), complete: true }, self.tick, cost);
        // No path to load it again from: never dropped as cheap to reload.
        slot.load_cpu = Duration::MAX;
        self.files.insert(file_id, slot);
        self.evict(Some(file_id));
    }

    /// Waits until no load is outstanding or `timeout` passes, installing
    /// results as they come; true when nothing is loading any more. For
    /// one-shot tools and tests; the profiler never waits.
    pub fn wait_for_loads(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.collect_results();
        while self.loading > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.results.recv_timeout(left) {
                Ok(r) => self.install(r),
                Err(_) => break,
            }
        }
        self.loading == 0
    }

    /// Stops the worker from starting loads until the returned guard is
    /// dropped (a load already running finishes). For tests that need a
    /// lookup to find its file still loading.
    #[doc(hidden)]
    pub fn hold_loads(&self) -> LoadHold {
        self.gates.load.hold()
    }

    /// Stops the worker from starting the DWARF step of loads until the
    /// returned guard is dropped: files answer from their symbols
    /// meanwhile. For tests.
    #[doc(hidden)]
    pub fn hold_dwarf_loads(&self) -> LoadHold {
        self.gates.dwarf.hold()
    }

    /// Counters and gauges.
    pub fn stats(&self) -> NativeStats {
        let names = self.addresses.stats();
        NativeStats {
            address_hits: names.hits,
            address_misses: names.misses,
            address_evictions: names.evictions,
            addresses_cached: names.entries,
            // Disabled, it holds nothing and has no budget to tell.
            budget_bytes: if self.enabled() { self.budget.bytes() } else { 0 },
            budget_raises: self.budget.raises(),
            ..self.stats
        }
    }
}

fn worker(requests: Receiver<LoadRequest>, results: Sender<LoadResult>, debug: DebugConfig, gates: Arc<Gates>) {
    // Parsing untrusted files: a bug must cost this file, not the thread.
    fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
    }
    // Ends when the symbolizer (the only sender) is dropped.
    for req in requests {
        gates.load.wait_open();
        let (start, start_cpu) = (Instant::now(), thread_cpu());
        let send = |step| {
            let (elapsed, cpu) = (start.elapsed(), thread_cpu().saturating_sub(start_cpu));
            results.send(LoadResult { file_id: req.file_id, step, elapsed, cpu }).is_ok()
        };
        let first = guarded(|| FileSymbolizer::load_symbols(&req.source, &debug))
            .unwrap_or_else(|| Err(LoadError::Panicked { path: req.source.open_path.clone() }));
        let sent = match first {
            Err(e) => send(Step::Done(Err(e))),
            Ok((file, None)) => send(Step::Done(Ok(file))),
            Ok((file, Some(job))) => {
                // Symbols first: the file answers with them while its
                // DWARF loads.
                if send(Step::Symbols(file)) {
                    gates.dwarf.wait_open();
                    let part = guarded(|| job.run()).unwrap_or_else(DwarfPart::panicked);
                    send(Step::Dwarf(part))
                } else {
                    false
                }
            }
        };
        if !sent {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_move_to_the_thread_that_uses_it() {
        fn send<T: Send>() {}
        send::<NativeSymbolizer>();
        send::<FileSymbolizer>();
    }

    #[test]
    fn disabled_starts_nothing() {
        let mut s = NativeSymbolizer::new(NativeConfig { enabled: false, ..NativeConfig::default() }).expect("new");
        assert!(!s.enabled());
        assert_eq!(s.symbolize(TableKey([1; 32]), 0x1000, || panic!("no load")), Symbolized::Unknown(Reason::Disabled));
        assert!(s.wait_for_loads(Duration::ZERO));
        assert_eq!(s.stats(), NativeStats::default());
    }
}
