//! CRuby unwinding on the real eBPF programs: Ruby frames in place of
//! the VM's `rb_vm_exec` runs, native frames above and below them
//! (Debian's `/usr/bin/ruby`; skipped when missing, except under CI=true
//! where it is required).
//!
//! Each test asserts the whole chain of Ruby frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost Ruby frame
//! is the chain's leaf (samples with no Ruby frame, or an unnamed one,
//! count as failures), and prints the measured completeness.

use profiler_bpf::UnwindStop;
use profiler_tests::in_ci;
use profiler_tests::runtime_chain::{Expect, LangFrame, Runtime, MIN_SAMPLES, SECONDS};
use profiler_trace::{FrameKind, Trace};

const RUBY: Runtime = Runtime {
    name: "ruby",
    kind: FrameKind::Ruby,
    prefix: "rb",
    binary: "/usr/bin/ruby",
    package: "ruby",
    args: &[],
    comment: "#",
    zero_counters: &["no_ec", "unsupported"],
};

#[test]
fn chain_main_a_b_c() {
    let Some(script) = RUBY.begin("cpu_chain.rb") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let expected = [
        Expect::at("<main>", &path, at("main")),
        Expect::at("Object#a", &path, at("a")),
        Expect::at("Chain::Worker#b", &path, at("b")),
        Expect::within("Object#c", &path, at("c_first")..=at("c_last")),
    ];
    RUBY.chain_test(&path, &expected);
}

#[test]
fn sort_block_is_called_back_from_c() {
    let Some(script) = RUBY.begin("sort_block.rb") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let expected = [
        Expect::at("<main>", &path, at("main")),
        Expect::at("Object#caller", &path, at("caller")),
        // A C function: its frame stands where the VM called it, its own
        // native frames (ruby_qsort, rb_yield, ...) below it.
        Expect::builtin("Array#sort"),
        Expect::at("block in caller", &path, at("caller")).after_native(),
        Expect::within("Object#cmp", &path, at("cmp_first")..=at("cmp_last")),
    ];
    RUBY.chain_test(&path, &expected);
}

#[test]
fn each_thread_shows_its_own_chain() {
    let Some(script) = RUBY.begin("threads.rb") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let (w, traces, stats) = RUBY.profile(RUBY.args, &path, false);
    // Which threads ran which leaf: each thread must show its own.
    let tids = RUBY.leaf_threads(&traces, w.pid(), ["Object#a_leaf", "Object#b_leaf"]);
    for ((worker, leaf), tid) in [("worker_a", "a"), ("worker_b", "b")].into_iter().zip(tids) {
        let expected = [
            Expect::at("block in <main>", &path, at("threads")),
            Expect::at(if leaf == "a" { "Object#worker_a" } else { "Object#worker_b" }, &path, at(worker)),
            Expect::within(
                if leaf == "a" { "Object#a_leaf" } else { "Object#b_leaf" },
                &path,
                at(&format!("{leaf}_first"))..=at(&format!("{leaf}_last")),
            ),
        ];
        RUBY.check(&format!("threads.rb {worker}"), &traces, &stats, w.pid(), tid, &expected);
    }
}

/// YJIT (off by default; `--yjit`): its machine code lies in anonymous
/// memory without unwind tables, so a stack through it ends there
/// (`unwind_stopped.no_unwind_info`): its Ruby frames are lost, never
/// named wrongly.
#[test]
fn yjit_code_ends_stacks_without_misnaming() {
    let Some(script) = RUBY.begin("cpu_chain.rb") else { return };
    let path = script.path.clone();
    let yjit = RUBY.command().args(["--yjit", "-e", "exit(RubyVM::YJIT.enabled? ? 0 : 1)"]).status();
    if !yjit.is_ok_and(|s| s.success()) {
        // Debian 12's Ruby 3.1 has YJIT; Debian builds 3.3 without it
        // (the runtime matrix's roots).
        let in_root = RUBY.root().path().is_some();
        assert!(!in_ci() || in_root, "{} --yjit is required under CI=true (Debian's Ruby 3.1 has it)", RUBY.binary);
        eprintln!("SKIPPED: {} has no YJIT", RUBY.binary);
        return;
    }
    let (w, traces, stats) = RUBY.profile(&["--yjit"], &path, false);
    let known = ["<main>", "Object#a", "Chain::Worker#b", "Object#c"];
    let mut samples = 0;
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == w.pid()) {
        samples += 1;
        for f in RUBY.frames(t) {
            if let LangFrame::Lang { name, .. } = f {
                let name = name.unwrap_or_else(|| panic!("an unnamed Ruby frame: {}", RUBY.show(&RUBY.frames(t))));
                assert!(known.contains(&name.as_str()), "{name} is not a frame of the script");
            }
        }
    }
    let jit_ends = stats.unwind_stopped.get(UnwindStop::NoUnwindInfo);
    eprintln!("yjit: {samples} main-thread samples, {jit_ends} stacks ended in code without unwind tables");
    assert!(samples >= MIN_SAMPLES, "only {samples} samples");
    assert!(jit_ends > samples as u64 / 2, "most stacks end in YJIT code: {:?}", stats.unwind_stopped);
}

/// Off-CPU (`ruby_off_cpu`, the same walk at a scheduler switch): every
/// switch-out of a thread waiting in `Kernel#sleep` carries its chain.
#[test]
fn off_cpu_waits_carry_the_ruby_chain() {
    let Some(script) = RUBY.begin("sleep_chain.rb") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let (w, traces, stats) = RUBY.profile(RUBY.args, &path, true);
    let off: Vec<Trace> = traces.into_iter().filter(|t| t.off_cpu_ns.is_some()).collect();
    let expected = [
        Expect::at("<main>", &path, at("main")),
        Expect::at("Object#a", &path, at("a")),
        Expect::at("Object#b", &path, at("b")),
        Expect::builtin("Kernel#sleep"),
    ];
    RUBY.check("sleep_chain.rb off-CPU", &off, &stats, w.pid(), w.pid(), &expected);
}

/// The closing measurement (issue 14): a script written apart from the
/// other workloads, two chains in turn: methods of a class calling a
/// module's mixed-in method, and `Enumerable#sort_by` (C, through
/// `Array#each`) calling a block back, all under `Kernel#loop`'s block
/// (`Kernel#loop` is C in Ruby 3.1, Ruby in `<internal:kernel>` in 3.3).
#[test]
fn unseen_script_chain_and_callback() {
    let Some(script) = RUBY.begin("unseen_inventory.rb") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    // Two chains in turn: twice the time, about as many samples each.
    let (w, traces, stats) = RUBY.profile_for(2 * SECONDS, RUBY.args, &path, false);
    let chain = [
        Expect::at("<main>", &path, at("loop")),
        Expect::core("Kernel#loop"),
        Expect::at("block in <main>", &path, at("main_restock")).after_native(),
        Expect::at("Inventory::Shelf#restock", &path, at("restock")),
        Expect::at("Inventory::Shelf#tally", &path, at("tally")),
        Expect::within("Inventory::Weighing#weigh", &path, at("weigh_first")..=at("weigh_last")),
    ];
    RUBY.check("unseen_inventory.rb chain", &traces, &stats, w.pid(), w.pid(), &chain);
    let callback = [
        Expect::at("<main>", &path, at("loop")),
        Expect::core("Kernel#loop"),
        Expect::at("block in <main>", &path, at("main_arrange")).after_native(),
        Expect::at("Inventory::Shelf#arrange", &path, at("arrange")),
        Expect::builtin("Enumerable#sort_by"),
        Expect::builtin("Array#each"),
        Expect::at("block in arrange", &path, at("arrange")).after_native(),
        Expect::within("Inventory::Shelf#rank", &path, at("rank_first")..=at("rank_last")),
    ];
    RUBY.check("unseen_inventory.rb callback", &traces, &stats, w.pid(), w.pid(), &callback);
}

/// Lines past 5000: the word holds the instruction's index, user space
/// reads the line from the iseq, so there is no 12-bit line limit.
#[test]
fn lines_past_5000_keep_their_numbers() {
    let Some(script) = RUBY.begin_padded("far_lines.rb", 5000) else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    assert!(at("main") > 5000 && at("spin_first") > 5000, "the code lies past line 5000");
    let expected = [
        Expect::at("<main>", &path, at("main")),
        Expect::at("Far::Deep#run", &path, at("run")),
        Expect::within("Far::Deep#spin", &path, at("spin_first")..=at("spin_last")),
    ];
    RUBY.chain_test(&path, &expected);
}
