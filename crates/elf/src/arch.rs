//! The x86-64 facts the crate relies on, in one place: the ELF machine it
//! accepts, the DWARF register numbers the CFI reduction reads, and the
//! instruction bytes it recognizes (signal return trampolines, Go's
//! framed prologue). An arm64 build would put its own values here, and
//! the rule reduction would also need a link-register rule (see
//! docs/kernels.md, "arm64").

/// `e_machine` of x86-64 (gABI, "Machine" values).
pub(crate) const EM_X86_64: u16 = 62;

/// x86-64 DWARF register numbers (psABI, "DWARF Register Number
/// Mapping"): the frame pointer, the stack pointer and the return
/// address column.
pub(crate) const DWARF_RBP: u16 = 6;
pub(crate) const DWARF_RSP: u16 = 7;
pub(crate) const DWARF_RA: u16 = 16;

/// Where `call` leaves the return address: at CFA - 8, the caller's
/// stack pointer being the CFA.
pub(crate) const RETURN_ADDRESS_AT_CFA: i64 = -8;

/// The bodies of a signal return trampoline: `mov $15,%rax; syscall` and
/// `mov $15,%eax; syscall` (15 = `__NR_rt_sigreturn` on x86-64). glibc's
/// `__restore_rt` is the first.
pub(crate) const RT_SIGRETURN: [&[u8]; 2] =
    [&[0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05], &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05]];

/// `push %rbp`.
pub(crate) const PUSH_RBP: u8 = 0x55;
/// `push %rbp; mov %rsp,%rbp`.
pub(crate) const PUSH_RBP_MOV: [u8; 4] = [PUSH_RBP, 0x48, 0x89, 0xe5];
/// `pop %rbp; ret`: the epilogue of a framed function.
pub(crate) const POP_RBP_RET: [u8; 2] = [0x5d, 0xc3];
/// `nop` and `int3`: the bytes that pad functions.
pub(crate) const NOP: u8 = 0x90;
pub(crate) const INT3: u8 = 0xcc;
