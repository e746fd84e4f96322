//! Where CRuby keeps what the unwinder reads, per version (x86-64 and
//! arm64: LP64, no padding differences in these structures).
//!
//! Ruby exports no offset tables, so these are facts taken from Ruby's
//! headers of each release (`vm_core.h`, `iseq.h`, `internal/string.h`,
//! `include/ruby/internal/core/{rstring,rarray}.h`, `method.h`,
//! `symbol.h`, `iseq.c`) and cross-checked against the offsets the
//! OpenTelemetry eBPF profiler uses. 3.1 is proven against a live
//! process here (`tests/ruby_live.rs`, `tests/ruby.rs`), 3.3 by the chain
//! tests of `tests/ruby.rs` in Debian 13's and unstable's root file
//! systems (names, files, lines: every offset the unwinder and the
//! naming read); the rest are untested facts.

use crate::refusal::Refusal;
use std::fmt;

/// A Ruby release, `major.minor.teeny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RubyVersion {
    /// 3 in 3.1.7.
    pub major: u8,
    /// 1 in 3.1.7.
    pub minor: u8,
    /// 7 in 3.1.7.
    pub teeny: u8,
}

impl RubyVersion {
    /// `major.minor.teeny`.
    pub const fn new(major: u8, minor: u8, teeny: u8) -> RubyVersion {
        RubyVersion { major, minor, teeny }
    }

    /// Parses the start of `ruby_version` ("3.1.7"); anything after the
    /// third number is ignored.
    pub fn parse(text: &str) -> Option<RubyVersion> {
        let (major, minor, teeny) = crate::version::leading_triple(text)?;
        Some(RubyVersion::new(major, minor, teeny))
    }

    fn at_least(self, major: u8, minor: u8) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for RubyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.teeny)
    }
}

/// The oldest release with a layout here.
pub const MIN_RUBY: RubyVersion = RubyVersion::new(2, 7, 0);
/// The newest minor release with a layout here (any teeny).
pub const MAX_RUBY: RubyVersion = RubyVersion::new(3, 4, 255);

/// How a string's length is stored when its bytes are embedded in the
/// object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedLen {
    /// In `flags`: `(flags >> shift) & mask` (before 3.2).
    InFlags {
        /// Bit position of the length.
        shift: u32,
        /// Mask after the shift.
        mask: u64,
    },
    /// A `long` at this offset in the object (3.2 and later).
    Field(u32),
}

/// Where a class keeps its name (`Foo::Bar`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassPathAt {
    /// Not known for this release: frames keep their plain labels.
    Unknown,
    /// In the hidden ivar `__classpath__` of the class's ivar table
    /// (an `st_table` keyed by id): `RClass.ptr` at `ext`, then
    /// `rb_classext_t.iv_tbl` at `iv_tbl` (2.7-3.1).
    IvarTable {
        /// `RClass.ptr` (the `rb_classext_t`).
        ext: u32,
        /// `rb_classext_t.iv_tbl`.
        iv_tbl: u32,
    },
    /// A `VALUE` at this offset in the class object (3.3+: the
    /// classext is embedded in the slot, `classpath` is a field).
    Field(u32),
}

/// Offsets (bytes) and constants of one Ruby minor release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RubyLayout {
    /// The release these facts describe.
    pub version: RubyVersion,
    /// `rb_vm_t.ractor.main_thread` (3.0+); before 3.0 the current
    /// execution context is a plain global instead.
    pub vm_main_thread: Option<u32>,
    /// `rb_thread_t.vm`.
    pub thread_vm: u32,
    /// `rb_thread_t.ec` (a pointer since 3.0).
    pub thread_ec: u32,
    /// `rb_execution_context_t.vm_stack`.
    pub ec_vm_stack: u32,
    /// `rb_execution_context_t.vm_stack_size` (in `VALUE`s).
    pub ec_vm_stack_size: u32,
    /// `rb_execution_context_t.cfp`.
    pub ec_cfp: u32,
    /// `rb_control_frame_t.pc`.
    pub cfp_pc: u32,
    /// `rb_control_frame_t.iseq`.
    pub cfp_iseq: u32,
    /// `rb_control_frame_t.self`.
    pub cfp_self: u32,
    /// `rb_control_frame_t.ep`.
    pub cfp_ep: u32,
    /// `sizeof(rb_control_frame_t)`: the frames are an array growing
    /// down from the end of the VM stack.
    pub cfp_size: u32,
    /// `rb_iseq_t.body`.
    pub iseq_body: u32,
    /// `rb_iseq_constant_body.type`.
    pub body_type: u32,
    /// `rb_iseq_constant_body.iseq_size` (in `VALUE`s).
    pub body_iseq_size: u32,
    /// `rb_iseq_constant_body.iseq_encoded`.
    pub body_iseq_encoded: u32,
    /// `rb_iseq_constant_body.location.pathobj`.
    pub body_pathobj: u32,
    /// `rb_iseq_constant_body.location.base_label`.
    pub body_base_label: u32,
    /// `rb_iseq_constant_body.location.label`.
    pub body_label: u32,
    /// `rb_iseq_constant_body.location.first_lineno` (a Fixnum
    /// `VALUE`): the line of a frame whose pc has no entry.
    pub body_first_lineno: u32,
    /// `rb_iseq_constant_body.insns_info.body`.
    pub body_insns_info: u32,
    /// `rb_iseq_constant_body.insns_info.positions` (NULL in release
    /// builds once the succinct table is built).
    pub body_insns_positions: u32,
    /// `rb_iseq_constant_body.insns_info.size`.
    pub body_insns_size: u32,
    /// `rb_iseq_constant_body.insns_info.succ_index_table`.
    pub body_succ_index_table: u32,
    /// `sizeof(struct iseq_insn_info_entry)`; `line_no` is its first
    /// field.
    pub insn_info_entry_size: u32,
    /// `RString`'s embedded bytes.
    pub rstring_embed_ary: u32,
    /// `RString`'s embedded length.
    pub rstring_embed_len: EmbedLen,
    /// `RString.as.heap.len` (or `RString.len`, 3.3+).
    pub rstring_heap_len: u32,
    /// `RString.as.heap.ptr`.
    pub rstring_heap_ptr: u32,
    /// `(flags >> shift) & mask` is an embedded array's length.
    pub rarray_embed_len_shift: u32,
    /// See `rarray_embed_len_shift`.
    pub rarray_embed_len_mask: u64,
    /// `RArray.as.ary`.
    pub rarray_embed_ary: u32,
    /// `RArray.as.heap.len`.
    pub rarray_heap_len: u32,
    /// `RArray.as.heap.ptr`.
    pub rarray_heap_ptr: u32,
    /// `rb_method_entry_t.def`.
    pub me_def: u32,
    /// `rb_method_entry_t.called_id`.
    pub me_called_id: u32,
    /// `rb_method_entry_t.owner`.
    pub me_owner: u32,
    /// `rb_method_definition_t.body.iseq.iseqptr` (after the 32-bit
    /// type/alias bit fields and `complemented_count`).
    pub def_iseq: u32,
    /// `FL_SINGLETON` in a class's flags: the singleton class of one
    /// object (its methods are named `Foo.bar`, not `Foo#bar`).
    pub fl_singleton: u64,
    /// Where a class's name is.
    pub class_path: ClassPathAt,
    /// `rb_symbols_t.last_id` (a 32-bit serial).
    pub symbols_last_id: u32,
    /// `rb_symbols_t.ids`: an array of arrays of `ID_ENTRY_UNIT`
    /// `(string, symbol)` pairs.
    pub symbols_ids: u32,
    /// `tLAST_OP_ID`: operator ids are their own serial.
    pub last_op_id: u64,
}

/// Flag bits and constants that have not changed over 2.7-3.4.
pub mod consts {
    /// `RUBY_T_MASK`: the type of a heap object, in `flags`.
    pub const T_MASK: u64 = 0x1f;
    /// `RUBY_T_STRING`.
    pub const T_STRING: u64 = 0x05;
    /// `RUBY_T_ARRAY`.
    pub const T_ARRAY: u64 = 0x07;
    /// `RUBY_T_IMEMO`: iseqs and method entries are imemos.
    pub const T_IMEMO: u64 = 0x1a;
    /// The imemo type is `(flags >> 12) & 0xf` (`FL_USHIFT`).
    pub const IMEMO_SHIFT: u32 = 12;
    /// `imemo_ment`: a method entry.
    pub const IMEMO_MENT: u64 = 6;
    /// `imemo_iseq`: an instruction sequence.
    pub const IMEMO_ISEQ: u64 = 7;
    /// `RSTRING_NOEMBED` / `RARRAY_EMBED_FLAG`: `FL_USER1`.
    pub const FL_USER1: u64 = 1 << 13;
    /// `VM_FRAME_MAGIC_MASK`, applied to `ep[0]`.
    pub const FRAME_MAGIC_MASK: u64 = 0x7fff_0001;
    /// `VM_FRAME_MAGIC_CFUNC`.
    pub const FRAME_MAGIC_CFUNC: u64 = 0x5555_0001;
    /// `VM_FRAME_MAGIC_DUMMY`: a frame that runs no code.
    pub const FRAME_MAGIC_DUMMY: u64 = 0x7999_0001;
    /// `VM_FRAME_FLAG_CFRAME`: not a Ruby (iseq) frame.
    pub const FRAME_FLAG_CFRAME: u64 = 0x80;
    /// `VM_METHOD_TYPE_ISEQ`: the low bits (`VM_METHOD_TYPE_MINIMUM_BITS`,
    /// 4) of a method definition's first word.
    pub const METHOD_TYPE_ISEQ: u32 = 0;
    /// The method type's bits.
    pub const METHOD_TYPE_MASK: u32 = 0xf;
    /// `VM_ENV_DATA_INDEX_ME_CREF`: `ep[-2]` holds the method entry.
    pub const EP_ME_CREF: i64 = -2;
    /// `ID_ENTRY_UNIT`: ids per inner array of the symbol table.
    pub const ID_ENTRY_UNIT: u64 = 512;
    /// `ID_ENTRY_SIZE`: (string, symbol) per id.
    pub const ID_ENTRY_SIZE: u64 = 2;
    /// `RUBY_ID_SCOPE_SHIFT`: a non-operator id's serial is `id >> 4`.
    pub const ID_SCOPE_SHIFT: u32 = 4;
    /// `IMMEDIATE_TABLE_SIZE` of the succinct line table.
    pub const SUCC_IMMEDIATE: u64 = 54;
    /// Bits of one `succ_dict_block`.
    pub const SUCC_BLOCK_BITS: u64 = 512;
    /// `offsetof(struct succ_index_table, succ_part)`.
    pub const SUCC_PART: u64 = 48;
    /// `sizeof(struct succ_dict_block)`: rank (u32, padded), small ranks
    /// (u64), 8 words of bits.
    pub const SUCC_BLOCK_SIZE: u64 = 80;
}

impl RubyLayout {
    /// The layout of `version`'s minor release, or why there is none.
    pub fn for_version(version: RubyVersion) -> Result<RubyLayout, Refusal> {
        if version < MIN_RUBY || version > MAX_RUBY {
            let supported = format!("{}.{} to {}.{}", MIN_RUBY.major, MIN_RUBY.minor, MAX_RUBY.major, MAX_RUBY.minor);
            return Err(Refusal::Version { supported });
        }
        let v = version;
        // 3.0 moved the main thread under `vm.ractor` and made
        // `rb_thread_t.ec` a pointer.
        let vm_main_thread = v.at_least(3, 0).then_some(40);
        // 3.1 added `jit_return`; 3.3 removed `__bp__`.
        let cfp_size = if v.at_least(3, 3) {
            56
        } else if v.at_least(3, 1) {
            64
        } else {
            56
        };
        // 3.2 dropped a field before `insns_info`.
        let insns = if v.at_least(3, 2) { 112 } else { 120 };
        // 3.1 added `node_id` to each line entry.
        let insn_info_entry_size = if v.at_least(3, 1) { 12 } else { 8 };
        let (rstring_embed_ary, rstring_embed_len) = if v.at_least(3, 2) {
            (24, EmbedLen::Field(16))
        } else {
            // RSTRING_EMBED_LEN_MASK: FL_USER2..FL_USER6.
            (16, EmbedLen::InFlags { shift: 14, mask: 0x1f })
        };
        // RARRAY_EMBED_LEN_MASK: FL_USER3..FL_USER4 before 3.1,
        // FL_USER3..FL_USER9 after.
        let rarray_embed_len_mask = if v.at_least(3, 1) { 0x7f } else { 0x3 };
        let last_op_id = if v.at_least(3, 4) {
            170
        } else if v.at_least(3, 1) {
            169
        } else {
            168
        };
        // 3.2 moved class ivars to shapes (not read here); 3.3 added a
        // `classpath` field to the embedded classext.
        let class_path = if v.at_least(3, 3) {
            ClassPathAt::Field(32 + 120)
        } else if v.at_least(3, 2) {
            ClassPathAt::Unknown
        } else {
            ClassPathAt::IvarTable { ext: 24, iv_tbl: 8 }
        };
        Ok(RubyLayout {
            version,
            vm_main_thread,
            thread_vm: 32,
            thread_ec: 40,
            ec_vm_stack: 0,
            ec_vm_stack_size: 8,
            ec_cfp: 16,
            cfp_pc: 0,
            cfp_iseq: 16,
            cfp_self: 24,
            cfp_ep: 32,
            cfp_size,
            iseq_body: 16,
            body_type: 0,
            body_iseq_size: 4,
            body_iseq_encoded: 8,
            body_pathobj: 64,
            body_base_label: 72,
            body_label: 80,
            body_first_lineno: 88,
            body_insns_info: insns,
            body_insns_positions: insns + 8,
            body_insns_size: insns + 16,
            body_succ_index_table: insns + 24,
            insn_info_entry_size,
            rstring_embed_ary,
            rstring_embed_len,
            rstring_heap_len: 16,
            rstring_heap_ptr: 24,
            rarray_embed_len_shift: 15,
            rarray_embed_len_mask,
            rarray_embed_ary: 16,
            rarray_heap_len: 16,
            rarray_heap_ptr: 32,
            me_def: 16,
            me_called_id: 24,
            me_owner: 32,
            def_iseq: 8,
            // FL_USER0 (FL_USER1 from 3.4).
            fl_singleton: if v.at_least(3, 4) { 1 << 13 } else { 1 << 12 },
            class_path,
            symbols_last_id: 0,
            symbols_ids: 16,
            last_op_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_bound_the_layouts() {
        assert_eq!(RubyVersion::parse("3.1.7"), Some(RubyVersion::new(3, 1, 7)));
        assert_eq!(RubyVersion::parse("3.4.0-preview1"), Some(RubyVersion::new(3, 4, 0)));
        assert_eq!(RubyVersion::parse("3.1"), None);
        assert_eq!(RubyVersion::parse("x.1.2"), None);
        assert!(RubyLayout::for_version(RubyVersion::new(2, 6, 10)).is_err());
        assert!(matches!(RubyLayout::for_version(RubyVersion::new(3, 5, 0)), Err(Refusal::Version { .. })));
        let l31 = RubyLayout::for_version(RubyVersion::new(3, 1, 7)).unwrap();
        assert_eq!((l31.cfp_size, l31.body_insns_info, l31.insn_info_entry_size), (64, 120, 12));
        let l27 = RubyLayout::for_version(RubyVersion::new(2, 7, 8)).unwrap();
        assert_eq!((l27.cfp_size, l27.vm_main_thread, l27.insn_info_entry_size), (56, None, 8));
        let l33 = RubyLayout::for_version(RubyVersion::new(3, 3, 9)).unwrap();
        assert_eq!((l33.cfp_size, l33.body_insns_info, l33.rstring_embed_ary), (56, 112, 24));
    }

    /// The 3.3 facts the chain tests of `tests/ruby.rs` prove on Debian's
    /// 3.3.8 (a change here makes them fail there): `rb_control_frame_t`
    /// without `__bp__` (56 bytes: pc, sp, iseq, self, ep, block_code,
    /// jit_return), `insns_info` at 112 with 12-byte entries, embedded
    /// strings' length as a field, the class name in the embedded
    /// classext's `classpath`, `FL_SINGLETON` still `FL_USER0`.
    #[test]
    fn ruby_3_3_facts() {
        let l = RubyLayout::for_version(RubyVersion::new(3, 3, 8)).unwrap();
        assert_eq!((l.vm_main_thread, l.ec_vm_stack, l.ec_vm_stack_size, l.ec_cfp), (Some(40), 0, 8, 16));
        assert_eq!((l.cfp_pc, l.cfp_iseq, l.cfp_self, l.cfp_ep, l.cfp_size), (0, 16, 24, 32, 56));
        assert_eq!((l.iseq_body, l.body_iseq_encoded, l.body_pathobj, l.body_label), (16, 8, 64, 80));
        assert_eq!((l.body_insns_info, l.body_succ_index_table, l.insn_info_entry_size), (112, 136, 12));
        assert_eq!((l.rstring_embed_ary, l.rstring_embed_len), (24, EmbedLen::Field(16)));
        assert_eq!((l.me_def, l.me_called_id, l.me_owner, l.def_iseq), (16, 24, 32, 8));
        assert_eq!((l.class_path, l.fl_singleton, l.last_op_id), (ClassPathAt::Field(152), 1 << 12, 169));
    }
}
