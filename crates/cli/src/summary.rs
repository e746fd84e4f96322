//! The summary the CLI prints when it stops: by default what someone who
//! asked for a profile needs (samples, completeness, where the output
//! went, problems, the top stacks); the agent's internals (symbolizer,
//! process manager, off-CPU bookkeeping) with `--verbose`.

use profiler_agent::{Stats, UnwindStop};
use profiler_export::ExporterStats;
use profiler_report::folded::FoldedStacks;
use std::time::Duration;

/// What the summary tells besides the agent's counters.
pub struct SummaryInputs<'a> {
    pub folded: &'a FoldedStacks,
    pub elapsed: Duration,
    /// How many stacks to list.
    pub top: usize,
    pub export: Option<&'a ExporterStats>,
    /// Where the local output was written (`None`: standard output or none).
    pub output: Option<String>,
    pub verbose: bool,
}

/// The late walks through HotSpot's frames, for the "new processes"
/// line: empty without any.
fn hotspot_late_walks(s: &Stats) -> String {
    if s.late_unwind_hotspot_samples == 0 {
        return String::new();
    }
    let ended: u64 = s.late_unwind_hotspot_stops.values().sum();
    let why: Vec<String> = s.late_unwind_hotspot_stops.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
    format!(
        "; HotSpot: {} stacks through its frames, {} Java frames, {} ended there{}{}",
        s.late_unwind_hotspot_samples,
        s.late_unwind_hotspot_frames,
        ended,
        if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) },
        // The V8 part counts them when there is one.
        if s.late_unwind_v8_samples == 0 {
            format!(", {} memory reads", s.late_unwind_memory_reads)
        } else {
            String::new()
        }
    )
}

/// The summary's lines.
pub fn summary_lines(s: &Stats, inputs: &SummaryInputs) -> Vec<String> {
    let SummaryInputs { folded, elapsed, top, export, ref output, verbose } = *inputs;
    let mut out = Vec::new();
    macro_rules! line {
        ($($arg:tt)*) => { out.push(format!($($arg)*)) };
    }
    line!("ebpf-profiler: summary after {:.1}s of sampling", elapsed.as_secs_f64());
    if s.off_cpu_sampled > 0 {
        line!("  samples taken:     {} (of which {} off-CPU stacks)", s.samples + s.samples_lost, s.off_cpu_sampled);
    } else {
        line!("  samples taken:     {}", s.samples + s.samples_lost);
    }
    line!(
        "  samples lost:      {} (ring buffer full: {}, reporter behind: {})",
        s.samples_lost + s.samples_dropped,
        s.samples_lost,
        s.samples_dropped
    );
    let stacks = s.user_stacks_complete + s.user_stacks_truncated;
    if stacks > 0 {
        line!(
            "  user stacks:       {:.1}% unwound to the thread's root ({} of {}; {} frames)",
            100.0 * s.user_stacks_complete as f64 / stacks as f64,
            s.user_stacks_complete,
            stacks,
            s.user_frames
        );
    }
    if s.interpreted_frames_named_after_exit > 0 {
        line!(
            "  named after exit:  {} interpreted frames of processes gone before their samples were processed, \
             named as in their earlier samples",
            s.interpreted_frames_named_after_exit
        );
    }
    for (runtime, _) in &s.runtimes.0 {
        let (frames, unsupported) = (s.runtimes.get(runtime, "frames"), s.runtimes.get(runtime, "unsupported"));
        if frames > 0 || unsupported > 0 {
            line!(
                "  {:<19}{} frames ({} named), {} unsupported builds (profiled as native)",
                format!("{runtime}:"),
                frames,
                s.runtimes.get(runtime, "frames_named"),
                unsupported
            );
        }
    }
    if s.naming_processes_over + s.attach_processes_over > 0 {
        line!(
            "  over budget:       {} processes whose runtime memory cost too much to read (frames left unnamed; \
             {} reads refused naming, {} attaching; {} overdrafts naming, {} attaching)",
            s.naming_processes_over + s.attach_processes_over,
            s.naming_reads_refused,
            s.attach_reads_refused,
            s.naming_overdrafts,
            s.attach_overdrafts
        );
    }
    if s.naming_failures_skipped > 0 {
        line!(
            "  failed reads:      {} reads to name frames not tried again (the same object failed moments before)",
            s.naming_failures_skipped
        );
    }
    if s.samples_dropped_at_stop > 0 {
        line!("  at stop:           {} queued samples dropped to stop in time", s.samples_dropped_at_stop);
    }
    let refused = s.files_refused_not_regular
        + s.files_refused_too_large
        + s.files_refused_mismatch
        + s.files_refused_escape
        + s.files_refused_no_openat2;
    if refused + s.file_id_collisions > 0 {
        line!(
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
    if s.process_events_lost + s.process_events_dropped + s.process_events_malformed + s.unwind_load_errors > 0 {
        line!(
            "  problems:          {} process events lost (ring buffer full), {} dropped (queue full), {} malformed, \
             {} unwind map load errors",
            s.process_events_lost,
            s.process_events_dropped,
            s.process_events_malformed,
            s.unwind_load_errors
        );
    }
    if let Some(e) = export {
        line!(
            "  OTLP export:       {} requests sent ({} bytes), {} dropped{}, {} failed attempts{}",
            e.requests_sent,
            e.bytes_sent,
            e.dropped(),
            export_drop_reasons(e),
            e.attempts_failed,
            e.last_error.as_ref().map(|m| format!("; last error: {m}")).unwrap_or_default()
        );
    }
    if let Some(path) = output {
        line!("  output:            {path}");
    }
    if !folded.is_empty() {
        line!("  distinct stacks:   {}", folded.len());
    }
    if folded.dropped() > 0 {
        line!("  stacks not kept:   {} (distinct stack limit)", folded.dropped());
    }
    if s.samples_other_pid_namespace > 0 {
        line!("  samples outside the agent's PID namespace (not profiled): {}", s.samples_other_pid_namespace);
    }
    if s.kernel_stack_errors > 0 {
        line!("  kernel stack read errors: {}", s.kernel_stack_errors);
    }
    if top > 0 && !folded.is_empty() {
        line!("  top stacks:");
        let total = folded.total().max(1);
        for (line, count) in folded.top(top) {
            let shown: String = if line.chars().count() > 160 {
                let tail: String = line.chars().rev().take(157).collect::<Vec<_>>().into_iter().rev().collect();
                format!("...{tail}")
            } else {
                line.to_string()
            };
            line!("    {:5.1}% {count:>7}  {shown}", 100.0 * count as f64 / total as f64);
        }
    }
    if verbose {
        // Every reason a stack ended early, as the BPF unwinder counted it.
        let stops: Vec<String> = s
            .unwind_stopped
            .iter()
            .filter(|&(reason, n)| n > 0 && reason != UnwindStop::Root)
            .map(|(reason, n)| format!("{} {n}", reason.as_str()))
            .collect();
        if !stops.is_empty() {
            line!("  unwind stops:      {}", stops.join(", "));
        }
        // Each runtime's own counters (why its frames stopped or how they
        // were unwound), for the runtimes that recorded frames.
        for (runtime, counters) in &s.runtimes.0 {
            if s.runtimes.get(runtime, "frames") == 0 {
                continue;
            }
            let shown: Vec<String> =
                counters.iter().filter(|&&(_, n)| n > 0).map(|(name, n)| format!("{name} {n}")).collect();
            line!("  {:<19}{}", format!("{runtime} counters:"), shown.join(", "));
        }
        if s.late_unwind_copies + s.late_unwind_copies_skipped + s.late_unwind_copies_failed > 0 {
            let stops: Vec<String> = s
                .late_unwind_stops
                .iter()
                .filter(|(reason, _)| *reason != "root")
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            line!(
                "  new processes:     {} stacks copied ({} KiB), {} unwound in user space to the root, {} stopped early{}; \
                 not copied: {} over budget, {} unreadable; given up: {} queue full, {} not loaded in time; \
                 {} table lookups in the maps ({} cached), {} asking whether a process was loaded{}{}",
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
                s.late_unwind_cached_lookups,
                s.late_unwind_readiness_lookups,
                if s.late_unwind_v8_samples > 0 {
                    format!(
                        "; V8: {} stacks through its frames, {} JavaScript frames, {} ended there, {} heap reads",
                        s.late_unwind_v8_samples,
                        s.late_unwind_v8_frames,
                        s.late_unwind_v8_stops,
                        s.late_unwind_memory_reads
                    )
                } else {
                    String::new()
                },
                hotspot_late_walks(s)
            );
        }
        if s.names_waited > 0 {
            line!(
                "  names waited for:  {} stacks held while their files loaded, {} frames named then; \
                 went on unnamed: {} past the wait, {} wait full",
                s.names_waited,
                s.names_waited_frames_named,
                s.names_wait_timed_out,
                s.names_wait_dropped_full
            );
        }
        if s.off_cpu_switches > 0 {
            line!(
                "  off-CPU:           {} switches seen, {} sampled, {} traces; {} stacks dropped, {} joins missed, \
                 {} ends lost{}",
                s.off_cpu_switches,
                s.off_cpu_sampled,
                s.off_cpu_joined,
                s.off_cpu_stacks_dropped,
                s.off_cpu_joins_missed,
                s.off_cpu_ends_lost,
                if s.off_cpu_bpf_runs > 0 {
                    format!(
                        "; BPF {:.2} µs per switch",
                        s.off_cpu_bpf_run_time_ns as f64 / s.off_cpu_bpf_runs as f64 / 1e3
                    )
                } else {
                    String::new()
                }
            );
        }
        if s.bpf_runs > 0 {
            line!("  BPF cost:          {:.1} µs per program run", s.bpf_run_time_ns as f64 / s.bpf_runs as f64 / 1e3);
        }
        // Gauges such as loaded files are back to zero after stop; show totals.
        line!(
            "  processes:         {} seen, {} exited, {} not loaded (process limit)",
            s.processes_seen,
            s.processes_exited,
            s.processes_rejected
        );
        line!(
            "  process loads:     {} maps reads ({} unchanged); after exec: {} gone before their load, {} over the preload budget",
            s.maps_reads,
            s.maps_unchanged,
            s.exec_preloads_gone,
            s.exec_preloads_skipped
        );
        line!(
            "  manager CPU:       {:.0} ms loads asked by samples, {:.0} ms execs, {:.0} ms exits, {:.0} ms scheduled loads, {:.0} ms files, {:.0} ms housekeeping; {} wake-ups",
            s.manager_cpu_loads_us as f64 / 1e3,
            s.manager_cpu_execs_us as f64 / 1e3,
            s.manager_cpu_exits_us as f64 / 1e3,
            s.manager_cpu_scheduled_us as f64 / 1e3,
            s.manager_cpu_files_us as f64 / 1e3,
            s.manager_cpu_housekeeping_us as f64 / 1e3,
            s.manager_wakeups
        );
        line!(
            "  files:             {} analysed in {} ms, {} failed, {} over the size limits",
            s.files_analysed,
            s.unwind_analyse_ms,
            s.files_failed,
            s.files_rejected
        );
        line!("  unused tables:     {} files evicted (budget), {} kept at stop", s.files_evicted, s.files_unused);
        line!(
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
        line!(
            "  kernel symbols:    read again {} times; {} checks found the BPF programs unchanged",
            s.kernel_symbols_reloads,
            s.kernel_symbols_bpf_checks
        );
        line!(
            "  process events:    {} received, {} merged per pid, {} loads cancelled by an exit",
            s.process_events_received,
            s.process_events_coalesced,
            s.process_events_cancelled
        );
        if s.process_loads_timed > 0 {
            line!(
                "  load latency:      p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} processes (event to unwind tables ready)",
                s.process_load_p50_us as f64 / 1e3,
                s.process_load_p99_us as f64 / 1e3,
                s.process_load_max_us as f64 / 1e3,
                s.process_loads_timed
            );
        }
    } else {
        line!("  (the agent's internals: --verbose)");
    }
    out
}

/// Why export requests were dropped, e.g. ` (buffer full 3, refused
/// InvalidArgument 1)`; empty when none were.
pub fn export_drop_reasons(e: &ExporterStats) -> String {
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

    fn lines(s: &Stats, verbose: bool) -> Vec<String> {
        let folded = FoldedStacks::default();
        let inputs = SummaryInputs {
            folded: &folded,
            elapsed: Duration::from_secs(10),
            top: 5,
            export: None,
            output: Some("profile.folded".into()),
            verbose,
        };
        summary_lines(s, &inputs)
    }

    #[test]
    fn the_default_summary_is_short_and_verbose_adds_the_internals() {
        let s = Stats {
            samples: 990,
            samples_lost: 10,
            user_stacks_complete: 900,
            user_stacks_truncated: 100,
            process_events_lost: 2,
            ..Stats::default()
        };
        let short = lines(&s, false);
        let heads: Vec<&str> = short.iter().map(|l| l.split(':').next().unwrap().trim()).collect();
        assert_eq!(
            heads,
            [
                "ebpf-profiler",
                "samples taken",
                "samples lost",
                "user stacks",
                "problems",
                "output",
                "(the agent's internals"
            ]
        );
        assert_eq!(short[1], "  samples taken:     1000");
        assert!(short[3].contains("90.0% unwound"), "{}", short[3]);
        let verbose = lines(&s, true);
        for head in ["symbolizer:", "manager CPU:", "processes:", "kernel symbols:", "process events:"] {
            assert!(verbose.iter().any(|l| l.trim_start().starts_with(head)), "verbose has {head}");
            assert!(!short.iter().any(|l| l.trim_start().starts_with(head)), "short has no {head}");
        }
        assert!(!verbose.iter().any(|l| l.contains("--verbose")));
    }
}
