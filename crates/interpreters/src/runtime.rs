//! The interface every runtime (CPython, HotSpot, ...) implements: find
//! itself in a file, say what its BPF unwinder needs of that file, and,
//! through one typed object per process that maps the file, what it
//! needs of that process and the names of the frames it records there.
//!
//! A runtime is registered once in [`crate::runtimes`]; the agent and the
//! trace builder only go through these traits and the
//! [`crate::Registry`] of what was found.

use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{Frame, FrameKind, SourceLine, UserFrame};
use std::fmt;
use std::sync::Arc;

/// The payload of `word` if it is a frame word of `unwinder`'s slot
/// (its layout is the runtime's own: decoded in its folder).
pub fn frame_payload(word: u64, unwinder: InterpreterUnwinder) -> Option<u64> {
    match UserFrame::decode(word) {
        UserFrame::Interpreted { slot, payload } if slot == unwinder as u8 => Some(payload),
        _ => None,
    }
}

/// The frame word `unwinder`'s BPF side writes for `payload`
/// (`frame_word_interpreted` in `ebpf/frame_word.h`).
pub fn frame_word(unwinder: InterpreterUnwinder, payload: u64) -> u64 {
    UserFrame::interpreted_word(unwinder as u8, payload)
}

/// A kind of interpreter the profiler unwinds.
pub trait Runtime: Send + Sync {
    /// Its name in notices and counters ("CPython").
    fn name(&self) -> &'static str;

    /// The kind of the frames it names.
    fn frame_kind(&self) -> FrameKind;

    /// Its BPF unwinder (whose name prefixes its counters in the
    /// agent's stats).
    fn unwinder(&self) -> InterpreterUnwinder;

    /// Whether a user frame word of a sample is one of its frames (its
    /// BPF unwinder recorded it): an interpreted word of its unwinder's
    /// slot.
    fn owns_frame(&self, word: u64) -> bool {
        frame_payload(word, self.unwinder()).is_some()
    }

    /// The address a frame of it reports (e.g. CPython: the bytecode
    /// offset), from its frame word.
    fn frame_address(&self, word: u64) -> u64;

    /// The name of a frame of it that could not be named (its process
    /// gone, its code freed, over the naming budget), when the word alone
    /// says what it is; `None` (the default): the frame stays unnamed,
    /// reported by its address.
    fn unnamed_frame(&self, _word: u64) -> Option<&'static str> {
        None
    }

    /// Names, from the native frames around them, frames of it left with
    /// [`Runtime::unnamed_frame`]'s name, in a whole stack (innermost
    /// first). The default: nothing.
    fn name_from_context(&self, _frames: &mut [Frame]) {}

    /// Symbols of which a file of this runtime defines at least one: a
    /// file defining none of them is not given to
    /// [`Runtime::detect_file`] (every file mapped is looked at, and one
    /// pass over its symbol tables for every runtime costs less than one
    /// per runtime). Empty (the default): every file is.
    fn marker_symbols(&self) -> &'static [&'static str] {
        &[]
    }

    /// Looks for the runtime in an executable file (`path` is its name,
    /// for what only the name tells). Never reads more of the file than
    /// the few symbols it needs.
    fn detect_file(&self, elf: &ElfFile, path: &str) -> FileDetection;

    /// The most its [process objects](RuntimeProcess) cache together,
    /// over all processes: past it, the registry empties their caches
    /// ([`RuntimeProcess::clear`]), as one cache is emptied when full.
    fn cache_bound(&self) -> CacheUse;

    /// Its naming counters before any frame is named (the default: all
    /// zero; BEAM's name its reasons for unknown frames).
    fn naming_counters(&self) -> NamerStats {
        NamerStats::default()
    }
}

/// What a runtime found in a file.
pub enum FileDetection {
    /// Not this runtime.
    NotFound,
    /// A build it unwinds.
    Found(Arc<dyn InterpreterFile>),
    /// This runtime, but a build it does not unwind: its frames stay
    /// native frames.
    Unsupported {
        /// Its version, when known.
        version: Option<String>,
        /// Why.
        reason: Refusal,
    },
}

/// A runtime's build found in one file: what its BPF unwinder needs.
/// Addresses are ELF virtual addresses (process address = vaddr + the
/// mapping's bias).
pub trait InterpreterFile: Send + Sync + fmt::Debug {
    /// The BPF program that unwinds its loops.
    fn unwinder(&self) -> InterpreterUnwinder;

    /// The code of its evaluation loop(s): `[start, end)` ranges, whose
    /// native frames its unwinder replaces by interpreted frames.
    fn loop_ranges(&self) -> &[(u64, u64)];

    /// Its entry in its unwinder's per-file map (`None`: its unwinder
    /// needs nothing per file, e.g. HotSpot's needs only
    /// [`RuntimeProcess::sync`]).
    fn file_value(&self) -> Option<RuntimeMapValue>;

    /// A process maps this file with `bias`: the runtime's object for
    /// that process (what it reads of the process once, HotSpot's VM
    /// structures say, and what it caches to name its frames), kept while
    /// the process lives and maps the file. It holds the file as its own
    /// type.
    fn attach(self: Arc<Self>, pid: u32, memory: &dyn ProcessMemory, bias: u64) -> Attach;
}

/// One runtime's object for one process mapping one of its files
/// ([`InterpreterFile::attach`]): it names the frames the runtime's
/// unwinder records in the process, and gives that unwinder what it
/// needs of the process. Dropped when the process exits or unmaps the
/// file (a little later: see [`crate::Registry::process_removed`]).
pub trait RuntimeProcess: Send {
    /// The lines of frame `word` (one the runtime
    /// [owns](Runtime::owns_frame)), innermost first: one for most
    /// runtimes, several for compiled code with inlined methods
    /// (HotSpot). Empty when it cannot be named (the process exited, the
    /// frame was garbage): the frame is kept, unnamed. Counted in
    /// `stats` (the runtime's counters, kept by the caller).
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine>;

    /// The words of one sample it is about to be asked to name
    /// ([`RuntimeProcess::lines`]), innermost first (a recursion's word
    /// comes more than once; it is named once): what it
    /// would read of each it may read now for all of them together
    /// ([`ProcessMemory::read_many`]), for those calls to use. The
    /// default: nothing.
    fn prefetch(&mut self, _memory: &dyn ProcessMemory, _words: &[u64]) {}

    /// What its unwinder needs of the process, read again each time the
    /// process's mappings change (a JVM's code cache grows): the
    /// process's code it unwinds (anonymous memory, in process addresses)
    /// and its per-process map value. `maps`: the process's executable
    /// mappings as the process manager just read them, sorted by address.
    /// `None` (the default): nothing (yet); the code stays native.
    fn sync(&mut self, _memory: &dyn ProcessMemory, _maps: &[ExecutableMapping<'_>]) -> Option<ProcessUnwinding> {
        None
    }

    /// What it caches now, counted against its runtime's
    /// [`Runtime::cache_bound`].
    fn cached(&self) -> CacheUse {
        CacheUse::default()
    }

    /// Drops what it caches (its runtime's bound is reached).
    fn clear(&mut self) {}
}

/// What process objects cache: entries and the bytes they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUse {
    /// Entries (what each runtime counts: code objects, methods,
    /// processes' symbolizers).
    pub entries: usize,
    /// Bytes (`usize::MAX` in a bound: not bounded by bytes).
    pub bytes: usize,
}

impl CacheUse {
    /// `entries` entries, unbounded in bytes.
    pub const fn entries(entries: usize) -> CacheUse {
        CacheUse { entries, bytes: usize::MAX }
    }

    /// Whether `self` is beyond `bound` in entries or bytes.
    pub fn exceeds(self, bound: CacheUse) -> bool {
        self.entries > bound.entries || self.bytes > bound.bytes
    }
}

/// An executable mapping of a process, as the process manager read it
/// from `/proc/PID/maps` ([`RuntimeProcess::sync`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecutableMapping<'a> {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Its path (empty for anonymous memory).
    pub path: &'a str,
    /// One past the inaccessible anonymous memory right after it, when
    /// it is anonymous: a JIT's reservation, committed later (`end`
    /// when there is none).
    pub reserved_end: u64,
}

/// What [`InterpreterFile::attach`] found in a process.
pub enum Attach {
    /// The runtime's object for the process.
    Attached(Box<dyn RuntimeProcess>),
    /// Not yet (the runtime is starting): asked again when the
    /// process's mappings change.
    NotYet,
    /// It could not be read (counted; its frames stay unnamed).
    Failed(Refusal),
}

/// What a runtime's unwinder needs of one process
/// ([`RuntimeProcess::sync`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessUnwinding {
    /// The unwinder that takes the code.
    pub unwinder: InterpreterUnwinder,
    /// `[start, end)` process addresses of the runtime's code: the parts
    /// of the process's executable anonymous mappings in them are marked
    /// for the unwinder.
    pub code: Vec<(u64, u64)>,
    /// `[start, end)` process addresses the runtime reserved for its code
    /// alone ([`ProcessUnwinding::reserving`]; none by default).
    pub reserved: Vec<(u64, u64)>,
    /// The unwinder's per-process map value.
    pub value: RuntimeMapValue,
}

impl ProcessUnwinding {
    /// `unwinder` takes the parts of `code` without unwind tables, with
    /// `value` as its per-process map value.
    pub fn new(unwinder: InterpreterUnwinder, code: Vec<(u64, u64)>, value: RuntimeMapValue) -> Self {
        ProcessUnwinding { unwinder, code, reserved: Vec::new(), value }
    }

    /// With `reserved`, memory the runtime reserved for its code alone:
    /// its parts not executable yet (committed later, as a JVM's code
    /// cache grows) are marked too, so that code committed between two
    /// reads of the process's maps is unwound at once rather than cut as
    /// an unknown pc.
    pub fn reserving(self, reserved: Vec<(u64, u64)>) -> Self {
        ProcessUnwinding { reserved, ..self }
    }
}

/// Counters of one runtime's naming (its [`RuntimeProcess::lines`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamerStats {
    /// Frames named.
    pub frames: u64,
    /// Frames that could not be named.
    pub unknown: u64,
    /// Objects read from process memory to name them (cache misses).
    pub reads: u64,
    /// Reads not tried again because they failed lately
    /// ([`RecentFailures`](crate::failures::RecentFailures)); counted by
    /// the namers that remember failures (PHP, Perl).
    pub failures_skipped: u64,
    /// `unknown` by reason, for the namers that tell them (BEAM): each a
    /// counter name (`frames_unknown_<reason>`) and its count; unused
    /// entries have an empty name.
    pub unknown_by_reason: [(&'static str, u64); 4],
}

impl NamerStats {
    /// Adds what a namer counted between two readings of its counters,
    /// `before` and `after`.
    pub fn add_change(&mut self, before: &NamerStats, after: &NamerStats) {
        self.frames += after.frames - before.frames;
        self.unknown += after.unknown - before.unknown;
        self.reads += after.reads - before.reads;
        self.failures_skipped += after.failures_skipped - before.failures_skipped;
        for ((total, was), now) in
            self.unknown_by_reason.iter_mut().zip(&before.unknown_by_reason).zip(&after.unknown_by_reason)
        {
            if !now.0.is_empty() {
                *total = (now.0, total.1 + (now.1 - was.1));
            }
        }
    }
}

/// A file whose runtime names a process's frames with one symbolizer per
/// process, made at its first frame: [`SymbolizerProcess`] is its
/// [`RuntimeProcess`] (PHP, Perl).
pub(crate) trait SymbolizerFile: Send + Sync + 'static {
    /// The symbolizer of one process.
    type Symbolizer: Send;

    /// A new one.
    fn symbolizer(&self) -> Self::Symbolizer;

    /// Names frame `word` with `symbolizer`, counted in `stats`.
    fn name(
        &self,
        symbolizer: &mut Self::Symbolizer,
        memory: &dyn ProcessMemory,
        word: u64,
        stats: &mut NamerStats,
    ) -> Option<SourceLine>;
}

/// One process of a [`SymbolizerFile`]'s runtime: its symbolizer, one
/// cache entry (its runtime's bound counts processes with one; each
/// symbolizer bounds its own caches).
pub(crate) struct SymbolizerProcess<F: SymbolizerFile> {
    file: Arc<F>,
    symbolizer: Option<F::Symbolizer>,
}

impl<F: SymbolizerFile> SymbolizerProcess<F> {
    /// The process's object, with no symbolizer yet.
    pub(crate) fn attach(file: Arc<F>) -> Attach {
        Attach::Attached(Box::new(SymbolizerProcess { file, symbolizer: None }))
    }
}

impl<F: SymbolizerFile> RuntimeProcess for SymbolizerProcess<F> {
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let file = &self.file;
        let symbolizer = self.symbolizer.get_or_insert_with(|| file.symbolizer());
        file.name(symbolizer, memory, word, stats).into_iter().collect()
    }

    fn cached(&self) -> CacheUse {
        CacheUse { entries: usize::from(self.symbolizer.is_some()), bytes: 0 }
    }

    fn clear(&mut self) {
        self.symbolizer = None;
    }
}
