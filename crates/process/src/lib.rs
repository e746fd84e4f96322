//! Per-process knowledge, read lazily from `/proc` when a process is first
//! sampled.
//!
//! - [`maps`]: parsing `/proc/PID/maps` into file-backed [`Mapping`]s.
//! - [`ProcessTable`]: the bounded table of known processes; resolves a
//!   (pid, address) to its mapping, re-reading the maps (rate-limited)
//!   when an address is not covered (dlopen, new thread stacks), and
//!   survives processes that vanish mid-read.
//!
//! [`Mapping`]: profiler_trace::Mapping
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod maps;
mod table;

pub use table::{ProcessTable, ProcessTableLimits, ProcessTableStats, ResolvedAddress};
