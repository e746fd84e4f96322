#!/usr/bin/env bash
# The container image, built and run for real: Debian's docker.io daemon
# (started here on its own socket and data root when none runs), the
# profiler container run as the Helm chart runs it (--pid=host, uid 0,
# every capability dropped but the chart's list, read-only root file
# system, /tmp a tmpfs, seccomp unconfined as the chart's default), and a
# workload (tests/workloads/native_chain.c, static, no frame pointers) in a
# second container; then again without --pid=host, the profiler joining
# the workload container's PID namespace. A sink Collector on the host receives the profiles;
# go-receiver's TestE2EProfiles checks the workload's host pid, its
# container.id (the workload container's id) and its native chain.
#
# Also checks the image itself: version tag, default user 65532, size.
# Needs root, docker.io (`apt-get install docker.io`) and a built
# ./otelcol-ebpf-profiler. Without root it skips, except under CI=true.
set -euo pipefail
cd "$(dirname "$0")/../.."
e2e_name=image_test
source tests/e2e/lib.sh
e2e_require_root

if ! command -v dockerd >/dev/null && [ "${CI:-}" = true ]; then
  echo "$e2e_name: installing docker.io"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >"$tmp/apt.log" 2>&1 ||
    fail "apt-get install docker.io"
fi
command -v dockerd >/dev/null || fail "dockerd missing: apt-get install docker.io"

# A daemon of our own unless DOCKER_HOST points at a running one.
if [ -z "${DOCKER_HOST:-}" ] || ! docker info >/dev/null 2>&1; then
  export DOCKER_HOST=unix://$tmp/docker.sock
  mkdir -p "$tmp/docker-exec"
  dockerd --host "$DOCKER_HOST" --data-root /var/lib/ebpf-profiler-image-test \
    --exec-root "$tmp/docker-exec" --pidfile "$tmp/dockerd.pid" \
    --iptables=false --bridge=none >"$tmp/dockerd.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || fail "dockerd did not start (see dockerd.log)"
fi
containers=()
images=()
cleanup_docker() {
  for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  # The images are rebuilt each run: do not let old ones pile up.
  docker rmi -f "${images[@]}" >/dev/null 2>&1 || true
  if [ -f "$tmp/dockerd.pid" ]; then
    kill "$(cat "$tmp/dockerd.pid")" 2>/dev/null || true
    for _ in $(seq 50); do [ -f "$tmp/dockerd.pid" ] || break; sleep 0.2; done
  fi
  # dockerd may leave its network namespace mounted under its exec root.
  umount -l "$tmp/docker-exec/netns/default" 2>/dev/null || true
}
trap 'cleanup_docker; e2e_cleanup' EXIT

version=$(sed -n 's/^  version: *//p' builder-config.yaml | head -n1)
image=ebpf-profiler-test/otelcol-ebpf-profiler
images+=("$image:$version" "$image:latest" ebpf-profiler-test/workload:1)
IMAGE_NAME=$image deploy/image/build.sh | tee "$tmp/build.log"
[ "$(docker image inspect -f '{{.Config.User}}' "$image:$version")" = 65532:65532 ] || fail "default user is not 65532"
size=$(docker image inspect -f '{{.Size}}' "$image:$version")
echo "$e2e_name: image $image:$version is $((size / 1024 / 1024)) MiB"
# Non-root capable: as the default user it starts, and says why BPF fails.
docker run --rm --network none "$image:$version" --version > "$tmp/version.log" 2>&1 ||
  fail "the image does not run as its default user"
grep -q "$version" "$tmp/version.log" || fail "--version does not print $version"

# The chart's capabilities, from its values.yaml.
caps=$(python3 -c 'import yaml; print(" ".join(yaml.safe_load(open("deploy/helm/ebpf-profiler/values.yaml"))["capabilities"]))')
echo "$e2e_name: capabilities $caps"
# A capability outside this process's own bounding set (e.g. when the test
# itself runs in a restricted container) cannot be granted: leave it out
# and say so.
caps=$(python3 - "$caps" <<'PY'
import sys
numbers = {"DAC_READ_SEARCH": 2, "SYS_PTRACE": 19, "SYS_ADMIN": 21, "SYS_RESOURCE": 24,
           "SYSLOG": 34, "PERFMON": 38, "BPF": 39, "CHECKPOINT_RESTORE": 40}
bnd = int([l.split()[1] for l in open("/proc/self/status") if l.startswith("CapBnd:")][0], 16)
keep = []
for c in sys.argv[1].split():
    if c in numbers and not bnd >> numbers[c] & 1:
        print(f"image_test: CAP_{c} is not in this host's bounding set: left out", file=sys.stderr)
    else:
        keep.append(c)
print(" ".join(keep))
PY
)
# The workload container: a static native_chain in an otherwise empty image.
mkdir -p "$tmp/workload"
cc -static -O2 -fomit-frame-pointer -pthread tests/workloads/native_chain.c -o "$tmp/workload/native_chain" ||
  fail "building a static native_chain (libc6-dev)"
tar -C "$tmp/workload" -c . | docker import --change 'ENTRYPOINT ["/native_chain"]' - ebpf-profiler-test/workload:1 >/dev/null

cat > "$tmp/agent.yaml" <<YAML
receivers:
  profiling:
    samples_per_second: 97
    reporter_interval: 1s
    error_mode: propagate
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:$port
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [profiling]
      exporters: [otlp_grpc]
YAML
chmod 0644 "$tmp/agent.yaml"; chmod 0755 "$tmp"

start_sink "$tmp/sink.pb" "$tmp/sink.log"
workload=$(docker run -d --network none ebpf-profiler-test/workload:1)
containers+=("$workload")
native_pid=$(docker inspect -f '{{.State.Pid}}' "$workload")
[ "$native_pid" -gt 0 ] || fail "the workload container is not running"

# Debian's docker.io 20.10 predates CAP_BPF/CAP_PERFMON/CAP_CHECKPOINT_RESTORE
# in its capability list and refuses them ("unknown capability"). Then the
# test runs the chart's examples/old-kernel.yaml set instead: those
# capabilities left out and SYS_ADMIN added (what kernels before 5.8 need),
# and says so.
# run_profiler [DOCKER_ARGS...]: the profiler container as the chart runs
# it; the arguments choose its PID namespace.
run_profiler() {
  local cap_args=(--cap-drop ALL)
  for c in $caps; do cap_args+=(--cap-add "$c"); done
  docker run -d "$@" --network host --user 0:0 \
    "${cap_args[@]}" --security-opt seccomp=unconfined \
    --read-only --tmpfs /tmp -v "$tmp/agent.yaml:/conf/config.yaml:ro" \
    "$image:$version" --config=/conf/config.yaml --feature-gates=service.profilesSupport 2>"$tmp/docker-run.log"
}
profiler=
for _ in 1 2 3 4 5 6 7 8; do
  if profiler=$(run_profiler --pid=host); then break; fi
  unknown=$(sed -n 's/.*unknown capability: "CAP_\([A-Z_]*\)".*/\1/p' "$tmp/docker-run.log")
  [ -n "$unknown" ] || fail "docker run of the profiler container"
  echo "$e2e_name: this Docker daemon does not know CAP_$unknown: using SYS_ADMIN instead (examples/old-kernel.yaml)"
  caps=$(echo " $caps " | sed "s/ $unknown / /; s/ SYS_ADMIN / /")" SYS_ADMIN"
  profiler=
done
[ -n "$profiler" ] || fail "docker run of the profiler container"
echo "$e2e_name: profiler container runs with capabilities: $caps"
containers+=("$profiler")
# wait_started CONTAINER LOG: start-up takes longer on a loaded machine.
wait_started() {
  for _ in $(seq 120); do
    docker logs "$1" > "$2" 2>&1 || true
    grep -q "profiler started" "$2" && return 0
    [ "$(docker inspect -f '{{.State.Running}}' "$1")" = true ] || fail "the profiler container exited (see $2)"
    sleep 0.5
  done
  fail "the receiver did not start in the container within 60 s"
}
# sample_and_stop CONTAINER LOG SINK_FILE: sample 8 s, stop cleanly, and
# the sink must have received profiles.
sample_and_stop() {
  sleep 8
  [ "$(docker inspect -f '{{.State.Running}}' "$1")" = true ] || fail "the profiler container exited"
  docker stop -t 30 "$1" >/dev/null
  docker logs "$1" > "$2" 2>&1 || true
  grep -q "profiler stopped" "$2" || fail "the receiver did not stop cleanly"
  stop "$sink"
  [ -s "$3" ] || fail "the sink received nothing"
}
wait_started "$profiler" "$tmp/profiler.log"
sample_and_stop "$profiler" "$tmp/profiler.log" "$tmp/sink.pb"

( cd go-receiver &&
  EBPF_PROFILER_E2E_FILES=$tmp/sink.pb EBPF_PROFILER_E2E_PID=$native_pid EBPF_PROFILER_E2E_NAME=native_chain \
  EBPF_PROFILER_E2E_CONTAINER_ID=$workload \
  EBPF_PROFILER_E2E_CHAIN=chain_leaf,chain_4,chain_3,chain_2,chain_1,main EBPF_PROFILER_E2E_FRAME_TYPE=native \
    go test -count=1 -run TestE2EProfiles -v . ) || fail "the workload's profiles are not as expected"
docker rm -f "$workload" >/dev/null

# Without --pid=host: a pod without hostPID that shares its process
# namespace (shareProcessNamespace). The workload container holds a PID
# namespace of its own, the profiler container joins it, and profiles
# what it sees there. The samples must carry the workload's pid as that
# namespace numbers it (the last NSpid field: 1), and its whole chain.
joined=$(docker run -d --network none ebpf-profiler-test/workload:1)
containers+=("$joined")
joined_host_pid=$(docker inspect -f '{{.State.Pid}}' "$joined")
joined_pid=$(awk '/^NSpid:/ { print $NF }' "/proc/$joined_host_pid/status")
[ -n "$joined_pid" ] && [ "$joined_pid" != "$joined_host_pid" ] ||
  fail "the workload has no PID namespace of its own (NSpid: $joined_pid)"
start_sink "$tmp/sink-nested.pb" "$tmp/sink-nested.log"
nested=$(run_profiler --pid "container:$joined") || fail "docker run of the profiler container in the workload's PID namespace"
containers+=("$nested")
wait_started "$nested" "$tmp/profiler-nested.log"
grep -q "running in a nested PID namespace" "$tmp/profiler-nested.log" ||
  fail "no notice of the nested PID namespace (see profiler-nested.log)"
echo "$e2e_name: profiler in the workload's PID namespace, where the workload is pid $joined_pid ($joined_host_pid on the host)"
sample_and_stop "$nested" "$tmp/profiler-nested.log" "$tmp/sink-nested.pb"
( cd go-receiver &&
  EBPF_PROFILER_E2E_FILES=$tmp/sink-nested.pb EBPF_PROFILER_E2E_PID=$joined_pid EBPF_PROFILER_E2E_NAME=native_chain \
  EBPF_PROFILER_E2E_CHAIN=chain_leaf,chain_4,chain_3,chain_2,chain_1,main EBPF_PROFILER_E2E_FRAME_TYPE=native \
  EBPF_PROFILER_E2E_MIN_SHARE=0.95 \
    go test -count=1 -run TestE2EProfiles -v . ) || fail "the nested namespace's profiles are not as expected"
echo "$e2e_name: ok (image $((size / 1024 / 1024)) MiB; also without --pid=host)"
