//! Checks the per-version layouts against live interpreters: every CPython
//! found on this machine (pyenv's 3.8-3.13, the system's python3, 3.14
//! and 3.15 of the root file systems in [`RUNTIME_ROOTS`], run with
//! `chroot`) runs
//! `live_python.py`, which parks a thread in a known chain and prints what
//! CPython itself says of a few code objects; this test then finds the
//! build in the process's files ([`detect`]), walks the parked thread's
//! frames the way the BPF unwinder does ([`walk_thread`]), and names code
//! objects and lines from the process's memory ([`PythonSymbolizer`]).
//! Interpreters that are not installed are skipped (and listed), except
//! under CI=true where each one is required.

mod common;

use common::{find_runtime, in_runtime_roots, skip, RUNTIME_ROOTS};
use profiler_elf::ElfFile;
use profiler_interpreters::python::{detect, walk_thread, Detection, PythonBuild, PythonSymbolizer};
use profiler_interpreters::PidMemory;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An interpreter to run: on this machine, or in a root file system.
struct Interpreter {
    /// The root to `chroot` into first.
    root: Option<PathBuf>,
    /// Its path (in `root`).
    exe: PathBuf,
}

impl Interpreter {
    fn name(&self) -> String {
        match &self.root {
            Some(root) => format!("{}{}", root.display(), self.exe.display()),
            None => self.exe.display().to_string(),
        }
    }

    /// Runs `script`; in a root file system, from the script's folder
    /// mounted on the root's `/tmp` in a mount namespace of its own (the
    /// root is only read; every step execs, so the child's pid is the
    /// interpreter's).
    fn spawn(&self, script: &Path) -> std::process::Child {
        let mut command = match &self.root {
            None => {
                let mut c = Command::new(&self.exe);
                c.arg(script);
                c
            }
            Some(root) => {
                let mut c = Command::new("unshare");
                c.args(["--mount", "sh", "-c", r#"mount --bind "$1" "$2/tmp" && exec chroot "$2" "$3" "$4""#, "sh"])
                    .arg(script.parent().unwrap())
                    .arg(root)
                    .arg(&self.exe)
                    .arg(Path::new("/tmp").join(script.file_name().unwrap()));
                c
            }
        };
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()
    }
}

fn interpreters() -> Vec<Interpreter> {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let mut found = Vec::new();
    for v in ["3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"] {
        found.push(Path::new(&home).join(".pyenv/versions").join(v).join("bin/python3"));
    }
    found.push(PathBuf::from("/usr/bin/python3"));
    found.retain(|p| {
        let ok = p.exists();
        if !ok {
            skip(&format!("{} is not installed", p.display()));
        }
        ok
    });
    let mut found: Vec<Interpreter> = found.into_iter().map(|exe| Interpreter { root: None, exe }).collect();
    for name in ["python3.14", "python3.15"] {
        let roots = in_runtime_roots(name);
        // The roots are this machine's, not the project's: skipped even
        // under CI=true.
        if roots.is_empty() {
            eprintln!("SKIPPED: no root file system in {RUNTIME_ROOTS} has {name}");
        }
        found.extend(roots.into_iter().map(|(root, exe)| Interpreter { root: Some(root), exe: exe.into() }));
    }
    found
}

/// The build mapped by `pid`, with its bias.
fn find_build(pid: u32) -> (String, PythonBuild, u64) {
    let python_in = |elf: &ElfFile, path: &str| match detect(elf, path) {
        Detection::Supported(build) => Some(build),
        Detection::Unsupported { version, reason } => panic!("{path}: {version:?} unsupported: {reason}"),
        Detection::NotPython => None,
    };
    find_runtime(pid, python_in).unwrap_or_else(|| panic!("no CPython build in the maps of {pid}"))
}

fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

#[test]
fn layouts_match_live_interpreters() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/live_python.py");
    for python in interpreters() {
        let mut child = python.spawn(&script);
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let facts: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let pid = facts["pid"].as_u64().unwrap() as u32;
        let (path, build, bias) = find_build(pid);
        let v = &facts["version"];
        let what = format!("{} ({path}, {})", python.name(), build.version);
        assert_eq!(
            (u64::from(build.version.major), u64::from(build.version.minor)),
            (v[0].as_u64().unwrap(), v[1].as_u64().unwrap()),
            "{what}"
        );
        assert_eq!(build.runtime_vaddr + bias, facts["runtime"].as_u64().unwrap(), "{what}: _PyRuntime");
        // A loop this small is the hot part of a split function (Debian's
        // 3.14 and 3.15 executables, stripped): its cold part, where most
        // opcodes run, must have been found too.
        let (hot_start, hot_end) = build.eval_ranges[0];
        if hot_end - hot_start < 4096 {
            assert_eq!(build.eval_ranges.len(), 2, "{what}: the loop's cold part {:x?}", build.eval_ranges);
        }

        let memory = PidMemory(pid);
        let mut symbolizer = PythonSymbolizer::new(1000, 1 << 20);
        for code in facts["codes"].as_array().unwrap() {
            let id = code["id"].as_u64().unwrap();
            let expected_name = code["name"].as_str().unwrap();
            for (unit, want) in code["lines"].as_array().unwrap().iter().enumerate() {
                let offset = 2 * unit as u32;
                let got = symbolizer
                    .symbolize(&memory, &build, bias, id, offset)
                    .unwrap_or_else(|| panic!("{what}: code object {expected_name} unreadable"));
                assert_eq!(&*got.function, expected_name, "{what}");
                assert_eq!(got.file.as_deref(), code["file"].as_str(), "{what}");
                let want = want.as_i64().unwrap();
                // No line (-1): the frame gets its function's first line.
                let want = if want < 0 { code["first_line"].as_i64().unwrap() } else { want };
                assert_eq!(i64::from(got.line), want, "{what}: {expected_name} at byte {offset}");
            }
        }

        // The parked thread and the main one, as the BPF unwinder walks
        // them, named.
        let mut walk_named = |thread: &serde_json::Value| -> Vec<String> {
            let frames =
                walk_thread(&memory, &build, bias, thread.as_u64().unwrap()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut name = |code, offset| {
                let line = symbolizer.symbolize(&memory, &build, bias, code, offset);
                line.map(|l| l.function.to_string()).unwrap_or_default()
            };
            frames.iter().map(|f| name(f.code, f.offset)).collect()
        };
        let names = walk_named(&facts["thread"]);
        let from_leaf: Vec<&str> = names.iter().map(|n| short(n)).skip_while(|n| *n != "leaf").collect();
        assert_eq!(
            from_leaf,
            ["leaf", "middle", "outer", "run", "_bootstrap_inner", "_bootstrap"],
            "{what}: thread frames {names:?}"
        );
        let main_names = walk_named(&facts["main"]);
        assert_eq!(main_names, ["<module>"], "{what}");
        eprintln!("ok: {what}: layout from {:?}, thread {names:?}", build.layout_source);

        child.stdin.as_mut().unwrap().write_all(b"\n").unwrap();
        child.wait().unwrap();
    }
}
