//! Profiling only the processes of a cgroup (the container filter rests
//! on the same selection): the processes in it at start, the processes
//! they start later (chosen by the programs at fork), and a process that
//! joins it and execs after the start (chosen at its exec); nothing of a
//! process outside it.

use profiler_agent::AgentConfig;
use profiler_tests::{build_c_workload, in_ci, profile_with, serial, Workload};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A cgroup of this test in a hierarchy it may write to: cgroup v2 (the
/// host's, or the unified one of a hybrid host), else a v1 hierarchy.
struct TestCgroup {
    dir: PathBuf,
}

impl TestCgroup {
    fn create() -> Option<TestCgroup> {
        let name = format!("ep-filter-{}", std::process::id());
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids"] {
            let root = Path::new(root);
            if !root.join("cgroup.procs").exists() {
                continue;
            }
            let dir = root.join(&name);
            if std::fs::create_dir(&dir).is_ok() {
                return Some(TestCgroup { dir });
            }
        }
        None
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("moving a process into the cgroup");
    }

    /// Its path as `/proc/<pid>/cgroup` of a member shows it.
    fn path_seen_by(&self, pid: u32) -> String {
        let name = self.dir.file_name().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup of a member");
        text.lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .find(|p| p.ends_with(&format!("/{name}")))
            .unwrap_or_else(|| panic!("{pid} is not in {name}: {text}"))
            .to_owned()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Whatever is left in it (the shell's background child) goes, then
        // the cgroup.
        for pid in std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default().lines() {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_cgroup_filter_follows_forks_and_execs_and_leaves_the_rest_out() {
    let _serial = serial();
    let Some(cgroup) = TestCgroup::create() else {
        assert!(!in_ci(), "no cgroup hierarchy this test can write to");
        eprintln!("SKIPPED: no writable cgroup hierarchy");
        return;
    };
    let busy = build_c_workload("busy_loop.c", &["-O2"]);
    let busy = busy.to_str().unwrap();
    // In the cgroup before the start.
    let already = Workload::spawn(&mut Command::new(busy));
    cgroup.add(already.pid());
    // In it before the start too, and starts its busy child after it.
    let mut parent = Workload::spawn_gated(&format!("{busy} & wait"));
    cgroup.add(parent.pid());
    // Outside at the start; joins, then execs, after it.
    let mut joiner = Workload::spawn_gated(&format!("echo $$ > {}/cgroup.procs; exec {busy}", cgroup.dir.display()));
    // Never in it.
    let outside = Workload::spawn(&mut Command::new(busy));
    let path = cgroup.path_seen_by(already.pid());

    let config = AgentConfig { samples_per_second: 99, cgroups: vec![path.clone()], ..AgentConfig::default() };
    let Some((traces, _stats)) = profile_with(config, |_| {
        parent.release();
        joiner.release();
        std::thread::sleep(Duration::from_secs(4));
    }) else {
        return;
    };

    let mut by_pid: BTreeMap<u32, (String, usize)> = BTreeMap::new();
    for t in &traces {
        let e = by_pid.entry(t.process.pid.0).or_insert_with(|| (t.process.executable_name.to_string(), 0));
        e.1 += 1;
    }
    assert!(!by_pid.contains_key(&outside.pid()), "a process outside {path} was sampled: {by_pid:?}");
    for (pid, (name, _)) in &by_pid {
        let in_it = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).map_or(true, |t| t.contains(&path));
        assert!(in_it, "{pid} ({name}) is not in {path}: {by_pid:?}");
    }
    let busy_pids: Vec<u32> =
        by_pid.iter().filter(|(_, (name, n))| name == "busy_loop" && *n >= 20).map(|(pid, _)| *pid).collect();
    assert!(busy_pids.contains(&already.pid()), "the process in the cgroup at start: {by_pid:?}");
    assert!(busy_pids.contains(&joiner.pid()), "the process that joined and exec'd: {by_pid:?}");
    let forked: Vec<&u32> = busy_pids.iter().filter(|p| ![already.pid(), joiner.pid()].contains(p)).collect();
    assert_eq!(forked.len(), 1, "the busy grandchild of the shell in the cgroup, chosen at fork: {by_pid:?}");
    drop((already, parent, joiner, outside));
}
