//! The BPF/Rust contract, generated from `ebpf/types.h` by `build.rs`
//! (bindgen): every struct that crosses a map or a ring buffer, every
//! shared enum and limit, by the header's own names. Nothing here is
//! retyped; the tests below check the Rust layouts against the BTF of the
//! header compiled for the BPF target.
//!
//! It sits below every crate that writes or reads a BPF map: profiler-bpf
//! (the programs, the shared maps) and each runtime's folder in
//! profiler-interpreters (its own map value, [`c`]'s struct of it).
#![deny(missing_docs)]

/// The header's items, as bindgen wrote them.
#[allow(missing_docs, non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code, clippy::all)]
pub mod c {
    include!(concat!(env!("OUT_DIR"), "/contract.rs"));
}

/// A contract struct that is plain bytes: `repr(C)`, integer fields only,
/// no padding (the layout test checks the last two for every struct of
/// the header).
///
/// # Safety
/// Implemented for bindgen's structs of `types.h` only (by build.rs).
pub unsafe trait Pod: Copy + Default {}

include!(concat!(env!("OUT_DIR"), "/contract_pod.rs"));

/// The bytes of `value`, as a map update takes them.
pub fn bytes_of<T: Pod>(value: &T) -> &[u8] {
    // SAFETY: T is repr(C) plain integers without padding (Pod), so every
    // byte is initialised.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

/// Reads a `T` from the start of `bytes`; `None` if they are too short.
pub fn read<T: Pod>(bytes: &[u8]) -> Option<T> {
    let bytes = bytes.get(..size_of::<T>())?;
    let mut value = T::default();
    // SAFETY: every bit pattern is a valid T (plain integers), and the
    // destination is exactly size_of::<T>() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut value as *mut T).cast::<u8>(), size_of::<T>()) };
    Some(value)
}

// The constants of every enum of the header, by name (for the tests of
// the crates that mirror an enum or a list of the header).
include!(concat!(env!("OUT_DIR"), "/contract_enums.rs"));

// The list of runtimes, ebpf/runtimes.h, for profiler-bpf's
// InterpreterUnwinder: the one list a new runtime adds a line to.
include!(concat!(env!("OUT_DIR"), "/contract_runtimes.rs"));

#[cfg(test)]
mod tests {
    use super::c::*;
    use super::*;
    use libbpf_rs::btf::types::{Composite, Enum, MemberAttr};
    use libbpf_rs::btf::{Btf, HasSize};

    /// One struct of the header as Rust lays it out.
    #[derive(Debug)]
    struct StructLayout {
        name: &'static str,
        size: usize,
        fields: Vec<FieldLayout>,
    }

    /// One field of a [`StructLayout`].
    #[derive(Debug)]
    struct FieldLayout {
        name: &'static str,
        offset: usize,
        size: usize,
    }

    fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
        size_of::<F>()
    }

    // rust_structs(): every struct of the header, as Rust lays it out.
    include!(concat!(env!("OUT_DIR"), "/contract_layout.rs"));

    fn contract_btf() -> Btf<'static> {
        let path = concat!(env!("OUT_DIR"), "/contract.bpf.o");
        Btf::from_path(path).unwrap_or_else(|e| panic!("BTF of {path}: {e}"))
    }

    /// Every field of every struct of types.h: same size, offsets and
    /// sizes in Rust (bindgen, host) as in the BPF target's BTF.
    #[test]
    fn struct_layouts_match_bpf_btf() {
        let btf = contract_btf();
        let structs = rust_structs();
        assert!(structs.len() >= 10, "bindgen saw the shared structs: {structs:?}");
        for rust in &structs {
            let bpf: Composite<'_> = btf
                .type_by_name(rust.name)
                .unwrap_or_else(|| panic!("struct {} is not in the BPF object's BTF", rust.name));
            assert_eq!(bpf.size(), rust.size, "sizeof(struct {})", rust.name);
            let members: Vec<_> = bpf.iter().collect();
            assert_eq!(members.len(), rust.fields.len(), "fields of struct {}", rust.name);
            for (member, field) in members.iter().zip(&rust.fields) {
                let name = member.name.and_then(|n| n.to_str()).unwrap_or("");
                assert_eq!(name, field.name, "struct {}: field order", rust.name);
                let MemberAttr::Normal { offset: bits } = member.attr else {
                    panic!("struct {}.{}: bit fields are not part of the contract", rust.name, field.name);
                };
                assert_eq!(bits as usize, field.offset * 8, "offset of {}.{}", rust.name, field.name);
                let member_size = btf
                    .type_by_id::<libbpf_rs::btf::BtfType<'_>>(member.ty)
                    .map(|t| t.skip_mods_and_typedefs())
                    .and_then(|t| btf_size(&btf, t))
                    .unwrap_or_else(|| panic!("size of {}.{}", rust.name, field.name));
                assert_eq!(member_size, field.size, "size of {}.{}", rust.name, field.name);
            }
            // Pod: no padding, so bytes_of() never exposes uninitialised bytes.
            let used: usize = rust.fields.iter().map(|f| f.size).sum();
            assert_eq!(used, rust.size, "struct {} has padding: name it (reserved) in types.h", rust.name);
        }
    }

    fn btf_size(btf: &Btf<'_>, t: libbpf_rs::btf::BtfType<'_>) -> Option<usize> {
        use libbpf_rs::btf::types::{Array, Composite, Int};
        if let Ok(i) = Int::try_from(t) {
            return Some(i.size());
        }
        if let Ok(e) = Enum::try_from(t) {
            return Some(e.size());
        }
        if let Ok(c) = Composite::try_from(t) {
            return Some(c.size());
        }
        if let Ok(a) = Array::try_from(t) {
            let elem = btf.type_by_id::<libbpf_rs::btf::BtfType<'_>>(a.ty())?.skip_mods_and_typedefs();
            return Some(a.capacity() * btf_size(btf, elem)?);
        }
        None
    }

    /// Every enum of types.h: the same constants with the same values.
    #[test]
    fn enum_values_match_bpf_btf() {
        let btf = contract_btf();
        assert!(RUST_ENUMS.iter().any(|(n, _)| *n == "unwind_stop"));
        for (name, variants) in RUST_ENUMS {
            let bpf: Enum<'_> =
                btf.type_by_name(name).unwrap_or_else(|| panic!("enum {name} is not in the BPF object's BTF"));
            let bpf: Vec<(String, i64)> =
                bpf.iter().map(|m| (m.name.and_then(|n| n.to_str()).unwrap_or("").to_string(), m.value)).collect();
            let rust: Vec<(String, i64)> = variants.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            assert_eq!(bpf, rust, "enum {name}");
        }
    }

    /// The limits the Rust side sizes buffers with are the header's.
    #[test]
    fn header_constants_reach_rust() {
        assert_eq!(
            size_of::<sample_event>(),
            SAMPLE_EVENT_HEADER_SIZE as usize + 8 * (MAX_KERNEL_FRAMES + MAX_USER_FRAMES) as usize
        );
        assert_eq!(PYTHON_FRAME_CODE_MASK, (1 << PYTHON_FRAME_OFFSET_SHIFT) - 1);
        // The frame words' format is decoded in profiler_trace (which
        // cannot use the generated types): its bits are the header's.
        // (bindgen picks each constant's width by its value.)
        use profiler_trace as t;
        assert_eq!(t::FRAME_EXACT_PC, FRAME_EXACT_PC);
        assert_eq!(t::FRAME_INTERPRETED, FRAME_INTERPRETED);
        assert_eq!(t::FRAME_WIDE, FRAME_WIDE);
        assert_eq!(u64::from(t::FRAME_WIDE_SLOT), FRAME_WIDE_SLOT);
        assert_eq!(u64::from(t::FRAME_WIDE_PAYLOAD_BITS), FRAME_WIDE_PAYLOAD_BITS);
        assert_eq!(u64::from(t::FRAME_PLAIN_SLOT), FRAME_PLAIN_SLOT);
        assert_eq!(u64::from(t::FRAME_PLAIN_PAYLOAD_BITS), FRAME_PLAIN_PAYLOAD_BITS);
        assert_eq!(t::FRAME_COMPACT, FRAME_COMPACT);
        assert_eq!(u64::from(t::FRAME_COMPACT_SLOT_SHIFT), FRAME_COMPACT_SLOT_SHIFT);
        assert_eq!(t::FRAME_COMPACT_SLOT_MASK, FRAME_COMPACT_SLOT_MASK);
        assert_eq!(u64::from(t::FRAME_COMPACT_SLOT_MIN), FRAME_COMPACT_SLOT_MIN);
        assert_eq!(u64::from(t::FRAME_COMPACT_PAYLOAD_BITS), FRAME_COMPACT_PAYLOAD_BITS);
        assert_eq!(u64::from(t::FRAME_EXTENDED_SLOT_SHIFT), FRAME_EXTENDED_SLOT_SHIFT);
        assert_eq!(t::FRAME_EXTENDED_SLOT_MASK, FRAME_EXTENDED_SLOT_MASK);
        assert_eq!(u64::from(t::FRAME_EXTENDED_SLOT_MIN), FRAME_EXTENDED_SLOT_MIN);
        assert_eq!(u64::from(t::FRAME_EXTENDED_PAYLOAD_BITS), FRAME_EXTENDED_PAYLOAD_BITS);
        // The classes' fields do not overlap: each payload lies below its
        // class's tag and slot, and the slot field of a compact word below
        // FRAME_COMPACT (checked when the tests build). Each runtime's
        // payload fields are checked in its folder (profiler-interpreters).
        const {
            assert!(FRAME_WIDE_PAYLOAD_BITS <= 61 && FRAME_PLAIN_PAYLOAD_BITS <= 60);
            assert!(FRAME_COMPACT_SLOT_MASK << FRAME_COMPACT_SLOT_SHIFT & FRAME_COMPACT == 0);
            assert!(FRAME_COMPACT_PAYLOAD_BITS <= FRAME_COMPACT_SLOT_SHIFT);
            assert!(FRAME_EXTENDED_SLOT_SHIFT + 8 <= FRAME_COMPACT_SLOT_SHIFT);
            assert!(FRAME_EXTENDED_PAYLOAD_BITS <= FRAME_EXTENDED_SLOT_SHIFT);
        }
    }

    #[test]
    fn bytes_round_trip() {
        let v = pid_mapping { file_id: 7, bias: 0x1000, kind: MAPPING_KIND_NATIVE, flags: 1 };
        assert_eq!(bytes_of(&v).len(), 24);
        assert_eq!(read::<pid_mapping>(bytes_of(&v)), Some(v));
        assert_eq!(read::<pid_mapping>(&bytes_of(&v)[..23]), None);
    }
}
