//! Reading what a process is from `/proc/PID`: its executable, start
//! time (to tell a reused pid from the old process), container, and the
//! vDSO's bytes.

use profiler_trace::{Pid, ProcessInfo};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The identity of process `pid` under `proc_root` (normally `/proc`);
/// `comm` names it when its executable cannot be read.
pub fn read_info(proc_root: &Path, pid: Pid, comm: &str) -> ProcessInfo {
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
pub(crate) fn parse_start_time(stat: &str) -> Option<u64> {
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

/// Field 22 (starttime, clock ticks since boot) of `/proc/PID/stat`.
pub fn read_start_time(proc_root: &Path, pid: Pid) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.0.to_string()).join("stat")).ok()?;
    parse_start_time(&stat)
}

/// Reads `[start, end)` of the memory of `pid` (the vDSO).
pub fn read_memory(proc_root: &Path, pid: Pid, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    const MAX: u64 = 1 << 20;
    let len = end.saturating_sub(start);
    if len == 0 || len > MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "implausible size"));
    }
    let file = std::fs::File::open(proc_root.join(pid.0.to_string()).join("mem"))?;
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, start)?;
    Ok(buf)
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
}
