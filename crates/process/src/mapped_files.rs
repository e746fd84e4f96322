//! Which file an executable mapping maps: opened as the process sees it
//! (through `map_files`, else by its path inside the process's root and
//! only when it is the inode the maps line names) and known by content
//! ([`FileKeys`]), with the caches that spare a file already known being
//! opened or hashed again. The [`crate::ProcessManager`] holds the files
//! themselves; this part only says which one a mapping is.

use crate::files::FileKeys;
use crate::maps::MapsEntry;
use crate::procfs::read_memory;
use profiler_elf::source::{
    open_in_root, open_regular, path_in_root, stat_regular, table_key_of_bytes, table_key_of_opened, FileIdentity,
    OpenError, OpenedFile, Purpose, Refusals,
};
use profiler_elf::{file_id_of_bytes, file_id_of_file};
use profiler_trace::{FileId, Pid, TableKey};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Identity of a file on disk, to skip hashing it again.
pub(crate) type DiskKey = FileIdentity;

/// How long the identity of a mapped file (device, inode, size, times),
/// taken by a `stat` of its `map_files` entry, stands for other mappings
/// with the same device and inode in their maps line: under churn every
/// new process maps the same libraries, and a `stat` each was a fifth of
/// a load. A file rewritten in place is seen at most this late.
const IDENTITY_TRUSTED_FOR: Duration = Duration::from_secs(1);
/// Most identities kept for [`IDENTITY_TRUSTED_FOR`].
const MAX_RECENT_IDENTITIES: usize = 4096;
/// Bound of the (device, inode, ...) -> FileId cache and of the set of
/// files known to fail.
const MAX_DISK_KEYS: usize = 65_536;

/// What a mapping maps.
pub(crate) enum MappedFile {
    /// A file the manager holds already.
    Held(TableKey),
    /// The vDSO, not held: its bytes, read from the process.
    Vdso(FileKeys, Vec<u8>),
    /// An ELF file not held, opened.
    Opened(FileKeys, OpenedFile),
}

/// The caches of file identities (see the module documentation).
pub(crate) struct MappedFiles {
    proc_root: Arc<Path>,
    open_via_map_files: bool,
    disk_keys: HashMap<DiskKey, (FileId, TableKey)>,
    /// The identity a `stat` gave lately for a maps line's device and
    /// inode ([`IDENTITY_TRUSTED_FOR`]).
    recent_identities: HashMap<((u32, u32), u64), (DiskKey, Instant)>,
    /// The last vDSO seen and its keys.
    last_vdso: Option<(Vec<u8>, FileKeys)>,
    failed: HashSet<DiskKey>,
}

impl MappedFiles {
    /// Empty caches; files of `pid` are found under `proc_root/pid`.
    pub(crate) fn new(proc_root: Arc<Path>, open_via_map_files: bool) -> MappedFiles {
        MappedFiles {
            proc_root,
            open_via_map_files,
            disk_keys: HashMap::new(),
            recent_identities: HashMap::new(),
            last_vdso: None,
            failed: HashSet::new(),
        }
    }

    /// The file behind `pid`'s file-backed (or vDSO) mapping `entry`;
    /// `is_held` says whether the manager holds a file. `None`: the
    /// file cannot be read (counted in `refused` when it is refused for
    /// what it is, in `not_elf` when it is not ELF or cannot be hashed),
    /// or failed before.
    pub(crate) fn find(
        &mut self,
        pid: Pid,
        entry: &MapsEntry,
        is_held: impl Fn(&TableKey) -> bool,
        refused: &mut Refusals,
        not_elf: &mut u64,
    ) -> Option<MappedFile> {
        if entry.is_vdso() {
            let bytes = read_memory(&self.proc_root, pid, entry.start, entry.end).ok()?;
            // Every process maps the same vDSO: compared, not hashed again.
            let keys = match &self.last_vdso {
                Some((seen, keys)) if *seen == bytes => *keys,
                _ => {
                    let keys = FileKeys {
                        file_id: file_id_of_bytes(&bytes),
                        table_key: table_key_of_bytes(&bytes),
                        identity: None,
                    };
                    self.last_vdso = Some((bytes.clone(), keys));
                    keys
                }
            };
            if is_held(&keys.table_key) {
                return Some(MappedFile::Held(keys.table_key));
            }
            return Some(MappedFile::Vdso(keys, bytes));
        }
        if let Some(table_key) = self.known_table_key(pid, entry).filter(|k| is_held(k)) {
            return Some(MappedFile::Held(table_key));
        }
        let opened = match self.open_mapped(pid, entry) {
            Ok(opened) => opened,
            Err(e) => {
                // Plain I/O errors (the process exited, ...) are not counted.
                refused.count(&e);
                return None;
            }
        };
        let key: DiskKey = opened.identity;
        if self.failed.contains(&key) {
            return None;
        }
        let keys = match self.disk_keys.get(&key) {
            Some(&(file_id, table_key)) => FileKeys { file_id, table_key, identity: Some(key) },
            None => {
                let Some(keys) = file_keys(&opened) else {
                    // Not ELF, or unreadable: nothing hashed beyond 4 bytes.
                    *not_elf += 1;
                    self.remember_failed(key);
                    return None;
                };
                if self.disk_keys.len() >= MAX_DISK_KEYS {
                    self.disk_keys.clear();
                }
                self.disk_keys.insert(key, (keys.file_id, keys.table_key));
                keys
            }
        };
        if is_held(&keys.table_key) {
            return Some(MappedFile::Held(keys.table_key));
        }
        Some(MappedFile::Opened(keys, opened))
    }

    /// Remembers that the file of identity `key` cannot be used, so that
    /// it is not opened and read again.
    pub(crate) fn remember_failed(&mut self, key: DiskKey) {
        if self.failed.len() >= MAX_DISK_KEYS {
            self.failed.clear();
        }
        self.failed.insert(key);
    }

    /// The table key of the file a mapping maps when it was hashed
    /// already under the identity (device, inode, size, times) its
    /// `map_files` entry has now: found by one `stat`, without opening
    /// it. `None`: open it.
    fn known_table_key(&mut self, pid: Pid, entry: &MapsEntry) -> Option<TableKey> {
        if !self.open_via_map_files {
            return None;
        }
        let now = Instant::now();
        let seen_as = (entry.dev, entry.inode);
        let identity = match self.recent_identities.get(&seen_as) {
            Some(&(identity, at)) if now.duration_since(at) < IDENTITY_TRUSTED_FOR => identity,
            _ => {
                let identity = stat_regular(&self.map_files_entry(pid, entry)).ok()?;
                if self.recent_identities.len() >= MAX_RECENT_IDENTITIES {
                    self.recent_identities.retain(|_, (_, at)| now.duration_since(*at) < IDENTITY_TRUSTED_FOR);
                    if self.recent_identities.len() >= MAX_RECENT_IDENTITIES {
                        self.recent_identities.clear();
                    }
                }
                self.recent_identities.insert(seen_as, (identity, now));
                identity
            }
        };
        self.disk_keys.get(&identity).map(|&(_, table_key)| table_key)
    }

    /// `/proc/PID/map_files/<start>-<end>`: the file a mapping maps.
    fn map_files_entry(&self, pid: Pid, entry: &MapsEntry) -> PathBuf {
        self.proc_root.join(pid.0.to_string()).join("map_files").join(format!("{:x}-{:x}", entry.start, entry.end))
    }

    /// Opens the file a mapping maps: through `map_files` (the mapped
    /// file itself), else by its path inside the process's root, which
    /// must then be the inode the maps line names.
    fn open_mapped(&self, pid: Pid, entry: &MapsEntry) -> Result<OpenedFile, OpenError> {
        if self.open_via_map_files {
            match open_regular(&self.map_files_entry(pid, entry), Purpose::Executable) {
                Ok(opened) => return Ok(opened),
                // What is mapped is itself unacceptable (a device, ...).
                Err(e) if e.is_refusal() => return Err(e),
                // Not allowed to read map_files: by path below.
                Err(_) => {}
            }
        }
        let root = self.proc_root.join(pid.0.to_string()).join("root");
        let path = path_in_root(&root, Path::new(&entry.path));
        let opened = open_in_root(&root, &path, Purpose::Executable)?;
        if !opened.identity.is_mapped(entry.dev.0, entry.dev.1, entry.inode, opened.on_overlay) {
            return Err(OpenError::Mismatch);
        }
        Ok(opened)
    }
}

/// The wire id and content key of an opened file, when it is ELF (the
/// whole file is hashed only then).
fn file_keys(opened: &OpenedFile) -> Option<FileKeys> {
    let mut magic = [0u8; 4];
    opened.file.read_exact_at(&mut magic, 0).ok()?;
    if &magic != b"\x7fELF" {
        return None;
    }
    let file_id = file_id_of_file(&opened.file, opened.identity.size).ok()?;
    Some(FileKeys { file_id, table_key: table_key_of_opened(opened, file_id).ok()?, identity: Some(opened.identity) })
}
