//! Files a profiled process controls: the symbolizer refuses what is not
//! a regular file, or not the file the process manager analysed, and
//! resolves debug links inside the process's root.

use std::os::unix::fs::FileExt;
use std::process::Command;
use std::sync::Arc;

use profiler_elf::source::{open_regular, OpenError, Purpose};
use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer, LoadError};

use crate::native_c::build_chain;
use crate::support::{have, test_dir};

#[test]
fn refuses_fifos_and_other_inodes() {
    let dir = test_dir("untrusted-refusals");
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // Not opened for reading at all (that would block with no writer).
    let r = FileSymbolizer::load(&FileSource::new(&fifo), &DebugConfig::default());
    assert!(matches!(r, Err(LoadError::Refused { reason: OpenError::NotRegular("FIFO"), .. })), "{r:?}");
    let r = FileSymbolizer::load(&FileSource::new("/dev/zero"), &DebugConfig::default());
    assert!(matches!(r, Err(LoadError::Refused { reason: OpenError::NotRegular(_), .. })), "{r:?}");

    // The manager analysed one inode; the path now names another.
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let analysed = open_regular(&exe, Purpose::Executable).unwrap().identity;
    let copy = dir.join("copy");
    std::fs::copy(&exe, &copy).unwrap();
    let r = FileSymbolizer::load(&FileSource::new(&copy).with_identity(Some(analysed)), &DebugConfig::default());
    assert!(matches!(r, Err(LoadError::Refused { reason: OpenError::Mismatch, .. })), "{r:?}");
    assert!(FileSymbolizer::load(&FileSource::new(&exe).with_identity(Some(analysed)), &DebugConfig::default()).is_ok());
}

/// A `.gnu_debuglink` whose file is an absolute symlink, in a directory
/// standing for a container's root: resolved inside it.
#[test]
fn debuglink_symlinks_resolve_inside_the_root() {
    if !have("gcc") || !have("objcopy") || !have("strip") {
        return;
    }
    let dir = test_dir("untrusted-debuglink");
    let chain = build_chain(&dir);
    let debug = dir.join("chain.debug");
    assert!(Command::new("objcopy").arg("--only-keep-debug").arg(&chain.bin).arg(&debug).status().unwrap().success());
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("app")).unwrap();
    let bin = root.join("app/chain");
    assert!(Command::new("strip").arg("-o").arg(&bin).arg(&chain.bin).status().unwrap().success());
    assert!(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&bin)
        .status()
        .unwrap()
        .success());
    // Absolute symlink to the host file: inside the root it leads nowhere.
    std::os::unix::fs::symlink(&debug, root.join("app/chain.debug")).unwrap();
    let nowhere = DebugConfig { debug_roots: vec![], ..DebugConfig::default() };
    let source = || FileSource {
        open_path: bin.clone(),
        path: "/app/chain".into(),
        root: Some(root.clone()),
        memory: None,
        identity: None,
        handle: None,
    };
    let sym = FileSymbolizer::load(&source(), &nowhere).expect("load");
    assert!(sym.info().debug_file.is_none(), "{:?}", sym.info());
    // The same file inside the root is found through the same link.
    let inside = root.join(debug.strip_prefix("/").unwrap());
    std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &inside).unwrap();
    let sym = FileSymbolizer::load(&source(), &nowhere).expect("load");
    assert_eq!(sym.info().debug_file.as_deref(), Some(root.join("app/chain.debug").as_path()));
    assert!(sym.symbolize(chain.calls[0]).is_some());
}

/// The process manager keeps the file it analysed open: the symbolizer
/// loads it from there once no path leads to it any more (every process
/// that mapped it has exited), and not once it was changed since.
#[test]
fn a_kept_file_loads_after_its_paths_are_gone_but_not_after_a_change() {
    if !have("gcc") {
        return;
    }
    let dir = test_dir("untrusted-kept");
    let chain = build_chain(&dir);
    let path = dir.join("kept");
    std::fs::copy(&chain.bin, &path).unwrap();
    let writer = std::fs::File::options().write(true).open(&path).unwrap();
    let opened = open_regular(&path, Purpose::Executable).unwrap();
    let analysed = opened.identity;
    let kept = Arc::new(opened.file);
    std::fs::remove_file(&path).unwrap();
    let source = || FileSource::new(&path).with_identity(Some(analysed));

    let r = FileSymbolizer::load(&source(), &DebugConfig::default());
    assert!(matches!(r, Err(LoadError::Open { .. })), "no path left: {r:?}");
    let sym = FileSymbolizer::load(&source().with_handle(Some(kept.clone())), &DebugConfig::default())
        .expect("loaded from the kept file");
    let (lines, _) = sym.symbolize(chain.calls[0]).expect("named");
    assert_eq!(lines.first().map(|l| &*l.function), Some("helper"), "{lines:?}");

    // Written to since the analysis (a new mtime): refused, and no path
    // is left to try.
    std::thread::sleep(std::time::Duration::from_millis(20));
    writer.write_at(b"X", 64).unwrap();
    let r = FileSymbolizer::load(&source().with_handle(Some(kept)), &DebugConfig::default());
    assert!(matches!(r, Err(LoadError::Open { .. })), "{r:?}");
}
