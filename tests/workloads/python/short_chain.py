# <module> -> f1 -> f2 -> f3 for argv[1] seconds, then exits.
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


deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    f1(20000)
