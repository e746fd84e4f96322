//! The Rust face of the structs, enums and limits of `ebpf/types.h`:
//! thin constructors and decoders over the types bindgen generated from
//! the header ([`crate::contract::c`]), by field name. No layout is
//! written here; the contract test checks the generated one against the
//! BPF target's.

use crate::contract::{bytes_of, c, read};
use profiler_elf::{CfaBase, RbpRule, UnwindRule};

pub(crate) use c::{
    DELTA_PAGE_BITS, MAPPING_FLAG_INTERPRETER_LOOP, MAPPING_KIND_NATIVE, MAPPING_KIND_NO_UNWIND_INFO,
    MAPPING_UNWINDER_SHIFT, PROCESS_RANGES_MAX, RANGES_PER_CHUNK, RANGE_CHUNKS_MAX, RANGE_START_UNUSED,
    RULE_ID_GO_MCALL, RULE_ID_GO_MORESTACK, RULE_ID_INVALID, RULE_ID_NO_COVERAGE, RULE_ID_SIGNAL, RULE_ID_STOP,
    RULE_ID_UNFOLLOWED_SWITCH,
};
pub use c::{PYTHON_FRAME_READ_MAX, PYTHON_NO_OFFSET};
// The frame words' format lives with the data model (profiler_trace);
// the contract test checks its bits against the header's. Each runtime's
// payload is its own (the constants below, by runtime).
pub use profiler_trace::{UserFrame, FRAME_EXACT_PC, FRAME_INTERPRETED};

/// A CPython frame word's payload: `offset << PYTHON_FRAME_OFFSET_SHIFT |
/// code >> 3` (`ebpf/types.h`).
pub const PYTHON_FRAME_OFFSET_SHIFT: u32 = c::PYTHON_FRAME_OFFSET_SHIFT;
/// The largest instruction offset of a CPython frame word (larger clamp).
pub const PYTHON_FRAME_OFFSET_MAX: u64 = c::PYTHON_FRAME_OFFSET_MAX;
/// Set in a HotSpot frame word's payload for compiled code.
pub const HOTSPOT_FRAME_COMPILED: u64 = c::HOTSPOT_FRAME_COMPILED;
/// Where a HotSpot frame word's payload keeps the bci (or the low bits of
/// a compiled frame's mark).
pub const HOTSPOT_FRAME_OFFSET_SHIFT: u32 = c::HOTSPOT_FRAME_OFFSET_SHIFT;
/// The largest bci of a HotSpot frame word (larger clamp).
pub const HOTSPOT_FRAME_OFFSET_MAX: u64 = c::HOTSPOT_FRAME_OFFSET_MAX;
/// The bci of an interpreted HotSpot frame that has none (a native
/// method).
pub const HOTSPOT_NO_BCI: u64 = c::HOTSPOT_NO_BCI;
/// A CRuby frame word's payload: `pos << RUBY_FRAME_POS_SHIFT | pointer
/// >> 3`.
pub const RUBY_FRAME_POS_SHIFT: u32 = c::RUBY_FRAME_POS_SHIFT;
/// The largest `pos` of a CRuby frame word; it means "unknown".
pub const RUBY_FRAME_POS_MAX: u64 = c::RUBY_FRAME_POS_MAX as u64;

/// Declares [`UnwindStop`] from one table: variant, `enum unwind_stop`
/// constant, stats name. A reason added to types.h and not here fails the
/// build (`ALL` is `UNWIND_STOP_COUNT` long); the contract test checks
/// that each name is its constant's, lower-cased.
macro_rules! unwind_stops {
    ($($(#[$doc:meta])* $variant:ident = $c:ident, $name:literal;)*) => {
        /// Why a user stack ends where it ends (`enum unwind_stop`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum UnwindStop {
            $($(#[$doc])* $variant,)*
            /// A value this version does not know.
            Unknown(u8),
        }

        impl UnwindStop {
            /// Every known reason, in `enum unwind_stop` order.
            pub const ALL: [UnwindStop; c::UNWIND_STOP_COUNT as usize] = [$(UnwindStop::$variant),*];

            /// From the C value.
            pub fn from_raw(value: u8) -> UnwindStop {
                match u32::from(value) {
                    $(c::$c => UnwindStop::$variant,)*
                    _ => UnwindStop::Unknown(value),
                }
            }

            /// The C value.
            pub fn raw(self) -> u8 {
                match self {
                    $(UnwindStop::$variant => c::$c as u8,)*
                    UnwindStop::Unknown(v) => v,
                }
            }

            /// A short snake_case name (stats output): the C name without
            /// `UNWIND_STOP_`, lower-cased.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(UnwindStop::$variant => $name,)*
                    UnwindStop::Unknown(_) => "unknown",
                }
            }
        }
    };
}

unwind_stops! {
    /// The thread's root was reached: the stack is complete.
    Root = UNWIND_STOP_ROOT, "root";
    /// A kernel thread: no user stack.
    KernelThread = UNWIND_STOP_KERNEL_THREAD, "kernel_thread";
    /// The process was not loaded yet.
    UnknownPid = UNWIND_STOP_UNKNOWN_PID, "unknown_pid";
    /// The pc is in no mapping the process manager loaded.
    UnknownPc = UNWIND_STOP_UNKNOWN_PC, "unknown_pc";
    /// Executable memory without unwind tables (JIT, anonymous).
    NoUnwindInfo = UNWIND_STOP_NO_UNWIND_INFO, "no_unwind_info";
    /// The file has no stack deltas for the pc's page.
    NoDeltas = UNWIND_STOP_NO_DELTAS, "no_deltas";
    /// No CFI covers the pc.
    NoCoverage = UNWIND_STOP_NO_COVERAGE, "no_coverage";
    /// The CFI for the pc cannot be expressed in the unwinder's rules.
    InvalidRule = UNWIND_STOP_INVALID_RULE, "invalid_rule";
    /// Reading the user stack failed.
    ReadError = UNWIND_STOP_READ_ERROR, "read_error";
    /// The stack pointer did not grow.
    BadSp = UNWIND_STOP_BAD_SP, "bad_sp";
    /// `MAX_USER_FRAMES` frames were collected; the stack goes on.
    MaxFrames = UNWIND_STOP_MAX_FRAMES, "max_frames";
    /// A tail call failed.
    TailCalls = UNWIND_STOP_TAIL_CALLS, "tail_calls";
    /// A map lookup that cannot fail did.
    Internal = UNWIND_STOP_INTERNAL, "internal";
    /// A return address of 0 ended the stack without a STOP rule.
    ZeroPc = UNWIND_STOP_ZERO_PC, "zero_pc";
    /// The user registers of a task in the kernel could not be read.
    NoUserRegs = UNWIND_STOP_NO_USER_REGS, "no_user_regs";
    /// A stack switch the unwinder cannot follow (Go's `mcall`,
    /// `morestack`, ...), or too many switches in one stack.
    StackSwitch = UNWIND_STOP_STACK_SWITCH, "stack_switch";
    /// User space only: unwinding a stack copy ([`crate::StackCopy`])
    /// needed a word outside the copied window.
    OutsideCopy = UNWIND_STOP_OUTSIDE_COPY, "outside_copy";
    /// A pc in a JVM's code cache the HotSpot unwinder could not unwind.
    Hotspot = UNWIND_STOP_HOTSPOT, "hotspot";
    /// A frame the eBPF build's architecture cannot unwind yet (arm64:
    /// PLT stubs, signal frames; `ebpf/arch.h`).
    ArchUnsupported = UNWIND_STOP_ARCH_UNSUPPORTED, "arch_unsupported";
}

impl UnwindStop {
    /// Whether the stack is whole: it reached the thread's root, or
    /// there is no user stack at all.
    pub fn is_complete(self) -> bool {
        matches!(self, UnwindStop::Root | UnwindStop::KernelThread)
    }
}

/// `struct process_event` kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessEventKind {
    /// A sample of a process the unwinder does not know.
    New,
    /// A known process ran code in no mapping that was loaded.
    UnknownPc,
    /// The last thread of the process exited.
    Exit,
    /// The process called execve: every mapping is new.
    Exec,
}

/// One record of the `process_events` ring buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEvent {
    /// What happened.
    pub kind: ProcessEventKind,
    /// The process (tgid).
    pub pid: u32,
    /// `CLOCK_MONOTONIC` time of the event, ns.
    pub ktime_ns: u64,
    /// For [`ProcessEventKind::UnknownPc`], the pc; else 0.
    pub pc: u64,
}

impl ProcessEvent {
    /// Decodes a ring buffer record; `None` if malformed.
    pub fn parse(data: &[u8]) -> Option<ProcessEvent> {
        let e: c::process_event = read(data)?;
        let kind = match e.kind {
            c::PROCESS_EVENT_NEW => ProcessEventKind::New,
            c::PROCESS_EVENT_UNKNOWN_PC => ProcessEventKind::UnknownPc,
            c::PROCESS_EVENT_EXIT => ProcessEventKind::Exit,
            c::PROCESS_EVENT_EXEC => ProcessEventKind::Exec,
            _ => return None,
        };
        Some(ProcessEvent { kind, pid: e.pid, ktime_ns: e.ktime_ns, pc: e.pc })
    }
}

/// `struct process_range`: `[start, end)` holds `mapping`.
pub(crate) type ProcessRange = c::process_range;

/// `struct process_ranges`: a process's range count, chunk generation and
/// the first address of each chunk.
pub(crate) type ProcessRangesValue = c::process_ranges;

impl ProcessRangesValue {
    /// The value for `ranges` (sorted) written as chunks of `generation`.
    pub(crate) fn of(ranges: &[ProcessRange], generation: u32) -> ProcessRangesValue {
        let mut value = ProcessRangesValue {
            count: ranges.len() as u32,
            generation,
            chunk_start: [RANGE_START_UNUSED; RANGE_CHUNKS_MAX as usize],
        };
        for (slot, chunk) in value.chunk_start.iter_mut().zip(ranges.chunks(RANGES_PER_CHUNK as usize)) {
            *slot = chunk[0].start;
        }
        value
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }

    pub(crate) fn from_bytes(b: &[u8]) -> Option<ProcessRangesValue> {
        read(b)
    }
}

/// `struct range_chunk`: up to [`RANGES_PER_CHUNK`] sorted ranges.
pub(crate) type RangeChunk = c::range_chunk;

impl RangeChunk {
    /// A chunk holding `ranges` (at most [`RANGES_PER_CHUNK`]), the
    /// slots after them padded.
    pub(crate) fn of(ranges: &[ProcessRange]) -> RangeChunk {
        let unused = ProcessRange { start: RANGE_START_UNUSED, ..Default::default() };
        let mut chunk = RangeChunk { ranges: [unused; RANGES_PER_CHUNK as usize] };
        for (slot, range) in chunk.ranges.iter_mut().zip(ranges) {
            *slot = *range;
        }
        chunk
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }

    pub(crate) fn from_bytes(b: &[u8]) -> Option<RangeChunk> {
        read(b)
    }
}

/// `struct range_chunk_key` of chunk `index` of `generation` (0 or 1).
pub(crate) fn range_chunk_key(pid: u32, generation: u32, index: u32) -> [u8; size_of::<c::range_chunk_key>()] {
    let key = c::range_chunk_key { pid, chunk: (generation & 1) << 16 | index };
    bytes_of(&key).try_into().expect("one key")
}

pub use crate::runtimes::InterpreterUnwinder;

/// `struct pid_mapping`.
pub(crate) type PidMappingValue = c::pid_mapping;

/// `struct delta_page_key`, as bytes.
pub(crate) fn delta_page_key(file_id: u64, page: u64) -> [u8; size_of::<c::delta_page_key>()] {
    bytes_of(&c::delta_page_key { file_id, page }).try_into().expect("one key")
}

/// `struct delta_page`, as bytes.
pub(crate) fn delta_page(first: u32, count: u32) -> [u8; size_of::<c::delta_page>()] {
    bytes_of(&c::delta_page { first, count }).try_into().expect("one value")
}

/// `struct delta_entry` as the u32 the arrays hold.
pub(crate) fn delta_entry(page_offset: u16, rule_id: u16) -> u32 {
    const _: () = assert!(size_of::<c::delta_entry>() == size_of::<u32>());
    u32::from_ne_bytes(bytes_of(&c::delta_entry { page_offset, rule_id }).try_into().expect("4 bytes"))
}

// enum rule_kind, cfa_base, rbp_kind, as the u8 fields of struct
// unwind_rule hold them.
pub(crate) const RULE_KIND_CFA: u8 = c::RULE_KIND_CFA as u8;
pub(crate) const RULE_KIND_CFA_DEREF: u8 = c::RULE_KIND_CFA_DEREF as u8;
pub(crate) const RULE_KIND_PLT: u8 = c::RULE_KIND_PLT as u8;
pub(crate) const RULE_KIND_STACK_SWITCH: u8 = c::RULE_KIND_STACK_SWITCH as u8;
pub(crate) const CFA_BASE_RSP: u8 = c::CFA_BASE_RSP as u8;
pub(crate) const CFA_BASE_RBP: u8 = c::CFA_BASE_RBP as u8;
pub(crate) const RBP_UNCHANGED: u8 = c::RBP_UNCHANGED as u8;
pub(crate) const RBP_AT_CFA: u8 = c::RBP_AT_CFA as u8;
pub(crate) const RBP_AT_RBP: u8 = c::RBP_AT_RBP as u8;

/// `struct unwind_rule`.
pub(crate) type UnwindRuleValue = c::unwind_rule;

impl UnwindRuleValue {
    /// The map value for `rule`; the commands (stop, signal, invalid, no
    /// coverage) have fixed ids and an all-zero value.
    pub(crate) fn from_rule(rule: &UnwindRule) -> UnwindRuleValue {
        let base = |b: &CfaBase| match b {
            CfaBase::Rsp => CFA_BASE_RSP,
            CfaBase::Rbp => CFA_BASE_RBP,
        };
        let rbp = |r: &RbpRule| match *r {
            RbpRule::Unchanged => (RBP_UNCHANGED, 0),
            RbpRule::AtCfa(o) => (RBP_AT_CFA, o),
            RbpRule::AtRbp(o) => (RBP_AT_RBP, o),
        };
        match rule {
            UnwindRule::Cfa { base: b, offset, rbp: r } => {
                let (rbp_kind, rbp_offset) = rbp(r);
                UnwindRuleValue {
                    kind: RULE_KIND_CFA,
                    cfa_base: base(b),
                    rbp_kind,
                    cfa_offset: *offset,
                    rbp_offset,
                    ..Default::default()
                }
            }
            UnwindRule::CfaDeref { base: b, inner, outer, rbp: r } => {
                let (rbp_kind, rbp_offset) = rbp(r);
                UnwindRuleValue {
                    kind: RULE_KIND_CFA_DEREF,
                    cfa_base: base(b),
                    rbp_kind,
                    cfa_offset: *inner,
                    deref_outer: *outer,
                    rbp_offset,
                    ..Default::default()
                }
            }
            UnwindRule::Plt { threshold } => {
                UnwindRuleValue { kind: RULE_KIND_PLT, plt_threshold: *threshold, ..Default::default() }
            }
            UnwindRule::StackSwitch { offset, rbp: r } => {
                let (rbp_kind, rbp_offset) = rbp(r);
                UnwindRuleValue {
                    kind: RULE_KIND_STACK_SWITCH,
                    cfa_base: CFA_BASE_RBP,
                    rbp_kind,
                    cfa_offset: *offset,
                    rbp_offset,
                    ..Default::default()
                }
            }
            _ => UnwindRuleValue::default(),
        }
    }

    /// From the map's bytes.
    pub(crate) fn from_bytes(b: &[u8; size_of::<UnwindRuleValue>()]) -> UnwindRuleValue {
        read(b).expect("one rule")
    }

    pub(crate) fn to_bytes(self) -> [u8; size_of::<UnwindRuleValue>()] {
        bytes_of(&self).try_into().expect("one rule")
    }
}

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

/// `sizeof(struct python_file)`.
pub(crate) const PYTHON_FILE_SIZE: usize = size_of::<c::python_file>();

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

    pub(crate) fn to_bytes(self) -> [u8; PYTHON_FILE_SIZE] {
        bytes_of(&self.to_c()).try_into().expect("one value")
    }
}

/// Set in a BEAM frame word's payload when its pc is a return address
/// (a continuation pointer: named by pc - 1; `ebpf/types.h`).
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
        }
    }

    /// The map value's bytes.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        bytes_of(&self.to_c()).to_vec()
    }
}

/// Set in a V8 frame word's payload for compiled code (`ebpf/types.h`).
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

    /// The map value's bytes.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        bytes_of(&self.to_c()).to_vec()
    }
}

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

/// `sizeof(struct ruby_file)`.
pub(crate) const RUBY_FILE_SIZE: usize = size_of::<c::ruby_file>();

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

    pub(crate) fn to_bytes(self) -> [u8; RUBY_FILE_SIZE] {
        bytes_of(&self.to_c()).try_into().expect("one value")
    }
}

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
/// function's `line_start` (`ebpf/php_unwinder.bpf.h`).
pub const PHP_FRAME_LINE_SHIFT: u32 = c::PHP_FRAME_LINE_SHIFT;
/// The largest line a PHP frame word holds; it means "unknown".
pub const PHP_FRAME_LINE_MAX: u64 = c::PHP_FRAME_LINE_MAX as u64;
/// Set in a PHP frame word whose call info has `ZEND_CALL_TOP`.
pub const PHP_FRAME_TOP: u64 = c::PHP_FRAME_TOP;

/// `sizeof(struct php_file)`.
pub(crate) const PHP_FILE_SIZE: usize = size_of::<c::php_file>();

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

    pub(crate) fn to_bytes(self) -> [u8; PHP_FILE_SIZE] {
        bytes_of(&self.to_c()).try_into().expect("one value")
    }
}

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
/// [`PERL_FRAME_COP`] with a COP (`ebpf/perl_unwinder.bpf.h`).
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
pub const PERL_CX_BITS: [u32; 7] = [
    c::PERL_CXTYPEMASK,
    c::PERL_CXT_SUB,
    c::PERL_CXT_FORMAT,
    c::PERL_CXT_EVAL,
    c::PERL_CXP_SUB_RE_FAKE,
    c::PERL_CXP_EVALBLOCK,
    c::PERL_CXP_TRY,
];

/// `sizeof(struct perl_file)`.
pub(crate) const PERL_FILE_SIZE: usize = size_of::<c::perl_file>();

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

    pub(crate) fn to_bytes(self) -> [u8; PERL_FILE_SIZE] {
        bytes_of(&self.to_c()).try_into().expect("one value")
    }
}

/// Most code heaps of a JVM the HotSpot unwinder looks blobs up in
/// (`HOTSPOT_MAX_HEAPS`).
pub const HOTSPOT_MAX_HEAPS: usize = c::HOTSPOT_MAX_HEAPS as usize;
/// A compiled HotSpot frame word's pc offset in the code cache (its low
/// bits; `HOTSPOT_CODE_OFFSET_MAX` in `ebpf/types.h`).
pub const HOTSPOT_CODE_OFFSET_MAX: u64 = c::HOTSPOT_CODE_OFFSET_MAX as u64;
/// Set in a compiled HotSpot frame word when its pc is the sampled
/// instruction, not a return address.
pub const HOTSPOT_PC_EXACT: u64 = c::HOTSPOT_PC_EXACT as u64;
/// Where a compiled HotSpot frame word keeps its mark's bits above 16.
pub const HOTSPOT_MARK_HIGH_SHIFT: u32 = c::HOTSPOT_MARK_HIGH_SHIFT;
/// Bits of a compiled HotSpot frame's mark (its blob's compile id) kept.
pub const HOTSPOT_MARK_BITS: u32 = c::HOTSPOT_MARK_BITS;

/// `struct hotspot_heap`: one code heap of a JVM's code cache, in the
/// process's addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotspotHeapValue {
    /// Its first address.
    pub low: u64,
    /// One past its last.
    pub high: u64,
    /// Its segment map.
    pub segmap: u64,
    /// log2 of its segment size.
    pub log2_segment_size: u32,
}

/// `struct hotspot_process`: what the HotSpot unwinder needs of one JVM
/// process. Addresses are the process's; offsets in bytes; slots in
/// words from an interpreted frame's frame pointer.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotspotProcessValue {
    /// `CodeCache::_low_bound`.
    pub code_low: u64,
    /// `CodeCache::_high_bound`.
    pub code_high: u64,
    /// Address of `AbstractInterpreter::_code`.
    pub interpreter_code: u64,
    /// Address of `StubRoutines::_call_stub_return_address`.
    pub call_stub_return: u64,
    /// Address of `CodeCache::_low_bound`.
    pub code_low_bound: u64,
    /// Address of `CodeCache::_high_bound`.
    pub code_high_bound: u64,
    /// Address of `CodeCache::_heaps`.
    pub code_heaps: u64,
    pub growable_array_len: u32,
    pub growable_array_data: u32,
    pub code_heap_memory: u32,
    pub code_heap_segmap: u32,
    pub code_heap_log2_segment_size: u32,
    pub virtual_space_low: u32,
    pub virtual_space_high: u32,
    /// At most [`HOTSPOT_MAX_HEAPS`] (more are dropped).
    pub heaps: [HotspotHeapValue; HOTSPOT_MAX_HEAPS],
    pub heap_count: u32,
    pub heap_block_size: u32,
    pub heap_block_used: u32,
    pub stub_queue_buffer: u32,
    pub stub_queue_limit: u32,
    pub blob_frame_size: u32,
    pub method_const_method: u32,
    pub const_method_size: u32,
    pub interp_method_slot: i32,
    pub interp_bcp_slot: i32,
    pub interp_sender_sp_slot: i32,
    /// `nmethod::_compile_id`: the mark of compiled frame words.
    pub nmethod_compile_id: u32,
    /// `nmethod::_orig_pc_offset`.
    pub nmethod_orig_pc_offset: u32,
    /// The deoptimisation handler's field (0: none).
    pub nmethod_deopt_handler: u32,
    /// Whether that field is an `int` offset from the blob (JDK 23+),
    /// not a pointer.
    pub deopt_handler_is_offset: bool,
    /// `CodeBlob::_code_begin` (a pointer) or `_code_offset` (an `int`
    /// from the blob, with [`HOTSPOT_CODE_OFFSETS`]).
    pub blob_code_begin: u32,
    /// `CodeBlob::_frame_complete_offset`.
    pub blob_frame_complete: u32,
    /// `nmethod::_verified_entry_point` (a pointer) or
    /// `_verified_entry_offset` (`u16`, with [`HOTSPOT_ENTRY_OFFSETS`]).
    pub nmethod_verified_entry: u32,
    /// `CodeBlob::_kind` (with [`HOTSPOT_HAS_KIND`]).
    pub blob_kind: u32,
    /// `CodeBlobKind::Nmethod`.
    pub blob_kind_nmethod: u32,
    /// `HOTSPOT_*` flags: how the fields above are read.
    pub code_flags: u32,
}

/// `code_flags`: `blob_code_begin` is `_code_offset` (JDK 23+).
pub const HOTSPOT_CODE_OFFSETS: u32 = c::HOTSPOT_CODE_OFFSETS;
/// `code_flags`: `nmethod_verified_entry` is a `u16` offset (JDK 23+).
pub const HOTSPOT_ENTRY_OFFSETS: u32 = c::HOTSPOT_ENTRY_OFFSETS;
/// `code_flags`: `_frame_complete_offset` is `int16_t` (JDK 23+).
pub const HOTSPOT_FRAME_COMPLETE_16: u32 = c::HOTSPOT_FRAME_COMPLETE_16;
/// `code_flags`: `blob_kind` is set (JDK 23+).
pub const HOTSPOT_HAS_KIND: u32 = c::HOTSPOT_HAS_KIND;

impl HotspotProcessValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::hotspot_process {
        let heap = |h: HotspotHeapValue| c::hotspot_heap {
            low: h.low,
            high: h.high,
            segmap: h.segmap,
            log2_segment_size: h.log2_segment_size,
            reserved: 0,
        };
        c::hotspot_process {
            code_low: self.code_low,
            code_high: self.code_high,
            interpreter_code: self.interpreter_code,
            call_stub_return: self.call_stub_return,
            code_low_bound: self.code_low_bound,
            code_high_bound: self.code_high_bound,
            code_heaps: self.code_heaps,
            growable_array_len: self.growable_array_len,
            growable_array_data: self.growable_array_data,
            code_heap_memory: self.code_heap_memory,
            code_heap_segmap: self.code_heap_segmap,
            code_heap_log2_segment_size: self.code_heap_log2_segment_size,
            virtual_space_low: self.virtual_space_low,
            virtual_space_high: self.virtual_space_high,
            reserved2: 0,
            heaps: self.heaps.map(heap),
            heap_count: self.heap_count.min(HOTSPOT_MAX_HEAPS as u32),
            heap_block_size: self.heap_block_size,
            heap_block_used: self.heap_block_used,
            stub_queue_buffer: self.stub_queue_buffer,
            stub_queue_limit: self.stub_queue_limit,
            blob_frame_size: self.blob_frame_size,
            method_const_method: self.method_const_method,
            const_method_size: self.const_method_size,
            interp_method_slot: self.interp_method_slot,
            interp_bcp_slot: self.interp_bcp_slot,
            interp_sender_sp_slot: self.interp_sender_sp_slot,
            nmethod_compile_id: self.nmethod_compile_id,
            nmethod_orig_pc_offset: self.nmethod_orig_pc_offset,
            nmethod_deopt_handler: self.nmethod_deopt_handler,
            deopt_handler_is_offset: u32::from(self.deopt_handler_is_offset),
            blob_code_begin: self.blob_code_begin,
            blob_frame_complete: self.blob_frame_complete,
            nmethod_verified_entry: self.nmethod_verified_entry,
            blob_kind: self.blob_kind,
            blob_kind_nmethod: self.blob_kind_nmethod,
            code_flags: self.code_flags,
            reserved: 0,
        }
    }

    pub(crate) fn to_bytes(self) -> Vec<u8> {
        bytes_of(&self.to_c()).to_vec()
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
        let b = v.to_bytes();
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(b[offset_of!(c::python_file, frame_model)], 1);
        assert_eq!(b[offset_of!(c::python_file, lasti_kind)], 2);
        assert_eq!(u16::from_ne_bytes(b[offset_of!(c::python_file, version)..][..2].try_into().unwrap()), 0x030b);
        assert_eq!(u32_at(offset_of!(c::python_file, frame_read_size)), 72);
        assert_eq!(u32_at(offset_of!(c::python_file, interp_threads_head)), 16);
        assert_eq!(u32_at(offset_of!(c::python_file, tstate_thread_id)), 152);
        assert_eq!(u32_at(offset_of!(c::python_file, code_adaptive)), 184);
        assert_eq!(u32_at(offset_of!(c::python_file, frame_code_tag_mask)), 7);
        assert_eq!(read::<c::python_file>(&b).unwrap().reserved, 0);
    }

    #[test]
    fn unwind_stop_round_trips() {
        for (i, r) in UnwindStop::ALL.iter().enumerate() {
            assert_eq!(UnwindStop::from_raw(i as u8), *r);
            assert_eq!(r.raw(), i as u8);
        }
        assert_eq!(UnwindStop::from_raw(200), UnwindStop::Unknown(200));
        assert!(UnwindStop::Root.is_complete());
        assert!(!UnwindStop::NoCoverage.is_complete());
    }

    #[test]
    fn range_chunks_hold_their_first_addresses() {
        let range = |start: u64| ProcessRange { start, end: start + 0x10, mapping: Default::default() };
        let ranges: Vec<ProcessRange> = (0..RANGES_PER_CHUNK as u64 * 2 + 1).map(|i| range(0x1000 * (i + 1))).collect();
        let value = ProcessRangesValue::of(&ranges, 1);
        assert_eq!((value.count, value.generation), (ranges.len() as u32, 1));
        let first = RANGES_PER_CHUNK as usize;
        let unused = RANGE_START_UNUSED;
        assert_eq!(
            &value.chunk_start[..4],
            &[0x1000, 0x1000 * (first as u64 + 1), 0x1000 * (2 * first as u64 + 1), unused]
        );
        let chunk = RangeChunk::of(&ranges[first..2 * first]);
        assert_eq!(RangeChunk::from_bytes(chunk.as_bytes()).map(|c| c.ranges[0].start), Some(ranges[first].start));
        let last = RangeChunk::of(&ranges[2 * first..]);
        assert_eq!((last.ranges[0].start, last.ranges[1].start), (ranges[2 * first].start, unused));
        let key = range_chunk_key(0x0102_0304, 1, 5);
        let chunk_at = offset_of!(c::range_chunk_key, chunk);
        assert_eq!(u32::from_ne_bytes(key[chunk_at..chunk_at + 4].try_into().unwrap()), 0x1_0005);
    }

    #[test]
    fn rules_encode() {
        let r = UnwindRuleValue::from_rule(&UnwindRule::CfaDeref {
            base: CfaBase::Rbp,
            inner: -8,
            outer: 16,
            rbp: RbpRule::AtRbp(0),
        });
        assert_eq!(
            (r.kind, r.cfa_base, r.rbp_kind, r.cfa_offset, r.deref_outer),
            (RULE_KIND_CFA_DEREF, CFA_BASE_RBP, RBP_AT_RBP, -8, 16)
        );
        assert_eq!(UnwindRuleValue::from_rule(&UnwindRule::Plt { threshold: 11 }).plt_threshold, 11);
        assert_eq!(UnwindRuleValue::from_rule(&UnwindRule::Stop), UnwindRuleValue::default());
        assert_eq!(UnwindRuleValue::from_rule(&UnwindRule::UnfollowedSwitch), UnwindRuleValue::default());
        let r = UnwindRuleValue::from_rule(&UnwindRule::StackSwitch { offset: 16, rbp: RbpRule::AtCfa(-16) });
        assert_eq!(
            (r.kind, r.cfa_base, r.cfa_offset, r.rbp_kind, r.rbp_offset),
            (RULE_KIND_STACK_SWITCH, CFA_BASE_RBP, 16, RBP_AT_CFA, -16)
        );
        assert_eq!(
            read::<c::delta_entry>(&delta_entry(0x1234, 7).to_ne_bytes()),
            Some(c::delta_entry { page_offset: 0x1234, rule_id: 7 })
        );
        assert_eq!(UnwindRuleValue::from_bytes(&r.to_bytes()), r);
    }

    #[test]
    fn process_events_parse() {
        let e = c::process_event { kind: c::PROCESS_EVENT_UNKNOWN_PC, pid: 77, ktime_ns: 5, pc: 0x4010 };
        let mut d = bytes_of(&e).to_vec();
        assert_eq!(
            ProcessEvent::parse(&d),
            Some(ProcessEvent { kind: ProcessEventKind::UnknownPc, pid: 77, ktime_ns: 5, pc: 0x4010 })
        );
        assert_eq!(ProcessEvent::parse(&d[..d.len() - 1]), None);
        d[offset_of!(c::process_event, kind)] = 9;
        assert_eq!(ProcessEvent::parse(&d), None);
    }
}
