//! Late unwinding through V8's frames: the BPF V8 unwinder
//! (`ebpf/runtimes/v8/unwinder.bpf.h`, `v8_step`), step for step, for a
//! stack copy whose native walk ([`crate::late_unwind`]) reaches V8's
//! code (the builtins blob of node's `.text`, or JIT code), so that a
//! Node process's first samples keep their JavaScript frames.
//!
//! The layout is the process's `struct v8_process` (`v8_processes[pid]`,
//! the contract's [`c::v8_process`]): one definition for both walks.
//! Frame slots are read from the copied window; the heap reads of the
//! BPF walk (a BytecodeArray's map, `JSFunction::code`,
//! `Code::instruction_start`...) from the process's memory now (the
//! namer reads it later anyway). The frame words are the BPF unwinder's.
//! What cannot be followed ends the stack, frames so far kept: a frame
//! slot outside the copy with [`UnwindStop::OutsideCopy`], a heap read
//! that fails with [`UnwindStop::ReadError`] (the BPF walk would have
//! read live memory: late, a failure means the process or its heap is
//! gone), a frame that is not V8's with [`UnwindStop::BadSp`].

use crate::contract::c;
use crate::late_unwind::{TableMapping, UnwindTables, Window};
use crate::types::{InterpreterUnwinder, UnwindStop, UserFrame};

/// `struct v8_process`.
pub(crate) type V8Process = c::v8_process;

/// Slots read per frame: `fp + 8 * V8_LOWEST_SLOT .. fp + 8`.
const FRAME_SLOTS: usize = c::V8_FRAME_SLOTS as usize;
const LOWEST_SLOT: i64 = c::V8_LOWEST_SLOT as i64;

/// Where the late walk is: the unwinder's registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    pub exact: bool,
}

/// What a V8 walk did (counted by the agent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LateV8 {
    /// Hand-overs to the V8 walk.
    pub walks: u32,
    /// JavaScript frames recorded.
    pub frames: u32,
    /// Whether the stack ended within V8's frames.
    pub stopped: bool,
}

/// One frame's slots, as `interp->v8.slots`.
struct Slots([u64; FRAME_SLOTS]);

impl Slots {
    /// `v8_slot`: the slot at fp + `off`, or 0 outside the slots read.
    fn at(&self, off: i32) -> u64 {
        let index = (i64::from(off) - 8 * LOWEST_SLOT) >> 3;
        if off & 7 != 0 || !(0..FRAME_SLOTS as i64).contains(&index) {
            return 0;
        }
        self.0[index as usize]
    }
}

/// The heap as the walk reads it: a read that fails ends the stack.
struct Heap<'t, T> {
    tables: &'t mut T,
    pid: u32,
}

impl<T: UnwindTables> Heap<'_, T> {
    fn bytes<const N: usize>(&mut self, address: u64) -> Result<[u8; N], UnwindStop> {
        let mut buf = [0u8; N];
        if self.tables.read_memory(self.pid, address, &mut buf) {
            Ok(buf)
        } else {
            Err(UnwindStop::ReadError)
        }
    }

    fn u64(&mut self, address: u64) -> Result<u64, UnwindStop> {
        self.bytes::<8>(address).map(u64::from_ne_bytes)
    }

    /// `v8_instance_type`: the instance type of `tagged`, or 0 when it is
    /// not a heap object whose map is one.
    fn instance_type(&mut self, v8: &V8Process, tagged: u64) -> Result<u16, UnwindStop> {
        if tagged & 3 != 1 {
            return Ok(0);
        }
        let map = self.u64(tagged.wrapping_sub(1).wrapping_add(u64::from(v8.heap_object_map)))?;
        if map & 3 != 1 {
            return Ok(0);
        }
        self.bytes::<2>(map.wrapping_sub(1).wrapping_add(u64::from(v8.map_instance_type))).map(u16::from_ne_bytes)
    }

    /// `v8_in_baseline_code`: whether `pc` is in the Sparkplug code of
    /// `function` (V8 13+).
    fn in_baseline_code(&mut self, v8: &V8Process, function: u64, pc: u64) -> Result<bool, UnwindStop> {
        let field = |object: u64, offset: u32| object.wrapping_sub(1).wrapping_add(u64::from(offset));
        if function & 3 != 1 {
            return Ok(false);
        }
        let sfi = self.u64(field(function, v8.js_function_shared))?;
        if sfi & 3 != 1 {
            return Ok(false);
        }
        let data = self.u64(field(sfi, v8.sfi_function_data))?;
        if data & 3 != 1 {
            return Ok(false);
        }
        let start = self.u64(field(data, v8.code_instruction_start & !c::V8_CODE_START_INLINE))?;
        let size = i32::from_ne_bytes(self.bytes::<4>(field(data, v8.code_instruction_size))?);
        Ok(size > 0 && pc >= start && pc - start < size as u64)
    }
}

/// `v8_record`: the word of a JavaScript frame by its function.
pub(crate) fn function_word(function: u64, compiled: bool, offset: u64) -> u64 {
    let pointer = function.wrapping_sub(1);
    let bits = if pointer & 7 != 0 || pointer >> 47 != 0 { 0 } else { pointer >> 3 };
    let offset = offset.min(c::V8_FRAME_OFFSET_MAX);
    let payload = (if compiled { c::V8_FRAME_COMPILED } else { 0 }) | (offset << c::V8_FRAME_OFFSET_SHIFT) | bits;
    UserFrame::interpreted_word(InterpreterUnwinder::V8 as u8, payload)
}

/// `v8_record_pc`: the word of a V8 13+ compiled frame by its pc.
pub(crate) fn pc_word(pc: u64) -> u64 {
    UserFrame::interpreted_word(InterpreterUnwinder::V8 as u8, c::V8_FRAME_COMPILED | (pc & c::V8_FRAME_PC_MASK))
}

/// `v8_js_frame`: the word of the JavaScript frame at `fp` running
/// `function`, at `pc` (in JIT memory: `pc_in_jit`).
fn js_frame_word<T: UnwindTables>(
    heap: &mut Heap<'_, T>,
    v8: &V8Process,
    slots: &Slots,
    function: u64,
    pc: u64,
    pc_in_jit: bool,
) -> Result<u64, UnwindStop> {
    let bytecode = slots.at(v8.fp_bytecode_array);
    if v8.type_bytecode_array != 0 && heap.instance_type(v8, bytecode)? == v8.type_bytecode_array {
        let smi = slots.at(v8.fp_bytecode_offset) as i64;
        if v8.osr_by_pc != 0
            && pc_in_jit
            && pc & !c::V8_FRAME_PC_MASK == 0
            && !heap.in_baseline_code(v8, function, pc)?
        {
            return Ok(pc_word(pc));
        }
        let offset = (smi >> (v8.smi_shift & 63)).wrapping_sub(i64::from(v8.bytecode_offset_bias));
        return Ok(function_word(function, false, u64::try_from(offset).unwrap_or(c::V8_FRAME_OFFSET_MAX)));
    }
    if v8.compiled_by_pc != 0 {
        if !pc_in_jit || pc & !c::V8_FRAME_PC_MASK != 0 {
            return Ok(function_word(function, true, c::V8_FRAME_OFFSET_MAX));
        }
        return Ok(pc_word(pc));
    }
    let start_at = u64::from(v8.code_instruction_start & !c::V8_CODE_START_INLINE);
    let mut offset = c::V8_FRAME_OFFSET_MAX;
    if function & 3 == 1 {
        let code = heap.u64(function.wrapping_sub(1).wrapping_add(u64::from(v8.js_function_code)))?;
        if code & 3 == 1 {
            let start = if v8.code_instruction_start & c::V8_CODE_START_INLINE != 0 {
                code.wrapping_sub(1).wrapping_add(start_at)
            } else {
                heap.u64(code.wrapping_sub(1).wrapping_add(start_at))?
            };
            if start != 0 && pc >= start {
                offset = pc - start;
            }
        }
    }
    Ok(function_word(function, true, offset))
}

/// What a V8 walk reads besides the tables: the process, its stack copy
/// and its layout; and how many frames the stack may hold.
pub(crate) struct V8Walk<'w> {
    pub pid: u32,
    pub window: &'w Window<'w>,
    pub v8: V8Process,
    pub max_frames: usize,
}

/// Walks V8's frames from a hand-over at `regs` (a pc in V8's code) as
/// `jit_unwind_run` with `v8_frame` does, appending JavaScript frames to
/// `frames` (at most `max_frames` in all). Ok: the caller is native code,
/// at `regs`; Err: the stack ends there.
pub(crate) fn walk(
    tables: &mut impl UnwindTables,
    w: &V8Walk<'_>,
    regs: &mut Regs,
    frames: &mut Vec<u64>,
    counts: &mut LateV8,
) -> Result<(), UnwindStop> {
    counts.walks += 1;
    let mut hand_over = true;
    loop {
        // `v8_code`: whether the pc is V8's code, and in JIT memory.
        let lookup = if regs.exact { regs.pc } else { regs.pc.wrapping_sub(1) };
        let pc_in_jit = match tables.mapping(w.pid, lookup) {
            TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::V8, jit, .. } => jit,
            _ if hand_over => false,
            _ => return Ok(()),
        };
        hand_over = false;
        if step(tables, w, regs, pc_in_jit, frames, counts)? {
            return Ok(());
        }
    }
}

/// `v8_step`: unwinds the V8 frame at `regs.fp`. Ok(true) after an entry
/// frame (the caller is native code).
fn step(
    tables: &mut impl UnwindTables,
    w: &V8Walk<'_>,
    regs: &mut Regs,
    pc_in_jit: bool,
    frames: &mut Vec<u64>,
    counts: &mut LateV8,
) -> Result<bool, UnwindStop> {
    let (v8, fp) = (&w.v8, regs.fp);
    let mut slots = Slots([0; FRAME_SLOTS]);
    for (i, slot) in slots.0.iter_mut().enumerate() {
        *slot = w.window.read(fp.wrapping_add((8 * (LOWEST_SLOT + i as i64)) as u64))?;
    }
    let caller_fp = slots.at(0);
    let return_address = slots.at(8);
    let marker = slots.at(v8.fp_marker);
    let mut entry = false;
    if marker & 1 == 0 {
        let frame_type = marker >> 1;
        if frame_type >= 64 {
            return Err(UnwindStop::BadSp);
        }
        entry = frame_type == u64::from(v8.marker_entry) || frame_type == u64::from(v8.marker_construct_entry);
    } else {
        let function = slots.at(v8.fp_function);
        if function & 3 != 1 {
            return Err(UnwindStop::BadSp);
        }
        if frames.len() >= w.max_frames {
            return Err(UnwindStop::MaxFrames);
        }
        let mut heap = Heap { tables, pid: w.pid };
        frames.push(js_frame_word(&mut heap, v8, &slots, function, regs.pc, pc_in_jit)?);
        counts.frames += 1;
    }
    if return_address == 0 || (!entry && (caller_fp <= fp || caller_fp - fp > u64::from(c::V8_MAX_FRAME_SIZE))) {
        return Err(UnwindStop::BadSp);
    }
    *regs = Regs { pc: return_address, sp: fp.wrapping_add(16), fp: caller_fp, exact: false };
    Ok(entry)
}
