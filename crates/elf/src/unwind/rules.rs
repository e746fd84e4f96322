//! The reduced x86-64 unwind rules and the per-file table of them.

/// The register a CFA is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CfaBase {
    /// The stack pointer (DWARF register 7).
    Rsp,
    /// The frame pointer (DWARF register 6).
    Rbp,
}

/// Where the caller's `rbp` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RbpRule {
    /// `rbp` still holds the caller's value (DWARF "same value",
    /// "undefined", or never saved).
    Unchanged,
    /// The caller's `rbp` is saved at `CFA + offset` (DWARF `offset(N)`).
    AtCfa(i32),
    /// The caller's `rbp` is saved at `rbp + offset`, `rbp` being this
    /// frame's value (DWARF `expression(DW_OP_breg6 N)`). GCC emits this
    /// with stack realignment (DRAP), together with the
    /// [`UnwindRule::CfaDeref`] CFA; without it those rows would be
    /// useless.
    AtRbp(i32),
}

/// How to find the caller's frame at one code address, reduced from the
/// DWARF CFI row for that address.
///
/// In every `Cfa*` form the return address is at `CFA - 8` and the
/// caller's `rsp` is the CFA (the x86-64 psABI call convention); rows
/// whose return address rule is anything else are [`UnwindRule::Invalid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnwindRule {
    /// `CFA = base + offset`.
    Cfa {
        /// Register the CFA is relative to.
        base: CfaBase,
        /// Added to the register.
        offset: i32,
        /// Where the caller's `rbp` is.
        rbp: RbpRule,
    },
    /// `CFA = *(base + inner) + outer`: the `DW_CFA_def_cfa_expression`
    /// GCC emits for stack realignment,
    /// `DW_OP_breg6/7 inner; DW_OP_deref; [DW_OP_plus_uconst outer]`.
    CfaDeref {
        /// Register the pointer to the CFA is relative to.
        base: CfaBase,
        /// Offset of the stored pointer from the register.
        inner: i32,
        /// Added to the loaded pointer.
        outer: i32,
        /// Where the caller's `rbp` is.
        rbp: RbpRule,
    },
    /// A PLT stub (the expression GNU ld emits for `.plt`):
    /// `CFA = rsp + 8 + ((rip & 15) >= threshold ? 8 : 0)`. The first 11
    /// (or 10) bytes of each 16-byte stub run before its `push`.
    Plt {
        /// Offset within the 16-byte stub from which the pushed word is
        /// on the stack: 11 for classic PLTs, 10 for some variants.
        threshold: u8,
    },
    /// A signal trampoline (`__restore_rt`): the caller's registers are in
    /// the `ucontext` of the `rt_sigframe` at `rsp`. Chosen when the CIE has
    /// the `S` augmentation or the code is exactly `mov $15,%rax; syscall`.
    Signal,
    /// The outermost frame: the return address is undefined
    /// (`DW_CFA_undefined rip` in `_start`, `clone`, `clone3`, ...).
    Stop,
    /// A function that moved `rsp` to another stack and keeps its own
    /// frame pointer in `rbp` (Go's `runtime.systemstack`,
    /// `runtime.asmcgocall`, `runtime.cgocallback`, the vDSO callers):
    /// `CFA = rbp + offset`, the return address at `CFA - 8`, the caller's
    /// `rbp` per `rbp`. The caller's frame is on the stack `rbp` points
    /// into, which need not lie above `rsp`: the unwinder does not require
    /// the stack to grow here (it bounds the number of such switches).
    StackSwitch {
        /// Added to `rbp`.
        offset: i32,
        /// Where the caller's `rbp` is.
        rbp: RbpRule,
    },
    /// A stack switch the unwinder cannot follow: nothing on this stack
    /// or in the registers leads to the caller (Go's `runtime.mcall`
    /// after its switch to the system stack,
    /// `gogo`, any Go function flagged as writing `rsp` that is not known
    /// to keep a frame pointer). The frames so far are right; the stack
    /// ends with its own counted reason, not as a root.
    UnfollowedSwitch,
    /// Go's `runtime.morestack`: on the goroutine's stack a frameless
    /// function (`CFA = rsp + 8`); after its switch to the system stack
    /// the caller is the function that grows its stack, whose pc, sp and
    /// bp morestack saved in the goroutine's `g.sched` (found through the
    /// thread's current g, `g.m.curg`). The unwinder tells the two apart
    /// by the current g (the goroutine, then `g0`). When the goroutine
    /// cannot be followed, the system stack goes on as for
    /// [`UnwindRule::GoMcall`].
    GoMorestack,
    /// Go's `runtime.mcall` after its first instruction: on the
    /// goroutine's stack a frameless function; after its switch to the
    /// system stack (`g0`), no goroutine is followed (its callee drops
    /// or replaces `m.curg`): the caller is `runtime.mstart0`, the start
    /// of the thread's system stack, found in `m.g0.sched`.
    GoMcall,
    /// CFI exists here but cannot be expressed in this rule set; the reason
    /// is counted in [`crate::UnwindStats`]. Never guessed around.
    Invalid,
    /// No FDE covers this address (a gap between functions, or the end of
    /// the table): distinct from `Invalid` so the unwinder can tell "no CFI
    /// here" from "CFI we cannot express".
    NoCoverage,
}

/// Why a CFI row became [`UnwindRule::Invalid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The CFA is register + offset with a register other than rsp/rbp.
    CfaRegister,
    /// The CFA is a DWARF expression not of a known form.
    CfaExpression,
    /// The return address is not saved at `CFA - 8`.
    ReturnAddress,
    /// The rbp rule is not "unchanged", `CFA + N` or `rbp + N`.
    RbpRule,
    /// An offset does not fit in 32 bits.
    OffsetRange,
    /// The FDE's instructions could not be evaluated from here on (the
    /// error is in [`crate::UnwindStats::errors`]).
    Malformed,
}

impl InvalidReason {
    /// Every reason, in index order.
    pub const ALL: [InvalidReason; 6] = [
        InvalidReason::CfaRegister,
        InvalidReason::CfaExpression,
        InvalidReason::ReturnAddress,
        InvalidReason::RbpRule,
        InvalidReason::OffsetRange,
        InvalidReason::Malformed,
    ];

    /// A short snake_case name for stats output.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::CfaRegister => "cfa_register",
            InvalidReason::CfaExpression => "cfa_expression",
            InvalidReason::ReturnAddress => "return_address",
            InvalidReason::RbpRule => "rbp_rule",
            InvalidReason::OffsetRange => "offset_range",
            InvalidReason::Malformed => "malformed",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One entry of an [`crate::UnwindTable`]: `rule` applies from `address` up to
/// the next entry's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackDelta {
    /// ELF virtual address where the rule starts.
    pub address: u64,
    /// The rule.
    pub rule: UnwindRule,
}
