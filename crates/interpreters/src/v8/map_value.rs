//! What V8's BPF unwinder (`ebpf/runtimes/v8/unwinder.bpf.h`) keeps in its
//! map `v8_processes` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::V8_FRAME_COMPILED < 1 << c::V8_FRAME_PAYLOAD_BITS);
    assert!(c::V8_FRAME_OFFSET_MAX << c::V8_FRAME_OFFSET_SHIFT < c::V8_FRAME_COMPILED);
};

/// Set in a V8 frame word's payload for compiled code (`ebpf/runtimes/v8/types.h`).
pub const V8_FRAME_COMPILED: u64 = c::V8_FRAME_COMPILED;
/// Where a V8 frame word's payload keeps the offset.
pub const V8_FRAME_OFFSET_SHIFT: u32 = c::V8_FRAME_OFFSET_SHIFT;
/// The largest offset of a V8 frame word; it means "unknown".
pub const V8_FRAME_OFFSET_MAX: u64 = c::V8_FRAME_OFFSET_MAX;
/// V8 13+: the pc bits of a compiled frame word recorded by its pc.
pub const V8_FRAME_PC_MASK: u64 = c::V8_FRAME_PC_MASK;

/// `struct v8_process`: what the V8 unwinder needs of one Node process.
/// Slots are byte offsets from a frame pointer (multiples of 8, within
/// the window the unwinder reads), the others byte offsets in objects.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V8ProcessValue {
    pub fp_marker: i32,
    pub fp_function: i32,
    pub fp_bytecode_array: i32,
    pub fp_bytecode_offset: i32,
    pub marker_entry: u32,
    pub marker_construct_entry: u32,
    pub smi_shift: u32,
    pub bytecode_offset_bias: u32,
    pub heap_object_map: u32,
    pub map_instance_type: u32,
    pub js_function_code: u32,
    pub code_instruction_start: u32,
    pub type_bytecode_array: u16,
    /// Compiled frames in JIT memory are recorded by their pc (V8 12+).
    pub compiled_by_pc: bool,
    /// V8 13+: interpreter-shaped frames in JIT memory outside their
    /// function's Sparkplug code are optimised code entered by on-stack
    /// replacement, recorded by their pc.
    pub osr_by_pc: bool,
    pub js_function_shared: u32,
    pub sfi_function_data: u32,
    pub code_instruction_size: u32,
}

impl V8ProcessValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::v8_process {
        c::v8_process {
            fp_marker: self.fp_marker,
            fp_function: self.fp_function,
            fp_bytecode_array: self.fp_bytecode_array,
            fp_bytecode_offset: self.fp_bytecode_offset,
            marker_entry: self.marker_entry,
            marker_construct_entry: self.marker_construct_entry,
            smi_shift: self.smi_shift,
            bytecode_offset_bias: self.bytecode_offset_bias,
            heap_object_map: self.heap_object_map,
            map_instance_type: self.map_instance_type,
            js_function_code: self.js_function_code,
            code_instruction_start: self.code_instruction_start,
            type_bytecode_array: self.type_bytecode_array,
            compiled_by_pc: u16::from(self.compiled_by_pc),
            pc_in_jit: 0,
            osr_by_pc: u16::from(self.osr_by_pc),
            js_function_shared: self.js_function_shared,
            sfi_function_data: self.sfi_function_data,
            code_instruction_size: self.code_instruction_size,
            reserved2: 0,
        }
    }

    /// Its value in `v8_processes`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::V8, &self.to_c())
    }
}
