//! Helpers: temp directories, running tools with full context on failure,
//! building the test programs, and reading the addresses they print.

use std::path::{Path, PathBuf};
use std::process::Command;

use profiler_elf::{ElfFile, PT_LOAD};
use profiler_trace::SourceLine;

/// A fresh directory for one test, under cargo's target tmp dir.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profiler-symbolize").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Whether we run under CI (`CI=true`), where a missing tool fails the
/// test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Whether `tool` runs. When it does not, the test fails under CI and
/// is skipped, with a message, elsewhere.
pub fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg(if tool == "go" { "version" } else { "--version" })
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(!in_ci(), "`{tool}` is required under CI=true and does not run");
        eprintln!("SKIPPED: `{tool}` is not installed; under CI=true this fails");
    }
    ok
}

/// Runs `cmd`, panicking with the command, status and output on failure.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `source` to `dir/file` and compiles it with `compiler` into
/// `dir/out`.
pub fn compile(dir: &Path, compiler: &str, file: &str, source: &str, out: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(file);
    std::fs::write(&src, source).expect("write source");
    let bin = dir.join(out);
    run(Command::new(compiler).current_dir(dir).args(args).arg("-o").arg(&bin).arg(&src));
    bin
}

/// The 1-based line of the only line of `source` containing `marker`.
pub fn line_of(source: &str, marker: &str) -> u32 {
    let lines: Vec<usize> =
        source.lines().enumerate().filter(|(_, l)| l.contains(marker)).map(|(i, _)| i + 1).collect();
    assert_eq!(lines.len(), 1, "marker {marker:?} must appear once");
    lines[0] as u32
}

/// Values printed as `key hexvalue` lines.
pub fn hex_values(output: &str, key: &str) -> Vec<u64> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap_or_else(|e| panic!("{v:?}: {e}")))
        .collect()
}

/// The ELF virtual address of run-time address `addr` of a program that
/// printed `base`, the address of `__executable_start` (its first byte).
pub fn elf_vaddr(bin: &Path, base: u64, addr: u64) -> u64 {
    let elf = ElfFile::open(bin).expect("open");
    let first = elf.program_headers().iter().filter(|p| p.p_type == PT_LOAD).map(|p| p.vaddr).min().expect("a PT_LOAD");
    addr - base + first
}

/// `(function, file name, line)` of each line, for compact assertions.
pub fn short(lines: &[SourceLine]) -> Vec<(String, String, u32)> {
    lines
        .iter()
        .map(|l| {
            let file = l.file.as_deref().map(|f| f.rsplit('/').next().unwrap_or(f).to_owned()).unwrap_or_default();
            (l.function.to_string(), file, l.line)
        })
        .collect()
}

/// Copies `from` to `to`, creating directories.
pub fn copy(from: &Path, to: &Path) {
    if let Some(d) = to.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {from:?} -> {to:?}: {e}"));
}
