//! V8 source position tables and script line ends.
//!
//! Facts (V8's `source-position-table.cc`, `source-position.h`): a table
//! is a sequence of entries, each two variable-length integers (7 bits
//! per byte, least significant group first, high bit = more follows,
//! zigzag-signed): the code offset delta (a statement position is stored
//! as the delta, an expression position as `-delta - 1`) then the delta
//! of the raw `SourcePosition`, whose bit 0 says "external", bits 1..=30
//! are the script offset plus one (0 is "no position") and bits 31..=46
//! the inlining id plus one. Deltas start from code offset -1 (the
//! function entry's position, which bytecode tables record first) and
//! raw position 0. Checked live against `node --print-bytecode`.
//! A script's line ends are the offsets of its `\n` characters.

/// Most entries decoded from one table.
const MAX_ENTRIES: usize = 1 << 18;

/// One entry of a source position table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionEntry {
    /// Bytecode offset (or machine code offset for compiled code); -1 is
    /// the function's entry.
    pub code_offset: i32,
    /// Character offset in the script.
    pub script_offset: u32,
    /// Index of the inlined function in the code's deoptimisation data,
    /// `None` for the code's own function.
    pub inlining_id: Option<u16>,
}

/// Decodes a source position table; `None` if it is malformed.
pub fn decode_positions(table: &[u8]) -> Option<Vec<PositionEntry>> {
    decode_positions_of(table, false)
}

/// Decodes a source position table of a V8 whose code offset deltas
/// carry one more low bit when `code_flag` (14.x: the delta, statement
/// or expression, is `2 * delta + 1` there in every table seen; found by
/// comparing decoded tables with `node --print-bytecode`).
pub fn decode_positions_of(table: &[u8], code_flag: bool) -> Option<Vec<PositionEntry>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let (mut code, mut raw) = (-1i64, 0i64);
    while at < table.len() {
        if out.len() >= MAX_ENTRIES {
            return None;
        }
        let delta = read_vlq(table, &mut at)?;
        // Statement positions keep the delta; expressions store -delta - 1.
        let delta = if delta < 0 { -delta - 1 } else { delta };
        let delta = if code_flag { delta >> 1 } else { delta };
        code = code.checked_add(delta)?;
        raw = raw.checked_add(read_vlq(table, &mut at)?)?;
        let raw_u = u64::try_from(raw).ok()?;
        let script = (raw_u >> 1) & ((1 << 30) - 1);
        out.push(PositionEntry {
            code_offset: i32::try_from(code).ok()?,
            // 0 is "no position": kept as 0, a harmless line 1.
            script_offset: script.saturating_sub(1) as u32,
            inlining_id: match (raw_u >> 31) & 0xffff {
                0 => None,
                n => Some((n - 1) as u16),
            },
        });
    }
    Some(out)
}

/// One zigzag variable-length integer.
fn read_vlq(table: &[u8], at: &mut usize) -> Option<i64> {
    let mut bits: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *table.get(*at)?;
        *at += 1;
        bits |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(((bits >> 1) as i64) ^ -((bits & 1) as i64));
        }
    }
    None
}

/// The entry in effect at `code_offset`: the last one at or before it.
pub fn position_at(entries: &[PositionEntry], code_offset: i32) -> Option<PositionEntry> {
    let n = entries.partition_point(|e| e.code_offset <= code_offset);
    n.checked_sub(1).map(|i| entries[i])
}

/// `(line, column)`, both from 1, of character `offset` given a script's
/// line ends (sorted offsets of its newlines).
pub fn line_column(line_ends: &[i64], offset: u32) -> Option<(u32, u32)> {
    let offset = i64::from(offset);
    let line = line_ends.partition_point(|&end| end < offset);
    let start = if line == 0 { 0 } else { line_ends[line - 1] + 1 };
    Some((u32::try_from(line + 1).ok()?, u32::try_from(offset - start + 1).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes one zigzag VLQ, the way V8 writes it.
    fn vlq(value: i64, out: &mut Vec<u8>) {
        let mut bits = ((value << 1) ^ (value >> 63)) as u64;
        loop {
            let byte = (bits & 0x7f) as u8;
            bits >>= 7;
            if bits == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn decodes_statements_expressions_and_inlining() {
        let mut t = Vec::new();
        // (code -1, script 8, expression: the function entry),
        // (code 0, script 10, statement), (code 5, script 300, expression),
        // (code 200, script 40, inlined #2): deltas of raw positions,
        // from code -1 and raw 0.
        let raw = |script: i64, inl: i64| ((script + 1) << 1) | (inl << 31);
        vlq(-1, &mut t);
        vlq(raw(8, 0), &mut t);
        vlq(1, &mut t);
        vlq(raw(10, 0) - raw(8, 0), &mut t);
        vlq(-5 - 1, &mut t);
        vlq(raw(300, 0) - raw(10, 0), &mut t);
        vlq(195, &mut t);
        vlq(raw(40, 3) - raw(300, 0), &mut t);
        let e = decode_positions(&t).unwrap();
        assert_eq!(
            e,
            vec![
                PositionEntry { code_offset: -1, script_offset: 8, inlining_id: None },
                PositionEntry { code_offset: 0, script_offset: 10, inlining_id: None },
                PositionEntry { code_offset: 5, script_offset: 300, inlining_id: None },
                PositionEntry { code_offset: 200, script_offset: 40, inlining_id: Some(2) },
            ]
        );
        assert_eq!(position_at(&e, 4).unwrap().script_offset, 10);
        assert_eq!(position_at(&e, 5).unwrap().script_offset, 300);
        assert_eq!(position_at(&e, 10_000).unwrap().script_offset, 40);
        assert!(decode_positions(&[0x80, 0x80]).is_none(), "truncated");
        // 14.x: the same entries with the extra bit (2 * delta + 1).
        let flagged = decode_positions_of(&[0x02, 0x00, 0x06, 0x10], true).unwrap();
        let plain = decode_positions(&[0x00, 0x00, 0x02, 0x10]).unwrap();
        assert_eq!(flagged, plain);
        assert_eq!((flagged[1].code_offset, flagged[1].script_offset), (0, 3));
        assert!(decode_positions(&[0x80; 20]).is_none(), "too long");
    }

    #[test]
    fn lines_and_columns() {
        // "ab\ncd\n\nef": newlines at 2, 5, 6.
        let ends = [2, 5, 6];
        assert_eq!(line_column(&ends, 0), Some((1, 1)));
        assert_eq!(line_column(&ends, 2), Some((1, 3)));
        assert_eq!(line_column(&ends, 3), Some((2, 1)));
        assert_eq!(line_column(&ends, 6), Some((3, 1)));
        assert_eq!(line_column(&ends, 8), Some((4, 2)));
        assert_eq!(line_column(&[], 4), Some((1, 5)));
    }
}

#[cfg(test)]
mod node20 {
    use super::*;

    /// `wb` of tests/workloads/node/worker.js as Node 20 stores it, and
    /// as `node --print-bytecode` prints it: 566 S> @0, 573 E> @3,
    /// 578 S> @6.
    #[test]
    fn a_table_from_a_live_node() {
        let e = decode_positions(&[0x01, 0xc0, 0x11, 0x02, 0x1c, 0x07, 0x1c, 0x06, 0x14]).unwrap();
        let pairs: Vec<(i32, u32)> = e.iter().map(|e| (e.code_offset, e.script_offset)).collect();
        assert_eq!(pairs, [(-1, 559), (0, 566), (3, 573), (6, 578)]);
    }
}
