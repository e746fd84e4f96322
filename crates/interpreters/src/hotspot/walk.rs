//! Finding Java threads, code in the code cache, and a thread's Java
//! frames, from user space: what the BPF unwinder will do per sample,
//! done here to prove a [`HotspotLayout`] against live JVMs (tests,
//! diagnostics).
//!
//! Facts (the JDK's `threadSMR.hpp`, `javaFrameAnchor.hpp`, `heap.hpp`,
//! `codeBlob.hpp`, `frame_x86.hpp`/`.cpp`):
//! - `ThreadsSMRSupport::_java_thread_list` points at a `ThreadsList`
//!   (`_length`, `_threads`: an array of `JavaThread*`); a thread's kernel
//!   tid is `_osthread->_thread_id`.
//! - A thread that left Java code (into the VM or native code) records its
//!   last Java frame in `_anchor`: sp, fp, and pc (0 means "the word below
//!   sp", the return address of the call that left).
//! - The code cache is one or more `CodeHeap`s; each splits its memory in
//!   segments of `2^_log2_segment_size` bytes and keeps one byte per
//!   segment in `_segmap`: 0xff free, 0 a block's first segment, else how
//!   many segments to step back towards it. A block starts with a
//!   `HeapBlock` header (`_used`), the `CodeBlob` follows.
//! - An interpreted frame is fp-based (saved fp at fp, return address at
//!   fp+8, the caller's sp at fp+16, its unextended sp in the sender-sp
//!   slot); a compiled frame is `_frame_size` words above its unextended
//!   sp, the return address in the last word and the saved fp below it.

use super::layout::{CodeBounds, HotspotLayout, NmethodEntries};
use super::remote::{read_bytes, read_cstr, read_u32, read_u64, read_u8, u32_at, u64_at};
use crate::memory::ProcessMemory;

/// Most Java threads listed.
pub const MAX_THREADS: u32 = 65_536;
/// Most code heaps read (HotSpot has 1 or 3).
const MAX_HEAPS: u32 = 16;
/// Most segmap steps back to a block's start (each step moves at least one
/// segment; a block is at most a few MiB of 64- or 128-byte segments).
const MAX_SEGMAP_STEPS: u32 = 1 << 16;
/// Longest blob name read.
const MAX_BLOB_NAME: usize = 256;

/// A Java thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JavaThreadInfo {
    /// The `JavaThread*`.
    pub address: u64,
    /// Its kernel thread id.
    pub tid: u32,
    /// `_thread_state`.
    pub state: u32,
    /// The anchor: last Java sp (0: not in the VM or native code).
    pub last_java_sp: u64,
    /// Last Java fp.
    pub last_java_fp: u64,
    /// Last Java pc (0: the word below sp).
    pub last_java_pc: u64,
}

/// The Java threads of a JVM whose `libjvm.so` has load bias `bias`.
pub fn java_threads(memory: &dyn ProcessMemory, l: &HotspotLayout, bias: u64) -> Result<Vec<JavaThreadInfo>, String> {
    let at = |base: u64, off: u32| base.wrapping_add(u64::from(off));
    if l.threads_list_vaddr == 0 {
        return Err("this JVM's tables have no threads list".into());
    }
    let list = read_u64(memory, bias.wrapping_add(l.threads_list_vaddr)).ok_or("cannot read the threads list")?;
    if list == 0 {
        return Ok(Vec::new());
    }
    let length = read_u32(memory, at(list, l.threads_list_length)).ok_or("cannot read the threads list length")?;
    if length > MAX_THREADS {
        return Err(format!("{length} threads"));
    }
    let array = read_u64(memory, at(list, l.threads_list_threads)).ok_or("cannot read the threads array")?;
    let raw = read_bytes(memory, array, 8 * length as usize).ok_or("cannot read the threads array")?;
    let mut threads = Vec::with_capacity(length as usize);
    for chunk in raw.chunks_exact(8) {
        let thread = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        let word = |off: u32| read_u64(memory, at(thread, off));
        let anchor = at(thread, l.java_thread_anchor);
        let (Some(os_thread), Some(state)) =
            (word(l.thread_osthread), read_u32(memory, at(thread, l.java_thread_state)))
        else {
            return Err(format!("cannot read JavaThread {thread:#x}"));
        };
        // A thread starting or exiting may have no OSThread yet.
        let tid = if os_thread == 0 { 0 } else { read_u32(memory, at(os_thread, l.os_thread_thread_id)).unwrap_or(0) };
        threads.push(JavaThreadInfo {
            address: thread,
            tid,
            state,
            last_java_sp: read_u64(memory, at(anchor, l.anchor_last_java_sp)).unwrap_or(0),
            last_java_fp: read_u64(memory, at(anchor, l.anchor_last_java_fp)).unwrap_or(0),
            last_java_pc: read_u64(memory, at(anchor, l.anchor_last_java_pc)).unwrap_or(0),
        });
    }
    Ok(threads)
}

/// One code heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeHeapInfo {
    /// Its memory's lowest address.
    pub low: u64,
    /// One past its highest.
    pub high: u64,
    /// Its segment map's address.
    pub segmap: u64,
    /// log2 of its segment size.
    pub log2_segment_size: u32,
}

/// The code cache of one JVM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeCache {
    /// `CodeCache::_low_bound`.
    pub low: u64,
    /// `CodeCache::_high_bound`.
    pub high: u64,
    /// Its heaps.
    pub heaps: Vec<CodeHeapInfo>,
}

/// What a blob is, for unwinding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobKind {
    /// The template interpreter's code.
    Interpreter,
    /// A compiled Java method (or a native method's wrapper).
    Nmethod,
    /// Anything else: stubs, adapters, runtime code.
    Other,
}

/// A code blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeBlobInfo {
    /// Its address.
    pub address: u64,
    /// `_name`.
    pub name: String,
    /// What it is.
    pub kind: BlobKind,
    /// Bytes.
    pub size: u32,
    /// Frame size in words (compiled code and stubs).
    pub frame_size: u32,
    /// The code's bounds.
    pub code_begin: u64,
    /// One past its end.
    pub code_end: u64,
    /// For an nmethod, its `Method*`.
    pub method: Option<u64>,
    /// For an nmethod, its deoptimisation handler: a frame whose return
    /// address was patched to it keeps its real pc at `_orig_pc_offset`
    /// bytes above its sp.
    pub deopt_handler: Option<u64>,
    /// For an nmethod, `_orig_pc_offset`.
    pub orig_pc_offset: Option<u32>,
}

impl CodeCache {
    /// Reads the heaps of a JVM whose `libjvm.so` has load bias `bias`.
    pub fn read(memory: &dyn ProcessMemory, l: &HotspotLayout, bias: u64) -> Result<CodeCache, String> {
        let at = |base: u64, off: u32| base.wrapping_add(u64::from(off));
        let word = |a: u64, what: &str| read_u64(memory, a).ok_or_else(|| format!("cannot read {what}"));
        let low = word(bias.wrapping_add(l.code_cache_low_bound_vaddr), "CodeCache::_low_bound")?;
        let high = word(bias.wrapping_add(l.code_cache_high_bound_vaddr), "CodeCache::_high_bound")?;
        let array = word(bias.wrapping_add(l.code_cache_heaps_vaddr), "CodeCache::_heaps")?;
        let len = read_u32(memory, at(array, l.growable_array_len)).ok_or("cannot read the heaps' count")?;
        if len == 0 || len > MAX_HEAPS {
            return Err(format!("{len} code heaps"));
        }
        let data = word(at(array, l.growable_array_data), "the heaps array")?;
        let mut heaps = Vec::new();
        for i in 0..u64::from(len) {
            let heap = word(data.wrapping_add(8 * i), "a CodeHeap*")?;
            let memory_space = at(heap, l.code_heap_memory);
            let segmap_space = at(heap, l.code_heap_segmap);
            let heap_low = word(at(memory_space, l.virtual_space_low_boundary), "a heap's low boundary")?;
            let heap_high = word(at(memory_space, l.virtual_space_high_boundary), "a heap's high boundary")?;
            let segmap = word(at(segmap_space, l.virtual_space_low_boundary), "a heap's segment map")?;
            let log2 = read_u32(memory, at(heap, l.code_heap_log2_segment_size)).ok_or("cannot read a segment size")?;
            if !(4..=20).contains(&log2) || heap_low >= heap_high || heap_low < low || heap_high > high {
                return Err(format!(
                    "code heap {heap_low:#x}-{heap_high:#x} (segments 2^{log2}) outside {low:#x}-{high:#x}"
                ));
            }
            heaps.push(CodeHeapInfo { low: heap_low, high: heap_high, segmap, log2_segment_size: log2 });
        }
        Ok(CodeCache { low, high, heaps })
    }

    /// Whether `pc` lies in the code cache.
    pub fn contains(&self, pc: u64) -> bool {
        (self.low..self.high).contains(&pc)
    }

    /// The address of the blob holding `pc`, found through its heap's
    /// segment map; `None` outside the heaps, in free space, or when the
    /// map is inconsistent.
    pub fn find_blob(&self, memory: &dyn ProcessMemory, l: &HotspotLayout, pc: u64) -> Option<u64> {
        let heap = self.heaps.iter().find(|h| (h.low..h.high).contains(&pc))?;
        let mut segment = (pc - heap.low) >> heap.log2_segment_size;
        for _ in 0..MAX_SEGMAP_STEPS {
            match read_u8(memory, heap.segmap.wrapping_add(segment))? {
                0xff => return None,
                0 => {
                    let block = heap.low + (segment << heap.log2_segment_size);
                    let used = read_u8(memory, block.wrapping_add(u64::from(l.heap_block_used)))?;
                    return (used != 0).then(|| block + u64::from(l.heap_block_size));
                }
                step => segment = segment.checked_sub(u64::from(step))?,
            }
        }
        None
    }

    /// Reads the blob at `blob`.
    pub fn read_blob(&self, memory: &dyn ProcessMemory, l: &HotspotLayout, blob: u64) -> Option<CodeBlobInfo> {
        let header = read_bytes(memory, blob, l.code_blob_sizeof.max(l.nmethod_sizeof) as usize)
            .or_else(|| read_bytes(memory, blob, l.code_blob_sizeof as usize))?;
        let u32_field = |off: u32| u32_at(&header, off as usize);
        let name = read_cstr(memory, u64_at(&header, l.code_blob_name as usize)?, MAX_BLOB_NAME)?;
        let size = u32_field(l.code_blob_size)?;
        let frame_size = u32_field(l.code_blob_frame_size)?;
        let (code_begin, code_end) = match l.code_blob_code {
            CodeBounds::Pointers { begin, end } => (u64_at(&header, begin as usize)?, u64_at(&header, end as usize)?),
            CodeBounds::Offsets { code, data } => {
                (blob.wrapping_add(u64::from(u32_field(code)?)), blob.wrapping_add(u64::from(u32_field(data)?)))
            }
        };
        let is_nmethod = match (l.code_blob_kind, l.code_blob_kind_nmethod) {
            (Some(off), Some(nmethod)) => header.get(off as usize).map(|&k| u32::from(k)) == Some(nmethod),
            _ => name == "nmethod" || name == "native nmethod",
        };
        let kind = if is_nmethod {
            BlobKind::Nmethod
        } else if name == "Interpreter" {
            BlobKind::Interpreter
        } else {
            BlobKind::Other
        };
        let (method, deopt_handler, orig_pc_offset) = match kind {
            BlobKind::Nmethod => {
                let deopt = match l.nmethod_entries {
                    NmethodEntries::Pointers { deopt_handler, .. } => u64_at(&header, deopt_handler as usize)?,
                    NmethodEntries::Offsets { deopt_handler, .. } => {
                        blob.wrapping_add(u64::from(u32_field(deopt_handler)?))
                    }
                };
                (
                    Some(u64_at(&header, l.nmethod_method as usize)?),
                    Some(deopt),
                    Some(u32_field(l.nmethod_orig_pc_offset)?),
                )
            }
            _ => (None, None, None),
        };
        if !(blob <= code_begin && code_begin <= code_end && code_end <= blob.saturating_add(u64::from(size))) {
            return None;
        }
        Some(CodeBlobInfo {
            address: blob,
            name,
            kind,
            size,
            frame_size,
            code_begin,
            code_end,
            method,
            deopt_handler,
            orig_pc_offset,
        })
    }
}

/// One Java frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JavaFrame {
    /// An interpreted frame: its method and bytecode index (none for a
    /// native method).
    Interpreted {
        /// `Method*`.
        method: u64,
        /// Bytecode index.
        bci: Option<u32>,
    },
    /// A compiled frame (the outermost method of its inlining chain).
    Compiled {
        /// The nmethod.
        nmethod: u64,
        /// Its `Method*`.
        method: u64,
        /// The pc's offset in the nmethod's code.
        pc_offset: u64,
    },
    /// A stub or runtime frame, by blob name.
    Stub(String),
    /// Native code called the Java frames above (JNI, `JavaCalls`), and
    /// was called by the Java frames below: the BPF unwinder will find
    /// the native frames here.
    Native,
}

/// Where a thread's Java frames ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// At the call stub of the thread's first entry into Java (no Java
    /// frame below).
    EntryFrame,
    /// At a pc outside the code cache (native code).
    Native(u64),
    /// After the frame limit.
    Limit,
}

/// Walks the Java frames of `thread` from its frame anchor, innermost
/// first, at most `max_frames`. At an entry frame (C called Java) it goes
/// on from the anchor the entry saved, if any (the Java frames that
/// called that C code), marking the gap with [`JavaFrame::Native`].
pub fn walk_java_frames(
    memory: &dyn ProcessMemory,
    l: &HotspotLayout,
    bias: u64,
    cache: &CodeCache,
    thread: &JavaThreadInfo,
    max_frames: usize,
) -> Result<(Vec<JavaFrame>, WalkEnd), String> {
    if thread.last_java_sp == 0 {
        return Err("the thread has no last Java frame (it runs Java code, or no Java at all)".into());
    }
    let word = |a: u64| read_u64(memory, a).ok_or_else(|| format!("cannot read {a:#x}"));
    let slot = |fp: u64, s: i32| fp.wrapping_add_signed(8 * i64::from(s));
    let call_stub_return = word(bias.wrapping_add(l.call_stub_return_address_vaddr))?;
    let (mut unextended_sp, mut fp) = (thread.last_java_sp, thread.last_java_fp);
    let mut pc = if thread.last_java_pc != 0 { thread.last_java_pc } else { word(unextended_sp.wrapping_sub(8))? };
    let mut frames = Vec::new();
    while frames.len() < max_frames {
        if pc == call_stub_return {
            // fp is the call stub's: its JavaCallWrapper holds the anchor
            // of the Java code that called the native code that called us.
            let wrapper = word(slot(fp, l.entry_frame_call_wrapper_slot))?;
            let anchor = wrapper.wrapping_add(u64::from(l.java_call_wrapper_anchor));
            let sp = word(anchor.wrapping_add(u64::from(l.anchor_last_java_sp)))?;
            if sp == 0 {
                return Ok((frames, WalkEnd::EntryFrame));
            }
            frames.push(JavaFrame::Native);
            unextended_sp = sp;
            fp = word(anchor.wrapping_add(u64::from(l.anchor_last_java_fp)))?;
            pc = match word(anchor.wrapping_add(u64::from(l.anchor_last_java_pc)))? {
                0 => word(sp.wrapping_sub(8))?,
                pc => pc,
            };
            continue;
        }
        if !cache.contains(pc) {
            return Ok((frames, WalkEnd::Native(pc)));
        }
        let blob = cache.find_blob(memory, l, pc).ok_or_else(|| format!("no code blob at {pc:#x}"))?;
        let info = cache.read_blob(memory, l, blob).ok_or_else(|| format!("unreadable code blob at {blob:#x}"))?;
        match info.kind {
            BlobKind::Interpreter => {
                let method = word(slot(fp, l.interp_method_slot))?;
                let bcp = word(slot(fp, l.interp_bcp_slot))?;
                frames.push(JavaFrame::Interpreted { method, bci: bci_of(memory, l, method, bcp) });
                unextended_sp = word(slot(fp, l.interp_sender_sp_slot))?;
                pc = word(fp.wrapping_add(8))?;
                fp = word(fp)?;
            }
            kind => {
                if info.frame_size == 0 || info.frame_size > 1 << 16 {
                    return Err(format!("{} at {pc:#x}: frame size {}", info.name, info.frame_size));
                }
                frames.push(match (kind, info.method) {
                    (BlobKind::Nmethod, Some(method)) => {
                        // Being deoptimised: the pc that names the scopes was saved.
                        let real_pc = match (info.deopt_handler, info.orig_pc_offset) {
                            (Some(handler), Some(off)) if pc == handler => {
                                word(unextended_sp.wrapping_add(u64::from(off)))?
                            }
                            _ => pc,
                        };
                        JavaFrame::Compiled { nmethod: blob, method, pc_offset: real_pc.wrapping_sub(info.code_begin) }
                    }
                    _ => JavaFrame::Stub(info.name.clone()),
                });
                let sender_sp = unextended_sp.wrapping_add(8 * u64::from(info.frame_size));
                pc = word(sender_sp.wrapping_sub(8))?;
                fp = word(sender_sp.wrapping_sub(16))?;
                unextended_sp = sender_sp;
            }
        }
    }
    Ok((frames, WalkEnd::Limit))
}

/// The bytecode index of `bcp` in `method`, if it points into its
/// bytecodes.
fn bci_of(memory: &dyn ProcessMemory, l: &HotspotLayout, method: u64, bcp: u64) -> Option<u32> {
    let const_method = read_u64(memory, method.wrapping_add(u64::from(l.method_const_method)))?;
    let code_size = super::remote::read_u16(memory, const_method.wrapping_add(u64::from(l.const_method_code_size)))?;
    let bci = bcp.checked_sub(const_method.wrapping_add(u64::from(l.const_method_sizeof)))?;
    (bci < u64::from(code_size)).then_some(bci as u32)
}

#[cfg(test)]
mod tests {
    use super::super::layout::jdk17_fixture;
    use super::super::remote::fake::FakeMemory;
    use super::*;

    #[test]
    fn the_segment_map_leads_back_to_the_block() {
        let l = jdk17_fixture();
        let low = 0x100000;
        let heap = CodeHeapInfo { low, high: low + 0x1000, segmap: 0x200000, log2_segment_size: 6 };
        let cache = CodeCache { low, high: low + 0x1000, heaps: vec![heap] };
        let mut m = FakeMemory::default();
        // Segments: a used block of 4, a free one, an unused block of 2.
        m.add(0x200000, vec![0, 1, 2, 3, 0xff, 0, 1]);
        let mut blocks = vec![0u8; 0x1000];
        blocks[8] = 1; // block 0 used
        m.add(low, blocks);
        assert_eq!(cache.find_blob(&m, &l, low + 3 * 64 + 5), Some(low + 16));
        assert_eq!(cache.find_blob(&m, &l, low), Some(low + 16));
        assert_eq!(cache.find_blob(&m, &l, low + 4 * 64), None, "free");
        assert_eq!(cache.find_blob(&m, &l, low + 6 * 64), None, "not in use");
        assert_eq!(cache.find_blob(&m, &l, low + 0x2000), None, "outside");
        assert!(cache.contains(low + 0xfff) && !cache.contains(low + 0x1000));
        // A map stepping back past the heap's start.
        m.regions[0].1 = vec![5, 1];
        assert_eq!(cache.find_blob(&m, &l, low), None);
    }

    #[test]
    fn thread_and_heap_counts_are_bounded() {
        let l = jdk17_fixture();
        let mut m = FakeMemory::default();
        // _java_thread_list -> a list claiming MAX_THREADS + 1 threads.
        m.add(0x118, 0x1000u64.to_le_bytes().to_vec());
        let mut list = vec![0u8; 32];
        list[4..8].copy_from_slice(&(MAX_THREADS + 1).to_le_bytes());
        m.add(0x1000, list);
        assert_eq!(java_threads(&m, &l, 0).unwrap_err(), format!("{} threads", MAX_THREADS + 1));
        // The code cache: bounds, then _heaps -> 17 heaps.
        m.add(0x100, [0x2000u64, 0x1_0000, 0x2_0000].iter().flat_map(|v| v.to_le_bytes()).collect());
        m.add(0x2000, [17u64, 0x3000].iter().flat_map(|v| v.to_le_bytes()).collect());
        assert_eq!(CodeCache::read(&m, &l, 0).unwrap_err(), "17 code heaps");
    }

    /// The interpreted frame's method, the nmethod's.
    const M1: u64 = 0xaaa0;
    const M2: u64 = 0xbbb0;

    /// A code cache holding the interpreter (segments 0-3) and one
    /// nmethod (4-15, method M2, 4-word frames), a stack with an
    /// interpreted frame at fp 0x7000_1000 called by the nmethod, called by
    /// the call stub (whose saved anchor is empty), and the statics.
    fn process(cyclic: bool) -> (FakeMemory, CodeCache, JavaThreadInfo) {
        process_with(cyclic, false)
    }

    /// `deopt`: the interpreted frame returns to the nmethod's deopt
    /// handler (at code + 0x200), the real pc saved at u2 + 8.
    fn process_with(cyclic: bool, deopt: bool) -> (FakeMemory, CodeCache, JavaThreadInfo) {
        let low = 0x100000u64;
        let mut m = FakeMemory::default();
        m.add(0x200000, [vec![0, 1, 2, 3], vec![0], (1..12).collect()].concat());
        let mut code = vec![0u8; 0x400];
        let mut blob = |at: usize, name: u64, size: u32, frame: u32, method: u64| {
            code[at - 8] = 1; // HeapBlock::Header::_used
            code[at + 96..at + 104].copy_from_slice(&name.to_le_bytes());
            code[at + 12..at + 16].copy_from_slice(&size.to_le_bytes());
            code[at + 28..at + 32].copy_from_slice(&frame.to_le_bytes());
            let base = low + at as u64;
            code[at + 32..at + 40].copy_from_slice(&(base + 0x80).to_le_bytes());
            code[at + 40..at + 48].copy_from_slice(&(base + u64::from(size)).to_le_bytes());
            code[at + 112..at + 120].copy_from_slice(&method.to_le_bytes());
            code[at + 128..at + 136].copy_from_slice(&(base + 0x200).to_le_bytes()); // deopt handler
            code[at + 300..at + 304].copy_from_slice(&8u32.to_le_bytes()); // orig pc offset
        };
        blob(16, 0x300000, 0xf0, 0, 0);
        blob(4 * 64 + 16, 0x300010, 0x2f0, 4, M2);
        m.add(low, code);
        m.add(0x300000, b"Interpreter\0\0\0\0\0nmethod\0".iter().copied().chain([0; 64]).collect());
        // Statics: the call stub's return address.
        m.add(0x120, 0x5555_0000u64.to_le_bytes().to_vec());
        // The stack: interpreted frame at fp f1, the nmethod's frame above
        // it (4 words from its unextended sp u2), the call stub's fp f3.
        let (f1, u2, f3) = (0x7000_1000u64, 0x7000_1040u64, 0x7000_2000u64);
        let mut stack = vec![0u8; 0x2000];
        let mut put = |address: u64, value: u64| {
            let at = (address - 0x7000_0000) as usize;
            stack[at..at + 8].copy_from_slice(&value.to_le_bytes());
        };
        put(f1 - 24, M1); // Method*
        put(f1 - 8, u2); // sender sp
        put(f1, if cyclic { f1 } else { 0x1234 }); // saved fp
        let nmethod_pc = low + 4 * 64 + 0x120;
        let return_pc = match (cyclic, deopt) {
            (true, _) => low + 0x90,
            (false, true) => low + 4 * 64 + 16 + 0x200,
            (false, false) => nmethod_pc,
        };
        put(f1 + 8, return_pc);
        put(u2 + 8, nmethod_pc); // the pc saved for deoptimisation
        put(u2 + 32 - 8, 0x5555_0000); // into the call stub
        put(u2 + 32 - 16, f3);
        put(f3 - 48, 0x7000_1800); // JavaCallWrapper*, its anchor empty
        m.add(0x7000_0000, stack);
        let heap = CodeHeapInfo { low, high: low + 0x400, segmap: 0x200000, log2_segment_size: 6 };
        let cache = CodeCache { low, high: low + 0x400, heaps: vec![heap] };
        let thread = JavaThreadInfo {
            address: 0,
            tid: 1,
            state: 10,
            last_java_sp: f1 - 0x80,
            last_java_fp: f1,
            last_java_pc: low + 0x90,
        };
        (m, cache, thread)
    }

    #[test]
    fn walks_interpreted_then_compiled_frames_to_the_entry_frame() {
        let l = jdk17_fixture();
        let (m, cache, thread) = process(false);
        let (frames, end) = walk_java_frames(&m, &l, 0, &cache, &thread, 64).unwrap();
        let nmethod = 0x100000 + 4 * 64 + 16;
        assert_eq!(
            frames,
            [
                JavaFrame::Interpreted { method: M1, bci: None },
                JavaFrame::Compiled { nmethod, method: M2, pc_offset: 0x120 - 16 - 0x80 },
            ]
        );
        assert_eq!(end, WalkEnd::EntryFrame);
        // Returning into the deopt handler: the saved pc is the frame's.
        let (m, cache, thread) = process_with(false, true);
        assert_eq!(walk_java_frames(&m, &l, 0, &cache, &thread, 64).unwrap(), (frames, end));
    }

    #[test]
    fn a_cyclic_stack_stops_at_the_limit() {
        let l = jdk17_fixture();
        let (m, cache, thread) = process(true);
        let (frames, end) = walk_java_frames(&m, &l, 0, &cache, &thread, 50).unwrap();
        assert_eq!((frames.len(), end), (50, WalkEnd::Limit));
        let idle = JavaThreadInfo { last_java_sp: 0, ..thread };
        assert!(walk_java_frames(&m, &l, 0, &cache, &idle, 50).is_err());
    }
}
