//! Naming JavaScript functions from a Node process's memory:
//! `JSFunction` -> `SharedFunctionInfo` -> function name (a string, or a
//! `ScopeInfo` holding it) and `Script` (its name, and its line ends or
//! its source to compute them); a bytecode offset or a machine code
//! offset -> script offset (source position tables) -> line and column.
//!
//! Facts (V8's `shared-function-info.h`, `scope-info.tq`): a compiled
//! function's `name_or_scope_info` is its `ScopeInfo`, whose slots after
//! the map are the flags, the parameter count, the context local count
//! (`v8dbg_scopeinfo_idx_ncontextlocals`), then from
//! `v8dbg_scopeinfo_idx_first_vars` the context locals' names (inline,
//! or one hash table from 75 locals on) and infos (one slot per local),
//! then optional slots of which the first string
//! is the function's name (empty for anonymous functions), then the name
//! V8 inferred for an anonymous function (`Module._compile` for
//! `Module.prototype._compile = function () {}`). The layout of those
//! optional slots is not in the metadata: the first non-empty string
//! within [`SCOPE_INFO_SLOTS`] before the function's position pair (two
//! Smis; V8 13+ keeps it before the locals) or any other object (the
//! outer scope's `ScopeInfo`, the next object's map) is taken, as V8's
//! own debug name does (the name, else the inferred name).

use super::heap::{untag, Heap, MAX_SMI_ARRAY};
use super::layout::V8Layout;
use super::positions::{decode_positions_of, line_column, position_at, PositionEntry};
use crate::memory::ProcessMemory;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots of a `ScopeInfo` searched for the function name after the
/// context locals.
pub const SCOPE_INFO_SLOTS: u32 = 16;
/// V8's `kScopeInfoMaxInlinedLocalNamesSize`: a scope of this many
/// context locals or more keeps their names in a hash table (one slot),
/// not inline. TypeScript's `createTypeChecker` has hundreds: read as
/// inline, the slots looked at were past the object (other strings).
const MAX_INLINED_LOCAL_NAMES: i64 = 75;
/// Most context locals accepted in a `ScopeInfo`.
const MAX_CONTEXT_LOCALS: i64 = 1 << 16;
/// Largest script source read to compute line ends (characters).
pub const MAX_SOURCE: usize = 8 << 20;
/// Functions kept by a [`V8Symbolizer`] before it starts over.
pub const MAX_CACHED_FUNCTIONS: usize = 16384;
/// Most bytes the cached functions may hold (names, line ends,
/// positions): a script's line ends can be megabytes, and each function
/// of it keeps them.
pub const MAX_CACHED_BYTES: usize = 16 << 20;
/// Name given to functions without one.
pub const ANONYMOUS: &str = "<anonymous>";

/// What the naming found about one `SharedFunctionInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The function's name, or [`ANONYMOUS`].
    pub name: Arc<str>,
    /// The script's name (a file path or URL), if it has a script.
    pub script: Option<Arc<str>>,
    /// The script's line ends, when available.
    pub line_ends: Option<Arc<[i64]>>,
    /// The bytecode it was read with, and that bytecode's positions.
    pub bytecode: Option<(u64, Arc<[PositionEntry]>)>,
}

impl FunctionInfo {
    /// The bytes it holds (what it costs a cache to keep it); its
    /// script's line ends are shared with the script's other functions
    /// and counted by [`ScriptLines`].
    pub fn heap_bytes(&self) -> usize {
        self.name.len()
            + self.script.as_ref().map_or(0, |s| s.len())
            + self.bytecode.as_ref().map_or(0, |(_, p)| std::mem::size_of_val(&**p))
    }

    /// `(line, column)` of script offset `offset`.
    pub fn line_column(&self, offset: u32) -> Option<(u32, u32)> {
        line_column(self.line_ends.as_deref()?, offset)
    }
}

/// Counts of what [`V8Symbolizer`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V8SymbolizerStats {
    /// Functions read from memory.
    pub read: u64,
    /// Functions served from the cache.
    pub hits: u64,
    /// `SharedFunctionInfo`s that could not be read (bad pointer, wrong type).
    pub failed: u64,
    /// Times the cache was full (in entries or bytes) and emptied.
    pub cache_resets: u64,
}

/// Names functions of one process, caching them by `SharedFunctionInfo`
/// address. The cache is bounded and emptied when full. V8's garbage
/// collector may move or free a `SharedFunctionInfo`; callers that keep a
/// symbolizer across GCs must drop it when the process's code changes
/// (the BPF side will report moves); the test walks a stopped process.
pub struct V8Symbolizer {
    layout: Arc<V8Layout>,
    cache: HashMap<u64, Arc<FunctionInfo>>,
    /// [`FunctionInfo::heap_bytes`] of what `cache` holds.
    cached_bytes: usize,
    lines: ScriptLines,
    stats: V8SymbolizerStats,
}

impl V8Symbolizer {
    /// A symbolizer for processes with `layout`.
    pub fn new(layout: Arc<V8Layout>) -> V8Symbolizer {
        V8Symbolizer {
            layout,
            cache: HashMap::new(),
            cached_bytes: 0,
            lines: ScriptLines::default(),
            stats: V8SymbolizerStats::default(),
        }
    }

    /// The layout.
    pub fn layout(&self) -> &V8Layout {
        &self.layout
    }

    /// Counters.
    pub fn stats(&self) -> V8SymbolizerStats {
        self.stats
    }

    /// The function behind `SharedFunctionInfo` `sfi` (tagged).
    pub fn function(&mut self, memory: &dyn ProcessMemory, sfi: u64) -> Option<Arc<FunctionInfo>> {
        if let Some(info) = self.cache.get(&sfi) {
            self.stats.hits += 1;
            return Some(info.clone());
        }
        let heap = Heap { memory, layout: &self.layout };
        let generation = self.lines.generation();
        let Some(info) = read_function(&heap, sfi, &mut self.lines) else {
            self.stats.failed += 1;
            return None;
        };
        self.stats.read += 1;
        let bytes = info.heap_bytes();
        // Line ends the scripts' cache let go are let go here too.
        let lines_reset = self.lines.generation() != generation;
        if lines_reset || self.cache.len() >= MAX_CACHED_FUNCTIONS || self.cached_bytes + bytes > MAX_CACHED_BYTES {
            self.cache.clear();
            self.cached_bytes = 0;
            self.stats.cache_resets += 1;
        }
        let info = Arc::new(info);
        if bytes <= MAX_CACHED_BYTES {
            self.cached_bytes += bytes;
            self.cache.insert(sfi, info.clone());
        }
        Some(info)
    }
}

/// Reads the function of `SharedFunctionInfo` `sfi`.
pub fn read_function(heap: &Heap<'_>, sfi: u64, lines: &mut ScriptLines) -> Option<FunctionInfo> {
    let l = heap.layout;
    heap.typed(sfi, l.type_shared_function_info)?;
    let name = function_name(heap, heap.field(sfi, l.sfi_name_or_scope_info)?)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| ANONYMOUS.to_string());
    let (script, line_ends) = match heap.field(sfi, l.sfi_script_or_debug_info) {
        Some(s) if heap.typed(s, l.type_script).is_some() => {
            (heap.field(s, l.script_name).and_then(|n| heap.string(n)), lines.line_ends(heap, s))
        }
        _ => (None, None),
    };
    let bytecode = heap.field(sfi, l.sfi_function_data).and_then(|d| sfi_bytecode(heap, d));
    let bytecode = bytecode.and_then(|b| Some((b, bytecode_positions(heap, b)?)));
    Some(FunctionInfo {
        name: name.into(),
        script: script.map(Into::into),
        line_ends,
        bytecode: bytecode.map(|(b, p)| (b, p.into())),
    })
}

/// The name in `name_or_scope_info`: a string, or a `ScopeInfo`'s.
fn function_name(heap: &Heap<'_>, name_or_scope_info: u64) -> Option<String> {
    let l = heap.layout;
    if heap.typed(name_or_scope_info, l.type_scope_info).is_none() {
        return heap.string(name_or_scope_info);
    }
    // ScopeInfo slots start right after the map.
    let slot = |i: u32| heap.field(name_or_scope_info, 8 + 8 * i);
    let locals = l.smi(slot(l.scope_info_context_locals)?)?;
    if !(0..=MAX_CONTEXT_LOCALS).contains(&locals) {
        return None;
    }
    // The locals' names inline, or one hash table of them; then their
    // infos (one Smi each).
    let names = if locals < MAX_INLINED_LOCAL_NAMES { locals } else { 1 };
    let first = l.scope_info_first_vars.checked_add(u32::try_from(names + locals).ok()?)?;
    let mut previous_smi = false;
    for i in first..first + SCOPE_INFO_SLOTS {
        let word = slot(i)?;
        let smi = l.smi(word).is_some();
        if smi && previous_smi {
            // The function's start and end positions (before V8 13): the
            // names are before them, what follows is other scopes' data.
            return None;
        }
        previous_smi = smi;
        if !V8Layout::is_heap_object(word) {
            continue;
        }
        // The names are strings; the first other object (undefined for
        // no inferred name, the outer scope's `ScopeInfo`, the next
        // object's map past this one's end) ends them: V8 13+ keeps the
        // positions first, so no Smi pair does.
        match heap.string(word) {
            Some(name) if !name.is_empty() => return Some(name),
            Some(_) => {}
            None => return None,
        }
    }
    None
}

/// Most bytes of line ends [`ScriptLines`] keeps (a bundled program of
/// 9 MB has about 250,000 lines: 2 MB).
pub const MAX_SCRIPT_LINES_BYTES: usize = 32 << 20;
/// Most line ends of one script, as V8's own `line_ends` array is read
/// ([`MAX_SMI_ARRAY`], 8 MiB): a source of more lines (up to
/// [`MAX_SOURCE`] newlines, 64 MiB of line ends) has none.
pub const MAX_LINE_ENDS: usize = MAX_SMI_ARRAY;
/// What [`ScriptLines`] counts for an entry besides its line ends.
const SCRIPT_ENTRY_BYTES: usize = 64;
/// How long a script whose line ends could not be found is not read
/// again.
const SCRIPT_RETRY_AFTER: Duration = Duration::from_secs(10);

/// A script's line ends, or when finding them failed.
type ScriptEntry = Result<Arc<[i64]>, Instant>;

/// The line ends of scripts, shared by all their functions: finding them
/// reads a script's whole `line_ends` array or source (megabytes for a
/// bundled program such as TypeScript's compiler), so it is done once a
/// script, not once a function. Keyed by (`Script`, its source field): a script moved or freed by the collector, or another at its
/// address, is read again. A script without line ends (unreadable, too
/// many lines) is remembered as such for [`SCRIPT_RETRY_AFTER`]: its
/// functions do not read its source again each. Bounded by
/// [`MAX_SCRIPT_LINES_BYTES`] (entries counted too), emptied when full;
/// [`ScriptLines::generation`] says when, so that what holds line ends
/// from before (cached functions) lets them go too.
#[derive(Default)]
pub struct ScriptLines {
    scripts: HashMap<(u64, u64), ScriptEntry>,
    bytes: usize,
    generation: u64,
}

impl ScriptLines {
    /// The line ends of `script` (tagged).
    pub fn line_ends(&mut self, heap: &Heap<'_>, script: u64) -> Option<Arc<[i64]>> {
        let source = heap.field(script, heap.layout.script_source)?;
        let key = (script, source);
        match self.scripts.get(&key) {
            Some(Ok(ends)) => return Some(ends.clone()),
            Some(Err(failed)) if failed.elapsed() < SCRIPT_RETRY_AFTER => return None,
            _ => {}
        }
        let ends: ScriptEntry = script_line_ends(heap, script).map(Into::into).ok_or_else(Instant::now);
        let bytes = SCRIPT_ENTRY_BYTES + ends.as_ref().map_or(0, |e| std::mem::size_of_val(&**e));
        if self.bytes + bytes > MAX_SCRIPT_LINES_BYTES {
            self.scripts.clear();
            self.bytes = 0;
            self.generation += 1;
        }
        // At most MAX_LINE_ENDS (8 MiB) each: always kept.
        self.bytes += bytes;
        if let Some(old) = self.scripts.insert(key, ends.clone()) {
            self.bytes -= SCRIPT_ENTRY_BYTES + old.map_or(0, |e| std::mem::size_of_val(&*e));
        }
        ends.ok()
    }

    /// Bytes held (line ends and entries).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many times it was emptied: line ends found before then are no
    /// longer counted here, and whoever keeps them must let them go.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// A script's line ends: its `line_ends` array once V8 computed it,
/// else computed from its source (if a sequential or cons string of at
/// most [`MAX_SOURCE`] characters), in UTF-16 units as V8 counts; none
/// beyond [`MAX_LINE_ENDS`].
fn script_line_ends(heap: &Heap<'_>, script: u64) -> Option<Vec<i64>> {
    let l = heap.layout;
    if let Some(ends) = heap.field(script, l.script_line_ends).and_then(|a| heap.smi_array(a)) {
        if ends.windows(2).all(|w| w[0] < w[1]) {
            return Some(ends);
        }
    }
    let source = heap.string_up_to(heap.field(script, l.script_source)?, MAX_SOURCE)?;
    let mut ends = Vec::new();
    let mut at = 0i64;
    for c in source.chars() {
        if c == '\n' {
            if ends.len() == MAX_LINE_ENDS {
                return None;
            }
            ends.push(at);
        }
        at += c.len_utf16() as i64;
    }
    Some(ends)
}

/// The `BytecodeArray` of a function's `function_data`: itself, or the
/// one a baseline `Code` object points to.
fn sfi_bytecode(heap: &Heap<'_>, data: u64) -> Option<u64> {
    let l = heap.layout;
    if heap.typed(data, l.type_bytecode_array).is_some() {
        return Some(data);
    }
    // Baseline code: `Code::bytecode_or_interpreter_data`, the field
    // optimised code keeps its deoptimization data in (metadata 11.x:
    // right after the map and the relocation info; 12.x: after the map).
    heap.typed(data, l.type_code)?;
    let inner = heap.field(data, l.code_deoptimization_data)?;
    heap.typed(inner, l.type_bytecode_array)
}

/// The decoded source positions of `BytecodeArray` `bytecode` (`None`
/// until V8 collected them: positions are computed lazily, when a stack
/// trace or the profiler first needs them).
pub fn bytecode_positions(heap: &Heap<'_>, bytecode: u64) -> Option<Vec<PositionEntry>> {
    let table = heap.field(bytecode, heap.layout.bytecode_source_positions)?;
    decode_positions_of(&heap.byte_array(table)?, heap.layout.position_code_flag)
}

/// The script offset of bytecode `frame_offset` (as a frame stores it:
/// relative to the tagged `BytecodeArray` pointer).
pub fn bytecode_script_offset(l: &V8Layout, positions: &[PositionEntry], frame_offset: i64) -> Option<u32> {
    let offset = frame_offset.checked_sub(i64::from(l.bytecode_data) - 1)?;
    Some(position_at(positions, i32::try_from(offset).ok()?)?.script_offset)
}

/// Size of an `InliningPosition` (a 64-bit `SourcePosition` and the
/// inlined function's index in the literal array, padded).
const INLINING_POSITION_SIZE: usize = 16;
/// Deepest inlining followed.
pub const MAX_INLINING_DEPTH: usize = 32;

/// The functions at a position of optimised code, innermost first:
/// `(SharedFunctionInfo, script offset)`, the last being the code's own
/// function `outer_sfi`. Inlined functions come from the code's
/// deoptimisation data: the entry's inlining id indexes its inlining
/// positions, each giving the inlined function (by literal array index)
/// and the position of the call in its caller, itself maybe inlined.
pub fn inlined_scopes(heap: &Heap<'_>, code: u64, entry: PositionEntry, outer_sfi: u64) -> Option<Vec<(u64, u32)>> {
    let l = heap.layout;
    let mut out = Vec::new();
    let (mut offset, mut inlining) = (entry.script_offset, entry.inlining_id);
    if inlining.is_none() {
        return Some(vec![(outer_sfi, offset)]);
    }
    let data = heap.field(code, l.code_deoptimization_data)?;
    // A `TrustedFixedArray` (`ProtectedFixedArray` in 13.x) since 12.x.
    if !l.is_fixed_array(heap.instance_type(data)?) {
        return None;
    }
    let element = |array: u64, i: u32| heap.field(array, l.fixed_array_data.checked_add(i.checked_mul(8)?)?);
    let literals = element(data, l.deopt_literal_array_index)?;
    let literals_len = heap.smi_field(literals, l.fixed_array_length)?;
    let ty = heap.instance_type(literals)?;
    if !l.is_weak_fixed_array(ty) && !l.is_fixed_array(ty) {
        return None;
    }
    let positions = heap.byte_array(element(data, l.deopt_inlining_positions_index)?)?;
    while let Some(id) = inlining {
        if out.len() >= MAX_INLINING_DEPTH {
            return None;
        }
        let at = usize::from(id).checked_mul(INLINING_POSITION_SIZE)?;
        let record = positions.get(at..at + INLINING_POSITION_SIZE)?;
        let raw = u64::from_le_bytes(record[..8].try_into().ok()?);
        let function = i32::from_le_bytes(record[8..12].try_into().ok()?);
        if function < 0 || i64::from(function) >= literals_len {
            return None;
        }
        // Weak references carry tag 3: make them strong pointers.
        let sfi = element(literals, function as u32)? & !2;
        heap.typed(sfi, l.type_shared_function_info)?;
        out.push((sfi, offset));
        offset = ((raw >> 1) & ((1 << 30) - 1)).saturating_sub(1) as u32;
        inlining = match (raw >> 31) & 0xffff {
            0 => None,
            n => Some((n - 1) as u16),
        };
    }
    out.push((outer_sfi, offset));
    Some(out)
}

/// A `Code` object's machine code range and source positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// First instruction.
    pub start: u64,
    /// Bytes of instructions.
    pub size: u32,
    /// Its source positions (machine code offsets).
    pub positions: Vec<PositionEntry>,
    /// Its `CodeKind` (see [`V8Layout::code_kind_baseline`]).
    pub kind: u32,
}

/// Reads `Code` `code` (tagged).
pub fn read_code(heap: &Heap<'_>, code: u64) -> Option<CodeInfo> {
    let l = heap.layout;
    heap.typed(code, l.type_code)?;
    let at = untag(code)?.checked_add(u64::from(l.code_instruction_start))?;
    let start = if l.code_instructions_inline { at } else { heap.u64(at)? };
    let size = heap.field_i32(code, l.code_instruction_size)?;
    let size = u32::try_from(size).ok().filter(|&s| s > 0 && s < (64 << 20))?;
    let positions = heap
        .field(code, l.code_source_positions)
        .and_then(|t| heap.byte_array(t))
        .and_then(|t| decode_positions_of(&t, l.position_code_flag))
        .unwrap_or_default();
    let flags = heap.field_i32(code, l.code_flags)? as u32;
    let kind = (flags >> l.code_kind_shift) & l.code_kind_mask;
    Some(CodeInfo { start, size, positions, kind })
}

impl CodeInfo {
    /// Whether `pc` is in its instructions.
    pub fn contains(&self, pc: u64) -> bool {
        pc >= self.start && pc - self.start < u64::from(self.size)
    }

    /// The position of return address `pc` (the call before it).
    pub fn position_at_return(&self, pc: u64) -> Option<PositionEntry> {
        let offset = i32::try_from(pc.checked_sub(self.start)?.checked_sub(1)?).ok()?;
        position_at(&self.positions, offset)
    }
}

/// Farthest below a pc [`code_at_pc`] looks for its code's start (V8's
/// largest optimised functions stay far below).
pub const MAX_CODE_SCAN: u64 = 1 << 20;
/// Bytes read at once by [`code_at_pc`].
const CODE_SCAN_BLOCK: u64 = 4096;
/// Instruction starts are aligned to this at least (V8's code alignment
/// on x86-64 is 32 or 64).
const CODE_START_ALIGN: u64 = 32;

/// `V8Layout::compiled_by_pc`: the `Code` (tagged) whose JIT instructions hold `address`
/// (a pc, or a return address - 1). The `InstructionStream` holding the
/// instructions starts one header below them, its map, its `Code` and
/// its body size there; the nearest start below `address` whose header
/// agrees (a `Code` whose instruction start and size point back to it)
/// is the one. Candidates are read in blocks, up to [`MAX_CODE_SCAN`].
pub fn code_at_pc(heap: &Heap<'_>, address: u64) -> Option<u64> {
    let l = heap.layout;
    let header = u64::from(l.stream_header);
    let need = u64::from(l.stream_code.max(l.stream_body_size)) + 8;
    if !l.compiled_by_pc || header < need || header % 8 != 0 {
        return None;
    }
    let mut start = address & !(CODE_START_ALIGN - 1);
    let lowest = address.saturating_sub(MAX_CODE_SCAN);
    let mut block = vec![0u8; (CODE_SCAN_BLOCK + header) as usize];
    while start >= lowest && start >= header {
        // One block covers the headers of the starts in
        // (start - CODE_SCAN_BLOCK, start].
        let base = start.checked_sub(CODE_SCAN_BLOCK)?.checked_sub(header)?.checked_add(CODE_START_ALIGN)?;
        // The block's start may be below the mapping: then from the next
        // page on (no code starts lower).
        let mut readable = base;
        if !heap.memory.read(base, &mut block) {
            readable = base.checked_add(4095)? & !4095;
            let skip = usize::try_from(readable - base).ok()?;
            if skip >= block.len() || !heap.memory.read(readable, &mut block[skip..]) {
                return None;
            }
        }
        let word = |at: u64| -> Option<u64> {
            if at < readable {
                return None;
            }
            let i = usize::try_from(at.checked_sub(base)?).ok()?;
            Some(u64::from_le_bytes(block.get(i..i + 8)?.try_into().ok()?))
        };
        let block_end = start.saturating_sub(CODE_SCAN_BLOCK);
        while start > block_end && start >= lowest {
            let stream = start - header;
            let (map, code) = (word(stream)?, word(stream + u64::from(l.stream_code))?);
            let body = word(stream + u64::from(l.stream_body_size))? as u32;
            if map & 3 == 1 && code & 3 == 1 && address - start < u64::from(body) && body < (64 << 20) {
                let map_ok = l.type_instruction_stream.is_none_or(|t| heap.instance_type(stream + 1) == Some(t));
                let code_ok = map_ok
                    && heap.typed(code, l.type_code).is_some()
                    && heap.field(code, l.code_instruction_start) == Some(start);
                if code_ok {
                    return Some(code);
                }
            }
            start -= CODE_START_ALIGN;
        }
    }
    None
}

/// The function whose optimised `Code` `code` is (13+: its deoptimization
/// data's `SharedFunctionInfoWrapper`; 12.x: the function itself).
pub fn code_function(heap: &Heap<'_>, code: u64) -> Option<u64> {
    let l = heap.layout;
    let data = heap.field(code, l.code_deoptimization_data)?;
    if !l.is_fixed_array(heap.instance_type(data)?) {
        return None;
    }
    let index = l.deopt_shared_info_index?;
    let entry = heap.field(data, l.fixed_array_data.checked_add(index.checked_mul(8)?)?)?;
    let sfi = match l.sfi_wrapper_shared_info {
        Some(at) => heap.field(entry, at)?,
        None => entry,
    };
    heap.typed(sfi, l.type_shared_function_info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v8::heap::tests::{layout, Builder};

    /// A `ScopeInfo` of `locals` context locals (names inline below 75,
    /// else one hash table slot; an info Smi each), then `after`.
    fn scope_info(b: &mut Builder, l: &V8Layout, locals: i64, after: &[u64]) -> u64 {
        let smi = |v: i64| (v as u64) << l.smi_shift;
        let mut slots = vec![0u64; l.scope_info_first_vars as usize];
        slots[l.scope_info_context_locals as usize] = smi(locals);
        if locals < MAX_INLINED_LOCAL_NAMES {
            let local_name = b.one_byte("localName");
            slots.extend((0..locals).map(|_| local_name));
        } else {
            slots.push(b.typed(l.type_fixed_array, 16, &[], &[]));
        }
        slots.extend((0..locals).map(|_| smi(1)));
        slots.extend_from_slice(after);
        let fields: Vec<(usize, u64)> = slots.iter().enumerate().map(|(i, &w)| (8 + 8 * i, w)).collect();
        b.typed(l.type_scope_info, 8 + 8 * slots.len() + 8 * SCOPE_INFO_SLOTS as usize, &fields, &[])
    }

    /// The function's name or inferred name from its `ScopeInfo`, with
    /// few locals and with a hash table of many (TypeScript's
    /// `createTypeChecker`), the positions after the locals (before V8
    /// 13) or before them (13+: the outer scope's `ScopeInfo`, or the
    /// next object, follows the names); none for an anonymous function,
    /// whatever strings lie past those slots.
    #[test]
    fn scope_info_names_with_inline_or_hashed_locals() {
        let l = V8Layout { type_scope_info: 302, scope_info_context_locals: 2, scope_info_first_vars: 3, ..layout() };
        let mut b = Builder::new();
        let smi = |v: i64| (v as u64) << l.smi_shift;
        let name = b.one_byte("createTypeChecker");
        let stray = b.one_byte("node:internal/main/run_main_module");
        let undefined = b.typed(l.type_fixed_array, 16, &[], &[]);
        let outer = scope_info(&mut b, &l, 0, &[]);
        for locals in [0, 3, 74, 75, 400] {
            let v12 = scope_info(&mut b, &l, locals, &[name, smi(10), smi(900), stray]);
            let v13 = scope_info(&mut b, &l, locals, &[name, outer, stray]);
            let anonymous_v12 = scope_info(&mut b, &l, locals, &[undefined, smi(10), smi(900), stray]);
            let anonymous_v13 = scope_info(&mut b, &l, locals, &[undefined, outer, stray]);
            // Nothing after the locals: the next object's map, then its
            // fields (the workload's strings).
            let next_map = b.map(l.type_fixed_array);
            let anonymous_last = scope_info(&mut b, &l, locals, &[next_map, stray]);
            let heap = Heap { memory: &b.mem, layout: &l };
            assert_eq!(function_name(&heap, v12).as_deref(), Some("createTypeChecker"), "{locals} locals");
            assert_eq!(function_name(&heap, v13).as_deref(), Some("createTypeChecker"), "{locals} locals");
            assert_eq!(function_name(&heap, anonymous_v12), None, "{locals} locals");
            assert_eq!(function_name(&heap, anonymous_last), None, "{locals} locals");
            assert_eq!(function_name(&heap, anonymous_v13), None, "{locals} locals");
        }
    }

    /// A script's line ends are read once for all its functions, again
    /// when its source field changes (moved, or another script there).
    #[test]
    fn script_line_ends_are_shared_by_its_functions() {
        let l = V8Layout { script_source: 16, script_line_ends: 24, type_script: 202, ..layout() };
        let mut b = Builder::new();
        let source = b.one_byte("a\nbc\n\nd");
        let script = b.typed(l.type_script, 32, &[(16, source)], &[]);
        let heap = Heap { memory: &b.mem, layout: &l };
        let mut lines = ScriptLines::default();
        let first = lines.line_ends(&heap, script).expect("line ends");
        assert_eq!(&*first, &[1, 4, 5]);
        let again = lines.line_ends(&heap, script).expect("cached");
        assert!(Arc::ptr_eq(&first, &again), "one read for the script");
        assert_eq!(lines.bytes(), 3 * 8 + SCRIPT_ENTRY_BYTES);

        // Another source in the same script object (the collector moved
        // the string, or another script took the address).
        let source2 = b.one_byte("x\ny");
        let region = b.mem.regions.iter_mut().find(|(at, _)| *at == script - 1).expect("the script");
        region.1[16..24].copy_from_slice(&source2.to_le_bytes());
        let heap = Heap { memory: &b.mem, layout: &l };
        assert_eq!(&*lines.line_ends(&heap, script).expect("read again"), &[1]);
    }

    /// A source of more lines than [`MAX_LINE_ENDS`] (a cons string of
    /// two halves of newlines) has no line ends, and is not read again
    /// while that is remembered; scripts' line ends beyond the cache's
    /// bytes empty it and say so (its generation).
    #[test]
    fn scripts_of_too_many_lines_have_none_and_are_not_read_again() {
        struct Counting<'a>(&'a crate::memory::fake::FakeMemory, std::cell::Cell<u32>);
        impl ProcessMemory for Counting<'_> {
            fn read(&self, address: u64, buf: &mut [u8]) -> bool {
                self.1.set(self.1.get() + 1);
                self.0.read(address, buf)
            }
        }
        let l = V8Layout { script_source: 16, script_line_ends: 24, type_script: 202, ..layout() };
        let mut b = Builder::new();
        let half = MAX_LINE_ENDS / 2 + 1;
        let leaf = b.one_byte(&"\n".repeat(half));
        let cons = b.typed(1 | 8, 32, &[(16, leaf), (24, leaf)], &[(12, 2 * half as i32)]);
        let script = b.typed(l.type_script, 32, &[(16, cons)], &[]);
        let memory = Counting(&b.mem, std::cell::Cell::new(0));
        let heap = Heap { memory: &memory, layout: &l };
        let mut lines = ScriptLines::default();
        assert_eq!(lines.line_ends(&heap, script), None);
        assert!(memory.1.get() > 2, "read once");
        memory.1.set(0);
        assert_eq!(lines.line_ends(&heap, script), None);
        assert_eq!(memory.1.get(), 1, "only its source field: the failure is remembered");
        assert_eq!(lines.bytes(), SCRIPT_ENTRY_BYTES);

        // Two lines less: kept (8 MiB); three such and the entries fill
        // the cache, the fourth empties it.
        let cons = b.typed(1 | 8, 32, &[(16, leaf), (24, leaf)], &[(12, 2 * half as i32 - 2)]);
        for i in 0..4u64 {
            let script = b.typed(l.type_script, 32, &[(16, cons)], &[]);
            let heap = Heap { memory: &b.mem, layout: &l };
            let ends = lines.line_ends(&heap, script).expect("line ends");
            assert_eq!(ends.len(), MAX_LINE_ENDS);
            assert_eq!(lines.generation(), u64::from(i == 3), "script {i}");
        }
        assert_eq!(lines.bytes(), 8 * MAX_LINE_ENDS + SCRIPT_ENTRY_BYTES);
    }
}
