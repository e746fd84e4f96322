# Forks N children (argv[1]) and prints their pids; the children wait
# until a line comes on the parent's stdin (the test's go, once the agent
# samples), then run <module> -> spawn -> child_work -> child_leaf until
# each has used argv[2] seconds of CPU (CPU time: on a busy machine they
# still get the samples a test counts on) and exit; the parent waits for
# them.
import os
import sys
import time


def child_leaf(budget):
    spins = 0
    while time.process_time() < budget:
        for i in range(1000):
            spins += i
    return spins


def child_work(budget):
    return child_leaf(budget)


def spawn(n, cpu_seconds):
    start_r, start_w = os.pipe()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(start_w)
            os.read(start_r, 1)
            child_work(time.process_time() + cpu_seconds)
            os._exit(0)
        pids.append(pid)
    os.close(start_r)
    print(" ".join(map(str, pids)), flush=True)
    sys.stdin.readline()
    os.write(start_w, b"g" * n)
    for pid in pids:
        os.waitpid(pid, 0)


spawn(int(sys.argv[1]), float(sys.argv[2]))
