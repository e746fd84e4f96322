//! Go pprof labels, for the process manager: each executable it analyses
//! is looked at once ([`profiler_interpreters::go_labels::inspect`]); a
//! process that maps a Go executable gets its `go_label_processes` entry
//! (how its goroutines' labels are read), removed when it is unloaded.

use profiler_bpf::{GoLabelMaps, GoLabelsValue};
use profiler_elf::ElfFile;
use profiler_interpreters::go_labels::{inspect, GoLabelsFile};
use profiler_trace::TableKey;
use std::collections::HashMap;

/// Most Go executables remembered (each a few bytes); more are not
/// given labels (counted). (At most `profiler_bpf::MAX_GO_LABEL_PROCESSES`
/// processes get an entry.)
const MAX_GO_FILES: usize = 4096;
/// `PT_INTERP`: an executable, not a shared object (a Go library in a C
/// program has its own runtime, whose TLS is not found this way).
const PT_INTERP: u32 = 3;

/// Counters of [`GoLabels`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GoLabelStats {
    /// Go executables whose labels are read.
    pub files: u64,
    /// Processes with an entry now.
    pub processes: u64,
    /// Go executables not remembered (the bound was reached) or whose
    /// version is not supported.
    pub files_skipped: u64,
    /// Map updates that failed (the map is full, or gone).
    pub load_errors: u64,
}

/// The Go executables seen, and the processes given an entry.
pub(crate) struct GoLabels {
    maps: GoLabelMaps,
    files: HashMap<TableKey, GoLabelsValue>,
    stats: GoLabelStats,
}

impl GoLabels {
    pub(crate) fn new(maps: GoLabelMaps) -> GoLabels {
        GoLabels { maps, files: HashMap::new(), stats: GoLabelStats::default() }
    }

    pub(crate) fn stats(&self) -> GoLabelStats {
        GoLabelStats { processes: self.maps.len() as u64, ..self.stats }
    }

    /// Looks at a file the manager analysed; a notice for a Go executable
    /// whose labels cannot be read.
    pub(crate) fn inspect(&mut self, table_key: TableKey, path: &str, elf: &ElfFile) -> Option<String> {
        let executable =
            elf.elf_type() == profiler_elf::ET_EXEC || elf.program_headers().iter().any(|p| p.p_type == PT_INTERP);
        if !executable || self.files.contains_key(&table_key) {
            return None;
        }
        match inspect(elf) {
            GoLabelsFile::NotGo => None,
            GoLabelsFile::Supported { value, .. } if self.files.len() < MAX_GO_FILES => {
                self.files.insert(table_key, value);
                self.stats.files += 1;
                None
            }
            GoLabelsFile::Supported { version, .. } => {
                self.stats.files_skipped += 1;
                Some(format!("Go labels: {path} ({version}) not read: {MAX_GO_FILES} Go executables already"))
            }
            GoLabelsFile::Unsupported(why) => {
                self.stats.files_skipped += 1;
                Some(format!("Go labels of {path} are not read: {why}"))
            }
        }
    }

    /// A file the manager no longer keeps.
    pub(crate) fn file_unloaded(&mut self, table_key: TableKey) {
        self.files.remove(&table_key);
    }

    /// Process `pid` maps `files`: its entry, if one of them is a Go
    /// executable.
    pub(crate) fn process_mapped(&mut self, pid: u32, files: &[(TableKey, u64)]) {
        let Some(value) = files.iter().find_map(|(key, _)| self.files.get(key)) else {
            // (An exec may have replaced a Go program.)
            self.process_removed(pid);
            return;
        };
        // (Beyond MAX_GO_LABEL_PROCESSES, the map refuses: counted.)
        if self.maps.set_process(pid, *value).is_err() {
            self.stats.load_errors += 1;
        }
    }

    pub(crate) fn process_removed(&mut self, pid: u32) {
        if self.maps.remove_process(pid).is_err() {
            self.stats.load_errors += 1;
        }
    }
}
