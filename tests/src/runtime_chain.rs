//! The chain tests of the runtimes whose unwinder records one frame kind
//! in place of their interpreter loop's native frames (Ruby, PHP, Perl):
//! a script under `workloads/<runtime>/` whose lines are marked
//! `<comment> line:<marker>`, run by the system's interpreter, profiled,
//! and its samples at the chain's leaf checked frame by frame (name, file,
//! line, and where native frames lie between). In a root file system
//! (`EP_RUNTIME_ROOT`'s: the runtime matrix) the interpreter is the
//! root's, started under chroot on a copy of the script in the root's
//! `/tmp` ([`crate::RuntimeRoot`]).

use crate::{in_ci, profile_with, serial};
use crate::{Completeness, RuntimeRoot, Workload};
use profiler_agent::{AgentConfig, Stats};
use profiler_trace::{FrameKind, Trace};
use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::MutexGuard;
use std::time::Duration;

/// The sampling frequency of the chain tests.
pub const HZ: u32 = 99;
/// How long each chain test profiles.
pub const SECONDS: u64 = 3;
/// The share of the samples at the leaf that must carry the whole chain.
pub const REQUIRED: f64 = 0.95;
/// The fewest samples at the leaf a chain test accepts.
pub const MIN_SAMPLES: usize = 25;

/// A runtime under test.
pub struct Runtime {
    /// Its name in the agent's runtime counters (`ruby`).
    pub name: &'static str,
    /// The kind of its frames.
    pub kind: FrameKind,
    /// Its frames' prefix in printed stacks (`rb`).
    pub prefix: &'static str,
    /// Its interpreter.
    pub binary: &'static str,
    /// The Debian package CI installs it from.
    pub package: &'static str,
    /// Arguments before the script in the chain tests.
    pub args: &'static [&'static str],
    /// What starts a comment in its scripts (`#`, `//`).
    pub comment: &'static str,
    /// Its counters that stay 0 in every chain test.
    pub zero_counters: &'static [&'static str],
}

/// A user frame, root first: one of the runtime's (`name`, source
/// `file`, `line`) or native.
#[derive(Debug)]
pub enum LangFrame {
    /// A frame of the runtime.
    Lang {
        /// Its function, if named.
        name: Option<String>,
        /// Its source file, if it has one.
        file: Option<String>,
        /// Its line (0 if none).
        line: u32,
    },
    /// A native frame.
    Native,
}

/// One expected frame of the runtime.
pub struct Expect {
    /// Its function.
    pub name: &'static str,
    /// Its script (`None`: a function written in C, no file).
    pub file: Option<PathBuf>,
    /// The lines it may be at.
    pub lines: RangeInclusive<u32>,
    /// Whether native frames lie between it and the frame before it (C
    /// code called back into the runtime: a new run of its loop).
    pub native_before: bool,
    /// A method of the runtime's core library ([`Expect::core`]).
    pub core: bool,
}

impl Expect {
    /// A frame of `file` at one line, right after the frame before it.
    pub fn at(name: &'static str, file: &Path, line: u32) -> Expect {
        Expect::within(name, file, line..=line)
    }

    /// A frame of `file` within `lines`, right after the frame before it.
    pub fn within(name: &'static str, file: &Path, lines: RangeInclusive<u32>) -> Expect {
        Expect { name, file: Some(file.to_path_buf()), lines, native_before: false, core: false }
    }

    /// A function written in C (no file, no line).
    pub fn builtin(name: &'static str) -> Expect {
        Expect { name, file: None, lines: 0..=0, native_before: false, core: false }
    }

    /// A method of the runtime's core library: written in C (no file, no
    /// line), or, in the releases that write it in the runtime's own
    /// language, in one of its prelude files (`<internal:kernel>`, any
    /// line: Ruby 3.3's `Kernel#loop`). The frame after it then follows
    /// it directly, whatever that one's `native_before` says.
    pub fn core(name: &'static str) -> Expect {
        Expect { core: true, ..Expect::builtin(name) }
    }

    /// This frame, with native frames before it.
    pub fn after_native(self) -> Expect {
        Expect { native_before: true, ..self }
    }
}

/// A test's script, and the lock that runs BPF tests one at a time.
pub struct Script {
    /// Its path as the runtime sees it (and names it in its frames).
    pub path: PathBuf,
    comment: &'static str,
    /// A copy made for the test (the host's path), removed with it.
    copy: Option<PathBuf>,
    _serial: MutexGuard<'static, ()>,
}

impl Script {
    /// Where the host sees it: the copy, if one was made.
    fn host_path(&self) -> &Path {
        self.copy.as_deref().unwrap_or(&self.path)
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if let Some(copy) = &self.copy {
            let _ = std::fs::remove_file(copy);
            // Empty once the test's last copy is gone.
            let _ = std::fs::remove_dir(copy.parent().unwrap());
        }
    }
}

impl Script {
    /// The line that ends with `<comment> line:<marker>`.
    pub fn line(&self, marker: &str) -> u32 {
        line_of(self.host_path(), self.comment, marker)
    }
}

/// The line of `script` that ends with `<comment> line:<marker>`.
fn line_of(script: &Path, comment: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(script).unwrap();
    let tag = format!("{comment} line:{marker}");
    let index = text.lines().position(|l| l.trim_end().ends_with(&tag)).unwrap_or_else(|| panic!("no {tag}"));
    index as u32 + 1
}

impl Runtime {
    /// Where it runs: `EP_RUNTIME_ROOT`'s root (the runtime matrix's), or
    /// this machine ([`RuntimeRoot::from_env`]).
    pub fn root(&self) -> RuntimeRoot {
        RuntimeRoot::from_env()
    }

    /// The start of a test of `workloads/<runtime>/<name>`: the serial
    /// lock ([`serial`]) and the script, or `None` when the interpreter
    /// is missing (a failure under CI=true).
    pub fn begin(&self, name: &str) -> Option<Script> {
        let lock = serial();
        if !self.installed() {
            return None;
        }
        let script = Script { path: self.script(name), comment: self.comment, copy: None, _serial: lock };
        if self.root().path().is_none() {
            return Some(script);
        }
        // The root's interpreter sees only the root: a copy in its /tmp.
        let text = std::fs::read_to_string(&script.path).unwrap();
        Some(self.with_copy(script, name, &text))
    }

    /// `script`, replaced by a copy holding `text` in the temporary
    /// directory the runtime sees ([`RuntimeRoot::temp_dir`]), under its
    /// own name (the tests' messages name scripts by file name).
    fn with_copy(&self, mut script: Script, name: &str, text: &str) -> Script {
        if let Some(old) = script.copy.take() {
            let _ = std::fs::remove_file(old);
        }
        let root = self.root();
        let dir = root.temp_dir().join(format!("ep-{}-{}", self.name, std::process::id()));
        let path = dir.join(name);
        let copy = root.host_path(&path);
        std::fs::create_dir_all(root.host_path(&dir)).unwrap();
        std::fs::write(&copy, text).unwrap();
        script.path = path;
        script.copy = Some(copy);
        script
    }

    /// [`Runtime::begin`] on a copy of `workloads/<runtime>/<name>` (in
    /// the temporary directory) with `lines` comment lines in place of
    /// its line marked `padding`: the code below lies that far down.
    pub fn begin_padded(&self, name: &str, lines: usize) -> Option<Script> {
        let script = self.begin(name)?;
        let padding = script.line("padding") as usize;
        let text = std::fs::read_to_string(script.host_path()).unwrap();
        let mut out: Vec<String> = text.lines().map(str::to_string).collect();
        out.splice(padding - 1..padding, (0..lines).map(|_| format!("{} padding", self.comment)));
        Some(self.with_copy(script, name, &(out.join("\n") + "\n")))
    }

    /// Whether the interpreter is here (in the root, if any); under
    /// CI=true it must be.
    pub fn installed(&self) -> bool {
        let binary = self.root().host_path(Path::new(self.binary));
        if binary.exists() {
            return true;
        }
        assert!(!in_ci(), "{} is required under CI=true (apt-get install {})", binary.display(), self.package);
        eprintln!("SKIPPED: {} is not installed; under CI=true this fails", binary.display());
        false
    }

    /// A command starting the interpreter ([`RuntimeRoot::command`]).
    pub fn command(&self) -> Command {
        self.root().command(self.binary)
    }

    /// A script of `workloads/<name>/`.
    pub fn script(&self, name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(self.name).join(name)
    }

    /// The user frames of a trace, root first.
    pub fn frames(&self, trace: &Trace) -> Vec<LangFrame> {
        let user = trace.frames.iter().rev().filter(|f| f.kind != FrameKind::Kernel);
        user.map(|f| {
            if f.kind != self.kind {
                return LangFrame::Native;
            }
            let l = f.lines.last();
            LangFrame::Lang {
                name: l.map(|l| l.function.to_string()),
                file: l.and_then(|l| l.file.as_deref().map(str::to_string)),
                line: l.map_or(0, |l| l.line),
            }
        })
        .collect()
    }

    /// `frames` for the log: `rb:Object#a:12;n;...`.
    pub fn show(&self, frames: &[LangFrame]) -> String {
        let one = |f: &LangFrame| match f {
            LangFrame::Lang { name, line, .. } => format!("{}:{}:{line}", self.prefix, name.as_deref().unwrap_or("?")),
            LangFrame::Native => "n".to_string(),
        };
        frames.iter().map(one).collect::<Vec<_>>().join(";")
    }

    /// Starts `script` with `extra` arguments before it, and gives it
    /// time to reach its chain.
    pub fn spawn(&self, extra: &[&str], script: &Path) -> Workload {
        let w = Workload::spawn(self.command().args(extra).arg(script));
        std::thread::sleep(Duration::from_millis(500));
        w
    }

    /// Runs `script` (with `extra` arguments before it) and profiles it
    /// for SECONDS at HZ; with `off_cpu`, every switch-out too.
    pub fn profile(&self, extra: &[&str], script: &Path, off_cpu: bool) -> (Workload, Vec<Trace>, Stats) {
        self.profile_for(SECONDS, extra, script, off_cpu)
    }

    /// [`Runtime::profile`] for `seconds` (a script taking two chains in
    /// turn gives each about half its samples).
    pub fn profile_for(
        &self,
        seconds: u64,
        extra: &[&str],
        script: &Path,
        off_cpu: bool,
    ) -> (Workload, Vec<Trace>, Stats) {
        let w = self.spawn(extra, script);
        let off_cpu_threshold = if off_cpu { 1.0 } else { 0.0 };
        let config =
            AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], off_cpu_threshold, ..AgentConfig::default() };
        let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(seconds))) else {
            panic!("no BPF here")
        };
        (w, traces, stats)
    }

    /// Checks the samples of thread `tid` of `pid` whose innermost frame
    /// of the runtime is the last of `expected`: at least MIN_SAMPLES,
    /// REQUIRED of them with exactly the expected chain (samples with no
    /// frame of the runtime, or an unnamed one, count as failures);
    /// frames recorded, and the runtime's `zero_counters` at 0.
    pub fn check(&self, what: &str, traces: &[Trace], stats: &Stats, pid: u32, tid: u32, expected: &[Expect]) {
        self.check_samples(what, traces, stats, pid, tid, expected, false);
    }

    /// [`Runtime::check`] for a server between requests: samples with no
    /// frame of the runtime (reading the next request) are not at the
    /// leaf, but at most a quarter as many as those at the leaf.
    pub fn check_served(&self, what: &str, traces: &[Trace], stats: &Stats, pid: u32, expected: &[Expect]) {
        self.check_samples(what, traces, stats, pid, pid, expected, true);
    }

    #[allow(clippy::too_many_arguments)]
    fn check_samples(
        &self,
        what: &str,
        traces: &[Trace],
        stats: &Stats,
        pid: u32,
        tid: u32,
        expected: &[Expect],
        idle_ok: bool,
    ) {
        let leaf = expected.last().unwrap().name;
        let mut c = Completeness::default();
        for t in traces.iter().filter(|t| t.process.pid.0 == pid && t.tid.0 == tid) {
            let frames = self.frames(t);
            let shown = || self.show(&frames);
            match innermost(&frames) {
                None if idle_ok => c.without_runtime += 1,
                Some(Some(n)) if n != leaf => c.other(shown),
                Some(Some(_)) if matches(&frames, expected) => c.pass(shown),
                // No frame of the runtime (the thread runs its code all
                // the time), an unnamed one, or a wrong chain.
                _ => c.fail(shown),
            }
        }
        if idle_ok {
            eprintln!("{what}: {} samples without a {} frame", c.without_runtime, self.name);
            assert!(c.without_runtime * 4 <= c.at_leaf, "{what}: {c:?}");
        }
        c.assert_whole(what, MIN_SAMPLES, REQUIRED, stats);
        assert!(stats.runtimes.get(self.name, "frames") > 0, "{what}: no {} frame: {:?}", self.name, stats.runtimes);
        for counter in self.zero_counters {
            assert_eq!(stats.runtimes.get(self.name, counter), 0, "{what}: {}.{counter}", self.name);
        }
    }

    /// The threads of `pid` whose innermost frame of the runtime is each
    /// of `leaves`: one thread per leaf, a different one each, none the
    /// main thread.
    pub fn leaf_threads<const N: usize>(&self, traces: &[Trace], pid: u32, leaves: [&str; N]) -> [u32; N] {
        let mut by_leaf: HashMap<String, HashSet<u32>> = HashMap::new();
        for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
            if let Some(Some(name)) = innermost(&self.frames(t)) {
                by_leaf.entry(name).or_default().insert(t.tid.0);
            }
        }
        let tids = leaves.map(|leaf| by_leaf.get(leaf).cloned().unwrap_or_default());
        let distinct: HashSet<u32> = tids.iter().flatten().copied().collect();
        assert!(tids.iter().all(|t| t.len() == 1) && distinct.len() == N, "one thread per leaf: {by_leaf:?}");
        assert!(!distinct.contains(&pid), "not the main thread");
        tids.map(|t| *t.iter().next().unwrap())
    }

    /// Profiles `script` (run with the runtime's `args`) and checks its
    /// main thread against `expected`.
    pub fn chain_test(&self, script: &Path, expected: &[Expect]) {
        let (w, traces, stats) = self.profile(self.args, script, false);
        let what = script.file_name().unwrap().to_string_lossy();
        self.check(&what, &traces, &stats, w.pid(), w.pid(), expected);
    }
}

/// The innermost frame of the runtime's name (`Some(None)`: unnamed).
pub fn innermost(frames: &[LangFrame]) -> Option<Option<String>> {
    frames.iter().rev().find_map(|f| match f {
        LangFrame::Lang { name, .. } => Some(name.clone()),
        LangFrame::Native => None,
    })
}

/// Whether `frames` are: native frames (the thread's root), the expected
/// frames of the runtime with native frames between them as said, then
/// native frames only (the interpreter's own, C code at the leaf).
pub fn matches(frames: &[LangFrame], expected: &[Expect]) -> bool {
    let lang: Vec<usize> = (0..frames.len()).filter(|&i| matches!(frames[i], LangFrame::Lang { .. })).collect();
    if lang.len() != expected.len() || lang.first().is_none_or(|&i| i == 0) {
        return false;
    }
    let in_prelude =
        |i: usize| matches!(&frames[i], LangFrame::Lang { file: Some(f), .. } if f.starts_with("<internal:"));
    lang.iter().zip(expected).enumerate().all(|(k, (&i, e))| {
        let LangFrame::Lang { name, file, line } = &frames[i] else { return false };
        let place = if e.core && in_prelude(i) {
            true
        } else {
            e.lines.contains(line) && file.as_deref().map(Path::new) == e.file.as_deref()
        };
        let gap =
            k == 0 || (i - lang[k - 1] > 1) == (e.native_before && !(expected[k - 1].core && in_prelude(lang[k - 1])));
        name.as_deref() == Some(e.name) && place && gap
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lang(name: &str, file: Option<&str>, line: u32) -> LangFrame {
        LangFrame::Lang { name: Some(name.to_string()), file: file.map(str::to_string), line }
    }

    #[test]
    fn chains_match_name_file_line_and_native_gaps() {
        let f = Path::new("/w/a.rb");
        let frames = vec![
            LangFrame::Native,
            lang("<main>", Some("/w/a.rb"), 3),
            lang("Array#sort", None, 0),
            LangFrame::Native,
            lang("cmp", Some("/w/a.rb"), 9),
            LangFrame::Native,
        ];
        let expected = || {
            vec![
                Expect::at("<main>", f, 3),
                Expect::builtin("Array#sort"),
                Expect::within("cmp", f, 8..=10).after_native(),
            ]
        };
        assert!(matches(&frames, &expected()));
        // Each field must match.
        let mut e = expected();
        e[2].native_before = false;
        assert!(!matches(&frames, &e));
        let mut e = expected();
        e[0].lines = 4..=4;
        assert!(!matches(&frames, &e));
        let mut e = expected();
        e[1].file = Some(f.to_path_buf());
        assert!(!matches(&frames, &e));
        // A core method in C, or in the runtime's prelude with the frame
        // after it directly above it.
        let core =
            || vec![Expect::at("<main>", f, 3), Expect::core("Kernel#loop"), Expect::at("b", f, 4).after_native()];
        let c = vec![
            LangFrame::Native,
            lang("<main>", Some("/w/a.rb"), 3),
            lang("Kernel#loop", None, 0),
            LangFrame::Native,
            lang("b", Some("/w/a.rb"), 4),
        ];
        assert!(matches(&c, &core()));
        let prelude = vec![
            LangFrame::Native,
            lang("<main>", Some("/w/a.rb"), 3),
            lang("Kernel#loop", Some("<internal:kernel>"), 187),
            lang("b", Some("/w/a.rb"), 4),
        ];
        assert!(matches(&prelude, &core()));
        // Not a prelude: a script's file is still checked.
        let elsewhere = vec![
            LangFrame::Native,
            lang("<main>", Some("/w/a.rb"), 3),
            lang("Kernel#loop", Some("/w/k.rb"), 187),
            lang("b", Some("/w/a.rb"), 4),
        ];
        assert!(!matches(&elsewhere, &core()));
        // In C, the native frames before the next one are still required.
        let direct = vec![
            LangFrame::Native,
            lang("<main>", Some("/w/a.rb"), 3),
            lang("Kernel#loop", None, 0),
            lang("b", Some("/w/a.rb"), 4),
        ];
        assert!(!matches(&direct, &core()));
        let mut e = expected();
        e[2].name = "cmq";
        assert!(!matches(&frames, &e));
        // One frame too few or too many; no native root.
        assert!(!matches(&frames, &expected()[..2]));
        assert!(!matches(&frames[1..], &expected()));
        assert_eq!(innermost(&frames), Some(Some("cmp".to_string())));
        assert_eq!(innermost(&[LangFrame::Native]), None);
    }
}
