#!/usr/bin/env bash
# End to end for the standalone agent's OTLP path: ./ebpf-profiler
# -collection-agent 127.0.0.1:PORT -disable-tls sends to a sink collector
# (./otelcol-ebpf-profiler: otlp receiver -> file exporter, proto) while
# `dd if=/dev/zero of=/dev/null` runs. Midway the sink is killed and
# restarted: the agent must keep running, count what it dropped and
# deliver to the new sink. go-receiver's TestE2EProfiles then checks both
# sink files with pdata (pid, names, dd's kernel chain).
#
# Needs root, ./ebpf-profiler (make agent) and ./otelcol-ebpf-profiler
# (make otelcol-ebpf-profiler). Skips while the agent has no
# -collection-agent flag.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
agent_bin=$root/ebpf-profiler
sink_bin=$root/otelcol-ebpf-profiler

if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then echo "agent_otlp_e2e: needs root under CI" >&2; exit 1; fi
  echo "agent_otlp_e2e: SKIP (needs root)"; exit 0
fi
[ -x "$agent_bin" ] || { echo "agent_otlp_e2e: $agent_bin missing: run make agent" >&2; exit 1; }
[ -x "$sink_bin" ] || { echo "agent_otlp_e2e: $sink_bin missing: run make otelcol-ebpf-profiler" >&2; exit 1; }
if ! "$agent_bin" --help 2>&1 | grep -q -- "collection-agent"; then
  echo "agent_otlp_e2e: SKIP (ebpf-profiler has no -collection-agent flag yet)"; exit 0
fi

tmp=$(mktemp -d /tmp/agent-otlp-e2e.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_E2E_TMP:-}" = "" ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi
}
trap cleanup EXIT
fail() { echo "agent_otlp_e2e: FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done; exit 1; }

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

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
start_sink() { # $1: output file, $2: log
  SINK_FILE=$1 "$sink_bin" --feature-gates=service.profilesSupport --config "$tmp/sink.yaml" >"$2" 2>&1 &
  sink=$!; pids+=("$sink")
  wait_port || fail "the sink did not listen on 127.0.0.1:$port"
}
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

start_sink "$tmp/sink1.pb" "$tmp/sink1.log"
"$agent_bin" -collection-agent "127.0.0.1:$port" -disable-tls -samples-per-second 97 \
  -reporter-interval 1s -output "$tmp/agent.folded" >"$tmp/agent.log" 2>&1 &
agent=$!; pids+=("$agent")
dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null &
dd_pid=$!; pids+=("$dd_pid")

sleep 6
kill -0 "$agent" 2>/dev/null || fail "the agent exited"
stop "$sink"
sleep 4
kill -0 "$agent" 2>/dev/null || fail "the agent exited while the sink was down"
start_sink "$tmp/sink2.pb" "$tmp/sink2.log"
sleep 8

stop "$dd_pid"
stop "$agent"
stop "$sink"
if grep -qE "panicked|SIGSEGV" "$tmp/agent.log"; then fail "the agent crashed"; fi
# The exit summary counts the export attempts that failed while the sink
# was down (and what was dropped, if the outage outlasted the retries).
grep -qE "[1-9][0-9]* failed attempts" "$tmp/agent.log" || fail "the agent's summary shows no failed export attempt during the outage"
[ -s "$tmp/sink1.pb" ] || fail "the first sink received nothing"
[ -s "$tmp/sink2.pb" ] || fail "the restarted sink received nothing"

cd go-receiver
EBPF_PROFILER_E2E_FILES="$tmp/sink1.pb,$tmp/sink2.pb" \
EBPF_PROFILER_E2E_PID=$dd_pid \
EBPF_PROFILER_E2E_NAME=dd \
EBPF_PROFILER_E2E_CHAIN=read_zero,vfs_read,ksys_read \
EBPF_PROFILER_E2E_FRAME_TYPE=kernel \
  go test -count=1 -run TestE2EProfiles -v . || fail "the received profiles are not as expected"
echo "agent_otlp_e2e: ok"
