//! The name of a class or module (`Foo::Bar`), for naming methods
//! `Class#method`.

use super::layout::{ClassPathAt, RubyLayout};
use super::objects::{at, flags_of, is_heap_object, read_rstring, read_u64};
use crate::memory::ProcessMemory;

/// `RUBY_T_CLASS`.
const T_CLASS: u64 = 0x02;
/// `RUBY_T_MODULE`.
const T_MODULE: u64 = 0x03;
/// Most ivar-table entries looked at. Entries keep their insertion
/// order and a class is named (`__classpath__`) when it is defined,
/// before any ivar of its own: a genuine class's path is among its
/// first few. Until a process's `__classpath__` id is known, each entry
/// costs the naming of its id (a dozen reads and up to 4 KiB): a
/// crafted table of hundreds of entries would cost megabytes a class.
pub(crate) const MAX_IVARS: u64 = 16;
/// `sizeof(st_table_entry)`: hash, key, record.
const ST_ENTRY: u64 = 24;
/// `st_table.entries_start`, `entries_bound`, `entries`.
const ST_START: u64 = 32;
/// A deleted `st_table` entry has this hash.
const ST_DELETED: u64 = u64::MAX;

/// The name of the class or module `klass`, or None for an anonymous or
/// singleton class, or a release whose class names are not read.
/// `id_name` names an ivar id; `classpath_id` is the process's id of
/// `__classpath__` once known (learnt here from the first class found
/// by name), when keys are compared with it instead of being named.
pub(crate) fn class_path(
    memory: &dyn ProcessMemory,
    l: &RubyLayout,
    klass: u64,
    classpath_id: &mut Option<u64>,
    id_name: &mut dyn FnMut(u64) -> Option<String>,
) -> Option<String> {
    let flags = read_u64(memory, klass).filter(|_| is_heap_object(klass))?;
    let kind = flags & super::layout::consts::T_MASK;
    if !matches!(kind, T_CLASS | T_MODULE) || flags & l.fl_singleton != 0 {
        return None;
    }
    let path = match l.class_path {
        ClassPathAt::Unknown => return None,
        ClassPathAt::Field(off) => read_u64(memory, at(klass, off)?)?,
        ClassPathAt::IvarTable { ext, iv_tbl } => {
            let ext = read_u64(memory, at(klass, ext)?)?;
            let table = read_u64(memory, at(ext, iv_tbl)?)?;
            ivar(memory, table, "__classpath__", classpath_id, id_name)?
        }
    };
    flags_of(memory, path, super::layout::consts::T_STRING)?;
    read_rstring(memory, l, path)
}

/// The value of the entry named `name` in the `st_table` at `table`
/// keyed by ids, among its first [`MAX_IVARS`]; `known` is `name`'s id
/// when known (set here when found by name).
fn ivar(
    memory: &dyn ProcessMemory,
    table: u64,
    name: &str,
    known: &mut Option<u64>,
    id_name: &mut dyn FnMut(u64) -> Option<String>,
) -> Option<u64> {
    if table == 0 {
        return None;
    }
    let start = read_u64(memory, table.wrapping_add(ST_START))?;
    let bound = read_u64(memory, table.wrapping_add(ST_START + 8))?;
    let entries = read_u64(memory, table.wrapping_add(ST_START + 16))?;
    if bound < start {
        return None;
    }
    for i in start..bound.min(start.saturating_add(MAX_IVARS)) {
        let entry = entries.checked_add(i.checked_mul(ST_ENTRY)?)?;
        let hash = read_u64(memory, entry)?;
        if hash == ST_DELETED {
            continue;
        }
        let key = read_u64(memory, entry.wrapping_add(8))?;
        let found = match *known {
            Some(id) => key == id,
            None => id_name(key).as_deref() == Some(name),
        };
        if found {
            *known = Some(key);
            return read_u64(memory, entry.wrapping_add(16));
        }
    }
    None
}
