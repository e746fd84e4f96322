//! Proves the Ruby layout against a live interpreter: runs
//! `tests/workloads/ruby/chain.rb` with the system `ruby`, waits until
//! its main thread blocks reading a pipe, stops it (SIGSTOP), finds
//! `libruby` (or a static `ruby`) in its maps ([`detect`]), finds the
//! main thread's execution context from `ruby_current_vm_ptr`, walks its
//! control frames and asserts the exact chain of names (`Class#method`)
//! and lines down to `<main>`, C functions (`Integer#times`, `Array#each`,
//! `IO#read`) included.
//!
//! `ruby` is required under CI=true (`scripts/install-deps.sh`).

use profiler_elf::ElfFile;
use profiler_interpreters::ruby::{
    detect, find_global_symbols, main_execution_context, Detection, RubyBuild, RubyFrame, RubySymbolizer,
};
use profiler_interpreters::PidMemory;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/workloads/ruby/chain.rb")
}

/// The line of the workload marked `# line:<name>`.
fn marked_line(name: &str) -> u32 {
    let text = std::fs::read_to_string(source()).unwrap();
    let marker = format!("# line:{name}");
    let at = text.lines().position(|l| l.trim_end().ends_with(&marker)).unwrap_or_else(|| panic!("no {marker}"));
    at as u32 + 1
}

/// The workload, killed on drop.
struct Ruby(Child);

impl Drop for Ruby {
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

/// The file in `pid`'s maps holding Ruby, with its load bias.
fn find_ruby(pid: u32) -> (String, Box<RubyBuild>, u64) {
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
            Detection::NotRuby => continue,
            Detection::Unsupported(why) => panic!("unsupported Ruby: {why}"),
            Detection::Ruby(build) => {
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
    panic!("no Ruby in the maps of {pid}");
}

#[test]
fn walks_the_main_thread_of_a_live_ruby() {
    if Command::new("ruby").arg("-v").output().is_err() {
        assert!(!in_ci(), "ruby is required under CI=true");
        eprintln!("SKIPPED: no ruby");
        return;
    }
    let mut child = Command::new("ruby").arg(source()).stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _guard = Ruby(child);
    let mut line = String::new();
    assert!(out.read_line(&mut line).unwrap() > 0, "the workload exited");
    assert_eq!(line.trim(), format!("ready {pid}"));
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

    let (path, build, bias) = find_ruby(pid);
    eprintln!("Ruby {} in {path}, bias {bias:#x}", build.version);
    let memory = PidMemory(pid);
    let vm_ptr = bias + build.vm_ptr_vaddr.expect("ruby_current_vm_ptr");
    let ec = main_execution_context(&memory, &build.layout, vm_ptr).unwrap();
    let symbols = build.global_symbols_vaddr.map(|v| bias + v).or_else(|| {
        let (vaddr, len) = build.data_segment?;
        find_global_symbols(&memory, &build.layout, bias + vaddr, len)
    });
    assert!(symbols.is_some(), "ruby_global_symbols not found");
    let mut symbolizer = RubySymbolizer::new(build.layout.clone(), symbols);
    let frames = symbolizer.walk(&memory, ec).unwrap();

    let file = source().to_str().unwrap().to_string();
    let ruby =
        |label: &str, line: &str| RubyFrame::Ruby { label: label.into(), file: file.clone(), line: marked_line(line) };
    let cfunc = |name: &str| RubyFrame::CFunc { name: name.into() };
    let want = vec![
        cfunc("IO#read"),
        ruby("Chain::Worker#c", "c"),
        ruby("block in Chain::Worker#b", "block_b"),
        cfunc("Array#each"),
        ruby("Chain::Worker#b", "b"),
        ruby("block in Object#a", "block_a"),
        cfunc("Integer#times"),
        ruby("Object#a", "a"),
        ruby("<main>", "main"),
    ];
    assert_eq!(frames, want);

    // Walked again from the caches: the same.
    assert_eq!(symbolizer.walk(&memory, ec).unwrap(), want);
    assert_eq!(symbolizer.evictions, 0);
}

/// The file holding the system Ruby's interpreter: the libruby that
/// `ruby` maps, or `ruby` itself when it is static.
fn system_libruby() -> Option<String> {
    let script = "m = File.readlines('/proc/self/maps').map { |l| l.split[5] }.compact; \
                  print(m.find { |p| p.include?('libruby') } || File.realpath('/proc/self/exe'))";
    match Command::new("ruby").args(["-e", script]).output() {
        Ok(o) if o.status.success() => Some(String::from_utf8(o.stdout).unwrap()),
        other => {
            assert!(!in_ci(), "ruby is required under CI=true ({other:?})");
            eprintln!("SKIPPED: no ruby");
            None
        }
    }
}

#[test]
fn detects_the_system_libruby_from_the_file() {
    let Some(path) = system_libruby() else { return };
    let version = Command::new("ruby").args(["-e", "print RUBY_VERSION"]).output().unwrap().stdout;
    let version = String::from_utf8(version).unwrap();
    let elf = ElfFile::open(&path).unwrap();
    let Detection::Ruby(build) = detect(&elf, &path) else { panic!("{path}: {:?}", detect(&elf, &path)) };
    assert_eq!(build.version.to_string(), version);
    assert_eq!(build.layout.version, build.version);
    assert!(build.vm_ptr_vaddr.is_some());
    let (vaddr, len) = build.data_segment.unwrap();
    assert!(vaddr > 0 && len > 0);
}
