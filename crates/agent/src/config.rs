//! The agent's configuration, shared by the CLI flags and the JSON the C
//! ABI receives.

use serde::Deserialize;
use std::time::Duration;

/// Everything [`crate::Agent::start`] needs. JSON field names are the
/// snake_case field names; unknown fields are rejected so that a
/// mismatch between the Go receiver and this crate shows at once.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Sampling frequency per CPU. Default 20.
    pub samples_per_second: u32,
    /// Length of one reporting interval in milliseconds. Default 5000.
    pub reporter_interval_ms: u64,
    /// Profile only these processes (and their threads); empty = all.
    pub pids: Vec<u32>,
    /// Produce serialized OTLP batches for [`crate::Agent::next_otlp_batch`].
    pub otlp_batches: bool,
    /// How many OTLP batches may wait to be pulled before the oldest is
    /// dropped (and counted). Default 16.
    pub batch_queue_capacity: usize,
    /// Name native frames on the host (ELF symbols, DWARF). Default true.
    pub symbolize_native: bool,
    /// MiB the unwind tables of files no process maps any more may take
    /// (their deltas in the kernel, 4 bytes each, and their state in the
    /// agent) before the least recently used are unloaded: a program
    /// started again finds its tables loaded. Default 64; 0 unloads a
    /// file when its last process exits.
    pub unused_tables_budget_mib: u64,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            samples_per_second: 20,
            reporter_interval_ms: 5000,
            pids: Vec::new(),
            otlp_batches: false,
            batch_queue_capacity: 16,
            symbolize_native: true,
            unused_tables_budget_mib: 64,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `samples_per_second` must be in 1..=MAX.
    #[error("samples_per_second must be between 1 and {max}, got {got}")]
    SamplesPerSecond {
        /// The value given.
        got: u32,
        /// The largest accepted value.
        max: u32,
    },
    /// `reporter_interval_ms` must be at least MIN.
    #[error("reporter_interval must be at least {min_ms} ms, got {got_ms} ms")]
    ReporterInterval {
        /// The value given.
        got_ms: u64,
        /// The smallest accepted value.
        min_ms: u64,
    },
    /// `batch_queue_capacity` must be at least 1.
    #[error("batch_queue_capacity must be at least 1")]
    BatchQueueCapacity,
    /// `unused_tables_budget_mib` must be at most MAX.
    #[error("unused_tables_budget_mib must be at most {max}, got {got}")]
    UnusedTablesBudget {
        /// The value given.
        got: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// The JSON text could not be parsed.
    #[error("invalid configuration JSON: {0}")]
    Json(String),
}

/// Highest sampling frequency accepted (the kernel's default
/// `perf_event_max_sample_rate` is 100000; beyond a few kHz the profiler
/// itself dominates).
pub const MAX_SAMPLES_PER_SECOND: u32 = 10_000;
/// Largest budget of unused unwind tables accepted, MiB.
pub const MAX_UNUSED_TABLES_BUDGET_MIB: u64 = 4096;
/// Shortest reporting interval accepted.
pub const MIN_REPORTER_INTERVAL_MS: u64 = 100;

impl AgentConfig {
    /// Parses the JSON form (as the C ABI receives it).
    pub fn from_json(text: &str) -> Result<AgentConfig, ConfigError> {
        let config: AgentConfig = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// The reporting interval.
    pub fn reporter_interval(&self) -> Duration {
        Duration::from_millis(self.reporter_interval_ms)
    }

    /// Checks every value's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.samples_per_second == 0 || self.samples_per_second > MAX_SAMPLES_PER_SECOND {
            return Err(ConfigError::SamplesPerSecond { got: self.samples_per_second, max: MAX_SAMPLES_PER_SECOND });
        }
        if self.reporter_interval_ms < MIN_REPORTER_INTERVAL_MS {
            return Err(ConfigError::ReporterInterval {
                got_ms: self.reporter_interval_ms,
                min_ms: MIN_REPORTER_INTERVAL_MS,
            });
        }
        if self.batch_queue_capacity == 0 {
            return Err(ConfigError::BatchQueueCapacity);
        }
        if self.unused_tables_budget_mib > MAX_UNUSED_TABLES_BUDGET_MIB {
            return Err(ConfigError::UnusedTablesBudget {
                got: self.unused_tables_budget_mib,
                max: MAX_UNUSED_TABLES_BUDGET_MIB,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_defaults_and_overrides() {
        let c = AgentConfig::from_json(r#"{"samples_per_second": 99, "pids": [1, 2]}"#).unwrap();
        assert_eq!(c.samples_per_second, 99);
        assert_eq!(c.pids, vec![1, 2]);
        assert_eq!(c.reporter_interval_ms, 5000);
        assert!(c.symbolize_native);
    }

    #[test]
    fn json_rejects_unknown_fields_and_bad_ranges() {
        assert!(matches!(
            AgentConfig::from_json(r#"{"sample_per_second": 99}"#),
            Err(ConfigError::Json(m)) if m.contains("unknown field")
        ));
        assert_eq!(
            AgentConfig::from_json(r#"{"samples_per_second": 0}"#),
            Err(ConfigError::SamplesPerSecond { got: 0, max: MAX_SAMPLES_PER_SECOND })
        );
        assert_eq!(
            AgentConfig::from_json(r#"{"reporter_interval_ms": 5}"#),
            Err(ConfigError::ReporterInterval { got_ms: 5, min_ms: MIN_REPORTER_INTERVAL_MS })
        );
        assert_eq!(
            AgentConfig::from_json(r#"{"unused_tables_budget_mib": 4097}"#),
            Err(ConfigError::UnusedTablesBudget { got: 4097, max: MAX_UNUSED_TABLES_BUDGET_MIB })
        );
        assert_eq!(AgentConfig::from_json(r#"{"unused_tables_budget_mib": 0}"#).unwrap().unused_tables_budget_mib, 0);
    }
}
