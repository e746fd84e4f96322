#!/usr/bin/env bash
# error_mode with a profiler that really cannot start: ./otelcol-ebpf-profiler
# run as an unprivileged user (setpriv, uid/gid 65534, no capabilities), so
# loading the BPF programs fails.
#   error_mode: ignore     the Collector keeps running (its health_check
#                          answers) and logs why the profiler did not start
#   error_mode: propagate  the Collector exits non-zero with the reason and
#                          the hint to set error_mode: ignore
# Needs root (to drop to another user) and a built ./otelcol-ebpf-profiler.
set -euo pipefail
cd "$(dirname "$0")/../.."
e2e_name=error_mode_e2e
source tests/e2e/lib.sh
e2e_require_root
command -v setpriv >/dev/null || fail "setpriv (util-linux) missing"

health=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config() {
  cat > "$tmp/$1.yaml" <<YAML
receivers:
  profiling:
    error_mode: $1
exporters:
  debug: {}
extensions:
  health_check:
    endpoint: 127.0.0.1:$health
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [profiling]
      exporters: [debug]
YAML
}
chmod 0755 "$tmp"
write_config ignore
write_config propagate
chmod 0644 "$tmp"/*.yaml
unprivileged=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)

# ignore: still up after the failed start, and healthy.
"${unprivileged[@]}" "$sink_bin" --feature-gates=service.profilesSupport --config "$tmp/ignore.yaml" \
  >"$tmp/ignore.log" 2>&1 &
col=$!; pids+=("$col")
up=
for _ in $(seq 100); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$health/', timeout=1)" 2>/dev/null; then
    up=1; break
  fi
  kill -0 "$col" 2>/dev/null || break
  sleep 0.2
done
[ -n "$up" ] || fail "error_mode ignore: the Collector is not up and healthy"
grep -q "the profiler could not start; continuing without profiling (error_mode: ignore)" "$tmp/ignore.log" ||
  fail "error_mode ignore: no log of the failed start"
stop "$col"

# propagate: the Collector stops, saying why.
if "${unprivileged[@]}" timeout 60 "$sink_bin" --feature-gates=service.profilesSupport \
  --config "$tmp/propagate.yaml" >"$tmp/propagate.log" 2>&1; then
  fail "error_mode propagate: the Collector ran without the profiler"
fi
grep -q "profiling receiver: .*(set error_mode: ignore to run the Collector without profiling)" "$tmp/propagate.log" ||
  fail "error_mode propagate: no clear message"
echo "$e2e_name: ok"
