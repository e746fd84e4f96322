# Forks N children (argv[1]); prints their pids; each child sleeps
# argv[2] seconds, then runs <module> -> spawn -> child_work -> child_leaf
# for 1.5 s and exits; the parent waits for them.
import os
import sys
import time


def child_leaf(deadline):
    spins = 0
    while time.monotonic() < deadline:
        for i in range(1000):
            spins += i
    return spins


def child_work(deadline):
    return child_leaf(deadline)


def spawn(n, delay):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            time.sleep(delay)
            child_work(time.monotonic() + 1.5)
            os._exit(0)
        pids.append(pid)
    print(" ".join(map(str, pids)), flush=True)
    for pid in pids:
        os.waitpid(pid, 0)


spawn(int(sys.argv[1]), float(sys.argv[2]))
