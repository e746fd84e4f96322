//! What PHP's BPF unwinder (`ebpf/runtimes/php/unwinder.bpf.h`) keeps in its
//! map `php_files` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::PHP_FRAME_TOP < 1 << c::PHP_FRAME_PAYLOAD_BITS);
    assert!((c::PHP_FRAME_LINE_MAX as u64) << c::PHP_FRAME_LINE_SHIFT < c::PHP_FRAME_TOP);
};

/// `struct php_file`: what the BPF unwinder needs of one (NTS) PHP
/// build. Offsets are in bytes.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhpFileValue {
    /// `executor_globals`, ELF virtual address.
    pub executor_globals_vaddr: u64,
    pub eg_current_execute_data: u32,
    pub ex_opline: u32,
    pub ex_func: u32,
    pub ex_call_info: u32,
    pub ex_prev: u32,
    pub op_lineno: u32,
    /// `ZEND_CALL_TOP`.
    pub call_top: u32,
    /// `zend_op_array.line_start`: lines are recorded from it.
    pub op_array_line_start: u32,
}

/// Bytes of a `zend_execute_data` the PHP unwinder reads at once: every
/// `ex_*` field must lie below.
pub const PHP_EXECUTE_DATA_READ: u32 = c::PHP_EXECUTE_DATA_READ;

/// A PHP frame word's payload: `[PHP_FRAME_TOP] | line <<
/// PHP_FRAME_LINE_SHIFT | function >> 3`, the line counted from the
/// function's `line_start` (`ebpf/runtimes/php/unwinder.bpf.h`).
pub const PHP_FRAME_LINE_SHIFT: u32 = c::PHP_FRAME_LINE_SHIFT;
/// The largest line a PHP frame word holds; it means "unknown".
pub const PHP_FRAME_LINE_MAX: u64 = c::PHP_FRAME_LINE_MAX as u64;
/// Set in a PHP frame word whose call info has `ZEND_CALL_TOP`.
pub const PHP_FRAME_TOP: u64 = c::PHP_FRAME_TOP;

impl PhpFileValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::php_file {
        c::php_file {
            executor_globals_vaddr: self.executor_globals_vaddr,
            eg_current_execute_data: self.eg_current_execute_data,
            ex_opline: self.ex_opline,
            ex_func: self.ex_func,
            ex_call_info: self.ex_call_info,
            ex_prev: self.ex_prev,
            op_lineno: self.op_lineno,
            call_top: self.call_top,
            op_array_line_start: self.op_array_line_start,
        }
    }

    /// Its value in `php_files`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Php, &self.to_c())
    }
}
