//! Why the BPF side could not be set up, in words a user can act on.

use std::io;

/// An error loading, attaching or reading the eBPF programs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BpfError {
    /// The process lacks the privileges to load BPF programs or open
    /// perf events.
    #[error(
        "insufficient privileges: {what}. Run as root, or grant CAP_BPF and CAP_PERFMON \
         (CAP_SYS_ADMIN on kernels before 5.8)"
    )]
    NotPrivileged {
        /// What was refused.
        what: String,
    },
    /// The kernel has no BPF support at all (or it is disabled).
    #[error("BPF is not available on this kernel: {0}")]
    Unavailable(#[source] io::Error),
    /// The kernel lacks one feature the programs need.
    #[error("unsupported kernel: {feature} is missing (needs {needs})")]
    MissingFeature {
        /// The missing feature, e.g. "BPF ring buffer maps".
        feature: &'static str,
        /// Which kernel introduced it.
        needs: &'static str,
    },
    /// The kernel refused to load the programs (verifier or BTF problem).
    #[error("loading the eBPF programs failed: {0}")]
    Load(#[source] libbpf_rs::Error),
    /// Opening or attaching a perf event failed.
    #[error("attaching to the cpu-clock perf event of CPU {cpu} failed: {source}")]
    PerfEvent {
        /// The CPU.
        cpu: u32,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A map operation failed.
    #[error("BPF map {map}: {source}")]
    Map {
        /// The map's name.
        map: &'static str,
        /// The underlying error.
        #[source]
        source: libbpf_rs::Error,
    },
    /// A map has no room left.
    #[error("BPF map {map} is full ({capacity} entries)")]
    MapFull {
        /// The map's name.
        map: &'static str,
        /// Its capacity.
        capacity: u64,
    },
    /// `/proc` is mounted for another PID namespace than the agent's.
    #[error(
        "/proc is not mounted for the agent's PID namespace (pid:[{inode}]; its NSpid is {ns_pids:?}): \
         the pids the programs report would not match /proc. Mount a /proc for this namespace \
         (unshare --mount-proc), or run the agent in the host's PID namespace"
    )]
    ForeignProc {
        /// The inode of the agent's PID namespace.
        inode: u32,
        /// The agent's pid in /proc's namespace and each one below (NSpid).
        ns_pids: Vec<u32>,
    },
    /// Reading a system file failed.
    #[error("reading {path}: {source}")]
    System {
        /// The file.
        path: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
