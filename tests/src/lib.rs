//! Helpers for the end-to-end tests: running the real agent on a
//! workload, building workloads from the C sources in `workloads/`,
//! and deciding what to do when BPF is unavailable (fail under CI, skip
//! with a message elsewhere).
#![deny(missing_docs)]

use profiler_agent::{Agent, AgentConfig, StartError, Stats, TraceSink};
use profiler_trace::{FrameKind, Trace};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// Starts the real agent feeding `traces`; `None` as for [`profile`].
pub fn start_agent(config: AgentConfig, traces: Arc<Mutex<Vec<Trace>>>) -> Option<Agent> {
    match Agent::start_with_sinks(config, vec![Box::new(Collect(traces))]) {
        Ok(agent) => Some(agent),
        Err(StartError::Bpf(e)) if !in_ci() => {
            eprintln!("SKIPPED: BPF is not available here ({e}); under CI=true this fails");
            None
        }
        Err(e) => panic!("starting the agent: {e}"),
    }
}

/// The names of a trace's kernel frames, root first.
pub fn kernel_chain(trace: &Trace) -> Vec<&str> {
    let mut names: Vec<&str> =
        trace.frames.iter().filter(|f| f.kind == FrameKind::Kernel).filter_map(|f| f.function_name()).collect();
    names.reverse();
    names
}

/// Whether `needle` occurs in `haystack` as consecutive elements.
pub fn contains_in_order(haystack: &[&str], needle: &[&str]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
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

/// One element of an expected user stack, root first (see [`matches_chain`]).
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// One frame of this function (C++ names may go on with `(params)`).
    Fn(&'static str),
    /// One frame in this file (e.g. `libc.so.6`, `[vdso]`), named or not.
    In(&'static str),
    /// One or more frames in this file.
    ManyIn(&'static str),
    /// One or more frames of any kind.
    Any,
}

/// A user frame as the chain checks see it: function name and file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameDesc {
    /// The function, if named.
    pub name: Option<String>,
    /// The mapped file's name, if known.
    pub file: Option<String>,
}

impl std::fmt::Display for FrameDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.file) {
            (Some(n), _) => write!(f, "{n}"),
            (None, Some(file)) => write!(f, "{file}+?"),
            (None, None) => write!(f, "?"),
        }
    }
}

/// The user frames of a trace, root first.
pub fn user_frames(trace: &Trace) -> Vec<FrameDesc> {
    let mut out: Vec<FrameDesc> = trace
        .frames
        .iter()
        .filter(|f| f.kind != FrameKind::Kernel)
        .map(|f| FrameDesc {
            name: f.function_name().map(str::to_string),
            file: f.mapping.as_ref().map(|m| m.file_name().to_string()),
        })
        .collect();
    out.reverse();
    out
}

fn step_matches_one(step: Step, frame: &FrameDesc) -> bool {
    match step {
        Step::Fn(want) => frame
            .name
            .as_deref()
            .is_some_and(|n| n == want || (n.starts_with(want) && n[want.len()..].starts_with('('))),
        Step::In(file) | Step::ManyIn(file) => frame.file.as_deref() == Some(file),
        Step::Any => true,
    }
}

/// Whether `frames` (root first) is exactly `pattern`.
pub fn matches_chain(frames: &[FrameDesc], pattern: &[Step]) -> bool {
    let Some((&step, rest)) = pattern.split_first() else { return frames.is_empty() };
    let Some(first) = frames.first() else { return false };
    if !step_matches_one(step, first) {
        return false;
    }
    match step {
        Step::ManyIn(_) | Step::Any => (1..=frames.len())
            .take_while(|&n| step_matches_one(step, &frames[n - 1]))
            .any(|n| matches_chain(&frames[n..], rest)),
        _ => matches_chain(&frames[1..], rest),
    }
}

/// How many of a pid's samples at a leaf carry the whole expected chain.
#[derive(Debug)]
pub struct Completeness {
    /// Samples whose innermost user frame is the leaf, or is not resolved
    /// at all (a stack that could not even be attributed counts as a
    /// failure).
    pub at_leaf: usize,
    /// Of those, the ones matching the chain.
    pub complete: usize,
    /// A few that did not match, root first.
    pub failures: Vec<String>,
}

impl Completeness {
    /// `complete / at_leaf`.
    pub fn ratio(&self) -> f64 {
        if self.at_leaf == 0 {
            0.0
        } else {
            self.complete as f64 / self.at_leaf as f64
        }
    }
}

/// Checks the samples of `pid` whose leaf frame satisfies `leaf` against
/// `pattern` (root first).
pub fn completeness(traces: &[Trace], pid: u32, leaf: Step, pattern: &[Step]) -> Completeness {
    let mut c = Completeness { at_leaf: 0, complete: 0, failures: Vec::new() };
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let frames = user_frames(t);
        let Some(innermost) = frames.last() else { continue };
        let unresolved = innermost.file.is_none();
        if !unresolved && !step_matches_one(leaf, innermost) {
            continue;
        }
        c.at_leaf += 1;
        if matches_chain(&frames, pattern) {
            c.complete += 1;
        } else if c.failures.len() < 5 {
            c.failures.push(frames.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(";"));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: Option<&str>, file: &str) -> FrameDesc {
        FrameDesc { name: name.map(str::to_string), file: Some(file.to_string()) }
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
    }
}
