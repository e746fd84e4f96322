#!/usr/bin/env bash
# CI for the collector side (issue 4): the C ABI header and its C smoke
# test, the Go receiver's tests, otelcol-ebpf-profiler built with OCB, its
# configuration check and the collector -> sink end-to-end test; the
# core-only distribution of the current Collector (builder-core.yaml)
# built and run end to end.
# Called by .ci/run after `make test` (which ran the Rust tests, ffi's and
# report's golden/decode tests included). Needs Go (preinstalled on this
# machine kind; the Collector needs Go >= 1.25), a C compiler and root.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-true}"

command -v go >/dev/null || { echo "collector.sh: go is not installed" >&2; exit 1; }
echo "== collector: $(go version)"

echo "== collector: C header"
make check-header

echo "== collector: C ABI smoke test"
make test-ffi-c

# (The Go receiver's tests ran in `make test`.)

echo "== collector: build otelcol-ebpf-profiler (OCB)"
make otelcol-ebpf-profiler
./otelcol-ebpf-profiler components | grep -q "name: profiling"
./otelcol-ebpf-profiler validate --feature-gates=service.profilesSupport --config local.example.yaml
# A configuration written for the reference receiver, unchanged.
./otelcol-ebpf-profiler validate --feature-gates=service.profilesSupport --config go-receiver/testdata/reference-collector.yaml

echo "== collector: error_mode with a profiler that cannot start"
tests/e2e/error_mode_e2e.sh

echo "== Helm chart: lint, template, kubeconform, assertions"
deploy/helm/test/helm_test.sh

echo "== container image: built offline, run with the chart's capabilities"
deploy/image/image_test.sh

echo "== collector: end to end"
tests/e2e/collector_e2e.sh

echo "== collector: the core-only distribution of the current Collector (builder-core.yaml), built with OCB and run end to end"
SECONDS=0
make otelcol-ebpf-profiler-core
./otelcol-ebpf-profiler-core components | grep -q "name: profiling"
echo "== collector: core-only distribution built in ${SECONDS}s"
tests/e2e/core_distribution_e2e.sh
echo "== collector: core-only distribution built and tested in ${SECONDS}s"

echo "== standalone agent: OTLP end to end"
tests/e2e/agent_otlp_e2e.sh

echo "== agent and collector against Pyroscope's ingest rules"
tests/e2e/pyroscope_e2e.sh
