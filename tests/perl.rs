//! Perl unwinding on the real eBPF programs: Perl frames in place of
//! `Perl_runops_standard` runs, native frames above and below them
//! (Debian's `/usr/bin/perl`, threaded, libperl linked in; skipped when
//! missing, except under CI=true where it is required).
//!
//! Each test asserts the whole chain of Perl frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost Perl frame
//! is the chain's leaf (samples with no Perl frame, or an unnamed one,
//! count as failures), and prints the measured completeness.

use profiler_tests::in_ci;
use profiler_tests::runtime_chain::{Expect, Runtime, SECONDS};
use profiler_trace::FrameKind;

const PERL: Runtime = Runtime {
    name: "perl",
    kind: FrameKind::Perl,
    prefix: "pl",
    binary: "/usr/bin/perl",
    package: "perl",
    args: &[],
    comment: "#",
    zero_counters: &["read_errors", "no_interpreter", "unsupported"],
};

#[test]
fn chain_main_a_b_c() {
    let Some(script) = PERL.begin("cpu_chain.pl") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let expected = [
        Expect::at("main", &path, at("main")),
        Expect::at("Chain::a", &path, at("a")),
        Expect::at("Chain::Worker::b", &path, at("b")),
        Expect::within("Chain::c", &path, at("c_first")..=at("c_last")),
    ];
    PERL.chain_test(&path, &expected);
}

#[test]
fn sort_sub_is_called_back_from_c() {
    let Some(script) = PERL.begin("sort_sub.pl") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let expected = [
        Expect::at("main", &path, at("main")),
        Expect::at("Chain::a", &path, at("a")),
        // pp_sort (C) runs the comparison sub in a nested op loop, on a
        // stack info of its own: native frames between.
        Expect::at("Chain::by_value", &path, at("by_value")).after_native(),
        Expect::within("Chain::c", &path, at("c_first")..=at("c_last")),
    ];
    PERL.chain_test(&path, &expected);
}

/// Ithreads: each thread's interpreter is its own (`PL_current_context`,
/// thread-local), so each shows its own chain, down to `main` at the
/// statement that created it.
#[test]
fn each_thread_shows_its_own_chain() {
    let Some(script) = PERL.begin("threads.pl") else { return };
    let threads = PERL.command().args(["-Mthreads", "-e1"]).status();
    if !threads.is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "perl's threads module is required under CI=true (apt-get install perl)");
        eprintln!("SKIPPED: perl has no threads module");
        return;
    }
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let (w, traces, stats) = PERL.profile(PERL.args, &path, false);
    let tids = PERL.leaf_threads(&traces, w.pid(), ["Chain::a_leaf", "Chain::b_leaf"]);
    for ((worker, leaf), tid) in [("worker_a", "a"), ("worker_b", "b")].into_iter().zip(tids) {
        let expected = [
            Expect::at("main", &path, at("threads")),
            Expect::at(if leaf == "a" { "Chain::worker_a" } else { "Chain::worker_b" }, &path, at(worker)),
            Expect::within(
                if leaf == "a" { "Chain::a_leaf" } else { "Chain::b_leaf" },
                &path,
                at(&format!("{leaf}_first"))..=at(&format!("{leaf}_last")),
            ),
        ];
        PERL.check(&format!("threads.pl {worker}"), &traces, &stats, w.pid(), tid, &expected);
    }
}

/// The closing measurement (issue 14): a script written apart from the
/// other workloads, two chains in turn: a package's methods calling a
/// sub of another package, and `sort` with a block (C, a nested op loop)
/// calling a sub that calls another.
#[test]
fn unseen_script_chain_and_callback() {
    let Some(script) = PERL.begin("unseen_orders.pl") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    // Two chains in turn: twice the time, about as many samples each.
    let (w, traces, stats) = PERL.profile_for(2 * SECONDS, PERL.args, &path, false);
    let chain = [
        Expect::at("main", &path, at("main_submit")),
        Expect::at("Orders::Batch::submit", &path, at("submit")),
        Expect::at("Orders::Batch::validate", &path, at("validate")),
        Expect::within("Orders::checksum", &path, at("checksum_first")..=at("checksum_last")),
    ];
    PERL.check("unseen_orders.pl chain", &traces, &stats, w.pid(), w.pid(), &chain);
    let callback = [
        Expect::at("main", &path, at("main_arrange")),
        Expect::at("Orders::Batch::arrange", &path, at("arrange")),
        Expect::at("Orders::Batch::heavier", &path, at("heavier")).after_native(),
        Expect::within("Orders::weight", &path, at("weight_first")..=at("weight_last")),
    ];
    PERL.check("unseen_orders.pl callback", &traces, &stats, w.pid(), w.pid(), &callback);
}

/// Lines past 4094 (a frame word's 12 bits of line): the word counts a
/// sub's line from its first statement's, so subs 5000 lines down their
/// file keep their lines.
#[test]
fn lines_past_5000_keep_their_numbers() {
    let Some(script) = PERL.begin_padded("far_lines.pl", 5000) else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    assert!(at("run") > 5000 && at("spin_first") > 5000, "the subs lie past line 5000");
    let expected = [
        Expect::at("main", &path, at("main")),
        Expect::at("Far::Deep::run", &path, at("run")),
        Expect::within("Far::spin", &path, at("spin_first")..=at("spin_last")),
    ];
    PERL.chain_test(&path, &expected);
}

/// A real program: Debian's `perltidy` (package `perltidy`; skipped when
/// missing, except under CI=true), its `Perl::Tidy` formatting one of its
/// own modules again and again in one process
/// (`workloads/perl/tidy_loop.pl`), which compiles its modules anew
/// each time: their `use` lines run as `BEGIN` blocks, which Perl frees
/// once run, often before the sample is named. No Perl frame is reported
/// by a raw address: each is named (`Package::sub`, `main`, `eval`,
/// `BEGIN`), or, for a sub that could no longer be read when it was
/// named, `[unnamed Perl sub]`.
#[test]
fn perltidy_frames_are_never_raw_addresses() {
    use profiler_agent::AgentConfig;
    use profiler_tests::Workload;
    // profiler_interpreters::perl::UNNAMED_SUB
    const UNNAMED_SUB: &str = "[unnamed Perl sub]";

    let _serial = profiler_tests::serial();
    let input = std::path::Path::new("/usr/share/perl5/Perl/Tidy/Logger.pm");
    if !input.exists() || !std::path::Path::new(PERL.binary).exists() {
        assert!(!in_ci(), "perl and perltidy are required under CI (apt-get install perltidy)");
        eprintln!("SKIPPED: no perltidy");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/perl/tidy_loop.pl");
    let w = Workload::spawn(std::process::Command::new(PERL.binary).arg(&script).arg(input).arg("600"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let config = AgentConfig { samples_per_second: 99, pids: vec![w.pid()], ..AgentConfig::default() };
    let Some((traces, stats)) =
        profiler_tests::profile_with(config, |_| std::thread::sleep(std::time::Duration::from_secs(SECONDS + 3)))
    else {
        return;
    };
    let mine = || traces.iter().filter(|t| t.process.pid.0 == w.pid());
    let perl_frames: Vec<&profiler_trace::Frame> =
        mine().flat_map(|t| t.frames.iter().filter(|f| f.kind == FrameKind::Perl)).collect();
    let samples = mine().filter(|t| t.frames.iter().any(|f| f.kind == FrameKind::Perl)).count();
    let raw: Vec<String> = perl_frames
        .iter()
        .filter(|f| f.function_name().is_none_or(|n| n.starts_with("0x")))
        .map(|f| format!("{f:?}"))
        .take(5)
        .collect();
    let unnamed = perl_frames.iter().filter(|f| f.function_name() == Some(UNNAMED_SUB)).count();
    // BEGIN blocks: by their name while alive (`Perl::Tidy::BEGIN`), or
    // from the compiler's native frames around them once freed.
    let begin = perl_frames.iter().filter(|f| f.function_name().is_some_and(|n| n.ends_with("BEGIN"))).count();
    let named = |name: &str| perl_frames.iter().filter(|f| f.function_name() == Some(name)).count();
    eprintln!(
        "perltidy: {samples} samples with Perl frames, {} Perl frames, {unnamed} {UNNAMED_SUB}, {begin} BEGIN, {} \
         main, {} eval, {} Perl::Tidy::perltidy",
        perl_frames.len(),
        named("main"),
        named("eval"),
        named("Perl::Tidy::perltidy")
    );
    assert!(samples >= 25, "{samples} samples with Perl frames; {stats:#?}");
    assert!(raw.is_empty(), "Perl frames without a name: {raw:#?}");
    // The script's top level, its requires (string-eval frames), the
    // modules' BEGIN blocks and perltidy's entry sub, at least.
    assert!(named("main") > 0 && named("eval") > 0 && named("Perl::Tidy::perltidy") > 0 && begin > 0);
    // Most frames are named by what they are, not the placeholder.
    assert!(unnamed * 5 <= perl_frames.len(), "{unnamed} of {} frames unnamed", perl_frames.len());
}
