# <module> -> f1 -> f2 -> f3 until it has used argv[1] seconds of CPU,
# then exits. CPU time, not wall time: on a busy machine the chain still
# gets the samples a test counts on, it only takes longer.
import sys
import time


def f3(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def f2(n):
    return f3(n)


def f1(n):
    return f2(n)


budget = time.process_time() + float(sys.argv[1])
while time.process_time() < budget:
    f1(20000)
