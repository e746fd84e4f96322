//! The process table: reading a process's maps, admitting it, diffing
//! its mappings against the last read, loading them, and unloading the
//! processes that exited (after their grace).

use super::*;

impl<L: UnwindLoader> ProcessManager<L> {
    pub(super) fn schedule(&mut self, pid: Pid, after: Duration, exec: Option<ExecLoad>) {
        if !self.scheduled.push(pid, after, exec) {
            self.stats.scheduled_dropped += 1;
        }
    }

    pub(super) fn load_after_exec(&mut self, pid: Pid, exec: ExecLoad) {
        if !self.processes.contains_key(&pid) {
            if !is_running(pid) {
                self.stats.exec_preloads_gone += 1;
                return;
            }
            if !exec.was_loaded && !self.scheduled.take_exec_token() {
                self.stats.exec_preloads_skipped += 1;
                return;
            }
        }
        self.event_ktime_ns = exec.ktime_ns;
        self.sync(pid, false);
        self.event_ktime_ns = 0;
        if self.processes.contains_key(&pid) {
            for ms in EXEC_RESYNC_MS {
                let after = Duration::from_millis(ms).saturating_sub(self.limits.exec_load_delay);
                self.schedule(pid, after, None);
            }
        }
    }

    /// Unloads `pid` because it exited (an exit event, a missed exit, a
    /// zombie, its pid reused): counted in `processes_exited`.
    pub(super) fn process_exited(&mut self, pid: Pid, immediately: bool) {
        if self.unload_process(pid, immediately) {
            self.stats.processes_exited += 1;
        }
    }

    /// Unloads `pid` if it was loaded (and says whether it was).
    pub(super) fn unload_process(&mut self, pid: Pid, immediately: bool) -> bool {
        let Some(state) = self.processes.remove(&pid) else { return false };
        if immediately || self.limits.unload_grace.is_zero() || self.removals.len() >= MAX_SCHEDULED {
            self.remove_from_loader(pid, &state.files);
        } else {
            let at = Instant::now() + self.limits.unload_grace;
            self.removals.push_back(Removal { pid, files: state.files, at });
        }
        if immediately {
            self.registry.remove(pid);
        } else {
            self.exited.push((pid, Instant::now()));
        }
        true
    }

    /// Takes `pid` out of the loader (unless it was loaded again since:
    /// a reused pid) and lets go of its files.
    pub(super) fn remove_from_loader(&mut self, pid: Pid, files: &HashSet<TableKey>) {
        if !self.processes.contains_key(&pid) && self.loader.remove_process(pid).is_err() {
            self.stats.load_errors += 1;
        }
        self.release_files(files);
    }

    /// The removals due by `now`.
    pub(super) fn remove_due(&mut self, now: Instant) {
        while self.removals.front().is_some_and(|r| r.at <= now) {
            let Some(r) = self.removals.pop_front() else { break };
            self.remove_from_loader(r.pid, &r.files);
        }
    }

    /// Loads `pid`, or brings it up to date: reads its maps, compares
    /// them with what is loaded, has the files analysed that are new, then
    /// loads its mappings and publishes its snapshot. `new_event`: asked by
    /// a sample of a pid the kernel did not know (ignored for a process
    /// loaded a moment ago).
    pub(super) fn sync(&mut self, pid: Pid, new_event: bool) {
        let Some(start_time) = self.admit(pid, new_event) else { return };
        self.sync_admitted(pid, start_time);
    }

    /// Re-reads the maps of `pid`, loaded a moment ago (after its exec):
    /// as [`ProcessManager::sync`], without reading its start time again
    /// (a pid reused since would have come with an exit event; the
    /// liveness check catches a lost one).
    pub(super) fn resync(&mut self, pid: Pid) {
        let Some(start_time) = self.processes.get(&pid).map(|p| p.start_time) else { return };
        self.sync_admitted(pid, start_time);
    }

    pub(super) fn sync_admitted(&mut self, pid: Pid, start_time: Option<u64>) {
        let Some((entries, digest)) = self.read_maps(pid) else { return };
        let analysed = self.analyse_mappings(pid, &entries);
        let known_info = self.diff(pid, start_time, digest, analysed.mappings, &analysed.files);
        self.load(pid, known_info, analysed.snapshot);
    }

    /// Step 1 of [`ProcessManager::sync`]: whether `pid` is to be read
    /// (alive, not read a moment ago, within the process limit), and its
    /// start time. A pid now held by another process is unloaded first.
    pub(super) fn admit(&mut self, pid: Pid, new_event: bool) -> Option<Option<u64>> {
        let start_time = read_start_time(&self.proc_root, pid);
        if start_time.is_none() {
            // Gone already (or never was): nothing to load.
            self.stats.maps_read_failures += 1;
            return None;
        }
        if let Some(state) = self.processes.get(&pid) {
            if state.start_time != start_time {
                self.stats.pid_reuse += 1;
                self.process_exited(pid, true);
            } else if new_event && state.maps_read_at.elapsed() < self.limits.maps_refresh_interval {
                // A sample taken before our load finished; the kernel
                // rate-limits unknown-pc events itself.
                return None;
            }
        } else if self.processes.len() >= self.limits.max_processes {
            self.stats.processes_rejected += 1;
            return None;
        }
        Some(start_time)
    }

    /// Step 2: `pid`'s executable mappings and their digest; `None` when
    /// the maps cannot be read, or when nothing executable changed since
    /// the last read (most re-reads after an exec, once ld.so is done: no
    /// file to look at again).
    pub(super) fn read_maps(&mut self, pid: Pid) -> Option<(Vec<MapsEntry>, u64)> {
        self.stats.maps_reads += 1;
        let maps_path = self.proc_root.join(pid.0.to_string()).join("maps");
        let queried = std::fs::File::open(&maps_path).ok().and_then(|f| query_executable(&f, MAX_MAPPINGS));
        let entries = match queried {
            Some(Ok(entries)) => entries,
            Some(Err(_)) => {
                self.stats.maps_read_failures += 1;
                return None;
            }
            None => {
                let Ok(bytes) = read_proc_file(&maps_path, MAX_MAPS_BYTES) else {
                    self.stats.maps_read_failures += 1;
                    return None;
                };
                // Paths need not be UTF-8; the other fields are ASCII.
                parse_executable(&String::from_utf8_lossy(&bytes))
            }
        };
        if entries.is_empty() {
            // No executable mapping: the process has exited (a zombie
            // until it is reaped, whose start time still reads) or is a
            // kernel thread. Loaded, its entry would stay in the loader
            // until the pid is reaped.
            self.stats.maps_empty += 1;
            self.process_exited(pid, false);
            return None;
        }
        let digest = maps_digest(&entries);
        if let Some(state) = self.processes.get_mut(&pid) {
            if state.maps_digest == digest {
                state.maps_read_at = Instant::now();
                self.stats.maps_unchanged += 1;
                return None;
            }
        }
        Some((entries, digest))
    }

    /// Step 3: the file behind each mapping (files first seen are queued
    /// for analysis), as the loader and the registry will see them.
    pub(super) fn analyse_mappings(&mut self, pid: Pid, entries: &[MapsEntry]) -> AnalysedMappings {
        let mut analysed = AnalysedMappings {
            mappings: Vec::with_capacity(entries.len()),
            snapshot: Vec::with_capacity(entries.len()),
            files: HashSet::new(),
        };
        // The lowest file mapping is the program's own executable (ld.so
        // and libraries are mapped above it): analysed first.
        let mut first_file = true;
        for entry in entries {
            self.adding_urgent = first_file && !entry.is_anonymous() && !entry.is_vdso();
            let file = if entry.is_anonymous() { None } else { self.file_for(pid, entry) };
            first_file &= entry.is_anonymous();
            let bias = file.as_ref().and_then(|f| f.segments.executable_bias(entry.start, entry.offset));
            let target = file.as_ref().zip(bias).map(|(f, b)| (f.table_key, b));
            let path = Arc::from(entry.path.as_str());
            analysed.mappings.push(ProcessMapping {
                start: entry.start,
                end: entry.end,
                reserved_end: entry.reserved_end,
                file: target,
                path,
            });
            if let Some(f) = &file {
                analysed.files.insert(f.table_key);
            }
            let mut mapping = entry.to_mapping();
            if let Some(f) = &file {
                mapping.file_id = Some(f.file_id);
                mapping.gnu_build_id = f.gnu_build_id.clone();
                mapping.go_build_id = f.go_build_id.clone();
            }
            analysed.snapshot.push(SnapshotMapping { mapping: Arc::new(mapping), file, bias });
        }
        self.adding_urgent = false;
        analysed.snapshot.sort_by_key(|m| m.mapping.start);
        analysed
    }

    /// Step 4: records `pid`'s new mappings and moves its file references
    /// from the old set to the new one (the new ones taken before the old
    /// ones are released, so that a file in both is never let go). Returns
    /// the process's info when it is the same program as before (its name,
    /// path and container are kept).
    pub(super) fn diff(
        &mut self,
        pid: Pid,
        start_time: Option<u64>,
        digest: u64,
        mappings: Vec<ProcessMapping>,
        files: &HashSet<TableKey>,
    ) -> Option<Arc<LazyProcessInfo>> {
        let now = Instant::now();
        // Timed from the event that asked for this load (from now for a
        // process loaded without one); scheduled re-reads are not timed.
        let event = self.event_ktime_ns;
        let since = if event == 0 { monotonic_ns() } else { event };
        let old = match self.processes.get_mut(&pid) {
            Some(state) => {
                state.maps_read_at = now;
                state.maps_digest = digest;
                state.mappings = mappings;
                if event != 0 {
                    state.waiting_since_ns = state.waiting_since_ns.or(Some(event));
                }
                std::mem::replace(&mut state.files, files.clone())
            }
            None => {
                self.stats.processes_loaded += 1;
                let state = ProcessState {
                    start_time,
                    files: files.clone(),
                    mappings,
                    maps_read_at: now,
                    maps_digest: digest,
                    waiting_since_ns: Some(since),
                };
                self.processes.insert(pid, state);
                HashSet::new()
            }
        };
        let known_info = if old.is_empty() { None } else { self.registry.get(pid).map(|s| s.info.clone()) };
        self.held.take(files.difference(&old).copied());
        let released: HashSet<TableKey> = old.difference(files).copied().collect();
        self.release_files(&released);
        known_info
    }

    /// Step 5: `pid`'s snapshot into the registry, then its mappings into
    /// the loader: a sample the BPF maps let through (and an interpreter
    /// attached on the way) always finds its process's files.
    pub(super) fn load(&mut self, pid: Pid, known_info: Option<Arc<LazyProcessInfo>>, snapshot: Vec<SnapshotMapping>) {
        let info = known_info.unwrap_or_else(|| {
            let start_time = self.processes.get(&pid).and_then(|p| p.start_time);
            Arc::new(LazyProcessInfo::new(
                pid,
                start_time,
                self.proc_root.clone(),
                self.limits.include_env_vars.clone(),
            ))
        });
        self.registry.set(pid, ProcessSnapshot { info, mappings: snapshot });
        self.push_mappings(pid);
    }

    /// Sets `pid`'s mappings in the loader, those of the files whose
    /// tables are loaded as files, the others as code without unwind
    /// information (until their analysis is done).
    pub(super) fn push_mappings(&mut self, pid: Pid) {
        let Some(state) = self.processes.get_mut(&pid) else { return };
        let mut complete = true;
        // A file still being analysed is left out: a pc there is an
        // unknown pc to the unwinder, whose samples carry a stack copy
        // that is unwound once the file is loaded ("no unwind info" would
        // end them there for good).
        let unwind: Vec<UnwindMapping> = state
            .mappings
            .iter()
            .filter_map(|m| {
                let state = m.file.and_then(|(id, _)| self.held.get(&id)).map(|e| e.state);
                if state == Some(FileState::Pending) {
                    complete = false;
                    return None;
                }
                let target = match (m.file, state) {
                    (Some((table_key, bias)), Some(FileState::Loaded)) => UnwindTarget::File { table_key, bias },
                    _ => UnwindTarget::NoUnwindInfo,
                };
                Some(UnwindMapping {
                    start: m.start,
                    end: m.end,
                    target,
                    path: m.path.clone(),
                    reserved_end: m.reserved_end,
                })
            })
            .collect();
        if self.loader.set_process(pid, &unwind).is_err() {
            self.stats.load_errors += 1;
        }
        if complete {
            if let Some(since) = state.waiting_since_ns.take() {
                self.latency.record(monotonic_ns().saturating_sub(since) / 1000);
            }
        }
    }
}
