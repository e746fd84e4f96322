//! What HotSpot's BPF unwinder (`ebpf/runtimes/hotspot/unwinder.bpf.h`) keeps in its
//! map `hotspot_processes` ([`profiler_contract::c`]'s struct of it, written
//! field by field), and the layout of its frame words' payload.

use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_contract::c;

// The payload's fields lie within the payload's width, and do not overlap.
const _: () = {
    assert!(c::HOTSPOT_FRAME_COMPILED < 1 << c::HOTSPOT_FRAME_PAYLOAD_BITS);
    assert!(c::HOTSPOT_FRAME_OFFSET_MAX << c::HOTSPOT_FRAME_OFFSET_SHIFT < c::HOTSPOT_FRAME_COMPILED);
};

/// Set in a HotSpot frame word's payload for compiled code.
pub const HOTSPOT_FRAME_COMPILED: u64 = c::HOTSPOT_FRAME_COMPILED;
/// Where a HotSpot frame word's payload keeps the bci (or the low bits of
/// a compiled frame's mark).
pub const HOTSPOT_FRAME_OFFSET_SHIFT: u32 = c::HOTSPOT_FRAME_OFFSET_SHIFT;
/// The largest bci of a HotSpot frame word (larger clamp).
pub const HOTSPOT_FRAME_OFFSET_MAX: u64 = c::HOTSPOT_FRAME_OFFSET_MAX;
/// The bci of an interpreted HotSpot frame that has none (a native
/// method).
pub const HOTSPOT_NO_BCI: u64 = c::HOTSPOT_NO_BCI;

/// Most code heaps of a JVM the HotSpot unwinder looks blobs up in
/// (`HOTSPOT_MAX_HEAPS`).
pub const HOTSPOT_MAX_HEAPS: usize = c::HOTSPOT_MAX_HEAPS as usize;
/// A compiled HotSpot frame word's pc offset in the code cache (its low
/// bits; `HOTSPOT_CODE_OFFSET_MAX` in `ebpf/runtimes/hotspot/types.h`).
pub const HOTSPOT_CODE_OFFSET_MAX: u64 = c::HOTSPOT_CODE_OFFSET_MAX as u64;
/// Set in a compiled HotSpot frame word when its pc is the sampled
/// instruction, not a return address.
pub const HOTSPOT_PC_EXACT: u64 = c::HOTSPOT_PC_EXACT as u64;
/// Where a compiled HotSpot frame word keeps its mark's bits above 16.
pub const HOTSPOT_MARK_HIGH_SHIFT: u32 = c::HOTSPOT_MARK_HIGH_SHIFT;
/// Bits of a compiled HotSpot frame's mark (its blob's compile id) kept.
pub const HOTSPOT_MARK_BITS: u32 = c::HOTSPOT_MARK_BITS;

/// `struct hotspot_heap`: one code heap of a JVM's code cache, in the
/// process's addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotspotHeapValue {
    /// Its first address.
    pub low: u64,
    /// One past its last.
    pub high: u64,
    /// Its segment map.
    pub segmap: u64,
    /// log2 of its segment size.
    pub log2_segment_size: u32,
}

/// `struct hotspot_process`: what the HotSpot unwinder needs of one JVM
/// process. Addresses are the process's; offsets in bytes; slots in
/// words from an interpreted frame's frame pointer.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotspotProcessValue {
    /// `CodeCache::_low_bound`.
    pub code_low: u64,
    /// `CodeCache::_high_bound`.
    pub code_high: u64,
    /// Address of `AbstractInterpreter::_code`.
    pub interpreter_code: u64,
    /// Address of `StubRoutines::_call_stub_return_address`.
    pub call_stub_return: u64,
    /// Address of `CodeCache::_low_bound`.
    pub code_low_bound: u64,
    /// Address of `CodeCache::_high_bound`.
    pub code_high_bound: u64,
    /// Address of `CodeCache::_heaps`.
    pub code_heaps: u64,
    pub growable_array_len: u32,
    pub growable_array_data: u32,
    pub code_heap_memory: u32,
    pub code_heap_segmap: u32,
    pub code_heap_log2_segment_size: u32,
    pub virtual_space_low: u32,
    pub virtual_space_high: u32,
    /// At most [`HOTSPOT_MAX_HEAPS`] (more are dropped).
    pub heaps: [HotspotHeapValue; HOTSPOT_MAX_HEAPS],
    pub heap_count: u32,
    pub heap_block_size: u32,
    pub heap_block_used: u32,
    pub stub_queue_buffer: u32,
    pub stub_queue_limit: u32,
    pub blob_frame_size: u32,
    pub method_const_method: u32,
    pub const_method_size: u32,
    pub interp_method_slot: i32,
    pub interp_bcp_slot: i32,
    pub interp_sender_sp_slot: i32,
    /// `nmethod::_compile_id`: the mark of compiled frame words.
    pub nmethod_compile_id: u32,
    /// `nmethod::_orig_pc_offset`.
    pub nmethod_orig_pc_offset: u32,
    /// The deoptimisation handler's field (0: none).
    pub nmethod_deopt_handler: u32,
    /// Whether that field is an `int` offset from the blob (JDK 23+),
    /// not a pointer.
    pub deopt_handler_is_offset: bool,
    /// `CodeBlob::_code_begin` (a pointer) or `_code_offset` (an `int`
    /// from the blob, with [`HOTSPOT_CODE_OFFSETS`]).
    pub blob_code_begin: u32,
    /// `CodeBlob::_frame_complete_offset`.
    pub blob_frame_complete: u32,
    /// `nmethod::_verified_entry_point` (a pointer) or
    /// `_verified_entry_offset` (`u16`, with [`HOTSPOT_ENTRY_OFFSETS`]).
    pub nmethod_verified_entry: u32,
    /// `CodeBlob::_kind` (with [`HOTSPOT_HAS_KIND`]).
    pub blob_kind: u32,
    /// `CodeBlobKind::Nmethod`.
    pub blob_kind_nmethod: u32,
    /// `HOTSPOT_*` flags: how the fields above are read.
    pub code_flags: u32,
}

/// `code_flags`: `blob_code_begin` is `_code_offset` (JDK 23+).
pub const HOTSPOT_CODE_OFFSETS: u32 = c::HOTSPOT_CODE_OFFSETS;
/// `code_flags`: `nmethod_verified_entry` is a `u16` offset (JDK 23+).
pub const HOTSPOT_ENTRY_OFFSETS: u32 = c::HOTSPOT_ENTRY_OFFSETS;
/// `code_flags`: `_frame_complete_offset` is `int16_t` (JDK 23+).
pub const HOTSPOT_FRAME_COMPLETE_16: u32 = c::HOTSPOT_FRAME_COMPLETE_16;
/// `code_flags`: `blob_kind` is set (JDK 23+).
pub const HOTSPOT_HAS_KIND: u32 = c::HOTSPOT_HAS_KIND;

impl HotspotProcessValue {
    /// The map value, field by field.
    pub(crate) fn to_c(self) -> c::hotspot_process {
        let heap = |h: HotspotHeapValue| c::hotspot_heap {
            low: h.low,
            high: h.high,
            segmap: h.segmap,
            log2_segment_size: h.log2_segment_size,
            reserved: 0,
        };
        c::hotspot_process {
            code_low: self.code_low,
            code_high: self.code_high,
            interpreter_code: self.interpreter_code,
            call_stub_return: self.call_stub_return,
            code_low_bound: self.code_low_bound,
            code_high_bound: self.code_high_bound,
            code_heaps: self.code_heaps,
            growable_array_len: self.growable_array_len,
            growable_array_data: self.growable_array_data,
            code_heap_memory: self.code_heap_memory,
            code_heap_segmap: self.code_heap_segmap,
            code_heap_log2_segment_size: self.code_heap_log2_segment_size,
            virtual_space_low: self.virtual_space_low,
            virtual_space_high: self.virtual_space_high,
            reserved2: 0,
            heaps: self.heaps.map(heap),
            heap_count: self.heap_count.min(HOTSPOT_MAX_HEAPS as u32),
            heap_block_size: self.heap_block_size,
            heap_block_used: self.heap_block_used,
            stub_queue_buffer: self.stub_queue_buffer,
            stub_queue_limit: self.stub_queue_limit,
            blob_frame_size: self.blob_frame_size,
            method_const_method: self.method_const_method,
            const_method_size: self.const_method_size,
            interp_method_slot: self.interp_method_slot,
            interp_bcp_slot: self.interp_bcp_slot,
            interp_sender_sp_slot: self.interp_sender_sp_slot,
            nmethod_compile_id: self.nmethod_compile_id,
            nmethod_orig_pc_offset: self.nmethod_orig_pc_offset,
            nmethod_deopt_handler: self.nmethod_deopt_handler,
            deopt_handler_is_offset: u32::from(self.deopt_handler_is_offset),
            blob_code_begin: self.blob_code_begin,
            blob_frame_complete: self.blob_frame_complete,
            nmethod_verified_entry: self.nmethod_verified_entry,
            blob_kind: self.blob_kind,
            blob_kind_nmethod: self.blob_kind_nmethod,
            code_flags: self.code_flags,
            reserved: 0,
        }
    }

    /// Its value in `hotspot_processes`.
    pub fn map_value(self) -> RuntimeMapValue {
        RuntimeMapValue::new(InterpreterUnwinder::Hotspot, &self.to_c())
    }
}
