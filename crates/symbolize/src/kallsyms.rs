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
//! [`KernelSymbolizer::BPF_REFRESH_INTERVAL`] and the ids of the loaded
//! programs and links changed since it was read, so that a program loaded
//! since is not named after its neighbour. (The profiler's own programs,
//! which a churn of exec and exit events puts in many kernel stacks,
//! never change while it runs: comparing ids costs a system call per
//! program, reading the table about 50 ms of CPU.)

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    /// The function name.
    pub name: String,
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
            None => f.write_str(&self.name),
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

impl KernelSymbol<'_> {
    /// Whether the symbol is BPF code (a program, trampoline or
    /// dispatcher).
    pub fn is_bpf(&self) -> bool {
        self.module == Some(BPF_MODULE)
    }

    /// The BPF program this symbol is (`bpf_prog_<tag>[_<name>]` in
    /// `[bpf]`).
    pub fn bpf_program(&self) -> Option<BpfProgram<'_>> {
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

/// Names a compressed block holds. A kernel's 120,000 text symbols have
/// about 3 MB of names; deflated 64 at a time they take 0.7 MB, and a
/// lookup inflates 2-3 KB (the frame's name is cached by address after).
const NAMES_PER_BLOCK: usize = 64;

/// The longest line read (a name is at most `KSYM_NAME_LEN`, 512).
const MAX_LINE: usize = 4096;

/// An immutable table of kernel text symbols sorted by address, about
/// 10 bytes a symbol: 4 for its start, about 6 for its deflated name.
#[derive(Debug, Default)]
pub struct KernelSymbols {
    /// The lowest symbol's address.
    base: u64,
    /// Each symbol's start, less `base`.
    starts: Vec<u32>,
    /// Runs of symbols of one module: (first symbol, index in `modules`
    /// plus one; 0: the kernel image), by first symbol.
    module_runs: Vec<(u32, u16)>,
    modules: Vec<Box<str>>,
    /// The names in symbol order, `NAMES_PER_BLOCK` a block joined by
    /// newlines (names have none), each block deflated.
    blocks: Vec<u8>,
    /// Where each block starts in `blocks`.
    block_starts: Vec<u32>,
    /// Symbols left out: 4 GiB or more above the lowest one.
    out_of_range: usize,
}

/// A symbol while the table is being built.
struct Parsed {
    address: u64,
    name_start: u32,
    name_len: u16,
    module: u16,
}

/// The longest distance from a symbol's start we attribute to it when it
/// is the last symbol (no next symbol bounds it).
const MAX_LAST_SYMBOL_SIZE: u64 = 1 << 20;

impl KernelSymbols {
    /// Reads and parses `/proc/kallsyms`.
    pub fn load() -> Result<KernelSymbols, KallsymsError> {
        Self::load_from(Path::new("/proc/kallsyms"))
    }

    /// Reads and parses a file in kallsyms format, a line at a time.
    pub fn load_from(path: &Path) -> Result<KernelSymbols, KallsymsError> {
        let err = |source| KallsymsError::Read { path: path.to_owned(), source };
        let file = std::fs::File::open(path).map_err(err)?;
        let (symbols, lines) = Self::parse_reader(std::io::BufReader::new(file)).map_err(err)?;
        if symbols.is_empty() && lines > 0 {
            return Err(KallsymsError::AddressesHidden { path: path.to_owned() });
        }
        Ok(symbols)
    }

    /// Parses kallsyms text; keeps text symbols (`t`, `T`, `w`, `W`) with a
    /// non-zero address and skips malformed lines.
    pub fn parse(text: &str) -> KernelSymbols {
        Self::parse_reader(text.as_bytes()).map(|(symbols, _)| symbols).unwrap_or_default()
    }

    /// [`KernelSymbols::parse`] from a reader; also says how many lines
    /// were read. Lines longer than `MAX_LINE` are skipped.
    fn parse_reader(mut reader: impl std::io::BufRead) -> std::io::Result<(KernelSymbols, usize)> {
        let mut modules: Vec<Box<str>> = Vec::new();
        let mut names = String::new();
        let mut parsed: Vec<Parsed> = Vec::new();
        let mut line = Vec::with_capacity(256);
        let mut lines = 0;
        loop {
            line.clear();
            let n = std::io::BufRead::read_until(
                &mut std::io::Read::take(&mut reader, MAX_LINE as u64 + 1),
                b'\n',
                &mut line,
            )?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') && n > MAX_LINE {
                // Skip the rest of an overlong line.
                let mut rest = Vec::new();
                reader.read_until(b'\n', &mut rest)?;
                continue;
            }
            lines += 1;
            let Ok(text) = std::str::from_utf8(&line) else { continue };
            let mut fields = text.split_ascii_whitespace();
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
                Some(m) => {
                    // A module's symbols are listed together: the last one
                    // is the likely match.
                    match modules.iter().rposition(|known| &**known == m) {
                        Some(i) => i + 1,
                        None if modules.len() < usize::from(u16::MAX) => {
                            modules.push(m.into());
                            modules.len()
                        }
                        None => continue,
                    }
                }
            };
            let Ok(name_start) = u32::try_from(names.len()) else { continue };
            names.push_str(name);
            parsed.push(Parsed { address, name_start, name_len: name.len() as u16, module: module as u16 });
        }
        parsed.sort_by_key(|p| p.address);
        Ok((Self::build(parsed, &names, modules), lines))
    }

    /// The compact table of `parsed` (sorted by address).
    fn build(parsed: Vec<Parsed>, names: &str, modules: Vec<Box<str>>) -> KernelSymbols {
        let base = parsed.first().map_or(0, |p| p.address);
        let mut symbols = KernelSymbols { base, modules, ..KernelSymbols::default() };
        let mut block = String::new();
        let mut in_block = 0;
        for p in &parsed {
            let Ok(start) = u32::try_from(p.address - base) else {
                symbols.out_of_range += 1;
                continue;
            };
            let index = symbols.starts.len() as u32;
            if symbols.module_runs.last().is_none_or(|&(_, m)| m != p.module) {
                symbols.module_runs.push((index, p.module));
            }
            symbols.starts.push(start);
            if in_block > 0 {
                block.push('\n');
            }
            block.push_str(&names[p.name_start as usize..][..usize::from(p.name_len)]);
            in_block += 1;
            if in_block == NAMES_PER_BLOCK {
                symbols.push_block(&block);
                block.clear();
                in_block = 0;
            }
        }
        if in_block > 0 {
            symbols.push_block(&block);
        }
        symbols.starts.shrink_to_fit();
        symbols.module_runs.shrink_to_fit();
        symbols.blocks.shrink_to_fit();
        symbols.block_starts.shrink_to_fit();
        symbols
    }

    fn push_block(&mut self, block: &str) {
        self.block_starts.push(self.blocks.len() as u32);
        self.blocks.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(block.as_bytes(), 1));
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there are no symbols.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Symbols left out because they lie 4 GiB or more above the lowest.
    pub fn out_of_range(&self) -> usize {
        self.out_of_range
    }

    /// Heap bytes the table holds.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * 4
            + self.module_runs.capacity() * 8
            + self.blocks.capacity()
            + self.block_starts.capacity() * 4
            + self.modules.iter().map(|m| m.len() + 16).sum::<usize>()
    }

    /// The symbol containing `address`: the last one starting at or before
    /// it. Symbols are bounded by the next symbol's start.
    pub fn lookup(&self, address: u64) -> Option<KernelSymbol<'_>> {
        let base = self.base;
        let index = self.starts.partition_point(|&s| base + u64::from(s) <= address).checked_sub(1)?;
        let offset = address - (base + u64::from(self.starts[index]));
        if index + 1 == self.starts.len() && offset >= MAX_LAST_SYMBOL_SIZE {
            return None;
        }
        let run = self.module_runs.partition_point(|&(first, _)| first as usize <= index).checked_sub(1)?;
        let module = usize::from(self.module_runs[run].1).checked_sub(1).and_then(|i| self.modules.get(i));
        Some(KernelSymbol { name: self.name(index)?, module: module.map(|m| &**m), offset })
    }

    /// The name of symbol `index`, inflated from its block.
    fn name(&self, index: usize) -> Option<String> {
        let block = index / NAMES_PER_BLOCK;
        let start = *self.block_starts.get(block)? as usize;
        let end = self.block_starts.get(block + 1).map_or(self.blocks.len(), |&e| e as usize);
        let limit = NAMES_PER_BLOCK * (usize::from(u16::MAX) + 1);
        let text = miniz_oxide::inflate::decompress_to_vec_with_limit(self.blocks.get(start..end)?, limit).ok()?;
        let text = String::from_utf8(text).ok()?;
        text.split('\n').nth(index % NAMES_PER_BLOCK).map(str::to_owned)
    }
}

/// How often a [`KernelSymbolizer`] read its table again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelSymbolizerStats {
    /// Times the table was read again after start.
    pub reloads: u64,
    /// Times a hit in BPF code found the BPF programs and links unchanged,
    /// so the table was not read again.
    pub bpf_checks: u64,
}

/// [`KernelSymbols`] plus the policy of when to read them again, and the
/// bounded cache of the function names it gave.
pub struct KernelSymbolizer {
    symbols: KernelSymbols,
    path: PathBuf,
    /// When the table was read, or last found still right (BPF objects
    /// unchanged).
    fresh_at: Instant,
    /// The BPF objects when the table was read ([`bpf_objects`]).
    bpf_objects: Option<Vec<u32>>,
    list_bpf_objects: fn() -> Option<Vec<u32>>,
    min_reload_interval: Duration,
    reloads: u64,
    bpf_checks: u64,
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
    /// A lookup landing in BPF code checks whether programs came or went
    /// when the table is older than this: a program loaded since the last
    /// read would be named after the symbol before it. (A read of
    /// kallsyms costs about 50 ms of CPU.)
    pub const BPF_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

    /// Loads `/proc/kallsyms`.
    pub fn new() -> Result<KernelSymbolizer, KallsymsError> {
        Self::with_path(PathBuf::from("/proc/kallsyms"), Duration::from_secs(60))
    }

    /// Most function names cached by address.
    pub const MAX_CACHED_NAMES: usize = 65_536;

    /// Loads `path`; reloads at most every `min_reload_interval`.
    pub fn with_path(path: PathBuf, min_reload_interval: Duration) -> Result<KernelSymbolizer, KallsymsError> {
        let listed = bpf_objects();
        let symbols = KernelSymbols::load_from(&path)?;
        Ok(KernelSymbolizer {
            symbols,
            path,
            fresh_at: Instant::now(),
            bpf_objects: listed,
            list_bpf_objects: bpf_objects,
            min_reload_interval,
            reloads: 0,
            bpf_checks: 0,
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
            None => Arc::from(symbol.name.as_str()),
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
    /// BPF code, unless it was loaded or checked within
    /// [`Self::BPF_REFRESH_INTERVAL`] or the BPF programs and links are
    /// the same as when it was read.
    pub fn lookup(&mut self, address: u64) -> Option<KernelSymbol<'_>> {
        let stale = match self.symbols.lookup(address) {
            None => self.fresh_at.elapsed() >= self.min_reload_interval,
            Some(s) if s.is_bpf() => self.fresh_at.elapsed() >= Self::BPF_REFRESH_INTERVAL && self.bpf_changed(),
            Some(_) => false,
        };
        if stale {
            self.reload();
        }
        self.symbols.lookup(address)
    }

    /// Whether BPF programs or links came or went since the table was
    /// read (unknown counts as changed). A check resets the interval.
    fn bpf_changed(&mut self) -> bool {
        let now = (self.list_bpf_objects)();
        if now.is_some() && now == self.bpf_objects {
            self.fresh_at = Instant::now();
            self.bpf_checks += 1;
            return false;
        }
        true
    }

    /// Reads the table again now (e.g. right after loading BPF programs,
    /// so that they are named).
    pub fn reload(&mut self) {
        self.fresh_at = Instant::now();
        // Listed before the read: a program loaded in between makes the
        // next check read the table again, never the reverse.
        self.bpf_objects = (self.list_bpf_objects)();
        if let Ok(symbols) = KernelSymbols::load_from(&self.path) {
            self.symbols = symbols;
            self.reloads += 1;
            // A module may have been unloaded and another loaded there.
            self.names.clear();
        }
    }

    /// How often the table was read again, or found still right.
    pub fn stats(&self) -> KernelSymbolizerStats {
        KernelSymbolizerStats { reloads: self.reloads, bpf_checks: self.bpf_checks }
    }

    /// The current table.
    pub fn symbols(&self) -> &KernelSymbols {
        &self.symbols
    }
}

/// The ids of the loaded BPF programs and links, in the order the kernel
/// gives them (`BPF_PROG_GET_NEXT_ID`, `BPF_LINK_GET_NEXT_ID`: one system
/// call each), links after a 0; `None` when the kernel refuses (no
/// CAP_SYS_ADMIN) or lists more than 65,536. A program's JIT image keeps
/// its address for the program's life and a new one gets a new id; a
/// trampoline comes with a link.
fn bpf_objects() -> Option<Vec<u32>> {
    const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
    const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
    const MAX_OBJECTS: usize = 65_536;
    let mut ids = Vec::new();
    for (i, command) in [BPF_PROG_GET_NEXT_ID, BPF_LINK_GET_NEXT_ID].into_iter().enumerate() {
        if i > 0 {
            ids.push(0);
        }
        // union bpf_attr's get-next-id part: start_id, next_id, open_flags.
        let mut attr = [0u32; 3];
        loop {
            // SAFETY: attr is a valid, writable bpf_attr prefix of the
            // size passed.
            let r = unsafe {
                libc::syscall(libc::SYS_bpf, command, attr.as_mut_ptr(), std::mem::size_of_val(&attr) as libc::c_uint)
            };
            if r != 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::ENOENT) => break,
                    _ => return None,
                }
            }
            if ids.len() >= MAX_OBJECTS {
                return None;
            }
            ids.push(attr[1]);
            attr[0] = attr[1];
        }
    }
    Some(ids)
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
        let sym = |name: &str, module, offset| KernelSymbol { name: name.to_owned(), module, offset };
        assert_eq!(s.lookup(0xffffffff81d35f10), Some(sym("read_zero", None, 0x10)));
        assert_eq!(s.lookup(0xffffffff816bb820), Some(sym("ksys_read", None, 0)));
        // Data symbols do not bound text symbols: ksys_read runs on.
        assert_eq!(s.lookup(0xffffffff816bb910).map(|k| k.name).as_deref(), Some("ksys_read"));
        assert_eq!(s.lookup(0xffffffffc0001104), Some(sym("nft_do_chain", Some("nf_tables"), 4)));
        assert_eq!(s.lookup(0xffffffffc0002001).and_then(|k| k.module), Some("e1000"));
        assert_eq!(s.lookup(0xffffffff80ffffff), None, "below the first symbol");
        assert_eq!(s.lookup(0xffffffffc0002000 + MAX_LAST_SYMBOL_SIZE), None, "past the last one");
    }

    #[test]
    fn many_symbols_across_blocks_and_module_runs() {
        // Module symbols interleaved with the kernel's by address, more
        // names than a block holds, listed out of order.
        const LOW: u64 = 0xffff_8000_0000_0000;
        let mut text = String::new();
        for i in (0..1000u64).rev() {
            let module = if i % 7 == 3 { "\t[m]" } else { "" };
            text.push_str(&format!("{:x} t f_{i}{module}\n", LOW + i * 0x40));
        }
        text.push_str(&format!("{:x} T far_away\n", LOW + (5 << 30)));
        let s = KernelSymbols::parse(&text);
        assert_eq!(s.len(), 1000);
        assert_eq!(s.out_of_range(), 1, "more than 4 GiB above the lowest is left out");
        for i in [0u64, 63, 64, 65, 500, 997, 999] {
            let k = s.lookup(LOW + i * 0x40 + 3).unwrap();
            assert_eq!((k.name.as_str(), k.module, k.offset), (&*format!("f_{i}"), (i % 7 == 3).then_some("m"), 3));
        }
        // About 10 bytes a symbol, against 16 plus the name before.
        assert!(s.heap_bytes() < 1000 * 10, "{} bytes", s.heap_bytes());
    }

    #[test]
    fn overlong_and_binary_lines_are_skipped() {
        let long = "x".repeat(MAX_LINE + 10);
        let mut text = format!("ffffffff81000000 T {long}\nffffffff81000100 T ").into_bytes();
        text.extend_from_slice(b"\xff\xfe\nffffffff81000200 T ok\nffffffff81000300 T last");
        let (s, lines) = KernelSymbols::parse_reader(&text[..]).unwrap();
        assert_eq!((s.len(), lines), (2, 3));
        assert_eq!(s.lookup(0xffffffff81000201).unwrap().name, "ok");
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
        assert_eq!(k.stats().reloads, 0, "the table is fresh");
        // Old, but the same programs and links: checked, not read.
        k.list_bpf_objects = || Some(vec![7, 9, 0, 3]);
        k.bpf_objects = Some(vec![7, 9, 0, 3]);
        k.fresh_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        assert_eq!(k.lookup(new_prog).unwrap().bpf_program().unwrap().name, "on_cpu_sample");
        assert_eq!(k.stats(), KernelSymbolizerStats { reloads: 0, bpf_checks: 1 });
        // The check counts as a read: none until the interval passes again.
        k.list_bpf_objects = || Some(vec![7, 9, 12, 0, 3]);
        assert_eq!(k.lookup(new_prog).unwrap().bpf_program().unwrap().name, "on_cpu_sample");
        assert_eq!(k.stats(), KernelSymbolizerStats { reloads: 0, bpf_checks: 1 });
        // Old and a program came: read again.
        k.fresh_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        assert_eq!(k.lookup(new_prog).unwrap().bpf_program().unwrap().name, "on_process_exec");
        assert_eq!(k.stats(), KernelSymbolizerStats { reloads: 1, bpf_checks: 1 });
        assert_eq!(k.bpf_objects, Some(vec![7, 9, 12, 0, 3]));
        // Objects that can't be listed count as changed.
        k.list_bpf_objects = || None;
        k.fresh_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        k.lookup(new_prog);
        assert_eq!(k.stats().reloads, 2);
        // Kernel and module hits never trigger a read.
        k.fresh_at -= KernelSymbolizer::BPF_REFRESH_INTERVAL;
        k.lookup(0xffffffffc0001010);
        assert_eq!(k.stats().reloads, 2);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn bpf_objects_list_programs_then_links() {
        // As root (CI): the kernel lists what is loaded, links after a 0.
        let Some(ids) = bpf_objects() else {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root: BPF objects must be listable");
            return;
        };
        let zero = ids.iter().position(|&id| id == 0).expect("the separator");
        let (programs, links) = (&ids[..zero], &ids[zero + 1..]);
        assert!(programs.windows(2).all(|w| w[0] < w[1]), "{programs:?}");
        assert!(links.windows(2).all(|w| w[0] < w[1]), "{links:?}");
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
            Ok(s) => {
                assert!(s.len() > 1000, "only {} symbols", s.len());
                assert_eq!(s.out_of_range(), 0);
                // The compact form: well under 16 bytes a symbol.
                assert!(s.heap_bytes() < s.len() * 12, "{} bytes for {} symbols", s.heap_bytes(), s.len());
                let vfs_read = std::fs::read_to_string("/proc/kallsyms")
                    .unwrap()
                    .lines()
                    .find_map(|l| l.strip_suffix(" T vfs_read").and_then(|a| u64::from_str_radix(a, 16).ok()));
                if let Some(address) = vfs_read {
                    assert_eq!(s.lookup(address + 1).unwrap().name, "vfs_read");
                }
            }
            Err(KallsymsError::AddressesHidden { .. }) => eprintln!("skip: kallsyms addresses hidden"),
            Err(e) => panic!("{e}"),
        }
    }
}
