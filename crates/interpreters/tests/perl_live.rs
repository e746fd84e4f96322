//! Proves the Perl layout against a live interpreter: runs
//! `tests/workloads/perl/chain.pl` with the system `perl`, waits until its
//! main thread sleeps, stops it (SIGSTOP), finds `libperl` (or a static
//! `perl`) in its maps ([`detect`]), finds the main thread's interpreter
//! (`PL_curinterp` in a threaded build, the globals otherwise), walks its
//! context stacks (the sort block's stack, then the main one) and asserts
//! the exact chain of subs, files and lines down to `main`: through a sort
//! block, a sort sub with a map block, an `eval { }` and an `eval ''`.
//! Detection is also checked on made-up libperls built with `gcc`, and
//! threads' interpreters are found through the `PL_thr_key` slot (an
//! ithread's too; x86-64, ptrace for the fs base).
//!
//! `perl` is required under CI=true (every Debian install has it:
//! `perl-base`'s `/usr/bin/perl` has libperl linked in).

mod common;

use common::{find_runtime, read_u64, skip, stop_when_asleep, tasks, workload, Workload};
use profiler_elf::ElfFile;
use profiler_interpreters::perl::{
    detect, global_state, threaded_state, Detection, PerlBuild, PerlFrame, PerlState, PerlSymbolizer,
};
use profiler_interpreters::{PidMemory, ProcessMemory};
use std::path::{Path, PathBuf};
use std::process::Command;

fn source() -> PathBuf {
    workload("perl/chain.pl")
}

/// The line of the workload marked `# line:<name>`.
fn marked_line(name: &str) -> u32 {
    common::marked_line(&source(), "#", name)
}

/// `perl`, or None (a failure under CI=true) when it is missing.
fn have_perl() -> bool {
    match Command::new("perl").arg("-v").output() {
        Ok(o) if o.status.success() => true,
        other => {
            skip(&format!("no perl ({other:?})"));
            false
        }
    }
}

/// The file in `pid`'s maps holding Perl, with its load bias.
fn find_perl(pid: u32) -> (String, Box<PerlBuild>, u64) {
    let perl_in = |elf: &ElfFile, path: &str| match detect(elf) {
        Detection::NotPerl => None,
        Detection::Unsupported { version, reason } => panic!("{path}: unsupported Perl {version:?}: {reason}"),
        Detection::Perl(build) => Some(build),
    };
    find_runtime(pid, perl_in).unwrap_or_else(|| panic!("no Perl in the maps of {pid}"))
}

/// Runs the workload in `mode` until it sleeps and stops it (SIGSTOP).
fn start_stopped(mode: &str) -> Workload {
    let mut child = Workload::spawn(Command::new("perl").arg(source()).arg(mode));
    let pid = child.pid();
    assert_eq!(child.line().trim(), format!("ready {pid}"));
    // Asleep in `sleep`, every thread.
    stop_when_asleep(pid, true);
    child
}

/// Runs the workload in `mode` until it sleeps, stops it and walks its
/// main thread.
fn walk_live(mode: &str) -> Vec<PerlFrame> {
    let guard = start_stopped(mode);
    let pid = guard.pid();
    let (path, build, bias) = find_perl(pid);
    eprintln!("Perl {} in {path}, bias {bias:#x}, {:?}", build.version, build.state);
    let memory = PidMemory(pid);
    let thread = match build.state {
        PerlState::Threaded { curinterp_vaddr, .. } => {
            let interpreter = read_u64(&memory, bias + curinterp_vaddr);
            assert_ne!(interpreter, 0, "PL_curinterp is null");
            threaded_state(&memory, &build.layout, interpreter).unwrap()
        }
        PerlState::Globals { curcop_vaddr, curstackinfo_vaddr } => {
            global_state(&memory, bias + curcop_vaddr, bias + curstackinfo_vaddr).unwrap()
        }
    };
    let mut symbolizer = PerlSymbolizer::new(build.layout.clone());
    let frames = symbolizer.walk(&memory, thread).unwrap();
    // Walked again from the caches: the same.
    assert_eq!(symbolizer.walk(&memory, thread).unwrap(), frames);
    assert_eq!((symbolizer.evictions, symbolizer.truncated), (0, 0));
    frames
}

fn frame(name: &str, line: &str) -> PerlFrame {
    PerlFrame { name: name.into(), file: source().to_str().unwrap().to_string(), line: marked_line(line) }
}

/// A sort block calling a sub: the block runs on a stack of its own
/// (`si_prev` leads back), and is part of `b`, not a frame.
#[test]
fn walks_a_sort_block_in_a_live_perl() {
    if !have_perl() {
        return;
    }
    let want = vec![
        frame("Chain::Worker::c", "c"),
        frame("Chain::Worker::b", "b"),
        frame("main::a", "a"),
        frame("main", "main"),
    ];
    assert_eq!(walk_live("block"), want);
}

/// A named sort sub (a frame, called by `sort`), a map block (no frame)
/// and an `eval { }` block (no frame: `a` is at the call inside it).
#[test]
fn walks_a_sort_sub_map_and_eval_block_in_a_live_perl() {
    if !have_perl() {
        return;
    }
    let want = vec![
        frame("Chain::Worker::c", "c"),
        frame("Chain::Worker::by_c", "by_c"),
        frame("Chain::Worker::b_named", "b_named"),
        frame("main::a", "a_named"),
        frame("main", "main"),
    ];
    assert_eq!(walk_live("named"), want);
}

/// The file holding the system Perl's interpreter: the libperl that
/// `perl` maps, or `perl` itself when it is static.
fn system_libperl() -> String {
    let script = r#"open my $m, "<", "/proc/self/maps" or die; my @p = map { (split)[5] // () } <$m>;
                    my ($l) = grep { /libperl/ } @p; print $l // readlink("/proc/self/exe")"#;
    let o = Command::new("perl").args(["-e", script]).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn detects_the_system_libperl_from_the_file() {
    if !have_perl() {
        return;
    }
    let path = system_libperl();
    let version = Command::new("perl").args(["-e", r#"printf "%vd", $^V"#]).output().unwrap().stdout;
    let threaded = Command::new("perl").args(["-MConfig", "-e", r#"print $Config{usemultiplicity} ? 1 : 0"#]).output();
    let threaded = String::from_utf8(threaded.unwrap().stdout).unwrap() == "1";
    let elf = ElfFile::open(&path).unwrap();
    let Detection::Perl(build) = detect(&elf) else { panic!("{path}: {:?}", detect(&elf)) };
    assert_eq!(build.version.to_string(), String::from_utf8(version).unwrap());
    assert_eq!(build.layout.version, build.version);
    assert_eq!(build.layout.threaded, threaded);
    assert_eq!(matches!(build.state, PerlState::Threaded { .. }), threaded);
    assert!(build.runops.0 > 0 && build.runops.1 > 0, "{:?}", build.runops);
    // Debian's perl links libperl in statically; the shared libperl of the
    // same release, when installed (for embedders), is the same build.
    let shared = format!("/usr/lib/x86_64-linux-gnu/libperl.so.{}", build.version);
    if path != shared && Path::new(&shared).exists() {
        let Detection::Perl(lib) = detect(&ElfFile::open(&shared).unwrap()) else { panic!("{shared}") };
        assert_eq!((lib.version, &lib.layout), (build.version, &build.layout));
    }
}

#[test]
fn a_file_without_perl_is_not_perl() {
    let exe = std::env::current_exe().unwrap();
    let elf = ElfFile::open(&exe).unwrap();
    assert_eq!(detect(&elf), Detection::NotPerl);
}

/// A string eval is a frame of its own, named `eval`; the code in it is
/// at the file `(eval N)`.
#[test]
fn walks_a_string_eval_in_a_live_perl() {
    if !have_perl() {
        return;
    }
    let frames = walk_live("string");
    let in_eval = &frames.get(2).expect("an eval frame").file;
    assert!(in_eval.starts_with("(eval ") && in_eval.ends_with(')'), "{frames:?}");
    let want = vec![
        frame("Chain::Worker::c", "c"),
        frame("Chain::Worker::b", "b"),
        PerlFrame { name: "eval".into(), file: in_eval.clone(), line: 1 },
        frame("main::a", "a_string"),
        frame("main", "main"),
    ];
    assert_eq!(frames, want);
}

/// Detection of made-up libperls: supported or not, threaded or not.
#[test]
fn detects_versions_and_builds_from_the_symbols() {
    let src = workload("perl/fake_libperl.c");
    let dir = std::env::temp_dir().join(format!("perl_detect_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let build = |name: &str, defines: &[&str]| {
        let out = dir.join(name);
        let status =
            Command::new("gcc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&out).args(defines).arg(&src).output();
        match status {
            Ok(o) if o.status.success() => {}
            other => panic!("gcc: {other:?}"),
        }
        detect(&ElfFile::open(&out).unwrap())
    };
    let threaded = build("t540.so", &["-DMINOR=40", "-DTHREADED"]);
    let Detection::Perl(b) = threaded else { panic!("{threaded:?}") };
    assert_eq!(b.version.to_string(), "5.40.1");
    assert!(b.layout.threaded && matches!(b.state, PerlState::Threaded { .. }));
    let plain = build("p528.so", &["-DMINOR=28"]);
    let Detection::Perl(b) = plain else { panic!("{plain:?}") };
    assert_eq!(b.version.to_string(), "5.28.1");
    let PerlState::Globals { curcop_vaddr, curstackinfo_vaddr } = b.state else { panic!("{:?}", b.state) };
    assert!(curcop_vaddr != 0 && curstackinfo_vaddr != 0 && !b.layout.threaded);
    for (name, defines, release, why) in [
        ("t526.so", &["-DMINOR=26", "-DTHREADED"][..], "5.26.1", "only 5.28.0 to 5.42.x, not 5.41.x are read"),
        ("t541.so", &["-DMINOR=41"][..], "5.41.1", "only 5.28.0 to 5.42.x, not 5.41.x are read"),
        ("t544.so", &["-DMINOR=44"][..], "5.44.1", "only 5.28.0 to 5.42.x, not 5.41.x are read"),
        (
            "nointerp.so",
            &["-DMINOR=36", "-DTHREADED", "-DNO_CURINTERP"][..],
            "5.36.1",
            "no PL_curinterp (a threaded Perl)",
        ),
    ] {
        let Detection::Unsupported { version: Some(version), reason } = build(name, defines) else {
            panic!("{name}: not refused with its version")
        };
        assert_eq!((version.to_string().as_str(), reason.to_string().as_str()), (release, why), "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Where glibc keeps the value of the pthread key `key` (< 32), as an
/// offset from a thread's `fs` base: found in this process (same glibc)
/// by setting a key of its own and looking for the value in its thread
/// block, not taken from glibc's private headers.
#[cfg(target_arch = "x86_64")]
fn glibc_key_slot(key: u32) -> u64 {
    const ARCH_GET_FS: libc::c_int = 0x1003;
    let mut own: libc::pthread_key_t = 0;
    // SAFETY: a new key with no destructor, set on this thread only.
    assert_eq!(unsafe { libc::pthread_key_create(&mut own, None) }, 0);
    let sentinel: u64 = 0x5eed_c0de_0bad_f00d;
    // SAFETY: stores a plain value; nothing dereferences it.
    assert_eq!(unsafe { libc::pthread_setspecific(own, sentinel as *const libc::c_void) }, 0);
    let mut fs: u64 = 0;
    // SAFETY: ARCH_GET_FS writes one u64 at the address given.
    assert_eq!(unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_GET_FS, &mut fs as *mut u64) }, 0);
    let me = PidMemory(std::process::id());
    let mut found = None;
    for off in (0..0x2000u64).step_by(8) {
        let mut b = [0u8; 8];
        if me.read(fs + off, &mut b) && u64::from_le_bytes(b) == sentinel {
            found = Some(off);
            break;
        }
    }
    // SAFETY: our own key, no longer used.
    unsafe { libc::pthread_key_delete(own) };
    assert!(own < 32 && key < 32, "keys past glibc's first block: {own}, {key}");
    let off = found.expect("the key's value in the thread block");
    // The first block is an array of {sequence, value} pairs.
    off - u64::from(own) * 16 + u64::from(key) * 16
}

/// The fs base of a stopped thread `tid` (ptrace: attach, read, detach).
#[cfg(target_arch = "x86_64")]
fn fs_base(tid: u32) -> u64 {
    let pid = tid as libc::pid_t;
    // SAFETY: ptrace of our own stopped child; `regs` is written by the
    // kernel and the child is detached before returning.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0), 0, "{}", std::io::Error::last_os_error());
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, libc::__WALL), pid);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        let got = libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs as *mut libc::user_regs_struct);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
        assert_eq!(got, 0, "{}", std::io::Error::last_os_error());
        regs.fs_base
    }
}

/// The BPF unwinder will find a thread's interpreter in the slot of
/// `PL_thr_key` (5.36 also has the thread-local `PL_current_context`):
/// for the main thread it must be `PL_curinterp`.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_thread_key_holds_the_main_interpreter() {
    if !have_perl() {
        return;
    }
    let guard = start_stopped("block");
    let pid = guard.pid();
    let (path, build, bias) = find_perl(pid);
    let PerlState::Threaded { thr_key_vaddr, curinterp_vaddr } = build.state else {
        eprintln!("SKIPPED: {path} is a non-threaded perl");
        return;
    };
    let memory = PidMemory(pid);
    let mut key = [0u8; 4];
    assert!(memory.read(bias + thr_key_vaddr, &mut key));
    let key = u32::from_le_bytes(key);
    let slot = fs_base(pid) + glibc_key_slot(key);
    let interpreter = read_u64(&memory, bias + curinterp_vaddr);
    assert_ne!(interpreter, 0);
    assert_eq!(read_u64(&memory, slot), interpreter, "key {key}");
}

/// A second thread's interpreter, found through its `PL_thr_key` slot
/// (not `PL_curinterp`, the main thread's), walked down to the ithread's
/// entry sub; the main thread, blocked in `join`, is walked too.
#[cfg(target_arch = "x86_64")]
#[test]
fn walks_an_ithread_through_its_thread_key() {
    if !have_perl() {
        return;
    }
    if !Command::new("perl").args(["-Mthreads", "-e1"]).status().is_ok_and(|s| s.success()) {
        skip("perl without its threads module");
        return;
    }
    let guard = start_stopped("thread");
    let pid = guard.pid();
    let (path, build, bias) = find_perl(pid);
    let PerlState::Threaded { thr_key_vaddr, curinterp_vaddr } = build.state else {
        panic!("{path}: threads without a threaded perl");
    };
    let memory = PidMemory(pid);
    let mut key = [0u8; 4];
    assert!(memory.read(bias + thr_key_vaddr, &mut key));
    let slot = glibc_key_slot(u32::from_le_bytes(key));
    let tids = tasks(pid);
    assert_eq!(tids.len(), 2, "{tids:?}");
    let worker = tids.into_iter().find(|&t| t != pid).unwrap();
    let interpreter = read_u64(&memory, fs_base(worker) + slot);
    assert_ne!(interpreter, read_u64(&memory, bias + curinterp_vaddr), "the ithread has its own interpreter");
    let mut symbolizer = PerlSymbolizer::new(build.layout.clone());
    let frames = symbolizer.walk(&memory, threaded_state(&memory, &build.layout, interpreter).unwrap()).unwrap();
    let want = vec![
        frame("Chain::Worker::c", "c"),
        frame("Chain::Worker::b", "b"),
        frame("main::a", "a"),
        frame("main::thread_main", "thread_main"),
        // The clone's statement when the thread was created.
        frame("main", "create"),
    ];
    assert_eq!(frames, want);
    // The main thread: in `join`, an XS (C) function, so no frame of
    // its own; the top level is at the statement calling it.
    let main = read_u64(&memory, fs_base(pid) + slot);
    assert_eq!(main, read_u64(&memory, bias + curinterp_vaddr));
    let frames = symbolizer.walk(&memory, threaded_state(&memory, &build.layout, main).unwrap()).unwrap();
    assert_eq!(frames, vec![frame("main", "create")]);
}
