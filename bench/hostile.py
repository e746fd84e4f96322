#!/usr/bin/env python3
"""`make bench-hostile`: the release agent, run as users run it
(system-wide, 99 Hz, folded output, `--verbose`), with one crafted
runtime at a time (issue 43, docs/untrusted-input.md) beside genuine
workloads.

Each crafted case is a C program of tests/workloads/<runtime>/hostile_*.c,
built as tests/hostile_runtimes.rs builds it (same names, flags and
library) and started as user nobody, beside the same runtime's genuine
chain script and the host's python3 running tests/workloads/python/chain.py.
A baseline run has the genuine python3 alone. Per run: the agent's CPU
(utime + stime from /proc/PID/stat) at start-up (spawn to "sampling at"),
over the whole duration and over its last two thirds (after the naming
budget's burst is spent), VmHWM, the time from the end of the duration to
the agent's exit, each genuine workload's completeness in the folded
output (of the stacks whose innermost chain function is the chain's leaf,
the share carrying the whole chain in order) and the budget counters of
the summary. Also the CPU the rest of the machine used meanwhile (other
sessions' builds and tests run here), by command.

It measures and reports, never fails on a figure. Needs root (BPF, to
start processes as nobody), gcc, and python3, ruby, perl, php, OpenJDK 17
and node for the genuine workloads (a case whose runtime is missing is
skipped and said); the crafted Node is built from the machine's node's
`v8dbg_*` constants (tests/workloads/node/v8dbg_of.py).
Run it under `flock /tmp/measure.lock` on a machine shared with BPF tests.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sections  # bench/sections.py

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "workloads"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOBODY = 65534
HZ = 99
SECTION = sections.HOSTILE
# Debian's OpenJDK 17, as tests/hostile_runtimes.rs.
JDK = "/usr/lib/jvm/java-17-openjdk-amd64"

# The genuine workloads: the command (after the interpreter) and the chain,
# root first, as the runtime tests name it.
GENUINE = {
    "python": (["/usr/bin/python3", str(TESTS / "python" / "chain.py")], ["<module>", "f1", "f2", "f3"]),
    "ruby": (["/usr/bin/ruby", str(TESTS / "ruby" / "cpu_chain.rb")], ["<main>", "Object#a", "Chain::Worker#b", "Object#c"]),
    "perl": (["/usr/bin/perl", str(TESTS / "perl" / "cpu_chain.pl")], ["main", "Chain::a", "Chain::Worker::b", "Chain::c"]),
    "php": (["/usr/bin/php", "-d", "opcache.enable_cli=0", str(TESTS / "php" / "cpu_chain.php")],
            ["{main}", "Chain\\a", "Chain\\Worker::b", "Chain\\c"]),
    # Its classes are compiled into the run's directory first (JAVA_CLASSES).
    "java": ([f"{JDK}/bin/java", "-cp", "JAVA_CLASSES", "HotspotSpin", "main"],
             ["HotspotSpin.main", "HotspotSpin.a", "HotspotSpin.b", "HotspotSpin.c"]),
    "node": (["/usr/bin/node", "--jitless", str(TESTS / "node" / "cpu_chain.js"), "immediate"],
             ["processImmediate", "main", "a", "b", "c"]),
}

# The crafted cases of tests/hostile_runtimes.rs: (case, runtime, how it is built).
CASES = [
    ("CPython", "python"),
    ("CRuby", "ruby"),
    ("CRuby, symbol scan (-DSCAN)", "ruby-scan"),
    ("Perl", "perl"),
    ("PHP", "php"),
    ("HotSpot (attach)", "hotspot"),
    ("V8, 512 frames renamed and moved", "node"),
    ("V8, 8 Mi-line cons-string sources (-DCONS)", "node-cons"),
]


def log(msg):
    print(f"[bench-hostile {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def all_cpu():
    """{pid: (command, CPU seconds)} of every process now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(entry)] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def others_cpu(before, after, ours):
    """CPU seconds the processes not in `ours` used between two
    all_cpu() snapshots, by command, largest first (processes that
    exited meanwhile are not counted)."""
    by_comm = {}
    for pid, (comm, c1) in after.items():
        if pid in ours:
            continue
        c0 = before.get(pid, (comm, 0.0))[1]
        if c1 - c0 > 0:
            by_comm[comm] = by_comm.get(comm, 0.0) + c1 - c0
    return sorted(by_comm.items(), key=lambda kv: -kv[1])


# ---------------------------------------------------------------- building

def gcc(out, source, flags=()):
    """As tests/hostile_runtimes.rs's build_in."""
    subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-rdynamic", "-pthread", "-o", str(out),
                    str(TESTS / source), *flags], check=True)
    return out


def build(case_dir, kind):
    """The crafted executable of `kind`, in `case_dir` (readable by all)."""
    case_dir.mkdir(mode=0o755)
    if kind == "python":
        return gcc(case_dir / "python3.11", "python/hostile_python.c")
    if kind == "perl":
        return gcc(case_dir / "perl", "perl/hostile_perl.c")
    if kind == "php":
        return gcc(case_dir / "php8.2", "php/hostile_php.c")
    if kind in ("node", "node-cons"):
        # Every v8dbg_* constant and the version of the machine's node.
        generated = case_dir / "v8dbg.c"
        with open(generated, "w") as f:
            subprocess.run([sys.executable, str(TESTS / "node" / "v8dbg_of.py"), GENUINE["node"][0][0]],
                           stdout=f, check=True)
        cons = ["-DCONS"] if kind == "node-cons" else []
        return gcc(case_dir / "node", "node/hostile_v8.c", [str(generated), *cons])
    if kind == "hotspot":
        gcc(case_dir / "libjvm.so", "java/hostile_jvm.c", ["-shared", "-fPIC", "-DLIBJVM"])
        return gcc(case_dir / "java", "java/hostile_jvm.c", [f"-L{case_dir}", "-l:libjvm.so", "-Wl,-rpath,$ORIGIN"])
    scan = ["-DSCAN"] if kind == "ruby-scan" else []
    gcc(case_dir / "libruby-3.1.so.3.1", "ruby/hostile_ruby.c", ["-shared", "-fPIC", "-DLIBRUBY", *scan])
    return gcc(case_dir / "ruby", "ruby/hostile_ruby.c",
               [f"-L{case_dir}", "-l:libruby-3.1.so.3.1", "-Wl,-rpath,$ORIGIN"])


# ---------------------------------------------------------------- folded

def chain_share(folded, chain):
    """Of the stacks whose innermost frame among the chain's functions is
    its leaf, (samples, samples with every chain function in order). The
    folded text has no frame kinds: native frames between are allowed."""
    names = set(chain)
    at_leaf = whole = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")[1:]
        ours = [f for f in frames if f in names]
        if not ours or ours[-1] != chain[-1]:
            continue
        n = int(count)
        at_leaf += n
        it = iter(frames)
        if all(any(f == c for f in it) for c in chain):
            whole += n
    return at_leaf, whole


def summary_int(text, pattern):
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0


def budget_counters(err):
    """The budget's figures from the --verbose summary."""
    over = re.search(r"over budget:\s+(\d+) processes.*?(\d+) reads refused naming, (\d+) attaching", err)
    runtimes = {m.group(1): {"frames": int(m.group(2)), "named": int(m.group(3))}
                for m in re.finditer(r"^  (python|ruby|perl|php|hotspot|v8):\s+(\d+) frames \((\d+) named\)", err, re.M)}
    return {
        "processes_over": int(over.group(1)) if over else 0,
        "reads_refused_naming": int(over.group(2)) if over else 0,
        "reads_refused_attach": int(over.group(3)) if over else 0,
        "overdrafts": summary_int(err, r"(\d+) overdrafts naming"),
        "overdrafts_attach": summary_int(err, r"overdrafts naming, (\d+) attaching"),
        "failures_skipped": summary_int(err, r"failed reads:\s+(\d+)"),
        "dropped_at_stop": summary_int(err, r"at stop:\s+(\d+)"),
        "samples": summary_int(err, r"samples taken:\s+(\d+)"),
        "lost": summary_int(err, r"samples lost:\s+(\d+)"),
        "runtimes": runtimes,
    }


# ---------------------------------------------------------------- one run

def spawn(args, **kw):
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def run_case(agent_bin, tmp, name, kind, seconds, perf_dir=None):
    runtime = {"ruby-scan": "ruby", "hotspot": "java", "node-cons": "node"}.get(kind, kind)
    genuine_kinds = ["python"] if runtime in (None, "python") else [runtime, "python"]
    missing = [k for k in genuine_kinds if not Path(GENUINE[k][0][0]).exists()]
    if missing:
        log(f"{name}: skipped, {GENUINE[missing[0]][0][0]} is not installed")
        return {"case": name, "skipped": f"{GENUINE[missing[0]][0][0]} missing"}
    children = []
    try:
        if kind:
            exe = build(tmp / f"case-{kind}", kind)
            crafted = spawn([str(exe)], user=NOBODY, group=NOBODY, extra_groups=[], cwd="/")
            children.append(crafted)
        for k in genuine_kinds:
            command = GENUINE[k][0]
            if k == "java":
                classes = tmp / "java-classes"
                if not classes.exists():
                    subprocess.run([f"{JDK}/bin/javac", "-d", str(classes), str(TESTS / "java" / "HotspotSpin.java")],
                                   check=True)
                command = [str(classes) if a == "JAVA_CLASSES" else a for a in command]
            children.append(spawn(command, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}))
        # A JVM takes a second or two to start its chain.
        time.sleep(3.0 if "java" in genuine_kinds else 0.5)
        out = tmp / f"{kind or 'baseline'}.folded"
        err_path = tmp / f"{kind or 'baseline'}.stderr"
        err_file = open(err_path, "w+")
        t_spawn = time.monotonic()
        agent = subprocess.Popen([str(agent_bin), "--verbose", "--samples-per-second", str(HZ),
                                  "--duration", f"{seconds}s", "--format", "folded", "--output", str(out)],
                                 stdout=subprocess.DEVNULL, stderr=err_file)
        pid = agent.pid
        while True:
            err_file.seek(0)
            if "sampling at" in err_file.read():
                break
            if agent.poll() is not None or time.monotonic() - t_spawn > 180:
                raise RuntimeError(f"agent did not start: {err_path.read_text()[-600:]}")
            time.sleep(0.005)
        t_ready = time.monotonic()
        c_ready = cpu_seconds(pid)
        machine0 = all_cpu()
        load0 = os.getloadavg()[0]
        # The naming budget's burst (10 s worth) is spent in the first
        # seconds by a crafted process; the steady figure is after it.
        settle = seconds / 3
        c_settled = None
        hwm = 0
        end = t_ready + seconds
        perf = None
        while time.monotonic() < end - 0.2:
            if c_settled is None and time.monotonic() >= t_ready + settle:
                c_settled, t_settled = cpu_seconds(pid), time.monotonic()
                if perf_dir:
                    # Where the steady part's time goes (perf report -i).
                    perf = subprocess.Popen(["perf", "record", "-q", "-F", "999", "--call-graph", "dwarf,16384",
                                             "-p", str(pid), "-o", str(Path(perf_dir) / f"perf-{kind or 'baseline'}.data"),
                                             "--", "sleep", str(max(1.0, end - 1.0 - time.monotonic()))],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            hwm = max(hwm, status_kib(pid, "VmHWM"))
            time.sleep(min(0.5, max(0.0, end - 0.2 - time.monotonic())))
        c_end, t_end = cpu_seconds(pid), time.monotonic()
        if perf:
            perf.wait()
        hwm = max(hwm, status_kib(pid, "VmHWM"))
        machine1 = all_cpu()
        load1 = os.getloadavg()[0]
        try:
            agent.wait(timeout=120)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        exit_after = time.monotonic() - end
        err_file.seek(0)
        err = err_file.read()
        folded = out.read_text(errors="replace") if out.exists() else ""
        genuine = {}
        for k in genuine_kinds:
            at_leaf, whole = chain_share(folded, GENUINE[k][1])
            genuine[k] = {"at_leaf": at_leaf, "whole": whole}
        ours = {pid, os.getpid(), *(c.pid for c in children)}
        others = others_cpu(machine0, machine1, ours)
        row = {
            "case": name,
            "crafted": kind,
            "seconds": round(t_end - t_ready, 1),
            "startup_s": round(t_ready - t_spawn, 2),
            "startup_cpu_s": round(c_ready, 2),
            "cpu_pct": 100.0 * (c_end - c_ready) / (t_end - t_ready),
            "steady_cpu_pct": 100.0 * (c_end - c_settled) / (t_end - t_settled) if c_settled is not None else None,
            "hwm_kib": hwm,
            "exit_after_s": round(exit_after, 2),
            "exit_code": agent.returncode,
            "genuine": genuine,
            "budget": budget_counters(err),
            "loadavg": (round(load0, 2), round(load1, 2)),
            "others_cpu_pct": 100.0 * sum(c for _, c in others) / (t_end - t_ready),
            "others_top": [(comm, round(100.0 * c / (t_end - t_ready), 1)) for comm, c in others[:5]],
        }
        log(f"{name}: {fmt_row(row)}")
        return row
    finally:
        for c in children:
            c.kill()
            c.wait()


# ---------------------------------------------------------------- report

def fmt_share(g):
    if not g["at_leaf"]:
        return "no samples"
    return f"{100.0 * g['whole'] / g['at_leaf']:.1f}% of {g['at_leaf']}"


def fmt_row(r):
    b = r["budget"]
    return (f"CPU {r['cpu_pct']:.1f}% (steady {r['steady_cpu_pct']:.1f}%, start-up {r['startup_cpu_s']:.2f} s), "
            f"VmHWM {r['hwm_kib'] // 1024} MiB, exit +{r['exit_after_s']:.2f} s, genuine "
            + ", ".join(f"{k} {fmt_share(g)}" for k, g in r["genuine"].items())
            + f", samples {b['samples']} lost {b['lost']}, over budget {b['processes_over']}")


def over_figures(b):
    """Overdrafts and reads refused, naming's (and attaching's when any)."""
    if not (b["overdrafts_attach"] or b["reads_refused_attach"]):
        return f"{b['overdrafts']}, {b['reads_refused_naming']}"
    return (f"{b['overdrafts']} + {b['overdrafts_attach']} attaching, "
            f"{b['reads_refused_naming']} + {b['reads_refused_attach']} attaching")


def table(rows):
    lines = [
        "| crafted runtime | agent CPU, % of a core | steady (last 2/3) | start-up CPU | VmHWM | exit after the duration "
        "| genuine chain whole (same runtime / python3) | samples (lost, dropped at stop) | over budget: processes, "
        "overdrafts, reads refused | crafted frames named | rest of the machine, % of a core (top) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['case']} | skipped: {r['skipped']} |" + " |" * 9)
            continue
        b = r["budget"]
        runtime = {"ruby-scan": "ruby", "node": "v8", "node-cons": "v8"}.get(r["crafted"], r["crafted"])
        named = "-"
        if runtime and runtime in b["runtimes"]:
            rt = b["runtimes"][runtime]
            named = f"{rt['named']} of {rt['frames']} {runtime} frames (all processes)"
        genuine = " / ".join(fmt_share(g) for g in r["genuine"].values())
        top = ", ".join(f"{c} {p}" for c, p in r["others_top"][:3])
        lines.append(
            f"| {r['case']} | {r['cpu_pct']:.1f}% | {r['steady_cpu_pct']:.1f}% | {r['startup_cpu_s']:.2f} s "
            f"in {r['startup_s']:.1f} s | {r['hwm_kib'] / 1024:.0f} MiB | {r['exit_after_s']:.2f} s | {genuine} "
            f"| {b['samples']} ({b['lost']}, {b['dropped_at_stop']}) "
            f"| {b['processes_over']}, {over_figures(b)} | {named} "
            f"| {r['others_cpu_pct']:.0f}% ({top}) |")
    return "\n".join(lines)


def section(rows, seconds, commit, agent_bin):
    loads = [l for r in rows if "loadavg" in r for l in r["loadavg"]]
    return f"""{SECTION}

- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, commit {commit}, \
`{agent_bin.relative_to(ROOT) if agent_bin.is_relative_to(ROOT) else agent_bin}`
- machine: {platform.system()} {platform.release()}, {os.cpu_count()} CPUs; load average (1 min) during the runs \
{min(loads, default=0):.1f} to {max(loads, default=0):.1f}. The agent profiles everything on the machine: other \
sessions' builds and tests ran meanwhile (the last column: CPU of processes other than the agent and the workloads), \
so the figures are rough
- command: `flock /tmp/measure.lock make bench-hostile` (`bench/hostile.py`): per row, the crafted process of \
`tests/workloads/<runtime>/hostile_*.c` (built as `tests/hostile_runtimes.rs` builds it) started as user nobody beside \
the same runtime's genuine chain script (the crafted HotSpot: OpenJDK 17 running `HotspotSpin main`; the crafted \
Node, built with the `v8dbg_*` constants of the machine's node: that node running `--jitless cpu_chain.js immediate`) and \
`python3 tests/workloads/python/chain.py`; then \
`ebpf-profiler --verbose --samples-per-second {HZ} --duration {seconds}s --format folded --output FILE` \
system-wide. CPU: utime + stime of the agent from "sampling at" to the end of the duration (steady: its last two \
thirds, once a crafted process has spent its budget's burst); start-up: spawn to "sampling at" (BPF load, the \
machine's files analysed). VmHWM: the agent's peak RSS. Genuine chain: of the folded stacks whose innermost chain \
function is the chain's leaf, the share carrying every chain function in order. Targets (issue 43): CPU < 5% of a \
core, VmHWM <= 128 MB, exit within 2 s of the duration, genuine chains >= 95%

{table(rows)}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default=str(ROOT / "target" / "release" / "ebpf-profiler"))
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--cases", help="comma-separated: baseline,python,ruby,ruby-scan,perl,php,hotspot,node,node-cons (default: all)")
    ap.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="the file whose section is written")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--perf", metavar="DIR", help="perf record (DWARF call graphs) the agent's steady part into "
                    "DIR/perf-CASE.data (its cost shows in the CPU figures)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-hostile: needs root (BPF, starting the crafted processes as nobody)")
    agent_bin = Path(args.agent).resolve()
    wanted = set(args.cases.split(",")) if args.cases else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    # The agent measured is built from the tree: say when it is not the commit's.
    changed = subprocess.run(["git", "status", "--porcelain", "--", "crates", "ebpf", "Cargo.lock"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
    if changed:
        commit += " with uncommitted changes"
    rows = []
    with tempfile.TemporaryDirectory(prefix="ep-bench-hostile-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o755)
        for name, kind in [("none (baseline)", None), *CASES]:
            if wanted and (kind or "baseline") not in wanted:
                continue
            log(f"{name}: {args.seconds} s")
            rows.append(run_case(agent_bin, tmp, name, kind, args.seconds, args.perf))
    print(table(rows))
    sections.write_section(Path(args.output), SECTION, section(rows, args.seconds, commit, agent_bin))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    log(f"wrote its section of {args.output}")


if __name__ == "__main__":
    main()
