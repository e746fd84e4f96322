# Shared by the end-to-end scripts: a sink collector (otlp receiver ->
# file exporter, proto), workloads with known chains, and the pdata checks
# of what the sink received (go-receiver's TestE2EProfiles).
# Source it after `cd` to the repository root; it sets $root, $tmp, $port
# and cleans up its processes on exit.

root=$PWD
sink_bin=$root/otelcol-ebpf-profiler
e2e_name=${e2e_name:-e2e}

e2e_require_root() {
  if [ "$(id -u)" != 0 ]; then
    if [ "${CI:-}" = true ]; then echo "$e2e_name: needs root under CI" >&2; exit 1; fi
    echo "$e2e_name: SKIP (needs root)"; exit 0
  fi
  [ -x "$sink_bin" ] || { echo "$e2e_name: $sink_bin missing: run make otelcol-ebpf-profiler" >&2; exit 1; }
}

tmp=$(mktemp -d "/tmp/$e2e_name.XXXXXX")
pids=()
e2e_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_E2E_TMP:-}" = "" ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi
}
trap e2e_cleanup EXIT

fail() {
  echo "$e2e_name: FAIL: $*" >&2
  for f in "$tmp"/*.log; do [ -e "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}

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

# start_sink FILE LOG: a sink collector writing what it receives to FILE; sets $sink.
start_sink() {
  SINK_FILE=$1 "$sink_bin" --feature-gates=service.profilesSupport --config "$tmp/sink.yaml" >"$2" 2>&1 &
  sink=$!; pids+=("$sink")
  wait_port || fail "the sink did not listen on 127.0.0.1:$port"
}

stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# start_workloads: dd reading /dev/zero (kernel chain) and native_chain
# (C, -O2 -fomit-frame-pointer: a native chain); sets $dd_pid, $native_pid.
start_workloads() {
  cc -O2 -fomit-frame-pointer -pthread "$root/tests/workloads/native_chain.c" -o "$tmp/native_chain" \
    || fail "building tests/workloads/native_chain.c"
  dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null &
  dd_pid=$!; pids+=("$dd_pid")
  "$tmp/native_chain" &
  native_pid=$!; pids+=("$native_pid")
}

stop_workloads() { stop "$dd_pid"; stop "$native_pid"; }

# check_profiles FILE...: decodes the sink files with pdata and checks the
# workloads' pids, names, chains and frame types in every file.
check_profiles() {
  local files
  files=$(IFS=,; echo "$*")
  ( cd "$root/go-receiver" &&
    EBPF_PROFILER_E2E_FILES=$files EBPF_PROFILER_E2E_PID=$dd_pid EBPF_PROFILER_E2E_NAME=dd \
    EBPF_PROFILER_E2E_CHAIN=read_zero,vfs_read,ksys_read EBPF_PROFILER_E2E_FRAME_TYPE=kernel \
      go test -count=1 -run TestE2EProfiles -v . ) || fail "dd's profiles are not as expected"
  ( cd "$root/go-receiver" &&
    EBPF_PROFILER_E2E_FILES=$files EBPF_PROFILER_E2E_PID=$native_pid EBPF_PROFILER_E2E_NAME=native_chain \
    EBPF_PROFILER_E2E_CHAIN=chain_leaf,chain_4,chain_3,chain_2,chain_1,main EBPF_PROFILER_E2E_FRAME_TYPE=native \
      go test -count=1 -run TestE2EProfiles -v . ) || fail "native_chain's profiles are not as expected"
}
