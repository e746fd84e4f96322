//! A user-space walk of one thread's JavaScript frames, from the frame
//! pointer chain: what the BPF unwinder will do, done with plain reads so
//! that the layout can be proved against live Node processes.
//!
//! Every V8 frame keeps a frame pointer: `[fp]` is the caller's fp,
//! `[fp + 8]` the return address, `[fp - 8]` either a frame type marker
//! (a Smi-tagged `StackFrame::Type`: entry, exit, internal, stub frames)
//! or the context of a JavaScript frame, whose function is at
//! `[fp - 16]`. Interpreted frames also hold their `BytecodeArray` and
//! bytecode offset; compiled frames are placed by their return address
//! in the function's `Code`.

use super::heap::Heap;
use super::layout::V8Layout;
use super::naming::{
    bytecode_positions, bytecode_script_offset, code_at_pc, inlined_scopes, read_code, FunctionInfo, V8Symbolizer,
    ANONYMOUS,
};
use crate::memory::ProcessMemory;
use std::sync::Arc;

/// Most frames walked: as many as the BPF unwinder collects.
pub const MAX_FRAMES: usize = profiler_bpf::MAX_USER_FRAMES;
/// Largest distance from a frame to its caller's.
const MAX_FRAME_SIZE: u64 = 1 << 20;
/// Bytes of stack scanned above `sp` for the innermost exit frame.
pub const EXIT_SCAN_BYTES: u64 = 256 << 10;

/// The tier of a JavaScript frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Ignition bytecode.
    Bytecode,
    /// Sparkplug baseline code: an interpreter-shaped frame whose
    /// bytecode offset slot is not kept up to date (the offset comes
    /// from the pc and the code's bytecode offset table: not decoded yet,
    /// so no line).
    Baseline,
    /// Maglev code.
    Maglev,
    /// TurboFan code.
    Turbofan,
    /// A builtin with JavaScript linkage (`Array.prototype.sort`): no
    /// script, no line.
    Builtin,
    /// Machine code not placed (the function's current code does not
    /// hold the pc: it was replaced or deoptimised since), or of another
    /// kind.
    Compiled,
}

/// One frame of the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum V8Frame {
    /// A JavaScript function.
    Js {
        /// The frame pointer.
        fp: u64,
        /// The tier.
        tier: Tier,
        /// Its name (or `<anonymous>`).
        name: Arc<str>,
        /// Its script.
        script: Option<Arc<str>>,
        /// Line and column of the current position, when known.
        line: Option<(u32, u32)>,
        /// Whether this function was inlined into the next frame's
        /// function (both share the machine frame at `fp`).
        inlined: bool,
    },
    /// A frame with a type marker (exit, internal, stub...).
    Marker {
        /// The frame pointer.
        fp: u64,
        /// Its `StackFrame::Type`.
        frame_type: u32,
    },
}

impl V8Frame {
    /// The function name of a JavaScript frame.
    pub fn name(&self) -> Option<&str> {
        match self {
            V8Frame::Js { name, .. } => Some(name),
            V8Frame::Marker { .. } => None,
        }
    }
}

/// Why a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// At an entry frame: C++ called into JavaScript here.
    Entry,
    /// A frame that is neither marked nor JavaScript (e.g. the fp chain
    /// left V8's frames).
    NotV8(u64),
    /// The caller's frame pointer was not above this one.
    BadChain(u64),
    /// Memory could not be read.
    Unreadable(u64),
    /// [`MAX_FRAMES`] reached.
    TooDeep,
}

/// The innermost exit frame at or above `sp`: C++ code called from
/// JavaScript (a runtime function, a C++ builtin) runs below one, and C++
/// code may not keep frame pointers, so it is found by scanning up to
/// [`EXIT_SCAN_BYTES`] of stack for a slot holding an exit marker whose
/// caller's frame pointer is plausible. Returns its frame pointer. The
/// BPF unwinder will not need this: it unwinds C++ with unwind tables.
pub fn find_exit_frame(memory: &dyn ProcessMemory, l: &V8Layout, sp: u64) -> Option<u64> {
    let markers = [V8Layout::marker(l.frame_types.exit), V8Layout::marker(l.frame_types.builtin_exit)];
    let mut buf = vec![0u8; 4096];
    let start = sp & !7;
    let mut page = start;
    while page < start.saturating_add(EXIT_SCAN_BYTES) {
        // Read up to the end of this page only: the stack may end there.
        let len = (4096 - (page & 4095)) as usize;
        if !memory.read(page, &mut buf[..len]) {
            return None;
        }
        for (i, w) in buf[..len].chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(w.try_into().ok()?);
            if !markers.contains(&word) {
                continue;
            }
            // The marker is at fp + fp_context_or_marker.
            let fp = (page + 8 * i as u64).wrapping_sub(l.fp_context_or_marker as i64 as u64);
            let heap = Heap { memory, layout: l };
            if let Some(caller) = heap.u64(fp) {
                if caller > fp && caller - fp < MAX_FRAME_SIZE {
                    return Some(fp);
                }
            }
        }
        page += len as u64;
    }
    None
}

/// Walks the frames from the one at `fp` (and whose return address into
/// that frame's code, for a compiled innermost frame, is `pc`) up to the
/// first entry frame.
pub fn walk_frames(
    memory: &dyn ProcessMemory,
    names: &mut V8Symbolizer,
    mut fp: u64,
    mut pc: u64,
) -> (Vec<V8Frame>, WalkEnd) {
    let l = names.layout().clone();
    let heap = Heap { memory, layout: &l };
    let slot = |fp: u64, off: i32| heap.u64(fp.wrapping_add(off as i64 as u64));
    let mut frames = Vec::new();
    while frames.len() < MAX_FRAMES {
        let (Some(caller), Some(ret), Some(marker)) = (heap.u64(fp), slot(fp, 8), slot(fp, l.fp_context_or_marker))
        else {
            return (frames, WalkEnd::Unreadable(fp));
        };
        if marker & 1 == 0 && marker >> 1 < 64 {
            let frame_type = (marker >> 1) as u32;
            frames.push(V8Frame::Marker { fp, frame_type });
            if frame_type == l.frame_types.entry || frame_type == l.frame_types.construct_entry {
                return (frames, WalkEnd::Entry);
            }
        } else {
            let Some(function) = slot(fp, l.fp_function).filter(|&f| heap.is_js_function(f)) else {
                return (frames, WalkEnd::NotV8(fp));
            };
            frames.extend(js_frames(&heap, names, fp, pc, function));
        }
        if caller <= fp || caller - fp > MAX_FRAME_SIZE {
            return (frames, WalkEnd::BadChain(fp));
        }
        fp = caller;
        pc = ret;
    }
    (frames, WalkEnd::TooDeep)
}

/// Names the JavaScript frame at `fp` running `function`; `pc` is where
/// it continues (the return address its callee saved). Optimised code
/// gives one frame per inlined function, innermost first.
fn js_frames(heap: &Heap<'_>, names: &mut V8Symbolizer, fp: u64, pc: u64, function: u64) -> Vec<V8Frame> {
    let l = heap.layout;
    let slot = |off: i32| heap.u64(fp.wrapping_add(off as i64 as u64));
    let sfi = heap.field(function, l.js_function_shared).unwrap_or(0);
    let info = names.function(heap.memory, sfi);
    let frame = |info: Option<&Arc<FunctionInfo>>, tier, position: Option<u32>, inlined| {
        let (name, script) = match info {
            Some(i) => (i.name.clone(), i.script.clone()),
            None => (Arc::from(ANONYMOUS), None),
        };
        let line = position.zip(info).and_then(|(p, i)| i.line_column(p));
        V8Frame::Js { fp, tier, name, script, line, inlined }
    };
    let bytecode = slot(l.fp_bytecode_array).filter(|&b| heap.typed(b, l.type_bytecode_array).is_some());
    // 13+: optimised code entered by on-stack replacement keeps the
    // interpreter's (or Sparkplug's) frame: told apart by the code
    // around the pc.
    let osr = l.leaptiering
        && bytecode.is_some()
        && code_at_pc(heap, pc.saturating_sub(1))
            .and_then(|c| read_code(heap, c))
            .is_some_and(|c| c.kind > l.code_kind_baseline);
    if let Some(bytecode) = bytecode.filter(|_| !osr) {
        // 13+: no `JSFunction::code`; Sparkplug code is the function data.
        let code = match l.leaptiering {
            true => heap.field(sfi, l.sfi_function_data),
            false => heap.field(function, l.js_function_code),
        };
        let code = code.and_then(|c| read_code(heap, c));
        if code.is_some_and(|c| c.kind == l.code_kind_baseline && c.contains(pc)) {
            return vec![frame(info.as_ref(), Tier::Baseline, None, false)];
        }
        let offset = slot(l.fp_bytecode_offset).and_then(|w| l.smi(w));
        let positions = match info.as_ref().and_then(|i| i.bytecode.clone()) {
            Some((b, p)) if b == bytecode => Some(p),
            _ => bytecode_positions(heap, bytecode).map(Into::into),
        };
        let position = offset.zip(positions).and_then(|(o, p)| bytecode_script_offset(l, &p, o));
        return vec![frame(info.as_ref(), Tier::Bytecode, position, false)];
    }
    // The code around the pc; before 13, else the function's own.
    let around = l.compiled_by_pc.then(|| code_at_pc(heap, pc.saturating_sub(1))).flatten();
    let code = around.or_else(|| (!l.leaptiering).then(|| heap.field(function, l.js_function_code)).flatten());
    let Some(code) = code else {
        // No JIT code around the pc of a function without bytecode: a
        // builtin's (in node's .text).
        let builtin = l.compiled_by_pc && info.as_ref().is_some_and(|i| i.bytecode.is_none());
        return vec![frame(info.as_ref(), if builtin { Tier::Builtin } else { Tier::Compiled }, None, false)];
    };
    let code_info = read_code(heap, code);
    if code_info.as_ref().is_some_and(|c| c.kind == l.code_kind_builtin) {
        return vec![frame(info.as_ref(), Tier::Builtin, None, false)];
    }
    let Some(code_info) = code_info.filter(|c| c.contains(pc)) else {
        return vec![frame(info.as_ref(), Tier::Compiled, None, false)];
    };
    let tier = match code_info.kind.checked_sub(l.code_kind_baseline) {
        Some(1) => Tier::Maglev,
        Some(2) => Tier::Turbofan,
        _ => Tier::Compiled,
    };
    let scopes = code_info.position_at_return(pc).and_then(|e| inlined_scopes(heap, code, e, sfi));
    let Some(scopes) = scopes else {
        return vec![frame(info.as_ref(), tier, None, false)];
    };
    let outermost = scopes.len() - 1;
    scopes
        .into_iter()
        .enumerate()
        .map(|(i, (scope_sfi, position))| {
            let scope_info = if scope_sfi == sfi { info.clone() } else { names.function(heap.memory, scope_sfi) };
            frame(scope_info.as_ref(), tier, Some(position), i < outermost)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use crate::v8::heap::tests::layout;

    /// A stack at 0x7000_0000 of 16-byte frames: `[fp]` caller, `[fp+8]`
    /// return address, `[fp-8]` the marker given per frame.
    fn stack(markers: &[u64], last_caller: Option<u64>) -> FakeMemory {
        let base = 0x7000_0000u64;
        let mut bytes = vec![0u8; 16 * (markers.len() + 2)];
        for (i, &m) in markers.iter().enumerate() {
            let fp = 16 * (i + 1);
            let caller = if i + 1 == markers.len() {
                last_caller.unwrap_or(base + fp as u64 + 16)
            } else {
                base + fp as u64 + 16
            };
            bytes[fp..fp + 8].copy_from_slice(&caller.to_le_bytes());
            bytes[fp - 8..fp].copy_from_slice(&m.to_le_bytes());
        }
        let mut mem = FakeMemory::default();
        mem.add(base, bytes);
        mem
    }

    fn walk(mem: &FakeMemory) -> (Vec<V8Frame>, WalkEnd) {
        let mut names = V8Symbolizer::new(Arc::new(layout()));
        walk_frames(mem, &mut names, 0x7000_0010, 0)
    }

    #[test]
    fn ends_at_the_entry_frame() {
        let l = layout();
        let internal = V8Layout::marker(l.frame_types.internal);
        let entry = V8Layout::marker(l.frame_types.entry);
        let (frames, end) = walk(&stack(&[internal, internal, entry, internal], None));
        assert_eq!(end, WalkEnd::Entry);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[2], V8Frame::Marker { fp: 0x7000_0030, frame_type: l.frame_types.entry });
    }

    #[test]
    fn hostile_chains_end() {
        let l = layout();
        let internal = V8Layout::marker(l.frame_types.internal);
        // A frame pointing at itself.
        let (frames, end) = walk(&stack(&[internal, internal], Some(0x7000_0020)));
        assert_eq!((frames.len(), end), (2, WalkEnd::BadChain(0x7000_0020)));
        // Pointing back down.
        let (_, end) = walk(&stack(&[internal], Some(0x7000_0000)));
        assert_eq!(end, WalkEnd::BadChain(0x7000_0010));
        // Off the end of the stack.
        let (frames, end) = walk(&stack(&[internal, internal], Some(0x7000_0040 + (1 << 19))));
        assert_eq!((frames.len(), end), (2, WalkEnd::Unreadable(0x7000_0040 + (1 << 19))));
        // A context slot that is neither a marker nor before a JSFunction.
        let (_, end) = walk(&stack(&[internal, 0x1234_5679], None));
        assert_eq!(end, WalkEnd::NotV8(0x7000_0020));
        // Endless (well-formed) frames stop at MAX_FRAMES.
        let (frames, end) = walk(&stack(&vec![internal; MAX_FRAMES + 10], None));
        assert_eq!((frames.len(), end), (MAX_FRAMES, WalkEnd::TooDeep));
    }
}
