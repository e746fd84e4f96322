//! PHP (the Zend Engine): finding it in a file ([`detect`]), the
//! per-version offsets the unwinder needs ([`PhpLayout`]), and a
//! user-space walk that names a thread's frames ([`PhpSymbolizer`]) and
//! proves the layout against live processes; [`Php`], the [`crate::Runtime`]
//! whose BPF unwinder (`ebpf/runtimes/php/unwinder.bpf.h`) records PHP frames in
//! place of `execute_ex`. See `docs/php.md`.
//!
//! PHP is recognised by a file (`php8.x`, `php-fpm`, `libphp.so`)
//! exporting `executor_globals` and `zend_execute_ex`; the version is
//! read from the file's `X-Powered-By: PHP/<version>` string (PHP has no
//! version symbol before 8.4) and picks the layout. Thread-safe (ZTS)
//! builds keep the globals in thread-local storage and export
//! `executor_globals_offset` instead: [`Detection::Unsupported`], as are
//! versions outside [`MIN_PHP`]..=[`MAX_PHP`].

mod layout;
mod map_value;
mod runtime;
mod walk;

pub use layout::{consts, PhpLayout, PhpVersion, MAX_PHP, MIN_PHP};
pub use runtime::{decode_word, Php, PhpFile, PhpWord};
pub use walk::{current_execute_data, PhpFrame, PhpSymbolizer, MAX_CACHED, MAX_FRAMES, MAX_STRING};

use crate::refusal::Refusal;
use profiler_elf::ElfFile;

/// `PT_LOAD`.
const PT_LOAD: u32 = 1;
/// `PF_X`.
const PF_X: u32 = 1;
/// `PF_W`.
const PF_W: u32 = 2;
/// What precedes the version in PHP's read-only data.
const VERSION_NEEDLE: &[u8] = b"X-Powered-By: PHP/";

/// A PHP build found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhpBuild {
    /// Its version.
    pub version: PhpVersion,
    /// The offsets of that version.
    pub layout: PhpLayout,
    /// File address of `executor_globals`.
    pub executor_globals_vaddr: u64,
    /// File address of `execute_ex` (the VM's loop) when exported.
    pub execute_ex_vaddr: Option<u64>,
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not PHP.
    NotPhp,
    /// A supported PHP.
    Php(Box<PhpBuild>),
    /// A PHP this crate does not unwind (its frames stay native).
    Unsupported {
        /// Its release, when it could be read.
        version: Option<PhpVersion>,
        /// Why.
        reason: Refusal,
    },
}

/// Looks at one mapped file (`path` is its name, for messages).
pub fn detect(elf: &ElfFile) -> Detection {
    if elf.symbol_address("zend_execute_ex").is_none() {
        return Detection::NotPhp;
    }
    let unsupported = |version, reason| Detection::Unsupported { version, reason };
    let Some(eg) = elf.symbol_address("executor_globals") else {
        return if elf.symbol_address("executor_globals_offset").is_some() {
            unsupported(None, Refusal::Build("thread-safe (ZTS) PHP"))
        } else {
            unsupported(None, Refusal::Symbol("executor_globals".into()))
        };
    };
    let Some(text) = version_text(elf) else {
        return unsupported(None, Refusal::UnknownVersion { what: "no version string" });
    };
    let Some(version) = PhpVersion::parse(&text) else {
        return unsupported(None, Refusal::Layout(format!("unreadable version {text:?}")));
    };
    match PhpLayout::for_version(version) {
        Ok(layout) => Detection::Php(Box::new(PhpBuild {
            version,
            layout,
            executor_globals_vaddr: eg,
            execute_ex_vaddr: elf.symbol_address("execute_ex"),
        })),
        Err(reason) => unsupported(Some(version), reason),
    }
}

/// The text after [`VERSION_NEEDLE`] in the file's read-only segments
/// (at most 32 bytes, up to a NUL).
fn version_text(elf: &ElfFile) -> Option<String> {
    let readonly = elf.program_headers().iter().filter(|p| p.p_type == PT_LOAD && p.flags & (PF_W | PF_X) == 0);
    readonly.filter_map(|p| elf.segment_data(p).ok()).find_map(|data| {
        let at = find(data, VERSION_NEEDLE)? + VERSION_NEEDLE.len();
        let rest = &data[at..data.len().min(at + 32)];
        let end = rest.iter().position(|&c| c == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]).into_owned())
    })
}

/// The first position of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, tail) = needle.split_first()?;
    let mut from = 0;
    while let Some(i) = hay.get(from..)?.iter().position(|&b| b == first) {
        let at = from + i;
        if hay.get(at + 1..at + needle.len()) == Some(tail) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests;
