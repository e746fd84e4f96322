#!/usr/bin/env python3
"""Prints the Markdown table of docs/kernels.md from the summaries that
check.py left per kernel. Usage: table.py OUT VERSION..."""
import json
import os
import sys

PROGRAMS = ["on_cpu_sample", "native_unwind", "python_unwind", "on_process_exit", "on_process_exec"]


def main():
    out, versions = sys.argv[1], sys.argv[2:]
    print("| kernel | start-up (ms) | bpf_task_pt_regs | " + " | ".join(PROGRAMS) + " |")
    print("|---" * (3 + len(PROGRAMS)) + "|")
    for v in versions:
        path = os.path.join(out, v, "summary.json")
        if not os.path.exists(path):
            print(f"| {v} | no result |" + " |" * (1 + len(PROGRAMS)))
            continue
        with open(path) as f:
            s = json.load(f)
        cells = []
        for name in PROGRAMS:
            p = s["programs"].get(name)
            if p is None:
                cells.append("not loaded")
            elif p["verified_insns"] is None:
                cells.append(f"n/a ({p['xlated_bytes'] // 8} xlated)")
            else:
                cells.append(f"{p['verified_insns']} ({p['xlated_bytes'] // 8} xlated)")
        regs = {True: "used", False: "fallback", None: "unknown"}[s["task_pt_regs"]]
        print(f"| {s['kernel']} | {s['startup_ms']} | {regs} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
