# Recurses DEPTH Python calls deep (or sys.argv[1]), then burns CPU in
# leaf: as deep as real recursive programs go, past the frame counts one
# unwinder run takes.
import sys

DEPTH = 1000
sys.setrecursionlimit(10 * DEPTH)


def leaf():
    total = 0
    while True:
        total += 1


def recurse(n):
    if n == 0:
        return leaf()
    return recurse(n - 1)


recurse(int(sys.argv[1]) if len(sys.argv) > 1 else DEPTH)
