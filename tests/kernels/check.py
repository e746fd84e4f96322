#!/usr/bin/env python3
"""Asserts what smoke.sh left in OUT for one kernel; exits non-zero with
the reason (and the agent's stderr, which carries the verifier log when a
program was rejected). Writes OUT/summary.json for run.sh's table.

Usage: check.py OUT EXPECT   (EXPECT: task_pt_regs=yes|fallback)
"""
import glob
import json
import os
import re
import sys

EBPF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ebpf")
# The kernel keeps the first 15 bytes of a program's name.
PROG_NAME_LEN = 15


def defined_programs(ebpf=EBPF):
    """Every program of the agent's BPF object: each function defined
    right after a SEC(...) in ebpf/, and those a macro defines so
    (`SEC(...) int name##_suffix(...)`: the unwinders' entries) for each
    name it is invoked with, every runtime of runtimes.h when invoked
    from a RUNTIME definition; so that a new one cannot be left out.
    smoke.sh runs the agent with --off-cpu: all of them load."""
    found = set()
    texts = []
    for path in sorted(glob.glob(os.path.join(ebpf, "*.c")) + glob.glob(os.path.join(ebpf, "*.h"))):
        with open(path) as f:
            texts.append(f.read())
    with open(os.path.join(ebpf, "runtimes.h")) as f:
        runtimes = re.findall(r"^RUNTIME\((\w+),", f.read(), re.M)
    for text in texts:
        for name in re.findall(r'^SEC\("[^"]+"\)\s*\n\s*int\s+(\w+)\s*\(', text, re.M):
            found.add(name[:PROG_NAME_LEN])
        entry_macros = re.findall(
            r'^#define\s+(\w+)\((\w+)\)\s*\\\s*\n\s*SEC\("[^"]+"\)\s*\\\s*\n\s*int\s+\2\s*##\s*(\w+)\s*\(', text, re.M
        )
        for macro, _, suffix in entry_macros:
            names = re.findall(rf"^{macro}\((\w+)\)", text, re.M)
            if re.search(rf"^#define\s+RUNTIME\(.*\)\s+{macro}\(name\)", text, re.M):
                names += runtimes
            for name in names:
                found.add((name + suffix)[:PROG_NAME_LEN])
    if not found:
        raise SystemExit(f"check.py: no BPF program found under {ebpf}")
    return sorted(found)


PROGRAMS = defined_programs()
LIBC_ROOT = ["_start", "__libc_start_main", "__libc_start_call_main", "main"]
NATIVE = LIBC_ROOT + ["chain_1", "chain_2", "chain_3", "chain_4", "chain_leaf"]
GO = ["runtime.goexit", "runtime.main", "main.main", "main.chain1", "main.chain2", "main.chain3", "main.chainLeaf"]
# The interpreter's native frames between _start and <module> depend on
# the build and on which of its symbols are named: only both ends count.
PYTHON_TAIL = ["<module>", "f1", "f2", "f3"]


def read(out, name):
    with open(os.path.join(out, name)) as f:
        return f.read()


def stacks(folded):
    """(process, frames without the kernel's) per folded line."""
    for line in folded.splitlines():
        stack, _, _count = line.rpartition(" ")
        process, *frames = stack.split(";")
        yield process, [f for f in frames if not f.endswith("_[k]")]


def has_chain(folded, process, chain, exact=True):
    for proc, frames in stacks(folded):
        if proc != process and not (process.endswith("*") and proc.startswith(process[:-1])):
            continue
        if exact and frames == chain:
            return True
        # Python: the interpreter's own root, its frames, then the chain.
        if not exact and frames[:1] == ["_start"] and len(frames) > len(chain) and frames[-len(chain):] == chain:
            return True
    return False


def find_field(value, name):
    """The last value of field `name` anywhere in bpftool's JSON (one
    map, or several when more than one agent runs)."""
    found = None
    if isinstance(value, dict):
        for k, v in value.items():
            inner = v if k == name else find_field(v, name)
            found = inner if inner is not None else found
    elif isinstance(value, list):
        for v in value:
            inner = find_field(v, name)
            found = inner if inner is not None else found
    return found


def main():
    out, expect = sys.argv[1], sys.argv[2]
    failures = []
    stderr = read(out, "agent.stderr") if os.path.exists(os.path.join(out, "agent.stderr")) else ""
    rc = read(out, "agent.rc").strip() if os.path.exists(os.path.join(out, "agent.rc")) else "missing"
    kernel = read(out, "uname").strip()
    if rc != "0" or "summary after" not in stderr:
        failures.append(f"the agent did not stop cleanly (exit code {rc})")

    progs = {}
    if os.path.exists(os.path.join(out, "progs.jsonl")):
        for line in read(out, "progs.jsonl").splitlines():
            p = json.loads(line)
            if p["name"] in PROGRAMS and p["id"] > progs.get(p["name"], {"id": -1})["id"]:
                progs[p["name"]] = p
    missing = [n for n in PROGRAMS if n not in progs]
    if missing:
        failures.append(f"programs not loaded: {missing}")
    for name in ("on_process_exit", "on_process_exec", "on_sched_switch"):
        if name in progs and progs[name]["run_cnt"] == 0:
            failures.append(f"{name} never ran: no {name.split('_')[-1]} event")
    after = os.path.join(out, "progs-after.jsonl")
    if os.path.exists(after):
        left = {json.loads(l)["id"] for l in read(out, "progs-after.jsonl").splitlines()}
        still = [p["name"] for p in progs.values() if p["id"] in left]
        if still:
            failures.append(f"programs still loaded after the agent stopped: {still}")
    else:
        failures.append("no program list after the agent stopped")

    folded = read(out, "agent.folded") if os.path.exists(os.path.join(out, "agent.folded")) else ""
    chains = [
        ("native chain without frame pointers", has_chain(folded, "native_chain", NATIVE)),
        ("native chain after an exec", has_chain(folded, "exec_target", NATIVE)),
        ("stripped Go chain", has_chain(folded, "go_chain", GO)),
        ("Python chain", has_chain(folded, "python3*", PYTHON_TAIL, exact=False)),
    ]
    failures += [f"no complete {what} in the folded output" for what, ok in chains if not ok]
    if "off-CPU profiling is not available" in stderr:
        failures.append("the kernel refused the off-CPU programs")
    off_cpu = os.path.join(out, "agent.off-cpu.folded")
    off_cpu_native = os.path.exists(off_cpu) and any(
        proc == "native_chain" and frames[:len(LIBC_ROOT)] == LIBC_ROOT for proc, frames in stacks(read(out, "agent.off-cpu.folded"))
    )
    chains.append(("native chain off the CPU (preempted)", off_cpu_native))
    if not off_cpu_native:
        failures.append("no native_chain stack from main in the off-CPU output")

    # Which path the agent took for the user registers of in-kernel samples.
    task_pt_regs = None
    try:
        task_pt_regs = find_field(json.loads(read(out, "rodata.json")), "have_task_pt_regs")
    except (OSError, ValueError) as e:
        failures.append(f"cannot read the programs' .rodata: {e}")
    if task_pt_regs is None:
        failures.append("no have_task_pt_regs in the programs' .rodata")
    want = {"task_pt_regs=yes": True, "task_pt_regs=fallback": False}.get(expect)
    if want is None:
        failures.append(f"unknown expectation {expect!r}")
    elif task_pt_regs is not None and task_pt_regs != want:
        failures.append(f"have_task_pt_regs is {task_pt_regs}, expected {want} ({expect})")

    startup = int(read(out, "startup_ms")) if os.path.exists(os.path.join(out, "startup_ms")) else None
    summary = {
        "kernel": kernel,
        "startup_ms": startup,
        "task_pt_regs": task_pt_regs,
        "programs": {n: {k: progs[n][k] for k in ("verified_insns", "xlated_bytes", "jited_bytes")} for n in progs},
        "failures": failures,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f)
    print(f"kernel {kernel}: start-up {startup} ms, bpf_task_pt_regs {({True: 'used', False: 'fallback'}).get(task_pt_regs, 'unknown')}")
    for n in PROGRAMS:
        if n in progs:
            p = progs[n]
            print(f"  {n:16} verified insns {p['verified_insns']!s:>7}  xlated {p['xlated_bytes']:>6} B  jited {p['jited_bytes']:>6} B")
    for what, ok in chains:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    if failures:
        print(f"kernel {kernel}: FAILED")
        for f in failures:
            print(f"  - {f}")
        print("---- agent stderr (the verifier log when a program was rejected) ----")
        print(stderr[-20000:])
        sys.exit(1)
    print(f"kernel {kernel}: ok")


if __name__ == "__main__":
    main()
