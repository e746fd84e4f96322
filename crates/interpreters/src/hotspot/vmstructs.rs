//! HotSpot's description of itself: the four tables `libjvm.so` exports
//! for its Serviceability Agent (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`, `gHotSpotVMLongConstants`), read from a live
//! process.
//!
//! Facts (from the JDK's `vmStructs.hpp`/`vmStructs.cpp`): each table is
//! an array of entries whose stride and field offsets are exported as
//! `gHotSpotVM...EntryArrayStride` / `...Offset` (`uint64_t` variables in
//! `.bss`, set while the VM initialises: they read 0 before that); the
//! array's address is the pointer `gHotSpotVMStructs` (etc.); an entry
//! whose type (or constant) name is NULL ends the array. A struct entry
//! is `{typeName, fieldName, typeString, isStatic, offset, address}`:
//! `offset` for instance fields, `address` for static ones. A type entry
//! holds `size`; a constant entry `value` (`int32_t` or `uint64_t`).
//!
//! The process is untrusted: strides and offsets are bounded, at most
//! [`MAX_ENTRIES`] entries are read per table, names are at most
//! [`MAX_NAME`] bytes, and a table without its terminator is an error.

use super::remote::{read_cstr, read_u64, u32_at, u64_at};
use crate::memory::ProcessMemory;
use profiler_elf::ElfFile;
use std::collections::HashMap;
use std::fmt;

/// Most entries read from one table (real JVMs have about 2000).
pub const MAX_ENTRIES: usize = 20_000;
/// Longest type, field or constant name read.
pub const MAX_NAME: usize = 256;
/// Largest entry stride accepted (real entries are 16 to 48 bytes).
const MAX_STRIDE: u64 = 256;
/// Entries read per `process_vm_readv`.
const ENTRIES_PER_READ: usize = 64;

/// The ELF virtual addresses of the exported symbols that describe the
/// four tables (all of them are `.data`/`.bss` variables of `libjvm.so`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSymbols {
    /// `gHotSpotVMStructs` and its entry layout.
    pub structs: TableSymbol,
    /// `gHotSpotVMTypes`.
    pub types: TableSymbol,
    /// `gHotSpotVMIntConstants`.
    pub int_constants: TableSymbol,
    /// `gHotSpotVMLongConstants`.
    pub long_constants: TableSymbol,
}

/// One table: the pointer to its array, its stride, and the offsets of the
/// entry fields used (the address of each `uint64_t` variable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSymbol {
    /// The variable holding the array's address.
    pub array: u64,
    /// `...EntryArrayStride`.
    pub stride: u64,
    /// `(field, variable)`: e.g. `("TypeName", address of
    /// gHotSpotVMStructEntryTypeNameOffset)`.
    pub fields: Vec<(&'static str, u64)>,
}

/// The entry fields read from each table.
const STRUCT_FIELDS: [&str; 5] = ["TypeName", "FieldName", "IsStatic", "Offset", "Address"];
const TYPE_FIELDS: [&str; 2] = ["TypeName", "Size"];
const CONSTANT_FIELDS: [&str; 2] = ["Name", "Value"];

impl TableSymbols {
    /// Looks the symbols up in `elf` (dynamic symbols of `libjvm.so`);
    /// the name of the first one missing otherwise.
    pub fn find(elf: &ElfFile) -> Result<TableSymbols, String> {
        let table = |array: &str, entry: &str, fields: &[&'static str]| -> Result<TableSymbol, String> {
            let sym = |name: String| elf.symbol_address(&name).ok_or(name);
            Ok(TableSymbol {
                array: sym(array.to_string())?,
                stride: sym(format!("{entry}ArrayStride"))?,
                fields: fields
                    .iter()
                    .map(|f| Ok((*f, sym(format!("{entry}{f}Offset"))?)))
                    .collect::<Result<Vec<_>, String>>()?,
            })
        };
        Ok(TableSymbols {
            structs: table("gHotSpotVMStructs", "gHotSpotVMStructEntry", &STRUCT_FIELDS)?,
            types: table("gHotSpotVMTypes", "gHotSpotVMTypeEntry", &TYPE_FIELDS)?,
            int_constants: table("gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", &CONSTANT_FIELDS)?,
            long_constants: table("gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntry", &CONSTANT_FIELDS)?,
        })
    }
}

/// A field of a HotSpot type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// An instance field at this byte offset.
    Offset(u64),
    /// A static field at this process address.
    Static(u64),
}

/// Why the tables could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// The stride and offsets still read 0: the VM has not initialised
    /// its tables yet (try again later).
    NotInitialised,
    /// Memory could not be read, or what it holds is not a table.
    Bad(String),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::NotInitialised => write!(f, "the JVM has not initialised its vmStructs tables yet"),
            TableError::Bad(why) => write!(f, "{why}"),
        }
    }
}

/// The four tables of one JVM, as read.
#[derive(Clone, Debug, Default)]
pub struct VmTables {
    fields: HashMap<(String, String), Field>,
    sizes: HashMap<String, u64>,
    int_constants: HashMap<String, i32>,
    long_constants: HashMap<String, u64>,
}

impl VmTables {
    /// Reads the tables of the JVM whose `libjvm.so` has load bias `bias`.
    pub fn read(memory: &dyn ProcessMemory, symbols: &TableSymbols, bias: u64) -> Result<VmTables, TableError> {
        let mut tables = VmTables::default();
        let mut names = Names::default();
        for (type_name, rest) in
            read_table(memory, &symbols.structs, bias, &mut names, &STRUCT_FIELDS, &[8, 8, 4, 8, 8])?
        {
            let [field_ptr, is_static, offset, address] = [rest[0], rest[1], rest[2], rest[3]];
            // A genuine table's names all read: the first that does not
            // (unmapped, or refused by the attach budget) ends the try,
            // rather than a read refused again for each entry left.
            let Some(field) = names.get(memory, field_ptr) else {
                return Err(TableError::Bad(format!("unreadable field name of {type_name}")));
            };
            let value = if is_static as u32 != 0 { Field::Static(address) } else { Field::Offset(offset) };
            tables.fields.insert((type_name, field), value);
        }
        for (type_name, rest) in read_table(memory, &symbols.types, bias, &mut names, &TYPE_FIELDS, &[8, 8])? {
            tables.sizes.insert(type_name, rest[0]);
        }
        for (name, rest) in read_table(memory, &symbols.int_constants, bias, &mut names, &CONSTANT_FIELDS, &[8, 4])? {
            tables.int_constants.insert(name, rest[0] as u32 as i32);
        }
        for (name, rest) in read_table(memory, &symbols.long_constants, bias, &mut names, &CONSTANT_FIELDS, &[8, 8])? {
            tables.long_constants.insert(name, rest[0]);
        }
        Ok(tables)
    }

    /// Tables built by hand (tests).
    #[cfg(test)]
    pub(crate) fn from_parts(fields: &[(&str, &str, Field)], sizes: &[(&str, u64)]) -> VmTables {
        VmTables {
            fields: fields.iter().map(|(t, f, v)| ((t.to_string(), f.to_string()), *v)).collect(),
            sizes: sizes.iter().map(|(t, s)| (t.to_string(), *s)).collect(),
            ..VmTables::default()
        }
    }

    /// `type.field`, if the table has it.
    pub fn field(&self, type_name: &str, field: &str) -> Option<Field> {
        self.fields.get(&(type_name.to_string(), field.to_string())).copied()
    }

    /// The byte offset of instance field `type.field`.
    pub fn offset(&self, type_name: &str, field: &str) -> Option<u64> {
        match self.field(type_name, field)? {
            Field::Offset(o) => Some(o),
            Field::Static(_) => None,
        }
    }

    /// The address of static field `type.field`.
    pub fn static_address(&self, type_name: &str, field: &str) -> Option<u64> {
        match self.field(type_name, field)? {
            Field::Static(a) => Some(a),
            Field::Offset(_) => None,
        }
    }

    /// `sizeof(type)`.
    pub fn size(&self, type_name: &str) -> Option<u64> {
        self.sizes.get(type_name).copied()
    }

    /// An `int` constant.
    pub fn int_constant(&self, name: &str) -> Option<i32> {
        self.int_constants.get(name).copied()
    }

    /// A `long` constant.
    pub fn long_constant(&self, name: &str) -> Option<u64> {
        self.long_constants.get(name).copied()
    }

    /// Whether the types table names `type_name`.
    pub fn has_type(&self, type_name: &str) -> bool {
        self.sizes.contains_key(type_name)
    }

    /// Entries held: (fields, types, int constants, long constants).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (self.fields.len(), self.sizes.len(), self.int_constants.len(), self.long_constants.len())
    }
}

/// Names read so far, by address: type names repeat in every entry.
#[derive(Default)]
struct Names(HashMap<u64, Option<String>>);

impl Names {
    fn get(&mut self, memory: &dyn ProcessMemory, address: u64) -> Option<String> {
        if self.0.len() > 4 * MAX_ENTRIES {
            self.0.clear();
        }
        self.0.entry(address).or_insert_with(|| read_cstr(memory, address, MAX_NAME)).clone()
    }
}

/// The entries of one table: `(name, [the other fields' raw u64 values])`,
/// the name being the entry's first field (`TypeName`/`Name`), the others
/// in the order of `fields[1..]`, each `widths[i]` bytes (4 for `int`
/// fields such as `isStatic` and an int constant's value).
fn read_table(
    memory: &dyn ProcessMemory,
    table: &TableSymbol,
    bias: u64,
    names: &mut Names,
    fields: &[&str],
    widths: &[u64],
) -> Result<Vec<(String, Vec<u64>)>, TableError> {
    let var = |vaddr: u64, what: &str| {
        read_u64(memory, bias.wrapping_add(vaddr)).ok_or_else(|| TableError::Bad(format!("cannot read {what}")))
    };
    let stride = var(table.stride, "an entry stride")?;
    let mut offsets = Vec::with_capacity(fields.len());
    for (name, vaddr) in &table.fields {
        offsets.push(var(*vaddr, name)?);
    }
    if stride == 0 {
        return Err(TableError::NotInitialised);
    }
    if stride > MAX_STRIDE || stride % 4 != 0 {
        return Err(TableError::Bad(format!("entry stride {stride}")));
    }
    // Each field must lie inside an entry.
    for (off, width) in offsets.iter().zip(widths) {
        if off.checked_add(*width).is_none_or(|end| end > stride) {
            return Err(TableError::Bad(format!("entry field at {off} outside a {stride}-byte entry")));
        }
    }
    let base = var(table.array, "the table's address")?;
    if base == 0 {
        return Err(TableError::NotInitialised);
    }
    let stride = stride as usize;
    let mut entries = Vec::new();
    let mut buf = vec![0u8; stride * ENTRIES_PER_READ];
    for first in (0..MAX_ENTRIES).step_by(ENTRIES_PER_READ) {
        let at = base.wrapping_add((first * stride) as u64);
        // A chunk may run past the table's end into unmapped memory: then
        // read it entry by entry.
        let whole = memory.read(at, &mut buf);
        for i in 0..ENTRIES_PER_READ.min(MAX_ENTRIES - first) {
            let entry = &mut buf[i * stride..(i + 1) * stride];
            if !whole && !memory.read(at.wrapping_add((i * stride) as u64), entry) {
                return Err(TableError::Bad(format!("cannot read entry {} at {at:#x}", first + i)));
            }
            let word = |j: usize| -> u64 {
                let off = offsets[j] as usize;
                if widths[j] == 4 {
                    u64::from(u32_at(entry, off).unwrap_or(0))
                } else {
                    u64_at(entry, off).unwrap_or(0)
                }
            };
            let name_ptr = word(0);
            if name_ptr == 0 {
                return Ok(entries);
            }
            let Some(name) = names.get(memory, name_ptr) else {
                return Err(TableError::Bad(format!("unreadable name in entry {}", first + i)));
            };
            let rest = (1..fields.len()).map(word).collect();
            entries.push((name, rest));
        }
    }
    Err(TableError::Bad(format!("no end within {MAX_ENTRIES} entries")))
}

#[cfg(test)]
mod tests {
    use super::super::remote::fake::FakeMemory;
    use super::*;

    fn symbols() -> TableSymbols {
        // Variables at 0x100.., arrays built below.
        let t = |array: u64, stride: u64, fields: &[&'static str], first: u64| TableSymbol {
            array,
            stride,
            fields: fields.iter().enumerate().map(|(i, f)| (*f, first + 8 * i as u64)).collect(),
        };
        TableSymbols {
            structs: t(0x100, 0x108, &STRUCT_FIELDS, 0x110),
            types: t(0x200, 0x208, &TYPE_FIELDS, 0x210),
            int_constants: t(0x300, 0x308, &CONSTANT_FIELDS, 0x310),
            long_constants: t(0x400, 0x408, &CONSTANT_FIELDS, 0x410),
        }
    }

    fn words(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A process with one struct entry, one type, one constant of each
    /// kind, names at 0x9000.
    fn process(struct_terminated: bool) -> FakeMemory {
        let mut m = FakeMemory::default();
        // structs: stride 48, fields at 0, 8, 24 (IsStatic), 32, 40.
        m.add(0x100, words(&[0x1000, 48, 0, 8, 24, 32, 40]));
        m.add(0x200, words(&[0x2000, 16, 0, 8]));
        m.add(0x300, words(&[0x3000, 16, 0, 8]));
        m.add(0x400, words(&[0x4000, 16, 0, 8]));
        let mut names = Vec::new();
        for n in ["Klass\0", "_name\0", "MAXC\0", "Base\0"] {
            names.extend_from_slice(n.as_bytes());
        }
        names.resize(256, 0);
        m.add(0x9000, names);
        let mut structs = words(&[0x9000, 0x9006, 0, 0, 24, 0]);
        if struct_terminated {
            structs.extend(words(&[0; 6]));
        } else {
            // The same entry over and over: no terminator.
            for _ in 0..MAX_ENTRIES {
                structs.extend(words(&[0x9000, 0x9006, 0, 0, 24, 0]));
            }
        }
        m.add(0x1000, structs);
        m.add(0x2000, words(&[0x9000, 200, 0, 0]));
        m.add(0x3000, words(&[0x900c, (-7i32) as u32 as u64, 0, 0]));
        m.add(0x4000, words(&[0x9011, 1 << 40, 0, 0]));
        m
    }

    #[test]
    fn reads_each_table() {
        let t = VmTables::read(&process(true), &symbols(), 0).unwrap();
        assert_eq!(t.offset("Klass", "_name"), Some(24));
        assert_eq!(t.static_address("Klass", "_name"), None);
        assert_eq!(t.size("Klass"), Some(200));
        assert_eq!(t.int_constant("MAXC"), Some(-7));
        assert_eq!(t.long_constant("Base"), Some(1 << 40));
        assert_eq!(t.counts(), (1, 1, 1, 1));
    }

    #[test]
    fn a_table_without_an_end_is_refused() {
        let err = VmTables::read(&process(false), &symbols(), 0).unwrap_err();
        assert_eq!(err, TableError::Bad(format!("no end within {MAX_ENTRIES} entries")));
    }

    #[test]
    fn bad_strides_and_offsets_are_refused() {
        let mut m = process(true);
        m.regions[0].1 = words(&[0x1000, 4096, 0, 8, 24, 32, 40]);
        assert_eq!(VmTables::read(&m, &symbols(), 0).unwrap_err(), TableError::Bad("entry stride 4096".into()));
        m.regions[0].1 = words(&[0x1000, 48, 0, 8, 24, 32, 44]);
        assert!(matches!(VmTables::read(&m, &symbols(), 0), Err(TableError::Bad(s)) if s.contains("outside")));
        m.regions[0].1 = words(&[0x1000, 0, 0, 0, 0, 0, 0]);
        assert_eq!(VmTables::read(&m, &symbols(), 0).unwrap_err(), TableError::NotInitialised);
    }

    /// A field name that cannot be read (unmapped, or refused by the
    /// attach budget) ends the try at once: no read of the entries
    /// after it.
    #[test]
    fn an_unreadable_field_name_ends_the_try() {
        struct Counting(FakeMemory, std::cell::Cell<u32>);
        impl ProcessMemory for Counting {
            fn read(&self, address: u64, buf: &mut [u8]) -> bool {
                self.1.set(self.1.get() + 1);
                self.0.read(address, buf)
            }
        }
        let mut m = process(true);
        // 100 entries whose field names point nowhere, each elsewhere,
        // then the end.
        let mut structs = Vec::new();
        for i in 0..100 {
            structs.extend(words(&[0x9000, 0x7_0000 + 0x100 * i, 0, 0, 24, 0]));
        }
        structs.extend(words(&[0; 6]));
        m.regions.iter_mut().find(|(at, _)| *at == 0x1000).unwrap().1 = structs;
        let m = Counting(m, std::cell::Cell::new(0));
        let err = VmTables::read(&m, &symbols(), 0).unwrap_err();
        assert!(matches!(&err, TableError::Bad(s) if s.contains("unreadable field name")), "{err:?}");
        // The table's variables, its entries (the second chunk entry by
        // entry: it runs past the region), the shared type name and one
        // field name; not one more for each of the 99 entries left.
        assert_eq!(m.1.get(), 48);
    }
}
