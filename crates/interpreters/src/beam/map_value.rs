//! What BEAM's BPF unwinder (`ebpf/runtimes/beam/unwinder.bpf.h`) keeps in its
//! map `beam_processes` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::BEAM_FRAME_RETURN_ADDRESS < 1 << c::BEAM_FRAME_PAYLOAD_BITS);
    assert!(c::BEAM_FRAME_PC_MASK < c::BEAM_FRAME_RETURN_ADDRESS);
};

/// Set in a BEAM frame word's payload when its pc is a return address
/// (a continuation pointer: named by pc - 1; `ebpf/runtimes/beam/types.h`).
pub const BEAM_FRAME_RETURN_ADDRESS: u64 = c::BEAM_FRAME_RETURN_ADDRESS;
/// The pc bits of a BEAM frame word's payload.
pub const BEAM_FRAME_PC_MASK: u64 = c::BEAM_FRAME_PC_MASK;

/// `struct beam_process`: what the BEAM unwinder needs of one Erlang node
/// (process addresses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeamProcessValue {
    /// The code address `beam_normal_exit` holds.
    pub normal_exit: u64,
    /// The JIT's executable code `[code_low, code_high)`.
    pub code_low: u64,
    /// See `code_low`.
    pub code_high: u64,
    /// From rbx to the scheduler's return address into C (0: unknown).
    pub scheduler_return: u32,
    /// `erts_frame_layout` (0: RA, 1: FP_RA).
    pub frame_layout: u32,
    /// From the stack pointer the JIT calls C with to rbx (0: unknown).
    pub runtime_stack: u32,
    /// `ErtsSchedulerData.current_process` (0: unknown).
    pub current_process: u16,
    /// `Process.stop` (0: unknown).
    pub process_stop: u16,
}

impl BeamProcessValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::beam_process {
        c::beam_process {
            normal_exit: self.normal_exit,
            code_low: self.code_low,
            code_high: self.code_high,
            scheduler_return: self.scheduler_return,
            frame_layout: self.frame_layout,
            runtime_stack: self.runtime_stack,
            current_process: self.current_process,
            process_stop: self.process_stop,
        }
    }

    /// Its value in `beam_processes`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Beam, &self.to_c())
    }
}
