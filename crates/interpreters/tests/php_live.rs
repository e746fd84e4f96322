//! Proves the PHP layout against a live interpreter: runs
//! `tests/workloads/php/chain.php` with the system `php`, waits until its
//! main thread blocks reading stdin, stops it (SIGSTOP), finds the PHP
//! binary in its maps ([`detect`]), reads `executor_globals` and walks
//! `current_execute_data` -> `prev_execute_data`, asserting the exact
//! chain of names and lines down to `{main}`, C functions (`fread`,
//! `usort`) included.
//!
//! `php` is required under CI=true (`scripts/install-deps.sh`).

mod common;

use common::{find_runtime, skip, stop_when_asleep, workload, Workload};
use profiler_elf::ElfFile;
use profiler_interpreters::php::{current_execute_data, detect, Detection, PhpBuild, PhpFrame, PhpSymbolizer};
use profiler_interpreters::PidMemory;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn source() -> PathBuf {
    workload("php/chain.php")
}

/// The line of the workload marked `// line:<name>`.
fn marked_line(name: &str) -> u32 {
    common::marked_line(&source(), "//", name)
}

/// PHP, when `elf` holds it.
fn php_in(elf: &ElfFile, path: &str) -> Option<Box<PhpBuild>> {
    match detect(elf) {
        Detection::NotPhp => None,
        Detection::Unsupported { version, reason } => panic!("{path}: unsupported PHP {version:?}: {reason}"),
        Detection::Php(build) => Some(build),
    }
}

/// `php -v`'s first line, or None (a failure under CI=true) without php.
fn php_version_line() -> Option<String> {
    match Command::new("php").arg("-v").output() {
        Ok(o) if o.status.success() => Some(String::from_utf8(o.stdout).unwrap().lines().next()?.to_string()),
        other => {
            skip(&format!("no php ({other:?})"));
            None
        }
    }
}

/// Runs the workload with `settings` (`-d` ini settings), stops it
/// blocked in `fread` and asserts its walked frames; `jit` says whether
/// opcache must have emitted JIT code.
fn walk_live_php(settings: &[&str], jit: bool) {
    let Some(version) = php_version_line() else { return };
    let mut child = Workload::spawn(
        Command::new("php").args(settings.iter().flat_map(|s| ["-d", s])).arg(source()).stdin(Stdio::piped()),
    );
    let pid = child.pid();
    let line = child.line();
    let jitted: u64 =
        line.trim().strip_prefix(&format!("ready {pid} jit ")).unwrap_or_else(|| panic!("{line}")).parse().unwrap();
    assert_eq!(jitted > 0, jit, "{jitted} bytes of JIT code");
    // Blocked in the read (its stdin stays open in `child`).
    stop_when_asleep(pid, false);

    let (path, build, bias) = find_runtime(pid, php_in).unwrap_or_else(|| panic!("no PHP in the maps of {pid}"));
    eprintln!("PHP {} in {path}, bias {bias:#x}", build.version);
    assert!(version.starts_with(&format!("PHP {} ", build.version)), "{version} vs {}", build.version);
    let memory = PidMemory(pid);
    let ex = current_execute_data(&memory, &build.layout, bias + build.executor_globals_vaddr).unwrap();
    assert_ne!(ex, 0, "no current_execute_data");
    let mut symbolizer = PhpSymbolizer::new(build.layout.clone());
    let frames = symbolizer.walk(&memory, ex).unwrap();

    let file = source().to_str().unwrap().to_string();
    let user =
        |name: &str, line: &str| PhpFrame::User { name: name.into(), file: file.clone(), line: marked_line(line) };
    let internal = |name: &str| PhpFrame::Internal { name: name.into() };
    let want = vec![
        internal("fread"),
        user("Chain\\c", "c"),
        user("Chain\\Worker::compare", "compare"),
        internal("usort"),
        user("Chain\\Worker::b", "b"),
        user("Chain\\a", "a"),
        user("{main}", "main"),
    ];
    assert_eq!(frames, want);

    // Walked again from the cache: the same.
    assert_eq!(symbolizer.walk(&memory, ex).unwrap(), want);
    assert_eq!(symbolizer.evictions, 0);
}

#[test]
fn walks_the_main_thread_of_a_live_php() {
    // The CLI's default (opcache off), made explicit.
    walk_live_php(&["opcache.enable_cli=0"], false);
}

#[test]
fn walks_the_main_thread_of_a_live_php_with_the_opcache_jit() {
    // The tracing JIT compiles hot code only: this chain runs once, so
    // compile every function as it is loaded ("1205": per-function JIT,
    // all functions, at script load) to have JIT code on the stack.
    walk_live_php(&["opcache.enable_cli=1", "opcache.jit_buffer_size=16M", "opcache.jit=1205"], true);
}

#[test]
fn detects_the_system_php_from_the_file() {
    let Some(version) = php_version_line() else { return };
    let exe = Command::new("php").args(["-r", "echo realpath(PHP_BINARY);"]).output().unwrap().stdout;
    let path = String::from_utf8(exe).unwrap();
    let elf = ElfFile::open(&path).unwrap();
    let Detection::Php(build) = detect(&elf) else { panic!("{path}: {:?}", detect(&elf)) };
    let script = "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION, '.', PHP_RELEASE_VERSION;";
    let want = String::from_utf8(Command::new("php").args(["-r", script]).output().unwrap().stdout).unwrap();
    assert_eq!(build.version.to_string(), want, "{version}");
    assert_eq!(build.layout.version, build.version);
    assert!(build.executor_globals_vaddr > 0);
    assert!(build.execute_ex_vaddr.is_some());
}
