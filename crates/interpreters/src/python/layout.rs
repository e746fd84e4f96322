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
//! in this crate prints them). 3.13 also describes itself: the
//! `_Py_DebugOffsets` at the start of `_PyRuntime` (PEP 768's precursor,
//! `Include/internal/pycore_runtime.h`) carries these offsets for the
//! build at hand, and [`Layout::from_debug_offsets`] prefers them.

/// How a version chains its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameModel {
    /// 3.8-3.10: `PyFrameObject` (`tstate->frame`, `f_back`); the
    /// evaluation loop runs once per Python call.
    Objects,
    /// 3.11: `_PyInterpreterFrame`; one loop run evaluates a chain of
    /// frames ending (outermost) at the one with `is_entry` set.
    EntryFlag,
    /// 3.12, 3.13: `_PyInterpreterFrame`; a loop run's chain ends at the
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
    /// `.current_frame` (3.13).
    pub tstate_frame: u32,
    /// `_PyCFrame.current_frame` when `tstate_frame` is the cframe.
    pub cframe_current_frame: Option<u32>,
    /// How frames chain.
    pub frame_model: FrameModel,
    /// `f_back` / `previous`.
    pub frame_previous: u32,
    /// `f_code` / `f_executable`.
    pub frame_code: u32,
    /// `f_lasti` / `prev_instr` / `instr_ptr`.
    pub frame_lasti: u32,
    /// What `frame_lasti` holds.
    pub lasti: Lasti,
    /// `is_entry` (3.11) / `owner` (3.12+).
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

/// Largest offset into the runtime, interpreter and thread states a
/// build's `_Py_DebugOffsets` may give.
const MAX_STATE_OFFSET: u64 = 1 << 20;
/// Largest offset into a code, bytes or str object it may give (objects
/// are read whole up to their last field used).
const MAX_OBJECT_OFFSET: u64 = 4096;

impl Layout {
    /// The layout of CPython `major.minor`, for 3.8 to 3.13.
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
            13 => Some(Layout {
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
            }),
            _ => None,
        }
    }

    /// The layout a 3.13 build describes in its `_Py_DebugOffsets` (the
    /// first bytes of `_PyRuntime`'s initial value): `Err` says why it
    /// cannot be used (not 3.13, free-threaded, implausible).
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
        if version >> 16 != 0x030d {
            return Err(format!("_Py_DebugOffsets of version {version:#x}, not 3.13"));
        }
        if word(2)? != 0 {
            return Err("a free-threaded build".into());
        }
        // Word indexes of the fields in 3.13's struct _Py_DebugOffsets:
        // cookie, version, free_threaded, runtime_state{size, finalizing,
        // interpreters_head}, interpreter_state{size, id, next,
        // threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        // gil_runtime_state, _enabled, _locked, _holder}, thread_state
        // {size, prev, next, interp, current_frame, thread_id,
        // native_thread_id, datastack_chunk, status}, interpreter_frame
        // {size, previous, executable, instr_ptr, localsplus, owner},
        // code_object{size, filename, name, qualname, linetable,
        // firstlineno, argcount, localsplusnames, localspluskinds,
        // co_code_adaptive}, pyobject{2}, type_object{4}, tuple_object{3},
        // list_object{3}, dict_object{3}, float_object{2}, long_object{3},
        // bytes_object{size, ob_size, ob_sval}, unicode_object{size, state,
        // length, asciiobject_size}.
        let field = |i: usize, limit: u64| -> Result<u32, String> {
            let v = word(i)?;
            if v >= limit || v > u64::from(u32::MAX) {
                return Err(format!("implausible _Py_DebugOffsets field {i}: {v}"));
            }
            Ok(v as u32)
        };
        // The states are large (the interpreter's is ~190 KiB); objects
        // are read whole, so their offsets must stay small.
        let runtime_size = word(3)?.min(MAX_STATE_OFFSET);
        let interp_size = word(6)?.min(MAX_STATE_OFFSET);
        let tstate_size = word(19)?.min(MAX_STATE_OFFSET);
        let frame_size = word(28)?.min(u64::from(crate::python::FRAME_READ_MAX) - 8);
        let code_size = word(34)?.min(MAX_OBJECT_OFFSET);
        let bytes_size = word(64)?.min(MAX_OBJECT_OFFSET);
        let unicode_size = word(67)?.min(MAX_OBJECT_OFFSET);
        let frame_previous = field(29, frame_size)?;
        let frame_code = field(30, frame_size)?;
        let frame_lasti = field(31, frame_size)?;
        let frame_owner = field(33, frame_size)?;
        let read_size = [frame_previous + 8, frame_code + 8, frame_lasti + 8, frame_owner + 1]
            .into_iter()
            .max()
            .unwrap_or(0)
            .next_multiple_of(8);
        let layout = Layout {
            runtime_interpreters_head: field(5, runtime_size)?,
            interp_next: field(8, interp_size)?,
            interp_threads_head: field(9, interp_size)?,
            tstate_next: field(21, tstate_size)?,
            tstate_thread_id: field(24, tstate_size)?,
            tstate_frame: field(23, tstate_size)?,
            cframe_current_frame: None,
            frame_model: FrameModel::CStackOwner,
            frame_previous,
            frame_code,
            frame_lasti,
            lasti: Lasti::Pointer,
            frame_entry: Some(frame_owner),
            frame_read_size: read_size,
            code_filename: field(35, code_size)?,
            code_name: field(36, code_size)?,
            code_qualname: Some(field(37, code_size)?),
            code_linetable: field(38, code_size)?,
            code_firstlineno: field(39, code_size)?,
            line_table: LineTableFormat::Locations,
            code_adaptive: Some(field(43, code_size + 1)?),
            bytes_size: field(65, bytes_size)?,
            bytes_data: field(66, bytes_size + 1)?,
            unicode_state: field(68, unicode_size)?,
            unicode_length: field(69, unicode_size)?,
            unicode_ascii_size: field(70, unicode_size + 1)?,
            // PyCompactUnicodeObject: PyASCIIObject, then utf8_length and
            // utf8.
            unicode_compact_size: field(70, unicode_size + 1)? + 16,
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
        for minor in 8..=13 {
            let l = Layout::for_version(3, minor).unwrap();
            assert!(l.frame_read_size <= crate::python::FRAME_READ_MAX, "3.{minor}");
            for off in [l.frame_previous, l.frame_code, l.frame_lasti] {
                assert!(off + 8 <= l.frame_read_size, "3.{minor}: {off}");
            }
            if let Some(e) = l.frame_entry {
                assert!(e < l.frame_read_size);
            }
            assert_eq!(l.cframe_current_frame.is_some(), minor == 11 || minor == 12);
        }
        assert!(Layout::for_version(3, 7).is_none());
        assert!(Layout::for_version(3, 14).is_none());
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
        b[8..16].copy_from_slice(&0x030e00f0u64.to_le_bytes());
        assert!(Layout::from_debug_offsets(&b).is_err(), "3.14");
    }
}
