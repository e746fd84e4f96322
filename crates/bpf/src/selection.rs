//! The processes sampled under a pid filter (`selected_pids`), when the
//! selection follows processes (`select_descendants`): user space selects
//! the processes of the chosen containers or cgroups as it finds them,
//! the programs add their new processes at fork and drop them at exit.

use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::contract::c;
use crate::error::BpfError;

/// Entries of `selected_pids` (`SELECTED_PIDS_MAX`, ebpf/types.h).
pub const SELECTED_PIDS_MAX: usize = c::SELECTED_PIDS_MAX as usize;

/// A handle on `selected_pids`, usable from any thread.
pub struct PidSelection {
    map: MapHandle,
}

impl PidSelection {
    pub(crate) fn new(map: MapHandle) -> PidSelection {
        PidSelection { map }
    }

    /// Samples `pid` from now on (and, with `follow_selection`, the
    /// processes it starts). Fails when the map is full.
    pub fn select(&self, pid: u32) -> Result<(), BpfError> {
        self.map
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|source| BpfError::Map { map: "selected_pids", source })
    }

    /// Whether `pid` is sampled.
    pub fn is_selected(&self, pid: u32) -> bool {
        matches!(self.map.lookup(&pid.to_ne_bytes(), MapFlags::ANY), Ok(Some(_)))
    }
}
