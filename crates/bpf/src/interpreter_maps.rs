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

use crate::runtimes::{InterpreterUnwinder, RuntimeMap};
use crate::types::{
    BeamProcessValue, HotspotProcessValue, PerlFileValue, PhpFileValue, PythonFileValue, RubyFileValue, V8ProcessValue,
};
use crate::BpfError;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashMap;

/// The value of an interpreter's per-file map: how to walk the frames
/// of the interpreter in one file. One variant per interpreter unwinder.
#[derive(Clone, Copy, Debug)]
pub enum InterpreterFileValue {
    /// `python_files`.
    Python(PythonFileValue),
    /// `ruby_files`.
    Ruby(RubyFileValue),
    /// `php_files`.
    Php(PhpFileValue),
    /// `perl_files`.
    Perl(PerlFileValue),
}

impl InterpreterFileValue {
    /// The map it goes in, and its bytes there.
    fn encode(&self) -> (&'static str, Vec<u8>) {
        match self {
            InterpreterFileValue::Python(v) => (InterpreterUnwinder::Python.map().0, v.to_bytes().to_vec()),
            InterpreterFileValue::Ruby(v) => (InterpreterUnwinder::Ruby.map().0, v.to_bytes().to_vec()),
            InterpreterFileValue::Php(v) => (InterpreterUnwinder::Php.map().0, v.to_bytes().to_vec()),
            InterpreterFileValue::Perl(v) => (InterpreterUnwinder::Perl.map().0, v.to_bytes().to_vec()),
        }
    }
}

/// The value of an interpreter's per-process map: what its unwinder
/// needs of one process. One variant per unwinder that has one.
// (HotSpot's value is the large one; values are made once per process
// mapping change.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpreterProcessValue {
    /// `hotspot_processes`.
    Hotspot(HotspotProcessValue),
    /// `v8_processes`.
    V8(V8ProcessValue),
    /// `beam_processes`.
    Beam(BeamProcessValue),
}

impl InterpreterProcessValue {
    /// The map it goes in, and its bytes there.
    fn encode(&self) -> (&'static str, Vec<u8>) {
        match self {
            InterpreterProcessValue::Hotspot(v) => (InterpreterUnwinder::Hotspot.map().0, v.to_bytes()),
            InterpreterProcessValue::V8(v) => (InterpreterUnwinder::V8.map().0, v.to_bytes()),
            InterpreterProcessValue::Beam(v) => (InterpreterUnwinder::Beam.map().0, v.to_bytes()),
        }
    }
}

/// Most processes with a per-process entry (the maps' `max_entries`).
pub const MAX_INTERPRETER_PROCESSES: usize = 4096;

/// Handles on the interpreter unwinders' maps. Made by
/// [`crate::Sampler::interpreter_maps`]; may move to another thread.
pub struct InterpreterMaps {
    /// The per-file maps, by name ([`InterpreterFileValue`]).
    file_maps: Vec<(&'static str, MapHandle)>,
    thread_maps: Vec<MapHandle>,
    /// The per-process maps, by name ([`InterpreterProcessValue`]).
    process_maps: Vec<(&'static str, MapHandle)>,
    /// Files with an entry, and the map that holds it.
    loaded: HashMap<u64, &'static str>,
    /// Processes with an entry, the map that holds it and its value.
    processes: HashMap<u32, (&'static str, InterpreterProcessValue)>,
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
    pub fn set_process(&mut self, pid: u32, value: &InterpreterProcessValue) -> Result<(), BpfError> {
        if self.processes.get(&pid).is_some_and(|(_, old)| old == value) {
            return Ok(());
        }
        let (map, bytes) = value.encode();
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
        self.process_maps[index]
            .1
            .update(&pid.to_ne_bytes(), &bytes, MapFlags::ANY)
            .map_err(|source| BpfError::Map { map, source })?;
        self.processes.insert(pid, (map, *value));
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

    /// Counts the entries really in the per-process maps. For tests.
    pub fn count_process_entries(&self) -> usize {
        self.process_maps.iter().map(|(_, m)| m.keys().count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::c;
    use crate::types::{
        InterpreterUnwinder, PythonFrameModel, PythonLasti, MAPPING_FLAG_INTERPRETER_LOOP, MAPPING_UNWINDER_SHIFT,
    };

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
    fn each_value_goes_to_its_map() {
        let v = PythonFileValue {
            runtime_vaddr: 0x1234,
            version: 0x030c,
            frame_model: PythonFrameModel::CStackOwner,
            lasti_kind: PythonLasti::Pointer,
            frame_read_size: 80,
            runtime_interpreters_head: 1,
            interp_next: 2,
            interp_threads_head: 3,
            tstate_next: 4,
            tstate_thread_id: 5,
            tstate_frame: 6,
            cframe_current_frame: 7,
            frame_previous: 8,
            frame_code: 9,
            frame_lasti: 10,
            frame_entry: 11,
            code_adaptive: 12,
            frame_code_tag_mask: 7,
        };
        let (map, bytes) = InterpreterFileValue::Python(v).encode();
        assert_eq!(map, "python_files");
        assert_eq!(bytes, v.to_bytes().to_vec());
    }

    #[test]
    fn hotspot_process_values_are_the_headers_layout() {
        use crate::types::HotspotHeapValue;
        let mut v = HotspotProcessValue {
            code_low: 0x7f00_0000_0000,
            code_high: 0x7f00_1000_0000,
            interpreter_code: 0x1111,
            call_stub_return: 0x2222,
            heap_count: 9,
            blob_frame_size: 0x2c,
            interp_method_slot: -3,
            interp_bcp_slot: -8,
            interp_sender_sp_slot: -1,
            ..Default::default()
        };
        v.heaps[3] = HotspotHeapValue { low: 1, high: 2, segmap: 3, log2_segment_size: 7 };
        let (map, bytes) = InterpreterProcessValue::Hotspot(v).encode();
        assert_eq!(map, "hotspot_processes");
        let back = crate::contract::read::<c::hotspot_process>(&bytes).unwrap();
        assert_eq!(bytes.len(), size_of::<c::hotspot_process>());
        assert_eq!((back.code_low, back.call_stub_return, back.blob_frame_size), (0x7f00_0000_0000, 0x2222, 0x2c));
        assert_eq!(back.heap_count as usize, crate::types::HOTSPOT_MAX_HEAPS, "clamped to the array");
        assert_eq!((back.heaps[3].segmap, back.heaps[3].log2_segment_size), (3, 7));
        assert_eq!((back.interp_method_slot, back.interp_bcp_slot, back.interp_sender_sp_slot), (-3, -8, -1));
    }

    #[test]
    fn v8_process_values_are_the_headers_layout() {
        let v = V8ProcessValue {
            fp_marker: -8,
            fp_function: -16,
            fp_bytecode_array: -32,
            fp_bytecode_offset: -40,
            marker_entry: 1,
            smi_shift: 32,
            bytecode_offset_bias: 53,
            js_function_code: 48,
            code_instruction_start: 40,
            type_bytecode_array: 0x1234,
            ..Default::default()
        };
        let (map, bytes) = InterpreterProcessValue::V8(v).encode();
        assert_eq!(map, "v8_processes");
        assert_eq!(bytes.len(), size_of::<c::v8_process>());
        let back = crate::contract::read::<c::v8_process>(&bytes).unwrap();
        assert_eq!((back.fp_marker, back.fp_function, back.fp_bytecode_offset), (-8, -16, -40));
        assert_eq!((back.smi_shift, back.bytecode_offset_bias, back.code_instruction_start), (32, 53, 40));
        assert_eq!(back.type_bytecode_array, 0x1234);
    }
}
