//! The Go version a Go executable was built with, from its build info
//! (`.go.buildinfo`: a 32-byte header starting `\xff Go buildinf:`, then
//! the version string; since Go 1.18 inline, as a varint-prefixed
//! string, before as a pointer to a Go string header).

use crate::file::ElfFile;

const MAGIC: &[u8] = b"\xff Go buildinf:";
const HEADER_SIZE: usize = 32;
/// Flag: the strings follow the header (Go 1.18+).
const FLAG_INLINE: u8 = 2;
/// Flag: big-endian pointers (not on x86-64).
const FLAG_BIG_ENDIAN: u8 = 1;
/// Longest version string taken ("go1.22.12", "devel go1.24-abcdef...").
const MAX_VERSION_LEN: usize = 128;

/// A Go release, `go<major>.<minor>[.<patch>]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoVersion {
    /// 1.
    pub major: u32,
    /// 22 in go1.22.12.
    pub minor: u32,
}

impl GoVersion {
    /// Parses "go1.22.12", "go1.24rc1", "devel go1.25-abc": `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<GoVersion> {
        let text = text.strip_prefix("devel ").unwrap_or(text);
        let rest = text.strip_prefix("go")?;
        let mut parts = rest.splitn(3, '.');
        let major = parts.next()?.parse().ok()?;
        let minor_text = parts.next()?;
        let digits = minor_text.bytes().take_while(u8::is_ascii_digit).count();
        let minor = minor_text.get(..digits)?.parse().ok()?;
        Some(GoVersion { major, minor })
    }
}

impl ElfFile {
    /// The Go version string of a Go executable's build info
    /// ("go1.22.12"), `None` when it has none (not Go, or a build info
    /// that cannot be read).
    pub fn go_version(&self) -> Option<String> {
        let section = self.section_by_name(".go.buildinfo")?;
        let data = self.section_data(section).ok()?;
        parse_buildinfo(data, |vaddr, len| self.bytes_at_vaddr(vaddr, len).map(<[u8]>::to_vec))
    }
}

/// The version string of build info bytes; `read(vaddr, len)` reads
/// what pointers (before Go 1.18) point to.
fn parse_buildinfo(data: &[u8], read: impl Fn(u64, usize) -> Option<Vec<u8>>) -> Option<String> {
    let header = data.get(..HEADER_SIZE)?;
    if !header.starts_with(MAGIC) {
        return None;
    }
    let ptr_size = usize::from(header[14]);
    let flags = header[15];
    let bytes = if flags & FLAG_INLINE != 0 {
        let (len, used) = uvarint(data.get(HEADER_SIZE..)?)?;
        let len = usize::try_from(len).ok().filter(|&l| l <= MAX_VERSION_LEN)?;
        let start = HEADER_SIZE + used;
        data.get(start..start + len)?.to_vec()
    } else {
        if ptr_size != 8 || flags & FLAG_BIG_ENDIAN != 0 {
            return None;
        }
        let word = |b: &[u8]| b.get(..8).and_then(|w| w.try_into().ok()).map(u64::from_le_bytes);
        let string_header = word(data.get(16..)?)?;
        let header = read(string_header, 16)?;
        let (ptr, len) = (word(&header)?, word(header.get(8..)?)?);
        let len = usize::try_from(len).ok().filter(|&l| l <= MAX_VERSION_LEN)?;
        read(ptr, len)?
    };
    let text = String::from_utf8(bytes).ok()?;
    (!text.is_empty()).then_some(text)
}

/// An unsigned LEB128 varint and its length in bytes.
fn uvarint(data: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in data.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(flags: u8) -> Vec<u8> {
        let mut h = MAGIC.to_vec();
        h.push(8);
        h.push(flags);
        h.resize(HEADER_SIZE, 0);
        h
    }

    #[test]
    fn reads_an_inline_version() {
        let mut data = header(FLAG_INLINE);
        data.push(9);
        data.extend_from_slice(b"go1.22.12");
        data.extend_from_slice(&[3, b'a', b'b', b'c']);
        assert_eq!(parse_buildinfo(&data, |_, _| None).as_deref(), Some("go1.22.12"));
        // Cut short, or not build info at all.
        assert_eq!(parse_buildinfo(&data[..40], |_, _| None), None);
        assert_eq!(parse_buildinfo(&data[1..], |_, _| None), None);
        let mut huge = header(FLAG_INLINE);
        huge.extend_from_slice(&[0xff, 0xff, 0x03]);
        huge.resize(70_000, b'x');
        assert_eq!(parse_buildinfo(&huge, |_, _| None), None);
    }

    #[test]
    fn follows_pointers_before_go_1_18() {
        let mut data = header(0);
        data[16..24].copy_from_slice(&0x5000u64.to_le_bytes());
        let read = |vaddr: u64, len: usize| -> Option<Vec<u8>> {
            match vaddr {
                0x5000 => {
                    let mut h = 0x6000u64.to_le_bytes().to_vec();
                    h.extend_from_slice(&8u64.to_le_bytes());
                    Some(h[..len].to_vec())
                }
                0x6000 => Some(b"go1.16.3"[..len].to_vec()),
                _ => None,
            }
        };
        assert_eq!(parse_buildinfo(&data, read).as_deref(), Some("go1.16.3"));
    }

    #[test]
    fn parses_versions() {
        assert_eq!(GoVersion::parse("go1.22.12"), Some(GoVersion { major: 1, minor: 22 }));
        assert_eq!(GoVersion::parse("go1.26"), Some(GoVersion { major: 1, minor: 26 }));
        assert_eq!(GoVersion::parse("go1.24rc1"), Some(GoVersion { major: 1, minor: 24 }));
        assert_eq!(GoVersion::parse("devel go1.25-abcdef"), Some(GoVersion { major: 1, minor: 25 }));
        assert_eq!(GoVersion::parse("1.22"), None);
        assert_eq!(GoVersion::parse("go"), None);
        assert!(GoVersion::parse("go1.9").unwrap() < GoVersion::parse("go1.10").unwrap());
    }
}
