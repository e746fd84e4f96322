//! The interpreter unwinders' maps, seen from user space: the CPython
//! builds of loaded files (`python_files`) and the per-thread cache of
//! thread states the BPF side keeps (`python_thread_states`).
//!
//! [`InterpreterMaps`] keeps the bookkeeping of what it put in
//! `python_files`, so that every entry has one deletion path
//! ([`InterpreterMaps::remove_file`]). `python_thread_states` is written by
//! the BPF side only and emptied by it as threads exit.

use crate::types::PythonFileValue;
use crate::BpfError;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashSet;

/// Handles on the interpreter unwinders' maps. Made by
/// [`crate::Sampler::interpreter_maps`]; may move to another thread.
pub struct InterpreterMaps {
    python_files: MapHandle,
    python_thread_states: MapHandle,
    loaded: HashSet<u64>,
}

impl InterpreterMaps {
    pub(crate) fn new(python_files: MapHandle, python_thread_states: MapHandle) -> InterpreterMaps {
        InterpreterMaps { python_files, python_thread_states, loaded: HashSet::new() }
    }

    /// Says how to walk the CPython frames of the file `file_id`
    /// (`TableKey::bpf_id`). Set it before the file's mappings are marked
    /// [`crate::MappingTarget::InterpreterLoop`].
    pub fn set_python_file(&mut self, file_id: u64, value: &PythonFileValue) -> Result<(), BpfError> {
        self.python_files
            .update(&file_id.to_ne_bytes(), &value.to_bytes(), MapFlags::ANY)
            .map_err(|source| BpfError::Map { map: "python_files", source })?;
        self.loaded.insert(file_id);
        Ok(())
    }

    /// Forgets the file's interpreter (nothing if it had none).
    pub fn remove_file(&mut self, file_id: u64) -> Result<(), BpfError> {
        if !self.loaded.remove(&file_id) {
            return Ok(());
        }
        self.python_files.delete(&file_id.to_ne_bytes()).map_err(|source| BpfError::Map { map: "python_files", source })
    }

    /// Whether `file_id` has an interpreter loaded.
    pub fn has_file(&self, file_id: u64) -> bool {
        self.loaded.contains(&file_id)
    }

    /// Files with an interpreter loaded.
    pub fn files(&self) -> usize {
        self.loaded.len()
    }

    /// Counts the entries really in the maps (by iterating their keys):
    /// (python_files, python_thread_states). For tests and checks.
    pub fn count_map_entries(&self) -> (usize, usize) {
        (self.python_files.keys().count(), self.python_thread_states.keys().count())
    }
}
