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
- the most frequent cut stacks of ours (outermost frames first).

JFR turns on -XX:+DebugNonSafepoints while it records, so both see the same
debug information. CPU figures depend on what else runs on the machine.
Needs root (the agent), mvn, javac and jfr of the JDK given by --java-home.

    sudo bench/javac_accuracy.py --agent target/release/ebpf-profiler \
        --java-home /usr/lib/jvm/java-17-openjdk-amd64 --seconds 20
"""

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pprof_reader  # bench/pprof_reader.py

LIBRARIES = [
    ("org.apache.commons", "commons-math3", "3.6.1"),
    ("org.apache.commons", "commons-collections4", "4.4"),
]
THREAD_ROOTS = {"clone3", "clone", "__clone", "__clone3", "start_thread"}
JAVA_ROOT = "com.sun.tools.javac.Main.main"


def sources(work: Path) -> Path:
    """The libraries' sources unpacked under `work`, and their file list."""
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
            z.extractall(target)
        names += [str(p) for p in sorted(target.rglob("*.java"))]
    listing.write_text("\n".join(names) + "\n")
    return listing


def read_pprof(path):
    """Samples as (labels dict, frames leaf first as (function, file), count)."""
    return [(s.labels, [(f.function or f"0x{f.address:x}", f.file) for f in s.frames], s.count)
            for s in pprof_reader.read(path)]


def jfr_samples(jfr, recording):
    out = subprocess.run(
        [jfr, "print", "--json", "--stack-depth", "4096", "--events", "jdk.ExecutionSample", str(recording)],
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default="target/release/ebpf-profiler")
    ap.add_argument("--java-home", default="/usr/lib/jvm/java-17-openjdk-amd64")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--keep", help="keep the profiles and recordings in this directory")
    ap.add_argument("--cut", type=int, default=8, help="cut stacks listed")
    args = ap.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix="javac-accuracy-"))
    work.mkdir(parents=True, exist_ok=True)
    listing = sources(work)
    javac = Path(args.java_home) / "bin/javac"
    jfr = Path(args.java_home) / "bin/jfr"
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
        run_javac(args, javac, listing, work, recordings, start)
    finally:
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=120)
    runs = len(recordings)
    elapsed = time.time() - start
    summary = (work / "agent.stderr").read_text()
    report(args, work, listing, profile, recordings, runs, elapsed, summary, jfr)


def run_javac(args, javac, listing, work, recordings, start):
    runs = 0
    while time.time() - start < args.seconds or runs == 0:
        out = work / f"classes{runs}"
        out.mkdir(exist_ok=True)
        recording = work / f"run{runs}.jfr"
        subprocess.run(
            # --release 11: collections4 4.4 does not compile against JDK
            # 21+'s List (addLast).
            [str(javac), "-nowarn", "--release", "11", "-encoding", "UTF-8", "-d", str(out),
             f"-J-XX:StartFlightRecording=filename={recording},settings=profile",
             "-J-XX:FlightRecorderOptions=stackdepth=2048",
             f"@{listing}"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        recordings.append(recording)
        runs += 1


def report(args, work, listing, profile, recordings, runs, elapsed, summary, jfr):
    # Ours: javac's main thread (named as the process: the JVM does not
    # rename the thread that runs main; the primordial thread only waits).
    ours = [(f, n) for labels, f, n in read_pprof(profile)
            if labels.get("process") == "javac" and labels.get("thread") == "javac"]
    total = sum(n for _, n in ours)
    rooted = sum(n for f, n in ours if f and f[-1][0] in THREAD_ROOTS)
    with_main = sum(n for f, n in ours if any(name == JAVA_ROOT for name, _ in f))
    both = sum(n for f, n in ours if f and f[-1][0] in THREAD_ROOTS and any(name == JAVA_ROOT for name, _ in f))
    depth = sum(len(f) * n for f, n in ours) / max(total, 1)
    java_depth = sum(sum(1 for _, file in f if file.endswith(".java")) * n for f, n in ours) / max(total, 1)
    cut = collections.Counter()
    cut_lengths = collections.Counter()
    for f, n in ours:
        if not (f and f[-1][0] in THREAD_ROOTS):
            cut[";".join(name for name, _ in reversed(f[-4:]))] += n
            cut_lengths[len(f)] += n

    theirs = [(frames, truncated) for recs in recordings for thread, frames, truncated in jfr_samples(jfr, recs)
              if thread == "main"]
    jfr_total = len(theirs)
    jfr_rooted = sum(1 for frames, truncated in theirs if frames and frames[-1] == JAVA_ROOT and not truncated)
    jfr_depth = sum(len(frames) for frames, _ in theirs) / max(jfr_total, 1)

    pct = lambda a, b: f"{100.0 * a / b:.1f}%" if b else "-"
    print(f"javac {args.java_home}: {runs} runs of {len(listing.read_text().split())} files in {elapsed:.1f} s, "
          f"agent at {args.hz} Hz, JFR every 10 ms; load average {os.getloadavg()[0]:.1f}")
    print(f"ours, main thread: {total} samples; reach the thread root {rooted} = {pct(rooted, total)}; "
          f"carry {JAVA_ROOT} {with_main} = {pct(with_main, total)}; both {both} = {pct(both, total)}; "
          f"mean depth {depth:.1f} frames, {java_depth:.1f} Java frames")
    print(f"JFR, main thread: {jfr_total} samples; end at {JAVA_ROOT}, not truncated: {jfr_rooted} = "
          f"{pct(jfr_rooted, jfr_total)}; mean depth {jfr_depth:.1f} Java frames")
    print("ours, cut stacks by length: " + ", ".join(f"{k}: {v}" for k, v in sorted(cut_lengths.items())))
    for stack, n in cut.most_common(args.cut):
        print(f"  {n:5d}  {stack}")
    for line in summary.splitlines():
        if "unwind stops" in line or "unwound to the thread" in line or "hotspot counters" in line:
            print("agent:" + line)
    if not args.keep:
        print(f"(profiles in {work})")


if __name__ == "__main__":
    main()
