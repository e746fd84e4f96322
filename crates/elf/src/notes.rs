//! Build ids from ELF notes, and the `.gnu_debuglink` pointer to a
//! separate debug file.
//!
//! A note is `namesz: u32, descsz: u32, type: u32`, then the name and the
//! descriptor, each padded to the note alignment (4, or 8 in 8-aligned note
//! sections such as `.note.gnu.property`) — gABI "Note Section".

use crate::error::Result;
use crate::file::{cstr_at, ElfFile, ReadLe, PT_NOTE, SHT_NOTE};

/// The `.gnu_debuglink` section: where the separate debug file is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugLink {
    /// File name of the debug file (looked up next to the file, in
    /// `.debug/`, and under `/usr/lib/debug/`).
    pub file: String,
    /// CRC-32 (IEEE, as zlib's `crc32`) of the whole debug file.
    pub crc: u32,
}

/// Note type of the GNU build id (`NT_GNU_BUILD_ID`), owner "GNU".
const NT_GNU_BUILD_ID: u32 = 3;
/// Note type of the Go build id (`ELF_NOTE_GOBUILDID_TAG` in Go's linker), owner "Go".
const NT_GO_BUILD_ID: u32 = 4;

/// One parsed note.
struct Note<'a> {
    name: &'a [u8],
    n_type: u32,
    desc: &'a [u8],
}

/// Iterates over the notes in `data`, stopping at the first malformed one.
fn notes(data: &[u8], align: u64) -> impl Iterator<Item = Note<'_>> {
    let align = if align == 8 { 8usize } else { 4 };
    let pad = move |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let namesz = data.u32_at(off)? as usize;
        let descsz = data.u32_at(off + 4)? as usize;
        let n_type = data.u32_at(off + 8)?;
        let name_start = off + 12;
        let desc_start = name_start.checked_add(pad(namesz)?)?;
        let next = desc_start.checked_add(pad(descsz)?)?;
        let name = data.get(name_start..name_start.checked_add(namesz)?)?;
        let desc = data.get(desc_start..desc_start.checked_add(descsz)?)?;
        // Names are NUL-terminated (Go pads "Go" to 4 bytes with NULs);
        // compare without the terminator.
        let name = &name[..name.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)];
        off = next;
        Some(Note { name, n_type, desc })
    })
}

/// The GNU build id in a bare sequence of 4-aligned notes, as lower-case
/// hex (`None`: none, or malformed).
pub fn gnu_build_id_in_notes(data: &[u8]) -> Option<String> {
    notes(data, 4)
        .find(|n| n.name == b"GNU" && n.n_type == NT_GNU_BUILD_ID)
        .filter(|n| !n.desc.is_empty())
        .map(|n| n.desc.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the running kernel exposes its own ELF notes.
const KERNEL_NOTES: &str = "/sys/kernel/notes";

/// Most bytes read from [`KERNEL_NOTES`] (a few hundred in practice).
const MAX_KERNEL_NOTES: u64 = 64 * 1024;

/// The running kernel's GNU build id (what `vmlinux` and its debug
/// package carry), read from `/sys/kernel/notes`; `None` where the file
/// is missing, unreadable or holds none.
pub fn kernel_build_id() -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(KERNEL_NOTES).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    file.take(MAX_KERNEL_NOTES).read_to_end(&mut data).ok()?;
    gnu_build_id_in_notes(&data)
}

impl ElfFile {
    /// Finds the first note with owner `owner` and type `n_type`: in note
    /// sections when the section headers exist, else in `PT_NOTE` segments.
    fn find_note(&self, owner: &[u8], n_type: u32) -> Result<Option<&[u8]>> {
        let mut looked_in_sections = false;
        // Some producers give note sections another type (gcc does for a
        // `.note.*` section declared in C), so go by name too.
        for section in self.sections().iter().filter(|s| s.sh_type == SHT_NOTE || s.name.starts_with(".note")) {
            looked_in_sections = true;
            let data = self.section_data(section)?;
            if let Some(n) = notes(data, section.addralign).find(|n| n.name == owner && n.n_type == n_type) {
                return Ok(Some(n.desc));
            }
        }
        if looked_in_sections {
            return Ok(None);
        }
        for phdr in self.program_headers().iter().filter(|p| p.p_type == PT_NOTE) {
            let data = self.segment_data(phdr)?;
            if let Some(n) = notes(data, phdr.align).find(|n| n.name == owner && n.n_type == n_type) {
                return Ok(Some(n.desc));
            }
        }
        Ok(None)
    }

    /// The GNU build id (`.note.gnu.build-id`) as lower-case hex, found via
    /// the section headers or, when they are stripped, the `PT_NOTE`
    /// segments. `Ok(None)` when the file has none.
    pub fn gnu_build_id(&self) -> Result<Option<String>> {
        Ok(self
            .find_note(b"GNU", NT_GNU_BUILD_ID)?
            .filter(|d| !d.is_empty())
            .map(|d| d.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The `.gnu_debuglink` section: a NUL-terminated file name, padding to
    /// a multiple of 4 bytes, then a 4-byte CRC (GDB manual, "Debugging
    /// Information in Separate Files"). `Ok(None)` when the file has none
    /// or the section is malformed.
    pub fn gnu_debuglink(&self) -> Result<Option<DebugLink>> {
        let Some(section) = self.section_by_name(".gnu_debuglink") else {
            return Ok(None);
        };
        let data = self.section_data(section)?;
        let Some(name) = cstr_at(data, 0).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let crc_at = (name.len() + 1).next_multiple_of(4);
        Ok(data.u32_at(crc_at).map(|crc| DebugLink { file: String::from_utf8_lossy(name).into_owned(), crc }))
    }

    /// The Go build id (`.note.go.buildid`) as the string the Go tool
    /// prints (`go tool buildid`). `Ok(None)` when the file has none.
    pub fn go_build_id(&self) -> Result<Option<String>> {
        Ok(self
            .find_note(b"Go", NT_GO_BUILD_ID)?
            .map(|d| String::from_utf8_lossy(d.strip_suffix(&[0]).unwrap_or(d)).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_note_sequence_gives_its_gnu_build_id() {
        let mut data = note(b"Linux\0", 0x101, &[1, 1, 0, 0]);
        data.extend(note(b"GNU\0", NT_GNU_BUILD_ID, &[0xfa, 0x36, 0x77, 0x6b]));
        assert_eq!(gnu_build_id_in_notes(&data).as_deref(), Some("fa36776b"));
        assert_eq!(gnu_build_id_in_notes(&data[..data.len() - 2]), None, "cut short");
        assert_eq!(gnu_build_id_in_notes(&note(b"Linux\0", 0x101, &[1])), None);
    }

    fn note(name: &[u8], n_type: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((name.len() as u32).to_le_bytes());
        v.extend((desc.len() as u32).to_le_bytes());
        v.extend(n_type.to_le_bytes());
        v.extend(name);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v.extend(desc);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn parses_notes_and_stops_on_garbage() {
        let mut data = note(b"GNU\0", 1, &[1, 2, 3, 4]);
        data.extend(note(b"Go\0\0", 4, b"abc/def"));
        data.extend(note(b"GNU\0", 3, &[0xde, 0xad, 0xbe, 0xef, 0x01]));
        let all: Vec<_> = notes(&data, 4).map(|n| (n.name.to_vec(), n.n_type, n.desc.to_vec())).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1], (b"Go".to_vec(), 4, b"abc/def".to_vec()));
        assert_eq!(all[2].2, vec![0xde, 0xad, 0xbe, 0xef, 0x01]);
        // Every truncation yields a prefix of the notes, never a panic.
        for cut in 0..data.len() {
            assert!(notes(&data[..cut], 4).count() <= 3);
        }
        // Absurd sizes are rejected.
        let mut bad = data.clone();
        bad[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(notes(&bad, 4).count(), 0);
    }
}
