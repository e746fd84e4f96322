#!/usr/bin/env bash
# End to end against Pyroscope's ingest rules: go-receiver's
# TestPyroscopeAcceptsAgentAndCollector runs ./ebpf-profiler
# (-collection-agent) and ./otelcol-ebpf-profiler (profiling -> otlp_grpc)
# against an in-test OTLP server that refuses what Grafana Pyroscope
# refuses (resource attributes without a plain key) and checks the
# accepted profiles: dd's service.name from OTEL_SERVICE_NAME, its kernel
# chain, and its CPU time; and that ./otelcol-ebpf-profiler-core's exports
# (the current core's otlp_grpc exporter: keys by reference) are refused.
#
# Needs root (BPF), ./ebpf-profiler (make agent) and ./otelcol-ebpf-profiler
# (make otelcol-ebpf-profiler, which also puts the staticlib where the Go
# test links it).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
for bin in ebpf-profiler otelcol-ebpf-profiler; do
  [ -x "$root/$bin" ] || { echo "pyroscope_e2e: $root/$bin missing" >&2; exit 1; }
done
if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then echo "pyroscope_e2e: needs root" >&2; exit 1; fi
  echo "pyroscope_e2e: SKIP (needs root)"; exit 0
fi
# The core-only distribution, when built (.ci/collector.sh builds it
# first): its exports must all be refused (keys by reference).
core=""
[ -x "$root/otelcol-ebpf-profiler-core" ] && core="$root/otelcol-ebpf-profiler-core"
if [ "${CI:-}" = true ] && [ -z "$core" ]; then echo "pyroscope_e2e: $root/otelcol-ebpf-profiler-core missing" >&2; exit 1; fi
cd go-receiver
EBPF_PROFILER_AGENT_BIN="$root/ebpf-profiler" EBPF_PROFILER_COLLECTOR_BIN="$root/otelcol-ebpf-profiler" \
  EBPF_PROFILER_CORE_COLLECTOR_BIN="$core" go test -count=1 -run 'TestPyroscopeAcceptsAgentAndCollector' -v . 2>&1 | tail -40
echo "pyroscope_e2e: ok"
