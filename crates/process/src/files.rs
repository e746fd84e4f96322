//! What the profiler knows of one executable file (or the vDSO): its
//! identity, build ids, load segments and unwind table summary (frames
//! are named by the native symbolizer, which keeps its own compact symbol
//! table; the interpreter checks look the few names they need up in the
//! file: a copy of the symbol table here cost 20-30 MB per large C++ or
//! Rust library).
//! Built once per [`FileId`] and shared by every process that maps it.

use crate::go_tables::{with_go_tables, GoUnwindStats};
use profiler_elf::{ElfFile, LoadSegments, UnwindTable};
use profiler_trace::FileId;
use std::sync::Arc;

/// One executable file, as analysed when first mapped.
#[derive(Debug)]
pub struct ExecutableFile {
    /// Content identity.
    pub file_id: FileId,
    /// The path the first process that mapped it gave (as that process
    /// sees it).
    pub path: Arc<str>,
    /// GNU build id, hex.
    pub gnu_build_id: Option<Arc<str>>,
    /// Go build id.
    pub go_build_id: Option<Arc<str>>,
    /// `PT_LOAD` segments: process address -> ELF virtual address.
    pub segments: LoadSegments,
    /// Stack deltas in the file's table (0: no CFI, unwinding stops in it).
    pub deltas: u64,
    /// CFI rows that could not be expressed.
    pub invalid_rows: u64,
    /// For a Go binary: how its `.gopclntab` became stack deltas.
    pub go_unwind: Option<GoUnwindStats>,
}

/// An analysed file and its unwind table, before the table is loaded
/// (the table is dropped once it is in the BPF maps).
pub(crate) struct AnalysedFile {
    pub file: Arc<ExecutableFile>,
    pub table: UnwindTable,
}

/// Reads what the profiler keeps of `elf`: segments, build ids, unwind table.
pub(crate) fn analyse(elf: &ElfFile, file_id: FileId, path: &str) -> AnalysedFile {
    // Go code has no CFI: its deltas come from .gopclntab.
    let (table, go_unwind) = with_go_tables(elf, elf.unwind_table());
    let invalid_rows = table.stats.invalid_by_reason().map(|(_, n)| n).sum();
    let file = ExecutableFile {
        file_id,
        path: Arc::from(path),
        gnu_build_id: elf.gnu_build_id().ok().flatten().map(Arc::from),
        go_build_id: elf.go_build_id().ok().flatten().map(Arc::from),
        segments: elf.load_segments(),
        deltas: table.deltas.len() as u64,
        invalid_rows,
        go_unwind,
    };
    AnalysedFile { file: Arc::new(file), table }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyses_own_executable() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        let id = profiler_elf::file_id_of_path(&exe).unwrap();
        let a = analyse(&elf, id, exe.to_str().unwrap());
        assert!(a.file.deltas > 100, "{}", a.file.deltas);
        assert_eq!(a.file.deltas, a.table.deltas.len() as u64);
        assert!(a.file.gnu_build_id.is_some());
    }
}
