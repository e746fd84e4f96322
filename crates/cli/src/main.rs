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

use anyhow::{Context, Result};
use args::{Args, Format};
use export_sink::ExportSink;
use off_cpu::OffCpuOutput;
use output::Output;
use profiler_agent::{Agent, AgentConfig, TraceSink, UnwindStop};
use profiler_export::{BackendEvent, BackendObserver, ExporterConfig, ExporterStats, OtlpExporter};
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
    let args = Args::parse_from_env();
    if let Err(e) = run(&args) {
        say!("ebpf-profiler: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
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
    let exporter = match &args.collection_agent {
        Some(endpoint) => {
            let config = ExporterConfig::new(endpoint.clone(), !args.disable_tls, args.export_buffer as usize);
            let exporter = OtlpExporter::start_with_observer(config, Some(backend_warnings(endpoint.clone())))
                .context("starting the OTLP exporter")?;
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
    print_summary(&agent, &folded, elapsed, args.summary_top, export_stats.as_ref());
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

/// Why export requests were dropped, e.g. ` (buffer full 3, refused
/// InvalidArgument 1)`; empty when none were.
fn export_drop_reasons(e: &ExporterStats) -> String {
    let mut reasons: Vec<String> = [
        ("buffer full", e.dropped_buffer_full),
        ("retries exhausted", e.dropped_retries_exhausted),
        ("unsent at exit", e.dropped_shutdown),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(reason, n)| format!("{reason} {n}"))
    .collect();
    reasons.extend(e.dropped_rejected_by_code.iter().map(|(code, n)| format!("refused {code} {n}")));
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join(", "))
    }
}

fn print_summary(agent: &Agent, folded: &FoldedStacks, elapsed: Duration, top: usize, export: Option<&ExporterStats>) {
    let s = agent.stats();
    say!("ebpf-profiler: summary after {:.1}s of sampling", elapsed.as_secs_f64());
    if s.off_cpu_sampled > 0 {
        say!("  samples taken:     {} (of which {} off-CPU stacks)", s.samples + s.samples_lost, s.off_cpu_sampled);
    } else {
        say!("  samples taken:     {}", s.samples + s.samples_lost);
    }
    say!(
        "  samples lost:      {} (ring buffer full: {}, reporter behind: {})",
        s.samples_lost + s.samples_dropped,
        s.samples_lost,
        s.samples_dropped
    );
    let stacks = s.user_stacks_complete + s.user_stacks_truncated;
    if stacks > 0 {
        say!(
            "  user stacks:       {:.1}% unwound to the thread's root ({} of {}; {} frames)",
            100.0 * s.user_stacks_complete as f64 / stacks as f64,
            s.user_stacks_complete,
            stacks,
            s.user_frames
        );
    }
    // Every reason a stack ended early, as the BPF unwinder counted it.
    let stops: Vec<String> = s
        .unwind_stopped
        .iter()
        .filter(|&(reason, n)| n > 0 && reason != UnwindStop::Root)
        .map(|(reason, n)| format!("{} {n}", reason.as_str()))
        .collect();
    if !stops.is_empty() {
        say!("  unwind stops:      {}", stops.join(", "));
    }
    if s.late_unwind_copies + s.late_unwind_copies_skipped + s.late_unwind_copies_failed > 0 {
        let stops: Vec<String> = s
            .late_unwind_stops
            .iter()
            .filter(|(reason, _)| *reason != "root")
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        eprintln!(
            "  new processes:     {} stacks copied ({} KiB), {} unwound in user space to the root, {} stopped early{}; \
             not copied: {} over budget, {} unreadable; given up: {} queue full, {} not loaded in time; \
             {} table lookups in the maps ({} cached)",
            s.late_unwind_copies,
            s.late_unwind_copy_bytes / 1024,
            s.late_unwind_complete,
            s.late_unwind_truncated,
            if stops.is_empty() { String::new() } else { format!(" ({})", stops.join(", ")) },
            s.late_unwind_copies_skipped,
            s.late_unwind_copies_failed,
            s.late_unwind_dropped_queue_full,
            s.late_unwind_timed_out,
            s.late_unwind_map_lookups,
            s.late_unwind_cached_lookups
        );
    }
    for (runtime, _) in &s.runtimes.0 {
        let (frames, unsupported) = (s.runtimes.get(runtime, "frames"), s.runtimes.get(runtime, "unsupported"));
        if frames > 0 || unsupported > 0 {
            say!(
                "  {:<19}{} frames ({} named), {} unsupported builds (profiled as native)",
                format!("{runtime}:"),
                frames,
                s.runtimes.get(runtime, "frames_named"),
                unsupported
            );
        }
    }
    if s.naming_processes_over + s.attach_processes_over > 0 {
        say!(
            "  over budget:       {} processes whose runtime memory cost too much to read (frames left unnamed; \
             {} reads refused naming, {} attaching)",
            s.naming_processes_over + s.attach_processes_over,
            s.naming_reads_refused,
            s.attach_reads_refused
        );
    }
    if s.naming_failures_skipped > 0 {
        say!(
            "  failed reads:      {} reads to name frames not tried again (the same object failed less than 10 s \
             before)",
            s.naming_failures_skipped
        );
    }
    if s.samples_dropped_at_stop > 0 {
        say!("  at stop:           {} queued samples dropped to stop in time", s.samples_dropped_at_stop);
    }
    if s.off_cpu_switches > 0 {
        say!(
            "  off-CPU:           {} switches seen, {} sampled, {} traces; {} stacks dropped, {} joins missed, \
             {} ends lost{}",
            s.off_cpu_switches,
            s.off_cpu_sampled,
            s.off_cpu_joined,
            s.off_cpu_stacks_dropped,
            s.off_cpu_joins_missed,
            s.off_cpu_ends_lost,
            if s.off_cpu_bpf_runs > 0 {
                format!("; BPF {:.2} µs per switch", s.off_cpu_bpf_run_time_ns as f64 / s.off_cpu_bpf_runs as f64 / 1e3)
            } else {
                String::new()
            }
        );
    }
    if s.bpf_runs > 0 {
        say!("  BPF cost:          {:.1} µs per program run", s.bpf_run_time_ns as f64 / s.bpf_runs as f64 / 1e3);
    }
    // Gauges such as loaded files are back to zero after stop; show totals.
    say!(
        "  processes:         {} seen, {} exited, {} not loaded (process limit)",
        s.processes_seen,
        s.processes_exited,
        s.processes_rejected
    );
    say!(
        "  process loads:     {} maps reads ({} unchanged); after exec: {} gone before their load, {} over the preload budget",
        s.maps_reads,
        s.maps_unchanged,
        s.exec_preloads_gone,
        s.exec_preloads_skipped
    );
    say!(
        "  manager CPU:       {:.0} ms loads asked by samples, {:.0} ms execs, {:.0} ms exits, {:.0} ms scheduled loads, {:.0} ms files, {:.0} ms housekeeping; {} wake-ups",
        s.manager_cpu_loads_us as f64 / 1e3,
        s.manager_cpu_execs_us as f64 / 1e3,
        s.manager_cpu_exits_us as f64 / 1e3,
        s.manager_cpu_scheduled_us as f64 / 1e3,
        s.manager_cpu_files_us as f64 / 1e3,
        s.manager_cpu_housekeeping_us as f64 / 1e3,
        s.manager_wakeups
    );
    say!(
        "  files:             {} analysed in {} ms, {} failed, {} over the size limits",
        s.files_analysed,
        s.unwind_analyse_ms,
        s.files_failed,
        s.files_rejected
    );
    let refused = s.files_refused_not_regular
        + s.files_refused_too_large
        + s.files_refused_mismatch
        + s.files_refused_escape
        + s.files_refused_no_openat2;
    if refused + s.file_id_collisions > 0 {
        say!(
            "  files refused:     {} not regular, {} too large, {} not the mapped file, {} leaving their root, \
             {} without openat2; {} FileId collisions",
            s.files_refused_not_regular,
            s.files_refused_too_large,
            s.files_refused_mismatch,
            s.files_refused_escape,
            s.files_refused_no_openat2,
            s.file_id_collisions
        );
    }
    say!("  unused tables:     {} files evicted (budget), {} kept at stop", s.files_evicted, s.files_unused);
    say!(
        "  symbolizer:        {} loads in {} ms, {} files evicted (budget; {} cold), {} loaded again, {} DWARF units parsed, \
         {} DWARF units dropped, {} given up (budget), {} parsed again; budget {} MiB (raised {} times); addresses {} \
         cached, {} looked up",
        s.symbolizer_loads,
        s.symbolizer_load_ms_total,
        s.symbolizer_file_evictions,
        s.symbolizer_cold_files_dropped,
        s.symbolizer_reloads,
        s.symbolizer_dwarf_units_parsed,
        s.symbolizer_dwarf_units_dropped,
        s.symbolizer_dwarf_units_shed,
        s.symbolizer_dwarf_units_reparsed,
        s.symbolizer_budget_bytes >> 20,
        s.symbolizer_budget_raises,
        s.symbolizer_address_hits,
        s.symbolizer_address_misses
    );
    say!(
        "  kernel symbols:    read again {} times; {} checks found the BPF programs unchanged",
        s.kernel_symbols_reloads,
        s.kernel_symbols_bpf_checks
    );
    say!(
        "  process events:    {} received, {} merged per pid, {} loads cancelled by an exit",
        s.process_events_received,
        s.process_events_coalesced,
        s.process_events_cancelled
    );
    if s.process_loads_timed > 0 {
        say!(
            "  load latency:      p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} processes (event to unwind tables ready)",
            s.process_load_p50_us as f64 / 1e3,
            s.process_load_p99_us as f64 / 1e3,
            s.process_load_max_us as f64 / 1e3,
            s.process_loads_timed
        );
    }
    if s.process_events_lost + s.process_events_dropped + s.process_events_malformed + s.unwind_load_errors > 0 {
        say!(
            "  problems:          {} process events lost (ring buffer full), {} dropped (queue full), {} malformed, \
             {} unwind map load errors",
            s.process_events_lost,
            s.process_events_dropped,
            s.process_events_malformed,
            s.unwind_load_errors
        );
    }
    if let Some(e) = export {
        say!(
            "  OTLP export:       {} requests sent ({} bytes), {} dropped{}, {} failed attempts{}",
            e.requests_sent,
            e.bytes_sent,
            e.dropped(),
            export_drop_reasons(e),
            e.attempts_failed,
            e.last_error.as_ref().map(|m| format!("; last error: {m}")).unwrap_or_default()
        );
    }
    if !folded.is_empty() {
        say!("  distinct stacks:   {}", folded.len());
    }
    if folded.dropped() > 0 {
        say!("  stacks not kept:   {} (distinct stack limit)", folded.dropped());
    }
    if s.samples_other_pid_namespace > 0 {
        say!("  samples outside the agent's PID namespace (not profiled): {}", s.samples_other_pid_namespace);
    }
    if s.kernel_stack_errors > 0 {
        say!("  kernel stack read errors: {}", s.kernel_stack_errors);
    }
    if top > 0 && !folded.is_empty() {
        say!("  top stacks:");
        let total = folded.total().max(1);
        for (line, count) in folded.top(top) {
            let shown: String = if line.chars().count() > 160 {
                let tail: String = line.chars().rev().take(157).collect::<Vec<_>>().into_iter().rev().collect();
                format!("...{tail}")
            } else {
                line.to_string()
            };
            say!("    {:5.1}% {count:>7}  {shown}", 100.0 * count as f64 / total as f64);
        }
    }
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
        BackendEvent::Reachable { down_for, dropped } => say!(
            "ebpf-profiler: the OTLP backend {endpoint} is reached again after {}s ({dropped} request(s) dropped meanwhile)",
            down_for.as_secs()
        ),
        _ => {}
    }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_drops_are_told_by_reason() {
        let mut e = ExporterStats::default();
        assert_eq!(export_drop_reasons(&e), "");
        e.dropped_buffer_full = 3;
        e.dropped_shutdown = 1;
        e.dropped_rejected = 2;
        e.dropped_rejected_by_code.insert("InvalidArgument".into(), 2);
        assert_eq!(export_drop_reasons(&e), " (buffer full 3, unsent at exit 1, refused InvalidArgument 2)");
    }
}
