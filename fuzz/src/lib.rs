//! Helpers shared by the fuzz targets: wrapping fuzzer bytes into a
//! minimal x86-64 ELF file, so that targets for one section's parser
//! spend their time in that parser rather than in finding an ELF header.

/// Virtual address of the first byte of the file (one `PT_LOAD` maps the
/// whole file, read + execute).
pub const BASE: u64 = 0x40_0000;

const EHDR: usize = 64;
const PHDR: usize = 56;
const SHDR: usize = 64;

/// A valid ELF file holding `sections` (name, bytes), each at its file
/// offset + [`BASE`], a `PT_GNU_EH_FRAME` when `eh_frame_hdr` names one of
/// them, and the section name table last. Returns the file and each
/// section's virtual address.
pub fn elf_with_sections(sections: &[(&str, &[u8])], eh_frame_hdr: Option<&str>) -> (Vec<u8>, Vec<u64>) {
    let phnum = 2;
    let mut out = vec![0u8; EHDR + phnum * PHDR];
    let mut placed = Vec::new();
    for (name, data) in sections {
        while out.len() % 16 != 0 {
            out.push(0);
        }
        placed.push((*name, out.len(), data.len()));
        out.extend_from_slice(data);
    }
    // Section names: "" first, then each name.
    let mut names = vec![0u8];
    let mut name_offsets = Vec::new();
    for (name, _) in sections {
        name_offsets.push(names.len() as u32);
        names.extend_from_slice(name.as_bytes());
        names.push(0);
    }
    let shstrtab_name = names.len() as u32;
    names.extend_from_slice(b".shstrtab\0");
    let names_at = out.len();
    out.extend_from_slice(&names);
    while out.len() % 8 != 0 {
        out.push(0);
    }
    let shoff = out.len();
    let shnum = sections.len() + 2;
    out.resize(shoff + shnum * SHDR, 0);
    let file_len = out.len() as u64;

    let put = |out: &mut Vec<u8>, at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    // ELF header.
    put(&mut out, 0, b"\x7fELF\x02\x01\x01");
    put(&mut out, 16, &3u16.to_le_bytes()); // ET_DYN
    put(&mut out, 18, &62u16.to_le_bytes()); // EM_X86_64
    put(&mut out, 20, &1u32.to_le_bytes());
    put(&mut out, 32, &(EHDR as u64).to_le_bytes()); // e_phoff
    put(&mut out, 40, &(shoff as u64).to_le_bytes());
    put(&mut out, 52, &(EHDR as u16).to_le_bytes());
    put(&mut out, 54, &(PHDR as u16).to_le_bytes());
    put(&mut out, 56, &(phnum as u16).to_le_bytes());
    put(&mut out, 58, &(SHDR as u16).to_le_bytes());
    put(&mut out, 60, &(shnum as u16).to_le_bytes());
    put(&mut out, 62, &((shnum - 1) as u16).to_le_bytes());
    // PT_LOAD over the whole file.
    let ph = EHDR;
    put(&mut out, ph, &1u32.to_le_bytes());
    put(&mut out, ph + 4, &5u32.to_le_bytes()); // R + X
    put(&mut out, ph + 16, &BASE.to_le_bytes());
    put(&mut out, ph + 24, &BASE.to_le_bytes());
    put(&mut out, ph + 32, &file_len.to_le_bytes());
    put(&mut out, ph + 40, &file_len.to_le_bytes());
    put(&mut out, ph + 48, &0x1000u64.to_le_bytes());
    // PT_GNU_EH_FRAME, or PT_NULL.
    let ph = EHDR + PHDR;
    if let Some((_, off, len)) = eh_frame_hdr.and_then(|h| placed.iter().find(|p| p.0 == h)) {
        put(&mut out, ph, &0x6474_e550u32.to_le_bytes());
        put(&mut out, ph + 4, &4u32.to_le_bytes());
        put(&mut out, ph + 8, &(*off as u64).to_le_bytes());
        put(&mut out, ph + 16, &(BASE + *off as u64).to_le_bytes());
        put(&mut out, ph + 32, &(*len as u64).to_le_bytes());
        put(&mut out, ph + 40, &(*len as u64).to_le_bytes());
    }
    // Section headers: null, the sections, .shstrtab.
    let mut addrs = Vec::new();
    for (i, (&(_, off, len), name_off)) in placed.iter().zip(&name_offsets).enumerate() {
        let sh = shoff + (i + 1) * SHDR;
        let addr = BASE + off as u64;
        addrs.push(addr);
        put(&mut out, sh, &name_off.to_le_bytes());
        put(&mut out, sh + 4, &1u32.to_le_bytes()); // SHT_PROGBITS
        put(&mut out, sh + 8, &2u64.to_le_bytes()); // SHF_ALLOC
        put(&mut out, sh + 16, &addr.to_le_bytes());
        put(&mut out, sh + 24, &(off as u64).to_le_bytes());
        put(&mut out, sh + 32, &(len as u64).to_le_bytes());
        put(&mut out, sh + 48, &8u64.to_le_bytes());
    }
    let sh = shoff + (shnum - 1) * SHDR;
    put(&mut out, sh, &shstrtab_name.to_le_bytes());
    put(&mut out, sh + 4, &3u32.to_le_bytes()); // SHT_STRTAB
    put(&mut out, sh + 24, &(names_at as u64).to_le_bytes());
    put(&mut out, sh + 32, &(names.len() as u64).to_le_bytes());
    (out, addrs)
}

/// Splits fuzzer input at the first occurrence of `marker` into two parts (the
/// second empty when there is none).
pub fn split_at_marker<'a>(data: &'a [u8], marker: &[u8]) -> (&'a [u8], &'a [u8]) {
    match data.windows(marker.len()).position(|w| w == marker) {
        Some(at) => (&data[..at], &data[at + marker.len()..]),
        None => (data, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_is_a_valid_elf() {
        let (elf, addrs) = elf_with_sections(&[(".eh_frame", &[1, 2, 3]), (".text", &[0x90; 5])], None);
        let elf = profiler_elf::ElfFile::from_bytes(elf).expect("valid");
        let s = elf.section_by_name(".eh_frame").expect(".eh_frame");
        assert_eq!(elf.section_data(s).unwrap(), &[1, 2, 3]);
        assert_eq!(s.addr, addrs[0]);
        assert_eq!(elf.bytes_at_vaddr(addrs[1], 5), Some(&[0x90; 5][..]));
    }
}
