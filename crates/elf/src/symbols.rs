//! Function symbols and address-to-name lookup: the one reader of a
//! file's `.symtab`/`.dynsym` entries, for the symbolizer's index
//! ([`SymbolIndex`]) and for looking a few well-known names up
//! ([`ElfFile::function_symbol`], [`ElfFile::symbol_address`]).
//!
//! The index is 16 bytes per function; names stay in the file's string
//! table and are read (bounded) when a lookup needs one: copying them
//! cost 18-20 MB for the large C++ and Rust libraries of build machines
//! (librustc_driver, libLLVM: 100,000+ symbols of long mangled names).

use std::borrow::Cow;
use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::file::{ElfFile, ReadLe, Section, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB};

/// Size of an `Elf64_Sym`.
const SYM_SIZE: usize = 24;
/// `STT_FUNC`: a function.
const STT_FUNC: u8 = 2;
/// `STT_GNU_IFUNC`: an indirect function (its address is the resolver).
const STT_GNU_IFUNC: u8 = 10;
/// `STT_NOTYPE`: a label of no declared type (hand-written assembly).
const STT_NOTYPE: u8 = 0;
/// `STB_GLOBAL`.
const STB_GLOBAL: u8 = 1;
/// `STB_WEAK`.
const STB_WEAK: u8 = 2;
/// `SHN_UNDEF`: an undefined (imported) symbol.
const SHN_UNDEF: u16 = 0;
/// Longest name read (C++ and Rust names can be long; a missing NUL must
/// not make a lookup read the whole string table).
const MAX_NAME: usize = 64 * 1024;
/// How many entries a scan of a symbol table reads between releases of
/// the pages it read: 192 KiB of entries and, as linkers lay names out
/// in entry order, about 1 MB of string table.
const RELEASE_EVERY_SYMBOLS: usize = 8192;

/// Which symbol table a [`SymbolIndex`] was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolSource {
    /// `.symtab`, the full static symbol table.
    Symtab,
    /// `.dynsym`, the exported symbols only (`.symtab` was stripped).
    Dynsym,
    /// The file has neither.
    None,
}

/// One `Elf64_Sym`, as read.
#[derive(Clone, Copy)]
struct Entry {
    /// Offset of the name in the string table.
    name: u32,
    info: u8,
    shndx: u16,
    addr: u64,
    size: u64,
}

impl Entry {
    fn read(e: &[u8]) -> Entry {
        Entry {
            name: e.u32_at(0).unwrap_or(0),
            info: e.u8_at(4).unwrap_or(0),
            shndx: e.u16_at(6).unwrap_or(SHN_UNDEF),
            addr: e.u64_at(8).unwrap_or(0),
            size: e.u64_at(16).unwrap_or(0),
        }
    }

    /// A function the index keeps: `STT_FUNC` or `STT_GNU_IFUNC`,
    /// defined, at a nonzero address.
    fn is_function(&self) -> bool {
        let kind = self.info & 0xf;
        (kind == STT_FUNC || kind == STT_GNU_IFUNC) && self.shndx != SHN_UNDEF && self.addr != 0
    }

    /// The untyped label of a program's entry point (`entry`, from
    /// [`ElfFile::program_entry`]): ld.so's `_start` is one, in the
    /// `.symtab` of its debug file. The index keeps it too, so that the
    /// process's first frame is named.
    fn is_entry_label(&self, entry: Option<u64>) -> bool {
        self.info & 0xf == STT_NOTYPE && self.shndx != SHN_UNDEF && Some(self.addr) == entry
    }

    /// Aliases (one address, several names) prefer global, then weak,
    /// then local names, then an entry label.
    fn rank(&self) -> u8 {
        if !self.is_function() {
            return 3;
        }
        match self.info >> 4 {
            STB_GLOBAL => 0,
            STB_WEAK => 1,
            _ => 2,
        }
    }
}

/// One table's entries and where its string table is, in `data` (the
/// file's bytes).
struct Table<'d> {
    entries: &'d [u8],
    strtab: (usize, usize),
}

impl<'d> Table<'d> {
    fn of(elf: &ElfFile, data: &'d [u8], section: &Section) -> Result<Table<'d>> {
        if section.entsize != 0 && section.entsize != SYM_SIZE as u64 {
            return Err(Error::Malformed { what: "symbol table sh_entsize", value: section.entsize });
        }
        let range = |what, offset: u64, size: u64| -> Result<(usize, usize)> {
            let truncated = || Error::Truncated { what, offset, size, file_len: data.len() as u64 };
            let start = usize::try_from(offset).map_err(|_| truncated())?;
            let len = usize::try_from(size).map_err(|_| truncated())?;
            if start.checked_add(len).is_none_or(|end| end > data.len()) {
                return Err(truncated());
            }
            Ok((start, len))
        };
        let (start, len) = range("symbol table", section.offset, section.size)?;
        let strtab = elf
            .sections()
            .get(section.link as usize)
            .filter(|s| s.sh_type != SHT_NOBITS)
            .ok_or(Error::Malformed { what: "symbol table sh_link", value: section.link.into() })?;
        let strtab = range("symbol string table", strtab.offset, strtab.size)?;
        Ok(Table { entries: &data[start..start + len], strtab })
    }

    fn entries(&self) -> impl Iterator<Item = Entry> + 'd {
        self.entries.chunks_exact(SYM_SIZE).map(Entry::read)
    }
}

/// The symbol tables of `elf` that exist, `.symtab` first.
fn tables<'d>(elf: &ElfFile, data: &'d [u8]) -> impl Iterator<Item = (Result<Table<'d>>, SymbolSource)> + 'd {
    let found: Vec<_> = [(SHT_SYMTAB, SymbolSource::Symtab), (SHT_DYNSYM, SymbolSource::Dynsym)]
        .into_iter()
        .filter_map(|(sh_type, source)| {
            let section = elf.sections().iter().find(|s| s.sh_type == sh_type)?;
            Some((Table::of(elf, data, section), source))
        })
        .collect();
    found.into_iter()
}

/// One function symbol of the index: 12 bytes (librustc_driver and
/// libLLVM have 100,000-150,000 each).
#[derive(Clone, Copy, Debug)]
struct Sym {
    /// Address, from the index's base.
    offset: u32,
    /// Size, saturated at `u32::MAX`.
    size: u32,
    /// Offset of the name in the string table.
    name: u32,
}

const _: () = assert!(std::mem::size_of::<Sym>() == 12);

/// The function symbols (`STT_FUNC`, `STT_GNU_IFUNC`, and an untyped
/// label at a program's entry point) of a file, sorted
/// by address for lookup by binary search; names are read from the
/// file's bytes when a lookup needs one (every method takes them: the
/// bytes the index was built from, or another map of the same file).
///
/// Aliases (several names at one address) are all kept; lookup prefers
/// global over weak over local names, then the larger symbol, then the
/// first in the table.
#[derive(Clone, Debug)]
pub struct SymbolIndex {
    syms: Box<[Sym]>,
    /// The lowest address; symbols more than 4 GiB above it are left out
    /// (no real file spans that much).
    base: u64,
    /// Where the string table is in the file's bytes.
    strtab: (usize, usize),
    source: SymbolSource,
}

impl SymbolIndex {
    /// The functions of `.symtab`, or of `.dynsym` when `.symtab` is
    /// absent, malformed or has none (empty when neither has any). `data`
    /// is the file's bytes: `elf.data()`, or another map of the same file
    /// (whose pages its owner may give back). Names are not read here, so
    /// the string table's pages are not touched.
    ///
    /// An error only when a table is malformed and no other has a
    /// function.
    pub fn build(elf: &ElfFile, data: &[u8]) -> Result<SymbolIndex> {
        let mut error = None;
        let entry = elf.program_entry();
        for (table, source) in tables(elf, data) {
            let table = match table {
                Ok(t) => t,
                Err(e) => {
                    error.get_or_insert(e);
                    continue;
                }
            };
            let strtab_len = table.strtab.1;
            // Named (offset 0 is the empty string), inside the table.
            let keep = |e: &Entry| {
                (e.is_function() || e.is_entry_label(entry)) && e.name != 0 && (e.name as usize) < strtab_len
            };
            let count = table.entries().filter(keep).count();
            if count == 0 {
                continue;
            }
            let base = table.entries().filter(keep).map(|e| e.addr).min().unwrap_or(0);
            let mut all: Vec<(Sym, u8, u32)> = Vec::with_capacity(count);
            for (i, e) in table.entries().enumerate() {
                if !keep(&e) {
                    continue;
                }
                // At or above the base (the lowest kept address).
                if let Ok(offset) = u32::try_from(e.addr - base) {
                    let size = u32::try_from(e.size).unwrap_or(u32::MAX);
                    all.push((Sym { offset, size, name: e.name }, e.rank(), i as u32));
                }
            }
            all.sort_unstable_by(|(a, ra, ia), (b, rb, ib)| {
                a.offset.cmp(&b.offset).then(ra.cmp(rb)).then(b.size.cmp(&a.size)).then(ia.cmp(ib))
            });
            let syms = all.iter().map(|(s, _, _)| *s).collect();
            return Ok(SymbolIndex { syms, base, strtab: table.strtab, source });
        }
        match error {
            Some(e) => Err(e),
            None => Ok(SymbolIndex { syms: Box::new([]), base: 0, strtab: (0, 0), source: SymbolSource::None }),
        }
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

    /// Heap bytes held: 12 per symbol.
    pub fn heap_bytes(&self) -> u64 {
        (self.syms.len() * std::mem::size_of::<Sym>()) as u64 + 64
    }

    /// The name at `s.name` in `data`'s string table, at most
    /// [`MAX_NAME`] bytes, invalid UTF-8 replaced.
    fn name<'d>(&self, data: &'d [u8], s: &Sym) -> Cow<'d, str> {
        let (start, len) = self.strtab;
        let table = data.get(start..start.saturating_add(len)).unwrap_or(&[]);
        let rest = table.get(s.name as usize..).unwrap_or(&[]);
        let rest = &rest[..rest.len().min(MAX_NAME)];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end])
    }

    /// The function containing `vaddr` (an ELF virtual address, see
    /// [`crate::LoadSegments::elf_vaddr`]): its raw name and the offset
    /// of `vaddr` in it.
    ///
    /// The candidate is the symbol with the greatest address ≤ `vaddr`;
    /// an address past the end of a sized symbol is a miss, a symbol of
    /// size 0 extends to the next symbol.
    pub fn lookup<'d>(&self, data: &'d [u8], vaddr: u64) -> Option<(Cow<'d, str>, u64)> {
        // Below the base: before every symbol; 4 GiB above: after them.
        let at = u32::try_from(vaddr.checked_sub(self.base)?).unwrap_or(u32::MAX);
        let idx = self.syms.partition_point(|s| s.offset <= at);
        let start = self.syms.get(idx.checked_sub(1)?)?.offset;
        let first = self.syms[..idx].partition_point(|s| s.offset < start);
        let offset = vaddr - (self.base + u64::from(start));
        self.syms[first..idx]
            .iter()
            .find(|s| s.size == 0 || offset < u64::from(s.size))
            .map(|s| (self.name(data, s), offset))
    }

    /// All symbols in address order as `(address, size, name)`.
    pub fn iter<'a, 'd: 'a>(&'a self, data: &'d [u8]) -> impl Iterator<Item = (u64, u64, Cow<'d, str>)> + 'a {
        self.syms.iter().map(move |s| (self.base + u64::from(s.offset), u64::from(s.size), self.name(data, s)))
    }
}

/// A [`SymbolIndex`] with the bytes of the file it was built from, as
/// [`ElfFile::symbols`] gives it.
#[derive(Clone, Debug)]
pub struct SymbolTable<'a> {
    index: SymbolIndex,
    data: &'a [u8],
}

impl<'a> SymbolTable<'a> {
    /// Which table the symbols came from.
    pub fn source(&self) -> SymbolSource {
        self.index.source()
    }

    /// Number of function symbols.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there is no function symbol.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// See [`SymbolIndex::lookup`].
    pub fn lookup(&self, vaddr: u64) -> Option<(Cow<'a, str>, u64)> {
        self.index.lookup(self.data, vaddr)
    }

    /// The address and size of the first function named exactly `name`
    /// (a linear scan).
    pub fn find(&self, name: &str) -> Option<(u64, u64)> {
        self.iter().find(|(_, _, n)| n == name).map(|(addr, size, _)| (addr, size))
    }

    /// All symbols in address order as `(address, size, name)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, Cow<'a, str>)> + '_ {
        self.index.iter(self.data)
    }

    /// The index, without the bytes.
    pub fn into_index(self) -> SymbolIndex {
        self.index
    }
}

impl ElfFile {
    /// The file's function symbols ([`SymbolIndex::build`] over its own
    /// bytes).
    pub fn symbols(&self) -> Result<SymbolTable<'_>> {
        Ok(SymbolTable { index: SymbolIndex::build(self, self.data())?, data: self.data() })
    }

    /// The address of the first defined symbol of any kind (function,
    /// object, untyped) named exactly `name`, from `.symtab` then
    /// `.dynsym`: a linear scan, for the odd well-known symbol (e.g. Go's
    /// `runtime.text`).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.scan_symbols(name, |_| true).map(|(addr, _)| addr)
    }

    /// The address and size of the first function symbol (as kept by
    /// [`SymbolIndex`]) named exactly `name`, from `.symtab` then
    /// `.dynsym`.
    ///
    /// A linear scan that copies nothing and builds no index: checking
    /// every file mapped for a few well-known functions costs no memory.
    pub fn function_symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.scan_symbols(name, Entry::is_function)
    }

    /// The size of a function symbol at `vaddr` that has one, from
    /// `.symtab` then `.dynsym`: a linear scan.
    pub fn function_size_at(&self, vaddr: u64) -> Option<u64> {
        self.each_defined(|e, _| match e.is_function() && e.addr == vaddr && e.size > 0 {
            true => ControlFlow::Break(e.size),
            false => ControlFlow::Continue(()),
        })
    }

    /// Which of `names` the file defines (symbols of any kind, in
    /// `.symtab` or `.dynsym`): one pass over the tables for all of them,
    /// where [`ElfFile::symbol_address`] makes one per name.
    pub fn defines_symbols(&self, names: &[&str]) -> Vec<bool> {
        let mut found = vec![false; names.len()];
        // Their first two bytes: most names of a big table (`_Z...`,
        // `_R...`) go no further than this.
        let heads: Vec<[u8; 2]> = names
            .iter()
            .map(|n| [n.as_bytes().first().copied().unwrap_or(0), n.as_bytes().get(1).copied().unwrap_or(0)])
            .collect();
        self.each_defined(|_, head| {
            let first_two = [head.first().copied().unwrap_or(0), head.get(1).copied().unwrap_or(0)];
            if heads.contains(&first_two) {
                for (i, name) in names.iter().enumerate() {
                    if !found[i] && names_symbol(head, name.as_bytes()) {
                        found[i] = true;
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        found
    }

    /// `(address, size)` of the first defined symbol named `name` that
    /// `accept` takes.
    fn scan_symbols(&self, name: &str, accept: impl Fn(&Entry) -> bool) -> Option<(u64, u64)> {
        let name = name.as_bytes();
        self.each_defined(|e, head| match names_symbol(head, name) && accept(e) {
            true => ControlFlow::Break((e.addr, e.size)),
            false => ControlFlow::Continue(()),
        })
    }

    /// Calls `f` with each defined entry of `.symtab`, then of `.dynsym`
    /// (a malformed table is passed over), and the string table from its
    /// name on (its name and whatever follows: the NUL of every long,
    /// mangled name is not searched for), until `f` breaks.
    ///
    /// The pages read are given back every [`RELEASE_EVERY_SYMBOLS`]
    /// entries and at the end: a scan reads about one string-table page
    /// per entry, and the big libraries of build machines have 20-25 MB
    /// of `.symtab` and `.strtab` (librustc_driver, libLLVM), which stayed
    /// resident until the file was dropped.
    fn each_defined<B>(&self, mut f: impl FnMut(&Entry, &[u8]) -> ControlFlow<B>) -> Option<B> {
        let data = self.data();
        for (table, _) in tables(self, data) {
            let Ok(table) = table else { continue };
            let strtab = &data[table.strtab.0..table.strtab.0 + table.strtab.1];
            let release = || {
                self.release(table.entries);
                self.release(strtab);
            };
            for (i, e) in table.entries().enumerate() {
                if i > 0 && i.is_multiple_of(RELEASE_EVERY_SYMBOLS) {
                    release();
                }
                if e.shndx == SHN_UNDEF {
                    continue;
                }
                let Some(head) = strtab.get(e.name as usize..) else { continue };
                if let ControlFlow::Break(b) = f(&e, head) {
                    release();
                    return Some(b);
                }
            }
            release();
        }
        None
    }
}

/// Whether `head` (a string table from a name on) starts with the name
/// `name` and its terminating NUL.
fn names_symbol(head: &[u8], name: &[u8]) -> bool {
    head.get(name.len()) == Some(&0) && head.starts_with(name)
}
