//! Kernel symbols from `/proc/kallsyms`.
//!
//! Line format (fs/proc, kernel/kallsyms.c): `ffffffff81000000 T _stext`,
//! module symbols end with `\t[module_name]`. Addresses read as zero when
//! `kernel.kptr_restrict` hides them from the reader.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

#[derive(Clone, Copy, Debug)]
struct Entry {
    address: u64,
    // Offsets into `names`: name, then module (empty range = vmlinux).
    name_start: u32,
    name_len: u16,
    module_start: u32,
    module_len: u16,
}

/// An immutable, sorted table of kernel text symbols.
#[derive(Debug, Default)]
pub struct KernelSymbols {
    entries: Vec<Entry>,
    // All names and module names, back to back; module names are stored
    // once each.
    names: String,
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
        let text = std::fs::read_to_string(path)
            .map_err(|source| KallsymsError::Read { path: path.to_owned(), source })?;
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
        let mut last_module: Option<(u32, u16)> = None;
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
            let (module_start, module_len) = match module {
                None => (0, 0),
                Some(m) => match last_module {
                    Some((start, len)) if &symbols.names[start as usize..][..usize::from(len)] == m => {
                        (start, len)
                    }
                    _ => {
                        let start = symbols.names.len() as u32;
                        symbols.names.push_str(m);
                        last_module = Some((start, m.len() as u16));
                        (start, m.len() as u16)
                    }
                },
            };
            let name_start = symbols.names.len() as u32;
            symbols.names.push_str(name);
            symbols.entries.push(Entry {
                address,
                name_start,
                name_len: name.len() as u16,
                module_start,
                module_len,
            });
        }
        symbols.entries.sort_by_key(|e| e.address);
        symbols.entries.shrink_to_fit();
        symbols.names.shrink_to_fit();
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
        Some(KernelSymbol {
            name: text(entry.name_start, entry.name_len),
            module: (entry.module_len > 0).then(|| text(entry.module_start, entry.module_len)),
            offset,
        })
    }
}

/// [`KernelSymbols`] plus the policy of when to read them again.
#[derive(Debug)]
pub struct KernelSymbolizer {
    symbols: KernelSymbols,
    path: PathBuf,
    loaded_at: Instant,
    min_reload_interval: Duration,
    reloads: u64,
}

impl KernelSymbolizer {
    /// Loads `/proc/kallsyms`.
    pub fn new() -> Result<KernelSymbolizer, KallsymsError> {
        Self::with_path(PathBuf::from("/proc/kallsyms"), Duration::from_secs(60))
    }

    /// Loads `path`; reloads at most every `min_reload_interval`.
    pub fn with_path(path: PathBuf, min_reload_interval: Duration) -> Result<KernelSymbolizer, KallsymsError> {
        let symbols = KernelSymbols::load_from(&path)?;
        Ok(KernelSymbolizer { symbols, path, loaded_at: Instant::now(), min_reload_interval, reloads: 0 })
    }

    /// Looks `address` up; on a miss, reloads the table (a module may have
    /// been loaded since) unless it was loaded recently.
    pub fn lookup(&mut self, address: u64) -> Option<KernelSymbol<'_>> {
        if self.symbols.lookup(address).is_none() && self.loaded_at.elapsed() >= self.min_reload_interval {
            self.loaded_at = Instant::now();
            if let Ok(symbols) = KernelSymbols::load_from(&self.path) {
                self.symbols = symbols;
                self.reloads += 1;
            }
        }
        self.symbols.lookup(address)
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
        assert_eq!(
            s.lookup(0xffffffff81d35f10),
            Some(KernelSymbol { name: "read_zero", module: None, offset: 0x10 })
        );
        assert_eq!(
            s.lookup(0xffffffff816bb820),
            Some(KernelSymbol { name: "ksys_read", module: None, offset: 0 })
        );
        // Data symbols do not bound text symbols: ksys_read runs on.
        assert_eq!(s.lookup(0xffffffff816bb910).map(|k| k.name), Some("ksys_read"));
        assert_eq!(
            s.lookup(0xffffffffc0001104),
            Some(KernelSymbol { name: "nft_do_chain", module: Some("nf_tables"), offset: 4 })
        );
        assert_eq!(s.lookup(0xffffffffc0002001).and_then(|k| k.module), Some("e1000"));
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
