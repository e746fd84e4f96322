//! Proves the V8 layout against live Node processes: `/usr/bin/node`
//! runs `tests/workloads/node/chain.js` (top level -> a -> b -> c, c
//! blocked in `Atomics.wait`), interpreted only (`--jitless`) and hot
//! (the chain run 200k times first, so the optimising tiers compiled
//! it). The test stops the process (SIGSTOP), takes the main thread's
//! stack pointer from `/proc/<pid>/syscall` (root can read it; no ptrace
//! needed), finds the innermost exit frame (the C++ builtin below `c`),
//! walks the frame pointer chain to the entry frame, and asserts the
//! exact chain of names and lines down to the script's top level.
//!
//! Node is required under CI=true (it is on every machine of this kind).

mod common;

use common::{skip, stop, workload, Workload};
use profiler_elf::ElfFile;
use profiler_interpreters::v8::{
    detect, find_exit_frame, walk_frames, Detection, Tier, V8Frame, V8Layout, V8Symbolizer, WalkEnd, ANONYMOUS,
};
use profiler_interpreters::PidMemory;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Node under test: `$EP_TEST_NODE` (another build, e.g. a release
/// cached by `scripts/install-node-releases.sh`), else the machine's.
fn node() -> String {
    std::env::var("EP_TEST_NODE").unwrap_or_else(|_| "/usr/bin/node".to_string())
}

fn have_node() -> bool {
    let found = Path::new(&node()).exists();
    if !found {
        skip(&format!("no {}", node()));
    }
    found
}

fn script() -> PathBuf {
    workload("node/chain.js")
}

/// The line of the chain script marked `// line:<name>`.
fn marked_line(name: &str) -> u32 {
    marked_line_in(&script(), name)
}

fn marked_line_in(script: &Path, name: &str) -> u32 {
    common::marked_line(script, "//", name)
}

fn start(flags: &[&str], hot: bool) -> Workload {
    start_script(&script(), flags, hot)
}

fn start_script(script: &Path, flags: &[&str], hot: bool) -> Workload {
    let mut cmd = Command::new(node());
    cmd.args(flags).arg(script);
    if hot {
        cmd.arg("hot");
    }
    let mut child = Workload::spawn(&mut cmd);
    assert_eq!(child.line().trim(), "ready");
    child
}

/// Waits until the main thread blocks in futex (Atomics.wait), then
/// stops the process and returns the main thread's stack pointer.
fn stop_blocked(pid: u32) -> u64 {
    // Blocked for good: in futex with the same arguments and stack for
    // 200 ms (a lock taken in passing does not last).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut same_since: Option<(String, Instant)> = None;
    loop {
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
        if syscall.split_whitespace().next() == Some("202") {
            match &same_since {
                Some((seen, since)) if *seen == syscall => {
                    if since.elapsed() >= Duration::from_millis(200) {
                        break;
                    }
                }
                _ => same_since = Some((syscall.clone(), Instant::now())),
            }
        } else {
            same_since = None;
        }
        assert!(Instant::now() < deadline, "never blocked in futex: {syscall}");
        std::thread::sleep(Duration::from_millis(10));
    }
    stop(pid);
    stack_pointer(&std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap())
}

/// The stack pointer in a `/proc/<pid>/task/<tid>/syscall` line: "nr
/// args... sp pc", or "-1 sp pc" outside a syscall.
fn stack_pointer(syscall: &str) -> u64 {
    let words: Vec<&str> = syscall.split_whitespace().collect();
    assert!(words.len() >= 3, "{syscall}");
    u64::from_str_radix(words[words.len() - 2].trim_start_matches("0x"), 16).unwrap()
}

/// The main thread of a workload, once blocked in futex and stopped,
/// walked from its innermost exit frame.
struct MainWalk {
    layout: Arc<V8Layout>,
    memory: PidMemory,
    names: V8Symbolizer,
    exit: u64,
    frames: Vec<V8Frame>,
    end: WalkEnd,
}

fn walk_main(node: &Workload) -> MainWalk {
    let pid = node.pid();
    let sp = stop_blocked(pid);
    let layout = layout();
    let memory = PidMemory(pid);
    let exit = find_exit_frame(&memory, &layout, sp).expect("no exit frame above sp");
    let mut names = V8Symbolizer::new(layout.clone());
    let (frames, end) = walk_frames(&memory, &mut names, exit, 0);
    MainWalk { layout, memory, names, exit, frames, end }
}

fn layout() -> Arc<V8Layout> {
    let elf = ElfFile::open(node()).unwrap();
    match detect(&elf) {
        Detection::V8(layout) => Arc::new(*layout),
        other => panic!("{}: {other:?}", node()),
    }
}

/// The columns of the first four JavaScript frames.
fn columns(frames: &[V8Frame]) -> Vec<Option<u32>> {
    frames
        .iter()
        .filter_map(|f| match f {
            V8Frame::Js { line, .. } => Some(line.map(|l| l.1)),
            V8Frame::Marker { .. } => None,
        })
        .take(4)
        .collect()
}

/// Where V8 places each call of the chain (as its own stack traces do):
/// at the called property (`wait` of `Atomics.wait(`) or function name.
fn expected_columns() -> Vec<Option<u32>> {
    let text = std::fs::read_to_string(script()).unwrap();
    [("c", "wait("), ("b", "c("), ("a", "b("), ("top", "a(")]
        .iter()
        .map(|(mark, callee)| {
            let line = text.lines().nth(marked_line(mark) as usize - 1).unwrap();
            Some(line.find(callee).unwrap() as u32 + 1)
        })
        .collect()
}

/// A walk's JavaScript frames: `(name, tier, line)`.
fn js_frames(frames: &[V8Frame]) -> Vec<(String, Tier, Option<u32>)> {
    frames
        .iter()
        .filter_map(|f| match f {
            V8Frame::Js { name, tier, line, .. } => Some((name.to_string(), *tier, line.map(|l| l.0))),
            V8Frame::Marker { .. } => None,
        })
        .collect()
}

/// Walks the main thread of a stopped workload and checks the chain.
fn check_chain(node: &Workload, expect_tier: Option<Tier>) -> Vec<V8Frame> {
    let MainWalk { layout, memory, mut names, exit, frames, end } = walk_main(node);
    eprintln!("{frames:#?}\n{end:?}");
    assert_eq!(end, WalkEnd::Entry, "the walk must reach the entry frame");
    // Walked again: the same frames, every function from the cache.
    let before = names.stats();
    assert_eq!(walk_frames(&memory, &mut names, exit, 0), (frames.clone(), end.clone()));
    let after = names.stats();
    assert_eq!((after.read, after.failed), (before.read, before.failed));
    let js_count = frames.iter().filter(|f| matches!(f, V8Frame::Js { .. })).count() as u64;
    assert!(after.hits - before.hits >= js_count, "{before:?} -> {after:?}");
    // The exit frame of the C++ builtin Atomics.wait comes first.
    assert_eq!(frames[0], V8Frame::Marker { fp: exit, frame_type: layout.frame_types.builtin_exit }, "innermost frame");
    let js = js_frames(&frames);
    let chain: Vec<&str> = js.iter().take(4).map(|f| f.0.as_str()).collect();
    assert_eq!(chain, ["c", "b", "a", ANONYMOUS], "innermost JS frames: {js:?}");
    let file = script();
    for f in frames.iter().filter(|f| matches!(f, V8Frame::Js { .. })).take(4) {
        let V8Frame::Js { script, .. } = f else { unreachable!() };
        assert_eq!(script.as_deref(), Some(file.to_str().unwrap()), "{f:?}");
    }
    if let Some(tier) = expect_tier {
        for f in js.iter().take(3) {
            assert_eq!(f.1, tier, "tier of {f:?}");
        }
    }
    frames
}

#[test]
fn interpreted_chain_with_lines() {
    if !have_node() {
        return;
    }
    let node = start(&["--jitless"], false);
    let frames = check_chain(&node, Some(Tier::Bytecode));
    let js = js_frames(&frames);
    let lines: Vec<Option<u32>> = js.iter().take(4).map(|f| f.2).collect();
    let expect = ["c", "b", "a", "top"].map(|n| Some(marked_line(n)));
    assert_eq!(lines, expect, "{js:?}");
    assert_eq!(columns(&frames), expected_columns());
    check_loader_frames(&frames);
}

/// Below the script's top level: Node 20's CommonJS loader (names as
/// Node's own stack traces print them: inferred names of anonymous
/// functions), then the internal frame of the builtin that called it
/// and the entry frame from C++.
fn check_loader_frames(frames: &[V8Frame]) {
    let layout = layout();
    if layout.version.major != 11 || layout.version.minor != 3 {
        eprintln!("not Node 20 (V8 {}): loader frames not checked", layout.version);
        return;
    }
    let names: Vec<&str> = frames.iter().filter_map(V8Frame::name).skip(4).collect();
    assert_eq!(
        names,
        [
            "Module._compile",
            "Module._extensions..js",
            "Module.load",
            "Module._load",
            "executeUserEntryPoint",
            ANONYMOUS
        ]
    );
    let Some(V8Frame::Js { script, .. }) = frames.iter().rev().find(|f| matches!(f, V8Frame::Js { .. })) else {
        unreachable!()
    };
    assert_eq!(script.as_deref(), Some("node:internal/main/run_main_module"));
    let tail: Vec<Option<u32>> = frames
        .iter()
        .rev()
        .take(2)
        .map(|f| match f {
            V8Frame::Marker { frame_type, .. } => Some(*frame_type),
            V8Frame::Js { .. } => None,
        })
        .collect();
    assert_eq!(tail, [Some(layout.frame_types.entry), Some(layout.frame_types.internal)]);
}

#[test]
fn node_layout_from_the_file() {
    if !have_node() {
        return;
    }
    let layout = layout();
    let out = Command::new(node()).args(["-p", "process.versions.v8"]).output().unwrap();
    let reported = String::from_utf8(out.stdout).unwrap();
    // "11.3.244.8-node.38": the detected version is its numeric part.
    assert_eq!(layout.version.to_string(), reported.trim().split('-').next().unwrap());
    let out = Command::new(node()).args(["-p", "process.config.variables.v8_enable_pointer_compression"]).output();
    let compressed = String::from_utf8(out.unwrap().stdout).unwrap();
    assert_eq!(layout.pointer_compression, compressed.trim() == "1" || compressed.trim() == "true");
    assert_eq!(layout.smi_shift, 32);
    // Builtins are in the embedded blob.
    let elf = ElfFile::open(node()).unwrap();
    let blob = layout.builtins_code.clone().expect("embedded blob symbols");
    for builtin in ["Builtins_JSEntry", "Builtins_InterpreterEntryTrampoline"] {
        let (addr, _) = elf.function_symbol(builtin).unwrap();
        assert!(blob.contains(&addr), "{builtin} {addr:#x} outside {blob:x?}");
    }
    let (main, _) = elf.function_symbol("main").unwrap();
    assert!(!blob.contains(&main));
    // The standard x86-64 JavaScript frame: context, function, then (for
    // bytecode) the array and the offset, one slot each below fp.
    assert_eq!(
        (layout.fp_context_or_marker, layout.fp_function, layout.fp_bytecode_array, layout.fp_bytecode_offset),
        (-8, -16, -32, -40)
    );
}

/// Hot: TurboFan compiled `a` with `b` and `c` inlined, so the three
/// share one machine frame; the deoptimisation data names the inlined
/// functions and the position of each call.
#[test]
fn hot_chain() {
    if !have_node() {
        return;
    }
    let node = start(&[], true);
    let frames = check_chain(&node, None);
    let js: Vec<(&str, Tier, Option<u32>, bool, u64)> = frames
        .iter()
        .filter_map(|f| match f {
            V8Frame::Js { name, tier, line, inlined, fp, .. } => {
                Some((&**name, *tier, line.map(|l| l.0), *inlined, *fp))
            }
            V8Frame::Marker { .. } => None,
        })
        .take(4)
        .collect();
    let fp = js[0].4;
    let line = |n| Some(marked_line(n));
    // Maglev inlines too (V8 13+): the chain may not have reached
    // TurboFan yet.
    let tier = js[0].1;
    assert!([Tier::Maglev, Tier::Turbofan].contains(&tier), "{js:?}");
    assert_eq!(
        js,
        [
            ("c", tier, line("c"), true, fp),
            ("b", tier, line("b"), true, fp),
            ("a", tier, line("a"), false, fp),
            (ANONYMOUS, Tier::Bytecode, line("top"), false, js[3].4),
        ]
    );
    assert_ne!(js[3].4, fp);
    assert_eq!(columns(&frames), expected_columns());
    check_loader_frames(&frames);
}

/// Sparkplug only: baseline frames, told apart by their code's kind and
/// the pc (their lines need the bytecode offset table: not done).
#[test]
fn baseline_chain() {
    if !have_node() {
        return;
    }
    let node = start(&["--always-sparkplug", "--max-opt=1"], true);
    let frames = check_chain(&node, Some(Tier::Baseline));
    check_loader_frames(&frames);
}

/// A frame as `(name, tier, line, script, marker)`.
type FrameSummary<'a> = (Option<&'a str>, Option<Tier>, Option<u32>, Option<&'a str>, Option<u32>);

/// A comparator called from the `Array.prototype.sort` builtin: the
/// builtin's own frame (a JSFunction `sort` with builtin code, no
/// script) sits between two stub frames and the caller.
#[test]
fn comparator_under_the_sort_builtin() {
    if !have_node() {
        return;
    }
    let sort_js = script().with_file_name("sort.js");
    let node = start_script(&sort_js, &["--jitless"], false);
    let MainWalk { layout, frames, end, .. } = walk_main(&node);
    assert_eq!(end, WalkEnd::Entry);
    let file = sort_js.canonicalize().unwrap();
    let file = Some(file.to_str().unwrap());
    let line = |n| Some(marked_line_in(&sort_js, n));
    let stub = layout.frame_types.stub;
    let top: Vec<FrameSummary<'_>> = frames
        .iter()
        .take(6)
        .map(|f| match f {
            V8Frame::Js { name, tier, line, script, .. } => {
                (Some(&**name), Some(*tier), line.map(|l| l.0), script.as_deref(), None)
            }
            V8Frame::Marker { frame_type, .. } => (None, None, None, None, Some(*frame_type)),
        })
        .collect();
    assert_eq!(
        top,
        [
            (None, None, None, None, Some(layout.frame_types.builtin_exit)),
            (Some("byValue"), Some(Tier::Bytecode), line("byValue"), file, None),
            (None, None, None, None, Some(stub)),
            (None, None, None, None, Some(stub)),
            (Some("sort"), Some(Tier::Builtin), None, None, None),
            (Some("sortAll"), Some(Tier::Bytecode), line("sortAll"), file, None),
        ]
    );
    let top_level = js_frames(&frames).into_iter().nth(3).unwrap();
    assert_eq!(top_level, (ANONYMOUS.to_string(), Tier::Bytecode, line("top")));
    check_loader_frames(&frames);
}

/// A worker thread has its own isolate and stack: walking each thread
/// blocked in futex finds the worker's chain on one and the main
/// thread's on another, both complete to their entry frames.
#[test]
fn worker_thread_chain() {
    if !have_node() {
        return;
    }
    let worker_js = script().with_file_name("worker.js");
    let node = start_script(&worker_js, &["--jitless"], false);
    let pid = node.pid();
    // The main thread blocks last: once it does, both wait.
    stop_blocked(pid);
    let layout = layout();
    let memory = PidMemory(pid);
    let mut names = V8Symbolizer::new(layout.clone());
    let line = |n| Some(marked_line_in(&worker_js, n));
    let mut chains = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let syscall = std::fs::read_to_string(task.unwrap().path().join("syscall")).unwrap_or_default();
        if syscall.split_whitespace().next() != Some("202") {
            continue;
        }
        let sp = stack_pointer(&syscall);
        // Threads of the platform and libuv block in futex too, with no
        // JavaScript above them.
        let Some(exit) = find_exit_frame(&memory, &layout, sp) else { continue };
        let (frames, end) = walk_frames(&memory, &mut names, exit, 0);
        assert_eq!(end, WalkEnd::Entry, "{frames:#?}");
        let js = js_frames(&frames);
        chains.push(js.into_iter().take(4).map(|(n, _, l)| (n, l)).collect::<Vec<_>>());
    }
    chains.sort();
    let s = |n: &str| n.to_string();
    assert_eq!(
        chains,
        [
            vec![(s("mainWait"), line("mainWait")), (s("listOnTimeout"), None), (s("processTimers"), None)],
            vec![
                (s("wc"), line("wc")),
                (s("wb"), line("wb")),
                (s("wa"), line("wa")),
                (s(ANONYMOUS), line("workerTop"))
            ],
        ]
    );
}

/// `(rip, rbp)` of thread `tid`, taken with PTRACE_SEIZE + INTERRUPT and
/// left running again (detached).
fn registers(tid: u32) -> (u64, u64) {
    let tid = tid as libc::pid_t;
    // SAFETY: ptrace on our own child's thread; `regs` is a plain struct
    // the kernel fills; the thread is detached before returning.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0), 0, "seize");
        assert_eq!(libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0), 0, "interrupt");
        let mut status = 0;
        assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        assert_eq!(libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut _ as *mut libc::c_void), 0);
        assert_eq!(libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0), 0, "detach");
        (regs.rip, regs.rbp)
    }
}

/// A CPU-bound chain sampled from its registers, as the BPF unwinder
/// will start: from the interrupted thread's frame pointer and pc, at
/// least 16 of 20 samples give exactly inner, outer, top level down to
/// the entry frame (a sample may fall in a builtin or stub that keeps no
/// frame of its own); outer and the top level with their call lines, and
/// inner, once TurboFan (or Maglev) compiled it (on-stack replacement of its loop),
/// at the loop's line or at the `return` after it (a thread stopped
/// between two calls of inner: CI met it once in 20 samples).
#[test]
fn spinning_chain_from_registers() {
    if !have_node() {
        return;
    }
    let spin_js = script().with_file_name("spin.js");
    let node = start_script(&spin_js, &[], false);
    let pid = node.pid();
    let layout = layout();
    let memory = PidMemory(pid);
    let mut names = V8Symbolizer::new(layout.clone());
    let line = |n| Some(marked_line_in(&spin_js, n));
    let mut results = Vec::new();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(50));
        let (pc, fp) = registers(pid);
        let (frames, end) = walk_frames(&memory, &mut names, fp, pc);
        results.push((js_frames(&frames).into_iter().take(3).collect::<Vec<_>>(), end));
    }
    let complete: Vec<_> = results
        .iter()
        .filter(|(js, end)| *end == WalkEnd::Entry && js.iter().map(|f| f.0.as_str()).eq(["inner", "outer", ANONYMOUS]))
        .collect();
    assert!(complete.len() >= 16, "{}/20 complete: {results:?}", complete.len());
    let optimised = [Tier::Maglev, Tier::Turbofan];
    for (js, _) in &complete {
        // V8 13+ inlines inner into outer's Maglev code entered by
        // on-stack replacement; that code's inlining position for the
        // call is its loop's (V8's own stack traces take the call's from
        // the deoptimization translation, which is not read).
        let outer = if js[1].1 == Tier::Maglev { [line("outer"), line("outerLoop")] } else { [line("outer"); 2] };
        assert!(outer.contains(&js[1].2) && js[2].2 == line("spinTop"), "{js:?}");
        if optimised.contains(&js[0].1) {
            assert!([line("loop"), line("return")].contains(&js[0].2), "{js:?}");
        }
    }
    assert!(complete.iter().any(|(js, _)| optimised.contains(&js[0].1)), "inner never optimised: {results:?}");
}

/// Node 24 and 26 (V8 13.6, 14.6), when cached by
/// `scripts/install-node-releases.sh` (skipped when not, even under
/// CI=true): accepted, with compiled frames found by their pc (their
/// functions reach their code through the JS dispatch table, see
/// `docs/v8.md`).
#[test]
fn newer_releases_are_accepted() {
    for (major, v8_major) in [(24, 13), (26, 14)] {
        let path = format!("/var/cache/ebpf-profiler-runtimes/node/{major}/bin/node");
        if !Path::new(&path).exists() {
            eprintln!("SKIPPED: {path} is not cached");
            continue;
        }
        let elf = ElfFile::open(&path).unwrap();
        match detect(&elf) {
            Detection::V8(layout) => {
                assert_eq!(layout.version.major, v8_major, "{path}");
                assert!(layout.compiled_by_pc, "{path}");
                assert_eq!(layout.js_function_code, 0, "{path}");
                assert_eq!((layout.stream_header, layout.deopt_shared_info_index), (32, Some(7)), "{path}");
                assert!(layout.sfi_wrapper_shared_info.is_some() && layout.builtins_code.is_some(), "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}
