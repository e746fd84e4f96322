//! Naming Java methods from a JVM's memory: `Method*` -> class, method,
//! signature, source file and line table, read once and cached.
//!
//! Facts (the JDK's `method.hpp`, `constMethod.hpp`, `constantPool.hpp`,
//! `symbol.hpp`): a `Method` points at its `ConstMethod`, whose bytecodes
//! start right after the `ConstMethod` object (`code_size` bytes) and are
//! followed by the compressed line number table when flagged; the name
//! and signature are indices of UTF-8 slots of the `ConstantPool`, whose
//! slots follow the pool object, 8 bytes each, a UTF-8 slot holding a
//! `Symbol*`; the pool's holder is the class (`Klass::_name`, a `Symbol`
//! in internal form, `java/lang/Thread`), and the pool holds the index of
//! the class's `SourceFile` attribute.

use super::layout::{HotspotLayout, SourceFileIndex};
use super::linetable::{decode_line_table, line_for_bci};
use super::remote::{read_bytes, read_u16, read_u64, u16_at, u32_at, u64_at};
use crate::memory::ProcessMemory;
use std::collections::HashMap;
use std::sync::Arc;

/// Longest symbol (class, method, signature, file name) read.
pub const MAX_SYMBOL: usize = 4096;
/// Largest `ConstMethod` read for its line table.
const MAX_CONST_METHOD: u64 = 1 << 20;

/// A Java method, as read from the JVM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// The class, dotted: `java.lang.Thread`.
    pub class: Arc<str>,
    /// The method: `sleep`, `<init>`.
    pub name: Arc<str>,
    /// The descriptor: `(J)V`.
    pub signature: Arc<str>,
    /// The class's source file (`Thread.java`), if it has one.
    pub source_file: Option<Arc<str>>,
    /// The `(bci, line)` pairs of its line number table.
    pub lines: Box<[(u32, u32)]>,
    /// Bytes of bytecode.
    pub code_size: u32,
    /// The `ConstMethod` it was read from: a method whose `ConstMethod`
    /// changed (redefined, or the `Method` freed and reused) is read again.
    pub const_method: u64,
}

impl MethodInfo {
    /// `class.method`, the frame's function name.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }

    /// The source line at bytecode index `bci`.
    pub fn line(&self, bci: u32) -> Option<u32> {
        line_for_bci(&self.lines, bci)
    }
}

/// Reads the method at `method`.
pub fn read_method(memory: &dyn ProcessMemory, l: &HotspotLayout, method: u64) -> Result<MethodInfo, String> {
    let at = |base: u64, off: u32| base.wrapping_add(u64::from(off));
    let const_method =
        read_u64(memory, at(method, l.method_const_method)).ok_or_else(|| format!("cannot read Method {method:#x}"))?;
    let cm = read_bytes(memory, const_method, l.const_method_sizeof as usize)
        .ok_or_else(|| format!("cannot read ConstMethod {const_method:#x}"))?;
    let field = |off: u32, what: &str| format!("ConstMethod::{what} at {off} outside the object");
    let constants = u64_at(&cm, l.const_method_constants as usize).ok_or_else(|| field(0, "_constants"))?;
    let words = u64::from(u32_at(&cm, l.const_method_size as usize).ok_or_else(|| field(0, "_constMethod_size"))?);
    let flags = match l.const_method_flags_size {
        4 => u32_at(&cm, l.const_method_flags as usize),
        _ => u16_at(&cm, l.const_method_flags as usize).map(u32::from),
    }
    .ok_or_else(|| field(l.const_method_flags, "_flags"))?;
    let u2 = |off: u32, what: &str| u16_at(&cm, off as usize).ok_or_else(|| field(off, what));
    let code_size = u2(l.const_method_code_size, "_code_size")?;
    let name_index = u2(l.const_method_name_index, "_name_index")?;
    let signature_index = u2(l.const_method_signature_index, "_signature_index")?;

    let cp = read_bytes(memory, constants, l.constant_pool_sizeof as usize)
        .ok_or_else(|| format!("cannot read ConstantPool {constants:#x}"))?;
    let pool_length = u32_at(&cp, l.constant_pool_length as usize).ok_or("ConstantPool::_length outside")?;
    let holder = u64_at(&cp, l.constant_pool_holder as usize).ok_or("ConstantPool::_pool_holder outside")?;
    let source_index = match l.source_file_name_index {
        SourceFileIndex::Pool(off) => u16_at(&cp, off as usize),
        SourceFileIndex::Klass(off) => read_u16(memory, at(holder, off)),
    }
    .unwrap_or(0);
    let slot = |index: u16| -> Result<Arc<str>, String> {
        if index == 0 || u32::from(index) >= pool_length {
            return Err(format!("constant pool index {index} of {pool_length}"));
        }
        let address = at(constants, l.constant_pool_sizeof).wrapping_add(8 * u64::from(index));
        let symbol = read_u64(memory, address).ok_or_else(|| format!("cannot read pool slot {index}"))?;
        read_symbol(memory, l, symbol)
    };
    let name = slot(name_index)?;
    let signature = slot(signature_index)?;
    let source_file = (source_index != 0).then(|| slot(source_index).ok()).flatten();
    let klass_name = read_u64(memory, at(holder, l.klass_name)).ok_or("cannot read the holder's name")?;
    let class: Arc<str> = java_class_name(&read_symbol(memory, l, klass_name)?).into();

    let mut lines = Vec::new();
    if flags & l.const_method_has_linenumber_table != 0 {
        let start = u64::from(l.const_method_sizeof) + u64::from(code_size);
        let end = (words * 8).min(MAX_CONST_METHOD);
        if end > start {
            let table = read_bytes(memory, const_method.wrapping_add(start), (end - start) as usize)
                .ok_or("cannot read the line number table")?;
            lines = decode_line_table(&table, l.unsigned5_excluded);
        }
    }
    Ok(MethodInfo {
        class,
        name,
        signature,
        source_file,
        lines: lines.into_boxed_slice(),
        code_size: u32::from(code_size),
        const_method,
    })
}

/// The dotted, stable name of a class from its internal name: `/` ->
/// `.`, and a hidden class (a lambda's proxy, a `LambdaForm`) loses its
/// address (`Foo$$Lambda$14+0x0000000800c03000`, JDK 17, or
/// `Foo$$Lambda+0x000071e4c8003208`, JDK 21+, are `Foo$$Lambda`;
/// `java/lang/invoke/LambdaForm$MH/0x...` is
/// `java.lang.invoke.LambdaForm$MH`), so that profiles of several runs
/// aggregate: the lambda's body is the `lambda$...` method it calls.
pub fn java_class_name(internal: &str) -> String {
    let mut name = internal;
    // A hidden class: its defining name, `+` (the JVM's own spelling;
    // `/` in stack traces), and its address in hex.
    if let Some(at) = name.rfind("+0x").or_else(|| name.rfind("/0x")) {
        let address = &name[at + 3..];
        if !address.is_empty() && address.bytes().all(|b| b.is_ascii_hexdigit()) {
            name = &name[..at];
        }
    }
    // Before JDK 21, lambda proxies were numbered per class, in the order
    // they were spun: `Foo$$Lambda$14`.
    if let Some((class, number)) = name.rsplit_once("$$Lambda$") {
        if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
            name = &name[..class.len() + "$$Lambda".len()];
        }
    }
    name.replace('/', ".")
}

/// A `Symbol`'s text (modified UTF-8, read lossily).
pub fn read_symbol(memory: &dyn ProcessMemory, l: &HotspotLayout, symbol: u64) -> Result<Arc<str>, String> {
    if symbol == 0 {
        return Err("a null Symbol".into());
    }
    let len = read_u16(memory, symbol.wrapping_add(u64::from(l.symbol_length)))
        .ok_or_else(|| format!("cannot read Symbol {symbol:#x}"))? as usize;
    if len > MAX_SYMBOL {
        return Err(format!("a {len}-byte Symbol"));
    }
    let body = read_bytes(memory, symbol.wrapping_add(u64::from(l.symbol_body)), len)
        .ok_or_else(|| format!("cannot read Symbol {symbol:#x}'s body"))?;
    Ok(String::from_utf8_lossy(&body).into())
}

/// Counters of a [`HotspotSymbolizer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotspotSymbolizerStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Methods read from process memory.
    pub reads: u64,
    /// Of those, the ones that failed.
    pub read_failures: u64,
    /// Cached methods read again because their `ConstMethod` changed.
    pub stale: u64,
    /// Cached methods dropped to stay within bounds.
    pub evictions: u64,
}

/// Names the methods of one JVM by `Method*`, caching at most `max_entries`; each
/// hit costs one 8-byte read to check that the `Method` still points at
/// the `ConstMethod` it was read with.
pub struct HotspotSymbolizer {
    cache: HashMap<u64, Arc<MethodInfo>>,
    max_entries: usize,
    stats: HotspotSymbolizerStats,
}

impl HotspotSymbolizer {
    /// A symbolizer holding at most `max_entries` methods.
    pub fn new(max_entries: usize) -> HotspotSymbolizer {
        HotspotSymbolizer { cache: HashMap::new(), max_entries: max_entries.max(1), stats: Default::default() }
    }

    /// The method at `method`.
    pub fn method(&mut self, memory: &dyn ProcessMemory, l: &HotspotLayout, method: u64) -> Option<Arc<MethodInfo>> {
        if let Some(info) = self.cache.get(&method) {
            let now = read_u64(memory, method.wrapping_add(u64::from(l.method_const_method)));
            if now == Some(info.const_method) {
                self.stats.hits += 1;
                return Some(info.clone());
            }
            self.stats.stale += 1;
            self.cache.remove(&method);
        }
        self.stats.reads += 1;
        let Ok(info) = read_method(memory, l, method) else {
            self.stats.read_failures += 1;
            return None;
        };
        if self.cache.len() >= self.max_entries {
            self.stats.evictions += self.cache.len() as u64;
            self.cache.clear();
        }
        let info = Arc::new(info);
        self.cache.insert(method, info.clone());
        Some(info)
    }

    /// Forgets every method.
    pub fn clear(&mut self) {
        self.stats.evictions += self.cache.len() as u64;
        self.cache.clear();
    }

    /// Counters.
    pub fn stats(&self) -> HotspotSymbolizerStats {
        self.stats
    }

    /// Methods cached.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether none is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::jdk17_fixture;
    use super::super::remote::fake::FakeMemory;
    use super::*;

    fn symbol(text: &str) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        b.extend_from_slice(&(text.len() as u16).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        b
    }

    /// `com.example.Foo.run()V` in Foo.java, lines (0, 12), (4, 13); its
    /// ConstMethod at `const_method`, the Method at 0x10000.
    fn process(const_method: u64, name_index: u16, name_length: Option<u16>) -> FakeMemory {
        let l = jdk17_fixture();
        let mut m = FakeMemory::default();
        m.add(0x10000, [0u64.to_le_bytes(), const_method.to_le_bytes()].concat());
        let mut cm = vec![0u8; 48];
        cm[8..16].copy_from_slice(&0x30000u64.to_le_bytes());
        cm[28..30].copy_from_slice(&1u16.to_le_bytes());
        cm[32..34].copy_from_slice(&10u16.to_le_bytes());
        cm[34..36].copy_from_slice(&name_index.to_le_bytes());
        cm[36..38].copy_from_slice(&4u16.to_le_bytes());
        cm.extend_from_slice(&[0xb1; 10]); // bytecodes
        cm.extend_from_slice(&[0xff, 0, 24, (4 << 3) | 1, 0]); // (0, 12), (4, 13), end
        cm.resize(cm.len().next_multiple_of(8), 0);
        let words = (cm.len() / 8) as u32;
        cm[24..28].copy_from_slice(&words.to_le_bytes());
        m.add(const_method, cm);
        let mut cp = vec![0u8; l.constant_pool_sizeof as usize];
        cp[24..32].copy_from_slice(&0x40000u64.to_le_bytes());
        cp[54..56].copy_from_slice(&5u16.to_le_bytes());
        cp[60..64].copy_from_slice(&6u32.to_le_bytes());
        for (i, sym) in [(3u64, 0x50000u64), (4, 0x50100), (5, 0x50200)] {
            cp.resize(72 + 8 * i as usize, 0);
            cp.extend_from_slice(&sym.to_le_bytes());
        }
        m.add(0x30000, cp);
        m.add(0x40000, [[0u8; 24].as_slice(), &0x50300u64.to_le_bytes()].concat());
        let mut run = symbol("run");
        if let Some(len) = name_length {
            run[4..6].copy_from_slice(&len.to_le_bytes());
        }
        m.add(0x50000, run);
        m.add(0x50100, symbol("()V"));
        m.add(0x50200, symbol("Foo.java"));
        m.add(0x50300, symbol("com/example/Foo"));
        m
    }

    #[test]
    fn reads_a_method() {
        let l = jdk17_fixture();
        let info = read_method(&process(0x20000, 3, None), &l, 0x10000).unwrap();
        assert_eq!(info.qualified_name(), "com.example.Foo.run");
        assert_eq!((&*info.signature, info.source_file.as_deref()), ("()V", Some("Foo.java")));
        assert_eq!((&*info.lines, info.code_size, info.const_method), (&[(0, 12), (4, 13)][..], 10, 0x20000));
        assert_eq!((info.line(0), info.line(3), info.line(9)), (Some(12), Some(12), Some(13)));
    }

    #[test]
    fn hidden_classes_lose_their_address() {
        let cases = [
            ("com/example/Foo", "com.example.Foo"),
            ("Foo$Bar", "Foo$Bar"),
            ("LedgerAudit$Indexer$$Lambda$1+0x00007f40e0003208", "LedgerAudit$Indexer$$Lambda"),
            ("LedgerAudit$Indexer$$Lambda+0x0000000061041210", "LedgerAudit$Indexer$$Lambda"),
            ("LedgerAudit$Indexer$$Lambda$1/0x00007f40e0003208", "LedgerAudit$Indexer$$Lambda"),
            ("LedgerAudit$Indexer$$Lambda/0x000071e4c8003208", "LedgerAudit$Indexer$$Lambda"),
            ("com/example/Foo$$Lambda$143/0x0000000800c03000", "com.example.Foo$$Lambda"),
            ("java/lang/invoke/LambdaForm$MH/0x0000000800c10400", "java.lang.invoke.LambdaForm$MH"),
            // Not an address, not a proxy's number: kept.
            ("a/0xyz", "a.0xyz"),
            ("Foo$$Lambda$x", "Foo$$Lambda$x"),
            ("Foo$$Lambda$", "Foo$$Lambda$"),
            ("Foo/0x", "Foo.0x"),
            ("Foo+0xg1", "Foo+0xg1"),
        ];
        for (internal, want) in cases {
            assert_eq!(java_class_name(internal), want, "{internal}");
        }
    }

    #[test]
    fn hostile_indices_and_lengths_are_errors() {
        let l = jdk17_fixture();
        let err = read_method(&process(0x20000, 6, None), &l, 0x10000).unwrap_err();
        assert_eq!(err, "constant pool index 6 of 6");
        let err = read_method(&process(0x20000, 3, Some(5000)), &l, 0x10000).unwrap_err();
        assert_eq!(err, "a 5000-byte Symbol");
        let err = read_method(&process(0x20000, 3, None), &l, 0x10008).unwrap_err();
        assert!(err.starts_with("cannot read"), "{err}");
    }

    #[test]
    fn the_cache_rereads_a_method_whose_const_method_changed() {
        let l = jdk17_fixture();
        let mut m = process(0x20000, 3, None);
        let mut sym = HotspotSymbolizer::new(10);
        assert_eq!(sym.method(&m, &l, 0x10000).unwrap().const_method, 0x20000);
        assert_eq!(sym.method(&m, &l, 0x10000).unwrap().const_method, 0x20000);
        assert_eq!((sym.stats().reads, sym.stats().hits, sym.stats().stale), (1, 1, 0));
        // The Method now points elsewhere (redefined, or freed and reused).
        let moved = process(0x28000, 3, None);
        m.regions = moved.regions;
        assert_eq!(sym.method(&m, &l, 0x10000).unwrap().const_method, 0x28000);
        assert_eq!((sym.stats().reads, sym.stats().hits, sym.stats().stale), (2, 1, 1));
        assert!(sym.method(&m, &l, 0x999).is_none());
        assert_eq!(sym.stats().read_failures, 1);
        // Cleared, it is read again.
        assert_eq!(sym.len(), 1);
        sym.clear();
        assert!(sym.is_empty());
        assert_eq!(sym.stats().evictions, 1);
        sym.method(&m, &l, 0x10000).unwrap();
        assert_eq!((sym.stats().reads, sym.stats().hits), (4, 1));
    }

    #[test]
    fn the_cache_is_bounded() {
        let l = jdk17_fixture();
        let mut m = process(0x20000, 3, None);
        let mut sym = HotspotSymbolizer::new(2);
        for k in 1..=5u64 {
            // Another Method of the same ConstMethod.
            m.add(0x10000 + 0x100 * k, [0u64.to_le_bytes(), 0x20000u64.to_le_bytes()].concat());
            assert!(sym.method(&m, &l, 0x10000 + 0x100 * k).is_some());
            assert!(sym.len() <= 2);
        }
        assert_eq!(sym.stats().evictions, 4);
    }
}
