//! HotSpot's compressed line number table and the UNSIGNED5 numbers it
//! is made of.
//!
//! Facts (the JDK's `compressedStream.hpp`, `unsigned5.hpp`, `method.cpp`):
//! the table follows a method's bytecodes in its `ConstMethod` when the
//! has-line-number-table flag is set. It is a list of `(bci, line)` pairs,
//! each a delta from the previous pair (starting at `(0, 0)`): one byte
//! `bci_delta << 3 | line_delta` when `bci_delta < 32` and `line_delta < 8`,
//! else the byte `0xff` followed by both deltas as signed UNSIGNED5
//! numbers (zigzag: `(v << 1) ^ (v >> 31)`). A zero byte ends it.
//! UNSIGNED5 is base 64 with a high-byte threshold: bytes `>= L` carry on,
//! at most 5 bytes, `L = 192` before JDK 20; from JDK 20 every byte is
//! stored plus one (no zero bytes inside numbers), so `L = 191`.

/// Most pairs read from one table.
const MAX_PAIRS: usize = 1 << 16;

/// Reads UNSIGNED5 numbers from a byte slice (also the format of
/// HotSpot's debug info streams: scope descriptors).
pub(crate) struct Unsigned5<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
    pub(crate) excluded: u8,
}

impl Unsigned5<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// One number; `None` at the end of the bytes or on a byte below the
    /// excluded range.
    pub(crate) fn read(&mut self) -> Option<u32> {
        let x = u32::from(self.excluded);
        let low = 256 - 64 - x;
        let mut sum: u32 = 0;
        let mut shift = 0;
        for i in 0..5 {
            let b = u32::from(self.byte()?).checked_sub(x)?;
            sum = sum.wrapping_add(b << shift);
            if b < low || i == 4 {
                return Some(sum);
            }
            shift += 6;
        }
        None
    }

    fn read_signed(&mut self) -> Option<i32> {
        let v = self.read()?;
        Some(((v >> 1) as i32) ^ -((v & 1) as i32))
    }
}

/// The `(bci, line)` pairs of a compressed line number table, in table
/// order; stops at the terminator, the end of `bytes`, a malformed number
/// or [`MAX_PAIRS`].
pub fn decode_line_table(bytes: &[u8], unsigned5_excluded: u8) -> Vec<(u32, u32)> {
    let mut r = Unsigned5 { bytes, at: 0, excluded: unsigned5_excluded };
    let (mut bci, mut line) = (0i64, 0i64);
    let mut pairs = Vec::new();
    while pairs.len() < MAX_PAIRS {
        let Some(b) = r.byte() else { break };
        match b {
            0 => break,
            0xff => {
                let (Some(db), Some(dl)) = (r.read_signed(), r.read_signed()) else { break };
                bci += i64::from(db);
                line += i64::from(dl);
            }
            _ => {
                bci += i64::from(b >> 3);
                line += i64::from(b & 7);
            }
        }
        let (Ok(b), Ok(l)) = (u32::try_from(bci), u32::try_from(line)) else { break };
        pairs.push((b, l));
    }
    pairs
}

/// The line of `bci`: an exact entry if there is one (the first), else the
/// last entry with the greatest bci below it, as HotSpot's
/// `Method::line_from_bci` does.
pub fn line_for_bci(pairs: &[(u32, u32)], bci: u32) -> Option<u32> {
    let mut best: Option<(u32, u32)> = None;
    for &(b, l) in pairs {
        if b == bci {
            return Some(l);
        }
        if b < bci && best.is_none_or(|(bb, _)| b >= bb) {
            best = Some((b, l));
        }
    }
    best.map(|(_, l)| l)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes like HotSpot's writers, to test the reader against.
    fn encode(pairs: &[(i32, i32)], excluded: u8) -> Vec<u8> {
        let x = u32::from(excluded);
        let low = 256 - 64 - x;
        let unsigned5 = |out: &mut Vec<u8>, mut v: u32| {
            for i in 0..5 {
                if v < low || i == 4 {
                    out.push((v + x) as u8);
                    return;
                }
                v -= low;
                out.push((low + (v % 64) + x) as u8);
                v >>= 6;
            }
        };
        let zigzag = |v: i32| ((v << 1) ^ (v >> 31)) as u32;
        let mut out = Vec::new();
        let (mut bci, mut line) = (0, 0);
        for &(b, l) in pairs {
            let (db, dl) = (b - bci, l - line);
            if (0..32).contains(&db) && (0..8).contains(&dl) && (db, dl) != (0, 0) {
                out.push(((db << 3) | dl) as u8);
            } else {
                out.push(0xff);
                unsigned5(&mut out, zigzag(db));
                unsigned5(&mut out, zigzag(dl));
            }
            (bci, line) = (b, l);
        }
        out.push(0);
        out
    }

    #[test]
    fn decodes_both_unsigned5_variants() {
        let pairs = [(0, 12), (4, 13), (9, 20), (400, 3000), (401, 2990), (100_000, 70_000)];
        for excluded in [0, 1] {
            let bytes = encode(&pairs, excluded);
            if excluded == 1 {
                assert!(!bytes[..bytes.len() - 1].contains(&0), "no zero byte inside numbers");
            }
            let got = decode_line_table(&bytes, excluded);
            let want: Vec<(u32, u32)> = pairs.iter().map(|&(b, l)| (b as u32, l as u32)).collect();
            assert_eq!(got, want, "excluded {excluded}");
        }
    }

    #[test]
    fn lines_for_bcis() {
        let pairs = [(0, 10), (5, 11), (5, 12), (20, 9)];
        assert_eq!(line_for_bci(&pairs, 0), Some(10));
        assert_eq!(line_for_bci(&pairs, 5), Some(11), "the first exact entry");
        assert_eq!(line_for_bci(&pairs, 7), Some(12), "the last of the greatest bci below");
        assert_eq!(line_for_bci(&pairs, 100), Some(9));
        assert_eq!(line_for_bci(&[], 3), None);
        assert_eq!(line_for_bci(&[(4, 1)], 3), None);
    }

    #[test]
    fn truncated_and_hostile_tables_stop() {
        assert_eq!(decode_line_table(&[0xff, 0xff], 0), vec![]);
        assert_eq!(decode_line_table(&[(2 << 3) | 1], 0), vec![(2, 1)], "no terminator: ends with the bytes");
        // A negative bci is not a position: the table stops there.
        let bytes = encode(&[(0, 5), (-3, 6)], 0);
        assert_eq!(decode_line_table(&bytes, 0), vec![(0, 5)]);
        // 64 KiB of one-byte pairs: capped.
        let many = vec![0x09u8; MAX_PAIRS + 10];
        assert_eq!(decode_line_table(&many, 0).len(), MAX_PAIRS);
    }
}
