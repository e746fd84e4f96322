//! The one format of the frame words a sample carries (`ebpf/types.h`:
//! `FRAME_EXACT_PC`, `FRAME_INTERPRETED` and the slot coding below it):
//! which user words are native pcs (exact or return addresses) and which
//! interpreters' frames, each named by its runtime's unwinder slot with a
//! payload whose layout is that runtime's own (decoded in its folder of
//! `profiler_interpreters`). Every consumer (trace building, late
//! unwinding, tests) decodes through here; [`UserFrame::interpreted_word`]
//! is the one encoder of interpreted words.
//!
//! An interpreted word's slot is prefix-coded, so that the widest payloads
//! keep the most bits:
//!
//! | bits | slot | payload |
//! |---|---|---|
//! | 61 set | 2 ([`FRAME_WIDE_SLOT`]) | bits 0-60 |
//! | 61, 60 clear | 1 ([`FRAME_PLAIN_SLOT`]) | bits 0-59 |
//! | 60 set, 57-59 = s, s >= 3 | s (3..=7) | bits 0-56 |
//! | 60 set, 57-59 = 0 | bits 49-56 (8..=255) | bits 0-48 |
//!
//! Any other interpreted word (bits 57-59 of 1 or 2, an extended slot
//! below 8) is [`UserFrame::Malformed`].

/// Set in a user frame word whose address is an exact pc (the sampled
/// instruction, or one a signal interrupted), clear for return addresses.
pub const FRAME_EXACT_PC: u64 = 1 << 63;

/// Set (with [`FRAME_EXACT_PC`] clear) in a user frame word that is an
/// interpreter's frame rather than a pc.
pub const FRAME_INTERPRETED: u64 = 1 << 62;

/// Set in an interpreted word of slot [`FRAME_WIDE_SLOT`].
pub const FRAME_WIDE: u64 = 1 << 61;
/// The slot whose words carry the widest payload.
pub const FRAME_WIDE_SLOT: u8 = 2;
/// Payload bits of a [`FRAME_WIDE_SLOT`] word.
pub const FRAME_WIDE_PAYLOAD_BITS: u32 = 61;
/// The slot whose words have bits 60 and 61 clear.
pub const FRAME_PLAIN_SLOT: u8 = 1;
/// Payload bits of a [`FRAME_PLAIN_SLOT`] word.
pub const FRAME_PLAIN_PAYLOAD_BITS: u32 = 60;
/// Set in an interpreted word of any other slot, compact or extended.
pub const FRAME_COMPACT: u64 = 1 << 60;
/// Where a compact word keeps its slot.
pub const FRAME_COMPACT_SLOT_SHIFT: u32 = 57;
/// A compact word's slot field, after the shift (0: extended).
pub const FRAME_COMPACT_SLOT_MASK: u64 = 7;
/// The first slot of the compact form.
pub const FRAME_COMPACT_SLOT_MIN: u8 = 3;
/// Payload bits of a compact word.
pub const FRAME_COMPACT_PAYLOAD_BITS: u32 = 57;
/// Where an extended word keeps its slot.
pub const FRAME_EXTENDED_SLOT_SHIFT: u32 = 49;
/// An extended word's slot, after the shift.
pub const FRAME_EXTENDED_SLOT_MASK: u64 = 0xff;
/// The first slot of the extended form.
pub const FRAME_EXTENDED_SLOT_MIN: u8 = 8;
/// Payload bits of an extended word.
pub const FRAME_EXTENDED_PAYLOAD_BITS: u32 = 49;

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
    /// An interpreter's frame: the unwinder slot of its runtime (`enum
    /// unwinder_program`) and the payload the runtime decodes.
    Interpreted {
        /// The runtime's unwinder slot (1..=255).
        slot: u8,
        /// The bits below the slot's coding
        /// ([`UserFrame::payload_bits`] of them).
        payload: u64,
    },
    /// A word with [`FRAME_INTERPRETED`] whose slot coding is none an
    /// unwinder writes (the whole word).
    Malformed(u64),
}

impl UserFrame {
    /// Whether a user frame word is an interpreter's frame (of any
    /// runtime, or malformed) rather than a pc.
    pub fn is_interpreted(word: u64) -> bool {
        word & FRAME_EXACT_PC == 0 && word & FRAME_INTERPRETED != 0
    }

    /// The payload bits of a word of slot `slot` (0 for slot 0, the
    /// native unwinder's, which has no interpreted words).
    pub const fn payload_bits(slot: u8) -> u32 {
        match slot {
            0 => 0,
            FRAME_PLAIN_SLOT => FRAME_PLAIN_PAYLOAD_BITS,
            FRAME_WIDE_SLOT => FRAME_WIDE_PAYLOAD_BITS,
            s if s < FRAME_EXTENDED_SLOT_MIN => FRAME_COMPACT_PAYLOAD_BITS,
            _ => FRAME_EXTENDED_PAYLOAD_BITS,
        }
    }

    /// Decodes a user frame word.
    pub fn decode(word: u64) -> UserFrame {
        if !UserFrame::is_interpreted(word) {
            return UserFrame::Native(CodeAddress { pc: word & !FRAME_EXACT_PC, exact: word & FRAME_EXACT_PC != 0 });
        }
        let payload = |slot: u8| word & ((1 << UserFrame::payload_bits(slot)) - 1);
        let slot = if word & FRAME_WIDE != 0 {
            FRAME_WIDE_SLOT
        } else if word & FRAME_COMPACT == 0 {
            FRAME_PLAIN_SLOT
        } else {
            match ((word >> FRAME_COMPACT_SLOT_SHIFT) & FRAME_COMPACT_SLOT_MASK) as u8 {
                0 => match ((word >> FRAME_EXTENDED_SLOT_SHIFT) & FRAME_EXTENDED_SLOT_MASK) as u8 {
                    s if s >= FRAME_EXTENDED_SLOT_MIN => s,
                    _ => return UserFrame::Malformed(word),
                },
                s if s >= FRAME_COMPACT_SLOT_MIN => s,
                _ => return UserFrame::Malformed(word),
            }
        };
        UserFrame::Interpreted { slot, payload: payload(slot) }
    }

    /// The word the native unwinder writes for `pc`.
    pub fn native_word(pc: u64, exact: bool) -> u64 {
        if exact {
            pc | FRAME_EXACT_PC
        } else {
            pc
        }
    }

    /// The word an interpreter's unwinder writes for a frame of slot
    /// `slot` (`frame_word_interpreted` in `ebpf/frame_word.h`), with
    /// `payload` cut to the slot's [`UserFrame::payload_bits`]. Slot 0 is
    /// no interpreter's: its word decodes as [`UserFrame::Malformed`].
    pub const fn interpreted_word(slot: u8, payload: u64) -> u64 {
        let payload = payload & ((1 << UserFrame::payload_bits(slot)) - 1);
        FRAME_INTERPRETED
            | match slot {
                FRAME_WIDE_SLOT => FRAME_WIDE,
                FRAME_PLAIN_SLOT => 0,
                s if s < FRAME_EXTENDED_SLOT_MIN => FRAME_COMPACT | ((s as u64) << FRAME_COMPACT_SLOT_SHIFT),
                s => FRAME_COMPACT | ((s as u64) << FRAME_EXTENDED_SLOT_SHIFT),
            }
            | payload
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
        // Bit 62 set with bit 63: a native exact pc, never an interpreted frame.
        let word = FRAME_EXACT_PC | FRAME_INTERPRETED | 0x1000;
        assert_eq!(
            UserFrame::decode(word),
            UserFrame::Native(CodeAddress { pc: FRAME_INTERPRETED | 0x1000, exact: true })
        );
    }

    #[test]
    fn kernel_leaf_is_exact_callers_are_return_addresses() {
        assert_eq!(CodeAddress::kernel(0, 0xffff_ffff_8100_0010).lookup(), 0xffff_ffff_8100_0010);
        assert_eq!(CodeAddress::kernel(1, 0xffff_ffff_8100_0010).lookup(), 0xffff_ffff_8100_000f);
    }

    /// The word's bits for slot and payload, checked against the table of
    /// the module's docs, independently of the encoder.
    fn expected(slot: u8, payload: u64) -> u64 {
        match slot {
            1 => (1 << 62) | payload,
            2 => (1 << 62) | (1 << 61) | payload,
            3..=7 => (1 << 62) | (1 << 60) | (u64::from(slot) << 57) | payload,
            _ => (1 << 62) | (1 << 60) | (u64::from(slot) << 49) | payload,
        }
    }

    #[test]
    fn every_slot_class_round_trips_at_its_payload_limits() {
        for (slot, bits) in [(1u8, 60u32), (2, 61), (3, 57), (6, 57), (7, 57), (8, 49), (9, 49), (200, 49), (255, 49)] {
            assert_eq!(UserFrame::payload_bits(slot), bits, "slot {slot}");
            let max = (1u64 << bits) - 1;
            for payload in [0, 1, 0x7f12_3456_7898 >> 3, max] {
                let word = UserFrame::interpreted_word(slot, payload);
                assert_eq!(word, expected(slot, payload), "slot {slot} payload {payload:#x}");
                assert_eq!(word & FRAME_EXACT_PC, 0);
                assert!(UserFrame::is_interpreted(word));
                assert_eq!(UserFrame::decode(word), UserFrame::Interpreted { slot, payload }, "{word:#x}");
            }
            // A payload one bit too wide is cut, never taken as the slot.
            let word = UserFrame::interpreted_word(slot, max + 1 + 5);
            assert_eq!(UserFrame::decode(word), UserFrame::Interpreted { slot, payload: 5 });
            let word = UserFrame::interpreted_word(slot, u64::MAX);
            assert_eq!(UserFrame::decode(word), UserFrame::Interpreted { slot, payload: max });
        }
    }

    #[test]
    fn every_slot_has_one_word_form() {
        let mut seen = std::collections::HashSet::new();
        for slot in 1..=255u8 {
            let word = UserFrame::interpreted_word(slot, 0);
            assert!(seen.insert(word), "slot {slot}: {word:#x}");
            assert_eq!(UserFrame::decode(word), UserFrame::Interpreted { slot, payload: 0 });
        }
    }

    #[test]
    fn invalid_slot_codings_are_malformed() {
        let compact = FRAME_INTERPRETED | FRAME_COMPACT;
        for word in [
            // Compact slot fields 1 and 2 (slots 1 and 2 have their own forms).
            compact | (1 << FRAME_COMPACT_SLOT_SHIFT) | 0x10,
            compact | (2 << FRAME_COMPACT_SLOT_SHIFT),
            // Extended slots below 8.
            compact,
            compact | (7 << FRAME_EXTENDED_SLOT_SHIFT) | 3,
            // Slot 0 is the native unwinder's.
            UserFrame::interpreted_word(0, 0x1234),
        ] {
            assert_eq!(UserFrame::decode(word), UserFrame::Malformed(word), "{word:#x}");
            assert!(UserFrame::is_interpreted(word));
        }
        assert_eq!(UserFrame::payload_bits(0), 0);
    }
}
