//! The x86-64 facts user space shares with the BPF native unwinder
//! (`ebpf/arch.h`), in one place: where a frame's return address is, the
//! PLT rule's formula and the signal frame's register slots. An arm64
//! agent would need its own (docs/kernels.md, "arm64").

/// The x86-64 signal frame: rbp, rsp and rip in the `ucontext` at the
/// trampoline's rsp (`ebpf/types.h`).
pub(crate) use crate::contract::c::{UCONTEXT_RBP, UCONTEXT_RIP, UCONTEXT_RSP};

/// The return address is at CFA - 8 (pushed by `call`).
pub(crate) const RETURN_ADDRESS_BELOW_CFA: u64 = 8;

/// The CFA of a PLT entry (GNU ld's `.plt` CFI): `rsp + 8`, plus 8 once
/// the entry's `pushq` ran (`pc & 15` at or past `threshold`).
pub(crate) fn plt_cfa(sp: u64, pc: u64, threshold: u8) -> u64 {
    sp.wrapping_add(8 + if (pc & 15) >= u64::from(threshold) { 8 } else { 0 })
}
