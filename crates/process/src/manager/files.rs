//! The files processes map: finding the file of a mapping, analysing
//! each content once on the pool, loading its tables, and releasing the
//! files nobody maps.

use super::*;

impl<L: UnwindLoader> ProcessManager<L> {
    /// Loads the files whose analysis is done, then the processes that
    /// map them. Never blocks.
    pub fn collect_analysed(&mut self) {
        for done in self.pool.take_done() {
            self.finish_file(done);
        }
    }

    /// A file's analysis is done: its table is loaded, then the processes
    /// that map it.
    pub(super) fn finish_file(&mut self, done: Done) {
        let Done { file, elf, table } = done;
        let id = file.table_key;
        if !self.held.is_pending(&id) {
            return; // unloaded meanwhile (stopping)
        }
        self.stats.files_analysed += 1;
        let mut state = FileState::NoTable;
        self.loader.inspect_file(&file, &elf);
        drop(elf);
        // The BPF maps know files by 64 bits of the key: another content
        // with the same 64 bits (2^-64 by chance) must not replace its table.
        let bpf_id_taken = self.held.bpf_id_taken(id);
        match table {
            Table::Deltas(_) if bpf_id_taken => self.stats.files_rejected += 1,
            Table::Deltas(interned) if interned.deltas.is_empty() => {}
            Table::Deltas(interned) => {
                if self.load_table(id, interned) {
                    state = FileState::Loaded;
                }
            }
            Table::TooLarge | Table::RulesFull => self.stats.files_rejected += 1,
        }
        self.held.finish(file, state, &mut self.loader, &mut self.stats);
        let pids: Vec<Pid> =
            self.processes.iter().filter(|(_, p)| p.files.contains(&id)).map(|(pid, _)| *pid).collect();
        for pid in pids {
            self.push_mappings(pid);
        }
    }

    /// The analysed file behind a file-backed mapping (analysing and
    /// loading it on first sight).
    pub(super) fn file_for(&mut self, pid: Pid, entry: &MapsEntry) -> Option<Arc<ExecutableFile>> {
        let held = &self.held;
        let found = self.mapped.find(
            pid,
            entry,
            |key| held.contains(key),
            &mut self.stats.files_refused,
            &mut self.stats.files_failed,
        )?;
        match found {
            MappedFile::Held(table_key) => self.held.get(&table_key).map(|e| e.file.clone()),
            MappedFile::Vdso(keys, bytes) => self.add_file(keys, "[vdso]", None, || ElfFile::from_bytes(bytes).ok()),
            MappedFile::Opened(keys, opened) => {
                let identity = opened.identity;
                let handle =
                    self.held.has_room_for_handle().then(|| opened.file.try_clone().ok().map(Arc::new)).flatten();
                let file =
                    self.add_file(keys, &entry.path, handle, || ElfFile::from_file(opened.file, identity.size).ok());
                if file.is_none() && !self.held.contains(&keys.table_key) {
                    self.mapped.remember_failed(identity);
                }
                file
            }
        }
    }

    /// Registers a file first seen and queues its analysis; the mappings
    /// of the file unwind once it is done. The returned description
    /// (segments, build ids) is complete already.
    pub(super) fn add_file(
        &mut self,
        keys: FileKeys,
        path: &str,
        handle: Option<Arc<File>>,
        open: impl FnOnce() -> Option<ElfFile>,
    ) -> Option<Arc<ExecutableFile>> {
        if !self.held.make_room(&mut self.loader, &mut self.stats) {
            self.stats.files_rejected += 1;
            return None;
        }
        let Some(elf) = open() else {
            self.stats.files_failed += 1;
            return None;
        };
        let path: Arc<str> = Arc::from(path);
        let file = Arc::new(describe(&elf, keys, path.clone(), handle.clone()));
        self.held.insert_pending(file.clone());
        self.pool.submit(Job { keys, path, elf, handle, urgent: self.adding_urgent });
        Some(file)
    }

    /// Sets the rules of a file's deltas, then hands the loader its
    /// deltas straight from the compact table (4 bytes a delta), which is
    /// freed as soon as the loader has read it.
    pub(super) fn load_table(&mut self, table_key: TableKey, interned: InternedDeltas) -> bool {
        let InternedDeltas { deltas, rule_ids } = interned;
        let mut distinct = rule_ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let rules: Vec<(RuleId, UnwindRule)> = {
            let interner = self.interner.lock().unwrap_or_else(|p| p.into_inner());
            distinct.into_iter().filter_map(|id| Some((id, interner.get(id)?))).collect()
        };
        for (id, rule) in rules {
            if self.loader.set_rule(id, &rule).is_err() {
                self.stats.load_errors += 1;
                return false;
            }
        }
        let pairs = || -> Box<dyn Iterator<Item = (u64, RuleId)> + '_> {
            Box::new(deltas.iter_indexed().map(|(address, rule)| (address, rule_ids[usize::from(rule)])))
        };
        match self.loader.load_file(table_key, &pairs) {
            Ok(()) => true,
            Err(_) => {
                self.stats.load_errors += 1;
                false
            }
        }
    }

    pub(super) fn release_files(&mut self, files: &HashSet<TableKey>) {
        self.held.release(files, &mut self.loader, &mut self.stats);
    }
}
