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
    /// For tests: the process manager handles each new-process or exec
    /// event no sooner than this long after it came (a busy manager, made
    /// deterministic). Default 0.
    pub process_load_delay_ms: u64,
    /// Open mapped files through `/proc/PID/map_files` when allowed.
    /// False opens them by path inside the process's root (checked
    /// against the mapping's device and inode), as an agent without
    /// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE does. Default true.
    pub open_via_map_files: bool,
    /// Probabilistic profiling, as the reference agent's
    /// `probabilistic_threshold`: every `probabilistic_interval_ms` a
    /// number in 0..100 is drawn, and sampling runs (on every CPU) for
    /// that interval only when it is below the threshold. 1..=100;
    /// default 100, always on (the feature is off).
    pub probabilistic_threshold: u32,
    /// Length of one probabilistic interval. Default 60000 (the reference
    /// agent accepts 1 to 5 minutes; shorter ones are for tests).
    pub probabilistic_interval_ms: u64,
    /// Names of environment variables reported of each process, as the
    /// resource attributes `process.environment_variable.<name>` (the
    /// reference agent's `include_env_vars`, split at its commas). At
    /// most [`MAX_ENV_VARS`] names of 1 to [`MAX_ENV_VAR_NAME_BYTES`]
    /// bytes, without `=` or NUL. Default none.
    pub include_env_vars: Vec<String>,
    /// Off-CPU profiling, as the reference agent's `off_cpu_threshold`:
    /// the fraction of scheduler switch-outs whose thread's stack is
    /// taken, with the time until it runs again (a second profile,
    /// `off_cpu`/`nanoseconds`). In [0, 1]; default 0, off.
    pub off_cpu_threshold: f64,
    /// Profile only the processes of these containers: ids, or prefixes
    /// of at least 12 hex digits, as found in `/proc/PID/cgroup`
    /// (Docker, containerd, CRI-O, Podman). With `cgroups` and `pids`:
    /// their union. New processes of a chosen one are chosen at their
    /// fork. Default none.
    pub container_ids: Vec<String>,
    /// Profile only the processes of these cgroups and the cgroups
    /// below them: paths as `/proc/PID/cgroup` shows them (cgroup v2, or
    /// any v1 hierarchy), e.g. `/system.slice/app.service`. Default none.
    pub cgroups: Vec<String>,
    /// Interpreter unwinders switched off, by name (one of
    /// [`runtime_names`](crate::runtime_names), the names of
    /// `ebpf/runtimes.h`'s list: `python`, `hotspot`, ...): those runtimes
    /// are not looked for and their processes are profiled as native code.
    /// Default none.
    pub disabled_interpreters: Vec<String>,
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
            process_load_delay_ms: 0,
            open_via_map_files: true,
            probabilistic_threshold: PROBABILISTIC_THRESHOLD_MAX,
            probabilistic_interval_ms: 60_000,
            include_env_vars: Vec::new(),
            off_cpu_threshold: 0.0,
            container_ids: Vec::new(),
            cgroups: Vec::new(),
            disabled_interpreters: Vec::new(),
        }
    }
}

/// A configuration value out of range, or JSON that is not a
/// configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// An entry of `include_env_vars` that cannot name a variable, or too
    /// many of them.
    #[error("include_env_vars: {0}")]
    EnvVars(String),
    /// A numeric field outside its accepted range.
    #[error("{field} must be between {min} and {max}, got {got}")]
    OutOfRange {
        /// The JSON name of the field.
        field: &'static str,
        /// The value given.
        got: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// More entries in `pids` than the kernel-side filter holds.
    #[error("pids lists {got} processes, at most {max} are supported")]
    TooManyPids {
        /// How many were given.
        got: usize,
        /// The largest accepted count.
        max: usize,
    },
    /// A container id or cgroup that cannot select anything.
    #[error("{0}")]
    Selector(#[from] profiler_process::SelectorError),
    /// `off_cpu_threshold` outside [0, 1], or not a number.
    #[error("off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got {0}")]
    OffCpuThreshold(f64),
    /// A name in `disabled_interpreters` that is no interpreter unwinder.
    #[error("disabled_interpreters: unknown interpreter {got:?} (known: {known})")]
    UnknownInterpreter {
        /// The name given.
        got: String,
        /// The names accepted, comma-separated.
        known: String,
    },
    /// The JSON text could not be parsed, or is not a JSON object.
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
/// Longest reporting interval accepted: one interval's aggregate is held
/// in memory until it ends.
pub const MAX_REPORTER_INTERVAL_MS: u64 = 3_600_000;
/// Most OTLP batches that may wait to be pulled: the queue's slots are
/// allocated at start, and each waiting batch holds a whole interval.
pub const MAX_BATCH_QUEUE_CAPACITY: usize = 1024;
/// Most processes `pids` may select: the size of the BPF programs'
/// `selected_pids` map (ebpf/maps.h).
pub const MAX_PIDS: usize = 1024;
/// The probabilistic threshold that keeps sampling always on; draws are
/// in `0..PROBABILISTIC_THRESHOLD_MAX`.
pub const PROBABILISTIC_THRESHOLD_MAX: u32 = 100;
/// Shortest probabilistic interval accepted.
pub const MIN_PROBABILISTIC_INTERVAL_MS: u64 = 100;
/// Longest probabilistic interval accepted (the reference agent's 5 minutes).
pub const MAX_PROBABILISTIC_INTERVAL_MS: u64 = 300_000;
/// Most environment variable names in `include_env_vars`.
pub const MAX_ENV_VARS: usize = 64;
/// Longest environment variable name in `include_env_vars`.
pub const MAX_ENV_VAR_NAME_BYTES: usize = 256;
/// Largest process id Linux can hand out (`PID_MAX_LIMIT` on 64-bit).
pub const MAX_PID: u32 = 4_194_304;

impl AgentConfig {
    /// Parses the JSON form (as the C ABI receives it): a JSON object
    /// whose keys are field names; missing fields keep their defaults,
    /// unknown ones are an error.
    pub fn from_json(text: &str) -> Result<AgentConfig, ConfigError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        // serde would read an array as the fields in order (and `[]` as
        // every default): only an object names what it sets.
        if !value.is_object() {
            return Err(ConfigError::Json(format!("expected a JSON object, got {}", json_kind(&value))));
        }
        let config: AgentConfig = serde_json::from_value(value).map_err(|e| ConfigError::Json(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// [`AgentConfig::include_env_vars`], each name once, as the process
    /// readers take them.
    pub fn env_var_names(&self) -> std::sync::Arc<[std::sync::Arc<str>]> {
        let mut names: Vec<std::sync::Arc<str>> = Vec::with_capacity(self.include_env_vars.len());
        for name in &self.include_env_vars {
            if !names.iter().any(|n| **n == **name) {
                names.push(name.as_str().into());
            }
        }
        names.into()
    }

    /// [`AgentConfig::off_cpu_threshold`] as the programs take it: scaled
    /// to `u32::MAX` as the reference agent does, and at least 1 when not
    /// 0 (0 is off).
    pub fn off_cpu_threshold_scaled(&self) -> u32 {
        if self.off_cpu_threshold <= 0.0 || self.off_cpu_threshold.is_nan() {
            return 0;
        }
        ((self.off_cpu_threshold.min(1.0) * f64::from(u32::MAX)) as u32).max(1)
    }

    /// The reporting interval.
    pub fn reporter_interval(&self) -> Duration {
        Duration::from_millis(self.reporter_interval_ms)
    }

    /// Checks every value's range, before anything is allocated or loaded
    /// from it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range("samples_per_second", self.samples_per_second.into(), 1, MAX_SAMPLES_PER_SECOND.into())?;
        check_range(
            "reporter_interval_ms",
            self.reporter_interval_ms,
            MIN_REPORTER_INTERVAL_MS,
            MAX_REPORTER_INTERVAL_MS,
        )?;
        check_range("batch_queue_capacity", self.batch_queue_capacity as u64, 1, MAX_BATCH_QUEUE_CAPACITY as u64)?;
        check_range("unused_tables_budget_mib", self.unused_tables_budget_mib, 0, MAX_UNUSED_TABLES_BUDGET_MIB)?;
        check_range(
            "probabilistic_threshold",
            self.probabilistic_threshold.into(),
            1,
            PROBABILISTIC_THRESHOLD_MAX.into(),
        )?;
        check_range(
            "probabilistic_interval_ms",
            self.probabilistic_interval_ms,
            MIN_PROBABILISTIC_INTERVAL_MS,
            MAX_PROBABILISTIC_INTERVAL_MS,
        )?;
        if let Some(name) =
            self.disabled_interpreters.iter().find(|n| !profiler_interpreters::runtime_names().any(|k| k == n.as_str()))
        {
            return Err(ConfigError::UnknownInterpreter {
                got: name.clone(),
                known: profiler_interpreters::runtime_names().collect::<Vec<_>>().join(", "),
            });
        }
        if self.include_env_vars.len() > MAX_ENV_VARS {
            return Err(ConfigError::EnvVars(format!(
                "{} names, at most {MAX_ENV_VARS} are supported",
                self.include_env_vars.len()
            )));
        }
        for name in &self.include_env_vars {
            if name.is_empty() || name.len() > MAX_ENV_VAR_NAME_BYTES || name.contains(['=', '\0']) {
                return Err(ConfigError::EnvVars(format!(
                    "{name:?} is not a variable name (1 to {MAX_ENV_VAR_NAME_BYTES} bytes, no '=' or NUL)"
                )));
            }
        }
        if !(0.0..=1.0).contains(&self.off_cpu_threshold) {
            return Err(ConfigError::OffCpuThreshold(self.off_cpu_threshold));
        }
        if self.pids.len() > MAX_PIDS {
            return Err(ConfigError::TooManyPids { got: self.pids.len(), max: MAX_PIDS });
        }
        for &pid in &self.pids {
            check_range("pids", pid.into(), 1, MAX_PID.into())?;
        }
        self.process_filter()?;
        Ok(())
    }

    /// The containers and cgroups to profile (inactive when none).
    pub fn process_filter(&self) -> Result<profiler_process::ProcessFilter, ConfigError> {
        Ok(profiler_process::ProcessFilter::new(&self.container_ids, &self.cgroups)?)
    }
}

fn check_range(field: &'static str, got: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&got) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange { field, got, min, max })
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
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
        assert_eq!((c.probabilistic_threshold, c.probabilistic_interval_ms), (100, 60_000));
        assert!(c.symbolize_native);
    }

    #[test]
    fn off_cpu_threshold_is_a_fraction_scaled_to_u32() {
        let c = |t: f64| AgentConfig { off_cpu_threshold: t, ..AgentConfig::default() };
        assert_eq!(c(0.0).off_cpu_threshold_scaled(), 0);
        assert_eq!(c(1.0).off_cpu_threshold_scaled(), u32::MAX);
        assert_eq!(c(0.5).off_cpu_threshold_scaled(), u32::MAX / 2);
        assert_eq!(c(1e-12).off_cpu_threshold_scaled(), 1, "tiny but on");
        let json = AgentConfig::from_json(r#"{"off_cpu_threshold": 0.05}"#).unwrap();
        assert_eq!(json.off_cpu_threshold, 0.05);
        for bad in [-0.1, 1.5, f64::NAN] {
            assert!(matches!(c(bad).validate(), Err(ConfigError::OffCpuThreshold(_))), "{bad}");
        }
        assert_eq!(
            AgentConfig::from_json(r#"{"off_cpu_threshold": 2}"#).unwrap_err().to_string(),
            "off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got 2"
        );
    }

    #[test]
    fn json_rejects_unknown_fields_and_bad_ranges() {
        assert!(matches!(
            AgentConfig::from_json(r#"{"sample_per_second": 99}"#),
            Err(ConfigError::Json(m)) if m.contains("unknown field")
        ));
        assert_eq!(
            AgentConfig::from_json(r#"{"samples_per_second": 0}"#),
            Err(ConfigError::OutOfRange {
                field: "samples_per_second",
                got: 0,
                min: 1,
                max: MAX_SAMPLES_PER_SECOND.into()
            })
        );
        assert_eq!(
            AgentConfig::from_json(r#"{"reporter_interval_ms": 5}"#),
            Err(ConfigError::OutOfRange {
                field: "reporter_interval_ms",
                got: 5,
                min: MIN_REPORTER_INTERVAL_MS,
                max: MAX_REPORTER_INTERVAL_MS
            })
        );
        assert_eq!(
            AgentConfig::from_json(r#"{"unused_tables_budget_mib": 4097}"#),
            Err(ConfigError::OutOfRange {
                field: "unused_tables_budget_mib",
                got: 4097,
                min: 0,
                max: MAX_UNUSED_TABLES_BUDGET_MIB
            })
        );
        assert_eq!(AgentConfig::from_json(r#"{"unused_tables_budget_mib": 0}"#).unwrap().unused_tables_budget_mib, 0);
    }

    /// Every numeric field has an upper bound, checked before the agent
    /// allocates or loads anything from it.
    #[test]
    fn every_numeric_field_is_bounded() {
        let out_of_range = |json: &str| match AgentConfig::from_json(json) {
            Err(ConfigError::OutOfRange { field, got, max, .. }) => (field, got, max),
            other => panic!("{json}: {other:?}"),
        };
        assert_eq!(
            out_of_range(r#"{"batch_queue_capacity": 100000000000}"#),
            ("batch_queue_capacity", 100_000_000_000, MAX_BATCH_QUEUE_CAPACITY as u64)
        );
        assert_eq!(
            out_of_range(&format!(r#"{{"batch_queue_capacity": {}}}"#, usize::MAX)),
            ("batch_queue_capacity", usize::MAX as u64, MAX_BATCH_QUEUE_CAPACITY as u64)
        );
        assert_eq!(out_of_range(r#"{"batch_queue_capacity": 0}"#).1, 0);
        assert_eq!(
            out_of_range(&format!(r#"{{"reporter_interval_ms": {}}}"#, u64::MAX)),
            ("reporter_interval_ms", u64::MAX, MAX_REPORTER_INTERVAL_MS)
        );
        assert_eq!(
            out_of_range(r#"{"samples_per_second": 4294967295}"#),
            ("samples_per_second", u64::from(u32::MAX), u64::from(MAX_SAMPLES_PER_SECOND))
        );
        assert_eq!(
            out_of_range(r#"{"unused_tables_budget_mib": 4097}"#),
            ("unused_tables_budget_mib", 4097, MAX_UNUSED_TABLES_BUDGET_MIB)
        );
        assert_eq!(out_of_range(r#"{"probabilistic_threshold": 0}"#), ("probabilistic_threshold", 0, 100));
        assert_eq!(out_of_range(r#"{"probabilistic_threshold": 101}"#), ("probabilistic_threshold", 101, 100));
        assert_eq!(
            out_of_range(r#"{"probabilistic_interval_ms": 99}"#),
            ("probabilistic_interval_ms", 99, MAX_PROBABILISTIC_INTERVAL_MS)
        );
        assert_eq!(
            out_of_range(r#"{"probabilistic_interval_ms": 300001}"#),
            ("probabilistic_interval_ms", 300_001, MAX_PROBABILISTIC_INTERVAL_MS)
        );
        assert_eq!(out_of_range(r#"{"pids": [1, 0]}"#), ("pids", 0, u64::from(MAX_PID)));
        assert_eq!(out_of_range(r#"{"pids": [4194305]}"#), ("pids", 4_194_305, u64::from(MAX_PID)));
        let many: Vec<u32> = (1..=MAX_PIDS as u32 + 1).collect();
        let json = format!(r#"{{"pids": {many:?}}}"#);
        assert_eq!(AgentConfig::from_json(&json), Err(ConfigError::TooManyPids { got: MAX_PIDS + 1, max: MAX_PIDS }));
        // The limits themselves are accepted.
        let c = AgentConfig::from_json(&format!(
            r#"{{"samples_per_second": {MAX_SAMPLES_PER_SECOND}, "reporter_interval_ms": {MAX_REPORTER_INTERVAL_MS},
                "batch_queue_capacity": {MAX_BATCH_QUEUE_CAPACITY}, "unused_tables_budget_mib": {MAX_UNUSED_TABLES_BUDGET_MIB},
                "pids": [{MAX_PID}]}}"#
        ))
        .unwrap();
        assert_eq!(c.batch_queue_capacity, MAX_BATCH_QUEUE_CAPACITY);
    }

    /// What go-receiver's agentJSON writes for the reference's example
    /// (testdata/reference.yaml; config_test.go checks the Go side).
    #[test]
    fn go_receivers_json_is_accepted() {
        let c = AgentConfig::from_json(
            r#"{"samples_per_second":19,"reporter_interval_ms":10000,"pids":[],"otlp_batches":true,"batch_queue_capacity":16,"symbolize_native":true,
                "probabilistic_threshold":50,"probabilistic_interval_ms":120000,"include_env_vars":["HOME","LANG"]}"#,
        )
        .unwrap();
        assert_eq!((c.probabilistic_threshold, c.probabilistic_interval_ms), (50, 120_000));
        assert_eq!(c.include_env_vars, vec!["HOME".to_string(), "LANG".to_string()]);
    }

    #[test]
    fn disabled_interpreters_are_known_names() {
        use std::collections::BTreeSet;
        let c = AgentConfig::from_json(r#"{"disabled_interpreters": ["python", "perl"]}"#).unwrap();
        assert_eq!(c.disabled_interpreters, ["python", "perl"]);
        let kept: BTreeSet<&str> = profiler_interpreters::runtimes_except(&c.disabled_interpreters)
            .iter()
            .map(|r| r.unwinder().name())
            .collect();
        // Every runtime of the list (the unwinders, generated from
        // ebpf/runtimes.h) but the two.
        let expected: BTreeSet<&str> = profiler_bpf::InterpreterUnwinder::ALL
            .iter()
            .map(|u| u.name())
            .filter(|n| !["python", "perl"].contains(n))
            .collect();
        assert_eq!(kept, expected);
        assert_eq!(kept.len(), profiler_bpf::InterpreterUnwinder::ALL.len() - 2);
        let known: Vec<&str> = crate::runtime_names().collect();
        assert_eq!(known.iter().copied().collect::<BTreeSet<_>>().len(), profiler_bpf::InterpreterUnwinder::ALL.len());
        assert_eq!(
            AgentConfig::from_json(r#"{"disabled_interpreters": ["dotnet"]}"#),
            Err(ConfigError::UnknownInterpreter { got: "dotnet".into(), known: known.join(", ") })
        );
    }

    #[test]
    fn env_var_names_checked_and_deduplicated() {
        let c = AgentConfig::from_json(r#"{"include_env_vars": ["DEPLOY", "HOME", "DEPLOY"]}"#).unwrap();
        let names = c.env_var_names();
        let names: Vec<&str> = names.iter().map(|n| &**n).collect();
        assert_eq!(names, vec!["DEPLOY", "HOME"]);
        for bad in [r#"[""]"#, r#"["A=B"]"#, r#"["A\u0000"]"#] {
            let json = format!(r#"{{"include_env_vars": {bad}}}"#);
            assert!(matches!(AgentConfig::from_json(&json), Err(ConfigError::EnvVars(_))), "{json}");
        }
        let long = "X".repeat(MAX_ENV_VAR_NAME_BYTES + 1);
        assert!(matches!(
            AgentConfig::from_json(&format!(r#"{{"include_env_vars": ["{long}"]}}"#)),
            Err(ConfigError::EnvVars(_))
        ));
        let many: Vec<String> = (0..=MAX_ENV_VARS).map(|i| format!("V{i}")).collect();
        let c = AgentConfig { include_env_vars: many, ..AgentConfig::default() };
        assert!(matches!(c.validate(), Err(ConfigError::EnvVars(m)) if m.contains("65 names")));
    }

    /// Only a JSON object is a configuration; negative numbers and wrong
    /// types are JSON errors that name the field.
    #[test]
    fn json_must_be_an_object_of_the_right_types() {
        let json_error = |json: &str| match AgentConfig::from_json(json) {
            Err(ConfigError::Json(m)) => m,
            other => panic!("{json}: {other:?}"),
        };
        assert_eq!(json_error("[]"), "expected a JSON object, got an array");
        assert_eq!(json_error("[20, 5000]"), "expected a JSON object, got an array");
        assert_eq!(json_error("null"), "expected a JSON object, got null");
        assert_eq!(json_error("20"), "expected a JSON object, got a number");
        let m = json_error(r#"{"batch_queue_capacity": -1}"#);
        assert!(m.contains("invalid value: integer `-1`"), "{m}");
        let m = json_error(r#"{"samples_per_second": "20"}"#);
        assert!(m.contains("invalid type: string \"20\""), "{m}");
        let m = json_error(r#"{"reporter_interval_ms": 1.5}"#);
        assert!(m.contains("invalid type: floating point"), "{m}");
        let m = json_error(r#"{"pids": 7}"#);
        assert!(m.contains("invalid type: integer `7`, expected a sequence"), "{m}");
        let m = json_error(r#"{"symbolize_native": 1}"#);
        assert!(m.contains("invalid type: integer `1`, expected a boolean"), "{m}");
        let m = json_error(r#"{"pids": [-3]}"#);
        assert!(m.contains("invalid value: integer `-3`"), "{m}");
        assert_eq!(AgentConfig::from_json("{}"), Ok(AgentConfig::default()));
    }
}
