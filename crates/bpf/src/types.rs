//! Rust mirrors of the structs in `ebpf/types.h` that cross a map or a
//! ring buffer, with their layouts pinned by compile-time asserts (the C
//! side pins the same sizes with `_Static_assert`).

use profiler_elf::{CfaBase, RbpRule, UnwindRule};
use std::mem::{offset_of, size_of};

/// `FRAME_EXACT_PC`: set in a user frame word whose address is an exact
/// pc (the sampled instruction, or one a signal interrupted), clear for
/// return addresses.
pub const FRAME_EXACT_PC: u64 = 1 << 63;

/// `FRAME_INTERPRETED`: set in a user frame word that is an interpreter's
/// frame rather than a pc (see [`UserFrame`]).
pub const FRAME_INTERPRETED: u64 = 1 << 62;
/// `PYTHON_FRAME_OFFSET_SHIFT`, `PYTHON_FRAME_OFFSET_MAX`.
const PYTHON_FRAME_OFFSET_SHIFT: u32 = 44;
const PYTHON_FRAME_OFFSET_MAX: u64 = (1 << 18) - 1;

/// One user frame word of a sample, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserFrame {
    /// A native pc.
    Native {
        /// The address.
        pc: u64,
        /// An exact pc (the sampled instruction, or one a signal
        /// interrupted), not a return address.
        exact: bool,
    },
    /// A CPython frame.
    Python {
        /// Address of the code object in the process, 0 when the unwinder
        /// could not encode it.
        code: u64,
        /// Byte offset of the frame's current instruction in the code
        /// object's bytecode.
        offset: u32,
    },
}

impl UserFrame {
    /// Decodes a frame word of [`crate::RawSample::user_frames`].
    pub fn decode(word: u64) -> UserFrame {
        if word & FRAME_EXACT_PC == 0 && word & FRAME_INTERPRETED != 0 {
            let code = (word & ((1 << PYTHON_FRAME_OFFSET_SHIFT) - 1)) << 3;
            let offset = ((word >> PYTHON_FRAME_OFFSET_SHIFT) & PYTHON_FRAME_OFFSET_MAX) as u32;
            return UserFrame::Python { code, offset };
        }
        UserFrame::Native { pc: word & !FRAME_EXACT_PC, exact: word & FRAME_EXACT_PC != 0 }
    }

    /// The word the unwinder writes for a CPython frame (for tests).
    pub fn python_word(code: u64, offset: u32) -> u64 {
        let code_bits = if code & 7 != 0 || code >> 47 != 0 { 0 } else { code >> 3 };
        FRAME_INTERPRETED | (u64::from(offset).min(PYTHON_FRAME_OFFSET_MAX) << PYTHON_FRAME_OFFSET_SHIFT) | code_bits
    }
}

/// `DELTA_PAGE_BITS`: deltas are indexed by pages of this many bits.
pub(crate) const DELTA_PAGE_BITS: u32 = 16;

/// `PID_MAPPING_KEY_BITS`: bits of an LPM key after `prefixlen`.
pub(crate) const PID_MAPPING_KEY_BITS: u32 = 32 + 64;

/// Why a user stack ends where it ends (`enum unwind_stop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum UnwindStop {
    /// The thread's root was reached: the stack is complete.
    Root,
    /// A kernel thread: no user stack.
    KernelThread,
    /// The process was not loaded yet.
    UnknownPid,
    /// The pc is in no mapping the process manager loaded.
    UnknownPc,
    /// Executable memory without unwind tables (JIT, anonymous).
    NoUnwindInfo,
    /// The file has no stack deltas for the pc's page.
    NoDeltas,
    /// No CFI covers the pc.
    NoCoverage,
    /// The CFI for the pc cannot be expressed in the unwinder's rules.
    InvalidRule,
    /// Reading the user stack failed.
    ReadError,
    /// The stack pointer did not grow.
    BadSp,
    /// `MAX_USER_FRAMES` frames were collected; the stack goes on.
    MaxFrames,
    /// A tail call failed.
    TailCalls,
    /// A map lookup that cannot fail did.
    Internal,
    /// A return address of 0 ended the stack without a STOP rule.
    ZeroPc,
    /// The user registers of a task in the kernel could not be read.
    NoUserRegs,
    /// A stack switch the unwinder cannot follow (Go's `mcall`,
    /// `morestack`, ...), or too many switches in one stack.
    StackSwitch,
    /// User space only: unwinding a stack copy ([`crate::StackCopy`])
    /// needed a word outside the copied window.
    OutsideCopy,
    /// A value this version does not know.
    Unknown(u8),
}

impl UnwindStop {
    /// Every known reason, in `enum unwind_stop` order.
    pub const ALL: [UnwindStop; 17] = [
        UnwindStop::Root,
        UnwindStop::KernelThread,
        UnwindStop::UnknownPid,
        UnwindStop::UnknownPc,
        UnwindStop::NoUnwindInfo,
        UnwindStop::NoDeltas,
        UnwindStop::NoCoverage,
        UnwindStop::InvalidRule,
        UnwindStop::ReadError,
        UnwindStop::BadSp,
        UnwindStop::MaxFrames,
        UnwindStop::TailCalls,
        UnwindStop::Internal,
        UnwindStop::ZeroPc,
        UnwindStop::NoUserRegs,
        UnwindStop::StackSwitch,
        UnwindStop::OutsideCopy,
    ];

    /// From the C value.
    pub fn from_raw(value: u8) -> UnwindStop {
        Self::ALL.get(usize::from(value)).copied().unwrap_or(UnwindStop::Unknown(value))
    }

    /// The C value.
    pub fn raw(self) -> u8 {
        match self {
            UnwindStop::Unknown(v) => v,
            known => Self::ALL.iter().position(|&r| r == known).unwrap_or(0) as u8,
        }
    }

    /// A short snake_case name (stats output).
    pub fn as_str(self) -> &'static str {
        match self {
            UnwindStop::Root => "root",
            UnwindStop::KernelThread => "kernel_thread",
            UnwindStop::UnknownPid => "unknown_pid",
            UnwindStop::UnknownPc => "unknown_pc",
            UnwindStop::NoUnwindInfo => "no_unwind_info",
            UnwindStop::NoDeltas => "no_deltas",
            UnwindStop::NoCoverage => "no_coverage",
            UnwindStop::InvalidRule => "invalid_rule",
            UnwindStop::ReadError => "read_error",
            UnwindStop::BadSp => "bad_sp",
            UnwindStop::MaxFrames => "max_frames",
            UnwindStop::TailCalls => "tail_calls",
            UnwindStop::Internal => "internal",
            UnwindStop::ZeroPc => "zero_pc",
            UnwindStop::NoUserRegs => "no_user_regs",
            UnwindStop::StackSwitch => "stack_switch",
            UnwindStop::OutsideCopy => "outside_copy",
            UnwindStop::Unknown(_) => "unknown",
        }
    }

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

const PROCESS_EVENT_SIZE: usize = 24;

impl ProcessEvent {
    /// Decodes a ring buffer record; `None` if malformed.
    pub fn parse(data: &[u8]) -> Option<ProcessEvent> {
        let d = data.get(..PROCESS_EVENT_SIZE)?;
        let u32_at = |o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap());
        let kind = match u32_at(0) {
            1 => ProcessEventKind::New,
            2 => ProcessEventKind::UnknownPc,
            3 => ProcessEventKind::Exit,
            4 => ProcessEventKind::Exec,
            _ => return None,
        };
        Some(ProcessEvent { kind, pid: u32_at(4), ktime_ns: u64_at(8), pc: u64_at(16) })
    }
}

/// `struct pid_mapping_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PidMappingKey {
    pub prefixlen: u32,
    pub pid_be: u32,
    pub address_be: u64,
}
const _: () = assert!(size_of::<PidMappingKey>() == 16);

impl PidMappingKey {
    pub(crate) fn new(pid: u32, address: u64, prefixlen: u32) -> PidMappingKey {
        PidMappingKey { prefixlen, pid_be: pid.to_be(), address_be: address.to_be() }
    }

    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.prefixlen.to_ne_bytes());
        b[4..8].copy_from_slice(&self.pid_be.to_ne_bytes());
        b[8..].copy_from_slice(&self.address_be.to_ne_bytes());
        b
    }
}

/// `enum mapping_kind`.
pub(crate) const MAPPING_KIND_PROCESS: u32 = 0;
pub(crate) const MAPPING_KIND_NATIVE: u32 = 1;
pub(crate) const MAPPING_KIND_NO_UNWIND_INFO: u32 = 2;

/// `MAPPING_FLAG_INTERPRETER_LOOP`.
pub(crate) const MAPPING_FLAG_INTERPRETER_LOOP: u32 = 1;
/// `MAPPING_UNWINDER_SHIFT`: where the flags name the loop's unwinder.
pub(crate) const MAPPING_UNWINDER_SHIFT: u32 = 8;

/// The interpreter unwinder programs, by their slot in the program array
/// (`enum unwinder_program`, `ebpf/interpreters.bpf.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum InterpreterUnwinder {
    /// `UNWINDER_PYTHON`: `python_unwind`.
    Python = 1,
}

/// `struct pid_mapping`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PidMappingValue {
    pub file_id: u64,
    pub bias: u64,
    pub kind: u32,
    pub flags: u32,
}
const _: () = assert!(size_of::<PidMappingValue>() == 24);
const _: () = assert!(offset_of!(PidMappingValue, kind) == 16);

impl PidMappingValue {
    /// From the map's bytes.
    pub(crate) fn from_bytes(b: &[u8; 24]) -> PidMappingValue {
        PidMappingValue {
            file_id: u64::from_ne_bytes(b[..8].try_into().unwrap()),
            bias: u64::from_ne_bytes(b[8..16].try_into().unwrap()),
            kind: u32::from_ne_bytes(b[16..20].try_into().unwrap()),
            flags: u32::from_ne_bytes(b[20..24].try_into().unwrap()),
        }
    }

    pub(crate) fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.file_id.to_ne_bytes());
        b[8..16].copy_from_slice(&self.bias.to_ne_bytes());
        b[16..20].copy_from_slice(&self.kind.to_ne_bytes());
        b[20..24].copy_from_slice(&self.flags.to_ne_bytes());
        b
    }
}

/// `struct delta_page_key`, as bytes.
pub(crate) fn delta_page_key(file_id: u64, page: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&file_id.to_ne_bytes());
    b[8..].copy_from_slice(&page.to_ne_bytes());
    b
}

/// `struct delta_page`, as bytes.
pub(crate) fn delta_page(first: u32, count: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&count.to_ne_bytes());
    b
}

/// `struct delta_entry` as the u32 the arrays hold (little-endian
/// `{u16 page_offset; u16 rule_id}`).
pub(crate) fn delta_entry(page_offset: u16, rule_id: u16) -> u32 {
    u32::from(page_offset) | (u32::from(rule_id) << 16)
}

// enum rule_kind, cfa_base, rbp_kind.
pub(crate) const RULE_KIND_CFA: u8 = 1;
pub(crate) const RULE_KIND_CFA_DEREF: u8 = 2;
pub(crate) const RULE_KIND_PLT: u8 = 3;
pub(crate) const RULE_KIND_STACK_SWITCH: u8 = 4;
pub(crate) const CFA_BASE_RSP: u8 = 0;
pub(crate) const CFA_BASE_RBP: u8 = 1;
pub(crate) const RBP_UNCHANGED: u8 = 0;
pub(crate) const RBP_AT_CFA: u8 = 1;
pub(crate) const RBP_AT_RBP: u8 = 2;

/// Rule ids with a fixed meaning (`RULE_ID_*`).
pub(crate) const RULE_ID_NO_COVERAGE: u16 = 0;
pub(crate) const RULE_ID_INVALID: u16 = 1;
pub(crate) const RULE_ID_STOP: u16 = 2;
pub(crate) const RULE_ID_SIGNAL: u16 = 3;
pub(crate) const RULE_ID_UNFOLLOWED_SWITCH: u16 = 4;

/// `UCONTEXT_RBP`, `UCONTEXT_RSP`, `UCONTEXT_RIP`: where a signal frame
/// keeps the interrupted registers, from the trampoline's rsp.
pub(crate) const UCONTEXT_RBP: u64 = 120;
pub(crate) const UCONTEXT_RSP: u64 = 160;
pub(crate) const UCONTEXT_RIP: u64 = 168;

/// `struct unwind_rule`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnwindRuleValue {
    pub kind: u8,
    pub cfa_base: u8,
    pub rbp_kind: u8,
    pub plt_threshold: u8,
    pub cfa_offset: i32,
    pub deref_outer: i32,
    pub rbp_offset: i32,
}
const _: () = assert!(size_of::<UnwindRuleValue>() == 16);
const _: () = assert!(offset_of!(UnwindRuleValue, cfa_offset) == 4);
const _: () = assert!(offset_of!(UnwindRuleValue, rbp_offset) == 12);

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
    pub(crate) fn from_bytes(b: &[u8; 16]) -> UnwindRuleValue {
        let i32_at = |o: usize| i32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        UnwindRuleValue {
            kind: b[0],
            cfa_base: b[1],
            rbp_kind: b[2],
            plt_threshold: b[3],
            cfa_offset: i32_at(4),
            deref_outer: i32_at(8),
            rbp_offset: i32_at(12),
        }
    }

    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = self.kind;
        b[1] = self.cfa_base;
        b[2] = self.rbp_kind;
        b[3] = self.plt_threshold;
        b[4..8].copy_from_slice(&self.cfa_offset.to_ne_bytes());
        b[8..12].copy_from_slice(&self.deref_outer.to_ne_bytes());
        b[12..16].copy_from_slice(&self.rbp_offset.to_ne_bytes());
        b
    }
}

/// `enum python_frame_model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonFrameModel {
    /// 3.8-3.10: `PyFrameObject`, one per evaluation loop run.
    Objects = 0,
    /// 3.11: `_PyInterpreterFrame`, a loop run ends at `is_entry`.
    EntryFlag = 1,
    /// 3.12+: `_PyInterpreterFrame`, a loop run ends at its C-stack shim.
    CStackOwner = 2,
}

/// `enum python_lasti`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PythonLasti {
    /// `int f_lasti`, a byte offset (3.8, 3.9).
    Bytes = 0,
    /// `int f_lasti`, in 2-byte code units (3.10).
    Units = 1,
    /// A pointer into `co_code_adaptive` (3.11+).
    Pointer = 2,
}

/// `PYTHON_NO_OFFSET`: an offset that does not apply to a version.
pub const PYTHON_NO_OFFSET: u32 = u32::MAX;
/// `PYTHON_FRAME_READ_MAX`.
pub const PYTHON_FRAME_READ_MAX: u32 = 128;

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
}

/// `sizeof(struct python_file)`.
pub(crate) const PYTHON_FILE_SIZE: usize = 72;

impl PythonFileValue {
    pub(crate) fn to_bytes(self) -> [u8; PYTHON_FILE_SIZE] {
        let mut b = [0u8; PYTHON_FILE_SIZE];
        b[..8].copy_from_slice(&self.runtime_vaddr.to_ne_bytes());
        b[8..10].copy_from_slice(&self.version.to_ne_bytes());
        b[10] = self.frame_model as u8;
        b[11] = self.lasti_kind as u8;
        let words = [
            self.frame_read_size,
            self.runtime_interpreters_head,
            self.interp_next,
            self.interp_threads_head,
            self.tstate_next,
            self.tstate_thread_id,
            self.tstate_frame,
            self.cframe_current_frame,
            self.frame_previous,
            self.frame_code,
            self.frame_lasti,
            self.frame_entry,
            self.code_adaptive,
        ];
        for (i, w) in words.iter().enumerate() {
            b[12 + 4 * i..16 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_frame_words_round_trip() {
        let w = UserFrame::python_word(0x7f12_3456_7898, 1234);
        assert_eq!(w & FRAME_EXACT_PC, 0);
        assert_eq!(UserFrame::decode(w), UserFrame::Python { code: 0x7f12_3456_7898, offset: 1234 });
        // Not encodable: misaligned, or above 2^47; offsets clamp.
        assert_eq!(UserFrame::decode(UserFrame::python_word(0x1001, 7)), UserFrame::Python { code: 0, offset: 7 });
        assert_eq!(
            UserFrame::decode(UserFrame::python_word(1 << 48, 1 << 20)),
            UserFrame::Python { code: 0, offset: (1 << 18) - 1 }
        );
        assert_eq!(UserFrame::decode(0x4010 | FRAME_EXACT_PC), UserFrame::Native { pc: 0x4010, exact: true });
        assert_eq!(UserFrame::decode(0x7fff_1234), UserFrame::Native { pc: 0x7fff_1234, exact: false });
    }

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
        };
        let b = v.to_bytes();
        assert_eq!(&b[8..12], &[0x0b, 0x03, 1, 2]);
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), 72);
        // code_adaptive is the last offset, at 60; 8 reserved bytes follow.
        assert_eq!(u32::from_ne_bytes(b[60..64].try_into().unwrap()), 184);
        assert_eq!(&b[64..], &[0; 8]);
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
    fn lpm_keys_are_big_endian() {
        let k = PidMappingKey::new(0x0102_0304, 0x1122_3344_5566_7788, 64).to_bytes();
        assert_eq!(&k[4..8], &[1, 2, 3, 4]);
        assert_eq!(&k[8..], &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
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
        assert_eq!(delta_entry(0x1234, 7).to_le_bytes(), [0x34, 0x12, 7, 0]);
        assert_eq!(UnwindRuleValue::from_bytes(&r.to_bytes()), r);
        let m = PidMappingValue { file_id: 7, bias: 0x1000, kind: MAPPING_KIND_NATIVE, flags: 1 };
        assert_eq!(PidMappingValue::from_bytes(&m.to_bytes()), m);
    }

    #[test]
    fn process_events_parse() {
        let mut d = Vec::new();
        d.extend_from_slice(&2u32.to_ne_bytes());
        d.extend_from_slice(&77u32.to_ne_bytes());
        d.extend_from_slice(&5u64.to_ne_bytes());
        d.extend_from_slice(&0x4010u64.to_ne_bytes());
        assert_eq!(
            ProcessEvent::parse(&d),
            Some(ProcessEvent { kind: ProcessEventKind::UnknownPc, pid: 77, ktime_ns: 5, pc: 0x4010 })
        );
        assert_eq!(ProcessEvent::parse(&d[..20]), None);
        d[0] = 9;
        assert_eq!(ProcessEvent::parse(&d), None);
    }
}
