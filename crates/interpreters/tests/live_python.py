# Run by live_python.rs: prints, as one JSON line, facts about a few code
# objects computed by CPython itself (PyCode_Addr2Line through ctypes) and
# the ids of a thread parked in a known chain, then waits for a line on
# stdin so that the test can read its memory meanwhile.
import ctypes
import json
import os
import sys
import threading
import time

api = ctypes.pythonapi
api.PyCode_Addr2Line.restype = ctypes.c_int
api.PyCode_Addr2Line.argtypes = [ctypes.py_object, ctypes.c_int]


class Holder:
    def method(self, n):
        total = 0
        for i in range(n):
            if i % 2:
                total += i
            else:
                total -= 1
        return total


def outer(event):
    return middle(event)


def middle(event):
    value = leaf(event)
    return value


def leaf(event):
    event.wait()
    return 1


def lines(code):
    return [api.PyCode_Addr2Line(code, offset) for offset in range(0, len(code.co_code), 2)]


def describe(code):
    return {
        "id": id(code),
        "name": getattr(code, "co_qualname", code.co_name),
        "file": code.co_filename,
        "first_line": code.co_firstlineno,
        "lines": lines(code),
    }


event = threading.Event()
thread = threading.Thread(target=outer, args=(event,))
thread.start()
time.sleep(0.3)
codes = [Holder.method.__code__, outer.__code__, middle.__code__, leaf.__code__,
         threading.Thread.run.__code__, json.dumps.__code__, describe.__code__]
runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
print(json.dumps({
    "pid": os.getpid(),
    "version": list(sys.version_info[:3]),
    "runtime": runtime,
    "thread": thread.ident,
    "main": threading.get_ident(),
    "codes": [describe(c) for c in codes],
}), flush=True)
sys.stdin.readline()
event.set()
thread.join()
