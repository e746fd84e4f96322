//! Erlang/OTP (the BEAM): finding the emulator in a file ([`detect`]),
//! and naming a pc in the JIT's code as `module:function/arity` by
//! reading the emulator's code index from the process ([`BeamNamer`]).
//! See `docs/beam.md`.
//!
//! The emulator is `beam.smp` (or another `beam.*.smp` flavour). Its
//! release is the string `etp_otp_release` in the file (the gdb helper
//! symbols of `erl_etp.c`), its JIT flag `etp_beamasm`. Debian's builds
//! are stripped but export their globals (`-rdynamic`) up to OTP 27;
//! the table of loaded code ranges (`r` in `beam_ranges.c`) is static,
//! and is found in the code of the exported `erts_lookup_function_info`
//! ([`find_ranges`]). OTP 29's beam.smp exports nothing: it is told as
//! unsupported.
//!
//! What a frame needs, per pc: the active code index (`the_active_code_index`),
//! that index's ranges (a sorted array of `{start, end}`, one per loaded
//! module, `start` its `BeamCodeHeader`), the header's `functions[]`
//! (pointers to each function's `ErtsCodeInfo`, sorted, one past the
//! last), the `ErtsCodeMFA` in it, and the atoms' names (`erts_atom_table`).
//! Every read is bounded and checked; nothing read is trusted as a size
//! before it is compared with a limit.

mod map_value;
mod runtime;

pub use runtime::{Beam, BeamFile, BeamNamer, BeamProcess};

use crate::refusal::Refusal;
use profiler_elf::ElfFile;

/// Code indices the emulator keeps (`ERTS_NUM_CODE_IX`).
pub const CODE_INDICES: u32 = 3;
/// Size of one code index's `struct ranges` (`modules`, `n`,
/// `allocated`, `mid`).
pub const RANGES_SIZE: u64 = 32;
/// Most modules loaded in one code index we search.
pub const MAX_MODULES: u64 = 1 << 20;
/// Most functions of one module we search.
pub const MAX_FUNCTIONS: u64 = 1 << 20;
/// Most `line` instructions of one function we search.
pub const MAX_LINE_ITEMS: u64 = 1 << 20;
/// Longest source file name read, in characters (a list of them).
pub const MAX_FILE_NAME: usize = 1024;
/// `BeamCodeLineTab`: `fname_ptr` at 0, `loc_size` at 8, `loc_tab` at
/// 16, `func_tab[]` from 24 (OTP 25 and 27).
pub const LINE_TAB_FUNC_TAB: u64 = 24;

/// Longest atom name, in bytes (`MAX_ATOM_SZ_LIMIT`: 255 characters of
/// up to 4 bytes).
pub const MAX_ATOM_BYTES: usize = 1020;

/// The offsets of one OTP release (x86-64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeamLayout {
    /// `BeamCodeHeader.functions` (after `num_functions` at 0).
    pub functions: u64,
    /// `BeamCodeHeader.line_table` (a `BeamCodeLineTab *`, null without
    /// line information).
    pub line_table: u64,
    /// `ErtsCodeInfo.mfa`.
    pub code_info_mfa: u64,
    /// `IndexTable.seg_table` (of `erts_atom_table`).
    pub seg_table: u64,
    /// `Atom.len` (an `Sint16`).
    pub atom_len: u64,
    /// `Atom.name` (a `byte *`).
    pub atom_name: u64,
    /// From rbx (the scheduler's `ErtsSchedulerRegisters`, as the JIT
    /// keeps it) to the scheduler thread's return address into C
    /// (`process_main`'s entry stack pointer), measured on Debian's
    /// builds (see docs/beam.md).
    pub scheduler_return: u32,
    /// From the stack pointer the JIT calls C with (the start of the
    /// scheduler's `ErtsSchedulerRegisters`) to rbx: the JIT's `lea
    /// -0x80(%rbx),%rsp` (OTP 25) or `lea -0x40(%rbx),%rsp` (OTP 27)
    /// before such a call, read in live nodes' code.
    pub runtime_stack: u32,
    /// `ErtsSchedulerData.current_process` (the scheduler data's address
    /// lies right below the scheduler's return address into C, and its
    /// first field is the registers' address), found on live nodes.
    pub current_process: u16,
    /// `Process.stop`: the JIT's `mov 0x58(%r13),%rsp` after C calls
    /// that store the Erlang stack pointer.
    pub process_stop: u16,
}

impl BeamLayout {
    /// The layout of OTP `release`, if we know it. OTP 25 and 27 were
    /// read off Debian's builds (`erts_lookup_function_info` reads
    /// `functions` at 0x60 and 0x88) and checked on live nodes; OTP 28
    /// keeps atom names as binaries, and 26 was not checked.
    pub fn for_release(release: u32) -> Option<BeamLayout> {
        let (functions, scheduler_return, runtime_stack) = match release {
            25 => (0x60, 0x40c8, 0x80),
            27 => (0x88, 0x40b8, 0x40),
            _ => return None,
        };
        Some(BeamLayout {
            functions,
            line_table: 0x48,
            code_info_mfa: 16,
            seg_table: 120,
            atom_len: 24,
            atom_name: 32,
            scheduler_return,
            runtime_stack,
            current_process: 0xa8,
            process_stop: 0x58,
        })
    }
}

/// An emulator build found in a file (addresses are ELF virtual
/// addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeamBuild {
    /// The OTP release (`25`).
    pub otp: u32,
    /// The ERTS version (`13.1.5`).
    pub erts: String,
    /// `the_active_code_index` (a `u32`).
    pub active_code_index: u64,
    /// `r`: the ranges of each code index.
    pub ranges: u64,
    /// `erts_atom_table`.
    pub atom_table: u64,
    /// `beam_normal_exit` (a code pointer, set at start).
    pub normal_exit: u64,
    /// `erts_frame_layout` (a `u32`).
    pub frame_layout: u64,
    /// The offsets of its release.
    pub layout: BeamLayout,
}

impl BeamBuild {
    /// "OTP 25 (ERTS 13.1.5)".
    pub fn version(&self) -> String {
        format!("OTP {} (ERTS {})", self.otp, self.erts)
    }
}

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Not the emulator.
    NotBeam,
    /// A build whose JIT code we name.
    Beam(Box<BeamBuild>),
    /// The emulator, but a build we do not read.
    Unsupported {
        /// "OTP 29", "ERTS 17.1.1", when known.
        version: Option<String>,
        /// Why.
        reason: Refusal,
    },
}

/// Whether `path` names an emulator binary (`beam.smp`, `beam.emu.smp`,
/// `beam.debug.smp`...).
pub fn is_emulator_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    name.starts_with("beam.") && name.ends_with(".smp")
}

/// The ERTS version in an installed emulator's path
/// (`.../erts-13.1.5/bin/beam.smp`).
fn erts_from_path(path: &str) -> Option<&str> {
    let dir = path.split('/').find(|c| c.starts_with("erts-"))?;
    Some(&dir["erts-".len()..]).filter(|v| !v.is_empty() && v.len() < 32)
}

/// The NUL-terminated string at symbol `name`, at most `max` bytes.
fn symbol_string(elf: &ElfFile, name: &str, max: usize) -> Option<String> {
    let vaddr = elf.symbol_address(name)?;
    let data = elf.data_from_vaddr(vaddr)?;
    let data = &data[..data.len().min(max)];
    let end = data.iter().position(|&b| b == 0)?;
    let s = std::str::from_utf8(&data[..end]).ok()?;
    s.bytes().all(|b| b.is_ascii_graphic()).then(|| s.to_string())
}

/// Looks at one mapped file (`path` its name as the process sees it).
pub fn detect(elf: &ElfFile, path: &str) -> Detection {
    if !is_emulator_path(path) {
        return Detection::NotBeam;
    }
    let Some(release) = symbol_string(elf, "etp_otp_release", 8) else {
        return Detection::Unsupported {
            version: erts_from_path(path).map(|v| format!("ERTS {v}")),
            reason: Refusal::Symbol("etp_otp_release (a stripped build that hides its symbols)".into()),
        };
    };
    let erts = symbol_string(elf, "etp_erts_version", 32).unwrap_or_else(|| "unknown".into());
    let version = Some(format!("OTP {release} (ERTS {erts})"));
    let unsupported = |reason: Refusal| Detection::Unsupported { version: version.clone(), reason };
    let Ok(otp) = release.parse::<u32>() else {
        return unsupported(Refusal::UnknownVersion { what: "etp_otp_release is not a number" });
    };
    let jit = elf.symbol_address("etp_beamasm").and_then(|v| elf.bytes_at_vaddr(v, 4));
    if jit.is_some_and(|b| b == [0, 0, 0, 0]) {
        return unsupported(Refusal::Build("the interpreter flavour (emu): only the JIT's code is read"));
    }
    let Some(layout) = BeamLayout::for_release(otp) else {
        return unsupported(Refusal::Version { supported: "OTP 25 and 27".into() });
    };
    let (Some(active_code_index), Some(atom_table), Some(normal_exit), Some(frame_layout)) = (
        elf.symbol_address("the_active_code_index"),
        elf.symbol_address("erts_atom_table"),
        elf.symbol_address("beam_normal_exit"),
        elf.symbol_address("erts_frame_layout"),
    ) else {
        let symbols = "the_active_code_index, erts_atom_table, beam_normal_exit or erts_frame_layout";
        return unsupported(Refusal::Symbol(symbols.into()));
    };
    let Some(ranges) = find_ranges(elf, active_code_index) else {
        return unsupported(Refusal::Layout("the code ranges table was not found in erts_lookup_function_info".into()));
    };
    Detection::Beam(Box::new(BeamBuild {
        otp,
        erts,
        active_code_index,
        ranges,
        atom_table,
        normal_exit,
        frame_layout,
        layout,
    }))
}

/// The address of `r` (the ranges of each code index, static in
/// `beam_ranges.c`): `erts_lookup_function_info` calls (or inlines) the
/// search of the active ranges, which loads `the_active_code_index`
/// (rip-relative, checked against the symbol) and then takes `r`'s
/// address with a rip-relative `lea`. The result must lie in a writable
/// segment with room for every code index.
pub fn find_ranges(elf: &ElfFile, active_code_index: u64) -> Option<u64> {
    let (entry, size) = elf.function_symbol("erts_lookup_function_info")?;
    let head = elf.bytes_at_vaddr(entry, size.clamp(16, 96) as usize)?;
    let mut candidates = vec![entry];
    // The first direct call in the function's head.
    if let Some(i) = (0..head.len().saturating_sub(4)).find(|&i| head[i] == 0xe8) {
        let rel = i32::from_le_bytes(head[i + 1..i + 5].try_into().ok()?);
        candidates.push((entry + i as u64 + 5).wrapping_add(rel as i64 as u64));
    }
    let ranges = candidates.into_iter().find_map(|f| ranges_in(elf, f, active_code_index))?;
    let writable = elf.program_headers().iter().any(|p| {
        p.p_type == 1
            && p.flags & 2 != 0
            && ranges >= p.vaddr
            && ranges + RANGES_SIZE * CODE_INDICES as u64 <= p.vaddr + p.memsz
    });
    writable.then_some(ranges)
}

/// In the first bytes of the function at `f`: a rip-relative load of
/// `active_code_index`, then a rip-relative `lea` (REX.W 8d /r, mod 00
/// r/m 101): its target.
fn ranges_in(elf: &ElfFile, f: u64, active_code_index: u64) -> Option<u64> {
    const WINDOW: usize = 48;
    let code = elf.bytes_at_vaddr(f, WINDOW)?;
    let target = |i: usize, len: usize| -> Option<u64> {
        let disp = i32::from_le_bytes(code.get(i + len - 4..i + len)?.try_into().ok()?);
        Some((f + (i + len) as u64).wrapping_add(disp as i64 as u64))
    };
    // mov disp32(%rip), r32 (optionally REX-prefixed): [REX] 8b modrm disp32.
    let load = (0..WINDOW - 6).find(|&i| {
        let (op, modrm) = if code[i] & 0xf0 == 0x40 { (1, 2) } else { (0, 1) };
        code[i + op] == 0x8b && code[i + modrm] & 0xc7 == 0x05 && target(i, modrm + 5) == Some(active_code_index)
    })?;
    // lea disp32(%rip), r64: REX.W 8d modrm disp32, after the load.
    (load..WINDOW - 7).find_map(|i| {
        let rex_w = code[i] & 0xf8 == 0x48;
        (rex_w && code[i + 1] == 0x8d && code[i + 2] & 0xc7 == 0x05).then(|| target(i, 7)).flatten()
    })
}

/// An atom's index from its term (`make_atom`: index << 6 | 0x0b).
pub fn atom_index(term: u64) -> Option<u64> {
    (term & 0x3f == 0x0b).then_some(term >> 6)
}

/// The name of a function as its language writes it: Elixir modules
/// (`Elixir.Foo.Bar`) as `Foo.Bar.fun/2`, Erlang's as `mod:fun/2` with
/// its atoms as the emulator prints them ([`erlang_atom`]).
pub fn function_name(module: &str, function: &str, arity: u64) -> String {
    match module.strip_prefix("Elixir.") {
        Some(elixir) => format!("{elixir}.{function}/{arity}"),
        None => format!("{}:{}/{arity}", erlang_atom(module), erlang_atom(function)),
    }
}

/// An atom as the emulator prints it (its perf map, `~p`): bare when it
/// starts with a lowercase letter and holds only letters, digits, `_`
/// and `@` (Latin-1's too); else between single quotes, with `'` and
/// `\` escaped. Reserved words (`receive`) stay bare, as the emulator
/// prints them.
pub fn erlang_atom(atom: &str) -> std::borrow::Cow<'_, str> {
    let lower = |c: char| c.is_ascii_lowercase() || (('\u{df}'..='\u{ff}').contains(&c) && c != '\u{f7}');
    let upper = |c: char| c.is_ascii_uppercase() || (('\u{c0}'..='\u{de}').contains(&c) && c != '\u{d7}');
    let mut chars = atom.chars();
    let bare = chars.next().is_some_and(lower)
        && chars.all(|c| lower(c) || upper(c) || c.is_ascii_digit() || c == '_' || c == '@');
    if bare {
        return atom.into();
    }
    let mut quoted = String::with_capacity(atom.len() + 2);
    quoted.push('\'');
    for c in atom.chars() {
        if c == '\'' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_emulators() {
        assert!(is_emulator_path("/usr/lib/erlang/erts-13.1.5/bin/beam.smp"));
        assert!(is_emulator_path("/opt/otp/erts-15.2/bin/beam.emu.smp"));
        assert!(is_emulator_path("beam.smp"));
        assert!(!is_emulator_path("/usr/bin/beam"));
        assert!(!is_emulator_path("/usr/lib/erlang/erts-13.1.5/bin/erlexec"));
        assert_eq!(erts_from_path("/usr/lib/erlang/erts-17.1.1/bin/beam.smp"), Some("17.1.1"));
        assert_eq!(erts_from_path("/opt/beam.smp"), None);
    }

    #[test]
    fn names_as_each_language_writes_them() {
        assert_eq!(function_name("chain", "leaf_spin", 2), "chain:leaf_spin/2");
        assert_eq!(function_name("Elixir.Foo.Bar", "baz", 1), "Foo.Bar.baz/1");
        // As OTP 25's perf map writes them.
        assert_eq!(function_name("compile", "-do_compile/2-anonymous-0-", 1), "compile:'-do_compile/2-anonymous-0-'/1");
        assert_eq!(function_name("prim_eval", "receive", 2), "prim_eval:receive/2");
        assert_eq!(function_name("a@b_C9", "f", 0), "a@b_C9:f/0");
        assert_eq!(function_name("My-Mod", "Up", 0), "'My-Mod':'Up'/0");
        assert_eq!(erlang_atom(""), "''");
        assert_eq!(erlang_atom("it's\\"), "'it\\'s\\\\'");
        assert_eq!(erlang_atom("\u{e9}t\u{e9}"), "\u{e9}t\u{e9}", "Latin-1 lowercase letters");
        assert_eq!(erlang_atom("\u{c9}t\u{e9}"), "'\u{c9}t\u{e9}'", "an uppercase first letter");
        assert_eq!(erlang_atom("a\u{f7}b"), "'a\u{f7}b'", "division sign");
        assert_eq!(atom_index(5 << 6 | 0x0b), Some(5));
        assert_eq!(atom_index(5 << 6 | 0x0f), None, "a small integer, not an atom");
    }

    #[test]
    fn layouts_of_known_releases_only() {
        assert_eq!(BeamLayout::for_release(25).map(|l| l.functions), Some(0x60));
        assert_eq!(BeamLayout::for_release(27).map(|l| l.functions), Some(0x88));
        assert_eq!(BeamLayout::for_release(26), None);
        assert_eq!(BeamLayout::for_release(28), None);
    }

    /// The emulators installed here (the host's OTP 25, the runtime
    /// roots' 27 and 29): each is detected as what it is. Skipped for a
    /// binary that is not installed.
    #[test]
    fn installed_emulators() {
        let roots = ["", "/var/cache/ebpf-profiler-runtimes/trixie", "/var/cache/ebpf-profiler-runtimes/sid"];
        let mut seen = 0;
        for root in roots {
            let Ok(dirs) = std::fs::read_dir(format!("{root}/usr/lib/erlang")) else { continue };
            for dir in dirs.flatten() {
                let name = dir.file_name().to_string_lossy().into_owned();
                let Some(erts) = name.strip_prefix("erts-") else { continue };
                let path = dir.path().join("bin/beam.smp");
                let Ok(elf) = ElfFile::open(&path) else { continue };
                let shown = format!("/usr/lib/erlang/{name}/bin/beam.smp");
                seen += 1;
                match detect(&elf, &shown) {
                    Detection::Beam(b) => {
                        assert!(matches!(b.otp, 25 | 27), "{path:?}: {b:?}");
                        assert_eq!(b.erts, erts);
                        // r lies just before the staging code index on
                        // Debian's builds (the same object file's bss).
                        assert!(b.ranges < b.active_code_index && b.active_code_index - b.ranges < 4096, "{b:?}");
                    }
                    Detection::Unsupported { version, reason } => {
                        assert_eq!(version, Some(format!("ERTS {erts}")), "{path:?}: {reason}");
                        assert!(erts.starts_with("17."), "{path:?} only OTP 29 is unsupported here: {reason}");
                    }
                    Detection::NotBeam => panic!("{path:?} is an emulator"),
                }
            }
        }
        if seen == 0 {
            eprintln!("SKIPPED: no beam.smp installed");
        }
    }
}
