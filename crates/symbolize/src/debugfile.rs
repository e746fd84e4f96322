//! Finding a file's separate debug information: by GNU build id under a
//! debug root (`<root>/.build-id/ab/cdef....debug`), or by
//! `.gnu_debuglink` next to the file, in its `.debug/` directory and under
//! a debug root (`<root>/<dir of the file>/<name>`), as GDB does ("Debugging
//! Information in Separate Files" in the GDB manual). A build-id match
//! must carry the same build id; a debuglink match must have the CRC-32
//! the link records.
//!
//! Every candidate is a [`Place`]: a path inside the process's root
//! (resolved there, so an absolute symlink or `..` cannot lead to the
//! host's files) or a host path. Host paths are tried for files of the
//! host's own processes, and by build id (the id is checked) for any.
//! Candidates are opened as [`profiler_elf::source`] opens files a
//! process controls: regular files only, bounded; refusals are counted.

use std::path::{Path, PathBuf};

use profiler_elf::source::{open_in_root, open_regular, path_in_root, OpenError, OpenedFile, Purpose, Refusals};
use profiler_elf::ElfFile;

use crate::dwarf::DwarfFile;
use crate::source::{self, FileSource};

/// Where to look for separate debug files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugConfig {
    /// Read DWARF (in the file or in a separate debug file). When false,
    /// only ELF symbols and Go's table are used. Default true.
    pub use_dwarf: bool,
    /// Global debug directories, as the host sees them. For a file of a
    /// process with its own root (a container), each is also looked up
    /// under that root first. Default `["/usr/lib/debug"]`.
    pub debug_roots: Vec<PathBuf>,
    /// DWARF that would take more heap than this once loaded (its
    /// decompressed sections and the unit index built at load: 8 bytes a
    /// unit and 32 an address range) is not used: the file is named from
    /// its symbols only. Estimated from the unit headers before anything
    /// is parsed; in practice only compressed debug sections (debug files
    /// of distributions) come near it. Default 8 MiB.
    pub max_dwarf_bytes: u64,
}

impl Default for DebugConfig {
    fn default() -> DebugConfig {
        DebugConfig { use_dwarf: true, debug_roots: vec![PathBuf::from("/usr/lib/debug")], max_dwarf_bytes: 8 << 20 }
    }
}

/// Where a candidate file is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A path of the host's namespace.
    Host(PathBuf),
    /// An absolute path as the process whose root directory is `root`
    /// sees it.
    InRoot {
        /// The process's root as the host sees it (`/proc/PID/root`).
        root: PathBuf,
        /// The path inside it.
        path: PathBuf,
    },
}

impl Place {
    /// `path` (absolute, as the process sees it) inside `root`, or on
    /// the host when there is no root.
    pub(crate) fn new(root: Option<&Path>, path: &Path) -> Place {
        match root {
            Some(root) => Place::InRoot { root: root.to_owned(), path: Path::new("/").join(path) },
            None => Place::Host(path.to_owned()),
        }
    }

    /// Opens it as a debug file.
    pub(crate) fn open(&self) -> Result<OpenedFile, OpenError> {
        match self {
            Place::Host(p) => open_regular(p, Purpose::DebugFile),
            Place::InRoot { root, path } => open_in_root(root, path, Purpose::DebugFile),
        }
    }

    /// The path as the host would name it (for reports only: never
    /// opened).
    pub(crate) fn display(&self) -> PathBuf {
        match self {
            Place::Host(p) => p.clone(),
            Place::InRoot { root, path } => root.join(path.strip_prefix("/").unwrap_or(path)),
        }
    }

    /// `name` relative to this file's directory, in the same root.
    fn sibling(&self, name: &Path) -> Option<Place> {
        Some(match self {
            Place::Host(p) => Place::Host(p.parent()?.join(name)),
            Place::InRoot { root, path } => Place::InRoot { root: root.clone(), path: path.parent()?.join(name) },
        })
    }
}

/// A separate debug file that was found and checked.
pub(crate) struct DebugFile {
    pub place: Place,
    pub file: DwarfFile,
}

/// The file's path as its process names it.
fn process_path(source: &FileSource) -> PathBuf {
    match &source.root {
        Some(root) => path_in_root(root, Path::new(&source.path)),
        None => PathBuf::from(&source.path),
    }
}

/// Whether `root` (e.g. `/proc/PID/root`) is the host's own root.
fn is_host_root(root: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(root), std::fs::metadata("/")) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Whether host paths (not found by build id) may be tried for `source`:
/// a file of the host, or of a process whose root is the host's.
fn host_paths_allowed(source: &FileSource) -> bool {
    source.root.as_deref().is_none_or(is_host_root)
}

/// The debug roots to try by build id for `source`, in order: under the
/// process's root, then on the host.
fn build_id_places(source: &FileSource, config: &DebugConfig, id: &str) -> Vec<Place> {
    let mut out = Vec::new();
    for r in &config.debug_roots {
        let path = build_id_path(r, id);
        if let Some(root) = source.root.as_deref() {
            out.push(Place::new(Some(root), &path));
        }
        out.push(Place::Host(path));
    }
    out.dedup();
    out
}

/// Whether `elf` holds DWARF.
pub(crate) fn has_debug_info(elf: &ElfFile) -> bool {
    elf.sections().iter().any(|s| {
        (s.name == ".debug_info" || s.name == ".zdebug_info") && s.size > 0 && s.sh_type != profiler_elf::SHT_NOBITS
    })
}

/// `<root>/.build-id/ab/cdef....debug` of build id `id` (hex).
fn build_id_path(root: &Path, id: &str) -> PathBuf {
    root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]))
}

/// Opens `place` as an ELF file (counting a refusal).
fn open_elf(place: &Place, refusals: &mut Refusals) -> Option<DwarfFile> {
    match place.open() {
        Ok(opened) => source::elf_file(opened).ok(),
        Err(e) => {
            refusals.count(&e);
            None
        }
    }
}

/// Opens `place` when it is an ELF file with build id `id` and DWARF.
fn open_checked(place: &Place, id: &str, refusals: &mut Refusals) -> Option<DwarfFile> {
    let file = open_elf(place, refusals)?;
    (file.elf.gnu_build_id().ok().flatten().as_deref() == Some(id) && has_debug_info(&file.elf)).then_some(file)
}

/// The supplementary DWARF file (`dwz -m`) that `dwarf`'s
/// `.gnu_debugaltlink` names: a NUL-terminated path (absolute, or
/// relative to the file holding the link), then the build id the
/// supplementary file must have. Tried at that path (in the same root),
/// then by build id under the debug roots. `dwarf_place` is where the
/// file holding the link was found (`None`: the mapped file itself).
pub(crate) fn find_sup(
    dwarf: &ElfFile,
    dwarf_place: Option<&Place>,
    source: &FileSource,
    config: &DebugConfig,
    refusals: &mut Refusals,
) -> Option<DwarfFile> {
    use std::os::unix::ffi::OsStrExt;
    let section = dwarf.section_by_name(".gnu_debugaltlink")?;
    let data = dwarf.section_data(section).ok()?;
    let nul = data.iter().position(|&b| b == 0)?;
    let name = Path::new(std::ffi::OsStr::from_bytes(&data[..nul]));
    let id: String = data[nul + 1..].iter().map(|b| format!("{b:02x}")).collect();
    if id.len() < 4 {
        return None;
    }
    let mut candidates = Vec::new();
    if name.is_absolute() {
        candidates.push(Place::new(source.root.as_deref(), name));
    } else if !name.as_os_str().is_empty() {
        if let Some(p) = dwarf_place.and_then(|p| p.sibling(name)) {
            candidates.push(p);
        }
        // DWARF in the file itself: relative to where the process sees it.
        if let Some(dir) = process_path(source).parent() {
            candidates.push(Place::new(source.root.as_deref(), &dir.join(name)));
        }
    }
    candidates.extend(build_id_places(source, config, &id));
    candidates.dedup();
    candidates.into_iter().find_map(|p| open_checked(&p, &id, refusals))
}

/// Finds the separate debug file of `elf`, opened from `source`.
pub(crate) fn find(
    elf: &ElfFile,
    source: &FileSource,
    config: &DebugConfig,
    refusals: &mut Refusals,
) -> Option<DebugFile> {
    if let Some(id) = elf.gnu_build_id().ok().flatten().filter(|id| id.len() > 2) {
        for place in build_id_places(source, config, &id) {
            if let Some(file) = open_checked(&place, &id, refusals) {
                return Some(DebugFile { place, file });
            }
        }
    }
    let link = elf.gnu_debuglink().ok().flatten()?;
    // The directory of the file as the process names it; a path through
    // /proc/PID/map_files says nothing about where the file lives.
    let dir = process_path(source).parent()?.to_owned();
    let name = Path::new(&link.file);
    if name.components().count() != 1 {
        return None;
    }
    let root = source.root.as_deref();
    let mut candidates = vec![Place::new(root, &dir.join(name)), Place::new(root, &dir.join(".debug").join(name))];
    for r in &config.debug_roots {
        let path = r.join(dir.strip_prefix("/").unwrap_or(&dir)).join(name);
        if let Some(root) = root {
            candidates.push(Place::new(Some(root), &path));
        }
        if host_paths_allowed(source) {
            candidates.push(Place::Host(path));
        }
    }
    candidates.dedup();
    for place in candidates {
        // The link may name the file itself (a debug file linking to
        // itself makes no sense; skip without reading it).
        if place.display() == source.open_path {
            continue;
        }
        let Some(file) = open_elf(&place, refusals) else {
            continue;
        };
        if crc32fast::hash(file.elf.data()) == link.crc && has_debug_info(&file.elf) {
            return Some(DebugFile { place, file });
        }
        file.bytes.release();
    }
    None
}
