//! V8 on the interpreter interface: [`V8`] finds a V8 build (`node`) in a
//! file, [`V8File`] gives the BPF unwinder (`ebpf/runtimes/v8/unwinder.bpf.h`) the
//! embedded builtins as its loop range, the process's anonymous code as
//! its code and the layout as its per-process value (through its object
//! per process), and a [`V8Namer`] per process names the frame words it
//! records.
//!
//! Everything the unwinder needs is in the file (the `v8dbg_*`
//! metadata): attaching reads nothing from the process.

use super::heap::Heap;
use super::layout::V8Layout;
use super::naming::{
    bytecode_script_offset, code_at_pc, code_function, inlined_scopes, read_code, read_function, CodeInfo,
    FunctionInfo, ScriptLines, ANONYMOUS, MAX_CACHED_BYTES, MAX_SCRIPT_LINES_BYTES,
};
use super::{detect, Detection};
use crate::blocks::{BlockCache, MAX_BLOCKS, MAX_BLOCK_CACHE_BYTES};
use crate::memory::{ProcessMemory, RangeRead};
use crate::recent::RecentWords;
use crate::runtime::{
    frame_payload, frame_word, Attach, CacheUse, ExecutableMapping, FileDetection, InterpreterFile, NamerStats,
    ProcessUnwinding, Runtime, RuntimeProcess,
};
use crate::v8::map_value::{
    V8ProcessValue, V8_FRAME_COMPILED, V8_FRAME_OFFSET_MAX, V8_FRAME_OFFSET_SHIFT, V8_FRAME_PC_MASK,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Functions cached, all processes together (and each alone).
pub const MAX_NAMED_FUNCTIONS: usize = 16_384;

/// A V8 frame word's own bits (below the runtime tag): see
/// `ebpf/runtimes/v8/types.h` (`V8_FRAME_*`).
const FRAME_COMPILED: u64 = V8_FRAME_COMPILED;
const FRAME_OFFSET_SHIFT: u32 = V8_FRAME_OFFSET_SHIFT;
/// The largest offset; it means "unknown".
pub const FRAME_OFFSET_MAX: u64 = V8_FRAME_OFFSET_MAX;

/// A V8 frame word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V8Word {
    /// The frame's `JSFunction` (tagged), 0 if the unwinder had none.
    pub function: u64,
    /// Compiled code (the offset is the pc's in the function's code),
    /// else interpreted (the offset is the bytecode offset).
    pub compiled: bool,
    /// The offset; [`FRAME_OFFSET_MAX`] for unknown.
    pub offset: u32,
}

impl V8Word {
    /// Decodes `word` if it is a V8 frame word.
    pub fn decode(word: u64) -> Option<V8Word> {
        let bits = frame_payload(word, InterpreterUnwinder::V8)?;
        let pointer = (bits & ((1 << FRAME_OFFSET_SHIFT) - 1)) << 3;
        Some(V8Word {
            function: if pointer == 0 { 0 } else { pointer + 1 },
            compiled: bits & FRAME_COMPILED != 0,
            offset: ((bits >> FRAME_OFFSET_SHIFT) & FRAME_OFFSET_MAX) as u32,
        })
    }

    /// `V8Layout::compiled_by_pc`: the pc a compiled frame word holds (`V8_FRAME_PC_MASK`),
    /// if `word` is one of that form (its layout says whether the form is
    /// used).
    pub fn decode_pc(word: u64) -> Option<u64> {
        let bits = frame_payload(word, InterpreterUnwinder::V8)?;
        let pc_form = bits & FRAME_COMPILED != 0 && bits & !FRAME_COMPILED & !V8_FRAME_PC_MASK == 0;
        (pc_form && bits & V8_FRAME_PC_MASK != 0).then_some(bits & V8_FRAME_PC_MASK)
    }

    /// The word the BPF unwinder writes for a compiled frame (by pc) at
    /// `pc` (tests).
    pub fn encode_pc(pc: u64) -> u64 {
        frame_word(InterpreterUnwinder::V8, FRAME_COMPILED | (pc & V8_FRAME_PC_MASK))
    }

    /// The word the BPF unwinder writes for it (tests).
    pub fn encode(self) -> u64 {
        let pointer = self.function.wrapping_sub(1);
        let bits = if pointer & 7 != 0 || pointer >> 47 != 0 { 0 } else { pointer >> 3 };
        let offset = u64::from(self.offset).min(FRAME_OFFSET_MAX) << FRAME_OFFSET_SHIFT;
        frame_word(InterpreterUnwinder::V8, bits | offset | if self.compiled { FRAME_COMPILED } else { 0 })
    }
}

/// The V8 runtime (Node.js).
pub struct V8;

impl Runtime for V8 {
    fn name(&self) -> &'static str {
        "V8"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::V8Js
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::V8
    }

    fn frame_address(&self, word: u64) -> u64 {
        V8Word::decode(word).map_or(word, |w| u64::from(w.offset))
    }

    fn marker_symbols(&self) -> &'static [&'static str] {
        &["v8dbg_SmiTagMask"]
    }

    fn detect_file(&self, elf: &ElfFile, _path: &str) -> FileDetection {
        match detect(elf) {
            Detection::NotV8 => FileDetection::NotFound,
            Detection::V8(layout) => {
                let loops = layout.builtins_code.clone().map(|r| vec![(r.start, r.end)]).unwrap_or_default();
                FileDetection::Found(Arc::new(V8File { layout: Arc::from(layout), loops }))
            }
            Detection::Unsupported { version, reason } => {
                FileDetection::Unsupported { version: version.map(|v| v.to_string()), reason }
            }
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CACHE_BOUND
    }
}

/// A file with a supported V8 build.
#[derive(Debug)]
pub struct V8File {
    layout: Arc<V8Layout>,
    /// The embedded builtins (ELF addresses): the interpreter's bytecode
    /// handlers, the entry trampolines, the builtins with JavaScript
    /// linkage (`Array.prototype.sort`).
    loops: Vec<(u64, u64)>,
}

impl V8File {
    /// Its layout.
    pub fn layout(&self) -> &Arc<V8Layout> {
        &self.layout
    }
}

impl InterpreterFile for V8File {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::V8
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        &self.loops
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        None
    }

    fn attach(self: Arc<Self>, _pid: u32, _memory: &dyn ProcessMemory, _bias: u64) -> Attach {
        // Nothing to read: the layout is the file's.
        Attach::Attached(Box::new(V8Process { file: self, namer: V8Namer::new(MAX_NAMED_FUNCTIONS) }))
    }
}

/// V8 in one process: gives the unwinder its code, names its frames.
struct V8Process {
    file: Arc<V8File>,
    namer: V8Namer,
}

impl RuntimeProcess for V8Process {
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let before = self.namer.stats();
        let lines = self.namer.lines(memory, &self.file.layout, word);
        stats.add_change(&before, &self.namer.stats());
        lines
    }

    fn prefetch(&mut self, memory: &dyn ProcessMemory, words: &[u64]) {
        self.namer.prefetch(memory, &self.file.layout, words);
    }

    fn sync(&mut self, _memory: &dyn ProcessMemory, maps: &[ExecutableMapping<'_>]) -> Option<ProcessUnwinding> {
        // All of a Node process's anonymous executable memory is V8's
        // (its code range: baseline, optimised and regexp code, and the
        // short-call copy of the builtins when not file-backed).
        let value = process_value(&self.file.layout).map_value();
        let unwinding = ProcessUnwinding::new(InterpreterUnwinder::V8, vec![(0, u64::MAX)], value);
        Some(unwinding.reserving(code_range_reservations(maps)))
    }

    fn cached(&self) -> CacheUse {
        self.namer.cached()
    }

    fn clear(&mut self) {
        self.namer.clear();
    }
}

/// What V8's objects cache together at most: the functions, compiled
/// code objects (decoded, and their ranges), words named lately, heads
/// and blocks read for a sample of one namer, and its functions' and
/// scripts' bytes.
const CACHE_BOUND: CacheUse = CacheUse {
    entries: MAX_NAMED_FUNCTIONS + 2 * MAX_CACHED_CODES + MAX_RECENT_WORDS + MAX_PREFETCHED + MAX_BLOCKS,
    bytes: MAX_CACHED_BYTES + MAX_SCRIPT_LINES_BYTES + MAX_BLOCK_CACHE_BYTES,
};

/// The most of a code range reservation taken after one executable
/// mapping: V8's code range is at most 512 MiB on 64-bit builds
/// (`kMaximalCodeRangeSize`); what lies beyond is not its.
pub const MAX_CODE_RANGE: u64 = 512 << 20;

/// The not yet executable parts of V8's code ranges: the inaccessible
/// anonymous memory right after each anonymous executable mapping (V8
/// reserves its code range whole and makes its pages executable as it
/// compiles; Node 22 starts with 240 KiB of a 512 MiB range). Marked as
/// V8's code, the pages committed later are walked as soon as they run,
/// not cut as unknown pcs until the process's maps are read again.
pub fn code_range_reservations(maps: &[ExecutableMapping<'_>]) -> Vec<(u64, u64)> {
    maps.iter()
        .filter(|m| m.path.is_empty() && m.reserved_end > m.end)
        .map(|m| (m.end, m.reserved_end.min(m.end.saturating_add(MAX_CODE_RANGE))))
        .collect()
}

/// Set in `struct v8_process`'s `code_instruction_start` when `Code`
/// holds its instructions after its header (`ebpf/runtimes/v8/types.h`).
pub const CODE_START_INLINE: u32 = profiler_contract::c::V8_CODE_START_INLINE;

/// The BPF unwinder's view of a V8 build (`struct v8_process`).
pub fn process_value(l: &V8Layout) -> V8ProcessValue {
    V8ProcessValue {
        fp_marker: l.fp_context_or_marker,
        fp_function: l.fp_function,
        fp_bytecode_array: l.fp_bytecode_array,
        fp_bytecode_offset: l.fp_bytecode_offset,
        marker_entry: l.frame_types.entry,
        marker_construct_entry: l.frame_types.construct_entry,
        smi_shift: l.smi_shift,
        bytecode_offset_bias: l.bytecode_data.saturating_sub(1),
        heap_object_map: l.heap_object_map,
        map_instance_type: l.map_instance_type,
        js_function_code: l.js_function_code,
        code_instruction_start: l.code_instruction_start
            | if l.code_instructions_inline { CODE_START_INLINE } else { 0 },
        type_bytecode_array: l.type_bytecode_array,
        compiled_by_pc: l.compiled_by_pc,
        osr_by_pc: l.leaptiering,
        js_function_shared: l.js_function_shared,
        sfi_function_data: l.sfi_function_data,
        code_instruction_size: l.code_instruction_size,
    }
}

/// Compiled code objects a [`V8Namer`] keeps decoded before it starts
/// over: a warm process runs the same few (each frame of each sample
/// would otherwise read and decode its position table again).
pub const MAX_CACHED_CODES: usize = 4096;

/// A cached function: the `SharedFunctionInfo` fields it was read from,
/// compared at each use (the garbage collector moves and frees objects:
/// another function's info at the same address is told apart).
struct Cached {
    name_field: u64,
    script_field: u64,
    info: Arc<FunctionInfo>,
}

/// How long a word's lines (`V8Namer::recent`) are taken as they are, without
/// checking the process's memory again. Naming already comes a fraction
/// of a second after the sample (the objects may have moved since), and
/// a deep stack's outer frames come back in every sample: checked at
/// each, a busy Node program's naming costs as much as the naming
/// budget's whole allowance of a genuine process.
const RECHECK_AFTER: Duration = Duration::from_millis(100);

/// Most frame words kept in [`V8Namer`]'s `recent` (emptied when full).
const MAX_RECENT_WORDS: usize = 16_384;
/// Most bytes of a `JSFunction` compared to name a word again.
const MAX_HEAD_BYTES: usize = 128;
/// Most words of one sample whose heads are read together
/// ([`V8Namer::prefetch`]); a deeper stack's others are read one by one.
const MAX_PREFETCHED: usize = 1024;

/// The bytes of a `JSFunction` that name it: up to and including its
/// shared function info and code fields.
fn head_len(l: &V8Layout) -> usize {
    let fields_end = match l.leaptiering {
        true => l.js_function_shared,
        false => l.js_function_shared.max(l.js_function_code),
    };
    (fields_end as usize + 8).min(MAX_HEAD_BYTES)
}

/// The bytes of a `Code` that name the frames in it: up to and including
/// its deoptimization data (the function and those inlined), positions,
/// instruction start, size and flags. A `Code` is not changed once made:
/// the same bytes at the address are the same code, another one (even
/// at the same address) has other data or instructions.
fn code_head_len(l: &V8Layout) -> usize {
    let fields = [l.code_deoptimization_data, l.code_source_positions, l.code_instruction_size, l.code_flags];
    let start = if l.code_instructions_inline { 0 } else { l.code_instruction_start };
    (fields.into_iter().fold(start, u32::max) as usize + 8).min(MAX_HEAD_BYTES)
}

/// The first `len` bytes of the object at `tagged` (none for 0, or when
/// they cannot be read).
fn read_head(memory: &dyn ProcessMemory, tagged: u64, len: usize) -> Option<Box<[u8]>> {
    let at = object_address(tagged)?;
    let mut head = vec![0u8; len];
    memory.read(at, &mut head).then(|| head.into())
}

/// Names V8 frame words: the `JSFunction` (checked to still be one, and
/// its `SharedFunctionInfo` to be one) gives the name and script; an
/// interpreted frame's bytecode offset gives its line; a compiled frame's
/// pc offset in the function's current code gives the functions inlined
/// there, innermost first.
pub struct V8Namer {
    functions: HashMap<u64, Cached>,
    /// Decoded `Code`s by tagged `Code`, kept while the object
    /// there still has its type and instruction start (a freed one's
    /// successor at the same address would start elsewhere).
    codes: HashMap<u64, Arc<CodeInfo>>,
    /// JIT code found around a pc, by instruction start:
    /// (end, tagged `Code`), checked against `codes` at each use.
    code_ranges: BTreeMap<u64, (u64, u64)>,
    /// Line ends by script, shared by its functions.
    lines: ScriptLines,
    /// The lines of frame words named lately, by word, with the
    /// `JSFunction`'s first bytes they were named from (see
    /// [`V8Namer::name_word_again`]); for a word holding a pc, its
    /// `Code` (tagged) and that code's first bytes.
    recent: RecentWords,
    /// The heads of the functions of the sample being named, read
    /// together before it ([`V8Namer::prefetch`]), by word (`None`:
    /// unreadable); each taken by its word's naming, all replaced at the
    /// next sample's, and not used once older than [`RECHECK_AFTER`].
    prefetched: HashMap<u64, Option<Box<[u8]>>>,
    /// When `prefetched` was read.
    prefetched_at: Instant,
    /// The blocks of memory one sample's naming read (emptied at each
    /// sample's [`V8Namer::prefetch`]).
    blocks: BlockCache,
    max_functions: usize,
    /// [`FunctionInfo::heap_bytes`] of what `functions` holds, at most
    /// [`MAX_CACHED_BYTES`].
    cached_bytes: usize,
    stats: NamerStats,
}

impl V8Namer {
    /// A namer keeping at most `max_functions` functions.
    pub fn new(max_functions: usize) -> V8Namer {
        V8Namer {
            functions: HashMap::new(),
            codes: HashMap::new(),
            code_ranges: BTreeMap::new(),
            lines: ScriptLines::default(),
            recent: RecentWords::new(MAX_RECENT_WORDS, RECHECK_AFTER),
            prefetched: HashMap::new(),
            prefetched_at: Instant::now(),
            blocks: BlockCache::default(),
            max_functions,
            cached_bytes: 0,
            stats: NamerStats::default(),
        }
    }

    /// `Code` `code`, decoded once while it stays the
    /// same code (three reads to check it).
    fn code(&mut self, heap: &Heap<'_>, code: u64) -> Option<Arc<CodeInfo>> {
        let l = heap.layout;
        heap.typed(code, l.type_code)?;
        let start = if l.code_instructions_inline {
            code.checked_sub(1)?.checked_add(u64::from(l.code_instruction_start))?
        } else {
            heap.field(code, l.code_instruction_start)?
        };
        let key = code;
        if self.codes.get(&key).is_none_or(|c| c.start != start) {
            let info = read_code(heap, code)?;
            self.stats.reads += 1;
            if self.codes.len() >= MAX_CACHED_CODES {
                self.codes.clear();
            }
            self.codes.insert(key, Arc::new(info));
        }
        self.codes.get(&key).cloned()
    }

    /// The function of `SharedFunctionInfo` `sfi`.
    fn function(&mut self, heap: &Heap<'_>, sfi: u64) -> Option<Arc<FunctionInfo>> {
        let l = heap.layout;
        heap.typed(sfi, l.type_shared_function_info)?;
        let name_field = heap.field(sfi, l.sfi_name_or_scope_info)?;
        let script_field = heap.field(sfi, l.sfi_script_or_debug_info)?;
        if let Some(c) = self.functions.get(&sfi) {
            if c.name_field == name_field && c.script_field == script_field {
                return Some(c.info.clone());
            }
        }
        self.stats.reads += 1;
        let generation = self.lines.generation();
        let info = Arc::new(read_function(heap, sfi, &mut self.lines)?);
        let bytes = info.heap_bytes();
        // The functions hold their scripts' line ends: when the scripts'
        // cache let them go (full), they go too, or the functions would
        // keep every script's, uncounted.
        let lines_reset = self.lines.generation() != generation;
        if lines_reset || self.functions.len() >= self.max_functions || self.cached_bytes + bytes > MAX_CACHED_BYTES {
            self.functions.clear();
            self.cached_bytes = 0;
        }
        if bytes <= MAX_CACHED_BYTES {
            self.cached_bytes += bytes;
            self.functions.insert(sfi, Cached { name_field, script_field, info: info.clone() });
        }
        Some(info)
    }

    /// The `Code` whose instructions hold `address`, from the
    /// ranges found before (still that code) or found around it.
    fn code_at(&mut self, heap: &Heap<'_>, address: u64) -> Option<(u64, Arc<CodeInfo>)> {
        let known = self.code_ranges.range(..=address).next_back();
        if let Some((&start, &(end, code))) = known {
            if address < end {
                match self.code(heap, code) {
                    Some(info) if info.start == start && info.contains(address) => return Some((code, info)),
                    _ => {
                        self.code_ranges.remove(&start);
                    }
                }
            }
        }
        let code = code_at_pc(heap, address)?;
        let info = self.code(heap, code).filter(|i| i.contains(address))?;
        if self.code_ranges.len() >= MAX_CACHED_CODES {
            self.code_ranges.clear();
        }
        self.code_ranges.insert(info.start, (info.start + u64::from(info.size), code));
        Some((code, info))
    }

    /// A compiled frame recorded by its pc (a return address but
    /// for the innermost frame: the position before it is the call's).
    /// Returns the `Code` (tagged) holding it, with its lines.
    fn name_pc(&mut self, heap: &Heap<'_>, pc: u64) -> Option<(u64, Vec<SourceLine>)> {
        let (code, code_info) = self.code_at(heap, pc.saturating_sub(1))?;
        Some((code, self.code_lines(heap, code, &code_info, pc)))
    }

    /// The lines of return address `pc` in `code`.
    fn code_lines(&mut self, heap: &Heap<'_>, code: u64, code_info: &CodeInfo, pc: u64) -> Vec<SourceLine> {
        let l = heap.layout;
        let Some(sfi) = code_function(heap, code) else { return Vec::new() };
        let Some(info) = self.function(heap, sfi) else { return Vec::new() };
        let scopes = if code_info.kind == l.code_kind_builtin {
            None
        } else {
            code_info.position_at_return(pc).and_then(|e| inlined_scopes(heap, code, e, sfi))
        };
        let Some(scopes) = scopes else { return vec![source_line(&info, None)] };
        self.scope_lines(heap, sfi, &info, scopes)
    }

    /// The lines of inlined `scopes` (innermost first, the last being
    /// `sfi`'s, `info`).
    fn scope_lines(
        &mut self,
        heap: &Heap<'_>,
        sfi: u64,
        info: &Arc<FunctionInfo>,
        scopes: Vec<(u64, u32)>,
    ) -> Vec<SourceLine> {
        let mut lines = Vec::with_capacity(scopes.len());
        for (scope_sfi, position) in scopes {
            let scope_info = if scope_sfi == sfi { Some(info.clone()) } else { self.function(heap, scope_sfi) };
            match scope_info {
                Some(i) => lines.push(source_line(&i, Some(position))),
                // An inlined function that cannot be read: the frame is
                // not named rather than named in part.
                None => return Vec::new(),
            }
        }
        lines
    }

    /// Names a frame word as [`V8Namer::name_word`] does, with one read
    /// when the word was named before: its `JSFunction`'s first bytes
    /// (map, shared function info, code and what lies between) unchanged
    /// say it is the same function with the same code, hence the same
    /// lines. A function the collector moved (its map word is then a
    /// forwarding address) or another at the address reads otherwise and
    /// is named again. A deep stack of a busy program names the same few
    /// hundred words at every sample: about 11 reads a frame otherwise.
    /// The read is the sample's prefetched one when there is one.
    fn name_word_again(
        &mut self,
        heap: &Heap<'_>,
        fresh: &dyn ProcessMemory,
        word: u64,
        decoded: V8Word,
    ) -> Vec<SourceLine> {
        let now = Instant::now();
        if let Some(lines) = self.recent.trusted(word, now) {
            return lines;
        }
        let head = match self.take_prefetched(word, now) {
            Some(head) => head,
            None => read_head(fresh, decoded.function, head_len(heap.layout)),
        };
        let Some(head) = head else {
            self.recent.forget(word);
            return self.name_word(heap, decoded);
        };
        if let Some(lines) = self.recent.same_head(word, &head, now) {
            return lines;
        }
        let lines = self.name_word(heap, decoded);
        self.remember_as_named(heap, word, decoded.function, head_len(heap.layout), &lines, now);
        lines
    }

    /// Keeps `lines` of `word`, named from `object`, with the `len` first
    /// bytes of `object` they were named from: read through the sample's
    /// blocks, as the naming read it. The head read fresh to check the
    /// word may be newer than a block: kept with lines named from that
    /// block, it would vouch for them for as long as the object stays as
    /// it is now.
    fn remember_as_named(
        &mut self,
        heap: &Heap<'_>,
        word: u64,
        object: u64,
        len: usize,
        lines: &[SourceLine],
        now: Instant,
    ) {
        match read_head(heap.memory, object, len) {
            Some(head) => self.recent.remember(word, object, &head, lines, now),
            None => self.recent.forget(word),
        }
    }

    /// Reads together the heads [`V8Namer::name_word_again`] and
    /// [`V8Namer::name_pc_again`] are about to read one by one for `words`
    /// (one sample's, to be named next): those of words not checked within
    /// the recheck interval (a function word's function, a pc word's code
    /// once named), each once, at most [`MAX_PREFETCHED`]. A busy deep
    /// stack at 99 Hz has hundreds of such words a second, and one read
    /// each made the system calls (not the bytes) most of the reporter's
    /// naming time.
    pub fn prefetch(&mut self, memory: &dyn ProcessMemory, layout: &V8Layout, words: &[u64]) {
        let now = Instant::now();
        self.prefetched.clear();
        self.blocks.clear();
        let mut due = Vec::new();
        for &word in words {
            if due.len() >= MAX_PREFETCHED {
                break;
            }
            if self.recent.is_trusted(word, now) {
                continue;
            }
            let object = match V8Word::decode_pc(word).filter(|_| layout.compiled_by_pc) {
                Some(_) => self.recent.object(word).map(|code| (code, code_head_len(layout))),
                None => V8Word::decode(word).map(|w| (w.function, head_len(layout))),
            };
            let Some((at, len)) = object.and_then(|(tagged, len)| Some((object_address(tagged)?, len))) else {
                continue;
            };
            if self.prefetched.insert(word, None).is_none() {
                due.push((word, at, len));
            }
        }
        if due.is_empty() {
            return;
        }
        let mut heads = vec![0u8; due.iter().map(|d| d.2).sum()];
        let mut rest = &mut heads[..];
        let mut reads = Vec::with_capacity(due.len());
        for &(_, at, len) in &due {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            reads.push(RangeRead::new(at, head));
            rest = tail;
        }
        memory.read_many(&mut reads);
        for (r, &(word, _, _)) in reads.iter().zip(&due) {
            self.prefetched.insert(word, r.done.then(|| Box::from(&*r.buf)));
        }
        self.prefetched_at = now;
    }

    /// `word`'s prefetched head (`Some(None)`: it was unreadable), if it
    /// has one read less than [`RECHECK_AFTER`] ago: as fresh as the
    /// lines of a word checked within the interval.
    fn take_prefetched(&mut self, word: u64, now: Instant) -> Option<Option<Box<[u8]>>> {
        if now.saturating_duration_since(self.prefetched_at) >= RECHECK_AFTER {
            self.prefetched.clear();
            return None;
        }
        self.prefetched.remove(&word)
    }

    /// A word holding a pc ([`V8Namer::name_pc`]), kept as
    /// [`V8Namer::name_word_again`] keeps the others, by the first bytes
    /// of its `Code` ([`code_head_len`]): unchanged, the same code names
    /// it as before (its function and those inlined at the pc, about 15
    /// reads otherwise).
    fn name_pc_again(&mut self, heap: &Heap<'_>, fresh: &dyn ProcessMemory, word: u64, pc: u64) -> Vec<SourceLine> {
        let now = Instant::now();
        if let Some(lines) = self.recent.trusted(word, now) {
            return lines;
        }
        let len = code_head_len(heap.layout);
        let code = self.recent.object(word).unwrap_or(0);
        let head = match self.take_prefetched(word, now) {
            Some(head) => head,
            None => read_head(fresh, code, len),
        };
        if let Some(lines) = head.as_deref().and_then(|head| self.recent.same_head(word, head, now)) {
            return lines;
        }
        let Some((now_in, lines)) = self.name_pc(heap, pc) else {
            self.recent.forget(word);
            return Vec::new();
        };
        self.remember_as_named(heap, word, now_in, len, &lines, now);
        lines
    }

    fn name_word(&mut self, heap: &Heap<'_>, word: V8Word) -> Vec<SourceLine> {
        let l = heap.layout;
        // Naming comes after the sample: a young function may have been
        // moved by a scavenge since.
        let Some(function) = heap.forwarded(word.function).filter(|&f| word.function != 0 && heap.is_js_function(f))
        else {
            return Vec::new();
        };
        let Some(sfi) = heap.field(function, l.js_function_shared) else { return Vec::new() };
        let Some(info) = self.function(heap, sfi) else { return Vec::new() };
        let line = source_line;
        let known = u64::from(word.offset) < FRAME_OFFSET_MAX;
        // 13+: no `JSFunction::code`; the function's Sparkplug code is its
        // `SharedFunctionInfo`'s data then.
        let code_field = match l.leaptiering {
            true => heap.field(sfi, l.sfi_function_data),
            false => heap.field(function, l.js_function_code),
        };
        let code = code_field.and_then(|c| Some((c, self.code(heap, c)?)));
        if !word.compiled {
            // Sparkplug frames have the interpreter's shape but a stale
            // offset: no line for them.
            let baseline = code.as_ref().is_some_and(|(_, c)| c.kind == l.code_kind_baseline);
            let position = match (&info.bytecode, known && !baseline) {
                (Some((_, positions)), true) => {
                    bytecode_script_offset(l, positions, i64::from(word.offset) + i64::from(l.bytecode_data) - 1)
                }
                _ => None,
            };
            return vec![line(&info, position)];
        }
        let Some((code, code_info)) = code.filter(|_| !l.leaptiering) else { return vec![line(&info, None)] };
        let pc = code_info.start + u64::from(word.offset);
        if !known || code_info.kind == l.code_kind_builtin || !code_info.contains(pc) {
            return vec![line(&info, None)];
        }
        // Inlined functions are read each time: the deoptimization
        // data's functions move with the garbage collector.
        let Some(scopes) = code_info.position_at_return(pc).and_then(|e| inlined_scopes(heap, code, e, sfi)) else {
            return vec![line(&info, None)];
        };
        self.scope_lines(heap, sfi, &info, scopes)
    }
}

/// Where the object at `tagged` is (none for 0).
fn object_address(tagged: u64) -> Option<u64> {
    (tagged != 0).then(|| crate::v8::heap::untag(tagged)).flatten()
}

/// The line of `info` at script offset `position`.
fn source_line(info: &FunctionInfo, position: Option<u32>) -> SourceLine {
    SourceLine {
        function: if info.name.is_empty() { Arc::from(ANONYMOUS) } else { info.name.clone() },
        file: info.script.clone(),
        line: position.and_then(|p| info.line_column(p)).map_or(0, |(line, _)| line),
        approximate: false,
    }
}

impl V8Namer {
    /// The lines of frame `word` of its process, whose V8 has `layout`.
    /// Its objects are read through the sample's blocks; the heads that
    /// say whether a word is named as before, from `memory` as it is.
    pub fn lines(&mut self, memory: &dyn ProcessMemory, layout: &V8Layout, word: u64) -> Vec<SourceLine> {
        let mut blocks = std::mem::take(&mut self.blocks);
        let lines = match V8Word::decode(word) {
            Some(decoded) => {
                let through_blocks = blocks.over(memory, Instant::now());
                let heap = Heap { memory: &through_blocks, layout };
                match V8Word::decode_pc(word).filter(|_| layout.compiled_by_pc) {
                    Some(pc) => self.name_pc_again(&heap, memory, word, pc),
                    None => self.name_word_again(&heap, memory, word, decoded),
                }
            }
            None => Vec::new(),
        };
        self.blocks = blocks;
        if lines.is_empty() {
            self.stats.unknown += 1;
        } else {
            self.stats.frames += 1;
        }
        lines
    }

    /// What it caches (see [`CACHE_BOUND`]).
    pub fn cached(&self) -> CacheUse {
        CacheUse {
            entries: self.functions.len()
                + self.codes.len()
                + self.code_ranges.len()
                + self.recent.len()
                + self.prefetched.len()
                + self.blocks.len(),
            bytes: self.cached_bytes + self.lines.bytes() + self.blocks.bytes(),
        }
    }

    /// Drops everything it caches.
    pub fn clear(&mut self) {
        self.functions.clear();
        self.codes.clear();
        self.code_ranges.clear();
        self.lines = ScriptLines::default();
        self.recent.clear();
        self.prefetched.clear();
        self.blocks.clear();
        self.cached_bytes = 0;
    }

    /// Its counters.
    pub fn stats(&self) -> NamerStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::UserFrame;

    #[test]
    fn v8_words_round_trip_and_are_v8s_only() {
        let w = V8Word { function: 0x7f12_3456_7899, compiled: true, offset: 0x123 };
        assert_eq!(V8Word::decode(w.encode()), Some(w));
        assert!(V8.owns_frame(w.encode()));
        assert_eq!(V8.frame_address(w.encode()), 0x123);
        let w = V8Word { function: 0x1_0001, compiled: false, offset: 1 << 20 };
        assert_eq!(V8Word::decode(w.encode()), Some(V8Word { offset: FRAME_OFFSET_MAX as u32, ..w }));
        // Not a tagged heap pointer: encoded as none.
        let w = V8Word { function: 0x1_0004, compiled: false, offset: 3 };
        assert_eq!(V8Word::decode(w.encode()).map(|w| w.function), Some(0));
        assert!(!V8.owns_frame(crate::hotspot::InterpretedWord { method: 0x7f00_0000_1000, bci: Some(12) }.encode()));
        assert!(!V8.owns_frame(crate::python::PythonWord { code: 0x7f00_0000_1000, offset: 12 }.encode()));
        assert!(!V8.owns_frame(UserFrame::interpreted_word(4, 0x1000)));
        assert!(!V8.owns_frame(0x7f00_0000_1000));
        assert_eq!(V8.frame_kind(), FrameKind::V8Js);
    }

    /// The reservations after anonymous code, as Node 22 shows its code
    /// range (pages of 256 KiB: a header, guards, 240 KiB of code; the
    /// rest of the 512 MiB inaccessible), are marked for the unwinder;
    /// a file's are not, nor more than a code range's size.
    #[test]
    fn code_range_reservations_are_marked() {
        let m = |start, end, path, reserved_end| ExecutableMapping { start, end, path, reserved_end };
        let maps = [
            m(0x40_0000, 0x80_0000, "/usr/bin/node", 0x90_0000),
            m(0x7f48_e67c_3000, 0x7f48_e67f_f000, "", 0x7f48_e680_0000),
            m(0x7f48_e680_3000, 0x7f48_e683_f000, "", 0x7f49_0000_0000),
            m(0x7f49_1000_0000, 0x7f49_1000_1000, "", 0x7f49_1000_1000),
            m(0x7f4a_0000_0000, 0x7f4a_0000_1000, "", 0x7f4b_0000_1000),
        ];
        assert_eq!(
            code_range_reservations(&maps),
            [
                (0x7f48_e67f_f000, 0x7f48_e680_0000),
                (0x7f48_e683_f000, 0x7f49_0000_0000),
                (0x7f4a_0000_1000, 0x7f4a_0000_1000 + MAX_CODE_RANGE),
            ]
        );
        let file = Arc::new(V8File { layout: Arc::new(super::super::heap::tests::layout()), loops: Vec::new() });
        let memory = crate::memory::fake::FakeMemory::default();
        let Attach::Attached(mut process) = file.attach(1, &memory, 0) else { panic!("attached") };
        let unwinding = process.sync(&memory, &maps).unwrap();
        assert_eq!(unwinding.code, [(0, u64::MAX)]);
        assert_eq!(unwinding.reserved, code_range_reservations(&maps));
    }

    /// A word whose function is gone (unreadable, or no longer a
    /// JSFunction) is unknown, never another function's name.
    #[test]
    fn frames_of_freed_functions_are_unknown() {
        use crate::memory::fake::FakeMemory;
        let layout = Arc::new(super::super::heap::tests::layout());
        let mut b = super::super::heap::tests::Builder::new();
        // An object of another type where the function was.
        let other = b.typed(layout.type_script, 64, &[], &[]);
        let mut namer = V8Namer::new(16);
        for function in [other, 0x5000_0001, 0] {
            let word = V8Word { function, compiled: false, offset: 3 }.encode();
            assert!(namer.lines(&b.mem, &layout, word).is_empty(), "{function:#x}");
        }
        let empty = FakeMemory::default();
        let word = V8Word { function: 0x6000_0001, compiled: true, offset: 3 }.encode();
        assert!(namer.lines(&empty, &layout, word).is_empty());
        assert_eq!(
            namer.stats(),
            NamerStats { frames: 0, unknown: 4, reads: 0, failures_skipped: 0, ..NamerStats::default() }
        );
    }

    /// A process memory counting its reads and its batches
    /// ([`ProcessMemory::read_many`]), whose batches can be made to fail.
    struct Counting<'a> {
        memory: &'a crate::memory::fake::FakeMemory,
        reads: std::cell::Cell<u32>,
        batches: std::cell::Cell<u32>,
        ranges: std::cell::Cell<usize>,
        batches_fail: bool,
    }

    impl<'a> Counting<'a> {
        fn new(memory: &'a crate::memory::fake::FakeMemory) -> Counting<'a> {
            let zero = std::cell::Cell::new(0);
            Counting { memory, reads: zero.clone(), batches: zero, ranges: Default::default(), batches_fail: false }
        }

        /// (reads, batches, ranges in them) since the last call.
        fn take(&self) -> (u32, u32, usize) {
            (self.reads.take(), self.batches.take(), self.ranges.take())
        }
    }

    impl ProcessMemory for Counting<'_> {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.reads.set(self.reads.get() + 1);
            self.memory.read(address, buf)
        }

        fn read_many(&self, reads: &mut [RangeRead<'_>]) {
            self.batches.set(self.batches.get() + 1);
            self.ranges.set(self.ranges.get() + reads.len());
            for r in reads {
                r.done = !self.batches_fail && self.memory.read(r.address, r.buf);
            }
        }
    }

    /// A layout whose `JSFunction` head is 40 bytes (map to code), and a
    /// heap with one `JSFunction` (tagged) for each of `names` and a
    /// spare `SharedFunctionInfo` named "other", all in one script
    /// "app.js".
    fn functions(names: &[&str]) -> (Arc<V8Layout>, super::super::heap::tests::Builder, Vec<u64>, u64) {
        let layout = Arc::new(V8Layout {
            type_js_function_first: 300,
            type_js_function_last: 300,
            type_shared_function_info: 301,
            type_scope_info: 302,
            type_script: 202,
            js_function_shared: 24,
            js_function_code: 32,
            sfi_name_or_scope_info: 16,
            sfi_script_or_debug_info: 24,
            sfi_function_data: 32,
            script_name: 16,
            script_source: 24,
            script_line_ends: 32,
            ..super::super::heap::tests::layout()
        });
        let mut b = super::super::heap::tests::Builder::new();
        let (app, source) = (b.one_byte("app.js"), b.one_byte("a\nb\n"));
        let script = b.typed(202, 48, &[(16, app), (24, source)], &[]);
        let mut sfi_of = |name: &str| {
            let name = b.one_byte(name);
            b.typed(301, 48, &[(16, name), (24, script)], &[])
        };
        let sfis: Vec<u64> = names.iter().map(|n| sfi_of(n)).collect();
        let other = sfi_of("other");
        let functions = sfis.iter().map(|&sfi| b.typed(300, 64, &[(24, sfi)], &[])).collect();
        (layout, b, functions, other)
    }

    /// Points the `JSFunction` at `function` to `sfi` (another function
    /// at its address).
    fn set_shared(b: &mut super::super::heap::tests::Builder, function: u64, sfi: u64) {
        let region = b.mem.regions.iter_mut().find(|(at, _)| *at == function - 1).expect("the function");
        region.1[24..32].copy_from_slice(&sfi.to_le_bytes());
    }

    fn names(lines: Vec<SourceLine>) -> Vec<String> {
        lines.iter().map(|l| l.function.to_string()).collect()
    }

    /// A word named before is named again from one read of its
    /// function's first bytes once its lines are older than the recheck
    /// interval, with no read within it; a different function at that
    /// address (or the same one pointing elsewhere) is named again in
    /// full.
    #[test]
    fn words_named_again_from_one_read_while_their_function_is_unchanged() {
        let (layout, mut b, functions, other) = functions(&["compute"]);
        let word = V8Word { function: functions[0], compiled: false, offset: 3 }.encode();
        let mut namer = V8Namer::new(16);
        let memory = Counting::new(&b.mem);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["compute"]);
        assert!(memory.take().0 > 3, "named in full first");
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["compute"]);
        assert_eq!(memory.take().0, 0, "within the recheck interval: no read");
        namer.recent.trust = Duration::ZERO;
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["compute"]);
        assert_eq!(memory.take().0, 1, "then one read");
        set_shared(&mut b, functions[0], other);
        let memory = Counting::new(&b.mem);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["other"]);
        assert!(memory.take().0 > 1);
    }

    /// `memory`'s regions as one, gaps and its last block zeroed: its
    /// blocks read whole, as a process's heap does.
    fn contiguous(memory: &crate::memory::fake::FakeMemory) -> crate::memory::fake::FakeMemory {
        let start = memory.regions.iter().map(|r| r.0).min().unwrap();
        let end = memory.regions.iter().map(|r| r.0 + r.1.len() as u64).max().unwrap();
        let end = end.next_multiple_of(crate::blocks::BLOCK_BYTES as u64);
        let mut bytes = vec![0u8; (end - start) as usize];
        for (at, region) in &memory.regions {
            let from = (at - start) as usize;
            bytes[from..from + region.len()].copy_from_slice(region);
        }
        let mut one = crate::memory::fake::FakeMemory::default();
        one.add(start, bytes);
        one
    }

    /// A word named in full reads its objects through the sample's
    /// blocks: one read a block, where a memory whose blocks cannot be
    /// read whole costs one a field.
    #[test]
    fn a_word_named_in_full_reads_each_block_once() {
        let (layout, b, functions, _) = functions(&["a"]);
        let word = V8Word { function: functions[0], compiled: false, offset: 3 }.encode();
        let one = contiguous(&b.mem);
        let (by_field, by_block) = (Counting::new(&b.mem), Counting::new(&one));
        assert_eq!(names(V8Namer::new(16).lines(&by_field, &layout, word)), ["a"]);
        let mut namer = V8Namer::new(16);
        assert_eq!(names(namer.lines(&by_block, &layout, word)), ["a"]);
        let (fields, blocks) = (by_field.take().0, by_block.take().0);
        assert!(blocks < fields, "{blocks} reads through blocks, {fields} without");
        assert_eq!(blocks as usize, 1 + namer.blocks.len(), "the fresh head, then each block once");
    }

    /// A function replaced in the process after a sample's blocks were
    /// read: a word of it named from those blocks is kept with the head
    /// they held, not the newer one read to check it, so that its next
    /// check names it again rather than vouch for the old lines.
    #[test]
    fn words_named_from_older_blocks_are_checked_again() {
        let (layout, b, functions, other) = functions(&["a"]);
        let mut mem = contiguous(&b.mem);
        let mut namer = V8Namer::new(16);
        let word = |offset| V8Word { function: functions[0], compiled: false, offset }.encode();
        // The sample's first word reads the function's block.
        assert_eq!(names(namer.lines(&mem, &layout, word(3))), ["a"]);
        let at = functions[0] - 1 + 24 - mem.regions[0].0;
        mem.regions[0].1[at as usize..at as usize + 8].copy_from_slice(&other.to_le_bytes());
        // Another word of the same function, in the same sample: named
        // from the blocks (the lines of the sample's memory, as they
        // were at most a block's lifetime ago).
        let stale = names(namer.lines(&mem, &layout, word(5)));
        namer.recent.trust = Duration::ZERO;
        namer.prefetch(&mem, &layout, &[word(5)]);
        assert_eq!(names(namer.lines(&mem, &layout, word(5))), ["other"], "named {stale:?} from the blocks");
    }

    /// The heads of a sample's words due for a check are read in one
    /// batch before they are named, each word once, and naming them reads
    /// nothing more while their functions are unchanged; a changed one is
    /// named again in full, the others are not.
    #[test]
    fn a_samples_heads_are_read_in_one_batch() {
        let (layout, mut b, functions, other) = functions(&["a", "b", "c"]);
        let words: Vec<u64> =
            functions.iter().map(|&function| V8Word { function, compiled: false, offset: 3 }.encode()).collect();
        let mut namer = V8Namer::new(16);
        let memory = Counting::new(&b.mem);
        let sample = [words[0], words[1], words[2], words[1]];
        let name_all = |namer: &mut V8Namer, memory: &Counting<'_>| {
            namer.prefetch(memory, &layout, &sample);
            words.iter().flat_map(|&w| names(namer.lines(memory, &layout, w))).collect::<Vec<_>>()
        };
        assert_eq!(name_all(&mut namer, &memory), ["a", "b", "c"]);
        let (reads, batches, ranges) = memory.take();
        assert!(reads > 9, "named in full first: {reads}");
        assert_eq!((batches, ranges), (1, 3), "the heads, each once");
        namer.prefetch(&memory, &layout, &sample);
        assert_eq!(memory.take(), (0, 0, 0), "within the recheck interval: nothing due");
        namer.recent.trust = Duration::ZERO;
        assert_eq!(name_all(&mut namer, &memory), ["a", "b", "c"]);
        assert_eq!(memory.take(), (0, 1, 3), "one batch, no read");
        set_shared(&mut b, functions[1], other);
        let memory = Counting::new(&b.mem);
        assert_eq!(name_all(&mut namer, &memory), ["a", "other", "c"]);
        let (reads, batches, ranges) = memory.take();
        assert!(reads > 1, "b's successor named in full: {reads}");
        assert_eq!((batches, ranges), (1, 3));
        // Heads read too long ago are read again at naming.
        namer.prefetch(&memory, &layout, &sample);
        namer.prefetched_at -= RECHECK_AFTER;
        memory.take();
        assert_eq!(names(namer.lines(&memory, &layout, words[0])), ["a"]);
        assert_eq!(memory.take(), (1, 0, 0));
        assert!(namer.prefetched.is_empty(), "the stale heads dropped");
    }

    /// A word holding a pc is named again from its `Code`'s first bytes
    /// (read in the sample's batch) while they are unchanged; another
    /// code at the address (other deoptimization data: another function)
    /// is named again in full.
    #[test]
    fn pc_words_named_again_from_their_codes_head() {
        let (layout, mut b, functions, other) = functions(&["a"]);
        let layout = Arc::new(V8Layout {
            compiled_by_pc: true,
            type_code: 303,
            code_deoptimization_data: 8,
            code_source_positions: 16,
            code_instruction_start: 40,
            code_instructions_inline: false,
            code_flags: 48,
            code_instruction_size: 52,
            code_kind_mask: 0xff,
            code_kind_shift: 0,
            code_kind_builtin: 99,
            deopt_shared_info_index: Some(0),
            sfi_wrapper_shared_info: None,
            ..(*layout).clone()
        });
        assert_eq!(code_head_len(&layout), 60);
        let mut shared = [0u8; 8];
        assert!(b.mem.read(functions[0] - 1 + 24, &mut shared));
        let sfi_a = u64::from_le_bytes(shared);
        let deopt_a = b.typed(201, 24, &[(16, sfi_a)], &[]);
        let deopt_other = b.typed(201, 24, &[(16, other)], &[]);
        let start = 0x7000_0000u64;
        let code = b.typed(303, 64, &[(8, deopt_a), (40, start)], &[(48, 1), (52, 0x100)]);
        let word = V8Word::encode_pc(start + 0x10);
        assert_eq!(V8Word::decode_pc(word), Some(start + 0x10));
        let mut namer = V8Namer::new(16);
        // Where the code is, as a scan of the code space found it.
        namer.code_ranges.insert(start, (start + 0x100, code));
        let memory = Counting::new(&b.mem);
        namer.prefetch(&memory, &layout, &[word]);
        assert_eq!(memory.take(), (0, 0, 0), "never named: no head to read");
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["a"]);
        assert!(memory.take().0 > 5, "named in full first");
        assert_eq!(namer.recent.object(word), Some(code));
        namer.recent.trust = Duration::ZERO;
        namer.prefetch(&memory, &layout, &[word]);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["a"]);
        assert_eq!(memory.take(), (0, 1, 1), "the code's head, in one batch");
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["a"]);
        assert_eq!(memory.take(), (1, 0, 0), "not prefetched: one read");
        // Another code at the address: other deoptimization data.
        let region = b.mem.regions.iter_mut().find(|(at, _)| *at == code - 1).expect("the code");
        region.1[8..16].copy_from_slice(&deopt_other.to_le_bytes());
        let memory = Counting::new(&b.mem);
        namer.prefetch(&memory, &layout, &[word]);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["other"]);
        assert!(memory.take().0 > 3, "named in full");
        // Gone: unnamed, forgotten.
        b.mem.regions.retain(|(at, _)| *at != code - 1);
        let memory = Counting::new(&b.mem);
        assert!(namer.lines(&memory, &layout, word).is_empty());
        assert_eq!(namer.recent.object(word), None);
    }

    /// A head the batch could not read is read as it was before
    /// batches: the word is named in full.
    #[test]
    fn a_failed_batch_names_in_full() {
        let (layout, b, functions, _) = functions(&["a"]);
        let word = V8Word { function: functions[0], compiled: false, offset: 3 }.encode();
        let mut namer = V8Namer::new(16);
        let memory = Counting { batches_fail: true, ..Counting::new(&b.mem) };
        namer.prefetch(&memory, &layout, &[word]);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["a"]);
        let full = memory.take();
        assert!(full.0 > 3 && full.1 == 1, "{full:?}");
        namer.recent.trust = Duration::ZERO;
        namer.prefetch(&memory, &layout, &[word]);
        assert_eq!(names(namer.lines(&memory, &layout, word)), ["a"]);
        let again = memory.take();
        assert!(again.0 > 1 && again.1 == 1, "in full again (its function cached), no head kept: {again:?}");
        assert_eq!(namer.recent.object(word), None);
        // A word of no function: nothing to read.
        let nothing = V8Word { function: 0, compiled: false, offset: 3 }.encode();
        namer.prefetch(&memory, &layout, &[nothing]);
        assert_eq!(memory.take(), (0, 0, 0));
    }

    #[test]
    fn the_bpf_value_follows_the_layout() {
        let l = V8Layout { bytecode_data: 54, ..super::super::heap::tests::layout() };
        let v = process_value(&l);
        assert_eq!((v.fp_marker, v.fp_function), (l.fp_context_or_marker, l.fp_function));
        assert_eq!((v.fp_bytecode_array, v.fp_bytecode_offset), (l.fp_bytecode_array, l.fp_bytecode_offset));
        assert_eq!(v.bytecode_offset_bias, 53);
        assert_eq!(v.marker_entry, l.frame_types.entry);
        assert_eq!(v.code_instruction_start, l.code_instruction_start);
        let inline = V8Layout { code_instruction_start: 128, code_instructions_inline: true, ..l };
        assert_eq!(process_value(&inline).code_instruction_start, 128 | CODE_START_INLINE);
    }
}
