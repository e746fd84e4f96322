# Two threads, each spinning in a chain of its own; the main thread waits.
import threading


def a_leaf():
    total = 0
    for i in range(20000):
        total += i
    return total


def a_mid():
    return a_leaf()


def worker_a():
    while True:
        a_mid()


def b_leaf():
    total = 1
    for i in range(20000):
        total ^= i
    return total


def b_mid():
    return b_leaf()


def worker_b():
    while True:
        b_mid()


threads = [threading.Thread(target=worker_a), threading.Thread(target=worker_b)]
for t in threads:
    t.start()
for t in threads:
    t.join()
