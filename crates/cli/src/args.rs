//! Command-line flags. The original agent spells long flags with one dash
//! (`-samples-per-second 20`); people paste those, so they are accepted
//! too and rewritten to the two-dash form before parsing.

use clap::{Parser, ValueEnum};
use profiler_export::OtlpSettings;
use std::path::PathBuf;
use std::time::Duration;

/// Whole-system CPU profiler: samples every CPU with eBPF and unwinds
/// kernel and user stacks.
#[derive(Debug, Parser)]
#[command(name = "ebpf-profiler", version, about)]
pub struct Args {
    /// Samples per second per CPU.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=i64::from(profiler_agent::MAX_SAMPLES_PER_SECOND)))]
    pub samples_per_second: u32,

    /// How long to sample (e.g. `10s`, `2m`), counted from when sampling
    /// starts; without it, until SIGINT, SIGTERM or SIGHUP. Any of these
    /// signals ends the run early, with the outputs written.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Profile only this process and its threads (repeatable). A thread id
    /// selects the thread's process.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,

    /// Profile only the processes of this container (repeatable): its id,
    /// or a prefix of at least 12 hex digits, as `docker ps` shows it.
    /// New processes of a chosen one are chosen too.
    #[arg(long = "container-id", value_name = "ID")]
    pub container_ids: Vec<String>,

    /// Profile only the processes of this cgroup and the cgroups below it
    /// (repeatable): a path as /proc/PID/cgroup shows it, e.g.
    /// /system.slice/nginx.service.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<String>,

    /// Do not unwind this interpreter (repeatable). Its processes are
    /// profiled as native code.
    #[arg(
        long = "disable-interpreter",
        value_name = "NAME",
        value_parser = clap::builder::PossibleValuesParser::new(profiler_agent::runtime_names())
    )]
    pub disabled_interpreters: Vec<String>,

    /// Local output format. Default: `folded`, unless `--collection-agent`
    /// is given (then no local output unless asked for).
    #[arg(long, value_enum)]
    pub format: Option<Format>,

    /// Where to write the local output; `-` is standard output. Opened
    /// before sampling starts, so a path that cannot be written fails at
    /// once.
    #[arg(long, default_value = "-")]
    pub output: PathBuf,

    /// Length of a reporting interval (e.g. `5s`).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub reporter_interval: Duration,

    /// Send profiles over OTLP/gRPC to this backend (`HOST:PORT`, e.g. an
    /// OpenTelemetry Collector's otlp receiver), every reporting interval.
    /// `http://HOST:PORT` is plain text, `https://HOST:PORT` TLS. Default:
    /// OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
    /// (no export without one).
    #[arg(long, visible_alias = "otlp-endpoint", value_name = "HOST:PORT")]
    pub collection_agent: Option<String>,

    /// Talk to the collection agent in plain text instead of TLS (an
    /// endpoint without `http://` or `https://`; as
    /// OTEL_EXPORTER_OTLP_INSECURE=true).
    #[arg(long)]
    pub disable_tls: bool,

    /// gRPC header sent with every OTLP export (repeatable), e.g.
    /// `authorization=Bearer TOKEN`; the value is taken literally. Replaces
    /// a header of the same name from OTEL_EXPORTER_OTLP_HEADERS (which
    /// keeps the token out of the process list).
    #[arg(long = "otlp-header", value_name = "KEY=VALUE", value_parser = profiler_export::parse_header_flag)]
    pub otlp_headers: Vec<profiler_export::Header>,

    /// PEM file of the CA certificate(s) that verify the OTLP backend,
    /// instead of the system's roots (OTEL_EXPORTER_OTLP_CERTIFICATE).
    #[arg(long, value_name = "PATH")]
    pub otlp_ca_file: Option<PathBuf>,

    /// PEM file of the client certificate for mutual TLS
    /// (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE); needs --otlp-client-key.
    #[arg(long, value_name = "PATH")]
    pub otlp_client_cert: Option<PathBuf>,

    /// PEM file of the client certificate's private key
    /// (OTEL_EXPORTER_OTLP_CLIENT_KEY).
    #[arg(long, value_name = "PATH")]
    pub otlp_client_key: Option<PathBuf>,

    /// Compression of OTLP requests: gzip (default) or none
    /// (OTEL_EXPORTER_OTLP_COMPRESSION).
    #[arg(long, value_name = "gzip|none", value_parser = parse_compression)]
    pub otlp_compression: Option<profiler_export::Compression>,

    /// Limit of one OTLP export call, e.g. `10s` (default; as
    /// OTEL_EXPORTER_OTLP_TIMEOUT in milliseconds).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub otlp_timeout: Option<Duration>,

    /// Set once the OTLP settings are resolved: an endpoint came from a
    /// flag or the environment.
    #[arg(skip)]
    pub exporting: bool,

    /// Reporting intervals kept in memory while the backend is unreachable;
    /// beyond that the oldest are dropped (and counted).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub export_buffer: u32,

    /// Do not name native frames on the host (no DWARF or symbol loading):
    /// frames keep file, build id and address for a backend to symbolize.
    #[arg(long)]
    pub no_symbolize: bool,

    /// Probabilistic profiling: every `--probabilistic-interval` a number
    /// in 0..99 is drawn, and sampling runs for that interval only when
    /// it is below this threshold. 100 (the default) always samples.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub probabilistic_threshold: u32,

    /// Length of a probabilistic profiling interval (1m..5m as the
    /// reference agent; from 100ms here).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1m")]
    pub probabilistic_interval: Duration,

    /// Comma-separated environment variables reported of each process
    /// (OTLP resource attributes `process.environment_variable.<NAME>`).
    #[arg(long, value_name = "NAMES", default_value = "")]
    pub env_vars: String,

    /// Off-CPU profiling: also take the stack of a thread when the
    /// scheduler switches it out, weighted by the time until it runs
    /// again. THRESHOLD is the fraction of switch-outs sampled, in (0, 1];
    /// `--off-cpu` alone samples 1%. The profile goes to
    /// `--off-cpu-output` (folded: weights in microseconds).
    #[arg(long, value_name = "THRESHOLD", num_args = 0..=1, require_equals = true,
          default_missing_value = DEFAULT_OFF_CPU_THRESHOLD, value_parser = parse_fraction)]
    pub off_cpu: Option<f64>,

    /// The reference agent's spelling of `--off-cpu=THRESHOLD` ([0, 1];
    /// 0, the default, is off).
    #[arg(long, value_name = "THRESHOLD", value_parser = parse_fraction, conflicts_with = "off_cpu")]
    pub off_cpu_threshold: Option<f64>,

    /// Where the off-CPU profile goes, in `--format`. Default: next to
    /// `--output` (`profile.folded` -> `profile.off-cpu.folded`); with
    /// `--output -`, folded off-CPU stacks follow the on-CPU ones under an
    /// `[off-cpu]` root frame, and pprof and SVG need this flag.
    #[arg(long, value_name = "PATH")]
    pub off_cpu_output: Option<PathBuf>,

    /// How many stacks the exit summary lists.
    #[arg(long, default_value_t = 5)]
    pub summary_top: usize,

    /// The exit summary tells the agent's internals too (symbolizer,
    /// process manager, off-CPU bookkeeping, BPF cost).
    #[arg(long)]
    pub verbose: bool,
}

/// `--off-cpu` without a value: 1% of switch-outs, a cost of about 1% of
/// a CPU at 50000 switches per second (docs/off-cpu.md).
const DEFAULT_OFF_CPU_THRESHOLD: &str = "0.01";

/// `gzip` or `none`.
fn parse_compression(text: &str) -> Result<profiler_export::Compression, String> {
    profiler_export::Compression::parse(text).ok_or_else(|| "gzip or none".to_string())
}

/// A fraction in [0, 1].
fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not in [0, 1]"))
    }
}

/// Local output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per distinct stack, `process;root;...;leaf count`
    /// (flamegraph.pl, inferno, speedscope).
    Folded,
    /// gzip-compressed pprof protobuf (`go tool pprof`, Pyroscope, Parca).
    Pprof,
    /// An interactive flame graph (SVG).
    Svg,
}

impl Args {
    /// The local output format, if any.
    pub fn local_format(&self) -> Option<Format> {
        match (self.format, self.collection_agent.is_some() || self.exporting) {
            (Some(f), _) => Some(f),
            (None, false) => Some(Format::Folded),
            (None, true) => None,
        }
    }

    /// The OTLP exporter's settings: these flags where given, `env`'s
    /// (OTEL_EXPORTER_OTLP_*) where not; headers merged by name.
    pub fn otlp_settings(&self, env: OtlpSettings) -> anyhow::Result<OtlpSettings> {
        let mut flags = OtlpSettings::default();
        if let Some(endpoint) = &self.collection_agent {
            flags.endpoint = Some(endpoint.clone());
            flags.endpoint_source = Some("--collection-agent".into());
        }
        flags.insecure = self.disable_tls.then_some(true);
        flags.headers = self.otlp_headers.clone();
        flags.certificate = self.otlp_ca_file.clone();
        flags.client_certificate = self.otlp_client_cert.clone();
        flags.client_key = self.otlp_client_key.clone();
        flags.compression = self.otlp_compression;
        flags.timeout = self.otlp_timeout;
        if self.otlp_timeout == Some(Duration::ZERO) {
            anyhow::bail!("--otlp-timeout must be above 0");
        }
        let settings = flags.over(env);
        if self.disable_tls && settings.endpoint.as_deref().is_some_and(|e| e.starts_with("https://")) {
            anyhow::bail!(
                "--disable-tls contradicts the https:// endpoint {} (from {})",
                settings.endpoint.as_deref().unwrap_or(""),
                settings.endpoint_source.as_deref().unwrap_or("?")
            );
        }
        Ok(settings)
    }

    /// `--env-vars` split at its commas (blanks trimmed, empty entries
    /// skipped, as the reference agent does); the agent checks the names.
    pub fn env_var_names(&self) -> Vec<String> {
        self.env_vars.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).collect()
    }

    /// The fraction of switch-outs sampled off-CPU; 0 is off.
    pub fn off_cpu_threshold(&self) -> f64 {
        self.off_cpu.or(self.off_cpu_threshold).unwrap_or(0.0)
    }

    /// Where the off-CPU profile goes: `None` is standard output (after
    /// the on-CPU profile). See [`Args::off_cpu_output`].
    pub fn off_cpu_path(&self) -> Option<PathBuf> {
        if let Some(path) = &self.off_cpu_output {
            return Some(path.clone());
        }
        if self.output == std::path::Path::new("-") {
            return None;
        }
        let stem = self.output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match self.output.extension() {
            Some(ext) => format!("{stem}.off-cpu.{}", ext.to_string_lossy()),
            None => format!("{stem}.off-cpu"),
        };
        Some(self.output.with_file_name(name))
    }

    /// Parses `argv`, accepting single-dash long flags.
    pub fn parse_from_env() -> Args {
        Args::parse_from(normalize_single_dash(std::env::args()))
    }
}

/// Rewrites `-long-flag[=v]` to `--long-flag[=v]` when `long-flag` is one
/// of our long flags; everything else (values such as `-`, negative
/// numbers, short flags) is left alone.
pub fn normalize_single_dash(args: impl IntoIterator<Item = String>) -> Vec<String> {
    use clap::CommandFactory;
    let command = Args::command();
    let longs: Vec<String> = command
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .chain(["help".to_owned(), "version".to_owned()])
        .collect();
    let mut after_separator = false;
    args.into_iter()
        .map(|arg| {
            if after_separator || arg == "--" {
                after_separator = true;
                return arg;
            }
            match arg.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => {
                    let name = rest.split('=').next().unwrap_or(rest);
                    if longs.iter().any(|l| l == name) {
                        format!("-{arg}")
                    } else {
                        arg
                    }
                }
                _ => arg,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(normalize_single_dash(args.iter().map(|s| s.to_string())))
    }

    #[test]
    fn reference_spelling_is_accepted() {
        let a = parse(&[
            "ebpf-profiler",
            "-samples-per-second",
            "99",
            "-duration=5s",
            "-pid",
            "12",
            "--pid",
            "13",
            "-output",
            "-",
        ])
        .unwrap();
        assert_eq!(a.samples_per_second, 99);
        assert_eq!(a.duration, Some(Duration::from_secs(5)));
        assert_eq!(a.pids, vec![12, 13]);
        assert_eq!(a.output, PathBuf::from("-"));
    }

    #[test]
    fn otlp_flags_in_reference_spelling() {
        let a = parse(&[
            "ebpf-profiler",
            "-collection-agent",
            "127.0.0.1:11000",
            "-disable-tls",
            "-reporter-interval",
            "2s",
        ])
        .unwrap();
        assert_eq!(a.collection_agent.as_deref(), Some("127.0.0.1:11000"));
        assert!(a.disable_tls);
        assert_eq!(a.reporter_interval, Duration::from_secs(2));
        assert_eq!(a.local_format(), None, "no local output unless asked for");
        let a = parse(&["ebpf-profiler", "-collection-agent=h:1", "--format", "folded"]).unwrap();
        assert_eq!(a.local_format(), Some(Format::Folded));
        let a = parse(&["ebpf-profiler", "-format", "pprof"]).unwrap();
        assert_eq!(a.local_format(), Some(Format::Pprof));
        let a = parse(&["ebpf-profiler", "--format=svg"]).unwrap();
        assert_eq!(a.local_format(), Some(Format::Svg));
    }

    /// `--disable-interpreter` takes the runtimes' names, and its help
    /// lists every one of them (the names of ebpf/runtimes.h's list).
    #[test]
    fn disable_interpreter_takes_the_runtimes_names() {
        use clap::CommandFactory;
        let names: Vec<&str> = profiler_agent::runtime_names().collect();
        assert!(names.contains(&"python") && names.contains(&"beam"), "{names:?}");
        let a = parse(&["ebpf-profiler", "--disable-interpreter", "perl", "-disable-interpreter=beam"]).unwrap();
        assert_eq!(a.disabled_interpreters, ["perl", "beam"]);
        let err = parse(&["ebpf-profiler", "--disable-interpreter", "dotnet"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        let help = Args::command().render_long_help().to_string();
        let flag = help.find("--disable-interpreter").expect("the flag's help");
        // Up to the next option's line.
        let rest = &help[flag + 1..];
        let end = [rest.find("\n  -"), rest.find("\n      --")].into_iter().flatten().min().unwrap_or(rest.len());
        let listed = &rest[..end];
        for name in names {
            assert!(listed.contains(name), "{name} is not in the help of --disable-interpreter: {listed}");
        }
    }

    /// The environment's OTLP settings, from `vars`.
    fn env(vars: &[(&str, &str)]) -> OtlpSettings {
        let vars: std::collections::HashMap<&str, &str> = vars.iter().copied().collect();
        OtlpSettings::from_vars(|name| vars.get(name).map(|v| v.to_string())).unwrap()
    }

    #[test]
    fn otlp_flags_win_over_the_environment() {
        use profiler_export::{Compression, Header};
        let environment = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "env-generic:4317"),
            ("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "env-profiles:4317"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20env,x-scope-orgid=t1"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/env/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/env/client.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/env/client.key"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
        ]);
        // No flags: the environment, PROFILES_ over generic; exporting
        // means no local output unless asked for.
        let mut a = parse(&["ebpf-profiler"]).unwrap();
        let s = a.otlp_settings(environment.clone()).unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("env-profiles:4317"));
        assert_eq!(s.endpoint_source.as_deref(), Some("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"));
        assert_eq!(s.headers[0], Header::new("authorization", "Bearer env"));
        a.exporting = s.endpoint.is_some();
        assert_eq!(a.local_format(), None);
        let c = s.exporter_config(4).unwrap().unwrap();
        assert!(c.tls && !c.gzip);
        assert_eq!(c.timeout, Duration::from_secs(2));

        // Flags win, in both spellings.
        let a = parse(&[
            "ebpf-profiler",
            "-collection-agent=flag:1",
            "-disable-tls",
            "--otlp-header",
            "Authorization=Bearer flag",
            "--otlp-header=x-extra=1",
            "--otlp-ca-file",
            "/flag/ca.pem",
            "--otlp-client-cert",
            "/flag/client.pem",
            "--otlp-client-key",
            "/flag/client.key",
            "--otlp-timeout",
            "5s",
            "--otlp-compression",
            "gzip",
        ])
        .unwrap();
        let s = a.otlp_settings(environment.clone()).unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("flag:1"));
        assert_eq!(s.endpoint_source.as_deref(), Some("--collection-agent"));
        let names: Vec<(&str, &str)> = s.headers.iter().map(|h| (h.name(), h.value())).collect();
        assert_eq!(names, vec![("authorization", "Bearer flag"), ("x-scope-orgid", "t1"), ("x-extra", "1")]);
        assert_eq!(s.certificate, Some(PathBuf::from("/flag/ca.pem")));
        assert_eq!(s.client_certificate, Some(PathBuf::from("/flag/client.pem")));
        assert_eq!(s.client_key, Some(PathBuf::from("/flag/client.key")));
        assert_eq!((s.timeout, s.compression), (Some(Duration::from_secs(5)), Some(Compression::Gzip)));
        let c = s.exporter_config(4).unwrap().unwrap();
        assert!(!c.tls, "--disable-tls");
        let a = parse(&["ebpf-profiler", "--otlp-endpoint", "http://alias:4317"]).unwrap();
        assert_eq!(a.otlp_settings(OtlpSettings::default()).unwrap().endpoint.as_deref(), Some("http://alias:4317"));
        // No endpoint anywhere: no export, folded stacks.
        let a = parse(&["ebpf-profiler", "--otlp-header", "a=b"]).unwrap();
        assert_eq!(a.otlp_settings(OtlpSettings::default()).unwrap().exporter_config(1).unwrap(), None);
        assert_eq!(a.local_format(), Some(Format::Folded));
    }

    #[test]
    fn otlp_flag_errors() {
        let e = parse(&["ebpf-profiler", "--otlp-header", "novalue"]).unwrap_err().to_string();
        assert!(e.contains("--otlp-header") && e.contains("KEY=VALUE"), "{e}");
        let e = parse(&["ebpf-profiler", "--otlp-compression", "zstd"]).unwrap_err().to_string();
        assert!(e.contains("gzip or none"), "{e}");
        let a = parse(&["ebpf-profiler", "--disable-tls"]).unwrap();
        let e = a.otlp_settings(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317")])).unwrap_err().to_string();
        assert!(e.contains("--disable-tls contradicts") && e.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{e}");
    }

    #[test]
    fn probabilistic_and_env_var_flags() {
        let a = parse(&[
            "ebpf-profiler",
            "-probabilistic-threshold",
            "50",
            "-probabilistic-interval=2m",
            "-env-vars",
            " HOME, ,DEPLOY,",
        ])
        .unwrap();
        assert_eq!((a.probabilistic_threshold, a.probabilistic_interval), (50, Duration::from_secs(120)));
        assert_eq!(a.env_var_names(), vec!["HOME".to_string(), "DEPLOY".to_string()]);
        let a = parse(&["ebpf-profiler"]).unwrap();
        assert_eq!((a.probabilistic_threshold, a.probabilistic_interval), (100, Duration::from_secs(60)));
        assert!(a.env_var_names().is_empty());
        let e = parse(&["ebpf-profiler", "--probabilistic-threshold", "101"]).unwrap_err().to_string();
        assert!(e.contains("probabilistic-threshold"), "{e}");
    }

    #[test]
    fn off_cpu_flags() {
        let a = parse(&["ebpf-profiler"]).unwrap();
        assert_eq!(a.off_cpu_threshold(), 0.0, "off by default");
        let a = parse(&["ebpf-profiler", "--off-cpu"]).unwrap();
        assert_eq!(a.off_cpu_threshold(), 0.01);
        let a = parse(&["ebpf-profiler", "--off-cpu=0.5", "--pid", "3"]).unwrap();
        assert_eq!((a.off_cpu_threshold(), a.pids.clone()), (0.5, vec![3]));
        // The value needs `=`: a following word is not taken for it.
        let a = parse(&["ebpf-profiler", "--off-cpu", "--pid", "3"]).unwrap();
        assert_eq!(a.off_cpu_threshold(), 0.01);
        let a = parse(&["ebpf-profiler", "-off-cpu-threshold", "0.25"]).unwrap();
        assert_eq!(a.off_cpu_threshold(), 0.25);
        for bad in ["--off-cpu=1.5", "--off-cpu=-0.1", "--off-cpu=x"] {
            let e = parse(&["ebpf-profiler", bad]).unwrap_err().to_string();
            assert!(e.contains("off-cpu"), "{bad}: {e}");
        }
        assert!(parse(&["ebpf-profiler", "--off-cpu", "--off-cpu-threshold", "0.1"]).is_err(), "one of the two");
    }

    #[test]
    fn off_cpu_output_goes_next_to_the_output() {
        let path = |args: &[&str]| parse(args).unwrap().off_cpu_path();
        assert_eq!(path(&["ebpf-profiler", "--off-cpu"]), None, "standard output");
        assert_eq!(path(&["ebpf-profiler", "--output", "/tmp/p.folded"]), Some(PathBuf::from("/tmp/p.off-cpu.folded")));
        assert_eq!(path(&["ebpf-profiler", "--output", "run/profile"]), Some(PathBuf::from("run/profile.off-cpu")));
        assert_eq!(
            path(&["ebpf-profiler", "--output", "p.pb.gz", "--off-cpu-output", "w.pb.gz"]),
            Some(PathBuf::from("w.pb.gz"))
        );
    }

    #[test]
    fn defaults() {
        let a = parse(&["ebpf-profiler"]).unwrap();
        assert_eq!(a.samples_per_second, 20);
        assert_eq!(a.duration, None);
        assert_eq!(a.local_format(), Some(Format::Folded));
        assert_eq!(a.collection_agent, None);
        assert!(!a.disable_tls);
        assert_eq!(a.reporter_interval, Duration::from_secs(5));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = parse(&["ebpf-profiler", "--samples-per-second", "0"]).unwrap_err().to_string();
        assert!(e.contains("samples-per-second"), "{e}");
        let e = parse(&["ebpf-profiler", "--duration", "soon"]).unwrap_err().to_string();
        assert!(e.contains("duration"), "{e}");
        // Unknown single-dash words stay short flags for clap to reject.
        let e = parse(&["ebpf-profiler", "-no-such-flag"]).unwrap_err().to_string();
        assert!(e.contains("unexpected argument '-n'"), "{e}");
        let e = parse(&["ebpf-profiler", "--no-such-flag"]).unwrap_err().to_string();
        assert!(e.contains("--no-such-flag"), "{e}");
    }
}
