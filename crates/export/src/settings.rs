//! The OpenTelemetry specification's exporter settings
//! (`OTEL_EXPORTER_OTLP_*`, each overridden by its `_PROFILES_` form) and
//! how they become an [`ExporterConfig`].
//!
//! The rules are the specification's for OTLP/gRPC: an empty variable is
//! unset; the endpoint's `http://` or `https://` scheme decides TLS, and
//! `INSECURE` only applies to an endpoint without one; headers are
//! `key=value` pairs separated by commas, values percent-decoded (W3C
//! Baggage); the timeout is in milliseconds. A timeout, compression or
//! insecure value that cannot be understood is ignored with a warning (as
//! the specification asks); a header, certificate or key that cannot be
//! used is an error, never silently dropped.

use std::path::PathBuf;
use std::time::Duration;

use crate::{ClientIdentity, ExportError, ExporterConfig};

/// A gRPC metadata entry sent with every export call. Its value is never
/// printed (it usually holds a token): `Debug` shows the name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    name: String,
    value: String,
}

impl Header {
    /// A header; the name is lowercased (gRPC metadata keys are). Checked
    /// when the exporter starts.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Header {
        Header { name: name.into().to_ascii_lowercase(), value: value.into() }
    }

    /// The name, lowercase.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value (a secret, often: do not print it).
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: <{} bytes, not shown>", self.name, self.value.len())
    }
}

/// Parses `KEY=VALUE` as a command-line flag gives it: taken literally,
/// blanks around the key trimmed.
pub fn parse_header_flag(text: &str) -> Result<Header, String> {
    let (key, value) = text.split_once('=').ok_or_else(|| "expected KEY=VALUE".to_string())?;
    let key = key.trim();
    if key.is_empty() {
        return Err("the header name is empty".into());
    }
    Ok(Header::new(key, value))
}

/// Parses the specification's header list: `key1=value1,key2=value2`,
/// blanks around keys and values trimmed, empty entries skipped, values
/// percent-decoded (`%20` is a blank; `+` stays a plus). A later entry of
/// the same name replaces an earlier one. Errors never quote a value.
pub fn parse_headers(text: &str) -> Result<Vec<Header>, String> {
    let mut headers: Vec<Header> = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!("entry {} has no '=' (expected key=value)", i + 1));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("entry {} has an empty name", i + 1));
        }
        let value = percent_decode(value.trim())
            .map_err(|reason| format!("the value of {:?} (entry {}) {reason}", key.to_ascii_lowercase(), i + 1))?;
        set_header(&mut headers, Header::new(key, value));
    }
    Ok(headers)
}

/// Adds `header`, replacing one of the same name.
fn set_header(headers: &mut Vec<Header>, header: Header) {
    match headers.iter_mut().find(|h| h.name == header.name) {
        Some(h) => *h = header,
        None => headers.push(header),
    }
}

/// `%XX` decoded; anything else kept. The result must be UTF-8.
fn percent_decode(text: &str) -> Result<String, &'static str> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte =
                hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or("has a '%' not followed by two hex digits")?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "is not UTF-8 once percent-decoded")
}

/// Compression of export requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// gzip (the agent's default).
    Gzip,
    /// None.
    None,
}

impl Compression {
    /// `gzip` or `none`, case-insensitive.
    pub fn parse(text: &str) -> Option<Compression> {
        match text.trim().to_ascii_lowercase().as_str() {
            "gzip" => Some(Compression::Gzip),
            "none" => Some(Compression::None),
            _ => None,
        }
    }
}

/// Exporter settings, each either given or not; [`OtlpSettings::from_env`]
/// reads them from the environment, a front end overrides them with its
/// flags ([`OtlpSettings::over`]), and [`OtlpSettings::exporter_config`]
/// turns them into an [`ExporterConfig`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OtlpSettings {
    /// `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`.
    pub endpoint: Option<String>,
    /// Where the endpoint came from (a variable's or a flag's name), for
    /// messages.
    pub endpoint_source: Option<String>,
    /// Sent with every export call.
    pub headers: Vec<Header>,
    /// PEM file of the certificate(s) that verify the server, instead of
    /// the system's roots.
    pub certificate: Option<PathBuf>,
    /// PEM file of the client certificate (mTLS).
    pub client_certificate: Option<PathBuf>,
    /// PEM file of the client's private key (mTLS).
    pub client_key: Option<PathBuf>,
    /// Compression of requests.
    pub compression: Option<Compression>,
    /// Limit of one export call.
    pub timeout: Option<Duration>,
    /// Plain text for an endpoint without a scheme.
    pub insecure: Option<bool>,
    /// What was ignored, and why (to print at start).
    pub warnings: Vec<String>,
}

/// The signal-specific prefix, which wins over [`GENERIC`].
const PROFILES: &str = "OTEL_EXPORTER_OTLP_PROFILES_";
/// The prefix every OTLP exporter reads.
const GENERIC: &str = "OTEL_EXPORTER_OTLP_";

impl OtlpSettings {
    /// The settings of the process environment.
    pub fn from_env() -> Result<OtlpSettings, ExportError> {
        let mut non_unicode = None;
        let settings = OtlpSettings::from_vars(|name| match std::env::var(name) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                non_unicode.get_or_insert_with(|| name.to_string());
                None
            }
        })?;
        match non_unicode {
            Some(variable) => Err(ExportError::Setting { setting: variable, reason: "not valid UTF-8".into() }),
            None => Ok(settings),
        }
    }

    /// The settings `var` gives (a variable's value by name; the process
    /// environment, or a map in tests). For each setting the `_PROFILES_`
    /// variable wins over the generic one; an empty variable is unset.
    pub fn from_vars(mut var: impl FnMut(&str) -> Option<String>) -> Result<OtlpSettings, ExportError> {
        let mut get = |suffix: &str| -> Option<(String, String)> {
            [PROFILES, GENERIC].iter().find_map(|prefix| {
                let name = format!("{prefix}{suffix}");
                var(&name).filter(|v| !v.trim().is_empty()).map(|v| (name, v))
            })
        };
        let mut s = OtlpSettings::default();
        if let Some((name, value)) = get("ENDPOINT") {
            s.endpoint = Some(value.trim().to_string());
            s.endpoint_source = Some(name);
        }
        if let Some((name, value)) = get("HEADERS") {
            s.headers = parse_headers(&value).map_err(|reason| ExportError::Setting { setting: name, reason })?;
        }
        s.certificate = get("CERTIFICATE").map(|(_, v)| PathBuf::from(v.trim()));
        s.client_certificate = get("CLIENT_CERTIFICATE").map(|(_, v)| PathBuf::from(v.trim()));
        s.client_key = get("CLIENT_KEY").map(|(_, v)| PathBuf::from(v.trim()));
        if let Some((name, value)) = get("COMPRESSION") {
            s.compression = Compression::parse(&value);
            if s.compression.is_none() {
                s.warnings.push(format!("{name}={value:?} ignored: gzip or none"));
            }
        }
        if let Some((name, value)) = get("TIMEOUT") {
            match value.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => s.timeout = Some(Duration::from_millis(ms)),
                _ => s.warnings.push(format!("{name}={value:?} ignored: a number of milliseconds above 0")),
            }
        }
        if let Some((name, value)) = get("INSECURE") {
            // The specification: only "true" is true; anything but
            // "false" is worth a warning.
            let v = value.trim().to_ascii_lowercase();
            s.insecure = Some(v == "true");
            if v != "true" && v != "false" {
                s.warnings.push(format!("{name}={value:?} taken as false: true or false"));
            }
        }
        if let Some((name, value)) = get("PROTOCOL") {
            if value.trim() != "grpc" {
                s.warnings.push(format!("{name}={value:?} ignored: this agent exports OTLP over gRPC only"));
            }
        }
        Ok(s)
    }

    /// These settings where given, `base`'s where not (flags over the
    /// environment). Headers are merged by name, ours replacing `base`'s.
    pub fn over(self, base: OtlpSettings) -> OtlpSettings {
        let (endpoint, endpoint_source) = match self.endpoint {
            Some(e) => (Some(e), self.endpoint_source),
            None => (base.endpoint, base.endpoint_source),
        };
        let mut headers = base.headers;
        for h in self.headers {
            set_header(&mut headers, h);
        }
        let mut warnings = base.warnings;
        warnings.extend(self.warnings);
        OtlpSettings {
            endpoint,
            endpoint_source,
            headers,
            certificate: self.certificate.or(base.certificate),
            client_certificate: self.client_certificate.or(base.client_certificate),
            client_key: self.client_key.or(base.client_key),
            compression: self.compression.or(base.compression),
            timeout: self.timeout.or(base.timeout),
            insecure: self.insecure.or(base.insecure),
            warnings,
        }
    }

    /// Whether the exporter would use TLS: the endpoint's scheme decides,
    /// else `insecure` (TLS unless it is true).
    pub fn tls(&self) -> Result<bool, ExportError> {
        let endpoint = self.endpoint.as_deref().unwrap_or("");
        match endpoint.split_once("://") {
            Some(("https", _)) => Ok(true),
            Some(("http", _)) => Ok(false),
            Some((scheme, _)) => Err(ExportError::Endpoint {
                endpoint: endpoint.to_string(),
                reason: format!("scheme {scheme}:// is not supported (http://, https:// or HOST:PORT)"),
            }),
            None => Ok(!self.insecure.unwrap_or(false)),
        }
    }

    /// The exporter's configuration, or `None` without an endpoint (no
    /// export). Files are not read here but when the exporter starts.
    pub fn exporter_config(&self, buffer_capacity: usize) -> Result<Option<ExporterConfig>, ExportError> {
        let Some(endpoint) = self.endpoint.clone() else { return Ok(None) };
        let tls = self.tls()?;
        let mut c = ExporterConfig::new(endpoint, tls, buffer_capacity);
        c.headers = self.headers.clone();
        if let Some(timeout) = self.timeout {
            c.timeout = timeout;
        }
        if let Some(compression) = self.compression {
            c.gzip = compression == Compression::Gzip;
        }
        c.client_identity =
            match (&self.client_certificate, &self.client_key) {
                (Some(certificate), Some(key)) => {
                    Some(ClientIdentity { certificate: certificate.clone(), key: key.clone() })
                }
                (None, None) => None,
                (Some(_), None) => {
                    return Err(ExportError::Config(
                        "a client certificate needs its key (OTEL_EXPORTER_OTLP_CLIENT_KEY, --otlp-client-key)",
                    ))
                }
                (None, Some(_)) => return Err(ExportError::Config(
                    "a client key needs its certificate (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, --otlp-client-cert)",
                )),
            };
        c.ca_certificate = self.certificate.clone();
        Ok(Some(c))
    }

    /// Warnings about settings that have no effect with this endpoint
    /// (certificates for a plain-text connection).
    pub fn unused_tls_files(&self) -> Option<String> {
        let tls = self.tls().unwrap_or(true);
        let any = self.certificate.is_some() || self.client_certificate.is_some() || self.client_key.is_some();
        (self.endpoint.is_some() && !tls && any)
            .then(|| "the OTLP endpoint is plain text: its certificate and key settings are not used".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> OtlpSettings {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OtlpSettings::from_vars(|name| map.get(name).cloned()).unwrap()
    }

    #[test]
    fn headers_are_decoded_and_trimmed() {
        let h = parse_headers(" Authorization = Bearer%20xyz ,x-tenant=a+b%2Cc,, k=v=w ").unwrap();
        let pairs: Vec<(&str, &str)> = h.iter().map(|h| (h.name(), h.value())).collect();
        assert_eq!(pairs, vec![("authorization", "Bearer xyz"), ("x-tenant", "a+b,c"), ("k", "v=w")]);
        // A repeated name: the last wins.
        let h = parse_headers("a=1,A=2").unwrap();
        assert_eq!(h, vec![Header::new("a", "2")]);
        assert_eq!(parse_headers("").unwrap(), vec![]);
    }

    #[test]
    fn bad_headers_are_errors_that_do_not_show_the_value() {
        assert_eq!(parse_headers("a=1,novalue").unwrap_err(), "entry 2 has no '=' (expected key=value)");
        assert_eq!(parse_headers("=secret").unwrap_err(), "entry 1 has an empty name");
        let e = parse_headers("auth=sec%zzret").unwrap_err();
        assert!(e.contains("\"auth\"") && e.contains("two hex digits") && !e.contains("sec"), "{e}");
        let e = parse_headers("auth=%ff").unwrap_err();
        assert!(e.contains("UTF-8"), "{e}");
        let e = OtlpSettings::from_vars(|n| (n == "OTEL_EXPORTER_OTLP_HEADERS").then(|| "x".to_string())).unwrap_err();
        assert!(e.to_string().starts_with("OTEL_EXPORTER_OTLP_HEADERS: entry 1 has no '='"), "{e}");
        // Debug never shows a value.
        assert_eq!(format!("{:?}", Header::new("Authorization", "Bearer xyz")), "authorization: <10 bytes, not shown>");
    }

    #[test]
    fn header_flags_are_literal() {
        assert_eq!(
            parse_header_flag("Authorization=Bearer a%20b=").unwrap(),
            Header::new("authorization", "Bearer a%20b=")
        );
        assert!(parse_header_flag("novalue").is_err());
        assert!(parse_header_flag(" =v").is_err());
    }

    #[test]
    fn profiles_variables_win_over_generic_ones() {
        let s = from(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4317"),
            ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "https://profiles:4317"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2"),
            ("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "c=3"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
            ("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/generic/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/generic/key.pem"),
            ("OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY", "/profiles/key.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/generic/cert.pem"),
        ]);
        assert_eq!(s.endpoint.as_deref(), Some("https://profiles:4317"));
        assert_eq!(s.endpoint_source.as_deref(), Some("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"));
        // The signal's headers replace the generic ones (not merged).
        assert_eq!(s.headers, vec![Header::new("c", "3")]);
        assert_eq!(s.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(s.compression, Some(Compression::None));
        assert_eq!(s.certificate, Some(PathBuf::from("/generic/ca.pem")));
        assert_eq!(s.client_key, Some(PathBuf::from("/profiles/key.pem")));
        assert_eq!(s.client_certificate, Some(PathBuf::from("/generic/cert.pem")));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // An empty signal variable is unset: the generic one applies.
        let s = from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "g:1"), ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "")]);
        assert_eq!(s.endpoint.as_deref(), Some("g:1"));
        assert_eq!(from(&[]), OtlpSettings::default());
    }

    #[test]
    fn unusable_values_are_ignored_with_a_warning() {
        let s = from(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "yes"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ]);
        assert_eq!((s.timeout, s.compression, s.insecure), (None, None, Some(false)));
        assert_eq!(s.warnings.len(), 4, "{:?}", s.warnings);
        assert!(
            s.warnings.iter().any(|w| w.starts_with("OTEL_EXPORTER_OTLP_TIMEOUT=\"10s\" ignored")),
            "{:?}",
            s.warnings
        );
        assert_eq!(from(&[("OTEL_EXPORTER_OTLP_INSECURE", "TRUE")]).insecure, Some(true));
    }

    #[test]
    fn the_scheme_decides_tls_and_insecure_only_without_one() {
        let tls = |vars: &[(&str, &str)]| from(vars).exporter_config(1).unwrap().unwrap().tls;
        assert!(tls(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]), "TLS by default");
        assert!(!tls(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"), ("OTEL_EXPORTER_OTLP_INSECURE", "true")]));
        assert!(!tls(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")]));
        // https:// takes precedence over insecure.
        assert!(tls(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "true")
        ]));
        let e = from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "unix:///run/otel.sock")]).exporter_config(1).unwrap_err();
        assert!(e.to_string().contains("scheme unix:// is not supported"), "{e}");
        assert_eq!(from(&[]).exporter_config(1).unwrap(), None, "no endpoint, no export");
    }

    #[test]
    fn flags_win_over_the_environment() {
        let env = from(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "env:1"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20env,x-tenant=t1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "3000"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/env/ca.pem"),
        ]);
        let flags = OtlpSettings {
            endpoint: Some("flag:2".into()),
            endpoint_source: Some("--collection-agent".into()),
            headers: vec![Header::new("Authorization", "Bearer flag")],
            client_certificate: Some("/flag/cert.pem".into()),
            client_key: Some("/flag/key.pem".into()),
            ..OtlpSettings::default()
        };
        let s = flags.over(env);
        assert_eq!((s.endpoint.as_deref(), s.endpoint_source.as_deref()), (Some("flag:2"), Some("--collection-agent")));
        assert_eq!(s.headers, vec![Header::new("authorization", "Bearer flag"), Header::new("x-tenant", "t1")]);
        assert_eq!(s.timeout, Some(Duration::from_secs(3)));
        let c = s.exporter_config(4).unwrap().unwrap();
        assert_eq!(c.ca_certificate, Some(PathBuf::from("/env/ca.pem")));
        assert_eq!(
            c.client_identity,
            Some(ClientIdentity { certificate: "/flag/cert.pem".into(), key: "/flag/key.pem".into() })
        );
        assert_eq!((c.timeout, c.buffer_capacity, c.gzip), (Duration::from_secs(3), 4, true));
        let lone_key = from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "h:1"), ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem")]);
        assert!(
            matches!(lone_key.exporter_config(1), Err(ExportError::Config(m)) if m.contains("needs its certificate"))
        );
    }
}
