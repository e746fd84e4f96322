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

use super::layout::HotspotLayout;
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
    let source_index = u16_at(&cp, l.constant_pool_source_file_name_index as usize).unwrap_or(0);
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
    let class: Arc<str> = read_symbol(memory, l, klass_name)?.replace('/', ".").into();

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

/// Names methods by (pid, `Method*`), caching at most `max_entries`; each
/// hit costs one 8-byte read to check that the `Method` still points at
/// the `ConstMethod` it was read with.
pub struct HotspotSymbolizer {
    cache: HashMap<(u32, u64), Arc<MethodInfo>>,
    max_entries: usize,
    stats: HotspotSymbolizerStats,
}

impl HotspotSymbolizer {
    /// A symbolizer holding at most `max_entries` methods.
    pub fn new(max_entries: usize) -> HotspotSymbolizer {
        HotspotSymbolizer { cache: HashMap::new(), max_entries: max_entries.max(1), stats: Default::default() }
    }

    /// The method at `method` in process `pid`.
    pub fn method(
        &mut self,
        memory: &dyn ProcessMemory,
        pid: u32,
        l: &HotspotLayout,
        method: u64,
    ) -> Option<Arc<MethodInfo>> {
        if let Some(info) = self.cache.get(&(pid, method)) {
            let now = read_u64(memory, method.wrapping_add(u64::from(l.method_const_method)));
            if now == Some(info.const_method) {
                self.stats.hits += 1;
                return Some(info.clone());
            }
            self.stats.stale += 1;
            self.cache.remove(&(pid, method));
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
        self.cache.insert((pid, method), info.clone());
        Some(info)
    }

    /// Forgets a process's methods (it exited).
    pub fn forget(&mut self, pid: u32) {
        self.cache.retain(|(p, _), _| *p != pid);
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
