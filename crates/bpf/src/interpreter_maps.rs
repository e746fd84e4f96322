//! The interpreter unwinders' maps, seen from user space: the per-file
//! maps that say how to walk an interpreter's frames (`python_files`,
//! ...), by map name, and the per-thread caches the BPF side keeps
//! (`python_thread_states`).
//!
//! [`InterpreterMaps`] keeps the bookkeeping of what it put in each
//! per-file map, so that every entry has one deletion path
//! ([`InterpreterMaps::remove_file`]). The per-thread caches are written
//! by the BPF side only and emptied by it as threads exit.

use crate::types::PythonFileValue;
use crate::BpfError;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashMap;

/// The value of an interpreter's per-file map: how to walk the frames
/// of the interpreter in one file. One variant per interpreter unwinder.
#[derive(Clone, Copy, Debug)]
pub enum InterpreterFileValue {
    /// `python_files`.
    Python(PythonFileValue),
}

impl InterpreterFileValue {
    /// The map it goes in, and its bytes there.
    fn encode(&self) -> (&'static str, Vec<u8>) {
        match self {
            InterpreterFileValue::Python(v) => ("python_files", v.to_bytes().to_vec()),
        }
    }
}

/// Handles on the interpreter unwinders' maps. Made by
/// [`crate::Sampler::interpreter_maps`]; may move to another thread.
pub struct InterpreterMaps {
    /// The per-file maps, by name ([`InterpreterFileValue`]).
    file_maps: Vec<(&'static str, MapHandle)>,
    thread_maps: Vec<MapHandle>,
    /// Files with an entry, and the map that holds it.
    loaded: HashMap<u64, &'static str>,
}

impl InterpreterMaps {
    pub(crate) fn new(python_files: MapHandle, python_thread_states: MapHandle) -> InterpreterMaps {
        InterpreterMaps {
            file_maps: vec![("python_files", python_files)],
            thread_maps: vec![python_thread_states],
            loaded: HashMap::new(),
        }
    }

    /// Puts `value` for the file `file_id` (`TableKey::bpf_id`) in its
    /// interpreter's per-file map (a file has one entry, in one map). Set
    /// it before the file's mappings are marked
    /// [`crate::MappingTarget::InterpreterLoop`].
    pub fn set_file(&mut self, file_id: u64, value: &InterpreterFileValue) -> Result<(), BpfError> {
        let (map, value) = value.encode();
        let Some(index) = self.file_maps.iter().position(|(n, _)| *n == map) else {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, format!("no interpreter map {map}"));
            return Err(BpfError::Map { map: "interpreter file maps", source: missing.into() });
        };
        let name = self.file_maps[index].0;
        if self.loaded.get(&file_id).is_some_and(|old| *old != name) {
            self.remove_file(file_id)?;
        }
        self.file_maps[index]
            .1
            .update(&file_id.to_ne_bytes(), &value, MapFlags::ANY)
            .map_err(|source| BpfError::Map { map: name, source })?;
        self.loaded.insert(file_id, name);
        Ok(())
    }

    /// Forgets the file's interpreter (nothing if it had none).
    pub fn remove_file(&mut self, file_id: u64) -> Result<(), BpfError> {
        let Some(name) = self.loaded.remove(&file_id) else {
            return Ok(());
        };
        let Some((_, handle)) = self.file_maps.iter().find(|(n, _)| *n == name) else {
            return Ok(());
        };
        handle.delete(&file_id.to_ne_bytes()).map_err(|source| BpfError::Map { map: name, source })
    }

    /// Whether `file_id` has an interpreter loaded.
    pub fn has_file(&self, file_id: u64) -> bool {
        self.loaded.contains_key(&file_id)
    }

    /// Files with an interpreter loaded.
    pub fn files(&self) -> usize {
        self.loaded.len()
    }

    /// Counts the entries really in the maps (by iterating their keys):
    /// (all per-file maps, all per-thread maps). For tests and checks.
    pub fn count_map_entries(&self) -> (usize, usize) {
        let count = |maps: &mut dyn Iterator<Item = &MapHandle>| maps.map(|m| m.keys().count()).sum();
        (count(&mut self.file_maps.iter().map(|(_, m)| m)), count(&mut self.thread_maps.iter()))
    }
}
