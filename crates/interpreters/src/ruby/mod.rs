//! CRuby (the reference Ruby interpreter): finding it in a file
//! ([`detect`]), the per-version offsets the unwinder needs
//! ([`RubyLayout`]), and a user-space walk that names a thread's frames
//! ([`RubySymbolizer`]) and proves the layout against live processes.
//! [`CRuby`] puts it on the interpreter interface, for the BPF unwinder
//! (`ebpf/runtimes/ruby/unwinder.bpf.h`); see `docs/ruby.md`.
//!
//! Ruby is recognised by `libruby.so` (or a static `ruby`) exporting
//! `ruby_api_version`, `ruby_current_vm_ptr` or
//! `ruby_current_execution_context_ptr`; the version, read from
//! `ruby_version` in the file, picks the layout. A file that looks like
//! Ruby but cannot be read (no version, a version outside
//! [`MIN_RUBY`]..=[`MAX_RUBY`]) is [`Detection::Unsupported`] with the
//! reason: a notice for the agent, its frames stay native. What a build
//! does not export (`ruby_current_ec`, `rb_vm_exec`: Debian's 3.3) is
//! read from the code of `rb_iseq_eval` (`hidden.rs`).

mod classes;
mod hidden;
mod layout;
mod lines;
mod map_value;
mod objects;
mod runtime;
mod tls;
mod walk;

pub use hidden::{from_rb_iseq_eval, FoundInCode};
pub use layout::{consts, ClassPathAt, EmbedLen, RubyLayout, RubyVersion, MAX_RUBY, MIN_RUBY};
pub use runtime::CRuby;
pub use tls::{find_tls, RubyTls};
pub use walk::{
    current_execution_context, find_global_symbols, main_execution_context, RubyFrame, RubySymbolizer, MAX_CACHED,
    MAX_CACHED_BYTES, MAX_FRAMES,
};

use crate::refusal::Refusal;
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
    /// execution context in thread-local storage), for the user-space
    /// walk of the main thread; 3.3+ does not export it.
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
    /// (`vm_exec_core` is static: Debian's file does not name it); its
    /// symbol, else its FDE reached from `rb_iseq_eval`'s tail call.
    pub exec_range: Option<(u64, u64)>,
    /// How `ruby_current_ec` is reached from a thread (3.0+): its
    /// symbol's relocations, else `rb_iseq_eval`'s code.
    pub tls: Option<RubyTls>,
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not Ruby.
    NotRuby,
    /// A supported Ruby.
    Ruby(Box<RubyBuild>),
    /// A file that looks like Ruby but that this crate does not unwind
    /// (its frames stay native).
    Unsupported {
        /// The release, when it could be read.
        version: Option<RubyVersion>,
        /// Why.
        reason: Refusal,
    },
}

/// Looks at one mapped file.
pub fn detect(elf: &ElfFile) -> Detection {
    let vm_ptr_vaddr = elf.symbol_address("ruby_current_vm_ptr");
    let current_ec_vaddr = elf.symbol_address("ruby_current_execution_context_ptr");
    // Every libruby defines `ruby_api_version`; Debian's 3.3 exports
    // neither of the other two.
    let api_vaddr = elf.symbol_address("ruby_api_version");
    if vm_ptr_vaddr.is_none() && current_ec_vaddr.is_none() && api_vaddr.is_none() {
        return Detection::NotRuby;
    }
    let Some(version_vaddr) = elf.symbol_address("ruby_version") else {
        return Detection::Unsupported { version: None, reason: Refusal::Symbol("ruby_version".into()) };
    };
    let text = elf.bytes_at_vaddr(version_vaddr, 32).map(|b| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    });
    let Some(version) = text.as_deref().and_then(RubyVersion::parse) else {
        let reason = Refusal::Layout(format!("unreadable ruby_version {text:?}"));
        return Detection::Unsupported { version: None, reason };
    };
    // `ruby_api_version` is `{major, minor, 0}` as three ints: a file
    // whose two version symbols disagree is not trusted.
    if let Some(api) = api_vaddr.and_then(|v| elf.bytes_at_vaddr(v, 8)) {
        let major = u32::from_le_bytes([api[0], api[1], api[2], api[3]]);
        let minor = u32::from_le_bytes([api[4], api[5], api[6], api[7]]);
        if (major, minor) != (u32::from(version.major), u32::from(version.minor)) {
            let reason = Refusal::Layout(format!("ruby_version {version} but ruby_api_version {major}.{minor}"));
            return Detection::Unsupported { version: Some(version), reason };
        }
    }
    let layout = match RubyLayout::for_version(version) {
        Ok(l) => l,
        Err(reason) => return Detection::Unsupported { version: Some(version), reason },
    };
    if layout.vm_main_thread.is_none() && current_ec_vaddr.is_none() {
        let reason = Refusal::Symbol("ruby_current_execution_context_ptr".into());
        return Detection::Unsupported { version: Some(version), reason };
    }
    let data_segment =
        elf.program_headers().iter().find(|p| p.p_type == PT_LOAD && p.flags & PF_W != 0).map(|p| (p.vaddr, p.memsz));
    let mut exec_range = elf.function_symbol("rb_vm_exec").filter(|&(_, size)| size > 0).map(|(a, size)| (a, a + size));
    let mut tls = find_tls(elf, "ruby_current_ec");
    if layout.vm_main_thread.is_some() && (exec_range.is_none() || tls.is_none()) {
        let found = from_rb_iseq_eval(elf);
        exec_range = exec_range.or(found.exec_range);
        tls = tls.or(found.tls);
    }
    Detection::Ruby(Box::new(RubyBuild {
        version,
        layout,
        vm_ptr_vaddr,
        current_ec_vaddr,
        global_symbols_vaddr: elf.symbol_address("ruby_global_symbols"),
        data_segment,
        exec_range,
        tls,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_ruby_is_not_ruby() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert_eq!(detect(&elf), Detection::NotRuby);
    }

    /// Debian 13's libruby 3.3.8 (in the trixie root file system, when
    /// present) exports neither `ruby_current_ec`, `ruby_current_vm_ptr`
    /// nor `rb_vm_exec`: both the unwinder needs come from
    /// `rb_iseq_eval`'s code. The facts as `objdump -d` and `readelf
    /// --debug-dump=frames` show them for 3.3.8-2.
    #[test]
    fn debian_13_libruby_3_3_is_read_from_its_code() {
        let path = "/var/cache/ebpf-profiler-runtimes/trixie/usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3.8";
        let Ok(elf) = ElfFile::open(path) else {
            println!("SKIPPED: no {path}");
            return;
        };
        let Detection::Ruby(build) = detect(&elf) else { panic!("{path}: {:?}", detect(&elf)) };
        assert_eq!(build.version, RubyVersion::new(3, 3, 8));
        assert_eq!((build.vm_ptr_vaddr, build.current_ec_vaddr), (None, None));
        assert_eq!(build.tls, Some(RubyTls::Dynamic { module_slot: 0x45a660, offset: 0x10 }));
        assert_eq!(build.exec_range, Some((0x27dfa0, 0x27e1f5)));
    }
}
