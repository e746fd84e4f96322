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
/// Moves of an object followed (see [`Heap::forwarded`]).
pub const MAX_FORWARDS: usize = 3;
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

    /// `tagged`, or where the garbage collector moved it: a moved
    /// object's map word holds its new address (untagged: V8's `MapWord`
    /// forwarding address, builds without pointer compression) until the
    /// space it left is reused (the next scavenge copies into it). A
    /// young object moves twice (within the young generation, then to the
    /// old one): at most [`MAX_FORWARDS`] moves are followed. `None` if it
    /// is neither an object nor moved to one.
    pub fn forwarded(&self, tagged: u64) -> Option<u64> {
        let mut at = tagged;
        for _ in 0..=MAX_FORWARDS {
            let map = self.field(at, self.layout.heap_object_map)?;
            if V8Layout::is_heap_object(map) {
                return Some(at);
            }
            if map == 0 || map & 7 != 0 {
                return None;
            }
            at = map + 1;
        }
        None
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

    /// The bytes of the `ByteArray` (or `TrustedByteArray`: same header)
    /// `tagged` (at most [`MAX_BYTE_ARRAY`]).
    pub fn byte_array(&self, tagged: u64) -> Option<Vec<u8>> {
        let l = self.layout;
        if !l.is_byte_array(self.instance_type(tagged)?) {
            return None;
        }
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use crate::v8::layout::tests::test_layout;

    /// Node 20's string-related values.
    pub(crate) fn layout() -> V8Layout {
        V8Layout {
            heap_object_map: 0,
            map_instance_type: 12,
            first_nonstring_type: 128,
            string_representation_mask: 7,
            seq_string_tag: 0,
            cons_string_tag: 1,
            external_string_tag: 2,
            sliced_string_tag: 3,
            thin_string_tag: 5,
            string_encoding_mask: 8,
            one_byte_string_tag: 8,
            string_length: 12,
            seq_string_chars: 16,
            cons_first: 16,
            cons_second: 24,
            thin_actual: 16,
            sliced_parent: 16,
            sliced_offset: 24,
            fixed_array_length: 8,
            fixed_array_data: 16,
            type_byte_array: 200,
            type_fixed_array: 201,
            ..test_layout()
        }
    }

    /// Builds objects at fixed addresses; a map per instance type.
    pub(crate) struct Builder {
        pub mem: FakeMemory,
        next: u64,
    }

    impl Builder {
        pub fn new() -> Builder {
            Builder { mem: FakeMemory::default(), next: 0x10_0000 }
        }

        /// A map of instance type `ty`; returns its tagged pointer.
        pub fn map(&mut self, ty: u16) -> u64 {
            let mut b = vec![0u8; 16];
            b[12..14].copy_from_slice(&ty.to_le_bytes());
            self.object(b)
        }

        /// An object with these bytes; returns its tagged pointer.
        pub fn object(&mut self, bytes: Vec<u8>) -> u64 {
            let at = self.next;
            self.next += (bytes.len() as u64 + 0xff) & !0xff;
            self.mem.add(at, bytes);
            at + 1
        }

        /// An object of type `ty` with tagged/int fields at offsets.
        pub fn typed(&mut self, ty: u16, size: usize, fields: &[(usize, u64)], ints: &[(usize, i32)]) -> u64 {
            let map = self.map(ty);
            let mut b = vec![0u8; size];
            b[..8].copy_from_slice(&map.to_le_bytes());
            for &(off, v) in fields {
                b[off..off + 8].copy_from_slice(&v.to_le_bytes());
            }
            for &(off, v) in ints {
                b[off..off + 4].copy_from_slice(&v.to_le_bytes());
            }
            self.object(b)
        }

        /// A sequential one-byte string.
        pub fn one_byte(&mut self, s: &str) -> u64 {
            let map = self.map(8);
            let mut b = vec![0u8; 16 + s.len()];
            b[..8].copy_from_slice(&map.to_le_bytes());
            b[12..16].copy_from_slice(&(s.len() as i32).to_le_bytes());
            b[16..].copy_from_slice(s.as_bytes());
            self.object(b)
        }
    }

    /// A moved object's old copies lead to it, a bounded number of moves.
    #[test]
    fn moved_objects_are_followed() {
        let l = layout();
        let mut b = Builder::new();
        let function = b.typed(300, 32, &[], &[]);
        let mut copies = vec![function];
        for _ in 0..MAX_FORWARDS + 1 {
            let last = *copies.last().unwrap();
            copies.push(b.object((last - 1).to_le_bytes().to_vec()));
        }
        let zero = b.object(vec![0; 8]);
        let odd = b.object(0x1234_5674u64.to_le_bytes().to_vec());
        // An object moved to itself.
        let at = b.next;
        let cycle = b.object(at.to_le_bytes().to_vec());
        assert_eq!(cycle, at + 1);
        let heap = Heap { memory: &b.mem, layout: &l };
        for (moves, &copy) in copies.iter().enumerate() {
            let expected = (moves <= MAX_FORWARDS).then_some(function);
            assert_eq!(heap.forwarded(copy), expected, "{moves} moves");
        }
        assert_eq!(heap.forwarded(zero), None);
        assert_eq!(heap.forwarded(odd), None);
        assert_eq!(heap.forwarded(cycle), None);
        assert_eq!(heap.forwarded(0x7000_0001), None);
    }

    #[test]
    fn strings_of_every_representation() {
        let l = layout();
        let mut b = Builder::new();
        let hello = b.one_byte("hello ");
        let two = {
            let map = b.map(0);
            let units: Vec<u16> = "wörld".encode_utf16().collect();
            let mut o = vec![0u8; 16 + 2 * units.len()];
            o[..8].copy_from_slice(&map.to_le_bytes());
            o[12..16].copy_from_slice(&(units.len() as i32).to_le_bytes());
            for (i, u) in units.iter().enumerate() {
                o[16 + 2 * i..18 + 2 * i].copy_from_slice(&u.to_le_bytes());
            }
            b.object(o)
        };
        let cons = b.typed(1 | 8, 32, &[(16, hello), (24, two)], &[(12, 11)]);
        let thin = b.typed(5 | 8, 24, &[(16, cons)], &[(12, 11)]);
        let sliced = b.typed(3 | 8, 32, &[(16, cons), (24, 4u64 << 32)], &[(12, 5)]);
        let external = b.typed(2 | 8, 32, &[], &[(12, 3)]);
        let not_string = b.typed(300, 16, &[], &[]);
        let heap = Heap { memory: &b.mem, layout: &l };
        assert_eq!(heap.string(hello).as_deref(), Some("hello "));
        assert_eq!(heap.string(two).as_deref(), Some("wörld"));
        assert_eq!(heap.string(cons).as_deref(), Some("hello wörld"));
        assert_eq!(heap.string(thin).as_deref(), Some("hello wörld"));
        assert_eq!(heap.string(sliced).as_deref(), Some("o wör"));
        assert_eq!(heap.string_up_to(cons, 8).as_deref(), Some("hello wö"), "capped");
        assert_eq!(heap.string(external), None);
        assert_eq!(heap.string(not_string), None);
        assert_eq!(heap.string(hello - 1), None, "untagged pointer");
        assert_eq!(heap.string(0x7777_0001), None, "unmapped");
    }

    #[test]
    fn hostile_objects_fail_cleanly() {
        let l = layout();
        let mut b = Builder::new();
        // A string claiming 2 GiB of characters: read fails, no allocation
        // beyond the cap.
        let huge = b.typed(8, 24, &[], &[(12, i32::MAX)]);
        let negative = b.typed(8, 24, &[], &[(12, -5)]);
        // A cons string whose halves are itself: the depth limit stops it.
        let cons_addr = 0x10_0000 + 0x100 * 5 + 1;
        let looped = b.typed(1 | 8, 32, &[(16, cons_addr), (24, cons_addr)], &[(12, 10)]);
        assert_eq!(looped, cons_addr, "builder addresses");
        let big_array = b.typed(200, 24, &[(8, 1u64 << 62)], &[]);
        let heap = Heap { memory: &b.mem, layout: &l };
        assert_eq!(heap.string(huge), None);
        assert_eq!(heap.string(negative), None);
        assert_eq!(heap.string(looped), None);
        assert_eq!(heap.byte_array(big_array), None);
        assert_eq!(heap.smi_array(big_array), None, "wrong type too");
    }
}
