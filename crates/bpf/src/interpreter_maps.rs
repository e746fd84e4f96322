//! The interpreter unwinders' maps, seen from user space: the per-file
//! maps that say how to walk an interpreter's frames (`python_files`,
//! ...), the per-process maps of runtimes understood from a process's
//! memory (`hotspot_processes`), by map name, and the per-thread caches
//! the BPF side keeps (`python_thread_states`).
//!
//! [`InterpreterMaps`] keeps the bookkeeping of what it put in each
//! per-file and per-process map, so that every entry has one deletion
//! path ([`InterpreterMaps::remove_file`],
//! [`InterpreterMaps::remove_process`]). The per-thread caches are
//! written by the BPF side only and emptied by it as threads exit.

use crate::contract::{bytes_of, read};
use crate::runtimes::{InterpreterUnwinder, RuntimeMap};
use crate::BpfError;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use profiler_contract::Pod;
use std::collections::HashMap;

/// A value of an interpreter unwinder's map (`<name>_files` or
/// `<name>_processes`): the unwinder whose map it goes in, and its bytes
/// there. Each runtime makes its own from the header's struct of it
/// (profiler-contract); its size is checked against the map's when it is
/// written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeMapValue {
    unwinder: InterpreterUnwinder,
    bytes: Box<[u8]>,
}

impl RuntimeMapValue {
    /// `value` for `unwinder`'s map.
    pub fn new<T: Pod>(unwinder: InterpreterUnwinder, value: &T) -> RuntimeMapValue {
        RuntimeMapValue { unwinder, bytes: bytes_of(value).into() }
    }

    /// The unwinder whose map it goes in.
    pub fn unwinder(&self) -> InterpreterUnwinder {
        self.unwinder
    }

    /// Its bytes in the map.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The value as a `T`, if it is one's size (for tests and checks).
    pub fn read<T: Pod>(&self) -> Option<T> {
        (self.bytes.len() == size_of::<T>()).then(|| read(&self.bytes)).flatten()
    }

    /// The name of its map, checked to be keyed by `kind`.
    fn map(&self, kind: RuntimeMap) -> Result<&'static str, BpfError> {
        let (name, map_kind) = self.unwinder.map();
        if map_kind != kind {
            let wrong = std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name} is not keyed by {}", if kind == RuntimeMap::Files { "file" } else { "process" }),
            );
            return Err(BpfError::Map { map: name, source: wrong.into() });
        }
        Ok(name)
    }
}

/// Writes `value` at `key` in `map` (named `name`), its size first
/// checked against the map's value size.
fn update(name: &'static str, map: &MapHandle, key: &[u8], value: &RuntimeMapValue) -> Result<(), BpfError> {
    if map.value_size() as usize != value.bytes.len() {
        let wrong = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a value of {} bytes for {} bytes", value.bytes.len(), map.value_size()),
        );
        return Err(BpfError::Map { map: name, source: wrong.into() });
    }
    map.update(key, &value.bytes, MapFlags::ANY).map_err(|source| BpfError::Map { map: name, source })
}

/// Most processes with a per-process entry (the maps' `max_entries`).
pub const MAX_INTERPRETER_PROCESSES: usize = 4096;

/// Handles on the interpreter unwinders' maps. Made by
/// [`crate::Sampler::interpreter_maps`]; may move to another thread.
pub struct InterpreterMaps {
    /// The per-file maps, by name.
    file_maps: Vec<(&'static str, MapHandle)>,
    thread_maps: Vec<MapHandle>,
    /// The per-process maps, by name.
    process_maps: Vec<(&'static str, MapHandle)>,
    /// Files with an entry, and the map that holds it.
    loaded: HashMap<u64, &'static str>,
    /// Processes with an entry, the map that holds it and its value.
    processes: HashMap<u32, (&'static str, RuntimeMapValue)>,
}

impl InterpreterMaps {
    /// `runtime_maps`: each interpreter unwinder's map (name, kind,
    /// handle); `thread_maps`: the per-thread caches.
    pub(crate) fn new(
        runtime_maps: Vec<(&'static str, RuntimeMap, MapHandle)>,
        thread_maps: Vec<MapHandle>,
    ) -> InterpreterMaps {
        let mut file_maps = Vec::new();
        let mut process_maps = Vec::new();
        for (name, kind, handle) in runtime_maps {
            match kind {
                RuntimeMap::Files => file_maps.push((name, handle)),
                RuntimeMap::Processes => process_maps.push((name, handle)),
            }
        }
        InterpreterMaps { file_maps, thread_maps, process_maps, loaded: HashMap::new(), processes: HashMap::new() }
    }

    /// Puts `value` for process `pid` in its unwinder's per-process map
    /// (nothing when the same value is there already). Set it before
    /// the process's code is marked [`crate::MappingTarget::InterpreterCode`].
    /// At most [`MAX_INTERPRETER_PROCESSES`]: beyond, an error (the
    /// caller counts it; the process's code stays unwalkable).
    pub fn set_process(&mut self, pid: u32, value: &RuntimeMapValue) -> Result<(), BpfError> {
        if self.processes.get(&pid).is_some_and(|(_, old)| old == value) {
            return Ok(());
        }
        let map = value.map(RuntimeMap::Processes)?;
        let Some(index) = self.process_maps.iter().position(|(n, _)| *n == map) else {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, format!("no interpreter map {map}"));
            return Err(BpfError::Map { map: "interpreter process maps", source: missing.into() });
        };
        if !self.processes.contains_key(&pid) && self.processes.len() >= MAX_INTERPRETER_PROCESSES {
            let full = std::io::Error::new(std::io::ErrorKind::OutOfMemory, "interpreter process maps are full");
            return Err(BpfError::Map { map, source: full.into() });
        }
        if self.processes.get(&pid).is_some_and(|(old, _)| *old != map) {
            self.remove_process(pid)?;
        }
        update(map, &self.process_maps[index].1, &pid.to_ne_bytes(), value)?;
        self.processes.insert(pid, (map, value.clone()));
        Ok(())
    }

    /// Forgets what the unwinders kept of process `pid` (nothing if none).
    pub fn remove_process(&mut self, pid: u32) -> Result<(), BpfError> {
        let Some((name, _)) = self.processes.remove(&pid) else {
            return Ok(());
        };
        let Some((_, handle)) = self.process_maps.iter().find(|(n, _)| *n == name) else {
            return Ok(());
        };
        handle.delete(&pid.to_ne_bytes()).map_err(|source| BpfError::Map { map: name, source })
    }

    /// Processes with a per-process entry.
    pub fn processes(&self) -> usize {
        self.processes.len()
    }

    /// Puts `value` for the file `file_id` (`TableKey::bpf_id`) in its
    /// interpreter's per-file map (a file has one entry, in one map). Set
    /// it before the file's mappings are marked
    /// [`crate::MappingTarget::InterpreterLoop`].
    pub fn set_file(&mut self, file_id: u64, value: &RuntimeMapValue) -> Result<(), BpfError> {
        let map = value.map(RuntimeMap::Files)?;
        let Some(index) = self.file_maps.iter().position(|(n, _)| *n == map) else {
            let missing = std::io::Error::new(std::io::ErrorKind::NotFound, format!("no interpreter map {map}"));
            return Err(BpfError::Map { map: "interpreter file maps", source: missing.into() });
        };
        if self.loaded.get(&file_id).is_some_and(|old| *old != map) {
            self.remove_file(file_id)?;
        }
        update(map, &self.file_maps[index].1, &file_id.to_ne_bytes(), value)?;
        self.loaded.insert(file_id, map);
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

    /// Counts the entries really in the per-process maps. For tests.
    pub fn count_process_entries(&self) -> usize {
        self.process_maps.iter().map(|(_, m)| m.keys().count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::c;
    use crate::types::{InterpreterUnwinder, MAPPING_FLAG_INTERPRETER_LOOP, MAPPING_UNWINDER_SHIFT};

    #[test]
    fn unwinder_slots_fit_the_flags_and_the_program_array() {
        for unwinder in InterpreterUnwinder::ALL {
            let slot = u32::from(unwinder as u8);
            assert!(slot > c::UNWINDER_NATIVE && slot < c::UNWINDER_COUNT);
            let mask = c::MAPPING_UNWINDER_MASK << MAPPING_UNWINDER_SHIFT;
            assert_eq!((slot << MAPPING_UNWINDER_SHIFT) & mask, slot << MAPPING_UNWINDER_SHIFT);
        }
        let mask = c::MAPPING_UNWINDER_MASK << MAPPING_UNWINDER_SHIFT;
        assert_eq!(MAPPING_FLAG_INTERPRETER_LOOP & mask, 0, "the flag and the slot do not overlap");
    }

    #[test]
    fn values_go_to_their_unwinders_map_only() {
        let v = c::pid_mapping { file_id: 7, bias: 0x1000, kind: 1, flags: 2 };
        let value = RuntimeMapValue::new(InterpreterUnwinder::Python, &v);
        assert_eq!(value.bytes(), bytes_of(&v));
        assert_eq!(value.read::<c::pid_mapping>(), Some(v));
        assert_eq!(value.read::<c::delta_page>(), None, "not one of its size");
        assert_eq!(value.map(RuntimeMap::Files).ok(), Some("python_files"));
        assert!(value.map(RuntimeMap::Processes).is_err(), "python_files is keyed by file");
        let value = RuntimeMapValue::new(InterpreterUnwinder::Hotspot, &v);
        assert_eq!(value.map(RuntimeMap::Processes).ok(), Some("hotspot_processes"));
        assert!(value.map(RuntimeMap::Files).is_err());
    }
}
