//! Line numbers from a code object's line table, as CPython's own
//! `PyCode_Addr2Line` computes them, for the three formats of 3.8-3.13.
//! Malformed tables give `None`, never a panic.

use super::layout::LineTableFormat;

/// The line of the instruction at byte offset `offset` of the bytecode, or
/// `None` when the table says it has none (or is malformed).
pub fn line_for_offset(format: LineTableFormat, table: &[u8], first_line: i32, offset: u32) -> Option<u32> {
    let line = match format {
        LineTableFormat::Lnotab => lnotab(table, first_line, offset),
        LineTableFormat::Linetable310 => linetable_310(table, first_line, offset),
        LineTableFormat::Locations => locations(table, first_line, offset),
    }?;
    u32::try_from(line).ok().filter(|&l| l > 0)
}

/// 3.8, 3.9 `co_lnotab`: (address increment, signed line increment) byte
/// pairs; the line of an address is that of the last pair starting at or
/// before it (`Objects/codeobject.c: PyCode_Addr2Line`).
fn lnotab(table: &[u8], first_line: i32, offset: u32) -> Option<i32> {
    let mut line = first_line;
    let mut address: u32 = 0;
    for pair in table.chunks_exact(2) {
        address = address.saturating_add(u32::from(pair[0]));
        if address > offset {
            break;
        }
        line = line.checked_add(i32::from(pair[1] as i8))?;
    }
    Some(line)
}

/// 3.10 `co_linetable` (PEP 626): (address delta, line delta) byte pairs,
/// each an address range [start, start + delta) whose line is the running
/// line after the delta, or none when the delta is -128
/// (`Objects/codeobject.c: advance`, `PyCode_Addr2Line`).
fn linetable_310(table: &[u8], first_line: i32, offset: u32) -> Option<i32> {
    let mut line = first_line;
    let mut end: u32 = 0;
    for pair in table.chunks_exact(2) {
        let start = end;
        end = end.saturating_add(u32::from(pair[0]));
        let delta = pair[1] as i8;
        let range_line = if delta == -128 {
            None
        } else {
            line = line.checked_add(i32::from(delta))?;
            Some(line)
        };
        if start <= offset && offset < end {
            return range_line;
        }
    }
    None
}

/// 3.11+ location table (`Objects/locations.md`): entries starting with a
/// byte whose top bit is set, `1 cccc lll`: code `c`, length `l + 1` code
/// units. Code 15: no location; 14 (long form) and 13 (no columns): a
/// signed varint line delta first; 10-12: line delta `c - 10`; 0-9: same
/// line.
fn locations(table: &[u8], first_line: i32, offset: u32) -> Option<i32> {
    let mut line = first_line;
    let mut address: u32 = 0;
    let mut pos = 0;
    while pos < table.len() {
        let first = table[pos];
        if first & 0x80 == 0 {
            return None;
        }
        let code = (first >> 3) & 15;
        let length = (u32::from(first & 7) + 1) * 2;
        pos += 1;
        let delta = match code {
            13 | 14 => signed_varint(table, pos)?,
            10..=12 => i32::from(code) - 10,
            _ => 0,
        };
        line = line.checked_add(delta)?;
        let range_line = if code == 15 { None } else { Some(line) };
        let end = address.saturating_add(length);
        if address <= offset && offset < end {
            return range_line;
        }
        address = end;
        while pos < table.len() && table[pos] & 0x80 == 0 {
            pos += 1;
        }
    }
    None
}

/// `scan_signed_varint`: 6-bit little-endian chunks, 0x40 meaning "more",
/// the lowest bit of the result the sign.
fn signed_varint(table: &[u8], mut pos: usize) -> Option<i32> {
    let mut byte = *table.get(pos)?;
    let mut value = u32::from(byte & 63);
    let mut shift = 0;
    while byte & 64 != 0 {
        pos += 1;
        shift += 6;
        if shift > 30 {
            return None;
        }
        byte = *table.get(pos)?;
        value |= u32::from(byte & 63) << shift;
    }
    let magnitude = (value >> 1) as i32;
    Some(if value & 1 != 0 { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineTableFormat::*;

    #[test]
    fn lnotab_pairs() {
        // first line 10; +6 bytes -> line 11; +4 bytes -> line 13;
        // +0 bytes, -1 (line 12) at the same address.
        let t = [6, 1, 4, 2, 0, 0xff];
        assert_eq!(line_for_offset(Lnotab, &t, 10, 0), Some(10));
        assert_eq!(line_for_offset(Lnotab, &t, 10, 5), Some(10));
        assert_eq!(line_for_offset(Lnotab, &t, 10, 6), Some(11));
        assert_eq!(line_for_offset(Lnotab, &t, 10, 10), Some(12));
        assert_eq!(line_for_offset(Lnotab, &t, 10, 500), Some(12));
        assert_eq!(line_for_offset(Lnotab, &[], 7, 3), Some(7));
    }

    #[test]
    fn linetable_310_ranges() {
        // [0,4) line 10+1, [4,4) +2 (empty), [4,10) +0 -> 13, [10,12) none.
        let t = [4, 1, 0, 2, 6, 0, 2, 0x80];
        assert_eq!(line_for_offset(Linetable310, &t, 10, 0), Some(11));
        assert_eq!(line_for_offset(Linetable310, &t, 10, 3), Some(11));
        assert_eq!(line_for_offset(Linetable310, &t, 10, 4), Some(13));
        assert_eq!(line_for_offset(Linetable310, &t, 10, 11), None);
        assert_eq!(line_for_offset(Linetable310, &t, 10, 12), None);
        // An odd trailing byte is ignored.
        assert_eq!(line_for_offset(Linetable310, &t[..3], 10, 1), Some(11));
    }

    #[test]
    fn locations_forms() {
        let t = [
            0x80 | (13 << 3),
            2, // 1 unit, no columns, delta +1 -> 11
            0x80 | (11 << 3) | 1,
            4,
            9, // 2 units, one-line +1 -> 12
            0x80 | (3 << 3) | 2,
            0x23,             // 3 units, short form (same line)
            0x80 | (15 << 3), // 1 unit, no location
            0x80 | (14 << 3),
            5,
            0,
            1,
            2, // 1 unit, long form, delta -2 -> 10
            0x80 | (13 << 3),
            0x40 | 8,
            1, // 1 unit, delta varint 8 | 1 << 6 = 72 -> +36 -> 46
        ];
        let at = |unit: u32| line_for_offset(Locations, &t, 10, unit * 2);
        assert_eq!(at(0), Some(11));
        assert_eq!(at(1), Some(12));
        assert_eq!(at(2), Some(12));
        assert_eq!(at(3), Some(12));
        assert_eq!(at(5), Some(12));
        assert_eq!(at(6), None);
        assert_eq!(at(7), Some(10));
        assert_eq!(at(8), Some(46));
        assert_eq!(at(9), None, "past the table");
    }

    #[test]
    fn malformed_tables_do_not_panic() {
        for format in [Lnotab, Linetable310, Locations] {
            for len in 0..64 {
                let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
                for offset in [0, 1, 2, 100, u32::MAX - 1] {
                    let _ = line_for_offset(format, &junk, i32::MAX - 2, offset);
                    let _ = line_for_offset(format, &junk, i32::MIN + 2, offset);
                }
            }
        }
        // A varint that never ends.
        assert_eq!(line_for_offset(Locations, &[0x80 | (13 << 3), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f], 1, 0), None);
    }
}
