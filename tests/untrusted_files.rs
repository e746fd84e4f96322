//! Files a profiled process controls, on the real agent: devices and
//! FIFOs where a library should be, a library replaced on disk, a
//! crafted file sharing a real library's FileId, debug links leaving a
//! container's root or naming a FIFO or `/dev/zero`. In each case the
//! agent keeps running, counts the refusal, and keeps profiling a
//! well-behaved process whole (its exact chain in at least 95% of its
//! samples at the leaf). The well-behaved process starts a second after
//! the agent, so the bad files are met first; 7 s of profiling leave it
//! enough samples on a loaded 2-CPU machine.

use profiler_agent::{AgentConfig, Stats};
use profiler_tests::{
    build_workload, c_main_thread, completeness, profile_with, serial, user_frames, Completeness, Step, Workload,
};
use profiler_trace::Trace;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use Step::Fn;

const HZ: u32 = 99;
const SECONDS: u64 = 7;
const REQUIRED: f64 = 0.95;
const MIN_SAMPLES: usize = 25;
const C_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-pthread"];

/// A fresh directory for one test's files.
fn test_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ep-untrusted-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    run(Command::new("mkfifo").arg(path));
}

/// Waits until `pid`'s maps mention `needle`.
fn wait_for_map(pid: u32, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default().contains(needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{needle} never mapped in {pid}");
}

/// The well-behaved process, started `delay_s` seconds after the agent
/// (a shell selected by pid execs it), so that the agent meets the bad
/// files first.
fn control(delay_s: u32) -> Workload {
    let exe = build_workload("gcc", "native_chain.c", C_FLAGS, "native_chain");
    Workload::spawn(Command::new("sh").arg("-c").arg(format!("sleep {delay_s}; exec {}", exe.display())))
}

fn assert_complete(what: &str, c: &Completeness, stats: &Stats) {
    c.assert_whole(what, MIN_SAMPLES, REQUIRED, stats);
}

/// The control's main thread chain is whole.
fn assert_control(traces: &[Trace], control: &Workload, stats: &Stats) {
    let chain = c_main_thread(&[Fn("chain_1"), Fn("chain_2"), Fn("chain_3"), Fn("chain_4"), Fn("chain_leaf")]);
    let c = completeness(traces, control.pid(), Fn("chain_leaf"), &chain);
    assert_complete("control process", &c, stats);
}

fn profile(pids: Vec<u32>, map_files: bool) -> Option<(Vec<Trace>, Stats)> {
    let config = AgentConfig { samples_per_second: HZ, pids, open_via_map_files: map_files, ..AgentConfig::default() };
    profile_with(config, |agent| {
        std::thread::sleep(Duration::from_secs(SECONDS));
        eprintln!("notices: {:?}", agent.notices());
    })
}

/// Function names of `pid`'s frames.
fn names_of(traces: &[Trace], pid: u32) -> Vec<String> {
    let mut names: Vec<String> = traces
        .iter()
        .filter(|t| t.process.pid.0 == pid)
        .flat_map(|t| user_frames(t).into_iter().filter_map(|f| f.name))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn dev_zero_mapped_executable_is_refused() {
    let _serial = serial();
    let spin = build_workload("gcc", "map_and_spin.c", C_FLAGS, "map_and_spin");
    let evil = Workload::spawn(Command::new(&spin).arg("/dev/zero").arg("0x4000000"));
    wait_for_map(evil.pid(), "/dev/zero");
    let good = control(1);
    let Some((traces, stats)) = profile(vec![evil.pid(), good.pid()], true) else { return };
    assert!(stats.files_refused_not_regular >= 1, "{stats:#?}");
    assert!(traces.iter().any(|t| t.process.pid.0 == evil.pid()), "the busy process was sampled");
    assert_control(&traces, &good, &stats);
}

/// The library's path becomes a FIFO after it was mapped; without
/// map_files the agent finds the FIFO by path: refused, not opened.
#[test]
fn fifo_at_a_mapped_library_path_does_not_block() {
    let _serial = serial();
    let dir = test_dir("fifo");
    let main = build_workload("gcc", "dlopen_main.c", C_FLAGS, "dlopen_main");
    let lib = plugin("libfifo_plugin.so");
    let path = dir.join("libplugin.so");
    std::fs::copy(&lib, &path).unwrap();
    let evil = Workload::spawn(Command::new(&main).arg(&path));
    wait_for_map(evil.pid(), "libplugin.so");
    std::fs::remove_file(&path).unwrap();
    mkfifo(&path);
    let good = control(1);
    let Some((traces, stats)) = profile(vec![evil.pid(), good.pid()], false) else { return };
    assert!(stats.files_refused_not_regular >= 1, "{stats:#?}");
    assert_control(&traces, &good, &stats);
}

/// The flags of the plugin library `dlopen_main` loads.
const PLUGIN_FLAGS: &[&str] = &["-O2", "-fomit-frame-pointer", "-shared", "-fPIC"];

/// Builds the plugin library as `name`.
fn plugin(name: &str) -> PathBuf {
    build_workload("gcc", "dlopen_plugin.c", PLUGIN_FLAGS, name)
}

/// The chain of `dlopen_main`'s main thread in the plugin.
fn plugin_chain() -> Vec<Step> {
    c_main_thread(&[Fn("run_plugin"), Fn("plugin_entry"), Fn("plugin_step"), Fn("plugin_leaf")])
}

/// Builds the plugin library with its functions renamed `evil_*`.
fn evil_plugin(name: &str) -> PathBuf {
    let renamed = ["-Dplugin_leaf=evil_leaf", "-Dplugin_step=evil_step", "-Dplugin_entry=evil_entry"];
    let flags: Vec<&str> = PLUGIN_FLAGS.iter().copied().chain(renamed).collect();
    build_workload("gcc", "dlopen_plugin.c", &flags, name)
}

/// A library replaced on disk (by rename) after it was mapped: through
/// map_files the mapped file is named; without map_files the new file at
/// the path is not the mapped inode and is refused. Never the new
/// file's names.
#[test]
fn library_swapped_on_disk_keeps_the_mapped_files_names() {
    let _serial = serial();
    let main = build_workload("gcc", "dlopen_main.c", C_FLAGS, "dlopen_main");
    let lib = plugin("libswap_plugin.so");
    let evil = evil_plugin("libswap_evil.so");
    for map_files in [true, false] {
        let dir = test_dir(&format!("swap-{map_files}"));
        let path = dir.join("libplugin.so");
        std::fs::copy(&lib, &path).unwrap();
        let w = Workload::spawn(Command::new(&main).arg(&path));
        wait_for_map(w.pid(), "libplugin.so");
        let staged = dir.join("staged.so");
        std::fs::copy(&evil, &staged).unwrap();
        std::fs::rename(&staged, &path).unwrap();
        let good = control(1);
        let Some((traces, stats)) = profile(vec![w.pid(), good.pid()], map_files) else { return };
        let names = names_of(&traces, w.pid());
        assert!(!names.iter().any(|n| n.starts_with("evil_")), "named from the new file: {names:?}");
        if map_files {
            let c = completeness(&traces, w.pid(), Fn("plugin_leaf"), &plugin_chain());
            assert_complete("swapped library through map_files", &c, &stats);
        } else {
            assert!(stats.files_refused_mismatch >= 1, "{stats:#?}");
        }
        assert_control(&traces, &good, &stats);
    }
}

/// A crafted file with a real library's first and last 4 KiB and length
/// (so its FileId) but zeroed code and CFI in between, mapped first:
/// the real library keeps its own tables and unwinds whole.
#[test]
fn file_id_collision_does_not_poison_the_real_library() {
    let _serial = serial();
    let dir = test_dir("collide");
    let main = build_workload("gcc", "dlopen_main.c", C_FLAGS, "dlopen_main");
    let spin = build_workload("gcc", "map_and_spin.c", C_FLAGS, "map_and_spin");
    let lib = plugin("libcollide_plugin.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    let len = bytes.len();
    assert!(len > 3 * 4096, "{len} bytes: no middle to change");
    bytes[4096..len - 4096].fill(0);
    let crafted = dir.join("libplugin.so");
    std::fs::write(&crafted, &bytes).unwrap();
    assert_eq!(profiler_elf::file_id_of_path(&crafted).unwrap(), profiler_elf::file_id_of_path(&lib).unwrap());

    let evil = Workload::spawn(Command::new(&spin).arg(&crafted));
    wait_for_map(evil.pid(), "libplugin.so");
    let real = Workload::spawn(Command::new(&main).arg(&lib));
    wait_for_map(real.pid(), "libcollide_plugin.so");
    // The crafted file is loaded first (pids load in order).
    let Some((traces, stats)) = profile(vec![evil.pid(), real.pid()], true) else { return };
    assert_eq!(stats.file_id_collisions, 1, "{stats:#?}");
    let c = completeness(&traces, real.pid(), Fn("plugin_leaf"), &plugin_chain());
    assert_complete("real library after a colliding one", &c, &stats);
}

/// `objcopy --only-keep-debug` of `bin` into `out`.
fn keep_debug(bin: &Path, out: &Path) {
    run(Command::new("objcopy").arg("--only-keep-debug").arg(bin).arg(out));
}

/// Replaces every `from` in the file by `to` (same length).
fn patch(path: &Path, from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(path).unwrap();
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(n > 0, "nothing to patch in {}", path.display());
    std::fs::write(path, bytes).unwrap();
}

/// A chroot whose stripped binary's `.gnu_debuglink` file is an absolute
/// symlink. Resolved inside the root, it leads to nothing in `root1`
/// (the host file at that path is never read) and to the copy inside
/// `root2`, whose names then appear: the link is followed, within the
/// root only.
#[test]
fn debuglink_symlink_in_a_chroot_stays_inside_it() {
    let _serial = serial();
    let dir = test_dir("chroot");
    let bin = build_workload(
        "gcc",
        "native_chain.c",
        &["-O2", "-fomit-frame-pointer", "-pthread", "-static", "-g"],
        "native_chain_static",
    );
    // A debug file naming every chain_* function EVILC_*: read, it shows.
    let host_dir = dir.join("host");
    std::fs::create_dir_all(&host_dir).unwrap();
    let host_debug = host_dir.join("chain.debug");
    keep_debug(&bin, &host_debug);
    patch(&host_debug, b"chain_", b"EVILC_");
    let stripped = dir.join("chain");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&bin));
    // The link records the name chain.debug and the CRC of that file.
    run(Command::new("objcopy").arg(format!("--add-gnu-debuglink={}", host_debug.display())).arg(&stripped));

    let mut workloads = Vec::new();
    for (name, copy_inside) in [("root1", false), ("root2", true)] {
        let root = dir.join(name);
        std::fs::create_dir_all(root.join("app")).unwrap();
        let mut binary = std::fs::read(&stripped).unwrap();
        if copy_inside {
            // Other content: symbols are per content, and the two roots
            // give the same content different debug files.
            binary.push(0);
        }
        std::fs::write(root.join("app/chain"), binary).unwrap();
        std::fs::set_permissions(root.join("app/chain"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&host_debug, root.join("app/chain.debug")).unwrap();
        if copy_inside {
            let inside = root.join(host_debug.strip_prefix("/").unwrap());
            std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
            std::fs::copy(&host_debug, &inside).unwrap();
        }
        let w = Workload::spawn(Command::new("chroot").arg(&root).arg("/app/chain"));
        wait_for_map(w.pid(), "/app/chain");
        workloads.push(w);
    }
    let Some((traces, stats)) = profile(workloads.iter().map(Workload::pid).collect(), true) else { return };
    let outside = names_of(&traces, workloads[0].pid());
    assert!(!outside.iter().any(|n| n.starts_with("EVILC_")), "a host file was read: {outside:?}");
    let inside = names_of(&traces, workloads[1].pid());
    assert!(inside.iter().any(|n| n == "EVILC_leaf"), "the debug file inside the root is used: {inside:?}");
    assert!(traces.iter().any(|t| t.process.pid.0 == workloads[0].pid()), "{stats:#?}");
}

/// A `.gnu_debuglink` naming a FIFO and a `.gnu_debugaltlink` naming
/// `/dev/zero`: refused, and the symbolizer goes on naming the control.
#[test]
fn debuglink_fifo_and_altlink_dev_zero_are_refused() {
    let _serial = serial();
    let dir = test_dir("debuglinks");
    // Stripped, linked to chain.debug, which becomes a FIFO.
    let bin = build_workload("gcc", "native_chain.c", &["-O2", "-fomit-frame-pointer", "-pthread", "-g"], "chain_g");
    let debug = dir.join("chain.debug");
    keep_debug(&bin, &debug);
    let linked = dir.join("chain_linked");
    run(Command::new("strip").arg("-o").arg(&linked).arg(&bin));
    run(Command::new("objcopy").current_dir(&dir).arg("--add-gnu-debuglink=chain.debug").arg(&linked));
    mkfifo(&debug);
    // DWARF in the file, and a dwz link to /dev/zero.
    let spin = build_workload("gcc", "map_and_spin.c", &["-O2", "-g"], "map_and_spin_g");
    let altlink = dir.join("altlink");
    let mut section = b"/dev/zero\0".to_vec();
    section.extend_from_slice(&[0xab; 20]);
    std::fs::write(&altlink, section).unwrap();
    let spin_linked = dir.join("spin_altlink");
    run(Command::new("objcopy")
        .arg(format!("--add-section=.gnu_debugaltlink={}", altlink.display()))
        .arg(&spin)
        .arg(&spin_linked));

    let a = Workload::spawn(&mut Command::new(&linked));
    let b = Workload::spawn(Command::new(&spin_linked).arg(&spin_linked));
    wait_for_map(b.pid(), "spin_altlink");
    let good = control(1);
    let Some((traces, stats)) = profile(vec![a.pid(), b.pid(), good.pid()], true) else { return };
    assert!(stats.files_refused_not_regular >= 2, "the FIFO and /dev/zero: {stats:#?}");
    assert_control(&traces, &good, &stats);
    // The busy loop is still named, from the file's own DWARF.
    assert!(names_of(&traces, b.pid()).iter().any(|n| n == "spin_leaf"), "{stats:#?}");
}
