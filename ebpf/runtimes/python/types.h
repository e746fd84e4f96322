/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPython's part of the contract between the eBPF programs and user
 * space (included by ebpf/types.h through runtime_files.h; the same
 * rules: plain C, fixed-size integers, explicit reserved fields).
 */
#ifndef EP_RUNTIME_PYTHON_TYPES_H
#define EP_RUNTIME_PYTHON_TYPES_H

/* CPython (slot 1): offset << PYTHON_FRAME_OFFSET_SHIFT | code >> 3: the
 * code object's address (8-aligned, below 2^47; 0 when it is not) and
 * the byte offset of the instruction in its bytecode (clamped to
 * PYTHON_FRAME_OFFSET_MAX). See unwinder.bpf.h. */
#define PYTHON_FRAME_OFFSET_SHIFT 44
#define PYTHON_FRAME_OFFSET_MAX ((1ULL << 16) - 1)
#define PYTHON_FRAME_CODE_MASK ((1ULL << PYTHON_FRAME_OFFSET_SHIFT) - 1)
#define PYTHON_FRAME_PAYLOAD_BITS 60

/* How a CPython version chains its frames (struct python_file). */
enum python_frame_model {
	/* 3.8-3.10: PyFrameObject, one per evaluation loop run
	 * (tstate->frame, f_back). */
	PYTHON_FRAMES_OBJECTS = 0,
	/* 3.11: _PyInterpreterFrame; a loop run ends at the frame whose
	 * is_entry is set (that frame is its first). */
	PYTHON_FRAMES_ENTRY_FLAG = 1,
	/* 3.12+: _PyInterpreterFrame; a loop run ends at the shim frame it
	 * pushed on the C stack (owner == FRAME_OWNED_BY_CSTACK). */
	PYTHON_FRAMES_CSTACK_OWNER = 2,
};

/* Where a CPython frame says which instruction runs. */
enum python_lasti {
	/* int f_lasti: a byte offset (3.8, 3.9) */
	PYTHON_LASTI_BYTES = 0,
	/* int f_lasti: an index of 2-byte code units (3.10) */
	PYTHON_LASTI_UNITS = 1,
	/* a pointer into the code object's co_code_adaptive (3.11+:
	 * prev_instr, instr_ptr) */
	PYTHON_LASTI_POINTER = 2,
};

/* _PyInterpreterFrame.owner of the shim frame an evaluation loop run
 * pushes on the C stack (FRAME_OWNED_BY_CSTACK in 3.12 and 3.13,
 * FRAME_OWNED_BY_INTERPRETER from 3.14). Owners above it (3.14's
 * FRAME_OWNED_BY_CSTACK) are not Python code either. */
#define PYTHON_OWNER_CSTACK 3
/* An offset that does not apply to the version. */
#define PYTHON_NO_OFFSET 0xffffffffU
/* Bytes of a frame read at once; every frame field lies below. */
#define PYTHON_FRAME_READ_MAX 128

/* What the unwinder needs of one CPython build (python_files[file_id],
 * set by user space from the ELF symbols and per-version layouts:
 * crates/interpreters). Offsets are in bytes. */
struct python_file {
	__u64 runtime_vaddr;             /* _PyRuntime, ELF virtual address */
	__u16 version;                   /* major << 8 | minor */
	__u8 frame_model;                /* enum python_frame_model */
	__u8 lasti_kind;                 /* enum python_lasti */
	__u32 frame_read_size;           /* bytes of a frame to read (<= PYTHON_FRAME_READ_MAX) */
	__u32 runtime_interpreters_head; /* _PyRuntimeState.interpreters.head */
	__u32 interp_next;               /* PyInterpreterState.next */
	__u32 interp_threads_head;       /* PyInterpreterState.tstate_head / threads.head */
	__u32 tstate_next;               /* PyThreadState.next */
	__u32 tstate_thread_id;          /* PyThreadState.thread_id (pthread_self) */
	__u32 tstate_frame;              /* PyThreadState.frame / cframe / current_frame */
	__u32 cframe_current_frame;      /* _PyCFrame.current_frame, or PYTHON_NO_OFFSET */
	__u32 frame_previous;            /* f_back / previous */
	__u32 frame_code;                /* f_code / f_executable */
	__u32 frame_lasti;               /* f_lasti / prev_instr / instr_ptr */
	__u32 frame_entry;               /* is_entry (3.11) / owner (3.12+) */
	__u32 code_adaptive;             /* PyCodeObject.co_code_adaptive (3.11+) */
	__u32 frame_code_tag_mask;       /* tag bits of f_executable (a _PyStackRef from 3.14), 0 before */
	__u32 reserved;
};

/* The Python unwinder's scratch (struct interp_state, maps.h). */
struct python_scratch {
	/* The next CPython frame to record (0: none left). */
	__u64 frame;
	/* python_files[file_id], copied at the hand-over. */
	struct python_file file;
	/* One frame, as read. */
	__u8 buf[PYTHON_FRAME_READ_MAX];
};

#endif
