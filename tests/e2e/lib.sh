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

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 0.5 s until it
# succeeds; fails naming WHAT at the deadline, or at once when a process
# in $watched (pids that must stay up meanwhile) has exited.
watched=()
wait_until() {
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds)) p
  until "$@"; do
    for p in "${watched[@]}"; do
      kill -0 "$p" 2>/dev/null || fail "process $p exited while waiting for $what"
    done
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.5
  done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

# start_sink FILE LOG: a sink collector writing what it receives to FILE; sets $sink.
start_sink() {
  SINK_FILE=$1 "$sink_bin" --feature-gates=service.profilesSupport --config "$tmp/sink.yaml" >"$2" 2>&1 &
  sink=$!; pids+=("$sink")
  local before=("${watched[@]}")
  watched+=("$sink")
  wait_until 30 "the sink to listen on 127.0.0.1:$port" port_open
  watched=("${before[@]}")
}

# await_export_attempt SECONDS: while the sink is down, listens on its port
# until the profiler connects (an export attempt during the outage) and
# closes that connection at once: the attempt fails. Frees the port again.
await_export_attempt() {
  python3 - "$port" "$1" <<'PY' || fail "no export attempt reached 127.0.0.1:$port within ${1}s of the outage"
import socket, sys
port, seconds = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(8)
s.settimeout(seconds)
try:
    conn, _ = s.accept()
except socket.timeout:
    sys.exit(1)
conn.close()
s.close()
PY
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

# build_checker: go-receiver's tests built once into $tmp (TestE2EProfiles
# decodes sink files with pdata), so that waits can run the checks often.
checker=$tmp/go-receiver.test
build_checker() {
  ( cd "$root/go-receiver" && go test -c -o "$checker" . ) || fail "building go-receiver's tests"
}

# check_workload FILES PID NAME CHAIN FRAME_TYPE [ARGS]: TestE2EProfiles on
# the comma-separated FILES for one workload (see go-receiver/e2e_test.go).
check_workload() {
  ( cd "$root/go-receiver" &&
    EBPF_PROFILER_E2E_FILES=$1 EBPF_PROFILER_E2E_PID=$2 EBPF_PROFILER_E2E_NAME=$3 \
    EBPF_PROFILER_E2E_CHAIN=$4 EBPF_PROFILER_E2E_FRAME_TYPE=$5 \
      "$checker" -test.run '^TestE2EProfiles$' -test.count=1 "${@:6}" )
}

dd_chain=read_zero,vfs_read,ksys_read
native_chain=chain_leaf,chain_4,chain_3,chain_2,chain_1,main

# profiles_ok FILE...: the files pass check_profiles (quietly): for waits.
profiles_ok() {
  local files
  files=$(IFS=,; echo "$*")
  [ -s "$1" ] &&
    check_workload "$files" "$dd_pid" dd "$dd_chain" kernel >/dev/null 2>&1 &&
    check_workload "$files" "$native_pid" native_chain "$native_chain" native >/dev/null 2>&1
}

# check_profiles FILE...: decodes the sink files with pdata and checks the
# workloads' pids, names, chains and frame types in every file.
check_profiles() {
  local files
  files=$(IFS=,; echo "$*")
  check_workload "$files" "$dd_pid" dd "$dd_chain" kernel -test.v || fail "dd's profiles are not as expected"
  check_workload "$files" "$native_pid" native_chain "$native_chain" native -test.v ||
    fail "native_chain's profiles are not as expected"
}
