"""Tests of accuracy.py's writing of its BENCHMARKS.md section, with made-up
results (no profiler runs): `python3 -m unittest discover -s bench -p 'test_*.py'`."""

import unittest

import accuracy

OLD = """## Accuracy against the runtimes' own profilers

- date: 2026-01-01 00:00 UTC, commit aaaaaaa; every case
- command: `make bench-accuracy`

| runtime | real program | reference profiler | samples (ours / theirs) | ours reach the root | theirs reach the root | TVD of self time (noise) | top 15 within 2 points |
|---|---|---|---|---|---|---|---|
| C | xz | perf | 10 / 10 | 99.0% | 100.0% | 0.010 (0.010) | 15 of 15 |
| PHP | phpcs | Excimer | 20 / 20 | 98.0% | 100.0% | 0.200 (0.100) | 14 of 15 |
| JavaScript (Node 22) | tsc | --cpu-prof | 30 / 30 | 97.0% | 100.0% | 0.500 (0.300) | 14 of 15 |
| JavaScript (Node 24) | tsc | --cpu-prof | 40 / 40 | 96.0% | 100.0% | 0.500 (0.300) | 14 of 15 |

- The PHP row and its figures below: hand-written, an older run.

- The C and PHP rows and their figures below: an older run of both.

- The two Node rows and their figures below: hand-written.

- JavaScript (Node 22): old line of Node 22
- JavaScript (Node 24): old line of Node 24

C: inclusive share, reference / ours (largest 15 of the reference)

| function | reference | ours |
|---|---|---|
| `main` | 100.0% | 100.0% |

C: self time, reference / ours (the 10 largest of either)

| function | reference | ours |
|---|---|---|
| `lzma` | 90.0% | 90.0% |

PHP: inclusive share, reference / ours (largest 15 of the reference)

| function | reference | ours |
|---|---|---|
| `old_php` | 50.0% | 50.0% |

PHP: self time, reference / ours (the 10 largest of either)

| function | reference | ours |
|---|---|---|
| `old_php_self` | 50.0% | 50.0% |
"""


def table_rows(text):
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(accuracy.TABLE_HEAD)) + 2
    return lines[start:lines.index("", start)]


def result(runtime, ours_root, **more):
    return {"runtime": runtime, "program": f"{runtime} program", "reference": "ref", "ours_with_frames": 7,
            "theirs_samples": 8, "ours_root": ours_root, "theirs_root": 1.0, "tvd": 0.1, "noise": 0.05,
            "within_2": 1, "within_3": 1, "top": [("new_top", 60.0, 61.0)], "self": [("new_self", 30.0, 31.0)],
            **more}


class MergeSection(unittest.TestCase):
    def test_one_case_replaces_its_row_lines_and_tables_only(self):
        new = accuracy.merge_section(OLD, [result("PHP", 0.995)], "- The PHP row and its figures below: now.")
        lines = new.split("\n")
        rows = table_rows(new)
        self.assertEqual([accuracy.row_runtime(r) for r in rows], ["C", "PHP", "JavaScript (Node 22)",
                                                                   "JavaScript (Node 24)"])
        self.assertEqual(rows[1], "| PHP | PHP program | ref | 7 / 8 | 99.5% | 100.0% | 0.100 (0.050) | 1 of 1 |")
        for kept in (0, 2, 3):
            self.assertIn(rows[kept], OLD)
        # The old PHP note goes, the one on C and PHP names C alone, the
        # others stay; the new note is there once.
        self.assertNotIn("hand-written, an older run", new)
        self.assertIn("- The C row and its figures below: an older run of both.", lines)
        self.assertIn("- The two Node rows and their figures below: hand-written.", lines)
        self.assertEqual(lines.count("- The PHP row and its figures below: now."), 1)
        self.assertIn("- JavaScript (Node 22): old line of Node 22", lines)
        # PHP's tables replaced, in their place; C's kept.
        self.assertNotIn("old_php", new)
        self.assertLess(new.index("`lzma`"), new.index("PHP: inclusive share"))
        self.assertLess(new.index("| `new_top` | 60.0% | 61.0% |"), new.index("| `new_self` | 30.0% | 31.0% |"))
        self.assertEqual(new.count("PHP: inclusive share"), 1)
        self.assertNotIn("\n\n\n", new)
        self.assertTrue(new.endswith("|\n"))

    def test_a_case_with_a_summary_line_and_a_new_case(self):
        node = result("JavaScript (Node 24)", 0.9, unnamed=(1, 100))
        new = accuracy.merge_section(OLD, [node, result("Go", 0.97)], "- The Go rows and their figures below: now.")
        lines = new.split("\n")
        self.assertNotIn("old line of Node 24", new)
        self.assertIn("- JavaScript (Node 22): old line of Node 22", lines)
        self.assertEqual(lines.count(accuracy.figure_line(node)), 1)
        # A new runtime: its row last, its tables last.
        self.assertEqual([accuracy.row_runtime(r) for r in table_rows(new)],
                         ["C", "PHP", "JavaScript (Node 22)", "JavaScript (Node 24)", "Go"])
        self.assertGreater(new.index("Go: inclusive share"), new.index("PHP: self time"))
        self.assertIn("- The two Node rows and their figures below: hand-written.", lines)

    def test_a_failed_case_keeps_no_tables(self):
        failed = {"runtime": "PHP", "program": "phpcs", "reference": "Excimer", "error": "no php"}
        new = accuracy.merge_section(OLD, [failed], "- The PHP row and its figures below: failed now.")
        self.assertIn("| PHP | phpcs | Excimer | failed: no php | | | | |", new.split("\n"))
        self.assertNotIn("PHP: inclusive share", new)
        self.assertIn("| `lzma` | 90.0% | 90.0% |", new)

    def test_notes_name_their_rows(self):
        self.assertEqual(accuracy.rows_note(["A"], "figures", "x"), "- The A row and its figures below: x")
        self.assertEqual(accuracy.rows_note(["A", "B", "C"], "tables", "x"),
                         "- The A, B and C rows and their tables below: x")
        m = accuracy.ROWS_NOTE.match(accuracy.rows_note(["A", "B"], "figures", "x"))
        self.assertEqual((m.group("names"), m.group("what"), m.group("rest")), ("A and B", "figures", "x"))


if __name__ == "__main__":
    unittest.main()
