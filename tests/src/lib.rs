//! Helpers for the end-to-end tests: running the real agent on a
//! workload, building workloads from the C sources in `workloads/`,
//! and deciding what to do when BPF is unavailable (fail under CI, skip
//! with a message elsewhere).
#![deny(missing_docs)]

use profiler_agent::{Agent, AgentConfig, StartError, Stats, TraceSink};
use profiler_trace::{FrameKind, Trace};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod runtime_chain;

/// Tests that load BPF run one at a time: they measure CPU shares, and
/// two agents sampling at once would compete for the 2 CPUs.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether we run under CI, where a missing BPF is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Where the runtimes under test run: this machine, or a root file
/// system (a Debian suite's, from `tests/runtimes/rootfs.sh`) whose
/// interpreters start under chroot, on copies of the scripts in its
/// `/tmp` ([`RuntimeScripts`]), while the agent profiles from the host.
/// A test takes the root from `EP_RUNTIME_ROOT` ([`RuntimeRoot::from_env`]:
/// the runtime version matrix, `make test-runtimes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeRoot(Option<PathBuf>);

impl RuntimeRoot {
    /// `EP_RUNTIME_ROOT`'s root; unset, this machine.
    pub fn from_env() -> RuntimeRoot {
        RuntimeRoot(std::env::var_os("EP_RUNTIME_ROOT").filter(|r| !r.is_empty()).map(PathBuf::from))
    }

    /// The root's directory on the host; `None`: this machine.
    pub fn path(&self) -> Option<&Path> {
        self.0.as_deref()
    }

    /// Where the host sees `path`, a path as the runtimes see it.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        match self.path() {
            Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
            None => path.to_path_buf(),
        }
    }

    /// Where the runtimes see `path`, a host path (the root's prefix
    /// removed; unchanged outside the root).
    pub fn runtime_path(&self, path: &Path) -> PathBuf {
        match self.path().and_then(|root| path.strip_prefix(root).ok()) {
            Some(inside) => Path::new("/").join(inside),
            None => path.to_path_buf(),
        }
    }

    /// A command starting `binary` (a path as the runtimes see it): under
    /// chroot in a root. chroot execs it, so the child's pid is the
    /// runtime's.
    pub fn command(&self, binary: &str) -> Command {
        match self.path() {
            Some(root) => {
                let mut command = Command::new("chroot");
                command.arg(root).arg(binary);
                command
            }
            None => Command::new(binary),
        }
    }

    /// The directory for the tests' temporary files, as the runtimes see
    /// it: the root's `/tmp`, or the host's.
    pub fn temp_dir(&self) -> PathBuf {
        match self.path() {
            Some(_) => PathBuf::from("/tmp"),
            None => std::env::temp_dir(),
        }
    }
}

/// The directory of `EP_RUNTIME_ROOT`'s root (see [`RuntimeRoot`]);
/// `None`: the host's runtimes.
pub fn runtime_root() -> Option<PathBuf> {
    RuntimeRoot::from_env().0
}

/// [`RuntimeRoot::host_path`] of `EP_RUNTIME_ROOT`'s root.
pub fn host_path(path: &Path) -> PathBuf {
    RuntimeRoot::from_env().host_path(path)
}

/// [`RuntimeRoot::runtime_path`] of `EP_RUNTIME_ROOT`'s root.
pub fn runtime_path(path: &Path) -> PathBuf {
    RuntimeRoot::from_env().runtime_path(path)
}

/// [`RuntimeRoot::command`] of `EP_RUNTIME_ROOT`'s root.
pub fn runtime_command(binary: &str) -> Command {
    RuntimeRoot::from_env().command(binary)
}

/// [`RuntimeRoot::temp_dir`] of `EP_RUNTIME_ROOT`'s root.
pub fn runtime_temp_dir() -> PathBuf {
    RuntimeRoot::from_env().temp_dir()
}

/// The scripts of `workloads/<dir>/` where the runtimes see them: in a
/// [`RuntimeRoot`]'s root, copies in its `/tmp`, removed when dropped;
/// the originals otherwise.
pub struct RuntimeScripts {
    /// The directory as the runtimes see it.
    dir: PathBuf,
    /// The copy (the host's path), if one was made.
    copy: Option<PathBuf>,
}

impl RuntimeScripts {
    /// The scripts of `workloads/<dir>/`, for `EP_RUNTIME_ROOT`'s root.
    pub fn new(dir: &str) -> RuntimeScripts {
        RuntimeScripts::in_root(&RuntimeRoot::from_env(), dir)
    }

    /// The scripts of `workloads/<dir>/`, for `root`.
    pub fn in_root(root: &RuntimeRoot, dir: &str) -> RuntimeScripts {
        let original = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(dir);
        if root.path().is_none() {
            return RuntimeScripts { dir: original, copy: None };
        }
        // Each its own copy: two sets of the same scripts in one root
        // (tests of one binary run in parallel) must not remove each
        // other's.
        static COPIES: AtomicUsize = AtomicUsize::new(0);
        let n = COPIES.fetch_add(1, Ordering::Relaxed);
        let seen = root.temp_dir().join(format!("ep-{dir}-{}-{n}", std::process::id()));
        let copy = root.host_path(&seen);
        std::fs::create_dir_all(&copy).unwrap();
        for entry in std::fs::read_dir(&original).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
        RuntimeScripts { dir: seen, copy: Some(copy) }
    }

    /// Script `name`'s path as the runtimes see it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for RuntimeScripts {
    fn drop(&mut self) {
        if let Some(copy) = &self.copy {
            let _ = std::fs::remove_dir_all(copy);
        }
    }
}

/// Prints the line `make test-runtimes` collects: `MATRIX chain=WHAT
/// complete=PCT samples=N` (WHAT with spaces as `_`).
pub fn print_matrix(what: &str, complete: usize, at_leaf: usize) {
    let pct = if at_leaf == 0 { 0.0 } else { 100.0 * complete as f64 / at_leaf as f64 };
    eprintln!("MATRIX chain={} complete={pct:.1} samples={at_leaf}", what.replace(' ', "_"));
}

/// A child process killed (and reaped) when dropped.
pub struct Workload {
    child: Child,
}

impl Workload {
    /// Starts `command`.
    pub fn spawn(command: &mut Command) -> Workload {
        let child = command.spawn().unwrap_or_else(|e| panic!("spawning {command:?}: {e}"));
        Workload { child }
    }

    /// Starts `sh -c "read _; <script>"`: the shell waits on its stdin
    /// until [`Workload::release`], so that `script` (typically an `exec`)
    /// runs after whatever the test starts in between (the agent), however
    /// long that takes on a loaded machine.
    pub fn spawn_gated(script: &str) -> Workload {
        Workload::spawn(Command::new("sh").arg("-c").arg(format!("read _; {script}")).stdin(Stdio::piped()))
    }

    /// Lets a [`Workload::spawn_gated`] shell exec its program.
    pub fn release(&mut self) {
        let mut stdin = self.child.stdin.take().expect("a gated workload, released once");
        stdin.write_all(b"go\n").expect("releasing the gated workload");
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until process `pid` has exited (gone, or a zombie not reaped
/// yet), for `timeout` at most: a workload's CPU time takes however long
/// a busy machine makes it.
pub fn wait_exited(pid: u32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Compiles `workloads/<source>` with gcc and `flags` into a fresh
/// directory; returns the executable's path (named after the source).
pub fn build_c_workload(source: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(source);
    let stem = Path::new(source).file_stem().unwrap().to_str().unwrap();
    let dir = std::env::temp_dir().join(format!("ep-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(stem);
    let output = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running gcc: {e}"));
    assert!(
        output.status.success(),
        "gcc {flags:?} {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

struct Collect(Arc<Mutex<Vec<Trace>>>);

impl TraceSink for Collect {
    fn on_trace(&mut self, trace: &Trace) {
        self.0.lock().unwrap().push(trace.clone());
    }
}

/// What one profiling run gave.
pub struct Profile {
    /// Every trace, in arrival order.
    pub traces: Vec<Trace>,
    /// CPU time (user + system) each profiled pid used while sampling
    /// was attached: the ground truth sample counts are compared with.
    pub cpu_seconds: Vec<(u32, f64)>,
}

impl Profile {
    /// Samples a pid should get at `hz`: its CPU time × frequency.
    pub fn expected_samples(&self, pid: u32, hz: u32) -> f64 {
        let cpu = self.cpu_seconds.iter().find(|(p, _)| *p == pid).map(|(_, c)| *c).unwrap_or(0.0);
        cpu * f64::from(hz)
    }
}

/// CPU time (utime + stime) of a process, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0.0 };
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // Fields 14 and 15 (utime, stime); `rest` starts at field 3.
    (ticks(11) + ticks(12)) as f64 / hz
}

/// Profiles `pids` for `duration` at `hz` with the real agent and
/// returns every trace. `None` means BPF is unavailable outside CI: the
/// caller returns (the reason was printed). Under CI that case panics.
pub fn profile(pids: &[u32], hz: u32, duration: Duration) -> Option<Profile> {
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: hz, pids: pids.to_vec(), ..AgentConfig::default() };
    let agent = match Agent::start_with_sinks(config, vec![Box::new(Collect(traces.clone()))]) {
        Ok(agent) => agent,
        Err(StartError::Bpf(e)) if !in_ci() => {
            eprintln!("SKIPPED: BPF is not available here ({e}); under CI=true this fails");
            return None;
        }
        Err(e) => panic!("starting the agent: {e}"),
    };
    let cpu_before: Vec<f64> = pids.iter().map(|&p| cpu_seconds(p)).collect();
    std::thread::sleep(duration);
    let cpu_seconds = pids.iter().zip(cpu_before).map(|(&p, before)| (p, cpu_seconds(p) - before)).collect();
    agent.stop().expect("reader ran without error");
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    Some(Profile { traces, cpu_seconds })
}

/// Starts the real agent with `config`, runs `during` while it samples,
/// stops it and returns every trace and the final stats. `None` as for
/// [`profile`].
pub fn profile_with(config: AgentConfig, during: impl FnOnce(&Agent)) -> Option<(Vec<Trace>, Stats)> {
    let traces = Arc::new(Mutex::new(Vec::new()));
    let agent = start_agent(config, traces.clone())?;
    during(&agent);
    agent.stop().expect("reader ran without error");
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    Some((traces, stats))
}

/// As [`profile_with`], profiling at least `at_least` and then until
/// `enough` holds for the traces so far, `at_most` in all (see
/// [`wait_for_traces`]).
pub fn profile_until(
    config: AgentConfig,
    at_least: Duration,
    at_most: Duration,
    enough: impl FnMut(&[Trace]) -> bool,
) -> Option<(Vec<Trace>, Stats)> {
    let traces = Arc::new(Mutex::new(Vec::new()));
    let agent = start_agent(config, traces.clone())?;
    wait_for_traces(&traces, at_least, at_most, enough);
    agent.stop().expect("reader ran without error");
    let stats = agent.stats();
    assert_eq!(stats.samples_lost + stats.samples_dropped, 0, "samples lost: {stats:?}");
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    Some((traces, stats))
}

/// Starts the real agent feeding `traces`; `None` as for [`profile`].
pub fn start_agent(config: AgentConfig, traces: Arc<Mutex<Vec<Trace>>>) -> Option<Agent> {
    start_agent_with(config, Box::new(Collect(traces)))
}

/// [`start_agent`] with a sink of the caller's.
pub fn start_agent_with(config: AgentConfig, sink: Box<dyn TraceSink>) -> Option<Agent> {
    match Agent::start_with_sinks(config, vec![sink]) {
        Ok(agent) => Some(agent),
        Err(StartError::Bpf(e)) if !in_ci() => {
            eprintln!("SKIPPED: BPF is not available here ({e}); under CI=true this fails");
            None
        }
        Err(e) => panic!("starting the agent: {e}"),
    }
}

/// Waits at least `at_least` and then until `enough` holds for the traces
/// collected so far, `at_most` in all; returns whether it held. On a busy
/// machine a workload gets the CPU it gets: a test waits for the samples
/// it asserts on instead of sleeping a fixed time (and its assertions say
/// what is missing when they never come).
pub fn wait_for_traces(
    traces: &Mutex<Vec<Trace>>,
    at_least: Duration,
    at_most: Duration,
    mut enough: impl FnMut(&[Trace]) -> bool,
) -> bool {
    let start = Instant::now();
    std::thread::sleep(at_least.min(at_most));
    loop {
        if enough(&traces.lock().unwrap_or_else(|p| p.into_inner())) {
            return true;
        }
        if start.elapsed() >= at_most {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Compiles `workloads/<source>` with `compiler` (`gcc`, `g++`, `rustc`)
/// and `flags` into this test run's directory as `out_name`.
pub fn build_workload(compiler: &str, source: &str, flags: &[&str], out_name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(source);
    let dir = std::env::temp_dir().join(format!("ep-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(out_name);
    let output = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(
        output.status.success(),
        "{compiler} {flags:?} {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// One element of an expected stack, root first (see [`matches_chain`]).
/// "Compiled" frames are kernel, native and Go frames: those no
/// interpreter unwinder made. `S` is the string type of names and file
/// patterns (`&'static str`, or `String` for names built at run time).
///
/// A file pattern is a file name (`libc.so.6`, `[vdso]`), or a name's
/// start followed by `*` (`libffi.so.*`), or several of these separated by
/// `|` (`python3.11|libc.so.6`).
#[derive(Clone, Debug)]
pub enum Step<S = &'static str> {
    /// One compiled frame of this function (C++ names may go on with
    /// `(params)`).
    Fn(S),
    /// One CPython frame of this function.
    Py(S),
    /// One compiled frame in a file of this pattern, named or not.
    In(S),
    /// One or more compiled frames, each in a file of this pattern.
    ManyIn(S),
    /// Zero or more compiled frames, each in a file of this pattern.
    OptIn(S),
    /// One or more compiled frames of any file.
    Any,
    /// Zero or more compiled frames of any file.
    AnyOrNone,
}

/// The chain of a C program's main thread: `_start`, libc's two frames
/// (matched by file: their names depend on whether the host has libc's
/// debug symbols, `__libc_start_main_impl`, or only .dynsym, one
/// unnamed), `main`, then `below_main`.
pub fn c_main_thread(below_main: &[Step]) -> Vec<Step> {
    let mut chain = vec![Step::Fn("_start"), Step::In("libc.so.6"), Step::In("libc.so.6"), Step::Fn("main")];
    chain.extend_from_slice(below_main);
    chain
}

/// Functions that run an interpreter's code: where the interpreter's
/// unwinder works they become the interpreted frames, so the file steps
/// (`In`, `ManyIn`, `OptIn`) never match them; a test that expects one
/// to stay compiled names it with `Fn`.
const INTERPRETER_LOOPS: &[&str] = &["_PyEval_EvalFrameDefault"];

/// A frame as the chain checks see it: its kind, function name and file
/// name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameDesc {
    /// Which unwinder made the frame.
    pub kind: FrameKind,
    /// The function, if named.
    pub name: Option<String>,
    /// The mapped file's name, if known.
    pub file: Option<String>,
}

impl FrameDesc {
    fn of(frame: &profiler_trace::Frame) -> FrameDesc {
        FrameDesc {
            kind: frame.kind,
            name: frame.function_name().map(str::to_string),
            file: frame.mapping.as_ref().map(|m| m.file_name().to_string()),
        }
    }

    /// Whether an interpreter's unwinder made this frame (CPython, ...),
    /// as opposed to kernel, native and Go code.
    pub fn is_interpreted(&self) -> bool {
        !matches!(self.kind, FrameKind::Kernel | FrameKind::Native | FrameKind::Go)
    }
}

impl std::fmt::Display for FrameDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.file) {
            _ if self.kind == FrameKind::CPython => write!(f, "py:{}", self.name.as_deref().unwrap_or("?")),
            (Some(n), _) => write!(f, "{n}"),
            (None, Some(file)) => write!(f, "{file}+?"),
            (None, None) => write!(f, "?"),
        }
    }
}

/// The user frames of a trace, root first.
pub fn user_frames(trace: &Trace) -> Vec<FrameDesc> {
    trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel).map(FrameDesc::of).collect()
}

/// The kernel frames of a trace, root first.
pub fn kernel_frames(trace: &Trace) -> Vec<FrameDesc> {
    trace.frames.iter().rev().filter(|f| f.kind == FrameKind::Kernel).map(FrameDesc::of).collect()
}

/// Whether `file` is matched by `pattern` (see [`Step`]).
fn file_matches(pattern: &str, file: &str) -> bool {
    pattern.split('|').any(|p| match p.strip_suffix('*') {
        Some(start) => file.starts_with(start),
        None => file == p,
    })
}

fn step_matches_one<S: AsRef<str>>(step: &Step<S>, frame: &FrameDesc) -> bool {
    let compiled = !frame.is_interpreted();
    let name = frame.name.as_deref();
    match step {
        Step::Fn(want) => {
            let want = want.as_ref();
            compiled && name.is_some_and(|n| n == want || (n.starts_with(want) && n[want.len()..].starts_with('(')))
        }
        Step::Py(want) => frame.kind == FrameKind::CPython && name == Some(want.as_ref()),
        Step::In(pattern) | Step::ManyIn(pattern) | Step::OptIn(pattern) => {
            compiled
                && !name.is_some_and(|n| INTERPRETER_LOOPS.contains(&n))
                && frame.file.as_deref().is_some_and(|file| file_matches(pattern.as_ref(), file))
        }
        Step::Any | Step::AnyOrNone => compiled,
    }
}

/// Whether `frames` (root first) are exactly `pattern`, every frame
/// matched by one step. The one matcher every chain check goes through.
pub fn matches_chain<S: AsRef<str>>(frames: &[FrameDesc], pattern: &[Step<S>]) -> bool {
    let Some((step, rest)) = pattern.split_first() else { return frames.is_empty() };
    let min = match step {
        Step::OptIn(_) | Step::AnyOrNone => 0,
        Step::ManyIn(_) | Step::Any => 1,
        Step::Fn(_) | Step::Py(_) | Step::In(_) => {
            return frames.first().is_some_and(|f| step_matches_one(step, f)) && matches_chain(&frames[1..], rest);
        }
    };
    // A repeated step: every run length it can take, shortest first.
    let run = frames.iter().take_while(|f| step_matches_one(step, f)).count();
    (min..=run).any(|n| matches_chain(&frames[n..], rest))
}

/// How many of a pid's samples at a leaf carry the whole expected chain.
#[derive(Debug, Default)]
pub struct Completeness {
    /// Samples whose innermost user frame is the leaf, or is not resolved
    /// at all (a stack that could not even be attributed counts as a
    /// failure).
    pub at_leaf: usize,
    /// Of those, the ones matching the chain.
    pub complete: usize,
    /// A few that did not match, root first.
    pub failures: Vec<String>,
    /// Samples whose innermost frame of the runtime is another function
    /// (not counted at the leaf).
    pub elsewhere: usize,
    /// One of them, for the log.
    pub elsewhere_example: Option<String>,
    /// Samples without a frame of the runtime that a test lets pass (not
    /// counted at the leaf).
    pub without_runtime: usize,
    /// Samples at the leaf with a frame inlined into another one.
    pub inlined: usize,
    /// One whole stack at the leaf, for the log.
    pub example: Option<String>,
}

impl Completeness {
    /// A sample at the leaf with the whole chain (`shown`: the stack).
    pub fn pass(&mut self, shown: impl FnOnce() -> String) {
        self.at_leaf += 1;
        self.complete += 1;
        if self.example.is_none() {
            self.example = Some(shown());
        }
    }

    /// A sample at the leaf without the whole chain.
    pub fn fail(&mut self, shown: impl FnOnce() -> String) {
        self.at_leaf += 1;
        if self.failures.len() < 6 {
            self.failures.push(shown());
        }
    }

    /// A sample whose innermost frame of the runtime is another function.
    pub fn other(&mut self, shown: impl FnOnce() -> String) {
        self.elsewhere += 1;
        if self.elsewhere_example.is_none() {
            self.elsewhere_example = Some(shown());
        }
    }

    /// Asserts at least `min_samples` samples at the leaf, `required` of
    /// them with the whole chain; prints the figures and, on failure, a few
    /// stacks that miss the chain and the agent's `stats`.
    pub fn assert_whole(&self, what: &str, min_samples: usize, required: f64, stats: &Stats) {
        self.print(what, stats);
        self.check_whole(what, min_samples, required, stats);
    }

    /// Prints the figures (`completeness WHAT: complete/at_leaf = ...`).
    pub fn print(&self, what: &str, stats: &Stats) {
        let mut also = Vec::new();
        if self.elsewhere > 0 {
            also.push(format!("{} samples elsewhere", self.elsewhere));
        }
        if self.inlined > 0 {
            also.push(format!("{} with inlined frames", self.inlined));
        }
        let also = if also.is_empty() { String::new() } else { format!(" ({})", also.join(", ")) };
        eprintln!(
            "completeness {what}: {}/{} = {:.1}%{also}{}",
            self.complete,
            self.at_leaf,
            100.0 * self.ratio(),
            bpf_cost(stats)
        );
        print_matrix(what, self.complete, self.at_leaf);
    }

    /// [`Completeness::assert_whole`]'s assertions, without the print.
    pub fn check_whole(&self, what: &str, min_samples: usize, required: f64, stats: &Stats) {
        assert!(self.at_leaf >= min_samples, "{what}: only {} samples at the leaf; {stats:#?}", self.at_leaf);
        assert!(
            self.ratio() >= required,
            "{what}: {} of {} samples at the leaf carry the whole chain ({:.1}%); some that do not \
             (root first):\n{}\n{stats:#?}",
            self.complete,
            self.at_leaf,
            100.0 * self.ratio(),
            self.failures.join("\n")
        );
    }

    /// `complete / at_leaf`.
    pub fn ratio(&self) -> f64 {
        if self.at_leaf == 0 {
            0.0
        } else {
            self.complete as f64 / self.at_leaf as f64
        }
    }
}

/// The BPF time per sample of a run, for the log (`; BPF 1234 ns per
/// sample (all processes)`), or nothing when the kernel did not count it.
pub fn bpf_cost(stats: &Stats) -> String {
    if stats.bpf_runs == 0 {
        return String::new();
    }
    format!("; BPF {:.0} ns per sample (all processes)", stats.bpf_run_time_ns as f64 / stats.bpf_runs as f64)
}

/// The report of a chain test of a runtime whose unwinder attaches to
/// processes (`v8`, `hotspot`): [`print_runtime`], then
/// [`assert_runtime`].
pub fn report_runtime(what: &str, runtime: &str, c: &Completeness, min_samples: usize, required: f64, stats: &Stats) {
    print_runtime(what, runtime, c, stats);
    assert_runtime(what, runtime, c, min_samples, required, stats);
}

/// Prints the figures, an example, a few failures, the runtime's counters
/// and how the stacks stopped.
pub fn print_runtime(what: &str, runtime: &str, c: &Completeness, stats: &Stats) {
    c.print(what, stats);
    eprintln!("  e.g. {}", c.example.as_deref().unwrap_or("-"));
    eprintln!("  elsewhere e.g. {}", c.elsewhere_example.as_deref().unwrap_or("-"));
    for f in &c.failures {
        let tail = f.len().saturating_sub(700);
        eprintln!("  failed: ...{}", f.get(tail..).unwrap_or(f));
    }
    let counters = stats.runtimes.0.iter().find(|(r, _)| *r == runtime).map(|(_, c)| c.clone());
    eprintln!("  {runtime} counters: {counters:?}");
    eprintln!("  stacks stopped: {:?}", stats.unwind_stopped);
}

/// Asserts that frames of `runtime` were recorded and mostly named and
/// that nothing was unsupported, then [`Completeness::check_whole`].
pub fn assert_runtime(what: &str, runtime: &str, c: &Completeness, min_samples: usize, required: f64, stats: &Stats) {
    let counter = |name| stats.runtimes.get(runtime, name);
    assert!(counter("frames") > 0 && counter("tail_calls") > 0, "{what}: no {runtime} frame recorded: {stats:#?}");
    assert!(counter("frames_named") >= counter("frames_unknown"), "{what}: mostly unnamed: {stats:#?}");
    assert_eq!(counter("unsupported") + counter("attach_failures"), 0, "{what}: {stats:#?}");
    c.check_whole(what, min_samples, required, stats);
}

/// Checks the samples of `pid` whose leaf frame satisfies `leaf` against
/// `pattern` (root first).
pub fn completeness<S: AsRef<str>>(traces: &[Trace], pid: u32, leaf: Step<S>, pattern: &[Step<S>]) -> Completeness {
    let mut c = Completeness::default();
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let frames = user_frames(t);
        let Some(innermost) = frames.last() else { continue };
        let unresolved = innermost.file.is_none();
        if !unresolved && !step_matches_one(&leaf, innermost) {
            continue;
        }
        let shown = || frames.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(";");
        if matches_chain(&frames, pattern) {
            c.pass(shown);
        } else {
            c.fail(shown);
        }
    }
    c
}

/// The now of samples' timestamps (`Trace::timestamp_unix_ns`).
fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos() as u64
}

/// The two windows of a closing measurement (issues 12, 13), in sample
/// timestamps: starts the program's chains by creating `go`, then waits
/// out cold (the first `cold`) and warm (`warm` from `warm_after` after
/// the start); returns once both have passed.
pub fn cold_and_warm_windows(
    go: &Path,
    cold: Duration,
    warm_after: Duration,
    warm: Duration,
) -> (std::ops::Range<u64>, std::ops::Range<u64>) {
    let started = std::time::Instant::now();
    let cold_from = unix_ns();
    std::fs::write(go, b"").expect("the go file");
    std::thread::sleep(cold);
    let cold_window = cold_from..unix_ns();
    std::thread::sleep(warm_after.saturating_sub(started.elapsed()));
    let warm_from = unix_ns();
    std::thread::sleep(warm);
    (cold_window, warm_from..unix_ns())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: Option<&str>, file: &str) -> FrameDesc {
        FrameDesc { kind: FrameKind::Native, name: name.map(str::to_string), file: Some(file.to_string()) }
    }

    fn py(name: &str) -> FrameDesc {
        FrameDesc { kind: FrameKind::CPython, name: Some(name.to_string()), file: None }
    }

    fn kernel(name: &str) -> FrameDesc {
        FrameDesc { kind: FrameKind::Kernel, name: Some(name.to_string()), file: None }
    }

    #[test]
    fn chains_match_exactly() {
        let frames = vec![
            f(Some("_start"), "a"),
            f(None, "libc.so.6"),
            f(None, "libc.so.6"),
            f(Some("main"), "a"),
            f(Some("Circle::area() const"), "a"),
        ];
        use Step::*;
        assert!(matches_chain(&frames, &[Fn("_start"), ManyIn("libc.so.6"), Fn("main"), Fn("Circle::area")]));
        assert!(matches_chain(&frames, &[Fn("_start"), Any, Fn("Circle::area")]));
        assert!(!matches_chain(&frames, &[Fn("_start"), In("libc.so.6"), Fn("main"), Fn("Circle::area")]));
        assert!(!matches_chain(&frames, &[Fn("_start"), ManyIn("libc.so.6"), Fn("main")]));
        assert!(!matches_chain(&frames[1..], &[Fn("_start"), Any]));
        assert!(!matches_chain(&frames, &[Fn("_start"), Any, Fn("Circle::are")]));
        // Zero-or-more steps may be empty; one-or-more ones may not.
        assert!(matches_chain(
            &frames,
            &[Fn("_start"), ManyIn("libc.so.6"), Fn("main"), Fn("Circle::area"), AnyOrNone]
        ));
        assert!(!matches_chain(&frames, &[Fn("_start"), ManyIn("libc.so.6"), Fn("main"), Fn("Circle::area"), Any]));
        assert!(matches_chain(&frames, &[Fn("_start"), OptIn("x"), ManyIn("libc.so.6"), Fn("main"), Any]));
        assert!(!matches_chain(
            &frames,
            &[Fn("_start"), OptIn("libc.so.6"), ManyIn("libc.so.6"), ManyIn("libc.so.6"), ManyIn("libc.so.6"), Any]
        ));
        assert!(matches_chain(&frames, &[Fn("_start"), OptIn("libc.so.6"), ManyIn("libc.so.6"), Fn("main"), Any]));
    }

    #[test]
    fn file_patterns() {
        use Step::*;
        let frames = vec![f(None, "python3.11"), f(None, "libc.so.6"), f(None, "libffi.so.8.1.2")];
        assert!(matches_chain(&frames, &[ManyIn("python3.11|libc.so.6"), In("libffi.so.*")]));
        assert!(!matches_chain(&frames, &[ManyIn("python3.11|libc.so.6"), In("libffi.so")]));
        assert!(!matches_chain(&frames, &[ManyIn("python3.1|libc.so.6"), In("libffi.so.*")]));
        assert!(!matches_chain(&frames, &[ManyIn("python3.11|libc.so.7*"), In("libffi.so.*")]));
        assert!(matches_chain(&frames, &[In("python3.*"), In("libc.so.6"), In("libffi.so.*")]));
    }

    /// Python frames are matched by `Py` only; the evaluation loop by
    /// `Fn` only: where the Python unwinder works it is gone.
    #[test]
    fn interpreted_frames_and_interpreter_loops() {
        use Step::*;
        let mut eval = f(Some("_PyEval_EvalFrameDefault"), "python3.11");
        let frames = vec![f(Some("_start"), "python3.11"), f(None, "python3.11"), py("<module>"), py("f1")];
        assert!(matches_chain(&frames, &[In("python3.11"), OptIn("python3.11"), Py("<module>"), Py("f1")]));
        assert!(matches_chain(&frames, &[Fn("_start"), Any, Py("<module>"), OptIn("x"), Py("f1"), AnyOrNone]));
        assert!(!matches_chain(&frames, &[Fn("_start"), Any, Fn("<module>"), Py("f1")]));
        assert!(!matches_chain(&frames, &[Fn("_start"), Any, Py("f1")]));
        assert!(!matches_chain(&frames, &[Fn("_start"), In("python3.11"), Py("<module>"), AnyOrNone]));
        let with_loop = vec![frames[0].clone(), eval.clone(), frames[2].clone()];
        assert!(!matches_chain(&with_loop, &[Fn("_start"), ManyIn("python3.11"), Py("<module>")]));
        assert!(matches_chain(&with_loop, &[Fn("_start"), Fn("_PyEval_EvalFrameDefault"), Py("<module>")]));
        assert!(matches_chain(&with_loop, &[Fn("_start"), Any, Py("<module>")]));
        eval.kind = FrameKind::CPython;
        assert!(!matches_chain(&[eval], &[Fn("_PyEval_EvalFrameDefault")]));
        // Names built at run time.
        let owned: Vec<Step<String>> = vec![Fn("_start".into()), Any, Py("<module>".into()), Py("f1".into())];
        assert!(matches_chain(&frames, &owned));
    }

    #[test]
    fn kernel_chains_inside_a_stack() {
        use Step::*;
        let frames =
            vec![kernel("entry_SYSCALL_64"), kernel("ksys_read"), kernel("vfs_read"), kernel("read_zero"), kernel("x")];
        let read = [AnyOrNone, Fn("ksys_read"), Fn("vfs_read"), Fn("read_zero"), AnyOrNone];
        assert!(matches_chain(&frames, &read));
        assert!(matches_chain(&frames[1..4], &read));
        assert!(!matches_chain(&[frames[1].clone(), frames[0].clone(), frames[2].clone(), frames[3].clone()], &read));
        assert!(!matches_chain(&frames[..3], &read));
    }
}
