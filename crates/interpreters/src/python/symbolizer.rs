//! Naming CPython frames: the code object a frame word points at is read
//! from the process's memory once (type check, qualified name, file name,
//! first line, line table) and cached; each frame's line then comes from
//! the cached line table and the frame's instruction offset.

use super::layout::{Layout, OB_TYPE};
use super::linetable::line_for_offset;
use super::{LineTableFormat, PythonBuild};
use crate::memory::{i32_in, u64_in, ProcessMemory};
use profiler_trace::SourceLine;
use std::collections::HashMap;
use std::sync::Arc;

/// Longest name or file name kept, in characters.
const MAX_NAME_CHARS: u64 = 1024;
/// Longest line table read; longer ones leave their lines unknown.
const MAX_LINE_TABLE: u64 = 1 << 16;
/// Distinct names and file names shared; the set starts over when full
/// (in entries or bytes: a process can rewrite its names all the time).
const MAX_INTERNED: usize = 65_536;
/// See [`MAX_INTERNED`].
const MAX_INTERNED_BYTES: usize = 4 << 20;

/// A code object, as read.
#[derive(Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// `co_qualname` (3.11+), else `co_name`.
    pub name: Arc<str>,
    /// `co_filename`.
    pub file: Arc<str>,
    /// `co_firstlineno`.
    pub first_line: i32,
    /// The line table (empty when it could not be read).
    pub table: Box<[u8]>,
    /// Its format.
    pub format: LineTableFormat,
}

impl CodeInfo {
    /// The frame's source position at bytecode byte offset `offset`.
    pub fn line(&self, offset: u32) -> SourceLine {
        let line = line_for_offset(self.format, &self.table, self.first_line, offset)
            .or_else(|| u32::try_from(self.first_line).ok())
            .unwrap_or(0);
        SourceLine { function: self.name.clone(), file: Some(self.file.clone()), line, approximate: false }
    }

    /// Bytes held (its names counted whole, though interned names are
    /// shared: the bound holds however the process names its code).
    fn cost(&self) -> usize {
        std::mem::size_of::<CodeInfo>() + self.table.len() + self.name.len() + self.file.len()
    }
}

/// Counters of a [`PythonSymbolizer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonSymbolizerStats {
    /// Frames named.
    pub frames: u64,
    /// Frames that could not be named (code object unreadable or not a
    /// code object).
    pub unknown: u64,
    /// Code objects read from process memory.
    pub code_reads: u64,
    /// Of those, the ones that failed.
    pub code_read_failures: u64,
    /// Cached code objects dropped to stay within bounds.
    pub evictions: u64,
    /// Code objects cached now.
    pub cached: u64,
}

/// Names the CPython frames of one process, caching code objects by address within
/// `max_entries` and `max_bytes` (two generations: the older is dropped
/// whole when the younger fills up, so recently used entries stay).
pub struct PythonSymbolizer {
    young: HashMap<u64, Option<Arc<CodeInfo>>>,
    old: HashMap<u64, Option<Arc<CodeInfo>>>,
    young_bytes: usize,
    old_bytes: usize,
    half_entries: usize,
    half_bytes: usize,
    interned: HashMap<Arc<str>, ()>,
    interned_bytes: usize,
    stats: PythonSymbolizerStats,
}

impl PythonSymbolizer {
    /// A symbolizer holding at most `max_entries` code objects and about
    /// `max_bytes` of them.
    pub fn new(max_entries: usize, max_bytes: usize) -> PythonSymbolizer {
        PythonSymbolizer {
            young: HashMap::new(),
            old: HashMap::new(),
            young_bytes: 0,
            old_bytes: 0,
            half_entries: (max_entries / 2).max(1),
            half_bytes: (max_bytes / 2).max(1),
            interned: HashMap::new(),
            interned_bytes: 0,
            stats: PythonSymbolizerStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> PythonSymbolizerStats {
        let mut s = self.stats;
        s.cached = (self.young.len() + self.old.len()) as u64;
        s
    }

    /// What it caches: code objects and their bytes.
    pub fn cached(&self) -> crate::CacheUse {
        crate::CacheUse { entries: self.young.len() + self.old.len(), bytes: self.young_bytes + self.old_bytes }
    }

    /// Drops every code object and interned name.
    pub fn clear(&mut self) {
        self.stats.evictions += (self.young.len() + self.old.len()) as u64;
        for map in [&mut self.young, &mut self.old] {
            map.clear();
        }
        (self.young_bytes, self.old_bytes) = (0, 0);
        self.interned.clear();
        self.interned_bytes = 0;
    }

    /// Names the frame of code object `code` at bytecode byte offset
    /// `offset` in the process whose memory is `memory`, where `build` is
    /// mapped with `bias`. `None` when the code object cannot be read.
    pub fn symbolize(
        &mut self,
        memory: &dyn ProcessMemory,
        build: &PythonBuild,
        bias: u64,
        code: u64,
        offset: u32,
    ) -> Option<SourceLine> {
        let info = if code == 0 { None } else { self.code(memory, build, bias, code) };
        match info {
            Some(info) => {
                self.stats.frames += 1;
                Some(info.line(offset))
            }
            None => {
                self.stats.unknown += 1;
                None
            }
        }
    }

    fn code(&mut self, memory: &dyn ProcessMemory, build: &PythonBuild, bias: u64, code: u64) -> Option<Arc<CodeInfo>> {
        let key = code;
        if let Some(hit) = self.young.get(&key) {
            return hit.clone();
        }
        let value = match self.old.remove(&key) {
            Some(value) => {
                self.old_bytes -= value.as_ref().map_or(0, |v| v.cost());
                value
            }
            None => {
                self.stats.code_reads += 1;
                let read = read_code(memory, build, bias, code).map(|mut info| {
                    info.name = self.intern(&info.name);
                    info.file = self.intern(&info.file);
                    Arc::new(info)
                });
                if read.is_none() {
                    self.stats.code_read_failures += 1;
                }
                read
            }
        };
        let cost = value.as_ref().map_or(16, |v| v.cost());
        if self.young.len() >= self.half_entries || self.young_bytes + cost > self.half_bytes {
            self.stats.evictions += self.old.len() as u64;
            self.old = std::mem::take(&mut self.young);
            self.old_bytes = std::mem::replace(&mut self.young_bytes, 0);
            // What is interned is then the names of the young entries
            // alone: counted in their bytes.
            self.interned.clear();
            self.interned_bytes = 0;
        }
        self.young_bytes += cost;
        self.young.insert(key, value.clone());
        value
    }

    fn intern(&mut self, s: &Arc<str>) -> Arc<str> {
        if let Some((k, _)) = self.interned.get_key_value(s) {
            return k.clone();
        }
        if self.interned.len() >= MAX_INTERNED || self.interned_bytes + s.len() > MAX_INTERNED_BYTES {
            self.interned.clear();
            self.interned_bytes = 0;
        }
        self.interned_bytes += s.len();
        self.interned.insert(s.clone(), ());
        s.clone()
    }
}

fn read_u64(memory: &dyn ProcessMemory, address: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    memory.read(address, &mut b).then(|| u64::from_le_bytes(b))
}

/// Reads the code object at `code` (process address).
pub(super) fn read_code(memory: &dyn ProcessMemory, build: &PythonBuild, bias: u64, code: u64) -> Option<CodeInfo> {
    let l = &build.layout;
    // The layout may come from the process itself (3.13's debug offsets):
    // every read from the header is checked.
    let mut header = vec![0u8; l.code_read_size() as usize];
    if !memory.read(code, &mut header) {
        return None;
    }
    let word = |off: u32| u64_in(&header, off);
    if let Some(code_type) = build.code_type_vaddr {
        if word(OB_TYPE)? != code_type.wrapping_add(bias) {
            return None;
        }
    }
    let name_ptr = word(l.code_qualname.unwrap_or(l.code_name))?;
    let name = read_str(memory, l, name_ptr)?;
    let file = word(l.code_filename).and_then(|a| read_str(memory, l, a)).unwrap_or_else(|| "<unknown>".into());
    let first_line = i32_in(&header, l.code_firstlineno)?;
    let table = word(l.code_linetable).and_then(|a| read_bytes(memory, l, a)).unwrap_or_default();
    Some(CodeInfo { name: name.into(), file: file.into(), first_line, table, format: l.line_table })
}

/// A `str` object's text (compact strings only: every identifier and file
/// name is one).
fn read_str(memory: &dyn ProcessMemory, l: &Layout, address: u64) -> Option<String> {
    if address == 0 {
        return None;
    }
    let length = read_u64(memory, address.checked_add(u64::from(l.unicode_length))?)?;
    let mut state = [0u8; 4];
    if !memory.read(address.checked_add(u64::from(l.unicode_state))?, &mut state) {
        return None;
    }
    let state = u32::from_le_bytes(state);
    // struct state: interned:2, kind:3, compact:1, ascii:1 (3.8-3.15).
    let kind = (state >> 2) & 7;
    let compact = (state >> 5) & 1 == 1;
    let ascii = (state >> 6) & 1 == 1;
    if !compact || !matches!(kind, 1 | 2 | 4) || length > 1 << 30 {
        return None;
    }
    let chars = length.min(MAX_NAME_CHARS);
    let data = address.checked_add(u64::from(if ascii { l.unicode_ascii_size } else { l.unicode_compact_size }))?;
    let mut bytes = vec![0u8; (chars * u64::from(kind)) as usize];
    if !memory.read(data, &mut bytes) {
        return None;
    }
    let text = match kind {
        1 => bytes.iter().map(|&b| char::from(b)).collect(),
        2 => char::decode_utf16(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])))
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| {
                char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or(char::REPLACEMENT_CHARACTER)
            })
            .collect(),
    };
    Some(text)
}

/// A `bytes` object's content.
fn read_bytes(memory: &dyn ProcessMemory, l: &Layout, address: u64) -> Option<Box<[u8]>> {
    if address == 0 {
        return None;
    }
    let size = read_u64(memory, address.checked_add(u64::from(l.bytes_size))?)?;
    if size > MAX_LINE_TABLE {
        return None;
    }
    let mut data = vec![0u8; size as usize];
    memory.read(address.checked_add(u64::from(l.bytes_data))?, &mut data).then(|| data.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::super::{LayoutSource, Version};
    use super::*;
    use std::cell::Cell;

    /// A fake process: a few objects laid out as 3.11 would.
    struct Fake {
        bytes: HashMap<u64, Vec<u8>>,
        reads: Cell<u32>,
    }

    impl ProcessMemory for Fake {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.reads.set(self.reads.get() + 1);
            for (&base, data) in &self.bytes {
                if address >= base && address + buf.len() as u64 <= base + data.len() as u64 {
                    let at = (address - base) as usize;
                    buf.copy_from_slice(&data[at..at + buf.len()]);
                    return true;
                }
            }
            false
        }
    }

    const BIAS: u64 = 0x5500_0000_0000;
    const CODE_TYPE: u64 = 0x1000;

    fn build() -> PythonBuild {
        PythonBuild {
            version: Version { major: 3, minor: 11, micro: Some(7) },
            layout: Layout::for_version(3, 11).unwrap(),
            layout_source: LayoutSource::Table,
            runtime_vaddr: 0x2000,
            code_type_vaddr: Some(CODE_TYPE),
            eval_ranges: vec![(0x100, 0x200)],
        }
    }

    fn ascii(text: &str) -> Vec<u8> {
        let mut o = vec![0u8; 48];
        o[16..24].copy_from_slice(&(text.len() as u64).to_le_bytes());
        // kind 1, compact, ascii
        o[32..36].copy_from_slice(&((1u32 << 2) | (1 << 5) | (1 << 6)).to_le_bytes());
        o.extend_from_slice(text.as_bytes());
        o.push(0);
        o
    }

    fn ucs2(text: &str) -> Vec<u8> {
        let mut o = vec![0u8; 72];
        let units: Vec<u16> = text.encode_utf16().collect();
        o[16..24].copy_from_slice(&(units.len() as u64).to_le_bytes());
        o[32..36].copy_from_slice(&((2u32 << 2) | (1 << 5)).to_le_bytes());
        o.extend(units.iter().flat_map(|u| u.to_le_bytes()));
        o
    }

    fn fake() -> Fake {
        let mut code = vec![0u8; 200];
        code[8..16].copy_from_slice(&(CODE_TYPE + BIAS).to_le_bytes());
        code[112..120].copy_from_slice(&0x7000u64.to_le_bytes()); // filename
        code[120..128].copy_from_slice(&0x7100u64.to_le_bytes()); // name
        code[128..136].copy_from_slice(&0x7200u64.to_le_bytes()); // qualname
        code[136..144].copy_from_slice(&0x7300u64.to_le_bytes()); // linetable
        code[72..76].copy_from_slice(&20i32.to_le_bytes());
        let mut table = vec![0u8; 32];
        let entries = [0x80 | (13 << 3) | 1, 2, 0x80 | (11 << 3) | 3, 0, 0];
        table[16..24].copy_from_slice(&(entries.len() as u64).to_le_bytes());
        table.extend_from_slice(&entries);
        let mut not_code = code.clone();
        not_code[8..16].copy_from_slice(&0xdeadu64.to_le_bytes());
        Fake {
            bytes: HashMap::from([
                (0x6000, code),
                (0x6800, not_code),
                (0x7000, ascii("/srv/app/händler.py")),
                (0x7100, ascii("run")),
                (0x7200, ucs2("Händler.run")),
                (0x7300, table),
            ]),
            reads: Cell::new(0),
        }
    }

    #[test]
    fn names_and_lines_of_a_code_object() {
        let memory = fake();
        let mut s = PythonSymbolizer::new(100, 1 << 20);
        let line = s.symbolize(&memory, &build(), BIAS, 0x6000, 0).unwrap();
        assert_eq!(&*line.function, "Händler.run");
        // The file name is not ASCII but was written as latin-1 bytes
        // under an ASCII header: read as latin-1, no panic.
        assert!(line.file.as_deref().unwrap().starts_with("/srv/app/h"));
        assert_eq!(line.line, 21, "first two units: line 20 + 1");
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0x6000, 4).unwrap().line, 22);
        let reads = memory.reads.get();
        s.symbolize(&memory, &build(), BIAS, 0x6000, 6);
        assert_eq!(memory.reads.get(), reads, "cached");
        assert_eq!(s.stats().frames, 3);
        assert_eq!(s.stats().code_reads, 1);
    }

    #[test]
    fn garbage_is_unknown_and_cached_as_such() {
        let memory = fake();
        let mut s = PythonSymbolizer::new(100, 1 << 20);
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0x6800, 0), None, "ob_type is not PyCode_Type");
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0x9999_0000, 0), None, "unmapped");
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0, 0), None, "not encodable");
        let reads = memory.reads.get();
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0x6800, 0), None);
        assert_eq!(memory.reads.get(), reads, "the failure is cached");
        assert_eq!(s.stats().unknown, 4);
    }

    /// Issue 19: a fake 3.13 build whose debug offsets put every code
    /// object field below 8 made the code object read 10 bytes long, and
    /// the `ob_type` check sliced past it ("range end index 16 out of
    /// range for slice of length 10") on the reporter thread.
    #[test]
    fn issue_19_fake_debug_offsets_with_tiny_code_objects() {
        let mut b = super::super::layout::tests::debug_offsets_313();
        // code_object{size = 4, filename..firstlineno = 0..2}
        b[8 * 34..8 * 35].copy_from_slice(&4u64.to_le_bytes());
        for (i, v) in [(35, 0u64), (36, 0), (37, 0), (38, 0), (39, 2), (43, 0)] {
            b[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        let (_, layout) = Layout::from_debug_offsets(&b).expect("plausible enough");
        let build = PythonBuild { layout, ..build() };
        let memory = fake();
        let mut s = PythonSymbolizer::new(100, 1 << 20);
        for code in [0x6000, 0x6800, 0x7000, 0x7300] {
            // Reads whatever is there; never panics.
            let _ = s.symbolize(&memory, &build, BIAS, code, 0);
        }
        assert_eq!(s.stats().code_reads, 4);
        // Addresses at the top of the address space do not overflow.
        assert_eq!(read_str(&memory, &build.layout, u64::MAX - 4), None);
        assert_eq!(read_bytes(&memory, &build.layout, u64::MAX - 4), None);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut memory = fake();
        // A thousand copies of the code object.
        let copies: Vec<u64> = (0..1000).map(|k| 0x10_0000 + 0x100 * k).collect();
        for &at in &copies {
            let code = memory.bytes[&0x6000].clone();
            memory.bytes.insert(at, code);
        }
        let mut s = PythonSymbolizer::new(10, 1 << 20);
        for &code in &copies {
            assert!(s.symbolize(&memory, &build(), BIAS, code, 0).is_some());
            assert!(s.stats().cached <= 10);
        }
        let mut s = PythonSymbolizer::new(1000, 4096);
        for &code in &copies {
            s.symbolize(&memory, &build(), BIAS, code, 0);
        }
        assert!(s.stats().cached < 100, "{} within 4 KiB", s.stats().cached);
        assert!(s.stats().evictions > 0);
    }

    #[test]
    fn a_cleared_cache_is_empty_and_refills() {
        let memory = fake();
        let mut s = PythonSymbolizer::new(1000, 4096);
        let fill = |s: &mut PythonSymbolizer| {
            s.symbolize(&memory, &build(), BIAS, 0x6000, 0);
            for code in 0..1000 {
                s.symbolize(&memory, &build(), BIAS, 0x1_0000 + 8 * code, 0);
            }
            s.cached()
        };
        let full = fill(&mut s);
        assert!(full.entries > 0 && full.bytes <= 4096, "{full:?}");
        s.clear();
        assert_eq!(s.cached(), crate::CacheUse::default());
        assert!(s.interned.is_empty());
        let reads = s.stats().code_reads;
        assert_eq!(s.symbolize(&memory, &build(), BIAS, 0x6000, 4).unwrap().line, 22);
        assert_eq!(s.stats().code_reads, reads + 1, "read again");
        // Its bytes left the account: the cache refills to as much as
        // before.
        s.clear();
        assert_eq!(fill(&mut s), full);
    }
}
