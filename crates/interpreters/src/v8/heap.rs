//! Bounded reads of V8 heap objects from an untrusted process: typed
//! object pointers, Smis, strings (sequential, cons, thin, sliced), fixed
//! arrays of Smis and byte arrays. Every length is checked against a cap
//! before anything is read; recursion into strings has a depth limit.

use super::layout::V8Layout;
use crate::memory::ProcessMemory;

/// Longest string read (function names, script names).
pub const MAX_STRING: usize = 4096;
/// Deepest cons/thin/sliced string chain followed.
const MAX_STRING_DEPTH: u32 = 8;
/// Largest byte array (source position table) read.
pub const MAX_BYTE_ARRAY: usize = 1 << 20;
/// Largest Smi array (a script's line ends) read.
pub const MAX_SMI_ARRAY: usize = 1 << 20;

/// Heap reads against one process and layout.
pub struct Heap<'a> {
    /// The process.
    pub memory: &'a dyn ProcessMemory,
    /// Its V8 layout.
    pub layout: &'a V8Layout,
}

impl Heap<'_> {
    /// The `u64` at `address`.
    pub fn u64(&self, address: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.memory.read(address, &mut b).then(|| u64::from_le_bytes(b))
    }

    fn u16(&self, address: u64) -> Option<u16> {
        let mut b = [0u8; 2];
        self.memory.read(address, &mut b).then(|| u16::from_le_bytes(b))
    }

    fn i32(&self, address: u64) -> Option<i32> {
        let mut b = [0u8; 4];
        self.memory.read(address, &mut b).then(|| i32::from_le_bytes(b))
    }

    /// The tagged field at `offset` of the object `tagged`.
    pub fn field(&self, tagged: u64, offset: u32) -> Option<u64> {
        self.u64(untag(tagged)?.checked_add(u64::from(offset))?)
    }

    /// The `i32` field at `offset` of the object `tagged`.
    pub fn field_i32(&self, tagged: u64, offset: u32) -> Option<i32> {
        self.i32(untag(tagged)?.checked_add(u64::from(offset))?)
    }

    /// The Smi field at `offset` of the object `tagged`.
    pub fn smi_field(&self, tagged: u64, offset: u32) -> Option<i64> {
        self.layout.smi(self.field(tagged, offset)?)
    }

    /// The instance type of the heap object `tagged`.
    pub fn instance_type(&self, tagged: u64) -> Option<u16> {
        let map = self.field(tagged, self.layout.heap_object_map)?;
        self.u16(untag(map)?.checked_add(u64::from(self.layout.map_instance_type))?)
    }

    /// `tagged` if it is a heap object of instance type `ty`.
    pub fn typed(&self, tagged: u64, ty: u16) -> Option<u64> {
        (self.instance_type(tagged)? == ty).then_some(tagged)
    }

    /// Whether `tagged` is a `JSFunction` (or one of its subclasses).
    pub fn is_js_function(&self, tagged: u64) -> bool {
        let l = self.layout;
        self.instance_type(tagged).is_some_and(|t| (l.type_js_function_first..=l.type_js_function_last).contains(&t))
    }

    /// The string `tagged`, if it is one: at most [`MAX_STRING`]
    /// characters (longer ones are cut), `None` for external strings (their
    /// characters are behind a C++ resource object) and anything invalid.
    pub fn string(&self, tagged: u64) -> Option<String> {
        self.string_up_to(tagged, MAX_STRING)
    }

    /// [`Heap::string`] with a cap of `max` characters.
    pub fn string_up_to(&self, tagged: u64, max: usize) -> Option<String> {
        let mut out = String::new();
        let mut budget = max;
        self.append_string(tagged, 0, usize::MAX, MAX_STRING_DEPTH, &mut budget, &mut out)?;
        Some(out)
    }

    /// Appends characters `skip..skip+take` of string `tagged` to `out`
    /// (at most `budget` characters, which it decreases).
    fn append_string(
        &self,
        tagged: u64,
        skip: usize,
        take: usize,
        depth: u32,
        budget: &mut usize,
        out: &mut String,
    ) -> Option<()> {
        let l = self.layout;
        let ty = self.instance_type(tagged)?;
        if ty >= l.first_nonstring_type || depth == 0 {
            return None;
        }
        let len = usize::try_from(self.field_i32(tagged, l.string_length)?).ok()?;
        let end = len.min(skip.saturating_add(take));
        if skip >= end {
            return Some(());
        }
        let end = end.min(skip.saturating_add(*budget));
        let rep = ty & l.string_representation_mask;
        if rep == l.seq_string_tag {
            let one_byte = ty & l.string_encoding_mask == l.one_byte_string_tag;
            let width = if one_byte { 1 } else { 2 };
            let mut buf = vec![0u8; (end - skip) * width];
            let start =
                untag(tagged)?.checked_add(u64::from(l.seq_string_chars))?.checked_add((skip * width) as u64)?;
            if !self.memory.read(start, &mut buf) {
                return None;
            }
            *budget -= end - skip;
            if one_byte {
                out.extend(buf.iter().map(|&b| char::from(b)));
            } else {
                let units = buf.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
                out.extend(char::decode_utf16(units).map(|c| c.unwrap_or('\u{fffd}')));
            }
            Some(())
        } else if rep == l.cons_string_tag {
            let first = self.field(tagged, l.cons_first)?;
            let second = self.field(tagged, l.cons_second)?;
            let first_len = usize::try_from(self.field_i32(first, l.string_length)?).ok()?;
            if skip < first_len {
                self.append_string(first, skip, end - skip, depth - 1, budget, out)?;
            }
            if end > first_len {
                let from = skip.saturating_sub(first_len);
                self.append_string(second, from, end - first_len.max(skip), depth - 1, budget, out)?;
            }
            Some(())
        } else if rep == l.thin_string_tag {
            self.append_string(self.field(tagged, l.thin_actual)?, skip, end - skip, depth - 1, budget, out)
        } else if rep == l.sliced_string_tag {
            let parent = self.field(tagged, l.sliced_parent)?;
            let offset = usize::try_from(self.smi_field(tagged, l.sliced_offset)?).ok()?;
            self.append_string(parent, offset.checked_add(skip)?, end - skip, depth - 1, budget, out)
        } else {
            None
        }
    }

    /// The bytes of the `ByteArray` `tagged` (at most [`MAX_BYTE_ARRAY`]).
    pub fn byte_array(&self, tagged: u64) -> Option<Vec<u8>> {
        let l = self.layout;
        self.typed(tagged, l.type_byte_array)?;
        let len = usize::try_from(self.smi_field(tagged, l.fixed_array_length)?).ok()?;
        if len > MAX_BYTE_ARRAY {
            return None;
        }
        let mut buf = vec![0u8; len];
        let start = untag(tagged)?.checked_add(u64::from(l.fixed_array_data))?;
        self.memory.read(start, &mut buf).then_some(buf)
    }

    /// The Smis of the `FixedArray` `tagged` (at most [`MAX_SMI_ARRAY`]),
    /// `None` if any element is not a Smi.
    pub fn smi_array(&self, tagged: u64) -> Option<Vec<i64>> {
        let l = self.layout;
        self.typed(tagged, l.type_fixed_array)?;
        let len = usize::try_from(self.smi_field(tagged, l.fixed_array_length)?).ok()?;
        if len > MAX_SMI_ARRAY {
            return None;
        }
        let mut buf = vec![0u8; len * 8];
        let start = untag(tagged)?.checked_add(u64::from(l.fixed_array_data))?;
        if !self.memory.read(start, &mut buf) {
            return None;
        }
        buf.chunks_exact(8).map(|c| l.smi(u64::from_le_bytes(c.try_into().unwrap_or([1; 8])))).collect()
    }
}

/// The address of the heap object `tagged`, if it is a heap object pointer.
pub fn untag(tagged: u64) -> Option<u64> {
    V8Layout::is_heap_object(tagged).then(|| tagged - 1)
}
