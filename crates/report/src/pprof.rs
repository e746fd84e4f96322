//! pprof output: the gzip-compressed `perftools.profiles.Profile`
//! protobuf that `go tool pprof`, Pyroscope, Parca and speedscope read.
//!
//! Field numbers are those of pprof's `proto/profile.proto` (public
//! format). Samples are aggregated by (process, thread name, stack) with
//! labels `pid`, `process` and `thread`; kernel frames sit in a
//! `[kernel.kallsyms]` mapping as perf does; inlined functions are several
//! lines of one location, innermost first, as the format says.

use flate2::write::GzEncoder;
use flate2::Compression;
use profiler_trace::{Frame, FrameKind, Mapping, Trace};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

/// `perftools.profiles.Profile` (the fields we write).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each sample value measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Mapped files.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<ProfileMapping>,
    /// Code locations.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string; index 0 is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Start of the profile, ns since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Length of the profile, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sampling period is.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The sampling period.
    #[prost(int64, tag = "12")]
    pub period: i64,
}

/// `ValueType`: string-table indices of a type and its unit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// E.g. "samples", "cpu".
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// E.g. "count", "nanoseconds".
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: a stack (leaf first) and its values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string or numeric label.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index), or 0.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// `Mapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileMapping {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File path (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether locations in it carry function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// `Location`: one frame.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id, 0 if none.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The address (ELF virtual address for native code).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Source lines, innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Line`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// Function id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Line number, 0 if unknown.
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Id, from 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// System name (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// (stack, pid, process, thread, labels as (key, value) strings).
type SampleKey = (Vec<u64>, u32, i64, i64, Vec<(i64, i64)>);

/// Aggregates traces into one pprof profile.
pub struct PprofBuilder {
    profile: Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(i64, i64), u64>,
    mappings: HashMap<Arc<Mapping>, u64>,
    kernel_mapping: Option<u64>,
    locations: HashMap<Frame, u64>,
    samples: HashMap<SampleKey, usize>,
    period_ns: i64,
    // An off-CPU profile: one value, the nanoseconds off the CPU.
    off_cpu: bool,
}

impl PprofBuilder {
    /// A profile starting at `start_unix_ns` of samples taken at
    /// `samples_per_second` Hz.
    pub fn new(samples_per_second: u32, start_unix_ns: u64) -> PprofBuilder {
        let mut b = PprofBuilder {
            profile: Profile { time_nanos: start_unix_ns as i64, ..Default::default() },
            strings: HashMap::new(),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            kernel_mapping: None,
            locations: HashMap::new(),
            samples: HashMap::new(),
            period_ns: 1_000_000_000 / i64::from(samples_per_second.max(1)),
            off_cpu: false,
        };
        b.string("");
        let samples = ValueType { r#type: b.string("samples"), unit: b.string("count") };
        let cpu = ValueType { r#type: b.string("cpu"), unit: b.string("nanoseconds") };
        b.profile.sample_type = vec![samples, cpu.clone()];
        b.profile.period_type = Some(cpu);
        b.profile.period = b.period_ns;
        b
    }

    /// An off-CPU profile starting at `start_unix_ns`: sample type
    /// `off_cpu/nanoseconds` (the reference agent's), each stack's value
    /// the sum of its traces' [`Trace::off_cpu_ns`].
    pub fn off_cpu(start_unix_ns: u64) -> PprofBuilder {
        let mut b = PprofBuilder::new(1, start_unix_ns);
        b.off_cpu = true;
        let off_cpu = ValueType { r#type: b.string(crate::otlp::OFF_CPU_SAMPLE_TYPE), unit: b.string("nanoseconds") };
        b.profile.sample_type = vec![off_cpu];
        b.profile.period_type = None;
        b.profile.period = 0;
        b
    }

    /// Counts one trace.
    pub fn add(&mut self, trace: &Trace) {
        let values = if self.off_cpu {
            vec![i64::try_from(trace.off_cpu_ns.unwrap_or(0)).unwrap_or(i64::MAX)]
        } else {
            vec![1, self.period_ns]
        };
        let stack: Vec<u64> = trace.frames.iter().map(|f| self.location(f)).collect();
        let process = self.string(&trace.process.executable_name);
        let thread = self.string(&trace.thread_name);
        let labels: Vec<(i64, i64)> = trace.labels.iter().map(|(k, v)| (self.string(k), self.string(v))).collect();
        let key = (stack, trace.process.pid.0, process, thread, labels);
        if let Some(&i) = self.samples.get(&key) {
            for (sum, v) in self.profile.sample[i].value.iter_mut().zip(values) {
                *sum = sum.saturating_add(v);
            }
            return;
        }
        let (pid_key, process_key, thread_key) = (self.string("pid"), self.string("process"), self.string("thread"));
        self.profile.sample.push(Sample {
            location_id: key.0.clone(),
            value: values,
            label: vec![
                Label { key: pid_key, str: 0, num: i64::from(key.1) },
                Label { key: process_key, str: process, num: 0 },
                Label { key: thread_key, str: thread, num: 0 },
            ]
            .into_iter()
            // A Go pprof label is a label of its own, as Go writes it.
            .chain(key.4.iter().map(|&(key, str)| Label { key, str, num: 0 }))
            .collect(),
        });
        self.samples.insert(key, self.profile.sample.len() - 1);
    }

    /// The profile, ending at `end_unix_ns`.
    pub fn finish(mut self, end_unix_ns: u64) -> Profile {
        self.profile.duration_nanos = (end_unix_ns as i64 - self.profile.time_nanos).max(0);
        self.profile
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let key = (self.string(name), self.string(file.unwrap_or("")));
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.profile.function.len() as u64 + 1;
        self.profile.function.push(Function { id, name: key.0, system_name: key.0, filename: key.1 });
        self.functions.insert(key, id);
        id
    }

    fn mapping_id(&mut self, frame: &Frame) -> u64 {
        if frame.kind == FrameKind::Kernel {
            if let Some(id) = self.kernel_mapping {
                return id;
            }
            let id = self.profile.mapping.len() as u64 + 1;
            let filename = self.string("[kernel.kallsyms]");
            self.profile.mapping.push(ProfileMapping { id, filename, has_functions: true, ..Default::default() });
            self.kernel_mapping = Some(id);
            return id;
        }
        let Some(mapping) = &frame.mapping else { return 0 };
        if let Some(&id) = self.mappings.get(mapping) {
            return id;
        }
        let id = self.profile.mapping.len() as u64 + 1;
        let filename = self.string(&mapping.path);
        let build_id = match (&mapping.gnu_build_id, &mapping.go_build_id, &mapping.file_id) {
            (Some(gnu), _, _) => self.string(gnu),
            (None, Some(go), _) => self.string(go),
            (None, None, Some(file_id)) => self.string(&file_id.to_hex()),
            (None, None, None) => 0,
        };
        self.profile.mapping.push(ProfileMapping {
            id,
            memory_start: mapping.start,
            memory_limit: mapping.end,
            file_offset: mapping.file_offset,
            filename,
            build_id,
            has_functions: true,
        });
        self.mappings.insert(mapping.clone(), id);
        id
    }

    fn location(&mut self, frame: &Frame) -> u64 {
        if let Some(&id) = self.locations.get(frame) {
            return id;
        }
        let mapping_id = self.mapping_id(frame);
        let mut line: Vec<Line> = frame
            .lines
            .iter()
            .map(|l| Line { function_id: self.function(&l.function, l.file.as_deref()), line: i64::from(l.line) })
            .collect();
        if line.is_empty() {
            // Named after where it is, as in OTLP: the mappings claim
            // functions, so tools would otherwise show nothing for it.
            let place = frame.mapping.as_ref().map_or(frame.kind.as_str(), |m| m.file_name());
            let function_id = self.function(&format!("{place}+{:#x}", frame.address), None);
            line.push(Line { function_id, line: 0 });
        }
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location { id, mapping_id, address: frame.address, line });
        self.locations.insert(frame.clone(), id);
        id
    }
}

/// Writes `profile` gzip-compressed, as pprof tools expect.
pub fn write_gzipped(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&prost::Message::encode_to_vec(profile))?;
    gz.finish()?.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folded::tests_support::trace;
    use prost::Message;
    use std::io::Read;

    fn names(p: &Profile, sample: &Sample) -> Vec<String> {
        sample
            .location_id
            .iter()
            .map(|id| {
                let loc = &p.location[*id as usize - 1];
                let f = &p.function[loc.line[0].function_id as usize - 1];
                p.string_table[f.name as usize].clone()
            })
            .collect()
    }

    fn profile() -> Profile {
        let mut b = PprofBuilder::new(20, 1_000);
        let read = trace("dd", &["main", "copy", "read"], &["ksys_read", "read_zero"]);
        b.add(&read);
        b.add(&read);
        b.add(&trace("dd", &["main", "copy", "write"], &[]));
        b.finish(5_000_000_001)
    }

    #[test]
    fn go_labels_are_labels_and_part_of_the_key() {
        let mut b = PprofBuilder::new(20, 1_000);
        let plain = trace("svc", &["main", "work"], &[]);
        let with = |v: &str| Trace { labels: vec![("request".into(), v.into())], ..plain.clone() };
        b.add(&with("r1"));
        b.add(&with("r1"));
        b.add(&with("r2"));
        b.add(&plain);
        let p = b.finish(2_000);
        let request = |s: &Sample| -> Option<String> {
            s.label
                .iter()
                .find(|l| p.string_table[l.key as usize] == "request")
                .map(|l| p.string_table[l.str as usize].clone())
        };
        let got: Vec<(Option<String>, i64)> = p.sample.iter().map(|s| (request(s), s.value[0])).collect();
        assert_eq!(got, vec![(Some("r1".into()), 2), (Some("r2".into()), 1), (None, 1)]);
    }

    #[test]
    fn aggregates_stacks_leaf_first_with_values_and_labels() {
        let p = profile();
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.sample.len(), 2);
        let s = &p.sample[0];
        assert_eq!(names(&p, s), ["read_zero", "ksys_read", "read", "copy", "main"]);
        assert_eq!(s.value, vec![2, 2 * 50_000_000]);
        let label = |k: &str| s.label.iter().find(|l| p.string_table[l.key as usize] == k).unwrap().clone();
        assert_eq!(label("pid").num, 1);
        assert_eq!(p.string_table[label("process").str as usize], "dd");
        assert_eq!(p.string_table[label("thread").str as usize], "dd");
        // Shared frames are one location; the kernel ones in one mapping.
        assert_eq!(p.location.len(), 6);
        let kernel = p
            .location
            .iter()
            .find(|l| names(&p, &Sample { location_id: vec![l.id], ..Default::default() })[0] == "read_zero")
            .unwrap();
        assert_eq!(p.string_table[p.mapping[kernel.mapping_id as usize - 1].filename as usize], "[kernel.kallsyms]");
        assert_eq!(p.period, 50_000_000);
        assert_eq!((p.time_nanos, p.duration_nanos), (1_000, 5_000_000_001 - 1_000));
    }

    /// An off-CPU profile sums each stack's nanoseconds off the CPU.
    #[test]
    fn unnamed_frames_are_named_after_their_file_and_address() {
        let mut stripped = trace("svc", &["main"], &[]);
        let mapping = Arc::new(Mapping {
            start: 0x1000,
            end: 0x2000,
            file_offset: 0,
            path: "/usr/bin/svc".into(),
            file_id: None,
            gnu_build_id: None,
            go_build_id: None,
        });
        stripped
            .frames
            .insert(0, Frame { kind: FrameKind::Native, address: 0x1234, mapping: Some(mapping), lines: vec![] });
        stripped
            .frames
            .insert(0, Frame { kind: FrameKind::Kernel, address: 0xffff_0010, mapping: None, lines: vec![] });
        let mut b = PprofBuilder::new(20, 1_000);
        b.add(&stripped);
        let p = b.finish(2_000);
        assert_eq!(
            names(&p, &p.sample[0]),
            [format!("{}+0xffff0010", FrameKind::Kernel.as_str()), "svc+0x1234".into(), "main".into()]
        );
    }

    #[test]
    fn off_cpu_profile_sums_time_off_cpu() {
        let mut b = PprofBuilder::off_cpu(1_000);
        let wait = trace("w", &["main", "waiter"], &["do_nanosleep", "schedule"]);
        b.add(&Trace { off_cpu_ns: Some(100_000_000), ..wait.clone() });
        b.add(&Trace { off_cpu_ns: Some(5), ..wait });
        let p = b.finish(2_000);
        let vt: Vec<_> = p
            .sample_type
            .iter()
            .map(|v| (&*p.string_table[v.r#type as usize], &*p.string_table[v.unit as usize]))
            .collect();
        assert_eq!(vt, vec![("off_cpu", "nanoseconds")]);
        assert_eq!((p.period_type.clone(), p.period), (None, 0));
        assert_eq!(p.sample.len(), 1);
        assert_eq!(p.sample[0].value, vec![100_000_005]);
        assert_eq!(names(&p, &p.sample[0]), ["schedule", "do_nanosleep", "waiter", "main"]);
    }

    #[test]
    fn gzipped_output_decodes_back() {
        let p = profile();
        let mut bytes = Vec::new();
        write_gzipped(&p, &mut bytes).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut raw).unwrap();
        assert_eq!(Profile::decode(&raw[..]).unwrap(), p);
    }

    /// Go's own pprof reads what we write (skipped without a Go toolchain,
    /// except under CI=true where that fails).
    #[test]
    fn go_tool_pprof_reads_it() {
        if let Err(e) = std::process::Command::new("go").arg("version").output() {
            assert!(!std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"), "go is required under CI=true: {e}");
            eprintln!("SKIPPED: no Go toolchain ({e}); under CI=true this fails");
            return;
        }
        let path = std::env::temp_dir().join(format!("ep-pprof-test-{}.pb.gz", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        write_gzipped(&profile(), &mut file).unwrap();
        drop(file);
        let out = std::process::Command::new("go").args(["tool", "pprof", "-traces"]).arg(&path).output().unwrap();
        std::fs::remove_file(&path).ok();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "go tool pprof failed: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("read_zero") && text.contains("ksys_read") && text.contains("write"), "{text}");
        let label = |key: &str| text.lines().any(|l| l.trim().strip_prefix(key).is_some_and(|v| v.trim() == "dd"));
        assert!(label("process:") && label("thread:"), "labels missing: {text}");
    }
}
