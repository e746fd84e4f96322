//! Perl 5: finding an interpreter in a file ([`detect`]), the per-version
//! offsets the unwinder needs ([`PerlLayout`]), and a user-space walk of a
//! thread's context stacks that names its subs ([`PerlSymbolizer`]) and
//! proves the layout against live processes; [`Perl`], the
//! [`crate::Runtime`] whose BPF unwinder (`ebpf/runtimes/perl/unwinder.bpf.h`)
//! records Perl frames in place of `Perl_runops_standard`. See
//! `docs/perl.md`.
//!
//! Perl is recognised by `libperl.so` (or a static `perl`) defining
//! `Perl_runops_standard` and `PL_version`; the release is read from
//! `PL_revision`/`PL_version`/`PL_subversion` in the file. A threaded
//! build (`PL_thr_key`, `PL_curinterp`) keeps its state in a
//! `PerlInterpreter`; a non-threaded one in the globals `PL_curcop` and
//! `PL_curstackinfo`. Releases outside [`MIN_PERL`]..=[`MAX_PERL`] are
//! [`Detection::Unsupported`]: a notice for the agent, frames stay native.

mod layout;
mod map_value;
mod runtime;
mod walk;

pub use layout::{consts, PerlLayout, PerlVersion, MAX_PERL, MIN_PERL};
pub use runtime::{decode_word, Perl, PerlFile, PerlWord, BEGIN_BLOCK, UNNAMED_SUB};
pub use walk::{
    global_state, threaded_state, PerlFrame, PerlSymbolizer, PerlThreadState, WalkError, MAX_CACHED, MAX_CACHED_BYTES,
    MAX_CONTEXTS, MAX_FRAMES, MAX_STACKS,
};

use crate::refusal::Refusal;
use profiler_elf::ElfFile;

/// Where an interpreter's state is, as file addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerlState {
    /// Threaded (`MULTIPLICITY`): each thread's `PerlInterpreter*` is in
    /// the thread-specific key `PL_thr_key` (and, for 5.36+, the
    /// thread-local `PL_current_context`); `PL_curinterp` holds the first
    /// interpreter, the main thread's.
    Threaded {
        /// File address of `PL_thr_key` (a `pthread_key_t`).
        thr_key_vaddr: u64,
        /// File address of `PL_curinterp` (a `PerlInterpreter*`).
        curinterp_vaddr: u64,
    },
    /// Non-threaded: the interpreter variables are globals.
    Globals {
        /// File address of `PL_curcop` (a `COP*`).
        curcop_vaddr: u64,
        /// File address of `PL_curstackinfo` (a `PERL_SI*`).
        curstackinfo_vaddr: u64,
    },
}

/// A Perl build found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerlBuild {
    /// Its release.
    pub version: PerlVersion,
    /// The offsets of that release.
    pub layout: PerlLayout,
    /// Where the interpreter's state is.
    pub state: PerlState,
    /// `Perl_runops_standard` `(vaddr, size)`: the loop running Perl ops,
    /// whose native frames the BPF unwinder will replace.
    pub runops: (u64, u64),
    /// Threaded 5.36+ executables: `PL_current_context` (the thread's
    /// interpreter) minus the thread pointer ([`static_tls_offset`]).
    pub current_context_tls: Option<i64>,
}

/// `PT_INTERP`.
const PT_INTERP: u32 = 3;
/// `PT_TLS`.
const PT_TLS: u32 = 7;

/// Where the thread-local `symbol` of an executable (a file with
/// `PT_INTERP`, whose TLS block is the first: static, below the thread
/// pointer on x86-64) lies from the thread pointer: its offset in the TLS
/// segment minus the segment's size rounded up to its alignment (glibc's
/// layout of the first module). `None` for a shared library (its block is
/// found through the DTV), or a segment not aligned at its own start.
pub fn static_tls_offset(elf: &ElfFile, symbol: &str) -> Option<i64> {
    let headers = elf.program_headers();
    if !headers.iter().any(|p| p.p_type == PT_INTERP) {
        return None;
    }
    let tls = headers.iter().find(|p| p.p_type == PT_TLS)?;
    let align = tls.align.max(1);
    if !align.is_power_of_two() || align > 4096 || tls.vaddr % align != 0 || tls.memsz > 1 << 20 {
        return None;
    }
    let value = elf.symbol_address(symbol)?;
    if value >= tls.memsz {
        return None;
    }
    let block = tls.memsz.div_ceil(align) * align;
    Some(value as i64 - block as i64)
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not Perl.
    NotPerl,
    /// A supported Perl.
    Perl(Box<PerlBuild>),
    /// A Perl this crate does not unwind (its frames stay native).
    Unsupported {
        /// Its release, when it could be read.
        version: Option<PerlVersion>,
        /// Why.
        reason: Refusal,
    },
}

/// Looks at one mapped file.
pub fn detect(elf: &ElfFile) -> Detection {
    let Some(runops) = elf.function_symbol("Perl_runops_standard") else {
        return Detection::NotPerl;
    };
    let unsupported = |version, reason| Detection::Unsupported { version, reason };
    let mut digits = [0u8; 3];
    for (digit, symbol) in digits.iter_mut().zip(["PL_revision", "PL_version", "PL_subversion"]) {
        match elf.symbol_address(symbol).and_then(|v| elf.bytes_at_vaddr(v, 1)) {
            Some(b) => *digit = b[0],
            None => return unsupported(None, Refusal::Symbol(symbol.into())),
        }
    }
    let version = PerlVersion { major: digits[0], minor: digits[1], patch: digits[2] };
    let state = match (elf.symbol_address("PL_thr_key"), elf.symbol_address("PL_curinterp")) {
        (Some(thr_key_vaddr), Some(curinterp_vaddr)) => PerlState::Threaded { thr_key_vaddr, curinterp_vaddr },
        (None, _) => match (elf.symbol_address("PL_curcop"), elf.symbol_address("PL_curstackinfo")) {
            (Some(curcop_vaddr), Some(curstackinfo_vaddr)) => PerlState::Globals { curcop_vaddr, curstackinfo_vaddr },
            _ => return unsupported(Some(version), Refusal::Symbol("PL_curcop and PL_curstackinfo".into())),
        },
        (Some(_), None) => return unsupported(Some(version), Refusal::Symbol("PL_curinterp (a threaded Perl)".into())),
    };
    let threaded = matches!(state, PerlState::Threaded { .. });
    let Some(layout) = PerlLayout::for_version(version, threaded) else {
        let supported = format!("{MIN_PERL} to {}.{}.x, not 5.41.x", MAX_PERL.major, MAX_PERL.minor);
        return unsupported(Some(version), Refusal::Version { supported });
    };
    let current_context_tls =
        if threaded { static_tls_offset(elf, "PL_current_context").filter(|_| version.minor >= 36) } else { None };
    Detection::Perl(Box::new(PerlBuild { version, layout, state, runops, current_context_tls }))
}
