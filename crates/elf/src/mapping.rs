//! From process addresses to ELF virtual addresses.
//!
//! A line of `/proc/PID/maps` says that the file bytes from `map_offset`
//! on are mapped at `map_start`. A process address `addr` in that mapping
//! holds file offset `off = addr - map_start + map_offset`; the `PT_LOAD`
//! segment containing `off` maps it to the ELF virtual address
//! `off - p_offset + p_vaddr`, the address symbol and unwind tables use.

use crate::file::{ElfFile, PT_LOAD};

/// Page size used when a file offset falls into the page-rounded edge of a
/// segment rather than the segment itself.
const PAGE: u64 = 4096;

/// One `PT_LOAD` segment, the part of a program header that address
/// mapping needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    /// File offset of the segment (`p_offset`).
    pub offset: u64,
    /// Virtual address of the segment (`p_vaddr`).
    pub vaddr: u64,
    /// Bytes in the file (`p_filesz`).
    pub filesz: u64,
    /// Bytes in memory (`p_memsz`).
    pub memsz: u64,
    /// Permission flags (`p_flags`: `PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
}

/// The `PT_LOAD` segments of a file: a few dozen bytes that the process
/// tracker can keep per file without keeping the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadSegments {
    segments: Vec<LoadSegment>,
}

impl LoadSegments {
    /// Collects the `PT_LOAD` program headers of `elf`.
    pub fn from_elf(elf: &ElfFile) -> LoadSegments {
        let segments = elf
            .program_headers()
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .map(|p| LoadSegment { offset: p.offset, vaddr: p.vaddr, filesz: p.filesz, memsz: p.memsz, flags: p.flags })
            .collect();
        LoadSegments { segments }
    }

    /// The segments in program header order.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.segments
    }

    /// The segment holding file offset `off`: the one whose file range
    /// contains it, else the one whose page-rounded range does (the bytes
    /// the kernel maps along with the segment).
    pub fn segment_for_file_offset(&self, off: u64) -> Option<&LoadSegment> {
        self.segments.iter().find(|s| off >= s.offset && off - s.offset < s.filesz.max(1)).or_else(|| {
            self.segments.iter().find(|s| {
                let start = s.offset & !(PAGE - 1);
                let end = s.offset.saturating_add(s.filesz.max(1)).saturating_add(PAGE - 1) & !(PAGE - 1);
                off >= start && off < end
            })
        })
    }

    /// The ELF virtual address of file offset `off`.
    pub fn file_offset_to_vaddr(&self, off: u64) -> Option<u64> {
        let s = self.segment_for_file_offset(off)?;
        Some(off.wrapping_sub(s.offset).wrapping_add(s.vaddr))
    }

    /// The ELF virtual address of process address `addr`, which lies in a
    /// mapping of this file starting at `map_start` with file offset
    /// `map_offset` (both from `/proc/PID/maps`):
    /// `addr - map_start + map_offset - p_offset + p_vaddr`.
    ///
    /// `None` when `addr < map_start` or no `PT_LOAD` holds the offset.
    pub fn elf_vaddr(&self, addr: u64, map_start: u64, map_offset: u64) -> Option<u64> {
        let off = addr.checked_sub(map_start)?.checked_add(map_offset)?;
        self.file_offset_to_vaddr(off)
    }

    /// The load bias of a mapping: what to add to an ELF virtual address to
    /// get the process address (`elf_vaddr(addr) + bias == addr`, modulo
    /// 2^64). 0 for non-PIE executables.
    pub fn bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        let vaddr = self.elf_vaddr(map_start, map_start, map_offset)?;
        Some(map_start.wrapping_sub(vaddr))
    }
}

impl LoadSegments {
    /// The load bias of an *executable* mapping (`r-xp` in
    /// `/proc/PID/maps`) starting at `map_start` with file offset
    /// `map_offset`: like [`LoadSegments::bias`], but decided by the
    /// executable (`PF_X`) segment the mapping holds. Linkers that pack
    /// segments without page alignment (lld, Rust's default) put the end
    /// of a read-only segment and the start of the text segment in one
    /// file page; the page is mapped for both, and only the text segment
    /// gives the executable mapping's addresses.
    pub fn executable_bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        const PF_X: u32 = 1;
        let text = self.segments.iter().find(|s| {
            s.flags & PF_X != 0
                && map_offset >= s.offset & !(PAGE - 1)
                && map_offset < s.offset.saturating_add(s.filesz.max(1))
        });
        match text {
            Some(s) => {
                let vaddr = s.vaddr.wrapping_sub(s.offset.wrapping_sub(map_offset));
                Some(map_start.wrapping_sub(vaddr))
            }
            None => self.bias(map_start, map_offset),
        }
    }
}

impl ElfFile {
    /// Shorthand for [`LoadSegments::from_elf`].
    pub fn load_segments(&self) -> LoadSegments {
        LoadSegments::from_elf(self)
    }

    /// Shorthand for [`LoadSegments::elf_vaddr`].
    pub fn elf_vaddr(&self, addr: u64, map_start: u64, map_offset: u64) -> Option<u64> {
        self.load_segments().elf_vaddr(addr, map_start, map_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_through_the_containing_segment() {
        // A typical PIE: r--, r-x, r--, rw- segments.
        let segs = LoadSegments {
            segments: vec![
                LoadSegment { offset: 0, vaddr: 0, filesz: 0x628, memsz: 0x628, flags: 4 },
                LoadSegment { offset: 0x1000, vaddr: 0x1000, filesz: 0x1d5, memsz: 0x1d5, flags: 5 },
                LoadSegment { offset: 0x2000, vaddr: 0x2000, filesz: 0x114, memsz: 0x114, flags: 4 },
                LoadSegment { offset: 0x2df0, vaddr: 0x3df0, filesz: 0x228, memsz: 0x230, flags: 6 },
            ],
        };
        let text_map = 0x5555_5555_5000u64;
        assert_eq!(segs.elf_vaddr(text_map + 0x139, text_map, 0x1000), Some(0x1139));
        assert_eq!(segs.bias(text_map, 0x1000), Some(0x5555_5555_4000));
        // The data mapping starts at the page holding offset 0x2df0.
        let data_map = 0x5555_5555_7000u64;
        assert_eq!(segs.elf_vaddr(data_map + 0xe00, data_map, 0x2000), Some(0x3e00));
        assert_eq!(segs.elf_vaddr(text_map - 1, text_map, 0x1000), None);
        assert_eq!(segs.elf_vaddr(text_map, text_map, 0x9000), None);
        assert_eq!(segs.elf_vaddr(u64::MAX, 0, u64::MAX), None);
        assert_eq!(segs.executable_bias(text_map, 0x1000), Some(0x5555_5555_4000));
    }

    #[test]
    fn executable_bias_with_packed_segments() {
        // lld (rustc's default layout): the text segment starts in the
        // same file page as the read-only one ends, at another vaddr delta.
        let segs = LoadSegments {
            segments: vec![
                LoadSegment { offset: 0, vaddr: 0, filesz: 0x127e0, memsz: 0x127e0, flags: 4 },
                LoadSegment { offset: 0x127e0, vaddr: 0x137e0, filesz: 0x3c970, memsz: 0x3c970, flags: 5 },
            ],
        };
        let map = 0x5577_2f74_b000u64; // r-xp at file offset 0x12000
        let bias = segs.executable_bias(map, 0x12000).unwrap();
        assert_eq!(map.wrapping_sub(bias), 0x13000);
        // The generic rule picks the read-only segment: off by a page.
        assert_eq!(segs.bias(map, 0x12000).map(|b| map.wrapping_sub(b)), Some(0x12000));
    }
}
