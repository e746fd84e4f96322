//! The standalone agent's OTLP/gRPC exporter.
//!
//! [`OtlpExporter::start`] spawns one thread with a small tokio runtime
//! that owns a tonic client of `ProfilesService`. The reporter hands it
//! requests with [`OtlpExporter::send`], which never blocks: requests wait
//! in a bounded buffer of [`ExporterConfig::buffer_capacity`] requests
//! (the one being sent included), kept until sent or, when the buffer is
//! full, evicted oldest first (and counted). The thread sends the oldest
//! request, gzip-compressed; when the backend cannot be reached (connection
//! refused or reset, `Unavailable`, transport errors, timeouts) it keeps
//! retrying with exponential backoff for as long as it takes, the buffer
//! bounding what waits; a request the backend answers with another
//! retryable code (`ResourceExhausted`, ...) is tried up to
//! [`ExporterConfig::max_attempts`] times; a permanent refusal
//! (`InvalidArgument`, ...) drops it at once, counted by code. Nothing
//! grows without bound, every loss is counted in [`ExporterStats`], and no
//! failure of the backend makes the agent crash.
//!
//! ```no_run
//! use std::time::Duration;
//! use profiler_export::{ExporterConfig, OtlpExporter};
//! # fn request() -> profiler_export::ExportProfilesServiceRequest { Default::default() }
//!
//! let exporter = OtlpExporter::start(ExporterConfig::new("127.0.0.1:11000", false, 16))?;
//! exporter.send(request());
//! let stats = exporter.shutdown(Duration::from_secs(5));
//! println!("{} sent, {} dropped", stats.requests_sent, stats.dropped());
//! # Ok::<(), profiler_export::ExportError>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod encoded;
mod settings;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use tokio::sync::{watch, Notify};
use tonic::client::Grpc;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::Code;

pub use settings::{parse_header_flag, parse_headers, Compression, Header, OtlpSettings};

pub use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

/// Settings of an [`OtlpExporter`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExporterConfig {
    /// `host:port`, or a URI with an `http://`/`https://` scheme that
    /// agrees with [`ExporterConfig::tls`].
    pub endpoint: String,
    /// Use TLS, verifying the server with the system's root certificates
    /// or [`ExporterConfig::ca_certificate`].
    pub tls: bool,
    /// gRPC metadata sent with every export call (e.g. `authorization`).
    /// Checked at start: a name or value gRPC cannot carry is an error.
    pub headers: Vec<Header>,
    /// PEM file of the certificate(s) that verify the server, instead of
    /// the system's roots. Default none.
    pub ca_certificate: Option<PathBuf>,
    /// Client certificate and key (mutual TLS). Default none.
    pub client_identity: Option<ClientIdentity>,
    /// Requests kept until sent, the one being sent included; beyond
    /// that the oldest is dropped. At least 1.
    pub buffer_capacity: usize,
    /// Limit of one export call, connection included. Default 10 s.
    pub timeout: Duration,
    /// First wait before a retry; doubled after each failure. Default 500 ms.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts. Default 5 s.
    pub max_backoff: Duration,
    /// Attempts per request before it is dropped, when the backend
    /// answers it with a retryable code other than `Unavailable`
    /// (`ResourceExhausted`, `Aborted`, ...). A backend that cannot be
    /// reached is retried without limit. Default 5, at least 1.
    pub max_attempts: u32,
    /// Compress requests with gzip. Default on.
    pub gzip: bool,
    /// How often a backend that stays unreachable is reported again
    /// ([`BackendEvent::StillUnreachable`]). Default 60 s.
    pub unreachable_reminder: Duration,
}

impl ExporterConfig {
    /// Defaults for sending to `endpoint`.
    pub fn new(endpoint: impl Into<String>, tls: bool, buffer_capacity: usize) -> ExporterConfig {
        ExporterConfig {
            endpoint: endpoint.into(),
            tls,
            headers: Vec::new(),
            ca_certificate: None,
            client_identity: None,
            buffer_capacity,
            timeout: Duration::from_secs(10),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(5),
            max_attempts: 5,
            gzip: true,
            unreachable_reminder: Duration::from_secs(60),
        }
    }

    /// The endpoint as a URI with the scheme [`ExporterConfig::tls`] implies.
    fn uri(&self) -> Result<String, ExportError> {
        let scheme = if self.tls { "https" } else { "http" };
        match self.endpoint.split_once("://") {
            None => Ok(format!("{scheme}://{}", self.endpoint)),
            Some((s, _)) if s == scheme => Ok(self.endpoint.clone()),
            Some((s, _)) => Err(ExportError::Endpoint {
                endpoint: self.endpoint.clone(),
                reason: format!("scheme {s}:// does not match tls = {}", self.tls),
            }),
        }
    }
}

/// PEM files of a client certificate and its private key (mutual TLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate (chain), PEM.
    pub certificate: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Largest certificate or key file read (they are a few KiB; a CA bundle
/// of every public root is about 250 KiB).
const MAX_PEM_FILE: u64 = 4 << 20;

/// Reads `path`, a regular file of at most [`MAX_PEM_FILE`] bytes.
fn read_pem_file(what: &'static str, path: &Path) -> Result<Vec<u8>, ExportError> {
    use std::io::Read;
    let error = |reason: String| ExportError::File { what, path: path.to_path_buf(), reason };
    // Checked before opening too: opening a FIFO would block.
    let regular = |meta: std::io::Result<std::fs::Metadata>| match meta {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(error("not a regular file".into())),
        Err(e) => Err(error(e.to_string())),
    };
    regular(std::fs::metadata(path))?;
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    regular(file.metadata())?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_FILE + 1).read_to_end(&mut bytes).map_err(|e| error(e.to_string()))?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(error(format!("larger than {} MiB", MAX_PEM_FILE >> 20)));
    }
    Ok(bytes)
}

/// Reads a PEM file of certificates, checking there is at least one.
fn read_certificates(what: &'static str, path: &Path) -> Result<Vec<u8>, ExportError> {
    use rustls_pki_types::pem::PemObject;
    let bytes = read_pem_file(what, path)?;
    let error = |reason: &str| ExportError::File { what, path: path.to_path_buf(), reason: reason.into() };
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(&format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(error("no PEM certificate in it (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(bytes)
}

/// Reads a PEM private key file, checking it holds one.
fn read_private_key(path: &Path) -> Result<Vec<u8>, ExportError> {
    use rustls_pki_types::pem::PemObject;
    const WHAT: &str = "client key";
    let bytes = read_pem_file(WHAT, path)?;
    rustls_pki_types::PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| ExportError::File {
        what: WHAT,
        path: path.to_path_buf(),
        reason: format!("no PEM private key in it ({e})"),
    })?;
    Ok(bytes)
}

/// Names gRPC reserves for itself (or HTTP/2 for the transport).
fn reserved_header(name: &str) -> bool {
    name.starts_with("grpc-") || matches!(name, "te" | "content-type" | "user-agent" | "host")
}

/// The headers as gRPC metadata; an error names the header, never shows
/// its value.
fn metadata(headers: &[Header]) -> Result<MetadataMap, ExportError> {
    let mut map = MetadataMap::new();
    for h in headers {
        let error = |reason: &str| ExportError::Header { name: h.name().to_string(), reason: reason.to_string() };
        if reserved_header(h.name()) {
            return Err(error("reserved by gRPC"));
        }
        if h.name().ends_with("-bin") {
            return Err(error("binary (-bin) metadata is not supported"));
        }
        let key = MetadataKey::from_bytes(h.name().as_bytes())
            .map_err(|_| error("not a valid gRPC metadata name (letters, digits, '-', '_', '.')"))?;
        // gRPC ASCII metadata: printable ASCII and blanks (http would
        // take other bytes too).
        const UNFIT: &str = "its value has characters gRPC metadata cannot carry (printable ASCII and blanks only)";
        if !h.value().bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(error(UNFIT));
        }
        let value = MetadataValue::try_from(h.value()).map_err(|_| error(UNFIT))?;
        map.insert(key, value);
    }
    Ok(map)
}

/// The TLS settings: the CA file instead of the system's roots, the client
/// identity if any.
fn tls_config(config: &ExporterConfig) -> Result<ClientTlsConfig, ExportError> {
    let mut tls = ClientTlsConfig::new();
    tls = match &config.ca_certificate {
        Some(path) => tls.ca_certificate(Certificate::from_pem(read_certificates("CA certificate", path)?)),
        None => tls.with_native_roots(),
    };
    if let Some(identity) = &config.client_identity {
        let certificate = read_certificates("client certificate", &identity.certificate)?;
        let key = read_private_key(&identity.key)?;
        tls = tls.identity(Identity::from_pem(certificate, key));
    }
    Ok(tls)
}

/// A change in whether the backend can be reached, reported as it
/// happens (the CLI prints it as a warning) rather than only in the
/// counters at exit.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendEvent {
    /// An export could not reach the backend (connection refused or
    /// reset, `Unavailable`, a timeout), the first since the start or
    /// since it was last reached: requests wait in the buffer.
    Unreachable {
        /// The failure.
        error: String,
        /// Requests waiting, the one being retried included.
        buffered: u64,
    },
    /// Still unreachable; repeated every [`ExporterConfig::unreachable_reminder`].
    StillUnreachable {
        /// Since the first failure.
        down_for: Duration,
        /// Requests waiting.
        buffered: u64,
        /// Requests dropped since the first failure.
        dropped: u64,
    },
    /// The backend refused a request for good (e.g. `Unauthenticated`
    /// for a missing or wrong header): said the first time each code is
    /// seen, since it usually means a setting is wrong.
    Refused {
        /// The gRPC code, e.g. `"Unauthenticated"`.
        code: String,
        /// The backend's message.
        message: String,
    },
    /// A request reached the backend again.
    Reachable {
        /// How long it could not be reached.
        down_for: Duration,
        /// Requests dropped meanwhile.
        dropped: u64,
    },
}

/// Receives [`BackendEvent`]s on the exporter's thread (keep it short).
pub type BackendObserver = Box<dyn FnMut(BackendEvent) + Send>;

/// Why an exporter could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint is not a valid URI, or its scheme contradicts `tls`.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting is out of range.
    #[error("invalid exporter setting: {0}")]
    Config(&'static str),
    /// An environment variable (or flag) could not be parsed.
    #[error("{setting}: {reason}")]
    Setting {
        /// The variable's or flag's name.
        setting: String,
        /// What is wrong (never the value of a header).
        reason: String,
    },
    /// A header cannot be sent as gRPC metadata.
    #[error("OTLP header {name:?}: {reason}")]
    Header {
        /// The header's name (its value is never shown).
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A certificate or key file cannot be used.
    #[error("OTLP {what} {path:?}: {reason}")]
    File {
        /// Which file: "CA certificate", "client certificate", "client key".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// TLS could not be set up (e.g. the client key does not match its
    /// certificate).
    #[error("OTLP exporter TLS setup: {}", tls_error_chain(.0))]
    // The sources are in the message (tonic's own is "transport error").
    Tls(tonic::transport::Error),
    /// The exporter thread or its runtime could not start.
    #[error("starting the OTLP exporter thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// `error` and its sources: tonic's own text is just "transport error".
fn tls_error_chain(error: &tonic::transport::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text = format!("{text}: {e}");
        source = e.source();
    }
    text
}

/// A snapshot of an exporter's counters. Counters only grow, except
/// [`ExporterStats::buffered`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ExporterStats {
    /// Requests the backend accepted.
    pub requests_sent: u64,
    /// Protobuf bytes of the accepted requests (before compression).
    pub bytes_sent: u64,
    /// Export calls that failed (each retry counts).
    pub attempts_failed: u64,
    /// Requests dropped because the buffer was full (the oldest go first).
    pub dropped_buffer_full: u64,
    /// Requests dropped after [`ExporterConfig::max_attempts`] retryable
    /// answers of the backend.
    pub dropped_retries_exhausted: u64,
    /// Requests the backend refused with a non-retryable error.
    pub dropped_rejected: u64,
    /// [`ExporterStats::dropped_rejected`] by gRPC code (e.g.
    /// `"InvalidArgument"`).
    pub dropped_rejected_by_code: BTreeMap<String, u64>,
    /// Requests still unsent when the shutdown's time ran out.
    pub dropped_shutdown: u64,
    /// Profiles the backend reported as rejected in a partial success.
    pub profiles_rejected: u64,
    /// Requests in the buffer now, the one being sent included.
    pub buffered: u64,
    /// Requests whose export panicked (each dropped; the exporter went on).
    pub panics: u64,
    /// The last error from the backend, if any.
    pub last_error: Option<String>,
}

impl ExporterStats {
    /// All dropped requests, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_buffer_full + self.dropped_retries_exhausted + self.dropped_rejected + self.dropped_shutdown
    }
}

#[derive(Default)]
struct Counters {
    requests_sent: AtomicU64,
    bytes_sent: AtomicU64,
    attempts_failed: AtomicU64,
    dropped_buffer_full: AtomicU64,
    dropped_retries_exhausted: AtomicU64,
    dropped_rejected: AtomicU64,
    dropped_shutdown: AtomicU64,
    profiles_rejected: AtomicU64,
    panics: AtomicU64,
}

/// A buffered request (encoded) and how many retryable answers it got.
struct Entry {
    request: Bytes,
    answered_retryable: u32,
}

/// The request the worker took out of the queue for an export call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    None,
    /// Being sent; it counts against the capacity.
    Sending,
    /// Being sent, but evicted by newer requests: dropped if this call
    /// fails (a call cannot be taken back, and it may still succeed).
    Evicted,
}

/// Requests not sent yet, oldest first. The worker takes the oldest out
/// only for the duration of an export call; between retries it waits at
/// the front of the queue, where a full buffer evicts it first.
struct Buffer {
    queue: VecDeque<Entry>,
    in_flight: InFlight,
    /// No more requests will come: drain the buffer and stop.
    closing: bool,
}

impl Buffer {
    fn held(&self) -> usize {
        self.queue.len() + usize::from(self.in_flight == InFlight::Sending)
    }
}

struct Shared {
    buffer: Mutex<Buffer>,
    capacity: usize,
    wake: Notify,
    counters: Counters,
    rejected_by_code: Mutex<BTreeMap<String, u64>>,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn buffer(&self) -> std::sync::MutexGuard<'_, Buffer> {
        // The buffer stays consistent even if a holder panicked.
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_last_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

/// A running exporter. Dropping it stops it at once (what is buffered is
/// counted as dropped); [`OtlpExporter::shutdown`] first tries to deliver.
pub struct OtlpExporter {
    shared: Arc<Shared>,
    abort: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl OtlpExporter {
    /// Checks `config` and starts the exporter thread. The connection is
    /// made lazily: a backend that is down now is not an error.
    pub fn start(config: ExporterConfig) -> Result<OtlpExporter, ExportError> {
        OtlpExporter::start_with_observer(config, None)
    }

    /// [`OtlpExporter::start`], telling `observer` when the backend
    /// becomes unreachable, stays so, and is reached again.
    pub fn start_with_observer(
        config: ExporterConfig,
        observer: Option<BackendObserver>,
    ) -> Result<OtlpExporter, ExportError> {
        if config.buffer_capacity == 0 {
            return Err(ExportError::Config("buffer_capacity must be at least 1"));
        }
        if config.max_attempts == 0 {
            return Err(ExportError::Config("max_attempts must be at least 1"));
        }
        let uri = config.uri()?;
        let mut endpoint = Endpoint::from_shared(uri)
            .map_err(|e| ExportError::Endpoint { endpoint: config.endpoint.clone(), reason: e.to_string() })?;
        endpoint = endpoint.connect_timeout(config.timeout).timeout(config.timeout);
        if config.tls {
            endpoint = endpoint.tls_config(tls_config(&config)?).map_err(ExportError::Tls)?;
        }
        let headers = metadata(&config.headers)?;

        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ExportError::Thread)?;
        let shared = Arc::new(Shared {
            buffer: Mutex::new(Buffer { queue: VecDeque::new(), in_flight: InFlight::None, closing: false }),
            capacity: config.buffer_capacity,
            wake: Notify::new(),
            counters: Counters::default(),
            rejected_by_code: Mutex::new(BTreeMap::new()),
            last_error: Mutex::new(None),
        });
        let (abort, abort_rx) = watch::channel(false);
        let (done_tx, done) = std::sync::mpsc::channel();
        let worker = Worker {
            shared: shared.clone(),
            config,
            headers,
            abort: abort_rx,
            observer,
            down: None,
            refusals_told: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("ep-otlp-export".into())
            .spawn(move || {
                runtime.block_on(worker.run(endpoint));
                let _ = done_tx.send(());
            })
            .map_err(ExportError::Thread)?;
        Ok(OtlpExporter { shared, abort, thread: Some(thread), done })
    }

    /// Queues `request` for sending. Never blocks: when the buffer is
    /// full the oldest request is dropped and counted.
    pub fn send(&self, request: ExportProfilesServiceRequest) {
        // Encoded here, and the message dropped: its heap is several
        // times its encoding's.
        let request = Bytes::from(request.encode_to_vec());
        let mut buffer = self.shared.buffer();
        if buffer.closing {
            self.shared.counters.dropped_shutdown.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if buffer.held() >= self.shared.capacity {
            if buffer.in_flight == InFlight::Sending {
                // The oldest is on the wire: the worker drops (and counts)
                // it if this call fails.
                buffer.in_flight = InFlight::Evicted;
            } else {
                buffer.queue.pop_front();
                self.shared.counters.dropped_buffer_full.fetch_add(1, Ordering::Relaxed);
            }
        }
        buffer.queue.push_back(Entry { request, answered_retryable: 0 });
        drop(buffer);
        self.shared.wake.notify_one();
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ExporterStats {
        let c = &self.shared.counters;
        ExporterStats {
            requests_sent: c.requests_sent.load(Ordering::Relaxed),
            bytes_sent: c.bytes_sent.load(Ordering::Relaxed),
            attempts_failed: c.attempts_failed.load(Ordering::Relaxed),
            dropped_buffer_full: c.dropped_buffer_full.load(Ordering::Relaxed),
            dropped_retries_exhausted: c.dropped_retries_exhausted.load(Ordering::Relaxed),
            dropped_rejected: c.dropped_rejected.load(Ordering::Relaxed),
            dropped_shutdown: c.dropped_shutdown.load(Ordering::Relaxed),
            dropped_rejected_by_code: self.shared.rejected_by_code.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            profiles_rejected: c.profiles_rejected.load(Ordering::Relaxed),
            buffered: self.shared.buffer().held() as u64,
            panics: c.panics.load(Ordering::Relaxed),
            last_error: self.shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Delivers what is buffered for up to `timeout`, then stops; what is
    /// still unsent is counted in [`ExporterStats::dropped_shutdown`].
    pub fn shutdown(mut self, timeout: Duration) -> ExporterStats {
        self.stop(timeout);
        self.stats()
    }

    fn stop(&mut self, timeout: Duration) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.shared.buffer().closing = true;
        self.shared.wake.notify_one();
        if self.done.recv_timeout(timeout).is_err() {
            let _ = self.abort.send(true);
        }
        let _ = thread.join();
    }
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

/// What a failed export call means for the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    /// The backend could not be reached or did not answer (connection
    /// refused or reset, `Unavailable`, a transport error, a timeout):
    /// nothing is wrong with the request; retry until the backend is back.
    Unreachable,
    /// The backend answered with a retryable code (the OTLP
    /// specification's list): retry up to `max_attempts`.
    Retryable,
    /// The backend refused the request for good: drop it.
    Refused,
}

fn classify(status: &tonic::Status) -> Failure {
    // A status made on our side from a transport error (connection closed
    // before the response, h2 errors, ...) carries that error as its
    // source, whatever code tonic gave it; one the backend sent does not.
    if std::error::Error::source(status).is_some() {
        return Failure::Unreachable;
    }
    match status.code() {
        Code::Unavailable => Failure::Unreachable,
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::OutOfRange
        | Code::DataLoss => Failure::Retryable,
        _ => Failure::Refused,
    }
}

struct Worker {
    shared: Arc<Shared>,
    config: ExporterConfig,
    /// [`ExporterConfig::headers`], checked.
    headers: MetadataMap,
    abort: watch::Receiver<bool>,
    observer: Option<BackendObserver>,
    /// Set while the backend cannot be reached.
    down: Option<Down>,
    /// The refusal codes already reported ([`BackendEvent::Refused`]).
    refusals_told: Vec<Code>,
}

/// Since when the backend cannot be reached, for [`BackendEvent`]s.
struct Down {
    since: Instant,
    last_reported: Instant,
    /// [`ExporterStats::dropped`] at the first failure.
    dropped_before: u64,
}

/// How one export call ended.
enum Outcome {
    /// The request left the buffer (sent, refused, or given up).
    Done,
    /// It failed and is back at the front of the buffer (unless evicted
    /// meanwhile): wait, then try again.
    Retry,
    Aborted,
}

impl Worker {
    async fn run(mut self, endpoint: Endpoint) {
        let channel: Channel = endpoint.connect_lazy();
        let mut client = Grpc::new(channel);
        if self.config.gzip {
            client = client.send_compressed(CompressionEncoding::Gzip).accept_compressed(CompressionEncoding::Gzip);
        }
        // One backoff for the backend, not per request: after a failure
        // the next attempt waits whichever request it is for.
        let mut backoff = self.config.initial_backoff;
        while let Some(entry) = self.next_request().await {
            // A panic in one export costs that request, not the thread.
            let outcome = match CatchUnwind(Box::pin(self.export(&mut client, entry))).await {
                Ok(outcome) => outcome,
                Err(()) => {
                    self.shared.counters.panics.fetch_add(1, Ordering::Relaxed);
                    self.shared.buffer().in_flight = InFlight::None;
                    Outcome::Done
                }
            };
            match outcome {
                Outcome::Done => backoff = self.config.initial_backoff,
                Outcome::Retry => {
                    let aborted = tokio::select! {
                        _ = tokio::time::sleep(jitter(backoff)) => false,
                        _ = self.abort.wait_for(|a| *a) => true,
                    };
                    if aborted {
                        return self.drop_all_at_abort();
                    }
                    backoff = (backoff * 2).min(self.config.max_backoff);
                }
                Outcome::Aborted => return self.drop_all_at_abort(),
            }
        }
    }

    fn dropped_so_far(&self) -> u64 {
        let c = &self.shared.counters;
        [&c.dropped_buffer_full, &c.dropped_retries_exhausted, &c.dropped_rejected, &c.dropped_shutdown]
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .sum()
    }

    fn notify(&mut self, event: BackendEvent) {
        if let Some(observer) = self.observer.as_mut() {
            observer(event);
        }
    }

    /// An export failed to reach the backend: the first failure is
    /// reported at once, a lasting outage every `unreachable_reminder`.
    fn backend_unreachable(&mut self, error: &tonic::Status) {
        let now = Instant::now();
        let buffered = self.shared.buffer().held() as u64;
        let dropped = self.dropped_so_far();
        let event = match &mut self.down {
            None => {
                self.down = Some(Down { since: now, last_reported: now, dropped_before: dropped });
                BackendEvent::Unreachable { error: error.message().to_string(), buffered: buffered.max(1) }
            }
            Some(down) if now.duration_since(down.last_reported) >= self.config.unreachable_reminder => {
                down.last_reported = now;
                BackendEvent::StillUnreachable {
                    down_for: now.duration_since(down.since),
                    buffered: buffered.max(1),
                    dropped: dropped - down.dropped_before,
                }
            }
            Some(_) => return,
        };
        self.notify(event);
    }

    /// An export reached the backend: reported if it could not before.
    fn backend_reached(&mut self) {
        let Some(down) = self.down.take() else { return };
        let dropped = self.dropped_so_far() - down.dropped_before;
        self.notify(BackendEvent::Reachable { down_for: down.since.elapsed(), dropped });
    }

    /// Counts everything still held as dropped by the shutdown.
    fn drop_all_at_abort(&self) {
        let mut buffer = self.shared.buffer();
        let counters = &self.shared.counters;
        match buffer.in_flight {
            InFlight::Sending => counters.dropped_shutdown.fetch_add(1, Ordering::Relaxed),
            InFlight::Evicted => counters.dropped_buffer_full.fetch_add(1, Ordering::Relaxed),
            InFlight::None => 0,
        };
        buffer.in_flight = InFlight::None;
        counters.dropped_shutdown.fetch_add(buffer.queue.len() as u64, Ordering::Relaxed);
        buffer.queue.clear();
    }

    /// Takes the oldest request out for a call, or `None` once closing and
    /// drained (or aborted).
    async fn next_request(&mut self) -> Option<Entry> {
        loop {
            {
                let mut buffer = self.shared.buffer();
                if let Some(entry) = buffer.queue.pop_front() {
                    buffer.in_flight = InFlight::Sending;
                    return Some(entry);
                }
                if buffer.closing {
                    return None;
                }
            }
            tokio::select! {
                _ = self.shared.wake.notified() => {}
                _ = self.abort.wait_for(|a| *a) => return None,
            }
        }
    }

    /// One export call for `entry`, which is in flight.
    async fn export(&mut self, client: &mut Grpc<Channel>, mut entry: Entry) -> Outcome {
        let shared = self.shared.clone();
        let counters = &shared.counters;
        let call = encoded::export(client, entry.request.clone(), self.headers.clone());
        let result = tokio::select! {
            r = tokio::time::timeout(self.config.timeout, call) => r,
            _ = self.abort.wait_for(|a| *a) => return Outcome::Aborted,
        };
        let (failure, error) = match result {
            Ok(Ok(response)) => {
                self.shared.buffer().in_flight = InFlight::None;
                self.backend_reached();
                counters.requests_sent.fetch_add(1, Ordering::Relaxed);
                counters.bytes_sent.fetch_add(entry.request.len() as u64, Ordering::Relaxed);
                if let Some(partial) = response.into_inner().partial_success {
                    if partial.rejected_profiles > 0 {
                        counters.profiles_rejected.fetch_add(partial.rejected_profiles as u64, Ordering::Relaxed);
                        self.shared.set_last_error(format!(
                            "backend rejected {} profiles: {}",
                            partial.rejected_profiles, partial.error_message
                        ));
                    }
                }
                return Outcome::Done;
            }
            Ok(Err(status)) => (classify(&status), status),
            Err(_) => (
                Failure::Unreachable,
                tonic::Status::deadline_exceeded(format!("no answer within {:?}", self.config.timeout)),
            ),
        };
        counters.attempts_failed.fetch_add(1, Ordering::Relaxed);
        if failure == Failure::Unreachable {
            self.backend_unreachable(&error);
        }
        let mut buffer = self.shared.buffer();
        let evicted = buffer.in_flight == InFlight::Evicted;
        buffer.in_flight = InFlight::None;
        if failure == Failure::Refused {
            drop(buffer);
            counters.dropped_rejected.fetch_add(1, Ordering::Relaxed);
            let code = format!("{:?}", error.code());
            *self.shared.rejected_by_code.lock().unwrap_or_else(|p| p.into_inner()).entry(code.clone()).or_insert(0) +=
                1;
            self.shared.set_last_error(format!("export refused: {error}"));
            if !self.refusals_told.contains(&error.code()) {
                self.refusals_told.push(error.code());
                self.notify(BackendEvent::Refused { code, message: error.message().to_string() });
            }
            return Outcome::Done;
        }
        if failure == Failure::Retryable {
            entry.answered_retryable += 1;
        }
        if evicted {
            counters.dropped_buffer_full.fetch_add(1, Ordering::Relaxed);
        } else if entry.answered_retryable >= self.config.max_attempts {
            counters.dropped_retries_exhausted.fetch_add(1, Ordering::Relaxed);
        } else {
            buffer.queue.push_front(entry);
        }
        drop(buffer);
        self.shared.set_last_error(format!("export failed: {error}"));
        Outcome::Retry
    }
}

/// A future whose panics come out as `Err(())`.
struct CatchUnwind<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(_) => std::task::Poll::Ready(Err(())),
        }
    }
}

/// `d` spread over [d/2, d] so that many agents do not retry in step.
fn jitter(d: Duration) -> Duration {
    // The low bits of the clock are random enough for spreading retries.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.subsec_nanos());
    let half = d / 2;
    half + half.mul_f64(f64::from(nanos % 1000) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_future_is_an_error() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let panics = CatchUnwind(Box::pin(async {
            tokio::task::yield_now().await;
            panic!("in an export");
        }));
        assert_eq!(rt.block_on(panics), Err::<(), ()>(()));
        assert_eq!(rt.block_on(CatchUnwind(Box::pin(async { 7 }))), Ok(7));
    }

    #[test]
    fn endpoint_gets_the_scheme_tls_implies() {
        assert_eq!(ExporterConfig::new("127.0.0.1:11000", false, 1).uri().unwrap(), "http://127.0.0.1:11000");
        assert_eq!(ExporterConfig::new("collector:4317", true, 1).uri().unwrap(), "https://collector:4317");
        assert_eq!(ExporterConfig::new("http://h:1", false, 1).uri().unwrap(), "http://h:1");
        assert!(matches!(
            ExporterConfig::new("http://h:1", true, 1).uri(),
            Err(ExportError::Endpoint { reason, .. }) if reason.contains("does not match tls = true")
        ));
    }

    #[test]
    fn failures_are_classified_by_who_made_them() {
        let answered = |code| classify(&tonic::Status::new(code, "from the backend"));
        assert_eq!(answered(Code::Unavailable), Failure::Unreachable);
        assert_eq!(answered(Code::ResourceExhausted), Failure::Retryable);
        assert_eq!(answered(Code::DeadlineExceeded), Failure::Retryable);
        assert_eq!(answered(Code::InvalidArgument), Failure::Refused);
        assert_eq!(answered(Code::Unauthenticated), Failure::Refused);
        assert_eq!(answered(Code::Unimplemented), Failure::Refused);
        assert_eq!(answered(Code::Unknown), Failure::Refused);
        // A transport error turned into a status on our side: the backend
        // never answered, whatever the code.
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
        assert_eq!(classify(&tonic::Status::from_error(Box::new(reset))), Failure::Unreachable);
    }

    #[test]
    fn jitter_stays_within_half_and_full() {
        let d = Duration::from_millis(800);
        let j = jitter(d);
        assert!(j >= d / 2 && j <= d, "{j:?}");
    }
}
