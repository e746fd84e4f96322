"""The churn scenario of `make bench`: short-lived processes of varied
binaries started at a steady rate, and the agent's memory sampled while
they run. Standard library only; imported by bench.py."""

import os
import shutil
import statistics
import subprocess
import threading
import time

# A small C file for the compile of the mix.
C_SOURCE = r"""
#include <stdio.h>
#include <string.h>
struct point { int x, y; };
static int dist(struct point a, struct point b) { return (a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y); }
int main(int argc, char **argv) {
    struct point p[4] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
    int s = 0;
    for (int i = 0; i < 4; i++) s += dist(p[i], p[(i + 1) % 4]);
    printf("%d %zu\n", s, strlen(argc > 1 ? argv[1] : ""));
    return 0;
}
"""


def churn_commands(tmp):
    """The mix, one command a kind: shell pipelines, `python3 -c`, a C
    compile (gcc drives cc1 and as), `rustc -vV` (maps librustc_driver and
    libLLVM, 150-300 MB of libraries). Kinds whose tool is missing are left
    out (and listed by the caller)."""
    src = tmp / "churn.c"
    src.write_text(C_SOURCE)
    cmds = {
        "sh pipeline": ["sh", "-c", "ls /usr/bin | sort | head -200 | wc -l"],
        "sh pipeline 2": ["sh", "-c", "grep -c processor /proc/cpuinfo | tr 0-9 a-j | sed s/a/b/"],
        "python3 -c": ["python3", "-c", "import json, hashlib; print(json.dumps({'h': hashlib.sha1(b'x').hexdigest()}))"],
        "gcc -c": ["gcc", "-O1", "-c", "-o", str(tmp / "churn.o"), str(src)],
        "rustc -vV": ["rustc", "-vV"],
        "sh date|awk": ["sh", "-c", "date | awk '{print $1}' | cut -c1-2"],
    }
    return {k: v for k, v in cmds.items() if shutil.which(v[0])}


class Churn:
    """Starts the commands round-robin at `rate` per second from a thread,
    at most `max_in_flight` at once (a start skipped for that is counted)."""

    def __init__(self, commands, rate, max_in_flight=32):
        self.commands = list(commands.values())
        self.kinds = list(commands)
        self.rate = rate
        self.max_in_flight = max_in_flight
        self.started = 0
        self.skipped = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._running = []

    def start(self):
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def _reap(self):
        still = []
        for p in self._running:
            rc = p.poll()
            if rc is None:
                still.append(p)
            elif rc != 0:
                self.failed += 1
        self._running = still

    def _run(self):
        interval = 1.0 / self.rate
        next_t = time.monotonic()
        i = 0
        while not self._stop.is_set():
            self._reap()
            if len(self._running) < self.max_in_flight:
                cmd = self.commands[i % len(self.commands)]
                i += 1
                try:
                    self._running.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                          stderr=subprocess.DEVNULL))
                    self.started += 1
                except OSError:
                    self.failed += 1
            else:
                self.skipped += 1
            next_t += interval
            delay = next_t - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_t = time.monotonic()

    def stop(self):
        self._stop.set()
        self._thread.join()
        for p in self._running:
            p.wait()
        self._reap()
        self.seconds = time.monotonic() - self.t0


def status_fields(pid, keys=("VmRSS", "RssAnon", "RssFile", "VmHWM")):
    """KiB values of /proc/PID/status (missing: None)."""
    out = dict.fromkeys(keys)
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in out:
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


class MemorySampler:
    """/proc/PID/status every `tick` s from a thread; the curve keeps one
    point every `every` s, the maxima are over every tick."""

    def __init__(self, pid, every=5.0, tick=0.5):
        self.pid, self.every, self.tick = pid, every, tick
        self.curve = []  # (seconds since start, VmRSS KiB, RssAnon KiB, RssFile KiB)
        self.max_rss = 0
        self.hwm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def _run(self):
        next_point = 0.0
        while not self._stop.is_set():
            s = status_fields(self.pid)
            if s["VmRSS"] is None:
                break
            t = time.monotonic() - self.t0
            self.max_rss = max(self.max_rss, s["VmRSS"])
            self.hwm = max(self.hwm, s["VmHWM"] or 0)
            if t >= next_point:
                self.curve.append((round(t), s["VmRSS"], s["RssAnon"], s["RssFile"]))
                next_point += self.every
            self._stop.wait(self.tick)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def summary(self, settle_s):
        """Steady RSS (median of the points from `settle_s` on), drift
        (median of the last third minus median of the first third of those
        points), maxima."""
        steady = [p[1] for p in self.curve if p[0] >= settle_s] or [p[1] for p in self.curve]
        third = max(1, len(steady) // 3)
        return {
            "steady_rss_kib": statistics.median(steady) if steady else None,
            "steady_anon_kib": statistics.median([p[2] for p in self.curve if p[0] >= settle_s] or [0]),
            "drift_kib": (statistics.median(steady[-third:]) - statistics.median(steady[:third])) if steady else None,
            "max_rss_kib": self.max_rss,
            "hwm_kib": self.hwm,
            "curve": self.curve,
        }
