//! Function symbols and address-to-name lookup.

use crate::error::{Error, Result};
use crate::file::{cstr_at, slice, ElfFile, ReadLe, SHT_DYNSYM, SHT_SYMTAB};

/// Size of an `Elf64_Sym`.
const SYM_SIZE: usize = 24;
/// `STT_FUNC`: a function.
const STT_FUNC: u8 = 2;
/// `STT_GNU_IFUNC`: an indirect function (its address is the resolver).
const STT_GNU_IFUNC: u8 = 10;
/// `STB_GLOBAL`.
const STB_GLOBAL: u8 = 1;
/// `STB_WEAK`.
const STB_WEAK: u8 = 2;
/// `SHN_UNDEF`: an undefined (imported) symbol.
const SHN_UNDEF: u16 = 0;

/// Which symbol table a [`SymbolTable`] was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolSource {
    /// `.symtab`, the full static symbol table.
    Symtab,
    /// `.dynsym`, the exported symbols only (`.symtab` was stripped).
    Dynsym,
    /// The file has neither.
    None,
}

/// One function symbol; the name lives in the table's arena.
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    size: u64,
    name_start: u32,
    name_len: u32,
}

/// The function symbols of a file (`STT_FUNC` and `STT_GNU_IFUNC`), sorted
/// by address for lookup by binary search.
///
/// Names are kept raw (not demangled) in one string arena, so the table
/// costs 24 bytes per symbol plus the name bytes and does not borrow the
/// file. Aliases (several names at one address) are all kept; lookup
/// prefers global over weak over local names.
#[derive(Clone, Debug)]
pub struct SymbolTable {
    syms: Vec<Sym>,
    names: String,
    source: SymbolSource,
}

impl SymbolTable {
    /// Builds the table from `.symtab`, or from `.dynsym` when `.symtab` is
    /// absent or holds no function.
    pub fn from_elf(elf: &ElfFile) -> Result<SymbolTable> {
        for (sh_type, source) in [(SHT_SYMTAB, SymbolSource::Symtab), (SHT_DYNSYM, SymbolSource::Dynsym)] {
            let Some(section) = elf.sections().iter().find(|s| s.sh_type == sh_type) else {
                continue;
            };
            let table = SymbolTable::from_section(elf, section, source)?;
            if !table.is_empty() {
                return Ok(table);
            }
        }
        Ok(SymbolTable { syms: Vec::new(), names: String::new(), source: SymbolSource::None })
    }

    fn from_section(elf: &ElfFile, section: &crate::file::Section, source: SymbolSource) -> Result<SymbolTable> {
        if section.entsize != 0 && section.entsize != SYM_SIZE as u64 {
            return Err(Error::Malformed { what: "symbol table sh_entsize", value: section.entsize });
        }
        let data = elf.section_data(section)?;
        let strtab_section = elf
            .sections()
            .get(section.link as usize)
            .ok_or(Error::Malformed { what: "symbol table sh_link", value: section.link.into() })?;
        let strtab = slice(elf.data(), "symbol string table", strtab_section.offset, strtab_section.size)?;

        let mut syms = Vec::new();
        let mut names = String::new();
        for entry in data.chunks_exact(SYM_SIZE) {
            let info = entry.u8_at(4).unwrap_or(0);
            let kind = info & 0xf;
            let shndx = entry.u16_at(6).unwrap_or(SHN_UNDEF);
            let addr = entry.u64_at(8).unwrap_or(0);
            if !(kind == STT_FUNC || kind == STT_GNU_IFUNC) || shndx == SHN_UNDEF || addr == 0 {
                continue;
            }
            let size = entry.u64_at(16).unwrap_or(0);
            let name_off = entry.u32_at(0).unwrap_or(0) as usize;
            let Some(name) = cstr_at(strtab, name_off) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(name);
            let (Ok(name_start), Ok(name_len)) = (u32::try_from(names.len()), u32::try_from(name.len())) else {
                return Err(Error::Malformed { what: "symbol names exceed 4 GiB", value: names.len() as u64 });
            };
            names.push_str(&name);
            // Aliases sort global first, then weak, then local.
            let rank = match info >> 4 {
                STB_GLOBAL => 0u8,
                STB_WEAK => 1,
                _ => 2,
            };
            syms.push((rank, Sym { addr, size, name_start, name_len }));
        }
        syms.sort_unstable_by(|(ra, a), (rb, b)| {
            a.addr.cmp(&b.addr).then(ra.cmp(rb)).then(b.size.cmp(&a.size)).then(a.name_start.cmp(&b.name_start))
        });
        let mut syms: Vec<Sym> = syms.into_iter().map(|(_, s)| s).collect();
        syms.shrink_to_fit();
        names.shrink_to_fit();
        Ok(SymbolTable { syms, names, source })
    }

    /// Which table the symbols came from.
    pub fn source(&self) -> SymbolSource {
        self.source
    }

    /// Number of function symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether there is no function symbol.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    fn name(&self, s: &Sym) -> &str {
        let start = s.name_start as usize;
        self.names.get(start..start + s.name_len as usize).unwrap_or("")
    }

    /// The function containing `vaddr` (an ELF virtual address, see
    /// [`crate::LoadSegments::elf_vaddr`]) and the offset of `vaddr` in it.
    ///
    /// The candidate is the symbol with the greatest address ≤ `vaddr`; an
    /// address past the end of a sized symbol is a miss, a symbol of size 0
    /// extends to the next symbol.
    pub fn lookup(&self, vaddr: u64) -> Option<(&str, u64)> {
        let idx = self.syms.partition_point(|s| s.addr <= vaddr);
        let addr = self.syms.get(idx.checked_sub(1)?)?.addr;
        let first = self.syms[..idx].partition_point(|s| s.addr < addr);
        let offset = vaddr - addr;
        self.syms[first..idx].iter().find(|s| s.size == 0 || offset < s.size).map(|s| (self.name(s), offset))
    }

    /// The address and size of the first function named exactly `name`
    /// (a linear scan).
    pub fn find(&self, name: &str) -> Option<(u64, u64)> {
        self.syms.iter().find(|s| self.name(s) == name).map(|s| (s.addr, s.size))
    }

    /// All symbols in address order as `(address, size, name)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &str)> + '_ {
        self.syms.iter().map(|s| (s.addr, s.size, self.name(s)))
    }
}

impl ElfFile {
    /// Shorthand for [`SymbolTable::from_elf`].
    pub fn symbols(&self) -> Result<SymbolTable> {
        SymbolTable::from_elf(self)
    }

    /// The address of the first defined symbol of any kind (function,
    /// object, untyped) named exactly `name`, from `.symtab` then
    /// `.dynsym`: a linear scan, for the odd well-known symbol (e.g. Go's
    /// `runtime.text`).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.scan_symbols(name, |_, _| true).map(|(addr, _)| addr)
    }

    /// The address and size of the first function symbol (as kept by
    /// [`SymbolTable`]: `STT_FUNC` or `STT_GNU_IFUNC`, defined, nonzero
    /// address) named exactly `name`, from `.symtab` then `.dynsym`.
    ///
    /// A linear scan that copies nothing: checking a file for a few
    /// well-known functions this way costs no memory, where building its
    /// [`SymbolTable`] takes 20-30 MB for a large C++ library.
    pub fn function_symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.scan_symbols(name, |info, addr| {
            let kind = info & 0xf;
            (kind == STT_FUNC || kind == STT_GNU_IFUNC) && addr != 0
        })
    }

    /// `(address, size)` of the first defined symbol named `name` that
    /// `accept(st_info, address)` takes.
    fn scan_symbols(&self, name: &str, accept: impl Fn(u8, u64) -> bool) -> Option<(u64, u64)> {
        let name = name.as_bytes();
        for sh_type in [SHT_SYMTAB, SHT_DYNSYM] {
            let Some(section) = self.sections().iter().find(|s| s.sh_type == sh_type) else {
                continue;
            };
            let Ok(data) = self.section_data(section) else {
                continue;
            };
            let Some(strtab) = self
                .sections()
                .get(section.link as usize)
                .and_then(|s| slice(self.data(), "symbol string table", s.offset, s.size).ok())
            else {
                continue;
            };
            for entry in data.chunks_exact(SYM_SIZE) {
                let shndx = entry.u16_at(6).unwrap_or(SHN_UNDEF);
                if shndx == SHN_UNDEF {
                    continue;
                }
                // The name and its terminating NUL, without searching for
                // the NUL of every (long, mangled) name in the table.
                let name_off = entry.u32_at(0).unwrap_or(0) as usize;
                let matches = name_off
                    .checked_add(name.len())
                    .and_then(|end| strtab.get(name_off..=end))
                    .is_some_and(|s| &s[..name.len()] == name && s[name.len()] == 0);
                if !matches {
                    continue;
                }
                let info = entry.u8_at(4).unwrap_or(0);
                let addr = entry.u64_at(8).unwrap_or(0);
                if accept(info, addr) {
                    return Some((addr, entry.u64_at(16).unwrap_or(0)));
                }
            }
        }
        None
    }
}
