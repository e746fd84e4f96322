//! Bounded reads of a Ruby process's objects: every value comes from a
//! process that may be hostile, so each read is checked (type tag,
//! length cap) and fails rather than guesses.

use super::layout::{consts, EmbedLen, RubyLayout};
use crate::memory::ProcessMemory;

/// Longest string read (labels, paths, method names).
pub const MAX_STRING: u64 = 4096;

/// The little-endian `u64` at `address`.
pub(crate) fn read_u64(memory: &dyn ProcessMemory, address: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    memory.read(address, &mut b).then(|| u64::from_le_bytes(b))
}

/// The little-endian `u32` at `address`.
pub(crate) fn read_u32(memory: &dyn ProcessMemory, address: u64) -> Option<u32> {
    let mut b = [0u8; 4];
    memory.read(address, &mut b).then(|| u32::from_le_bytes(b))
}

/// `len` bytes at `address`.
pub(crate) fn read_bytes(memory: &dyn ProcessMemory, address: u64, len: usize) -> Option<Vec<u8>> {
    let mut b = vec![0u8; len];
    memory.read(address, &mut b).then_some(b)
}

/// `address + off`, or None on overflow.
pub(crate) fn at(address: u64, off: u32) -> Option<u64> {
    address.checked_add(u64::from(off))
}

/// True for a `VALUE` that can be a heap object: nonzero, aligned, not a
/// special constant (Fixnum, Symbol, Flonum, nil, true, false, undef).
pub(crate) fn is_heap_object(value: u64) -> bool {
    value != 0 && value & 7 == 0 && value > 0x100
}

/// The heap object's `flags`, if `value` is one of type `t_type`.
pub(crate) fn flags_of(memory: &dyn ProcessMemory, value: u64, t_type: u64) -> Option<u64> {
    if !is_heap_object(value) {
        return None;
    }
    let flags = read_u64(memory, value)?;
    (flags & consts::T_MASK == t_type).then_some(flags)
}

/// The bytes of the `String` at `value` (embedded or on the heap), of at
/// most [`MAX_STRING`] bytes.
pub(crate) fn read_rstring(memory: &dyn ProcessMemory, layout: &RubyLayout, value: u64) -> Option<String> {
    let flags = flags_of(memory, value, consts::T_STRING)?;
    let (ptr, len) = if flags & consts::FL_USER1 == 0 {
        let len = match layout.rstring_embed_len {
            EmbedLen::InFlags { shift, mask } => (flags >> shift) & mask,
            EmbedLen::Field(off) => read_u64(memory, at(value, off)?)?,
        };
        (at(value, layout.rstring_embed_ary)?, len)
    } else {
        (read_u64(memory, at(value, layout.rstring_heap_ptr)?)?, read_u64(memory, at(value, layout.rstring_heap_len)?)?)
    };
    if len > MAX_STRING || ptr == 0 {
        return None;
    }
    let bytes = read_bytes(memory, ptr, len as usize)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The length and element pointer of the `Array` at `value`; the length
/// is capped by `max_len`.
pub(crate) fn rarray(memory: &dyn ProcessMemory, layout: &RubyLayout, value: u64, max_len: u64) -> Option<(u64, u64)> {
    let flags = flags_of(memory, value, consts::T_ARRAY)?;
    let (len, ptr) = if flags & consts::FL_USER1 != 0 {
        ((flags >> layout.rarray_embed_len_shift) & layout.rarray_embed_len_mask, at(value, layout.rarray_embed_ary)?)
    } else {
        (read_u64(memory, at(value, layout.rarray_heap_len)?)?, read_u64(memory, at(value, layout.rarray_heap_ptr)?)?)
    };
    (len <= max_len && ptr != 0).then_some((len, ptr))
}

/// Element `index` of the `Array` at `value`, if it has one.
pub(crate) fn rarray_entry(memory: &dyn ProcessMemory, layout: &RubyLayout, value: u64, index: u64) -> Option<u64> {
    let (len, ptr) = rarray(memory, layout, value, 1 << 24)?;
    if index >= len {
        return None;
    }
    read_u64(memory, ptr.checked_add(index.checked_mul(8)?)?)
}

/// A file name from an iseq's `pathobj`: a `String`, or an `Array` of
/// `[path, realpath]` (the path as given is kept: it is what Ruby prints
/// in backtraces).
pub(crate) fn read_pathobj(memory: &dyn ProcessMemory, layout: &RubyLayout, pathobj: u64) -> Option<String> {
    if flags_of(memory, pathobj, consts::T_ARRAY).is_some() {
        let path = rarray_entry(memory, layout, pathobj, 0)?;
        return read_rstring(memory, layout, path);
    }
    read_rstring(memory, layout, pathobj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use crate::ruby::RubyVersion;

    #[test]
    fn strings_embedded_heap_and_bounded() {
        let layout = RubyLayout::for_version(RubyVersion::new(3, 1, 7)).unwrap();
        let mut m = FakeMemory::default();
        // Embedded "abc": length 3 in flags bits 14.., bytes at +16.
        let mut obj = (consts::T_STRING | (3 << 14)).to_le_bytes().to_vec();
        obj.extend_from_slice(&[0; 8]);
        obj.extend_from_slice(b"abc\0\0\0\0\0");
        m.add(0x1000, obj);
        assert_eq!(read_rstring(&m, &layout, 0x1000).as_deref(), Some("abc"));
        // On the heap: len 5 at +16, ptr at +24.
        m.words(0x2000, &[consts::T_STRING | consts::FL_USER1, 0, 5, 0x3000]);
        m.add(0x3000, b"hello".to_vec());
        assert_eq!(read_rstring(&m, &layout, 0x2000).as_deref(), Some("hello"));
        m.words(0x4000, &[consts::T_STRING | consts::FL_USER1, 0, MAX_STRING + 1, 0x3000]);
        assert_eq!(read_rstring(&m, &layout, 0x4000), None, "too long");
        m.words(0x5000, &[consts::T_ARRAY, 0, 0, 0]);
        assert_eq!(read_rstring(&m, &layout, 0x5000), None, "not a string");
        assert_eq!(read_rstring(&m, &layout, 0x15), None, "a Fixnum");
        // pathobj as an embedded [path, realpath] array.
        m.words(0x6000, &[consts::T_ARRAY | consts::FL_USER1 | (2 << 15), 0, 0x2000, 0x1000]);
        assert_eq!(read_pathobj(&m, &layout, 0x6000).as_deref(), Some("hello"));
        assert_eq!(rarray_entry(&m, &layout, 0x6000, 2), None, "past the end");
    }
}
