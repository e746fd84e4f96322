//! What the profiler knows of one executable file (or the vDSO): its
//! identity, build ids, load segments and unwind table summary (frames
//! are named by the native symbolizer, which keeps its own compact symbol
//! table; the interpreter checks look the few names they need up in the
//! file: a copy of the symbol table here cost 20-30 MB per large C++ or
//! Rust library).
//! Built once per [`FileId`] and shared by every process that maps it.

use profiler_elf::source::FileIdentity;
use profiler_elf::{with_go_tables, ElfFile, GoUnwindStats, LoadSegments, UnwindTable};
use profiler_trace::{FileId, TableKey};
use std::fs::File;
use std::sync::Arc;

/// One executable file, as analysed when first mapped.
#[derive(Debug)]
pub struct ExecutableFile {
    /// Content identity as the wire carries it (head, tail and length:
    /// two different files may share it).
    pub file_id: FileId,
    /// Digest of the whole content: what its unwind table, symbols and
    /// interpreter state are keyed by.
    pub table_key: TableKey,
    /// The inode and version analysed (`None` for the vDSO): a later
    /// open by path must find the same one.
    pub identity: Option<FileIdentity>,
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
    /// The file as opened for the analysis (a descriptor of its own),
    /// kept while the file is known: the symbolizer reads it from here
    /// once every process that mapped it has gone (a compiler that ran
    /// for 50 ms), when no path to it is left. `None` for the vDSO, and
    /// beyond `ManagerLimits::max_file_handles`.
    pub handle: Option<Arc<File>>,
}

/// An analysed file and its unwind table, before the table is loaded
/// (the table is dropped once it is in the BPF maps).
pub(crate) struct AnalysedFile {
    pub file: Arc<ExecutableFile>,
    pub table: UnwindTable,
}

/// Who a file is: its wire id, content key and (on disk) identity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FileKeys {
    pub file_id: FileId,
    pub table_key: TableKey,
    pub identity: Option<FileIdentity>,
}

/// Reads what the profiler keeps of `elf`: segments, build ids, unwind table.
pub(crate) fn analyse(elf: &ElfFile, keys: FileKeys, path: &str, handle: Option<Arc<File>>) -> AnalysedFile {
    // Go code has no CFI: its deltas come from .gopclntab.
    let (mut table, go_unwind) = with_go_tables(elf, elf.unwind_table());
    if elf.changed_while_read() {
        // Truncated under the map: parsed from zero pages (counted in
        // `profiler_elf::map_guard::files_changed_while_read`).
        table.deltas = Default::default();
        table.stats.file_changed = true;
    }
    let invalid_rows = table.stats.invalid_by_reason().map(|(_, n)| n).sum();
    let file = ExecutableFile {
        file_id: keys.file_id,
        table_key: keys.table_key,
        identity: keys.identity,
        path: Arc::from(path),
        gnu_build_id: elf.gnu_build_id().ok().flatten().map(Arc::from),
        go_build_id: elf.go_build_id().ok().flatten().map(Arc::from),
        segments: elf.load_segments(),
        deltas: table.deltas.len() as u64,
        invalid_rows,
        go_unwind,
        handle,
    };
    AnalysedFile { file: Arc::new(file), table }
}

/// What [`analyse`] finds that is cheap to read (identity, build ids,
/// segments), before the analysis: no deltas yet.
pub(crate) fn describe(elf: &ElfFile, keys: FileKeys, path: Arc<str>, handle: Option<Arc<File>>) -> ExecutableFile {
    ExecutableFile {
        file_id: keys.file_id,
        table_key: keys.table_key,
        identity: keys.identity,
        path,
        gnu_build_id: elf.gnu_build_id().ok().flatten().map(Arc::from),
        go_build_id: elf.go_build_id().ok().flatten().map(Arc::from),
        segments: elf.load_segments(),
        deltas: 0,
        invalid_rows: 0,
        go_unwind: None,
        handle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyses_own_executable() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        let id = profiler_elf::file_id_of_path(&exe).unwrap();
        let keys = FileKeys { file_id: id, table_key: TableKey([1; 32]), identity: None };
        let a = analyse(&elf, keys, exe.to_str().unwrap(), None);
        assert!(a.file.deltas > 100, "{}", a.file.deltas);
        assert_eq!(a.file.deltas, a.table.deltas.len() as u64);
        assert!(a.file.gnu_build_id.is_some());
    }
}
