//! A CPython frame word's payload (`ebpf/runtimes/python/types.h`, slot
//! `UNWINDER_PYTHON`): `offset << PYTHON_FRAME_OFFSET_SHIFT | code >> 3`.

use crate::python::map_value::{PYTHON_FRAME_OFFSET_MAX, PYTHON_FRAME_OFFSET_SHIFT};
use crate::runtime::{frame_payload, frame_word};
use profiler_bpf::InterpreterUnwinder;

/// A CPython frame word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PythonWord {
    /// Address of the code object in the process, 0 when the unwinder
    /// could not encode it.
    pub code: u64,
    /// Byte offset of the frame's current instruction in the code
    /// object's bytecode (clamped to `PYTHON_FRAME_OFFSET_MAX`).
    pub offset: u32,
}

impl PythonWord {
    /// Decodes `word` if it is a CPython frame word.
    pub fn decode(word: u64) -> Option<PythonWord> {
        let payload = frame_payload(word, InterpreterUnwinder::Python)?;
        Some(PythonWord {
            code: (payload & ((1 << PYTHON_FRAME_OFFSET_SHIFT) - 1)) << 3,
            offset: ((payload >> PYTHON_FRAME_OFFSET_SHIFT) & PYTHON_FRAME_OFFSET_MAX) as u32,
        })
    }

    /// The word the unwinder writes (code objects are 8-byte aligned
    /// below 2^47, else encoded as 0; offsets clamp).
    pub fn encode(self) -> u64 {
        let code = if self.code & 7 != 0 || self.code >> 47 != 0 { 0 } else { self.code >> 3 };
        let offset = u64::from(self.offset).min(PYTHON_FRAME_OFFSET_MAX);
        frame_word(InterpreterUnwinder::Python, offset << PYTHON_FRAME_OFFSET_SHIFT | code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::UserFrame;

    #[test]
    fn python_words_round_trip() {
        let w = PythonWord { code: 0x7f12_3456_7898, offset: 1234 }.encode();
        // The layout is the header's: slot 1's form, the offset at bit 44.
        assert_eq!(w, (1 << 62) | (1234 << 44) | (0x7f12_3456_7898 >> 3));
        assert_eq!(PythonWord::decode(w), Some(PythonWord { code: 0x7f12_3456_7898, offset: 1234 }));
        // Not encodable: misaligned, or above 2^47; offsets clamp.
        let w = PythonWord { code: 0x1001, offset: 7 }.encode();
        assert_eq!(PythonWord::decode(w), Some(PythonWord { code: 0, offset: 7 }));
        let w = PythonWord { code: 1 << 48, offset: 1 << 20 }.encode();
        assert_eq!(PythonWord::decode(w), Some(PythonWord { code: 0, offset: (1 << 16) - 1 }));
        // The largest word stays a CPython word, within its payload.
        let w = PythonWord { code: 0x7fff_ffff_fff8, offset: u32::MAX }.encode();
        assert_eq!(UserFrame::decode(w), UserFrame::Interpreted { slot: 1, payload: w & ((1 << 60) - 1) });
        assert!(PythonWord::decode(w).is_some());
    }

    #[test]
    fn other_words_are_not_python_words() {
        assert_eq!(PythonWord::decode(0x7f00_0000_1000), None);
        assert_eq!(PythonWord::decode(UserFrame::interpreted_word(2, 0x1000)), None);
        assert_eq!(PythonWord::decode(UserFrame::interpreted_word(4, 0x1000)), None);
    }
}
