//! One file's symbolization sources, loaded together: Go's function table,
//! DWARF (in the file or a separate debug file) and ELF symbols.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use profiler_elf::{
    ElfFile, GoPclntab, GoPclntabLayout, GoPclntabVersion, SymbolSource, SymbolTable,
};
use profiler_trace::{Pid, SourceLine};

use crate::debugfile::{self, DebugConfig};
use crate::demangle::demangle;
use crate::dwarf::{Dwarf, DwarfError};

/// How to open a file, and where it lives as its process sees it (to find
/// its separate debug file).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileSource {
    /// The path to open now, e.g. `/proc/PID/root/usr/lib/libfoo.so` or
    /// `/proc/PID/map_files/START-END`.
    pub open_path: PathBuf,
    /// The file's path in the process's mount namespace, e.g.
    /// `/usr/lib/libfoo.so` (its directory is where `.gnu_debuglink`
    /// files are looked for). May equal `open_path`.
    pub path: String,
    /// The process's root directory as the host sees it
    /// (`/proc/PID/root`), when the debug directories should be looked up
    /// there first; `None` for files of the host's own namespace.
    pub root: Option<PathBuf>,
}

impl FileSource {
    /// A file of the host's namespace, opened by its path.
    pub fn new(path: impl Into<PathBuf>) -> FileSource {
        let open_path = path.into();
        FileSource {
            path: open_path.to_string_lossy().into_owned(),
            open_path,
            root: None,
        }
    }

    /// `path` as process `pid` sees it, opened through
    /// `/proc/PID/root/...` (works for processes in containers).
    pub fn in_process(pid: Pid, path: &str) -> FileSource {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        FileSource {
            open_path: root.join(path.trim_start_matches('/')),
            path: path.to_owned(),
            root: Some(root),
        }
    }

    /// The file mapped at `start..end` in process `pid`, opened through
    /// `/proc/PID/map_files/` (works after the file was deleted or
    /// replaced on disk); `path` is the mapping's path, for debug links.
    pub fn in_mapping(pid: Pid, start: u64, end: u64, path: &str) -> FileSource {
        FileSource {
            open_path: PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}")),
            path: path.to_owned(),
            root: Some(PathBuf::from(format!("/proc/{pid}/root"))),
        }
    }
}

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

/// Why a file could not be loaded at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Opening or parsing the file failed.
    #[error("cannot load {path}")]
    Open {
        /// The path that was opened.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: profiler_elf::Error,
    },
    /// Loading panicked (a bug, caught so that it costs only this file).
    #[error("loading {path} panicked")]
    Panicked {
        /// The path that was opened.
        path: PathBuf,
    },
}

/// The symbolization sources of one file, loaded (on a background thread
/// by [`crate::NativeSymbolizer`], or directly).
///
/// Lookups take `&self` but parse DWARF lazily into interior caches, so
/// the type is `Send` but not `Sync`: one thread looks up at a time.
pub struct FileSymbolizer {
    elf: Arc<ElfFile>,
    go: Option<(GoPclntabLayout, Range<u64>)>,
    dwarf: Option<(Dwarf, LineSource)>,
    symbols: Option<SymbolTable>,
    symbol_bytes: u64,
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

/// Interned names and files: one allocation per distinct string; and the
/// demangled name of each ELF symbol looked up (demangling C++ costs
/// microseconds).
#[derive(Default)]
struct Names {
    set: HashSet<Arc<str>>,
    symbols: HashMap<u64, Arc<str>>,
    bytes: u64,
}

impl Names {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.set.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.bytes += s.len() as u64 + 32;
        self.set.insert(a.clone());
        a
    }

    /// The demangled name of the symbol at `addr` named `raw`.
    fn symbol(&mut self, addr: u64, raw: &str) -> Arc<str> {
        if let Some(a) = self.symbols.get(&addr) {
            return a.clone();
        }
        let a = self.get(&demangle(raw));
        self.bytes += 24;
        self.symbols.insert(addr, a.clone());
        a
    }
}

impl std::fmt::Debug for FileSymbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSymbolizer")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl FileSymbolizer {
    /// Opens the file and loads every source it has: Go's table, DWARF
    /// (parsing the unit index, which takes a while for large files), the
    /// separate debug file, the symbol table. Only failing to open or
    /// parse the file itself is an error; missing or broken debug
    /// information leaves fewer sources.
    ///
    /// When `open_path` cannot be opened (e.g. `/proc/PID/map_files/...`
    /// without the capability to read it) and the source has a root, the
    /// file's path under that root is tried.
    pub fn load(source: &FileSource, config: &DebugConfig) -> Result<FileSymbolizer, LoadError> {
        let elf = match ElfFile::open(&source.open_path) {
            Ok(elf) => elf,
            Err(e) => {
                let fallback = source
                    .root
                    .as_ref()
                    .filter(|_| source.path.starts_with('/'))
                    .map(|r| r.join(source.path.trim_start_matches('/')))
                    .filter(|p| *p != source.open_path);
                match fallback.map(ElfFile::open) {
                    Some(Ok(elf)) => elf,
                    _ => {
                        return Err(LoadError::Open {
                            path: source.open_path.clone(),
                            source: e,
                        })
                    }
                }
            }
        };
        Ok(FileSymbolizer::from_elf(Arc::new(elf), source, config))
    }

    /// Loads the sources of an already opened file.
    pub fn from_elf(
        elf: Arc<ElfFile>,
        source: &FileSource,
        config: &DebugConfig,
    ) -> FileSymbolizer {
        let go = GoPclntab::find(&elf)
            .ok()
            .flatten()
            .map(|t| (t.layout(), t.text_range()));
        // A pure Go binary needs nothing but its function table: its
        // (large, compressed) DWARF and symbols would cost memory for no
        // frame. A cgo binary has C code outside the table's range.
        let native_code = match &go {
            None => true,
            Some((_, text)) => code_outside(&elf, text) > 1024,
        };
        let mut dwarf = None;
        let mut debug_file = None;
        let mut dwarf_error = None;
        if config.use_dwarf && native_code {
            // The file's own DWARF, else a separate debug file's; either
            // may lean on a supplementary file.
            let with_sup = |dwarf_elf: &Arc<ElfFile>, dwarf_path: &std::path::Path| {
                let sup = debugfile::find_sup(dwarf_elf, dwarf_path, source, config);
                Dwarf::load(dwarf_elf, sup.as_ref())
            };
            let loaded = if debugfile::has_debug_info(&elf) {
                Some((with_sup(&elf, &source.open_path), LineSource::Dwarf))
            } else if let Some(df) = debugfile::find(&elf, source, config) {
                let r = with_sup(&df.elf, &df.path);
                debug_file = Some(df);
                Some((r, LineSource::DebugFile))
            } else {
                None
            };
            match loaded {
                Some((Ok(d), origin)) => dwarf = Some((d, origin)),
                Some((Err(e), _)) => dwarf_error = Some(Arc::new(e)),
                None => {}
            }
        }
        let mut symbols = native_code.then(|| elf.symbols().ok()).flatten();
        if symbols.as_ref().map(SymbolTable::source) != Some(SymbolSource::Symtab) {
            if let Some(s) = debug_file
                .as_ref()
                .and_then(|df| df.elf.symbols().ok())
                .filter(|s| s.source() == SymbolSource::Symtab)
            {
                symbols = Some(s);
            }
        }
        let symbol_bytes = symbols
            .as_ref()
            .map(|s| s.iter().map(|(_, _, n)| n.len() as u64 + 24).sum())
            .unwrap_or(0);
        let info = FileInfo {
            go_pclntab: go.as_ref().map(|(l, _)| l.version()),
            dwarf: dwarf.as_ref().map(|(_, s)| match s {
                LineSource::DebugFile => DwarfOrigin::DebugFile,
                _ => DwarfOrigin::InFile,
            }),
            debug_file: debug_file.map(|d| d.path),
            dwarf_error,
            symbols: symbols
                .as_ref()
                .map_or(SymbolSource::None, SymbolTable::source),
            symbol_count: symbols.as_ref().map_or(0, SymbolTable::len),
        };
        let code = elf
            .program_headers()
            .iter()
            // PF_X = 1.
            .filter(|p| p.p_type == profiler_elf::PT_LOAD && p.flags & 1 != 0)
            .map(|p| p.vaddr..p.vaddr.saturating_add(p.memsz))
            .collect();
        FileSymbolizer {
            elf,
            go,
            dwarf,
            symbols,
            symbol_bytes,
            code,
            names: RefCell::new(Names::default()),
            info,
        }
    }

    /// What the file offered.
    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// Estimated heap bytes held: symbols, decompressed DWARF, an
    /// allowance for lazily parsed DWARF, interned names. The mapped file
    /// itself is not counted (its pages are the kernel's page cache).
    pub fn cost(&self) -> u64 {
        self.symbol_bytes
            + self.dwarf.as_ref().map_or(0, |(d, _)| d.cost())
            + self.names.borrow().bytes
            + 256
    }

    /// The source lines of ELF virtual address `vaddr`, innermost
    /// (inlined) first, the containing function last, and which source
    /// named them; `None` when no source covers the address.
    ///
    /// For a return address, pass the address of the call (e.g. return
    /// address - 1), or the line after the call is reported.
    pub fn symbolize(&self, vaddr: u64) -> Option<(Vec<SourceLine>, LineSource)> {
        let mut names = self.names.borrow_mut();
        if let Some((layout, text)) = &self.go {
            if text.contains(&vaddr) {
                if let Some(tab) = layout.bind(&self.elf) {
                    let frames = tab.frames(vaddr);
                    if !frames.is_empty() {
                        let lines = frames
                            .iter()
                            .map(|f| SourceLine {
                                function: names.get(f.function),
                                file: f.file.map(|p| names.get(p)),
                                line: f.line,
                            })
                            .collect();
                        return Some((lines, LineSource::GoPclntab));
                    }
                }
            }
        }
        let in_code = self.code.iter().any(|r| r.contains(&vaddr));
        // (symbol address, raw name) of the containing ELF symbol.
        let symbol = || {
            self.symbols
                .as_ref()
                .filter(|_| in_code)
                .and_then(|s| s.lookup(vaddr))
                .map(|(name, offset)| (vaddr - offset, name))
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
                    None if i + 1 == count => match symbol() {
                        Some((addr, raw)) => names.symbol(addr, raw),
                        None => names.get("??"),
                    },
                    None => names.get("??"),
                };
                lines.push(SourceLine {
                    function,
                    file: f.file.as_deref().map(|p| names.get(p)),
                    line: f.line,
                });
            }
            if lines.iter().any(|l| &*l.function != "??") {
                return Some((lines, *source));
            }
        }
        let (addr, raw) = symbol()?;
        Some((
            vec![SourceLine {
                function: names.symbol(addr, raw),
                file: None,
                line: 0,
            }],
            LineSource::Symbols,
        ))
    }
}
