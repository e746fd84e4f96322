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

mod common;

use common::{find_runtime, skip, stop_when_asleep, workload, Workload};
use profiler_elf::ElfFile;
use profiler_interpreters::ruby::{
    detect, find_global_symbols, main_execution_context, Detection, RubyBuild, RubyFrame, RubySymbolizer,
};
use profiler_interpreters::PidMemory;
use std::path::PathBuf;
use std::process::Command;

fn source() -> PathBuf {
    workload("ruby/chain.rb")
}

/// The line of the workload marked `# line:<name>`.
fn marked_line(name: &str) -> u32 {
    common::marked_line(&source(), "#", name)
}

/// Ruby, when `elf` holds it.
fn ruby_in(elf: &ElfFile, path: &str) -> Option<Box<RubyBuild>> {
    match detect(elf) {
        Detection::NotRuby => None,
        Detection::Unsupported { version, reason } => panic!("{path}: unsupported Ruby {version:?}: {reason}"),
        Detection::Ruby(build) => Some(build),
    }
}

#[test]
fn walks_the_main_thread_of_a_live_ruby() {
    if Command::new("ruby").arg("-v").output().is_err() {
        skip("no ruby");
        return;
    }
    let mut child = Workload::spawn(Command::new("ruby").arg(source()));
    let pid = child.pid();
    assert_eq!(child.line().trim(), format!("ready {pid}"));
    // Blocked in the read.
    stop_when_asleep(pid, false);

    let (path, build, bias) = find_runtime(pid, ruby_in).unwrap_or_else(|| panic!("no Ruby in the maps of {pid}"));
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
            skip(&format!("no ruby ({other:?})"));
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
    let Detection::Ruby(build) = detect(&elf) else { panic!("{path}: {:?}", detect(&elf)) };
    assert_eq!(build.version.to_string(), version);
    assert_eq!(build.layout.version, build.version);
    assert!(build.vm_ptr_vaddr.is_some());
    let (vaddr, len) = build.data_segment.unwrap();
    assert!(vaddr > 0 && len > 0);
}
