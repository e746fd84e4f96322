//! Per-process knowledge for native unwinding and symbolization.
//!
//! - [`ProcessManager`]: the lifecycle of processes for the unwinder. On
//!   a new pid, an unknown pc or an exit it reads `/proc/PID/maps`,
//!   analyses each executable file once per [`profiler_trace::FileId`]
//!   ([`ExecutableFile`]: build ids, segments, symbols, unwind table),
//!   loads tables and mappings through an [`UnwindLoader`] (the BPF maps
//!   in the agent) and unloads them when processes exit. Bounded by
//!   [`ManagerLimits`], counted in [`ManagerStats`].
//! - [`ProcessRegistry`]: the loaded processes as immutable
//!   [`ProcessSnapshot`]s, shared with the trace builder, which resolves
//!   pcs to mappings and ELF addresses with them.
//! - [`maps`]: parsing `/proc/PID/maps`; [`procfs`]: the rest of
//!   `/proc/PID` (executable, start time, container id, memory).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod files;
mod go_tables;
mod manager;
pub mod maps;
pub mod procfs;
mod registry;

pub use files::ExecutableFile;
pub use go_tables::{GoUnwindStats, FOLLOWED_SWITCHES};
pub use manager::{
    LoaderError, ManagerLimits, ManagerStats, ProcessManager, UnwindLoader, UnwindMapping, UnwindTarget,
};
pub use registry::{ProcessRegistry, ProcessSnapshot, ResolvedAddress, SnapshotMapping};

/// Entry points of the fuzz targets (`fuzz/`). NOT PART OF THE API.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::go_tables::with_go_tables;
}
