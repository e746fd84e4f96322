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
}

impl Default for DebugConfig {
    fn default() -> DebugConfig {
        DebugConfig {
            use_dwarf: true,
            debug_roots: vec![PathBuf::from("/usr/lib/debug")],
        }
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
fn has_debug_info(elf: &ElfFile) -> bool {
    elf.sections().iter().any(|s| {
        (s.name == ".debug_info" || s.name == ".zdebug_info")
            && s.size > 0
            && s.sh_type != profiler_elf::SHT_NOBITS
    })
}

/// Finds the separate debug file of `elf`, opened from `source`.
pub(crate) fn find(elf: &ElfFile, source: &FileSource, config: &DebugConfig) -> Option<DebugFile> {
    let roots = roots(source, config);
    if let Some(id) = elf.gnu_build_id().ok().flatten().filter(|id| id.len() > 2) {
        for root in &roots {
            let path = root
                .join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..]));
            let Ok(debug) = ElfFile::open(&path) else {
                continue;
            };
            if debug.gnu_build_id().ok().flatten().as_deref() == Some(id.as_str())
                && has_debug_info(&debug)
            {
                return Some(DebugFile {
                    path,
                    elf: Arc::new(debug),
                });
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
            return Some(DebugFile {
                path,
                elf: Arc::new(debug),
            });
        }
    }
    None
}
