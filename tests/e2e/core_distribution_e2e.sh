#!/usr/bin/env bash
# End to end of the core-only distribution (builder-core.yaml: our receiver
# beside the current Collector core's otlp receiver, memory_limiter,
# otlp_grpc and debug exporters, nothing from contrib), as a user who builds
# a custom distribution of the current Collector runs it:
#
#   profiler (core: profiling -> memory_limiter -> otlp_grpc + debug)
#     -> relay (core: otlp receiver -> memory_limiter -> otlp_grpc + debug)
#     -> sink (./otelcol-ebpf-profiler: otlp receiver -> file exporter)
#
# while dd reads /dev/zero and tests/workloads/native_chain.c runs. Both
# core instances must log exports with samples (debug exporter), and the
# sink's file must hold both workloads with their pids, names, chains and
# frame types (go-receiver's TestE2EProfiles, as in collector_e2e.sh): the
# samples crossed two hops of the current core, including its otlp
# exporter's string-table encoding of resource attributes.
#
# Needs root (BPF), ./otelcol-ebpf-profiler-core (make
# otelcol-ebpf-profiler-core) and ./otelcol-ebpf-profiler for the sink
# (make otelcol-ebpf-profiler). Without root it skips, except under CI=true
# where it fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
e2e_name=core_distribution_e2e
source tests/e2e/lib.sh
e2e_require_root
core_bin=$root/otelcol-ebpf-profiler-core
[ -x "$core_bin" ] || fail "$core_bin missing: run make otelcol-ebpf-profiler-core"

relay_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# core_config RECEIVER_YAML PIPELINE_RECEIVER NEXT_PORT: a core instance
# that sends to 127.0.0.1:NEXT_PORT and logs every export (debug, basic).
core_config() {
  cat <<YAML
receivers:
$1
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 256
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:$3
    tls:
      insecure: true
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [$2]
      processors: [memory_limiter]
      exporters: [otlp_grpc, debug]
YAML
}

core_config "  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$relay_port" otlp "$port" > "$tmp/relay.yaml"
core_config "  profiling:
    samples_per_second: 97
    reporter_interval: 1s" profiling "$relay_port" > "$tmp/profiler.yaml"

"$core_bin" validate --feature-gates=service.profilesSupport --config "$tmp/relay.yaml" ||
  fail "the relay's configuration does not validate"
"$core_bin" validate --feature-gates=service.profilesSupport --config "$tmp/profiler.yaml" ||
  fail "the profiler's configuration does not validate"

build_checker
start_sink "$tmp/sink.pb" "$tmp/sink.log"
"$core_bin" --feature-gates=service.profilesSupport --config "$tmp/relay.yaml" >"$tmp/relay.log" 2>&1 &
relay=$!; pids+=("$relay")
relay_open() { (exec 3<>"/dev/tcp/127.0.0.1/$relay_port") 2>/dev/null; }
watched=("$sink" "$relay")
wait_until 30 "the relay to listen on 127.0.0.1:$relay_port" relay_open
"$core_bin" --feature-gates=service.profilesSupport --config "$tmp/profiler.yaml" >"$tmp/profiler.log" 2>&1 &
profiler=$!; pids+=("$profiler")
start_workloads
watched=("$sink" "$relay" "$profiler")
echo "$e2e_name: profiler -> relay 127.0.0.1:$relay_port -> sink 127.0.0.1:$port, files in $tmp"

wait_until 120 "the sink to hold both workloads' chains" profiles_ok "$tmp/sink.pb"

# The debug exporter's line for an export with samples: "Profiles" with a
# positive "sample records" count.
exported_samples() { grep -E '"sample records": [1-9]' "$1" | grep -c 'Profiles'; }
profiler_exports=$(exported_samples "$tmp/profiler.log" || true)
relay_exports=$(exported_samples "$tmp/relay.log" || true)
[ "$profiler_exports" -gt 0 ] || fail "the profiler's debug exporter logged no export with samples"
[ "$relay_exports" -gt 0 ] || fail "the relay's debug exporter logged no export with samples"
echo "$e2e_name: exports with samples logged: profiler $profiler_exports, relay $relay_exports"

stop_workloads
stop "$profiler"
stop "$relay"
stop "$sink"
grep -q "profiler started" "$tmp/profiler.log" || fail "the receiver did not start"
grep -q "profiler stopped" "$tmp/profiler.log" || fail "the receiver did not stop cleanly"
for log in "$tmp/profiler.log" "$tmp/relay.log"; do
  if grep -qE "^panic: |panicked at|SIGSEGV|^fatal error: " "$log"; then fail "$(basename "$log" .log) crashed"; fi
done
if grep -qE 'panics_[a-z_]+\\?"?:[1-9]' "$tmp/profiler.log"; then fail "the profiler caught a panic (see its stats)"; fi
check_profiles "$tmp/sink.pb"
echo "$e2e_name: ok"
