//! New processes complete from their first samples: a program started
//! while the process manager is busy (made deterministic by
//! `process_load_delay_ms`) has its early samples' stacks copied by the
//! BPF programs and unwound in user space once it is loaded. At least 95%
//! of its samples from 200 ms after exec must carry the exact chain, and
//! a good share of them must have been unwound in user space (so this
//! fails when the feature is off: those samples would hold their leaf
//! only).

use profiler_agent::{AgentConfig, Stats, LATE_UNWIND_MAX_PENDING_BYTES};
use profiler_tests::{build_workload, c_main_thread, completeness, profile_with, serial, user_frames, Step, Workload};
use profiler_trace::Trace;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use Step::{Fn, In, ManyIn};

const HZ: u32 = 99;
const REQUIRED: f64 = 0.95;
const LIBC: &str = "libc.so.6";
/// How long the process manager sits on the exec before loading.
const LOAD_DELAY_MS: u64 = 2000;

/// The samples of `exe` (its main thread and others named `thread`)
/// from 200 ms after its exec, the number of those taken before its
/// (delayed) load, the agent's statistics and the program's pid.
struct LateRun {
    after: Vec<Trace>,
    early: usize,
    stats: Stats,
    pid: u32,
}

/// Profiles `exe`, exec'd by a selected shell once the agent samples, its
/// load delayed by LOAD_DELAY_MS; None when BPF cannot be loaded here.
fn profile_late(exe: &Path, thread: &str) -> Option<LateRun> {
    // The shell is selected (and loaded before sampling starts); it execs
    // the program once the agent runs (when `go` appears): an exec the
    // manager handles LOAD_DELAY_MS late.
    let go = exe.with_file_name("late_unwinding.go");
    let _ = std::fs::remove_file(&go);
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done; exec {}", go.display(), exe.display());
    let w = Workload::spawn(Command::new("sh").arg("-c").arg(script));
    let config = AgentConfig {
        samples_per_second: HZ,
        pids: vec![w.pid()],
        process_load_delay_ms: LOAD_DELAY_MS,
        ..AgentConfig::default()
    };
    let pid = w.pid();
    let (traces, stats) = profile_with(config, |_| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_eq!(comm.trim_end(), "sh", "the shell waits for the agent");
        std::fs::write(&go, b"").expect("creating the go file");
        std::thread::sleep(Duration::from_millis(6000));
    })?;
    let program: Vec<Trace> =
        traces.iter().filter(|t| t.process.pid.0 == pid && &*t.thread_name == thread).cloned().collect();
    // Its first sample comes within a tick of the exec.
    let exec_ns = program.iter().map(|t| t.timestamp_unix_ns).min().expect("samples of the program");
    let after: Vec<Trace> = program.iter().filter(|t| t.timestamp_unix_ns >= exec_ns + 200_000_000).cloned().collect();
    let early = after.iter().filter(|t| t.timestamp_unix_ns < exec_ns + LOAD_DELAY_MS * 1_000_000).count();
    Some(LateRun { after, early, stats, pid })
}

/// The samples taken before the (delayed) load are a good share, and
/// they came through user space to the root.
fn assert_unwound_late(run: &LateRun) {
    let LateRun { after, early, stats, .. } = run;
    let early = *early;
    assert!(
        early >= 10 && early * 10 >= after.len(),
        "the load was not delayed: {early} of {} samples before it",
        after.len()
    );
    assert!(
        stats.late_unwind_complete as usize * 10 >= early * 9,
        "{} samples unwound in user space to the root, {early} taken before the load: {stats:#?}",
        stats.late_unwind_complete
    );
    assert_eq!(stats.late_unwind_timed_out, 0, "{stats:#?}");
    // Held copies are bounded in bytes: a load later than the delay (a
    // busy machine) holds more than the bound, and the oldest then go on
    // as they are, counted. Only then.
    assert!(
        stats.late_unwind_dropped_queue_full == 0
            || stats.late_unwind_copy_bytes > LATE_UNWIND_MAX_PENDING_BYTES as u64,
        "{} copies dropped with {} bytes copied in all: {stats:#?}",
        stats.late_unwind_dropped_queue_full,
        stats.late_unwind_copy_bytes
    );
}

#[test]
fn process_started_while_the_manager_is_busy_is_complete_from_200ms() {
    let _serial = serial();
    let exe = build_workload("gcc", "native_chain.c", &["-O2", "-fomit-frame-pointer", "-pthread"], "native_chain");
    let Some(run) = profile_late(&exe, "native_chain") else { return };
    let LateRun { after, early, stats, pid } = &run;
    let (early, pid) = (*early, *pid);

    let main_chain = c_main_thread(&[Fn("chain_1"), Fn("chain_2"), Fn("chain_3"), Fn("chain_4"), Fn("chain_leaf")]);
    let thread_chain =
        [In(LIBC), In(LIBC), Fn("thread_main"), Fn("sort_worker"), ManyIn(LIBC), Fn("compare"), Fn("compare_leaf")];
    let main = completeness(after, pid, Fn("chain_leaf"), &main_chain);
    let thread = completeness(after, pid, Fn("compare_leaf"), &thread_chain);
    eprintln!(
        "from 200 ms after exec: main {}/{}, thread {}/{} ({} samples before the load); late unwinding: {} copies, \
         {} complete, stops {:?}, {} skipped, {} timed out; {} map lookups, {} answered from the caches, {} readiness \
         lookups",
        main.complete,
        main.at_leaf,
        thread.complete,
        thread.at_leaf,
        early,
        stats.late_unwind_copies,
        stats.late_unwind_complete,
        stats.late_unwind_stops,
        stats.late_unwind_copies_skipped,
        stats.late_unwind_timed_out,
        stats.late_unwind_map_lookups,
        stats.late_unwind_cached_lookups,
        stats.late_unwind_readiness_lookups
    );
    for (what, c) in [("main thread", &main), ("qsort thread", &thread)] {
        assert!(c.at_leaf >= 25, "{what}: only {} samples at the leaf; {stats:#?}", c.at_leaf);
        assert!(
            c.ratio() >= REQUIRED,
            "{what}: {} of {} samples from 200 ms after exec carry the whole chain ({:.1}%); some that do not \
             (root first):\n{}\n{stats:#?}",
            c.complete,
            c.at_leaf,
            100.0 * c.ratio(),
            c.failures.join("\n")
        );
    }
    assert_unwound_late(&run);
    // Each a system call. A sample's frames fall in a few mappings, whose
    // ranges are read once for it (about 5 lookups a copy here; 25 when
    // read once a frame). The checks whether the process is loaded yet
    // are counted apart: they grow with the wait (a poll every 20 ms, once
    // per distinct leaf), which a loaded machine stretches.
    assert!(
        stats.late_unwind_map_lookups <= 10 * stats.late_unwind_copies,
        "{} map lookups for {} copies ({} more asking whether the process was loaded)",
        stats.late_unwind_map_lookups,
        stats.late_unwind_copies,
        stats.late_unwind_readiness_lookups
    );
}

/// 17 KiB of locals between the leaf and main (as between PHP's script
/// and its CLI's do_cli): each early sample's stack copy reaches main's
/// frame and libc's below it, so its late unwinding ends at the root.
#[test]
fn stack_copy_reaches_main_over_large_frames() {
    let _serial = serial();
    let exe = build_workload("gcc", "big_frames.c", &["-O2", "-fomit-frame-pointer"], "big_frames");
    let Some(run) = profile_late(&exe, "big_frames") else { return };
    let chain = c_main_thread(&[Fn("big_outer"), Fn("big_inner"), Fn("big_leaf")]);
    let main = completeness(&run.after, run.pid, Fn("big_leaf"), &chain);
    // Samples unwound late may still lack their names (the symbolizer
    // has not read the file yet): their depth says they are whole.
    let in_program = |t: &&Trace| user_frames(t).last().and_then(|f| f.file.clone()).as_deref() == Some("big_frames");
    let program: Vec<&Trace> = run.after.iter().filter(in_program).collect();
    let deep = program.iter().filter(|t| user_frames(t).len() == chain.len()).count();
    eprintln!(
        "from 200 ms after exec: {}/{} whole ({} samples before the load); late unwinding: {} copies ({} KiB), \
         {} complete, stops {:?}; {deep} of {} in the program as deep as the chain",
        main.complete,
        main.at_leaf,
        run.early,
        run.stats.late_unwind_copies,
        run.stats.late_unwind_copy_bytes / 1024,
        run.stats.late_unwind_complete,
        run.stats.late_unwind_stops,
        program.len()
    );
    assert!(
        deep as f64 >= REQUIRED * program.len() as f64,
        "{deep} of {} samples in the program have the chain's {} frames: {:#?}",
        program.len(),
        chain.len(),
        run.stats
    );
    assert!(main.at_leaf >= 25, "only {} samples at the leaf; {:#?}", main.at_leaf, run.stats);
    assert!(
        main.ratio() >= REQUIRED,
        "{} of {} samples from 200 ms after exec carry the whole chain ({:.1}%); some that do not (root first):\n{}\n{:#?}",
        main.complete,
        main.at_leaf,
        100.0 * main.ratio(),
        main.failures.join("\n"),
        run.stats
    );
    assert_unwound_late(&run);
}
