//! The bounded table of known processes.

use crate::maps::parse_executable;
use profiler_trace::{Mapping, Pid, ProcessInfo};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bounds of the table.
#[derive(Clone, Debug)]
pub struct ProcessTableLimits {
    /// Most processes tracked at once; the least recently sampled one is
    /// forgotten (and counted) to make room.
    pub max_processes: usize,
    /// Shortest time between two reads of one process's maps when
    /// addresses miss.
    pub maps_refresh_interval: Duration,
    /// Processes not sampled for this long are forgotten by
    /// [`ProcessTable::expire`].
    pub idle_expiry: Duration,
}

impl Default for ProcessTableLimits {
    fn default() -> Self {
        ProcessTableLimits {
            max_processes: 16_384,
            maps_refresh_interval: Duration::from_millis(500),
            idle_expiry: Duration::from_secs(120),
        }
    }
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessTableStats {
    /// Distinct processes ever added.
    pub processes_seen: u64,
    /// Processes forgotten to stay within `max_processes`.
    pub evicted_for_space: u64,
    /// Processes forgotten after being idle.
    pub expired: u64,
    /// Reads of `/proc/PID/maps`.
    pub maps_reads: u64,
    /// Reads that failed (the process was gone).
    pub maps_read_failures: u64,
    /// Pid reuse detected (same pid, new process).
    pub pid_reuse: u64,
}

/// Where a user address points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedAddress {
    /// The mapping containing the address.
    pub mapping: Arc<Mapping>,
    /// The address's offset in the mapped file.
    pub file_offset: u64,
}

struct Entry {
    info: Arc<ProcessInfo>,
    /// Executable mappings sorted by start.
    mappings: Vec<Arc<Mapping>>,
    maps_read_at: Option<Instant>,
    last_seen: Instant,
    /// Field 22 of /proc/PID/stat: tells a reused pid from the old process.
    start_time: Option<u64>,
}

/// Known processes, their executables and mappings.
pub struct ProcessTable {
    entries: HashMap<Pid, Entry>,
    limits: ProcessTableLimits,
    stats: ProcessTableStats,
    proc_root: PathBuf,
}

impl ProcessTable {
    /// An empty table reading `/proc`.
    pub fn new(limits: ProcessTableLimits) -> ProcessTable {
        ProcessTable { entries: HashMap::new(), limits, stats: Default::default(), proc_root: "/proc".into() }
    }

    /// The process `pid`, added on first sight; `comm` names it when its
    /// executable cannot be read (kernel threads, vanished processes).
    pub fn process(&mut self, pid: Pid, comm: &str) -> Arc<ProcessInfo> {
        let now = Instant::now();
        if let Some(entry) = self.entries.get_mut(&pid) {
            entry.last_seen = now;
            return entry.info.clone();
        }
        if self.entries.len() >= self.limits.max_processes {
            self.evict_least_recent();
        }
        self.stats.processes_seen += 1;
        let entry = Entry {
            info: Arc::new(self.read_info(pid, comm)),
            mappings: Vec::new(),
            maps_read_at: None,
            last_seen: now,
            start_time: self.read_start_time(pid),
        };
        let info = entry.info.clone();
        self.entries.insert(pid, entry);
        info
    }

    /// The mapping of `pid` containing `address`, reading the maps on
    /// first use and again (rate-limited) when the address is not covered.
    pub fn resolve(&mut self, pid: Pid, address: u64) -> Option<ResolvedAddress> {
        let refresh = self.limits.maps_refresh_interval;
        let entry = self.entries.get(&pid)?;
        if let Some(found) = find(&entry.mappings, address) {
            return Some(found);
        }
        if entry.maps_read_at.is_some_and(|t| t.elapsed() < refresh) {
            return None;
        }
        self.refresh_maps(pid);
        find(&self.entries.get(&pid)?.mappings, address)
    }

    /// Forgets `pid` (it exited).
    pub fn remove(&mut self, pid: Pid) {
        self.entries.remove(&pid);
    }

    /// Forgets processes not sampled within `idle_expiry`.
    pub fn expire(&mut self) {
        let expiry = self.limits.idle_expiry;
        let before = self.entries.len();
        self.entries.retain(|_, e| e.last_seen.elapsed() < expiry);
        self.stats.expired += (before - self.entries.len()) as u64;
    }

    /// Processes currently tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no process is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> ProcessTableStats {
        self.stats
    }

    fn refresh_maps(&mut self, pid: Pid) {
        self.stats.maps_reads += 1;
        let path = self.proc_root.join(pid.0.to_string()).join("maps");
        let text = std::fs::read_to_string(path);
        let start_time = self.read_start_time(pid);
        let Some(entry) = self.entries.get_mut(&pid) else { return };
        entry.maps_read_at = Some(Instant::now());
        if start_time.is_some() && entry.start_time.is_some() && start_time != entry.start_time {
            // Same pid, another process: what we knew is stale.
            self.stats.pid_reuse += 1;
            entry.start_time = start_time;
            entry.info = Arc::new(read_info(&self.proc_root, pid, &entry.info.executable_name.clone()));
            entry.mappings.clear();
        }
        match text {
            Ok(text) => {
                let mut mappings: Vec<Arc<Mapping>> =
                    parse_executable(&text).iter().map(|e| Arc::new(e.to_mapping())).collect();
                mappings.sort_by_key(|m| m.start);
                // Keep the old Arcs where nothing changed, so frames
                // already built keep pointing at equal mappings.
                for m in &mut mappings {
                    if let Some(old) = find(&entry.mappings, m.start) {
                        if *old.mapping == **m {
                            *m = old.mapping;
                        }
                    }
                }
                entry.mappings = mappings;
            }
            Err(_) => self.stats.maps_read_failures += 1,
        }
    }

    fn evict_least_recent(&mut self) {
        if let Some(pid) = self.entries.iter().min_by_key(|(_, e)| e.last_seen).map(|(p, _)| *p) {
            self.entries.remove(&pid);
            self.stats.evicted_for_space += 1;
        }
    }

    fn read_info(&self, pid: Pid, comm: &str) -> ProcessInfo {
        read_info(&self.proc_root, pid, comm)
    }

    fn read_start_time(&self, pid: Pid) -> Option<u64> {
        let stat = std::fs::read_to_string(self.proc_root.join(pid.0.to_string()).join("stat")).ok()?;
        parse_start_time(&stat)
    }
}

fn find(mappings: &[Arc<Mapping>], address: u64) -> Option<ResolvedAddress> {
    let index = mappings.partition_point(|m| m.start <= address).checked_sub(1)?;
    let mapping = &mappings[index];
    (address < mapping.end).then(|| ResolvedAddress {
        mapping: mapping.clone(),
        file_offset: address - mapping.start + mapping.file_offset,
    })
}

fn read_info(proc_root: &std::path::Path, pid: Pid, comm: &str) -> ProcessInfo {
    let dir = proc_root.join(pid.0.to_string());
    let executable_path: Arc<str> = std::fs::read_link(dir.join("exe"))
        .map(|p| {
            let p = p.to_string_lossy();
            Arc::from(p.strip_suffix(" (deleted)").unwrap_or(&p))
        })
        .unwrap_or_else(|_| Arc::from(""));
    let executable_name = match executable_path.rsplit('/').next() {
        Some(name) if !name.is_empty() => Arc::from(name),
        _ => Arc::from(comm),
    };
    let container_id = std::fs::read_to_string(dir.join("cgroup"))
        .ok()
        .and_then(|text| container_id_from_cgroup(&text))
        .map(Arc::from);
    ProcessInfo { pid, executable_path, executable_name, container_id }
}

/// Field 22 (starttime) of `/proc/PID/stat`. The comm field (2) may hold
/// spaces and parentheses, so count from the last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // after_comm starts at field 3; starttime is field 22.
    after_comm.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The container id in a process's cgroup paths: the 64-hex-digit id that
/// Docker, containerd, CRI-O and Podman put in the path
/// (`/docker/<id>`, `docker-<id>.scope`, `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `libpod-<id>.scope`, kubepods `.../<id>`).
pub(crate) fn container_id_from_cgroup(text: &str) -> Option<String> {
    for line in text.lines() {
        let path = line.splitn(3, ':').nth(2)?;
        for component in path.rsplit('/') {
            let core = component.strip_suffix(".scope").unwrap_or(component);
            let id = core.rsplit(['-', ':']).next().unwrap_or(core);
            if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(id.to_ascii_lowercase());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_survives_odd_comms() {
        let stat = "1234 (a) b (c) R 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn container_ids() {
        let id = "3f2a".repeat(16);
        for text in [
            format!("0::/system.slice/docker-{id}.scope\n"),
            format!("12:pids:/docker/{id}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-{id}.scope\n"),
            format!("0::/kubepods/besteffort/pod1234/{id}\n"),
            format!("0::/machine.slice/libpod-{id}.scope/container\n"),
        ] {
            assert_eq!(container_id_from_cgroup(&text).as_deref(), Some(id.as_str()), "{text}");
        }
        assert_eq!(container_id_from_cgroup("0::/user.slice/user-0.slice/session-1.scope\n"), None);
    }

    #[test]
    fn resolves_own_code_and_counts() {
        let mut table = ProcessTable::new(ProcessTableLimits::default());
        let pid = Pid(std::process::id());
        let info = table.process(pid, "fallback");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(&*info.executable_path, exe.to_str().unwrap());
        let here = resolves_own_code_and_counts as usize as u64;
        let r = table.resolve(pid, here).expect("own code is mapped");
        assert_eq!(&*r.mapping.path, exe.to_str().unwrap());
        assert_eq!(r.file_offset, here - r.mapping.start + r.mapping.file_offset);
        assert_eq!(table.stats().maps_reads, 1);
        // A second lookup is served from the table; a miss is rate-limited.
        assert!(table.resolve(pid, here).is_some());
        assert_eq!(table.resolve(pid, 8), None);
        assert_eq!(table.stats().maps_reads, 1);
        assert_eq!(table.stats().processes_seen, 1);
    }

    #[test]
    fn vanished_process_keeps_comm_and_is_counted() {
        let mut table = ProcessTable::new(ProcessTableLimits::default());
        // Pid numbers above pid_max never exist.
        let ghost = Pid(u32::MAX - 1);
        let info = table.process(ghost, "ghost");
        assert_eq!(&*info.executable_name, "ghost");
        assert_eq!(&*info.executable_path, "");
        assert_eq!(table.resolve(ghost, 0x1000), None);
        assert_eq!(table.stats().maps_read_failures, 1);
    }

    #[test]
    fn bounded_by_evicting_least_recent() {
        let limits = ProcessTableLimits { max_processes: 2, ..Default::default() };
        let mut table = ProcessTable::new(limits);
        table.process(Pid(u32::MAX - 1), "a");
        std::thread::sleep(Duration::from_millis(2));
        table.process(Pid(u32::MAX - 2), "b");
        table.process(Pid(u32::MAX - 1), "a"); // a is now the most recent
        table.process(Pid(u32::MAX - 3), "c");
        assert_eq!(table.len(), 2);
        assert_eq!(table.stats().evicted_for_space, 1);
        assert!(table.entries.contains_key(&Pid(u32::MAX - 1)));
        assert!(!table.entries.contains_key(&Pid(u32::MAX - 2)));
    }
}
