//! DWARF line tables and inline frames through `addr2line`, reading the
//! sections straight from the mapped file (decompressing `SHF_COMPRESSED`
//! zlib and zstd sections and legacy `.zdebug_*` zlib sections into
//! memory).

use std::ops::Deref;
use std::sync::Arc;

use profiler_elf::{ElfFile, SHF_COMPRESSED, SHT_NOBITS};

/// `ch_type` of zlib-compressed sections (`ELFCOMPRESS_ZLIB`).
const ELFCOMPRESS_ZLIB: u32 = 1;
/// `ch_type` of zstd-compressed sections (`ELFCOMPRESS_ZSTD`).
const ELFCOMPRESS_ZSTD: u32 = 2;
/// Size of `Elf64_Chdr`.
const CHDR_SIZE: usize = 24;
/// Largest section we decompress (a guard against decompression bombs).
const MAX_DECOMPRESSED: u64 = 2 << 30;

/// Who keeps a section's bytes alive.
#[derive(Clone)]
enum Backing {
    /// A range of the (mapped) file.
    File(Arc<ElfFile>),
    /// Decompressed bytes (a `Vec` decompressed in place at its final
    /// size: no copy, no slack).
    Owned(Arc<Vec<u8>>),
}

/// The bytes of one DWARF section: cheap to clone, and they stay where
/// they are while any clone lives.
#[derive(Clone)]
pub(crate) struct SectionBytes {
    backing: Backing,
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
        let all: &[u8] = match &self.backing {
            Backing::File(f) => f.data(),
            Backing::Owned(v) => v,
        };
        all.get(self.start..self.start + self.len).unwrap_or(&[])
    }
}

// SAFETY: the bytes `deref` returns live in an `ElfFile` (a read-only map
// or a heap buffer it owns and never changes) or in an `Arc<[u8]>`, both
// behind an `Arc`: moving or cloning a `SectionBytes` moves only the
// `Arc` pointer, never the bytes, and they live as long as any clone.
unsafe impl gimli::StableDeref for SectionBytes {}
// SAFETY: as above; clones share the same `Arc` and so the same bytes.
unsafe impl gimli::CloneStableDeref for SectionBytes {}

/// The reader every DWARF section is parsed with.
pub(crate) type Reader = gimli::EndianReader<gimli::LittleEndian, SectionBytes>;

/// One frame as DWARF names it.
pub(crate) struct DwarfFrame {
    /// Raw (possibly mangled) function name.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: u32,
}

/// The DWARF of one file, ready for lookups.
pub(crate) struct Dwarf {
    context: addr2line::Context<Reader>,
    /// Bytes decompressed into memory.
    owned_bytes: u64,
    /// Bytes of `.debug_info`, a proxy for what lazy parsing may cost.
    info_bytes: u64,
    /// Bytes of `.debug_abbrev`: every unit's abbreviations are parsed up
    /// front and kept, at about 24 bytes of memory per byte (measured on
    /// glibc's debug file: 0.98 MB of abbreviations, 23.7 MB parsed).
    abbrev_bytes: u64,
}

/// Why the DWARF of a file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DwarfError {
    /// The file has no `.debug_info`.
    #[error("no .debug_info")]
    Missing,
    /// A compressed section uses another format than zlib or zstd.
    #[error("{section}: unsupported compression type {kind}")]
    UnsupportedCompression {
        /// Section name.
        section: String,
        /// `ch_type`.
        kind: u32,
    },
    /// A compressed section does not decompress.
    #[error("{section}: corrupt compressed data")]
    Decompress {
        /// Section name.
        section: String,
    },
    /// The units could not be parsed.
    #[error("malformed DWARF")]
    Parse(#[source] gimli::Error),
}

impl Dwarf {
    /// Parses the unit index of `elf`'s DWARF (the costly part: every
    /// unit header and address range), leaving line tables and function
    /// trees to be parsed on first lookup in each unit.
    ///
    /// `sup` is the supplementary file `.gnu_debugaltlink` names (DWARF
    /// shared between files by `dwz`), when found.
    pub(crate) fn load(
        elf: &Arc<ElfFile>,
        sup: Option<&Arc<ElfFile>>,
    ) -> Result<Dwarf, DwarfError> {
        let has_info = elf.sections().iter().any(|s| {
            (s.name == ".debug_info" || s.name == ".zdebug_info")
                && s.size > 0
                && s.sh_type != SHT_NOBITS
        });
        if !has_info {
            return Err(DwarfError::Missing);
        }
        let mut owned_bytes = 0u64;
        let mut info_bytes = 0u64;
        let mut abbrev_bytes = 0u64;
        let mut dwarf = gimli::Dwarf::load(|id| -> Result<Reader, DwarfError> {
            let bytes = section_bytes(elf, id.name())?;
            if let Backing::Owned(_) = bytes.backing {
                owned_bytes += bytes.len as u64;
            }
            match id {
                gimli::SectionId::DebugInfo => info_bytes = bytes.len as u64,
                gimli::SectionId::DebugAbbrev => abbrev_bytes = bytes.len as u64,
                _ => {}
            }
            Ok(gimli::EndianReader::new(bytes, gimli::LittleEndian))
        })?;
        if let Some(sup) = sup {
            dwarf.load_sup(|id| -> Result<Reader, DwarfError> {
                let bytes = section_bytes(sup, id.name())?;
                if let Backing::Owned(_) = bytes.backing {
                    owned_bytes += bytes.len as u64;
                }
                if id == gimli::SectionId::DebugAbbrev {
                    abbrev_bytes += bytes.len as u64;
                }
                Ok(gimli::EndianReader::new(bytes, gimli::LittleEndian))
            })?;
        }
        let context = addr2line::Context::from_dwarf(dwarf).map_err(DwarfError::Parse)?;
        Ok(Dwarf {
            context,
            owned_bytes,
            info_bytes,
            abbrev_bytes,
        })
    }

    /// Estimated heap bytes: decompressed sections, parsed
    /// abbreviations, and an allowance for what lookups parse lazily
    /// (line tables and function trees of the units looked up).
    pub(crate) fn cost(&self) -> u64 {
        self.owned_bytes + self.abbrev_bytes * 24 + self.info_bytes / 4
    }

    /// The frames of `vaddr`, innermost first; empty when no unit covers
    /// it or the DWARF there is broken.
    pub(crate) fn frames(&self, vaddr: u64) -> Vec<DwarfFrame> {
        let mut out = Vec::new();
        let Ok(mut iter) = self.context.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        // A malformed tree could in principle loop; inline depth is small.
        while out.len() < 128 {
            let frame = match iter.next() {
                Ok(Some(f)) => f,
                Ok(None) | Err(_) => break,
            };
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok())
                .map(|n| n.into_owned());
            let (file, line) = match &frame.location {
                Some(l) => (l.file.map(str::to_owned), l.line.unwrap_or(0)),
                None => (None, 0),
            };
            out.push(DwarfFrame {
                function,
                file,
                line,
            });
        }
        out
    }
}

/// The bytes of section `name` (or its legacy `.zdebug` form),
/// decompressed when needed; empty when the file lacks it.
fn section_bytes(elf: &Arc<ElfFile>, name: &str) -> Result<SectionBytes, DwarfError> {
    let empty = || SectionBytes {
        backing: Backing::Owned(Arc::new(Vec::new())),
        start: 0,
        len: 0,
    };
    let section = elf
        .section_by_name(name)
        .filter(|s| s.sh_type != SHT_NOBITS);
    let Some(section) = section else {
        // GNU's old convention: `.zdebug_info` = "ZLIB", big-endian u64
        // size, zlib stream.
        let zname = format!(".z{}", name.trim_start_matches('.'));
        let Some(z) = elf
            .section_by_name(&zname)
            .filter(|s| s.sh_type != SHT_NOBITS)
        else {
            return Ok(empty());
        };
        let data = elf.section_data(z).unwrap_or(&[]);
        let bad = || DwarfError::Decompress {
            section: zname.clone(),
        };
        if data.len() < 12 || &data[..4] != b"ZLIB" {
            return Err(bad());
        }
        let size = u64::from_be_bytes(data[4..12].try_into().map_err(|_| bad())?);
        return inflate(&data[12..], size).map_err(|_| bad()).map(owned);
    };
    let Ok(data) = elf.section_data(section) else {
        // A section past the end of the file: treat it as absent.
        return Ok(empty());
    };
    if section.flags & SHF_COMPRESSED == 0 {
        let start = section.offset as usize;
        return Ok(SectionBytes {
            backing: Backing::File(elf.clone()),
            start,
            len: data.len(),
        });
    }
    let bad = || DwarfError::Decompress {
        section: name.to_owned(),
    };
    if data.len() < CHDR_SIZE {
        return Err(bad());
    }
    let kind = u32::from_le_bytes(data[0..4].try_into().map_err(|_| bad())?);
    let size = u64::from_le_bytes(data[8..16].try_into().map_err(|_| bad())?);
    let body = &data[CHDR_SIZE..];
    match kind {
        ELFCOMPRESS_ZLIB => inflate(body, size).map_err(|_| bad()).map(owned),
        ELFCOMPRESS_ZSTD => unzstd(body, size).map_err(|_| bad()).map(owned),
        _ => Err(DwarfError::UnsupportedCompression {
            section: name.to_owned(),
            kind,
        }),
    }
}

fn owned(v: Vec<u8>) -> SectionBytes {
    let len = v.len();
    SectionBytes {
        backing: Backing::Owned(Arc::new(v)),
        start: 0,
        len,
    }
}

/// Inflates a zlib stream that must produce exactly `size` bytes, into a
/// buffer of exactly that size (growing a buffer would leave the
/// allocator holding up to twice the memory).
fn inflate(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if size > MAX_DECOMPRESSED {
        return Err(());
    }
    // One byte more than announced, to notice a stream that is longer.
    let mut out = vec![0u8; size as usize + 1];
    let n = miniz_oxide::inflate::decompress_slice_iter_to_slice(
        &mut out,
        std::iter::once(data),
        true,
        false,
    )
    .map_err(|_| ())?;
    if n as u64 != size {
        return Err(());
    }
    out.truncate(n);
    Ok(out)
}

/// Decompresses zstd frames that must produce exactly `size` bytes.
fn unzstd(data: &[u8], size: u64) -> Result<Vec<u8>, ()> {
    if size > MAX_DECOMPRESSED {
        return Err(());
    }
    let mut out = vec![0u8; size as usize + 1];
    let n = ruzstd::decoding::FrameDecoder::new()
        .decode_all(data, &mut out)
        .map_err(|_| ())?;
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
        let z = [
            0x78, 0x01, 0x01, 0x05, 0x00, 0xfa, 0xff, b'h', b'e', b'l', b'l', b'o', 0x06, 0x2c,
            0x02, 0x15,
        ];
        assert_eq!(inflate(&z, 5), Ok(b"hello".to_vec()));
        assert!(inflate(&z, 4).is_err());
        assert!(inflate(&z, 6).is_err());
        assert!(inflate(&z[..8], 5).is_err());
        assert!(inflate(&z, MAX_DECOMPRESSED + 1).is_err());
    }

    #[test]
    fn unzstd_rejects_garbage() {
        assert!(unzstd(&[], 0).is_ok());
        assert!(unzstd(&[0x28, 0xb5, 0x2f, 0xfd, 0xff], 5).is_err());
        assert!(unzstd(b"not zstd at all", 5).is_err());
        assert!(unzstd(&[], MAX_DECOMPRESSED + 1).is_err());
    }
}
