#!/usr/bin/env python3
"""`make test-runtimes` (issue 36): the runtime chain tests against the
runtime releases of Debian's newer suites, each in a root file system
built by `tests/runtimes/rootfs.sh` and run under chroot (EP_RUNTIME_ROOT)
while the agent profiles from the host, next to the host's own runtimes.

Each test runs alone (its test binary with `--exact`), so its exit status,
its `MATRIX chain=... complete=...` lines, a SKIPPED line or its panic
message are its own. Prints a table (runtime, release, where it came
from, test, result, completeness per chain, reason) and writes it to
--output. Failing releases stay in the table with their reason: the table
reports, it does not gate; the exit status is 0 unless the matrix could
not run at all. Root (BPF, chroot, debootstrap).
"""

import argparse
import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("EP_RUNTIME_CACHE", "/var/cache/ebpf-profiler-runtimes"))

# runtime -> (test target, which of its tests, interpreter, version probe,
# its chain test: the one test a release that is neither the oldest nor
# the newest runs under --scope ci)
RUNTIMES = {
    "ruby": ("ruby", lambda t: True, "/usr/bin/ruby", ["-e", "print RUBY_VERSION"], "chain_main_a_b_c"),
    "php": ("php", lambda t: True, "/usr/bin/php", ["-r", "echo PHP_VERSION;"], "chain_main_a_b_c"),
    "perl": ("perl", lambda t: True, "/usr/bin/perl", ["-e", "printf '%vd', $^V"], "chain_main_a_b_c"),
    "erlang": (
        "beam",
        lambda t: True,
        "/usr/bin/erl",
        ["-noshell", "-eval", "io:put_chars(erlang:system_info(otp_release)), halt()."],
        "erlang_chains_to_the_scheduler_root",
    ),
    # Only the system interpreter's tests (the root's python3, or the
    # CPython EP_RUNTIME_PYTHON names): the others are pyenv's builds or
    # edited copies of the host's.
    "python": (
        "python_unwinding",
        lambda t: t.endswith("::system"),
        "/usr/bin/python3",
        ["-c", "import platform; print(platform.python_version())"],
        "chain_test::system",
    ),
    # Node's official releases from npm (scripts/install-node-releases.sh)
    # and the host's, by EP_TEST_NODES; tests/v8.rs does not run in a
    # root, so the roots' Debian builds (libnode) have no row yet.
    "node": ("v8", lambda t: True, None, ["--version"], "optimised_chain"),
    # Each OpenJDK of the source (EP_RUNTIME_JDK), see jdks().
    "java": ("hotspot", lambda t: t.startswith("matrix_jdk_"), None, ["-version"], "matrix_jdk_main_compiled"),
}

# Releases the agent refuses, saying so: (runtime, release prefix) -> what
# their failed test's reason must show (the agent's notice). The row is
# "refused", not a failure, when it does. OTP 29 exports none of the
# symbols BEAM's reader needs (docs/beam.md).
REFUSED = {("erlang", "29"): "is not supported"}


def refusal(runtime, version):
    """What the failed test of a refused release must show (REFUSED), or
    None when the agent is expected to read `version`."""
    return next((m for (rt, pre), m in REFUSED.items() if rt == runtime and version.startswith(pre)), None)


def release_key(version):
    """A release's numbers, for ordering ("3.14.10" -> (3, 14, 10))."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def jdks(root):
    """The OpenJDKs of a source: (name, its java, EP_RUNTIME_JDK)."""
    jvm = Path(root or "/", "usr/lib/jvm")
    homes = sorted(p.name for p in jvm.glob("java-*-openjdk-amd64") if not p.is_symlink())
    return [(f"java{h.split('-')[1]}", f"/usr/lib/jvm/{h}/bin/java", {"EP_RUNTIME_JDK": f"/usr/lib/jvm/{h}"}) for h in homes]


def pythons(root):
    """A source's CPythons: its python3, and each other python3.N beside
    it (sid's 3.15), run by the `::system` tests through
    EP_RUNTIME_PYTHON."""
    found = [("python", "/usr/bin/python3", {})]
    default = Path(root or "/", "usr/bin/python3")
    target = default.resolve().name if default.exists() else None
    for exe in sorted(Path(root or "/", "usr/bin").glob("python3.[0-9]*")):
        if re.fullmatch(r"python3\.\d+", exe.name) and exe.name != target and not exe.is_symlink():
            found.append((exe.name, f"/usr/bin/{exe.name}", {"EP_RUNTIME_PYTHON": f"/usr/bin/{exe.name}"}))
    return found


# The source of Node's official releases (no root: they run on the host).
NPM = "npm (official builds)"


def nodes(source, root):
    """The Nodes tests/v8.rs knows, by its labels: npm's releases cached
    under CACHE/node, the host's /usr/bin/node; none in a root (tests/v8.rs
    does not run in one, so the roots' Debian builds, on libnode, have no
    row yet)."""
    if source == NPM:
        releases = sorted((CACHE / "node").glob("*/bin/node"), key=lambda p: int(p.parts[-3]))
        return [(f"node{r.parts[-3]}", str(r), {"EP_TEST_NODES": f"node{r.parts[-3]}"}) for r in releases]
    if root is None:
        return [("node20", "/usr/bin/node", {"EP_TEST_NODES": "node20"})]
    return []


def variants(runtime, source, root):
    """What to test of `runtime` in a source: (name, interpreter, extra
    environment) each."""
    if runtime == "node":
        return nodes(source, root)
    if source == NPM:
        return []
    if runtime == "java":
        return jdks(root) or [("java", "/usr/lib/jvm/java-*-openjdk-amd64/bin/java", {})]
    if runtime == "python":
        return pythons(root)
    return [(runtime, RUNTIMES[runtime][2], {})]


@contextlib.contextmanager
def proc_mounted(root):
    """/proc in `root` while the JVM runs there (its launcher finds
    libjli.so through /proc/self/exe)."""
    proc = Path(root, "proc") if root else None
    if proc is None or os.path.ismount(proc):
        yield
        return
    subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(proc)], check=True)


def test_binaries(targets):
    """The executables of the test targets, by target name: every test
    target built as `make test` builds them (naming some with `--test`
    would leave out the other crates' dev-dependencies, whose features
    change shared dependencies: all of them would be built again)."""
    cmd = ["cargo", "test", "--locked", "--workspace", "--no-run", "--message-format=json"]
    out = subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.PIPE, text=True).stdout
    binaries = {}
    for line in out.splitlines():
        msg = json.loads(line)
        target = msg.get("target", {})
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and target.get("name") in targets:
            binaries[target["name"]] = msg["executable"]
    missing = sorted(set(targets) - set(binaries))
    if missing:
        sys.exit(f"matrix: no test target {', '.join(missing)} in the workspace")
    return binaries


def release(root, interpreter, probe):
    """The interpreter's version as it reports it, or why there is none."""
    path = Path(root, interpreter.lstrip("/")) if root else Path(interpreter)
    if not path.exists():
        return "not installed"
    cmd = (["chroot", root] if root else []) + [interpreter] + probe
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        return f"probe failed: {r.stdout[:80]}"
    first = r.stdout.strip().splitlines()[0]
    quoted = re.search(r'"([^"]+)"', first)  # java -version: openjdk version "25.0.5" ...
    return quoted.group(1) if quoted else first


# The agent's name of a runtime in its counters, where it differs.
COUNTERS = {"java": "hotspot", "erlang": "beam", "node": "v8"}


def counters_of(output, runtime):
    """The agent's counters of `runtime` in a failed test's Stats dump
    (`files=0 unsupported=0 frames=0`: whether it knew the runtime at all)."""
    flat = re.sub(r"\s+", " ", output)
    block = re.search(r'\( "%s", \[(.*?)\],? ?\)' % re.escape(COUNTERS.get(runtime, runtime)), flat)
    if not block:
        return ""
    pairs = dict(re.findall(r'\( "(\w+)", (\d+),? \)', block.group(1)))
    shown = [f"{k}={pairs[k]}" for k in ("files", "unsupported", "attach_failures", "frames") if k in pairs]
    return f" [{COUNTERS.get(runtime, runtime)}: {' '.join(shown)}]"


def reason_of(output, runtime):
    """The first line of a failed test's panic message, and the agent's
    counters of the runtime."""
    return first_panic_line(output) + counters_of(output, runtime)


def first_panic_line(output):
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "panicked at" in line and i + 1 < len(lines):
            reason = lines[i + 1].strip()[:160]
            # A chain's failures follow, root first: show the first.
            if reason.endswith("(root first):") and i + 2 < len(lines):
                reason += " e.g. " + lines[i + 2].strip()[-120:]
            return reason
    return "exit status without a panic message"


@contextlib.contextmanager
def locked(path):
    """Holds flock(1)'s lock on `path`, if given: BPF tests measure the
    CPUs, one at a time on a shared machine. Taken per runtime of a
    source, not per test, so that a matrix does not wait behind every
    other user's run once per test."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_test(binary, name, root, extra_env, runtime):
    env = dict(os.environ, **extra_env)
    env.pop("EP_RUNTIME_ROOT", None)
    env["RUST_BACKTRACE"] = "0"
    if root:
        env["EP_RUNTIME_ROOT"] = str(root)
    cmd = [binary, "--exact", name, "--nocapture", "--test-threads=1"]
    start = time.monotonic()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    # Not anchored: libtest's `test NAME ... ` may start the line.
    chains = re.findall(r"MATRIX chain=(\S+) complete=([\d.]+) samples=(\d+)", r.stdout)
    skipped = re.search(r"SKIPPED: (.*)$", r.stdout, re.M)
    if r.returncode != 0:
        result, reason = "FAIL", reason_of(r.stdout, runtime)
    elif skipped:
        result, reason = "skipped", skipped.group(1)
    else:
        result, reason = "pass", ""
    return {"result": result, "reason": reason, "chains": chains, "seconds": seconds, "log": r.stdout}


def host_name():
    text = Path("/etc/os-release").read_text()
    version = re.search(r'^VERSION_ID="?([^"\n]*)', text, re.M)
    return f"host (Debian {version.group(1)})" if version else "host"


def by_release(releases):
    """A row a release: its tests passed (and refused) of those run, and
    the lowest and highest completeness of its chains."""
    out = []
    for (variant, version, source), tests in releases.items():
        passed = sum(r == "pass" for r, _ in tests)
        refused = sum(r == "refused" for r, _ in tests)
        ran = sum(r in ("pass", "FAIL", "refused") for r, _ in tests)
        shares = [float(p) for _, chains in tests for _, p, _ in chains]
        span = f"{min(shares):.1f}-{max(shares):.1f}%" if shares else "-"
        told = f"{passed} of {ran}" + (f" ({refused} refused as expected)" if refused else "")
        out.append((variant, version, source.split(" (")[0], told, span))
    return out


def markdown(rows, header):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(out)


def plan(runtime, sources, probe, tests, chain_test, scope):
    """What to run of `runtime`: (source, root, variant, environment,
    release, tests, why not) per release found. Under scope "ci" each
    release runs once (the newest suite's copy), the newest release all
    of `tests`, the others `chain_test` only; a refused release
    (REFUSED) its chain test, which must show the refusal."""
    found = []
    for source, root in sources:
        for variant, interpreter, extra_env in variants(runtime, source, root):
            with proc_mounted(root if runtime == "java" else None):
                version = release(root, interpreter, probe)
            found.append((source, root, variant, extra_env, version))
    if scope == "full":
        return [(*f, tests, None) for f in found]
    readable = [f for f in found if release_key(f[4]) and not refusal(runtime, f[4])]
    newest = max((release_key(f[4]) for f in readable), default=None)
    planned, seen = [], {}
    # Later suites first: a release in both runs in the newer one.
    for source, root, variant, extra_env, version in reversed(found):
        key = release_key(version)
        if not key:
            planned.append((source, root, variant, extra_env, version, [], f"no release: {version}"))
        elif key in seen:
            planned.append((source, root, variant, extra_env, version, [], f"the same release runs from {seen[key]}"))
        else:
            seen[key] = source
            names = tests if key == newest else [chain_test]
            planned.append((source, root, variant, extra_env, version, names, None))
    return list(reversed(planned))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suites", nargs="*", default=["trixie", "sid"])
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated: " + ",".join(RUNTIMES))
    ap.add_argument("--no-host", action="store_true", help="only the suites' runtimes")
    ap.add_argument(
        "--scope",
        choices=["full", "ci"],
        default="full",
        help="full: every test of every release; ci: every test of each runtime's newest release, "
        "the chain test of the others, each release once",
    )
    ap.add_argument("--gate", action="store_true", help="exit 1 when a test fails (CI)")
    ap.add_argument("--lock", help="flock this file around the tests of each runtime of a source")
    ap.add_argument("--output", default=str(REPO / "target/runtimes-matrix.md"))
    ap.add_argument("--logs", default=str(REPO / "target/runtimes-matrix"), help="each test's output")
    args = ap.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    started = time.monotonic()

    builds = []
    for suite in args.suites:
        t = time.monotonic()
        subprocess.run([str(REPO / "tests/runtimes/rootfs.sh"), suite], check=True)
        builds.append((suite, time.monotonic() - t))

    binaries = test_binaries(sorted({RUNTIMES[r][0] for r in runtimes}))
    # The suites first: the host's runtimes are CI's, tested by `make test` too.
    sources = [(s, CACHE / s) for s in args.suites] + [(NPM, None)] + ([] if args.no_host else [(host_name(), None)])
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    # (runtime, release, source) -> (result, MATRIX chains) of each test.
    releases = {}
    for runtime in runtimes:
        target, wanted, _, probe, chain_test = RUNTIMES[runtime]
        listed = subprocess.run([binaries[target], "--list"], check=True, stdout=subprocess.PIPE, text=True).stdout
        tests = [line[: -len(": test")] for line in listed.splitlines() if line.endswith(": test")]
        tests = [t for t in tests if wanted(t)]
        assert chain_test in tests, f"{runtime}: no chain test {chain_test} in {target}"
        for entry in plan(runtime, sources, probe, tests, chain_test, args.scope):
            source, root, variant, extra_env, version, names, why = entry
            label = source.split(" ")[0]
            if why:
                rows.append((variant, version, source, "-", "skipped", "-", why, "0"))
                print(f"{variant} {version} [{source}]: skipped: {why}", flush=True)
                continue
            refused_with = refusal(runtime, version)
            with locked(args.lock), proc_mounted(root if runtime == "java" else None):
                for name in names:
                    r = run_test(binaries[target], name, root, extra_env, runtime)
                    if refused_with and r["result"] == "FAIL" and refused_with in r["reason"]:
                        r["result"] = "refused"
                    (logs / f"{label}-{variant}-{name.replace('::', '-')}.log").write_text(r["log"])
                    chains = "<br>".join(f"{c} {p}% of {n}" for c, p, n in r["chains"]) or "-"
                    row = (variant, version, source, name, r["result"], chains, r["reason"], f"{r['seconds']:.0f}")
                    rows.append(row)
                    releases.setdefault((variant, version, source), []).append((r["result"], r["chains"]))
                    print(f"{variant} {version} [{source}] {name}: {r['result']} {r['reason']}", flush=True)

    # A runtime with no release tested at all is a failure of the matrix
    # (a root or a cache missing), not a pass.
    ran = ("pass", "FAIL", "refused")
    untested = [rt for rt in runtimes if not any(r[4] in ran and r[0].startswith(rt) for r in rows)]
    for rt in untested:
        rows.append((rt, "-", "-", "-", "FAIL", "-", "no release of it was tested", "0"))
    header = ["runtime", "release", "from", "test", "result", "chains complete (of samples at the leaf)", "reason", "s"]
    passed = sum(r[4] == "pass" for r in rows)
    failed = sum(r[4] == "FAIL" for r in rows)
    refused = sum(r[4] == "refused" for r in rows)
    summary = [
        f"scope {args.scope}: {passed} passed, {failed} failed, {refused} refused as expected, "
        f"{len(rows) - passed - failed - refused} skipped, "
        f"in {time.monotonic() - started:.0f} s in all"
        + "".join(f"; {suite} root checked/built in {s:.0f} s" for suite, s in builds),
    ]
    for suite in args.suites:
        versions = CACHE / suite / "versions.txt"
        if versions.exists():
            summary.append(f"\n{suite} packages:\n\n```\n{versions.read_text().strip()}\n```")
    text = (
        "# Runtime version matrix\n\n"
        + markdown(by_release(releases), ["runtime", "release", "from", "tests passed", "chains complete (lowest-highest)"])
        + "\n\n"
        + markdown(rows, header)
        + "\n\n"
        + "\n".join(summary)
        + "\n"
    )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    print("\n" + text)
    print(f"wrote {args.output}; each test's output in {logs}/")
    return 1 if args.gate and failed else 0


if __name__ == "__main__":
    sys.exit(main())
