//! CPU the process manager spends loading one process, over a fixed set of
//! live processes (a `sleep`, a shell, `python3`): each is unloaded and
//! loaded again `ROUNDS` times with a loader that only records, so the
//! figure is the manager's own work (procfs reads, file identity, the
//! snapshot), not the BPF map writes. Thread CPU time, so a busy machine
//! changes it less than wall time.
//!
//!     cargo run --release -p profiler-process --example load_cost [ROUNDS]

use profiler_elf::{DeltaWalk, RuleId, UnwindRule};
use profiler_process::{LoaderError, ManagerLimits, ProcessManager, ProcessRegistry, UnwindLoader, UnwindMapping};
use profiler_trace::{Pid, TableKey};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

struct Counting {
    sets: u64,
}

impl UnwindLoader for Counting {
    fn set_rule(&mut self, _: RuleId, _: &UnwindRule) -> Result<(), LoaderError> {
        Ok(())
    }
    fn load_file(&mut self, _: TableKey, deltas: &DeltaWalk<'_>) -> Result<(), LoaderError> {
        deltas().for_each(drop);
        Ok(())
    }
    fn unload_file(&mut self, _: TableKey) -> Result<(), LoaderError> {
        Ok(())
    }
    fn set_process(&mut self, _: Pid, _: &[UnwindMapping]) -> Result<(), LoaderError> {
        self.sets += 1;
        Ok(())
    }
    fn remove_process(&mut self, _: Pid) -> Result<(), LoaderError> {
        Ok(())
    }
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the calling thread's clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let rounds: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let children: Vec<Kill> = [
        vec!["sleep", "600"],
        vec!["sh", "-c", "sleep 600"],
        vec!["python3", "-c", "import json, hashlib, time; time.sleep(600)"],
    ]
    .into_iter()
    .filter_map(|argv| Command::new(argv[0]).args(&argv[1..]).spawn().ok().map(Kill))
    .collect();
    std::thread::sleep(Duration::from_millis(500)); // ld.so and imports done
    let pids: Vec<Pid> = children.iter().map(|c| Pid(c.0.id())).collect();
    let limits = ManagerLimits {
        exit_grace: Duration::ZERO,
        maps_refresh_interval: Duration::ZERO,
        unload_grace: Duration::ZERO,
        ..Default::default()
    };
    let mut manager = ProcessManager::new(Counting { sets: 0 }, Arc::new(ProcessRegistry::new()), limits);
    // The first round analyses the files: not counted.
    for &pid in &pids {
        manager.on_new_process(pid);
    }
    manager.settle();
    let start = thread_cpu();
    for _ in 0..rounds {
        for &pid in &pids {
            manager.on_exit(pid);
            manager.on_new_process(pid);
        }
        manager.tick();
    }
    let spent = thread_cpu() - start;
    let loads = u64::from(rounds) * pids.len() as u64;
    println!(
        "{} processes x {} rounds: {:.1} us of CPU per load and unload ({} mappings set)",
        pids.len(),
        rounds,
        spent.as_secs_f64() * 1e6 / loads as f64,
        manager.loader().sets
    );
}
