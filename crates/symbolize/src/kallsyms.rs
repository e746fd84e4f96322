//! Kernel symbols from `/proc/kallsyms`.
//!
//! Line format (fs/proc, kernel/kallsyms.c): `ffffffff81000000 T _stext`,
//! module symbols end with `\t[module_name]`. Addresses read as zero when
//! `kernel.kptr_restrict` hides them from the reader.
//!
//! JIT-compiled BPF programs are listed too (kernel/bpf/core.c,
//! `bpf_get_prog_name`), as text symbols of the pseudo-module `[bpf]`:
//! `bpf_prog_<tag>_<name>`, the tag being 16 hex digits (the program's
//! SHA-1 prefix, as `bpftool prog` shows it) and the name the program's
//! (its function name for BTF programs, e.g. `on_cpu_sample`); trampolines
//! and dispatchers appear as `bpf_trampoline_<id>` and
//! `bpf_dispatcher_<name>`. A frame in one reads
//! `bpf_prog_0870a3894f4dc8a0_on_cpu_sample [bpf]` ([`KernelSymbol`]'s
//! `Display`), and [`KernelSymbol::bpf_program`] splits it. Programs come
//! and go while the profiler runs: a lookup that lands in a BPF program
//! reads the table again when it is older than
//! [`KernelSymbolizer::BPF_REFRESH_INTERVAL`], so that a program loaded
//! since is not named after its neighbour.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache::{CacheStats, NameCache};

/// Why the kernel symbols could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KallsymsError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Every address is zero: `kernel.kptr_restrict` hides them (run as
    /// root, or lower the sysctl).
    #[error("{path} shows only zero addresses (kernel.kptr_restrict hides them from this user)")]
    AddressesHidden {
        /// The file.
        path: PathBuf,
    },
}

/// A kernel symbol an address falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    /// The function name.
    pub name: &'a str,
    /// The module it belongs to; `None` for the kernel image.
    pub module: Option<&'a str>,
    /// Distance from the symbol's start.
    pub offset: u64,
}

impl std::fmt::Display for KernelSymbol<'_> {
    /// `name`, or `name [module]` for a module's (or BPF's) symbol.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.module {
            Some(module) => write!(f, "{} [{module}]", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// The pseudo-module of BPF symbols.
const BPF_MODULE: &str = "bpf";

/// A JIT-compiled BPF program, from its symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfProgram<'a> {
    /// The program's tag, 16 hex digits.
    pub tag: &'a str,
    /// The program's name; empty for unnamed programs.
    pub name: &'a str,
}

impl<'a> KernelSymbol<'a> {
    /// Whether the symbol is BPF code (a program, trampoline or
    /// dispatcher).
    pub fn is_bpf(&self) -> bool {
        self.module == Some(BPF_MODULE)
    }

    /// The BPF program this symbol is (`bpf_prog_<tag>[_<name>]` in
    /// `[bpf]`).
    pub fn bpf_program(&self) -> Option<BpfProgram<'a>> {
        if !self.is_bpf() {
            return None;
        }
        let rest = self.name.strip_prefix("bpf_prog_")?;
        let tag = rest.get(..16).filter(|t| t.bytes().all(|b| b.is_ascii_hexdigit()))?;
        let name = match &rest[16..] {
            "" => "",
            tail => tail.strip_prefix('_')?,
        };
        Some(BpfProgram { tag, name })
    }
}

/// 16 bytes a symbol (a kernel has 100,000-200,000 text symbols).
#[derive(Clone, Copy, Debug)]
struct Entry {
    address: u64,
    // The name, in `names`.
    name_start: u32,
    name_len: u16,
    // Index in `modules` plus one; 0: vmlinux.
    module: u16,
}

/// An immutable, sorted table of kernel text symbols.
#[derive(Debug, Default)]
pub struct KernelSymbols {
    entries: Vec<Entry>,
    // All names and module names, back to back; module names are stored
    // once each.
    names: String,
    // Each module's name in `names` (start, length).
    modules: Vec<(u32, u16)>,
}

/// The longest distance from a symbol's start we attribute to it when it
/// is the last symbol (no next symbol bounds it).
const MAX_LAST_SYMBOL_SIZE: u64 = 1 << 20;

impl KernelSymbols {
    /// Reads and parses `/proc/kallsyms`.
    pub fn load() -> Result<KernelSymbols, KallsymsError> {
        Self::load_from(Path::new("/proc/kallsyms"))
    }

    /// Reads and parses a file in kallsyms format.
    pub fn load_from(path: &Path) -> Result<KernelSymbols, KallsymsError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| KallsymsError::Read { path: path.to_owned(), source })?;
        let symbols = Self::parse(&text);
        if symbols.entries.is_empty() && text.lines().next().is_some() {
            return Err(KallsymsError::AddressesHidden { path: path.to_owned() });
        }
        Ok(symbols)
    }

    /// Parses kallsyms text; keeps text symbols (`t`, `T`, `w`, `W`) with a
    /// non-zero address and skips malformed lines.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut symbols = KernelSymbols::default();
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") || name.len() > usize::from(u16::MAX) {
                continue;
            }
            let Ok(address) = u64::from_str_radix(addr, 16) else { continue };
            if address == 0 {
                continue;
            }
            let module = fields.next().and_then(|m| m.strip_prefix('[')).and_then(|m| m.strip_suffix(']'));
            let module = match module {
                None => 0,
                Some(m) if m.len() > usize::from(u16::MAX) => continue,
                Some(m) => {
                    // A module's symbols are listed together: the last one
                    // is the likely match.
                    let known = symbols
                        .modules
                        .iter()
                        .rposition(|&(start, len)| &symbols.names[start as usize..][..usize::from(len)] == m);
                    match known {
                        Some(i) => i + 1,
                        None if symbols.modules.len() < usize::from(u16::MAX) => {
                            symbols.modules.push((symbols.names.len() as u32, m.len() as u16));
                            symbols.names.push_str(m);
                            symbols.modules.len()
                        }
                        None => continue,
                    }
                }
            };
            let name_start = symbols.names.len() as u32;
            symbols.names.push_str(name);
            symbols.entries.push(Entry { address, name_start, name_len: name.len() as u16, module: module as u16 });
        }
        symbols.entries.sort_by_key(|e| e.address);
        symbols.entries.shrink_to_fit();
        symbols.names.shrink_to_fit();
        symbols.modules.shrink_to_fit();
        symbols
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no symbols.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The symbol containing `address`: the last one starting at or before
    /// it. Symbols are bounded by the next symbol's start.
    pub fn lookup(&self, address: u64) -> Option<KernelSymbol<'_>> {
        let index = self.entries.partition_point(|e| e.address <= address).checked_sub(1)?;
        let entry = &self.entries[index];
        let offset = address - entry.address;
        if index + 1 == self.entries.len() && offset >= MAX_LAST_SYMBOL_SIZE {
            return None;
        }
        let text = |start: u32, len: u16| &self.names[start as usize..][..usize::from(len)];
        let module = usize::from(entry.module).checked_sub(1).and_then(|i| self.modules.get(i));
        Some(KernelSymbol {
            name: text(entry.name_start, entry.name_len),
            module: module.map(|&(start, len)| text(start, len)),
            offset,
        })
    }
}

/// [`KernelSymbols`] plus the policy of when to read them again, and the
/// bounded cache of the function names it gave.
pub struct KernelSymbolizer {
    symbols: KernelSymbols,
    path: PathBuf,
    loaded_at: Instant,
    min_reload_interval: Duration,
    reloads: u64,
    /// Kernel and module functions by address looked up: the name and
    /// module as a frame shows them. Not BPF code (programs come and go)
    /// nor misses (a module may load): those go to the table each time.
    names: NameCache<u64, Arc<str>>,
}

impl std::fmt::Debug for KernelSymbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSymbolizer")
            .field("path", &self.path)
            .field("symbols", &self.symbols.len())
            .field("reloads", &self.reloads)
            .field("names", &self.names.stats())
            .finish_non_exhaustive()
    }
}

impl KernelSymbolizer {
    /// A lookup landing in BPF code reads the table again when it is
    /// older than this: programs are loaded and unloaded all the time, and
    /// a program loaded since the last read would be named after the
    /// symbol before it. (A read of kallsyms costs about 50 ms of CPU.)
    pub const BPF_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

    /// Loads `/proc/kallsyms`.
    pub fn new() -> Result<KernelSymbolizer, KallsymsError> {
        Self::with_path(PathBuf::from("/proc/kallsyms"), Duration::from_secs(60))
    }

    /// Most function names cached by address.
    pub const MAX_CACHED_NAMES: usize = 65_536;

    /// Loads `path`; reloads at most every `min_reload_interval`.
    pub fn with_path(path: PathBuf, min_reload_interval: Duration) -> Result<KernelSymbolizer, KallsymsError> {
        let symbols = KernelSymbols::load_from(&path)?;
        Ok(KernelSymbolizer {
            symbols,
            path,
            loaded_at: Instant::now(),
            min_reload_interval,
            reloads: 0,
            names: NameCache::new(Self::MAX_CACHED_NAMES),
        })
    }

    /// The function containing `address` as a frame names it (`name`, or
    /// `name [module]`), from the name cache or by [`Self::lookup`].
    pub fn function(&mut self, address: u64) -> Option<Arc<str>> {
        if let Some(name) = self.names.get(&address) {
            return Some(name);
        }
        let symbol = self.lookup(address)?;
        let bpf = symbol.is_bpf();
        let name: Arc<str> = match symbol.module {
            Some(module) => Arc::from(format!("{} [{module}]", symbol.name)),
            None => Arc::from(symbol.name),
        };
        if !bpf {
            self.names.insert(address, name.clone());
        }
        Some(name)
    }

    /// Hits, misses and evictions of the name cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.names.stats()
    }

    /// Looks `address` up; on a miss, reloads the table (a module may have
    /// been loaded since) unless it was loaded recently, and on a hit in
    /// BPF code, unless it was loaded within
    /// [`Self::BPF_REFRESH_INTERVAL`].
    pub fn lookup(&mut self, address: u64) -> Option<KernelSymbol<'_>> {
        let stale = match self.symbols.lookup(address) {
            None => self.loaded_at.elapsed() >= self.min_reload_interval,
            Some(s) if s.is_bpf() => self.loaded_at.elapsed() >= Self::BPF_REFRESH_INTERVAL,
            Some(_) => false,
        };
        if stale {
            self.reload();
        }
        self.symbols.lookup(address)
    }

    /// Reads the table again now (e.g. right after loading BPF programs,
    /// so that they are named).
    pub fn reload(&mut self) {
        self.loaded_at = Instant::now();
        if let Ok(symbols) = KernelSymbols::load_from(&self.path) {
            self.symbols = symbols;
            self.reloads += 1;
            // A module may have been unloaded and another loaded there.
            self.names.clear();
        }
    }

    /// How many times the table was read again after start.
    pub fn reloads(&self) -> u64 {
        self.reloads
    }

    /// The current table.
    pub fn symbols(&self) -> &KernelSymbols {
        &self.symbols
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff816bab70 T vfs_read
ffffffff816bb820 T ksys_read
ffffffff816bb900 D some_data
ffffffff81d35f00 t read_zero
ffffffff81d35fe0 t read_iter_zero
garbage line
zzzz T bad_address
ffffffffc0001000 t nf_hook_slow\t[nf_tables]
ffffffffc0001100 t nft_do_chain\t[nf_tables]
ffffffffc0002000 T e1000_probe\t[e1000]
";

    #[test]
    fn parses_text_symbols_sorted_with_modules() {
        let s = KernelSymbols::parse(SAMPLE);
        assert_eq!(s.len(), 8);
        assert_eq!(s.lookup(0xffffffff81d35f10), Some(KernelSymbol { name: "read_zero", module: None, offset: 0x10 }));
        assert_eq!(s.lookup(0xffffffff816bb820), Some(KernelSymbol { name: "ksys_read", module: None, offset: 0 }));
        // Data symbols do not bound text symbols: ksys_read runs on.
        assert_eq!(s.lookup(0xffffffff816bb910).map(|k| k.name), Some("ksys_read"));
        assert_eq!(
            s.lookup(0xffffffffc0001104),
            Some(KernelSymbol { name: "nft_do_chain", module: Some("nf_tables"), offset: 4 })
        );
        assert_eq!(s.lookup(0xffffffffc0002001).and_then(|k| k.module), Some("e1000"));
        assert_eq!(std::mem::size_of::<Entry>(), 16, "the table's bytes a symbol");
    }

    /// As this kernel (6.18) lists them: programs, a trampoline and a
    /// dispatcher in `[bpf]`, between module symbols.
    const WITH_BPF: &str = "\
ffffffff81000000 T _stext
ffffffffc0001000 t nf_hook_slow\t[nf_tables]
ffffffffc0025ba8 t bpf_prog_427349059a1ec9de_native_unwind\t[bpf]
ffffffffc0026c58 t bpf_prog_0870a3894f4dc8a0_on_cpu_sample\t[bpf]
ffffffffc0027474 t bpf_prog_8713e3d97c9d80fd\t[bpf]
ffffffffc0028000 t bpf_trampoline_6442491866\t[bpf]
ffffffffc0029000 t bpf_dispatcher_xdp\t[bpf]
ffffffffc002a000 t bpf_prog_8713e3d97c9d80fd_F\t[bpf]
";

    #[test]
    fn bpf_programs_are_named_and_split() {
        let s = KernelSymbols::parse(WITH_BPF);
        let sample = s.lookup(0xffffffffc0026c58 + 0x40).unwrap();
        assert_eq!(sample.to_string(), "bpf_prog_0870a3894f4dc8a0_on_cpu_sample [bpf]");
        assert!(sample.is_bpf());
        assert_eq!(sample.bpf_program(), Some(BpfProgram { tag: "0870a3894f4dc8a0", name: "on_cpu_sample" }));
        // An unnamed program, a trampoline, a dispatcher, a subprogram.
        let unnamed = s.lookup(0xffffffffc0027474).unwrap();
        assert_eq!(unnamed.bpf_program(), Some(BpfProgram { tag: "8713e3d97c9d80fd", name: "" }));
        let trampoline = s.lookup(0xffffffffc0028010).unwrap();
        assert_eq!(trampoline.to_string(), "bpf_trampoline_6442491866 [bpf]");
        assert!(trampoline.is_bpf() && trampoline.bpf_program().is_none());
        assert!(s.lookup(0xffffffffc0029000).unwrap().bpf_program().is_none());
        assert_eq!(s.lookup(0xffffffffc002a000).unwrap().bpf_program().map(|p| p.name), Some("F"));
        // Module and kernel symbols are not BPF.
        let module = s.lookup(0xffffffffc0001010).unwrap();
        assert_eq!(module.to_string(), "nf_hook_slow [nf_tables]");
        assert!(!module.is_bpf() && module.bpf_program().is_none());
        assert_eq!(s.lookup(0xffffffff81000010).unwrap().to_string(), "_stext");
        // A look-alike outside [bpf] is not a program.
        let fake = KernelSymbols::parse("ffffffff81000000 T bpf_prog_0870a3894f4dc8a0_x\n");
        assert!(fake.lookup(0xffffffff81000000).unwrap().bpf_program().is_none());
    }

    #[test]
    fn a_hit_in_bpf_code_refreshes_an_old_table() {
        let path = std::env::temp_dir().join(format!("kallsyms-bpf-test-{}", std::process::id()));
        std::fs::write(&path, WITH_BPF).unwrap();
        let mut k = KernelSymbolizer::with_path(path.clone(), Duration::from_secs(3600)).unwrap();
        // A program loaded after the table was read, right after
        // on_cpu_sample: named after its neighbour until the table is read
        // again.
        let new_prog = 0xffffffffc0027000;
        let with_new = WITH_BPF.replace(
            "ffffffffc0027474",
            "ffffffffc0027000 t bpf_prog_1111222233334444_on_process_exec\t[bpf]\nffffffffc0027474",
        );
        std::fs::write(&path, with_new).unwrap();
        assert_eq!(k.lookup(new_prog).unwrap().bpf_program().unwrap().name, "on_cpu_sample");
        assert_eq!(k.reloads(), 0, "the table is fresh");
        k.loaded_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        assert_eq!(k.lookup(new_prog).unwrap().bpf_program().unwrap().name, "on_process_exec");
        assert_eq!(k.reloads(), 1);
        // Kernel and module hits never trigger a read.
        k.loaded_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        k.lookup(0xffffffffc0001010);
        assert_eq!(k.reloads(), 1);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn function_names_are_cached_except_bpf_code() {
        let path = std::env::temp_dir().join(format!("kallsyms-names-{}", std::process::id()));
        std::fs::write(&path, SAMPLE).unwrap();
        let mut k = KernelSymbolizer::with_path(path.clone(), Duration::from_secs(3600)).unwrap();
        assert_eq!(k.function(0xffffffffc0001010).as_deref(), Some("nf_hook_slow [nf_tables]"));
        assert_eq!(k.function(0xffffffffc0001010).as_deref(), Some("nf_hook_slow [nf_tables]"));
        assert_eq!(k.function(0xffffffff816bb830).as_deref(), Some("ksys_read"));
        // Misses are not cached.
        assert_eq!(k.function(0x1000), None);
        assert_eq!(k.function(0x1000), None);
        assert_eq!(k.cache_stats(), CacheStats { hits: 1, misses: 4, evictions: 0, entries: 2 });
        // A reload drops what the old table said.
        k.reload();
        assert_eq!(k.cache_stats(), CacheStats { hits: 1, misses: 4, evictions: 2, entries: 0 });
        std::fs::write(&path, WITH_BPF).unwrap();
        k.reload();
        let bpf = 0xffffffffc0027480;
        let name = k.function(bpf).expect("bpf program");
        assert!(name.ends_with(" [bpf]"), "{name}");
        assert_eq!(k.function(bpf), Some(name));
        // BPF code is never cached: the table is asked each time.
        assert_eq!(k.cache_stats().entries, 0);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn this_kernel_lists_bpf_programs_in_bpf() {
        // Only when some BPF program is loaded (the profiler's own, under
        // the end-to-end tests) and the addresses are visible.
        let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else { return };
        let symbols = KernelSymbols::parse(&text);
        let Some(line) = text.lines().find(|l| l.ends_with("\t[bpf]") && l.contains(" bpf_prog_")) else {
            eprintln!("skip: no BPF program loaded");
            return;
        };
        let address = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        if address == 0 {
            return;
        }
        let symbol = symbols.lookup(address).unwrap();
        assert!(symbol.bpf_program().is_some(), "{line:?} -> {symbol}");
        assert!(symbol.to_string().ends_with(" [bpf]"));
    }

    #[test]
    fn misses_before_first_and_far_after_last() {
        let s = KernelSymbols::parse(SAMPLE);
        assert_eq!(s.lookup(0xffffffff80ffffff), None);
        assert_eq!(s.lookup(0xffffffffc0002000 + MAX_LAST_SYMBOL_SIZE), None);
    }

    #[test]
    fn hidden_addresses_are_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("kallsyms-test-{}", std::process::id()));
        std::fs::write(&dir, "0000000000000000 T _stext\n0000000000000000 t read_zero\n").unwrap();
        let err = KernelSymbols::load_from(&dir).unwrap_err();
        std::fs::remove_file(&dir).ok();
        assert!(matches!(err, KallsymsError::AddressesHidden { .. }), "{err}");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = KernelSymbols::load_from(Path::new("/nonexistent/kallsyms")).unwrap_err();
        assert!(err.to_string().starts_with("reading /nonexistent/kallsyms:"), "{err}");
    }

    #[test]
    fn reads_this_machine() {
        // /proc/kallsyms is always present; as root its addresses are real.
        match KernelSymbols::load() {
            Ok(s) => assert!(s.len() > 1000, "only {} symbols", s.len()),
            Err(KallsymsError::AddressesHidden { .. }) => eprintln!("skip: kallsyms addresses hidden"),
            Err(e) => panic!("{e}"),
        }
    }
}
