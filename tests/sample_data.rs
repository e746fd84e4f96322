//! What each sample carries besides its stack, checked on the OTLP the
//! agent makes from real BPF samples: the wall-clock time of every event
//! (`timestamps_unix_nano`), the CPU it ran on (`cpu.logical_number`) and
//! the process's environment variables named by `include_env_vars`.

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use profiler_agent::{Agent, AgentConfig, StartError, TraceSink};
use profiler_report::otlp::{attr, ExportProfilesServiceRequest, OtlpAggregator, OtlpConfig};
use profiler_tests::{build_c_workload, in_ci, serial, Workload};
use profiler_trace::Trace;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HZ: u32 = 99;

fn now_unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Keeps every trace, and aggregates each reporting interval as the
/// agent's OTLP sink does and keeps the requests.
struct Requests {
    traces: Arc<Mutex<Vec<Trace>>>,
    aggregator: OtlpAggregator,
    out: Arc<Mutex<Vec<ExportProfilesServiceRequest>>>,
}

impl TraceSink for Requests {
    fn on_trace(&mut self, trace: &Trace) {
        self.traces.lock().unwrap().push(trace.clone());
        self.aggregator.add(trace);
    }

    fn on_interval_end(&mut self, _start_unix_ns: u64, end_unix_ns: u64) {
        if let Some(request) = self.aggregator.flush(end_unix_ns) {
            self.out.lock().unwrap().push(request);
        }
    }
}

/// A busy process pinned to CPU 1 with taskset: every sample says CPU 1,
/// every event has a timestamp between the agent's start and stop, sorted
/// within its sample and inside its profile's time range; the one
/// environment variable asked for (of three set) is a resource attribute.
#[test]
fn timestamps_in_interval_and_cpu_of_pinned_process() {
    let _serial = serial();
    assert!(std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2, "needs CPU 1");
    let exe = build_c_workload("busy_loop.c", &["-O2"]);
    let busy = Workload::spawn(
        Command::new("taskset")
            .arg("-c")
            .arg("1")
            .arg(&exe)
            .env("EP_TEST_DEPLOY", "canary")
            .env("EP_TEST_SECRET", "not-asked-for"),
    );
    std::thread::sleep(Duration::from_millis(200));

    let traces = Arc::new(Mutex::new(Vec::new()));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let config = AgentConfig {
        samples_per_second: HZ,
        reporter_interval_ms: 500,
        pids: vec![busy.pid()],
        include_env_vars: vec!["EP_TEST_DEPLOY".into(), "EP_TEST_UNSET".into()],
        ..AgentConfig::default()
    };
    let started = now_unix_ns();
    let sink = Requests {
        traces: traces.clone(),
        aggregator: OtlpAggregator::new(OtlpConfig::new(HZ), started),
        out: requests.clone(),
    };
    let agent = match Agent::start_with_sinks(config, vec![Box::new(sink)]) {
        Ok(agent) => agent,
        Err(StartError::Bpf(e)) if !in_ci() => {
            eprintln!("SKIPPED: BPF is not available here ({e}); under CI=true this fails");
            return;
        }
        Err(e) => panic!("starting the agent: {e}"),
    };
    std::thread::sleep(Duration::from_millis(2_500));
    agent.stop().expect("reader ran without error");
    let stopped = now_unix_ns();

    let traces = std::mem::take(&mut *traces.lock().unwrap());
    // Loose: the machine may be shared (a busy process on 2 loaded CPUs).
    assert!(traces.len() >= 10, "only {} samples of a busy process", traces.len());
    for t in &traces {
        assert_eq!(t.cpu, 1, "a sample of the process pinned to CPU 1 says CPU {}", t.cpu);
        assert!(
            (started..stopped).contains(&t.timestamp_unix_ns),
            "{} outside [{started}, {stopped})",
            t.timestamp_unix_ns
        );
        assert_eq!(t.process.env_vars, vec![("EP_TEST_DEPLOY".into(), "canary".into())]);
    }

    let requests = std::mem::take(&mut *requests.lock().unwrap());
    assert!(requests.len() >= 3, "{} intervals with samples in 2.5 s of 500 ms intervals", requests.len());
    let mut events = 0;
    let mut previous_start = 0;
    for req in &requests {
        let d = req.dictionary.as_ref().unwrap();
        let key = |i: i32| d.string_table[d.attribute_table[i as usize].key_strindex as usize].as_str();
        let value = |i: i32| d.attribute_table[i as usize].value.clone().unwrap().value.unwrap();
        for rp in &req.resource_profiles {
            let env: Vec<_> = rp
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .filter(|kv| kv.key.starts_with(attr::ENV_VAR_PREFIX))
                .map(|kv| (kv.key.as_str(), kv.value.clone().unwrap().value.unwrap()))
                .collect();
            assert_eq!(env, vec![("process.environment_variable.EP_TEST_DEPLOY", Value::StringValue("canary".into()))]);
            let prof = &rp.scope_profiles[0].profiles[0];
            assert!(prof.time_unix_nano >= previous_start, "profiles go back in time");
            previous_start = prof.time_unix_nano;
            let window = prof.time_unix_nano..prof.time_unix_nano + prof.duration_nano;
            for s in &prof.samples {
                let ts = &s.timestamps_unix_nano;
                assert_eq!(ts.len() as i64, s.values[0], "one timestamp per event counted");
                assert!(ts.windows(2).all(|w| w[0] <= w[1]), "timestamps not increasing: {ts:?}");
                assert!(ts.iter().all(|t| window.contains(t)), "timestamps {ts:?} outside {window:?}");
                let cpu: Vec<_> = s
                    .attribute_indices
                    .iter()
                    .filter(|&&i| key(i) == attr::CPU_LOGICAL_NUMBER)
                    .map(|&i| value(i))
                    .collect();
                assert_eq!(cpu, vec![Value::IntValue(1)]);
                events += ts.len();
            }
        }
    }
    assert_eq!(events, traces.len(), "every trace is one timestamp in the OTLP");
}
