//! New processes complete from their first samples: a program started
//! while the process manager is busy (made deterministic by
//! `process_load_delay_ms`) has its early samples' stacks copied by the
//! BPF programs and unwound in user space once it is loaded. At least 95%
//! of its samples from 200 ms after exec must carry the exact chain, and
//! a good share of them must have been unwound in user space (so this
//! fails when the feature is off: those samples would hold their leaf
//! only).

use profiler_agent::AgentConfig;
use profiler_tests::{build_workload, c_main_thread, completeness, profile_with, serial, Step, Workload};
use profiler_trace::Trace;
use std::process::Command;
use std::time::Duration;
use Step::{Fn, In, ManyIn};

const HZ: u32 = 99;
const REQUIRED: f64 = 0.95;
const LIBC: &str = "libc.so.6";
/// How long the process manager sits on the exec before loading.
const LOAD_DELAY_MS: u64 = 2000;

#[test]
fn process_started_while_the_manager_is_busy_is_complete_from_200ms() {
    let _serial = serial();
    let exe = build_workload("gcc", "native_chain.c", &["-O2", "-fomit-frame-pointer", "-pthread"], "native_chain");
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
    let Some((traces, stats)) = profile_with(config, |_| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_eq!(comm.trim_end(), "sh", "the shell waits for the agent");
        std::fs::write(&go, b"").expect("creating the go file");
        std::thread::sleep(Duration::from_millis(6000));
    }) else {
        return;
    };
    let program: Vec<Trace> =
        traces.iter().filter(|t| t.process.pid.0 == w.pid() && &*t.thread_name == "native_chain").cloned().collect();
    // Its first sample comes within a tick of the exec.
    let exec_ns = program.iter().map(|t| t.timestamp_unix_ns).min().expect("samples of the program");
    let after: Vec<Trace> = program.iter().filter(|t| t.timestamp_unix_ns >= exec_ns + 200_000_000).cloned().collect();
    let early = after.iter().filter(|t| t.timestamp_unix_ns < exec_ns + LOAD_DELAY_MS * 1_000_000).count();

    let main_chain = c_main_thread(&[Fn("chain_1"), Fn("chain_2"), Fn("chain_3"), Fn("chain_4"), Fn("chain_leaf")]);
    let thread_chain =
        [In(LIBC), In(LIBC), Fn("thread_main"), Fn("sort_worker"), ManyIn(LIBC), Fn("compare"), Fn("compare_leaf")];
    let main = completeness(&after, w.pid(), Fn("chain_leaf"), &main_chain);
    let thread = completeness(&after, w.pid(), Fn("compare_leaf"), &thread_chain);
    eprintln!(
        "from 200 ms after exec: main {}/{}, thread {}/{} ({} samples before the load); late unwinding: {} copies, \
         {} complete, stops {:?}, {} skipped, {} timed out; {} map lookups, {} answered from the caches",
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
        stats.late_unwind_cached_lookups
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
    // The samples taken before the (delayed) load are a good share, and
    // they came through user space.
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
    assert_eq!(stats.late_unwind_timed_out + stats.late_unwind_dropped_queue_full, 0, "{stats:#?}");
    // Each a system call. A sample's frames fall in a few mappings, whose
    // ranges are read once for it (about 7 lookups a copy here, its
    // readiness checks included; 25 when read once a frame).
    assert!(
        stats.late_unwind_map_lookups <= 10 * stats.late_unwind_copies,
        "{} map lookups for {} copies",
        stats.late_unwind_map_lookups,
        stats.late_unwind_copies
    );
}
