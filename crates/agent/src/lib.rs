//! The profiler as a library: [`Agent::start`] loads the BPF programs,
//! starts the reader, process, symbolization and reporting threads, and
//! hands results to the sinks chosen in [`AgentConfig`].
//!
//! Both front ends use only this API: the `ebpf-profiler` CLI and the C ABI
//! in `ffi/` (which pulls serialized OTLP batches with
//! [`Agent::next_otlp_batch`]).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod config;
mod stats;

pub use config::{AgentConfig, ConfigError};
pub use stats::Stats;

use std::time::Duration;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// Not implemented yet (placeholder while the pipeline is wired up).
    #[error("{0} is not implemented yet")]
    Unimplemented(&'static str),
}

/// The answer of [`Agent::next_otlp_batch`].
#[derive(Debug)]
pub enum NextBatch {
    /// One serialized `ExportProfilesServiceRequest` (protobuf bytes).
    Batch(Vec<u8>),
    /// Nothing arrived within the timeout.
    Timeout,
    /// The agent has stopped and every batch has been handed out.
    Stopped,
}

/// A running profiler.
pub struct Agent {
    _private: (),
}

impl Agent {
    /// Validates `config`, loads and attaches the BPF programs and starts
    /// the pipeline threads.
    pub fn start(config: AgentConfig) -> Result<Agent, StartError> {
        config.validate()?;
        Err(StartError::Unimplemented("the agent pipeline"))
    }

    /// Waits up to `timeout` for the next OTLP batch (only when
    /// [`AgentConfig::otlp_batches`] is on).
    pub fn next_otlp_batch(&self, timeout: Duration) -> NextBatch {
        let _ = timeout;
        NextBatch::Stopped
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        Stats::default()
    }

    /// Stops sampling, flushes the last interval to the sinks and joins
    /// the threads. Idempotent.
    pub fn stop(&self) {}
}
