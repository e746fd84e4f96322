//! What CRuby's BPF unwinder (`ebpf/runtimes/ruby/unwinder.bpf.h`) keeps in its
//! map `ruby_files` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!((c::RUBY_FRAME_POS_MAX as u64) << c::RUBY_FRAME_POS_SHIFT < 1 << c::RUBY_FRAME_PAYLOAD_BITS);
};

/// A CRuby frame word's payload: `pos << RUBY_FRAME_POS_SHIFT | pointer
/// >> 3`.
pub const RUBY_FRAME_POS_SHIFT: u32 = c::RUBY_FRAME_POS_SHIFT;
/// The largest `pos` of a CRuby frame word; it means "unknown".
pub const RUBY_FRAME_POS_MAX: u64 = c::RUBY_FRAME_POS_MAX as u64;

/// `enum ruby_tls_model`: how a CRuby build reaches its thread-local
/// `ruby_current_ec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RubyTlsModel {
    /// General dynamic: the module id at `tls_vaddr`, the thread's DTV.
    Dynamic = c::RUBY_TLS_DYNAMIC as isize,
    /// Initial exec: the offset from the thread pointer at `tls_vaddr`.
    InitialExec = c::RUBY_TLS_INITIAL_EXEC as isize,
}

/// `struct ruby_file`: what the BPF unwinder needs of one CRuby build.
/// Offsets are in bytes.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RubyFileValue {
    /// ELF virtual address of `ruby_current_ec`'s GOT slot.
    pub tls_vaddr: u64,
    /// Offset of `ruby_current_ec` in the module's TLS block
    /// ([`RubyTlsModel::Dynamic`]).
    pub tls_offset: u64,
    pub tls_model: RubyTlsModel,
    pub ec_vm_stack: u32,
    pub ec_vm_stack_size: u32,
    pub ec_cfp: u32,
    /// `sizeof(rb_control_frame_t)`, at most [`RUBY_CFP_READ_MAX`].
    pub cfp_size: u32,
    pub cfp_pc: u32,
    pub cfp_iseq: u32,
    pub cfp_ep: u32,
    pub iseq_body: u32,
    pub body_iseq_encoded: u32,
    pub me_def: u32,
    pub def_iseq: u32,
}

/// Bytes of a control frame the CRuby unwinder reads at once.
pub const RUBY_CFP_READ_MAX: u32 = c::RUBY_CFP_READ_MAX;

impl RubyFileValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::ruby_file {
        c::ruby_file {
            tls_vaddr: self.tls_vaddr,
            tls_offset: self.tls_offset,
            tls_model: self.tls_model as u8,
            reserved: [0; 3],
            ec_vm_stack: self.ec_vm_stack,
            ec_vm_stack_size: self.ec_vm_stack_size,
            ec_cfp: self.ec_cfp,
            cfp_size: self.cfp_size,
            cfp_pc: self.cfp_pc,
            cfp_iseq: self.cfp_iseq,
            cfp_ep: self.cfp_ep,
            iseq_body: self.iseq_body,
            body_iseq_encoded: self.body_iseq_encoded,
            me_def: self.me_def,
            def_iseq: self.def_iseq,
        }
    }

    /// Its value in `ruby_files`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Ruby, &self.to_c())
    }
}
