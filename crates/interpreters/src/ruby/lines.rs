//! Line numbers of an iseq at a pc.
//!
//! Each iseq has `insns_info`: `size` entries whose first field is the
//! line, and the instruction position where each starts. Release builds
//! keep the positions only as a succinct bit vector (bit `p` set where an
//! entry starts; the entry for position `x` is `rank(x) - 1`): 54 bits
//! stored as nine 7-bit ranks per word, then blocks of 512 bits with the
//! block's rank, seven 9-bit ranks of its 64-bit words, and the bits.

use super::layout::{consts, RubyLayout};
use super::objects::{at, read_u32, read_u64};
use crate::memory::ProcessMemory;

/// Most line entries an iseq may have (a method larger than this is
/// hostile or corrupt).
const MAX_ENTRIES: u32 = 1 << 20;

/// The line of the instruction before `pc` (Ruby's `pc` points past the
/// instruction being executed) in the iseq whose body is at `body`.
pub(crate) fn line_at(memory: &dyn ProcessMemory, layout: &RubyLayout, body: u64, pc: u64) -> Option<u32> {
    let encoded = read_u64(memory, at(body, layout.body_iseq_encoded)?)?;
    let iseq_size = read_u32(memory, at(body, layout.body_iseq_size)?)?;
    let entries = read_u64(memory, at(body, layout.body_insns_info)?)?;
    let size = read_u32(memory, at(body, layout.body_insns_size)?)?;
    if size == 0 || size > MAX_ENTRIES || entries == 0 {
        return None;
    }
    let mut pos = pc.checked_sub(encoded)? / 8;
    if pos > u64::from(iseq_size) {
        return None;
    }
    pos = pos.saturating_sub(1);
    let index = if size == 1 {
        0
    } else {
        let positions = read_u64(memory, at(body, layout.body_insns_positions)?)?;
        if positions != 0 {
            last_entry_at_or_before(memory, positions, size, pos)?
        } else {
            let table = read_u64(memory, at(body, layout.body_succ_index_table)?)?;
            succ_rank(memory, table, pos)?.checked_sub(1)?
        }
    };
    if index >= u64::from(size) {
        return None;
    }
    let entry = entries.checked_add(index.checked_mul(u64::from(layout.insn_info_entry_size))?)?;
    let line = read_u32(memory, entry)? as i32;
    u32::try_from(line).ok()
}

/// Index of the last of `size` sorted `u32` positions at `positions`
/// that is `<= pos` (a bounded binary search over remote memory).
fn last_entry_at_or_before(memory: &dyn ProcessMemory, positions: u64, size: u32, pos: u64) -> Option<u64> {
    let (mut lo, mut hi) = (0u64, u64::from(size));
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        let p = read_u32(memory, positions.checked_add(mid * 4)?)?;
        if u64::from(p) <= pos {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// The number of set bits at positions `<= x` of the succinct table at
/// `table`.
pub(crate) fn succ_rank(memory: &dyn ProcessMemory, table: u64, x: u64) -> Option<u64> {
    if table == 0 {
        return None;
    }
    if x < consts::SUCC_IMMEDIATE {
        let word = read_u64(memory, table.checked_add((x / 9) * 8)?)?;
        return Some((word >> ((x % 9) * 7)) & 0x7f);
    }
    let rel = x - consts::SUCC_IMMEDIATE;
    let block = table
        .checked_add(consts::SUCC_PART)?
        .checked_add((rel / consts::SUCC_BLOCK_BITS).checked_mul(consts::SUCC_BLOCK_SIZE)?)?;
    let bit = rel % consts::SUCC_BLOCK_BITS;
    let small = bit / 64;
    let rank = u64::from(read_u32(memory, block)?);
    let small_ranks = read_u64(memory, block.wrapping_add(8))?;
    let small_rank = if small == 0 { 0 } else { (small_ranks >> ((small - 1) * 9)) & 0x1ff };
    let bits = read_u64(memory, block.wrapping_add(16 + small * 8))?;
    let below = u64::from((bits << (63 - bit % 64)).count_ones());
    Some(rank + small_rank + below)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use crate::ruby::RubyVersion;

    /// Builds Ruby's succinct table for the set `starts` of positions
    /// (the encoding, written from the description above).
    fn succ_table(starts: &[u64], max: u64) -> Vec<u64> {
        let rank = |x: u64| starts.iter().filter(|&&s| s <= x).count() as u64;
        let mut words = vec![0u64; 6];
        for x in 0..consts::SUCC_IMMEDIATE {
            words[(x / 9) as usize] |= rank(x) << ((x % 9) * 7);
        }
        let mut block_start = consts::SUCC_IMMEDIATE;
        while block_start <= max {
            let base = if block_start == 0 { 0 } else { rank(block_start - 1) };
            let mut bits = [0u64; 8];
            let mut small = 0u64;
            for (i, w) in bits.iter_mut().enumerate() {
                for b in 0..64 {
                    if starts.contains(&(block_start + i as u64 * 64 + b)) {
                        *w |= 1 << b;
                    }
                }
                if i > 0 {
                    small |= (rank(block_start + i as u64 * 64 - 1) - base) << ((i - 1) * 9);
                }
            }
            words.push(base);
            words.push(small);
            words.extend_from_slice(&bits);
            block_start += consts::SUCC_BLOCK_BITS;
        }
        words
    }

    #[test]
    fn succinct_rank_matches_a_plain_count() {
        let starts = [0, 3, 9, 53, 54, 100, 565, 566, 1000];
        let mut m = FakeMemory::default();
        m.words(0x10000, &succ_table(&starts, 1100));
        for x in 0..1100 {
            let want = starts.iter().filter(|&&s| s <= x).count() as u64;
            assert_eq!(succ_rank(&m, 0x10000, x), Some(want), "x={x}");
        }
        assert_eq!(succ_rank(&m, 0, 5), None);
    }

    #[test]
    fn line_for_a_pc_from_the_succinct_table() {
        let layout = RubyLayout::for_version(RubyVersion::new(3, 1, 7)).unwrap();
        let (body, encoded, entries, table) = (0x1000u64, 0x2000u64, 0x3000u64, 0x4000u64);
        let mut b = vec![0u64; 20];
        b[0] = 40 << 32; // type 0, iseq_size 40
        b[1] = encoded;
        b[15] = entries; // insns_info.body at 120
        b[16] = 0; // positions: freed
        b[17] = 3; // size at 136
        b[18] = table; // at 144
        m_words(body, &b, |m| {
            // entries of 12 bytes: lines 10, 11, 14 starting at 0, 4, 9.
            let mut e = Vec::new();
            for line in [10u32, 11, 14] {
                e.extend_from_slice(&line.to_le_bytes());
                e.extend_from_slice(&[0; 8]);
            }
            m.add(entries, e);
            m.words(table, &succ_table(&[0, 4, 9], 60));
            let line = |pos: u64| line_at(m, &layout, body, encoded + pos * 8);
            assert_eq!(line(1), Some(10), "pc just past the first instruction");
            assert_eq!(line(5), Some(11));
            assert_eq!(line(9), Some(11), "pc points past the instruction that ran");
            assert_eq!(line(10), Some(14));
            assert_eq!(line(41), None, "past the iseq");
        });
    }

    fn m_words(at: u64, words: &[u64], check: impl FnOnce(&mut FakeMemory)) {
        let mut m = FakeMemory::default();
        m.words(at, words);
        check(&mut m);
    }
}
