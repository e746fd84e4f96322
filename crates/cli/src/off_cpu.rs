//! The local off-CPU profile (`--off-cpu`): the off-CPU traces, in the
//! run's `--format`, written apart from the on-CPU profile (their weights
//! are time, not samples): to `--off-cpu-output`, or for folded stacks on
//! standard output after the on-CPU ones under an `[off-cpu]` root frame.

use crate::args::{Args, Format};
use crate::output::Output;
use anyhow::{bail, Result};
use profiler_agent::TraceSink;
use profiler_report::folded::FoldedStacks;
use profiler_report::pprof::PprofBuilder;
use profiler_trace::Trace;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The root frame of off-CPU stacks written to standard output with the
/// on-CPU ones.
const OFF_CPU_ROOT: &str = "[off-cpu]";

/// The off-CPU profile being built, and where it goes.
pub struct OffCpuOutput {
    format: Format,
    folded: Arc<Mutex<FoldedStacks>>,
    pprof: Arc<Mutex<Option<PprofBuilder>>>,
    /// `None`: standard output, after the on-CPU profile (folded only).
    output: Option<Output>,
}

/// Feeds the off-CPU traces to the off-CPU profile.
struct OffCpuSink {
    folded: Arc<Mutex<FoldedStacks>>,
    pprof: Arc<Mutex<Option<PprofBuilder>>>,
}

impl TraceSink for OffCpuSink {
    fn on_trace(&mut self, trace: &Trace) {
        let Some(ns) = trace.off_cpu_ns else { return };
        self.folded.lock().unwrap_or_else(|p| p.into_inner()).add_weighted(trace, micros(ns));
        if let Some(b) = self.pprof.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            b.add(trace);
        }
    }
}

/// Folded off-CPU weights: microseconds, rounded up (a wait is never 0).
fn micros(ns: u64) -> u64 {
    ns.div_ceil(1000)
}

impl OffCpuOutput {
    /// The off-CPU output of the run, opened now (a path that cannot be
    /// written fails before sampling); `None` when off-CPU profiling is
    /// off or there is no local output.
    pub fn open(args: &Args, start_unix_ns: u64) -> Result<Option<OffCpuOutput>> {
        let Some(format) = args.local_format() else { return Ok(None) };
        if args.off_cpu_threshold() == 0.0 {
            return Ok(None);
        }
        let output = match args.off_cpu_path() {
            Some(path) => Some(Output::open(&path)?),
            None if format == Format::Folded => None,
            None => bail!("--off-cpu with --format {format:?} on standard output needs --off-cpu-output PATH"),
        };
        let pprof = (format == Format::Pprof).then(|| PprofBuilder::off_cpu(start_unix_ns));
        Ok(Some(OffCpuOutput {
            format,
            folded: Arc::new(Mutex::new(FoldedStacks::default())),
            pprof: Arc::new(Mutex::new(pprof)),
            output,
        }))
    }

    /// The sink that builds it.
    pub fn sink(&self) -> Box<dyn TraceSink> {
        Box::new(OffCpuSink { folded: self.folded.clone(), pprof: self.pprof.clone() })
    }

    /// Writes the profile; `title` names the run (SVG).
    pub fn write(&mut self, title: &str, end_unix_ns: u64) -> Result<()> {
        let folded = self.folded.lock().unwrap_or_else(|p| p.into_inner());
        let Some(output) = self.output.as_mut() else {
            // Standard output, after the on-CPU stacks.
            let mut stdout = Output::Stdout;
            return stdout.write(|w| write_rooted(&folded, w));
        };
        match self.format {
            Format::Folded => output.write(|w| folded.write_to(w)),
            Format::Svg => {
                output.write(|w| profiler_report::flamegraph::write_svg(&folded, &format!("{title}, off-CPU (µs)"), w))
            }
            Format::Pprof => {
                let builder = self.pprof.lock().unwrap_or_else(|p| p.into_inner()).take();
                match builder {
                    Some(b) => {
                        let profile = b.finish(end_unix_ns);
                        output.write(|w| profiler_report::pprof::write_gzipped(&profile, w))
                    }
                    None => Ok(()),
                }
            }
        }
    }
}

/// Folded lines under the `[off-cpu]` root frame.
fn write_rooted(folded: &FoldedStacks, out: &mut dyn Write) -> std::io::Result<()> {
    for line in folded.lines() {
        writeln!(out, "{OFF_CPU_ROOT};{line}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_trace::{Pid, ProcessInfo, Tid};

    fn trace(off_cpu_ns: Option<u64>) -> Trace {
        Trace {
            process: Arc::new(ProcessInfo {
                pid: Pid(1),
                executable_path: "/bin/w".into(),
                executable_name: "w".into(),
                container_id: None,
                service_name: "w".into(),
                env_vars: vec![],
            }),
            tid: Tid(1),
            thread_name: "w".into(),
            cpu: 0,
            timestamp_unix_ns: 0,
            frames: vec![],
            off_cpu_ns,
            labels: vec![],
        }
    }

    #[test]
    fn only_off_cpu_traces_weighted_in_microseconds() {
        let folded = Arc::new(Mutex::new(FoldedStacks::default()));
        let mut sink = OffCpuSink { folded: folded.clone(), pprof: Arc::new(Mutex::new(None)) };
        sink.on_trace(&trace(None));
        sink.on_trace(&trace(Some(100_000_000)));
        sink.on_trace(&trace(Some(1)));
        let folded = folded.lock().unwrap();
        assert_eq!(folded.lines(), vec!["w 100001".to_string()]);
        let mut out = Vec::new();
        write_rooted(&folded, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[off-cpu];w 100001\n");
    }
}
