//! Processes any local user can start, shaped to make the agent's naming
//! of their frames expensive (docs/untrusted-input.md, "Process
//! memory"): the agent profiles them beside genuine workloads, their
//! frames go unnamed once they cost more than their budget, they are
//! told once, and the genuine workloads keep their whole named chains.
//! Each run prints the agent's CPU time and peak memory for the record
//! (the agent as users run it is measured by `make bench-hostile`;
//! never asserted).

use profiler_agent::{AgentConfig, Stats, TraceSink};
use profiler_tests::{in_ci, serial, start_agent_with, user_frames, wait_for_traces, Workload};
use profiler_trace::{FrameKind, Trace};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HZ: u32 = 99;
/// The share of a genuine workload's samples at its leaf that must carry
/// its whole chain.
const REQUIRED: f64 = 0.95;
/// The unprivileged user the crafted processes run as.
const NOBODY: u32 = 65534;

/// Builds `workloads/<source>` as `<name>` in a directory of its own that
/// any user can read.
fn build_as(source: &str, name: &str) -> PathBuf {
    build_in(&own_dir(name), source, name, &[])
}

/// A directory of this test run's own, named after `name`, that any
/// user can read.
fn own_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ep-hostile-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Builds `workloads/<source>` as `dir/<name>`, `flags` (libraries)
/// after the source.
fn build_in(dir: &Path, source: &str, name: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(source);
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-rdynamic", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .output()
        .unwrap_or_else(|e| panic!("running gcc: {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// The agent's process (this test's): CPU seconds so far and peak RSS.
fn own_cpu_and_peak() -> (f64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    (profiler_tests::cpu_seconds(std::process::id()), hwm)
}

/// The share of `pid`'s samples whose innermost `kind` frame is `chain`'s
/// last function that carry all of `chain`'s functions in order (root
/// first, each named, native frames between them allowed), and how many such samples
/// there were.
fn chain_share(traces: &[Trace], pid: u32, kind: FrameKind, chain: &[&str]) -> (f64, usize) {
    let leaf = chain.last().unwrap();
    let (mut at_leaf, mut whole) = (0, 0);
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let interpreted: Vec<Option<String>> = if kind == FrameKind::Jvm {
            // A compiled Java frame holds the methods inlined into it,
            // innermost first: each is a frame of the chain.
            t.frames
                .iter()
                .rev()
                .filter(|f| f.kind == kind)
                .flat_map(|f| f.lines.iter().rev().map(|l| Some(l.function.to_string())))
                .collect()
        } else {
            user_frames(t).into_iter().filter(|f| f.kind == kind).map(|f| f.name).collect()
        };
        if interpreted.last().and_then(|n| n.as_deref()) != Some(*leaf) {
            continue;
        }
        at_leaf += 1;
        if interpreted.iter().map(|n| n.as_deref()).eq(chain.iter().map(|c| Some(*c))) {
            whole += 1;
        }
    }
    (if at_leaf == 0 { 0.0 } else { whole as f64 / at_leaf as f64 }, at_leaf)
}

/// Most bytes of a name or file a collected frame keeps.
const KEPT_NAME: usize = 256;

/// Collects traces with their frames' names and files cut to
/// [`KEPT_NAME`] bytes: a crafted process's named frames carry names of
/// kilobytes, each its own, which a test keeping every trace would hold
/// (hundreds of megabytes in the VmHWM printed, that the agent, which
/// aggregates and lets go, does not).
struct Slim(Arc<Mutex<Vec<Trace>>>);

impl TraceSink for Slim {
    fn on_trace(&mut self, trace: &Trace) {
        let cut = |text: &mut Arc<str>| {
            if text.len() > KEPT_NAME {
                let end = (0..=KEPT_NAME).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                *text = Arc::from(&text[..end]);
            }
        };
        let mut trace = trace.clone();
        for line in trace.frames.iter_mut().flat_map(|f| &mut f.lines) {
            cut(&mut line.function);
            if let Some(file) = &mut line.file {
                cut(file);
            }
        }
        self.0.lock().unwrap().push(trace);
    }
}

/// What one run with a crafted process beside a genuine one gave.
struct Run {
    traces: Vec<Trace>,
    stats: Stats,
    notices: Vec<String>,
    /// How far the test process's (the agent's and the traces') RSS
    /// rose above what it was when the run started, at its peak.
    growth_kib: u64,
}

/// Profiles `hostile` and `genuine` for `seconds`, then stops the agent.
fn run_beside(hostile: &Workload, genuine: &Workload, seconds: u64) -> Option<Run> {
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config =
        AgentConfig { samples_per_second: HZ, pids: vec![hostile.pid(), genuine.pid()], ..AgentConfig::default() };
    // The peak is this run's, not an earlier test's in the same process:
    // reset to what is resident now (what earlier tests freed may be).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (cpu_before, rss_before_kib) = own_cpu_and_peak();
    let agent = start_agent_with(config, Box::new(Slim(traces.clone())))?;
    let started = Instant::now();
    wait_for_traces(&traces, Duration::from_secs(seconds), Duration::from_secs(seconds), |_| true);
    let asked = Instant::now();
    agent.stop().expect("reader ran without error");
    let stop = asked.elapsed();
    let (cpu_after, hwm_kib) = own_cpu_and_peak();
    let stats = agent.stats();
    let notices = agent.notices();
    eprintln!(
        "agent: {:.1}% of a core over {:.1} s, VmHWM {} MiB (+{} MiB), stop in {} ms; samples {} dropped {} at stop {}",
        100.0 * (cpu_after - cpu_before) / started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64(),
        hwm_kib / 1024,
        hwm_kib.saturating_sub(rss_before_kib) / 1024,
        stop.as_millis(),
        stats.samples,
        stats.samples_dropped,
        stats.samples_dropped_at_stop,
    );
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    Some(Run { traces, stats, notices, growth_kib: hwm_kib.saturating_sub(rss_before_kib) })
}

/// CPython's frames looping over code objects that look genuine, with
/// 1,000-character names rewritten all the time and 64 KiB line tables,
/// moved to other code objects at every turn: every sample's frames
/// would cost megabytes of reads. Its frames are left unnamed once over
/// budget (one notice), a genuine CPython beside it keeps its chain, and
/// the agent stops at once.
#[test]
fn a_crafted_cpython_is_held_to_its_budget() {
    let _serial = serial();
    let Some(python) = system_binary("/usr/bin/python3", "python3") else { return };
    let exe = build_as("python/hostile_python.c", "python3.11");
    let hostile = Workload::spawn(Command::new(&exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/python/chain.py");
    let genuine = Workload::spawn(Command::new(&python).arg(script).env("PYTHONDONTWRITEBYTECODE", "1"));
    std::thread::sleep(Duration::from_millis(500));
    let Some(run) = run_beside(&hostile, &genuine, 6) else { return };
    run.assert_held_to_budget(&hostile, &genuine, FrameKind::CPython, &["<module>", "f1", "f2", "f3"]);
    // Its bytes ran out before its CPU time: reads were refused.
    assert!(run.stats.naming_reads_refused > 0, "{:#?}", run.stats);
}

impl Run {
    /// What every crafted case must give: no sample dropped (not even at
    /// the stop), `genuine`'s `kind` frames carrying `chain`
    /// (root first) whole and named, none named from the crafted memory;
    /// `hostile` walked, over its naming budget and told once.
    fn assert_held_to_budget(&self, hostile: &Workload, genuine: &Workload, kind: FrameKind, chain: &[&str]) {
        self.assert_held_to_budget_after(hostile, genuine, kind, chain, 0);
    }

    /// [`Run::assert_held_to_budget`], with most frames unnamed in the
    /// crafted process's samples past the first `burst` of every 10
    /// (a debug build's burst lasts seconds when each frame costs little).
    fn assert_held_to_budget_after(
        &self,
        hostile: &Workload,
        genuine: &Workload,
        kind: FrameKind,
        chain: &[&str],
        burst: usize,
    ) {
        // What the agent owes everyone else first: it kept up, stopped
        // without dropping what was queued, and named the genuine chain from the genuine memory.
        let s = &self.stats;
        let dropped = s.samples_lost + s.samples_dropped + s.samples_dropped_at_stop;
        assert_eq!(dropped, 0, "the reporter kept up: {s:#?}");
        // How long the stop took is printed (run_beside), not asserted:
        // what it must not cost is asserted above (nothing dropped).
        let (share, at_leaf) = chain_share(&self.traces, genuine.pid(), kind, chain);
        let leaf = chain.last().unwrap();
        eprintln!("genuine: whole chain in {share:.3} of {at_leaf} samples at {leaf}");
        assert!(at_leaf >= 100 && share >= REQUIRED, "genuine chain in {share:.3} of {at_leaf} samples at {leaf}");
        for t in self.traces.iter().filter(|t| t.process.pid.0 == genuine.pid()) {
            assert!(
                t.frames.iter().flat_map(|f| &f.lines).all(|l| !l.function.contains("hostile")),
                "a genuine frame named from the crafted process's memory"
            );
        }
        // The crafted process was sampled and walked (its made-up frames
        // are there), most of them left unnamed, held to its budget and
        // told once.
        let crafted: Vec<&Trace> = self.traces.iter().filter(|t| t.process.pid.0 == hostile.pid()).collect();
        assert!(crafted.len() >= 100, "{} samples of the crafted process", crafted.len());
        let settled = &crafted[crafted.len() * burst / 10..];
        let walked: Vec<&profiler_trace::Frame> =
            settled.iter().flat_map(|t| &t.frames).filter(|f| f.kind == kind).collect();
        // Perl's namer shows a sub it could not read as a placeholder
        // (`profiler_interpreters::perl::UNNAMED_SUB`).
        let unnamed = walked.iter().filter(|f| f.function_name().is_none_or(|n| n == "[unnamed Perl sub]")).count();
        eprintln!(
            "crafted: {} samples, {} {kind:?} frames in the last {}, {unnamed} unnamed",
            crafted.len(),
            walked.len(),
            settled.len()
        );
        assert!(unnamed > walked.len() / 2, "{unnamed} of {} crafted frames unnamed", walked.len());
        assert_eq!(s.naming_processes_over, 1, "{s:#?}");
        assert!(s.naming_overdrafts >= 1, "{s:#?}");
        let told: Vec<&String> = self.notices.iter().filter(|n| n.contains("over its budget")).collect();
        assert_eq!(told.len(), 1, "{:?}", self.notices);
        assert!(told[0].contains(&format!("process {}", hostile.pid())), "{told:?}");
    }
}

fn system_binary(path: &str, package: &str) -> Option<PathBuf> {
    let binary = PathBuf::from(path);
    if binary.exists() {
        return Some(binary);
    }
    assert!(!in_ci(), "{path} is required under CI=true (apt-get install {package})");
    eprintln!("SKIPPED: {path} is not installed; under CI=true this fails");
    None
}

/// A Perl whose context stack is its own predecessor and holds 256 sub
/// calls over 16,384 subs with 1,000-character names rewritten all the
/// time and files (`CvFILE`, each COP's) that never end, moved to other
/// subs at every turn: each failure remembered is never asked again.
/// Its frames are left unnamed once over budget (one notice), a genuine
/// Perl beside it keeps its chain, and the agent stops at once.
#[test]
fn a_crafted_perl_is_held_to_its_budget() {
    let _serial = serial();
    let Some(perl) = system_binary("/usr/bin/perl", "perl") else { return };
    let exe = build_as("perl/hostile_perl.c", "perl");
    let hostile = Workload::spawn(Command::new(&exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/perl/cpu_chain.pl");
    let genuine = Workload::spawn(Command::new(&perl).arg(script));
    std::thread::sleep(Duration::from_millis(500));
    let Some(run) = run_beside(&hostile, &genuine, 6) else { return };
    run.assert_held_to_budget(
        &hostile,
        &genuine,
        FrameKind::Perl,
        &["main", "Chain::a", "Chain::Worker::b", "Chain::c"],
    );
    // Subs whose file never ends are not named, not even before the
    // budget runs out.
    assert!(run.stats.runtimes.get("perl", "frames_unknown") > 0, "{:#?}", run.stats.runtimes);
}

/// A PHP whose frame chain is a ring of 256 frames over 8,192 methods
/// whose names, class name and file name are 4 KiB each, names rewritten
/// all the time and frames moved to other functions at every turn: its
/// names would overflow any cache bounded by entries alone. Its frames
/// are left unnamed once over budget (one notice), a genuine PHP beside
/// it keeps its chain, and the agent stops at once.
#[test]
fn a_crafted_php_is_held_to_its_budget() {
    let _serial = serial();
    let Some(php) = system_binary("/usr/bin/php", "php-cli") else { return };
    let exe = build_as("php/hostile_php.c", "php8.2");
    let hostile = Workload::spawn(Command::new(&exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/php/cpu_chain.php");
    let genuine = Workload::spawn(Command::new(&php).args(["-d", "opcache.enable_cli=0"]).arg(script));
    std::thread::sleep(Duration::from_millis(500));
    let Some(run) = run_beside(&hostile, &genuine, 6) else { return };
    let chain = ["{main}", "Chain\\a", "Chain\\Worker::b", "Chain\\c"];
    run.assert_held_to_budget(&hostile, &genuine, FrameKind::Php, &chain);
}

/// Builds the crafted CRuby (`workloads/ruby/hostile_ruby.c`) as
/// `libruby-3.1.so.3.1` (with `flags`) and the `ruby` that runs it, in a
/// directory named after `name`.
fn build_crafted_ruby(name: &str, flags: &[&str]) -> PathBuf {
    let dir = own_dir(name);
    let library = [&["-shared", "-fPIC", "-DLIBRUBY"], flags].concat();
    build_in(&dir, "ruby/hostile_ruby.c", "libruby-3.1.so.3.1", &library);
    let lib = format!("-L{}", dir.display());
    build_in(&dir, "ruby/hostile_ruby.c", "ruby", &[&lib, "-l:libruby-3.1.so.3.1", "-Wl,-rpath,$ORIGIN"])
}

/// Runs the crafted CRuby `exe` beside Debian's Ruby running its chain:
/// held to its budget, and its iseq pointers into nothing never named
/// (not even before the budget runs out).
fn crafted_ruby_beside_a_genuine_one(exe: &Path) {
    let Some(ruby) = system_binary("/usr/bin/ruby", "ruby") else { return };
    let hostile = Workload::spawn(Command::new(exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/ruby/cpu_chain.rb");
    let genuine = Workload::spawn(Command::new(&ruby).arg(script));
    std::thread::sleep(Duration::from_millis(500));
    let Some(run) = run_beside(&hostile, &genuine, 6) else { return };
    let chain = ["<main>", "Object#a", "Chain::Worker#b", "Object#c"];
    run.assert_held_to_budget(&hostile, &genuine, FrameKind::Ruby, &chain);
    let counters = &run.stats.runtimes;
    assert!(counters.get("ruby", "frames_unknown") > 0, "{counters:#?}");
}

/// A CRuby 3.1 (a `libruby-3.1.so.3.1` of the right symbols and
/// thread-local `ruby_current_ec`) whose execution context claims a VM
/// stack of 2^24 values and 512 control frames with no end of run, over
/// methods and C functions whose classes each have 256 ivars of distinct
/// ids, iseqs whose bodies move at every turn, names and paths of 4 KiB
/// (half of it not UTF-8) rewritten all the time, strings claiming 2^40
/// bytes, line tables of 2^20 entries and iseq pointers into nothing.
/// Its frames are left unnamed once over budget (one notice), a genuine
/// Ruby beside it keeps its chain, and the agent stops at once.
#[test]
fn a_crafted_cruby_is_held_to_its_budget() {
    let _serial = serial();
    crafted_ruby_beside_a_genuine_one(&build_crafted_ruby("ruby", &[]));
}

/// The same CRuby without `ruby_global_symbols` in its library, whose
/// writable segment (63 MiB, just under what is scanned) is made of
/// words that each look like the symbol table and lead to 4 KiB names:
/// the scan for the table is held to the budget as the naming is.
#[test]
fn a_crafted_cruby_symbol_scan_is_held_to_its_budget() {
    let _serial = serial();
    crafted_ruby_beside_a_genuine_one(&build_crafted_ruby("ruby-scan", &["-DSCAN"]));
}

/// Debian's OpenJDK 17 (required under CI=true).
const JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

/// A HotSpot (a `libjvm.so` exporting the Serviceability Agent's table
/// symbols, `workloads/java/hostile_jvm.c`) whose tables are as large as
/// the agent reads, of entries of the largest stride with names of their
/// own, and never complete (the last table has no end: "not ready yet",
/// tried again), and which maps a new RWX page every 0.3 s (a new mapping
/// to look at each time). Its attaching is held to its budget (one
/// notice), it is never attached, and a genuine JVM beside it keeps its
/// whole chain.
#[test]
fn a_crafted_hotspot_is_held_to_its_attach_budget() {
    let _serial = serial();
    let Some(java) = system_binary(&format!("{JDK}/bin/java"), "openjdk-17-jdk-headless") else { return };
    let Some(javac) = system_binary(&format!("{JDK}/bin/javac"), "openjdk-17-jdk-headless") else { return };
    let dir = own_dir("java");
    build_in(&dir, "java/hostile_jvm.c", "libjvm.so", &["-shared", "-fPIC", "-DLIBJVM"]);
    let lib = format!("-L{}", dir.display());
    let exe = build_in(&dir, "java/hostile_jvm.c", "java", &[&lib, "-l:libjvm.so", "-Wl,-rpath,$ORIGIN"]);
    let hostile = Workload::spawn(Command::new(&exe).uid(NOBODY).gid(NOBODY));
    let classes = own_dir("java-classes");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/java/HotspotSpin.java");
    let out = Command::new(&javac).arg("-d").arg(&classes).arg(source).output().expect("running javac");
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));
    let printed = classes.join("stdout");
    let genuine = Workload::spawn(
        Command::new(&java)
            .arg("-cp")
            .arg(&classes)
            .args(["HotspotSpin", "main"])
            .stdout(std::fs::File::create(&printed).unwrap()),
    );
    // The chain runs once the JVM has started.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&printed).unwrap_or_default().contains("main-tid") {
        assert!(Instant::now() < deadline, "the genuine JVM's chain did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Longer than the others: libjvm.so (20 MB) is analysed first.
    let Some(run) = run_beside(&hostile, &genuine, 10) else { return };
    let s = &run.stats;
    assert_eq!(s.samples_lost + s.samples_dropped + s.samples_dropped_at_stop, 0, "the reporter kept up: {s:#?}");
    let chain = ["HotspotSpin.main", "HotspotSpin.a", "HotspotSpin.b", "HotspotSpin.c"];
    let (share, at_leaf) = chain_share(&run.traces, genuine.pid(), FrameKind::Jvm, &chain);
    eprintln!("genuine: whole chain in {share:.3} of {at_leaf} samples at HotspotSpin.c");
    assert!(at_leaf >= 100 && share >= REQUIRED, "genuine chain in {share:.3} of {at_leaf} samples");
    for t in run.traces.iter().filter(|t| t.process.pid.0 == genuine.pid()) {
        assert!(
            t.frames.iter().flat_map(|f| &f.lines).all(|l| !l.function.contains("hostile")),
            "a genuine frame named from the crafted process's memory"
        );
    }
    // The crafted process ran (in its RWX pages) and was sampled, never
    // attached (no Java frame), held to its attach budget and told once.
    let crafted: Vec<&Trace> = run.traces.iter().filter(|t| t.process.pid.0 == hostile.pid()).collect();
    assert!(crafted.len() >= 100, "{} samples of the crafted process", crafted.len());
    assert!(crafted.iter().flat_map(|t| &t.frames).all(|f| f.kind != FrameKind::Jvm), "the crafted JVM attached");
    eprintln!(
        "attach: over {} overdrafts {} reads refused {} retries {} given up {}",
        s.attach_processes_over,
        s.attach_overdrafts,
        s.attach_reads_refused,
        s.interpreter_attach_retries,
        s.interpreter_attach_given_up
    );
    assert_eq!(s.attach_processes_over, 1, "{s:#?}");
    assert!(s.attach_overdrafts >= 1 && s.attach_reads_refused > 0, "{s:#?}");
    assert_eq!(s.naming_processes_over, 0, "{s:#?}");
    let told: Vec<&String> = run.notices.iter().filter(|n| n.contains("over its budget")).collect();
    assert_eq!(told.len(), 1, "{:?}", run.notices);
    assert!(told[0].contains(&format!("process {}", hostile.pid())) && told[0].contains("attaching"), "{told:?}");
}

/// Builds the crafted Node (`workloads/node/hostile_v8.c`, with `flags`)
/// as `node` in a directory named after `name`, with every `v8dbg_*`
/// constant and the version string of the machine's real `node`
/// (`workloads/node/v8dbg_of.py`): the agent's detection takes it for
/// that build.
fn build_crafted_node(name: &str, node: &Path, flags: &[&str]) -> PathBuf {
    let dir = own_dir(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node/v8dbg_of.py");
    let out = Command::new("python3").arg(script).arg(node).output().expect("running python3");
    assert!(out.status.success(), "v8dbg_of.py: {}", String::from_utf8_lossy(&out.stderr));
    let generated = dir.join("v8dbg.c");
    std::fs::write(&generated, &out.stdout).unwrap();
    let generated = generated.to_str().unwrap().to_string();
    build_in(&dir, "node/hostile_v8.c", "node", &[&[generated.as_str()], flags].concat())
}

/// Runs the crafted Node `exe` beside the machine's Node running its
/// chain from the event loop, interpreted: held to its budget, its
/// frames walked by the V8 unwinder (the agent took it for Node), and
/// the returned run's crafted samples' V8 frame counts.
fn crafted_node_beside_a_genuine_one(exe: &Path, node: &Path) -> Option<(Run, Vec<usize>, u32)> {
    let hostile = Workload::spawn(Command::new(exe).uid(NOBODY).gid(NOBODY));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/node/cpu_chain.js");
    let genuine = Workload::spawn(Command::new(node).arg("--jitless").arg(script).arg("immediate"));
    std::thread::sleep(Duration::from_millis(500));
    // Longer than the others: a debug build's burst (ten times the
    // release's CPU time) lasts seconds at 256 cheap frames a sample.
    let run = run_beside(&hostile, &genuine, 12)?;
    let chain = ["processImmediate", "main", "a", "b", "c"];
    // Named in full for its first seconds (its burst, ten times the
    // release's CPU time in a debug build), most frames unnamed after.
    run.assert_held_to_budget_after(&hostile, &genuine, FrameKind::V8Js, &chain, 5);
    let depths: Vec<usize> = run
        .traces
        .iter()
        .filter(|t| t.process.pid.0 == hostile.pid())
        .map(|t| t.frames.iter().filter(|f| f.kind == FrameKind::V8Js).count())
        .collect();
    // The agent took it for Node: its made-up frames were walked by the
    // V8 unwinder in most of its samples (the others are its rotating
    // thread's, native).
    let walked = depths.iter().filter(|&&d| d > 0).count();
    assert!(walked >= 100, "{walked} of {} crafted samples with V8 frames", depths.len());
    let v8: Vec<_> = run.stats.runtimes.0.iter().filter(|(r, _)| r.eq_ignore_ascii_case("v8")).collect();
    eprintln!("{v8:?}");
    Some((run, depths, hostile.pid()))
}

/// A Node (every `v8dbg_*` constant of the machine's `node`) whose
/// main thread runs 512 made-up interpreted frames, more than a sample
/// holds, over 4,096 functions, moved to other functions and bytecode
/// offsets all the time: no frame word is ever named from what was
/// named before, each would cost its full check (~11 reads) at every
/// sample. Its frames are left unnamed once over budget (one notice), a
/// genuine Node beside it keeps its chain, and the agent stops at once.
#[test]
fn a_crafted_node_with_deep_stacks_is_held_to_its_budget() {
    let _serial = serial();
    let Some(node) = system_binary("/usr/bin/node", "nodejs") else { return };
    let exe = build_crafted_node("node-deep", &node, &[]);
    let Some((_, depths, _)) = crafted_node_beside_a_genuine_one(&exe, &node) else { return };
    // Walked to the depth limit: 256 and more JavaScript frames a sample.
    let deep = depths.iter().filter(|&&d| d >= 256).count();
    let walked = depths.iter().filter(|&&d| d > 0).count();
    assert!(deep * 10 >= walked * 9, "{deep} of {walked} walked samples with >= 256 V8 frames");
}

/// A Node whose 64 made-up frames run 4,096 functions, each of its own
/// script without `line_ends` and whose source is a cons-string tree of
/// 8 Mi newlines (one 64 KiB leaf under 7 levels, as long and deep as
/// the agent reads): each function's lines would take 8 MiB of reads and
/// 8 Mi line ends. Its frames are left unnamed once over budget (one
/// notice), none gets a line from such a script (too many lines, the
/// failure remembered), the agent's memory stays bounded, a genuine Node
/// beside it keeps its chain, and the agent stops at once.
#[test]
fn a_crafted_node_with_huge_cons_string_sources_is_held_to_its_budget() {
    let _serial = serial();
    let Some(node) = system_binary("/usr/bin/node", "nodejs") else { return };
    let exe = build_crafted_node("node-cons", &node, &["-DCONS"]);
    let Some((run, _, pid)) = crafted_node_beside_a_genuine_one(&exe, &node) else { return };
    // Each such script's line ends (64 MiB) were kept by its functions:
    // 800 MiB more within seconds. The traces kept hold short names
    // only; a script's source and line ends while they are read are
    // 16 MiB.
    assert!(run.growth_kib < 64 << 10, "RSS rose by {} MiB", run.growth_kib >> 10);
    let named: Vec<&profiler_trace::SourceLine> = run
        .traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .flat_map(|t| &t.frames)
        .filter(|f| f.kind == FrameKind::V8Js)
        .flat_map(|f| &f.lines)
        .collect();
    assert!(named.iter().all(|l| l.line == 0), "a line from a script of 8 Mi lines");
}
