//! Opening the file a [`FileSource`] names, as a file the traced process
//! controls: regular files only, bounded, inside the process's root, the
//! inode the process manager analysed; or an ELF image read out of a
//! process's memory (the vDSO). `file` loads what it opens here,
//! `debugfile` finds debug files and opens them here too.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use profiler_elf::source::{
    open_in_root, open_regular, path_in_root, reopen_file, FileIdentity, OpenError, OpenedFile, Purpose,
};
use profiler_elf::ElfFile;
use profiler_trace::Pid;

use crate::dwarf::DwarfFile;
use crate::filemap::{Backing, FileMap};

/// How to open a file, and where it lives as its process sees it (to find
/// its separate debug file).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileSource {
    /// The path to open now, e.g. `/proc/PID/root/usr/lib/libfoo.so` or
    /// `/proc/PID/map_files/START-END`.
    pub open_path: PathBuf,
    /// The file's path in the process's mount namespace, e.g.
    /// `/usr/lib/libfoo.so` (its directory is where `.gnu_debuglink`
    /// files are looked for). May equal `open_path`.
    pub path: String,
    /// The process's root directory as the host sees it
    /// (`/proc/PID/root`), when the debug directories should be looked up
    /// there first; `None` for files of the host's own namespace.
    pub root: Option<PathBuf>,
    /// When set, the file is not on disk but in memory: these addresses
    /// of the process whose `/proc/PID/mem` is `open_path` (the vDSO).
    pub memory: Option<Range<u64>>,
    /// When set, the file opened must be this inode at this version (what
    /// the process manager analysed): a file replaced on disk since, or a
    /// crafted path, is refused rather than named from.
    pub identity: Option<FileIdentity>,
    /// The file as the process manager opened it, when it kept it: read
    /// from first, so that a file whose processes have all exited (and
    /// with them their `/proc/PID` paths) can still be loaded.
    pub handle: Option<KeptFile>,
}

/// A file kept open by whoever analysed it; compared by identity of the
/// descriptor, not by content.
#[derive(Clone, Debug)]
pub struct KeptFile(pub Arc<std::fs::File>);

impl PartialEq for KeptFile {
    fn eq(&self, other: &KeptFile) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for KeptFile {}

impl std::hash::Hash for KeptFile {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).hash(state);
    }
}

impl FileSource {
    /// A file of the host's namespace, opened by its path.
    pub fn new(path: impl Into<PathBuf>) -> FileSource {
        let open_path = path.into();
        FileSource {
            path: open_path.to_string_lossy().into_owned(),
            open_path,
            root: None,
            memory: None,
            identity: None,
            handle: None,
        }
    }

    /// The same source, which must open the file `identity` names.
    pub fn with_identity(mut self, identity: Option<FileIdentity>) -> FileSource {
        self.identity = identity;
        self
    }

    /// The same source, read from `handle` first (see
    /// [`FileSource::handle`]); it must still be the version `identity`
    /// names.
    pub fn with_handle(mut self, handle: Option<Arc<std::fs::File>>) -> FileSource {
        self.handle = handle.map(KeptFile);
        self
    }

    /// `path` as process `pid` sees it, resolved inside `/proc/PID/root`
    /// (works for processes in containers; symlinks cannot leave that
    /// root).
    pub fn in_process(pid: Pid, path: &str) -> FileSource {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        FileSource {
            open_path: root.join(path.trim_start_matches('/')),
            path: path.to_owned(),
            root: Some(root),
            memory: None,
            identity: None,
            handle: None,
        }
    }

    /// The file mapped at `start..end` in process `pid`, opened through
    /// `/proc/PID/map_files/` (works after the file was deleted or
    /// replaced on disk); `path` is the mapping's path, for debug links.
    pub fn in_mapping(pid: Pid, start: u64, end: u64, path: &str) -> FileSource {
        FileSource {
            open_path: PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}")),
            path: path.to_owned(),
            root: Some(PathBuf::from(format!("/proc/{pid}/root"))),
            memory: None,
            identity: None,
            handle: None,
        }
    }

    /// The ELF image at `start..end` in the memory of process `pid`, read
    /// through `/proc/PID/mem`: the vDSO (`name` is how its mapping is
    /// named, e.g. `[vdso]`). At most 1 MiB is read.
    pub fn in_memory(pid: Pid, start: u64, end: u64, name: &str) -> FileSource {
        FileSource {
            open_path: PathBuf::from(format!("/proc/{pid}/mem")),
            path: name.to_owned(),
            root: None,
            memory: Some(start..end),
            identity: None,
            handle: None,
        }
    }
}

/// Why a file could not be loaded at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Opening or parsing the file failed.
    #[error("cannot load {path}")]
    Open {
        /// The path that was opened.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: profiler_elf::Error,
    },
    /// Reading an in-memory file ([`FileSource::in_memory`]) failed.
    #[error("cannot read {path} at {start:#x}")]
    Read {
        /// The memory file.
        path: PathBuf,
        /// The first address.
        start: u64,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The file was refused (not a regular file, too large, not the
    /// file analysed, a path leaving the process's root, ...).
    #[error("refused {path}")]
    Refused {
        /// The path that was opened.
        path: PathBuf,
        /// Why.
        #[source]
        reason: OpenError,
    },
    /// Loading panicked (a bug, caught so that it costs only this file).
    #[error("loading {path} panicked")]
    Panicked {
        /// The path that was opened.
        path: PathBuf,
    },
}

/// Opens the file of `source` as an ELF file: read out of the process's
/// memory for an in-memory source, else opened as [`open_source`] does.
pub(crate) fn open(source: &FileSource) -> Result<DwarfFile, LoadError> {
    if let Some(range) = &source.memory {
        let bytes = read_memory(&source.open_path, range).map_err(|e| LoadError::Read {
            path: source.open_path.clone(),
            start: range.start,
            source: e,
        })?;
        let elf =
            ElfFile::from_bytes(bytes).map_err(|e| LoadError::Open { path: source.open_path.clone(), source: e })?;
        let elf = Arc::new(elf);
        return Ok(DwarfFile { bytes: Backing::Elf(elf.clone()), elf });
    }
    let opened = open_source(source)?;
    elf_file(opened).map_err(|e| LoadError::Open { path: source.open_path.clone(), source: e })
}

/// The bytes at `range` of the memory file `path` (`/proc/PID/mem`), at
/// most [`MAX_MEMORY_FILE`].
fn read_memory(path: &Path, range: &Range<u64>) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len = range.end.saturating_sub(range.start);
    if len == 0 || len > MAX_MEMORY_FILE {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "implausible size"));
    }
    let mut buf = vec![0u8; len as usize];
    std::fs::File::open(path)?.read_exact_at(&mut buf, range.start)?;
    Ok(buf)
}

/// An opened file as an ELF file whose bytes lookups read from the
/// symbolizer's own map of the same descriptor (its pages can be
/// released); from the `ElfFile`'s bytes when that map fails.
pub(crate) fn elf_file(opened: OpenedFile) -> Result<DwarfFile, profiler_elf::Error> {
    let len = opened.identity.size;
    let map = FileMap::from_file(&opened.file, len);
    let elf = Arc::new(ElfFile::from_file(opened.file, len)?);
    let bytes = match map {
        Ok(m) if m.data().len() == elf.data().len() => Backing::Map(Arc::new(m)),
        _ => Backing::Elf(elf.clone()),
    };
    Ok(DwarfFile { elf, bytes })
}

/// Opens the file of `source` (not in memory): `open_path` (the mapped
/// file through `/proc/PID/map_files`, or a host path), else, when that
/// cannot be opened (no capability for map_files) and the source has a
/// root, its path resolved inside that root. Either way it must be a
/// regular file within bounds, and the inode `source.identity` names.
fn open_source(source: &FileSource) -> Result<OpenedFile, LoadError> {
    let refused = |reason| LoadError::Refused { path: source.open_path.clone(), reason };
    if let Some(KeptFile(file)) = &source.handle {
        // Changed since it was analysed (or not checkable): by path below.
        if let Ok(opened) = reopen_file(file, Purpose::Executable).and_then(|o| check_identity(o, source)) {
            return Ok(opened);
        }
    }
    let in_root = source.root.as_deref().filter(|_| source.path.starts_with('/'));
    // `in_process` sources name the path inside the root: resolved there.
    let by_root_only = in_root.is_some_and(|r| r.join(source.path.trim_start_matches('/')) == source.open_path);
    let mut first_error = None;
    if !by_root_only {
        match open_regular(&source.open_path, Purpose::Executable) {
            Ok(opened) => return check_identity(opened, source).map_err(refused),
            Err(e) if e.is_refusal() => return Err(refused(e)),
            Err(e) => first_error = Some(e),
        }
    }
    let opened = match in_root {
        Some(root) => open_in_root(root, &path_in_root(root, Path::new(&source.path)), Purpose::Executable),
        None => Err(first_error.unwrap_or(OpenError::Io(std::io::ErrorKind::NotFound.into()))),
    };
    match opened {
        Ok(opened) => check_identity(opened, source).map_err(refused),
        Err(e) if e.is_refusal() => Err(refused(e)),
        Err(e) => Err(LoadError::Open {
            path: source.open_path.clone(),
            source: profiler_elf::Error::Io { path: source.open_path.clone(), source: e.into() },
        }),
    }
}

/// `opened` when it is the inode and version `source.identity` names (on
/// overlayfs the device may differ between the overlay and the layer).
fn check_identity(opened: OpenedFile, source: &FileSource) -> Result<OpenedFile, OpenError> {
    let Some(want) = source.identity else { return Ok(opened) };
    let got = opened.identity;
    let same = got.ino == want.ino
        && got.size == want.size
        && got.mtime == want.mtime
        && (got.dev == want.dev || opened.on_overlay);
    if same {
        Ok(opened)
    } else {
        Err(OpenError::Mismatch)
    }
}

/// Largest in-memory file read ([`FileSource::in_memory`]).
const MAX_MEMORY_FILE: u64 = 1 << 20;
