//! Proves the PHP layout against a live interpreter: runs
//! `tests/workloads/php/chain.php` with the system `php`, waits until its
//! main thread blocks reading stdin, stops it (SIGSTOP), finds the PHP
//! binary in its maps ([`detect`]), reads `executor_globals` and walks
//! `current_execute_data` -> `prev_execute_data`, asserting the exact
//! chain of names and lines down to `{main}`, C functions (`fread`,
//! `usort`) included.
//!
//! `php` is required under CI=true (`scripts/install-deps.sh`).

use profiler_elf::ElfFile;
use profiler_interpreters::php::{current_execute_data, detect, Detection, PhpBuild, PhpFrame, PhpSymbolizer};
use profiler_interpreters::PidMemory;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/workloads/php/chain.php").canonicalize().unwrap()
}

/// The line of the workload marked `// line:<name>`.
fn marked_line(name: &str) -> u32 {
    let text = std::fs::read_to_string(source()).unwrap();
    let marker = format!("// line:{name}");
    let at = text.lines().position(|l| l.trim_end().ends_with(&marker)).unwrap_or_else(|| panic!("no {marker}"));
    at as u32 + 1
}

/// The workload, killed on drop.
struct Php(Child);

impl Drop for Php {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        // SAFETY: plain syscalls on our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGCONT);
        }
        let _ = self.0.wait();
    }
}

/// The state letter of `/proc/<pid>/stat` (after the parenthesised name).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// The file in `pid`'s maps holding PHP, with its load bias.
fn find_php(pid: u32) -> (String, Box<PhpBuild>, u64) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut seen = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(path) = f.get(5).filter(|p| p.starts_with('/')) else { continue };
        if seen.contains(path) {
            continue;
        }
        seen.push(path);
        let Ok(elf) = ElfFile::open(path) else { continue };
        match detect(&elf, path) {
            Detection::NotPhp => continue,
            Detection::Unsupported(why) => panic!("unsupported PHP: {why}"),
            Detection::Php(build) => {
                // The bias: the first mapping's start minus the first
                // PT_LOAD's page-aligned address (offset 0 maps it).
                let start = maps
                    .lines()
                    .find(|l| l.ends_with(*path) && l.split_whitespace().nth(2) == Some("00000000"))
                    .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
                    .unwrap();
                let first = elf.program_headers().iter().filter(|p| p.p_type == 1).map(|p| p.vaddr).min().unwrap();
                return (path.to_string(), build, start - (first & !0xfff));
            }
        }
    }
    panic!("no PHP in the maps of {pid}");
}

/// `php -v`'s first line, or None (a failure under CI=true) without php.
fn php_version_line() -> Option<String> {
    match Command::new("php").arg("-v").output() {
        Ok(o) if o.status.success() => Some(String::from_utf8(o.stdout).unwrap().lines().next()?.to_string()),
        other => {
            assert!(!in_ci(), "php is required under CI=true ({other:?})");
            eprintln!("SKIPPED: no php");
            None
        }
    }
}

/// Runs the workload with `settings` (`-d` ini settings), stops it
/// blocked in `fread` and asserts its walked frames; `jit` says whether
/// opcache must have emitted JIT code.
fn walk_live_php(settings: &[&str], jit: bool) {
    let Some(version) = php_version_line() else { return };
    let mut child = Command::new("php")
        .args(settings.iter().flat_map(|s| ["-d", s]))
        .arg(source())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _stdin = child.stdin.take().unwrap();
    let _guard = Php(child);
    let mut line = String::new();
    assert!(out.read_line(&mut line).unwrap() > 0, "the workload exited");
    let jitted: u64 =
        line.trim().strip_prefix(&format!("ready {pid} jit ")).unwrap_or_else(|| panic!("{line}")).parse().unwrap();
    assert_eq!(jitted > 0, jit, "{jitted} bytes of JIT code");
    // Blocked in the read: sleeping for a while after printing.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sleeping_since = None;
    loop {
        assert!(Instant::now() < deadline, "the workload never blocked");
        match (state(pid), sleeping_since) {
            (Some('S'), None) => sleeping_since = Some(Instant::now()),
            (Some('S'), Some(t)) if t.elapsed() > Duration::from_millis(200) => break,
            (Some('S'), _) => {}
            _ => sleeping_since = None,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: a plain syscall on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    while state(pid) != Some('T') {
        assert!(Instant::now() < deadline, "the workload did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }

    let (path, build, bias) = find_php(pid);
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
    let Detection::Php(build) = detect(&elf, &path) else { panic!("{path}: {:?}", detect(&elf, &path)) };
    let script = "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION, '.', PHP_RELEASE_VERSION;";
    let want = String::from_utf8(Command::new("php").args(["-r", script]).output().unwrap().stdout).unwrap();
    assert_eq!(build.version.to_string(), want, "{version}");
    assert_eq!(build.layout.version, build.version);
    assert!(build.executor_globals_vaddr > 0);
    assert!(build.execute_ex_vaddr.is_some());
}
