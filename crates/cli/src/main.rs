//! `ebpf-profiler`: the standalone agent.

mod args;
mod export_sink;

use anyhow::{Context, Result};
use args::{Args, Format};
use export_sink::ExportSink;
use profiler_agent::{Agent, AgentConfig, TraceSink};
use profiler_export::{ExporterConfig, ExporterStats, OtlpExporter};
use profiler_report::folded::FoldedStacks;
use profiler_report::pprof::PprofBuilder;
use profiler_trace::Trace;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Collects folded stacks for the whole run; the CLI writes them at exit.
struct FoldedSink(Arc<Mutex<FoldedStacks>>);

impl TraceSink for FoldedSink {
    fn on_trace(&mut self, trace: &Trace) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).add(trace);
    }
}

/// Builds the pprof profile for the whole run.
struct PprofSink(Arc<Mutex<Option<PprofBuilder>>>);

impl TraceSink for PprofSink {
    fn on_trace(&mut self, trace: &Trace) {
        if let Some(b) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            b.add(trace);
        }
    }
}

fn main() {
    let args = Args::parse_from_env();
    if let Err(e) = run(&args) {
        eprintln!("ebpf-profiler: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    let config = AgentConfig {
        samples_per_second: args.samples_per_second,
        reporter_interval_ms: args.reporter_interval.as_millis().try_into().unwrap_or(u64::MAX),
        pids: args.pids.clone(),
        symbolize_native: !args.no_symbolize,
        ..AgentConfig::default()
    };
    let folded = Arc::new(Mutex::new(FoldedStacks::default()));
    let pprof = Arc::new(Mutex::new(None));
    let mut sinks: Vec<Box<dyn TraceSink>> = Vec::new();
    // Folded stacks also feed the summary's top stacks (bounded).
    if args.local_format().is_some() {
        sinks.push(Box::new(FoldedSink(folded.clone())));
    }
    if args.local_format() == Some(Format::Pprof) {
        *pprof.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(PprofBuilder::new(args.samples_per_second, unix_now_ns()));
        sinks.push(Box::new(PprofSink(pprof.clone())));
    }
    let exporter = match &args.collection_agent {
        Some(endpoint) => {
            let config = ExporterConfig::new(endpoint.clone(), !args.disable_tls, args.export_buffer as usize);
            let exporter = Arc::new(Mutex::new(OtlpExporter::start(config).context("starting the OTLP exporter")?));
            sinks.push(Box::new(ExportSink::new(args.samples_per_second, unix_now_ns(), exporter.clone())));
            Some(exporter)
        }
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).context("installing signal handlers")?;
    }

    let started = Instant::now();
    let agent = Agent::start_with_sinks(config, sinks)?;
    for warning in agent.warnings() {
        eprintln!("ebpf-profiler: warning: {warning}");
    }
    eprintln!(
        "ebpf-profiler: sampling at {} Hz{}; {}",
        args.samples_per_second,
        if args.pids.is_empty() { String::new() } else { format!(" (pids {:?})", args.pids) },
        match args.duration {
            Some(d) => format!("for {}", humantime::format_duration(d)),
            None => "until interrupted (Ctrl-C)".to_string(),
        }
    );
    let mut notices_shown = 0;
    while !stop.load(Ordering::Relaxed) && args.duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
        notices_shown = show_notices(&agent, notices_shown);
    }
    agent.stop().context("reading samples")?;
    show_notices(&agent, notices_shown);
    let elapsed = started.elapsed();

    // stop() joined the reporter, which dropped the sinks: the exporter is
    // ours alone now, and shutting it down flushes what is buffered.
    let export_stats = exporter.map(|e| match Arc::try_unwrap(e) {
        Ok(e) => e.into_inner().unwrap_or_else(|p| p.into_inner()).shutdown(Duration::from_secs(5)),
        Err(e) => e.lock().unwrap_or_else(|p| p.into_inner()).stats(),
    });

    let folded = folded.lock().unwrap_or_else(|p| p.into_inner());
    match args.local_format() {
        Some(Format::Folded) => write_output(&args.output, |out| folded.write_to(out))?,
        Some(Format::Svg) => write_output(&args.output, |out| {
            let title = format!("ebpf-profiler: {} Hz, {:.1} s", args.samples_per_second, elapsed.as_secs_f64());
            profiler_report::flamegraph::write_svg(&folded, &title, out)
        })?,
        Some(Format::Pprof) => {
            let builder = pprof.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(builder) = builder {
                let profile = builder.finish(unix_now_ns());
                write_output(&args.output, |out| profiler_report::pprof::write_gzipped(&profile, out))?;
            }
        }
        None => {}
    }
    print_summary(&agent, &folded, elapsed, args.summary_top, export_stats.as_ref());
    Ok(())
}

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Prints the agent's notices not shown yet; returns how many are shown.
fn show_notices(agent: &Agent, shown: usize) -> usize {
    let notices = agent.notices();
    for notice in notices.iter().skip(shown) {
        eprintln!("ebpf-profiler: notice: {notice}");
    }
    notices.len().max(shown)
}

fn write_output(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    if path == Path::new("-") {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        write(&mut lock).context("writing to standard output")
    } else {
        let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        write(&mut out).with_context(|| format!("writing {}", path.display()))
    }
}

fn print_summary(agent: &Agent, folded: &FoldedStacks, elapsed: Duration, top: usize, export: Option<&ExporterStats>) {
    let s = agent.stats();
    eprintln!("ebpf-profiler: summary after {:.1}s", elapsed.as_secs_f64());
    eprintln!("  samples taken:     {}", s.samples + s.samples_lost);
    eprintln!(
        "  samples lost:      {} (ring buffer full: {}, reporter behind: {})",
        s.samples_lost + s.samples_dropped,
        s.samples_lost,
        s.samples_dropped
    );
    let stacks = s.user_stacks_complete + s.user_stacks_truncated;
    if stacks > 0 {
        eprintln!(
            "  user stacks:       {:.1}% unwound to the thread's root ({} of {}; {} frames)",
            100.0 * s.user_stacks_complete as f64 / stacks as f64,
            s.user_stacks_complete,
            stacks,
            s.user_frames
        );
    }
    // Every reason a stack ended early, as the BPF unwinder counted it.
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&s) {
        let stops: Vec<String> = fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("unwind_stopped_")?, v.as_u64()?)))
            .filter(|(reason, n)| *n > 0 && *reason != "root")
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        if !stops.is_empty() {
            eprintln!("  unwind stops:      {}", stops.join(", "));
        }
    }
    if s.python_frames > 0 || s.python_unsupported > 0 {
        eprintln!(
            "  python:            {} frames ({} named), {} unsupported interpreters (profiled as native)",
            s.python_frames, s.python_frames_named, s.python_unsupported
        );
    }
    if s.bpf_runs > 0 {
        eprintln!("  BPF cost:          {:.1} µs per program run", s.bpf_run_time_ns as f64 / s.bpf_runs as f64 / 1e3);
    }
    // Gauges such as loaded files are back to zero after stop; show totals.
    eprintln!(
        "  processes:         {} seen, {} exited, {} not loaded (process limit)",
        s.processes_seen, s.processes_exited, s.processes_rejected
    );
    eprintln!(
        "  files:             {} analysed in {} ms, {} failed, {} over the size limits",
        s.files_analysed, s.unwind_analyse_ms, s.files_failed, s.files_rejected
    );
    eprintln!("  unused tables:     {} files evicted (budget), {} kept at stop", s.files_evicted, s.files_unused);
    eprintln!(
        "  process events:    {} received, {} merged per pid, {} loads cancelled by an exit",
        s.process_events_received, s.process_events_coalesced, s.process_events_cancelled
    );
    if s.process_loads_timed > 0 {
        eprintln!(
            "  load latency:      p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} processes (event to unwind tables ready)",
            s.process_load_p50_us as f64 / 1e3,
            s.process_load_p99_us as f64 / 1e3,
            s.process_load_max_us as f64 / 1e3,
            s.process_loads_timed
        );
    }
    if s.process_events_lost + s.process_events_dropped + s.process_events_malformed + s.unwind_load_errors > 0 {
        eprintln!(
            "  problems:          {} process events lost (ring buffer full), {} dropped (queue full), {} malformed, \
             {} unwind map load errors",
            s.process_events_lost, s.process_events_dropped, s.process_events_malformed, s.unwind_load_errors
        );
    }
    if let Some(e) = export {
        eprintln!(
            "  OTLP export:       {} requests sent ({} bytes), {} dropped, {} failed attempts{}",
            e.requests_sent,
            e.bytes_sent,
            e.dropped(),
            e.attempts_failed,
            e.last_error.as_ref().map(|m| format!("; last error: {m}")).unwrap_or_default()
        );
    }
    if !folded.is_empty() {
        eprintln!("  distinct stacks:   {}", folded.len());
    }
    if folded.dropped() > 0 {
        eprintln!("  stacks not kept:   {} (distinct stack limit)", folded.dropped());
    }
    if s.kernel_stack_errors > 0 {
        eprintln!("  kernel stack read errors: {}", s.kernel_stack_errors);
    }
    if top > 0 && !folded.is_empty() {
        eprintln!("  top stacks:");
        let total = folded.total().max(1);
        for (line, count) in folded.top(top) {
            let shown: String = if line.chars().count() > 160 {
                let tail: String = line.chars().rev().take(157).collect::<Vec<_>>().into_iter().rev().collect();
                format!("...{tail}")
            } else {
                line.to_string()
            };
            eprintln!("    {:5.1}% {count:>7}  {shown}", 100.0 * count as f64 / total as f64);
        }
    }
}
