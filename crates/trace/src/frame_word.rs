//! The one decoding of the frame words a sample carries (the layout is
//! `ebpf/types.h`'s: `FRAME_EXACT_PC`, `FRAME_INTERPRETED`,
//! `PYTHON_FRAME_OFFSET_SHIFT`, `PYTHON_FRAME_OFFSET_MAX`): which user
//! words are native pcs and which interpreter frames, which pcs are exact
//! and which return addresses, and the address each code frame is looked
//! up (and reported) at. Every consumer (trace building, late unwinding,
//! tests) decodes through here.

/// Set in a user frame word whose address is an exact pc (the sampled
/// instruction, or one a signal interrupted), clear for return addresses.
pub const FRAME_EXACT_PC: u64 = 1 << 63;

/// Set (with [`FRAME_EXACT_PC`] clear) in a user frame word that is an
/// interpreter's frame rather than a pc.
pub const FRAME_INTERPRETED: u64 = 1 << 62;

/// Where a CPython frame word keeps the instruction offset.
pub const PYTHON_FRAME_OFFSET_SHIFT: u32 = 44;
/// Largest instruction offset a CPython frame word holds (larger clamp).
pub const PYTHON_FRAME_OFFSET_MAX: u64 = (1 << 16) - 1;

/// Set (with [`FRAME_INTERPRETED`], [`FRAME_HOTSPOT`] clear) in the frame
/// word of a runtime named by its unwinder slot in the bits
/// [`FRAME_RUNTIME_SHIFT`].. (masked by [`FRAME_RUNTIME_MASK`]); the bits
/// below are the runtime's own.
pub const FRAME_RUNTIME: u64 = 1 << 60;
/// Where a [`FRAME_RUNTIME`] word names its runtime.
pub const FRAME_RUNTIME_SHIFT: u32 = 57;
/// The runtime's slot, after the shift.
pub const FRAME_RUNTIME_MASK: u64 = 7;
/// A CRuby word's own bits: `pos << RUBY_FRAME_POS_SHIFT | pointer >> 3`.
pub const RUBY_FRAME_POS_SHIFT: u32 = 44;
/// The largest `pos` of a CRuby word; it means "unknown".
pub const RUBY_FRAME_POS_MAX: u64 = 0x1fff;

/// Set (with [`FRAME_INTERPRETED`]) in a HotSpot frame word.
pub const FRAME_HOTSPOT: u64 = 1 << 61;
/// Set in a HotSpot frame word of compiled code (a code blob and a pc
/// offset), clear for an interpreted frame (a `Method*` and a bci).
pub const FRAME_HOTSPOT_COMPILED: u64 = 1 << 60;
/// Where a HotSpot frame word keeps the bci or pc offset.
pub const HOTSPOT_FRAME_OFFSET_SHIFT: u32 = 44;
/// Largest bci or pc offset a HotSpot frame word holds (larger clamp).
pub const HOTSPOT_FRAME_OFFSET_MAX: u64 = 0xffff;
/// The bci of an interpreted frame that has none (a native method).
pub const HOTSPOT_NO_BCI: u64 = 0xffff;

/// A code address in a stack: the sampled instruction (or one a signal
/// interrupted), or a return address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CodeAddress {
    /// The address as unwound.
    pub pc: u64,
    /// An exact pc, not a return address.
    pub exact: bool,
}

impl CodeAddress {
    /// The address the frame stands for: an exact pc as it is; a return
    /// address one byte back, inside its call instruction (a call may be
    /// the last instruction of a function: noreturn callees).
    pub fn lookup(self) -> u64 {
        if self.exact {
            self.pc
        } else {
            self.pc.saturating_sub(1)
        }
    }

    /// Frame `index` (0: the leaf) of a kernel stack: the leaf is the
    /// interrupted instruction, every other frame a return address.
    pub fn kernel(index: usize, pc: u64) -> CodeAddress {
        CodeAddress { pc, exact: index == 0 }
    }
}

/// One user frame word of a sample, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserFrame {
    /// A native pc.
    Native(CodeAddress),
    /// A CPython frame.
    Python {
        /// Address of the code object in the process, 0 when the unwinder
        /// could not encode it.
        code: u64,
        /// Byte offset of the frame's current instruction in the code
        /// object's bytecode.
        offset: u32,
    },
    /// A HotSpot (JVM) frame.
    Hotspot {
        /// Compiled code (or a stub): `pointer` is its code blob and
        /// `offset` the pc's offset from it. Else an interpreted frame:
        /// `pointer` is its `Method*`, `offset` the bytecode index
        /// ([`HOTSPOT_NO_BCI`]: none).
        compiled: bool,
        /// 0 when the unwinder could not encode it.
        pointer: u64,
        /// Clamped to [`HOTSPOT_FRAME_OFFSET_MAX`].
        offset: u32,
    },
    /// A frame of a runtime after CPython and HotSpot ([`FRAME_RUNTIME`]):
    /// its unwinder slot and its own bits, which the runtime decodes.
    Runtime {
        /// The unwinder slot (`enum unwinder_program`).
        slot: u8,
        /// The bits below [`FRAME_RUNTIME_SHIFT`].
        bits: u64,
    },
}

impl UserFrame {
    /// Whether a user frame word is an interpreter's frame (of any
    /// runtime) rather than a pc.
    pub fn is_interpreted(word: u64) -> bool {
        word & FRAME_EXACT_PC == 0 && word & FRAME_INTERPRETED != 0
    }

    /// Decodes a user frame word.
    pub fn decode(word: u64) -> UserFrame {
        if !UserFrame::is_interpreted(word) {
            return UserFrame::Native(CodeAddress { pc: word & !FRAME_EXACT_PC, exact: word & FRAME_EXACT_PC != 0 });
        }
        if word & FRAME_HOTSPOT != 0 {
            return UserFrame::Hotspot {
                compiled: word & FRAME_HOTSPOT_COMPILED != 0,
                pointer: (word & ((1 << HOTSPOT_FRAME_OFFSET_SHIFT) - 1)) << 3,
                offset: ((word >> HOTSPOT_FRAME_OFFSET_SHIFT) & HOTSPOT_FRAME_OFFSET_MAX) as u32,
            };
        }
        if word & FRAME_RUNTIME != 0 {
            return UserFrame::Runtime {
                slot: ((word >> FRAME_RUNTIME_SHIFT) & FRAME_RUNTIME_MASK) as u8,
                bits: word & ((1 << FRAME_RUNTIME_SHIFT) - 1),
            };
        }
        let code = (word & ((1 << PYTHON_FRAME_OFFSET_SHIFT) - 1)) << 3;
        let offset = ((word >> PYTHON_FRAME_OFFSET_SHIFT) & PYTHON_FRAME_OFFSET_MAX) as u32;
        UserFrame::Python { code, offset }
    }

    /// The word the native unwinder writes for `pc`.
    pub fn native_word(pc: u64, exact: bool) -> u64 {
        if exact {
            pc | FRAME_EXACT_PC
        } else {
            pc
        }
    }

    /// The word the CPython unwinder writes (code objects are 8-byte
    /// aligned below 2^47, else encoded as 0; offsets clamp).
    pub fn python_word(code: u64, offset: u32) -> u64 {
        let code_bits = if code & 7 != 0 || code >> 47 != 0 { 0 } else { code >> 3 };
        FRAME_INTERPRETED | (u64::from(offset).min(PYTHON_FRAME_OFFSET_MAX) << PYTHON_FRAME_OFFSET_SHIFT) | code_bits
    }

    /// The word a [`UserFrame::Runtime`] unwinder writes (`bits` are cut
    /// to the bits below [`FRAME_RUNTIME_SHIFT`]).
    pub fn runtime_word(slot: u8, bits: u64) -> u64 {
        FRAME_INTERPRETED
            | FRAME_RUNTIME
            | ((u64::from(slot) & FRAME_RUNTIME_MASK) << FRAME_RUNTIME_SHIFT)
            | (bits & ((1 << FRAME_RUNTIME_SHIFT) - 1))
    }

    /// The word the HotSpot unwinder writes (pointers are 8-byte aligned
    /// below 2^47, else encoded as 0; offsets clamp).
    pub fn hotspot_word(compiled: bool, pointer: u64, offset: u64) -> u64 {
        let bits = if pointer & 7 != 0 || pointer >> 47 != 0 { 0 } else { pointer >> 3 };
        FRAME_INTERPRETED
            | FRAME_HOTSPOT
            | if compiled { FRAME_HOTSPOT_COMPILED } else { 0 }
            | (offset.min(HOTSPOT_FRAME_OFFSET_MAX) << HOTSPOT_FRAME_OFFSET_SHIFT)
            | bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_words_and_their_lookup_address() {
        let exact = UserFrame::decode(0x4010 | FRAME_EXACT_PC);
        assert_eq!(exact, UserFrame::Native(CodeAddress { pc: 0x4010, exact: true }));
        let ret = UserFrame::decode(0x7fff_1234);
        assert_eq!(ret, UserFrame::Native(CodeAddress { pc: 0x7fff_1234, exact: false }));
        let (UserFrame::Native(exact), UserFrame::Native(ret)) = (exact, ret) else { unreachable!() };
        assert_eq!(exact.lookup(), 0x4010);
        assert_eq!(ret.lookup(), 0x7fff_1233);
        // A zero return address does not wrap.
        assert_eq!(CodeAddress { pc: 0, exact: false }.lookup(), 0);
        for (pc, exact) in [(0x4010, true), (0x4010, false), (0x7fff_ffff_f000, true)] {
            assert_eq!(
                UserFrame::decode(UserFrame::native_word(pc, exact)),
                UserFrame::Native(CodeAddress { pc, exact })
            );
        }
    }

    #[test]
    fn exact_bit_wins_over_interpreted_bit() {
        // Bit 62 set with bit 63: a native exact pc, never a Python frame.
        let word = FRAME_EXACT_PC | FRAME_INTERPRETED | 0x1000;
        assert_eq!(
            UserFrame::decode(word),
            UserFrame::Native(CodeAddress { pc: FRAME_INTERPRETED | 0x1000, exact: true })
        );
    }

    #[test]
    fn python_words_round_trip() {
        let w = UserFrame::python_word(0x7f12_3456_7898, 1234);
        assert_eq!(w & FRAME_EXACT_PC, 0);
        assert_eq!(UserFrame::decode(w), UserFrame::Python { code: 0x7f12_3456_7898, offset: 1234 });
        // Not encodable: misaligned, or above 2^47; offsets clamp.
        assert_eq!(UserFrame::decode(UserFrame::python_word(0x1001, 7)), UserFrame::Python { code: 0, offset: 7 });
        assert_eq!(
            UserFrame::decode(UserFrame::python_word(1 << 48, 1 << 20)),
            UserFrame::Python { code: 0, offset: (1 << 16) - 1 }
        );
    }

    #[test]
    fn runtime_words_round_trip_and_are_not_python_or_hotspot_words() {
        let bits = (0x1fff << RUBY_FRAME_POS_SHIFT) | (0x7fff_ffff_fff8 >> 3);
        let w = UserFrame::runtime_word(4, bits);
        assert_eq!(w & FRAME_EXACT_PC, 0);
        assert_eq!(UserFrame::decode(w), UserFrame::Runtime { slot: 4, bits });
        assert_eq!(UserFrame::decode(UserFrame::runtime_word(6, 1)), UserFrame::Runtime { slot: 6, bits: 1 });
        // Bits above the runtime's own are cut, never taken as its tag.
        assert_eq!(
            UserFrame::decode(UserFrame::runtime_word(3, u64::MAX)),
            UserFrame::Runtime { slot: 3, bits: (1 << FRAME_RUNTIME_SHIFT) - 1 }
        );
        // The largest CPython and HotSpot words keep their kind.
        let py = UserFrame::python_word(0x7fff_ffff_fff8, u32::MAX);
        assert!(matches!(UserFrame::decode(py), UserFrame::Python { .. }));
        let hs = UserFrame::hotspot_word(true, 0x7fff_ffff_fff8, u64::MAX);
        assert!(matches!(UserFrame::decode(hs), UserFrame::Hotspot { .. }));
    }

    #[test]
    fn kernel_leaf_is_exact_callers_are_return_addresses() {
        assert_eq!(CodeAddress::kernel(0, 0xffff_ffff_8100_0010).lookup(), 0xffff_ffff_8100_0010);
        assert_eq!(CodeAddress::kernel(1, 0xffff_ffff_8100_0010).lookup(), 0xffff_ffff_8100_000f);
    }

    #[test]
    fn hotspot_words_round_trip_and_are_not_python_words() {
        let w = UserFrame::hotspot_word(false, 0x7f12_3456_7898, 17);
        assert_eq!(UserFrame::decode(w), UserFrame::Hotspot { compiled: false, pointer: 0x7f12_3456_7898, offset: 17 });
        let w = UserFrame::hotspot_word(true, 0x7f00_0000_1000, 1 << 20);
        assert_eq!(
            UserFrame::decode(w),
            UserFrame::Hotspot { compiled: true, pointer: 0x7f00_0000_1000, offset: 0xffff }
        );
        assert_eq!(w & FRAME_EXACT_PC, 0);
        // The largest CPython word stays a CPython frame.
        let py = UserFrame::python_word(0x7fff_ffff_fff8, u32::MAX);
        assert!(matches!(UserFrame::decode(py), UserFrame::Python { .. }));
    }
}
