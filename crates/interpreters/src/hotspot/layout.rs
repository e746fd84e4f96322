//! What the HotSpot unwinder and the naming need of one JVM build, taken
//! from its own tables ([`VmTables`]), with a per-version fact only where
//! the tables say nothing (each one listed in [`HotspotLayout::fallbacks`]).
//!
//! Static fields are kept as ELF virtual addresses of `libjvm.so` (process
//! address minus the load bias), so that one layout serves every process
//! mapping the same file.

use super::remote::{read_cstr, read_u32, read_u64};
use super::vmstructs::VmTables;
use crate::memory::ProcessMemory;
use std::fmt;

/// Oldest JDK feature release accepted.
pub const MIN_JDK: u32 = 11;
/// Newest JDK feature release accepted (newer ones may have moved what
/// the per-version facts below describe): 26 is tested end to end
/// (Debian unstable's 26.0.2.1, `tests/hotspot.rs`).
pub const MAX_JDK: u32 = 26;
/// Largest struct size or field offset accepted from the tables: real
/// ones are below 4 KiB (`JavaThread` is the largest, about 2 KiB).
const MAX_STRUCT: u64 = 64 * 1024;
/// Longest version string read.
const MAX_RELEASE: usize = 256;

/// A JDK version, from `Abstract_VM_Version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JdkVersion {
    /// The feature release: 17, 25...
    pub major: u32,
    /// The interim release (0 since JDK 10).
    pub minor: u32,
    /// The update release.
    pub security: u32,
    /// The build number.
    pub build: u32,
    /// `_s_vm_release`, e.g. `17.0.15+6-Debian-1deb12u1`.
    pub release: String,
}

impl fmt::Display for JdkVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}.{}.{}+{})", self.release, self.major, self.minor, self.security, self.build)
    }
}

/// How a `CodeBlob` gives its code's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeBounds {
    /// JDK 9-22: `_code_begin`/`_code_end` are pointers.
    Pointers {
        /// `CodeBlob::_code_begin`.
        begin: u32,
        /// `CodeBlob::_code_end`.
        end: u32,
    },
    /// JDK 23+: `_code_offset`/`_data_offset` (`int`) are offsets from the
    /// blob's start (the code ends where the data starts).
    Offsets {
        /// `CodeBlob::_code_offset`.
        code: u32,
        /// `CodeBlob::_data_offset`.
        data: u32,
    },
}

/// Where an nmethod's pc descriptors, scope data (inlining, bci per pc)
/// and metadata (the `Method*`s its scopes name) lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NmethodData {
    /// JDK 9-22, all in the blob: `[metadata][scopes data][pcs][dependencies]`.
    /// `CompiledMethod::_scopes_data_begin` is a pointer, the `nmethod`
    /// `_*_offset` fields (`int`) are offsets from the nmethod's start.
    InBlob {
        /// `_scopes_data_begin`.
        scopes_data_begin: u32,
        /// `_scopes_pcs_offset`: the pcs start, the scope data ends.
        scopes_pcs_offset: u32,
        /// `_dependencies_offset`: the pcs end.
        dependencies_offset: u32,
        /// `_metadata_offset`: the metadata start (it ends at the scope data).
        metadata_offset: u32,
    },
    /// JDK 23+: pcs and scope data are in the separate immutable data
    /// block (`nmethod::_immutable_data`, offsets `int`), pcs first; the
    /// metadata is in the blob's mutable data after the relocations
    /// (`CodeBlob::_mutable_data + _relocation_size`, up to
    /// `_mutable_data_size`).
    Immutable {
        /// `nmethod::_immutable_data` (a pointer).
        immutable_data: u32,
        /// `nmethod::_immutable_data_size` (`int`).
        immutable_data_size: u32,
        /// `nmethod::_scopes_pcs_offset`.
        scopes_pcs_offset: u32,
        /// `nmethod::_scopes_data_offset`: the scope data start, the pcs end.
        scopes_data_offset: u32,
        /// `CodeBlob::_mutable_data` (a pointer).
        mutable_data: u32,
        /// `CodeBlob::_mutable_data_size` (`int`).
        mutable_data_size: u32,
        /// `CodeBlob::_relocation_size` (`int`).
        relocation_size: u32,
    },
}

/// Where a class keeps the pool index of its source file's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFileIndex {
    /// JDK 15+: `ConstantPool::_source_file_name_index`.
    Pool(u32),
    /// JDK 8-14: `InstanceKlass::_source_file_name_index`.
    Klass(u32),
}

/// How an nmethod gives its deoptimisation handler and entry points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NmethodEntries {
    /// JDK 9-22: pointers (`_deopt_handler_begin`, `_entry_point`,
    /// `_verified_entry_point`).
    Pointers {
        /// `CompiledMethod::_deopt_handler_begin`.
        deopt_handler: u32,
        /// `nmethod::_entry_point`.
        entry: u32,
        /// `nmethod::_verified_entry_point`.
        verified_entry: u32,
    },
    /// JDK 23+: `_deopt_handler_offset` (`int`, from the blob's start) and
    /// `_entry_offset`/`_verified_entry_offset` (`u2`, from the code's
    /// start).
    Offsets {
        /// `nmethod::_deopt_handler_offset`.
        deopt_handler: u32,
        /// `nmethod::_entry_offset`.
        entry: u32,
        /// `nmethod::_verified_entry_offset`.
        verified_entry: u32,
    },
}

/// Offsets and sizes of one HotSpot build (x86-64). Field offsets are
/// bytes from the start of the object; `*_vaddr` are static variables of
/// `libjvm.so`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotspotLayout {
    /// The JDK.
    pub version: JdkVersion,
    /// What came from per-version facts rather than the tables.
    pub fallbacks: Vec<&'static str>,

    /// `CodeCache::_heaps` (`GrowableArray<CodeHeap*>*`).
    pub code_cache_heaps_vaddr: u64,
    /// `CodeCache::_low_bound` (`address`): the lowest address of any heap.
    pub code_cache_low_bound_vaddr: u64,
    /// `CodeCache::_high_bound`.
    pub code_cache_high_bound_vaddr: u64,
    /// `GrowableArrayBase::_len` (`int`).
    pub growable_array_len: u32,
    /// `GrowableArray<T>::_data` (`T*`).
    pub growable_array_data: u32,
    /// `CodeHeap::_memory` (a `VirtualSpace`).
    pub code_heap_memory: u32,
    /// `CodeHeap::_segmap` (a `VirtualSpace`: one byte per segment).
    pub code_heap_segmap: u32,
    /// `CodeHeap::_log2_segment_size` (`int`).
    pub code_heap_log2_segment_size: u32,
    /// `VirtualSpace::_low_boundary`.
    pub virtual_space_low_boundary: u32,
    /// `VirtualSpace::_high_boundary`.
    pub virtual_space_high_boundary: u32,
    /// `sizeof(HeapBlock)`: a blob starts this far into its block.
    pub heap_block_size: u32,
    /// `HeapBlock::Header::_used` (`bool`), from the block's start.
    pub heap_block_used: u32,

    /// `CodeBlob::_name` (`const char*`).
    pub code_blob_name: u32,
    /// `CodeBlob::_size` (`int`, bytes).
    pub code_blob_size: u32,
    /// `CodeBlob::_frame_size` (`int`, words).
    pub code_blob_frame_size: u32,
    /// `CodeBlob::_frame_complete_offset` (`int`; `int16_t` from JDK 23).
    pub code_blob_frame_complete: u32,
    /// Width of `_frame_complete_offset` in bytes.
    pub code_blob_frame_complete_size: u32,
    /// The code's bounds.
    pub code_blob_code: CodeBounds,
    /// `CodeBlob::_kind` (`u1`, JDK 23+); older blobs are told apart by name.
    pub code_blob_kind: Option<u32>,
    /// `CodeBlobKind::Nmethod`, when `_kind` exists.
    pub code_blob_kind_nmethod: Option<u32>,
    /// `sizeof(CodeBlob)`.
    pub code_blob_sizeof: u32,

    /// `nmethod::_method` (`CompiledMethod::_method` before JDK 23).
    pub nmethod_method: u32,
    /// `nmethod::_compile_id` (`int`).
    pub nmethod_compile_id: u32,
    /// `nmethod::_orig_pc_offset` (`int`).
    pub nmethod_orig_pc_offset: u32,
    /// Scope data and pc descriptors.
    pub nmethod_data: NmethodData,
    /// Deoptimisation handler and entry points.
    pub nmethod_entries: NmethodEntries,
    /// `sizeof(nmethod)`.
    pub nmethod_sizeof: u32,
    /// `PcDesc::_pc_offset` (`int`).
    pub pc_desc_pc_offset: u32,
    /// `PcDesc::_scope_decode_offset` (`int`).
    pub pc_desc_scope_decode_offset: u32,
    /// `sizeof(PcDesc)`.
    pub pc_desc_sizeof: u32,

    /// `Method::_constMethod`.
    pub method_const_method: u32,
    /// `Method::_code` (the method's current nmethod, or null).
    pub method_code: u32,
    /// `ConstMethod::_constants`.
    pub const_method_constants: u32,
    /// `ConstMethod::_constMethod_size` (`int`, words).
    pub const_method_size: u32,
    /// `ConstMethod::_flags` (`u2`; `ConstMethodFlags::_flags`, `u4`, from
    /// JDK 21).
    pub const_method_flags: u32,
    /// Width of the flags in bytes.
    pub const_method_flags_size: u32,
    /// The flag bit saying a compressed line number table follows the
    /// bytecodes.
    pub const_method_has_linenumber_table: u32,
    /// `ConstMethod::_code_size` (`u2`).
    pub const_method_code_size: u32,
    /// `ConstMethod::_name_index` (`u2`).
    pub const_method_name_index: u32,
    /// `ConstMethod::_signature_index` (`u2`).
    pub const_method_signature_index: u32,
    /// `sizeof(ConstMethod)`: the bytecodes start there.
    pub const_method_sizeof: u32,
    /// `ConstantPool::_pool_holder` (`InstanceKlass*`).
    pub constant_pool_holder: u32,
    /// `ConstantPool::_length` (`int`): slots in the pool.
    pub constant_pool_length: u32,
    /// Where the class's `SourceFile` pool index (`u2`) is.
    pub source_file_name_index: SourceFileIndex,
    /// `sizeof(ConstantPool)`: the slots (a `Symbol*` for UTF-8 entries)
    /// start there, 8 bytes each.
    pub constant_pool_sizeof: u32,
    /// `Klass::_name` (`Symbol*`).
    pub klass_name: u32,
    /// `InstanceKlass::_methods` (`Array<Method*>*`).
    pub instance_klass_methods: u32,
    /// `Array<Method*>::_data`.
    pub array_data: u32,
    /// `Symbol::_length` (`u2`).
    pub symbol_length: u32,
    /// `Symbol::_body` (bytes).
    pub symbol_body: u32,

    /// `ThreadsSMRSupport::_java_thread_list` (`ThreadsList*`); 0 when the
    /// tables lack it (JDK 11): only the user-space walk lists threads.
    pub threads_list_vaddr: u64,
    /// `ThreadsList::_length` (`uint`).
    pub threads_list_length: u32,
    /// `ThreadsList::_threads` (`JavaThread* const*`).
    pub threads_list_threads: u32,
    /// `JavaThread::_osthread` (`Thread::_osthread` from JDK 21).
    pub thread_osthread: u32,
    /// `JavaThread::_anchor` (a `JavaFrameAnchor`).
    pub java_thread_anchor: u32,
    /// `JavaThread::_thread_state` (`int`).
    pub java_thread_state: u32,
    /// `JavaFrameAnchor::_last_Java_sp`.
    pub anchor_last_java_sp: u32,
    /// `JavaFrameAnchor::_last_Java_pc`.
    pub anchor_last_java_pc: u32,
    /// `JavaFrameAnchor::_last_Java_fp` (x86).
    pub anchor_last_java_fp: u32,
    /// `OSThread::_thread_id` (the kernel tid).
    pub os_thread_thread_id: u32,
    /// `_thread_in_Java`.
    pub thread_state_in_java: u32,
    /// `_thread_blocked`.
    pub thread_state_blocked: u32,
    /// `_thread_in_native`.
    pub thread_state_in_native: u32,

    /// Interpreter frame, in words from the frame pointer: the caller's
    /// (unextended) sp.
    pub interp_sender_sp_slot: i32,
    /// The `Method*` slot.
    pub interp_method_slot: i32,
    /// The bytecode pointer slot.
    pub interp_bcp_slot: i32,
    /// `StubRoutines::_call_stub_return_address`: a return into the call
    /// stub is where Java was entered from C (`JavaCalls::call`).
    pub call_stub_return_address_vaddr: u64,
    /// `AbstractInterpreter::_code` (static `StubQueue*`): the template
    /// interpreter's code is its `_stub_buffer`, `_buffer_limit` bytes.
    pub interpreter_code_vaddr: u64,
    /// `StubQueue::_stub_buffer` (`address`).
    pub stub_queue_stub_buffer: u32,
    /// `StubQueue::_buffer_limit` (`int`).
    pub stub_queue_buffer_limit: u32,
    /// `JavaCallWrapper::_anchor`: the frame anchor saved when C called
    /// into Java, i.e. the last Java frame below the native code.
    pub java_call_wrapper_anchor: u32,
    /// The entry frame's `JavaCallWrapper*` slot, in words from its fp
    /// (`frame::entry_frame_call_wrapper_offset`).
    pub entry_frame_call_wrapper_slot: i32,
    /// UNSIGNED5 "excluded bytes" of compressed streams: 0 before JDK 20,
    /// 1 after (no zero byte inside a number).
    pub unsigned5_excluded: u8,
}

/// A required entry missing from the tables.
fn missing(what: &str) -> String {
    format!("the vmStructs tables have no {what}")
}

/// Reads the layout of the JVM whose `libjvm.so` has load bias `bias`.
/// Errors say what is missing or out of bounds (an unsupported build).
pub fn layout_from_tables(t: &VmTables, memory: &dyn ProcessMemory, bias: u64) -> Result<HotspotLayout, String> {
    let mut fallbacks = Vec::new();
    let static_vaddr = |ty: &str, field: &str| -> Result<u64, String> {
        let address = t.static_address(ty, field).ok_or_else(|| missing(&format!("static {ty}::{field}")))?;
        Ok(address.wrapping_sub(bias))
    };
    let off = |ty: &str, field: &str| -> Result<u32, String> {
        let o = t.offset(ty, field).ok_or_else(|| missing(&format!("{ty}::{field}")))?;
        // Inside the object, when the types table knows its size.
        if o >= MAX_STRUCT || t.size(ty).is_some_and(|size| o >= size) {
            return Err(format!("{ty}::{field} at offset {o}, outside sizeof({ty}) = {:?}", t.size(ty)));
        }
        Ok(o as u32)
    };
    let any_off = |candidates: &[(&str, &str)]| -> Result<u32, String> {
        candidates.iter().find_map(|(ty, f)| off(ty, f).ok()).ok_or_else(|| {
            let names: Vec<String> = candidates.iter().map(|(t, f)| format!("{t}::{f}")).collect();
            missing(&names.join(" or "))
        })
    };
    let size = |ty: &str| -> Result<u32, String> {
        let s = t.size(ty).ok_or_else(|| missing(&format!("type {ty}")))?;
        if s == 0 || s >= MAX_STRUCT {
            return Err(format!("sizeof({ty}) = {s}"));
        }
        Ok(s as u32)
    };
    let constant = |name: &str| -> Result<u32, String> {
        let c = t.int_constant(name).ok_or_else(|| missing(&format!("constant {name}")))?;
        u32::try_from(c).map_err(|_| format!("constant {name} = {c}"))
    };

    // Zero (the interpreter-only port) and non-x86 ports lay frames out
    // differently; `_last_Java_fp` is x86-only, Zero has a ZeroStack.
    if t.has_type("ZeroStack") || t.has_type("ZeroFrame") {
        return Err("a Zero (interpreter-only) build".to_string());
    }
    if t.offset("JavaFrameAnchor", "_last_Java_fp").is_none() {
        return Err(
            "no JavaFrameAnchor::_last_Java_fp (not an x86-64 build: other frame layouts are unsupported)".to_string()
        );
    }
    let anchor_last_java_fp = off("JavaFrameAnchor", "_last_Java_fp")?;

    let version = read_version(t, memory)?;
    if !(MIN_JDK..=MAX_JDK).contains(&version.major) {
        return Err(format!("JDK {} ({}): only {MIN_JDK} to {MAX_JDK} are supported", version.major, version.release));
    }

    let code_blob_code = match (off("CodeBlob", "_code_begin"), off("CodeBlob", "_code_end")) {
        (Ok(begin), Ok(end)) => CodeBounds::Pointers { begin, end },
        _ => CodeBounds::Offsets { code: off("CodeBlob", "_code_offset")?, data: off("CodeBlob", "_data_offset")? },
    };
    let frame_complete_size = if t.offset("CodeBlob", "_kind").is_some() { 2 } else { 4 };
    if frame_complete_size == 2 {
        fallbacks.push("CodeBlob::_frame_complete_offset is int16_t from JDK 23 (the tables give no widths)");
    }
    let nmethod_data = match off("nmethod", "_immutable_data") {
        Ok(immutable_data) => NmethodData::Immutable {
            immutable_data,
            immutable_data_size: off("nmethod", "_immutable_data_size")?,
            scopes_pcs_offset: off("nmethod", "_scopes_pcs_offset")?,
            scopes_data_offset: off("nmethod", "_scopes_data_offset")?,
            mutable_data: off("CodeBlob", "_mutable_data")?,
            mutable_data_size: off("CodeBlob", "_mutable_data_size")?,
            relocation_size: off("CodeBlob", "_relocation_size")?,
        },
        Err(_) => NmethodData::InBlob {
            scopes_data_begin: any_off(&[("CompiledMethod", "_scopes_data_begin"), ("nmethod", "_scopes_data_begin")])?,
            scopes_pcs_offset: off("nmethod", "_scopes_pcs_offset")?,
            dependencies_offset: off("nmethod", "_dependencies_offset")?,
            metadata_offset: off("nmethod", "_metadata_offset")?,
        },
    };
    let nmethod_entries = match off("nmethod", "_entry_offset") {
        Ok(entry) => NmethodEntries::Offsets {
            deopt_handler: any_off(&[
                ("nmethod", "_deopt_handler_offset"),
                ("nmethod", "_deopt_handler_entry_offset"),
            ])?,
            entry,
            verified_entry: off("nmethod", "_verified_entry_offset")?,
        },
        Err(_) => NmethodEntries::Pointers {
            deopt_handler: any_off(&[("CompiledMethod", "_deopt_handler_begin"), ("nmethod", "_deopt_handler_begin")])?,
            entry: off("nmethod", "_entry_point")?,
            verified_entry: off("nmethod", "_verified_entry_point")?,
        },
    };

    let (const_method_flags, const_method_flags_size, has_linenumber) =
        match (off("ConstMethod", "_flags._flags"), off("ConstMethod", "_flags")) {
            (Ok(o), _) => (o, 4, t.int_constant("ConstMethodFlags::_misc_has_linenumber_table")),
            (Err(_), Ok(o)) => (o, 2, t.int_constant("ConstMethod::_has_linenumber_table")),
            (Err(e), Err(_)) => return Err(e),
        };
    let const_method_has_linenumber_table = match has_linenumber {
        Some(bit) if bit > 0 => bit as u32,
        _ => {
            fallbacks.push("the has-line-number-table flag is bit 0 of ConstMethod's flags");
            1
        }
    };

    // x86-64 interpreter frames (frame_x86.hpp): from fp, the saved fp
    // (0), return address (+1); below it sender sp (-1), last sp (-2),
    // Method* (-3), mirror (-4, JDK 9+), mdp, cache, locals, bcp (-8).
    // The tables give the first two (17 and 25 do); the rest follow them.
    let sender_sp = t.int_constant("frame::interpreter_frame_sender_sp_offset");
    let last_sp = t.int_constant("frame::interpreter_frame_last_sp_offset");
    let (interp_sender_sp_slot, interp_method_slot) = match (sender_sp, last_sp) {
        (Some(s), Some(l)) if (-16..0).contains(&s) && (-16..0).contains(&l) => (s, l - 1),
        _ => {
            fallbacks.push("interpreter frame sender sp and Method* slots (fp-1, fp-3 words; frame_x86.hpp)");
            (-1, -3)
        }
    };
    fallbacks.push("interpreter frame bcp slot (Method* slot - 5 words, JDK 9+; frame_x86.hpp)");
    let interp_bcp_slot = interp_method_slot - 5;

    let entry_frame_call_wrapper_slot = match t.int_constant("frame::entry_frame_call_wrapper_offset") {
        Some(slot) if (-32..0).contains(&slot) => slot,
        _ => {
            fallbacks.push("entry frame call wrapper slot (fp-6 words; frame_x86.hpp)");
            -6
        }
    };
    let thread_state = |name: &str| constant(name);
    // Not in JDK 11's tables; the unwinder does not need it.
    let threads_list = match (
        static_vaddr("ThreadsSMRSupport", "_java_thread_list"),
        off("ThreadsList", "_length"),
        off("ThreadsList", "_threads"),
    ) {
        (Ok(list), Ok(length), Ok(threads)) => Some((list, length, threads)),
        _ => {
            fallbacks.push("no ThreadsSMRSupport::_java_thread_list: threads are not listed");
            None
        }
    };
    Ok(HotspotLayout {
        fallbacks,
        code_cache_heaps_vaddr: static_vaddr("CodeCache", "_heaps")?,
        code_cache_low_bound_vaddr: static_vaddr("CodeCache", "_low_bound")?,
        code_cache_high_bound_vaddr: static_vaddr("CodeCache", "_high_bound")?,
        growable_array_len: any_off(&[("GrowableArrayBase", "_len"), ("GenericGrowableArray", "_len")])?,
        growable_array_data: off("GrowableArray<int>", "_data")?,
        code_heap_memory: off("CodeHeap", "_memory")?,
        code_heap_segmap: off("CodeHeap", "_segmap")?,
        code_heap_log2_segment_size: off("CodeHeap", "_log2_segment_size")?,
        virtual_space_low_boundary: off("VirtualSpace", "_low_boundary")?,
        virtual_space_high_boundary: off("VirtualSpace", "_high_boundary")?,
        heap_block_size: size("HeapBlock")?,
        heap_block_used: off("HeapBlock", "_header")? + off("HeapBlock::Header", "_used")?,
        code_blob_name: off("CodeBlob", "_name")?,
        code_blob_size: off("CodeBlob", "_size")?,
        code_blob_frame_size: off("CodeBlob", "_frame_size")?,
        code_blob_frame_complete: off("CodeBlob", "_frame_complete_offset")?,
        code_blob_frame_complete_size: frame_complete_size,
        code_blob_code,
        code_blob_kind: off("CodeBlob", "_kind").ok(),
        code_blob_kind_nmethod: t.int_constant("CodeBlobKind::Nmethod").and_then(|k| u32::try_from(k).ok()),
        code_blob_sizeof: size("CodeBlob")?,
        nmethod_method: any_off(&[("nmethod", "_method"), ("CompiledMethod", "_method")])?,
        nmethod_compile_id: off("nmethod", "_compile_id")?,
        nmethod_orig_pc_offset: off("nmethod", "_orig_pc_offset")?,
        nmethod_data,
        nmethod_entries,
        nmethod_sizeof: size("nmethod")?,
        pc_desc_pc_offset: off("PcDesc", "_pc_offset")?,
        pc_desc_scope_decode_offset: off("PcDesc", "_scope_decode_offset")?,
        pc_desc_sizeof: size("PcDesc")?,
        method_const_method: off("Method", "_constMethod")?,
        method_code: off("Method", "_code")?,
        const_method_constants: off("ConstMethod", "_constants")?,
        const_method_size: off("ConstMethod", "_constMethod_size")?,
        const_method_flags,
        const_method_flags_size,
        const_method_has_linenumber_table,
        const_method_code_size: off("ConstMethod", "_code_size")?,
        const_method_name_index: off("ConstMethod", "_name_index")?,
        const_method_signature_index: off("ConstMethod", "_signature_index")?,
        const_method_sizeof: size("ConstMethod")?,
        constant_pool_holder: off("ConstantPool", "_pool_holder")?,
        constant_pool_length: off("ConstantPool", "_length")?,
        source_file_name_index: match off("ConstantPool", "_source_file_name_index") {
            Ok(pool) => SourceFileIndex::Pool(pool),
            Err(_) => SourceFileIndex::Klass(off("InstanceKlass", "_source_file_name_index").map_err(|_| {
                missing("ConstantPool::_source_file_name_index or InstanceKlass::_source_file_name_index")
            })?),
        },
        constant_pool_sizeof: size("ConstantPool")?,
        klass_name: off("Klass", "_name")?,
        instance_klass_methods: off("InstanceKlass", "_methods")?,
        array_data: any_off(&[("Array<Method*>", "_data"), ("Array<Klass*>", "_data[0]"), ("Array<Klass*>", "_data")])?,
        symbol_length: off("Symbol", "_length")?,
        symbol_body: off("Symbol", "_body")?,
        threads_list_vaddr: threads_list.map_or(0, |(list, _, _)| list),
        threads_list_length: threads_list.map_or(0, |(_, length, _)| length),
        threads_list_threads: threads_list.map_or(0, |(_, _, threads)| threads),
        thread_osthread: any_off(&[("JavaThread", "_osthread"), ("Thread", "_osthread")])?,
        java_thread_anchor: off("JavaThread", "_anchor")?,
        java_thread_state: off("JavaThread", "_thread_state")?,
        anchor_last_java_sp: off("JavaFrameAnchor", "_last_Java_sp")?,
        anchor_last_java_pc: off("JavaFrameAnchor", "_last_Java_pc")?,
        anchor_last_java_fp,
        os_thread_thread_id: off("OSThread", "_thread_id")?,
        thread_state_in_java: thread_state("_thread_in_Java")?,
        thread_state_blocked: thread_state("_thread_blocked")?,
        thread_state_in_native: thread_state("_thread_in_native")?,
        interp_sender_sp_slot,
        interp_method_slot,
        interp_bcp_slot,
        call_stub_return_address_vaddr: static_vaddr("StubRoutines", "_call_stub_return_address")?,
        interpreter_code_vaddr: static_vaddr("AbstractInterpreter", "_code")?,
        stub_queue_stub_buffer: off("StubQueue", "_stub_buffer")?,
        stub_queue_buffer_limit: off("StubQueue", "_buffer_limit")?,
        java_call_wrapper_anchor: off("JavaCallWrapper", "_anchor")?,
        entry_frame_call_wrapper_slot,
        unsigned5_excluded: u8::from(version.major >= 20),
        version,
    })
}

/// The JDK version from `Abstract_VM_Version`'s statics.
fn read_version(t: &VmTables, memory: &dyn ProcessMemory) -> Result<JdkVersion, String> {
    let int = |field: &str| -> Result<u32, String> {
        let address = t
            .static_address("Abstract_VM_Version", field)
            .ok_or_else(|| missing(&format!("static Abstract_VM_Version::{field}")))?;
        read_u32(memory, address).ok_or_else(|| format!("cannot read Abstract_VM_Version::{field}"))
    };
    let release = t
        .static_address("Abstract_VM_Version", "_s_vm_release")
        .and_then(|a| read_u64(memory, a))
        .and_then(|p| read_cstr(memory, p, MAX_RELEASE))
        .unwrap_or_default();
    Ok(JdkVersion {
        major: int("_vm_major_version")?,
        minor: int("_vm_minor_version")?,
        security: int("_vm_security_version")?,
        build: int("_vm_build_number")?,
        release,
    })
}

/// JDK 17.0.15's layout as `attach` read it from a live JVM (Debian's
/// build), with static variables placed at 0x100.. for fake memories.
#[cfg(test)]
pub(crate) fn jdk17_fixture() -> HotspotLayout {
    HotspotLayout {
        version: JdkVersion { major: 17, minor: 0, security: 15, build: 6, release: "17.0.15".into() },
        fallbacks: Vec::new(),
        code_cache_heaps_vaddr: 0x100,
        code_cache_low_bound_vaddr: 0x108,
        code_cache_high_bound_vaddr: 0x110,
        growable_array_len: 0,
        growable_array_data: 8,
        code_heap_memory: 8,
        code_heap_segmap: 120,
        code_heap_log2_segment_size: 256,
        virtual_space_low_boundary: 0,
        virtual_space_high_boundary: 8,
        heap_block_size: 16,
        heap_block_used: 8,
        code_blob_name: 96,
        code_blob_size: 12,
        code_blob_frame_size: 28,
        code_blob_frame_complete: 20,
        code_blob_frame_complete_size: 4,
        code_blob_code: CodeBounds::Pointers { begin: 32, end: 40 },
        code_blob_kind: None,
        code_blob_kind_nmethod: None,
        code_blob_sizeof: 104,
        nmethod_method: 112,
        nmethod_compile_id: 304,
        nmethod_orig_pc_offset: 300,
        nmethod_data: NmethodData::InBlob {
            scopes_data_begin: 120,
            scopes_pcs_offset: 268,
            dependencies_offset: 272,
            metadata_offset: 260,
        },
        nmethod_entries: NmethodEntries::Pointers { deopt_handler: 128, entry: 216, verified_entry: 224 },
        nmethod_sizeof: 352,
        pc_desc_pc_offset: 0,
        pc_desc_scope_decode_offset: 4,
        pc_desc_sizeof: 16,
        method_const_method: 8,
        method_code: 72,
        const_method_constants: 8,
        const_method_size: 24,
        const_method_flags: 28,
        const_method_flags_size: 2,
        const_method_has_linenumber_table: 1,
        const_method_code_size: 32,
        const_method_name_index: 34,
        const_method_signature_index: 36,
        const_method_sizeof: 48,
        constant_pool_holder: 24,
        constant_pool_length: 60,
        source_file_name_index: SourceFileIndex::Pool(54),
        constant_pool_sizeof: 72,
        klass_name: 24,
        instance_klass_methods: 408,
        array_data: 8,
        symbol_length: 4,
        symbol_body: 6,
        threads_list_vaddr: 0x118,
        threads_list_length: 4,
        threads_list_threads: 16,
        thread_osthread: 560,
        java_thread_anchor: 656,
        java_thread_state: 824,
        anchor_last_java_sp: 0,
        anchor_last_java_pc: 8,
        anchor_last_java_fp: 16,
        os_thread_thread_id: 208,
        thread_state_in_java: 8,
        thread_state_blocked: 10,
        thread_state_in_native: 4,
        interp_sender_sp_slot: -1,
        interp_method_slot: -3,
        interp_bcp_slot: -8,
        call_stub_return_address_vaddr: 0x120,
        interpreter_code_vaddr: 0x128,
        stub_queue_stub_buffer: 8,
        stub_queue_buffer_limit: 16,
        java_call_wrapper_anchor: 32,
        entry_frame_call_wrapper_slot: -6,
        unsigned5_excluded: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::remote::fake::FakeMemory;
    use super::super::vmstructs::Field;
    use super::*;

    fn version_fields() -> Vec<(&'static str, &'static str, Field)> {
        let v = "Abstract_VM_Version";
        vec![
            ("JavaFrameAnchor", "_last_Java_fp", Field::Offset(16)),
            (v, "_vm_major_version", Field::Static(0x1000)),
            (v, "_vm_minor_version", Field::Static(0x1004)),
            (v, "_vm_security_version", Field::Static(0x1008)),
            (v, "_vm_build_number", Field::Static(0x100c)),
        ]
    }

    fn memory(major: u32) -> FakeMemory {
        let mut m = FakeMemory::default();
        m.add(0x1000, [major, 0, 4, 7].iter().flat_map(|v| v.to_le_bytes()).collect());
        m
    }

    #[test]
    fn zero_and_other_ports_are_refused() {
        let zero = VmTables::from_parts(&version_fields(), &[("ZeroStack", 32)]);
        assert_eq!(layout_from_tables(&zero, &memory(17), 0).unwrap_err(), "a Zero (interpreter-only) build");
        let mut fields = version_fields();
        fields.remove(0);
        let other = VmTables::from_parts(&fields, &[]);
        assert!(layout_from_tables(&other, &memory(17), 0).unwrap_err().contains("not an x86-64 build"));
    }

    #[test]
    fn versions_outside_the_range_are_refused() {
        let t = VmTables::from_parts(&version_fields(), &[]);
        for major in [8, MIN_JDK - 1, MAX_JDK + 1] {
            let err = layout_from_tables(&t, &memory(major), 0).unwrap_err();
            assert!(err.starts_with(&format!("JDK {major} ")), "{err}");
        }
        // In range: the next missing entry is what fails.
        let err = layout_from_tables(&t, &memory(17), 0).unwrap_err();
        assert!(err.starts_with("the vmStructs tables have no "), "{err}");
        assert_eq!(read_version(&t, &memory(21)).unwrap().to_string(), " (21.0.4+7)");
    }

    #[test]
    fn a_field_outside_its_object_is_refused() {
        let mut fields = version_fields();
        fields[0].2 = Field::Offset(24);
        let t = VmTables::from_parts(&fields, &[("JavaFrameAnchor", 24)]);
        let err = layout_from_tables(&t, &memory(17), 0).unwrap_err();
        assert_eq!(err, "JavaFrameAnchor::_last_Java_fp at offset 24, outside sizeof(JavaFrameAnchor) = Some(24)");
        fields[0].2 = Field::Offset(16);
        let t = VmTables::from_parts(&fields, &[("JavaFrameAnchor", 24)]);
        let err = layout_from_tables(&t, &memory(17), 0).unwrap_err();
        assert!(err.starts_with("the vmStructs tables have no "), "{err}");
    }
}
