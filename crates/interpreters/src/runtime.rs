//! The interface every runtime (CPython, HotSpot, ...) implements: find
//! itself in a file, say what its BPF unwinder needs of that file, and
//! name the frames that unwinder records.
//!
//! A runtime is registered once in [`crate::runtimes`]; the agent and the
//! trace builder only go through these traits and the
//! [`crate::Registry`] of what was found.

use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{Frame, FrameKind, SourceLine, UserFrame};
use std::any::Any;
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

    /// A namer of its frames with bounded caches (one per trace builder).
    fn namer(&self) -> Box<dyn FrameNamer>;
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
    /// [`InterpreterFile::process_unwinding`]).
    fn file_value(&self) -> Option<RuntimeMapValue>;

    /// A process maps this file with `bias`: what the runtime needs of
    /// that process, read once from its memory (HotSpot's VM structures,
    /// say), kept while the process lives and handed to its
    /// [`FrameNamer`]. Everything CPython needs is in the file.
    fn attach(&self, _pid: u32, _memory: &dyn ProcessMemory, _bias: u64) -> Attach {
        Attach::NotNeeded
    }

    /// What its unwinder needs of a process it [attached](InterpreterFile::attach)
    /// to, read again each time the process's mappings change (a JVM's
    /// code cache grows): the process's code it unwinds (anonymous
    /// memory, in process addresses) and its per-process map value.
    /// `maps`: the process's executable mappings as the process manager
    /// just read them, sorted by address. `None`: nothing (yet); the code
    /// stays native.
    fn process_unwinding(
        &self,
        _process: &ProcessState,
        _memory: &dyn ProcessMemory,
        _maps: &[ExecutableMapping<'_>],
    ) -> Option<ProcessUnwinding> {
        None
    }

    /// Itself, for its runtime's [`FrameNamer`] to see its own type.
    fn as_any(&self) -> &dyn Any;
}

/// An executable mapping of a process, as the process manager read it
/// from `/proc/PID/maps` ([`InterpreterFile::process_unwinding`]).
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

/// What a runtime keeps of one process ([`InterpreterFile::attach`]).
pub type ProcessState = Arc<dyn Any + Send + Sync>;

/// What [`InterpreterFile::attach`] found in a process.
pub enum Attach {
    /// Nothing is needed per process.
    NotNeeded,
    /// What to keep for the process.
    Attached(ProcessState),
    /// Not yet (the runtime is starting): asked again when the
    /// process's mappings change.
    NotYet,
    /// It could not be read (counted; its frames stay unnamed).
    Failed(Refusal),
}

/// What a runtime's unwinder needs of one process
/// ([`InterpreterFile::process_unwinding`]).
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

/// Names the frames of one runtime, with bounded caches.
pub trait FrameNamer: Send {
    /// Names the frame `word` (one the runtime [owns](Runtime::owns_frame))
    /// of process `pid`, in which `file` is mapped with `bias`; `process`
    /// is what [`InterpreterFile::attach`] kept of it. `None` when it
    /// cannot be named (the process exited, the frame was garbage): the
    /// frame is kept, unnamed.
    fn name(&mut self, memory: &dyn ProcessMemory, pid: u32, mapped: &MappedFile, word: u64) -> Option<SourceLine>;

    /// The lines of frame `word`, innermost first: one for most runtimes
    /// ([`FrameNamer::name`]), several for compiled code with inlined
    /// methods (HotSpot). Empty when it cannot be named.
    fn lines(&mut self, memory: &dyn ProcessMemory, pid: u32, mapped: &MappedFile, word: u64) -> Vec<SourceLine> {
        self.name(memory, pid, mapped, word).into_iter().collect()
    }

    /// Drops what is cached of the processes `alive` says are gone
    /// (called once per reporting interval). Default: nothing cached per
    /// process.
    fn forget_processes(&mut self, _alive: &dyn Fn(u32) -> bool) {}

    /// Its counters.
    fn stats(&self) -> NamerStats;
}

/// A runtime's file as one process maps it.
#[derive(Clone)]
pub struct MappedFile {
    /// The build in the file.
    pub file: Arc<dyn InterpreterFile>,
    /// The mapping's load bias.
    pub bias: u64,
    /// What [`InterpreterFile::attach`] kept of the process, if anything.
    pub process: Option<ProcessState>,
}

/// Counters of a [`FrameNamer`].
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

#[cfg(test)]
pub(crate) mod testing {
    use super::{FrameNamer, MappedFile};
    use crate::memory::fake::FakeMemory;

    /// Names `word` in processes 10, 11 and 12 over unreadable memory
    /// (nothing is named, but each process gets what the namer keeps of
    /// it), then has the namer forget all but 11: `pids` lists the
    /// processes `namer` keeps something of.
    pub(crate) fn assert_exited_processes_forgotten<N: FrameNamer>(
        namer: &mut N,
        mapped: &MappedFile,
        word: u64,
        pids: impl Fn(&N) -> Vec<u32>,
    ) {
        for pid in [10, 11, 12] {
            assert_eq!(namer.name(&FakeMemory::default(), pid, mapped, word), None);
        }
        let mut kept = pids(namer);
        kept.sort_unstable();
        assert_eq!(kept, [10, 11, 12]);
        namer.forget_processes(&|pid| pid == 11);
        assert_eq!(pids(namer), [11]);
    }
}
