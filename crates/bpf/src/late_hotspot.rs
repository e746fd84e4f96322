//! Late unwinding through HotSpot's frames: the BPF HotSpot unwinder
//! (`ebpf/runtimes/hotspot/unwinder.bpf.h`, `hotspot_step`), for a stack
//! copy whose native walk ([`crate::late_unwind`]) reaches a JVM's code
//! cache, so that a JVM's first samples keep their Java frames and reach
//! the thread's root.
//!
//! The layout is the process's `struct hotspot_process`
//! (`hotspot_processes[pid]`, the contract's [`c::hotspot_process`]); what
//! the BPF walk reads at its hand-over (the code heaps when the entry
//! lacks them, the template interpreter's code, the call stub's return
//! address) is read the same way from the process. Frame slots come from
//! the copied window; code and metadata (a `Method*`'s `ConstMethod`,
//! `CodeBlob` fields, segment maps, code bytes) from the process's memory
//! now. The frame words are the BPF unwinder's.
//!
//! Followed: the entry frame (back to the native walk), interpreted
//! frames, compiled frames reached by a return address (built frames,
//! with the deoptimisation handler's pc substitution), and stubs of 0
//! words that push nothing or build an rbp frame. Not followed (the BPF
//! walk decodes the code around the pc for these): a sampled pc in
//! compiled code, and stubs that push registers. Each stop is a
//! [`HotspotStop`]; the frames so far are kept.

use crate::contract::c;
use crate::late_unwind::{UnwindTables, Window};
use crate::late_v8::Regs;
use crate::types::{InterpreterUnwinder, UnwindStop, UserFrame};

/// `struct hotspot_process`.
pub(crate) type HotspotProcess = c::hotspot_process;

/// Slots of an interpreted frame the BPF walk reads: `fp + 8 *
/// HOTSPOT_LOWEST_SLOT .. fp + 8`.
const FRAME_SLOTS: i32 = c::HOTSPOT_FRAME_SLOTS as i32;
const LOWEST_SLOT: i32 = c::HOTSPOT_LOWEST_SLOT;
/// `HOTSPOT_SEGMAP_STEPS`.
const SEGMAP_STEPS: usize = 32;
/// `HOTSPOT_STUB_MAX`.
const STUB_MAX: u64 = 4096;

/// Why a walk ended within HotSpot's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HotspotStop {
    /// A frame slot outside the stack copy.
    OutsideCopy,
    /// A read of the process's memory failed (a `Method*`, a blob's
    /// frame size): the process or its code is gone.
    ReadError,
    /// A frame whose caller is not above it, or a return address of 0.
    BadFrame,
    /// The stack is full.
    MaxFrames,
    /// The sampled pc is in compiled code or a stub (its frame may not
    /// be built: the BPF walk decodes the code there): recorded, then
    /// the stack ends.
    CompiledLeaf,
    /// No code blob holds the pc.
    NoBlob,
    /// A stub without a frame size that does not build an rbp frame.
    UnknownStub,
}

impl HotspotStop {
    /// Its name in the stats.
    pub fn as_str(self) -> &'static str {
        match self {
            HotspotStop::OutsideCopy => "outside_copy",
            HotspotStop::ReadError => "read_error",
            HotspotStop::BadFrame => "bad_frame",
            HotspotStop::MaxFrames => "max_frames",
            HotspotStop::CompiledLeaf => "compiled_leaf",
            HotspotStop::NoBlob => "no_blob",
            HotspotStop::UnknownStub => "unknown_stub",
        }
    }

    /// The stack's stop reason: the BPF walk's `UNWIND_STOP_RUNTIME_CODE`
    /// for code it could not follow.
    pub(crate) fn unwind_stop(self) -> UnwindStop {
        match self {
            HotspotStop::OutsideCopy => UnwindStop::OutsideCopy,
            HotspotStop::ReadError => UnwindStop::ReadError,
            HotspotStop::BadFrame => UnwindStop::BadSp,
            HotspotStop::MaxFrames => UnwindStop::MaxFrames,
            HotspotStop::CompiledLeaf | HotspotStop::NoBlob | HotspotStop::UnknownStub => UnwindStop::Hotspot,
        }
    }
}

impl From<UnwindStop> for HotspotStop {
    /// A window read's failure.
    fn from(_: UnwindStop) -> HotspotStop {
        HotspotStop::OutsideCopy
    }
}

/// What a HotSpot walk did (counted by the agent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LateHotspot {
    /// Hand-overs to the HotSpot walk.
    pub walks: u32,
    /// Java frames recorded.
    pub frames: u32,
    /// Why the stack ended within HotSpot's frames, if it did.
    pub stop: Option<HotspotStop>,
}

/// A JVM as `hotspot_attach` leaves it: its entry with the code heaps,
/// the template interpreter's code and the call stub's return address.
#[derive(Clone, Copy)]
pub(crate) struct Jvm {
    process: HotspotProcess,
    interpreter: (u64, u64),
    call_stub_return: u64,
}

impl Jvm {
    /// Whether `pc` is in the code cache: the hand-over is the BPF
    /// walk's only then, and the walk goes on while it is.
    pub(crate) fn in_code_cache(&self, pc: u64) -> bool {
        (self.process.code_low..self.process.code_high).contains(&pc)
    }
}

/// The process's memory; reads that fail are `None`.
struct Memory<'t, T> {
    tables: &'t mut T,
    pid: u32,
}

impl<T: UnwindTables> Memory<'_, T> {
    fn bytes<const N: usize>(&mut self, address: u64) -> Option<[u8; N]> {
        let mut buf = [0u8; N];
        self.tables.read_memory(self.pid, address, &mut buf).then_some(buf)
    }

    fn u64(&mut self, address: u64) -> Option<u64> {
        self.bytes::<8>(address).map(u64::from_ne_bytes)
    }

    fn i32(&mut self, address: u64) -> Option<i32> {
        self.bytes::<4>(address).map(i32::from_ne_bytes)
    }

    fn u32(&mut self, address: u64) -> Option<u32> {
        self.bytes::<4>(address).map(u32::from_ne_bytes)
    }

    fn u8(&mut self, address: u64) -> Option<u8> {
        self.bytes::<1>(address).map(|b| b[0])
    }
}

/// `hotspot_attach`: the entry completed with what is set while the JVM
/// starts; `None` when its code cache is not set yet (the code stays
/// native, as for the BPF walk).
pub(crate) fn attach(tables: &mut impl UnwindTables, pid: u32, mut process: HotspotProcess) -> Option<Jvm> {
    let mut mem = Memory { tables, pid };
    if process.code_low == 0 || process.heap_count == 0 {
        code_cache(&mut mem, &mut process)?;
    }
    let mut interpreter = (0, 0);
    if let Some(queue) = mem.u64(process.interpreter_code).filter(|&q| q != 0) {
        let buffer = mem.u64(queue.wrapping_add(u64::from(process.stub_queue_buffer)));
        let limit = mem.i32(queue.wrapping_add(u64::from(process.stub_queue_limit)));
        if let (Some(buffer), Some(limit)) = (buffer, limit) {
            if limit > 0 {
                interpreter = (buffer, buffer.wrapping_add(limit as u64));
            }
        }
    }
    let call_stub_return = mem.u64(process.call_stub_return).unwrap_or(0);
    Some(Jvm { process, interpreter, call_stub_return })
}

/// `hotspot_code_cache`: the code cache's bounds and heaps read from the
/// JVM.
fn code_cache<T: UnwindTables>(mem: &mut Memory<'_, T>, p: &mut HotspotProcess) -> Option<()> {
    let low = mem.u64(p.code_low_bound)?;
    let high = mem.u64(p.code_high_bound)?;
    if low == 0 || high <= low {
        return None;
    }
    let array = mem.u64(p.code_heaps).filter(|&a| a != 0)?;
    let len = mem.i32(array.wrapping_add(u64::from(p.growable_array_len))).filter(|&l| l > 0)?;
    let data = mem.u64(array.wrapping_add(u64::from(p.growable_array_data))).filter(|&d| d != 0)?;
    let mut count = 0;
    for i in 0..(len as usize).min(p.heaps.len()) {
        let heap = mem.u64(data.wrapping_add(8 * i as u64)).filter(|&h| h != 0)?;
        let memory = heap.wrapping_add(u64::from(p.code_heap_memory));
        let heap_low = mem.u64(memory.wrapping_add(u64::from(p.virtual_space_low)))?;
        let heap_high = mem.u64(memory.wrapping_add(u64::from(p.virtual_space_high)))?;
        let segmap =
            mem.u64(heap.wrapping_add(u64::from(p.code_heap_segmap)).wrapping_add(u64::from(p.virtual_space_low)))?;
        let log2 = mem.i32(heap.wrapping_add(u64::from(p.code_heap_log2_segment_size)))?;
        if !(4..=20).contains(&log2) || heap_low >= heap_high || segmap == 0 {
            return None;
        }
        p.heaps[i] =
            c::hotspot_heap { low: heap_low, high: heap_high, segmap, log2_segment_size: log2 as u32, reserved: 0 };
        count += 1;
    }
    (p.code_low, p.code_high, p.heap_count) = (low, high, count);
    Some(())
}

/// `hotspot_word`: an interpreted frame's word.
pub(crate) fn interpreted_word(method: u64, bci: u64) -> u64 {
    let bits = if method & 7 != 0 || method >> 47 != 0 { 0 } else { method >> 3 };
    let bci = bci.min(c::HOTSPOT_FRAME_OFFSET_MAX);
    UserFrame::interpreted_word(InterpreterUnwinder::Hotspot as u8, (bci << c::HOTSPOT_FRAME_OFFSET_SHIFT) | bits)
}

/// `hotspot_compiled_word`: a compiled frame's word.
pub(crate) fn compiled_word(p: &HotspotProcess, pc: u64, exact: bool, mark: u32) -> u64 {
    let offset = pc.wrapping_sub(p.code_low);
    let offset = if pc < p.code_low || offset > u64::from(c::HOTSPOT_CODE_OFFSET_MAX) { 0 } else { offset };
    let low = u64::from(mark & 0xffff);
    let high = u64::from((mark >> 16) & ((1 << (c::HOTSPOT_MARK_BITS - 16)) - 1));
    let exact = if exact { u64::from(c::HOTSPOT_PC_EXACT) } else { 0 };
    UserFrame::interpreted_word(
        InterpreterUnwinder::Hotspot as u8,
        c::HOTSPOT_FRAME_COMPILED
            | (low << c::HOTSPOT_FRAME_OFFSET_SHIFT)
            | (high << c::HOTSPOT_MARK_HIGH_SHIFT)
            | exact
            | offset,
    )
}

/// `hotspot_find_blob`: the CodeBlob holding `pc`.
fn find_blob<T: UnwindTables>(mem: &mut Memory<'_, T>, p: &HotspotProcess, pc: u64) -> Option<u64> {
    let heap = p.heaps.iter().take(p.heap_count as usize).find(|h| (h.low..h.high).contains(&pc))?;
    if heap.segmap == 0 {
        return None;
    }
    let log2 = heap.log2_segment_size & 31;
    let mut segment = (pc - heap.low) >> log2;
    for _ in 0..SEGMAP_STEPS {
        let step = u64::from(mem.u8(heap.segmap.wrapping_add(segment))?);
        if step == 0xff {
            return None;
        }
        if step == 0 {
            let block = heap.low.wrapping_add(segment << log2);
            let used = mem.u8(block.wrapping_add(u64::from(p.heap_block_used)))?;
            return (used != 0).then(|| block.wrapping_add(u64::from(p.heap_block_size)));
        }
        segment = segment.checked_sub(step)?;
    }
    None
}

/// `hotspot_code_begin`: the start of the blob's code.
fn code_begin<T: UnwindTables>(mem: &mut Memory<'_, T>, p: &HotspotProcess, blob: u64) -> Option<u64> {
    let at = blob.wrapping_add(u64::from(p.blob_code_begin));
    let begin = if p.code_flags & c::HOTSPOT_CODE_OFFSETS != 0 {
        let offset = mem.i32(at).filter(|&o| o > 0)?;
        blob.wrapping_add(offset as u64)
    } else {
        mem.u64(at)?
    };
    (begin > blob).then_some(begin)
}

/// Whether the 4 bytes are enter()'s `push rbp; mov rbp,rsp`.
fn is_enter(code: &[u8]) -> bool {
    code[0] == 0x55 && code[1] == 0x48 && ((code[2] == 0x8b && code[3] == 0xec) || (code[2] == 0x89 && code[3] == 0xe5))
}

/// `hotspot_stub_enters`: whether a stub without a frame size starts with
/// enter().
fn stub_enters<T: UnwindTables>(mem: &mut Memory<'_, T>, p: &HotspotProcess, blob: u64) -> bool {
    let Some(begin) = code_begin(mem, p, blob) else { return false };
    mem.bytes::<4>(begin).is_some_and(|code| is_enter(&code))
}

/// `hotspot_call_target`: the target of the call ending just before
/// `ret`.
fn call_target<T: UnwindTables>(mem: &mut Memory<'_, T>, ret: u64) -> Option<u64> {
    let c = mem.bytes::<13>(ret.wrapping_sub(13))?;
    if c[8] == 0xe8 {
        let rel = i32::from_le_bytes([c[9], c[10], c[11], c[12]]);
        return Some(ret.wrapping_add(i64::from(rel) as u64));
    }
    if c[0] == 0x49 && c[1] == 0xba && c[10] == 0x41 && c[11] == 0xff && c[12] == 0xd2 {
        return Some(u64::from_le_bytes(c[2..10].try_into().expect("8 bytes")));
    }
    None
}

/// `hotspot_returns_from`: whether `ret` returns from a call to a stub of
/// the blob (from `begin`) near `pc` that starts with the nmethod entry
/// barrier's code (`barrier`) or enter().
fn returns_from<T: UnwindTables>(mem: &mut Memory<'_, T>, ret: u64, begin: u64, pc: u64, barrier: bool) -> bool {
    let Some(target) = call_target(mem, ret).filter(|&t| t != 0) else { return false };
    if target < begin || target.abs_diff(pc) >= STUB_MAX {
        return false;
    }
    let Some(c) = mem.bytes::<9>(target) else { return false };
    if barrier {
        c[..5] == [0x68, 0xff, 0xff, 0xff, 0xff] && is_enter(&c[5..9])
    } else {
        is_enter(&c[..4])
    }
}

/// The frame shapes of a compiled frame reached by a return address
/// (`enum hotspot_shape`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Built: the blob's frame size gives the caller.
    Frame,
    /// A stub's rbp frame (enter()).
    RbpFrame,
    /// The nmethod entry barrier's rbp frame, its cookie above rbp.
    BarrierFrame,
}

/// `hotspot_stub_shape` for a return address: a stub of a 0-word blob
/// (StubRoutines') that built an rbp frame, else nothing pushed.
fn stub_shape<T: UnwindTables>(
    mem: &mut Memory<'_, T>,
    window: &Window<'_>,
    p: &HotspotProcess,
    blob: u64,
    pc: u64,
    regs: &Regs,
) -> Shape {
    let Some(begin) = code_begin(mem, p, blob) else { return Shape::Frame };
    let (fp, sp) = (regs.fp, regs.sp);
    if fp >= sp && fp - sp < 1 << 16 {
        if let Ok(ret) = window.read(fp.wrapping_add(16)) {
            if returns_from(mem, ret, begin, pc, true) {
                return Shape::BarrierFrame;
            }
        }
        if let Ok(ret) = window.read(fp.wrapping_add(8)) {
            if returns_from(mem, ret, begin, pc, false) {
                return Shape::RbpFrame;
            }
        }
    }
    Shape::Frame
}

/// `hotspot_deopt_pc`: the pc the compiled frame at `sp` stands for when
/// `ret` is its nmethod's deoptimisation handler.
fn deopt_pc<T: UnwindTables>(
    mem: &mut Memory<'_, T>,
    window: &Window<'_>,
    p: &HotspotProcess,
    blob: u64,
    ret: u64,
    sp: u64,
) -> Option<u64> {
    if p.nmethod_deopt_handler == 0 {
        return None;
    }
    let at = blob.wrapping_add(u64::from(p.nmethod_deopt_handler));
    let handler =
        if p.deopt_handler_is_offset != 0 { blob.wrapping_add(u64::from(mem.u32(at)?)) } else { mem.u64(at)? };
    if handler != ret {
        return None;
    }
    let offset = mem.i32(blob.wrapping_add(u64::from(p.nmethod_orig_pc_offset)))?;
    if !(0..=1 << 20).contains(&offset) {
        return None;
    }
    window.read(sp.wrapping_add(offset as u64)).ok().filter(|&pc| pc > blob)
}

/// What a HotSpot walk reads besides the tables.
pub(crate) struct HotspotWalk<'w> {
    pub pid: u32,
    pub window: &'w Window<'w>,
    pub jvm: Jvm,
    pub max_frames: usize,
}

/// Walks HotSpot's frames from a hand-over at `regs` (a pc in the code
/// cache) as `jit_unwind_run` with `hotspot_frame` does, appending Java
/// frames to `frames`. Ok: the caller is native code, at `regs`; Err: the
/// stack ends there.
pub(crate) fn walk(
    tables: &mut impl UnwindTables,
    w: &HotspotWalk<'_>,
    regs: &mut Regs,
    frames: &mut Vec<u64>,
    counts: &mut LateHotspot,
) -> Result<(), HotspotStop> {
    counts.walks += 1;
    let mut mem = Memory { tables, pid: w.pid };
    let mut hand_over = true;
    // Each step records a frame or returns: max_frames bounds the loop.
    loop {
        if !hand_over && !w.jvm.in_code_cache(regs.pc) {
            return Ok(());
        }
        hand_over = false;
        if step(&mut mem, w, regs, frames, counts)? {
            return Ok(());
        }
    }
}

fn record(w: &HotspotWalk<'_>, frames: &mut Vec<u64>, counts: &mut LateHotspot, word: u64) -> Result<(), HotspotStop> {
    if frames.len() >= w.max_frames {
        return Err(HotspotStop::MaxFrames);
    }
    frames.push(word);
    counts.frames += 1;
    Ok(())
}

/// `hotspot_step`: one frame at a pc in the code cache. Ok(true) after
/// the entry frame (the caller is native code).
fn step<T: UnwindTables>(
    mem: &mut Memory<'_, T>,
    w: &HotspotWalk<'_>,
    regs: &mut Regs,
    frames: &mut Vec<u64>,
    counts: &mut LateHotspot,
) -> Result<bool, HotspotStop> {
    let (jvm, p) = (&w.jvm, &w.jvm.process);
    let Regs { pc, sp, fp, exact } = *regs;
    if pc == jvm.call_stub_return && pc != 0 {
        // The entry frame: C called Java here (an rbp frame).
        let (saved_fp, ret) = (w.window.read(fp)?, w.window.read(fp.wrapping_add(8))?);
        if fp.wrapping_add(16) <= sp || ret == 0 {
            return Err(HotspotStop::BadFrame);
        }
        *regs = Regs { pc: ret, sp: fp + 16, fp: saved_fp, exact: false };
        return Ok(true);
    }
    if (jvm.interpreter.0..jvm.interpreter.1).contains(&pc) {
        interpreted(mem, w, regs, frames, counts)?;
        return Ok(false);
    }
    let blob = find_blob(mem, p, if exact { pc } else { pc.wrapping_sub(1) }).ok_or(HotspotStop::NoBlob)?;
    let mark = mem.u32(blob.wrapping_add(u64::from(p.nmethod_compile_id))).unwrap_or(0);
    if exact {
        record(w, frames, counts, compiled_word(p, pc, true, mark))?;
        return Err(HotspotStop::CompiledLeaf);
    }
    compiled(mem, w, regs, blob, mark, frames, counts)?;
    Ok(false)
}

/// `hotspot_interpreted`: the interpreted frame at fp. Its `Method*` is
/// read (its `ConstMethod`) to give the bci: a failure ends the stack.
fn interpreted<T: UnwindTables>(
    mem: &mut Memory<'_, T>,
    w: &HotspotWalk<'_>,
    regs: &mut Regs,
    frames: &mut Vec<u64>,
    counts: &mut LateHotspot,
) -> Result<(), HotspotStop> {
    let p = &w.jvm.process;
    let fp = regs.fp;
    // `hotspot_slot`: slots outside those the BPF walk reads are 0.
    let slot = |slot: i32| -> Result<u64, HotspotStop> {
        if !(LOWEST_SLOT..LOWEST_SLOT + FRAME_SLOTS).contains(&slot) {
            return Ok(0);
        }
        Ok(w.window.read(fp.wrapping_add((8 * i64::from(slot)) as u64))?)
    };
    let (method, bcp, sender_sp) =
        (slot(p.interp_method_slot)?, slot(p.interp_bcp_slot)?, slot(p.interp_sender_sp_slot)?);
    let (caller_fp, ret) = (slot(0)?, slot(1)?);
    let mut bci = c::HOTSPOT_NO_BCI;
    if method != 0 {
        let const_method =
            mem.u64(method.wrapping_add(u64::from(p.method_const_method))).ok_or(HotspotStop::ReadError)?;
        let codes = const_method.wrapping_add(u64::from(p.const_method_size));
        if bcp >= codes && bcp - codes < c::HOTSPOT_NO_BCI {
            bci = bcp - codes;
        }
    }
    record(w, frames, counts, interpreted_word(method, bci))?;
    // The saved rbp is not checked: a compiled caller may have left any
    // value there.
    if sender_sp <= regs.sp || ret == 0 {
        return Err(HotspotStop::BadFrame);
    }
    *regs = Regs { pc: ret, sp: sender_sp, fp: caller_fp, exact: false };
    Ok(())
}

/// `hotspot_compiled` for a frame reached by a return address: its frame
/// is built (`HOTSPOT_SHAPE_FRAME`), or a stub's (`hotspot_stub_shape`).
fn compiled<T: UnwindTables>(
    mem: &mut Memory<'_, T>,
    w: &HotspotWalk<'_>,
    regs: &mut Regs,
    blob: u64,
    mark: u32,
    frames: &mut Vec<u64>,
    counts: &mut LateHotspot,
) -> Result<(), HotspotStop> {
    let p = &w.jvm.process;
    let frame_size = mem.i32(blob.wrapping_add(u64::from(p.blob_frame_size))).ok_or(HotspotStop::ReadError)?;
    let pc = deopt_pc(mem, w.window, p, blob, regs.pc, regs.sp).unwrap_or(regs.pc);
    let mut shape = if frame_size == 0 { stub_shape(mem, w.window, p, blob, pc, regs) } else { Shape::Frame };
    record(w, frames, counts, compiled_word(p, pc, false, mark))?;
    if frame_size < 0 {
        // C1's runtime stubs: followed when they build an rbp frame.
        if shape != Shape::Frame || !stub_enters(mem, p, blob) {
            return Err(HotspotStop::UnknownStub);
        }
        shape = Shape::RbpFrame;
    }
    if frame_size > 1 << 16 {
        return Err(HotspotStop::BadFrame);
    }
    let (sp, fp) = (regs.sp, regs.fp);
    let (caller_sp, fp_at) = match shape {
        Shape::RbpFrame | Shape::BarrierFrame => {
            if fp < sp || fp - sp > 1 << 20 {
                return Err(HotspotStop::BadFrame);
            }
            // The barrier's cookie lies between the saved rbp and the
            // return address.
            (fp + if shape == Shape::BarrierFrame { 24 } else { 16 }, Some(fp))
        }
        Shape::Frame => {
            // A frame of 0 words: a stub that pushed nothing.
            let caller_sp = sp.wrapping_add(8 * if frame_size > 0 { frame_size as u64 } else { 1 });
            (caller_sp, (frame_size >= 2).then(|| caller_sp - 16))
        }
    };
    let ret = w.window.read(caller_sp.wrapping_sub(8))?;
    let fp = match fp_at {
        Some(at) => w.window.read(at)?,
        None => fp,
    };
    if ret == 0 {
        return Err(HotspotStop::BadFrame);
    }
    *regs = Regs { pc: ret, sp: caller_sp, fp, exact: false };
    Ok(())
}
