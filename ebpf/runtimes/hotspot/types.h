/* SPDX-License-Identifier: GPL-2.0 */
/*
 * HotSpot's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_HOTSPOT_TYPES_H
#define EP_RUNTIME_HOTSPOT_TYPES_H

/* HotSpot (slot 2): an interpreted frame is bci <<
 * HOTSPOT_FRAME_OFFSET_SHIFT | Method* >> 3 (HOTSPOT_NO_BCI for none). A
 * compiled one (HOTSPOT_FRAME_COMPILED) is HOTSPOT_FRAME_COMPILED |
 * mark's low 16 bits << HOTSPOT_FRAME_OFFSET_SHIFT | mark's next 12 bits
 * << HOTSPOT_MARK_HIGH_SHIFT | [HOTSPOT_PC_EXACT] | pc - CodeCache's low
 * bound (31 bits; 0: unknown): the mark is the blob's generation (the
 * int at nmethod::_compile_id's offset, HOTSPOT_MARK_BITS of it), read
 * again when naming, so that a blob freed and replaced at the same place
 * is unknown, never another method. See unwinder.bpf.h. */
#define HOTSPOT_FRAME_COMPILED (1ULL << 60)
#define HOTSPOT_FRAME_OFFSET_SHIFT 44
#define HOTSPOT_FRAME_OFFSET_MAX 0xffffULL
#define HOTSPOT_NO_BCI 0xffffULL
#define HOTSPOT_CODE_OFFSET_MAX ((1ULL << 31) - 1)
#define HOTSPOT_PC_EXACT (1ULL << 31)
#define HOTSPOT_MARK_HIGH_SHIFT 32
#define HOTSPOT_MARK_BITS 28
#define HOTSPOT_FRAME_PAYLOAD_BITS 61

/* HotSpot (unwinder.bpf.h). One code heap of a JVM's code
 * cache: [low, high), and its segment map (one byte per segment of
 * 2^log2_segment_size bytes: 0xff free, 0 a block's first segment, else
 * how many segments to step back). */
#define HOTSPOT_MAX_HEAPS 4

struct hotspot_heap {
	__u64 low;
	__u64 high;
	__u64 segmap;
	__u32 log2_segment_size;
	__u32 reserved;
};

/* What the HotSpot unwinder needs of one JVM process
 * (hotspot_processes[tgid], set by user space from the JVM's vmStructs
 * tables: crates/interpreters/src/hotspot). Addresses are the process's;
 * offsets are in bytes, slots in words from the frame pointer. The code
 * cache's bounds and heaps are set while the VM starts: user space gives
 * them when it could read them, else the unwinder reads them (through
 * the code_* addresses and offsets) and stores them here, once. */
struct hotspot_process {
	__u64 code_low;                  /* CodeCache::_low_bound (0: not read yet) */
	__u64 code_high;                 /* CodeCache::_high_bound */
	__u64 interpreter_code;          /* &AbstractInterpreter::_code (StubQueue*) */
	__u64 call_stub_return;          /* &StubRoutines::_call_stub_return_address */
	__u64 code_low_bound;            /* &CodeCache::_low_bound */
	__u64 code_high_bound;           /* &CodeCache::_high_bound */
	__u64 code_heaps;                /* &CodeCache::_heaps (GrowableArray<CodeHeap*>*) */
	__u32 growable_array_len;        /* GrowableArrayBase::_len (int) */
	__u32 growable_array_data;       /* GrowableArray<int>::_data */
	__u32 code_heap_memory;          /* CodeHeap::_memory (VirtualSpace) */
	__u32 code_heap_segmap;          /* CodeHeap::_segmap (VirtualSpace) */
	__u32 code_heap_log2_segment_size; /* CodeHeap::_log2_segment_size (int) */
	__u32 virtual_space_low;         /* VirtualSpace::_low_boundary */
	__u32 virtual_space_high;        /* VirtualSpace::_high_boundary */
	__u32 reserved2;
	struct hotspot_heap heaps[HOTSPOT_MAX_HEAPS];
	__u32 heap_count;                /* 0: not read yet */
	__u32 heap_block_size;           /* sizeof(HeapBlock): the blob follows */
	__u32 heap_block_used;           /* HeapBlock::_header._used */
	__u32 stub_queue_buffer;         /* StubQueue::_stub_buffer */
	__u32 stub_queue_limit;          /* StubQueue::_buffer_limit (int) */
	__u32 blob_frame_size;           /* CodeBlob::_frame_size (int, words) */
	__u32 method_const_method;       /* Method::_constMethod */
	__u32 const_method_size;         /* sizeof(ConstMethod): the bytecodes follow */
	__s32 interp_method_slot;        /* Method* at fp + 8 * slot */
	__s32 interp_bcp_slot;           /* bcp at fp + 8 * slot */
	__s32 interp_sender_sp_slot;     /* the caller's sp at fp + 8 * slot */
	__u32 nmethod_compile_id;        /* nmethod::_compile_id (int): a compiled frame's mark */
	__u32 nmethod_orig_pc_offset;    /* nmethod::_orig_pc_offset (int): bytes above a frame's sp */
	__u32 nmethod_deopt_handler;     /* the nmethod's deoptimisation handler (0: none): */
	__u32 deopt_handler_is_offset;   /* 0: a pointer there (JDK < 23); 1: an int, from the blob */
	/* Where a compiled frame's leaf pc may lie before its frame is built
	 * or after it is torn down (hotspot_leaf_shape): */
	__u32 blob_code_begin;           /* CodeBlob::_code_begin (pointer), or _code_offset (int, from the blob) */
	__u32 blob_frame_complete;       /* CodeBlob::_frame_complete_offset (from the code's start) */
	__u32 nmethod_verified_entry;    /* _verified_entry_point (pointer), or _verified_entry_offset (u16, from the code's start) */
	__u32 blob_kind;                 /* CodeBlob::_kind (u8), when HOTSPOT_HAS_KIND */
	__u32 blob_kind_nmethod;         /* CodeBlobKind::Nmethod */
	__u32 code_flags;                /* HOTSPOT_CODE_OFFSETS | HOTSPOT_ENTRY_OFFSETS | ... */
	__u32 reserved;
};

/* struct hotspot_process's code_flags. */
#define HOTSPOT_CODE_OFFSETS 1      /* blob_code_begin is _code_offset (JDK 23+) */
#define HOTSPOT_ENTRY_OFFSETS 2     /* nmethod_verified_entry is a u16 offset (JDK 23+) */
#define HOTSPOT_FRAME_COMPLETE_16 4 /* _frame_complete_offset is int16_t (JDK 23+) */
#define HOTSPOT_HAS_KIND 8          /* blob_kind is set (JDK 23+) */

/* Words of an interpreted frame read at once: slots -8 .. +1 from its
 * frame pointer (the bcp is the lowest, the return address the highest). */
#define HOTSPOT_FRAME_SLOTS 10
#define HOTSPOT_LOWEST_SLOT (-8)

/* The HotSpot unwinder's scratch (struct interp_state, maps.h). */
struct hotspot_scratch {
	/* hotspot_processes[tgid], copied at the hand-over (with the code
	 * cache's bounds and heaps: hotspot_code_cache). */
	struct hotspot_process process;
	/* The template interpreter's code [low, high), read at the
	 * hand-over (set while the JVM starts). */
	__u64 interpreter_low;
	__u64 interpreter_high;
	/* StubRoutines::_call_stub_return_address. */
	__u64 call_stub_return;
	/* The sampled frame's enum hotspot_shape (set at a program run's
	 * start; used while the pc is exact). */
	__u32 leaf_shape;
	/* HOTSPOT_SHAPE_STUB_SLOT: the sampled stub's return address at sp
	 * + 8 * leaf_slot, the words its caller pushed for it above, and
	 * whether the caller's rbp is at sp. */
	__u8 leaf_slot;
	__u8 leaf_pushed;
	__u8 leaf_fp_at_sp;
	__u8 reserved;
	/* An interpreted frame's slots fp - 64 .. fp + 8, as read. */
	__u64 slots[HOTSPOT_FRAME_SLOTS];
};

#endif
