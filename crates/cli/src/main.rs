//! `ebpf-profiler`: the standalone agent.

/// `eprintln!` that never panics: after SIGHUP the terminal may be gone,
/// and a failed message must not stop the outputs being written.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod export_sink;
mod off_cpu;
mod output;
mod pids;
mod summary;

use anyhow::{Context, Result};
use args::{Args, Format};
use export_sink::ExportSink;
use off_cpu::OffCpuOutput;
use output::Output;
use profiler_agent::{Agent, AgentConfig, TraceSink};
use profiler_export::{BackendEvent, BackendObserver, ExporterConfig, OtlpExporter, OtlpSettings};
use profiler_report::folded::FoldedStacks;
use profiler_report::pprof::PprofBuilder;
use profiler_trace::Trace;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Collects folded stacks for the whole run; the CLI writes them at exit.
struct FoldedSink(Arc<Mutex<FoldedStacks>>);

impl TraceSink for FoldedSink {
    fn on_trace(&mut self, trace: &Trace) {
        if trace.off_cpu_ns.is_some() {
            return; // in the off-CPU profile
        }
        self.0.lock().unwrap_or_else(|p| p.into_inner()).add(trace);
    }
}

/// Builds the pprof profile for the whole run.
struct PprofSink(Arc<Mutex<Option<PprofBuilder>>>);

impl TraceSink for PprofSink {
    fn on_trace(&mut self, trace: &Trace) {
        if trace.off_cpu_ns.is_some() {
            return; // in the off-CPU profile
        }
        if let Some(b) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            b.add(trace);
        }
    }
}

fn main() {
    let mut args = Args::parse_from_env();
    let result = otlp_settings(&mut args).and_then(|otlp| run(&args, &otlp));
    if let Err(e) = result {
        say!("ebpf-profiler: error: {e:#}");
        std::process::exit(1);
    }
}

/// The OTLP export settings, flags over OTEL_EXPORTER_OTLP_* variables;
/// marks `args` as exporting when they give an endpoint.
fn otlp_settings(args: &mut Args) -> Result<OtlpSettings> {
    let otlp = args.otlp_settings(OtlpSettings::from_env()?)?;
    args.exporting = otlp.endpoint.is_some();
    Ok(otlp)
}

fn run(args: &Args, otlp: &OtlpSettings) -> Result<()> {
    // Signals first: from here on any of them ends the run with the
    // outputs written and the summary printed; a second one exits at once.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in STOP_SIGNALS {
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone())
            .context("installing signal handlers")?;
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }
    // An output that cannot be written is found now, not after the run.
    let mut output = match args.local_format() {
        Some(_) => Some(Output::open(&args.output)?),
        None => None,
    };
    let (pids, pid_notices) = pids::processes_of(&args.pids, Path::new("/proc"));
    for notice in pid_notices {
        say!("ebpf-profiler: notice: {notice}");
    }
    let config = AgentConfig {
        samples_per_second: args.samples_per_second,
        reporter_interval_ms: args.reporter_interval.as_millis().try_into().unwrap_or(u64::MAX),
        pids: pids.clone(),
        symbolize_native: !args.no_symbolize,
        probabilistic_threshold: args.probabilistic_threshold,
        probabilistic_interval_ms: args.probabilistic_interval.as_millis().try_into().unwrap_or(u64::MAX),
        include_env_vars: args.env_var_names(),
        off_cpu_threshold: args.off_cpu_threshold(),
        container_ids: args.container_ids.clone(),
        cgroups: args.cgroups.clone(),
        disabled_interpreters: args.disabled_interpreters.clone(),
        ..AgentConfig::default()
    };
    let mut off_cpu = OffCpuOutput::open(args, unix_now_ns())?;
    let folded = Arc::new(Mutex::new(FoldedStacks::default()));
    let pprof = Arc::new(Mutex::new(None));
    let mut sinks: Vec<Box<dyn TraceSink>> = Vec::new();
    // Folded stacks also feed the summary's top stacks (bounded).
    if args.local_format().is_some() {
        sinks.push(Box::new(FoldedSink(folded.clone())));
    }
    if let Some(off_cpu) = &off_cpu {
        sinks.push(off_cpu.sink());
    }
    if args.local_format() == Some(Format::Pprof) {
        *pprof.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(PprofBuilder::new(args.samples_per_second, unix_now_ns()));
        sinks.push(Box::new(PprofSink(pprof.clone())));
    }
    let exporter = match otlp.exporter_config(args.export_buffer as usize)? {
        Some(config) => {
            for warning in otlp.warnings.iter().chain(otlp.unused_tls_files().as_ref()) {
                say!("ebpf-profiler: warning: {warning}");
            }
            let note = export_note(&config, otlp.endpoint_source.as_deref());
            let endpoint = config.endpoint.clone();
            let exporter = OtlpExporter::start_with_observer(config, Some(backend_warnings(endpoint)))
                .context("starting the OTLP exporter")?;
            say!("ebpf-profiler: {note}");
            let exporter = Arc::new(Mutex::new(exporter));
            sinks.push(Box::new(ExportSink::new(args.samples_per_second, unix_now_ns(), exporter.clone())));
            Some(exporter)
        }
        None => None,
    };

    let agent = Agent::start_with_sinks(config, sinks)?;
    // --duration counts sampled time: start-up (loading programs and
    // tables) can take seconds under load.
    let started = agent.sampling_started();
    for warning in agent.warnings() {
        say!("ebpf-profiler: warning: {warning}");
    }
    say!(
        "ebpf-profiler: sampling at {} Hz{}; {}",
        args.samples_per_second,
        selection_note(&pids, &args.container_ids, &args.cgroups),
        match args.duration {
            Some(d) => format!("for {}", humantime::format_duration(d)),
            None => "until interrupted (Ctrl-C, SIGTERM, SIGHUP)".to_string(),
        }
    );
    let mut notices_shown = 0;
    // A signal is seen within a quarter second; a duration's end on time.
    const CHECK: Duration = Duration::from_millis(250);
    while !stop.load(Ordering::Relaxed) && args.duration.is_none_or(|d| started.elapsed() < d) {
        let left = args.duration.map_or(CHECK, |d| d.saturating_sub(started.elapsed()));
        std::thread::sleep(left.min(CHECK));
        notices_shown = show_notices(&agent, notices_shown);
    }
    // The sampled time; stopping (joining the pipeline) can take a while.
    let elapsed = started.elapsed();
    agent.stop().context("reading samples")?;
    show_notices(&agent, notices_shown);

    // stop() joined the reporter, which dropped the sinks: the exporter is
    // ours alone now, and shutting it down flushes what is buffered.
    let export_stats = exporter.map(|e| match Arc::try_unwrap(e) {
        Ok(e) => e.into_inner().unwrap_or_else(|p| p.into_inner()).shutdown(Duration::from_secs(5)),
        Err(e) => e.lock().unwrap_or_else(|p| p.into_inner()).stats(),
    });

    let folded = folded.lock().unwrap_or_else(|p| p.into_inner());
    match (args.local_format(), output.as_mut()) {
        (Some(Format::Folded), Some(out)) => out.write(|w| folded.write_to(w))?,
        (Some(Format::Svg), Some(out)) => out.write(|w| {
            let title = format!("ebpf-profiler: {} Hz, {:.1} s", args.samples_per_second, elapsed.as_secs_f64());
            profiler_report::flamegraph::write_svg(&folded, &title, w)
        })?,
        (Some(Format::Pprof), Some(out)) => {
            let builder = pprof.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(builder) = builder {
                let profile = builder.finish(unix_now_ns());
                out.write(|w| profiler_report::pprof::write_gzipped(&profile, w))?;
            }
        }
        _ => {}
    }
    if let Some(off_cpu) = off_cpu.as_mut() {
        let title = format!("ebpf-profiler: {:.1} s", elapsed.as_secs_f64());
        off_cpu.write(&title, unix_now_ns())?;
    }
    let written = args.local_format().filter(|_| args.output != Path::new("-"));
    let inputs = summary::SummaryInputs {
        folded: &folded,
        elapsed,
        top: args.summary_top,
        export: export_stats.as_ref(),
        output: written.map(|_| args.output.display().to_string()),
        verbose: args.verbose,
    };
    for line in summary::summary_lines(&agent.stats(), &inputs) {
        say!("{line}");
    }
    Ok(())
}

/// Each ends the run the same way: sampling stops, the outputs are
/// written and the summary printed (SIGHUP: the terminal went away).
const STOP_SIGNALS: [i32; 3] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Prints the agent's notices not shown yet; returns how many are shown.
fn show_notices(agent: &Agent, shown: usize) -> usize {
    let notices = agent.notices();
    for notice in notices.iter().skip(shown) {
        say!("ebpf-profiler: notice: {notice}");
    }
    notices.len().max(shown)
}

/// Says on stderr, as it happens, when the OTLP backend cannot be reached
/// (once, then every minute while it lasts) and when it is reached again.
fn backend_warnings(endpoint: String) -> BackendObserver {
    Box::new(move |event| {
        match event {
        BackendEvent::Unreachable { error, buffered } => say!(
            "ebpf-profiler: warning: the OTLP backend {endpoint} cannot be reached ({error}); \
             {buffered} request(s) wait, retried until it answers"
        ),
        BackendEvent::StillUnreachable { down_for, buffered, dropped } => say!(
            "ebpf-profiler: warning: the OTLP backend {endpoint} still cannot be reached after {}s; \
             {buffered} request(s) wait, {dropped} dropped (the buffer is full: --export-buffer)",
            down_for.as_secs()
        ),
        BackendEvent::Refused { code, message } => say!(
            "ebpf-profiler: warning: the OTLP backend {endpoint} refused a request ({code}: {message}); \
             refused requests are dropped (check the endpoint, headers and certificates)"
        ),
        BackendEvent::Reachable { down_for, dropped } => say!(
            "ebpf-profiler: the OTLP backend {endpoint} is reached again after {}s ({dropped} request(s) dropped meanwhile)",
            down_for.as_secs()
        ),
        _ => {}
    }
    })
}

/// Where profiles go and how: the endpoint, TLS, the headers' names
/// (never their values), and where the endpoint came from.
fn export_note(config: &ExporterConfig, source: Option<&str>) -> String {
    let mut how = vec![match (config.tls, config.ca_certificate.is_some()) {
        (false, _) => "plain text".to_string(),
        (true, false) => "TLS".to_string(),
        (true, true) => "TLS (CA file)".to_string(),
    }];
    if config.tls && config.client_identity.is_some() {
        how.push("client certificate".into());
    }
    if !config.headers.is_empty() {
        let names: Vec<&str> = config.headers.iter().map(|h| h.name()).collect();
        how.push(format!("headers {}", names.join(", ")));
    }
    let from = source.map(|s| format!(", endpoint from {s}")).unwrap_or_default();
    format!("OTLP export to {} ({}{from})", config.endpoint, how.join(", "))
}

/// What the start line says of the processes chosen (nothing: all).
fn selection_note(pids: &[u32], container_ids: &[String], cgroups: &[String]) -> String {
    let mut parts = Vec::new();
    if !pids.is_empty() {
        parts.push(format!("pids {pids:?}"));
    }
    if !container_ids.is_empty() {
        parts.push(format!("containers {}", container_ids.join(", ")));
    }
    if !cgroups.is_empty() {
        parts.push(format!("cgroups {}", cgroups.join(", ")));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join("; ")),
    }
}
