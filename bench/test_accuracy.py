"""Tests of accuracy.py's writing of its BENCHMARKS.md section, with made-up
results (no profiler runs): `python3 -m unittest discover -s bench -p 'test_*.py'`."""

import gzip
import json
import tempfile
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
        # The header is the current one (the old named no standard error).
        self.assertIn(accuracy.table([]).splitlines()[0], lines)
        self.assertNotIn(OLD.split("\n")[5], lines)
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


class Comparison(unittest.TestCase):
    def test_the_standard_error_of_a_difference(self):
        # 50% on both sides of 2000 samples: sqrt(0.25 * 2 / 2000) = 1.58 points.
        self.assertAlmostEqual(accuracy.difference_se([("f", 50.0, 50.0)], 2000, 2000), 1.581, places=3)
        # The largest of the top: the share nearest 50% (pooled: 40%, 1.55 points).
        side = [("a", 100.0, 100.0), ("b", 42.0, 38.0), ("c", 5.0, 5.0)]
        self.assertAlmostEqual(accuracy.difference_se(side, 2000, 2000), 100 * (0.4 * 0.6 / 1000) ** 0.5,
                               places=6)
        # Shares of 0 and 100% have none; no samples, none.
        self.assertEqual(accuracy.difference_se([("a", 100.0, 100.0), ("z", 0.0, 0.0)], 10, 10), 0.0)
        self.assertEqual(accuracy.difference_se([("f", 50.0, 50.0)], 0, 10), 0.0)

    def test_the_top_cell_has_the_standard_error(self):
        r = result("Ruby", 0.999, se=1.234)
        self.assertEqual(accuracy.table([r]).splitlines()[-1],
                         "| Ruby | Ruby program | ref | 7 / 8 | 99.9% | 100.0% | 0.100 (0.050) | 1 of 1 (1.2) |")
        self.assertIn("within 2: 1; standard error of a difference up to 1.2 points", accuracy.summary(r))

    def test_rbspy_raw_frames_keep_their_path_and_window(self):
        def trace(at, frames):
            return json.dumps({"trace": [{"name": n, "relative_path": r, "absolute_path": a, "lineno": 1}
                                         for n, r, a in frames],
                               "pid": 1, "thread_id": 1, "on_cpu": True,
                               "time": {"secs_since_epoch": at, "nanos_since_epoch": 500_000_000}})
        erb = [("block in generate_class", "/t/class.rhtml", "unknown"), ("ERB#result", "/r/erb.rb", "/r/erb.rb"),
               ("each [c function]", "(unknown)", None), ("<main>", "/x/bin/rdoc", "/x/bin/rdoc")]
        cut = [("parse_files", "/r/rdoc.rb", "/r/rdoc.rb")]
        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/raw.gz"
            with gzip.open(path, "wt") as f:
                f.write("rbspy02\n" + json.dumps({"sample_rate": 99}) + "\n")
                for line in (trace(99, cut), trace(100, erb), trace(101, cut), trace(102, erb)):
                    f.write(line + "\n")
            stacks = accuracy.read_rbspy_raw(path, (100.0, 101.9))
            everything = accuracy.read_rbspy_raw(path)
        self.assertEqual([([accuracy.ruby_key(f) for f in frames], n, whole) for frames, n, whole in stacks],
                         [(["block in generate_class (class.rhtml)", "result (erb.rb)", "<main> (rdoc)"], 1, True),
                          (["parse_files (rdoc.rb)"], 1, False)])
        self.assertEqual(len(everything), 4)

    def test_v8_cuts_deep_stacks_and_ours_are_cut_as_its(self):
        # V8's profile: a chain from Node's entry 3 deep, and one of 300
        # frames without it (its sampler kept the innermost).
        nodes = [{"id": 1, "callFrame": {"functionName": "(root)", "url": ""}, "children": [2, 10]},
                 {"id": 2, "callFrame": {"functionName": "executeUserEntryPoint", "url": "run_main"},
                  "children": [3]},
                 {"id": 3, "callFrame": {"functionName": "main", "url": "a.js"}, "children": [4]},
                 {"id": 4, "callFrame": {"functionName": "leaf", "url": "a.js"}}]
        deep = list(range(10, 310))
        for i, n in enumerate(deep):
            nodes.append({"id": n, "callFrame": {"functionName": "rec", "url": "a.js"},
                          "children": [deep[i + 1]] if i + 1 < len(deep) else []})
        profile = {"nodes": nodes, "samples": [4, 309], "timeDeltas": [0, 10_101],
                   "startTime": 0, "endTime": 20_202}
        with tempfile.TemporaryDirectory() as d:
            path = f"{d}/p.cpuprofile"
            with open(path, "w") as f:
                json.dump(profile, f)
            stacks = accuracy.read_cpuprofile(path)
        self.assertEqual(sorted((len(frames), whole) for frames, _, whole in stacks), [(3, True), (300, False)])
        # Ours: 300 physical frames with a script, an inlined one in the
        # innermost, and a native frame between: the innermost 255
        # physical V8 frames are kept (256 with the inlined one).
        F = accuracy.pprof_reader.Frame
        frames = [F("inlined", "a.js", 1, False, 0, 0), F("rec", "a.js", 1, False, 0, 0),
                  F("native", "", 0, True, 0, 1)]
        frames += [F("rec", "a.js", 1, False, 0, place) for place in range(2, 301)]
        sample = accuracy.pprof_reader.Sample(frames, 1, {})
        ranked = accuracy.scripted_v8(sample)
        self.assertEqual(len(ranked), 301)
        self.assertEqual([f.location for f in ranked[:4]], [0, 0, 1, 2])
        self.assertEqual(len(accuracy.cut_as_v8(ranked)), 256)
        # `--cpu-prof` writing its profile at exit: left out.
        writing = [F("node::profiler::StartProfilers", "", 0, True, 0, 0)] + frames
        self.assertEqual(accuracy.scripted_v8(accuracy.pprof_reader.Sample(writing, 1, {})), [])

    def test_glibc_names_of_one_address_are_one_function(self):
        F = accuracy.pprof_reader.Frame
        keys = {accuracy.native_key(F(n, "", 0, True)) for n in ("__libc_start_main_impl", "__libc_start_main")}
        self.assertEqual(keys, {"__libc_start_main"})
        self.assertEqual(accuracy.native_key(F("__memcpy_avx_unaligned_erms", "", 0, True)),
                         "__memmove_avx_unaligned_erms")

    def test_ours_are_cut_where_perf_cuts_its_chains(self):
        F = accuracy.pprof_reader.Frame
        limit = accuracy.perf_max_stack()
        # An unnamed innermost JIT frame, then Erlang functions, then the
        # scheduler's C frames: one location each.
        frames = [F("beam+0x10", "", 0, False, 0, 0)]
        frames += [F(f"m:f{i}/0", "", 0, False, 0, i) for i in range(1, limit + 10)]
        frames += [F("process_main", "", 0, True, 0, limit + 10)]
        ours = accuracy.beam_frames(accuracy.pprof_reader.Sample(frames, 1, {}))
        self.assertEqual(ours[0].function, accuracy.BEAM_SHARED)
        self.assertEqual(len(ours), limit + 10)
        cut = accuracy.cut_as_perf(ours)
        self.assertEqual(len(cut), limit)
        self.assertEqual(cut[-1].function, f"m:f{limit - 1}/0")

    def test_ours_are_held_to_jfrs_scope_java_code_innermost(self):
        F = accuracy.pprof_reader.Frame
        main = F("com.sun.tools.javac.Main.main", "", 0, False)
        attr = F("Attr.attribTree", "", 0, False)
        parse = F("JavacParser.parse", "", 0, False)
        stub = F("[vtable chunks]", "", 0, False)
        vm = F("SystemDictionary::resolve_or_fail", "", 0, True)
        ours = [([attr, main], 3, True),          # compiled Java code
                ([stub, parse, main], 1, True),   # a stub: Java state, not a frame to JFR
                ([vm, parse, main], 4, True),     # the VM's code: JFR does not sample it
                ([vm], 2, False)]                 # no Java frame at all
        scoped = accuracy.java_scope(ours)
        self.assertEqual([([f.function for f in frames], n) for frames, n, _ in scoped],
                         [(["Attr.attribTree", "com.sun.tools.javac.Main.main"], 3),
                          (["JavacParser.parse", "com.sun.tools.javac.Main.main"], 1)])
        # compare() takes the shares from the scoped stacks, the root
        # share from all of ours.
        case = accuracy.Case(runtime="Java", program="javac", reference_name="JFR", key=lambda f: f.function)
        case.as_reference = lambda _: scoped
        case.as_reference_note = "held"
        theirs = [([attr, main], 3, True), ([parse, main], 1, True)]
        r = accuracy.compare(case, [(accuracy.java_frames(f), n, w) for f, n, w in ours], theirs)
        self.assertEqual(r["ours_with_frames"], 4)
        self.assertEqual(r["within_2"], 3)
        self.assertAlmostEqual(r["ours_root"], 0.8)
        self.assertAlmostEqual(r["tvd"], 0.0)

    def test_async_profiler_innermost_java_frame_is_jfrs_scope(self):
        text = ("[main tid=1];start_thread;JavaMain;Main.main_[j];Attr.attrib_[i] 5\n"
                "[main tid=1];start_thread;JavaMain;Main.main_[j];ClassLoader::load 2\n"
                "[C2 CompilerThre tid=2];start_thread;Compile::Compile 1\n")
        with tempfile.TemporaryDirectory() as d:
            path = accuracy.Path(d) / "run0.collapsed"
            path.write_text(text)
            samples = accuracy.javac_accuracy.async_profiler_samples(path)
        self.assertEqual(samples, [("main", ["Attr.attrib", "Main.main"], 5, True),
                                   ("main", ["Main.main"], 2, False),
                                   ("C2 CompilerThre", [], 1, False)])


if __name__ == "__main__":
    unittest.main()
