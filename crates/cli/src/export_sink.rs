//! Sends each reporting interval to an OTLP backend (`-collection-agent`).

use profiler_agent::TraceSink;
use profiler_export::OtlpExporter;
use profiler_report::otlp::{OtlpAggregator, OtlpConfig};
use profiler_trace::Trace;
use std::sync::{Arc, Mutex};

/// Aggregates an interval's traces and hands the request to the exporter,
/// which buffers (bounded) and retries on its own thread: the reporter
/// never waits for the network.
pub struct ExportSink {
    aggregator: OtlpAggregator,
    // Shared with main, which shuts it down at exit (OtlpExporter is Send,
    // not Sync).
    exporter: Arc<Mutex<OtlpExporter>>,
}

impl ExportSink {
    pub fn new(samples_per_second: u32, start_unix_ns: u64, exporter: Arc<Mutex<OtlpExporter>>) -> ExportSink {
        let config = OtlpConfig::new(samples_per_second).with_kernel_build_id(profiler_agent::kernel_build_id());
        ExportSink { aggregator: OtlpAggregator::new(config, start_unix_ns), exporter }
    }
}

impl TraceSink for ExportSink {
    fn on_trace(&mut self, trace: &Trace) {
        self.aggregator.add(trace);
    }

    fn on_interval_end(&mut self, _start_unix_ns: u64, end_unix_ns: u64) {
        if let Some(request) = self.aggregator.flush(end_unix_ns) {
            self.exporter.lock().unwrap_or_else(|p| p.into_inner()).send(request);
        }
    }
}
