#!/usr/bin/env bash
# End to end: ./otelcol-ebpf-profiler (our `profiling` receiver -> otlp_grpc
# exporter) sends to a sink collector (the same binary: otlp receiver ->
# file exporter, proto) on loopback while `dd if=/dev/zero of=/dev/null`
# runs. Midway the sink is killed and restarted: the profiler must keep
# running and deliver to the new sink. Then go-receiver's TestE2EProfiles
# decodes both sink files with pdata and checks dd's pid, executable and
# thread names and its kernel chain read_zero <- vfs_read <- ksys_read.
#
# Needs root (BPF) and a built ./otelcol-ebpf-profiler (make
# otelcol-ebpf-profiler). Without root it skips, except under CI=true
# where it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/otelcol-ebpf-profiler

if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then echo "collector_e2e: needs root under CI" >&2; exit 1; fi
  echo "collector_e2e: SKIP (needs root)"; exit 0
fi
[ -x "$bin" ] || { echo "collector_e2e: $bin missing: run make otelcol-ebpf-profiler" >&2; exit 1; }

tmp=$(mktemp -d /tmp/collector-e2e.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_E2E_TMP:-}" = "" ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi
}
trap cleanup EXIT
fail() { echo "collector_e2e: FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done; exit 1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

cat > "$tmp/sink.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$port
exporters:
  file:
    path: \${env:SINK_FILE}
    format: proto
    flush_interval: 200ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
YAML

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
      level: none
  pipelines:
    profiles:
      receivers: [profiling]
      processors: [memory_limiter]
      exporters: [otlp_grpc]
YAML

gate=--feature-gates=service.profilesSupport
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
start_sink() { # $1: output file, $2: log
  SINK_FILE=$1 "$bin" "$gate" --config "$tmp/sink.yaml" >"$2" 2>&1 &
  sink=$!; pids+=("$sink")
  wait_port || fail "the sink did not listen on 127.0.0.1:$port"
}
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

echo "collector_e2e: sink on 127.0.0.1:$port, files in $tmp"
start_sink "$tmp/sink1.pb" "$tmp/sink1.log"

"$bin" "$gate" --config "$tmp/agent.yaml" >"$tmp/agent.log" 2>&1 &
agent=$!; pids+=("$agent")

dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null &
dd_pid=$!; pids+=("$dd_pid")

sleep 6
kill -0 "$agent" 2>/dev/null || fail "the profiler collector exited"
stop "$sink"
echo "collector_e2e: sink killed"
sleep 4
kill -0 "$agent" 2>/dev/null || fail "the profiler collector exited while the sink was down"
start_sink "$tmp/sink2.pb" "$tmp/sink2.log"
echo "collector_e2e: sink restarted"
sleep 8

stop "$dd_pid"
stop "$agent"
stop "$sink"
grep -q "profiler started" "$tmp/agent.log" || fail "the receiver did not start"
grep -q "profiler stopped" "$tmp/agent.log" || fail "the receiver did not stop cleanly"
if grep -qE "panic|SIGSEGV|fatal error" "$tmp/agent.log"; then fail "the profiler collector crashed"; fi
[ -s "$tmp/sink1.pb" ] || fail "the first sink received nothing"
[ -s "$tmp/sink2.pb" ] || fail "the restarted sink received nothing"

cd go-receiver
EBPF_PROFILER_E2E_FILES="$tmp/sink1.pb,$tmp/sink2.pb" \
EBPF_PROFILER_E2E_PID=$dd_pid \
EBPF_PROFILER_E2E_NAME=dd \
EBPF_PROFILER_E2E_CHAIN=read_zero,vfs_read,ksys_read \
EBPF_PROFILER_E2E_FRAME_TYPE=kernel \
  go test -count=1 -run TestE2EProfiles -v . || fail "the received profiles are not as expected"
echo "collector_e2e: ok"
