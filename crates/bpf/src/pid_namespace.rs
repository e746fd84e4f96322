//! The PID namespace the agent runs in: the programs report pids as its
//! `/proc` numbers them (`pid_ns_inum` in `ebpf/profiler.bpf.c`).

use crate::BpfError;
use std::io;
use std::os::unix::fs::MetadataExt;

/// The inode of the init PID namespace, fixed by the kernel
/// (PROC_PID_INIT_INO, include/linux/proc_ns.h).
const INIT_PID_NS_INODE: u32 = 0xEFFF_FFFC;

/// The agent's PID namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidNamespace {
    /// The inode of `/proc/self/ns/pid` (the kernel's `ns.inum`).
    pub inode: u32,
}

impl PidNamespace {
    /// The agent's namespace, from `/proc/self`. Fails when `/proc` is
    /// mounted for another namespace than the agent's nested one (its
    /// pids would not be the ones the programs report).
    pub fn of_agent() -> Result<PidNamespace, BpfError> {
        const NS: &str = "/proc/self/ns/pid";
        const STATUS: &str = "/proc/self/status";
        let inode = std::fs::metadata(NS).map_err(|source| BpfError::System { path: NS, source })?.ino();
        let inode = u32::try_from(inode).map_err(|_| BpfError::System {
            path: NS,
            source: io::Error::other(format!("inode {inode} is not a namespace inode")),
        })?;
        let namespace = PidNamespace { inode };
        if namespace.is_init() {
            return Ok(namespace);
        }
        // NSpid lists the agent's pid in /proc's namespace and in each one
        // below it down to the agent's (Linux 4.1): one entry when /proc
        // is the agent's namespace's.
        let status = std::fs::read_to_string(STATUS).map_err(|source| BpfError::System { path: STATUS, source })?;
        let ns_pids: Vec<u32> = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .map(|pids| pids.split_whitespace().filter_map(|p| p.parse().ok()).collect())
            .unwrap_or_default();
        if ns_pids.len() != 1 {
            return Err(BpfError::ForeignProc { inode, ns_pids });
        }
        Ok(namespace)
    }

    /// Whether this is the init namespace (the kernel's own pids).
    pub fn is_init(&self) -> bool {
        self.inode == INIT_PID_NS_INODE
    }
}
