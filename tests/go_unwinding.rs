//! Go stacks on the real eBPF programs, unwound with the stack deltas
//! built from `.gopclntab` (no frame pointers relied on, no DWARF):
//! a stripped Go binary (`-ldflags='-s -w'`), a cgo binary whose C code
//! calls back into Go, and a program whose goroutines grow their stacks
//! (`runtime.morestack`) and are preempted asynchronously. Every chain must come through whole, every frame
//! named, down to the thread's root, in at least 95% of the samples at the
//! chain's leaf. Each test prints its measured completeness.
//!
//! Roots, as the Go runtime lays its stacks out: a goroutine's first frame
//! returns to `runtime.goexit` (the main goroutine's first frame is
//! `runtime.main`); a thread created by C code ends in libc's
//! `start_thread`/`clone3`.

use profiler_agent::{AgentConfig, Stats, UnwindStop};
use profiler_tests::{in_ci, matches_chain, profile_with, serial, user_frames, FrameDesc, Step, Workload};
use profiler_trace::Trace;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use Step::{Any, AnyOrNone, Fn, In};

const HZ: u32 = 99;
const SECONDS: u64 = 8;
const REQUIRED: f64 = 0.95;
/// Fewer samples at a leaf than this says nothing.
const MIN_SAMPLES: usize = 25;
const LIBC: &str = "libc.so.6";

/// Builds the Go package `workloads/<name>` in a fresh directory with
/// `ldflags`; `None` (skip) without a Go toolchain outside CI.
fn build_go(name: &str, ldflags: &str, cgo: bool) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads").join(name);
    let dir = std::env::temp_dir().join(format!("ep-go-workloads-{}", std::process::id())).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    std::fs::write(dir.join("go.mod"), format!("module {name}\n\ngo 1.21\n")).unwrap();
    let out = dir.join(name);
    let output = Command::new("go")
        .args(["build", "-ldflags", ldflags, "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .output();
    match output {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!("go build {name} failed:\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) if !in_ci() => {
            eprintln!("SKIPPED: no Go toolchain ({e}); under CI=true this fails");
            None
        }
        Err(e) => panic!("running go: {e}"),
    }
}

/// Profiles the already running `workload` for SECONDS.
fn profile_running(workload: &Workload) -> Option<(Vec<Trace>, Stats)> {
    std::thread::sleep(Duration::from_millis(300));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![workload.pid()], ..AgentConfig::default() };
    profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))
}

/// cgo's generated names carry a hash of the package
/// (`_cgo_0123456789ab_Cfunc_f`, `_cgoexp_0123456789ab_f`): replaced by
/// `HASH` so that chains can name them. Assembly functions are named
/// `runtime.f.abi0` in the ELF symbol table (used while the Go table is
/// being read) and `runtime.f` in `.gopclntab`: the suffix goes.
fn normalize(name: &str) -> String {
    let name = name.strip_suffix(".abi0").unwrap_or(name);
    for prefix in ["_cgo_", "_cgoexp_"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if let Some((hash, tail)) = rest.split_once('_') {
                if hash.len() >= 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return format!("{prefix}HASH_{tail}");
                }
            }
        }
    }
    name.to_string()
}

/// The user frames of a trace, root first, cgo names normalized.
fn frames_of(trace: &Trace) -> Vec<FrameDesc> {
    user_frames(trace).into_iter().map(|f| FrameDesc { name: f.name.as_deref().map(normalize), ..f }).collect()
}

/// How many of a pid's samples that `select` picks carry the whole chain.
struct Completeness {
    selected: usize,
    complete: usize,
    failures: Vec<String>,
}

fn completeness(
    traces: &[Trace],
    pid: u32,
    select: impl std::ops::Fn(&[FrameDesc]) -> bool,
    pattern: &[Step],
) -> Completeness {
    completeness_of_any(traces, pid, select, &[pattern])
}

/// [`completeness`], a sample being whole when it matches one of
/// `patterns`.
fn completeness_of_any(
    traces: &[Trace],
    pid: u32,
    select: impl std::ops::Fn(&[FrameDesc]) -> bool,
    patterns: &[&[Step]],
) -> Completeness {
    let mut c = Completeness { selected: 0, complete: 0, failures: Vec::new() };
    for t in traces.iter().filter(|t| t.process.pid.0 == pid) {
        let frames = frames_of(t);
        // A stack that could not even be attributed counts as a failure.
        let unresolved = frames.last().is_none_or(|f| f.file.is_none());
        if !unresolved && !select(&frames) {
            continue;
        }
        c.selected += 1;
        if patterns.iter().any(|pattern| matches_chain(&frames, pattern)) {
            c.complete += 1;
        } else if c.failures.len() < 6 {
            let names: Vec<String> = frames.iter().map(|f| f.to_string()).collect();
            c.failures.push(names.join(";"));
        }
    }
    c
}

fn assert_complete(what: &str, c: &Completeness, stats: &Stats) {
    assert_complete_at(what, c, stats, REQUIRED)
}

fn assert_complete_at(what: &str, c: &Completeness, stats: &Stats, required: f64) {
    let ratio = if c.selected == 0 { 0.0 } else { c.complete as f64 / c.selected as f64 };
    eprintln!("completeness {what}: {}/{} = {:.1}%", c.complete, c.selected, 100.0 * ratio);
    assert!(c.selected >= MIN_SAMPLES, "{what}: only {} samples at the leaf; {stats:#?}", c.selected);
    assert!(
        ratio >= required,
        "{what}: {} of {} samples at the leaf carry the whole chain ({:.1}%); some that do not \
         (root first):\n{}\n{stats:#?}",
        c.complete,
        c.selected,
        100.0 * ratio,
        c.failures.join("\n")
    );
}

/// Samples whose innermost frame is `leaf`.
fn at_leaf(leaf: &'static str) -> impl std::ops::Fn(&[FrameDesc]) -> bool {
    move |frames| frames.last().is_some_and(|f| f.name.as_deref() == Some(leaf))
}

/// Samples with a frame of `function`.
fn through(function: &'static str) -> impl std::ops::Fn(&[FrameDesc]) -> bool {
    move |frames| frames.iter().any(|f| f.name.as_deref() == Some(function))
}

/// Stacks with frames outside libc left unnamed (libc's are named only
/// when the host has its debug symbols): sampled before the symbolizer
/// had read the binary, or whose addresses it was still looking up
/// (their names come with later samples, by design). The chains above
/// require every frame named in 95% of the samples.
fn unnamed_stacks(traces: &[Trace], pid: u32) -> usize {
    traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .filter(|t| frames_of(t).iter().any(|f| f.name.is_none() && f.file.as_deref() != Some(LIBC)))
        .count()
}

#[test]
fn stripped_go_goroutines_and_the_system_stack() {
    let _serial = serial();
    let Some(exe) = build_go("go_chain", "-s -w", false) else { return };
    let w = Workload::spawn(Command::new(&exe).arg("gc"));
    let Some((traces, stats)) = profile_running(&w) else { return };

    // The main goroutine's first frame is runtime.main, which returns to
    // runtime.goexit like every goroutine's.
    let main_chain = [
        Fn("runtime.goexit"),
        Fn("runtime.main"),
        Fn("main.main"),
        Fn("main.chain1"),
        Fn("main.chain2"),
        Fn("main.chain3"),
        Fn("main.chainLeaf"),
    ];
    let c = completeness(&traces, w.pid(), at_leaf("main.chainLeaf"), &main_chain);
    assert_complete("Go main goroutine", &c, &stats);

    // sort.Slice's own frames (pdqsort, insertion sort, partition, ...)
    // vary with the recursion.
    let sort_chain = [
        Fn("runtime.goexit"),
        Fn("main.sortWorker"),
        Fn("sort.Slice"),
        Any,
        Fn("main.sortWorker.func1"),
        Fn("main.lessLeaf"),
    ];
    let c = completeness(&traces, w.pid(), at_leaf("main.lessLeaf"), &sort_chain);
    assert_complete("Go goroutine through sort.Slice", &c, &stats);

    // The GC's background mark workers run gcDrain on the system stack
    // (runtime.systemstack switches to it): the stack goes on through the
    // switch to the worker goroutine and its root. (Go 1.22+ starts the
    // workers through a `go` wrapper, gcBgMarkStartWorkers.gowrap1.)
    let worker_chain = [
        Fn("runtime.goexit"),
        Fn("runtime.gcBgMarkStartWorkers.gowrap1"),
        Fn("runtime.gcBgMarkWorker"),
        Fn("runtime.systemstack"),
        Fn("runtime.gcBgMarkWorker.func2"),
        Fn("runtime.gcDrain"),
        AnyOrNone,
    ];
    let c = completeness(&traces, w.pid(), through("runtime.gcBgMarkWorker.func2"), &worker_chain);
    assert_complete("GC mark worker through runtime.systemstack", &c, &stats);
    // Every stack through a switch to the system stack (mark workers,
    // mark assists, write barrier flushes, ...) reaches its goroutine's
    // root. (On the system stack already, systemstack tail-calls and
    // leaves no frame.)
    let through_switch = [Fn("runtime.goexit"), Any, Fn("runtime.systemstack"), AnyOrNone];
    let c = completeness(&traces, w.pid(), through("runtime.systemstack"), &through_switch);
    assert_complete("every stack through runtime.systemstack", &c, &stats);

    eprintln!("stacks with frames not named yet: {}", unnamed_stacks(&traces, w.pid()));
    assert_eq!(
        stats.unwind_stopped.get(UnwindStop::BadSp) + stats.unwind_stopped.get(UnwindStop::InvalidRule),
        0,
        "{stats:#?}"
    );
}

#[test]
fn cgo_callbacks_cross_both_stacks() {
    let _serial = serial();
    // -w: no DWARF; the symbol table names the C frames.
    let Some(exe) = build_go("go_cgo", "-w", true) else { return };
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };

    // Go -> C on the system stack (runtime.asmcgocall), C -> Go back on
    // the goroutine's stack (crosscall2, runtime.cgocallback; the first
    // runtime.cgocallbackg is its ABI wrapper). Both switches are followed
    // through the frame pointer the switching function keeps.
    let callback = [
        Fn("crosscall2"),
        Fn("runtime.cgocallback"),
        Fn("runtime.cgocallbackg"),
        Fn("runtime.cgocallbackg"),
        Fn("runtime.cgocallbackg1"),
    ];
    let mut main_chain = vec![
        Fn("runtime.goexit"),
        Fn("runtime.main"),
        Fn("main.main"),
        Fn("main.callC"),
        Fn("main._Cfunc_c_outer"),
        Fn("runtime.cgocall"),
        Fn("runtime.asmcgocall"),
        Fn("_cgo_HASH_Cfunc_c_outer"),
        Fn("c_outer"),
        Fn("c_inner"),
        Fn("goCallback"),
    ];
    main_chain.extend_from_slice(&callback);
    main_chain.extend_from_slice(&[Fn("_cgoexp_HASH_goCallback"), Fn("main.goCallback"), Fn("main.cbLeaf")]);
    let c = completeness(&traces, w.pid(), at_leaf("main.cbLeaf"), &main_chain);
    assert_complete("Go -> C -> Go callback", &c, &stats);

    // A thread created by C: its root is libc's clone3 and start_thread.
    let mut thread_chain = vec![In(LIBC), In(LIBC), Fn("c_thread_main"), Fn("c_thread_work"), Fn("goThreadCallback")];
    thread_chain.extend_from_slice(&callback);
    thread_chain.extend_from_slice(&[
        Fn("_cgoexp_HASH_goThreadCallback"),
        Fn("main.goThreadCallback"),
        Fn("main.threadLeaf"),
    ]);
    let c = completeness(&traces, w.pid(), at_leaf("main.threadLeaf"), &thread_chain);
    assert_complete("C thread -> Go callback", &c, &stats);

    eprintln!("stacks with frames not named yet: {}", unnamed_stacks(&traces, w.pid()));
    assert_eq!(
        stats.unwind_stopped.get(UnwindStop::BadSp) + stats.unwind_stopped.get(UnwindStop::InvalidRule),
        0,
        "{stats:#?}"
    );
}

#[test]
fn stack_growth_and_asynchronous_preemption() {
    let _serial = serial();
    let Some(exe) = build_go("go_growth", "-s -w", false) else { return };
    // Larger first stacks (the runtime's adaptive start) would make the
    // growth rare.
    let w = Workload::spawn(Command::new(&exe).env("GOMAXPROCS", "2").env("GODEBUG", "adaptivestackstart=0"));
    let Some((traces, stats)) = profile_running(&w) else { return };

    // runtime.morestack switches to the system stack to grow the
    // goroutine's: the stack goes on through the goroutine's g.sched to
    // the function growing it (main.deep) and the goroutine's root.
    let growth = [
        Fn("runtime.goexit"),
        Fn("main.main.gowrap1"),
        Fn("main.grower"),
        Any,
        Fn("runtime.morestack"),
        Fn("runtime.newstack"),
        AnyOrNone,
    ];
    // newstack may find a preemption request instead and deschedule the
    // goroutine (m.curg dropped): the system stack goes on to its root,
    // mstart0's frame (m.g0.sched).
    let preempted_growth =
        [Fn("runtime.mstart"), Fn("runtime.mstart0"), Fn("runtime.morestack"), Fn("runtime.newstack"), Any];
    let c = completeness_of_any(&traces, w.pid(), through("runtime.newstack"), &[&growth, &preempted_growth]);
    // 98%: the rest are stacks sampled before the symbolizer had read
    // the binary (unnamed frames), at most a few in a run.
    assert_complete_at("stack growth through runtime.morestack", &c, &stats, 0.98);
    let followed = completeness(&traces, w.pid(), through("runtime.newstack"), &growth);
    assert!(stats.go_morestack_followed >= followed.complete as u64, "{stats:#?}");

    // The scheduler, called by runtime.mcall on the system stack (g0)
    // each time a goroutine blocks, exits or is preempted: below mcall
    // is the base of that stack, runtime.mstart0's frame (m.g0.sched),
    // then the thread's root. (mcall's own first instructions, on the
    // goroutine's stack, are left out: its callers are the goroutine's.)
    let scheduler = [Fn("runtime.mstart"), Fn("runtime.mstart0"), Fn("runtime.mcall"), Any];
    let on_g0 = |frames: &[FrameDesc]| {
        let at = frames.iter().position(|f| f.name.as_deref() == Some("runtime.mcall"));
        at.is_some_and(|at| at + 1 < frames.len())
    };
    let c = completeness(&traces, w.pid(), on_g0, &scheduler);
    assert_complete("the scheduler below runtime.mcall", &c, &stats);
    assert!(stats.go_scheduler_roots >= c.complete as u64, "{stats:#?}");
    let deep_only = |frames: &[FrameDesc]| {
        let at = frames.iter().position(|f| f.name.as_deref() == Some("runtime.morestack"));
        at.is_some_and(|at| at >= 4 && frames[3..at].iter().all(|f| f.name.as_deref() == Some("main.deep")))
    };
    let grown = traces
        .iter()
        .filter(|t| t.process.pid.0 == w.pid() && through("runtime.newstack")(&frames_of(t)))
        .filter(|t| deep_only(&frames_of(t)))
        .count();
    assert!(grown >= c.complete * 99 / 100, "the frames between grower and morestack are main.deep's");

    // The loop's own samples.
    let spin = [Fn("runtime.goexit"), Fn("main.spin"), Fn("main.spinLeaf")];
    let c = completeness(&traces, w.pid(), at_leaf("main.spinLeaf"), &spin);
    assert_complete("spinning goroutine", &c, &stats);

    // asyncPreempt was injected as if main.spinLeaf had called it (its
    // return address is the interrupted pc); the frames after it run on
    // the goroutine's stack until runtime.mcall switches to the system
    // stack (not followed: the goroutine is being descheduled).
    let preempted = [Fn("runtime.goexit"), Fn("main.spin"), Fn("main.spinLeaf"), Fn("runtime.asyncPreempt"), AnyOrNone];
    // (Rare: the preemption itself takes microseconds. Stacks sampled
    // before the symbolizer had the binary are left out.)
    let in_preempt = |frames: &[FrameDesc]| {
        through("runtime.asyncPreempt")(frames)
            && !frames.iter().any(|f| f.name.as_deref() == Some("runtime.mcall"))
            && frames.iter().all(|f| f.name.is_some())
    };
    let c = completeness(&traces, w.pid(), in_preempt, &preempted);
    let all = traces.iter().filter(|t| t.process.pid.0 == w.pid()).count();
    let through_preempt = completeness(&traces, w.pid(), through("runtime.asyncPreempt"), &preempted);
    eprintln!(
        "samples through runtime.asyncPreempt: {} of {all}, {} through runtime.mcall; failures: {:#?}",
        through_preempt.selected,
        through_preempt.selected - c.selected,
        c.failures
    );
    if c.selected > 0 {
        assert_eq!(c.complete, c.selected, "{}", c.failures.join("\n"));
    }

    eprintln!("stacks with frames not named yet: {}", unnamed_stacks(&traces, w.pid()));
    assert_eq!(
        stats.unwind_stopped.get(UnwindStop::BadSp) + stats.unwind_stopped.get(UnwindStop::InvalidRule),
        0,
        "{stats:#?}"
    );
}
