//! The processes the manager has loaded, as the trace builder sees them:
//! immutable snapshots swapped whole, so a reader holds the lock only to
//! clone an `Arc`.

use crate::files::ExecutableFile;
use crate::procfs::{read_info, read_start_time};
use profiler_trace::{Mapping, Pid, ProcessInfo};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

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
    /// Who the process is (read at its first reported sample).
    pub info: Arc<LazyProcessInfo>,
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

/// Who a process is, read from `/proc` when its first sample is reported
/// rather than when it is loaded: most processes of a churn are never
/// sampled, and their `exe`, `cgroup` and `environ` were the largest part
/// of a load. Read once per process (the same for each re-read of its
/// maps).
#[derive(Debug)]
pub struct LazyProcessInfo {
    pid: Pid,
    /// The start time seen at the load: a pid reused since is not read.
    start_time: Option<u64>,
    proc_root: Arc<Path>,
    env_names: Arc<[Arc<str>]>,
    info: OnceLock<Arc<ProcessInfo>>,
}

impl LazyProcessInfo {
    pub(crate) fn new(
        pid: Pid,
        start_time: Option<u64>,
        proc_root: Arc<Path>,
        env_names: Arc<[Arc<str>]>,
    ) -> LazyProcessInfo {
        LazyProcessInfo { pid, start_time, proc_root, env_names, info: OnceLock::new() }
    }

    /// The process id.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The process's info, read now if it was not yet; `comm` names it
    /// when it is gone by then (or its pid was reused), with no
    /// executable path, container or environment.
    pub fn get(&self, comm: &str) -> Arc<ProcessInfo> {
        self.info
            .get_or_init(|| {
                let info = read_info(&self.proc_root, self.pid, comm, &self.env_names);
                // Read after the info: the same start time means the info
                // was the loaded process's.
                if self.start_time.is_some() && read_start_time(&self.proc_root, self.pid) != self.start_time {
                    return Arc::new(ProcessInfo::named(self.pid, comm));
                }
                Arc::new(info)
            })
            .clone()
    }

    /// The info if it was read.
    pub fn read(&self) -> Option<&Arc<ProcessInfo>> {
        self.info.get()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lazy(pid: u32, start_time: Option<u64>) -> LazyProcessInfo {
        LazyProcessInfo::new(Pid(pid), start_time, Arc::from(Path::new("/proc")), Arc::new([]))
    }

    #[test]
    fn info_is_read_once_and_only_for_the_loaded_process() {
        let me = std::process::id();
        let start = read_start_time(Path::new("/proc"), Pid(me));
        assert!(start.is_some());
        let info = lazy(me, start);
        assert!(info.read().is_none());
        let read = info.get("fallback");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(&*read.executable_path, exe.to_str().unwrap());
        assert!(Arc::ptr_eq(&read, &info.get("other")), "read once");
        // Another start time: the pid was reused since the load.
        let reused = lazy(me, start.map(|s| s + 1)).get("old-comm");
        assert_eq!(*reused, ProcessInfo::named(Pid(me), "old-comm"));
        // Gone: named by the sample's comm.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = lazy(pid, Some(1)).get("true");
        assert_eq!(*gone, ProcessInfo::named(Pid(pid), "true"));
    }
}
