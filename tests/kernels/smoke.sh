#!/usr/bin/env bash
# The kernel smoke suite, run inside a VM by tests/kernels/run.sh (or on
# the host, by hand): profiles the workloads built by build-workloads.sh
# with the release agent and leaves in OUT what check.py asserts:
#   agent.folded agent.stderr agent.rc   the agent's output and exit code
#   agent.off-cpu.folded                 its off-CPU output (--off-cpu)
#   startup_ms                           exec of the agent -> "sampling at"
#   progs.jsonl progs-after.jsonl        prog_info: programs while running, after
#   rodata.json                          bpftool: the programs' .rodata (features)
#   uname                                the kernel that ran
# The agent samples for SECONDS (default 20) after its start-up, then gets
# SIGINT. Usage: smoke.sh AGENT WORKLOADS OUT [SECONDS]
set -uo pipefail
agent="${1:?agent}" work="${2:?workloads dir}" out="${3:?out dir}" seconds="${4:-20}"
mkdir -p "$out"
uname -r >"$out/uname"
# run_cnt per program (exit and exec tracepoints fire) needs BPF stats.
sysctl -q -w kernel.bpf_stats_enabled=1 || echo "smoke: cannot enable bpf stats" >&2

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

"$work/native_chain" & pids+=($!)
"$work/go_chain" & pids+=($!)
python3 "$work/chain.py" & pids+=($!)
# Burns CPU as Python until told, then execs the native chain under
# another name: its new chain unwinds only if the exec was handled.
python3 -c '
import os, sys, time
go = sys.argv[1]
while not os.path.exists(go):
    sum(i * i for i in range(20000))
os.execv(sys.argv[2], [sys.argv[2]])
' "$out/exec-now" "$work/exec_target" & pids+=($!)
# A sampled process that exits while the agent runs.
python3 -c '
import time
end = time.monotonic() + float(__import__("sys").argv[1])
while time.monotonic() < end:
    sum(i * i for i in range(20000))
' "$((seconds / 2))" & pids+=($!)

pid_args=()
for p in "${pids[@]}"; do pid_args+=(--pid "$p"); done
start=$(date +%s%N)
"$agent" "${pid_args[@]}" --format folded --output "$out/agent.folded" --off-cpu=0.2 \
  2>"$out/agent.stderr" &
agent_pid=$!
# Start-up: until the agent says it samples (programs loaded, verified,
# attached), polled every 20 ms.
while kill -0 "$agent_pid" 2>/dev/null && ! grep -q "sampling at" "$out/agent.stderr"; do sleep 0.02; done
echo $(( ($(date +%s%N) - start) / 1000000 )) >"$out/startup_ms"
sleep 2
"$work/prog_info" >"$out/progs.jsonl"
bpftool -j map dump name profiler.rodata >"$out/rodata.json" 2>"$out/bpftool.stderr"
sleep $((seconds / 5))
touch "$out/exec-now"
sleep $((seconds - seconds / 5))
# Stopped as a service manager would; it must exit by itself, promptly.
kill -INT "$agent_pid"
for _ in $(seq 1 600); do kill -0 "$agent_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$agent_pid" 2>/dev/null; then
  echo "smoke: the agent did not stop within 60 s of SIGINT" >&2
  kill -KILL "$agent_pid"
fi
wait "$agent_pid"
echo $? >"$out/agent.rc"
# After the agent stopped: its programs are gone.
"$work/prog_info" >"$out/progs-after.jsonl"
exit 0
