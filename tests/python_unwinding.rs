//! CPython unwinding on the real eBPF programs: Python frames in place of
//! the interpreter's evaluation loop, native frames above and below them,
//! for every CPython on this machine (pyenv's 3.8-3.13 under
//! `~/.pyenv/versions`, the system's `/usr/bin/python3`; those not
//! installed are skipped, except under CI=true where each is required).
//! Other releases (Debian 13's and unstable's: 3.13, 3.14, 3.15) are the
//! runtime matrix's (`make test-runtimes`, tests/runtimes/matrix.py): under
//! `EP_RUNTIME_ROOT` the `system` tests run the root's `/usr/bin/python3`,
//! or the CPython `EP_RUNTIME_PYTHON` names, under chroot.
//!
//! Each test asserts a whole chain, root first and in order, in at least
//! 95% of the samples whose innermost Python frame is the chain's leaf
//! (samples with no Python frame at all count as failures), and prints the
//! measured completeness.

use profiler_agent::{AgentConfig, Stats};
use profiler_bpf::MAX_USER_FRAMES;
use profiler_tests::{
    in_ci, matches_chain, profile_until, profile_with, serial, start_agent, user_frames, wait_exited, Completeness,
    FrameDesc, RuntimeRoot, RuntimeScripts, Step, Workload,
};
use profiler_trace::{FrameKind, Trace};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
const SECONDS: u64 = 3;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 25;
const LIBC: &str = "libc.so.6";

/// One CPython to test.
struct Python {
    /// Where it runs: `EP_RUNTIME_ROOT`'s root or this machine.
    root: RuntimeRoot,
    /// The executable to run (as it sees itself: in the root).
    exe: PathBuf,
    /// 3.x
    minor: u8,
    /// File names of its native code as mapped: the executable and, for a
    /// shared build, libpython.
    files: Vec<String>,
    /// The workloads where it sees them.
    scripts: RuntimeScripts,
}

impl Python {
    /// pyenv's `version` ("3.11.7"), or "system" for /usr/bin/python3.
    fn find(version: &str) -> Option<Python> {
        let exe = if version == "system" {
            // The runtime matrix names a root's other CPythons (sid's 3.15).
            std::env::var_os("EP_RUNTIME_PYTHON")
                .filter(|p| !p.is_empty())
                .map_or_else(|| "/usr/bin/python3".into(), PathBuf::from)
        } else {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            Path::new(&home).join(".pyenv/versions").join(version).join("bin/python3")
        };
        let root = RuntimeRoot::from_env();
        let Ok(real) = std::fs::canonicalize(root.host_path(&exe)) else {
            assert!(!in_ci(), "{} is required under CI=true", root.host_path(&exe).display());
            eprintln!("SKIPPED: {} is not installed; under CI=true this fails", root.host_path(&exe).display());
            return None;
        };
        // Installed but not running is a failure, never a skip.
        let out = root
            .command(exe.to_str()?)
            .args(["-c", "import sys; print(sys.version_info[1])"])
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
        let minor: u8 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{}: no minor version in {out:?}: {e}", exe.display()));
        let mut files = vec![real.file_name()?.to_str()?.to_string()];
        let lib = real.parent()?.parent()?.join("lib").join(format!("libpython3.{minor}.so.1.0"));
        if lib.exists() {
            files.push(lib.file_name()?.to_str()?.to_string());
        }
        let scripts = RuntimeScripts::in_root(&root, "python");
        Some(Python { root, exe, minor, files, scripts })
    }

    fn describe(&self) -> String {
        match self.root.path() {
            Some(root) => format!("{} in {}", self.exe.display(), root.display()),
            None => self.exe.display().to_string(),
        }
    }

    /// The function name CPython gives a method: its qualified name from
    /// 3.11 (`co_qualname`), the bare name before.
    fn method(&self, class: &str, name: &str) -> String {
        if self.minor >= 11 {
            format!("{class}.{name}")
        } else {
            name.to_string()
        }
    }

    /// Where `script` runs from, as the process sees it.
    fn script_path(&self, script: &str) -> PathBuf {
        self.scripts.path(script)
    }

    fn spawn(&self, script: &str) -> Workload {
        let mut command = self.root.command(self.exe.to_str().unwrap());
        Workload::spawn(command.arg(self.script_path(script)).env("PYTHONDONTWRITEBYTECODE", "1"))
    }
}

/// One element of an expected stack, root first; names and file patterns
/// are built at run time.
type S = Step<String>;

fn is_python(f: &FrameDesc) -> bool {
    f.kind == FrameKind::CPython
}

fn is_eval_loop(f: &FrameDesc) -> bool {
    f.name.as_deref() == Some("_PyEval_EvalFrameDefault")
}

/// A file pattern (see [`Step`]) for any of `files`.
fn any_of(files: &[String]) -> String {
    files.join("|")
}

/// A sample's user frames as the log shows them (root first).
fn show(frames: &[FrameDesc]) -> String {
    frames.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(";")
}

/// Checks the samples of `pid` (of threads `tids`, when given) against
/// `chain` (root first, its last step the leaf's [`S::Py`]); native frames
/// below the leaf are allowed.
fn completeness(traces: &[Trace], pid: u32, tids: Option<&HashSet<u32>>, chain: &[S]) -> Completeness {
    let Some(S::Py(leaf)) = chain.last() else { panic!("the chain ends with its leaf") };
    let mut pattern = chain.to_vec();
    pattern.push(S::AnyOrNone);
    let mut c = Completeness::default();
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        if tids.is_some_and(|tids| !tids.contains(&t.tid.0)) {
            continue;
        }
        let frames = user_frames(t);
        match frames.iter().rev().find(|f| is_python(f)) {
            // An unnamed Python frame, or none at all (the Python
            // workloads run Python code all the time): a failure.
            None => c.fail(|| show(&frames)),
            Some(f) if f.name.is_none() => c.fail(|| show(&frames)),
            Some(f) if f.name.as_deref() != Some(leaf.as_str()) => c.other(|| show(&frames)),
            Some(_) if matches_chain(&frames, &pattern) => c.pass(|| show(&frames)),
            Some(_) => c.fail(|| show(&frames)),
        }
    }
    c
}

fn assert_complete(what: &str, c: &Completeness, stats: &Stats) {
    c.assert_whole(what, MIN_SAMPLES, REQUIRED, stats);
}

/// Profiles the already running `workload` for SECONDS.
fn profile_running(workload: &Workload) -> Option<(Vec<Trace>, Stats)> {
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![workload.pid()], ..AgentConfig::default() };
    profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))
}

/// The native frames of a main thread above its first Python frame:
/// `_start` in the executable, libc's start, the interpreter's `main` and
/// run functions (matched by file: names come when the native symbolizer
/// has loaded a file).
fn main_root(py: &Python) -> Vec<S> {
    let mut files = py.files.clone();
    files.push(LIBC.to_string());
    vec![S::In(py.files[0].clone()), S::ManyIn(any_of(&files))]
}

/// What may lie between two Python frames: before 3.11 every Python call
/// is a run of the evaluation loop of its own, with the interpreter's
/// call machinery between; from 3.11 Python-to-Python calls are inlined
/// (calls through C still make a new run).
fn between(py: &Python) -> S {
    S::OptIn(any_of(&py.files))
}

/// `py` frames with `between` in between.
fn python_chain(py: &Python, names: &[String]) -> Vec<S> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(between(py));
        }
        out.push(S::Py(name.clone()));
    }
    out
}

fn chain_test(version: &str) {
    let _serial = serial();
    let Some(py) = Python::find(version) else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python/chain.py");
    let f3_first = line_of(&source, "def f3(n):");
    let lines: HashMap<&str, std::ops::RangeInclusive<u32>> = HashMap::from([
        ("<module>", line_of(&source, "f1(20000)")..=line_of(&source, "f1(20000)")),
        ("f1", line_of(&source, "return f2(n)")..=line_of(&source, "return f2(n)")),
        ("f2", line_of(&source, "return f3(n)")..=line_of(&source, "return f3(n)")),
        ("f3", f3_first + 1..=f3_first + 4),
    ]);
    let what = format!("Python {} <module> -> f1 -> f2 -> f3", py.describe());
    let script = py.script_path("chain.py");
    let w = py.spawn("chain.py");
    let pid = w.pid();
    let Some((traces, stats)) = profile_running(&w) else { return };
    let mut chain = main_root(&py);
    chain.extend(python_chain(&py, &["<module>", "f1", "f2", "f3"].map(String::from)));
    let c = completeness(&traces, pid, None, &chain);
    assert_complete(&what, &c, &stats);
    assert_eq!(stats.runtimes.get("python", "unsupported"), 0, "{what}");
    // Every named frame of the chain: its file and a line it runs.
    let (mut right, mut wrong) = (0usize, Vec::new());
    let of_pid = traces.iter().filter(|t| t.process.pid.0 == pid);
    for frame in of_pid.flat_map(|t| &t.frames).filter(|f| f.kind == FrameKind::CPython) {
        let Some(line) = frame.lines.last() else { continue };
        let Some(expected) = lines.get(&*line.function) else { continue };
        if line.file.as_deref() == script.to_str() && expected.contains(&line.line) {
            right += 1;
        } else {
            wrong.push(format!("{} {:?}:{}", line.function, line.file, line.line));
        }
    }
    eprintln!("{what}: {right} frames at their file and line, {} not: {:?}", wrong.len(), &wrong[..wrong.len().min(5)]);
    assert!(right >= 4 * MIN_SAMPLES, "{what}: {right} frames at their file and line");
    assert!(wrong.len() * 100 <= right, "{what}: {} frames elsewhere: {wrong:?}", wrong.len());
}

/// A recursion 1,000 Python calls deep comes through whole, from the
/// interpreter's root to `<module>` and every `recurse`. From 3.11 on
/// (Python-to-Python calls in one run of the evaluation loop): before,
/// each call adds native frames, and 1,000 calls pass the frame limit.
#[test]
fn recursion_1000_deep_reaches_module() {
    let _serial = serial();
    let Some(py) = Python::find("system") else { return };
    if py.minor < 11 {
        eprintln!("SKIPPED: Python 3.{} runs each call in a native frame of its own", py.minor);
        return;
    }
    let depth = 1000;
    let w = py.spawn("deep.py");
    let Some((traces, stats)) = profile_running(&w) else { return };
    let mut names = vec!["<module>".to_string()];
    // recurse(depth) down to recurse(0), which calls leaf
    names.extend(std::iter::repeat_n("recurse".to_string(), depth + 1));
    names.push("leaf".to_string());
    let mut chain = main_root(&py);
    chain.extend(python_chain(&py, &names));
    let c = completeness(&traces, w.pid(), None, &chain);
    assert_complete(&format!("Python {} {depth}-deep recursion", py.describe()), &c, &stats);
    assert_eq!(stats.user_stacks_frame_limit, 0, "{stats:#?}");
}

/// The line of `file` (1-based) whose text, trimmed, is `text`.
fn line_of(file: &Path, text: &str) -> u32 {
    let source = std::fs::read_to_string(file).unwrap();
    let at = source.lines().position(|l| l.trim() == text).unwrap_or_else(|| panic!("{text:?} in {}", file.display()));
    at as u32 + 1
}

fn ctypes_test(version: &str) {
    let _serial = serial();
    if let Some(py) = Python::find(version) {
        ctypes_of(&py);
    }
}

fn ctypes_of(py: &Python) {
    let version = py.describe();
    let w = py.spawn("ctypes_qsort.py");
    let Some((traces, stats)) = profile_running(&w) else { return };
    let ctypes = format!("_ctypes.cpython-3{}-x86_64-linux-gnu.so", py.minor);
    // libffi.so.8 is a link: the maps name the file it points to.
    let libffi = "libffi.so.*".to_string();
    let mut to_ctypes = py.files.clone();
    to_ctypes.push(ctypes.clone());
    let mut chain = main_root(py);
    chain.extend(python_chain(py, &["<module>", "sorter", "sort_once"].map(String::from)));
    // sort_once -> (call machinery) -> _ctypes -> libffi -> libc's qsort
    // -> libffi's closure -> _ctypes -> (call machinery) -> py_compare.
    chain.extend([
        S::ManyIn(any_of(&to_ctypes)),
        S::ManyIn(libffi.clone()),
        S::ManyIn(LIBC.to_string()),
        S::ManyIn(libffi),
        S::ManyIn(any_of(&to_ctypes)),
    ]);
    chain.extend(python_chain(py, &["py_compare", "cmp_leaf"].map(String::from)));
    let c = completeness(&traces, w.pid(), None, &chain);
    assert_complete(&format!("Python {version} -> ctypes -> qsort -> Python callback"), &c, &stats);
}

fn threads_test(version: &str) {
    let _serial = serial();
    if let Some(py) = Python::find(version) {
        threads_of(&py);
    }
}

fn threads_of(py: &Python) {
    let version = py.describe();
    let w = py.spawn("threads.py");
    let Some((traces, stats)) = profile_running(&w) else { return };
    // Which threads ran which leaf: each thread must show its own.
    let mut by_leaf: HashMap<String, HashSet<u32>> = HashMap::new();
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid()) {
        if let Some(name) = user_frames(t).iter().rev().find(|f| is_python(f)).and_then(|f| f.name.clone()) {
            by_leaf.entry(name).or_default().insert(t.tid.0);
        }
    }
    let (a, b) =
        (by_leaf.get("a_leaf").cloned().unwrap_or_default(), by_leaf.get("b_leaf").cloned().unwrap_or_default());
    assert!(a.len() == 1 && b.len() == 1 && a != b, "one thread per leaf: {by_leaf:?}");
    assert!(!a.contains(&w.pid()) && !b.contains(&w.pid()), "not the main thread");
    for (worker, mid, leaf, tids) in [("worker_a", "a_mid", "a_leaf", &a), ("worker_b", "b_mid", "b_leaf", &b)] {
        // A thread's root: clone3 and start_thread in libc, then the
        // interpreter's thread bootstrap.
        let mut files = py.files.clone();
        files.push(LIBC.to_string());
        let mut chain = vec![S::ManyIn(LIBC.to_string()), S::ManyIn(any_of(&files))];
        let names = [
            py.method("Thread", "_bootstrap"),
            py.method("Thread", "_bootstrap_inner"),
            py.method("Thread", "run"),
            worker.to_string(),
            mid.to_string(),
            leaf.to_string(),
        ];
        chain.extend(python_chain(py, &names));
        // The thread's own samples, and no sample of the other thread may
        // show this chain's leaf (checked above: one thread per leaf).
        let c = completeness(&traces, w.pid(), Some(tids), &chain);
        assert_complete(&format!("Python {version} thread {worker}"), &c, &stats);
    }
}

macro_rules! per_version {
    ($test:ident: $($name:ident => $version:expr),* $(,)?) => {
        mod $test {
            $(
                #[test]
                fn $name() {
                    super::$test($version)
                }
            )*
        }
    };
}

per_version!(chain_test: v3_8 => "3.8.18", v3_9 => "3.9.18", v3_10 => "3.10.13", v3_11 => "3.11.7",
    v3_12 => "3.12.1", v3_13 => "3.13.0", system => "system");
per_version!(ctypes_test: v3_8 => "3.8.18", v3_9 => "3.9.18", v3_10 => "3.10.13", v3_11 => "3.11.7",
    v3_12 => "3.12.1", v3_13 => "3.13.0", system => "system");
per_version!(threads_test: v3_8 => "3.8.18", v3_9 => "3.9.18", v3_10 => "3.10.13", v3_11 => "3.11.7",
    v3_12 => "3.12.1", v3_13 => "3.13.0", system => "system");

/// A fresh directory for a test's files, removed when dropped (declare it
/// before the workloads that use its files: they are dropped first).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("ep-python-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// The system's static CPython (Debian's `/usr/bin/python3.11`: the
/// interpreter is in the executable), copied to `dir` under its own name;
/// `edit` changes the copy's bytes (a copy of the same bytes would have
/// the same file id as the original).
fn python_copy(dir: &Path, edit: impl FnOnce(&Path, &mut Vec<u8>)) -> Option<(Python, PathBuf)> {
    let py = Python::find("system")?;
    let real = std::fs::canonicalize(&py.exe).unwrap();
    if py.files.len() != 1 {
        assert!(!in_ci(), "{} is not a static build: required under CI=true", real.display());
        eprintln!("SKIPPED: {} is not a static build; under CI=true this fails", real.display());
        return None;
    }
    let copy = dir.join(real.file_name().unwrap());
    let mut bytes = std::fs::read(&real).unwrap();
    edit(&real, &mut bytes);
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    Some((py, copy))
}

fn spawn_copy(copy: &Path, script: &str, args: &[&str]) -> Workload {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python").join(script);
    Workload::spawn(
        Command::new(copy).arg(path).args(args).env("PYTHONDONTWRITEBYTECODE", "1").env("PYTHONHOME", "/usr"),
    )
}

/// How many samples of `pid` are whole native stacks (from `_start`, all
/// native, each frame in `files`) that went through the evaluation loop.
fn native_through_eval_loop(traces: &[Trace], pid: u32, files: &[String]) -> Completeness {
    let mut c = Completeness::default();
    let pattern = [S::Fn("_start".into()), S::AnyOrNone];
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let frames = user_frames(t);
        let whole = matches_chain(&frames, &pattern)
            && frames.iter().all(|f| {
                !is_python(f) && f.file.as_ref().is_some_and(|file| files.iter().any(|w| file.starts_with(w.as_str())))
            })
            && frames.iter().any(is_eval_loop);
        if whole {
            c.pass(|| show(&frames));
        } else {
            c.fail(|| show(&frames));
        }
    }
    c
}

/// A CPython of a version this profiler does not know (3.99: the system's
/// interpreter with its `Py_Version` changed) is reported once, however
/// many processes run it, and profiled as native code: whole native
/// stacks through `_PyEval_EvalFrameDefault`, no Python frame.
#[test]
fn unsupported_version_is_reported_once_and_profiled_as_native() {
    let _serial = serial();
    let dir = scratch_dir("unsupported");
    let Some((_py, copy)) = python_copy(&dir, |real, bytes| {
        let elf = profiler_elf::ElfFile::open(real).unwrap();
        let at = elf.symbol_address("Py_Version").expect("3.11+ has Py_Version");
        let offset = elf.vaddr_to_file_offset(at).unwrap() as usize;
        bytes[offset..offset + 4].copy_from_slice(&0x036300f0u32.to_le_bytes());
    }) else {
        return;
    };
    let (a, b) = (spawn_copy(&copy, "chain.py", &[]), spawn_copy(&copy, "chain.py", &[]));
    std::thread::sleep(Duration::from_millis(500));
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![a.pid(), b.pid()], ..AgentConfig::default() };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    std::thread::sleep(Duration::from_secs(SECONDS));
    let notices = agent.notices();
    agent.stop().expect("clean stop");
    let stats = agent.stats();
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    eprintln!("notices: {notices:?}");
    assert_eq!(stats.runtimes.get("python", "unsupported"), 1, "one file, two processes: told once; {stats:#?}");
    assert_eq!(stats.runtimes.get("python", "refused_version"), 1, "refused for its version: {stats:#?}");
    let told: Vec<&String> = notices.iter().filter(|n| n.contains("3.99")).collect();
    assert_eq!(told.len(), 1, "{notices:?}");
    assert!(told[0].contains("(only 3.8 to 3.15 are read)"), "{told:?}");
    assert_eq!((stats.runtimes.get("python", "files"), stats.runtimes.get("python", "frames")), (0, 0), "{stats:#?}");
    let files = vec![copy.file_name().unwrap().to_str().unwrap().to_string(), LIBC.to_string()];
    for w in [&a, &b] {
        let c = native_through_eval_loop(&traces, w.pid(), &files);
        assert_complete("unsupported CPython 3.99, native stacks", &c, &stats);
    }
}

/// `disabled_interpreters: ["python"]` (the receiver's
/// `interpreters.python.disabled`, the CLI's `--disable-interpreter
/// python`): CPython is not looked for, its processes are profiled as
/// native code, whole stacks through the evaluation loop.
#[test]
fn a_disabled_interpreter_is_profiled_as_native() {
    let _serial = serial();
    let dir = scratch_dir("disabled");
    let Some((_py, copy)) = python_copy(&dir, |_, _| {}) else { return };
    let w = spawn_copy(&copy, "chain.py", &[]);
    std::thread::sleep(Duration::from_millis(500));
    let config = AgentConfig {
        samples_per_second: HZ,
        pids: vec![w.pid()],
        disabled_interpreters: vec!["python".into()],
        ..AgentConfig::default()
    };
    let files = vec![copy.file_name().unwrap().to_str().unwrap().to_string(), LIBC.to_string()];
    // The workload gets the CPU a busy machine leaves it: until it has
    // its samples (the assertions below say if it never does), a margin
    // over the minimum so that a sample taken before the agent knew the
    // fresh copy's code does not decide the ratio alone.
    let Some((traces, stats)) = profile_until(config, Duration::from_secs(SECONDS), Duration::from_secs(60), |t| {
        native_through_eval_loop(t, w.pid(), &files).at_leaf >= 4 * MIN_SAMPLES
    }) else {
        return;
    };
    assert_eq!((stats.runtimes.get("python", "files"), stats.runtimes.get("python", "frames")), (0, 0), "{stats:#?}");
    assert!(stats.runtimes.get("hotspot", "files") == 0 && stats.samples > 0, "{stats:#?}");
    let c = native_through_eval_loop(&traces, w.pid(), &files);
    assert_complete("CPython disabled, native stacks", &c, &stats);
}

/// An executable that looks like CPython 3.11 but whose runtime state is
/// made up: a frame chain that loops over a "code object" that is not
/// one, or no thread state for the thread. The unwinder stays bounded,
/// nothing is named from garbage, and without a thread state the
/// evaluation loop stays a native frame in whole stacks.
#[test]
fn malformed_interpreter_state_is_survived() {
    let _serial = serial();
    let dir = scratch_dir("malformed");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python/fake_python.c");
    let exe = dir.join("python3.11");
    let out = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-rdynamic", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let looping = Workload::spawn(&mut Command::new(&exe));
    let nothread = Workload::spawn(Command::new(&exe).arg("nothread"));
    std::thread::sleep(Duration::from_millis(300));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![looping.pid(), nothread.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    assert_eq!(stats.runtimes.get("python", "unsupported"), 0, "taken for 3.11: {stats:#?}");
    assert!(stats.runtimes.get("python", "tail_calls") > 0, "handed over: {stats:#?}");
    // The loop: bounded by the frame limit, no frame named from garbage.
    let looped: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == looping.pid()).collect();
    assert!(looped.len() >= MIN_SAMPLES, "{stats:#?}");
    for t in &looped {
        let frames = user_frames(t);
        // A stack cut at the frame limit ends in a `[truncated]` frame.
        let cut = t.frames.last().is_some_and(|f| f.is_truncated());
        assert!(frames.len() - usize::from(cut) <= MAX_USER_FRAMES, "{} frames", frames.len());
        assert!(frames.iter().filter(|f| is_python(f)).all(|f| f.name.is_none()), "named from garbage");
    }
    assert!(looped.iter().any(|t| user_frames(t).iter().any(is_python)), "the made-up frames were walked");
    assert_eq!(stats.runtimes.get("python", "frames_named"), 0, "{stats:#?}");
    assert!(stats.runtimes.get("python", "frames_unknown") > 0, "{stats:#?}");
    // No thread state: whole native stacks.
    assert!(stats.runtimes.get("python", "no_thread_state") > 0, "{stats:#?}");
    let chain = [
        S::Fn("_start".into()),
        S::ManyIn(LIBC.into()),
        S::Fn("main".into()),
        S::Fn("_PyEval_EvalFrameDefault".into()),
        S::Fn("fake_leaf".into()),
    ];
    let mut c = Completeness::default();
    for t in traces.iter().filter(|t| t.process.pid.0 == nothread.pid()) {
        let frames = user_frames(t);
        if frames.last().and_then(|f| f.name.as_deref()) != Some("fake_leaf") {
            continue;
        }
        // `ManyIn` refuses the evaluation loop; `Fn` names it.
        if matches_chain(&frames, &chain) {
            c.pass(|| show(&frames));
        } else {
            c.fail(|| show(&frames));
        }
    }
    assert_complete("made-up CPython without a thread state, native stacks", &c, &stats);
}

/// Short-lived CPython processes made by fork (no exec), and one started
/// after the agent by exec: their chains come through, and once they have
/// exited nothing made for them stays in the maps (their build's entry,
/// their threads' cached thread states, their prefixes and the files'
/// tables). The interpreter is a private copy of the system's, so that
/// its build is ours alone.
#[test]
fn short_lived_forked_and_exec_processes_then_maps_empty() {
    let _serial = serial();
    let dir = scratch_dir("forks");
    let Some((py, copy)) = python_copy(&dir, |_, bytes| bytes.push(0)) else { return };
    let file_id = profiler_elf::source::table_key_of_path(&copy).unwrap().bpf_id();
    // A parent forks 6 children that start working once the agent samples
    // (it selects them by pid; a fork is not an exec, so nothing else
    // would select them), work 1.5 s of CPU and exit.
    let mut parent = spawn_copy_piped(&copy, "forks.py", &["6", "1.5"]);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(parent.0.stdout.as_mut().unwrap()), &mut line).unwrap();
    let children: Vec<u32> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert_eq!(children.len(), 6);
    // And a program that becomes CPython once the agent started (exec),
    // runs a chain for 2 s of CPU and exits.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python/short_chain.py");
    let mut shell = Workload::spawn_gated(&format!(
        "PYTHONHOME=/usr PYTHONDONTWRITEBYTECODE=1 exec {} {} 2",
        copy.display(),
        script.display()
    ));
    let mut pids = children.clone();
    pids.extend([parent.0.id(), shell.pid()]);
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig {
        samples_per_second: HZ,
        pids: pids.clone(),
        unused_tables_budget_mib: 0,
        ..AgentConfig::default()
    };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    shell.release();
    parent.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    parent.0.wait().unwrap();
    // CPU time, however long a busy machine makes it take.
    wait_exited(shell.pid(), Duration::from_secs(120));
    // Everything made for them goes: the processes at once, the files
    // and the build's entry after the (zero) grace period, the threads'
    // entries at their exit.
    let ours = |keys: &(Vec<u64>, Vec<u64>)| {
        let files = keys.0.iter().filter(|&&k| k == file_id).count();
        let threads = keys.1.iter().filter(|&&k| pids.contains(&((k >> 32) as u32))).count();
        (files, threads)
    };
    let mut keys = agent.interpreter_map_keys().unwrap();
    let mut entries = agent.unwind_map_entries();
    let deadline = Instant::now() + Duration::from_secs(10);
    while (ours(&keys) != (0, 0) || entries != Some((0, 0, 0))) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        keys = agent.interpreter_map_keys().unwrap();
        entries = agent.unwind_map_entries();
    }
    agent.stop().expect("clean stop");
    let stats = agent.stats();
    assert_eq!(ours(&keys), (0, 0), "(python_files, python_thread_states) entries left; {stats:#?}");
    assert_eq!(entries, Some((0, 0, 0)), "(process ranges, delta_pages, file_deltas) entries left; {stats:#?}");

    let traces = std::mem::take(&mut *traces.lock().unwrap());
    // The copy is a file the native symbolizer sees for the first time:
    // its frames may be unnamed while it loads, so the root is matched by
    // file (_start is in the executable).
    let name = copy.file_name().unwrap().to_str().unwrap().to_string();
    let root = vec![S::In(name.clone()), S::ManyIn(any_of(&[name, LIBC.to_string()]))];
    let mut chain = root.clone();
    chain.extend(python_chain(&py, &["<module>", "spawn", "child_work", "child_leaf"].map(String::from)));
    let mut forked = Completeness::default();
    for &pid in &children {
        let c = completeness(&traces, pid, None, &chain);
        forked.at_leaf += c.at_leaf;
        forked.complete += c.complete;
        forked.elsewhere += c.elsewhere;
        forked.failures.extend(c.failures.into_iter().take(1));
    }
    assert_complete("6 forked CPython children", &forked, &stats);
    let mut chain = root;
    chain.extend(python_chain(&py, &["<module>", "f1", "f2", "f3"].map(String::from)));
    let c = completeness(&traces, shell.pid(), None, &chain);
    assert_complete("CPython started after the agent (exec)", &c, &stats);
}

struct Piped(std::process::Child);

impl Drop for Piped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_copy_piped(copy: &Path, script: &str, args: &[&str]) -> Piped {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python").join(script);
    Piped(
        Command::new(copy)
            .arg(path)
            .args(args)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONHOME", "/usr")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Measurement, not a CI test (`cargo test --release --test
/// python_unwinding -- --ignored --nocapture measure`): the BPF cost of a
/// sample (kernel run time of the sampling programs over the samples
/// sent; needs `sysctl kernel.bpf_stats_enabled=1`) for a native C chain
/// and for the Python chain of each interpreter.
#[test]
#[ignore]
fn measure_bpf_cost_per_sample() {
    let _serial = serial();
    let c = profiler_tests::build_workload(
        "gcc",
        "native_chain.c",
        &["-O2", "-fomit-frame-pointer", "-pthread"],
        "native_chain",
    );
    let mut runs: Vec<(String, Box<dyn Fn() -> Workload>)> =
        vec![("C native_chain".into(), Box::new(move || Workload::spawn(&mut Command::new(&c))))];
    for v in ["3.8.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0", "system"] {
        if let Some(py) = Python::find(v) {
            runs.push((format!("Python {v} chain.py"), Box::new(move || py.spawn("chain.py"))));
        }
    }
    // The system's interpreter unwound as native code only (its version
    // changed to 3.99): the Python unwinder's own share.
    let dir = scratch_dir("measure");
    if let Some((_, copy)) = python_copy(&dir, |real, bytes| {
        let elf = profiler_elf::ElfFile::open(real).unwrap();
        let offset = elf.vaddr_to_file_offset(elf.symbol_address("Py_Version").unwrap()).unwrap() as usize;
        bytes[offset..offset + 4].copy_from_slice(&0x036300f0u32.to_le_bytes());
    }) {
        runs.push(("Python system chain.py, native only".into(), Box::new(move || spawn_copy(&copy, "chain.py", &[]))));
    }
    for (what, spawn) in &runs {
        let w = spawn();
        std::thread::sleep(Duration::from_millis(300));
        let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
        let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(5))) else {
            return;
        };
        let frames: usize =
            traces.iter().map(|t| t.frames.iter().filter(|f| f.kind != FrameKind::Kernel).count()).sum();
        eprintln!(
            "{what}: {} samples, {:.1} user frames each ({} Python); BPF {:.0} ns per sample sent ({} runs, {} \
             sent)",
            stats.samples,
            frames as f64 / traces.len().max(1) as f64,
            stats.runtimes.get("python", "frames") / stats.samples.max(1),
            stats.bpf_run_time_ns as f64 / stats.samples.max(1) as f64,
            stats.bpf_runs,
            stats.samples
        );
    }
}
