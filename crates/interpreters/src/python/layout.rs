//! Where CPython keeps what the unwinder and the symbolizer read, per
//! version: struct offsets of the runtime, interpreter and thread states,
//! frames, code objects, bytes and str objects (x86-64, default build:
//! no `Py_TRACE_REFS`, not free-threaded).
//!
//! Sources: the public headers of each version (`Include/cpython/*.h`,
//! `Include/internal/pycore_{runtime,interp,frame,code}.h`,
//! `Include/cpython/{code,frameobject,unicodeobject,bytesobject}.h`),
//! measured with `offsetof` against the installed headers of 3.8.18,
//! 3.9.18, 3.10.13, 3.11.7, 3.12.1 and 3.13.0 (`tools/python_offsets.c`
//! in this crate prints them). 3.13 and later also describe themselves:
//! the `_Py_DebugOffsets` at the start of `_PyRuntime`
//! (`Include/internal/pycore_debug_offsets.h` from 3.14,
//! `pycore_runtime.h` in 3.13) carries these offsets for the build at
//! hand, and [`Layout::from_debug_offsets`] reads them. The 3.14 and 3.15
//! rows of the table are what Debian's 3.14.10 and 3.15.2 builds say.

/// How a version chains its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameModel {
    /// 3.8-3.10: `PyFrameObject` (`tstate->frame`, `f_back`); the
    /// evaluation loop runs once per Python call.
    Objects,
    /// 3.11: `_PyInterpreterFrame`; one loop run evaluates a chain of
    /// frames ending (outermost) at the one with `is_entry` set.
    EntryFlag,
    /// 3.12+: `_PyInterpreterFrame`; a loop run's chain ends at the
    /// shim frame it pushed on the C stack (`owner ==
    /// FRAME_OWNED_BY_CSTACK`).
    CStackOwner,
}

/// Where a frame says which instruction it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lasti {
    /// `int f_lasti`, a byte offset (3.8, 3.9).
    Bytes,
    /// `int f_lasti`, in 2-byte code units (3.10).
    Units,
    /// A pointer into the code object's `co_code_adaptive` (3.11+:
    /// `prev_instr`, 3.13: `instr_ptr`).
    Pointer,
}

/// The format of a code object's line table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineTableFormat {
    /// `co_lnotab` (3.8, 3.9): (address delta, signed line delta) pairs.
    Lnotab,
    /// `co_linetable` of 3.10 (PEP 626): (address delta, line delta or
    /// -128 for "no line") pairs.
    Linetable310,
    /// `co_linetable` of 3.11+ (PEP 657 location table,
    /// `Objects/locations.md`).
    Locations,
}

/// The offsets of one CPython version (bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interpreters_head: u32,
    /// `PyInterpreterState.next`.
    pub interp_next: u32,
    /// `PyInterpreterState.tstate_head` (3.8-3.10), `.threads.head` (3.11+).
    pub interp_threads_head: u32,
    /// `PyThreadState.next`.
    pub tstate_next: u32,
    /// `PyThreadState.thread_id` (`pthread_self()`).
    pub tstate_thread_id: u32,
    /// `PyThreadState.frame` (3.8-3.10), `.cframe` (3.11, 3.12),
    /// `.current_frame` (3.13+).
    pub tstate_frame: u32,
    /// `_PyCFrame.current_frame` when `tstate_frame` is the cframe.
    pub cframe_current_frame: Option<u32>,
    /// How frames chain.
    pub frame_model: FrameModel,
    /// `f_back` / `previous`.
    pub frame_previous: u32,
    /// `f_code` / `f_executable`.
    pub frame_code: u32,
    /// Low bits of the word at `frame_code` that are tags, not address:
    /// 3.14 made `f_executable` a `_PyStackRef` (its low bit says
    /// "deferred reference"; objects are 8-aligned, so 3 bits are masked).
    pub frame_code_tag_mask: u8,
    /// `f_lasti` / `prev_instr` / `instr_ptr`.
    pub frame_lasti: u32,
    /// What `frame_lasti` holds.
    pub lasti: Lasti,
    /// `is_entry` (3.11) / `owner` (3.12+: the loop run's own frame on the
    /// C stack is [`OWNER_LOOP_ENTRY`]; owners above it, 3.14's
    /// `FRAME_OWNED_BY_CSTACK`, are no Python code either).
    pub frame_entry: Option<u32>,
    /// Bytes of a frame the unwinder reads (covers every field above).
    pub frame_read_size: u32,
    /// `PyCodeObject.co_filename`.
    pub code_filename: u32,
    /// `PyCodeObject.co_name`.
    pub code_name: u32,
    /// `PyCodeObject.co_qualname` (3.11+).
    pub code_qualname: Option<u32>,
    /// `PyCodeObject.co_firstlineno` (int).
    pub code_firstlineno: u32,
    /// `PyCodeObject.co_lnotab` (3.8, 3.9) / `.co_linetable`.
    pub code_linetable: u32,
    /// The line table's format.
    pub line_table: LineTableFormat,
    /// `PyCodeObject.co_code_adaptive` (3.11+).
    pub code_adaptive: Option<u32>,
    /// `PyASCIIObject.length`.
    pub unicode_length: u32,
    /// `PyASCIIObject.state`.
    pub unicode_state: u32,
    /// `sizeof(PyASCIIObject)`: an ASCII string's characters follow.
    pub unicode_ascii_size: u32,
    /// `sizeof(PyCompactUnicodeObject)`: other compact strings'
    /// characters follow.
    pub unicode_compact_size: u32,
    /// `PyBytesObject.ob_size`.
    pub bytes_size: u32,
    /// `PyBytesObject.ob_sval`.
    pub bytes_data: u32,
}

/// `PyObject.ob_type`: the same in every version (no `Py_TRACE_REFS`).
pub const OB_TYPE: u32 = 8;

/// `_PyInterpreterFrame.owner` of the frame an evaluation loop run pushes
/// on the C stack: `FRAME_OWNED_BY_CSTACK` in 3.12 and 3.13,
/// `FRAME_OWNED_BY_INTERPRETER` (same value) from 3.14
/// (`Include/internal/pycore_frame.h`; the loop stores it at entry).
pub const OWNER_LOOP_ENTRY: u8 = 3;

/// `f_executable`'s tag bits from 3.14 (`_PyStackRef`).
const STACKREF_TAG_MASK: u8 = 7;

/// Word indexes (8 bytes each) of the `_Py_DebugOffsets` fields read, per
/// version: the struct grows sections and fields between versions
/// (`Include/internal/pycore_debug_offsets.h`; 3.15's was checked against a
/// live 3.15.2, whose thread state gained three fields before `thread_id`).
struct DebugOffsetsIndex {
    runtime_size: usize,
    interpreters_head: usize,
    interp_size: usize,
    interp_next: usize,
    interp_threads_head: usize,
    tstate_size: usize,
    tstate_next: usize,
    tstate_current_frame: usize,
    tstate_thread_id: usize,
    frame_size: usize,
    frame_previous: usize,
    frame_executable: usize,
    frame_instr_ptr: usize,
    frame_owner: usize,
    code_size: usize,
    code_filename: usize,
    code_name: usize,
    code_qualname: usize,
    code_linetable: usize,
    code_firstlineno: usize,
    code_adaptive: usize,
    bytes_size: usize,
    bytes_ob_size: usize,
    bytes_ob_sval: usize,
    unicode_size: usize,
    unicode_state: usize,
    unicode_length: usize,
    unicode_ascii_size: usize,
}

impl DebugOffsetsIndex {
    /// 3.13: cookie, version, free_threaded, runtime_state{3},
    /// interpreter_state{13}, thread_state{9}, interpreter_frame{6},
    /// code_object{10}, pyobject{2}, type_object{4}, tuple_object{3},
    /// list_object{3}, dict_object{3}, float_object{2}, long_object{3},
    /// bytes_object{3}, unicode_object{4}, gc{2}.
    const V313: DebugOffsetsIndex = DebugOffsetsIndex {
        runtime_size: 3,
        interpreters_head: 5,
        interp_size: 6,
        interp_next: 8,
        interp_threads_head: 9,
        tstate_size: 19,
        tstate_next: 21,
        tstate_current_frame: 23,
        tstate_thread_id: 24,
        frame_size: 28,
        frame_previous: 29,
        frame_executable: 30,
        frame_instr_ptr: 31,
        frame_owner: 33,
        code_size: 34,
        code_filename: 35,
        code_name: 36,
        code_qualname: 37,
        code_linetable: 38,
        code_firstlineno: 39,
        code_adaptive: 43,
        bytes_size: 64,
        bytes_ob_size: 65,
        bytes_ob_sval: 66,
        unicode_size: 67,
        unicode_state: 68,
        unicode_length: 69,
        unicode_ascii_size: 70,
    };
    /// 3.14: interpreter_state{16} (+threads_main, code_object_generation,
    /// tlbc_generation), interpreter_frame{8} (+stackpointer, tlbc_index),
    /// code_object{11} (+co_tlbc), a set_object{4} section before
    /// dict_object; then gen_object, llist_node, debugger_support.
    const V314: DebugOffsetsIndex = DebugOffsetsIndex {
        runtime_size: 3,
        interpreters_head: 5,
        interp_size: 6,
        interp_next: 8,
        interp_threads_head: 9,
        tstate_size: 22,
        tstate_next: 24,
        tstate_current_frame: 26,
        tstate_thread_id: 27,
        frame_size: 31,
        frame_previous: 32,
        frame_executable: 33,
        frame_instr_ptr: 34,
        frame_owner: 36,
        code_size: 39,
        code_filename: 40,
        code_name: 41,
        code_qualname: 42,
        code_linetable: 43,
        code_firstlineno: 44,
        code_adaptive: 48,
        bytes_size: 74,
        bytes_ob_size: 75,
        bytes_ob_sval: 76,
        unicode_size: 77,
        unicode_state: 78,
        unicode_length: 79,
        unicode_ascii_size: 80,
    };
    /// 3.15: thread_state{16} (three fields between current_frame and
    /// thread_id, four after status), an err_stackitem{1} section before
    /// interpreter_frame, type_object{8}.
    const V315: DebugOffsetsIndex = DebugOffsetsIndex {
        runtime_size: 3,
        interpreters_head: 5,
        interp_size: 6,
        interp_next: 8,
        interp_threads_head: 9,
        tstate_size: 22,
        tstate_next: 24,
        tstate_current_frame: 26,
        tstate_thread_id: 30,
        frame_size: 39,
        frame_previous: 40,
        frame_executable: 41,
        frame_instr_ptr: 42,
        frame_owner: 44,
        code_size: 47,
        code_filename: 48,
        code_name: 49,
        code_qualname: 50,
        code_linetable: 51,
        code_firstlineno: 52,
        code_adaptive: 56,
        bytes_size: 86,
        bytes_ob_size: 87,
        bytes_ob_sval: 88,
        unicode_size: 89,
        unicode_state: 90,
        unicode_length: 91,
        unicode_ascii_size: 92,
    };

    fn for_minor(minor: u8) -> Option<&'static DebugOffsetsIndex> {
        match minor {
            13 => Some(&Self::V313),
            14 => Some(&Self::V314),
            15 => Some(&Self::V315),
            _ => None,
        }
    }
}

/// Bytes of `_Py_DebugOffsets` a build must have for the fields read
/// (3.15's last one is word 92).
pub const DEBUG_OFFSETS_READ: usize = 93 * 8;

/// Largest offset into the runtime, interpreter and thread states a
/// build's `_Py_DebugOffsets` may give.
const MAX_STATE_OFFSET: u64 = 1 << 20;
/// Largest offset into a code, bytes or str object it may give (objects
/// are read whole up to their last field used).
const MAX_OBJECT_OFFSET: u64 = 4096;

impl Layout {
    /// The layout of CPython `major.minor`, for 3.8 to 3.15.
    pub fn for_version(major: u8, minor: u8) -> Option<Layout> {
        if major != 3 {
            return None;
        }
        // Pieces common to several versions.
        let objects = |frame_lasti: u32, lasti: Lasti, linetable: LineTableFormat| Layout {
            runtime_interpreters_head: 32,
            interp_next: 0,
            interp_threads_head: 8,
            tstate_next: 8,
            tstate_thread_id: 176,
            tstate_frame: 24,
            cframe_current_frame: None,
            frame_model: FrameModel::Objects,
            frame_previous: 24,
            frame_code: 32,
            frame_code_tag_mask: 0,
            frame_lasti,
            lasti,
            frame_entry: None,
            frame_read_size: frame_lasti + 8,
            code_filename: 104,
            code_name: 112,
            code_qualname: None,
            code_firstlineno: 40,
            code_linetable: 120,
            line_table: linetable,
            code_adaptive: None,
            unicode_length: 16,
            unicode_state: 32,
            unicode_ascii_size: 48,
            unicode_compact_size: 72,
            bytes_size: 16,
            bytes_data: 32,
        };
        let v313 = Layout {
            runtime_interpreters_head: 632,
            interp_next: 7264,
            interp_threads_head: 7344,
            tstate_next: 8,
            tstate_thread_id: 152,
            tstate_frame: 72,
            cframe_current_frame: None,
            frame_model: FrameModel::CStackOwner,
            frame_previous: 8,
            frame_code: 0,
            frame_code_tag_mask: 0,
            frame_lasti: 56,
            lasti: Lasti::Pointer,
            frame_entry: Some(70),
            frame_read_size: 72,
            code_filename: 112,
            code_name: 120,
            code_qualname: Some(128),
            code_firstlineno: 68,
            code_linetable: 136,
            line_table: LineTableFormat::Locations,
            code_adaptive: Some(200),
            unicode_length: 16,
            unicode_state: 32,
            unicode_ascii_size: 40,
            unicode_compact_size: 56,
            bytes_size: 16,
            bytes_data: 32,
        };
        match minor {
            8 | 9 => Some(objects(104, Lasti::Bytes, LineTableFormat::Lnotab)),
            10 => Some(objects(96, Lasti::Units, LineTableFormat::Linetable310)),
            11 => Some(Layout {
                runtime_interpreters_head: 40,
                interp_next: 0,
                interp_threads_head: 16,
                tstate_next: 8,
                tstate_thread_id: 152,
                tstate_frame: 56,
                cframe_current_frame: Some(8),
                frame_model: FrameModel::EntryFlag,
                frame_previous: 48,
                frame_code: 32,
                frame_code_tag_mask: 0,
                frame_lasti: 56,
                lasti: Lasti::Pointer,
                frame_entry: Some(68),
                frame_read_size: 72,
                code_filename: 112,
                code_name: 120,
                code_qualname: Some(128),
                code_firstlineno: 72,
                code_linetable: 136,
                line_table: LineTableFormat::Locations,
                code_adaptive: Some(184),
                unicode_length: 16,
                unicode_state: 32,
                unicode_ascii_size: 48,
                unicode_compact_size: 72,
                bytes_size: 16,
                bytes_data: 32,
            }),
            12 => Some(Layout {
                runtime_interpreters_head: 40,
                interp_next: 0,
                interp_threads_head: 72,
                tstate_next: 8,
                tstate_thread_id: 136,
                tstate_frame: 56,
                cframe_current_frame: Some(0),
                frame_model: FrameModel::CStackOwner,
                frame_previous: 8,
                frame_code: 0,
                frame_code_tag_mask: 0,
                frame_lasti: 56,
                lasti: Lasti::Pointer,
                frame_entry: Some(70),
                frame_read_size: 72,
                code_filename: 112,
                code_name: 120,
                code_qualname: Some(128),
                code_firstlineno: 68,
                code_linetable: 136,
                line_table: LineTableFormat::Locations,
                code_adaptive: Some(192),
                unicode_length: 16,
                unicode_state: 32,
                unicode_ascii_size: 40,
                unicode_compact_size: 56,
                bytes_size: 16,
                bytes_data: 32,
            }),
            13 => Some(v313),
            // Debian's 3.14.10 and 3.15.2 (their `_Py_DebugOffsets`).
            14 => Some(Layout {
                runtime_interpreters_head: 808,
                interp_next: 7272,
                interp_threads_head: 7344,
                frame_code_tag_mask: STACKREF_TAG_MASK,
                frame_entry: Some(74),
                frame_read_size: 80,
                code_adaptive: Some(208),
                ..v313
            }),
            15 => Some(Layout {
                runtime_interpreters_head: 936,
                interp_next: 7264,
                interp_threads_head: 7336,
                tstate_thread_id: 176,
                frame_code_tag_mask: STACKREF_TAG_MASK,
                frame_entry: Some(74),
                frame_read_size: 80,
                code_adaptive: Some(208),
                ..v313
            }),
            _ => None,
        }
    }

    /// The layout a 3.13+ build describes in its `_Py_DebugOffsets` (the
    /// first bytes of `_PyRuntime`'s initial value): `Err` says why it
    /// cannot be used (a version whose struct is not known here,
    /// free-threaded, implausible).
    pub fn from_debug_offsets(data: &[u8]) -> Result<(u32, Layout), String> {
        let word = |i: usize| -> Result<u64, String> {
            data.get(8 * i..8 * i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .ok_or_else(|| "_Py_DebugOffsets is truncated".to_string())
        };
        if data.get(..8) != Some(b"xdebugpy") {
            return Err("no _Py_DebugOffsets cookie".into());
        }
        let version = word(1)? as u32;
        let minor = (version >> 16) as u8;
        let index = match DebugOffsetsIndex::for_minor(minor) {
            Some(index) if version >> 24 == 3 => index,
            _ => return Err(format!("_Py_DebugOffsets of version {version:#x}, not 3.13 to 3.15")),
        };
        if word(2)? != 0 {
            return Err("a free-threaded build".into());
        }
        let field = |i: usize, limit: u64| -> Result<u32, String> {
            let v = word(i)?;
            if v >= limit || v > u64::from(u32::MAX) {
                return Err(format!("implausible _Py_DebugOffsets field {i}: {v}"));
            }
            Ok(v as u32)
        };
        // The states are large (the interpreter's is ~220 KiB); objects
        // are read whole, so their offsets must stay small.
        let runtime_size = word(index.runtime_size)?.min(MAX_STATE_OFFSET);
        let interp_size = word(index.interp_size)?.min(MAX_STATE_OFFSET);
        let tstate_size = word(index.tstate_size)?.min(MAX_STATE_OFFSET);
        let frame_size = word(index.frame_size)?.min(u64::from(crate::python::FRAME_READ_MAX) - 8);
        let code_size = word(index.code_size)?.min(MAX_OBJECT_OFFSET);
        let bytes_size = word(index.bytes_size)?.min(MAX_OBJECT_OFFSET);
        let unicode_size = word(index.unicode_size)?.min(MAX_OBJECT_OFFSET);
        let frame_previous = field(index.frame_previous, frame_size)?;
        let frame_code = field(index.frame_executable, frame_size)?;
        let frame_lasti = field(index.frame_instr_ptr, frame_size)?;
        let frame_owner = field(index.frame_owner, frame_size)?;
        let read_size = [frame_previous + 8, frame_code + 8, frame_lasti + 8, frame_owner + 1]
            .into_iter()
            .max()
            .unwrap_or(0)
            .next_multiple_of(8);
        let ascii_size = field(index.unicode_ascii_size, unicode_size + 1)?;
        let layout = Layout {
            runtime_interpreters_head: field(index.interpreters_head, runtime_size)?,
            interp_next: field(index.interp_next, interp_size)?,
            interp_threads_head: field(index.interp_threads_head, interp_size)?,
            tstate_next: field(index.tstate_next, tstate_size)?,
            tstate_thread_id: field(index.tstate_thread_id, tstate_size)?,
            tstate_frame: field(index.tstate_current_frame, tstate_size)?,
            cframe_current_frame: None,
            frame_model: FrameModel::CStackOwner,
            frame_previous,
            frame_code,
            frame_code_tag_mask: if minor >= 14 { STACKREF_TAG_MASK } else { 0 },
            frame_lasti,
            lasti: Lasti::Pointer,
            frame_entry: Some(frame_owner),
            frame_read_size: read_size,
            code_filename: field(index.code_filename, code_size)?,
            code_name: field(index.code_name, code_size)?,
            code_qualname: Some(field(index.code_qualname, code_size)?),
            code_linetable: field(index.code_linetable, code_size)?,
            code_firstlineno: field(index.code_firstlineno, code_size)?,
            line_table: LineTableFormat::Locations,
            code_adaptive: Some(field(index.code_adaptive, code_size + 1)?),
            bytes_size: field(index.bytes_ob_size, bytes_size)?,
            bytes_data: field(index.bytes_ob_sval, bytes_size + 1)?,
            unicode_state: field(index.unicode_state, unicode_size)?,
            unicode_length: field(index.unicode_length, unicode_size)?,
            unicode_ascii_size: ascii_size,
            // PyCompactUnicodeObject: PyASCIIObject, then utf8_length and
            // utf8.
            unicode_compact_size: ascii_size + 16,
        };
        Ok((version, layout))
    }

    /// Bytes of a code object to read to reach every field used.
    pub fn code_read_size(&self) -> u32 {
        [
            Some(OB_TYPE),
            Some(self.code_filename),
            Some(self.code_name),
            self.code_qualname,
            Some(self.code_linetable),
            Some(self.code_firstlineno),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
            + 8
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn every_supported_version_has_a_layout_within_the_frame_read() {
        for minor in 8..=15 {
            let l = Layout::for_version(3, minor).unwrap();
            assert!(l.frame_read_size <= crate::python::FRAME_READ_MAX, "3.{minor}");
            for off in [l.frame_previous, l.frame_code, l.frame_lasti] {
                assert!(off + 8 <= l.frame_read_size, "3.{minor}: {off}");
            }
            if let Some(e) = l.frame_entry {
                assert!(e < l.frame_read_size);
            }
            assert_eq!(l.cframe_current_frame.is_some(), minor == 11 || minor == 12);
            assert_eq!(l.frame_code_tag_mask != 0, minor >= 14, "3.{minor}: f_executable is a _PyStackRef");
        }
        assert!(Layout::for_version(3, 7).is_none());
        assert!(Layout::for_version(3, 16).is_none());
        assert!(Layout::for_version(2, 7).is_none());
    }

    /// The 3.13.0 debug offsets as the build writes them.
    pub(crate) fn debug_offsets_313() -> Vec<u8> {
        let words: [u64; 73] = [
            0, 0x030d00f0, 0, 283320, 608, 632, 194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768,
            7760, 304, 0, 8, 16, 72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128, 136, 68, 52, 96, 104,
            200, 16, 8, 416, 24, 88, 168, 32, 24, 16, 40, 24, 16, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32,
            16, 40, 240, 200,
        ];
        let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        b[..8].copy_from_slice(b"xdebugpy");
        b
    }

    /// `_Py_DebugOffsets` as a build writes it, from its words (the
    /// cookie's word is replaced).
    fn debug_offsets_bytes(words: &[u64]) -> Vec<u8> {
        let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        b[..8].copy_from_slice(b"xdebugpy");
        b
    }

    /// The first 93 words of Debian's 3.14.10 `/usr/bin/python3.14`
    /// `_PyRuntime` (libpython3.14.so.1.0 has the same).
    pub(crate) fn debug_offsets_314() -> Vec<u8> {
        debug_offsets_bytes(&[
            0, 0x30e0af0, 0, 316616, 784, 808, 225864, 7280, 7272, 7344, 7360, 7408, 7688, 7672, 7680, 16, 7784, 0,
            7800, 7792, 7992, 0, 832, 0, 8, 16, 72, 152, 160, 232, 32, 88, 8, 0, 56, 80, 74, 64, 0, 216, 112, 120, 128,
            136, 68, 52, 96, 104, 208, 0, 16, 8, 416, 24, 88, 168, 40, 32, 16, 40, 24, 16, 200, 24, 40, 32, 48, 32, 40,
            24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40, 264, 192, 160, 24, 72, 67, 0, 8, 24, 304, 8076, 0,
        ])
    }

    /// The first 93 words of Debian's 3.15.2 `/usr/bin/python3.15`
    /// `_PyRuntime` (libpython3.15.so.1.0 has the same).
    pub(crate) fn debug_offsets_315() -> Vec<u8> {
        debug_offsets_bytes(&[
            0, 0x30f02f0, 0, 346568, 912, 936, 226240, 7272, 7264, 7336, 7352, 7400, 7592, 7576, 7584, 16, 7736, 0,
            7752, 7744, 7944, 0, 888, 0, 8, 16, 72, 80, 88, 96, 176, 184, 256, 32, 36, 40, 136, 288, 0, 88, 8, 0, 56,
            80, 74, 64, 0, 216, 112, 120, 128, 136, 68, 52, 96, 104, 208, 0, 16, 8, 424, 24, 88, 168, 32, 288, 944,
            888, 40, 32, 16, 40, 24, 16, 200, 24, 40, 32, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40,
        ])
    }

    #[test]
    fn debug_offsets_of_314_and_315_agree_with_the_table() {
        for (minor, bytes, hex) in [(14, debug_offsets_314(), 0x030e0af0), (15, debug_offsets_315(), 0x030f02f0)] {
            assert_eq!(bytes.len(), DEBUG_OFFSETS_READ);
            let (version, from_build) = Layout::from_debug_offsets(&bytes).unwrap();
            assert_eq!(version, hex);
            assert_eq!(from_build, Layout::for_version(3, minor).unwrap(), "3.{minor}");
        }
        // What changed from 3.13, each checked against a live process
        // (crates/interpreters/tests/live_python.rs): the frame's owner
        // moved, the thread id of 3.15 too.
        let (_, l14) = Layout::from_debug_offsets(&debug_offsets_314()).unwrap();
        let (_, l15) = Layout::from_debug_offsets(&debug_offsets_315()).unwrap();
        assert_eq!((l14.frame_entry, l14.tstate_thread_id, l14.tstate_frame), (Some(74), 152, 72));
        assert_eq!((l15.frame_entry, l15.tstate_thread_id, l15.tstate_frame), (Some(74), 176, 72));
        // 3.14's words read as 3.13's struct would put the owner elsewhere.
        let mut as_313 = debug_offsets_314();
        as_313[8..16].copy_from_slice(&0x030d00f0u64.to_le_bytes());
        assert_ne!(Layout::from_debug_offsets(&as_313).map(|(_, l)| l.frame_entry), Ok(Some(74)));
    }

    #[test]
    fn debug_offsets_of_313_agree_with_the_table() {
        let (version, from_build) = Layout::from_debug_offsets(&debug_offsets_313()).unwrap();
        assert_eq!(version, 0x030d00f0);
        assert_eq!(from_build, Layout::for_version(3, 13).unwrap());
    }

    #[test]
    fn malformed_debug_offsets_are_refused() {
        let good = debug_offsets_313();
        assert!(Layout::from_debug_offsets(&good[..100]).is_err(), "truncated");
        let mut b = good.clone();
        b[0] = b'X';
        assert!(Layout::from_debug_offsets(&b).is_err(), "cookie");
        let mut b = good.clone();
        b[16] = 1;
        assert!(Layout::from_debug_offsets(&b).unwrap_err().contains("free-threaded"));
        let mut b = good.clone();
        b[8 * 24..8 * 25].copy_from_slice(&100_000u64.to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "thread_id beyond the thread state");
        // Huge objects: refused rather than read whole.
        let mut b = good.clone();
        b[8 * 34..8 * 35].copy_from_slice(&(1u64 << 40).to_le_bytes());
        b[8 * 35..8 * 36].copy_from_slice(&(1u64 << 30).to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "co_filename 1 GiB into the code object");
        let mut b = good.clone();
        b[8 * 28..8 * 29].copy_from_slice(&4096u64.to_le_bytes());
        b[8 * 29..8 * 30].copy_from_slice(&200u64.to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "a frame field beyond what the unwinder reads");
        let mut b = good;
        b[8..16].copy_from_slice(&0x031000f0u64.to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "3.16");
        let mut b = debug_offsets_315();
        b[8..16].copy_from_slice(&0x020700f0u64.to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "2.7");
    }
}
