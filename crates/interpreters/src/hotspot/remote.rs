//! Bounded reads of a JVM's memory: every value comes from a process that
//! may be hostile, so reads fail rather than guess, strings have a cap,
//! and address arithmetic wraps instead of panicking.

use crate::memory::ProcessMemory;

/// Bytes read at once when looking for the end of a string.
const STRING_CHUNK: usize = 64;

/// The little-endian `u64` at `address`.
pub(crate) fn read_u64(memory: &dyn ProcessMemory, address: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    memory.read(address, &mut b).then(|| u64::from_le_bytes(b))
}

/// The little-endian `u32` at `address`.
pub(crate) fn read_u32(memory: &dyn ProcessMemory, address: u64) -> Option<u32> {
    let mut b = [0u8; 4];
    memory.read(address, &mut b).then(|| u32::from_le_bytes(b))
}

/// The little-endian `u16` at `address`.
pub(crate) fn read_u16(memory: &dyn ProcessMemory, address: u64) -> Option<u16> {
    let mut b = [0u8; 2];
    memory.read(address, &mut b).then(|| u16::from_le_bytes(b))
}

/// The byte at `address`.
pub(crate) fn read_u8(memory: &dyn ProcessMemory, address: u64) -> Option<u8> {
    let mut b = [0u8; 1];
    memory.read(address, &mut b).then_some(b[0])
}

/// `len` bytes at `address`.
pub(crate) fn read_bytes(memory: &dyn ProcessMemory, address: u64, len: usize) -> Option<Vec<u8>> {
    let mut b = vec![0u8; len];
    memory.read(address, &mut b).then_some(b)
}

/// The NUL-terminated string at `address`, of at most `max` bytes (a
/// longer one is an error, not a truncation: a name cut short would name
/// the wrong thing). Read in small chunks that never cross a page, so a
/// string ending just before an unmapped page is still read.
pub(crate) fn read_cstr(memory: &dyn ProcessMemory, address: u64, max: usize) -> Option<String> {
    if address == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = address;
    while out.len() <= max {
        let to_page_end = (4096 - (at & 4095)) as usize;
        let n = to_page_end.min(STRING_CHUNK);
        let mut chunk = [0u8; STRING_CHUNK];
        if !memory.read(at, &mut chunk[..n]) {
            return None;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return (out.len() <= max).then(|| String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(&chunk[..n]);
        at = at.checked_add(n as u64)?;
    }
    None
}

/// The little-endian `u64` at `off` in `buf`.
pub(crate) fn u64_at(buf: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(off..off.checked_add(8)?)?.try_into().ok()?))
}

/// The little-endian `u32` at `off` in `buf`.
pub(crate) fn u32_at(buf: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(off..off.checked_add(4)?)?.try_into().ok()?))
}

/// The little-endian `u16` at `off` in `buf`.
pub(crate) fn u16_at(buf: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(buf.get(off..off.checked_add(2)?)?.try_into().ok()?))
}

#[cfg(test)]
pub(crate) mod fake {
    //! The crate's fake process memory, under the name the HotSpot unit
    //! tests import.
    pub(crate) use crate::memory::fake::FakeMemory;
}

#[cfg(test)]
mod tests {
    use super::fake::FakeMemory;
    use super::*;

    #[test]
    fn strings_are_bounded_and_may_end_at_a_page_edge() {
        let mut m = FakeMemory::default();
        // "abc\0" ends exactly at a page end; the next page is unmapped.
        m.add(0x1ffc, b"abc\0".to_vec());
        assert_eq!(read_cstr(&m, 0x1ffc, 256).as_deref(), Some("abc"));
        m.add(0x5000, vec![b'x'; 600]);
        assert_eq!(read_cstr(&m, 0x5000, 256), None, "no NUL within the cap");
        let mut long = vec![b'y'; 300];
        long.resize(400, 0);
        m.add(0x8000, long);
        assert_eq!(read_cstr(&m, 0x8000, 256), None, "longer than the cap");
        assert_eq!(read_cstr(&m, 0x8000, 300).map(|s| s.len()), Some(300));
        assert_eq!(read_cstr(&m, 0, 256), None);
    }
}
