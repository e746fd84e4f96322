use std::path::PathBuf;
use std::sync::Arc;

use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use profiler_trace::{FileId, Frame, FrameKind, Mapping, Pid, ProcessInfo, SourceLine, Tid, Trace};
use prost::Message;

use super::*;

fn process(pid: u32, path: &str, container: Option<&str>) -> Arc<ProcessInfo> {
    Arc::new(ProcessInfo {
        pid: Pid(pid),
        executable_path: path.into(),
        executable_name: path.rsplit('/').next().unwrap().into(),
        container_id: container.map(Into::into),
        service_name: path.rsplit('/').next().unwrap().into(),
        env_vars: vec![],
    })
}

fn mapping(start: u64, end: u64, path: &str) -> Mapping {
    Mapping { start, end, file_offset: 0, path: path.into(), file_id: None, gnu_build_id: None, go_build_id: None }
}

fn frame(kind: FrameKind, address: u64, mapping: Option<&Arc<Mapping>>, lines: &[(&str, Option<&str>, u32)]) -> Frame {
    Frame {
        kind,
        address,
        mapping: mapping.cloned(),
        lines: lines
            .iter()
            .map(|&(function, file, line)| SourceLine {
                function: function.into(),
                file: file.map(Into::into),
                line,
                approximate: false,
            })
            .collect(),
    }
}

/// A trace taken on CPU 0 at the Unix epoch + 1 s.
fn trace(process: &Arc<ProcessInfo>, tid: u32, thread: &str, frames: &[Frame]) -> Trace {
    trace_at(process, tid, thread, frames, 0, 1_000_000_000)
}

fn trace_at(process: &Arc<ProcessInfo>, tid: u32, thread: &str, frames: &[Frame], cpu: u32, ts: u64) -> Trace {
    Trace {
        process: Arc::clone(process),
        tid: Tid(tid),
        thread_name: thread.into(),
        cpu,
        timestamp_unix_ns: ts,
        frames: frames.to_vec(),
        off_cpu_ns: None,
        labels: vec![],
    }
}

fn str_value(s: &str) -> Option<AnyValue> {
    Some(AnyValue { value: Some(Value::StringValue(s.into())) })
}

fn int_value(i: i64) -> Option<AnyValue> {
    Some(AnyValue { value: Some(Value::IntValue(i)) })
}

/// A resource attribute as we write them: plain key and value, no
/// references into the string table (Pyroscope reads only plain keys).
fn kv(key: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue { key: key.into(), value, key_strindex: 0 }
}

/// A resource attribute's key and value, checking they are plain.
fn plain(kv: &KeyValue) -> (String, Value) {
    assert_eq!(kv.key_strindex, 0, "resource keys are plain: {kv:?}");
    let value = kv.value.as_ref().and_then(|v| v.value.clone()).expect("value");
    assert!(!matches!(value, Value::StringValueStrindex(_)), "resource values are plain: {kv:?}");
    (kv.key.clone(), value)
}

fn kvu(key_strindex: i32, value: Option<AnyValue>) -> pb::KeyValueAndUnit {
    pb::KeyValueAndUnit { key_strindex, value, unit_strindex: 0 }
}

/// Encodes one small interval, decodes the bytes and checks every field of
/// the result, including the order of every dictionary table.
#[test]
fn encoded_request_decodes_back_field_by_field() {
    let p = process(7, "/bin/app", None);
    let mut app = mapping(0x40_0000, 0x40_9000, "/bin/app");
    app.file_offset = 0x1000;
    app.gnu_build_id = Some("abcd".into());
    let app = Arc::new(app);
    let leaf = frame(FrameKind::Native, 0x1234, Some(&app), &[("inl", Some("a.c"), 3), ("leaf", Some("a.c"), 9)]);
    let kernel = frame(FrameKind::Kernel, 0xffff_ffff_8100_0000, None, &[("k", None, 0)]);

    let mut agg = OtlpAggregator::new(
        OtlpConfig { samples_per_second: 19, scope_version: "v".into(), profile_id_seed: 7, kernel_build_id: None },
        100,
    );
    assert!(agg.is_empty());
    agg.add(&trace_at(&p, 7, "main", &[kernel.clone(), leaf.clone()], 1, 300));
    agg.add(&trace_at(&p, 7, "main", &[kernel.clone(), leaf.clone()], 1, 200));
    agg.add(&trace_at(&p, 8, "io", std::slice::from_ref(&leaf), 0, 150));
    // Same thread and stack on another CPU: another sample.
    agg.add(&trace_at(&p, 7, "main", &[kernel.clone(), leaf.clone()], 2, 250));
    assert_eq!(agg.trace_count(), 4);

    let bytes = encode(&agg.flush(5_100).expect("samples"));
    assert!(agg.is_empty());
    assert_eq!(agg.interval_start_unix_ns(), 5_100);
    let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("decodes");

    let d = req.dictionary.expect("dictionary");
    // Interning order: kernel frame (its vmlinux mapping, function, frame
    // type), then the leaf's
    // mapping (path, build id), functions, frame type; then thread
    // attributes; the value types last, at flush.
    assert_eq!(
        d.string_table,
        vec![
            "",
            "vmlinux",
            "k",
            "profile.frame.type",
            "/bin/app",
            "process.executable.build_id.gnu",
            "inl",
            "a.c",
            "leaf",
            "thread.name",
            "thread.id",
            "cpu.logical_number",
            "samples",
            "count",
            "cpu",
            "nanoseconds",
        ]
    );
    assert_eq!(
        d.function_table,
        vec![
            pb::Function::default(),
            pb::Function { name_strindex: 2, system_name_strindex: 0, filename_strindex: 0, start_line: 0 },
            pb::Function { name_strindex: 6, system_name_strindex: 0, filename_strindex: 7, start_line: 0 },
            pb::Function { name_strindex: 8, system_name_strindex: 0, filename_strindex: 7, start_line: 0 },
        ]
    );
    assert_eq!(
        d.attribute_table,
        vec![
            pb::KeyValueAndUnit::default(),
            kvu(3, str_value("kernel")),
            kvu(5, str_value("abcd")),
            kvu(3, str_value("native")),
            kvu(9, str_value("main")),
            kvu(10, int_value(7)),
            kvu(11, int_value(1)),
            kvu(9, str_value("io")),
            kvu(10, int_value(8)),
            kvu(11, int_value(0)),
            kvu(11, int_value(2)),
        ]
    );
    assert_eq!(
        d.mapping_table,
        vec![
            pb::Mapping::default(),
            pb::Mapping {
                memory_start: 0,
                memory_limit: u64::MAX,
                file_offset: 0,
                filename_strindex: 1,
                attribute_indices: vec![],
            },
            pb::Mapping {
                memory_start: 0x40_0000,
                memory_limit: 0x40_9000,
                file_offset: 0x1000,
                filename_strindex: 4,
                attribute_indices: vec![2],
            },
        ]
    );
    assert_eq!(
        d.location_table,
        vec![
            pb::Location::default(),
            pb::Location {
                mapping_index: 1,
                address: 0xffff_ffff_8100_0000,
                lines: vec![pb::Line { function_index: 1, line: 0, column: 0 }],
                attribute_indices: vec![1],
            },
            pb::Location {
                mapping_index: 2,
                address: 0x1234,
                lines: vec![
                    pb::Line { function_index: 2, line: 3, column: 0 },
                    pb::Line { function_index: 3, line: 9, column: 0 },
                ],
                attribute_indices: vec![3],
            },
        ]
    );
    assert_eq!(
        d.stack_table,
        vec![pb::Stack::default(), pb::Stack { location_indices: vec![1, 2] }, pb::Stack { location_indices: vec![2] },]
    );
    assert_eq!(d.link_table, vec![pb::Link::default()]);

    assert_eq!(req.resource_profiles.len(), 1);
    let rp = &req.resource_profiles[0];
    assert_eq!(
        rp.resource.as_ref().expect("resource").attributes,
        vec![
            kv("service.name", str_value("app")),
            kv("process.pid", int_value(7)),
            kv("process.executable.name", str_value("app")),
            kv("process.executable.path", str_value("/bin/app")),
        ]
    );
    assert_eq!(rp.scope_profiles.len(), 1);
    let sp = &rp.scope_profiles[0];
    let scope = sp.scope.as_ref().expect("scope");
    assert_eq!((scope.name.as_str(), scope.version.as_str()), ("ebpf-profiler", "v"));
    assert_eq!(sp.profiles.len(), 1);
    let prof = &sp.profiles[0];
    assert_eq!(prof.sample_type, Some(pb::ValueType { type_strindex: 12, unit_strindex: 13 }));
    assert_eq!(prof.period_type, Some(pb::ValueType { type_strindex: 14, unit_strindex: 15 }));
    assert_eq!(prof.period, 1_000_000_000 / 19);
    assert_eq!(prof.time_unix_nano, 100);
    assert_eq!(prof.duration_nano, 5_000);
    assert_eq!(prof.profile_id, profile_id(7, 1));
    assert_eq!(prof.profile_id.len(), 16);
    assert!(prof.attribute_indices.is_empty());
    assert_eq!(
        prof.samples,
        vec![
            // Timestamps sorted, one per event of the count.
            pb::Sample {
                stack_index: 1,
                attribute_indices: vec![4, 5, 6],
                link_index: 0,
                values: vec![2],
                timestamps_unix_nano: vec![200, 300],
            },
            pb::Sample {
                stack_index: 2,
                attribute_indices: vec![7, 8, 9],
                link_index: 0,
                values: vec![1],
                timestamps_unix_nano: vec![150],
            },
            pb::Sample {
                stack_index: 1,
                attribute_indices: vec![4, 5, 10],
                link_index: 0,
                values: vec![1],
                timestamps_unix_nano: vec![250],
            },
        ]
    );
}

#[test]
fn profile_ids_are_distinct_and_nonzero() {
    let p1 = process(1, "/bin/a", None);
    let p2 = process(2, "/bin/b", None);
    let f = frame(FrameKind::Native, 1, None, &[("f", None, 0)]);
    let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 0);
    let mut ids = std::collections::HashSet::new();
    for end in 2_000_000_000..=2_000_000_002 {
        agg.add(&trace(&p1, 1, "a", std::slice::from_ref(&f)));
        agg.add(&trace(&p2, 2, "b", std::slice::from_ref(&f)));
        for rp in agg.flush(end).unwrap().resource_profiles {
            let id = rp.scope_profiles[0].profiles[0].profile_id.clone();
            assert_eq!(id.len(), 16);
            assert!(id.iter().any(|&b| b != 0));
            assert!(ids.insert(id), "profile ids repeat");
        }
    }
    assert_eq!(ids.len(), 6);
    assert_ne!(OtlpConfig::new(20).profile_id_seed, OtlpConfig::new(20).profile_id_seed);
}

/// A sample that waited (late unwinding) and predates the interval moves
/// the profile's start back to it; the duration still ends at the flush.
#[test]
fn profile_starts_at_oldest_timestamp() {
    let p = process(1, "/bin/a", None);
    let f = frame(FrameKind::Native, 1, None, &[("f", None, 0)]);
    let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 1_000);
    agg.add(&trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, 1_500));
    agg.add(&trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, 700));
    let req = agg.flush(2_000).unwrap();
    let prof = &req.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!((prof.time_unix_nano, prof.duration_nano), (700, 1_300));
    assert_eq!(prof.samples[0].timestamps_unix_nano, vec![700, 1_500]);
    assert_eq!(agg.interval_start_unix_ns(), 2_000);
}

/// Off-CPU traces make a second profile of the process, first as the
/// reference orders them (`off_cpu` before `samples`): sample type
/// `off_cpu/nanoseconds`, no period, one value per timestamp (sorted
/// together); the on-CPU profile is what it would be alone.
#[test]
fn off_cpu_traces_make_a_second_profile() {
    let p = process(1, "/bin/a", None);
    let f = frame(FrameKind::Kernel, 1, None, &[("schedule", None, 0)]);
    let off =
        |ts: u64, ns: u64| Trace { off_cpu_ns: Some(ns), ..trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, ts) };
    let mut agg = OtlpAggregator::new(
        OtlpConfig { samples_per_second: 20, scope_version: "v".into(), profile_id_seed: 1, kernel_build_id: None },
        100,
    );
    agg.add(&off(300, 7_000));
    agg.add(&trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, 150));
    agg.add(&off(200, 5_000));
    agg.add(&Trace { thread_name: "b".into(), ..off(250, 1) });
    assert_eq!(agg.trace_count(), 4);
    let req = agg.flush(1_000).unwrap();
    let d = req.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].as_str();
    let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2);
    let (off_prof, on_prof) = (&profiles[0], &profiles[1]);
    let st = off_prof.sample_type.unwrap();
    assert_eq!((s(st.type_strindex), s(st.unit_strindex)), ("off_cpu", "nanoseconds"));
    assert_eq!((off_prof.period_type, off_prof.period), (None, 0));
    assert_eq!(off_prof.samples.len(), 2);
    assert_eq!(off_prof.samples[0].values, vec![5_000, 7_000]);
    assert_eq!(off_prof.samples[0].timestamps_unix_nano, vec![200, 300]);
    assert_eq!(
        (off_prof.samples[1].values.clone(), off_prof.samples[1].timestamps_unix_nano.clone()),
        (vec![1], vec![250])
    );
    let st = on_prof.sample_type.unwrap();
    assert_eq!((s(st.type_strindex), s(st.unit_strindex)), ("samples", "count"));
    assert_eq!(on_prof.period, 50_000_000);
    assert_eq!(on_prof.samples.len(), 1);
    assert_eq!(
        (on_prof.samples[0].values.clone(), on_prof.samples[0].timestamps_unix_nano.clone()),
        (vec![1], vec![150])
    );
    assert_ne!(off_prof.profile_id, on_prof.profile_id);
    assert_eq!((off_prof.time_unix_nano, on_prof.time_unix_nano), (100, 100));
}

/// Go pprof labels: sample attributes `process.context.label.<key>`,
/// and part of the key (same stack and labels aggregate, other labels do
/// not).
#[test]
fn labels_are_sample_attributes_and_split_samples() {
    let p = process(1, "/bin/a", None);
    let f = frame(FrameKind::Go, 1, None, &[("main.work", None, 0)]);
    let labelled = |ts: u64, labels: &[(&str, &str)]| Trace {
        labels: labels.iter().map(|&(k, v)| (k.into(), v.into())).collect(),
        ..trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, ts)
    };
    let mut agg = OtlpAggregator::new(
        OtlpConfig { samples_per_second: 20, scope_version: "v".into(), profile_id_seed: 1, kernel_build_id: None },
        100,
    );
    agg.add(&labelled(110, &[("request", "r1")]));
    agg.add(&labelled(120, &[("request", "r2"), ("user", "u")]));
    agg.add(&labelled(130, &[("request", "r1")]));
    agg.add(&labelled(140, &[]));
    let req = agg.flush(1_000).unwrap();
    let d = req.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].as_str();
    let attrs = |sample: &pb::Sample| -> Vec<(String, String)> {
        sample
            .attribute_indices
            .iter()
            .map(|&i| {
                let a = &d.attribute_table[i as usize];
                let value = match a.value.as_ref().and_then(|v| v.value.clone()) {
                    Some(Value::StringValue(v)) => v,
                    Some(Value::IntValue(i)) => i.to_string(),
                    other => panic!("{other:?}"),
                };
                (s(a.key_strindex).to_string(), value)
            })
            .collect()
    };
    let samples = &req.resource_profiles[0].scope_profiles[0].profiles[0].samples;
    type Attrs = Vec<(String, String)>;
    let got: Vec<(Attrs, Vec<i64>)> = samples.iter().map(|x| (attrs(x), x.values.clone())).collect();
    let thread = |mut v: Vec<(String, String)>| {
        v.extend(
            [("thread.name", "a"), ("thread.id", "1"), ("cpu.logical_number", "0")].map(|(k, v)| (k.into(), v.into())),
        );
        v
    };
    let label = |k: &str, v: &str| (format!("process.context.label.{k}"), v.to_string());
    assert_eq!(
        got,
        vec![
            (thread(vec![label("request", "r1")]), vec![2]),
            (thread(vec![label("request", "r2"), label("user", "u")]), vec![1]),
            (thread(vec![]), vec![1]),
        ]
    );
}

#[test]
fn empty_interval_gives_nothing_and_advances() {
    let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 10);
    assert!(agg.flush(20).is_none());
    assert_eq!(agg.interval_start_unix_ns(), 20);
}

#[test]
fn intervals_do_not_share_tables() {
    let p = process(1, "/bin/a", Some("c0ffee"));
    let f = frame(FrameKind::Native, 1, None, &[("f", None, 0)]);
    let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 0);
    agg.add(&trace_at(&p, 1, "a", std::slice::from_ref(&f), 0, 1));
    let first = agg.flush(2).unwrap();
    agg.add(&trace_at(&p, 1, "a", &[f], 0, 3));
    let second = agg.flush(4).unwrap();
    assert_eq!(first.dictionary, second.dictionary);
    assert_eq!(second.resource_profiles[0].scope_profiles[0].profiles[0].time_unix_nano, 2);
    let attrs = &second.resource_profiles[0].resource.as_ref().unwrap().attributes;
    assert_eq!(plain(&attrs[4]), ("container.id".to_owned(), Value::StringValue("c0ffee".into())));
}

/// Processes come out sorted by pid; the same mapping and frame seen in two
/// processes are stored once.
#[test]
fn processes_sorted_and_tables_shared_across_processes() {
    let libc = Arc::new(mapping(0x7f00_0000, 0x7f10_0000, "/lib/libc.so.6"));
    let f = frame(FrameKind::Native, 0x2000, Some(&libc), &[("write", None, 0)]);
    let (a, b) = (process(20, "/bin/b", None), process(10, "/bin/a", None));
    let mut agg = OtlpAggregator::new(OtlpConfig::new(20), 0);
    agg.add(&trace(&a, 20, "b", std::slice::from_ref(&f)));
    agg.add(&trace(&b, 10, "a", std::slice::from_ref(&f)));
    let req = agg.flush(2_000_000_000).unwrap();
    let pids: Vec<_> =
        req.resource_profiles.iter().map(|rp| plain(&rp.resource.as_ref().unwrap().attributes[1])).collect();
    assert_eq!(
        pids,
        vec![("process.pid".to_owned(), Value::IntValue(10)), ("process.pid".to_owned(), Value::IntValue(20))]
    );
    let d = req.dictionary.unwrap();
    assert_eq!(d.mapping_table.len(), 2);
    assert_eq!(d.location_table.len(), 2);
    assert_eq!(d.stack_table.len(), 2);
}

// ---------------------------------------------------------------------------
// The golden payload: crates/report/testdata/golden_profiles.pb, decoded by
// go-receiver's Go test with pdata's pprofile. Its content is described in
// crates/report/testdata/README.md; change both together.

/// Interval of the golden payload.
const GOLDEN_START_NS: u64 = 1_700_000_000_000_000_000;
const GOLDEN_END_NS: u64 = GOLDEN_START_NS + 5_000_000_000;

/// The golden request: two processes, kernel + native frames (one inlined
/// function, one unsymbolized frame) and Go frames.
pub(super) fn golden_request() -> ExportProfilesServiceRequest {
    // Started with DEPLOYMENT=canary, reported (include_env_vars).
    let workload = Arc::new(ProcessInfo {
        env_vars: vec![("DEPLOYMENT".into(), "canary".into())],
        ..ProcessInfo::clone(&process(1234, "/usr/bin/workload", Some("0123456789abcdef")))
    });
    // A process that names its service (OTEL_SERVICE_NAME=checkout).
    let server = Arc::new(ProcessInfo {
        service_name: "checkout".into(),
        ..ProcessInfo::clone(&process(4242, "/usr/local/bin/server", None))
    });

    let mut exe = mapping(0x55_5555_4000, 0x55_5555_9000, "/usr/bin/workload");
    exe.file_offset = 0x1000;
    exe.file_id = Some(FileId(*b"\x01\x23\x45\x67\x89\xab\xcd\xef\xfe\xdc\xba\x98\x76\x54\x32\x10"));
    exe.gnu_build_id = Some("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b".into());
    let exe = Arc::new(exe);
    let mut libc = mapping(0x7f00_0002_8000, 0x7f00_001b_d000, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    libc.file_offset = 0x28000;
    libc.gnu_build_id = Some("2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e".into());
    let libc = Arc::new(libc);
    let mut go = mapping(0x40_0000, 0x80_0000, "/usr/local/bin/server");
    go.file_id = Some(FileId([0xaa; 16]));
    go.go_build_id = Some("goBuildId/abc/def/ghi".into());
    let go = Arc::new(go);

    let k_sleep = frame(FrameKind::Kernel, 0xffff_ffff_8110_0000, None, &[("hrtimer_nanosleep", None, 0)]);
    let k_syscall = frame(FrameKind::Kernel, 0xffff_ffff_81f0_0000, None, &[("do_syscall_64", None, 0)]);
    let c_nanosleep = frame(FrameKind::Native, 0xe_a000, Some(&libc), &[("clock_nanosleep", None, 0)]);
    let c_leaf = frame(
        FrameKind::Native,
        0x1150,
        Some(&exe),
        &[("inlined_helper", Some("workload.c"), 5), ("leaf", Some("workload.c"), 12)],
    );
    let c_middle = frame(FrameKind::Native, 0x1180, Some(&exe), &[("middle", Some("workload.c"), 20)]);
    let c_main = frame(FrameKind::Native, 0x11b0, Some(&exe), &[("main", Some("workload.c"), 30)]);
    let c_start = frame(FrameKind::Native, 0x2_9d90, Some(&libc), &[("__libc_start_call_main", None, 0)]);
    let c_stripped = frame(FrameKind::Native, 0x1234, Some(&exe), &[]);
    let go_work = frame(FrameKind::Go, 0x48_1000, Some(&go), &[("main.work", Some("/src/server/main.go"), 20)]);
    let go_main = frame(FrameKind::Go, 0x48_2000, Some(&go), &[("main.main", Some("/src/server/main.go"), 10)]);
    let go_rt = frame(FrameKind::Go, 0x43_0000, Some(&go), &[("runtime.main", Some("/go/src/runtime/proc.go"), 283)]);

    let sleep_stack = [k_sleep, k_syscall.clone(), c_nanosleep, c_leaf, c_middle, c_main.clone(), c_start.clone()];
    let stripped_stack = [c_stripped, c_main, c_start];
    let go_stack = [k_syscall, go_work, go_main, go_rt];

    let mut agg = OtlpAggregator::new(
        OtlpConfig {
            samples_per_second: 20,
            scope_version: "golden".into(),
            profile_id_seed: 0x0060_1de2,
            kernel_build_id: Some("fa36776b59bf96ada9b36526d3ba1705c7a98183".into()),
        },
        GOLDEN_START_NS,
    );
    // Sample n is taken at GOLDEN_START_NS + n * 100 ms.
    let at = |n: u64| GOLDEN_START_NS + n * 100_000_000;
    for n in 0..3 {
        agg.add(&trace_at(&workload, 1235, "worker", &sleep_stack, 1, at(n)));
    }
    for n in 3..5 {
        agg.add(&trace_at(&workload, 1234, "workload", &sleep_stack, 0, at(n)));
    }
    agg.add(&trace_at(&workload, 1235, "worker", &stripped_stack, 1, at(5)));
    // Off-CPU: the main thread switched out in the sleep at 450 ms (50 ms
    // off the CPU) and at 150 ms (100 ms off).
    for (ts, ns) in [(at(4) + 50_000_000, 50_000_000), (at(1) + 50_000_000, 100_000_000)] {
        agg.add(&Trace { off_cpu_ns: Some(ns), ..trace_at(&workload, 1234, "workload", &sleep_stack, 0, ts) });
    }
    for n in 6..10 {
        agg.add(&trace_at(&server, 4250, "server-worker", &go_stack, 3, at(n)));
    }
    agg.flush(GOLDEN_END_NS).expect("golden samples")
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/golden_profiles.pb")
}

/// Fails when the committed golden payload differs from what the encoder
/// produces now. Regenerate with `UPDATE_GOLDEN=1 cargo test -p
/// profiler-report golden` and rerun the Go test (`make test-go`).
#[test]
fn golden_payload_is_fresh() {
    let bytes = encode(&golden_request());
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &bytes).expect("write golden payload");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; run UPDATE_GOLDEN=1 cargo test -p profiler-report golden", path.display())
    });
    assert!(
        committed == bytes,
        "{} is stale; run UPDATE_GOLDEN=1 cargo test -p profiler-report golden, then make test-go",
        path.display()
    );
}

/// Spot checks of the golden request itself, so that a wrong golden cannot
/// be regenerated silently; the Go test checks the same facts after pdata
/// decoded the bytes.
#[test]
fn golden_request_content() {
    let req = golden_request();
    let d = req.dictionary.as_ref().unwrap();
    let s = |i: i32| d.string_table[i as usize].as_str();
    let names = |stack: i32| -> Vec<Vec<&str>> {
        d.stack_table[stack as usize]
            .location_indices
            .iter()
            .map(|&l| {
                d.location_table[l as usize]
                    .lines
                    .iter()
                    .map(|line| s(d.function_table[line.function_index as usize].name_strindex))
                    .collect()
            })
            .collect()
    };
    assert_eq!(req.resource_profiles.len(), 2);
    let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2, "off-CPU then on-CPU");
    assert_eq!(s(profiles[0].sample_type.unwrap().type_strindex), "off_cpu");
    let off = &profiles[0].samples;
    assert_eq!(off.len(), 1);
    assert_eq!(off[0].values, vec![100_000_000, 50_000_000]);
    assert_eq!(off[0].timestamps_unix_nano, vec![GOLDEN_START_NS + 150_000_000, GOLDEN_START_NS + 450_000_000]);
    let samples = &profiles[1].samples;
    assert_eq!(samples.iter().map(|s| s.values[0]).collect::<Vec<_>>(), vec![3, 2, 1]);
    assert_eq!(
        names(samples[0].stack_index),
        vec![
            vec!["hrtimer_nanosleep"],
            vec!["do_syscall_64"],
            vec!["clock_nanosleep"],
            vec!["inlined_helper", "leaf"],
            vec!["middle"],
            vec!["main"],
            vec!["__libc_start_call_main"],
        ]
    );
    assert_eq!(samples[0].stack_index, samples[1].stack_index);
    // The stripped frame is named after its file and address.
    assert_eq!(
        names(samples[2].stack_index),
        vec![vec!["workload+0x1234"], vec!["main"], vec!["__libc_start_call_main"]]
    );
    let go_samples = &req.resource_profiles[1].scope_profiles[0].profiles[0].samples;
    assert_eq!(go_samples.len(), 1);
    assert_eq!(go_samples[0].values, vec![4]);
    // 11 distinct frames (do_syscall_64 shared by both processes) + zero value.
    assert_eq!(d.location_table.len(), 12);
    // Kernel frames share one vmlinux mapping with the kernel's build id.
    assert_eq!(d.mapping_table.len(), 5);
    let vmlinux = &d.mapping_table[1];
    assert_eq!(s(vmlinux.filename_strindex), "vmlinux");
    let build_id = &d.attribute_table[vmlinux.attribute_indices[0] as usize];
    assert_eq!(s(build_id.key_strindex), "process.executable.build_id.gnu");
    assert_eq!(
        build_id.value.as_ref().and_then(|v| v.value.clone()),
        Some(Value::StringValue("fa36776b59bf96ada9b36526d3ba1705c7a98183".into()))
    );
    assert_eq!(d.stack_table.len(), 4);
}

#[test]
fn locations_and_stacks_are_shared_by_content() {
    let m = Arc::new(mapping(0x1000, 0x2000, "/bin/app"));
    let same_m = Arc::new(mapping(0x1000, 0x2000, "/bin/app"));
    let other_m = Arc::new(mapping(0x5000, 0x6000, "/bin/app"));
    let mut d = dictionary::Dictionary::new();
    let a = frame(FrameKind::Native, 0x10, Some(&m), &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]);
    let first = d.location(&a);
    // The same content in another Arc: the same location.
    let a2 = frame(FrameKind::Native, 0x10, Some(&same_m), &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]);
    assert_eq!(d.location(&a2), first);
    // Any one field different: another location each.
    let others = [
        frame(FrameKind::Native, 0x11, Some(&m), &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]),
        frame(FrameKind::Native, 0x10, Some(&other_m), &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]),
        frame(FrameKind::Go, 0x10, Some(&m), &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]),
        frame(FrameKind::Native, 0x10, Some(&m), &[("inl", Some("a.c"), 4), ("f", Some("a.c"), 9)]),
        frame(FrameKind::Native, 0x10, Some(&m), &[("f", Some("a.c"), 9)]),
        frame(FrameKind::Native, 0x10, Some(&m), &[]),
        frame(FrameKind::Native, 0x10, None, &[("inl", Some("a.c"), 3), ("f", Some("a.c"), 9)]),
    ];
    let indices: Vec<i32> = others.iter().map(|f| d.location(f)).collect();
    assert_eq!(indices, (2..=8).collect::<Vec<i32>>(), "location 1 is the first frame's");
    assert_eq!(others.iter().map(|f| d.location(f)).collect::<Vec<i32>>(), indices, "found again");
    // Stacks: the same locations in the same order, the same stack.
    let s1 = d.stack(&[first, 2, 3]);
    assert_eq!((d.stack(&[first, 2, 3]), d.stack(&[3, 2, first]), d.stack(&[])), (s1, s1 + 1, 0));
    let t = d.take();
    assert_eq!(t.location_table.len(), 9);
    assert_eq!(t.location_table[1].lines.len(), 2);
    assert_eq!(t.stack_table.len(), 3);
}

#[test]
fn approximate_frames_carry_their_attribute() {
    let mut d = dictionary::Dictionary::new();
    let exact =
        frame(FrameKind::Jvm, 0x40, None, &[("Cmp.compare", Some("Cmp.java"), 7), ("TimSort.mergeHi", None, 9)]);
    let mut guessed = exact.clone();
    for l in &mut guessed.lines {
        l.approximate = true;
    }
    let (e, g) = (d.location(&exact), d.location(&guessed));
    assert_ne!(e, g, "a guess is another location than the same lines known");
    assert_eq!((d.location(&exact), d.location(&guessed)), (e, g), "each found again");
    let t = d.take();
    let attrs = |i: i32| -> Vec<(String, Option<AnyValue>)> {
        t.location_table[i as usize]
            .attribute_indices
            .iter()
            .map(|&a| {
                let kv = &t.attribute_table[a as usize];
                (t.string_table[kv.key_strindex as usize].clone(), kv.value.clone())
            })
            .collect()
    };
    assert_eq!(attrs(e), [("profile.frame.type".to_string(), str_value("jvm"))]);
    assert_eq!(
        attrs(g),
        [
            ("profile.frame.type".to_string(), str_value("jvm")),
            ("profile.frame.approximate".to_string(), Some(AnyValue { value: Some(Value::BoolValue(true)) })),
        ]
    );
}
