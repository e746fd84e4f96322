//! A HotSpot frame word's payload (`ebpf/runtimes/hotspot/types.h`, slot
//! `UNWINDER_HOTSPOT`): an interpreted frame's `Method*` and bci, or a
//! compiled frame's pc and its blob's mark (`HOTSPOT_FRAME_COMPILED`).

use crate::hotspot::map_value::{
    HOTSPOT_CODE_OFFSET_MAX, HOTSPOT_FRAME_COMPILED, HOTSPOT_FRAME_OFFSET_MAX, HOTSPOT_FRAME_OFFSET_SHIFT,
    HOTSPOT_MARK_BITS, HOTSPOT_MARK_HIGH_SHIFT, HOTSPOT_NO_BCI, HOTSPOT_PC_EXACT,
};
use crate::runtime::{frame_payload, frame_word};
use profiler_bpf::InterpreterUnwinder;

/// An interpreted frame's word: `bci << HOTSPOT_FRAME_OFFSET_SHIFT |
/// Method* >> 3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpretedWord {
    /// The frame's `Method*`, 0 when the unwinder could not encode it.
    pub method: u64,
    /// The bytecode index; `None` for a native method
    /// (`HOTSPOT_NO_BCI`). Clamped to `HOTSPOT_FRAME_OFFSET_MAX`.
    pub bci: Option<u32>,
}

impl InterpretedWord {
    /// Decodes `word` if it is an interpreted HotSpot frame word.
    pub fn decode(word: u64) -> Option<InterpretedWord> {
        let payload = frame_payload(word, InterpreterUnwinder::Hotspot)?;
        if payload & HOTSPOT_FRAME_COMPILED != 0 {
            return None;
        }
        let bci = (payload >> HOTSPOT_FRAME_OFFSET_SHIFT) & HOTSPOT_FRAME_OFFSET_MAX;
        Some(InterpretedWord {
            method: (payload & ((1 << HOTSPOT_FRAME_OFFSET_SHIFT) - 1)) << 3,
            bci: (bci != HOTSPOT_NO_BCI).then_some(bci as u32),
        })
    }

    /// The word the unwinder writes (a `Method*` not 8-byte aligned below
    /// 2^47 is encoded as 0; a bci clamps).
    pub fn encode(self) -> u64 {
        let method = if self.method & 7 != 0 || self.method >> 47 != 0 { 0 } else { self.method >> 3 };
        let bci = self.bci.map_or(HOTSPOT_NO_BCI, |b| u64::from(b).min(HOTSPOT_FRAME_OFFSET_MAX));
        frame_word(InterpreterUnwinder::Hotspot, bci << HOTSPOT_FRAME_OFFSET_SHIFT | method)
    }
}

/// A compiled frame's word, as `ebpf/runtimes/hotspot/unwinder.bpf.h` writes it
/// (`ebpf/runtimes/hotspot/types.h`): the pc and its blob's mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompiledWord {
    /// The pc's offset from `CodeCache::_low_bound` (never 0).
    pub pc_offset: u64,
    /// The pc is the sampled instruction, not a return address.
    pub exact: bool,
    /// The low [`HOTSPOT_MARK_BITS`] of the int at the blob's
    /// `nmethod::_compile_id` offset when the frame was sampled.
    pub mark: u32,
}

impl CompiledWord {
    const MARK_MASK: u32 = (1 << HOTSPOT_MARK_BITS) - 1;

    /// The compiled frame of `word`; `None` for another word, or one whose
    /// pc the unwinder could not encode.
    pub fn decode(word: u64) -> Option<CompiledWord> {
        let payload = frame_payload(word, InterpreterUnwinder::Hotspot)?;
        if payload & HOTSPOT_FRAME_COMPILED == 0 {
            return None;
        }
        let low = ((payload >> HOTSPOT_FRAME_OFFSET_SHIFT) & 0xffff) as u32;
        let high = (payload >> HOTSPOT_MARK_HIGH_SHIFT) as u32 & (Self::MARK_MASK >> 16);
        let pc_offset = payload & HOTSPOT_CODE_OFFSET_MAX;
        (pc_offset != 0).then_some(CompiledWord {
            pc_offset,
            exact: payload & HOTSPOT_PC_EXACT != 0,
            mark: low | (high << 16),
        })
    }

    /// The word (the BPF unwinder writes them).
    pub fn encode(self) -> u64 {
        let mark = u64::from(self.mark & Self::MARK_MASK);
        frame_word(
            InterpreterUnwinder::Hotspot,
            HOTSPOT_FRAME_COMPILED
                | ((mark & 0xffff) << HOTSPOT_FRAME_OFFSET_SHIFT)
                | ((mark >> 16) << HOTSPOT_MARK_HIGH_SHIFT)
                | if self.exact { HOTSPOT_PC_EXACT } else { 0 }
                | (self.pc_offset & HOTSPOT_CODE_OFFSET_MAX),
        )
    }

    /// Whether `mark`, read from a blob now, is this frame's.
    pub fn same_mark(&self, mark: u32) -> bool {
        mark & Self::MARK_MASK == self.mark
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::UserFrame;

    #[test]
    fn interpreted_words_round_trip() {
        let w = InterpretedWord { method: 0x7f12_3456_7898, bci: Some(17) }.encode();
        // The layout is the header's: slot 2's form (bit 61), the bci at bit 44.
        assert_eq!(w, (1 << 62) | (1 << 61) | (17 << 44) | (0x7f12_3456_7898 >> 3));
        assert_eq!(InterpretedWord::decode(w), Some(InterpretedWord { method: 0x7f12_3456_7898, bci: Some(17) }));
        assert_eq!(CompiledWord::decode(w), None);
        let native = InterpretedWord { method: 0x7f00_0000_1000, bci: None }.encode();
        assert_eq!(InterpretedWord::decode(native).unwrap().bci, None);
        // A bci too large clamps (to the value that means none); an
        // unencodable pointer is 0.
        let w = InterpretedWord { method: 0x1001, bci: Some(1 << 20) }.encode();
        assert_eq!(InterpretedWord::decode(w), Some(InterpretedWord { method: 0, bci: None }));
    }

    #[test]
    fn compiled_words_use_the_whole_payload() {
        let w = CompiledWord { pc_offset: HOTSPOT_CODE_OFFSET_MAX, exact: true, mark: (1 << 28) - 1 }.encode();
        assert_eq!(UserFrame::decode(w), UserFrame::Interpreted { slot: 2, payload: w & ((1 << 61) - 1) });
        assert_eq!(w & HOTSPOT_FRAME_COMPILED, 1 << 60);
        let back = CompiledWord::decode(w).unwrap();
        assert_eq!(back, CompiledWord { pc_offset: HOTSPOT_CODE_OFFSET_MAX, exact: true, mark: (1 << 28) - 1 });
        assert_eq!(InterpretedWord::decode(w), None);
        // Not HotSpot words.
        assert_eq!(CompiledWord::decode(UserFrame::interpreted_word(1, 1 << 59 | 0x40)), None);
        assert_eq!(InterpretedWord::decode(UserFrame::interpreted_word(3, 0x40)), None);
    }
}
