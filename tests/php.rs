//! PHP unwinding on the real eBPF programs: PHP frames in place of the
//! Zend VM's `execute_ex` runs, native frames above and below them
//! (Debian's `/usr/bin/php`, NTS; skipped when missing, except under
//! CI=true where it is required).
//!
//! Each test asserts the whole chain of PHP frames, root first, with
//! their files and lines, and where native frames lie between them, in
//! at least 95% of the main thread's samples whose innermost PHP frame is
//! the chain's leaf (samples with no PHP frame, or an unnamed one, count
//! as failures), and prints the measured completeness.

use profiler_tests::runtime_chain::{Expect, Runtime};
use profiler_tests::serial;
use profiler_trace::FrameKind;

/// Run with opcache off, as the CLI has it by default.
const PHP: Runtime = Runtime {
    name: "php",
    kind: FrameKind::Php,
    prefix: "php",
    binary: "/usr/bin/php",
    package: "php-cli",
    args: &["-d", "opcache.enable_cli=0"],
    comment: "//",
    zero_counters: &["read_errors", "unsupported"],
};

#[test]
fn chain_main_a_b_c() {
    let _serial = serial();
    if !PHP.installed() {
        return;
    }
    let path = PHP.script("cpu_chain.php");
    let at = |m: &str| PHP.line_of(&path, m);
    let expected = [
        Expect::at("{main}", &path, at("main")),
        Expect::at("Chain\\a", &path, at("a")),
        Expect::at("Chain\\Worker::b", &path, at("b")),
        Expect::within("Chain\\c", &path, at("c_first")..=at("c_last")),
    ];
    PHP.chain_test(&path, &expected);
}

#[test]
fn usort_callback_is_called_back_from_c() {
    let _serial = serial();
    if !PHP.installed() {
        return;
    }
    let path = PHP.script("usort_callback.php");
    let at = |m: &str| PHP.line_of(&path, m);
    let expected = [
        Expect::at("{main}", &path, at("main")),
        Expect::at("Chain\\a", &path, at("a")),
        // A function written in C: its frame stands where the VM called
        // it; its own native frames (zend_sort, zend_call_function, ...)
        // lie below it, up to the callback's execute_ex run.
        Expect::builtin("usort"),
        Expect::at("Chain\\Worker::compare", &path, at("compare")).after_native(),
        Expect::within("Chain\\c", &path, at("c_first")..=at("c_last")),
    ];
    PHP.chain_test(&path, &expected);
}
