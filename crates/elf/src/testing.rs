//! Test support for crates that read real binaries (the `testing`
//! feature; a dev-dependency turns it on): building a small Go program.

use std::path::PathBuf;
use std::process::Command;

/// Builds the Go program `source` (its `main.go`; no cgo) with `ldflags`
/// into a directory named after `tag` and this process, and returns the
/// binary; `None` (the caller skips) without a Go toolchain, except under
/// `CI=true` (or `1`), where that fails, as a failed build always does.
pub fn build_go_program(tag: &str, source: &str, ldflags: &str) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ep-go-test-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.go"), source).unwrap();
    std::fs::write(dir.join("go.mod"), "module testprog\n\ngo 1.21\n").unwrap();
    let out = dir.join("prog");
    let status = Command::new("go")
        .args(["build", "-ldflags", ldflags, "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&dir)
        .env("CGO_ENABLED", "0")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("go build failed: {s}"),
        Err(e) if !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            eprintln!("SKIPPED: no Go toolchain ({e}); under CI=true this fails");
            None
        }
        Err(e) => panic!("go is required under CI=true: {e}"),
    }
}
