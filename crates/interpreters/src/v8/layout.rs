//! The offsets and constants the V8 unwinder and the naming need, taken
//! from the file's `v8dbg_*` metadata, with the few facts the metadata of
//! some versions lacks filled in per version (each marked "fallback";
//! the list is in `docs/v8.md`).

use super::metadata::{Metadata, V8Version};
use crate::refusal::Refusal;

/// Oldest V8 supported: the frame layout (bytecode array two slots below
/// the function) and the `v8dbg_off_fp_*` symbols hold from here on.
pub const MIN_V8: V8Version = V8Version::new(9, 5, 0);
/// First V8 not supported. Tested up to 14.6 (Node 26).
pub const MAX_V8: V8Version = V8Version::new(15, 0, 0);
/// From here on (leaptiering) a `JSFunction` has no `code` field, only a
/// handle into the process-wide JS dispatch table, whose base nothing in
/// the file gives: a function's Sparkplug code is its
/// `SharedFunctionInfo`'s data, and optimised code entered by on-stack
/// replacement is told apart by the code around the pc.
const LEAPTIERING_V8: V8Version = V8Version::new(13, 0, 0);
/// From here on compiled frames are recorded by their pc
/// (`V8Layout::compiled_by_pc`): the `InstructionStream` header around
/// the instructions is the one `code_at_pc` reads (checked on 12.4 and
/// later; 11.3's header is 16 bytes and has no room for its fields).
const COMPILED_BY_PC_V8: V8Version = V8Version::new(12, 0, 0);
/// From here on source position tables carry an extra bit per code
/// offset: seen in 14.6 (Node 26), not in 13.6 (Node 24); no release in
/// between was checked.
const POSITION_CODE_FLAG_V8: V8Version = V8Version::new(14, 0, 0);
/// From here on `Code` and `BytecodeArray` live in trusted space
/// (V8 12.x): other field order, `Trusted*` array types.
const TRUSTED_SPACE_V8: V8Version = V8Version::new(12, 0, 0);

/// Stack frame type markers (`StackFrame::Type`), as exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameTypes {
    /// JS entered from C++.
    pub entry: u32,
    /// `new` entered from C++.
    pub construct_entry: u32,
    /// C++ called from JS (runtime functions, API callbacks).
    pub exit: u32,
    /// C++ builtins called from JS.
    pub builtin_exit: u32,
    /// Ignition.
    pub interpreted: u32,
    /// Sparkplug.
    pub baseline: u32,
    /// Maglev.
    pub maglev: u32,
    /// TurboFan.
    pub turbofan: u32,
    /// Internal frames (builtins calling JS).
    pub internal: u32,
    /// Stubs.
    pub stub: u32,
}

/// Where things are in one V8 build (x86-64, 64-bit tagged values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V8Layout {
    /// The build's version.
    pub version: V8Version,
    /// The embedded builtins' code (file addresses), if its symbols are
    /// there.
    pub builtins_code: Option<std::ops::Range<u64>>,
    /// Whether tagged fields are 4-byte offsets from a cage base (pointer
    /// compression). Not supported yet: [`V8Layout::from_metadata`]
    /// refuses such builds.
    pub pointer_compression: bool,
    /// Bits a Smi's value is shifted left by (32 without compression).
    pub smi_shift: u32,
    /// Frame slots, bytes from the frame pointer.
    pub fp_context_or_marker: i32,
    /// The frame's `JSFunction`.
    pub fp_function: i32,
    /// Interpreted/baseline frames: the `BytecodeArray`.
    pub fp_bytecode_array: i32,
    /// Interpreted frames: the bytecode offset (a Smi, relative to the
    /// tagged `BytecodeArray` pointer).
    pub fp_bytecode_offset: i32,
    /// Frame type markers.
    pub frame_types: FrameTypes,
    /// `HeapObject::map`.
    pub heap_object_map: u32,
    /// `Map::instance_type` (u16).
    pub map_instance_type: u32,
    /// Instance types.
    pub type_js_function_first: u16,
    /// Last instance type of the `JSFunction` range (subclasses of
    /// `JSFunction` for class constructors etc.).
    pub type_js_function_last: u16,
    /// `SharedFunctionInfo`.
    pub type_shared_function_info: u16,
    /// `ScopeInfo`.
    pub type_scope_info: u16,
    /// `Script`.
    pub type_script: u16,
    /// `BytecodeArray`.
    pub type_bytecode_array: u16,
    /// `ByteArray`.
    pub type_byte_array: u16,
    /// `FixedArray`.
    pub type_fixed_array: u16,
    /// `Code`.
    pub type_code: u16,
    /// Trusted-space arrays of 12.x (`TrustedByteArray`: position
    /// tables, inlining positions; `TrustedFixedArray`,
    /// `ProtectedFixedArray`: deoptimization data;
    /// `TrustedWeakFixedArray`: its literals), when the build has them.
    pub type_trusted_byte_array: Option<u16>,
    /// See `type_trusted_byte_array`.
    pub type_trusted_fixed_array: Option<u16>,
    /// See `type_trusted_byte_array`.
    pub type_protected_fixed_array: Option<u16>,
    /// See `type_trusted_byte_array`.
    pub type_trusted_weak_fixed_array: Option<u16>,
    /// Instance types below this are strings.
    pub first_nonstring_type: u16,
    /// String type bits.
    pub string_representation_mask: u16,
    /// Sequential / cons / external / sliced / thin representations.
    pub seq_string_tag: u16,
    /// See `seq_string_tag`.
    pub cons_string_tag: u16,
    /// See `seq_string_tag`.
    pub external_string_tag: u16,
    /// See `seq_string_tag`.
    pub sliced_string_tag: u16,
    /// See `seq_string_tag`.
    pub thin_string_tag: u16,
    /// Encoding bit.
    pub string_encoding_mask: u16,
    /// Encoding bit value of one-byte strings.
    pub one_byte_string_tag: u16,
    /// `String::length` (i32).
    pub string_length: u32,
    /// `SeqOneByteString::chars` / `SeqTwoByteString::chars`.
    pub seq_string_chars: u32,
    /// `ConsString::first`.
    pub cons_first: u32,
    /// `ConsString::second`.
    pub cons_second: u32,
    /// `ThinString::actual`.
    pub thin_actual: u32,
    /// `SlicedString::parent`.
    pub sliced_parent: u32,
    /// `SlicedString::offset` (Smi).
    pub sliced_offset: u32,
    /// `JSFunction::shared`.
    pub js_function_shared: u32,
    /// `JSFunction::code` (fallback: not in 11.x metadata; 0 from 13.x,
    /// which has none).
    pub js_function_code: u32,
    /// Compiled frames in JIT memory are recorded by their pc, and their
    /// `Code` found around it (`InstructionStream` headers; 12.x on, see
    /// `COMPILED_BY_PC_V8`). The pc
    /// gives the exact position in optimised code of any size, where the
    /// frame word's 12-bit offset from the function's current code would
    /// lose a pc 4 KiB into it, or one in code the function no longer
    /// runs.
    pub compiled_by_pc: bool,
    /// 13.x on: no `JSFunction::code` (see `LEAPTIERING_V8`).
    pub leaptiering: bool,
    /// Source position tables' code offset deltas carry one more low bit
    /// (14.x; see `positions::decode_positions_of`).
    pub position_code_flag: bool,
    /// `InstructionStream` (13.x on): its header size (its instructions
    /// follow), its `Code` field and its `body_size` (u32) field.
    pub stream_header: u32,
    /// See `stream_header`.
    pub stream_code: u32,
    /// See `stream_header`.
    pub stream_body_size: u32,
    /// `INSTRUCTION_STREAM_TYPE`, if exported.
    pub type_instruction_stream: Option<u16>,
    /// Deoptimization data index of the code's own function (13.x on: a
    /// `SharedFunctionInfoWrapper`, whose field
    /// [`V8Layout::sfi_wrapper_shared_info`] holds it).
    pub deopt_shared_info_index: Option<u32>,
    /// See `deopt_shared_info_index`; `None`: the entry is the
    /// `SharedFunctionInfo` itself (12.x).
    pub sfi_wrapper_shared_info: Option<u32>,
    /// `SharedFunctionInfo::name_or_scope_info`.
    pub sfi_name_or_scope_info: u32,
    /// `SharedFunctionInfo::function_data` (the `BytecodeArray`...).
    pub sfi_function_data: u32,
    /// `SharedFunctionInfo::script_or_debug_info`.
    pub sfi_script_or_debug_info: u32,
    /// `Script::name`.
    pub script_name: u32,
    /// `Script::source`.
    pub script_source: u32,
    /// `Script::line_ends` (a `FixedArray` of Smis once computed).
    pub script_line_ends: u32,
    /// `FixedArrayBase::length` (Smi).
    pub fixed_array_length: u32,
    /// `FixedArray::data`, also the header size of `ByteArray`.
    pub fixed_array_data: u32,
    /// `BytecodeArray::source_position_table` (fallback).
    pub bytecode_source_positions: u32,
    /// `BytecodeArray` bytecodes start (`v8dbg_class_BytecodeArray__data`).
    pub bytecode_data: u32,
    /// `Code::source_position_table`.
    pub code_source_positions: u32,
    /// `Code::instruction_start` (fallback in 11.x): a field holding the
    /// address, or, when [`V8Layout::code_instructions_inline`], the
    /// header size after which the instructions follow.
    pub code_instruction_start: u32,
    /// Whether a `Code` holds its instructions itself (before 11.x).
    pub code_instructions_inline: bool,
    /// `Code::instruction_size` (i32, fallback in 11.x).
    pub code_instruction_size: u32,
    /// `Code::flags` (u32, fallback in 11.x: after the instruction start).
    pub code_flags: u32,
    /// Mask and shift of the code kind in `Code::flags`.
    pub code_kind_mask: u32,
    /// See `code_kind_mask`.
    pub code_kind_shift: u32,
    /// `CodeKind::BUILTIN`: two after `BYTECODE_HANDLER` (fallback: the
    /// order of `code-kind.h`, not exported).
    pub code_kind_builtin: u32,
    /// `CodeKind::BASELINE` (Sparkplug); Maglev and TurboFan follow it
    /// (fact: the order of V8's `code-kind.h` since 9.x).
    pub code_kind_baseline: u32,
    /// `Code::deoptimization_data` (a `FixedArray`).
    pub code_deoptimization_data: u32,
    /// Deoptimisation data indices: the literal array (holding inlined
    /// functions' `SharedFunctionInfo`s, weakly) and the inlining
    /// positions (a `ByteArray` of `InliningPosition`s).
    pub deopt_literal_array_index: u32,
    /// See `deopt_literal_array_index`.
    pub deopt_inlining_positions_index: u32,
    /// `WeakFixedArray` (the literal array's type since 11.x).
    pub type_weak_fixed_array: u16,
    /// `ScopeInfo`: slot of the context local count, first variable slot.
    pub scope_info_context_locals: u32,
    /// See `scope_info_context_locals`.
    pub scope_info_first_vars: u32,
}

/// Tag of heap object pointers (`HeapObjectTag`), assumed and checked.
pub const HEAP_OBJECT_TAG: u64 = 1;

impl V8Layout {
    /// The layout of the build behind `m`, of version `version`.
    pub fn from_metadata(m: &Metadata<'_>, version: V8Version) -> Result<V8Layout, Refusal> {
        if !(MIN_V8..MAX_V8).contains(&version) {
            let supported = format!("{MIN_V8} to {}.x", MAX_V8.major - 1);
            return Err(Refusal::Version { supported });
        }
        Self::read(m, version).map_err(Refusal::Layout)
    }

    /// [`V8Layout::from_metadata`] of a version in range.
    fn read(m: &Metadata<'_>, version: V8Version) -> Result<V8Layout, String> {
        const OFF: i64 = 4096;
        const TYPE: i64 = 0xffff;
        let off = |n: &str| m.small(n, OFF);
        let ty = |n: &str| m.small(n, TYPE).map(|v| v as u16);
        // A field under whatever type name the build gives it.
        let field = |class: &str, name: &str| m.field_offset(class, name, OFF);
        let trusted_space = version >= TRUSTED_SPACE_V8;
        let leaptiering = version >= LEAPTIERING_V8;
        let type_instruction_stream = ty("type_InstructionStream__INSTRUCTION_STREAM_TYPE").ok();
        let frame = |n: &str| m.small(&format!("frametype_{n}"), 63);
        let pointer = m.small("SystemPointerSize", 16)?;
        let tagged = m.small("TaggedSize", 16)?;
        if pointer != 8 {
            return Err(format!("{pointer}-byte pointers: only 64-bit builds are supported"));
        }
        let pointer_compression = tagged == 4;
        if tagged != 8 && !pointer_compression {
            return Err(format!("tagged size {tagged}"));
        }
        if pointer_compression {
            return Err("pointer compression is on: not supported yet (Node builds have it off)".into());
        }
        // Tags are assumed by the unwinder; check them.
        if m.get("HeapObjectTag") != Some(HEAP_OBJECT_TAG as i64)
            || m.get("HeapObjectTagMask") != Some(3)
            || m.get("SmiTagMask") != Some(1)
            || m.get("SmiTag") != Some(0)
        {
            return Err("unexpected Smi/heap object tags".into());
        }
        let smi_shift = m.small("SmiShiftSize", 62)? + 1;
        if smi_shift != 32 {
            return Err(format!("Smi shift {smi_shift} (31-bit Smis are not supported)"));
        }
        let js_function_shared = field("JSFunction", "shared")?;
        let fp_function = m.fp_offset("off_fp_function")?;
        let fp_bytecode_array = m.fp_offset("off_fp_bytecode_array").unwrap_or(fp_function - 16);
        let fixed_array_length = off("class_FixedArrayBase__length__SMI")?;
        // 12.x exports `Code::wrapper` but neither table: V8 12.x `code.h`
        // `CODE_DATA_FIELDS` (no sandbox: no self indirect pointer) puts the
        // deoptimization data or interpreter data right after the map, the
        // position table next, then the wrapper.
        let code_wrapper = field("Code", "wrapper").ok().filter(|_| trusted_space);
        let code_source_positions = match (field("Code", "source_position_table"), code_wrapper) {
            (Ok(at), _) => at,
            (Err(_), Some(wrapper)) => wrapper.checked_sub(8).ok_or("Code::wrapper at 0")?,
            // Fallback (not exported in 10.x; V8 10.2 `code.h` `CODE_FIELDS`:
            // relocation info 8, deoptimization data or interpreter data 16,
            // position table 24, code data container 32).
            (Err(_), None) if version < V8Version::new(11, 0, 0) => 24,
            (Err(why), None) => return Err(why),
        };
        // Before 11.x a `Code` holds its instructions after its header:
        // the metadata exports the header size as the pseudo-field
        // `Code::instruction_start` (`gen-postmortem-metadata.py`'s
        // `kHeaderSize` accessor; 128 in 10.2). 11.x has a field holding
        // the address instead, not exported (fallback below).
        let inline_start = off("class_Code__instruction_start__uintptr_t").ok();
        let type_js_function_first = ty("type_JSFunction__JS_FUNCTION_TYPE")?;
        // Exported since 12.x; before, fallback: since V8 9.6 the 15
        // instance types from JS_FUNCTION_TYPE on are JSFunction and its
        // subclasses.
        let type_js_function_last = ty("LastJSFunctionType").unwrap_or(type_js_function_first.saturating_add(14));
        let trusted_type = |n: &str| ty(n).ok().filter(|_| trusted_space);
        Ok(V8Layout {
            version,
            builtins_code: m.builtins_code(),
            pointer_compression,
            smi_shift,
            fp_context_or_marker: m.fp_offset("off_fp_context_or_frame_type")?,
            fp_function,
            fp_bytecode_array,
            fp_bytecode_offset: m.fp_offset("off_fp_bytecode_offset").unwrap_or(fp_bytecode_array - 8),
            frame_types: FrameTypes {
                entry: frame("EntryFrame")?,
                construct_entry: frame("ConstructEntryFrame")?,
                exit: frame("ExitFrame")?,
                builtin_exit: frame("BuiltinExitFrame")?,
                interpreted: frame("InterpretedFrame")?,
                baseline: frame("BaselineFrame")?,
                // No Maglev before 10.x's end (none in 10.2): a marker no
                // frame has.
                maglev: frame("MaglevFrame").unwrap_or(u32::MAX),
                // `TurbofanJSFrame` since 13.x.
                turbofan: frame("TurbofanJSFrame")
                    .or_else(|_| frame("TurbofanFrame"))
                    .or_else(|_| frame("OptimizedFrame"))?,
                internal: frame("InternalFrame")?,
                stub: frame("StubFrame")?,
            },
            heap_object_map: off("class_HeapObject__map__Map")?,
            map_instance_type: off("class_Map__instance_type__uint16_t")?,
            type_js_function_first,
            type_js_function_last,
            type_shared_function_info: ty("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE")?,
            type_scope_info: ty("type_ScopeInfo__SCOPE_INFO_TYPE")?,
            type_script: ty("type_Script__SCRIPT_TYPE")?,
            type_bytecode_array: ty("type_BytecodeArray__BYTECODE_ARRAY_TYPE")?,
            type_byte_array: ty("type_ByteArray__BYTE_ARRAY_TYPE")?,
            type_fixed_array: ty("type_FixedArray__FIXED_ARRAY_TYPE")?,
            type_code: ty("type_Code__CODE_TYPE")?,
            type_trusted_byte_array: trusted_type("type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE"),
            type_trusted_fixed_array: trusted_type("type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE"),
            type_protected_fixed_array: trusted_type("type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE"),
            type_trusted_weak_fixed_array: trusted_type("type_TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE"),
            first_nonstring_type: ty("FirstNonstringType")?,
            string_representation_mask: ty("StringRepresentationMask")?,
            seq_string_tag: ty("SeqStringTag")?,
            cons_string_tag: ty("ConsStringTag")?,
            external_string_tag: ty("ExternalStringTag")?,
            sliced_string_tag: ty("SlicedStringTag")?,
            thin_string_tag: ty("ThinStringTag")?,
            string_encoding_mask: ty("StringEncodingMask")?,
            one_byte_string_tag: ty("OneByteStringTag")?,
            string_length: off("class_String__length__int32_t")?,
            seq_string_chars: off("class_SeqOneByteString__chars__char")?,
            cons_first: off("class_ConsString__first__String")?,
            cons_second: off("class_ConsString__second__String")?,
            thin_actual: off("class_ThinString__actual__String")?,
            sliced_parent: off("class_SlicedString__parent__String")?,
            sliced_offset: off("class_SlicedString__offset__SMI")?,
            js_function_shared,
            // Fallback (V8 8.4 ..< 11.7.368): code three slots after shared.
            // (10.x exports it typed `CodeT`.)
            // (10.x exports it typed `CodeT`, 12.x `Tagged_Code_`.)
            js_function_code: match field("JSFunction", "code") {
                Ok(at) => at,
                Err(_) if leaptiering => 0,
                Err(_) => js_function_shared + 24,
            },
            compiled_by_pc: version >= COMPILED_BY_PC_V8,
            leaptiering,
            position_code_flag: version >= POSITION_CODE_FLAG_V8,
            // Exported as the pseudo-field `instruction_start` (32 in 13.6
            // and 14.6). Fallbacks (13.6, 14.6 `instruction-stream.h`,
            // checked on live processes): the `Code` right after the map,
            // the body size after the relocation info.
            stream_header: off("class_InstructionStream__instruction_start__uintptr_t").unwrap_or(32),
            stream_code: 8,
            stream_body_size: 24,
            type_instruction_stream,
            deopt_shared_info_index: m
                .small("DeoptimizationDataWrappedSharedFunctionInfoIndex", 64)
                .or_else(|_| m.small("DeoptimizationDataSharedFunctionInfoIndex", 64))
                .ok(),
            sfi_wrapper_shared_info: m
                .small("class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_", OFF)
                .ok(),
            sfi_name_or_scope_info: field("SharedFunctionInfo", "name_or_scope_info")?,
            // Fallback: right after the map when not exported (12.4 too:
            // `name_or_scope_info` is at 16).
            sfi_function_data: field("SharedFunctionInfo", "function_data").unwrap_or(8),
            // `script` since 12.x.
            sfi_script_or_debug_info: field("SharedFunctionInfo", "script_or_debug_info")
                .or_else(|_| field("SharedFunctionInfo", "script"))?,
            script_name: off("class_Script__name__Object")?,
            script_source: off("class_Script__source__Object")?,
            script_line_ends: off("class_Script__line_ends__Object")?,
            fixed_array_length,
            fixed_array_data: off("class_FixedArray__data__uintptr_t")?,
            // Fallback (lost from the metadata in 9.4): after the length,
            // the constant pool and the handler table; in 12.x (V8's
            // `bytecode-array.h` `FIELD_LIST`) right after the exported
            // wrapper.
            bytecode_source_positions: match field("BytecodeArray", "source_position_table") {
                Ok(at) => at,
                Err(_) => match field("BytecodeArray", "wrapper").ok().filter(|_| trusted_space) {
                    Some(wrapper) => wrapper + 8,
                    None => fixed_array_length + 24,
                },
            },
            bytecode_data: off("class_BytecodeArray__data__uintptr_t")?,
            code_source_positions,
            // Fallbacks (11.x lost Code's metadata): instruction start two
            // slots after the source position table, then the flags (u32)
            // and, before 11.4.59, two u16 fields before the size.
            // (12.x exports the field, typed `Address`.)
            code_instruction_start: inline_start
                .or_else(|| off("class_Code__instruction_start__Address").ok())
                .unwrap_or(code_source_positions + 16),
            code_instructions_inline: inline_start.is_some(),
            code_instruction_size: off("class_Code__instruction_size__int")
                .unwrap_or(code_source_positions + 24 + 4 + if version < V8Version::new(11, 4, 59) { 4 } else { 0 }),
            code_flags: off("class_Code__flags__uint32_t").unwrap_or(code_source_positions + 24),
            code_kind_mask: m.small("CodeKindFieldMask", 0xff)?,
            code_kind_shift: m.small("CodeKindFieldShift", 31)?,
            code_kind_baseline: m.small("CodeKindBaseline", 0xff)?,
            code_kind_builtin: m.small("CodeKindBytecodeHandler", 0xff)? + 2,
            // Fallback: deoptimization data right before the position
            // table (after the relocation info before 12.x, after the map
            // since).
            code_deoptimization_data: field("Code", "deoptimization_data").unwrap_or(code_source_positions - 8),
            // Fallbacks (not exported in 10.x; V8 10.2 `code.h`
            // `DeoptimizationData::kLiteralArrayIndex` 2,
            // `kInliningPositionsIndex` 7, as 11.3 exports them).
            deopt_literal_array_index: m.small("DeoptimizationDataLiteralArrayIndex", 64).unwrap_or(2),
            deopt_inlining_positions_index: m.small("DeoptimizationDataInliningPositionsIndex", 64).unwrap_or(7),
            type_weak_fixed_array: ty("type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE")?,
            scope_info_context_locals: m.small("scopeinfo_idx_ncontextlocals", 64)?,
            scope_info_first_vars: m.small("scopeinfo_idx_first_vars", 64)?,
        })
    }

    /// The marker a frame of type `ty` stores in its context slot
    /// (`StackFrame::TypeToMarker`: the type shifted past the Smi tag).
    pub fn marker(ty: u32) -> u64 {
        u64::from(ty) << 1
    }

    /// The value of a Smi, if `word` is one.
    pub fn smi(&self, word: u64) -> Option<i64> {
        (word & 1 == 0 && word & 0xffff_ffff == 0).then_some((word as i64) >> self.smi_shift)
    }

    /// Whether instance type `ty` is a byte array (`ByteArray`, or 12.x's
    /// `TrustedByteArray`).
    pub fn is_byte_array(&self, ty: u16) -> bool {
        ty == self.type_byte_array || Some(ty) == self.type_trusted_byte_array
    }

    /// Whether instance type `ty` is a fixed array of tagged values
    /// (`FixedArray`, or 12.x's trusted and protected ones).
    pub fn is_fixed_array(&self, ty: u16) -> bool {
        ty == self.type_fixed_array
            || [self.type_trusted_fixed_array, self.type_protected_fixed_array].contains(&Some(ty))
    }

    /// Whether instance type `ty` is a weak fixed array (`WeakFixedArray`,
    /// or 13.x's trusted one).
    pub fn is_weak_fixed_array(&self, ty: u16) -> bool {
        ty == self.type_weak_fixed_array || Some(ty) == self.type_trusted_weak_fixed_array
    }

    /// Whether `word` is a heap object pointer.
    pub fn is_heap_object(word: u64) -> bool {
        word & 3 == HEAP_OBJECT_TAG
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn smis_and_markers() {
        let l = V8Layout { smi_shift: 32, ..test_layout() };
        assert_eq!(l.smi(90u64 << 32), Some(90));
        assert_eq!(l.smi((-3i64 as u64) << 32), Some(-3));
        assert_eq!(l.smi(0x1234_0001), None, "heap object");
        assert_eq!(l.smi((5u64 << 32) | 2), None, "low bits set");
        assert_eq!(V8Layout::marker(25), 50);
        assert!(V8Layout::is_heap_object(0x3079_bc81_ff59));
        assert!(!V8Layout::is_heap_object(0x3079_bc81_ff58));
    }

    /// A layout with every field zero, for unit tests of decoding.
    pub(crate) fn test_layout() -> V8Layout {
        let types = FrameTypes {
            entry: 1,
            construct_entry: 2,
            exit: 3,
            builtin_exit: 25,
            interpreted: 13,
            baseline: 14,
            maglev: 15,
            turbofan: 16,
            internal: 22,
            stub: 17,
        };
        V8Layout {
            version: V8Version::new(11, 3, 244),
            builtins_code: None,
            pointer_compression: false,
            smi_shift: 32,
            fp_context_or_marker: -8,
            fp_function: -16,
            fp_bytecode_array: -32,
            fp_bytecode_offset: -40,
            frame_types: types,
            heap_object_map: 0,
            map_instance_type: 0,
            type_js_function_first: 0,
            type_js_function_last: 0,
            type_shared_function_info: 0,
            type_scope_info: 0,
            type_script: 0,
            type_bytecode_array: 0,
            type_byte_array: 0,
            type_fixed_array: 0,
            type_code: 0,
            type_trusted_byte_array: None,
            type_trusted_fixed_array: None,
            type_protected_fixed_array: None,
            type_trusted_weak_fixed_array: None,
            first_nonstring_type: 0,
            string_representation_mask: 0,
            seq_string_tag: 0,
            cons_string_tag: 0,
            external_string_tag: 0,
            sliced_string_tag: 0,
            thin_string_tag: 0,
            string_encoding_mask: 0,
            one_byte_string_tag: 0,
            string_length: 0,
            seq_string_chars: 0,
            cons_first: 0,
            cons_second: 0,
            thin_actual: 0,
            sliced_parent: 0,
            sliced_offset: 0,
            js_function_shared: 0,
            js_function_code: 0,
            compiled_by_pc: false,
            leaptiering: false,
            position_code_flag: false,
            stream_header: 32,
            stream_code: 8,
            stream_body_size: 24,
            type_instruction_stream: None,
            deopt_shared_info_index: None,
            sfi_wrapper_shared_info: None,
            sfi_name_or_scope_info: 0,
            sfi_function_data: 0,
            sfi_script_or_debug_info: 0,
            script_name: 0,
            script_source: 0,
            script_line_ends: 0,
            fixed_array_length: 0,
            fixed_array_data: 0,
            bytecode_source_positions: 0,
            bytecode_data: 0,
            code_source_positions: 0,
            code_instruction_start: 0,
            code_instructions_inline: false,
            code_instruction_size: 0,
            code_flags: 0,
            code_kind_mask: 0,
            code_kind_shift: 0,
            code_kind_baseline: 0,
            code_kind_builtin: 0,
            code_deoptimization_data: 0,
            deopt_literal_array_index: 0,
            deopt_inlining_positions_index: 0,
            type_weak_fixed_array: 0,
            scope_info_context_locals: 0,
            scope_info_first_vars: 0,
        }
    }
}
