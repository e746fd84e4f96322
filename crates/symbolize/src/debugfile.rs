//! Finding a file's separate debug information: by GNU build id under a
//! debug root (`<root>/.build-id/ab/cdef....debug`), or by
//! `.gnu_debuglink` next to the file, in its `.debug/` directory and under
//! a debug root (`<root>/<dir of the file>/<name>`), as GDB does ("Debugging
//! Information in Separate Files" in the GDB manual). A build-id match
//! must carry the same build id; a debuglink match must have the CRC-32
//! the link records.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use profiler_elf::ElfFile;

use crate::file::FileSource;

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
    /// decompressed sections and the unit index parsed before any lookup)
    /// is not used: the file is named from its symbols only. Estimated
    /// from the raw sections before anything is parsed. Default 8 MiB:
    /// enough for most C and C++ libraries and programs with their debug
    /// information (glibc's `ld.so` debug file: 3 MiB), not for glibc's
    /// libc debug file (about 37 MiB, 30 MiB really held) or a 50 MB Rust
    /// program built with `debug = 1` (about 16 MiB; then 10-20 MiB more
    /// as lookups parse its units).
    pub max_dwarf_bytes: u64,
}

impl Default for DebugConfig {
    fn default() -> DebugConfig {
        DebugConfig { use_dwarf: true, debug_roots: vec![PathBuf::from("/usr/lib/debug")], max_dwarf_bytes: 8 << 20 }
    }
}

/// A separate debug file that was found and checked.
pub(crate) struct DebugFile {
    pub path: PathBuf,
    pub elf: Arc<ElfFile>,
}

/// `path` (absolute, as the process sees it) under `root`, when given.
fn under(root: Option<&Path>, path: &Path) -> PathBuf {
    match root {
        Some(r) => r.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_owned(),
    }
}

/// The debug roots to try for `source`, in order: under the process's
/// root, then on the host.
fn roots(source: &FileSource, config: &DebugConfig) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for r in &config.debug_roots {
        if let Some(root) = source.root.as_deref() {
            out.push(under(Some(root), r));
        }
        out.push(r.clone());
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

/// Opens `path` when it is an ELF file with build id `id` and DWARF.
fn open_checked(path: &Path, id: &str) -> Option<Arc<ElfFile>> {
    let elf = ElfFile::open(path).ok()?;
    (elf.gnu_build_id().ok().flatten().as_deref() == Some(id) && has_debug_info(&elf)).then(|| Arc::new(elf))
}

/// The supplementary DWARF file (`dwz -m`) that `dwarf`'s
/// `.gnu_debugaltlink` names: a NUL-terminated path (absolute, or
/// relative to the file holding the link), then the build id the
/// supplementary file must have. Tried at that path, then by build id
/// under the debug roots. Returns the file and the path it was found at.
pub(crate) fn find_sup(
    dwarf: &ElfFile,
    dwarf_path: &Path,
    source: &FileSource,
    config: &DebugConfig,
) -> Option<(PathBuf, Arc<ElfFile>)> {
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
        if source.root.is_some() {
            candidates.push(under(source.root.as_deref(), name));
        }
        candidates.push(name.to_owned());
    } else if !name.as_os_str().is_empty() {
        if let Some(dir) = dwarf_path.parent() {
            candidates.push(dir.join(name));
        }
        // DWARF in the file itself, opened through /proc/PID/map_files:
        // relative to where the process sees the file.
        if let Some(dir) = Path::new(&source.path).parent() {
            candidates.push(under(source.root.as_deref(), &dir.join(name)));
        }
    }
    for root in roots(source, config) {
        candidates.push(build_id_path(&root, &id));
    }
    candidates.dedup();
    candidates.into_iter().find_map(|p| open_checked(&p, &id).map(|elf| (p, elf)))
}

/// Finds the separate debug file of `elf`, opened from `source`.
pub(crate) fn find(elf: &ElfFile, source: &FileSource, config: &DebugConfig) -> Option<DebugFile> {
    let roots = roots(source, config);
    if let Some(id) = elf.gnu_build_id().ok().flatten().filter(|id| id.len() > 2) {
        for root in &roots {
            let path = build_id_path(root, &id);
            if let Some(elf) = open_checked(&path, &id) {
                return Some(DebugFile { path, elf });
            }
        }
    }
    let link = elf.gnu_debuglink().ok().flatten()?;
    // The directory of the file as the process names it; a path through
    // /proc/PID/map_files says nothing about where the file lives.
    let dir = Path::new(&source.path).parent()?.to_owned();
    let name = Path::new(&link.file);
    if name.components().count() != 1 {
        return None;
    }
    let mut candidates = vec![
        under(source.root.as_deref(), &dir.join(name)),
        under(source.root.as_deref(), &dir.join(".debug").join(name)),
    ];
    for root in &roots {
        candidates.push(root.join(dir.strip_prefix("/").unwrap_or(&dir)).join(name));
    }
    for path in candidates {
        // The link may name the file itself (a debug file linking to
        // itself makes no sense; skip without reading it).
        if path == source.open_path {
            continue;
        }
        let Ok(debug) = ElfFile::open(&path) else {
            continue;
        };
        if crc32fast::hash(debug.data()) == link.crc && has_debug_info(&debug) {
            return Some(DebugFile { path, elf: Arc::new(debug) });
        }
    }
    None
}
