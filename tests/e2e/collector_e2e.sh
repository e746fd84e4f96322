#!/usr/bin/env bash
# End to end: ./otelcol-ebpf-profiler (our `profiling` receiver -> otlp_grpc
# exporter) sends to a sink collector (the same binary: otlp receiver ->
# file exporter, proto) on loopback while two workloads run: dd reading
# /dev/zero (kernel chain read_zero <- vfs_read <- ksys_read) and
# tests/workloads/native_chain.c built without frame pointers (native chain
# chain_leaf <- chain_4 <- ... <- main). Once the sink holds both chains it
# is killed; an export attempt during the outage is awaited (and fails),
# then the sink is restarted: the profiler must keep running and deliver to
# the new sink. Every wait polls for its condition and fails at a deadline.
# go-receiver's TestE2EProfiles then decodes both sink files with pdata and
# checks pids, executable and thread names, chains and frame types. The
# profiler's own metrics (samples taken, stacks that reached their root)
# are read from the Collector's Prometheus telemetry endpoint.
#
# Needs root (BPF) and a built ./otelcol-ebpf-profiler (make
# otelcol-ebpf-profiler). Without root it skips, except under CI=true
# where it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
e2e_name=collector_e2e
source tests/e2e/lib.sh
e2e_require_root

metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$tmp/agent.yaml" <<YAML
receivers:
  profiling:
    samples_per_second: 97
    reporter_interval: 1s
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 256
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:$port
    tls:
      insecure: true
    retry_on_failure:
      initial_interval: 200ms
      max_interval: 1s
      max_elapsed_time: 60s
service:
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: $metrics_port
  pipelines:
    profiles:
      receivers: [profiling]
      processors: [memory_limiter]
      exporters: [otlp_grpc]
YAML

build_checker
echo "$e2e_name: sink on 127.0.0.1:$port, files in $tmp"
start_sink "$tmp/sink1.pb" "$tmp/sink1.log"
"$sink_bin" --feature-gates=service.profilesSupport --config "$tmp/agent.yaml" >"$tmp/agent.log" 2>&1 &
agent=$!; pids+=("$agent")
start_workloads
watched=("$agent")

wait_until 120 "the first sink to hold both workloads' chains" profiles_ok "$tmp/sink1.pb"

# A positive sample of metric $1 with label $2 in the telemetry endpoint.
metric_positive() {
  python3 - "$metrics_port" "$1" "$2" <<'PY'
import re, sys, urllib.request
port, name, label = sys.argv[1:]
try:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
except OSError:
    sys.exit(1)
for line in text.splitlines():
    m = re.match(r"(\w+)\{([^}]*)\} (\S+)( \d+)?$", line)
    if m and m.group(1).startswith(name) and label in m.group(2) and float(m.group(3)) > 0:
        sys.exit(0)
sys.exit(1)
PY
}
wait_until 60 "the profiler's sample count in its metrics" \
  metric_positive otelcol_ebpf_profiler_samples 'state="taken"'
wait_until 60 "stacks that reached their root in the profiler's metrics" \
  metric_positive otelcol_ebpf_profiler_unwind_stops 'reason="root"'
echo "$e2e_name: the profiler's own metrics are served"
stop "$sink"
echo "$e2e_name: sink killed"
await_export_attempt 30
kill -0 "$agent" 2>/dev/null || fail "the profiler collector exited while the sink was down"
echo "$e2e_name: an export failed during the outage"
start_sink "$tmp/sink2.pb" "$tmp/sink2.log"
echo "$e2e_name: sink restarted"
wait_until 120 "the restarted sink to hold both workloads' chains" profiles_ok "$tmp/sink2.pb"

stop_workloads
stop "$agent"
stop "$sink"
grep -q "profiler started" "$tmp/agent.log" || fail "the receiver did not start"
grep -q "profiler stopped" "$tmp/agent.log" || fail "the receiver did not stop cleanly"
# Go's and Rust's crash reports; the stats line counts panics the library
# caught (panics_reader, ...), which must all be 0.
if grep -qE "^panic: |panicked at|SIGSEGV|^fatal error: " "$tmp/agent.log"; then fail "the profiler collector crashed"; fi
if grep -qE 'panics_[a-z_]+\\?"?:[1-9]' "$tmp/agent.log"; then fail "the profiler caught a panic (see its stats)"; fi
[ -s "$tmp/sink1.pb" ] || fail "the first sink received nothing"
[ -s "$tmp/sink2.pb" ] || fail "the restarted sink received nothing"
check_profiles "$tmp/sink1.pb" "$tmp/sink2.pb"
echo "$e2e_name: ok"
