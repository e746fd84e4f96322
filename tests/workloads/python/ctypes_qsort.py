# Python -> ctypes -> libc qsort -> a Python comparison callback: the time
# is spent in cmp_leaf, called back from libc through libffi.
import ctypes

libc = ctypes.CDLL("libc.so.6")
CMPFUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def cmp_leaf(a, b):
    x = a[0]
    y = b[0]
    spin = 0
    for i in range(300):
        spin += i
    return (x > y) - (x < y)


def py_compare(a, b):
    return cmp_leaf(a, b)


compare = CMPFUNC(py_compare)


def sort_once():
    values = (ctypes.c_int * 64)(*range(64, 0, -1))
    libc.qsort(values, len(values), ctypes.sizeof(ctypes.c_int), compare)


def sorter():
    while True:
        sort_once()


sorter()
