#!/usr/bin/env bash
# End to end for the standalone agent's OTLP path: ./ebpf-profiler
# -collection-agent 127.0.0.1:PORT -disable-tls sends to a sink collector
# (./otelcol-ebpf-profiler: otlp receiver -> file exporter, proto) while
# the workloads of lib.sh run. Once the sink holds both workloads' chains it
# is killed; an export attempt during the outage is awaited (and fails),
# then the sink is restarted: the agent must keep running, count the failed
# exports (and what it dropped) and deliver to the new sink. Every wait
# polls for its condition and fails at a deadline. go-receiver's TestE2EProfiles then checks
# both sink files with pdata.
#
# Needs root, ./ebpf-profiler (make agent) and ./otelcol-ebpf-profiler
# (make otelcol-ebpf-profiler).
set -euo pipefail
cd "$(dirname "$0")/../.."
e2e_name=agent_otlp_e2e
source tests/e2e/lib.sh
e2e_require_root
agent_bin=$root/ebpf-profiler
[ -x "$agent_bin" ] || fail "$agent_bin missing: run make agent"
if ! "$agent_bin" --help 2>&1 | grep -q -- "collection-agent"; then
  [ "${CI:-}" = true ] && fail "$agent_bin has no -collection-agent flag"
  echo "$e2e_name: SKIP (ebpf-profiler has no -collection-agent flag)"; exit 0
fi

build_checker
echo "$e2e_name: sink on 127.0.0.1:$port, files in $tmp"
start_sink "$tmp/sink1.pb" "$tmp/sink1.log"
"$agent_bin" -collection-agent "127.0.0.1:$port" -disable-tls -samples-per-second 97 \
  -reporter-interval 1s -output "$tmp/agent.folded" >"$tmp/agent.log" 2>&1 &
agent=$!; pids+=("$agent")
start_workloads
watched=("$agent")

wait_until 120 "the first sink to hold both workloads' chains" profiles_ok "$tmp/sink1.pb"
stop "$sink"
echo "$e2e_name: sink killed"
await_export_attempt 30
kill -0 "$agent" 2>/dev/null || fail "the agent exited while the sink was down"
echo "$e2e_name: an export failed during the outage"
start_sink "$tmp/sink2.pb" "$tmp/sink2.log"
echo "$e2e_name: sink restarted"
wait_until 120 "the restarted sink to hold both workloads' chains" profiles_ok "$tmp/sink2.pb"

stop_workloads
stop "$agent"
stop "$sink"
if grep -qE "panicked|SIGSEGV" "$tmp/agent.log"; then fail "the agent crashed"; fi
# The exit summary counts the export attempts that failed while the sink
# was down (and what was dropped, if the outage outlasted the retries).
grep -qE "[1-9][0-9]* failed attempts" "$tmp/agent.log" || fail "the agent's summary shows no failed export attempt during the outage"
[ -s "$tmp/sink1.pb" ] || fail "the first sink received nothing"
[ -s "$tmp/sink2.pb" ] || fail "the restarted sink received nothing"
check_profiles "$tmp/sink1.pb" "$tmp/sink2.pb"
echo "$e2e_name: ok"
