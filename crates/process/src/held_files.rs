//! The files the manager holds: each analysed once, reference-counted by
//! the processes that map it, its table in the loader while it is
//! wanted; the ones nobody maps stay, least recently unused first out,
//! within a byte budget ([`crate::lru`]) and the file count limit.

use crate::files::ExecutableFile;
use crate::lru::UnusedFiles;
use crate::manager::{ManagerStats, UnwindLoader};
use profiler_trace::{FileId, TableKey};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What a held file cost beyond its deltas (its state here, the
/// loader's bookkeeping), for the unused files' budget.
pub(crate) const FILE_OVERHEAD_BYTES: u64 = 4096;

/// What became of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileState {
    /// Being analysed.
    Pending,
    /// Deltas in the loader.
    Loaded,
    /// Analysed, nothing loaded (no CFI, over the limits, load failed).
    NoTable,
}

/// A held file.
pub(crate) struct FileEntry {
    pub(crate) file: Arc<ExecutableFile>,
    /// Processes mapping it.
    refs: usize,
    pub(crate) state: FileState,
}

/// See the module documentation.
pub(crate) struct HeldFiles {
    files: HashMap<TableKey, FileEntry>,
    /// Files of `files` that keep a descriptor open.
    pub(crate) handles_held: usize,
    unused: UnusedFiles<TableKey>,
    /// The content of each held file's [`FileId`], to notice collisions.
    file_ids: HashMap<FileId, TableKey>,
    max_files: usize,
    max_handles: usize,
}

impl HeldFiles {
    /// No file; at most `max_files`, `max_handles` of them with an open
    /// descriptor, the unused ones within `unused_budget` bytes.
    pub(crate) fn new(max_files: usize, max_handles: usize, unused_budget: u64) -> HeldFiles {
        HeldFiles {
            files: HashMap::new(),
            handles_held: 0,
            unused: UnusedFiles::new(unused_budget),
            file_ids: HashMap::new(),
            max_files,
            max_handles,
        }
    }

    /// The held file `id`.
    pub(crate) fn get(&self, id: &TableKey) -> Option<&FileEntry> {
        self.files.get(id)
    }

    /// Whether `id` is held.
    pub(crate) fn contains(&self, id: &TableKey) -> bool {
        self.files.contains_key(id)
    }

    /// Whether a new file may keep its descriptor open.
    pub(crate) fn has_room_for_handle(&self) -> bool {
        self.handles_held < self.max_handles
    }

    /// Whether another held file has the same 64-bit BPF id as `id`.
    pub(crate) fn bpf_id_taken(&self, id: TableKey) -> bool {
        self.files.keys().any(|k| k.bpf_id() == id.bpf_id() && *k != id)
    }

    /// The file counts and sizes of [`ManagerStats`].
    pub(crate) fn count(&self, s: &mut ManagerStats) {
        s.files = self.files.len() as u64;
        s.files_pending = self.files.values().filter(|f| f.state == FileState::Pending).count() as u64;
        s.files_unused = self.unused.len() as u64;
        s.files_unused_bytes = self.unused.bytes();
        s.deltas = self.files.values().filter(|f| f.state == FileState::Loaded).map(|f| f.file.deltas).sum();
    }

    /// Room for one more file: the least recently unused goes when the
    /// count limit is reached. False when every held file is in use.
    pub(crate) fn make_room<L: UnwindLoader>(&mut self, loader: &mut L, stats: &mut ManagerStats) -> bool {
        if self.files.len() < self.max_files {
            return true;
        }
        match self.unused.pop_oldest() {
            Some(old) => {
                self.evict(old, loader, stats);
                true
            }
            None => false,
        }
    }

    /// Holds `file`, first seen, while it is analysed.
    pub(crate) fn insert_pending(&mut self, file: Arc<ExecutableFile>) {
        if file.handle.is_some() {
            self.handles_held += 1;
        }
        self.files.insert(file.table_key, FileEntry { file, refs: 0, state: FileState::Pending });
    }

    /// `file`'s analysis is done and its table is `state` (nothing
    /// happens to a file let go of meanwhile).
    pub(crate) fn finish<L: UnwindLoader>(
        &mut self,
        file: Arc<ExecutableFile>,
        state: FileState,
        loader: &mut L,
        stats: &mut ManagerStats,
    ) {
        let id = file.table_key;
        match self.file_ids.get(&file.file_id) {
            Some(other) if *other != id => stats.file_id_collisions += 1,
            Some(_) => {}
            None => {
                self.file_ids.insert(file.file_id, id);
            }
        }
        let Some(entry) = self.files.get_mut(&id) else { return };
        entry.file = file;
        entry.state = state;
        if entry.refs == 0 {
            self.unused.insert(id, cost(entry));
            self.evict_over_budget(loader, stats);
        }
    }

    /// Whether `id` is held and being analysed.
    pub(crate) fn is_pending(&self, id: &TableKey) -> bool {
        self.files.get(id).is_some_and(|e| e.state == FileState::Pending)
    }

    /// One more process maps each of `ids`.
    pub(crate) fn take(&mut self, ids: impl Iterator<Item = TableKey>) {
        for id in ids {
            if let Some(e) = self.files.get_mut(&id) {
                e.refs += 1;
                self.unused.remove(id);
            }
        }
    }

    /// One process fewer maps each of `ids`; the unused ones beyond the
    /// budget go.
    pub(crate) fn release<L: UnwindLoader>(
        &mut self,
        ids: &HashSet<TableKey>,
        loader: &mut L,
        stats: &mut ManagerStats,
    ) {
        for id in ids {
            if let Some(entry) = self.files.get_mut(id) {
                entry.refs = entry.refs.saturating_sub(1);
                if entry.refs == 0 && entry.state != FileState::Pending {
                    self.unused.insert(*id, cost(entry));
                }
            }
        }
        self.evict_over_budget(loader, stats);
    }

    /// Unloads the least recently used unused files beyond the budget.
    pub(crate) fn evict_over_budget<L: UnwindLoader>(&mut self, loader: &mut L, stats: &mut ManagerStats) {
        while let Some(id) = self.unused.pop_over_budget() {
            self.evict(id, loader, stats);
        }
    }

    fn evict<L: UnwindLoader>(&mut self, id: TableKey, loader: &mut L, stats: &mut ManagerStats) {
        let Some(entry) = self.files.remove(&id) else { return };
        if entry.file.handle.is_some() {
            self.handles_held -= 1;
        }
        if self.file_ids.get(&entry.file.file_id) == Some(&id) {
            self.file_ids.remove(&entry.file.file_id);
        }
        if entry.state == FileState::Loaded && loader.unload_file(id).is_err() {
            stats.load_errors += 1;
        }
        stats.files_evicted += 1;
    }

    /// A new budget for the unused files, forgetting which are unused
    /// (tests).
    #[cfg(test)]
    pub(crate) fn set_unused_budget(&mut self, bytes: u64) {
        self.unused = UnusedFiles::new(bytes);
    }

    /// Holds `file` as mapped by `refs` processes, in `state` (tests).
    #[cfg(test)]
    pub(crate) fn insert_as(&mut self, file: Arc<ExecutableFile>, refs: usize, state: FileState) {
        self.files.insert(file.table_key, FileEntry { file, refs, state });
    }

    /// Lets go of every file, unloading the loaded ones.
    pub(crate) fn clear<L: UnwindLoader>(&mut self, loader: &mut L, stats: &mut ManagerStats) {
        while self.unused.pop_oldest().is_some() {}
        self.file_ids.clear();
        self.handles_held = 0;
        for (id, entry) in std::mem::take(&mut self.files) {
            if entry.state == FileState::Loaded && loader.unload_file(id).is_err() {
                stats.load_errors += 1;
            }
        }
    }
}

/// What a file nobody maps costs while held: its deltas in the kernel
/// (4 bytes each) and its state here.
fn cost(entry: &FileEntry) -> u64 {
    let deltas = if entry.state == FileState::Loaded { entry.file.deltas } else { 0 };
    deltas * 4 + FILE_OVERHEAD_BYTES
}
