//! A loaded file's function symbols: `profiler_elf`'s [`SymbolIndex`]
//! (12 bytes per symbol, the one reader of ELF symbol tables) with the
//! symbolizer's own bytes of the file, which names are read from and
//! whose pages it gives back.

use std::borrow::Cow;

use profiler_elf::{ElfFile, SymbolIndex, SymbolSource};

use crate::filemap::Backing;

/// The function symbols of one file and the bytes their names are in.
pub(crate) struct Symbols {
    index: SymbolIndex,
    bytes: Backing,
}

impl Symbols {
    /// The functions of `.symtab`, or of `.dynsym` when `.symtab` is
    /// absent or has none; `None` when neither has any. `bytes` are
    /// `elf`'s bytes (possibly through another map of the same file).
    pub(crate) fn from_elf(elf: &ElfFile, bytes: &Backing) -> Option<Symbols> {
        let index = SymbolIndex::build(elf, bytes.data()).ok().filter(|i| !i.is_empty())?;
        Some(Symbols { index, bytes: bytes.clone() })
    }

    /// Which table the symbols came from.
    pub(crate) fn source(&self) -> SymbolSource {
        self.index.source()
    }

    /// Number of function symbols.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> u64 {
        self.index.heap_bytes()
    }

    /// The bytes names are read from.
    pub(crate) fn backing(&self) -> &Backing {
        &self.bytes
    }

    /// The function containing `vaddr`: its raw name and its address.
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<(Cow<'_, str>, u64)> {
        self.index.lookup(self.bytes.data(), vaddr).map(|(name, offset)| (name, vaddr - offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn names_from_its_own_bytes_as_the_elf_table_does() {
        let path = "/proc/self/exe";
        let elf = ElfFile::open(path).expect("open");
        let table = elf.symbols().expect("symbols");
        // Another open of the same file: names come from these bytes.
        let bytes = Backing::Elf(Arc::new(ElfFile::open(path).expect("open")));
        let ours = Symbols::from_elf(&elf, &bytes).expect("functions");
        assert_eq!((ours.len(), ours.source()), (table.len(), table.source()));
        assert!(ours.len() > 100, "{} functions", ours.len());
        for (addr, size, _) in table.iter().step_by(7) {
            let vaddr = addr + size / 2;
            let want = table.lookup(vaddr).map(|(n, off)| (n.into_owned(), vaddr - off));
            assert!(want.is_some(), "{vaddr:#x}");
            assert_eq!(ours.lookup(vaddr).map(|(n, a)| (n.into_owned(), a)), want);
        }
        assert_eq!(ours.heap_bytes(), 12 * ours.len() as u64 + 64);
    }
}
