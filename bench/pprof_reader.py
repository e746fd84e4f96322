"""A small reader of pprof profiles (`profile.proto`), enough for the
benchmarks to compare the agent's stacks with other profilers': samples
as lists of frames (innermost first), each frame a function name, its
source file and whether it lies in a mapped file (native code) or not
(an interpreter's frame). No dependency beyond the standard library.
"""

import gzip
from dataclasses import dataclass


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of each field of a message;
    a length-delimited value is its bytes."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wire} in a pprof profile")
        yield number, wire, value


def _packed(wire, value):
    """A repeated integer field: packed (bytes) or one value."""
    if wire != 2:
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


@dataclass(frozen=True)
class Frame:
    """One function of a location (inlined ones are frames of their own)."""
    function: str
    file: str
    line: int
    native: bool  # in a mapped file (or the kernel), not an interpreter's frame
    address: int = 0  # the location's address
    location: int = -1  # the location's place in its sample, 0 innermost: one physical frame


@dataclass
class Sample:
    frames: list  # innermost first
    count: int
    labels: dict


def read(path):
    """The samples of the pprof file at `path` (gzip-compressed or not)."""
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, raw_samples, locations, functions, mappings = [], [], {}, {}, set()
    for number, wire, value in _fields(data):
        if number == 6:
            strings.append(value.decode("utf-8", "replace"))
        elif number == 2:
            raw_samples.append(value)
        elif number == 3:
            mapping_id = next((v for n, _, v in _fields(value) if n == 1), 0)
            mappings.add(mapping_id)
        elif number == 4:
            loc = {"id": 0, "mapping": 0, "address": 0, "lines": []}
            for n, w, v in _fields(value):
                if n == 1:
                    loc["id"] = v
                elif n == 2:
                    loc["mapping"] = v
                elif n == 3:
                    loc["address"] = v
                elif n == 4:
                    line = dict((ln, lv) for ln, _, lv in _fields(v))
                    loc["lines"].append((line.get(1, 0), line.get(2, 0)))
            locations[loc["id"]] = loc
        elif number == 5:
            fn = dict((n, v) for n, _, v in _fields(value))
            functions[fn.get(1, 0)] = (fn.get(2, 0), fn.get(4, 0))
    samples = []
    for raw in raw_samples:
        location_ids, values, labels = [], [], {}
        for n, w, v in _fields(raw):
            if n == 1:
                location_ids += _packed(w, v)
            elif n == 2:
                values += _packed(w, v)
            elif n == 3:
                label = dict((ln, lv) for ln, _, lv in _fields(v))
                key = strings[label.get(1, 0)]
                labels[key] = strings[label[2]] if label.get(2) else label.get(3, 0)
        frames = []
        for place, location_id in enumerate(location_ids):
            loc = locations.get(location_id)
            if loc is None:
                continue
            native = loc["mapping"] != 0
            for function_id, line in loc["lines"]:  # innermost first within a location
                name, file = functions.get(function_id, (0, 0))
                frames.append(Frame(strings[name], strings[file], line, native, loc["address"], place))
            if not loc["lines"]:
                frames.append(Frame("", "", 0, native, loc["address"], place))
        samples.append(Sample(frames, values[0] if values else 1, labels))
    return samples
