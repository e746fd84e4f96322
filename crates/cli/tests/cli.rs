//! The built `ebpf-profiler` binary run as a user runs it: signals, a bad
//! `--output`, `--pid` given a thread id, OTLP export settings (a local TLS
//! endpoint that requires a header). The runs that sample load the
//! real BPF programs (root); without BPF they are skipped, except under
//! `CI=true` where they fail.

use opentelemetry_proto::tonic::collector::profiles::v1development::{
    profiles_service_server, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Limit for anything to happen; reaching it is a hang, not a slow run.
const HANG: Duration = Duration::from_secs(120);

/// One agent at a time: each samples the whole test process.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn scratch(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ep-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// Burns CPU in a function of this binary until dropped, on its own thread.
struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    tid: u32,
}

/// The function the profiles must show. Plain integer operations only, so
/// that even a debug build spends its samples here, not in callees.
#[inline(never)]
fn cli_test_spin(stop: &AtomicBool) -> u64 {
    let mut x = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut i = 0u64;
        while i < 1_000_000 {
            x ^= i;
            i += 1;
        }
    }
    x
}

impl Spinner {
    fn start() -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let link = std::fs::read_link("/proc/thread-self").unwrap();
                tid_tx.send(link.file_name().unwrap().to_str().unwrap().parse::<u32>().unwrap()).unwrap();
                std::hint::black_box(cli_test_spin(&stop));
            })
        };
        let tid = tid_rx.recv().unwrap();
        Spinner { stop, thread: Some(thread), tid }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().unwrap().join();
    }
}

/// A running `ebpf-profiler`, its stderr read line by line.
struct Run {
    child: Child,
    lines: Receiver<String>,
    stderr: Vec<String>,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        Run::start_with_env(args, &[])
    }

    /// The agent with `env` added to an environment without the test
    /// runner's OTEL_EXPORTER_OTLP_* variables (one would make it export).
    fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ebpf-profiler"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OTEL_EXPORTER_OTLP_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .envs(env.iter().copied())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running ebpf-profiler");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Run { child, lines, stderr: Vec::new() }
    }

    /// Waits for a stderr line starting with `prefix`; false if stderr
    /// ended first (the process exited).
    fn wait_for_line(&mut self, prefix: &str) -> bool {
        let deadline = Instant::now() + HANG;
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    let found = line.starts_with(prefix);
                    self.stderr.push(line);
                    if found {
                        return true;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => panic!("no {prefix:?} line in time: {:#?}", self.stderr),
            }
        }
    }

    /// Whether sampling started; `false` (after printing why) when BPF is
    /// unavailable here, which under CI is a failure.
    fn sampling_started(&mut self) -> bool {
        if self.wait_for_line("ebpf-profiler: sampling at") {
            return true;
        }
        assert!(!in_ci(), "CI: ebpf-profiler did not start sampling: {:#?}", self.stderr);
        eprintln!("SKIPPED: ebpf-profiler could not sample here (BPF?): {:#?}", self.stderr);
        false
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill has no memory preconditions; the child is ours and
        // not reaped yet.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, signal) }, 0);
    }

    /// Waits for the exit; returns the status and every stderr line.
    fn finish(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + HANG;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("ebpf-profiler did not exit: {:#?}", self.stderr);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.stderr.push(line);
        }
        (status, self.stderr.join("\n"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Samples of the folded output whose stack contains `function`.
fn samples_in(folded: &str, function: &str) -> u64 {
    folded
        .lines()
        .filter(|line| line.contains(function))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

/// A stop signal during an open-ended run ends it as Ctrl-C does: the
/// output is written and the summary printed, exit status 0.
fn signal_ends_the_run_cleanly(signal: libc::c_int, name: &str) {
    let _serial = serial();
    let spinner = Spinner::start();
    let output = scratch(&format!("{name}.folded"));
    let me = std::process::id().to_string();
    let mut run = Run::start(&[
        "--pid",
        &me,
        "--samples-per-second",
        "97",
        "--format",
        "folded",
        "--output",
        output.to_str().unwrap(),
    ]);
    if !run.sampling_started() {
        return;
    }
    std::thread::sleep(Duration::from_millis(1500));
    run.signal(signal);
    let (status, stderr) = run.finish();
    drop(spinner);
    assert!(status.success(), "{name}: {status:?}\n{stderr}");
    assert!(stderr.contains("ebpf-profiler: summary after"), "{name}: no summary\n{stderr}");
    let folded = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{name}: no output: {e}\n{stderr}"));
    assert!(samples_in(&folded, "cli_test_spin") > 0, "{name}: no sample of the spinning thread\n{folded}\n{stderr}");
    let _ = std::fs::remove_file(&output);
}

#[test]
fn sighup_writes_the_output_and_the_summary() {
    signal_ends_the_run_cleanly(libc::SIGHUP, "sighup");
}

#[test]
fn sigterm_writes_the_output_and_the_summary() {
    signal_ends_the_run_cleanly(libc::SIGTERM, "sigterm");
}

/// An output that cannot be written fails the run before anything is
/// sampled, with the path and the reason.
#[test]
fn unwritable_output_fails_before_sampling() {
    let (status, stderr) =
        Run::start(&["--duration", "30s", "--output", "/nonexistent-ep-dir/profile.folded"]).finish();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "ebpf-profiler: error: cannot write the output /nonexistent-ep-dir/profile.folded: \
         No such file or directory (os error 2)"
    );
    let dir = std::env::temp_dir();
    let (status, stderr) = Run::start(&["--duration", "30s", "--output", dir.to_str().unwrap()]).finish();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write the output") && stderr.contains("Is a directory"), "{stderr}");
    assert!(!stderr.contains("sampling at"), "{stderr}");
}

/// OTLP settings that cannot be used (a malformed OTEL_EXPORTER_OTLP_HEADERS,
/// a CA file that is a directory, a header value gRPC cannot carry) fail
/// the run before anything is sampled, naming the variable, file or
/// header and never showing a header's value.
#[test]
fn unusable_otlp_settings_fail_before_sampling() {
    let fails = |args: &[&str], env: &[(&str, &str)]| {
        let (status, stderr) = Run::start_with_env(args, env).finish();
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(!stderr.contains("sampling at") && !stderr.contains("secret"), "{stderr}");
        stderr
    };
    let e = fails(&["--duration", "30s"], &[("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20secret,oops")]);
    assert_eq!(e, "ebpf-profiler: error: OTEL_EXPORTER_OTLP_HEADERS: entry 2 has no '=' (expected key=value)");
    let e = fails(
        &["--duration", "30s"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:1"), ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "/")],
    );
    assert!(e.ends_with("error: starting the OTLP exporter: OTLP CA certificate \"/\": not a regular file"), "{e}");
    let e = fails(
        &["--duration", "30s", "--collection-agent", "127.0.0.1:1", "--otlp-header", "authorization=secret\u{7f}"],
        &[],
    );
    assert!(e.contains("OTLP header \"authorization\": its value has characters"), "{e}");
}

/// `--pid` given a thread id profiles that thread's process, and says so.
#[test]
fn pid_of_a_thread_profiles_its_process() {
    let _serial = serial();
    let spinner = Spinner::start();
    let me = std::process::id();
    assert_ne!(spinner.tid, me, "the spinner runs on a thread of its own");
    let tid = spinner.tid;
    let output = scratch("thread.folded");
    let mut run = Run::start(&[
        "--pid",
        &tid.to_string(),
        "--samples-per-second",
        "97",
        "--duration",
        "2s",
        "--format",
        "folded",
        "--output",
        output.to_str().unwrap(),
    ]);
    if !run.sampling_started() {
        return;
    }
    let (status, stderr) = run.finish();
    drop(spinner);
    assert!(status.success(), "{status:?}\n{stderr}");
    let notice = format!("ebpf-profiler: notice: {tid} is a thread of process {me}; profiling process {me}");
    assert!(stderr.contains(&notice), "{stderr}");
    assert!(stderr.contains(&format!("(pids [{me}])")), "{stderr}");
    let folded = std::fs::read_to_string(&output).unwrap();
    assert!(samples_in(&folded, "cli_test_spin") > 0, "no sample of the spinning thread\n{folded}\n{stderr}");
    let _ = std::fs::remove_file(&output);
}

/// A backend that cannot be reached is said on stderr while the agent runs
/// (not only in the summary at exit), and the run goes on.
#[test]
fn unreachable_backend_is_warned_live() {
    let _serial = serial();
    let spinner = Spinner::start();
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let me = std::process::id().to_string();
    let mut run =
        Run::start(&["--pid", &me, "--collection-agent", &nobody, "--disable-tls", "--reporter-interval", "1s"]);
    if !run.sampling_started() {
        return;
    }
    let warning = format!("ebpf-profiler: warning: the OTLP backend {nobody} cannot be reached");
    assert!(run.wait_for_line(&warning), "no live warning: {:#?}", run.stderr);
    assert!(run.child.try_wait().unwrap().is_none(), "the agent exited: {:#?}", run.stderr);
    run.signal(libc::SIGTERM);
    let (status, stderr) = run.finish();
    drop(spinner);
    assert!(status.success(), "{status:?}\n{stderr}");
    assert_eq!(stderr.matches("cannot be reached (").count(), 1, "said once per outage:\n{stderr}");
}

/// A local OTLP endpoint over TLS (a CA made at test time) that accepts
/// export calls carrying `authorization: Bearer xyz` and refuses others.
struct TlsEndpoint {
    port: u16,
    ca_file: PathBuf,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    refused: Arc<std::sync::atomic::AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone)]
struct Counting {
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    refused: Arc<std::sync::atomic::AtomicUsize>,
}

#[tonic::async_trait]
impl profiles_service_server::ProfilesService for Counting {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, tonic::Status> {
        if request.metadata().get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer xyz") {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(tonic::Status::unauthenticated("no valid authorization header"));
        }
        self.accepted.fetch_add(1, Ordering::SeqCst);
        Ok(tonic::Response::new(ExportProfilesServiceResponse { partial_success: None }))
    }
}

impl TlsEndpoint {
    fn start() -> TlsEndpoint {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&key, &issuer).unwrap();
        let ca_file = scratch("otlp-ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        let identity = tonic::transport::Identity::from_pem(cert.pem(), key.serialize_pem());

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let counting = Counting { accepted: Arc::default(), refused: Arc::default() };
        let (accepted, refused) = (counting.accepted.clone(), counting.refused.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tonic::transport::Server::builder()
                    .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
                    .unwrap()
                    .add_service(
                        profiles_service_server::ProfilesServiceServer::new(counting)
                            .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
                    )
                    .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        TlsEndpoint { port, ca_file, accepted, refused, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for TlsEndpoint {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
        let _ = std::fs::remove_file(&self.ca_file);
    }
}

/// Issue 42: the agent exports to a TLS endpoint that requires a header,
/// everything set through OTEL_EXPORTER_OTLP_* variables (the header
/// percent-encoded); without the header every interval is refused, and
/// the summary says so by code. The token never shows on stderr.
#[test]
fn exports_to_a_tls_endpoint_with_a_header_from_the_environment() {
    let _serial = serial();
    let spinner = Spinner::start();
    let endpoint = TlsEndpoint::start();
    let url = format!("https://127.0.0.1:{}", endpoint.port);
    let me = std::process::id().to_string();
    let args = ["--pid", &me, "--duration", "3s", "--reporter-interval", "1s"];
    let ca = endpoint.ca_file.to_str().unwrap();

    let mut run = Run::start_with_env(
        &args,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20xyz"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
        ],
    );
    if !run.sampling_started() {
        return;
    }
    let (status, stderr) = run.finish();
    assert!(status.success(), "{status:?}\n{stderr}");
    let accepted = endpoint.accepted.load(Ordering::SeqCst);
    assert!(accepted >= 2, "{accepted} accepted\n{stderr}");
    assert_eq!(endpoint.refused.load(Ordering::SeqCst), 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "ebpf-profiler: OTLP export to {url} (TLS (CA file), headers authorization, endpoint from OTEL_EXPORTER_OTLP_ENDPOINT)"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("OTLP export:       {accepted} requests sent")), "{stderr}");
    assert!(!stderr.contains("xyz"), "the token was printed:\n{stderr}");

    let mut run = Run::start_with_env(
        &args,
        &[("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", &url), ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", ca)],
    );
    assert!(run.sampling_started());
    let (status, stderr) = run.finish();
    drop(spinner);
    assert!(status.success(), "{status:?}\n{stderr}");
    let refused = endpoint.refused.load(Ordering::SeqCst);
    assert!(refused >= 2, "{refused} refused\n{stderr}");
    assert_eq!(endpoint.accepted.load(Ordering::SeqCst), accepted, "nothing accepted without the header");
    assert!(stderr.contains(&format!("refused Unauthenticated {refused}")), "{stderr}");
    let warning = format!("ebpf-profiler: warning: the OTLP backend {url} refused a request (Unauthenticated: ");
    assert_eq!(stderr.matches(&warning).count(), 1, "said once, live:\n{stderr}");
}
