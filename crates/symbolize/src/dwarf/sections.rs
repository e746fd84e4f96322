//! Reading a file's DWARF sections: the bytes of each section the index
//! reads ([`SectionBytes`]), served from the mapped file or, for
//! `SHF_COMPRESSED` zlib and zstd sections and legacy `.zdebug_*` zlib
//! sections, decompressed into memory once their declared size is found
//! plausible; the reader they are parsed with ([`Reader`]); and giving
//! back the mapped pages read so far ([`release_maps`]).

use std::collections::HashSet;
use std::ops::Deref;
use std::sync::Arc;

use profiler_elf::{ElfFile, SHF_COMPRESSED, SHT_NOBITS};

use super::DwarfError;
use crate::filemap::Backing;

/// `ch_type` of zlib-compressed sections (`ELFCOMPRESS_ZLIB`).
pub(super) const ELFCOMPRESS_ZLIB: u32 = 1;
/// `ch_type` of zstd-compressed sections (`ELFCOMPRESS_ZSTD`).
const ELFCOMPRESS_ZSTD: u32 = 2;
/// Size of `Elf64_Chdr`.
const CHDR_SIZE: usize = 24;
/// Largest section we decompress (a guard against decompression bombs).
const MAX_DECOMPRESSED_SECTION: u64 = 512 << 20;
/// Largest ratio of a section's declared decompressed size to its
/// compressed size that we accept (DWARF compresses 3-10x; zstd's RLE
/// blocks let a few KB claim gigabytes).
const MAX_COMPRESSION_RATIO: u64 = 64;
/// Sections this small are accepted whatever their ratio.
const SMALL_SECTION: u64 = 64 << 10;
/// The sections the index reads; `gimli::Dwarf::load` asks for others
/// too (locations, macros, type units, name indexes), which are left
/// empty: neither decompressed nor counted against the limit.
pub(super) const READ_SECTIONS: [gimli::SectionId; 10] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
];

/// One file whose DWARF sections are read: its headers, and the bytes
/// uncompressed sections are served from (a map the symbolizer can
/// release, or the `ElfFile`'s own bytes).
pub(crate) struct DwarfFile {
    pub elf: Arc<ElfFile>,
    pub bytes: Backing,
}

/// The bytes of one DWARF section: cheap to clone, and they stay where
/// they are while any clone lives.
#[derive(Clone)]
pub(crate) struct SectionBytes {
    pub(super) backing: Backing,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SectionBytes({} bytes)", self.len)
    }
}

impl Deref for SectionBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.backing.data().get(self.start..self.start + self.len).unwrap_or(&[])
    }
}

/// The reader every DWARF section is parsed with: a bare slice (16
/// bytes).
///
/// The slices are `'static` only in name: they borrow from the
/// [`SectionBytes`] that [`Dwarf`](super::Dwarf) keeps next to its sections; what the
/// index keeps is copied out of them (file names) or refers to them by
/// offset (names, [`NameRef`](super::names::NameRef)).
pub(crate) type Reader = gimli::EndianSlice<'static, gimli::LittleEndian>;

/// A reader over `bytes`, to be kept only as long as `bytes` (or a clone).
pub(super) fn reader(bytes: &SectionBytes) -> Reader {
    let slice: &[u8] = bytes;
    // SAFETY: the bytes live in a map or heap buffer behind an `Arc`
    // (`FileMap`, `ElfFile`, decompressed `Vec`) that never changes them;
    // moving or cloning a `SectionBytes` moves only the `Arc`, never the
    // bytes. The `Dwarf` that parses with this reader keeps a clone of
    // `bytes` in `owners` and drops its sections first (field order);
    // its tables hold copies (file names) or offsets (names), never a
    // reader or pointer, and the units parsed for a lookup or an inline
    // tree are dropped before it returns.
    let slice: &'static [u8] = unsafe { std::slice::from_raw_parts(slice.as_ptr(), slice.len()) };
    gimli::EndianSlice::new(slice, gimli::LittleEndian)
}

/// Gives back the pages read so far of the maps `owners` are read from.
pub(super) fn release_maps(owners: &[SectionBytes]) {
    let mut seen = HashSet::new();
    for o in owners {
        if let Backing::Map(m) = &o.backing {
            if seen.insert(Arc::as_ptr(m)) {
                m.release();
            }
        }
    }
}

/// Whether `name` is one of [`READ_SECTIONS`], or its legacy `.zdebug`
/// form.
fn is_read_section(name: &str) -> bool {
    let name = name.strip_prefix(".z").unwrap_or(name.strip_prefix('.').unwrap_or(name));
    READ_SECTIONS.iter().any(|id| id.name().strip_prefix('.') == Some(name))
}

/// Bytes the compressed DWARF sections of `elf` that the index reads
/// take once decompressed (as their headers say).
pub(super) fn inflated_size(elf: &ElfFile) -> u64 {
    // Saturating: declared sizes are the file's, any u64.
    elf.sections()
        .iter()
        .filter(|s| s.sh_type != SHT_NOBITS && is_read_section(&s.name))
        .filter_map(|s| {
            let data = elf.section_data(s).ok()?;
            if s.name.starts_with(".debug_") && s.flags & SHF_COMPRESSED != 0 {
                Some(u64::from_le_bytes(data.get(8..16)?.try_into().ok()?))
            } else if s.name.starts_with(".zdebug_") && data.starts_with(b"ZLIB") {
                Some(u64::from_be_bytes(data.get(4..12)?.try_into().ok()?))
            } else {
                None
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// Whether `declared` bytes could come out of `compressed` bytes: under
/// [`MAX_DECOMPRESSED_SECTION`] and [`MAX_COMPRESSION_RATIO`] times the
/// input. Checked before anything is allocated for the output.
fn plausible_size(declared: u64, compressed: usize) -> bool {
    declared <= MAX_DECOMPRESSED_SECTION
        && declared <= (compressed as u64).saturating_mul(MAX_COMPRESSION_RATIO).max(SMALL_SECTION)
}

/// The bytes of section `name` (or its legacy `.zdebug` form),
/// decompressed when needed; empty when the file lacks it.
pub(super) fn section_bytes(file: &DwarfFile, name: &str) -> Result<SectionBytes, DwarfError> {
    let elf = &file.elf;
    let section = elf.section_by_name(name).filter(|s| s.sh_type != SHT_NOBITS);
    let Some(section) = section else {
        // GNU's old convention: `.zdebug_info` = "ZLIB", big-endian u64
        // size, zlib stream.
        let zname = format!(".z{}", name.trim_start_matches('.'));
        let Some(z) = elf.section_by_name(&zname).filter(|s| s.sh_type != SHT_NOBITS) else {
            return Ok(empty_section());
        };
        let data = elf.section_data(z).unwrap_or(&[]);
        let bad = || DwarfError::Decompress { section: zname.clone() };
        if data.len() < 12 || &data[..4] != b"ZLIB" {
            return Err(bad());
        }
        let size = u64::from_be_bytes(data[4..12].try_into().map_err(|_| bad())?);
        return inflate(&data[12..], size).map_err(|_| bad()).map(owned);
    };
    let Ok(data) = elf.section_data(section) else {
        // A section past the end of the file: treat it as absent.
        return Ok(empty_section());
    };
    if section.flags & SHF_COMPRESSED == 0 {
        let start = section.offset as usize;
        return Ok(SectionBytes { backing: file.bytes.clone(), start, len: data.len() });
    }
    let bad = || DwarfError::Decompress { section: name.to_owned() };
    if data.len() < CHDR_SIZE {
        return Err(bad());
    }
    let kind = u32::from_le_bytes(data[0..4].try_into().map_err(|_| bad())?);
    let size = u64::from_le_bytes(data[8..16].try_into().map_err(|_| bad())?);
    let body = &data[CHDR_SIZE..];
    match kind {
        ELFCOMPRESS_ZLIB => inflate(body, size).map_err(|_| bad()).map(owned),
        ELFCOMPRESS_ZSTD => unzstd(body, size).map_err(|_| bad()).map(owned),
        _ => Err(DwarfError::UnsupportedCompression { section: name.to_owned(), kind }),
    }
}

/// A section the file lacks (or that is not read).
pub(super) fn empty_section() -> SectionBytes {
    SectionBytes { backing: Backing::Owned(Arc::new(Vec::new())), start: 0, len: 0 }
}

fn owned(v: Vec<u8>) -> SectionBytes {
    let len = v.len();
    SectionBytes { backing: Backing::Owned(Arc::new(v)), start: 0, len }
}

/// Inflates a zlib stream that must produce exactly `size` bytes, into a
/// buffer of exactly that size (growing a buffer would leave the
/// allocator holding up to twice the memory). The size is checked first
/// ([`plausible_size`]); the zeroed buffer is untouched (not resident)
/// beyond what the stream writes, and the stream cannot write past it.
fn inflate(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if !plausible_size(size, data.len()) {
        return Err(());
    }
    // One byte more than announced, to notice a stream that is longer.
    let mut out = vec![0u8; size as usize + 1];
    let n = miniz_oxide::inflate::decompress_slice_iter_to_slice(&mut out, std::iter::once(data), true, false)
        .map_err(|_| ())?;
    if n as u64 != size {
        return Err(());
    }
    out.truncate(n);
    Ok(out)
}

/// Decompresses zstd frames that must produce exactly `size` bytes.
fn unzstd(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if !plausible_size(size, data.len()) {
        return Err(());
    }
    let mut out = vec![0u8; size as usize + 1];
    let n = ruzstd::decoding::FrameDecoder::new().decode_all(data, &mut out).map_err(|_| ())?;
    if n as u64 != size {
        return Err(());
    }
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflate_checks_size() {
        // zlib stream of b"hello" (stored block).
        let z = [0x78, 0x01, 0x01, 0x05, 0x00, 0xfa, 0xff, b'h', b'e', b'l', b'l', b'o', 0x06, 0x2c, 0x02, 0x15];
        assert_eq!(inflate(&z, 5), Ok(b"hello".to_vec()));
        assert!(inflate(&z, 4).is_err());
        assert!(inflate(&z, 6).is_err());
        assert!(inflate(&z[..8], 5).is_err());
        assert!(inflate(&z, MAX_DECOMPRESSED_SECTION + 1).is_err());
        assert!(inflate(&z, SMALL_SECTION + 1).is_err(), "over the ratio");
    }

    #[test]
    fn unzstd_rejects_garbage() {
        assert!(unzstd(&[], 0).is_ok());
        assert!(unzstd(&[0x28, 0xb5, 0x2f, 0xfd, 0xff], 5).is_err());
        assert!(unzstd(b"not zstd at all", 5).is_err());
        assert!(unzstd(&[], MAX_DECOMPRESSED_SECTION + 1).is_err());
        assert!(unzstd(&[0; 1000], 1000 * MAX_COMPRESSION_RATIO + 1).is_err(), "over the ratio");
    }
}
