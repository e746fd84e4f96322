//! Proves the HotSpot layout against live JVMs: each JDK found here runs
//! `tests/workloads/java/HotspotChain.java` (compiled by that JDK's
//! javac), interpreted only (`-Xint`) and mixed mode; the test stops the
//! JVM (SIGSTOP), finds `libjvm.so` in its maps ([`detect`]), reads its
//! vmStructs tables ([`attach`]), finds the main thread's `JavaThread` by
//! kernel tid in the threads list, walks its Java frames from the frame
//! anchor, and asserts the exact chain of names and lines down to `main`.
//! In mixed mode it also waits for `hot()` to be compiled and checks that
//! the code cache finds its nmethod, and walks the worker thread, whose
//! loop in `work()` is usually compiled by then (the walk goes through
//! the compiled frame by its frame size).
//!
//! JDK 17 (`openjdk-17-jdk-headless`) is required under CI=true; Temurin
//! 25 is tested when installed (a fresh CI machine may not have it).

mod common;

use common::{find_runtime, read_u64, resume, skip, stop, workload, Workload};
use profiler_elf::ElfFile;
use profiler_interpreters::hotspot::{
    attach, compiled_scopes, detect, java_threads, read_method, walk_java_frames, BlobKind, CodeCache, Detection,
    HotspotError, HotspotLayout, HotspotSymbolizer, JavaFrame, JavaThreadInfo, WalkEnd,
};
use profiler_interpreters::PidMemory;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The JDK home whose directory in /usr/lib/jvm starts with `prefix`.
fn jdk(prefix: &str, required_in_ci: bool) -> Option<PathBuf> {
    let found = std::fs::read_dir("/usr/lib/jvm").ok().and_then(|dir| {
        let mut homes: Vec<PathBuf> = dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
            .filter(|p| p.join("bin/java").exists() && p.join("bin/javac").exists())
            .collect();
        homes.sort();
        homes.into_iter().next()
    });
    if found.is_none() {
        let what = format!("no /usr/lib/jvm/{prefix}* JDK with java and javac");
        if required_in_ci {
            skip(&what);
        } else {
            eprintln!("SKIPPED: {what}");
        }
    }
    found
}

fn source() -> PathBuf {
    workload("java/HotspotChain.java")
}

/// The line of the source marked `// line:<name>`.
fn marked_line(name: &str) -> u32 {
    common::marked_line(&source(), "//", name)
}

/// The directory of the compiled workload, removed on drop.
struct ClassDir(PathBuf);

impl Drop for ClassDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The compiled workload in a fresh directory named after `tag`.
fn compile(home: &Path, tag: &str) -> ClassDir {
    let dir = ClassDir(std::env::temp_dir().join(format!("hotspot-live-{tag}-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let status = Command::new(home.join("bin/javac")).arg("-d").arg(&dir.0).arg(source()).status().unwrap();
    assert!(status.success(), "javac failed");
    dir
}

/// A running workload, killed on drop (before its directory goes).
struct Jvm {
    workload: Workload,
    /// Held to be removed after the JVM is killed.
    _dir: ClassDir,
    main_tid: u32,
    worker_tid: u32,
    sorter_tid: u32,
    /// The JNI thread, when gcc could build its library.
    jni_tid: Option<u32>,
}

impl Jvm {
    fn pid(&self) -> u32 {
        self.workload.pid()
    }
}

fn start(home: &Path, tag: &str, xint: bool) -> Jvm {
    let dir = compile(home, &format!("{tag}-{xint}"));
    let mut cmd = Command::new(home.join("bin/java"));
    // Small: four of these may run at once beside other tests.
    cmd.args(["-Xmx64m", "-XX:+UseSerialGC"]);
    let jni = build_jni(home, &dir.0);
    if let Some(lib) = &jni {
        cmd.arg(format!("-Dhotspot.jni={}", lib.display()));
    }
    if xint {
        cmd.arg("-Xint");
    }
    let mut workload = Workload::spawn(cmd.arg("-cp").arg(&dir.0).arg("HotspotChain"));
    let (mut main_tid, mut worker_tid, mut sorter_tid, mut jni_tid) = (0, 0, 0, None);
    while main_tid == 0 || worker_tid == 0 || sorter_tid == 0 || (jni.is_some() && jni_tid.is_none()) {
        let line = workload.line();
        let mut words = line.split_whitespace();
        match (words.next(), words.next().and_then(|t| t.parse().ok())) {
            (Some("main-tid"), Some(t)) => main_tid = t,
            (Some("worker-tid"), Some(t)) => worker_tid = t,
            (Some("sorter-tid"), Some(t)) => sorter_tid = t,
            (Some("jni-tid"), Some(t)) => jni_tid = Some(t),
            _ => {}
        }
    }
    Jvm { workload, _dir: dir, main_tid, worker_tid, sorter_tid, jni_tid }
}

/// The workload's JNI library, built with gcc against this JDK's headers
/// (gcc is required under CI=true).
fn build_jni(home: &Path, dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("libhotspot_chain_jni.so");
    let c = workload("java/hotspot_chain_jni.c");
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-fomit-frame-pointer"])
        .arg(format!("-I{}", home.join("include").display()))
        .arg(format!("-I{}", home.join("include/linux").display()))
        .arg("-o")
        .arg(&lib)
        .arg(c)
        .status();
    match status {
        Ok(s) if s.success() => Some(lib),
        other => {
            skip(&format!("the JNI thread: gcc could not build its library ({other:?})"));
            None
        }
    }
}

/// `libjvm.so`'s detection and load bias in `pid`, once it is mapped.
fn find_jvm(pid: u32) -> Option<(String, Detection, u64)> {
    find_runtime(pid, |elf: &ElfFile, path: &str| path.ends_with("/libjvm.so").then(|| detect(elf, path)))
}

/// A frame's names, innermost first: `(Class.method, line)`; a compiled
/// frame gives one per inlined method.
fn names(
    sym: &mut HotspotSymbolizer,
    pid: u32,
    l: &HotspotLayout,
    cache: &CodeCache,
    frame: &JavaFrame,
) -> Vec<(String, Option<u32>)> {
    let memory = PidMemory(pid);
    let mut named = |method: u64, bci: Option<u32>| {
        let m = sym.method(&memory, l, method).unwrap_or_else(|| panic!("Method {method:#x} unreadable"));
        (m.qualified_name(), bci.and_then(|b| m.line(b)))
    };
    match frame {
        JavaFrame::Interpreted { method, bci } => vec![named(*method, *bci)],
        JavaFrame::Compiled { nmethod, pc_offset, .. } => {
            let blob = cache.read_blob(&memory, l, *nmethod).unwrap();
            let scopes = compiled_scopes(&memory, l, &blob, blob.code_begin + pc_offset)
                .unwrap_or_else(|e| panic!("scopes of {blob:?}: {e}"));
            scopes.iter().map(|s| named(s.method, s.bci)).collect()
        }
        JavaFrame::Stub(name) => vec![(format!("[stub {name}]"), None)],
        JavaFrame::Native => vec![("[native]".to_string(), None)],
    }
}

fn thread_by_tid(pid: u32, l: &HotspotLayout, bias: u64, tid: u32) -> JavaThreadInfo {
    let threads = java_threads(&PidMemory(pid), l, bias).unwrap();
    assert!(threads.len() >= 2, "threads: {threads:?}");
    threads.into_iter().find(|t| t.tid == tid).unwrap_or_else(|| panic!("no JavaThread with tid {tid}"))
}

/// Thread `tid` of the stopped JVM once it is blocked (with a frame
/// anchor); between looks the JVM runs for `run`.
fn when_blocked(pid: u32, l: &HotspotLayout, bias: u64, tid: u32, run: Duration, what: &str) -> JavaThreadInfo {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let thread = thread_by_tid(pid, l, bias, tid);
        if thread.state == l.thread_state_blocked {
            return thread;
        }
        assert!(Instant::now() < deadline, "{what}: thread {tid} never blocked: {thread:?}");
        resume(pid);
        std::thread::sleep(run);
        stop(pid);
    }
}

/// A thread's frames, their names (innermost first) and the code cache
/// they were walked with.
type Walked = (Vec<JavaFrame>, Vec<(String, Option<u32>)>, CodeCache);

/// Walks a blocked `thread` down to its entry frame (a failure if the
/// walk ends elsewhere) and names the frames.
fn walk_named(
    sym: &mut HotspotSymbolizer,
    jvm: &Jvm,
    l: &HotspotLayout,
    bias: u64,
    thread: &JavaThreadInfo,
    what: &str,
) -> Walked {
    let pid = jvm.pid();
    let memory = PidMemory(pid);
    let cache = CodeCache::read(&memory, l, bias).unwrap();
    let (frames, end) = walk_java_frames(&memory, l, bias, &cache, thread, 64).unwrap();
    let named: Vec<(String, Option<u32>)> = frames.iter().flat_map(|f| names(sym, pid, l, &cache, f)).collect();
    assert_eq!(end, WalkEnd::EntryFrame, "{what}: {named:?}");
    (frames, named, cache)
}

/// Where the workload's own frames start in `named`.
fn first_ours(named: &[(String, Option<u32>)]) -> usize {
    named
        .iter()
        .position(|(n, _)| n.starts_with("HotspotChain."))
        .unwrap_or_else(|| panic!("no workload frame: {named:?}"))
}

/// A workload method at the line marked `mark`.
fn at(method: &str, mark: &str) -> (String, Option<u32>) {
    (method.to_string(), Some(marked_line(mark)))
}

fn check(home: &Path, tag: &str, xint: bool) {
    let jvm = start(home, tag, xint);
    let pid = jvm.pid();
    let memory = PidMemory(pid);
    let (path, detection, bias) = find_jvm(pid).unwrap_or_else(|| panic!("no libjvm.so in the maps of {pid}"));
    let Detection::Hotspot(symbols) = detection else { panic!("{path}: {detection:?}") };
    let what = format!("{} (-Xint: {xint})", home.display());

    stop(pid);
    let started = Instant::now();
    let layout = attach(&memory, &symbols, bias).unwrap_or_else(|e| panic!("{what}: {e}"));
    eprintln!("{what}: tables and layout read in {:?}", started.elapsed());
    let want_major: u32 = tag.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().unwrap();
    assert_eq!(layout.version.major, want_major, "{what}: {}", layout.version);
    eprintln!("{what}: {}, fallbacks {:?}", layout.version, layout.fallbacks);
    let cache = CodeCache::read(&memory, &layout, bias).unwrap();
    assert!(!cache.heaps.is_empty() && cache.heaps.iter().all(|h| cache.low <= h.low && h.high <= cache.high));

    // The main thread, parked in c() (it may still be on its way there
    // just after printing its tid).
    let main = when_blocked(pid, &layout, bias, jvm.main_tid, Duration::from_millis(20), &what);
    let mut sym = HotspotSymbolizer::new(1000);
    let (frames, named, cache) = walk_named(&mut sym, &jvm, &layout, bias, &main, &what);
    eprintln!("{what}: main thread {named:?}");
    let first_ours = first_ours(&named);
    assert!(first_ours > 0, "{what}: the chain starts in Thread.sleep: {named:?}");
    assert!(named[0].0.starts_with("java.lang.Thread.sleep"), "{what}: innermost {named:?}");
    for (n, _) in &named[..first_ours] {
        assert!(n.starts_with("java.") || n.starts_with("jdk."), "{what}: a JDK frame above c(): {named:?}");
    }
    assert_eq!(
        named[first_ours..],
        [
            at("HotspotChain.c", "c"),
            at("HotspotChain.b", "b"),
            at("HotspotChain.a", "a"),
            at("HotspotChain.main", "main")
        ],
        "{what}"
    );
    let a_frame = frames.iter().filter(|f| matches!(f, JavaFrame::Interpreted { .. })).nth_back(1).unwrap();
    let JavaFrame::Interpreted { method: a_method, .. } = a_frame else { unreachable!() };
    assert_eq!(sym.method(&memory, &layout, *a_method).unwrap().qualified_name(), "HotspotChain.a");
    let a_info = read_method(&memory, &layout, *a_method).unwrap();
    assert_eq!((&*a_info.signature, a_info.source_file.as_deref()), ("()V", Some("HotspotChain.java")));

    if !xint {
        check_compiled_hot(&jvm, &layout, bias, *a_method, &what);
    }
    check_worker(&jvm, &layout, bias, xint, &what);
    check_sorter(&jvm, &layout, bias, &what);
    if let Some(tid) = jvm.jni_tid {
        check_jni(&jvm, tid, &layout, bias, &what);
    }
    // Named again: every method from the cache, each still valid.
    let before = sym.stats();
    let again: Vec<(String, Option<u32>)> =
        frames.iter().flat_map(|f| names(&mut sym, pid, &layout, &cache, f)).collect();
    assert_eq!(again, named);
    let stats = sym.stats();
    assert_eq!(
        (stats.hits - before.hits, stats.reads, stats.stale, stats.read_failures),
        (named.len() as u64, before.reads, 0, 0)
    );
    assert!(before.reads as usize <= named.len() && sym.len() == before.reads as usize, "{stats:?}");
}

/// Waits for `hot()` to have an nmethod, then finds it in the code cache.
fn check_compiled_hot(jvm: &Jvm, l: &HotspotLayout, bias: u64, a_method: u64, what: &str) {
    let pid = jvm.pid();
    let memory = PidMemory(pid);
    // The class's methods: holder of a()'s constant pool -> _methods.
    let word = |a: u64| read_u64(&memory, a);
    let const_method = word(a_method + u64::from(l.method_const_method));
    let pool = word(const_method + u64::from(l.const_method_constants));
    let klass = word(pool + u64::from(l.constant_pool_holder));
    let methods = word(klass + u64::from(l.instance_klass_methods));
    let count = word(methods) as u32;
    assert!((5..100).contains(&count), "{count} methods");
    let hot = (0..u64::from(count))
        .map(|i| word(methods + u64::from(l.array_data) + 8 * i))
        .find(|m| read_method(&memory, l, *m).is_ok_and(|info| &*info.name == "hot"))
        .expect("no method hot()");
    resume(pid);
    let deadline = Instant::now() + Duration::from_secs(120);
    while word(hot + u64::from(l.method_code)) == 0 {
        assert!(Instant::now() < deadline, "{what}: hot() was not compiled in 120 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(pid);
    let nmethod = word(hot + u64::from(l.method_code));
    let cache = CodeCache::read(&memory, l, bias).unwrap();
    assert!(cache.contains(nmethod), "{what}: nmethod {nmethod:#x} outside {:#x}-{:#x}", cache.low, cache.high);
    let blob = cache.read_blob(&memory, l, nmethod).expect("unreadable nmethod");
    assert_eq!((blob.kind, blob.method), (BlobKind::Nmethod, Some(hot)), "{what}: {blob:?}");
    assert!(blob.frame_size > 0 && blob.code_begin < blob.code_end, "{what}: {blob:?}");
    for pc in [blob.code_begin, blob.code_begin + (blob.code_end - blob.code_begin) / 2, blob.code_end - 1] {
        assert_eq!(cache.find_blob(&memory, l, pc), Some(nmethod), "{what}: pc {pc:#x} of {blob:?}");
    }
    eprintln!("{what}: hot() compiled: {blob:?}");
}

/// The worker thread while it sleeps: Thread.sleep <- pause() <- work()
/// <- run(). In mixed mode, tries until work() is compiled (its loop gets
/// an OSR nmethod) and checks the walk through it and its inlined pause().
fn check_worker(jvm: &Jvm, l: &HotspotLayout, bias: u64, xint: bool, what: &str) {
    let pid = jvm.pid();
    let mut sym = HotspotSymbolizer::new(100);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut interpreted_seen = false;
    while Instant::now() < deadline {
        let worker = thread_by_tid(pid, l, bias, jvm.worker_tid);
        if worker.state == l.thread_state_blocked {
            let (frames, named, cache) = walk_named(&mut sym, jvm, l, bias, &worker, what);
            assert_eq!(
                named[first_ours(&named)..],
                [
                    at("HotspotChain.pause", "pause"),
                    at("HotspotChain.work", "work"),
                    at("HotspotChain$Worker.run", "run")
                ],
                "{what}: {frames:?}"
            );
            // The frame that holds work(): compiled once the loop is hot.
            let work_frame = frames.iter().rev().nth(1).unwrap();
            match work_frame {
                JavaFrame::Compiled { .. } => {
                    assert!(!xint, "{what}: compiled frames under -Xint");
                    let inlined = names(&mut sym, pid, l, &cache, work_frame);
                    eprintln!("{what}: worker {named:?}, work() compiled with {inlined:?}");
                    return;
                }
                JavaFrame::Interpreted { .. } if xint => {
                    eprintln!("{what}: worker {named:?}");
                    return;
                }
                JavaFrame::Interpreted { .. } => interpreted_seen = true,
                other => panic!("{what}: work() in {other:?}"),
            }
        }
        resume(pid);
        std::thread::sleep(Duration::from_millis(3));
        stop(pid);
    }
    panic!("{what}: the worker was never caught sleeping in compiled work() (interpreted: {interpreted_seen})");
}

/// The sorter thread asleep in its comparator: Java (and its synthetic
/// bridge method) called from the JDK's sort, called from Java.
fn check_sorter(jvm: &Jvm, l: &HotspotLayout, bias: u64, what: &str) {
    let pid = jvm.pid();
    let sorter = when_blocked(pid, l, bias, jvm.sorter_tid, Duration::from_millis(3), what);
    let (_, named, _) = walk_named(&mut HotspotSymbolizer::new(100), jvm, l, bias, &sorter, what);
    let ours = &named[first_ours(&named)..];
    assert!(ours.len() >= 6, "{what}: {named:?}");
    assert_eq!(
        ours[..3],
        [
            at("HotspotChain.pause", "pause"),
            at("HotspotChain$ByLength.compare", "compare"),
            at("HotspotChain$ByLength.compare", "bridge"),
        ],
        "{what}: {named:?}"
    );
    assert_eq!(
        ours[ours.len() - 2..],
        [at("HotspotChain.sortOnce", "sortOnce"), at("HotspotChain$Sorter.run", "sorter")],
        "{what}: {named:?}"
    );
    let jdk = &ours[3..ours.len() - 2];
    assert!(
        !jdk.is_empty() && jdk.iter().all(|(n, line)| n.starts_with("java.util.") && line.is_some()),
        "{what}: the JDK's sort between compare() and sortOnce(): {named:?}"
    );
    eprintln!("{what}: sorter {named:?}");
}

/// The JNI thread asleep in Java called back from C: the walk crosses the
/// C frames through the entry frame's saved anchor, down to run().
fn check_jni(jvm: &Jvm, tid: u32, l: &HotspotLayout, bias: u64, what: &str) {
    let pid = jvm.pid();
    let thread = when_blocked(pid, l, bias, tid, Duration::from_millis(20), what);
    let (_, named, _) = walk_named(&mut HotspotSymbolizer::new(100), jvm, l, bias, &thread, what);
    eprintln!("{what}: jni {named:?}");
    assert_eq!(
        named[first_ours(&named)..],
        [
            at("HotspotChain.pause", "pause"),
            at("HotspotChain.fromNative", "fromNative"),
            ("[native]".to_string(), None),
            ("HotspotChain.callBack".to_string(), None),
            at("HotspotChain.jniOuter", "jniOuter"),
            at("HotspotChain$Jni.run", "jni"),
        ],
        "{what}"
    );
}

#[test]
fn jdk17_interpreted() {
    if let Some(home) = jdk("java-17-openjdk", true) {
        check(&home, "jdk17", true);
    }
}

#[test]
fn jdk17_mixed_mode() {
    if let Some(home) = jdk("java-17-openjdk", true) {
        check(&home, "jdk17", false);
    }
}

#[test]
fn jdk25_interpreted() {
    if let Some(home) = jdk("temurin-25", false) {
        check(&home, "jdk25", true);
    }
}

#[test]
fn jdk25_mixed_mode() {
    if let Some(home) = jdk("temurin-25", false) {
        check(&home, "jdk25", false);
    }
}

/// Attaching while the JVM starts: from the moment `libjvm.so` is mapped,
/// every attempt gives the layout, "not ready yet" or (while ld.so is
/// still mapping the file's segments) "unreadable", never "unsupported",
/// and the layout comes.
#[test]
fn jdk17_attach_during_startup() {
    let Some(home) = jdk("java-17-openjdk", true) else { return };
    let dir = compile(&home, "startup");
    // Its stdout (the threads' tids) is not read: a few lines fit the pipe.
    let workload = Workload::spawn(
        Command::new(home.join("bin/java"))
            .args(["-Xmx64m", "-XX:+UseSerialGC", "-cp"])
            .arg(&dir.0)
            .arg("HotspotChain"),
    );
    let jvm = Jvm { workload, _dir: dir, main_tid: 0, worker_tid: 0, sorter_tid: 0, jni_tid: None };
    let pid = jvm.pid();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut not_ready, mut unreadable, mut unmapped) = (0, 0, 0);
    loop {
        assert!(Instant::now() < deadline, "no layout within 60 s ({not_ready} not ready)");
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if !maps.contains("/libjvm.so") {
            unmapped += 1;
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let (path, detection, bias) = find_jvm(pid).expect("libjvm.so left the maps");
        let Detection::Hotspot(symbols) = detection else { panic!("{path}: {detection:?}") };
        match attach(&PidMemory(pid), &symbols, bias) {
            Ok(layout) => {
                assert_eq!(layout.version.major, 17);
                eprintln!(
                    "layout after {unmapped} polls before libjvm.so, {not_ready} not ready, {unreadable} unreadable"
                );
                return;
            }
            Err(HotspotError::NotReady) => not_ready += 1,
            Err(HotspotError::Unreadable(_)) => unreadable += 1,
            Err(e) => panic!("while the JVM starts: {e}"),
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
