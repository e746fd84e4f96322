//! Function symbols of one file, compact: 16 bytes per symbol, the names
//! left in the file's string table and read when a lookup needs one.
//!
//! `profiler_elf::SymbolTable` copies every name into the heap, which for
//! the large C++ and Rust libraries found on build machines
//! (librustc_driver, libLLVM: 100,000+ symbols, 18-20 MB of mangled
//! names) costs 18-20 MB per file. Lookups here choose the same symbol
//! as `SymbolTable::lookup` does (same filter, same order of aliases).

use std::borrow::Cow;

use profiler_elf::{ElfFile, SymbolSource, SHT_NOBITS};

use crate::filemap::Backing;

/// `SHT_SYMTAB`.
const SHT_SYMTAB: u32 = 2;
/// `SHT_DYNSYM`.
const SHT_DYNSYM: u32 = 11;
/// Size of an `Elf64_Sym`.
const SYM_SIZE: usize = 24;
/// `STT_FUNC`.
const STT_FUNC: u8 = 2;
/// `STT_GNU_IFUNC`.
const STT_GNU_IFUNC: u8 = 10;
/// `STB_GLOBAL`.
const STB_GLOBAL: u8 = 1;
/// `STB_WEAK`.
const STB_WEAK: u8 = 2;
/// Longest name read (C++ and Rust names can be long; a missing NUL
/// must not make us read the whole table).
const MAX_NAME: usize = 64 * 1024;

/// One function symbol.
#[derive(Clone, Copy, Debug)]
struct Sym {
    addr: u64,
    /// Size, saturated at `u32::MAX`.
    size: u32,
    /// Offset of the name in the string table.
    name: u32,
}

const _: () = assert!(std::mem::size_of::<Sym>() == 16);

/// The function symbols (`STT_FUNC`, `STT_GNU_IFUNC`) of one table,
/// sorted by address.
pub(crate) struct Symbols {
    syms: Box<[Sym]>,
    /// The file's bytes, and where its string table is in them.
    bytes: Backing,
    strtab_start: usize,
    strtab_len: usize,
    source: SymbolSource,
}

impl Symbols {
    /// The functions of `.symtab`, or of `.dynsym` when `.symtab` is
    /// absent or has none; `None` when neither has any. `bytes` are
    /// `elf`'s bytes (possibly through another map of the same file).
    pub(crate) fn from_elf(elf: &ElfFile, bytes: &Backing) -> Option<Symbols> {
        [(SHT_SYMTAB, SymbolSource::Symtab), (SHT_DYNSYM, SymbolSource::Dynsym)].into_iter().find_map(
            |(sh_type, source)| {
                let section = elf.sections().iter().find(|s| s.sh_type == sh_type)?;
                Symbols::from_section(elf, bytes, section, source)
            },
        )
    }

    fn from_section(
        elf: &ElfFile,
        bytes: &Backing,
        section: &profiler_elf::Section,
        source: SymbolSource,
    ) -> Option<Symbols> {
        if section.entsize != 0 && section.entsize != SYM_SIZE as u64 {
            return None;
        }
        let data = bytes.data();
        let range = |off: u64, size: u64| -> Option<(usize, usize)> {
            let start = usize::try_from(off).ok()?;
            let len = usize::try_from(size).ok()?;
            (start.checked_add(len)? <= data.len()).then_some((start, len))
        };
        let (start, len) = range(section.offset, section.size)?;
        let entries = &data[start..start + len];
        let strtab = elf.sections().get(section.link as usize).filter(|s| s.sh_type != SHT_NOBITS)?;
        let (strtab_start, strtab_len) = range(strtab.offset, strtab.size)?;
        let u16_at = |e: &[u8], o: usize| u16::from_le_bytes([e[o], e[o + 1]]);
        let u32_at = |e: &[u8], o: usize| u32::from_le_bytes(e[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |e: &[u8], o: usize| u64::from_le_bytes(e[o..o + 8].try_into().unwrap_or([0; 8]));
        // (symbol, alias rank: global, weak, local; then entry index).
        let keep = |e: &[u8]| -> Option<(Sym, u8)> {
            let info = e[4];
            let kind = info & 0xf;
            let addr = u64_at(e, 8);
            if !(kind == STT_FUNC || kind == STT_GNU_IFUNC) || u16_at(e, 6) == 0 || addr == 0 {
                return None;
            }
            let name = u32_at(e, 0);
            // Named (offset 0 is the empty string), inside the table. The
            // table itself is not read here: its pages stay out of our
            // resident set until a lookup needs a name.
            if name == 0 || name as usize >= strtab_len {
                return None;
            }
            let size = u32::try_from(u64_at(e, 16)).unwrap_or(u32::MAX);
            let rank = match info >> 4 {
                STB_GLOBAL => 0u8,
                STB_WEAK => 1,
                _ => 2,
            };
            Some((Sym { addr, size, name }, rank))
        };
        let count = entries.chunks_exact(SYM_SIZE).filter(|e| keep(e).is_some()).count();
        if count == 0 {
            return None;
        }
        let mut all: Vec<(Sym, u8, u32)> = Vec::with_capacity(count);
        for (i, e) in entries.chunks_exact(SYM_SIZE).enumerate() {
            if let Some((sym, rank)) = keep(e) {
                all.push((sym, rank, i as u32));
            }
        }
        // Aliases: global first, then weak, then local; the larger one
        // first; then in table order (as `SymbolTable` sorts them).
        all.sort_unstable_by(|(a, ra, ia), (b, rb, ib)| {
            a.addr.cmp(&b.addr).then(ra.cmp(rb)).then(b.size.cmp(&a.size)).then(ia.cmp(ib))
        });
        let syms: Box<[Sym]> = all.iter().map(|(s, _, _)| *s).collect();
        Some(Symbols { syms, bytes: bytes.clone(), strtab_start, strtab_len, source })
    }

    /// Which table the symbols came from.
    pub(crate) fn source(&self) -> SymbolSource {
        self.source
    }

    /// Number of function symbols.
    pub(crate) fn len(&self) -> usize {
        self.syms.len()
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> u64 {
        (self.syms.len() * std::mem::size_of::<Sym>()) as u64 + 64
    }

    /// The bytes names are read from.
    pub(crate) fn backing(&self) -> &Backing {
        &self.bytes
    }

    fn name(&self, s: &Sym) -> Cow<'_, str> {
        let data = self.bytes.data();
        let table = data.get(self.strtab_start..self.strtab_start + self.strtab_len).unwrap_or(&[]);
        let rest = table.get(s.name as usize..).unwrap_or(&[]);
        let rest = &rest[..rest.len().min(MAX_NAME)];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end])
    }

    /// The function containing `vaddr`: its raw name and its address.
    /// The candidate is the symbol with the greatest address ≤ `vaddr`;
    /// past the end of a sized symbol is a miss, a symbol of size 0
    /// extends to the next symbol.
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<(Cow<'_, str>, u64)> {
        let idx = self.syms.partition_point(|s| s.addr <= vaddr);
        let addr = self.syms.get(idx.checked_sub(1)?)?.addr;
        let first = self.syms[..idx].partition_point(|s| s.addr < addr);
        let offset = vaddr - addr;
        self.syms[first..idx].iter().find(|s| s.size == 0 || offset < u64::from(s.size)).map(|s| (self.name(s), addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Every function of `path` names the same as with
    /// `profiler_elf::SymbolTable` (same filter, same choice of alias).
    fn same_as_elf(path: &str) {
        let elf = ElfFile::open(path).expect("open");
        let table = elf.symbols().expect("symbols");
        let bytes = Backing::Elf(Arc::new(ElfFile::open(path).expect("open")));
        let ours = Symbols::from_elf(&elf, &bytes).expect("functions");
        assert_eq!((ours.len(), ours.source()), (table.len(), table.source()), "{path}");
        for (addr, size, _) in table.iter() {
            for vaddr in [addr, addr + size / 2, addr + size] {
                let theirs = table.lookup(vaddr).map(|(n, off)| (n.to_owned(), vaddr - off));
                let mine = ours.lookup(vaddr).map(|(n, a)| (n.into_owned(), a));
                assert_eq!(mine, theirs, "{path} at {vaddr:#x}");
            }
        }
    }

    #[test]
    fn chooses_as_the_elf_symbol_table_does() {
        same_as_elf("/proc/self/exe");
        for lib in ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"] {
            if std::path::Path::new(lib).exists() {
                same_as_elf(lib);
            }
        }
    }

    #[test]
    fn sixteen_bytes_per_symbol() {
        let elf = ElfFile::open("/proc/self/exe").expect("open");
        let bytes = Backing::Elf(Arc::new(ElfFile::open("/proc/self/exe").expect("open")));
        let ours = Symbols::from_elf(&elf, &bytes).expect("functions");
        assert_eq!(ours.heap_bytes(), 16 * ours.len() as u64 + 64);
    }
}
