//! Opening an ELF file and reading its headers.
//!
//! Field offsets and constants are those of the System V gABI ("ELF-64
//! Object File Format", and the "Generic System V ABI" chapter 4) for
//! ELF64; only x86-64 little-endian files are accepted for now.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::arch::EM_X86_64;
use crate::error::{Error, Result};
use crate::map_guard::MapGuard;

/// `e_ident[EI_CLASS]` value of 64-bit files.
const ELFCLASS64: u8 = 2;
/// `e_ident[EI_DATA]` value of little-endian files.
const ELFDATA2LSB: u8 = 1;
/// Size of the ELF64 file header.
const EHDR_SIZE: usize = 64;
/// Size of an ELF64 program header.
const PHDR_SIZE: usize = 56;
/// Size of an ELF64 section header.
const SHDR_SIZE: usize = 64;
/// `e_phnum` value meaning "the real count is in section 0's `sh_info`".
const PN_XNUM: u16 = 0xffff;
/// `e_shstrndx` value meaning "the real index is in section 0's `sh_link`".
const SHN_XINDEX: u16 = 0xffff;

/// `e_type` of a fixed-address executable.
pub const ET_EXEC: u16 = 2;
/// `e_type` of a shared object or position-independent executable.
pub const ET_DYN: u16 = 3;

/// Program header type of a loadable segment.
pub const PT_LOAD: u32 = 1;
/// Program header type naming the program interpreter (`ld.so`).
pub const PT_INTERP: u32 = 3;
/// Program header type of a notes segment.
pub const PT_NOTE: u32 = 4;
/// Program header type pointing at `.eh_frame_hdr` (a GNU extension).
pub const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
/// Program header flag of an executable segment.
pub const PF_X: u32 = 1;

/// Section type of a static symbol table.
pub const SHT_SYMTAB: u32 = 2;
/// Section type of a notes section.
pub const SHT_NOTE: u32 = 7;
/// Section type of a section that occupies no file space (`.bss`).
pub const SHT_NOBITS: u32 = 8;
/// Section type of a dynamic symbol table.
pub const SHT_DYNSYM: u32 = 11;
/// Section flag of compressed sections (`Elf64_Chdr` + compressed data).
pub const SHF_COMPRESSED: u64 = 0x800;

/// Files smaller than this are read into memory by [`ElfFile::open`]
/// instead of mapped.
pub const READ_INTO_MEMORY_BELOW: u64 = 256 * 1024;
/// Most program headers read (real files have a dozen; the count can
/// reach 2^32 - 1 through section 0's `sh_info`).
pub const MAX_PROGRAM_HEADERS: u64 = 4096;
/// Most section headers read (linked files have well under a hundred,
/// relocatable objects built with `-ffunction-sections` some thousands).
/// A table claiming more is ignored, as a truncated one is: the program
/// headers are all that unwinding needs.
pub const MAX_SECTION_HEADERS: u64 = 1 << 16;

/// Bounds-checked little-endian reads from file data.
pub(crate) trait ReadLe {
    fn u8_at(&self, off: usize) -> Option<u8>;
    fn u16_at(&self, off: usize) -> Option<u16>;
    fn u32_at(&self, off: usize) -> Option<u32>;
    fn u64_at(&self, off: usize) -> Option<u64>;
}

impl ReadLe for [u8] {
    fn u8_at(&self, off: usize) -> Option<u8> {
        self.get(off).copied()
    }
    fn u16_at(&self, off: usize) -> Option<u16> {
        let b = self.get(off..off.checked_add(2)?)?;
        Some(u16::from_le_bytes(b.try_into().ok()?))
    }
    fn u32_at(&self, off: usize) -> Option<u32> {
        let b = self.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }
    fn u64_at(&self, off: usize) -> Option<u64> {
        let b = self.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// `data[offset..offset+size]`, or a [`Error::Truncated`] naming `what`.
pub(crate) fn slice<'a>(data: &'a [u8], what: &'static str, offset: u64, size: u64) -> Result<&'a [u8]> {
    let truncated = || Error::Truncated { what, offset, size, file_len: data.len() as u64 };
    let start = usize::try_from(offset).map_err(|_| truncated())?;
    let len = usize::try_from(size).map_err(|_| truncated())?;
    let end = start.checked_add(len).ok_or_else(truncated)?;
    data.get(start..end).ok_or_else(truncated)
}

/// One entry of the program header table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramHeader {
    /// Segment type (`PT_LOAD`, `PT_NOTE`, ...).
    pub p_type: u32,
    /// Permission flags (`PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
    /// File offset of the segment's first byte.
    pub offset: u64,
    /// Virtual address of the segment's first byte (before relocation).
    pub vaddr: u64,
    /// Bytes of the segment present in the file.
    pub filesz: u64,
    /// Bytes of the segment in memory (≥ `filesz`; the rest is zero-filled).
    pub memsz: u64,
    /// Alignment.
    pub align: u64,
}

/// One entry of the section header table, with its name resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Name from the section name string table (empty when unavailable).
    pub name: String,
    /// Section type (`SHT_*`).
    pub sh_type: u32,
    /// Flags (`SHF_*`).
    pub flags: u64,
    /// Virtual address when loaded, 0 for non-allocated sections.
    pub addr: u64,
    /// File offset.
    pub offset: u64,
    /// Size in bytes (in the file unless `SHT_NOBITS`).
    pub size: u64,
    /// Index of an associated section (e.g. the string table of a symbol table).
    pub link: u32,
    /// Extra information, type dependent.
    pub info: u32,
    /// Required alignment.
    pub addralign: u64,
    /// Size of one entry for table sections.
    pub entsize: u64,
}

/// The bytes of the file: mapped, or owned.
enum Data {
    /// The map's registration with the `SIGBUS` guard (dropped first, before
    /// the map), the map, and the file for reads that should not fault pages
    /// of the map into our resident set.
    Mapped(MapGuard, Mmap, File),
    Owned(Vec<u8>),
}

/// An x86-64 ELF64 little-endian file, with its headers parsed and checked.
///
/// Construct with [`ElfFile::open`] (maps or reads a file) or
/// [`ElfFile::from_bytes`] (data already in memory, e.g. the vDSO read from
/// a process). Everything else in the crate reads from an `ElfFile`.
pub struct ElfFile {
    data: Data,
    e_type: u16,
    entry: u64,
    phdrs: Vec<ProgramHeader>,
    sections: Vec<Section>,
    sections_ignored: Option<Error>,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile")
            .field("len", &self.data().len())
            .field("e_type", &self.e_type)
            .field("program_headers", &self.phdrs.len())
            .field("sections", &self.sections.len())
            .finish()
    }
}

impl ElfFile {
    /// Opens `path` (a regular file within
    /// [`crate::source::MAX_EXECUTABLE_BYTES`], see
    /// [`crate::source::open_regular`]): small files are read into
    /// memory, larger ones are mapped read-only.
    pub fn open(path: impl AsRef<Path>) -> Result<ElfFile> {
        let path = path.as_ref();
        let io_err = |source| Error::Io { path: path.to_owned(), source };
        let opened =
            crate::source::open_regular(path, crate::source::Purpose::Executable).map_err(|e| io_err(e.into()))?;
        ElfFile::from_file(opened.file, opened.identity.size).map_err(|e| match e {
            Error::Io { source, .. } => io_err(source),
            other => other,
        })
    }

    /// Reads (small) or maps (large) the first `len` bytes of an open
    /// file, e.g. one opened by [`crate::source`] (`len` is the size its
    /// checks saw: growing the file later does not grow what is read).
    pub fn from_file(file: File, len: u64) -> Result<ElfFile> {
        let io_err = |source| Error::Io { path: "<descriptor>".into(), source };
        let data = if len < READ_INTO_MEMORY_BELOW {
            let mut buf = vec![0u8; len as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, 0).map_err(io_err)?;
            Data::Owned(buf)
        } else {
            let len = usize::try_from(len).map_err(|_| io_err(std::io::ErrorKind::InvalidInput.into()))?;
            // SAFETY: the map is private and read-only, so we never write
            // through it and nobody else sees our view. What memmap2 cannot
            // promise is that the file stays unchanged while mapped: if
            // another process truncates it, reads past the new end fault
            // (SIGBUS); the map guard turns those pages into zero pages and
            // marks the file changed (see `map_guard`), so the results are
            // discarded. In-place writes change the bytes under us; all
            // parsing is bounds-checked against the length seen at map
            // time, so changed bytes can only produce wrong results or
            // errors, never out-of-bounds reads.
            let map = unsafe { memmap2::MmapOptions::new().len(len).map(&file) }.map_err(io_err)?;
            let guard = MapGuard::register(map.as_ptr(), map.len());
            Data::Mapped(guard, map, file)
        };
        ElfFile::parse(data)
    }

    /// Parses ELF data already in memory.
    pub fn from_bytes(data: Vec<u8>) -> Result<ElfFile> {
        ElfFile::parse(Data::Owned(data))
    }

    fn parse(data: Data) -> Result<ElfFile> {
        let bytes: &[u8] = match &data {
            Data::Mapped(_, m, _) => m,
            Data::Owned(v) => v,
        };
        if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err(Error::NotElf);
        }
        let header = slice(bytes, "ELF header", 0, EHDR_SIZE as u64)?;
        let class = header[4];
        if class != ELFCLASS64 {
            return Err(Error::Unsupported { what: "EI_CLASS", value: class.into(), expected: "ELFCLASS64 (2)" });
        }
        let encoding = header[5];
        if encoding != ELFDATA2LSB {
            return Err(Error::Unsupported { what: "EI_DATA", value: encoding.into(), expected: "ELFDATA2LSB (1)" });
        }
        // The header slice is exactly EHDR_SIZE bytes, so these reads cannot
        // fail; `unwrap_or` keeps the code panic-free anyway.
        let e_type = header.u16_at(16).unwrap_or(0);
        let machine = header.u16_at(18).unwrap_or(0);
        if machine != EM_X86_64 {
            return Err(Error::Unsupported { what: "e_machine", value: machine.into(), expected: "EM_X86_64 (62)" });
        }
        let entry = header.u64_at(24).unwrap_or(0);
        let phoff = header.u64_at(32).unwrap_or(0);
        let shoff = header.u64_at(40).unwrap_or(0);
        let phentsize = header.u16_at(54).unwrap_or(0);
        let mut phnum = u64::from(header.u16_at(56).unwrap_or(0));
        let shentsize = header.u16_at(58).unwrap_or(0);
        let shnum = u64::from(header.u16_at(60).unwrap_or(0));
        let shstrndx = u64::from(header.u16_at(62).unwrap_or(0));

        // Section 0 holds the real counts when they overflow 16 bits
        // (gABI "Extended section numbering"). A section header table
        // that cannot be read is ignored, not the file: unwinding needs
        // the program headers only.
        let mut sections_ignored = None;
        let mut section_table = None;
        if shoff != 0 {
            match section_header_table(bytes, shoff, shentsize, shnum, shstrndx) {
                Ok((table, strndx, sh0_info)) => {
                    section_table = Some((table, strndx));
                    if phnum == u64::from(PN_XNUM) {
                        phnum = sh0_info;
                    }
                }
                Err(e) => sections_ignored = Some(e),
            }
        }

        let mut phdrs = Vec::new();
        if phnum > 0 {
            if usize::from(phentsize) != PHDR_SIZE {
                return Err(Error::Malformed { what: "e_phentsize", value: phentsize.into() });
            }
            if phnum > MAX_PROGRAM_HEADERS {
                return Err(Error::OverLimit { what: "e_phnum", value: phnum, limit: MAX_PROGRAM_HEADERS });
            }
            let table = slice(bytes, "program header table", phoff, phnum * PHDR_SIZE as u64)?;
            phdrs.reserve(phnum as usize);
            for ph in table.chunks_exact(PHDR_SIZE) {
                phdrs.push(ProgramHeader {
                    p_type: ph.u32_at(0).unwrap_or(0),
                    flags: ph.u32_at(4).unwrap_or(0),
                    offset: ph.u64_at(8).unwrap_or(0),
                    vaddr: ph.u64_at(16).unwrap_or(0),
                    filesz: ph.u64_at(32).unwrap_or(0),
                    memsz: ph.u64_at(40).unwrap_or(0),
                    align: ph.u64_at(48).unwrap_or(0),
                });
            }
        }

        let mut sections = Vec::new();
        if let Some((table, shstrndx)) = section_table {
            // Bounded by MAX_SECTION_HEADERS through the table's size.
            let count = table.len() / SHDR_SIZE;
            sections.reserve(count);
            let mut name_offsets = Vec::with_capacity(count);
            for sh in table.chunks_exact(SHDR_SIZE) {
                name_offsets.push(sh.u32_at(0).unwrap_or(0));
                sections.push(Section {
                    name: String::new(),
                    sh_type: sh.u32_at(4).unwrap_or(0),
                    flags: sh.u64_at(8).unwrap_or(0),
                    addr: sh.u64_at(16).unwrap_or(0),
                    offset: sh.u64_at(24).unwrap_or(0),
                    size: sh.u64_at(32).unwrap_or(0),
                    link: sh.u32_at(40).unwrap_or(0),
                    info: sh.u32_at(44).unwrap_or(0),
                    addralign: sh.u64_at(48).unwrap_or(0),
                    entsize: sh.u64_at(56).unwrap_or(0),
                });
            }
            // Names are a convenience: a broken string table leaves them
            // empty rather than rejecting an otherwise usable file.
            let strtab = usize::try_from(shstrndx)
                .ok()
                .and_then(|i| sections.get(i))
                .filter(|s| s.sh_type != SHT_NOBITS)
                .and_then(|s| slice(bytes, "section name table", s.offset, s.size).ok());
            if let Some(strtab) = strtab {
                for (section, name_off) in sections.iter_mut().zip(name_offsets) {
                    section.name = cstr_at(strtab, name_off as usize)
                        .map(|n| String::from_utf8_lossy(n).into_owned())
                        .unwrap_or_default();
                }
            }
        }

        Ok(ElfFile { data, e_type, entry, phdrs, sections, sections_ignored })
    }

    /// All bytes of the file.
    pub fn data(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(_, m, _) => m,
            Data::Owned(v) => v,
        }
    }

    /// Drops the pages of `part` (a slice of [`ElfFile::data`]) from our
    /// resident set when the file is mapped: a big section read once and
    /// read again later (`.eh_frame` by the table builder's two passes)
    /// need not stay resident in between. Its bytes stay readable: a later
    /// read faults them in again from the page cache. No-op otherwise.
    pub fn release(&self, part: &[u8]) {
        if let Data::Mapped(_, map, _) = &self.data {
            release_mapped(map, part);
        }
    }

    /// Whether the file shrank while it was mapped: everything read from
    /// it may be garbage and must be discarded (counted in
    /// [`crate::map_guard::files_changed_while_read`]).
    pub fn changed_while_read(&self) -> bool {
        match &self.data {
            Data::Mapped(guard, _, _) => guard.changed(),
            Data::Owned(_) => false,
        }
    }

    /// Why the section header table was ignored (truncated, absurd), when
    /// it was: [`ElfFile::sections`] is then empty and only the program
    /// headers are used.
    pub fn sections_ignored(&self) -> Option<&Error> {
        self.sections_ignored.as_ref()
    }

    /// `e_type`: [`ET_EXEC`], [`ET_DYN`], ...
    pub fn elf_type(&self) -> u16 {
        self.e_type
    }

    /// Whether the file is loaded at an address chosen at run time (shared
    /// objects and PIE executables, `ET_DYN`).
    pub fn is_position_independent(&self) -> bool {
        self.e_type == ET_DYN
    }

    /// The entry point's virtual address (0 for most libraries).
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The entry point of a file meant to be run: an executable
    /// (`ET_EXEC`, or with a `PT_INTERP`) or the dynamic loader and
    /// static PIEs (`ET_DYN` without `PT_INTERP`, whose entry their
    /// linker was told). A library's `e_entry` at the very start of
    /// `.text` is GNU ld's default when no `_start` is defined (`crtstuff`
    /// code, nothing that starts a process): `None`, as for an entry of 0
    /// or outside an executable segment.
    pub fn program_entry(&self) -> Option<u64> {
        let entry = self.entry;
        // By memory size: a separate debug file keeps the segments
        // without their bytes.
        let executable = |p: &ProgramHeader| {
            p.p_type == PT_LOAD && p.flags & PF_X != 0 && entry >= p.vaddr && entry - p.vaddr < p.memsz
        };
        if entry == 0 || !self.phdrs.iter().any(executable) {
            return None;
        }
        let interp = self.phdrs.iter().any(|p| p.p_type == PT_INTERP);
        let linker_default = self.section_by_name(".text").is_none_or(|s| s.addr == entry);
        (self.e_type == ET_EXEC || interp || (self.e_type == ET_DYN && !linker_default)).then_some(entry)
    }

    /// The program header table.
    pub fn program_headers(&self) -> &[ProgramHeader] {
        &self.phdrs
    }

    /// The section header table (empty when section headers are stripped).
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// The first section named `name`.
    pub fn section_by_name(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The bytes of a section as stored in the file (`SHT_NOBITS` sections
    /// are empty; compressed sections are returned compressed).
    pub fn section_data(&self, section: &Section) -> Result<&[u8]> {
        if section.sh_type == SHT_NOBITS {
            return Ok(&[]);
        }
        slice(self.data(), "section data", section.offset, section.size)
    }

    /// The file bytes of a segment (`filesz` bytes from `offset`).
    pub fn segment_data(&self, phdr: &ProgramHeader) -> Result<&[u8]> {
        slice(self.data(), "segment data", phdr.offset, phdr.filesz)
    }

    /// The `PT_LOAD` segment whose file-backed part contains `vaddr`.
    pub fn load_segment_for_vaddr(&self, vaddr: u64) -> Option<&ProgramHeader> {
        self.phdrs.iter().find(|p| p.p_type == PT_LOAD && vaddr >= p.vaddr && vaddr - p.vaddr < p.filesz)
    }

    /// The file offset holding the byte loaded at `vaddr`, if any.
    pub fn vaddr_to_file_offset(&self, vaddr: u64) -> Option<u64> {
        let p = self.load_segment_for_vaddr(vaddr)?;
        p.offset.checked_add(vaddr - p.vaddr)
    }

    /// The file bytes loaded from `vaddr` up to the end of the file-backed
    /// part of its `PT_LOAD` segment (and within the file).
    pub fn data_from_vaddr(&self, vaddr: u64) -> Option<&[u8]> {
        let p = self.load_segment_for_vaddr(vaddr)?;
        let skip = vaddr - p.vaddr;
        let start = p.offset.checked_add(skip)?;
        let len = p.filesz - skip;
        let data = self.data();
        let start = usize::try_from(start).ok()?;
        let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)).min(data.len());
        data.get(start..end)
    }

    /// `len` file bytes loaded at `vaddr`, if they are all file-backed.
    pub fn bytes_at_vaddr(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        self.data_from_vaddr(vaddr)?.get(..len)
    }

    /// Copies the file bytes loaded at `vaddr` into `buf`; false unless all
    /// of them are file-backed.
    ///
    /// Unlike [`ElfFile::bytes_at_vaddr`], this reads a mapped file with
    /// `pread` instead of through the map: for a few bytes here and there
    /// across a large file (peeking at code), touching the map would fault
    /// in (and keep resident) the surrounding pages for nothing.
    pub fn read_at_vaddr(&self, vaddr: u64, buf: &mut [u8]) -> bool {
        let Some(available) = self.data_from_vaddr(vaddr).map(<[u8]>::len) else {
            return false;
        };
        let Some(offset) = self.vaddr_to_file_offset(vaddr) else {
            return false;
        };
        if available < buf.len() {
            return false;
        }
        match &self.data {
            Data::Mapped(_, _, file) => std::os::unix::fs::FileExt::read_exact_at(file, buf, offset).is_ok(),
            Data::Owned(v) => {
                let start = offset as usize; // within `v`: checked by data_from_vaddr
                match v.get(start..start + buf.len()) {
                    Some(src) => {
                        buf.copy_from_slice(src);
                        true
                    }
                    None => false,
                }
            }
        }
    }
}

/// The section header table at `shoff` (checked: entry size, count within
/// [`MAX_SECTION_HEADERS`], all of it in the data), the name table's
/// index, and section 0's `sh_info` (the real program header count when
/// `e_phnum` is `PN_XNUM`).
fn section_header_table(
    bytes: &[u8],
    shoff: u64,
    shentsize: u16,
    mut shnum: u64,
    mut shstrndx: u64,
) -> Result<(&[u8], u64, u64)> {
    if usize::from(shentsize) != SHDR_SIZE {
        return Err(Error::Malformed { what: "e_shentsize", value: shentsize.into() });
    }
    let sh0 = slice(bytes, "section header 0", shoff, SHDR_SIZE as u64)?;
    if shnum == 0 {
        shnum = sh0.u64_at(32).unwrap_or(0);
    }
    if shstrndx == u64::from(SHN_XINDEX) {
        shstrndx = u64::from(sh0.u32_at(40).unwrap_or(0));
    }
    let sh0_info = u64::from(sh0.u32_at(44).unwrap_or(0));
    if shnum > MAX_SECTION_HEADERS {
        return Err(Error::OverLimit { what: "e_shnum", value: shnum, limit: MAX_SECTION_HEADERS });
    }
    let table = slice(bytes, "section header table", shoff, shnum * SHDR_SIZE as u64)?;
    Ok((table, shstrndx, sh0_info))
}

/// The NUL-terminated string starting at `off` (without the NUL).
pub(crate) fn cstr_at(table: &[u8], off: usize) -> Option<&[u8]> {
    let rest = table.get(off..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

/// Drops the pages of `part` (a slice of `map`; anything else is left
/// alone) from our resident set: its bytes stay readable, a later read
/// faults them in again from the page cache. For the big files read now
/// and then (by [`ElfFile::release`], and the symbolizer's own maps).
pub fn release_mapped(map: &Mmap, part: &[u8]) {
    let base = map.as_ptr() as usize;
    let start = part.as_ptr() as usize;
    if part.is_empty() || start < base || start + part.len() > base + map.len() {
        return;
    }
    // SAFETY: `MADV_DONTNEED` on a read-only file mapping (an `Mmap` is
    // never written through) only discards our page table entries (the
    // range is widened down to a page boundary, within the map); a later
    // read maps the page cache's unchanged page again, so every slice
    // handed out keeps reading the same bytes.
    let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start - base, part.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_the_same_bytes() {
        let path = std::env::temp_dir().join(format!("ep-release-{}", std::process::id()));
        let bytes: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        // SAFETY: a file of this test's own, not changed while mapped.
        let map = unsafe { Mmap::map(&file) }.unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&map[..], &bytes[..]);
        // A part inside the map (not page-aligned), all of it, and slices
        // that are not the map's (ignored).
        release_mapped(&map, &map[5000..30_000]);
        assert_eq!(&map[..], &bytes[..]);
        release_mapped(&map, &map);
        release_mapped(&map, &bytes[..4096]);
        release_mapped(&map, &map[..0]);
        assert_eq!(&map[..], &bytes[..]);
    }

    #[test]
    fn rejects_non_elf_and_other_classes() {
        assert!(matches!(ElfFile::from_bytes(b"hello world".to_vec()), Err(Error::NotElf)));
        assert!(matches!(ElfFile::from_bytes(Vec::new()), Err(Error::NotElf)));
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 1; // ELFCLASS32
        h[5] = 1;
        assert!(matches!(ElfFile::from_bytes(h.clone()), Err(Error::Unsupported { what: "EI_CLASS", .. })));
        h[4] = 2;
        h[5] = 2; // big endian
        assert!(matches!(ElfFile::from_bytes(h.clone()), Err(Error::Unsupported { what: "EI_DATA", .. })));
        h[5] = 1;
        h[18] = 183; // aarch64
        assert!(matches!(ElfFile::from_bytes(h.clone()), Err(Error::Unsupported { what: "e_machine", .. })));
        h[18] = 62;
        assert!(matches!(ElfFile::from_bytes(h[..40].to_vec()), Err(Error::Truncated { .. })));
        let elf = ElfFile::from_bytes(h).expect("minimal header");
        assert!(elf.program_headers().is_empty());
        assert!(elf.sections().is_empty());
    }

    #[test]
    fn slice_checks_bounds() {
        let d = [0u8; 10];
        assert!(slice(&d, "x", 0, 10).is_ok());
        assert!(slice(&d, "x", 1, 10).is_err());
        assert!(slice(&d, "x", u64::MAX, 2).is_err());
        assert!(slice(&d, "x", 2, u64::MAX).is_err());
        assert_eq!(d.as_slice().u64_at(3), None);
        assert_eq!(d.as_slice().u16_at(usize::MAX), None);
    }
}
