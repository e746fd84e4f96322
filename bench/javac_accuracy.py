#!/usr/bin/env python3
"""Java stacks on a real program: the agent and JFR side by side.

Runs `javac` (a real compiler) on a real library's sources, Apache
commons-math3 3.6.1 and commons-collections4 4.4 (their sources jars,
fetched once with `mvn dependency:get` into ~/.m2), in a loop for about
`--seconds`, each run recording itself with JFR (`jdk.ExecutionSample`,
`settings=profile`: every 10 ms) while the agent samples the whole machine
(`--format pprof`). Then, for the javac main thread only, it reports:

- ours: the share of samples whose outermost frame is the thread's root
  (libc's `clone3`/`clone`/`start_thread`), the share that carries the
  Java root `com.sun.tools.javac.Main.main` (the one JFR can show), the
  mean depth (all frames, inlined ones included) and the mean number of
  Java frames;
- JFR: the share of samples whose bottom frame is
  `com.sun.tools.javac.Main.main` and that are not truncated, and the
  mean depth (JFR shows only Java frames);
- the 15 methods with the largest inclusive share in JFR (the share of
  the main thread's samples that hold the method anywhere), with ours;
- the most frequent cut stacks of ours (outermost frames first).

JFR's own start (in the main thread, before it records) is left out of
ours. JFR turns on -XX:+DebugNonSafepoints while it records, so both see
the same debug information. CPU figures depend on what else runs on the
machine.

A JDK in another root file system (`--root`, e.g. Debian's JDK 21 and 26
under /var/cache/ebpf-profiler-runtimes) runs under `chroot` with its own
/proc, the sources copied into the root; the agent profiles it like any
other process. `--cases` runs several JDKs one after the other and
`--write` puts their table into BENCHMARKS.md (its own section).
Needs root (the agent, chroot), mvn, javac and jfr of the JDK given by
--java-home.

    bench/javac_accuracy.py --agent target/release/ebpf-profiler \
        --java-home /usr/lib/jvm/java-17-openjdk-amd64 --seconds 20
    bench/javac_accuracy.py --agent target/release/ebpf-profiler --write --cases \
        "17=/usr/lib/jvm/java-17-openjdk-amd64,21=/var/cache/ebpf-profiler-runtimes/trixie:/usr/lib/jvm/java-21-openjdk-amd64"
"""

import argparse
import collections
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pprof_reader  # bench/pprof_reader.py
import sections  # bench/sections.py

ROOT = Path(__file__).resolve().parent.parent

LIBRARIES = [
    ("org.apache.commons", "commons-math3", "3.6.1"),
    ("org.apache.commons", "commons-collections4", "4.4"),
]
THREAD_ROOTS = {"clone3", "clone", "__clone", "__clone3", "start_thread"}
# JFR starting its recording in the main thread, before it records: JFR
# cannot show it, so it is left out of ours too.
JFR_START = "jdk.jfr.internal.dcmd.DCmdStart.execute"


def is_root(name):
    """Whether the outermost frame `name` is the thread's root. A JDK
    in another root file system uses that system's libc, whose symbols
    (`clone3`: not in `.dynsym`) the agent finds only with its debug
    files: there an unnamed libc frame outermost counts as the root."""
    return name in THREAD_ROOTS or name.startswith("libc.so.6+0x")
JAVA_ROOT = "com.sun.tools.javac.Main.main"
TOP = 15
WITHIN = 3.0  # points of inclusive share


def method_name(name):
    """A Java method's name without the addresses of hidden classes, as
    the agent names them (`Foo$$Lambda$14/0x...` and `Foo$$Lambda+0x...`
    are `Foo$$Lambda`)."""
    name = re.sub(r"\$\$Lambda[$0-9]*(?:[+/]0x[0-9a-f]+)?", "$$Lambda", name)
    return re.sub(r"[+/]0x[0-9a-f]+", "", name)


class Jdk:
    """A JDK, on this system or inside another root file system."""

    def __init__(self, home, root=None):
        self.home, self.root = home, root

    def outside(self, path):
        """The path, inside the root, as seen from here."""
        return Path(self.root + str(path)) if self.root else Path(path)

    def command(self, argv):
        if not self.root:
            return argv
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                f"mount -t proc proc {self.root}/proc && exec chroot {self.root} \"$@\"", "sh"] + argv


def sources(work: Path, jdk: Jdk) -> Path:
    """The libraries' sources unpacked under `work` (a path inside the
    JDK's root), and their file list (a path there too)."""
    listing = work / "files.txt"
    names = []
    for group, artifact, version in LIBRARIES:
        jar = (
            Path.home() / ".m2/repository" / group.replace(".", "/") / artifact / version
            / f"{artifact}-{version}-sources.jar"
        )
        if not jar.exists():
            subprocess.run(
                ["mvn", "-q", "dependency:get", f"-Dartifact={group}:{artifact}:{version}:jar:sources",
                 "-Dtransitive=false"],
                check=True,
            )
        target = work / "src" / artifact
        with zipfile.ZipFile(jar) as z:
            z.extractall(jdk.outside(target))
        names += [str(target / p.relative_to(jdk.outside(target)))
                  for p in sorted(jdk.outside(target).rglob("*.java"))]
    jdk.outside(listing).write_text("\n".join(names) + "\n")
    return listing


def read_pprof(path):
    """Samples as (labels dict, frames leaf first as (function, file), count)."""
    return [(s.labels, [(f.function or f"0x{f.address:x}", f.file) for f in s.frames], s.count)
            for s in pprof_reader.read(path)]


def jfr_samples(jdk, jfr, recording):
    out = subprocess.run(
        jdk.command([str(jfr), "print", "--json", "--stack-depth", "4096", "--events", "jdk.ExecutionSample",
                     str(recording)]),
        check=True, capture_output=True, text=True,
    ).stdout
    events = json.loads(out)["recording"]["events"]
    result = []
    for e in events:
        v = e["values"]
        thread = (v.get("sampledThread") or {}).get("javaName")
        trace = v.get("stackTrace") or {}
        frames = [f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}" for f in trace.get("frames", [])]
        result.append((thread, frames, bool(trace.get("truncated"))))
    return result


SECTION = sections.JAVAC


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default="target/release/ebpf-profiler")
    ap.add_argument("--java-home", default="/usr/lib/jvm/java-17-openjdk-amd64")
    ap.add_argument("--root", help="the root file system the JDK is in (run under chroot)")
    ap.add_argument("--cases", help="NAME=[ROOT:]JAVA_HOME,... instead of --java-home and --root")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--keep", help="keep the profiles and recordings in this directory")
    ap.add_argument("--cut", type=int, default=8, help="cut stacks listed")
    ap.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md (its own section)")
    ap.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()

    cases = []
    if args.cases:
        for case in args.cases.split(","):
            name, _, where = case.partition("=")
            root, _, home = where.rpartition(":")
            cases.append((name, Jdk(home, root or None)))
    else:
        cases.append((Path(args.java_home).name, Jdk(args.java_home, args.root)))
    results, loads = [], [os.getloadavg()[0]]
    for name, jdk in cases:
        keep = Path(args.keep) / name if args.keep and len(cases) > 1 else args.keep
        results.append(measure(args, name, jdk, keep))
        loads.append(os.getloadavg()[0])
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        section = f"""{SECTION}

- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, commit {commit}; \
{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, load average {min(loads):.1f} to {max(loads):.1f} \
(other work ran on the machine: rough figures)
- command: `bench/javac_accuracy.py --agent target/release/ebpf-profiler --write --seconds {args.seconds:g} \
--cases "{args.cases or ''}"`: javac (`--release 11`) compiles commons-math3 3.6.1 and commons-collections4 4.4 \
in a loop for {args.seconds:g} s, recording itself with JFR (every 10 ms, which turns on \
-XX:+DebugNonSafepoints) while the agent samples the machine at {args.hz} Hz; javac's main thread only, without \
JFR's own start (`DCmdStart`, which JFR cannot record). Ours reach the root: the outermost frame is the thread's \
root (`clone3`/`start_thread`; in a chroot, its libc's outermost frame, unnamed there); JFR: ends at \
`{JAVA_ROOT}`, not truncated. Depth: all frames (ours; Java frames in brackets), Java frames (JFR). Top {TOP}: the \
methods with the largest inclusive share in JFR, ours within {WITHIN:g} points. JFR's `jdk.ExecutionSample` \
takes threads running Java code only, ours every state: time in the JVM's own code (class loading, the \
interpreter's runtime calls) weighs on ours alone

| JDK | runs | samples (ours / JFR) | ours reach the root | JFR reaches `Main.main` | depth ours (Java) / JFR | top {TOP} within {WITHIN:g} points |
|---|---|---|---|---|---|---|
""" + "".join(r["row"] for r in results) + "\n" + "\n".join(r["top"] for r in results)
        sections.write_section(Path(args.output), SECTION, section)


def measure(args, name, jdk, keep):
    # `work`: where the profile goes, as seen from here; `inside`: where
    # javac's sources, classes and recordings go, as javac sees it.
    if not keep:
        work = Path(tempfile.mkdtemp(prefix="javac-accuracy-", dir=jdk.outside("/tmp")))
        inside = Path("/") / work.relative_to(jdk.root) if jdk.root else work
    elif jdk.root:
        work = Path(keep)
        inside = Path("/tmp") / f"javac-accuracy-{name}"
        shutil.rmtree(jdk.outside(inside), ignore_errors=True)
        jdk.outside(inside).mkdir(parents=True)
    else:
        work = inside = Path(keep)
    work.mkdir(parents=True, exist_ok=True)
    listing = sources(inside, jdk)
    javac = Path(jdk.home) / "bin/javac"
    jfr = Path(jdk.home) / "bin/jfr"
    profile = work / "agent.pb.gz"
    agent_err = open(work / "agent.stderr", "w+")
    verbose = ["--verbose"] if "--verbose" in subprocess.run([args.agent, "--help"], capture_output=True,
                                                             text=True).stdout else []
    agent = subprocess.Popen(
        [args.agent, "--samples-per-second", str(args.hz), "--format", "pprof", "--output", str(profile)] + verbose,
        stderr=agent_err,
    )
    deadline = time.time() + 120
    while "sampling at" not in (work / "agent.stderr").read_text():
        if agent.poll() is not None or time.time() > deadline:
            sys.exit(f"the agent did not start: {(work / 'agent.stderr').read_text()}")
        time.sleep(0.2)
    # Let the agent analyse the JDK's files once before the measured runs.
    time.sleep(2)
    recordings, start = [], time.time()
    try:
        run_javac(args, jdk, javac, listing, inside, recordings, start)
    finally:
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=120)
    runs = len(recordings)
    elapsed = time.time() - start
    summary = (work / "agent.stderr").read_text()
    result = report(args, name, jdk, listing, profile, recordings, runs, elapsed, summary, jfr)
    if jdk.root:
        # The sources and classes are not left inside the root.
        for path in [jdk.outside(inside) / "src"] + list(jdk.outside(inside).glob("classes*")):
            shutil.rmtree(path, ignore_errors=True)
    if not keep:
        print(f"(profiles in {work})")
    return result


def run_javac(args, jdk, javac, listing, work, recordings, start):
    runs = 0
    while time.time() - start < args.seconds or runs == 0:
        out = work / f"classes{runs}"
        jdk.outside(out).mkdir(exist_ok=True)
        recording = work / f"run{runs}.jfr"
        subprocess.run(
            # --release 11: collections4 4.4 does not compile against JDK
            # 21+'s List (addLast).
            jdk.command([str(javac), "-nowarn", "--release", "11", "-encoding", "UTF-8", "-d", str(out),
                         f"-J-XX:StartFlightRecording=filename={recording},settings=profile",
                         "-J-XX:FlightRecorderOptions=stackdepth=2048",
                         f"@{listing}"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        recordings.append(recording)
        runs += 1


def report(args, name, jdk, listing, profile, recordings, runs, elapsed, summary, jfr):
    # Ours: javac's main thread (named as the process: the JVM does not
    # rename the thread that runs main; the primordial thread only waits).
    ours = [(f, n) for labels, f, n in read_pprof(profile)
            if labels.get("process") == "javac" and labels.get("thread") == "javac"]
    jfr_start = sum(n for f, n in ours if any(name == JFR_START for name, _ in f))
    ours = [(f, n) for f, n in ours if not any(name == JFR_START for name, _ in f)]
    total = sum(n for _, n in ours)
    rooted = sum(n for f, n in ours if f and is_root(f[-1][0]))
    with_main = sum(n for f, n in ours if any(name == JAVA_ROOT for name, _ in f))
    both = sum(n for f, n in ours if f and is_root(f[-1][0]) and any(name == JAVA_ROOT for name, _ in f))
    depth = sum(len(f) * n for f, n in ours) / max(total, 1)
    java_depth = sum(sum(1 for _, file in f if file.endswith(".java")) * n for f, n in ours) / max(total, 1)
    cut = collections.Counter()
    cut_lengths = collections.Counter()
    for f, n in ours:
        if not (f and is_root(f[-1][0])):
            cut[";".join(name for name, _ in reversed(f[-4:]))] += n
            cut_lengths[len(f)] += n

    theirs = [(frames, truncated) for recs in recordings for thread, frames, truncated in jfr_samples(jdk, jfr, recs)
              if thread == "main"]
    jfr_total = len(theirs)
    jfr_rooted = sum(1 for frames, truncated in theirs if frames and frames[-1] == JAVA_ROOT and not truncated)
    jfr_depth = sum(len(frames) for frames, _ in theirs) / max(jfr_total, 1)

    # Inclusive shares: each method counted once per sample.
    jfr_incl = collections.Counter()
    for frames, _ in theirs:
        jfr_incl.update({method_name(f) for f in frames})
    our_incl = collections.Counter()
    for f, n in ours:
        for m in {method_name(name) for name, _ in f}:
            our_incl[m] += n
    top = []
    for method, count in jfr_incl.most_common(TOP):
        a, b = 100.0 * count / max(jfr_total, 1), 100.0 * our_incl[method] / max(total, 1)
        top.append((method, a, b, abs(a - b) <= WITHIN))

    pct = lambda a, b: f"{100.0 * a / b:.1f}%" if b else "-"
    print(f"javac {jdk.home}{' in ' + jdk.root if jdk.root else ''}: {runs} runs of "
          f"{len(jdk.outside(listing).read_text().split())} files in {elapsed:.1f} s, "
          f"agent at {args.hz} Hz, JFR every 10 ms; load average {os.getloadavg()[0]:.1f}")
    print(f"ours, main thread: {total} samples ({jfr_start} more in JFR's start, left out); reach the thread root {rooted} = {pct(rooted, total)}; "
          f"carry {JAVA_ROOT} {with_main} = {pct(with_main, total)}; both {both} = {pct(both, total)}; "
          f"mean depth {depth:.1f} frames, {java_depth:.1f} Java frames")
    print(f"JFR, main thread: {jfr_total} samples; end at {JAVA_ROOT}, not truncated: {jfr_rooted} = "
          f"{pct(jfr_rooted, jfr_total)}; mean depth {jfr_depth:.1f} Java frames")
    within = sum(1 for *_, ok in top if ok)
    print(f"top {TOP} inclusive (JFR / ours), {within} of {len(top)} within {WITHIN:g} points:")
    for method, a, b, ok in top:
        print(f"  {a:5.1f}% {b:5.1f}% {'' if ok else 'X '}{method}")
    print("ours, cut stacks by length: " + ", ".join(f"{k}: {v}" for k, v in sorted(cut_lengths.items())))
    for stack, n in cut.most_common(args.cut):
        print(f"  {n:5d}  {stack}")
    for line in summary.splitlines():
        if "unwind stops" in line or "unwound to the thread" in line or "hotspot counters" in line:
            print("agent:" + line)
    version = subprocess.run(jdk.command([str(Path(jdk.home) / "bin/java"), "-version"]), capture_output=True,
                             text=True).stderr.splitlines()
    version = next((v for v in version if "Runtime Environment" in v), jdk.home)
    row = (f"| {name}: {version.strip()} | {runs} | {total} / {jfr_total} | {pct(rooted, total)} | "
           f"{pct(jfr_rooted, jfr_total)} | {depth:.1f} ({java_depth:.1f}) / {jfr_depth:.1f} | "
           f"{within} of {len(top)} |\n")
    table = [f"{name}: inclusive share, JFR / ours (largest {TOP} of JFR)", "", "| method | JFR | ours |",
             "|---|---|---|"]
    table += [f"| `{m}` | {a:.1f}% | {b:.1f}% |" for m, a, b, _ in top]
    return {"row": row, "top": "\n".join(table) + "\n"}


if __name__ == "__main__":
    main()
