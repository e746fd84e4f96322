//! CRuby (the reference Ruby interpreter): finding it in a file
//! ([`detect`]), the per-version offsets the unwinder needs
//! ([`RubyLayout`]), and a user-space walk that names a thread's frames
//! ([`RubySymbolizer`]) and proves the layout against live processes.
//! [`CRuby`] puts it on the interpreter interface, for the BPF unwinder
//! (`ebpf/ruby_unwinder.bpf.h`); see `docs/ruby.md`.
//!
//! Ruby is recognised by `libruby.so` (or a static `ruby`) exporting
//! `ruby_current_vm_ptr` or `ruby_current_execution_context_ptr` and
//! `ruby_version`; the version is read from the file and picks the
//! layout. Versions outside [`MIN_RUBY`]..=[`MAX_RUBY`] are
//! [`Detection::Unsupported`]: a notice for the agent, frames stay native.

mod classes;
mod layout;
mod lines;
mod objects;
mod runtime;
mod tls;
mod walk;

pub use layout::{consts, ClassPathAt, EmbedLen, RubyLayout, RubyVersion, MAX_RUBY, MIN_RUBY};
pub use runtime::CRuby;
pub use tls::{find_tls, RubyTls};
pub use walk::{
    current_execution_context, find_global_symbols, main_execution_context, RubyFrame, RubySymbolizer, MAX_CACHED,
    MAX_FRAMES,
};

use profiler_elf::ElfFile;

/// `PF_W`: a writable segment.
const PF_W: u32 = 2;
/// `PT_LOAD`.
const PT_LOAD: u32 = 1;

/// A Ruby build found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RubyBuild {
    /// Its version, read from `ruby_version`.
    pub version: RubyVersion,
    /// The offsets of that version.
    pub layout: RubyLayout,
    /// File address of `ruby_current_vm_ptr` (3.0+ keeps the current
    /// execution context in thread-local storage).
    pub vm_ptr_vaddr: Option<u64>,
    /// File address of `ruby_current_execution_context_ptr` (before 3.0).
    pub current_ec_vaddr: Option<u64>,
    /// File address of `ruby_global_symbols` when the file names it.
    pub global_symbols_vaddr: Option<u64>,
    /// The writable `PT_LOAD` segment `(vaddr, memsz)`, where
    /// `ruby_global_symbols` lives when it is not named.
    pub data_segment: Option<(u64, u64)>,
    /// `[start, end)` of `rb_vm_exec`, whose native frames the BPF
    /// unwinder replaces by the control frames each run of the VM owns
    /// (`vm_exec_core` is static: Debian's file does not name it).
    pub exec_range: Option<(u64, u64)>,
    /// How `ruby_current_ec` is reached from a thread (3.0+).
    pub tls: Option<RubyTls>,
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not Ruby.
    NotRuby,
    /// A supported Ruby.
    Ruby(Box<RubyBuild>),
    /// A Ruby this crate does not unwind (its frames stay native).
    Unsupported(String),
}

/// Looks at one mapped file (`path` is its name, for messages).
pub fn detect(elf: &ElfFile, path: &str) -> Detection {
    let vm_ptr_vaddr = elf.symbol_address("ruby_current_vm_ptr");
    let current_ec_vaddr = elf.symbol_address("ruby_current_execution_context_ptr");
    if vm_ptr_vaddr.is_none() && current_ec_vaddr.is_none() {
        return Detection::NotRuby;
    }
    let Some(version_vaddr) = elf.symbol_address("ruby_version") else {
        return Detection::Unsupported(format!("{path}: Ruby without ruby_version"));
    };
    let text = elf.bytes_at_vaddr(version_vaddr, 32).map(|b| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    });
    let Some(version) = text.as_deref().and_then(RubyVersion::parse) else {
        return Detection::Unsupported(format!("{path}: unreadable ruby_version {text:?}"));
    };
    // `ruby_api_version` is `{major, minor, 0}` as three ints: a file
    // whose two version symbols disagree is not trusted.
    if let Some(api) = elf.symbol_address("ruby_api_version").and_then(|v| elf.bytes_at_vaddr(v, 8)) {
        let major = u32::from_le_bytes([api[0], api[1], api[2], api[3]]);
        let minor = u32::from_le_bytes([api[4], api[5], api[6], api[7]]);
        if (major, minor) != (u32::from(version.major), u32::from(version.minor)) {
            return Detection::Unsupported(format!(
                "{path}: ruby_version {version} but ruby_api_version {major}.{minor}"
            ));
        }
    }
    let layout = match RubyLayout::for_version(version) {
        Ok(l) => l,
        Err(why) => return Detection::Unsupported(format!("{path}: {why}")),
    };
    if layout.vm_main_thread.is_some() && vm_ptr_vaddr.is_none() {
        return Detection::Unsupported(format!("{path}: Ruby {version} without ruby_current_vm_ptr"));
    }
    let data_segment =
        elf.program_headers().iter().find(|p| p.p_type == PT_LOAD && p.flags & PF_W != 0).map(|p| (p.vaddr, p.memsz));
    Detection::Ruby(Box::new(RubyBuild {
        version,
        layout,
        vm_ptr_vaddr,
        current_ec_vaddr,
        global_symbols_vaddr: elf.symbol_address("ruby_global_symbols"),
        data_segment,
        exec_range: elf.function_symbol("rb_vm_exec").filter(|&(_, size)| size > 0).map(|(a, size)| (a, a + size)),
        tls: find_tls(elf, "ruby_current_ec"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_ruby_is_not_ruby() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert_eq!(detect(&elf, exe.to_str().unwrap()), Detection::NotRuby);
    }
}
