//! The processes the manager has loaded, as the trace builder sees them:
//! immutable snapshots swapped whole, so a reader holds the lock only to
//! clone an `Arc`.

use crate::files::ExecutableFile;
use profiler_trace::{Mapping, Pid, ProcessInfo};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One executable mapping of a process.
#[derive(Clone, Debug)]
pub struct SnapshotMapping {
    /// The mapping as traces carry it (file id and build id filled in
    /// when the file could be read).
    pub mapping: Arc<Mapping>,
    /// The file, when it could be read.
    pub file: Option<Arc<ExecutableFile>>,
    /// ELF virtual address = process address - bias (when known).
    pub bias: Option<u64>,
}

/// Where a process address points.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedAddress<'a> {
    /// The mapping holding it.
    pub mapping: &'a Arc<Mapping>,
    /// The file, when it could be read.
    pub file: Option<&'a Arc<ExecutableFile>>,
    /// The ELF virtual address (what symbol tables and backends use);
    /// `None` when the file's segments do not cover the address.
    pub vaddr: Option<u64>,
}

/// A process as loaded at one moment.
#[derive(Clone, Debug)]
pub struct ProcessSnapshot {
    /// Who the process is.
    pub info: Arc<ProcessInfo>,
    /// Executable mappings, sorted by start.
    pub mappings: Vec<SnapshotMapping>,
}

impl ProcessSnapshot {
    /// The mapping holding `address`.
    pub fn resolve(&self, address: u64) -> Option<ResolvedAddress<'_>> {
        let i = self.mappings.partition_point(|m| m.mapping.start <= address).checked_sub(1)?;
        let m = &self.mappings[i];
        if address >= m.mapping.end {
            return None;
        }
        Some(ResolvedAddress {
            mapping: &m.mapping,
            file: m.file.as_ref(),
            vaddr: m.bias.map(|b| address.wrapping_sub(b)),
        })
    }
}

/// The loaded processes, shared between the process manager (writer)
/// and the trace builder (reader).
#[derive(Debug, Default)]
pub struct ProcessRegistry {
    processes: Mutex<HashMap<Pid, Arc<ProcessSnapshot>>>,
}

impl ProcessRegistry {
    /// An empty registry.
    pub fn new() -> ProcessRegistry {
        ProcessRegistry::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Pid, Arc<ProcessSnapshot>>> {
        self.processes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The latest snapshot of `pid`.
    pub fn get(&self, pid: Pid) -> Option<Arc<ProcessSnapshot>> {
        self.lock().get(&pid).cloned()
    }

    /// Processes held (exited ones kept for their last samples included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no process is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(crate) fn set(&self, pid: Pid, snapshot: ProcessSnapshot) {
        self.lock().insert(pid, Arc::new(snapshot));
    }

    pub(crate) fn remove(&self, pid: Pid) {
        self.lock().remove(&pid);
    }
}
