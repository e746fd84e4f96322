//! One file's symbolization sources: Go's function table, DWARF (in the
//! file or a separate debug file) and ELF symbols, loaded in two steps
//! (symbols and Go's table first, DWARF after) so that a file can answer
//! with its symbols while its DWARF loads.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use profiler_elf::source::Refusals;
use profiler_elf::{ElfFile, GoPclntab, GoPclntabLayout, GoPclntabVersion, SymbolSource};
use profiler_trace::SourceLine;

use crate::debugfile::{self, DebugConfig, Place};
use crate::demangle::demangle;
use crate::dwarf::{Dwarf, DwarfError, DwarfFile};
use crate::filemap::Backing;
use crate::heap::table_bytes;
use crate::source::{FileSource, LoadError};
use crate::symtab::Symbols;

/// Which source named a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LineSource {
    /// DWARF in the file itself.
    Dwarf,
    /// DWARF in a separate debug file.
    DebugFile,
    /// Go's `.gopclntab` (the frame is Go code).
    GoPclntab,
    /// `.symtab`/`.dynsym`: function name only.
    Symbols,
}

/// Where a file's DWARF came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DwarfOrigin {
    /// The file's own `.debug_*` sections.
    InFile,
    /// A separate debug file (build id or `.gnu_debuglink`).
    DebugFile,
}

/// What was found in a file when it was loaded.
#[derive(Clone, Debug)]
pub struct FileInfo {
    /// The Go table format, for Go binaries.
    pub go_pclntab: Option<GoPclntabVersion>,
    /// Where the DWARF came from, when there is usable DWARF.
    pub dwarf: Option<DwarfOrigin>,
    /// The separate debug file, when one was found.
    pub debug_file: Option<PathBuf>,
    /// Why DWARF that exists could not be used (corrupt, zstd, ...).
    pub dwarf_error: Option<Arc<DwarfError>>,
    /// Which ELF symbol table names functions.
    pub symbols: SymbolSource,
    /// Number of function symbols.
    pub symbol_count: usize,
}

/// The symbolization sources of one file, loaded (on a background thread
/// by [`crate::NativeSymbolizer`], or directly).
///
/// Lookups take `&self` but parse DWARF lazily into interior caches, so
/// the type is `Send` but not `Sync`: one thread looks up at a time.
pub struct FileSymbolizer {
    /// Go's table, and the file it is read from.
    go: Option<(Arc<ElfFile>, GoPclntabLayout, Range<u64>)>,
    dwarf: Option<(Dwarf, LineSource)>,
    symbols: Option<Symbols>,
    /// Executable `PT_LOAD` ranges: symbols name only code (a last symbol
    /// of size 0 would otherwise cover every higher address).
    code: Vec<Range<u64>>,
    names: RefCell<Names>,
    info: FileInfo,
}

/// Bytes of executable sections outside `text` (alignment padding and
/// stubs in pure Go binaries, C code in cgo binaries).
fn code_outside(elf: &ElfFile, text: &Range<u64>) -> u64 {
    /// `SHF_EXECINSTR`.
    const SHF_EXECINSTR: u64 = 4;
    elf.sections()
        .iter()
        .filter(|s| s.flags & SHF_EXECINSTR != 0 && s.sh_type != profiler_elf::SHT_NOBITS)
        .map(|s| {
            let end = s.addr.saturating_add(s.size);
            let below = text.start.clamp(s.addr, end) - s.addr;
            let above = end - text.end.clamp(s.addr, end);
            below + above
        })
        .sum()
}

/// Interned names and files: one allocation per distinct string. Answers
/// are cached by address in the symbolizer's one name cache
/// ([`crate::NativeSymbolizer`]), not here.
#[derive(Default)]
struct Names {
    set: HashSet<Arc<str>>,
    /// Bytes of the interned strings (with their `Arc` headers).
    strings: u64,
}

impl Names {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.set.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.strings += (s.len() as u64 + 16).next_multiple_of(8);
        self.set.insert(a.clone());
        a
    }

    /// The demangled name of the ELF symbol named `raw`, without a
    /// symbol version (`memcpy@@GLIBC_2.14` is `memcpy`; versioned names
    /// are in the `.symtab` of separate debug files).
    fn symbol(&mut self, raw: &str) -> Arc<str> {
        let raw = match raw.find('@') {
            Some(at) if at > 0 => &raw[..at],
            _ => raw,
        };
        self.get(&demangle(raw))
    }

    /// Heap bytes: the strings and the set.
    fn bytes(&self) -> u64 {
        self.strings + table_bytes(self.set.capacity(), 16)
    }
}

impl std::fmt::Debug for FileSymbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSymbolizer").field("info", &self.info).finish_non_exhaustive()
    }
}

/// The second step of a load: finding and parsing the file's DWARF (see
/// [`FileSymbolizer::load_symbols`]).
pub(crate) struct DwarfJob {
    elf: Arc<ElfFile>,
    bytes: Backing,
    source: FileSource,
    config: DebugConfig,
    /// Whether the file's own symbols are a full `.symtab`.
    has_symtab: bool,
}

/// What the second step found, to [`FileSymbolizer::attach`].
pub(crate) struct DwarfPart {
    dwarf: Option<(Dwarf, LineSource)>,
    debug_file: Option<PathBuf>,
    dwarf_error: Option<Arc<DwarfError>>,
    /// The debug file's `.symtab`, when the file itself has none.
    symbols: Option<Symbols>,
    /// Loading the DWARF panicked (counted in `NativeStats::panics`).
    pub(crate) panicked: bool,
    /// Debug file candidates refused.
    refusals: Refusals,
}

impl DwarfPart {
    /// The part of a DWARF step that panicked: no DWARF.
    pub(crate) fn panicked() -> DwarfPart {
        DwarfPart {
            dwarf: None,
            debug_file: None,
            dwarf_error: None,
            symbols: None,
            panicked: true,
            refusals: Refusals::default(),
        }
    }

    /// Why DWARF that exists was not used.
    pub(crate) fn error(&self) -> Option<&DwarfError> {
        self.dwarf_error.as_deref()
    }

    /// Debug file candidates refused while looking.
    pub(crate) fn refusals(&self) -> Refusals {
        self.refusals
    }
}

impl DwarfJob {
    /// Finds the DWARF (the file's own, else a separate debug file's,
    /// either with its `dwz` supplementary file) and parses its unit
    /// index, unless that would take more than
    /// [`DebugConfig::max_dwarf_bytes`].
    pub(crate) fn run(self) -> DwarfPart {
        let DwarfJob { elf, bytes, source, config, has_symtab } = self;
        let mut refusals = Refusals::default();
        let mut with_sup = |file: &DwarfFile, place: Option<&Place>| {
            let sup = debugfile::find_sup(&file.elf, place, &source, &config, &mut refusals);
            Dwarf::load(file, sup.as_ref(), config.max_dwarf_bytes)
        };
        let mut part = DwarfPart {
            dwarf: None,
            debug_file: None,
            dwarf_error: None,
            symbols: None,
            panicked: false,
            refusals: Refusals::default(),
        };
        let bytes_of_file = bytes.clone();
        let mut found_refusals = Refusals::default();
        let loaded = if debugfile::has_debug_info(&elf) {
            let file = DwarfFile { elf, bytes };
            Some((with_sup(&file, None), LineSource::Dwarf))
        } else if let Some(df) = debugfile::find(&elf, &source, &config, &mut found_refusals) {
            drop(elf);
            let file = df.file;
            let r = with_sup(&file, Some(&df.place));
            if r.is_err() {
                file.bytes.release();
            }
            if !has_symtab {
                part.symbols = Symbols::from_elf(&file.elf, &file.bytes).filter(|s| s.source() == SymbolSource::Symtab);
                if let Some(s) = &part.symbols {
                    s.backing().release();
                }
            }
            part.debug_file = Some(df.place.display());
            Some((r, LineSource::DebugFile))
        } else {
            None
        };
        part.refusals = refusals;
        part.refusals.add(&found_refusals);
        // Finding and indexing the DWARF read pages of the maps (also
        // when it was then not used).
        if let Some((Ok(d), _)) = &loaded {
            d.release_pages();
        }
        bytes_of_file.release();
        match loaded {
            Some((Ok(d), origin)) => part.dwarf = Some((d, origin)),
            Some((Err(e), _)) => part.dwarf_error = Some(Arc::new(e)),
            None => {}
        }
        part
    }
}

impl FileSymbolizer {
    /// Opens the file and loads every source it has: Go's table, the
    /// symbol table, DWARF (parsing the unit index, which takes a while
    /// for large files), the separate debug file. Only failing to open
    /// or parse the file itself is an error; missing or broken debug
    /// information leaves fewer sources.
    ///
    /// When `open_path` cannot be opened (e.g. `/proc/PID/map_files/...`
    /// without the capability to read it) and the source has a root, the
    /// file's path under that root is tried.
    pub fn load(source: &FileSource, config: &DebugConfig) -> Result<FileSymbolizer, LoadError> {
        let (mut file, job) = FileSymbolizer::load_symbols(source, config)?;
        if let Some(job) = job {
            file.attach(job.run());
        }
        Ok(file)
    }

    /// The first step of a load: the file, its symbols and Go's table;
    /// and the second step to run (DWARF), if any.
    pub(crate) fn load_symbols(
        source: &FileSource,
        config: &DebugConfig,
    ) -> Result<(FileSymbolizer, Option<DwarfJob>), LoadError> {
        let file = crate::source::open(source)?;
        Ok(FileSymbolizer::first_step(file.elf, file.bytes, source, config))
    }

    /// Loads the sources of an already opened file.
    pub fn from_elf(elf: Arc<ElfFile>, source: &FileSource, config: &DebugConfig) -> FileSymbolizer {
        let bytes = Backing::Elf(elf.clone());
        let (mut file, job) = FileSymbolizer::first_step(elf, bytes, source, config);
        if let Some(job) = job {
            file.attach(job.run());
        }
        file
    }

    fn first_step(
        elf: Arc<ElfFile>,
        bytes: Backing,
        source: &FileSource,
        config: &DebugConfig,
    ) -> (FileSymbolizer, Option<DwarfJob>) {
        // `find` only scans for the table in files that may be Go.
        let go = GoPclntab::find(&elf).ok().flatten().map(|t| (t.layout(), t.text_range()));
        // A pure Go binary needs nothing but its function table: its
        // (large, compressed) DWARF and symbols would cost memory for no
        // frame. A cgo binary has C code outside the table's range.
        let native_code = match &go {
            None => true,
            Some((_, text)) => code_outside(&elf, text) > 1024,
        };
        let symbols = if native_code { Symbols::from_elf(&elf, &bytes) } else { None };
        // Reading the symbol table touched its pages.
        bytes.release();
        let info = FileInfo {
            go_pclntab: go.as_ref().map(|(l, _)| l.version()),
            dwarf: None,
            debug_file: None,
            dwarf_error: None,
            symbols: symbols.as_ref().map_or(SymbolSource::None, Symbols::source),
            symbol_count: symbols.as_ref().map_or(0, Symbols::len),
        };
        let code = elf
            .program_headers()
            .iter()
            // PF_X = 1.
            .filter(|p| p.p_type == profiler_elf::PT_LOAD && p.flags & 1 != 0)
            .map(|p| p.vaddr..p.vaddr.saturating_add(p.memsz))
            .collect();
        let job = (config.use_dwarf && native_code).then(|| DwarfJob {
            elf: elf.clone(),
            bytes,
            source: source.clone(),
            config: config.clone(),
            has_symtab: info.symbols == SymbolSource::Symtab,
        });
        let file = FileSymbolizer {
            // Only Go's table reads the `ElfFile` after the load; other
            // files drop it (and its map) once the DWARF step is done.
            go: go.map(|(layout, text)| (elf, layout, text)),
            dwarf: None,
            symbols,
            code,
            names: RefCell::new(Names::default()),
            info,
        };
        (file, job)
    }

    /// Adds what the DWARF step found.
    pub(crate) fn attach(&mut self, part: DwarfPart) {
        self.info.dwarf = part.dwarf.as_ref().map(|(_, s)| match s {
            LineSource::DebugFile => DwarfOrigin::DebugFile,
            _ => DwarfOrigin::InFile,
        });
        self.info.debug_file = part.debug_file;
        self.info.dwarf_error = part.dwarf_error;
        self.dwarf = part.dwarf;
        if let Some(s) = part.symbols {
            self.info.symbols = s.source();
            self.info.symbol_count = s.len();
            self.symbols = Some(s);
        }
    }

    /// The DWARF's accounting: unit index bytes, units parsed
    /// by lookups, and the sums of their line program bytes, file names
    /// and `.debug_info` bytes. For measurements (the `memory_breakdown`
    /// example), not part of the API.
    #[doc(hidden)]
    pub fn dwarf_accounting(&self) -> Option<(u64, u64, [u64; 3])> {
        self.dwarf.as_ref().map(|(d, _)| {
            let (units, sizes) = d.parsed_units();
            (d.index_bytes(), units, sizes)
        })
    }

    /// What the file offered.
    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// DWARF units lookups parsed and the file's DWARF limit dropped.
    pub fn dwarf_units_dropped(&self) -> u64 {
        self.dwarf.as_ref().map_or(0, |(d, _)| d.units_dropped())
    }

    /// DWARF units lookups parsed so far (again after being given up
    /// included).
    pub fn dwarf_units_parsed(&self) -> u64 {
        self.dwarf.as_ref().map_or(0, |(d, _)| d.parsed_units().0)
    }

    /// DWARF units parsed again after being given up for the budget.
    pub(crate) fn dwarf_units_reparsed(&self) -> u64 {
        self.dwarf.as_ref().map_or(0, |(d, _)| d.units_reparsed())
    }

    /// Appends (last use, index) of the DWARF units lookups parsed, the
    /// one used last aside (see [`Dwarf::unit_uses`]).
    pub(crate) fn dwarf_unit_uses(&self, out: &mut Vec<(u64, u32)>) {
        if let Some((d, _)) = &self.dwarf {
            d.unit_uses(out);
        }
    }

    /// Gives up parsed DWARF unit `unit`; the heap bytes freed.
    pub(crate) fn give_up_dwarf_unit(&self, unit: u32) -> u64 {
        self.dwarf.as_ref().map_or(0, |(d, _)| d.give_up_unit(unit))
    }

    /// Accounted heap bytes held: symbols (16 bytes each; names stay in
    /// the file), decompressed DWARF, its unit index and the units parsed
    /// by lookups so far, interned names. Mapped file bytes are not
    /// counted (they are the kernel's page cache; the
    /// [`crate::NativeSymbolizer`] gives the pages read back to it).
    pub fn cost(&self) -> u64 {
        // Small files are read into memory rather than mapped: count each
        // such buffer once.
        let mut files: Vec<&Backing> = Vec::new();
        let backings = self
            .symbols
            .as_ref()
            .map(Symbols::backing)
            .into_iter()
            .chain(self.dwarf.iter().flat_map(|(d, _)| d.file_backings()));
        for b in backings {
            if !files.iter().any(|f| f.id() == b.id()) {
                files.push(b);
            }
        }
        files.iter().map(|b| b.heap_bytes()).sum::<u64>()
            + self.symbols.as_ref().map_or(0, Symbols::heap_bytes)
            + self.dwarf.as_ref().map_or(0, |(d, _)| d.cost())
            + self.names.borrow().bytes()
            + self.code.capacity() as u64 * 16
            // The structure itself (boxed when loaded) and small parts.
            + std::mem::size_of::<Self>() as u64
            + 1024
    }

    /// Whether a file this symbolizer reads shrank while mapped (see
    /// [`profiler_elf::map_guard`]): it names nothing from then on.
    pub fn changed(&self) -> bool {
        self.go.as_ref().is_some_and(|(elf, _, _)| elf.changed_while_read())
            || self.symbols.as_ref().is_some_and(|s| s.backing().changed())
            || self.dwarf.as_ref().is_some_and(|(d, _)| d.changed())
    }

    /// The maps of files this symbolizer reads after its load (some
    /// possibly repeated), for a release after the lookups
    /// ([`crate::release::PageReleaser`]).
    pub(crate) fn maps(&self) -> Vec<std::sync::Weak<crate::filemap::FileMap>> {
        let symbols = self.symbols.as_ref().map(|s| s.backing());
        let dwarf = self.dwarf.iter().flat_map(|(d, _)| d.file_backings());
        symbols
            .into_iter()
            .chain(dwarf)
            .filter_map(|b| match b {
                crate::filemap::Backing::Map(m) => Some(std::sync::Arc::downgrade(m)),
                _ => None,
            })
            .collect()
    }

    /// The source lines of ELF virtual address `vaddr`, innermost
    /// (inlined) first, the containing function last, and which source
    /// named them; `None` when no source covers the address.
    ///
    /// For a return address, pass the address of the call (e.g. return
    /// address - 1), or the line after the call is reported.
    pub fn symbolize(&self, vaddr: u64) -> Option<(Vec<SourceLine>, LineSource)> {
        if self.changed() {
            // Truncated under the map: what it reads now is zero pages.
            return None;
        }
        let mut names = self.names.borrow_mut();
        if let Some((elf, layout, text)) = &self.go {
            if text.contains(&vaddr) {
                if let Some(tab) = layout.bind(elf) {
                    let frames = tab.frames(vaddr);
                    if !frames.is_empty() {
                        let lines = frames
                            .iter()
                            .map(|f| SourceLine {
                                function: names.get(f.function),
                                file: f.file.map(|p| names.get(p)),
                                line: f.line,
                                approximate: false,
                            })
                            .collect();
                        return Some((lines, LineSource::GoPclntab));
                    }
                }
            }
        }
        let in_code = self.code.iter().any(|r| r.contains(&vaddr));
        // The name of the containing ELF symbol, demangled and interned.
        let symbol = |names: &mut Names| {
            let (raw, _) = self.symbols.as_ref().filter(|_| in_code).and_then(|s| s.lookup(vaddr))?;
            Some(names.symbol(&raw))
        };
        if let Some((dwarf, source)) = &self.dwarf {
            let frames = dwarf.frames(vaddr);
            let count = frames.len();
            let mut lines = Vec::with_capacity(count);
            for (i, f) in frames.into_iter().enumerate() {
                let function = match &f.function {
                    Some(n) => names.get(&demangle(n)),
                    // The containing function without a DWARF name (e.g.
                    // only a line table): its ELF symbol.
                    None if i + 1 == count => symbol(&mut names).unwrap_or_else(|| names.get("??")),
                    None => names.get("??"),
                };
                lines.push(SourceLine {
                    function,
                    file: f.file.as_deref().map(|p| names.get(p)),
                    line: f.line,
                    approximate: false,
                });
            }
            if lines.iter().any(|l| &*l.function != "??") {
                return Some((lines, *source));
            }
        }
        let function = symbol(&mut names)?;
        Some((vec![SourceLine { function, file: None, line: 0, approximate: false }], LineSource::Symbols))
    }
}
