#!/usr/bin/env python3
"""`make bench`: what the profiler costs and how well it unwinds, side by
side with Linux perf, in one run on this machine.

Rows (see the "bench" issue): agent CPU at 20 Hz and 1000 Hz with every CPU
loaded, BPF program cost per sample, workload slowdown, memory with many
processes, memory and process loading under churn (~30 short-lived
processes a second of varied binaries, every CPU busy), stack completeness
on known call chains, start-up, unwind-table build cost, and `perf record`
(frame pointers and DWARF) on the same workload at the same frequency. It
measures and reports; it never fails on a figure. `--quick` runs a reduced
version (under 3 minutes) for CI. `--reference PATH` adds the reference
agent (a binary you provide; never downloaded) to the churn rows, with a
gRPC sink for its profiles (`bench/otlp_sink`, built with `go`);
`--trials N` alternates the two agents N times each, `--churn HZ:SECONDS`
picks the churn runs, `--otlp` has our agent export OTLP to that sink in
them (no local output, as in production), `--soak SECONDS` runs the
20 Hz churn alone that way, as the issue's 10-minute soak.

Needs root (BPF, perf), gcc and perf (linux-perf).
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import sections  # bench/sections.py

from churn import Churn, MemorySampler, churn_commands

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "ebpf-profiler"
WORKLOADS = ROOT / "bench" / "workloads"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
CHAIN = ["main", "chain_a", "chain_b", "chain_c", "chain_d", "chain_e"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes

def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Procs:
    """Child processes killed at exit."""

    def __init__(self):
        self.children = []

    def spawn(self, args, **kw):
        p = subprocess.Popen(args, stdout=kw.pop("stdout", subprocess.DEVNULL),
                             stderr=kw.pop("stderr", subprocess.DEVNULL), **kw)
        self.children.append(p)
        return p

    def stop_all(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
        for p in self.children:
            p.wait()
        self.children = []


def build_workloads(out):
    cc = ["gcc", "-O2", "-g0"]
    builds = {
        "chain_nofp": (["-fomit-frame-pointer"], "chain.c"),
        "chain_fp": (["-fno-omit-frame-pointer"], "chain.c"),
        "periodic": ([], "periodic.c"),
        # The churn scenario's CPU load and its new process, named apart
        # from the other measurements' workloads. Another build id makes
        # the probe a file of its own (not one already loaded for the load).
        "churn_busy": (["-fomit-frame-pointer"], "chain.c"),
        "churn_probe": (["-fomit-frame-pointer", "-Wl,--build-id=md5"], "chain.c"),
    }
    for name, (flags, src) in builds.items():
        subprocess.run(cc + flags + ["-o", str(out / name), str(WORKLOADS / src)], check=True)
    return {name: out / name for name in builds}


class Agent:
    """The agent running for `seconds`, started and ready (programs attached)."""

    def __init__(self, procs, hz, seconds, output, extra=(), local=True):
        """`local`: folded stacks to `output`; without, `extra` names the
        collector (OTLP) and `output` only names the stderr file."""
        self.t_spawn = time.monotonic()
        self.stderr_path = output.with_suffix(".stderr")
        self.stderr = open(self.stderr_path, "w+")
        out_args = ["--format", "folded", "--output", str(output)] if local else []
        # --verbose: the summary figures read below (symbolizer, load latency).
        self.p = procs.spawn([str(AGENT), "--verbose", "--samples-per-second", str(hz), "--duration", f"{seconds}s",
                              *out_args, *extra], stderr=self.stderr)
        self.ready_s = self._wait_ready()

    def _wait_ready(self, timeout=180):
        # A saturated machine (the memory step's 300 processes take both
        # CPUs here) gives the agent 1/N of the CPU: start-up then takes
        # about a minute.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.stderr.seek(0)
            if "sampling at" in self.stderr.read():
                return time.monotonic() - self.t_spawn
            if self.p.poll() is not None:
                break
            time.sleep(0.005)
        self.stderr.seek(0)
        raise RuntimeError(f"agent did not start: {self.stderr.read()}")

    def wait(self):
        self.p.wait()
        self.stderr.seek(0)
        return self.stderr.read()


def summary_value(text, label):
    m = re.search(rf"{label}:\s+(\d+)", text)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- BPF facts

def bpf_objects(pid):
    """The BPF programs and maps a process holds, from /proc/PID/fdinfo
    (works whatever bpftool was built with), deduplicated by id."""
    progs, maps = {}, {}
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        if target == "anon_inode:bpf-prog" and "prog_id" in info:
            progs[info["prog_id"]] = info
        elif target == "anon_inode:bpf-map" and "map_id" in info:
            maps[info["map_id"]] = info
    return progs, maps


def bpf_prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the process's programs
    (counted while kernel.bpf_stats_enabled=1)."""
    progs, _ = bpf_objects(pid)
    return (sum(int(p.get("run_time_ns", 0)) for p in progs.values()),
            sum(int(p.get("run_cnt", 0)) for p in progs.values()))


def bpf_perf_event_stats(pid):
    """(run_time_ns, run_cnt) of the process's perf_event programs only
    (prog_type 7): one run per sample, without the process event
    tracepoints, which churn makes busy."""
    progs, _ = bpf_objects(pid)
    sampling = [p for p in progs.values() if p.get("prog_type") == "7"]
    return (sum(int(p.get("run_time_ns", 0)) for p in sampling),
            sum(int(p.get("run_cnt", 0)) for p in sampling))


def bpf_map_memlock(pid):
    """(bytes charged for the process's BPF maps, number of maps)."""
    _, maps = bpf_objects(pid)
    return sum(int(m.get("memlock", 0)) for m in maps.values()), len(maps)


def bpf_file_tables():
    """(bytes, count) of the per-file delta arrays (inner maps named
    `ep_deltas`): the agent hands them to the kernel and keeps no fd, so
    they are found by name. Assumes one agent runs."""
    r = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True)
    try:
        maps = json.loads(r.stdout) if r.returncode == 0 else []
    except json.JSONDecodeError:
        maps = []
    tables = [m for m in maps if m.get("name") == "ep_deltas"]
    return sum(int(m.get("bytes_memlock", 0)) for m in tables), len(tables)


# ---------------------------------------------------------------- stacks

_nm_cache = {}


def nm_symbols(path):
    """Sorted (address, name) of the functions of an ELF file."""
    if path not in _nm_cache:
        r = subprocess.run(["nm", "-n", "--defined-only", str(path)], capture_output=True, text=True)
        syms = []
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
        _nm_cache[path] = syms
    return _nm_cache[path]


def name_frame(frame, binaries):
    """Names `file+0xADDR` frames of our workloads with nm when the agent
    left them unnamed (it reports ELF addresses)."""
    m = re.fullmatch(r"(.+)\+0x([0-9a-f]+)", frame)
    if not m or m.group(1) not in binaries:
        return frame
    addr = int(m.group(2), 16)
    best = frame
    for start, name in nm_symbols(binaries[m.group(1)]):
        if start > addr:
            break
        best = name
    return best


def completeness_folded(path, process, binaries):
    """Of the workload's samples whose innermost user frame is the chain's
    leaf, the share carrying the whole chain down to `_start`."""
    at_leaf = complete = total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if frames[0] != process:
            continue
        n = int(count)
        total += n
        user = [name_frame(f, binaries) for f in frames[1:] if not f.endswith("_[k]")]
        if not user or user[-1] != CHAIN[-1]:
            continue
        at_leaf += n
        joined = ";".join(user)
        if user[0] == "_start" and ";".join(CHAIN) in joined:
            complete += n
    return total, at_leaf, complete


def completeness_perf_script(text, process):
    """As completeness_folded, for `perf script` output (leaf first, one
    `ip sym+off (dso)` line per frame)."""
    at_leaf = complete = total = 0
    for block in text.split("\n\n"):
        lines = [l for l in block.strip().splitlines() if l.strip()]
        if not lines or not lines[0].split() or lines[0].split()[0] != process:
            continue
        total += 1
        user = [l.split()[1].split("+")[0] for l in lines[1:]
                if "kernel.kallsyms" not in l and len(l.split()) >= 2]
        if not user or user[0] != CHAIN[-1]:
            continue
        at_leaf += 1
        root_first = list(reversed(user))
        if root_first[0] == "_start" and ";".join(CHAIN) in ";".join(root_first):
            complete += 1
    return total, at_leaf, complete


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


# ---------------------------------------------------------------- measurements

def measure_agent_cpu(procs, bins, tmp, hz, seconds):
    """Agent CPU (% of one core) and BPF ns/sample with every CPU busy
    running the FP-less chain workload; also completeness on that workload."""
    for _ in range(NCPU):
        procs.spawn([str(bins["chain_nofp"]), "0"])
    out = tmp / f"agent-{hz}.folded"
    warmup = 2
    agent = Agent(procs, hz, seconds + warmup + 2, out)
    time.sleep(warmup)
    c0, t0 = cpu_seconds(agent.p.pid), time.monotonic()
    b0 = bpf_prog_stats(agent.p.pid)
    # The second half alone: the agent's cost once the files of the
    # machine's processes (its own among them) are analysed and their
    # first addresses named, which the first seconds also pay.
    time.sleep(seconds / 2)
    ch, th = cpu_seconds(agent.p.pid), time.monotonic()
    time.sleep(seconds / 2)
    c1, t1 = cpu_seconds(agent.p.pid), time.monotonic()
    b1 = bpf_prog_stats(agent.p.pid)
    rss = status_kib(agent.p.pid, "VmRSS")
    memlock, nmaps = bpf_map_memlock(agent.p.pid)
    err = agent.wait()
    procs.stop_all()
    runs = b1[1] - b0[1]
    total, at_leaf, complete = completeness_folded(out, "chain_nofp", {"chain_nofp": bins["chain_nofp"]})
    return {
        "hz": hz, "seconds": round(t1 - t0, 1),
        "cpu_pct_one_core": 100.0 * (c1 - c0) / (t1 - t0),
        "second_half_cpu_pct_one_core": 100.0 * (c1 - ch) / (t1 - th),
        "bpf_ns_per_run": (b1[0] - b0[0]) / runs if runs else None,
        "bpf_runs": runs,
        "rss_kib": rss, "bpf_memlock": memlock, "bpf_maps": nmaps,
        "ready_s": agent.ready_s,
        "samples": summary_value(err, "samples taken"), "lost": summary_value(err, "samples lost"),
        "chain_total": total, "chain_at_leaf": at_leaf, "chain_complete": complete,
    }


def until(t):
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def load_latency(err):
    """Process-load latency p50/p99 in ms from the agent's summary, when it
    reports them (a line naming p50 and p99); else None."""
    m = re.search(r"load[^\n]*?p50[^\d\n]*([\d.]+)[^\n]*?p99[^\d\n]*([\d.]+)", err)
    return (float(m.group(1)), float(m.group(2))) if m else None


def start_otlp_sink(procs, bins, path):
    """bench/otlp_sink on 127.0.0.1:11000, its stderr to `path`."""
    return procs.spawn([str(bins["otlp_sink"]), "-listen", "127.0.0.1:11000"], stderr=open(path, "w"))


def stop_otlp_sink(sink, path):
    """Stops the sink; the samples it received (None if it said nothing)."""
    sink.send_signal(2)
    try:
        sink.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sink.kill()
    m = re.search(r"(\d+) requests, (\d+) samples", path.read_text())
    return int(m.group(2)) if m else None


def measure_churn(procs, bins, tmp, hz, seconds, rate, reference=None, probes=3, trials=1, otlp=False):
    """Every CPU busy, `rate` short-lived processes a second, for
    `seconds`: the agent's RSS every 5 s, its maxima, CPU, BPF cost per
    sample, process-load latency, lost process events, and how complete
    the stacks of new processes started during the churn are (each sleeps
    200 ms after exec, then runs the chain for 2 s). With `reference`, the
    same for the reference agent (memory and CPU only: it has no local
    output). With `trials` > 1, the agents alternate (ours first, then the
    reference first, ...) so that a machine whose load changes skews both
    alike. With `otlp` (the soak), our agent keeps no local output and
    exports every interval to bench/otlp_sink, as in production; the
    new processes' completeness then needs the folded output and is
    not measured."""
    cmds = churn_commands(tmp)
    rows = []
    order = ["ebpf-profiler"] + (["reference"] if reference else [])
    for who in [w for t in range(trials) for w in (order if t % 2 == 0 else order[::-1])]:
        log(f"churn: {who} at {hz} Hz for {seconds} s, {rate} processes/s ({', '.join(cmds)})")
        for _ in range(NCPU):
            procs.spawn([str(bins["churn_busy"]), "0"])
        out = tmp / f"churn-{hz}.folded"
        sink_err_path = tmp / f"otlp-sink-{hz}.stderr"
        if who == "ebpf-profiler" and otlp:
            sink = start_otlp_sink(procs, bins, sink_err_path)
            agent = Agent(procs, hz, seconds + 3, out, extra=["--collection-agent", "127.0.0.1:11000", "--disable-tls"],
                          local=False)
            pid = agent.p.pid
        elif who == "ebpf-profiler":
            agent = Agent(procs, hz, seconds + 3, out)
            pid = agent.p.pid
        else:
            # It samples only once its collector answers: a sink that
            # accepts and discards its profiles (bench/otlp_sink).
            sink = start_otlp_sink(procs, bins, sink_err_path)
            ref_err_path = tmp / f"reference-{hz}.stderr"
            ref = procs.spawn([reference, "-samples-per-second", str(hz), "-collection-agent", "127.0.0.1:11000",
                               "-disable-tls"], stderr=open(ref_err_path, "w"))
            time.sleep(5)  # its start-up: no readiness line to wait for
            if ref.poll() is not None:
                sys.exit(f"bench: the reference agent exited: {ref_err_path.read_text()[-400:]}")
            pid = ref.pid
        churn = Churn(cmds, rate, max_in_flight=64).start()
        sampler = MemorySampler(pid).start()
        c0, t0 = cpu_seconds(pid), time.monotonic()
        b0 = bpf_perf_event_stats(pid)
        # Steady CPU: from the point steady RSS is measured from (start-up
        # analyses every file already mapped on the machine, a one-off
        # cost the whole-run figure spreads over the run's length).
        settle = 60 if seconds >= 180 else seconds / 3
        settled = {}
        settle_timer = threading.Timer(settle, lambda: settled.update(c=cpu_seconds(pid), t=time.monotonic()))
        settle_timer.start()
        for i in range(probes):
            until(t0 + seconds * (i + 1) / (probes + 1))
            procs.spawn([str(bins["churn_probe"]), "2", "0.2"])
        until(t0 + seconds)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        b1 = bpf_perf_event_stats(pid)
        settle_timer.cancel()
        sampler.stop()
        churn.stop()
        if who == "ebpf-profiler":
            err = agent.wait()
            sink_samples = stop_otlp_sink(sink, sink_err_path) if otlp else None
        else:
            ref.send_signal(2)
            try:
                ref.wait(timeout=20)
            except subprocess.TimeoutExpired:
                ref.kill()
            err = ref_err_path.read_text()
            if "Failed to start" in err:
                log(f"churn: the reference did not start: {' '.join(err.split())[-400:]}")
            reference_samples = stop_otlp_sink(sink, sink_err_path)
            if not reference_samples:
                log(f"churn: the reference's collector received no samples: {' '.join(err.split())[-600:]}")
        procs.stop_all()
        runs = b1[1] - b0[1]
        row = {"agent": who, "hz": hz, "output": "otlp" if otlp or who != "ebpf-profiler" else "folded", "seconds": round(t1 - t0, 1), "loadavg_1m": os.getloadavg()[0],
               "processes_started": churn.started, "processes_failed": churn.failed,
               "starts_skipped": churn.skipped, "rate": churn.started / churn.seconds,
               "cpu_pct_one_core": 100.0 * (c1 - c0) / (t1 - t0),
               "steady_cpu_pct_one_core": 100.0 * (c1 - settled["c"]) / (t1 - settled["t"]) if settled else None,
               "bpf_ns_per_sample": (b1[0] - b0[0]) / runs if runs else None, "bpf_samples": runs,
               **sampler.summary(settle_s=settle)}
        if who != "ebpf-profiler":
            row["samples"] = reference_samples  # as its collector received them
        if who == "ebpf-profiler":
            if otlp:
                total = at_leaf = complete = None
                row["sink_samples"] = sink_samples
                if not sink_samples:
                    log(f"churn: the OTLP sink received no samples: {' '.join(err.split())[-600:]}")
            elif out.exists():
                total, at_leaf, complete = completeness_folded(out, "churn_probe", {"churn_probe": bins["churn_probe"]})
            else:
                total = at_leaf = complete = 0
                log(f"churn: the agent wrote no output (exit {agent.p.returncode}): {' '.join(err.split())[-400:]}")
            row["agent_exit"] = agent.p.returncode
            m = re.search(r"(\d+) process events lost", err)
            fa = re.search(r"files:\s+(\d+) analysed in (\d+) ms", err)
            sl = re.search(r"symbolizer:\s+(?P<loads>\d+) loads in (?P<load_ms>\d+) ms, (?P<evicted>\d+) files evicted "
                           r"\(budget(?:; (?P<cold>\d+) cold)?\), (?P<reloads>\d+) loaded again"
                           r"(?:, (?P<units_parsed>\d+) DWARF units parsed)?(?:, (?P<units_dropped>\d+) DWARF units dropped)?"
                           r"(?:, (?P<units_shed>\d+) given up \(budget\))?", err)
            if sl:
                row["symbolizer"] = {k: int(v or 0) for k, v in sl.groupdict().items()}
                bu = re.search(r"budget (\d+) MiB \(raised (\d+) times\)", err)
                if bu:
                    row["symbolizer"].update({"budget_mib": int(bu.group(1)), "budget_raises": int(bu.group(2))})
            row.update({"distinct_stacks": summary_value(err, "distinct stacks"),
                        "files_analysed": int(fa.group(1)) if fa else None, "analyse_ms": int(fa.group(2)) if fa else None})
            row.update({"latency_ms": load_latency(err), "process_events_lost": int(m.group(1)) if m else 0,
                        "samples": summary_value(err, "samples taken"), "lost": summary_value(err, "samples lost"),
                        "probe_samples": total, "probe_at_leaf": at_leaf, "probe_complete": complete})
        rows.append(row)
    return rows


def children_cpu():
    """CPU seconds of all reaped children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure_perf(procs, bins, tmp, hz, seconds, mode, script_timeout):
    """perf record (fp or dwarf) on the same load; its CPU including
    `perf script`, and completeness on the chain workload."""
    binary = bins["chain_fp" if mode == "fp" else "chain_nofp"]
    for _ in range(NCPU):
        procs.spawn([str(binary), "0"])
    time.sleep(0.5)
    data = tmp / f"perf-{mode}-{hz}.data"
    cg = ["-g"] if mode == "fp" else ["--call-graph", "dwarf"]
    # The load workers are reaped only after this measurement, so the
    # children's CPU delta is perf's (and its `sleep`'s) alone.
    u0 = children_cpu()
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "-a", *cg, "-o", str(data),
                        "--", "sleep", str(seconds)], capture_output=True, text=True, timeout=seconds + 120)
    record_cpu = children_cpu() - u0
    procs.stop_all()
    if r.returncode != 0:
        return {"mode": mode, "hz": hz, "error": r.stderr.strip()[-300:]}
    script_out = tmp / f"perf-{mode}-{hz}.txt"
    u1 = children_cpu()
    with open(script_out, "w") as f:
        # --no-inline: no addr2line runs (our frames carry no inline expansion either).
        subprocess.run(["perf", "script", "--no-inline", "-i", str(data), "-F", "comm,pid,tid,cpu,time,event,ip,sym,dso"],
                       stdout=f, stderr=subprocess.DEVNULL, timeout=script_timeout)
    script_cpu = children_cpu() - u1
    total, at_leaf, complete = completeness_perf_script(script_out.read_text(errors="replace"), binary.name)
    return {
        "mode": mode, "hz": hz, "seconds": seconds,
        "record_cpu_pct_one_core": 100.0 * record_cpu / seconds,
        "script_cpu_s": script_cpu,
        "total_cpu_pct_one_core": 100.0 * (record_cpu + script_cpu) / seconds,
        "data_bytes": data.stat().st_size,
        "chain_total": total, "chain_at_leaf": at_leaf, "chain_complete": complete,
    }


def measure_slowdown(procs, bins, tmp, rounds, reps, freqs):
    """Wall time of a fixed amount of work: no agent vs agent at each
    frequency, alternating, medians."""
    times = {f: [] for f in [None, *freqs]}
    for rep in range(reps):
        for f in [None, *freqs]:
            agent = Agent(procs, f, 3600, tmp / "slowdown.folded") if f else None
            time.sleep(1)  # let the agent settle (first /proc reads) in every mode alike
            t0 = time.monotonic()
            subprocess.run([str(bins["chain_nofp"]), "-n", str(rounds)], check=True)
            times[f].append(time.monotonic() - t0)
            if agent:
                agent.p.send_signal(2)
                agent.wait()
            procs.stop_all()
    base = statistics.median(times[None])
    return {("none" if f is None else f"{f}Hz"): {"median_s": statistics.median(v), "ratio": statistics.median(v) / base}
            for f, v in times.items()}


def measure_memory(procs, bins, tmp, nprocs, seconds):
    for _ in range(nprocs):
        procs.spawn([str(bins["periodic"])])
    time.sleep(1)
    agent = Agent(procs, 20, seconds + 1, tmp / "memory.folded")
    time.sleep(seconds)
    rss = status_kib(agent.p.pid, "VmRSS")
    hwm = status_kib(agent.p.pid, "VmHWM")
    memlock, nmaps = bpf_map_memlock(agent.p.pid)
    table_bytes, tables = bpf_file_tables()
    err = agent.wait()
    procs.stop_all()
    m = re.search(r"processes:\s+(\d+) seen", err)
    return {"processes_alive": nprocs, "processes_seen": int(m.group(1)) if m else None,
            "rss_kib": rss, "hwm_kib": hwm, "bpf_memlock": memlock, "bpf_maps": nmaps,
            "file_tables_bytes": table_bytes, "file_tables": tables}


def measure_new_process_first_sample(procs, bins, tmp):
    """Start-up of the agent (spawn to attached) is measured by every run;
    here: a process started after the agent, alive 1 s: how many of its
    samples carry the whole chain."""
    out = tmp / "newproc.folded"
    agent = Agent(procs, 99, 4, out)
    time.sleep(1)
    subprocess.run([str(bins["chain_nofp"]), "1"], check=True)
    agent.wait()
    total, at_leaf, complete = completeness_folded(out, "chain_nofp", {"chain_nofp": bins["chain_nofp"]})
    return {"ready_s": agent.ready_s, "samples": total, "at_leaf": at_leaf, "complete": complete}


def measure_new_process_latency():
    """A program never seen before starts under whole-system profiling:
    time to its first sample and to its first sample unwound to the root
    (the ignored measurement test in tests/native_unwinding.rs)."""
    r = subprocess.run(["cargo", "test", "-q", "--release", "--locked", "-p", "profiler-tests", "--test",
                        "native_unwinding", "--", "--ignored", "--nocapture", "measure_new_process_latency"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    m = re.search(r"first sample after (Some\(([\d.]+)\)|None) ms, first sample unwound to the root after "
                  r"(Some\(([\d.]+)\)|None) ms; completeness (\d+)/(\d+)", r.stderr)
    if not m:
        return {"error": " ".join((r.stderr or r.stdout).split())[-300:]}
    as_ms = lambda v: float(v) if v is not None else None
    return {"first_ms": as_ms(m.group(2)), "first_complete_ms": as_ms(m.group(4)),
            "complete": int(m.group(5)), "at_leaf": int(m.group(6))}


def largest_shared_library():
    best = (0, None)
    roots = ["/usr/lib", "/usr/local/lib", str(Path.home() / ".rustup")]
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for f in files:
                if ".so" in f:
                    p = os.path.join(dirpath, f)
                    try:
                        if not os.path.islink(p):
                            size = os.path.getsize(p)
                            if size > best[0]:
                                best = (size, p)
                    except OSError:
                        pass
    return best[1]


def measure_unwind_tables(tmp):
    subprocess.run(["cargo", "build", "-q", "--release", "--locked", "-p", "profiler-elf", "--example",
                    "unwind_table_stats"], cwd=ROOT, check=True)
    exe = ROOT / "target" / "release" / "examples" / "unwind_table_stats"
    rows = []
    for path in ["/lib/x86_64-linux-gnu/libc.so.6", largest_shared_library()]:
        if not path:
            continue
        r = subprocess.run([str(exe), path], capture_output=True, text=True)
        text = r.stdout

        def num(label, cast=int):
            m = re.search(rf"{label}\s+([\d.]+)", text)
            return cast(m.group(1)) if m else None
        rows.append({"file": path, "size": num("file size"), "ms": num("time", float),
                     "peak_rss_kib": num(r"peak RSS \(VmHWM\)"), "deltas": num("deltas"),
                     "rules": num("distinct rules")})
    return rows


# ---------------------------------------------------------------- report

def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30
    return f"{platform.system()} {platform.release()}, {NCPU} CPUs ({cpu}), {mem} GiB RAM"


class Done(Exception):
    """Ends a partial run (--only-churn) early."""


def render(results, quick):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    L = []
    L.append(f"# Benchmarks{' (quick)' if quick else ''}\n")
    L.append(f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    L.append(f"- commit: {commit}")
    L.append(f"- machine: {machine()}")
    la = results.get("loadavg", {})
    if la:
        L.append(f"- load average (1 min) at start / end: {la['start']:.2f} / {la['end']:.2f}; the agent profiles "
                 "and symbolizes everything that runs, so other activity on the machine shows in its figures")
    L.append(f"- command: `make {'bench-quick' if quick else 'bench'}`\n")
    if "agent" not in results:  # --only-churn
        render_churn(L, results.get("churn", []))
        L.append("")
        return "\n".join(L)

    L.append("## Agent CPU and BPF cost (every CPU busy with the FP-less chain workload)\n")
    L.append("| frequency | measured over | agent CPU, % of one core | its second half | per profiled CPU | BPF ns / run "
             "| samples | lost | ready after |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for a in results["agent"]:
        ns = f"{a['bpf_ns_per_run']:.0f}" if a["bpf_ns_per_run"] else "n/a"
        half = a.get("second_half_cpu_pct_one_core")
        half = f"{half:.2f}%" if half is not None else "n/a"
        L.append(f"| {a['hz']} Hz | {a['seconds']} s | {a['cpu_pct_one_core']:.2f}% | {half} "
                 f"| {a['cpu_pct_one_core'] / NCPU:.2f}% | {ns} | {a['samples']} | {a['lost']} | {a['ready_s'] * 1000:.0f} ms |")

    L.append("\n## Side by side with perf (same load, same frequency)\n")
    L.append("| tool | frequency | CPU, % of one core (incl. getting stacks out) | chain complete to `_start` |")
    L.append("|---|---|---|---|")
    for a in results["agent"]:
        L.append(f"| ebpf-profiler (FP-less build) | {a['hz']} Hz | {a['cpu_pct_one_core']:.2f}% "
                 f"| {pct(a['chain_complete'], a['chain_at_leaf'])} of {a['chain_at_leaf']} at leaf |")
    for p in results["perf"]:
        if "error" in p:
            L.append(f"| perf record {p['mode']} | {p['hz']} Hz | error: {p['error']} | |")
            continue
        label = "perf record -g (FP build)" if p["mode"] == "fp" else "perf record --call-graph dwarf (FP-less build)"
        ours = next((a for a in results["agent"] if a["hz"] == p["hz"]), None)
        ratio = f" (×{p['total_cpu_pct_one_core'] / ours['cpu_pct_one_core']:.1f} ours)" if ours and ours["cpu_pct_one_core"] else ""
        L.append(f"| {label} | {p['hz']} Hz | {p['total_cpu_pct_one_core']:.2f}%{ratio}; record {p['record_cpu_pct_one_core']:.2f}% + "
                 f"script {p['script_cpu_s']:.1f} s; {p['data_bytes'] / 2**20:.1f} MiB data "
                 f"| {pct(p['chain_complete'], p['chain_at_leaf'])} of {p['chain_at_leaf']} at leaf |")

    s = results["slowdown"]
    L.append("\n## Workload slowdown (fixed work, wall time, medians of alternating runs)\n")
    L.append("| agent | median | ratio to no agent |")
    L.append("|---|---|---|")
    for k, v in s.items():
        L.append(f"| {k} | {v['median_s']:.3f} s | {v['ratio']:.3f} |")

    m = results["memory"]
    L.append("\n## Memory with many processes\n")
    L.append("| processes alive | seen by agent | agent RSS | agent peak RSS | fixed BPF maps | per-file delta tables | per file |")
    L.append("|---|---|---|---|---|---|---|")
    per_file = f"{m['file_tables_bytes'] / m['file_tables'] / 1024:.0f} KiB" if m["file_tables"] else "n/a"
    L.append(f"| {m['processes_alive']} | {m['processes_seen']} | {m['rss_kib'] / 1024:.1f} MiB | {m['hwm_kib'] / 1024:.1f} MiB "
             f"| {m['bpf_memlock'] / 2**20:.1f} MiB ({m['bpf_maps']} maps) | {m['file_tables_bytes'] / 2**20:.1f} MiB "
             f"({m['file_tables']} files) | {per_file} |")

    n = results["newproc"]
    L.append("\n## Start-up\n")
    L.append(f"- agent spawn to programs attached: {n['ready_s'] * 1000:.0f} ms")
    L.append(f"- process started after the agent, alive 1 s at 99 Hz: {n['samples']} samples, "
             f"{n['at_leaf']} at the chain's leaf, {pct(n['complete'], n['at_leaf'])} complete to `_start`")
    lat = results.get("latency", {})
    if "error" in lat:
        L.append(f"- new process latency: measurement failed: {lat['error']}")
    elif lat:
        fmt = lambda v: f"{v:.0f} ms" if v is not None else "never"
        L.append(f"- new process (never seen before, whole-system profiling): first sample after {fmt(lat['first_ms'])}, "
                 f"first sample unwound to the root after {fmt(lat['first_complete_ms'])}; "
                 f"{pct(lat['complete'], lat['at_leaf'])} of its {lat['at_leaf']} leaf samples complete")

    render_churn(L, results.get("churn", []))

    L.append("\n## Unwind tables (build from .eh_frame/.debug_frame)\n")
    L.append("| file | size | time | peak RSS | deltas | distinct rules |")
    L.append("|---|---|---|---|---|---|")
    for u in results["unwind"]:
        L.append(f"| `{u['file']}` | {(u['size'] or 0) / 2**20:.1f} MiB | {u['ms']} ms | {(u['peak_rss_kib'] or 0) / 1024:.1f} MiB "
                 f"| {u['deltas']} | {u['rules']} |")
    L.append("")
    return "\n".join(L)


def render_churn(L, rows):
    if not rows:
        return
    mib = lambda kib: f"{kib / 1024:.1f} MiB" if kib is not None else "n/a"
    steady_cpu = lambda r: f"{r['steady_cpu_pct_one_core']:.2f}%" if r.get("steady_cpu_pct_one_core") is not None else "n/a"
    L.append("\n## Churn: memory and process loading (every CPU busy, short-lived processes of varied binaries)\n")
    L.append("Steady RSS is the median of the 5-second points after the first minute (a third of the run when "
             "shorter), and steady CPU is counted from the same point (the whole run's CPU holds the start-up's "
             "analysis of every file already mapped on the machine); drift is the median of the last third of those points minus that of the first third. "
             "New processes: started during the churn, each sleeps 200 ms after exec and then runs the chain: "
             "the share of their samples at the chain's leaf that carry the whole chain to `_start`.\n")
    L.append("Processes started are fewer than asked (30/s) when the machine is too loaded for them to end in time "
             "(at most 64 run at once; the starts skipped are in the JSON).\n")
    L.append("| agent | frequency | duration | processes started | steady RSS (anon) | max sampled RSS | VmHWM | drift "
             "| CPU, % of one core: whole run (steady) | BPF ns / sample | process load p50 / p99 | process events lost "
             "| samples lost | new processes complete | load average at the end |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ns = f"{r['bpf_ns_per_sample']:.0f}" if r.get("bpf_ns_per_sample") else "n/a"
        ours = r["agent"] == "ebpf-profiler"
        lat = r.get("latency_ms")
        lat = (f"{lat[0]:.0f} / {lat[1]:.0f} ms" if lat else "TODO: no agent counter yet") if ours else "n/a"
        probe = (f"{pct(r['probe_complete'], r['probe_at_leaf'])} of {r['probe_at_leaf']}"
                 if ours and r.get("probe_at_leaf") is not None else "n/a")
        L.append(f"| {r['agent']} | {r['hz']} Hz | {r['seconds']:.0f} s | {r['processes_started']} ({r['rate']:.1f}/s) "
                 f"| {mib(r['steady_rss_kib'])} ({mib(r['steady_anon_kib'])}) | {mib(r['max_rss_kib'])} "
                 f"| {mib(r['hwm_kib'])} | {r['drift_kib'] / 1024:+.1f} MiB | {r['cpu_pct_one_core']:.2f}% "
                 f"({steady_cpu(r)}) | {ns} "
                 f"| {lat} | {r.get('process_events_lost', 'n/a')} | {r.get('lost', 'n/a')} | {probe} "
                 f"| {r.get('loadavg_1m', 0):.1f} |")
    for r in rows:
        if r["agent"] != "ebpf-profiler":
            L.append(f"\n- {r['agent']} at {r['hz']} Hz: {r.get('samples')} samples received by its collector")
        if r["agent"] == "ebpf-profiler" and r.get("output") == "otlp":
            L.append(f"\n- {r['agent']} at {r['hz']} Hz, OTLP export, no local output: {r.get('samples')} samples "
                     f"taken, {r.get('sink_samples')} received by the sink; {r.get('files_analysed')} files analysed in "
                     f"{r.get('analyse_ms')} ms")
        elif r["agent"] == "ebpf-profiler":
            L.append(f"\n- {r['agent']} at {r['hz']} Hz: {r.get('samples')} samples; {r.get('files_analysed')} files analysed in "
                     f"{r.get('analyse_ms')} ms; {r.get('distinct_stacks')} distinct stacks in its folded output "
                     "(kept for the whole run, part of its RSS)")
    for r in rows:
        if r.get("symbolizer"):
            y = r["symbolizer"]
            L.append(f"\n- {r['agent']} at {r['hz']} Hz, symbolizer: {y['loads']} loads in {y['load_ms']} ms, "
                     f"{y['evicted']} files evicted for its budget, {y['reloads']} loaded again, "
                     f"{y.get('units_parsed', 0)} DWARF units parsed by lookups, "
                     f"{y.get('units_dropped', 0)} DWARF units dropped for a file's limit, "
                     f"{y.get('units_shed', 0)} given up for the budget"
                     + (f"; budget {y['budget_mib']} MiB at the end (raised {y['budget_raises']} times)"
                        if "budget_mib" in y else ""))
    for r in rows:
        curve = ", ".join(f"{p[1] / 1024:.0f}" for p in r["curve"])
        L.append(f"\n- {r['agent']} at {r['hz']} Hz, VmRSS every 5 s (MiB): {curve}")
        anon = ", ".join(f"{p[2] / 1024:.0f}" for p in r["curve"] if p[2] is not None)
        L.append(f"\n- {r['agent']} at {r['hz']} Hz, RssAnon every 5 s (MiB): {anon}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced run for CI (< 3 minutes)")
    ap.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--reference", metavar="PATH",
                    help="the reference agent's binary, run through the churn scenario too (never downloaded)")
    ap.add_argument("--only-churn", action="store_true", help="run the churn scenario alone")
    ap.add_argument("--agent", metavar="PATH", help="the agent binary to measure (default: ./ebpf-profiler)")
    ap.add_argument("--trials", type=int, default=1, help="churn runs of each agent, alternating (default 1)")
    ap.add_argument("--churn", metavar="HZ:SECONDS", action="append",
                    help="churn runs to take instead of the default ones (repeatable; e.g. --churn 20:600)")
    ap.add_argument("--otlp", action="store_true",
                    help="in the churn runs, our agent exports OTLP to bench/otlp_sink (needs go) instead of "
                         "keeping folded stacks for the whole run")
    ap.add_argument("--soak", metavar="SECONDS", type=int,
                    help="the churn scenario alone at 20 Hz for SECONDS (e.g. 600), our agent exporting OTLP to "
                         "bench/otlp_sink (needs go) with no local output, as in production")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF and perf)")
    for tool in ["gcc", "perf", "nm"]:
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} not found (make bench installs linux-perf and bpftool)")
    if args.agent:
        global AGENT
        AGENT = Path(args.agent).resolve()
    if not AGENT.exists():
        sys.exit("bench: ./ebpf-profiler missing (make agent)")
    if args.reference and not os.access(args.reference, os.X_OK):
        sys.exit(f"bench: --reference {args.reference}: not an executable")
    q = args.quick
    subprocess.run(["sysctl", "-q", "-w", "kernel.bpf_stats_enabled=1"], check=False)
    procs = Procs()
    results = {"loadavg": {"start": os.getloadavg()[0]}}
    with tempfile.TemporaryDirectory(prefix="ep-bench-") as t:
        tmp = Path(t)
        bins = build_workloads(tmp)
        if args.reference:
            # Its scheduler probe needs tracefs.
            if not os.path.exists("/sys/kernel/tracing/events"):
                subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)
        if args.reference or args.soak or args.otlp:
            # The collector: a gRPC sink, built with Go's module cache.
            bins["otlp_sink"] = tmp / "otlp_sink"
            subprocess.run(["go", "build", "-o", str(bins["otlp_sink"]), "."], cwd=ROOT / "bench" / "otlp_sink",
                           check=True)
        try:
            churn_runs = [(20, 25)] if q else [(20, 600), (1000, 120)]
            if args.churn:
                churn_runs = [tuple(int(x) for x in c.split(":", 1)) for c in args.churn]
            if args.soak:
                results["churn"] = measure_churn(procs, bins, tmp, 20, args.soak, 30, args.reference,
                                                 trials=args.trials, otlp=True)
                raise Done
            if args.only_churn:
                results["churn"] = [r for hz, secs in churn_runs
                                    for r in measure_churn(procs, bins, tmp, hz, secs, 30, args.reference,
                                                           trials=args.trials, otlp=args.otlp)]
                raise Done
            results["agent"] = []
            results["perf"] = []
            for hz, secs in ([(20, 15), (1000, 10)] if q else [(20, 60), (1000, 60)]):
                log(f"agent CPU at {hz} Hz for {secs} s")
                results["agent"].append(measure_agent_cpu(procs, bins, tmp, hz, secs))
                for mode in ["fp", "dwarf"]:
                    if q and mode == "dwarf" and hz >= 1000:
                        continue  # perf script alone takes minutes here; full run only
                    # DWARF stacks are 8 KiB a sample: keep the 1000 Hz file small.
                    psecs = min(secs, 5) if hz >= 1000 and mode == "dwarf" else secs
                    log(f"perf record {mode} at {hz} Hz for {psecs} s")
                    results["perf"].append(measure_perf_wrapped(procs, bins, tmp, hz, psecs, mode,
                                                                script_timeout=120 if q else 900))
            log("workload slowdown")
            results["slowdown"] = measure_slowdown(procs, bins, tmp, rounds=20000 if q else 60000,
                                                   reps=3 if q else 7, freqs=[20, 1000])
            log("memory with many processes")
            results["memory"] = measure_memory(procs, bins, tmp, nprocs=100 if q else 300, seconds=8 if q else 30)
            log("new process")
            results["newproc"] = measure_new_process_first_sample(procs, bins, tmp)
            log("new process latency")
            results["latency"] = measure_new_process_latency()
            log("unwind tables")
            results["unwind"] = measure_unwind_tables(tmp)
            results["churn"] = [r for hz, secs in churn_runs
                                for r in measure_churn(procs, bins, tmp, hz, secs, 30, args.reference,
                                                       trials=args.trials, otlp=args.otlp)]
        except Done:
            pass
        finally:
            procs.stop_all()
    results["loadavg"]["end"] = os.getloadavg()[0]
    text = render(results, q)
    print(text)
    # The sections accuracy.py and hostile.py wrote stay.
    kept = sections.others_sections(args.output)
    Path(args.output).write_text(text.rstrip("\n") + "\n" + ("\n" + kept if kept else ""))
    (Path(args.output).with_suffix(".json")).write_text(json.dumps(results, indent=1, default=str))
    log(f"wrote {args.output}")


def measure_perf_wrapped(procs, bins, tmp, hz, seconds, mode, script_timeout):
    try:
        return measure_perf(procs, bins, tmp, hz, seconds, mode, script_timeout)
    except Exception as e:  # a perf problem must not lose the other rows
        procs.stop_all()
        return {"mode": mode, "hz": hz, "error": str(e)}


if __name__ == "__main__":
    main()
