//! The exporter against a real gRPC server on loopback.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_server::{
    ProfilesService, ProfilesServiceServer,
};
use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesPartialSuccess, ExportProfilesServiceResponse,
};
use opentelemetry_proto::tonic::profiles::v1development::{Profile, ResourceProfiles, ScopeProfiles};
use profiler_export::{
    ExportError, ExportProfilesServiceRequest, ExporterConfig, ExporterStats, Header, OtlpExporter, OtlpSettings,
};
use tonic::codec::CompressionEncoding;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Code, Request, Response, Status};

/// A request told apart by `marker` (the profile's time).
fn request(marker: u64) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile { time_unix_nano: marker, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: None,
    }
}

fn marker(r: &ExportProfilesServiceRequest) -> u64 {
    r.resource_profiles[0].scope_profiles[0].profiles[0].time_unix_nano
}

/// (marker, grpc-encoding) of every request the server saw.
type Received = Arc<Mutex<Vec<(u64, Option<String>)>>>;

/// What the test server answers.
#[derive(Clone, Copy)]
enum Reply {
    Ok,
    Refuse(Code),
    /// Refuses the first n calls with the code, then accepts.
    RefuseFirst(Code, usize),
    PartiallyReject(i64),
}

#[derive(Clone)]
struct Sink {
    received: Received,
    reply: Reply,
    /// `authorization` metadata a call must carry, else `Unauthenticated`.
    required_authorization: Option<&'static str>,
    /// Calls refused for want of it.
    unauthenticated: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl ProfilesService for Sink {
    async fn export(
        &self,
        request: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        if let Some(required) = self.required_authorization {
            if request.metadata().get("authorization").and_then(|v| v.to_str().ok()) != Some(required) {
                self.unauthenticated.fetch_add(1, Ordering::SeqCst);
                return Err(Status::unauthenticated("no valid authorization header"));
            }
        }
        let encoding = request.metadata().get("grpc-encoding").map(|v| v.to_str().unwrap().to_owned());
        let calls = {
            let mut received = self.received.lock().unwrap();
            received.push((marker(request.get_ref()), encoding));
            received.len()
        };
        match self.reply {
            Reply::Ok => Ok(Response::new(ExportProfilesServiceResponse { partial_success: None })),
            Reply::Refuse(code) => Err(Status::new(code, "refused by the test")),
            Reply::RefuseFirst(code, n) if calls <= n => Err(Status::new(code, "refused by the test")),
            Reply::RefuseFirst(..) => Ok(Response::new(ExportProfilesServiceResponse { partial_success: None })),
            Reply::PartiallyReject(n) => Ok(Response::new(ExportProfilesServiceResponse {
                partial_success: Some(ExportProfilesPartialSuccess {
                    rejected_profiles: n,
                    error_message: "too old".into(),
                }),
            })),
        }
    }
}

/// A gRPC server on `addr` in its own runtime thread; stops when dropped.
struct Server {
    received: Received,
    unauthenticated: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(addr: SocketAddr, reply: Reply) -> Server {
        Server::start_closing_while(addr, reply, Arc::new(AtomicBool::new(false)))
    }

    /// A server that, while `close_connections` is set, accepts each TCP
    /// connection and closes it at once (as a proxy or load balancer in
    /// front of a backend that is down does).
    fn start_closing_while(addr: SocketAddr, reply: Reply, close_connections: Arc<AtomicBool>) -> Server {
        Server::start_with(addr, reply, close_connections, None, None)
    }

    /// A TLS server (mutual TLS when `tls` says so) that refuses calls
    /// without `authorization: <required_authorization>` when given.
    fn start_tls(addr: SocketAddr, tls: ServerTlsConfig, required_authorization: Option<&'static str>) -> Server {
        Server::start_with(addr, Reply::Ok, Arc::new(AtomicBool::new(false)), Some(tls), required_authorization)
    }

    fn start_with(
        addr: SocketAddr,
        reply: Reply,
        close_connections: Arc<AtomicBool>,
        tls: Option<ServerTlsConfig>,
        required_authorization: Option<&'static str>,
    ) -> Server {
        let received = Arc::new(Mutex::new(Vec::new()));
        let unauthenticated = Arc::new(AtomicUsize::new(0));
        let sink = Sink {
            received: received.clone(),
            reply,
            required_authorization,
            unauthenticated: unauthenticated.clone(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr).await.expect("bind the test server");
                ready_tx.send(()).unwrap();
                let mut builder = tonic::transport::Server::builder();
                if let Some(tls) = tls {
                    builder = builder.tls_config(tls).expect("server TLS");
                }
                builder
                    .add_service(ProfilesServiceServer::new(sink).accept_compressed(CompressionEncoding::Gzip))
                    .serve_with_incoming_shutdown(tokio_stream_from(listener, close_connections), async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        ready.recv_timeout(Duration::from_secs(10)).expect("server ready");
        Server { received, unauthenticated, stop: Some(stop), thread: Some(thread) }
    }

    fn markers(&self) -> Vec<u64> {
        self.received.lock().unwrap().iter().map(|(m, _)| *m).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

/// The accepted connections, minus those closed at once (dropped) while
/// `close_connections` is set.
fn tokio_stream_from(
    listener: tokio::net::TcpListener,
    close_connections: Arc<AtomicBool>,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(listener)
        .filter(move |connection| connection.is_err() || !close_connections.load(Ordering::SeqCst))
}

/// A loopback address nobody listens on (yet).
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn config(addr: SocketAddr, capacity: usize) -> ExporterConfig {
    let mut c = ExporterConfig::new(addr.to_string(), false, capacity);
    c.initial_backoff = Duration::from_millis(20);
    c.max_backoff = Duration::from_millis(100);
    c.timeout = Duration::from_secs(2);
    c
}

/// Polls `f` until it holds; fails after 20 s (a hang, not a timing check).
fn wait_until(what: &str, exporter: &OtlpExporter, f: impl Fn(&ExporterStats) -> bool) {
    let start = Instant::now();
    loop {
        let stats = exporter.stats();
        if f(&stats) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "waiting for {what}: {stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn delivers_in_order_with_gzip() {
    let addr = free_addr();
    let server = Server::start(addr, Reply::Ok);
    let exporter = OtlpExporter::start(config(addr, 8)).unwrap();
    for m in 1..=3 {
        exporter.send(request(m));
    }
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!(stats.requests_sent, 3);
    assert_eq!(stats.dropped(), 0);
    assert_eq!(stats.buffered, 0);
    assert!(stats.bytes_sent > 0);
    let received = server.received.lock().unwrap().clone();
    assert_eq!(received, vec![(1, Some("gzip".into())), (2, Some("gzip".into())), (3, Some("gzip".into()))]);
}

/// The backend is down: the buffer keeps the newest `buffer_capacity`
/// requests (the one being retried included), the oldest are dropped and
/// counted, and when the backend comes up what was kept is delivered.
#[test]
fn full_buffer_evicts_the_oldest_while_down() {
    let addr = free_addr();
    let exporter = OtlpExporter::start(config(addr, 2)).unwrap();
    exporter.send(request(1));
    // Request 1 failed at least once: it is being retried.
    wait_until("request 1 retried", &exporter, |s| s.attempts_failed >= 1);
    for m in 2..=5 {
        exporter.send(request(m));
    }
    // Request 1 may be on the wire when evicted; it is counted when that
    // call fails.
    wait_until("three oldest dropped", &exporter, |s| s.dropped_buffer_full == 3);
    let stats = exporter.stats();
    assert_eq!(stats.buffered, 2, "{stats:?}");
    assert!(stats.last_error.as_deref().unwrap_or("").contains("export failed"), "{stats:?}");

    let server = Server::start(addr, Reply::Ok);
    wait_until("delivery after the backend returned", &exporter, |s| s.requests_sent == 2);
    assert_eq!(server.markers(), vec![4, 5]);
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!((stats.dropped(), stats.dropped_buffer_full, stats.buffered), (3, 3, 0), "{stats:?}");
}

/// The backend is down far longer than `max_attempts` tries take: the
/// exporter keeps retrying, and when it comes up every buffered interval
/// arrives, in order, none dropped (before: dropped after 5 attempts).
#[test]
fn backend_down_then_up_loses_nothing_that_fits_the_buffer() {
    let addr = free_addr();
    let c = config(addr, 12);
    let max_attempts = c.max_attempts;
    let exporter = OtlpExporter::start(c).unwrap();
    for m in 1..=6 {
        exporter.send(request(m));
    }
    wait_until("many more failures than max_attempts", &exporter, |s| s.attempts_failed >= 4 * u64::from(max_attempts));
    for m in 7..=12 {
        exporter.send(request(m));
    }
    let stats = exporter.stats();
    assert_eq!((stats.buffered, stats.dropped()), (12, 0), "{stats:?}");

    let server = Server::start(addr, Reply::Ok);
    wait_until("all delivered", &exporter, |s| s.requests_sent == 12);
    assert_eq!(server.markers(), (1..=12).collect::<Vec<_>>());
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!((stats.dropped(), stats.buffered), (0, 0), "{stats:?}");
}

/// A backend (or a proxy in front of it) that accepts TCP connections and
/// closes them is unreachable, not refusing: retried until it works, nothing
/// dropped (before: dropped as a permanent refusal).
#[test]
fn connections_closed_on_accept_are_retried() {
    let addr = free_addr();
    let closing = Arc::new(AtomicBool::new(true));
    let server = Server::start_closing_while(addr, Reply::Ok, closing.clone());
    let c = config(addr, 8);
    let max_attempts = c.max_attempts;
    let exporter = OtlpExporter::start(c).unwrap();
    for m in 1..=5 {
        exporter.send(request(m));
    }
    wait_until("many more failures than max_attempts", &exporter, |s| s.attempts_failed >= 3 * u64::from(max_attempts));
    let stats = exporter.stats();
    assert_eq!((stats.buffered, stats.dropped(), stats.requests_sent), (5, 0, 0), "{stats:?}");
    assert!(server.markers().is_empty(), "no call reached the service");

    closing.store(false, Ordering::SeqCst);
    wait_until("all delivered", &exporter, |s| s.requests_sent == 5);
    assert_eq!(server.markers(), vec![1, 2, 3, 4, 5]);
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!(stats.dropped(), 0, "{stats:?}");
}

/// `Unavailable` answered by the backend is retried past `max_attempts`.
#[test]
fn unavailable_is_retried_until_accepted() {
    let addr = free_addr();
    let c = config(addr, 4);
    let refusals = 3 * c.max_attempts as usize;
    let server = Server::start(addr, Reply::RefuseFirst(Code::Unavailable, refusals));
    let exporter = OtlpExporter::start(c).unwrap();
    exporter.send(request(9));
    exporter.send(request(10));
    wait_until("both delivered", &exporter, |s| s.requests_sent == 2);
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!((stats.attempts_failed, stats.dropped()), (refusals as u64, 0), "{stats:?}");
    let mut expected = vec![9; refusals + 1];
    expected.push(10);
    assert_eq!(server.markers(), expected);
}

/// Other retryable answers (`ResourceExhausted`, ...) are tried
/// `max_attempts` times per request, then the request is dropped.
#[test]
fn retryable_answers_give_up_after_max_attempts() {
    let addr = free_addr();
    let server = Server::start(addr, Reply::Refuse(Code::ResourceExhausted));
    let mut c = config(addr, 4);
    c.max_attempts = 2;
    let exporter = OtlpExporter::start(c).unwrap();
    exporter.send(request(1));
    exporter.send(request(2));
    wait_until("both requests given up", &exporter, |s| s.dropped_retries_exhausted == 2);
    let stats = exporter.shutdown(Duration::from_secs(5));
    assert_eq!((stats.attempts_failed, stats.requests_sent, stats.dropped()), (4, 0, 2), "{stats:?}");
    assert_eq!(server.markers(), vec![1, 1, 2, 2]);
}

#[test]
fn non_retryable_refusal_is_dropped_at_once() {
    let addr = free_addr();
    let server = Server::start(addr, Reply::Refuse(Code::InvalidArgument));
    let exporter = OtlpExporter::start(config(addr, 4)).unwrap();
    exporter.send(request(7));
    exporter.send(request(8));
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!(stats.dropped_rejected, 2);
    assert_eq!(stats.dropped_rejected_by_code, [("InvalidArgument".to_string(), 2)].into_iter().collect());
    assert_eq!(stats.attempts_failed, 2);
    assert_eq!(server.markers(), vec![7, 8]);
    assert!(stats.last_error.unwrap().contains("refused by the test"));
}

#[test]
fn partial_success_is_counted() {
    let addr = free_addr();
    let _server = Server::start(addr, Reply::PartiallyReject(3));
    let exporter = OtlpExporter::start(config(addr, 4)).unwrap();
    exporter.send(request(1));
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!(stats.requests_sent, 1);
    assert_eq!(stats.profiles_rejected, 3);
    assert_eq!(stats.last_error.as_deref(), Some("backend rejected 3 profiles: too old"));
}

/// A shutdown while the backend is down ends when its time is up and
/// counts what it could not send.
#[test]
fn shutdown_with_backend_down_is_bounded() {
    let addr = free_addr();
    let exporter = OtlpExporter::start(config(addr, 4)).unwrap();
    for m in 1..=3 {
        exporter.send(request(m));
    }
    let stats = exporter.shutdown(Duration::from_millis(200));
    assert_eq!(stats.dropped_shutdown, 3, "{stats:?}");
    assert_eq!(stats.requests_sent, 0);
}

#[test]
fn dropping_the_exporter_stops_it() {
    let exporter = OtlpExporter::start(config(free_addr(), 4)).unwrap();
    exporter.send(request(1));
    drop(exporter);
}

#[test]
fn bad_settings_are_errors() {
    assert!(matches!(OtlpExporter::start(ExporterConfig::new("127.0.0.1:1", false, 0)), Err(ExportError::Config(_))));
    assert!(matches!(
        OtlpExporter::start(ExporterConfig::new("not a host:port", false, 1)),
        Err(ExportError::Endpoint { .. })
    ));
    assert!(matches!(
        OtlpExporter::start(ExporterConfig::new("http://127.0.0.1:1", true, 1)),
        Err(ExportError::Endpoint { .. })
    ));
}

#[test]
fn tls_config_starts() {
    let exporter = OtlpExporter::start(ExporterConfig::new("127.0.0.1:1", true, 1)).unwrap();
    drop(exporter);
}

/// An outage is reported as it happens: once when the backend cannot be
/// reached, again every `unreachable_reminder` while it lasts (with what
/// was dropped meanwhile), and once when it is reached again; a backend
/// that is up from the start is never reported.
#[test]
fn outage_is_reported_live_then_recovery() {
    use profiler_export::BackendEvent;
    use std::sync::mpsc;

    let addr = free_addr();
    let mut c = config(addr, 2);
    c.unreachable_reminder = Duration::from_millis(300);
    let (tx, events) = mpsc::channel();
    let exporter = OtlpExporter::start_with_observer(c, Some(Box::new(move |e| tx.send(e).unwrap()))).unwrap();
    exporter.send(request(1));
    let next = || events.recv_timeout(Duration::from_secs(20)).expect("a backend event");
    match next() {
        BackendEvent::Unreachable { buffered, .. } => assert_eq!(buffered, 1),
        e => panic!("first event {e:?}"),
    }
    // Three more: the buffer holds 2, so two are dropped (oldest first).
    for m in 2..=4 {
        exporter.send(request(m));
    }
    let (down_for, dropped) = loop {
        match next() {
            BackendEvent::StillUnreachable { down_for, dropped, .. } if dropped == 2 => break (down_for, dropped),
            BackendEvent::StillUnreachable { .. } => continue,
            e => panic!("while down: {e:?}"),
        }
    };
    assert!(down_for >= Duration::from_millis(300), "{down_for:?}");
    assert_eq!(dropped, 2);

    let server = Server::start(addr, Reply::Ok);
    let recovered = loop {
        match next() {
            BackendEvent::StillUnreachable { .. } => continue,
            e => break e,
        }
    };
    match recovered {
        BackendEvent::Reachable { dropped, down_for } => {
            assert_eq!(dropped, 2);
            assert!(down_for >= Duration::from_millis(300));
        }
        e => panic!("after the backend came up: {e:?}"),
    }
    wait_until("the buffered requests delivered", &exporter, |s| s.requests_sent == 2);
    assert_eq!(server.markers(), vec![3, 4]);
    exporter.send(request(5));
    wait_until("one more delivered", &exporter, |s| s.requests_sent == 3);
    drop(exporter.shutdown(Duration::from_secs(5)));
    assert!(events.try_recv().is_err(), "no event while the backend is up");
}

/// A CA made at test time, which signs a server certificate for
/// 127.0.0.1 and a client certificate; all written as PEM files into a
/// directory of the test's own.
struct Pki {
    dir: std::path::PathBuf,
    ca_pem: String,
    server: Identity,
}

impl Pki {
    fn new(test: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("profiler-export-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, format!("{test} test CA"));
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let signed = |names: Vec<String>| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(names).unwrap().signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = signed(vec!["127.0.0.1".into()]);
        let (client_cert, client_key) = signed(vec!["profiler-agent".into()]);
        let pki = Pki { dir, ca_pem: ca.pem(), server: Identity::from_pem(server_cert, server_key) };
        std::fs::write(pki.path("ca.pem"), &pki.ca_pem).unwrap();
        std::fs::write(pki.path("client.pem"), client_cert).unwrap();
        std::fs::write(pki.path("client.key"), client_key).unwrap();
        pki
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    /// The server's TLS; with `client_auth`, a client certificate of this
    /// CA is required.
    fn server_tls(&self, client_auth: bool) -> ServerTlsConfig {
        let tls = ServerTlsConfig::new().identity(self.server.clone());
        match client_auth {
            true => tls.client_ca_root(Certificate::from_pem(&self.ca_pem)),
            false => tls,
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The exporter configured as the environment `vars` say.
fn from_env(vars: &[(&str, String)]) -> ExporterConfig {
    let vars: std::collections::HashMap<String, String> =
        vars.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let settings = OtlpSettings::from_vars(|name| vars.get(name).cloned()).unwrap();
    assert!(settings.warnings.is_empty(), "{:?}", settings.warnings);
    let mut c = settings.exporter_config(8).unwrap().expect("an endpoint");
    c.initial_backoff = Duration::from_millis(20);
    c.max_backoff = Duration::from_millis(100);
    c
}

/// Issue 42: an endpoint behind TLS (a CA of its own) that requires a
/// bearer token, set through `OTEL_EXPORTER_OTLP_HEADERS` (percent-encoded
/// as the specification has it) and `OTEL_EXPORTER_OTLP_CERTIFICATE`.
#[test]
fn tls_endpoint_requiring_a_header_from_the_environment() {
    let pki = Pki::new("header");
    let addr = free_addr();
    let server = Server::start_tls(addr, pki.server_tls(false), Some("Bearer xyz"));
    let endpoint = format!("https://127.0.0.1:{}", addr.port());

    let exporter = OtlpExporter::start(from_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20xyz,x-scope-orgid=tenant-1".into()),
        ("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", pki.path("ca.pem")),
    ]))
    .unwrap();
    for m in 1..=3 {
        exporter.send(request(m));
    }
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!((stats.requests_sent, stats.dropped(), stats.attempts_failed), (3, 0, 0), "{stats:?}");
    assert_eq!(server.markers(), vec![1, 2, 3]);
    assert_eq!(server.unauthenticated.load(Ordering::SeqCst), 0);

    // Without the header: the backend refuses, and each request is
    // counted as refused (Unauthenticated), not retried; the observer is
    // told once.
    let (tx, events) = std::sync::mpsc::channel();
    let exporter = OtlpExporter::start_with_observer(
        from_env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        ]),
        Some(Box::new(move |e| tx.send(e).unwrap())),
    )
    .unwrap();
    exporter.send(request(4));
    exporter.send(request(5));
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!((stats.requests_sent, stats.dropped_rejected), (0, 2), "{stats:?}");
    assert_eq!(stats.dropped_rejected_by_code, [("Unauthenticated".to_string(), 2)].into_iter().collect());
    assert_eq!(server.unauthenticated.load(Ordering::SeqCst), 2);
    assert_eq!(server.markers(), vec![1, 2, 3], "refused calls are not accepted");
    let events: Vec<_> = events.try_iter().collect();
    assert_eq!(
        events,
        vec![profiler_export::BackendEvent::Refused {
            code: "Unauthenticated".into(),
            message: "no valid authorization header".into()
        }]
    );

    // A CA that did not sign the server's certificate: never reached.
    let other = Pki::new("header-other-ca");
    let exporter = OtlpExporter::start(from_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20xyz".into()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", other.path("ca.pem")),
    ]))
    .unwrap();
    exporter.send(request(6));
    wait_until("a failed handshake", &exporter, |s| s.attempts_failed >= 1);
    let stats = exporter.shutdown(Duration::from_millis(200));
    assert_eq!((stats.requests_sent, stats.dropped_shutdown), (0, 1), "{stats:?}");
    assert_eq!(server.markers(), vec![1, 2, 3]);
}

/// Mutual TLS: the server requires a client certificate of its CA; the
/// exporter presents the one `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and
/// `_CLIENT_KEY` name, and without it never gets through.
#[test]
fn mutual_tls_with_a_client_certificate_from_the_environment() {
    let pki = Pki::new("mtls");
    let addr = free_addr();
    let server = Server::start_tls(addr, pki.server_tls(true), None);
    let endpoint = format!("https://127.0.0.1:{}", addr.port());

    let exporter = OtlpExporter::start(from_env(&[
        ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", endpoint.clone()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", pki.path("client.pem")),
        ("OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY", pki.path("client.key")),
    ]))
    .unwrap();
    exporter.send(request(1));
    exporter.send(request(2));
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!((stats.requests_sent, stats.dropped(), stats.attempts_failed), (2, 0, 0), "{stats:?}");
    assert_eq!(server.markers(), vec![1, 2]);

    let exporter = OtlpExporter::start(from_env(&[
        ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
    ]))
    .unwrap();
    exporter.send(request(3));
    wait_until("a refused handshake", &exporter, |s| s.attempts_failed >= 2);
    let stats = exporter.shutdown(Duration::from_millis(200));
    assert_eq!((stats.requests_sent, stats.dropped_shutdown), (0, 1), "{stats:?}");
    assert_eq!(server.markers(), vec![1, 2], "nothing got through without a client certificate");
}

/// Files and headers that cannot be used stop the exporter at start with
/// an error naming the file or the header, never showing a header's value.
#[test]
fn unusable_tls_files_and_headers_are_errors_at_start() {
    let pki = Pki::new("bad-files");
    let start = |f: &dyn Fn(&mut ExporterConfig)| {
        let mut c = ExporterConfig::new("127.0.0.1:1", true, 1);
        f(&mut c);
        OtlpExporter::start(c).err().expect("an error").to_string()
    };
    let missing = pki.path("missing.pem");
    let e = start(&|c| c.ca_certificate = Some(missing.clone().into()));
    assert!(e.starts_with("OTLP CA certificate") && e.contains("missing.pem"), "{e}");
    let e = start(&|c| c.ca_certificate = Some(pki.dir.clone()));
    assert!(e.contains("not a regular file"), "{e}");
    let e = start(&|c| c.ca_certificate = Some(pki.path("client.key").into()));
    assert!(e.contains("client.key") && e.contains("no PEM certificate"), "{e}");
    let e = start(&|c| {
        c.client_identity = Some(profiler_export::ClientIdentity {
            certificate: pki.path("client.pem").into(),
            key: pki.path("ca.pem").into(),
        })
    });
    assert!(e.starts_with("OTLP client key") && e.contains("ca.pem"), "{e}");

    let e = start(&|c| c.headers = vec![Header::new("authorization", "Bearer secret\nvalue")]);
    assert!(e.starts_with("OTLP header \"authorization\"") && !e.contains("secret"), "{e}");
    let e = start(&|c| c.headers = vec![Header::new("bad name", "v")]);
    assert!(e.contains("not a valid gRPC metadata name"), "{e}");
    let e = start(&|c| c.headers = vec![Header::new("grpc-timeout", "1S")]);
    assert!(e.contains("reserved"), "{e}");
    // Headers are checked on a plain-text endpoint as well.
    let mut c = ExporterConfig::new("127.0.0.1:1", false, 1);
    c.headers = vec![Header::new("x-key", "é")];
    assert!(matches!(OtlpExporter::start(c), Err(ExportError::Header { .. })));
}

/// An endpoint as people write it in OTEL_EXPORTER_OTLP_ENDPOINT, with a
/// trailing slash, works as well.
#[test]
fn endpoint_url_with_a_trailing_slash() {
    let addr = free_addr();
    let server = Server::start(addr, Reply::Ok);
    let c = from_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}/"))]);
    assert!(!c.tls);
    let exporter = OtlpExporter::start(c).unwrap();
    exporter.send(request(1));
    let stats = exporter.shutdown(Duration::from_secs(20));
    assert_eq!(stats.requests_sent, 1, "{stats:?}");
    assert_eq!(server.markers(), vec![1]);
}
