//! Native unwinding without frame pointers, on the real eBPF programs:
//! workloads built with `-O2 -fomit-frame-pointer` (C), `-O2` (C++) and
//! `-C opt-level=2` (Rust) whose call chains must come through whole, in
//! order, down to the thread's root, in at least 95% of the samples at
//! the chain's leaf. Each test prints its measured completeness.

use profiler_agent::{AgentConfig, Stats, UnwindStop};
use profiler_bpf::MAX_USER_FRAMES;
use profiler_tests::{
    build_workload, c_main_thread, completeness, profile_with, serial, start_agent, wait_exited, Completeness, Step,
    Workload,
};
use profiler_trace::{Frame, FrameKind, Trace};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use Step::{Any, Fn, In, ManyIn};

const HZ: u32 = 99;
const SECONDS: u64 = 4;
const REQUIRED: f64 = 0.95;
/// Fewer samples at a leaf than this says nothing.
const MIN_SAMPLES: usize = 25;
const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-pthread"];
const LIBC: &str = "libc.so.6";

fn c_workload(source: &str) -> PathBuf {
    let name = source.trim_end_matches(".c");
    build_workload("gcc", source, C_FLAGS, name)
}

/// Profiles the already running `workload` for SECONDS.
fn profile_running(workload: &Workload) -> Option<(Vec<Trace>, Stats)> {
    std::thread::sleep(Duration::from_millis(200));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![workload.pid()], ..AgentConfig::default() };
    profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)))
}

fn assert_complete(what: &str, c: &Completeness, stats: &Stats) {
    c.assert_whole(what, MIN_SAMPLES, REQUIRED, stats);
}

#[test]
fn c_main_thread_chain_and_qsort_callback_thread() {
    let _serial = serial();
    let exe = c_workload("native_chain.c");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };

    let main_chain = c_main_thread(&[Fn("chain_1"), Fn("chain_2"), Fn("chain_3"), Fn("chain_4"), Fn("chain_leaf")]);
    let c = completeness(&traces, w.pid(), Fn("chain_leaf"), &main_chain);
    assert_complete("C main thread", &c, &stats);

    // A thread's root is clone3 and start_thread (in libc, unnamed without
    // its .symtab); the callback comes through qsort's code in libc.
    let thread_chain =
        [In(LIBC), In(LIBC), Fn("thread_main"), Fn("sort_worker"), ManyIn(LIBC), Fn("compare"), Fn("compare_leaf")];
    let c = completeness(&traces, w.pid(), Fn("compare_leaf"), &thread_chain);
    assert_complete("C qsort callback thread", &c, &stats);
}

#[test]
fn signal_handler_unwinds_into_the_interrupted_code() {
    let _serial = serial();
    let exe = c_workload("signal_handler.c");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };
    let chain =
        c_main_thread(&[Fn("spin_outer"), Fn("spin_inner"), Fn("on_signal"), Fn("handler_work"), Fn("handler_leaf")]);
    let c = completeness(&traces, w.pid(), Fn("handler_leaf"), &chain);
    assert_complete("C signal handler", &c, &stats);
}

#[test]
fn vdso_clock_gettime() {
    let _serial = serial();
    let exe = c_workload("vdso_clock.c");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };
    // libc's clock_gettime is matched by file: with libc's debug symbols
    // it is named __GI___clock_gettime.
    let chain = c_main_thread(&[Fn("clock_loop"), Fn("read_clock"), In(LIBC), ManyIn("[vdso]")]);
    let c = completeness(&traces, w.pid(), In("[vdso]"), &chain);
    assert_complete("vDSO clock_gettime", &c, &stats);
}

/// Samples taken in the kernel (a read syscall) unwind the user stack
/// from the registers saved at kernel entry.
#[test]
fn samples_in_the_kernel_unwind_the_user_stack() {
    let _serial = serial();
    let exe = c_workload("syscall_chain.c");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };
    let in_kernel: Vec<Trace> = traces
        .iter()
        .filter(|t| t.frames.first().is_some_and(|f| f.kind == profiler_trace::FrameKind::Kernel))
        .cloned()
        .collect();
    // libc's read is matched by file: with libc's debug symbols it is named
    // __GI___libc_read, with .dynsym only `read`.
    let chain = c_main_thread(&[Fn("read_loop"), Fn("read_block"), In(LIBC)]);
    let c = completeness(&in_kernel, w.pid(), In(LIBC), &chain);
    assert_complete("user stacks of samples in the kernel", &c, &stats);
}

/// `deep_recursion.c` run `depth` frames deep: the whole chain down to
/// the thread's root, never cut at the frame limit.
fn deep_recursion_reaches_main(depth: usize) {
    let _serial = serial();
    let exe = c_workload("deep_recursion.c");
    let w = Workload::spawn(Command::new(&exe).arg(depth.to_string()));
    let Some((traces, stats)) = profile_running(&w) else { return };
    let mut below_main = vec![Fn("recurse"); depth];
    below_main.push(Fn("deep_leaf"));
    let chain = c_main_thread(&below_main);
    let c = completeness(&traces, w.pid(), Fn("deep_leaf"), &chain);
    assert_complete(&format!("{depth}-deep recursion"), &c, &stats);
    assert!(
        stats.unwind_stopped.get(UnwindStop::MaxFrames) + stats.unwind_stopped.get(UnwindStop::TailCalls) == 0,
        "{stats:#?}"
    );
}

#[test]
fn deep_recursion_comes_through_whole() {
    deep_recursion_reaches_main(150);
}

/// As deep as real recursive programs go (a Go formatter reaches 1,900
/// frames): 1,500 frames, dozens of program runs, come through whole
/// down to the thread's root.
#[test]
fn recursion_1500_deep_reaches_main() {
    deep_recursion_reaches_main(1500);
}

/// Deeper than the frame limit: every sample ends with the
/// `[truncated]` frame, after exactly `MAX_USER_FRAMES` frames from the
/// leaf, and is counted as such.
#[test]
fn recursion_deeper_than_the_frame_limit_ends_truncated() {
    let _serial = serial();
    let exe = c_workload("deep_recursion.c");
    let depth = MAX_USER_FRAMES + 100;
    let w = Workload::spawn(Command::new(&exe).arg(depth.to_string()));
    let Some((traces, stats)) = profile_running(&w) else { return };
    let mine: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == w.pid()).collect();
    let at_leaf: Vec<&Trace> = mine
        .iter()
        .copied()
        .filter(|t| {
            t.frames.iter().find(|f| f.kind != FrameKind::Kernel).and_then(|f| f.function_name()) == Some("deep_leaf")
        })
        .collect();
    assert!(at_leaf.len() >= MIN_SAMPLES, "{} samples at deep_leaf; {stats:#?}", at_leaf.len());
    let mut whole = 0;
    for t in &at_leaf {
        let user: Vec<&Frame> = t.frames.iter().filter(|f| f.kind != FrameKind::Kernel).collect();
        let names: Vec<Option<&str>> = user.iter().map(|f| f.function_name()).collect();
        // Leaf first: deep_leaf, recurse x (limit - 1), then the mark.
        let expected = user.len() == MAX_USER_FRAMES + 1
            && user.last().is_some_and(|f| f.is_truncated())
            && names[1..MAX_USER_FRAMES].iter().all(|n| *n == Some("recurse"));
        if expected {
            whole += 1;
        } else if whole == 0 {
            eprintln!("unexpected: {} frames: {:?}", user.len(), &names[names.len().saturating_sub(4)..]);
        }
        assert!(!names.contains(&Some("main")), "a stack deeper than the limit cannot reach main");
    }
    eprintln!("{whole} of {} samples at deep_leaf end with [truncated] after {MAX_USER_FRAMES} frames", at_leaf.len());
    // Some samples may be taken before the binary's tables were loaded
    // (those end early, unnamed, at another reason).
    assert!(whole as f64 >= REQUIRED * at_leaf.len() as f64, "{stats:#?}");
    let truncated = mine.iter().filter(|t| t.frames.last().is_some_and(|f| f.is_truncated())).count() as u64;
    assert!(stats.user_stacks_frame_limit >= truncated && truncated >= whole as u64, "{stats:#?}");
}

#[test]
fn cpp_virtual_calls_and_templates() {
    let _serial = serial();
    let exe = build_workload("g++", "virtual_calls.cpp", &["-O2"], "virtual_calls");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };
    let chain = c_main_thread(&[Fn("drive"), Fn("Accumulator<Shape>::total"), Fn("Circle::area"), Fn("circle_leaf")]);
    let c = completeness(&traces, w.pid(), Fn("circle_leaf"), &chain);
    assert_complete("C++ virtual calls", &c, &stats);
}

#[test]
fn rust_release_build() {
    let _serial = serial();
    let exe = build_workload("rustc", "rust_chain.rs", &["-C", "opt-level=2", "--edition=2021"], "rust_chain");
    let w = Workload::spawn(&mut Command::new(&exe));
    let Some((traces, stats)) = profile_running(&w) else { return };
    // std's runtime start (lang_start and its closures) lies between
    // libc's main caller and ours.
    let chain = [
        Fn("_start"),
        In(LIBC),
        In(LIBC),
        Any,
        Fn("rust_chain::main"),
        Fn("rust_chain::rust_outer"),
        Fn("rust_chain::rust_middle"),
        Fn("rust_chain::rust_leaf"),
    ];
    let c = completeness(&traces, w.pid(), Fn("rust_chain::rust_leaf"), &chain);
    assert_complete("Rust release build", &c, &stats);
}

#[test]
fn dlopened_library() {
    let _serial = serial();
    let exe = c_workload("dlopen_main.c");
    let dir = exe.parent().unwrap();
    let lib = dir.join("libplugin.so");
    build_workload("gcc", "dlopen_plugin.c", &["-O2", "-fomit-frame-pointer", "-shared", "-fPIC"], "libplugin.so");
    // Started before the agent; the library comes 300 ms later.
    let w = Workload::spawn(Command::new(&exe).arg(&lib));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS))) else {
        return;
    };
    let chain = c_main_thread(&[Fn("run_plugin"), Fn("plugin_entry"), Fn("plugin_step"), Fn("plugin_leaf")]);
    let c = completeness(&traces, w.pid(), Fn("plugin_leaf"), &chain);
    assert_complete("dlopened library", &c, &stats);
}

/// A program the agent has never seen starts while it runs (an exec in
/// a selected process), lives under a second and exits: its samples
/// unwind from the first ones on, and once it has exited every map entry
/// made for it goes away.
#[test]
fn short_lived_process_started_after_the_agent_then_maps_empty() {
    let _serial = serial();
    let exe = c_workload("short_lived.c");
    // The shell is selected; it execs the program once the agent started.
    let mut w = Workload::spawn_gated(&format!("exec {}", exe.display()));
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig {
        samples_per_second: HZ,
        pids: vec![w.pid()],
        unused_tables_budget_mib: 0,
        ..AgentConfig::default()
    };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    w.release();
    // Wait for the program to exit (700 ms of CPU).
    wait_exited(w.pid(), Duration::from_secs(20));
    // Everything loaded for it goes: the process at once, its files after
    // the (zero) grace period, at the next housekeeping.
    let mut entries = agent.unwind_map_entries();
    let mut stats = agent.stats();
    let deadline = Instant::now() + Duration::from_secs(10);
    while (entries != Some((0, 0, 0)) || (stats.processes_loaded, stats.files_loaded) != (0, 0))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
        entries = agent.unwind_map_entries();
        stats = agent.stats();
    }
    let stats_before_stop = agent.stats();
    agent.stop().expect("clean stop");
    drop(w);
    assert_eq!(
        entries,
        Some((0, 0, 0)),
        "(process ranges, delta_pages, file_deltas) entries left after exit; {stats_before_stop:#?}"
    );
    assert_eq!((stats_before_stop.processes_loaded, stats_before_stop.files_loaded), (0, 0));

    let traces = std::mem::take(&mut *traces.lock().unwrap());
    let chain = c_main_thread(&[Fn("short_work"), Fn("short_leaf")]);
    let c = completeness(&traces, traces.first().map_or(0, |t| t.process.pid.0), Fn("short_leaf"), &chain);
    assert_complete("short-lived process", &c, &stats_before_stop);
}

/// Issues 37-39: the first samples of a process are built while the
/// symbolizer still loads its files (a fresh agent has none loaded):
/// they wait for their names, so that no sample of the program keeps a
/// bare address in its own executable, the very first ones included.
#[test]
fn first_samples_of_a_new_process_have_named_native_frames() {
    let _serial = serial();
    let exe = c_workload("short_lived.c");
    let exe_name = exe.file_name().unwrap().to_str().unwrap().to_string();
    let mut w = Workload::spawn_gated(&format!("exec {}", exe.display()));
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: HZ, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    w.release();
    wait_exited(w.pid(), Duration::from_secs(20));
    agent.stop().expect("clean stop");
    let stats = agent.stats();
    drop(w);
    let mut ours: Vec<Trace> = std::mem::take(&mut *traces.lock().unwrap())
        .into_iter()
        .filter(|t| *t.process.executable_name == *exe_name)
        .collect();
    ours.sort_by_key(|t| t.timestamp_unix_ns);
    let shown = |t: &Trace| profiler_tests::user_frames(t).iter().map(|f| f.to_string()).collect::<Vec<_>>().join(";");
    let in_exe = |f: &Frame| f.mapping.as_ref().is_some_and(|m| m.file_name() == exe_name);
    let bare: Vec<String> =
        ours.iter().filter(|t| t.frames.iter().any(|f| in_exe(f) && f.lines.is_empty())).map(shown).collect();
    assert!(ours.len() >= MIN_SAMPLES, "{} samples of {exe_name}; {stats:#?}", ours.len());
    assert_eq!(bare, Vec::<String>::new(), "samples with an unnamed frame in {exe_name} (of {})", ours.len());
    // The first samples at the leaf: the whole chain, named.
    let chain = c_main_thread(&[Fn("short_work"), Fn("short_leaf")]);
    let at_leaf = |t: &&Trace| t.frames.iter().any(|f| f.function_name() == Some("short_leaf"));
    let first: Vec<&Trace> = ours.iter().filter(at_leaf).take(3).collect();
    assert_eq!(first.len(), 3, "{}", ours.iter().take(5).map(shown).collect::<Vec<_>>().join("\n"));
    for (i, t) in first.iter().enumerate() {
        assert!(
            profiler_tests::matches_chain(&profiler_tests::user_frames(t), &chain),
            "sample {i} at the leaf: {}",
            shown(t)
        );
    }
    // They waited, and none went on unnamed.
    assert!(stats.names_waited >= 1 && stats.names_waited_frames_named >= 1, "{stats:#?}");
    assert_eq!((stats.names_wait_timed_out, stats.names_wait_dropped_full), (0, 0), "{stats:#?}");
}

/// Measurement, not a CI test (run it with `--release -- --ignored
/// --nocapture`): whole-system profiling, a program never seen before
/// starts as a new process; prints how long until its first sample and
/// its first sample unwound to the root, and its completeness.
#[test]
#[ignore]
fn measure_new_process_latency() {
    let _serial = serial();
    let exe = c_workload("short_lived.c");
    let traces = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig { samples_per_second: HZ, ..AgentConfig::default() };
    let Some(agent) = start_agent(config, traces.clone()) else { return };
    // Let the agent load what already runs.
    std::thread::sleep(Duration::from_secs(3));
    let started_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let started = Instant::now();
    let mut child = Command::new(&exe).spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let lifetime = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    agent.stop().unwrap();
    let stats = agent.stats();
    let traces = std::mem::take(&mut *traces.lock().unwrap());
    let ours: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == pid).collect();
    let chain = c_main_thread(&[Fn("short_work"), Fn("short_leaf")]);
    let first = ours.iter().map(|t| t.timestamp_unix_ns).min();
    let first_complete = ours
        .iter()
        .filter(|t| profiler_tests::matches_chain(&profiler_tests::user_frames(t), &chain))
        .map(|t| t.timestamp_unix_ns)
        .min();
    let ms = |t: Option<u64>| t.map(|t| (t.saturating_sub(started_ns)) as f64 / 1e6);
    let mut by_time = ours.clone();
    by_time.sort_by_key(|t| t.timestamp_unix_ns);
    for t in by_time.iter().take(3) {
        let frames: Vec<String> = profiler_tests::user_frames(t).iter().map(|f| f.to_string()).collect();
        eprintln!("  at {:?} ms: {}", ms(Some(t.timestamp_unix_ns)), frames.join(";"));
    }
    let c = completeness(&traces, pid, Fn("short_leaf"), &chain);
    eprintln!(
        "new process: lived {:.0} ms; first sample after {:?} ms, first sample unwound to the root after {:?} ms; \
         completeness {}/{} = {:.1}%; processes loaded {}, files analysed {} in {} ms",
        lifetime.as_secs_f64() * 1e3,
        ms(first),
        ms(first_complete),
        c.complete,
        c.at_leaf,
        100.0 * c.ratio(),
        stats.processes_seen,
        stats.files_analysed,
        stats.unwind_analyse_ms
    );
    eprintln!("{stats:#?}");
}

/// Issue 39: a library's constructor runs from ld.so (`_dl_init`, called
/// by `_dl_start_user` just after ld.so's `_start`), before the
/// program's `_start`. ld.so's entry code has no CFI: its stacks end
/// there as whole (a root), not cut for want of coverage.
#[test]
fn library_constructor_run_by_ld_so_is_whole() {
    let _serial = serial();
    let lib =
        build_workload("gcc", "ctor_spin.c", &["-O2", "-fomit-frame-pointer", "-shared", "-fPIC"], "libctor_spin.so");
    let rpath = format!("-Wl,-rpath,{}", lib.parent().unwrap().display());
    let lib_arg = lib.to_str().unwrap();
    let exe = build_workload("gcc", "ctor_main.c", &["-O2", &rpath, "-Wl,--no-as-needed", lib_arg], "ctor_main");
    let mut w = Workload::spawn_gated(&format!("exec {}", exe.display()));
    let pid = w.pid();
    let config = AgentConfig { samples_per_second: HZ, pids: vec![pid], ..AgentConfig::default() };
    let Some((traces, stats)) = profile_with(config, |_| {
        w.release();
        wait_exited(pid, Duration::from_secs(30));
    }) else {
        return;
    };
    drop(w);
    // Root first: ld.so's frames (its `_start`, named from its debug
    // file where installed, `_dl_init`, `call_init`), the constructor.
    let chain = [ManyIn("ld-linux-x86-64.so.2"), Fn("ctor_spin"), Fn("ctor_leaf")];
    let c = completeness(&traces, pid, Fn("ctor_leaf"), &chain);
    assert_complete("library constructor run by ld.so", &c, &stats);
    // The frames alone would match a stack cut at ld.so's entry too: the
    // stops say whether they reached the root.
    let stopped = stats.user_stacks_complete + stats.user_stacks_truncated;
    assert!(
        stats.user_stacks_truncated as f64 <= stopped as f64 * (1.0 - REQUIRED),
        "{} of {stopped} user stacks cut short: {:?}",
        stats.user_stacks_truncated,
        stats.unwind_stopped
    );
}
