//! Go pprof labels: what the BPF programs need to read the labels of the
//! goroutine a sampled thread of a Go program runs
//! (`ebpf/go_labels.bpf.h`): where the current g is in the thread's TLS,
//! the offsets of `runtime.g.m`, `runtime.m.curg` and `runtime.g.labels`
//! of the program's Go version, and how that version keeps a label set.
//!
//! The version comes from the executable's build info; the offsets from
//! a per-version table ([`offsets`], Go 1.13-1.26: the runtime's struct
//! layouts on amd64, checked against the DWARF of the Go releases
//! installed here); the TLS slot from the first instruction of
//! `runtime.stackcheck`, which loads g (`-8` from the thread pointer for
//! most binaries, another slot for some externally linked ones).

use profiler_bpf::{GoLabelsLayout, GoLabelsValue};
use profiler_elf::{ElfFile, GoPclntab, GoVersion};

/// Newest Go version whose layout is known; later ones get a notice.
pub const NEWEST: GoVersion = GoVersion { major: 1, minor: 26 };
/// Oldest one (the first with `g.labels`: 1.9; the table starts at 1.13).
pub const OLDEST: GoVersion = GoVersion { major: 1, minor: 13 };
/// The TLS slot of g when `runtime.stackcheck` cannot be decoded.
const DEFAULT_TLS_G: i32 = -8;

/// What a file is, for Go labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GoLabelsFile {
    /// Not a Go executable (no build info).
    NotGo,
    /// A Go executable whose labels can be read.
    Supported {
        /// Its Go version ("go1.22.12").
        version: String,
        /// The per-process map value.
        value: GoLabelsValue,
    },
    /// A Go executable whose labels cannot be read: why.
    Unsupported(String),
}

/// Looks at an executable: is it Go, and how are its labels read.
pub fn inspect(elf: &ElfFile) -> GoLabelsFile {
    let Some(text) = elf.go_version() else {
        return GoLabelsFile::NotGo;
    };
    let Some(version) = GoVersion::parse(&text) else {
        return GoLabelsFile::Unsupported(format!("Go version {text:?} not understood"));
    };
    let Some(mut value) = offsets(version) else {
        return GoLabelsFile::Unsupported(format!(
            "{text}: labels are read for Go {}.{}-{}.{}",
            OLDEST.major, OLDEST.minor, NEWEST.major, NEWEST.minor
        ));
    };
    value.tls_g = stackcheck_code(elf).and_then(|code| tls_g_offset(&code)).unwrap_or(DEFAULT_TLS_G);
    GoLabelsFile::Supported { version: text, value }
}

/// The layout of a Go release on amd64 (`tls_g` left at the default).
/// Facts: `runtime.g.m` is at 48 in every release; `runtime.m.curg` at
/// 192 until 1.24 (184 since 1.25, which dropped `gobuf.ret` from
/// `m.morebuf`); `runtime.g.sched` at 56 in every release (after
/// `g.m`), `gobuf.bp` at 48 until 1.24, 40 since; `runtime.g.labels` moves as fields come and go; since
/// 1.24 a label set is a slice, before a `map[string]string`.
pub fn offsets(version: GoVersion) -> Option<GoLabelsValue> {
    if version < OLDEST || version > NEWEST {
        return None;
    }
    let minor = version.minor;
    let g_labels = match minor {
        ..=16 => 344,
        17..=20 => 360,
        21..=22 => 344,
        23..=24 => 352,
        25 => 344,
        _ => 352,
    };
    Some(GoLabelsValue {
        tls_g: DEFAULT_TLS_G,
        g_m: 48,
        m_curg: if minor >= 25 { 184 } else { 192 },
        g_labels,
        layout: if minor >= 24 { GoLabelsLayout::Slice } else { GoLabelsLayout::Map },
        g_sched: 56,
        gobuf_bp: if minor >= 25 { 40 } else { 48 },
    })
}

/// The first bytes of `runtime.stackcheck`, from the symbol table, else
/// from `.gopclntab` (stripped binaries).
fn stackcheck_code(elf: &ElfFile) -> Option<Vec<u8>> {
    let entry = elf
        .function_symbol("runtime.stackcheck.abi0")
        .or_else(|| elf.function_symbol("runtime.stackcheck"))
        .map(|(addr, _)| addr)
        .or_else(|| {
            let table = GoPclntab::find(elf).ok()??;
            let entry = table.funcs().find(|f| table.func_name(f) == Some("runtime.stackcheck")).map(|f| f.entry);
            entry
        })?;
    let mut code = vec![0u8; 16];
    elf.read_at_vaddr(entry, &mut code).then_some(code)
}

/// The TLS offset of g that `runtime.stackcheck` starts by loading:
/// `mov %fs:disp32, %reg` (64 48 8b /r with a disp32-only SIB), or
/// `mov $imm32, %reg` then `mov %fs:(%reg), %reg` (PIE builds).
pub fn tls_g_offset(code: &[u8]) -> Option<i32> {
    let disp = |at: usize| code.get(at..at + 4).and_then(|b| b.try_into().ok()).map(i32::from_le_bytes);
    // mov %fs:disp32, %r64: 64 REX.W 8b modrm(mod 00, rm 100) sib(0x25) disp32
    if code.first() == Some(&0x64)
        && code.get(1).is_some_and(|r| r & 0xf8 == 0x48)
        && code.get(2) == Some(&0x8b)
        && code.get(3).is_some_and(|m| m & 0xc7 == 0x04)
        && code.get(4) == Some(&0x25)
    {
        return disp(5);
    }
    // mov $imm32, %r64: REX.W c7 modrm(mod 11, reg 000) imm32; then
    // mov %fs:(%r64), %r64: 64 REX.W 8b modrm(mod 00)
    if code.first().is_some_and(|r| r & 0xf8 == 0x48)
        && code.get(1) == Some(&0xc7)
        && code.get(2).is_some_and(|m| m & 0xf8 == 0xc0)
        && code.get(7) == Some(&0x64)
        && code.get(9) == Some(&0x8b)
    {
        return disp(3);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> GoVersion {
        GoVersion { major: 1, minor }
    }

    #[test]
    fn decodes_the_tls_load_of_stackcheck() {
        // mov %fs:0xfffffffffffffff8,%rax ; cmp ...
        assert_eq!(tls_g_offset(&[0x64, 0x48, 0x8b, 0x04, 0x25, 0xf8, 0xff, 0xff, 0xff, 0x48, 0x39]), Some(-8));
        // mov %fs:0xffffffffffffffb0,%rcx
        assert_eq!(tls_g_offset(&[0x64, 0x48, 0x8b, 0x0c, 0x25, 0xb0, 0xff, 0xff, 0xff]), Some(-80));
        // mov $0xfffffffffffffff8,%rcx ; mov %fs:(%rcx),%rax
        assert_eq!(tls_g_offset(&[0x48, 0xc7, 0xc1, 0xf8, 0xff, 0xff, 0xff, 0x64, 0x48, 0x8b, 0x01]), Some(-8));
        // mov 0x...(%rip),%rcx: not decoded (the default applies)
        assert_eq!(tls_g_offset(&[0x48, 0x8b, 0x0d, 1, 2, 3, 4, 0x64, 0x48, 0x8b, 0x01]), None);
        assert_eq!(tls_g_offset(&[0x64, 0x48]), None);
    }

    #[test]
    fn offsets_by_version() {
        let o = offsets(v(22)).unwrap();
        assert_eq!((o.g_m, o.m_curg, o.g_labels, o.layout), (48, 192, 344, GoLabelsLayout::Map));
        let o = offsets(v(23)).unwrap();
        assert_eq!((o.m_curg, o.g_labels, o.layout), (192, 352, GoLabelsLayout::Map));
        let o = offsets(v(24)).unwrap();
        assert_eq!((o.m_curg, o.g_labels, o.layout), (192, 352, GoLabelsLayout::Slice));
        let o = offsets(v(25)).unwrap();
        assert_eq!((o.m_curg, o.g_labels), (184, 344));
        let o = offsets(v(26)).unwrap();
        assert_eq!((o.m_curg, o.g_labels, o.layout), (184, 352, GoLabelsLayout::Slice));
        assert_eq!(offsets(v(18)).unwrap().g_labels, 360);
        let o13 = offsets(v(13)).unwrap();
        assert_eq!((o13.g_sched, o13.gobuf_bp), (56, 48));
        let o26 = offsets(v(26)).unwrap();
        assert_eq!((o26.g_sched, o26.gobuf_bp), (56, 40));
        assert_eq!(offsets(v(24)).unwrap().gobuf_bp, 48);
        assert_eq!(offsets(v(25)).unwrap().gobuf_bp, 40);
        assert_eq!(offsets(v(12)), None);
        assert_eq!(offsets(v(27)), None);
    }
}

/// `inspect` on binaries the installed Go builds: with symbols, and
/// stripped (`runtime.stackcheck` then found through `.gopclntab`).
#[cfg(test)]
mod real_binary {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;

    const PROGRAM: &str = "package main\n\nfunc main() { println(\"hi\") }\n";

    fn build(name: &str, ldflags: &str) -> Option<PathBuf> {
        profiler_elf::testing::build_go_program(&format!("go-labels-{name}"), PROGRAM, ldflags)
    }

    /// `go env GOVERSION` ("go1.26.8").
    fn go_version() -> String {
        let out = Command::new("go").args(["env", "GOVERSION"]).output().expect("go env");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn finds_the_version_offsets_and_tls_slot() {
        for (name, ldflags) in [("symbols", ""), ("stripped", "-s -w")] {
            let Some(path) = build(name, ldflags) else { return };
            let elf = ElfFile::open(&path).unwrap();
            let want = go_version();
            let mut value = offsets(GoVersion::parse(&want).unwrap()).expect("the installed Go is supported");
            value.tls_g = -8;
            assert_eq!(inspect(&elf), GoLabelsFile::Supported { version: want, value }, "{name}");
            assert_eq!(
                stackcheck_code(&elf).and_then(|c| tls_g_offset(&c)),
                Some(-8),
                "{name}: decoded, not defaulted"
            );
        }
        // Not Go: this test (Rust).
        let rust = ElfFile::open("/proc/self/exe").unwrap();
        assert_eq!(inspect(&rust), GoLabelsFile::NotGo);
    }
}
