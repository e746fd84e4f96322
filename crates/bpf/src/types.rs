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
// The frame words' format lives with the data model (profiler_trace);
// the contract test checks its bits against the header's. Each runtime's
// payload is its own (profiler-interpreters, by runtime).
pub use profiler_trace::{UserFrame, FRAME_EXACT_PC, FRAME_INTERPRETED};

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
    /// A pc in a runtime's JIT code its unwinder could not unwind (a
    /// JVM's code cache: HotSpot is the one that stops there). Its stats
    /// name stays `hotspot`.
    Hotspot = UNWIND_STOP_RUNTIME_CODE, "hotspot";
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

/// The value for `ranges` (sorted) written as chunks of `generation`.
pub(crate) fn process_ranges_of(ranges: &[ProcessRange], generation: u32) -> ProcessRangesValue {
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

/// `struct range_chunk`: up to [`RANGES_PER_CHUNK`] sorted ranges.
pub(crate) type RangeChunk = c::range_chunk;

/// A chunk holding `ranges` (at most [`RANGES_PER_CHUNK`]), the slots
/// after them padded.
pub(crate) fn range_chunk_of(ranges: &[ProcessRange]) -> RangeChunk {
    let unused = ProcessRange { start: RANGE_START_UNUSED, ..Default::default() };
    let mut chunk = RangeChunk { ranges: [unused; RANGES_PER_CHUNK as usize] };
    for (slot, range) in chunk.ranges.iter_mut().zip(ranges) {
        *slot = *range;
    }
    chunk
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

/// The map value for `rule`; the commands (stop, signal, invalid, no
/// coverage) have fixed ids and an all-zero value.
pub(crate) fn unwind_rule_of(rule: &UnwindRule) -> UnwindRuleValue {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

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
        let value = process_ranges_of(&ranges, 1);
        assert_eq!((value.count, value.generation), (ranges.len() as u32, 1));
        let first = RANGES_PER_CHUNK as usize;
        let unused = RANGE_START_UNUSED;
        assert_eq!(
            &value.chunk_start[..4],
            &[0x1000, 0x1000 * (first as u64 + 1), 0x1000 * (2 * first as u64 + 1), unused]
        );
        let chunk = range_chunk_of(&ranges[first..2 * first]);
        assert_eq!(read::<RangeChunk>(bytes_of(&chunk)).map(|c| c.ranges[0].start), Some(ranges[first].start));
        let last = range_chunk_of(&ranges[2 * first..]);
        assert_eq!((last.ranges[0].start, last.ranges[1].start), (ranges[2 * first].start, unused));
        let key = range_chunk_key(0x0102_0304, 1, 5);
        let chunk_at = offset_of!(c::range_chunk_key, chunk);
        assert_eq!(u32::from_ne_bytes(key[chunk_at..chunk_at + 4].try_into().unwrap()), 0x1_0005);
    }

    #[test]
    fn rules_encode() {
        let r =
            unwind_rule_of(&UnwindRule::CfaDeref { base: CfaBase::Rbp, inner: -8, outer: 16, rbp: RbpRule::AtRbp(0) });
        assert_eq!(
            (r.kind, r.cfa_base, r.rbp_kind, r.cfa_offset, r.deref_outer),
            (RULE_KIND_CFA_DEREF, CFA_BASE_RBP, RBP_AT_RBP, -8, 16)
        );
        assert_eq!(unwind_rule_of(&UnwindRule::Plt { threshold: 11 }).plt_threshold, 11);
        assert_eq!(unwind_rule_of(&UnwindRule::Stop), UnwindRuleValue::default());
        assert_eq!(unwind_rule_of(&UnwindRule::UnfollowedSwitch), UnwindRuleValue::default());
        let r = unwind_rule_of(&UnwindRule::StackSwitch { offset: 16, rbp: RbpRule::AtCfa(-16) });
        assert_eq!(
            (r.kind, r.cfa_base, r.cfa_offset, r.rbp_kind, r.rbp_offset),
            (RULE_KIND_STACK_SWITCH, CFA_BASE_RBP, 16, RBP_AT_CFA, -16)
        );
        assert_eq!(
            read::<c::delta_entry>(&delta_entry(0x1234, 7).to_ne_bytes()),
            Some(c::delta_entry { page_offset: 0x1234, rule_id: 7 })
        );
        assert_eq!(read::<UnwindRuleValue>(bytes_of(&r)), Some(r));
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
