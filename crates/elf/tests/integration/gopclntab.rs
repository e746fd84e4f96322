//! `.gopclntab` of real Go binaries built here, with the binary's own
//! symbol table (a non-stripped build of the same program) as the oracle.

use std::path::{Path, PathBuf};
use std::process::Command;

use profiler_elf::{ElfFile, GoPclntab, GoPclntabVersion};

use crate::support::{in_ci, run, strip_section_headers, test_dir};

const PROGRAM: &str = r#"package main

import (
	"fmt"
	"os"
	"sort"
)

//go:noinline
func leaf(xs []int) int {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	return xs[0]
}

func main() {
	fmt.Println(leaf([]int{len(os.Args), 3, 1}))
}
"#;

/// Builds the program with `go build` and `flags`, or `None` (with a note)
/// when Go is not installed outside CI (under CI=true that fails).
fn go_build(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    if let Err(e) = Command::new("go").arg("version").output() {
        assert!(!in_ci(), "go is required under CI=true: {e}");
        eprintln!("SKIPPED: go is not installed ({e}); under CI=true this fails");
        return None;
    }
    std::fs::write(dir.join("main.go"), PROGRAM).expect("write");
    std::fs::write(dir.join("go.mod"), "module example.com/pcln\ngo 1.21\n").expect("write");
    let out = dir.join(name);
    let mut cmd = Command::new("go");
    cmd.current_dir(dir)
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(".");
    run(&mut cmd);
    Some(out)
}

#[test]
fn matches_the_symbol_table_in_every_build_shape() {
    let dir = test_dir("gopclntab-shapes");
    let Some(full) = go_build(&dir, "full", &[]) else {
        return;
    };
    let stripped = go_build(&dir, "stripped", &["-ldflags=-s -w"]).expect("go");
    let pie = go_build(&dir, "pie", &["-buildmode=pie", "-ldflags=-s -w"]).expect("go");
    let no_headers = strip_section_headers(&stripped, &dir.join("no-headers"));

    let full_elf = ElfFile::open(&full).expect("open");
    let symbols = full_elf.symbols().expect("symbols");
    let full_tab = GoPclntab::find(&full_elf).expect("find").expect("table");
    assert_eq!(full_tab.version(), GoPclntabVersion::Go120);
    assert!(full_tab.has_inline_info());
    // Every function's entry is the address of its symbol, same name.
    let mut checked = 0;
    for f in full_tab.funcs() {
        let name = full_tab.func_name(&f).expect("name");
        let (sym, off) = symbols.lookup(f.entry).unwrap_or(("".into(), 1));
        // Assembly functions carry their ABI in the symbol name only.
        let sym = sym.strip_suffix(".abi0").unwrap_or(&sym);
        // The symbol table spells the middle dot of generated names '.'.
        let name = name.replace('·', ".");
        assert_eq!((sym, off), (name.as_str(), 0), "function at {:#x}", f.entry);
        checked += 1;
    }
    assert!(checked > 1000, "only {checked} functions");
    let leaf = symbols.find("main.leaf").expect("main.leaf").0;
    let goexit = symbols.find("runtime.goexit.abi0").expect("goexit").0;

    for (path, same_layout) in [(&stripped, true), (&no_headers, true), (&pie, false)] {
        let elf = ElfFile::open(path).expect("open");
        assert!(elf.symbols().expect("symbols").is_empty(), "{path:?} is stripped");
        let tab = GoPclntab::find(&elf).expect("find").expect("table");
        assert!(tab.has_inline_info(), "{path:?}");
        let by_name = |want: &str| {
            tab.funcs().find(|f| tab.func_name(f) == Some(want)).unwrap_or_else(|| panic!("{want} in {path:?}"))
        };
        let f = by_name("main.leaf");
        let g = by_name("runtime.goexit");
        if same_layout {
            // -s -w leaves the code where it was.
            assert_eq!(tab.len(), full_tab.len(), "{path:?}");
            assert_eq!(tab.text_range(), full_tab.text_range(), "{path:?}");
            assert_eq!((f.entry, g.entry), (leaf, goexit), "{path:?}");
        }
        assert_eq!(tab.find_func(f.entry + 1), Some(f));
        assert!(g.is_top_frame(), "runtime.goexit is a top frame");
        // The frame set-up: SP delta 0 at entry, positive in the body.
        assert_eq!(tab.sp_delta(&f, f.entry), Some(0));
        assert!(tab.sp_deltas(&f).any(|r| r.value > 0));
        let ranges: Vec<_> = tab.sp_deltas(&f).collect();
        assert_eq!(ranges.first().map(|r| r.start), Some(f.entry));
        // The table may stop before the alignment padding at the end.
        assert!(ranges.last().is_some_and(|r| r.end <= f.end && r.end > f.end - 32));
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        // The sort.Slice closure is named after its function.
        by_name("main.leaf.func1");
    }
}
