//! Where a Ruby build keeps its thread-local `ruby_current_ec` (3.0+):
//! read from the file's dynamic relocations, for the BPF unwinder to
//! find every thread's execution context from its thread pointer.

use profiler_elf::ElfFile;

/// `SHT_RELA`.
const SHT_RELA: u32 = 4;
/// `R_X86_64_DTPMOD64`: ld.so writes the module id of the symbol's file.
const R_DTPMOD64: u32 = 16;
/// `R_X86_64_DTPOFF64`: the symbol's offset in its module's TLS block.
const R_DTPOFF64: u32 = 17;
/// `R_X86_64_TPOFF64`: the symbol's offset from the thread pointer.
const R_TPOFF64: u32 = 18;
/// Bytes of an `Elf64_Sym` and an `Elf64_Rela`.
const SYM_SIZE: usize = 24;
const RELA_SIZE: usize = 24;

/// How the thread-local variable is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RubyTls {
    /// General dynamic: ld.so writes the module id at `module_slot`; the
    /// variable is at `offset` in the module's TLS block (through the
    /// thread's DTV).
    Dynamic {
        /// File address of the module id's GOT slot.
        module_slot: u64,
        /// The variable's offset in the block.
        offset: u64,
    },
    /// Initial exec: ld.so writes the variable's offset from the thread
    /// pointer at `offset_slot`.
    InitialExec {
        /// File address of the offset's GOT slot.
        offset_slot: u64,
    },
}

/// How `name` (a TLS symbol of the file's `.dynsym`) is reached, from the
/// file's `SHT_RELA` sections; `None` when no relocation refers to it
/// (a static `ruby` reaches its TLS with fixed offsets: not supported).
pub fn find_tls(elf: &ElfFile, name: &str) -> Option<RubyTls> {
    let sections = elf.sections();
    let dynsym_index = sections.iter().position(|s| s.name == ".dynsym")?;
    let dynsym = &sections[dynsym_index];
    let strtab = elf.section_data(sections.get(dynsym.link as usize)?).ok()?;
    let symbols = elf.section_data(dynsym).ok()?;
    let (index, value) = symbols.chunks_exact(SYM_SIZE).enumerate().find_map(|(i, sym)| {
        let name_off = u32::from_le_bytes(sym[0..4].try_into().ok()?) as usize;
        let rest = strtab.get(name_off..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        (&rest[..end] == name.as_bytes()).then(|| (i as u64, u64::from_le_bytes(sym[8..16].try_into().unwrap())))
    })?;
    let (mut module_slot, mut dtpoff, mut tpoff) = (None, None, None);
    for section in sections.iter().filter(|s| s.sh_type == SHT_RELA && s.link as usize == dynsym_index) {
        let Ok(data) = elf.section_data(section) else { continue };
        for rela in data.chunks_exact(RELA_SIZE) {
            let word = |i: usize| u64::from_le_bytes(rela[i..i + 8].try_into().unwrap());
            let (offset, info, addend) = (word(0), word(8), word(16));
            if info >> 32 != index {
                continue;
            }
            match info as u32 {
                R_DTPMOD64 => module_slot = Some(offset),
                R_DTPOFF64 => dtpoff = Some(value.wrapping_add(addend)),
                R_TPOFF64 => tpoff = Some(offset),
                _ => {}
            }
        }
    }
    match (module_slot, tpoff) {
        (Some(module_slot), _) => Some(RubyTls::Dynamic { module_slot, offset: dtpoff.unwrap_or(value) }),
        (None, Some(offset_slot)) => Some(RubyTls::InitialExec { offset_slot }),
        (None, None) => None,
    }
}

/// File addresses of every `R_X86_64_DTPMOD64` slot of the file's
/// `.dynsym` relocations, with or without a symbol (a local-dynamic
/// access has none: see `hidden.rs`).
pub fn dtpmod_slots(elf: &ElfFile) -> Vec<u64> {
    let sections = elf.sections();
    let Some(dynsym_index) = sections.iter().position(|s| s.name == ".dynsym") else { return Vec::new() };
    let mut slots = Vec::new();
    for section in sections.iter().filter(|s| s.sh_type == SHT_RELA && s.link as usize == dynsym_index) {
        let Ok(data) = elf.section_data(section) else { continue };
        for rela in data.chunks_exact(RELA_SIZE) {
            let word = |i: usize| u64::from_le_bytes(rela[i..i + 8].try_into().unwrap());
            if word(8) as u32 == R_DTPMOD64 {
                slots.push(word(0));
            }
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_the_symbol_has_no_tls() {
        let elf = ElfFile::open(std::fs::read_link("/proc/self/exe").unwrap()).unwrap();
        assert_eq!(find_tls(&elf, "ruby_current_ec"), None);
    }

    /// Debian 12's libruby 3.1 (when installed): general dynamic, the
    /// slots `readelf -r` shows.
    #[test]
    fn debian_libruby_uses_the_dtv() {
        let path = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
        let Ok(elf) = ElfFile::open(path) else {
            assert!(std::env::var_os("CI").is_none(), "{path} is missing under CI (apt-get install ruby)");
            return;
        };
        let Some(RubyTls::Dynamic { module_slot, offset }) = find_tls(&elf, "ruby_current_ec") else {
            panic!("libruby 3.1 reaches ruby_current_ec through __tls_get_addr")
        };
        // 3.1.7's is 8; a word-aligned offset in a small block.
        assert!(offset % 8 == 0 && offset < 4096, "offset {offset}");
        assert!(module_slot % 8 == 0 && module_slot != 0);
    }
}
