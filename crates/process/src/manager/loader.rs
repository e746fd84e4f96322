//! What the manager loads into: the [`UnwindLoader`] (the BPF maps in
//! the agent, a recorder in tests) and the mappings it is given.

use crate::files::ExecutableFile;
use profiler_elf::{DeltaWalk, ElfFile, RuleId, RuleInterner, UnwindRule};
use profiler_trace::{Pid, TableKey};
use std::sync::Arc;

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
    /// Executable memory without unwind tables (or whose tables are not
    /// ready yet).
    NoUnwindInfo,
}

/// One executable mapping `[start, end)` of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnwindMapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// What is there.
    pub target: UnwindTarget,
    /// Its path in `/proc/PID/maps` (empty for anonymous memory), for
    /// the runtimes that find their code by it (a BEAM's `/memfd:vmem`).
    pub path: Arc<str>,
    /// The end of the reservation right after it
    /// ([`crate::maps::MapsEntry::reserved_end`]; `end` when none).
    pub reserved_end: u64,
}

/// Where the manager puts unwinding state: the BPF maps in the agent, a
/// recorder in tests. Only the manager's thread calls it.
pub trait UnwindLoader {
    /// How many distinct rules the loader's rule table holds: the
    /// manager gives out no rule id past it.
    fn rule_capacity(&self) -> usize {
        RuleInterner::CAPACITY
    }
    /// Makes rule `id` known (called before any file using it is loaded;
    /// may be called again for the same id).
    fn set_rule(&mut self, id: RuleId, rule: &UnwindRule) -> Result<(), LoaderError>;
    /// Loads a file's deltas: `deltas()` gives them as sorted
    /// `(ELF vaddr, rule)` pairs, as many times as the loader needs (to
    /// size, then to fill its tables without a copy of them).
    fn load_file(&mut self, table_key: TableKey, deltas: &DeltaWalk<'_>) -> Result<(), LoaderError>;
    /// Unloads a file's deltas.
    fn unload_file(&mut self, table_key: TableKey) -> Result<(), LoaderError>;
    /// Sets (replaces) the executable mappings of `pid`.
    fn set_process(&mut self, pid: Pid, mappings: &[UnwindMapping]) -> Result<(), LoaderError>;
    /// Removes everything of `pid`.
    fn remove_process(&mut self, pid: Pid) -> Result<(), LoaderError>;
    /// Processes whose mappings the loader wants again although they did
    /// not change (an interpreter in them was not ready to be read at
    /// the last [`UnwindLoader::set_process`]); asked at each
    /// [`ProcessManager::tick`].
    fn due_again(&mut self) -> Vec<Pid> {
        Vec::new()
    }
    /// A file was analysed, right before its deltas are loaded: a chance
    /// to find an interpreter in it (the agent looks for CPython). Does
    /// nothing by default.
    fn inspect_file(&mut self, _file: &ExecutableFile, _elf: &ElfFile) {}
}
