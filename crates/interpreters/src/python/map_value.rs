//! What CPython's BPF unwinder (`ebpf/runtimes/python/unwinder.bpf.h`) keeps in its
//! map `python_files` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::PYTHON_FRAME_OFFSET_MAX << c::PYTHON_FRAME_OFFSET_SHIFT < 1 << c::PYTHON_FRAME_PAYLOAD_BITS);
};

/// A CPython frame word's payload: `offset << PYTHON_FRAME_OFFSET_SHIFT |
/// code >> 3` (`ebpf/runtimes/python/types.h`).
pub const PYTHON_FRAME_OFFSET_SHIFT: u32 = c::PYTHON_FRAME_OFFSET_SHIFT;
/// The largest instruction offset of a CPython frame word (larger clamp).
pub const PYTHON_FRAME_OFFSET_MAX: u64 = c::PYTHON_FRAME_OFFSET_MAX;

pub use c::{PYTHON_FRAME_READ_MAX, PYTHON_NO_OFFSET};

/// `enum python_frame_model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonFrameModel {
    /// 3.8-3.10: `PyFrameObject`, one per evaluation loop run.
    Objects = c::PYTHON_FRAMES_OBJECTS as isize,
    /// 3.11: `_PyInterpreterFrame`, a loop run ends at `is_entry`.
    EntryFlag = c::PYTHON_FRAMES_ENTRY_FLAG as isize,
    /// 3.12+: `_PyInterpreterFrame`, a loop run ends at its C-stack shim.
    CStackOwner = c::PYTHON_FRAMES_CSTACK_OWNER as isize,
}

/// `enum python_lasti`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonLasti {
    /// `int f_lasti`, a byte offset (3.8, 3.9).
    Bytes = c::PYTHON_LASTI_BYTES as isize,
    /// `int f_lasti`, in 2-byte code units (3.10).
    Units = c::PYTHON_LASTI_UNITS as isize,
    /// A pointer into `co_code_adaptive` (3.11+).
    Pointer = c::PYTHON_LASTI_POINTER as isize,
}

/// `struct python_file`: what the BPF unwinder needs of one CPython
/// build. Offsets are in bytes.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PythonFileValue {
    /// `_PyRuntime`, ELF virtual address.
    pub runtime_vaddr: u64,
    /// `major << 8 | minor`.
    pub version: u16,
    pub frame_model: PythonFrameModel,
    pub lasti_kind: PythonLasti,
    /// Bytes of a frame to read (at most [`PYTHON_FRAME_READ_MAX`]).
    pub frame_read_size: u32,
    pub runtime_interpreters_head: u32,
    pub interp_next: u32,
    pub interp_threads_head: u32,
    pub tstate_next: u32,
    pub tstate_thread_id: u32,
    pub tstate_frame: u32,
    /// [`PYTHON_NO_OFFSET`] when the thread state points at the frame.
    pub cframe_current_frame: u32,
    pub frame_previous: u32,
    pub frame_code: u32,
    pub frame_lasti: u32,
    pub frame_entry: u32,
    pub code_adaptive: u32,
    /// Tag bits of `f_executable` to clear (a `_PyStackRef` from 3.14).
    pub frame_code_tag_mask: u32,
}

impl PythonFileValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::python_file {
        c::python_file {
            runtime_vaddr: self.runtime_vaddr,
            version: self.version,
            frame_model: self.frame_model as u8,
            lasti_kind: self.lasti_kind as u8,
            frame_read_size: self.frame_read_size,
            runtime_interpreters_head: self.runtime_interpreters_head,
            interp_next: self.interp_next,
            interp_threads_head: self.interp_threads_head,
            tstate_next: self.tstate_next,
            tstate_thread_id: self.tstate_thread_id,
            tstate_frame: self.tstate_frame,
            cframe_current_frame: self.cframe_current_frame,
            frame_previous: self.frame_previous,
            frame_code: self.frame_code,
            frame_lasti: self.frame_lasti,
            frame_entry: self.frame_entry,
            code_adaptive: self.code_adaptive,
            frame_code_tag_mask: self.frame_code_tag_mask,
            reserved: 0,
        }
    }

    /// Its value in `python_files`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Python, &self.to_c())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn python_file_layout() {
        let v = PythonFileValue {
            runtime_vaddr: 0x1122,
            version: 0x030b,
            frame_model: PythonFrameModel::EntryFlag,
            lasti_kind: PythonLasti::Pointer,
            frame_read_size: 72,
            runtime_interpreters_head: 40,
            interp_next: 0,
            interp_threads_head: 16,
            tstate_next: 8,
            tstate_thread_id: 152,
            tstate_frame: 56,
            cframe_current_frame: 8,
            frame_previous: 48,
            frame_code: 32,
            frame_lasti: 56,
            frame_entry: 68,
            code_adaptive: 184,
            frame_code_tag_mask: 7,
        };
        // Each value lands at its field's offset in the header's layout,
        // whatever the order of the fields there.
        let value = v.map_value();
        assert_eq!(value.unwinder(), InterpreterUnwinder::Python);
        let b = value.bytes();
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(b[offset_of!(c::python_file, frame_model)], 1);
        assert_eq!(b[offset_of!(c::python_file, lasti_kind)], 2);
        assert_eq!(u16::from_ne_bytes(b[offset_of!(c::python_file, version)..][..2].try_into().unwrap()), 0x030b);
        assert_eq!(u32_at(offset_of!(c::python_file, frame_read_size)), 72);
        assert_eq!(u32_at(offset_of!(c::python_file, interp_threads_head)), 16);
        assert_eq!(u32_at(offset_of!(c::python_file, tstate_thread_id)), 152);
        assert_eq!(u32_at(offset_of!(c::python_file, code_adaptive)), 184);
        assert_eq!(u32_at(offset_of!(c::python_file, frame_code_tag_mask)), 7);
        assert_eq!(value.read::<c::python_file>().unwrap().reserved, 0);
    }
}
