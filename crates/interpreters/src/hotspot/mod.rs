//! HotSpot (the JVM of OpenJDK builds): finding it ([`detect`]), reading
//! its own description of its structures from a live process
//! ([`VmTables`]), the offsets the BPF unwinder and the naming need
//! ([`HotspotLayout`]), naming methods ([`HotspotSymbolizer`]) and the
//! methods inlined at a compiled pc ([`compiled_scopes`]), and a
//! user-space walk of a thread's Java frames ([`walk_java_frames`]) that
//! proves the layout against real JVMs. Not wired into the agent yet; see
//! `docs/hotspot.md`.
//!
//! HotSpot is recognised by a mapped `libjvm.so` exporting the
//! Serviceability Agent tables (`gHotSpotVMStructs`...). Unlike CPython's
//! offsets, these are not in the file: the table pointers are relocated
//! and the entry strides are set while the VM starts, so the layout is
//! read from the process ([`attach`]), once per JVM build and process
//! start. OpenJ9 (`libj9vm*.so`, a `libjvm.so` without the tables), Zero,
//! non-x86-64 builds and JDKs outside [`MIN_JDK`]..=[`MAX_JDK`] are
//! [`Unsupported`](HotspotError::Unsupported): a notice for the agent,
//! and their frames stay native.

mod layout;
mod linetable;
mod map_value;
mod naming;
mod remote;
mod runtime;
mod scopes;
mod vmstructs;
mod walk;
mod word;

pub use layout::{
    layout_from_tables, CodeBounds, HotspotLayout, JdkVersion, NmethodData, NmethodEntries, SourceFileIndex, MAX_JDK,
    MIN_JDK,
};
pub use linetable::{decode_line_table, line_for_bci};
pub use naming::{read_method, read_symbol, HotspotSymbolizer, HotspotSymbolizerStats, MethodInfo};
pub use runtime::{Hotspot, HotspotFile, HotspotProcess};
pub use scopes::{compiled_scopes, scopes_near, Scope};
pub use vmstructs::{Field, TableError, TableSymbol, TableSymbols, VmTables};
pub use walk::{
    java_threads, walk_java_frames, BlobKind, CodeBlobInfo, CodeCache, CodeHeapInfo, JavaFrame, JavaThreadInfo,
    WalkEnd, MAX_THREADS,
};
pub use word::{CompiledWord, InterpretedWord};

use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use profiler_elf::ElfFile;
use std::fmt;

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not a JVM.
    NotHotspot,
    /// A `libjvm.so` with the tables: [`attach`] reads them from each
    /// process that maps it.
    Hotspot(TableSymbols),
    /// A JVM this crate does not unwind (its frames stay native).
    Unsupported(Refusal),
}

/// Looks at one mapped file (`path` is its name).
pub fn detect(elf: &ElfFile, path: &str) -> Detection {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.starts_with("libj9vm") {
        return Detection::Unsupported(Refusal::Build("an OpenJ9 JVM"));
    }
    if !(name == "libjvm.so" || name.starts_with("libjvm.so.")) {
        return Detection::NotHotspot;
    }
    match TableSymbols::find(elf) {
        Ok(symbols) => Detection::Hotspot(symbols),
        Err(symbol) => Detection::Unsupported(Refusal::Symbol(symbol)),
    }
}

/// Why [`attach`] gave no layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HotspotError {
    /// The VM has not finished starting: try again later.
    NotReady,
    /// The tables could not be read (memory vanished, a hostile process,
    /// or ld.so still mapping `libjvm.so`): retry a bounded number of
    /// times, then profile the process as native.
    Unreadable(String),
    /// A build this crate does not unwind: say so once, profile as native.
    Unsupported(String),
}

impl fmt::Display for HotspotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HotspotError::NotReady => write!(f, "the JVM has not initialised its vmStructs tables yet"),
            HotspotError::Unreadable(why) => write!(f, "unreadable vmStructs: {why}"),
            HotspotError::Unsupported(why) => write!(f, "unsupported JVM: {why}"),
        }
    }
}

/// Reads the tables and the layout of the JVM whose `libjvm.so` (with
/// `symbols`) has load bias `bias` in the process behind `memory`.
pub fn attach(memory: &dyn ProcessMemory, symbols: &TableSymbols, bias: u64) -> Result<HotspotLayout, HotspotError> {
    let tables = match VmTables::read(memory, symbols, bias) {
        Ok(t) => t,
        Err(TableError::NotInitialised) => return Err(HotspotError::NotReady),
        Err(TableError::Bad(why)) => return Err(HotspotError::Unreadable(why)),
    };
    layout_from_tables(&tables, memory, bias).map_err(HotspotError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_libjvm_is_looked_at() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert_eq!(detect(&elf, exe.to_str().unwrap()), Detection::NotHotspot);
        assert!(
            matches!(detect(&elf, "/opt/j9/lib/default/libj9vm29.so"), Detection::Unsupported(Refusal::Build(s)) if s.contains("OpenJ9"))
        );
        assert!(
            detect(&elf, "/opt/jdk/lib/server/libjvm.so")
                == Detection::Unsupported(Refusal::Symbol("gHotSpotVMStructs".into()))
        );
    }
}
