# A pure-Python chain: <module> -> f1 -> f2 -> f3, the time spent in f3.


def f3(n):
    total = 0
    for i in range(n):
        total += i * i
    return total


def f2(n):
    return f3(n)


def f1(n):
    return f2(n)


while True:
    f1(20000)
