"""BENCHMARKS.md is written by several scripts: `bench.py` (make bench)
writes the file, `accuracy.py` and `hostile.py` each own one
section of it. Each writes its own part and keeps the others'."""

from pathlib import Path

ACCURACY = "## Accuracy against the runtimes' own profilers"
HOSTILE = "## Crafted runtimes (issue 43): the release agent system-wide at 99 Hz"
# Sections other scripts than bench.py write.
OWN_SCRIPTS = (ACCURACY, HOSTILE)


def _span(text, title):
    """(start, end) of the section `title` in `text`, or None."""
    start = text.find(title)
    if start < 0:
        return None
    nxt = text.find("\n## ", start + len(title))
    return start, (nxt + 1 if nxt >= 0 else len(text))


def write_section(path, title, text):
    """Writes `text` (which starts with `title`) in place of that section
    of the file at `path`, or at its end."""
    path = Path(path)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    span = _span(old, title)
    if span is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        start, end = span
        new = old[:start] + text.rstrip("\n") + "\n" + ("\n" + old[end:] if end < len(old) else "")
    path.write_text(new)


def others_sections(path):
    """The sections of the file at `path` that other scripts than bench.py
    wrote, to be kept when bench.py writes the file anew."""
    path = Path(path)
    if not path.exists():
        return ""
    old = path.read_text()
    kept = []
    for title in OWN_SCRIPTS:
        span = _span(old, title)
        if span:
            kept.append(old[span[0]:span[1]].rstrip("\n") + "\n")
    return "\n".join(kept)


def read_section(path, title):
    """The section `title` of the file at `path` (from its title to the
    next section), or None."""
    path = Path(path)
    if not path.exists():
        return None
    old = path.read_text()
    span = _span(old, title)
    return old[span[0]:span[1]] if span else None
