//! What Perl's BPF unwinder (`ebpf/runtimes/perl/unwinder.bpf.h`) keeps in its
//! map `perl_files` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::PERL_FRAME_COP < 1 << c::PERL_FRAME_PAYLOAD_BITS);
    assert!((c::PERL_FRAME_LINE_MAX as u64) << c::PERL_FRAME_LINE_SHIFT < c::PERL_FRAME_COP);
};

/// `struct perl_file`: what the BPF unwinder needs of one Perl build.
/// Offsets are in bytes.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerlFileValue {
    /// `PL_curinterp` (threaded builds), ELF virtual address.
    pub curinterp_vaddr: u64,
    /// `PL_curcop` (non-threaded builds), ELF virtual address.
    pub curcop_vaddr: u64,
    /// `PL_curstackinfo` (non-threaded builds), ELF virtual address.
    pub curstackinfo_vaddr: u64,
    /// `PL_current_context`'s address minus the thread pointer, when it
    /// is in a static TLS block (threaded 5.36+ executables).
    pub tls_offset: Option<i64>,
    pub threaded: bool,
    pub interp_curcop: u32,
    pub interp_curstackinfo: u32,
    pub si_cxstack: u32,
    pub si_prev: u32,
    pub si_cxix: u32,
    pub cx_type: u32,
    pub cx_blk_oldcop: u32,
    pub cx_blk_sub_cv: u32,
    /// `sizeof(PERL_CONTEXT)`, at least [`PERL_CONTEXT_READ`].
    pub cx_size: u32,
    pub cop_line: u32,
    /// `XPVCV.xcv_start_u`: a sub's lines are recorded from its first op's.
    pub xcv_start: u32,
}

/// Bytes of a `PERL_CONTEXT` the Perl unwinder reads at once.
pub const PERL_CONTEXT_READ: u32 = c::PERL_CONTEXT_READ;
/// Bytes of a `PERL_SI` the Perl unwinder reads at once.
pub const PERL_SI_READ: u32 = c::PERL_SI_READ;
/// A Perl frame word's payload: `line << PERL_FRAME_LINE_SHIFT |
/// pointer >> 3` (a sub's CV, the line counted from its first op's), or
/// [`PERL_FRAME_COP`] with a COP (`ebpf/runtimes/perl/unwinder.bpf.h`).
pub const PERL_FRAME_LINE_SHIFT: u32 = c::PERL_FRAME_LINE_SHIFT;
/// The largest line a Perl frame word holds; it means "unknown".
pub const PERL_FRAME_LINE_MAX: u64 = c::PERL_FRAME_LINE_MAX as u64;
/// Set in a Perl frame word named by its COP (top level or eval).
pub const PERL_FRAME_COP: u64 = c::PERL_FRAME_COP;
/// The line field of a [`PERL_FRAME_COP`] word: the script's top level.
pub const PERL_COP_MAIN: u64 = c::PERL_COP_MAIN as u64;
/// The line field of a [`PERL_FRAME_COP`] word: a string eval, require
/// or do FILE.
pub const PERL_COP_EVAL: u64 = c::PERL_COP_EVAL as u64;
/// The context type bits the unwinder tests (`CXTYPEMASK`, `CXt_SUB`,
/// `CXt_FORMAT`, `CXt_EVAL`, `CXp_SUB_RE_FAKE`, `CXp_EVALBLOCK`,
/// `CXp_TRY`), for checking against the user-space walk's.
#[cfg(test)]
pub const PERL_CX_BITS: [u32; 7] = [
    c::PERL_CXTYPEMASK,
    c::PERL_CXT_SUB,
    c::PERL_CXT_FORMAT,
    c::PERL_CXT_EVAL,
    c::PERL_CXP_SUB_RE_FAKE,
    c::PERL_CXP_EVALBLOCK,
    c::PERL_CXP_TRY,
];

impl PerlFileValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::perl_file {
        c::perl_file {
            curinterp_vaddr: self.curinterp_vaddr,
            curcop_vaddr: self.curcop_vaddr,
            curstackinfo_vaddr: self.curstackinfo_vaddr,
            tls_offset: self.tls_offset.unwrap_or(0),
            threaded: u8::from(self.threaded),
            has_tls: u8::from(self.tls_offset.is_some()),
            reserved: [0; 2],
            interp_curcop: self.interp_curcop,
            interp_curstackinfo: self.interp_curstackinfo,
            si_cxstack: self.si_cxstack,
            si_prev: self.si_prev,
            si_cxix: self.si_cxix,
            cx_type: self.cx_type,
            cx_blk_oldcop: self.cx_blk_oldcop,
            cx_blk_sub_cv: self.cx_blk_sub_cv,
            cx_size: self.cx_size,
            cop_line: self.cop_line,
            xcv_start: self.xcv_start,
        }
    }

    /// Its value in `perl_files`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Perl, &self.to_c())
    }
}
