//! HotSpot on the interpreter interface: [`Hotspot`] finds `libjvm.so`,
//! [`HotspotFile::attach`] reads the JVM's layout from each process into
//! a [`HotspotProcess`], which gives the BPF unwinder
//! (`ebpf/runtimes/hotspot/unwinder.bpf.h`) the code cache and the
//! offsets it walks with, and names the frame words it records.

use super::layout::HotspotLayout;
use super::layout::{CodeBounds, NmethodEntries};
use super::naming::HotspotSymbolizer;
use super::remote::read_u32;
use super::scopes::scopes_near;
use super::walk::{BlobKind, CodeCache};
use super::word::{CompiledWord, InterpretedWord};
use super::{attach, detect, Detection, HotspotError, TableSymbols};
use crate::hotspot::map_value::{
    HotspotHeapValue, HotspotProcessValue, HOTSPOT_CODE_OFFSETS, HOTSPOT_ENTRY_OFFSETS, HOTSPOT_FRAME_COMPLETE_16,
    HOTSPOT_HAS_KIND, HOTSPOT_MAX_HEAPS, HOTSPOT_NO_BCI,
};
use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use crate::runtime::{
    Attach, CacheUse, ExecutableMapping, FileDetection, InterpreterFile, NamerStats, ProcessUnwinding, Runtime,
    RuntimeProcess,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Methods cached, all processes together (and each alone).
const MAX_METHODS: usize = 16_384;

/// The HotSpot JVM runtime.
pub struct Hotspot;

impl Runtime for Hotspot {
    fn name(&self) -> &'static str {
        "HotSpot"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::Jvm
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Hotspot
    }

    fn frame_address(&self, word: u64) -> u64 {
        match (InterpretedWord::decode(word), CompiledWord::decode(word)) {
            (Some(w), _) => w.bci.map_or(HOTSPOT_NO_BCI, u64::from),
            (_, Some(w)) => w.pc_offset,
            _ => 0,
        }
    }

    fn detect_file(&self, elf: &ElfFile, path: &str) -> FileDetection {
        match detect(elf, path) {
            Detection::NotHotspot => FileDetection::NotFound,
            Detection::Hotspot(symbols) => {
                FileDetection::Found(Arc::new(HotspotFile { symbols, unreadable: Mutex::default() }))
            }
            Detection::Unsupported(reason) => FileDetection::Unsupported { version: None, reason },
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CacheUse::entries(MAX_METHODS)
    }
}

/// A `libjvm.so` with the vmStructs tables.
#[derive(Debug)]
pub struct HotspotFile {
    symbols: TableSymbols,
    /// Processes whose tables could not be read, remembered so that they
    /// are not read again (a full read of the tables) at each change of
    /// their mappings.
    unreadable: Mutex<Unreadable>,
}

/// The processes (pid, `libjvm.so`'s bias) whose tables could not be
/// read: when they may be tried again, and how many tries failed in a
/// row. A genuine JVM gives that only while ld.so still maps the file (a
/// moment); a crafted one whose tables never end (or lead nowhere) would
/// otherwise be read whole at each new mapping (a JIT maps often), only
/// its attach budget stopping it.
#[derive(Debug, Default)]
struct Unreadable(HashMap<(u32, u64), (Instant, u32)>);

impl Unreadable {
    /// Most processes remembered (expired ones go first when full).
    const MAX: usize = 4096;
    /// The wait after the first failure, doubled with each one in a row
    /// up to [`Unreadable::LONGEST`]. Shorter than the process manager's
    /// first retry of a process not ready (1 s), so that one is not
    /// refused.
    const FIRST: Duration = Duration::from_millis(500);
    const LONGEST: Duration = Duration::from_secs(30);

    /// Whether `key` may be read now.
    fn may_try(&self, key: (u32, u64), now: Instant) -> bool {
        self.0.get(&key).is_none_or(|(until, _)| now >= *until)
    }

    /// `key`'s tables could not be read at `now`.
    fn failed(&mut self, key: (u32, u64), now: Instant) {
        if self.0.len() >= Self::MAX && !self.0.contains_key(&key) {
            self.0.retain(|_, (until, _)| *until > now);
            if self.0.len() >= Self::MAX {
                self.0.clear();
            }
        }
        let failures = self.0.get(&key).map_or(0, |(_, n)| *n).saturating_add(1);
        let wait = Self::FIRST.saturating_mul(1 << (failures - 1).min(16)).min(Self::LONGEST);
        self.0.insert(key, (now + wait, failures));
    }

    /// `key` was read (or is not there to read): forgotten.
    fn forget(&mut self, key: (u32, u64)) {
        self.0.remove(&key);
    }
}

/// One JVM process: its layout, its code cache as last read (for naming
/// compiled frames), and the methods read from it.
pub struct HotspotProcess {
    /// The layout read from its tables.
    pub layout: Arc<HotspotLayout>,
    /// `libjvm.so`'s load bias.
    pub bias: u64,
    code_cache: Option<Arc<CodeCache>>,
    methods: HotspotSymbolizer,
    /// Compiled frames whose blob's mark changed since the sample (freed
    /// and replaced): unknown.
    stale_blobs: u64,
}

impl HotspotProcess {
    /// A process with `layout`, `libjvm.so` mapped with `bias`.
    pub fn new(layout: Arc<HotspotLayout>, bias: u64) -> HotspotProcess {
        HotspotProcess { layout, bias, code_cache: None, methods: HotspotSymbolizer::new(MAX_METHODS), stale_blobs: 0 }
    }

    /// The code cache as last read, or read now.
    fn code_cache(&mut self, memory: &dyn ProcessMemory) -> Option<Arc<CodeCache>> {
        if self.code_cache.is_none() {
            self.code_cache = CodeCache::read(memory, &self.layout, self.bias).ok().map(Arc::new);
        }
        self.code_cache.clone()
    }
}

impl InterpreterFile for HotspotFile {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Hotspot
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        // Its code is in the code cache, anonymous memory: see
        // its process object's `sync`.
        &[]
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        None
    }

    fn attach(self: Arc<Self>, pid: u32, memory: &dyn ProcessMemory, bias: u64) -> Attach {
        let key = (pid, bias);
        let now = Instant::now();
        if !self.unreadable.lock().unwrap_or_else(|p| p.into_inner()).may_try(key, now) {
            return Attach::NotYet;
        }
        let result = attach(memory, &self.symbols, bias);
        let mut unreadable = self.unreadable.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Err(HotspotError::Unreadable(_)) => unreadable.failed(key, now),
            _ => unreadable.forget(key),
        }
        drop(unreadable);
        match result {
            Ok(layout) => Attach::Attached(Box::new(HotspotProcess::new(Arc::new(layout), bias))),
            // ld.so may still be mapping the file, or the VM starting.
            Err(HotspotError::NotReady | HotspotError::Unreadable(_)) => Attach::NotYet,
            Err(HotspotError::Unsupported(why)) => Attach::Failed(Refusal::Layout(why)),
        }
    }
}

/// The BPF unwinder's view of one JVM (`struct hotspot_process`); its
/// code cache when it could be read.
fn process_value(l: &HotspotLayout, bias: u64, cache: Option<&CodeCache>) -> HotspotProcessValue {
    let mut heaps = [HotspotHeapValue::default(); HOTSPOT_MAX_HEAPS];
    let empty = CodeCache { low: 0, high: 0, heaps: Vec::new() };
    let cache = cache.unwrap_or(&empty);
    for (slot, heap) in heaps.iter_mut().zip(&cache.heaps) {
        *slot = HotspotHeapValue {
            low: heap.low,
            high: heap.high,
            segmap: heap.segmap,
            log2_segment_size: heap.log2_segment_size,
        };
    }
    HotspotProcessValue {
        code_low: cache.low,
        code_high: cache.high,
        interpreter_code: bias.wrapping_add(l.interpreter_code_vaddr),
        call_stub_return: bias.wrapping_add(l.call_stub_return_address_vaddr),
        code_low_bound: bias.wrapping_add(l.code_cache_low_bound_vaddr),
        code_high_bound: bias.wrapping_add(l.code_cache_high_bound_vaddr),
        code_heaps: bias.wrapping_add(l.code_cache_heaps_vaddr),
        growable_array_len: l.growable_array_len,
        growable_array_data: l.growable_array_data,
        code_heap_memory: l.code_heap_memory,
        code_heap_segmap: l.code_heap_segmap,
        code_heap_log2_segment_size: l.code_heap_log2_segment_size,
        virtual_space_low: l.virtual_space_low_boundary,
        virtual_space_high: l.virtual_space_high_boundary,
        heaps,
        heap_count: cache.heaps.len().min(HOTSPOT_MAX_HEAPS) as u32,
        heap_block_size: l.heap_block_size,
        heap_block_used: l.heap_block_used,
        stub_queue_buffer: l.stub_queue_stub_buffer,
        stub_queue_limit: l.stub_queue_buffer_limit,
        blob_frame_size: l.code_blob_frame_size,
        method_const_method: l.method_const_method,
        const_method_size: l.const_method_sizeof,
        interp_method_slot: l.interp_method_slot,
        interp_bcp_slot: l.interp_bcp_slot,
        interp_sender_sp_slot: l.interp_sender_sp_slot,
        nmethod_compile_id: l.nmethod_compile_id,
        nmethod_orig_pc_offset: l.nmethod_orig_pc_offset,
        nmethod_deopt_handler: match l.nmethod_entries {
            NmethodEntries::Pointers { deopt_handler, .. } | NmethodEntries::Offsets { deopt_handler, .. } => {
                deopt_handler
            }
        },
        deopt_handler_is_offset: matches!(l.nmethod_entries, NmethodEntries::Offsets { .. }),
        blob_code_begin: match l.code_blob_code {
            CodeBounds::Pointers { begin, .. } => begin,
            CodeBounds::Offsets { code, .. } => code,
        },
        blob_frame_complete: l.code_blob_frame_complete,
        nmethod_verified_entry: match l.nmethod_entries {
            NmethodEntries::Pointers { verified_entry, .. } | NmethodEntries::Offsets { verified_entry, .. } => {
                verified_entry
            }
        },
        blob_kind: l.code_blob_kind.unwrap_or(0),
        blob_kind_nmethod: l.code_blob_kind_nmethod.unwrap_or(0),
        code_flags: code_flags(l),
    }
}

/// How the BPF unwinder reads a blob's code start, frame completion and
/// verified entry (`struct hotspot_process`'s `code_flags`).
fn code_flags(l: &HotspotLayout) -> u32 {
    let mut flags = 0;
    if matches!(l.code_blob_code, CodeBounds::Offsets { .. }) {
        flags |= HOTSPOT_CODE_OFFSETS;
    }
    if matches!(l.nmethod_entries, NmethodEntries::Offsets { .. }) {
        flags |= HOTSPOT_ENTRY_OFFSETS;
    }
    if l.code_blob_frame_complete_size == 2 {
        flags |= HOTSPOT_FRAME_COMPLETE_16;
    }
    if l.code_blob_kind.is_some() && l.code_blob_kind_nmethod.is_some() {
        flags |= HOTSPOT_HAS_KIND;
    }
    flags
}

/// Names HotSpot frame words: interpreted frames by their `Method*` and
/// bci, compiled ones by their blob and pc offset (with the methods
/// inlined there, innermost first), stubs by their blob's name.
impl RuntimeProcess for HotspotProcess {
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let lines = self.name_word(memory, word, stats);
        if lines.is_empty() {
            stats.unknown += 1;
        } else {
            stats.frames += 1;
        }
        lines
    }

    fn sync(&mut self, memory: &dyn ProcessMemory, _maps: &[ExecutableMapping<'_>]) -> Option<ProcessUnwinding> {
        // The heaps are set while the VM starts: until they are, every
        // anonymous code of the process goes to the unwinder, which reads
        // them itself once they are there (the process's mappings need
        // not change again for that).
        let cache = CodeCache::read(memory, &self.layout, self.bias).ok().map(Arc::new);
        if cache.is_some() {
            self.code_cache = cache.clone();
        }
        let value = process_value(&self.layout, self.bias, cache.as_deref()).map_value();
        Some(match &cache {
            // `[_low_bound, _high_bound)` is the code cache's reservation.
            Some(cache) => {
                let code = vec![(cache.low, cache.high)];
                ProcessUnwinding::new(InterpreterUnwinder::Hotspot, code.clone(), value).reserving(code)
            }
            None => ProcessUnwinding::new(InterpreterUnwinder::Hotspot, vec![(0, u64::MAX)], value),
        })
    }

    fn cached(&self) -> CacheUse {
        CacheUse { entries: self.methods.len(), bytes: 0 }
    }

    fn clear(&mut self) {
        self.methods.clear();
    }
}

impl HotspotProcess {
    fn method_line(
        &mut self,
        memory: &dyn ProcessMemory,
        method: u64,
        bci: Option<u32>,
        stats: &mut NamerStats,
    ) -> Option<SourceLine> {
        let before = self.methods.stats().reads;
        let info = self.methods.method(memory, &self.layout, method)?;
        stats.reads += self.methods.stats().reads - before;
        let line = bci.and_then(|b| info.line(b)).unwrap_or(0);
        Some(SourceLine {
            function: info.qualified_name().into(),
            file: info.source_file.clone(),
            line,
            approximate: false,
        })
    }

    fn name_word(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        if let Some(frame) = InterpretedWord::decode(word) {
            if frame.method == 0 {
                return Vec::new();
            }
            return self.method_line(memory, frame.method, frame.bci, stats).into_iter().collect();
        }
        let Some(frame) = CompiledWord::decode(word) else { return Vec::new() };
        let Some(cache) = self.code_cache(memory) else { return Vec::new() };
        let layout = self.layout.clone();
        let l = &*layout;
        // The blob may have been freed (and the memory reused) since the
        // sample: the pc must still be in a blob's code, and that blob
        // must carry the mark the unwinder read (its compile id), else
        // another method took its place.
        let pc = cache.low.wrapping_add(frame.pc_offset);
        let lookup = if frame.exact { pc } else { pc - 1 };
        let Some(address) = cache.find_blob(memory, l, lookup) else { return Vec::new() };
        let mark = read_u32(memory, address.wrapping_add(u64::from(l.nmethod_compile_id)));
        if !mark.is_some_and(|m| frame.same_mark(m)) {
            self.stale_blobs += 1;
            return Vec::new();
        }
        let Some(blob) = cache.read_blob(memory, l, address) else { return Vec::new() };
        if !(blob.code_begin..blob.code_end).contains(&lookup) {
            return Vec::new();
        }
        match blob.kind {
            BlobKind::Nmethod => {
                let Ok((scopes, exact)) = scopes_near(memory, l, &blob, pc) else { return Vec::new() };
                let mut lines = Vec::with_capacity(scopes.len());
                for scope in scopes {
                    match self.method_line(memory, scope.method, scope.bci, stats) {
                        Some(line) => lines.push(SourceLine { approximate: !exact, ..line }),
                        None => return Vec::new(),
                    }
                }
                lines
            }
            BlobKind::Interpreter | BlobKind::Other => {
                vec![SourceLine {
                    function: format!("[{}]", blob.name).into(),
                    file: None,
                    line: 0,
                    approximate: false,
                }]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_tables_are_tried_again_later_and_later() {
        let mut u = Unreadable::default();
        let t0 = Instant::now();
        let key = (7, 0x1000);
        assert!(u.may_try(key, t0));
        u.failed(key, t0);
        assert!(!u.may_try(key, t0 + Duration::from_millis(499)));
        assert!(u.may_try(key, t0 + Duration::from_millis(500)));
        assert!(u.may_try((8, 0x1000), t0) && u.may_try((7, 0x2000), t0), "per process and bias");
        // Doubled with each failure in a row, up to 30 s.
        let mut at = t0;
        for wait_ms in [1000, 2000, 4000, 8000, 16000, 30000, 30000] {
            at += Duration::from_secs(60);
            u.failed(key, at);
            assert!(!u.may_try(key, at + Duration::from_millis(wait_ms - 1)), "{wait_ms}");
            assert!(u.may_try(key, at + Duration::from_millis(wait_ms)), "{wait_ms}");
        }
        u.forget(key);
        assert!(u.may_try(key, at));
        // Bounded: when full, the expired go first, then all.
        for pid in 0..Unreadable::MAX as u32 {
            u.failed((pid, 0), t0);
        }
        assert_eq!(u.0.len(), Unreadable::MAX);
        u.failed((1 << 30, 0), t0 + Duration::from_secs(1));
        assert_eq!(u.0.len(), 1);
        for pid in 1..Unreadable::MAX as u32 {
            u.failed((pid, 0), t0);
        }
        assert_eq!(u.0.len(), Unreadable::MAX);
        u.failed((1 << 31, 0), t0);
        assert_eq!(u.0.len(), 1, "none expired: all forgotten");
    }

    /// Counts the reads of another memory.
    struct Counted<'a>(&'a dyn ProcessMemory, std::cell::Cell<usize>);

    impl ProcessMemory for Counted<'_> {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.1.set(self.1.get() + 1);
            self.0.read(address, buf)
        }
    }

    #[test]
    fn a_process_whose_tables_cannot_be_read_is_not_read_again_at_once() {
        // One table read (the first): its address leads nowhere.
        let fields = ["TypeName", "FieldName", "IsStatic", "Offset", "Address"];
        let table = super::super::TableSymbol {
            array: 0x100,
            stride: 0x108,
            fields: fields.iter().enumerate().map(|(i, f)| (*f, 0x110 + 8 * i as u64)).collect(),
        };
        let symbols = TableSymbols {
            structs: table.clone(),
            types: table.clone(),
            int_constants: table.clone(),
            long_constants: table,
        };
        let file = Arc::new(HotspotFile { symbols, unreadable: Mutex::default() });
        let mut m = crate::memory::fake::FakeMemory::default();
        m.add(0x100, [0x7000_0000u64, 16, 0, 0, 0, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect());
        let memory = Counted(&m, Default::default());
        assert!(matches!(file.clone().attach(5, &memory, 0), Attach::NotYet));
        let first = memory.1.get();
        assert!(first > 0);
        assert!(matches!(file.clone().attach(5, &memory, 0), Attach::NotYet));
        assert_eq!(memory.1.get(), first, "not read again before its wait");
        // Another process of the same build is read.
        assert!(matches!(file.attach(6, &memory, 0), Attach::NotYet));
        assert_eq!(memory.1.get(), 2 * first);
    }

    #[test]
    fn compiled_words_carry_the_pc_and_the_blobs_mark() {
        let frame = CompiledWord { pc_offset: 0x7fff_fff0, exact: true, mark: 0x0abc_def1 };
        let word = frame.encode();
        assert_eq!(CompiledWord::decode(word), Some(frame));
        // The layout of ebpf/runtimes/hotspot/types.h: mark bits 0-15 at 44, 16-27 at 32,
        // the exact bit at 31, the pc's offset below.
        assert_eq!((word >> 44) & 0xffff, 0xdef1);
        assert_eq!((word >> 32) & 0xfff, 0xabc);
        assert_eq!(word & (1 << 31), 1 << 31);
        assert_eq!(word & 0x7fff_ffff, 0x7fff_fff0);
        assert!(Hotspot.owns_frame(word));
        assert_eq!(Hotspot.frame_address(word), 0x7fff_fff0);
        // Compile ids above 28 bits are compared on their low bits.
        let frame = CompiledWord { pc_offset: 0x40, exact: false, mark: 0x1234_5678 };
        let back = CompiledWord::decode(frame.encode()).unwrap();
        assert_eq!(back.mark, 0x0234_5678);
        assert!(back.same_mark(0x1234_5678) && back.same_mark(0x0234_5678) && !back.same_mark(0x0234_5679));
        // A pc the unwinder could not encode; an interpreted word.
        assert_eq!(CompiledWord::decode(CompiledWord { pc_offset: 0, exact: false, mark: 1 }.encode()), None);
        assert_eq!(CompiledWord::decode(InterpretedWord { method: 0x7f00_0000_1000, bci: Some(3) }.encode()), None);
    }

    #[test]
    fn hotspot_words_are_its_own() {
        let w = InterpretedWord { method: 0x7f00_0000_1000, bci: Some(12) }.encode();
        assert!(Hotspot.owns_frame(w));
        assert_eq!(Hotspot.frame_address(w), 12);
        assert!(!Hotspot.owns_frame(crate::python::PythonWord { code: 0x7f00_0000_1000, offset: 12 }.encode()));
        assert!(!Hotspot.owns_frame(0x7f00_0000_1000));
        assert_eq!(Hotspot.frame_kind(), FrameKind::Jvm);
    }

    #[test]
    fn the_bpf_value_follows_the_layout_and_the_code_cache() {
        let l = super::super::layout::jdk17_fixture();
        let heap = |low: u64| super::super::walk::CodeHeapInfo {
            low,
            high: low + 0x1000,
            segmap: low + 0x10_0000,
            log2_segment_size: 7,
        };
        let cache =
            CodeCache { low: 0x10_0000, high: 0x90_0000, heaps: (0..6).map(|i| heap(0x10_0000 * (i + 1))).collect() };
        let v = process_value(&l, 0x7000_0000, Some(&cache));
        assert_eq!((v.code_low, v.code_high), (0x10_0000, 0x90_0000));
        assert_eq!(v.heap_count as usize, HOTSPOT_MAX_HEAPS, "more heaps than the BPF side holds are dropped");
        assert_eq!(v.heaps[1].low, 0x20_0000);
        assert_eq!(v.call_stub_return, 0x7000_0000 + l.call_stub_return_address_vaddr);
        assert_eq!(v.interpreter_code, 0x7000_0000 + l.interpreter_code_vaddr);
        assert_eq!((v.interp_method_slot, v.interp_bcp_slot, v.interp_sender_sp_slot), (-3, -8, -1));
        assert_eq!(v.const_method_size, l.const_method_sizeof);
        assert_eq!(v.code_heaps, 0x7000_0000 + l.code_cache_heaps_vaddr);
        // Not read yet: the BPF side reads the code cache itself.
        let v = process_value(&l, 0x7000_0000, None);
        assert_eq!((v.code_low, v.heap_count), (0, 0));
        assert_eq!(v.code_low_bound, 0x7000_0000 + l.code_cache_low_bound_vaddr);
    }

    /// Frames that cannot be named are unknown, never another method's
    /// name: a compiled frame whose blob was freed since the sample (its
    /// segment map says free), or freed and replaced at the same place by
    /// another (its mark differs), a word without a pointer, a process
    /// not attached.
    #[test]
    fn frames_of_freed_code_are_unknown() {
        use super::super::remote::fake::FakeMemory;
        use super::super::walk::CodeHeapInfo;
        let l = super::super::layout::jdk17_fixture();
        let heap = CodeHeapInfo { low: 0x10_0000, high: 0x10_1000, segmap: 0x20_0000, log2_segment_size: 7 };
        let mut memory = FakeMemory::default();
        memory.add(heap.segmap, vec![0xff; 32]); // all free
        let cache = CodeCache { low: heap.low, high: heap.high, heaps: vec![heap] };
        let mut process = HotspotProcess::new(Arc::new(l.clone()), 0);
        process.code_cache = Some(Arc::new(cache));
        let mut stats = NamerStats::default();
        let blob = heap.low + u64::from(l.heap_block_size);
        let compiled = |mark| CompiledWord { pc_offset: blob + 0x40 - heap.low, exact: false, mark }.encode();
        for word in [
            compiled(7),
            InterpretedWord { method: 0, bci: Some(3) }.encode(),
            InterpretedWord { method: 0x1000, bci: Some(3) }.encode(),
        ] {
            assert!(process.lines(&memory, word, &mut stats).is_empty());
        }
        assert_eq!(stats, NamerStats { frames: 0, unknown: 3, reads: 0, failures_skipped: 0, ..NamerStats::default() });
        assert_eq!(process.stale_blobs, 0);
        assert_eq!(process.cached(), CacheUse::default(), "no method read");

        // A blob in use at the same place, compile id 8: the frame sampled
        // in the blob of compile id 7 is unknown, because of its mark.
        let mut memory = FakeMemory::default();
        memory.add(heap.segmap, vec![0, 1, 2, 3]);
        let mut block = vec![0u8; 0x200];
        block[l.heap_block_used as usize] = 1;
        let id = (l.heap_block_size + l.nmethod_compile_id) as usize;
        block[id..id + 4].copy_from_slice(&8u32.to_le_bytes());
        memory.add(heap.low, block);
        assert!(process.lines(&memory, compiled(7), &mut stats).is_empty());
        assert_eq!(process.stale_blobs, 1);
        // Its own mark passes that check (the blob's header is not a
        // whole nmethod here: unknown still, but not stale).
        assert!(process.lines(&memory, compiled(8), &mut stats).is_empty());
        assert_eq!(process.stale_blobs, 1);
    }
}
