//! OTLP profiles (`opentelemetry.proto.profiles.v1development`, proto
//! v1.10 layout) from [`Trace`]s.
//!
//! An [`OtlpAggregator`] collects the traces of one reporting interval:
//! identical (process, thread, stack) triples become one sample with a
//! count. [`OtlpAggregator::flush`] closes the interval and returns an
//! [`ExportProfilesServiceRequest`]; [`encode`] turns it into the bytes
//! that cross the C ABI or go out over gRPC.
//!
//! Shape of a request (what backends and Go's `pprofile` read):
//!
//! - one `ResourceProfiles` per process, resource attributes
//!   `service.name`, `process.pid`, `process.executable.name`,
//!   `process.executable.path`, when known `container.id`, and
//!   `process.environment_variable.<NAME>` for each variable named by
//!   `include_env_vars` that the process has (plain
//!   keys and values, which every OTLP reader understands); one
//!   `ScopeProfiles` holding one `Profile` with sample type `samples/count`, period type
//!   `cpu/nanoseconds` and period `1e9 / samples_per_second`;
//! - every profile has a distinct random 16-byte `profile_id`;
//! - samples carry `values = [count]`, the wall-clock time of each of
//!   those samples in `timestamps_unix_nano` (sorted), and the attributes
//!   `thread.name`, `thread.id` and `cpu.logical_number` (the reference
//!   agent's sample key: identical stacks of one thread on one CPU are one
//!   sample, so payloads stay small while every event keeps its time),
//!   and before them `process.context.label.<key>` for each of the
//!   trace's labels (Go pprof labels; part of the key too);
//! - a profile's `time_unix_nano` is the interval's start, moved back to
//!   the oldest timestamp when a sample that waited (late unwinding) is
//!   older, so every timestamp lies in `[time, time + duration)`;
//! - one shared `ProfilesDictionary`: strings, functions, mappings
//!   (attributes `process.executable.build_id.htlhash`/`.gnu`/`.go`),
//!   locations (attribute `profile.frame.type`), stacks (leaf first) and
//!   attributes are each stored once per request, and index 0 of every
//!   table is the zero value.
//!
//! ```
//! use std::sync::Arc;
//! use profiler_report::otlp::{encode, OtlpAggregator, OtlpConfig};
//! use profiler_trace::{Pid, ProcessInfo, Tid, Trace};
//!
//! let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 1_000);
//! let process = Arc::new(ProcessInfo {
//!     pid: Pid(42),
//!     executable_path: "/usr/bin/app".into(),
//!     executable_name: "app".into(),
//!     container_id: None,
//!     service_name: "app".into(),
//!     env_vars: vec![],
//! });
//! let trace = Trace {
//!     process,
//!     tid: Tid(42),
//!     thread_name: "app".into(),
//!     cpu: 0,
//!     timestamp_unix_ns: 2_000,
//!     frames: vec![],
//!     off_cpu_ns: None,
//!     labels: vec![],
//! };
//! agg.add(&trace);
//! agg.add(&trace);
//! let request = agg.flush(5_000).expect("two samples");
//! let profile = &request.resource_profiles[0].scope_profiles[0].profiles[0];
//! assert_eq!(profile.samples[0].values, vec![2]);
//! assert!(!encode(&request).is_empty());
//! ```

mod dictionary;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use opentelemetry_proto::tonic::resource::v1::Resource;
use profiler_trace::{ProcessInfo, Trace};
use prost::Message;

use dictionary::{AttrValue, Dictionary};

pub use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;

/// Attribute keys, spelled as the reference agent and the OpenTelemetry
/// semantic conventions spell them.
pub mod attr {
    /// Location attribute: which unwinder produced the frame
    /// ([`profiler_trace::FrameKind::as_str`]).
    pub const FRAME_TYPE: &str = "profile.frame.type";
    /// Location attribute, `true` when set: the frame's position was
    /// guessed ([`profiler_trace::SourceLine::approximate`]: a
    /// JIT-compiled pc named by the nearest debug information). Our own
    /// key: the semantic conventions have none.
    pub const FRAME_APPROXIMATE: &str = "profile.frame.approximate";
    /// Mapping attribute: the file's [`profiler_trace::FileId`] in hex.
    pub const BUILD_ID_HTLHASH: &str = "process.executable.build_id.htlhash";
    /// Mapping attribute: the GNU build id in hex.
    pub const BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
    /// Mapping attribute: the Go build id.
    pub const BUILD_ID_GO: &str = "process.executable.build_id.go";
    /// Resource attribute: the service (`OTEL_SERVICE_NAME`, else the
    /// executable's name), which backends group profiles by.
    pub const SERVICE_NAME: &str = "service.name";
    /// Resource attribute: the process id (int).
    pub const PROCESS_PID: &str = "process.pid";
    /// Resource attribute: the executable's file name.
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    /// Resource attribute: the executable's path.
    pub const PROCESS_EXECUTABLE_PATH: &str = "process.executable.path";
    /// Resource attribute: the container id, only when the process runs in one.
    pub const CONTAINER_ID: &str = "container.id";
    /// Resource attribute prefix: `process.environment_variable.<NAME>`
    /// holds the value of each variable named by `include_env_vars`.
    pub const ENV_VAR_PREFIX: &str = "process.environment_variable.";
    /// Sample attribute: the thread's name (`comm`).
    pub const THREAD_NAME: &str = "thread.name";
    /// Sample attribute: the thread id (int).
    pub const THREAD_ID: &str = "thread.id";
    /// Sample attribute: the CPU the sample was taken on (int).
    pub const CPU_LOGICAL_NUMBER: &str = "cpu.logical_number";
    /// Prefix of a sample's label attributes (a Go pprof label `k` is
    /// `process.context.label.k`), as the reference agent names them.
    pub const LABEL_PREFIX: &str = "process.context.label.";
}

/// Sample type of off-CPU profiles (unit `nanoseconds`, one value per
/// timestamp: the time the thread was off the CPU), as the reference agent
/// names it.
pub const OFF_CPU_SAMPLE_TYPE: &str = "off_cpu";

/// Name of the instrumentation scope our profiles carry.
pub const SCOPE_NAME: &str = "ebpf-profiler";

/// Settings of an [`OtlpAggregator`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpConfig {
    /// Sampling frequency per CPU; the profile's period is
    /// `1e9 / samples_per_second` nanoseconds of CPU time.
    pub samples_per_second: u32,
    /// Version of the instrumentation scope. By default this crate's version.
    pub scope_version: String,
    /// Seed of the 16-byte `profile_id`s (every profile gets a distinct,
    /// non-zero one, as the reference agent's random ids). Random by
    /// default; fixed in tests for reproducible output.
    pub profile_id_seed: u64,
    /// The running kernel's GNU build id, sent on the `vmlinux` mapping
    /// of kernel frames (`profiler_elf::kernel_build_id`); `None`: the
    /// mapping goes without it.
    pub kernel_build_id: Option<String>,
}

impl OtlpConfig {
    /// Settings for sampling at `samples_per_second` Hz.
    pub fn new(samples_per_second: u32) -> OtlpConfig {
        OtlpConfig {
            samples_per_second,
            scope_version: env!("CARGO_PKG_VERSION").to_owned(),
            profile_id_seed: random_seed(),
            kernel_build_id: None,
        }
    }

    /// The same settings, kernel frames carrying `build_id`.
    pub fn with_kernel_build_id(self, build_id: Option<String>) -> OtlpConfig {
        OtlpConfig { kernel_build_id: build_id, ..self }
    }

    /// CPU time one sample stands for, in nanoseconds.
    pub fn period_ns(&self) -> i64 {
        1_000_000_000 / i64::from(self.samples_per_second.max(1))
    }
}

/// 64 random bits from the standard library's per-process hash keys and
/// the clock (no RNG dependency; uniqueness, not secrecy, is the goal).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.finish()
}

/// SplitMix64: a bijective mixer, so distinct inputs give distinct ids.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `n`th profile id of `seed`: 16 bytes, never all zero.
fn profile_id(seed: u64, n: u64) -> Vec<u8> {
    let hi = splitmix64(seed ^ splitmix64(n));
    let lo = splitmix64(hi ^ n).max(1);
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&hi.to_be_bytes());
    id.extend_from_slice(&lo.to_be_bytes());
    id
}

/// Collects the traces of one reporting interval and turns them into an
/// OTLP profiles request. Not thread-safe: one reporter thread owns it.
pub struct OtlpAggregator {
    config: OtlpConfig,
    interval_start_unix_ns: u64,
    dict: Dictionary,
    processes: Vec<ProcessSamples>,
    process_index: HashMap<Arc<ProcessInfo>, usize>,
    traces: u64,
    // Profiles made so far; numbers the profile ids.
    profiles_made: u64,
    // Scratch buffer for one trace's location indices.
    stack_buf: Vec<i32>,
}

/// The samples of one process within the interval.
struct ProcessSamples {
    info: Arc<ProcessInfo>,
    samples: Vec<pb::Sample>,
    // (stack index, thread.name, thread.id and cpu.logical_number attrs)
    // -> index in `samples`.
    sample_index: HashMap<SampleKey, usize>,
    // Off-CPU samples: one value (ns off the CPU) per timestamp.
    off_cpu: Vec<pb::Sample>,
    off_cpu_index: HashMap<SampleKey, usize>,
}

/// (stack, thread.name, thread.id, cpu.logical_number, the label
/// attributes: none for most traces, which then allocate nothing).
type SampleKey = (i32, i32, i32, i32, Vec<i32>);

impl OtlpAggregator {
    /// An aggregator whose first interval starts at `interval_start_unix_ns`.
    pub fn new(config: OtlpConfig, interval_start_unix_ns: u64) -> OtlpAggregator {
        OtlpAggregator {
            dict: Dictionary::with_kernel_build_id(config.kernel_build_id.as_deref()),
            config,
            interval_start_unix_ns,
            processes: Vec::new(),
            process_index: HashMap::new(),
            traces: 0,
            profiles_made: 0,
            stack_buf: Vec::new(),
        }
    }

    /// The settings this aggregator was made with.
    pub fn config(&self) -> &OtlpConfig {
        &self.config
    }

    /// Start of the current interval, nanoseconds since the Unix epoch.
    pub fn interval_start_unix_ns(&self) -> u64 {
        self.interval_start_unix_ns
    }

    /// Traces added since the last flush.
    pub fn trace_count(&self) -> u64 {
        self.traces
    }

    /// Whether no trace was added since the last flush.
    pub fn is_empty(&self) -> bool {
        self.traces == 0
    }

    /// Counts one sample of `trace`.
    pub fn add(&mut self, trace: &Trace) {
        self.traces += 1;

        let mut stack_buf = std::mem::take(&mut self.stack_buf);
        stack_buf.clear();
        stack_buf.extend(trace.frames.iter().map(|f| self.dict.location(f)));
        let stack_index = self.dict.stack(&stack_buf);
        self.stack_buf = stack_buf;

        let thread_name = self.dict.attribute(attr::THREAD_NAME, AttrValue::Str((*trace.thread_name).into()));
        let thread_id = self.dict.attribute(attr::THREAD_ID, AttrValue::Int(i64::from(trace.tid.0)));
        let cpu = self.dict.attribute(attr::CPU_LOGICAL_NUMBER, AttrValue::Int(i64::from(trace.cpu)));
        let labels: Vec<i32> = trace
            .labels
            .iter()
            .map(|(k, v)| self.dict.attribute(&format!("{}{k}", attr::LABEL_PREFIX), AttrValue::Str((**v).into())))
            .collect();

        let p = match self.process_index.get(&trace.process) {
            Some(&p) => p,
            None => {
                self.processes.push(ProcessSamples {
                    info: Arc::clone(&trace.process),
                    samples: Vec::new(),
                    sample_index: HashMap::new(),
                    off_cpu: Vec::new(),
                    off_cpu_index: HashMap::new(),
                });
                self.process_index.insert(Arc::clone(&trace.process), self.processes.len() - 1);
                self.processes.len() - 1
            }
        };
        let process = &mut self.processes[p];
        let attribute_indices = || labels.iter().copied().chain([thread_name, thread_id, cpu]).collect();
        let key = (stack_index, thread_name, thread_id, cpu, labels.clone());
        if let Some(ns) = trace.off_cpu_ns {
            let value = i64::try_from(ns).unwrap_or(i64::MAX);
            match process.off_cpu_index.get(&key) {
                Some(&s) => {
                    let sample = &mut process.off_cpu[s];
                    sample.values.push(value);
                    sample.timestamps_unix_nano.push(trace.timestamp_unix_ns);
                }
                None => {
                    process.off_cpu.push(pb::Sample {
                        stack_index,
                        attribute_indices: attribute_indices(),
                        link_index: 0,
                        values: vec![value],
                        timestamps_unix_nano: vec![trace.timestamp_unix_ns],
                    });
                    process.off_cpu_index.insert(key, process.off_cpu.len() - 1);
                }
            }
            return;
        }
        match process.sample_index.get(&key) {
            Some(&s) => {
                let sample = &mut process.samples[s];
                sample.values[0] += 1;
                sample.timestamps_unix_nano.push(trace.timestamp_unix_ns);
            }
            None => {
                process.samples.push(pb::Sample {
                    stack_index,
                    attribute_indices: attribute_indices(),
                    link_index: 0,
                    values: vec![1],
                    timestamps_unix_nano: vec![trace.timestamp_unix_ns],
                });
                process.sample_index.insert(key, process.samples.len() - 1);
            }
        }
    }

    /// Closes the interval at `interval_end_unix_ns` and starts the next
    /// one there. Returns the interval's request, or `None` when no trace
    /// arrived.
    pub fn flush(&mut self, interval_end_unix_ns: u64) -> Option<ExportProfilesServiceRequest> {
        let start = std::mem::replace(&mut self.interval_start_unix_ns, interval_end_unix_ns);
        if self.traces == 0 {
            return None;
        }
        self.traces = 0;
        self.process_index.clear();
        let mut processes = std::mem::take(&mut self.processes);
        // Samples that waited for late unwinding can predate the interval:
        // the profile starts at the oldest one (as the reference agent
        // does), so that every timestamp lies within the profile.
        let mut start = start;
        for sample in processes.iter_mut().flat_map(|p| p.samples.iter_mut()) {
            sample.timestamps_unix_nano.sort_unstable();
            start = start.min(sample.timestamps_unix_nano.first().copied().unwrap_or(start));
        }
        for sample in processes.iter_mut().flat_map(|p| p.off_cpu.iter_mut()) {
            sort_events(sample);
            start = start.min(sample.timestamps_unix_nano.first().copied().unwrap_or(start));
        }
        // Deterministic output whatever the arrival order of processes.
        processes.sort_by(|a, b| (a.info.pid, &a.info.executable_path).cmp(&(b.info.pid, &b.info.executable_path)));

        let sample_type =
            pb::ValueType { type_strindex: self.dict.string("samples"), unit_strindex: self.dict.string("count") };
        let period_type =
            pb::ValueType { type_strindex: self.dict.string("cpu"), unit_strindex: self.dict.string("nanoseconds") };
        // Interned only when used, so on-CPU requests keep their tables.
        let off_cpu_type = if processes.iter().any(|p| !p.off_cpu.is_empty()) {
            pb::ValueType {
                type_strindex: self.dict.string(OFF_CPU_SAMPLE_TYPE),
                unit_strindex: self.dict.string("nanoseconds"),
            }
        } else {
            pb::ValueType::default()
        };
        let scope = InstrumentationScope {
            name: SCOPE_NAME.to_owned(),
            version: self.config.scope_version.clone(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
        };

        let duration_nano = interval_end_unix_ns.saturating_sub(start);
        let mut resource_profiles = Vec::with_capacity(processes.len());
        for p in processes {
            // As the reference: one profile per sample type present,
            // ordered by type name (off_cpu before samples).
            let mut profiles = Vec::with_capacity(2);
            for (samples, sample_type, period_type, period) in [
                (p.off_cpu, off_cpu_type, None, 0),
                (p.samples, sample_type, Some(period_type), self.config.period_ns()),
            ] {
                if samples.is_empty() {
                    continue;
                }
                self.profiles_made += 1;
                profiles.push(pb::Profile {
                    sample_type: Some(sample_type),
                    samples,
                    time_unix_nano: start,
                    duration_nano,
                    period_type,
                    period,
                    profile_id: profile_id(self.config.profile_id_seed, self.profiles_made),
                    dropped_attributes_count: 0,
                    original_payload_format: String::new(),
                    original_payload: Vec::new(),
                    attribute_indices: Vec::new(),
                });
            }
            resource_profiles.push(pb::ResourceProfiles {
                resource: Some(Resource {
                    attributes: resource_attributes(&p.info),
                    dropped_attributes_count: 0,
                    entity_refs: Vec::new(),
                }),
                scope_profiles: vec![pb::ScopeProfiles {
                    scope: Some(scope.clone()),
                    profiles,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            });
        }

        Some(ExportProfilesServiceRequest { resource_profiles, dictionary: Some(self.dict.take()) })
    }
}

/// Sorts an off-CPU sample's events by time, each value staying with its
/// timestamp.
fn sort_events(sample: &mut pb::Sample) {
    let mut events: Vec<(u64, i64)> =
        sample.timestamps_unix_nano.iter().copied().zip(sample.values.iter().copied()).collect();
    events.sort_unstable();
    sample.timestamps_unix_nano = events.iter().map(|e| e.0).collect();
    sample.values = events.iter().map(|e| e.1).collect();
}

/// The request as protobuf bytes.
pub fn encode(request: &ExportProfilesServiceRequest) -> Vec<u8> {
    request.encode_to_vec()
}

/// Resource attributes with plain keys and values, as OTLP defines them
/// for every signal. The profiles dictionary's `key_strindex` and
/// `string_value_strindex` are allowed here too, but not every reader
/// resolves them: Grafana Pyroscope reads only plain keys (a referenced
/// key becomes a label with an empty name, and the export is refused),
/// and a Collector's OTLP receiver passes them on unresolved. Go's pdata
/// reads plain keys when the request is decoded as an `ExportRequest`
/// (the receiver does), but `ProtoUnmarshaler` overwrites every
/// resource key with `string_table[key_strindex]`, so "" for plain keys
/// (pdata v0.159.0, `resolveKeyValueReferences`); see the Go golden test.
fn resource_attributes(p: &ProcessInfo) -> Vec<KeyValue> {
    let mut attrs = vec![
        key_value(attr::SERVICE_NAME, any_value::Value::StringValue(p.service_name.to_string())),
        key_value(attr::PROCESS_PID, any_value::Value::IntValue(i64::from(p.pid.0))),
        key_value(attr::PROCESS_EXECUTABLE_NAME, any_value::Value::StringValue(p.executable_name.to_string())),
        key_value(attr::PROCESS_EXECUTABLE_PATH, any_value::Value::StringValue(p.executable_path.to_string())),
    ];
    if let Some(id) = &p.container_id {
        attrs.push(key_value(attr::CONTAINER_ID, any_value::Value::StringValue(id.to_string())));
    }
    for (name, value) in &p.env_vars {
        let key = format!("{}{name}", attr::ENV_VAR_PREFIX);
        attrs.push(key_value(&key, any_value::Value::StringValue(value.to_string())));
    }
    attrs
}

fn key_value(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(value) }), key_strindex: 0 }
}
