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

use profiler_agent::AgentConfig;
use profiler_bpf::UnwindStop;
use profiler_tests::runtime_chain::{matches, Expect, LangFrame, Runtime, HZ, MIN_SAMPLES, SECONDS};
use profiler_tests::{in_ci, profile_with, runtime_root, Workload};
use profiler_trace::{FrameKind, Trace};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let Some(script) = PHP.begin("cpu_chain.php") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
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
    let Some(script) = PHP.begin("usort_callback.php") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
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

/// The opcache JIT compiling every function at load (`opcache.jit=1205`):
/// PHP 8.2's machine code lies in anonymous memory without unwind tables,
/// so a stack through it ends there (`unwind_stopped.no_unwind_info`): its
/// PHP frames are lost, never named wrongly. PHP 8.4's (the IR JIT) keeps
/// the chain whole here. Either way: no frame named wrongly, and every
/// sample is one or the other.
#[test]
fn opcache_jit_never_misnames() {
    let Some(script) = PHP.begin("cpu_chain.php") else { return };
    let jit = ["-d", "opcache.enable_cli=1", "-d", "opcache.jit_buffer_size=16M", "-d", "opcache.jit=1205"];
    let mut probe = PHP.command();
    probe.args(jit).args(["-r", "exit(opcache_get_status()['jit']['on'] ? 0 : 1);"]);
    if !probe.status().is_ok_and(|s| s.success()) {
        assert!(!in_ci(), "{}'s opcache JIT is required under CI=true (Debian's php8.2-opcache has it)", PHP.binary);
        eprintln!("SKIPPED: {} has no opcache JIT", PHP.binary);
        return;
    }
    let (w, traces, stats) = PHP.profile(&jit, &script.path, false);
    let known = ["{main}", "Chain\\a", "Chain\\Worker::b", "Chain\\c"];
    // Each sample either ends in JIT code (no PHP frame: the native
    // unwinder stops there, counted) or carries the chain from {main}
    // down, in order (PHP 8.4's JIT leaves the executor's frames whole).
    let (mut samples, mut whole, mut without_php) = (0, 0, 0);
    for t in traces.iter().filter(|t| t.process.pid.0 == w.pid() && t.tid.0 == w.pid()) {
        samples += 1;
        let mut names = Vec::new();
        for f in PHP.frames(t) {
            if let LangFrame::Lang { name, .. } = f {
                let name = name.unwrap_or_else(|| panic!("an unnamed PHP frame: {}", PHP.show(&PHP.frames(t))));
                assert!(known.contains(&name.as_str()), "{name} is not a frame of the script");
                names.push(name);
            }
        }
        if names.is_empty() {
            without_php += 1;
        } else if known.iter().zip(&names).all(|(k, n)| k == n) && names.len() <= known.len() {
            whole += 1;
        }
    }
    let jit_ends = stats.unwind_stopped.get(UnwindStop::NoUnwindInfo);
    eprintln!(
        "opcache JIT: {samples} main-thread samples: {whole} with the chain from {{main}}, {without_php} without a \
         PHP frame; {jit_ends} stacks ended in code without unwind tables"
    );
    assert!(samples >= MIN_SAMPLES, "only {samples} samples");
    assert!(
        whole + without_php >= samples * 95 / 100,
        "{} of {samples} samples neither whole nor ended in JIT code",
        samples - whole - without_php
    );
    assert!(
        jit_ends >= without_php as u64 * 9 / 10,
        "stacks without PHP frames that did not end in JIT code: {:?}",
        stats.unwind_stopped
    );
}

/// PHP-FPM (`php-fpm8.2`, Debian's `php8.2-fpm`): one worker (`pm =
/// static`) serves many short requests, sent by the FastCGI client below
/// as fast as it answers; each runs `{main} -> Chain\a -> Chain\Worker::b
/// -> Chain\c`. The worker's samples at `Chain\c` carry the whole chain,
/// from the request's own frames only (the previous request's are gone).
#[test]
fn fpm_worker_requests_carry_the_chain() {
    let Some(script) = PHP.begin("cpu_chain.php") else { return };
    if runtime_root().is_some() {
        // The matrix covers the CLI interpreter; the root has no php-fpm.
        eprintln!("SKIPPED: php-fpm is not part of the runtime matrix");
        return;
    }
    let fpm = Path::new(PHP_FPM);
    if !fpm.exists() {
        assert!(!in_ci(), "{PHP_FPM} is required under CI=true (apt-get install php8.2-fpm)");
        eprintln!("SKIPPED: {PHP_FPM} is not installed");
        return;
    }
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    let dir = std::env::temp_dir().join(format!("ep-php-fpm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("fpm.sock");
    let config = dir.join("fpm.conf");
    std::fs::write(
        &config,
        format!(
            "[global]\nerror_log = {}\ndaemonize = no\n[pool]\nlisten = {}\npm = static\npm.max_children = 1\n",
            dir.join("fpm.log").display(),
            socket.display()
        ),
    )
    .unwrap();
    // -R: the pool may run as root (the test's user).
    let master = Workload::spawn(Command::new(fpm).arg("-F").arg("-R").arg("-y").arg(&config));
    let deadline = Instant::now() + Duration::from_secs(30);
    let worker = loop {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", master.pid())).unwrap_or_default();
        match children.split_whitespace().next() {
            Some(pid) if socket.exists() => break pid.parse::<u32>().unwrap(),
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "php-fpm did not start: {:?}",
                    std::fs::read_to_string(dir.join("fpm.log"))
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let _worker = KillOnDrop(worker);
    let stop = AtomicBool::new(false);
    let (served, (traces, stats)) = std::thread::scope(|s| {
        let client = s.spawn(|| {
            let mut served = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let body = fastcgi::get(&socket, &path);
                assert!(body.contains("chain 3500000"), "the request's answer: {body}");
                served += 1;
            }
            served
        });
        std::thread::sleep(Duration::from_millis(300));
        let config = AgentConfig { samples_per_second: HZ, pids: vec![worker], ..AgentConfig::default() };
        let profiled = profile_with(config, |_| std::thread::sleep(Duration::from_secs(SECONDS)));
        stop.store(true, Ordering::Relaxed);
        (client.join().unwrap(), profiled.expect("no BPF here"))
    });
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("php-fpm: {served} requests served");
    assert!(served >= 100, "only {served} requests");
    let expected = [
        Expect::at("{main}", &path, at("request")),
        Expect::at("Chain\\a", &path, at("a")),
        Expect::at("Chain\\Worker::b", &path, at("b")),
        // FPM runs opcache's optimizer: the loop's specialised handlers do
        // not save the opline in the frame, so the leaf's line is the one
        // last saved there (the `return`, line 14, in the runs here): any
        // line of c, then. The callers' lines are their calls.
        Expect::within("Chain\\c", &path, at("c_start")..=at("c_end")),
    ];
    // Under opcache each request runs a copy of the script's op array
    // (`{main}`), freed when the request ends: user space names it once a
    // read catches it live, and keeps the name; a read that caught it
    // freed is tried again within a moment (failures.rs). The samples
    // from the first whole chain on are checked; it must come within a
    // second of the first sample (the attach, then one such retry).
    let mut sorted: Vec<&Trace> = traces.iter().filter(|t| t.process.pid.0 == worker).collect();
    sorted.sort_by_key(|t| t.timestamp_unix_ns);
    let first = sorted.iter().position(|t| matches(&PHP.frames(t), &expected)).unwrap_or(sorted.len());
    eprintln!("php-fpm worker: {first} of {} samples before the first whole chain", sorted.len());
    if let Some(t) = sorted.first() {
        eprintln!("first sample: {:?}", PHP.frames(t));
    }
    let wait_ns = match (sorted.first(), sorted.get(first)) {
        (Some(a), Some(b)) => b.timestamp_unix_ns - a.timestamp_unix_ns,
        _ => u64::MAX,
    };
    assert!(
        wait_ns <= 1_000_000_000 && first * 2 <= sorted.len(),
        "{first} of {} samples ({} ms) before the first whole chain (naming reads refused: {}, over budget: {})",
        sorted.len(),
        wait_ns / 1_000_000,
        stats.naming_reads_refused,
        stats.naming_processes_over
    );
    let later: Vec<Trace> = sorted[first..].iter().map(|t| (*t).clone()).collect();
    PHP.check_served("php-fpm worker", &later, &stats, worker, &expected);
}

const PHP_FPM: &str = "/usr/sbin/php-fpm8.2";

/// Kills a process not started by the test (the FPM worker) when dropped.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a pid; at worst the process is gone.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// The least of a FastCGI client (the protocol's records, version 1):
/// one GET of a script per connection.
mod fastcgi {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::path::Path;

    const BEGIN_REQUEST: u8 = 1;
    const END_REQUEST: u8 = 3;
    const PARAMS: u8 = 4;
    const STDIN: u8 = 5;
    const STDOUT: u8 = 6;
    const RESPONDER: u16 = 1;
    const ID: u16 = 1;

    fn record(out: &mut Vec<u8>, kind: u8, content: &[u8]) {
        let len = u16::try_from(content.len()).expect("a short record");
        out.extend_from_slice(&[1, kind]);
        out.extend_from_slice(&ID.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(content);
    }

    fn pair(out: &mut Vec<u8>, name: &str, value: &str) {
        for len in [name.len(), value.len()] {
            if len < 128 {
                out.push(len as u8);
            } else {
                out.extend_from_slice(&(len as u32 | 0x8000_0000).to_be_bytes());
            }
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(value.as_bytes());
    }

    /// Runs `script` through the server at `socket`; its standard output.
    pub fn get(socket: &Path, script: &Path) -> String {
        let mut request = Vec::new();
        let mut begin = RESPONDER.to_be_bytes().to_vec();
        begin.extend_from_slice(&[0; 6]); // flags 0: the server closes the connection
        record(&mut request, BEGIN_REQUEST, &begin);
        let mut params = Vec::new();
        let script = script.to_str().unwrap();
        pair(&mut params, "SCRIPT_FILENAME", script);
        pair(&mut params, "SCRIPT_NAME", script);
        pair(&mut params, "REQUEST_METHOD", "GET");
        pair(&mut params, "QUERY_STRING", "");
        record(&mut request, PARAMS, &params);
        record(&mut request, PARAMS, &[]);
        record(&mut request, STDIN, &[]);
        let mut stream = UnixStream::connect(socket).unwrap();
        stream.write_all(&request).unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).unwrap();
        let (mut stdout, mut at, mut ended) = (Vec::new(), 0, false);
        while let Some(header) = reply.get(at..at + 8) {
            let len = u16::from_be_bytes([header[4], header[5]]) as usize;
            let content = reply.get(at + 8..at + 8 + len).expect("a whole record");
            match header[1] {
                STDOUT => stdout.extend_from_slice(content),
                END_REQUEST => ended = true,
                _ => {}
            }
            at += 8 + len + header[6] as usize;
        }
        assert!(ended, "no end of request in {} bytes", reply.len());
        String::from_utf8_lossy(&stdout).into_owned()
    }
}

/// The closing measurement (issue 14): a script written apart from the
/// other workloads, two chains in turn: a class's methods (one private)
/// calling a namespaced function, and `array_map` (C) calling a method
/// back, which calls a static method.
#[test]
fn unseen_script_chain_and_callback() {
    let Some(script) = PHP.begin("unseen_billing.php") else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    // Two chains in turn: twice the time, about as many samples each.
    let (w, traces, stats) = PHP.profile_for(2 * SECONDS, PHP.args, &path, false);
    let chain = [
        Expect::at("{main}", &path, at("main_close")),
        Expect::at("Billing\\Ledger::close", &path, at("close")),
        Expect::at("Billing\\Ledger::sumLines", &path, at("sumLines")),
        Expect::within("Billing\\roundCents", &path, at("round_first")..=at("round_last")),
    ];
    PHP.check("unseen_billing.php chain", &traces, &stats, w.pid(), w.pid(), &chain);
    let callback = [
        Expect::at("{main}", &path, at("main_convert")),
        Expect::at("Billing\\Ledger::convert", &path, at("convert")),
        Expect::builtin("array_map"),
        Expect::at("Billing\\Ledger::toEuro", &path, at("toEuro")).after_native(),
        Expect::within("Billing\\Rates::lookup", &path, at("lookup_first")..=at("lookup_last")),
    ];
    PHP.check("unseen_billing.php callback", &traces, &stats, w.pid(), w.pid(), &callback);
}

/// Lines past 4094 (a frame word's 12 bits of line): the word counts the
/// line from the function's first, so a function 5000 lines down its
/// file keeps its lines.
#[test]
fn lines_past_5000_keep_their_numbers() {
    let Some(script) = PHP.begin_padded("far_lines.php", 5000) else { return };
    let path = script.path.clone();
    let at = |m: &str| script.line(m);
    assert!(at("run") > 5000 && at("spin_first") > 5000, "the functions lie past line 5000");
    let expected = [
        Expect::at("{main}", &path, at("main")),
        Expect::at("Far\\Deep::run", &path, at("run")),
        Expect::within("Far\\spin", &path, at("spin_first")..=at("spin_last")),
    ];
    PHP.chain_test(&path, &expected);
}
