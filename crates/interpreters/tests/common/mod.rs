//! What the live tests of the interpreters share: the CI rule for missing
//! tools, the workloads and their marked lines, a workload killed on drop,
//! stopping and resuming it, and finding its runtime in its maps.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use profiler_elf::ElfFile;
use profiler_interpreters::ProcessMemory;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Under CI=true a test that lacks a tool fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Says that a test is skipped for want of `what`: a failure under
/// CI=true.
pub fn skip(what: &str) {
    assert!(!in_ci(), "{what}: required under CI=true");
    eprintln!("SKIPPED: {what}");
}

/// `tests/workloads/<relative>` of the repository, as an absolute path.
pub fn workload(relative: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/workloads").join(relative);
    path.canonicalize().unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The line of `file` marked `<comment> line:<name>` at its end (`comment`
/// is the language's line comment: `#`, `//`).
pub fn marked_line(file: &Path, comment: &str, name: &str) -> u32 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let marker = format!("{comment} line:{name}");
    let at = text.lines().position(|l| l.trim_end().ends_with(&marker)).unwrap_or_else(|| panic!("no {marker}"));
    at as u32 + 1
}

/// A running workload, its stdout piped to the test; killed (even when
/// stopped) and reaped on drop.
pub struct Workload {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Workload {
    /// Starts `command` with its stdout piped here.
    pub fn spawn(command: &mut Command) -> Workload {
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{command:?}: {e}"));
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Workload { child, stdout }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the workload prints; a failure when it exits first.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the workload exited");
        line
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: plain syscalls on our own child, not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGCONT);
        }
        let _ = self.child.wait();
    }
}

/// The state letter of a `stat` file (after the parenthesised name).
fn state_in(stat_path: &str) -> Option<char> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// The state letter of process `pid` (its main thread).
pub fn state(pid: u32) -> Option<char> {
    state_in(&format!("/proc/{pid}/stat"))
}

/// The state letter of thread `tid` of `pid`.
pub fn task_state(pid: u32, tid: u32) -> Option<char> {
    state_in(&format!("/proc/{pid}/task/{tid}/stat"))
}

/// The threads of `pid`, sorted.
pub fn tasks(pid: u32) -> Vec<u32> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let mut tids: Vec<u32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    tids
}

/// One state for all threads of `pid` when they agree.
pub fn all_states(pid: u32) -> Option<char> {
    let states: Vec<Option<char>> = tasks(pid).into_iter().map(|t| task_state(pid, t)).collect();
    states.iter().all(|s| *s == states[0]).then_some(states[0]).flatten()
}

/// Stops `pid` (SIGSTOP) and waits until every thread is stopped.
pub fn stop(pid: u32) {
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while all_states(pid) != Some('T') {
        assert!(Instant::now() < deadline, "{pid} did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lets a stopped `pid` run again (SIGCONT).
pub fn resume(pid: u32) {
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
}

/// Waits until `pid` (its main thread, or every thread) has slept for
/// 200 ms, blocked for good rather than passing through a lock, then
/// stops it.
pub fn stop_when_asleep(pid: u32, every_thread: bool) {
    let asleep = || if every_thread { all_states(pid) } else { state(pid) } == Some('S');
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut asleep_since: Option<Instant> = None;
    loop {
        assert!(Instant::now() < deadline, "the workload never blocked");
        match (asleep(), asleep_since) {
            (true, None) => asleep_since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() > Duration::from_millis(200) => break,
            (true, _) => {}
            (false, _) => asleep_since = None,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop(pid);
}

/// The first file in `pid`'s maps that `detect` recognises: its path,
/// what `detect` made of it, and its load bias. The bias is that of the
/// file's executable mapping ([`profiler_elf::LoadSegments::executable_bias`]),
/// or of its first mapping while the loader has not mapped the rest yet.
pub fn find_runtime<T>(pid: u32, mut detect: impl FnMut(&ElfFile, &str) -> Option<T>) -> Option<(String, T, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    // (start, perms, offset, path) of each mapping of a file.
    let mappings: Vec<(&str, &str, &str, &str)> = maps
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let path = *f.get(5).filter(|p| p.starts_with('/'))?;
            Some((f[0].split('-').next()?, f[1], f[2], path))
        })
        .collect();
    let mut seen = Vec::new();
    for &(_, _, _, path) in &mappings {
        if seen.contains(&path) {
            continue;
        }
        seen.push(path);
        // Through the process's root when the path is not ours (a process
        // in another mount namespace).
        let opened = ElfFile::open(path).or_else(|_| ElfFile::open(format!("/proc/{pid}/root{path}")));
        let Ok(elf) = opened else { continue };
        let Some(found) = detect(&elf, path) else { continue };
        let of_file = || mappings.iter().filter(|m| m.3 == path);
        let (start, _, offset, _) = of_file().find(|m| m.1.contains('x')).or_else(|| of_file().next()).unwrap();
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
        let bias = elf.load_segments().executable_bias(hex(start), hex(offset));
        let bias = bias.unwrap_or_else(|| panic!("{path}: no load segment at offset {offset}"));
        return Some((path.to_string(), found, bias));
    }
    None
}

/// Where root file systems of other distributions are kept (one folder
/// each, complete when it holds `.ready`): interpreters this machine does
/// not have, run with `chroot`.
pub const RUNTIME_ROOTS: &str = "/var/cache/ebpf-profiler-runtimes";

/// `(root, /usr/bin/<name>)` for each ready root of [`RUNTIME_ROOTS`] that
/// has `/usr/bin/<name>`, in name order.
pub fn in_runtime_roots(name: &str) -> Vec<(PathBuf, String)> {
    let mut roots: Vec<PathBuf> =
        std::fs::read_dir(RUNTIME_ROOTS).map(|dir| dir.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    roots.sort();
    let exe = format!("/usr/bin/{name}");
    roots
        .into_iter()
        .filter(|root| root.join(".ready").exists() && root.join(exe.trim_start_matches('/')).exists())
        .map(|root| (root, exe.clone()))
        .collect()
}

/// The `u64` at `address`; a failure when it cannot be read.
pub fn read_u64(memory: &dyn ProcessMemory, address: u64) -> u64 {
    let mut b = [0u8; 8];
    assert!(memory.read(address, &mut b), "read at {address:#x}");
    u64::from_le_bytes(b)
}
