//! Per-process knowledge for native unwinding and symbolization.
//!
//! - [`EventQueue`]: the kernel's process events, one entry per pid with
//!   pending work, bounded and counted, between the thread draining the
//!   ring buffer and the manager.
//! - [`ProcessManager`]: the lifecycle of processes for the unwinder. On
//!   a new pid, an unknown pc, an exec or an exit it reads
//!   `/proc/PID/maps`, has each executable file analysed once per
//!   [`profiler_trace::FileId`] by a pool of workers ([`ExecutableFile`]:
//!   build ids, segments, unwind table), loads tables and mappings
//!   through an [`UnwindLoader`] (the BPF maps in the agent) and keeps
//!   the tables of files nobody maps any more within a byte budget.
//!   Bounded by [`ManagerLimits`], counted in [`ManagerStats`].
//! - [`ProcessRegistry`]: the loaded processes as immutable
//!   [`ProcessSnapshot`]s, shared with the trace builder, which resolves
//!   pcs to mappings and ELF addresses with them.
//! - [`ProcessFilter`]: the processes of chosen containers or cgroups.
//! - [`maps`]: parsing `/proc/PID/maps`; [`procfs`]: the rest of
//!   `/proc/PID` (executable, start time, container id, memory).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod files;
mod held_files;
mod latency;
mod lru;
mod manager;
mod mapped_files;
pub mod maps;
mod pool;
pub mod procfs;
mod queue;
mod registry;
mod schedule;
mod selection;

pub use files::ExecutableFile;
pub use latency::LatencySummary;
pub use manager::{
    monotonic_ns, LoaderError, ManagerLimits, ManagerStats, ProcessManager, UnwindLoader, UnwindMapping, UnwindTarget,
};
pub use profiler_elf::{GoUnwindStats, FOLLOWED_SWITCHES};
pub use queue::{EventKind, EventQueue, LoadKind, PendingWork, QueueStats};
pub use registry::{LazyProcessInfo, ProcessRegistry, ProcessSnapshot, ResolvedAddress, SnapshotMapping};
pub use selection::{ProcessFilter, SelectorError, MAX_SELECTORS, MIN_CONTAINER_ID_PREFIX};

/// Entry points of the fuzz targets (`fuzz/`). NOT PART OF THE API.
#[doc(hidden)]
pub mod __fuzz {
    pub use profiler_elf::with_go_tables;
}
