//! CPython: finding it in a file ([`detect`]), what the BPF unwinder needs
//! of each build ([`PythonBuild`], [`Layout`], [`python_file_value`]), and
//! naming its frames from the process's memory ([`PythonSymbolizer`]);
//! [`CPython`] is all of it behind [`crate::Runtime`].
//!
//! A build is recognised by its evaluation loop `_PyEval_EvalFrameDefault`
//! (the executable of a static build, or `libpython3.X.so`); its version
//! comes from `Py_Version` (3.11+), the `_Py_DebugOffsets` of 3.13+, or the
//! file's name (`python3.X`, `libpython3.X.so`). Versions 3.8 to 3.15 are
//! supported; anything else is [`Detection::Unsupported`] and profiled as
//! native code.

mod layout;
mod linetable;
mod map_value;
mod runtime;
mod symbolizer;
mod word;

pub use layout::{FrameModel, Lasti, Layout, LineTableFormat, OB_TYPE, OWNER_LOOP_ENTRY};
pub use linetable::line_for_offset;
pub use runtime::{python_file_value, CPython};
pub use symbolizer::{CodeInfo, PythonSymbolizer, PythonSymbolizerStats};
pub use word::PythonWord;

use crate::memory::ProcessMemory;
use crate::refusal::Refusal;
use profiler_elf::ElfFile;
use std::fmt;

/// Bytes of a frame the BPF unwinder reads at once (`PYTHON_FRAME_READ_MAX`
/// in `ebpf/runtimes/python/types.h`): every frame field of a [`Layout`] lies below.
pub const FRAME_READ_MAX: u32 = 128;

/// The evaluation loop; its native frames are replaced by the Python
/// frames they run.
const EVAL_LOOP: &str = "_PyEval_EvalFrameDefault";
/// The loop's cold part, when the compiler split it (`.symtab` only).
const EVAL_LOOP_COLD: &str = "_PyEval_EvalFrameDefault.cold";
/// Only in `Py_TRACE_REFS` builds, whose objects have two more pointers
/// in their header (every offset moves).
const TRACE_REFS_SYMBOL: &str = "_Py_PrintReferences";
/// Oldest and newest minor versions of CPython 3 supported.
const MINORS: std::ops::RangeInclusive<u8> = 8..=15;
/// The largest cold part of the loop taken without a symbol (Debian's
/// 3.14 and 3.15 have 82-85 KB).
const MAX_COLD_PART: u64 = 1 << 20;
/// The largest hot part scanned for jumps into its cold part (the whole
/// loop of a build is 50-100 KB): a file's symbol cannot make the agent
/// scan and keep more.
const MAX_HOT_SCAN: u64 = 1 << 20;

/// A CPython version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// 3.
    pub major: u8,
    /// 8 to 15 are supported.
    pub minor: u8,
    /// The patch level, when known (`Py_Version`, 3.11+).
    pub micro: Option<u8>,
}

impl Version {
    /// From `PY_VERSION_HEX` (`0x030b07f0` is 3.11.7 final).
    pub fn from_hex(hex: u32) -> Version {
        Version { major: (hex >> 24) as u8, minor: (hex >> 16) as u8, micro: Some((hex >> 8) as u8) }
    }

    /// `major << 8 | minor`, as the BPF side keeps it.
    pub fn short(self) -> u16 {
        u16::from(self.major) << 8 | u16::from(self.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.micro {
            Some(micro) => write!(f, "{}.{}.{micro}", self.major, self.minor),
            None => write!(f, "{}.{}", self.major, self.minor),
        }
    }
}

/// Where a build's [`Layout`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutSource {
    /// This crate's per-version table.
    Table,
    /// The build's own `_Py_DebugOffsets` (3.13+).
    DebugOffsets,
}

/// A supported CPython build found in a file. Addresses are ELF virtual
/// addresses (process address = vaddr + the mapping's bias).
#[derive(Clone, Debug)]
pub struct PythonBuild {
    /// Its version.
    pub version: Version,
    /// Its offsets.
    pub layout: Layout,
    /// Where they came from.
    pub layout_source: LayoutSource,
    /// `_PyRuntime`.
    pub runtime_vaddr: u64,
    /// `PyCode_Type`, to tell a code object from garbage.
    pub code_type_vaddr: Option<u64>,
    /// The evaluation loop's code: `[start, end)` ranges.
    pub eval_ranges: Vec<(u64, u64)>,
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug)]
pub enum Detection {
    /// No CPython evaluation loop in it.
    NotPython,
    /// A build this crate knows how to unwind.
    Supported(PythonBuild),
    /// CPython, but not one to unwind (its frames stay native frames).
    Unsupported {
        /// Its version, when it could be found.
        version: Option<Version>,
        /// Why.
        reason: Refusal,
    },
}

/// The releases read, for a refusal.
fn supported() -> Refusal {
    let (first, last) = (MINORS.start(), MINORS.end());
    Refusal::Version { supported: format!("3.{first} to 3.{last}") }
}

/// Looks for CPython in an executable file (`path` is its name, used for
/// the version of 3.8-3.10). The few functions it needs are looked up by
/// name in the file's symbol table, which is never copied.
pub fn detect(elf: &ElfFile, path: &str) -> Detection {
    let Some((eval, eval_size)) = elf.function_symbol(EVAL_LOOP) else {
        return Detection::NotPython;
    };
    let unsupported = |version: Option<Version>, reason: Refusal| Detection::Unsupported { version, reason };
    let from_symbol = elf
        .symbol_address("Py_Version")
        .and_then(|a| elf.bytes_at_vaddr(a, 4))
        .map(|b| Version::from_hex(u32::from_le_bytes(b.try_into().expect("4 bytes"))));
    let Some(runtime_vaddr) = elf.symbol_address("_PyRuntime") else {
        return unsupported(from_symbol, Refusal::Symbol("_PyRuntime".into()));
    };
    let debug_offsets =
        elf.bytes_at_vaddr(runtime_vaddr, layout::DEBUG_OFFSETS_READ).filter(|b| b.starts_with(b"xdebugpy"));
    let version = from_symbol
        .or_else(|| debug_offsets.map(|b| Version::from_hex(u32::from_le_bytes(b[8..12].try_into().expect("4")))))
        .or_else(|| version_from_path(path));
    let Some(version) = version else {
        return unsupported(None, Refusal::UnknownVersion { what: "no Py_Version, and the file name says none" });
    };
    if !(version.major == 3 && MINORS.contains(&version.minor)) {
        return unsupported(Some(version), supported());
    }
    if elf.symbol_address(TRACE_REFS_SYMBOL).is_some() {
        return unsupported(Some(version), Refusal::Build("a Py_TRACE_REFS build (another object layout)"));
    }
    if eval_size == 0 {
        return unsupported(Some(version), Refusal::Symbol("_PyEval_EvalFrameDefault with its size".into()));
    }
    let (layout, layout_source) = if version.minor >= 13 {
        let Some(data) = debug_offsets else {
            return unsupported(Some(version), Refusal::Symbol("_Py_DebugOffsets in _PyRuntime".into()));
        };
        match Layout::from_debug_offsets(data) {
            Ok((hex, layout)) if Version::from_hex(hex).minor == version.minor => (layout, LayoutSource::DebugOffsets),
            Ok((hex, _)) => {
                return unsupported(
                    Some(version),
                    Refusal::Layout(format!("_Py_DebugOffsets say {}", Version::from_hex(hex))),
                )
            }
            Err(reason) => return unsupported(Some(version), Refusal::Layout(reason)),
        }
    } else {
        match Layout::for_version(version.major, version.minor) {
            Some(layout) => (layout, LayoutSource::Table),
            None => return unsupported(Some(version), supported()),
        }
    };
    let hot = (eval, eval.saturating_add(eval_size));
    let mut eval_ranges = vec![hot];
    match elf.function_symbol(EVAL_LOOP_COLD) {
        Some((cold, cold_size)) if cold_size > 0 => eval_ranges.push((cold, cold.saturating_add(cold_size))),
        _ => eval_ranges.extend(cold_part_without_symbol(elf, hot)),
    }
    Detection::Supported(PythonBuild {
        version,
        layout,
        layout_source,
        runtime_vaddr,
        code_type_vaddr: elf.symbol_address("PyCode_Type"),
        eval_ranges,
    })
}

/// The loop's cold part when `.symtab` (and its `.cold` symbol) was
/// stripped: GCC moves the blocks it deems unlikely into one range of its
/// own, with an FDE of its own, which the hot part jumps into. Debian's
/// 3.14 and 3.15 executables keep most of the opcode bodies there (the hot
/// part is 1 KB of 85 KB). Found as the FDE that direct jumps of the hot
/// part (`jmp`/`jcc` rel32) reach at two or more places, one at least not
/// its start: a tail call reaches another function only at its start.
fn cold_part_without_symbol(elf: &ElfFile, hot: (u64, u64)) -> Option<(u64, u64)> {
    let size = usize::try_from((hot.1 - hot.0).min(MAX_HOT_SCAN)).ok()?;
    let code = elf.bytes_at_vaddr(hot.0, size)?;
    let rel32 = |at: usize| code.get(at..at + 4).map(|b| i64::from(i32::from_le_bytes(b.try_into().expect("4"))));
    // Every byte offset is tried: a false reading lands on a random
    // address, which the FDE test below and the count filter out.
    let mut targets = Vec::new();
    for i in 0..code.len() {
        let (disp_at, end) = match (code[i], code.get(i + 1)) {
            (0xe9, _) => (i + 1, i + 5),
            (0x0f, Some(0x80..=0x8f)) => (i + 2, i + 6),
            _ => continue,
        };
        let Some(disp) = rel32(disp_at) else { continue };
        let target = hot.0.wrapping_add(end as u64).wrapping_add_signed(disp);
        if !(hot.0..hot.1).contains(&target) {
            targets.push(target);
        }
    }
    targets.sort_unstable();
    targets.dedup();
    let ranges = elf.fde_ranges_containing(&targets);
    let mut best: Option<((u64, u64), usize)> = None;
    for range in ranges {
        let inside: Vec<u64> = targets.iter().copied().filter(|t| (range.0..range.1).contains(t)).collect();
        let plausible = inside.len() >= 2 && inside.iter().any(|&t| t != range.0) && range.1 - range.0 <= MAX_COLD_PART;
        if plausible && best.is_none_or(|(_, n)| inside.len() > n) {
            best = Some((range, inside.len()));
        }
    }
    best.map(|(range, _)| range)
}

/// `3.X` from `python3.X`, `libpython3.X.so.1.0`, `python3.Xd`...
fn version_from_path(path: &str) -> Option<Version> {
    let name = path.rsplit('/').next()?;
    let at = name.find("python")? + "python".len();
    let rest = &name[at..];
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Version { major: major.parse().ok()?, minor: minor.parse().ok()?, micro: None })
}

/// One Python frame of a thread, as the BPF unwinder records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef {
    /// The code object's address.
    pub code: u64,
    /// Byte offset of the current instruction in its bytecode.
    pub offset: u32,
}

/// Walks the Python frames of the thread whose `thread_id`
/// (`pthread_self()`, `threading.get_ident()`) is given, innermost first,
/// the way the BPF unwinder does (all loops, without the native frames
/// between them). For tests and diagnostics: it checks a build's layout
/// against a live process.
pub fn walk_thread(
    memory: &dyn ProcessMemory,
    build: &PythonBuild,
    bias: u64,
    thread_id: u64,
) -> Result<Vec<FrameRef>, String> {
    let l = &build.layout;
    let u64_at = |address: u64| -> Result<u64, String> {
        let mut b = [0u8; 8];
        if memory.read(address, &mut b) {
            Ok(u64::from_le_bytes(b))
        } else {
            Err(format!("cannot read {address:#x}"))
        }
    };
    // Addresses come from the process: wrapping, never an overflow panic.
    let at = |base: u64, off: u32| base.wrapping_add(u64::from(off));
    let mut interp = u64_at(at(bias.wrapping_add(build.runtime_vaddr), l.runtime_interpreters_head))?;
    let mut tstate = 0;
    'interps: for _ in 0..1_000 {
        if interp == 0 {
            break;
        }
        let mut t = u64_at(at(interp, l.interp_threads_head))?;
        for _ in 0..10_000 {
            if t == 0 {
                break;
            }
            if u64_at(at(t, l.tstate_thread_id))? == thread_id {
                tstate = t;
                break 'interps;
            }
            t = u64_at(at(t, l.tstate_next))?;
        }
        interp = u64_at(at(interp, l.interp_next))?;
    }
    if tstate == 0 {
        return Err(format!("no thread state with thread id {thread_id:#x}"));
    }
    let mut frame = u64_at(at(tstate, l.tstate_frame))?;
    if let (Some(off), true) = (l.cframe_current_frame, frame != 0) {
        frame = u64_at(at(frame, off))?;
    }
    let mut frames = Vec::new();
    while frame != 0 && frames.len() < 10_000 {
        let mut buf = vec![0u8; l.frame_read_size as usize];
        if !memory.read(frame, &mut buf) {
            return Err(format!("cannot read the frame at {frame:#x}"));
        }
        let outside = || format!("the layout reads outside the {} bytes of a frame", buf.len());
        let word = |off: u32| crate::memory::u64_in(&buf, off).ok_or_else(outside);
        let code = word(l.frame_code)? & !u64::from(l.frame_code_tag_mask);
        let previous = word(l.frame_previous)?;
        // The loop's own frame, and (3.14+) other frames of C code.
        let not_python = l.frame_model == FrameModel::CStackOwner
            && l.frame_entry.is_some_and(|e| buf.get(e as usize).is_some_and(|&o| o >= OWNER_LOOP_ENTRY));
        if !not_python && code != 0 {
            let lasti = |off: u32| crate::memory::i32_in(&buf, off).ok_or_else(outside);
            let offset = match l.lasti {
                Lasti::Bytes => i64::from(lasti(l.frame_lasti)?),
                Lasti::Units => 2 * i64::from(lasti(l.frame_lasti)?),
                Lasti::Pointer => (word(l.frame_lasti)? as i64)
                    .wrapping_sub(code.wrapping_add(u64::from(l.code_adaptive.unwrap_or(0))) as i64),
            };
            frames.push(FrameRef { code, offset: offset.clamp(0, i64::from(u32::MAX)) as u32 });
        }
        frame = previous;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_paths() {
        let v = |p: &str| version_from_path(p).map(|v| (v.major, v.minor));
        assert_eq!(v("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"), Some((3, 11)));
        assert_eq!(v("/root/.pyenv/versions/3.8.18/bin/python3.8"), Some((3, 8)));
        assert_eq!(v("/opt/python3.10d"), Some((3, 10)));
        assert_eq!(v("/usr/bin/python3"), None);
        assert_eq!(v("/usr/bin/python"), None);
        assert_eq!(v("/usr/bin/pythonX.Y"), None);
        assert_eq!(Version::from_hex(0x030b07f0).to_string(), "3.11.7");
        assert_eq!(Version::from_hex(0x030b07f0).short(), 0x030b);
    }

    #[test]
    fn files_without_an_eval_loop_are_not_python() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert!(matches!(detect(&elf, exe.to_str().unwrap()), Detection::NotPython));
    }
}
