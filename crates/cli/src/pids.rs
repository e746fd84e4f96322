//! `--pid` values as processes: Linux also answers `/proc/TID` for a
//! thread id, but the BPF filter selects processes (thread group ids), so
//! a thread id given as is would profile nothing.

use std::io::Read;
use std::path::Path;

/// `/proc/PID/status` is a few KiB; more is not a status file.
const STATUS_READ_LIMIT: u64 = 64 * 1024;

/// The processes to profile for the ids given, each once, in the order
/// given, and a notice for each id that was a thread of another process.
/// Ids that are no task at all are kept for the agent to report.
pub fn processes_of(ids: &[u32], proc_root: &Path) -> (Vec<u32>, Vec<String>) {
    let mut pids = Vec::with_capacity(ids.len());
    let mut notices = Vec::new();
    for &id in ids {
        let pid = match thread_group_of(id, proc_root) {
            Some(tgid) if tgid != id => {
                notices.push(format!("{id} is a thread of process {tgid}; profiling process {tgid} (all its threads)"));
                tgid
            }
            _ => id,
        };
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    (pids, notices)
}

/// The `Tgid:` of `/proc/ID/status`, if the task exists and says.
fn thread_group_of(id: u32, proc_root: &Path) -> Option<u32> {
    let file = std::fs::File::open(proc_root.join(id.to_string()).join("status")).ok()?;
    let mut text = String::new();
    file.take(STATUS_READ_LIMIT).read_to_string(&mut text).ok()?;
    text.lines().find_map(|line| line.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(tasks: &[(u32, &str)]) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for (id, status) in tasks {
            let task = dir.path().join(id.to_string());
            std::fs::create_dir_all(&task).unwrap();
            std::fs::write(task.join("status"), status).unwrap();
        }
        dir
    }

    #[test]
    fn threads_become_their_process_once() {
        let proc = fake_proc(&[
            (100, "Name:\tapp\nTgid:\t100\nPid:\t100\n"),
            (105, "Name:\tworker\nTgid:\t100\nPid:\t105\n"),
            (200, "Name:\tother\nTgid:\t200\n"),
            (300, "Name:\tbroken\nTgid:\tnot a number\n"),
        ]);
        let (pids, notices) = processes_of(&[105, 100, 200, 999, 300, 105], proc.path());
        assert_eq!(pids, vec![100, 200, 999, 300]);
        assert_eq!(
            notices,
            vec![
                "105 is a thread of process 100; profiling process 100 (all its threads)",
                "105 is a thread of process 100; profiling process 100 (all its threads)",
            ]
        );
    }

    #[test]
    fn this_thread_is_found_in_the_real_proc() {
        // The main thread's id is the process id.
        let me = std::process::id();
        let (pids, notices) = processes_of(&[me], Path::new("/proc"));
        assert_eq!((pids, notices.len()), (vec![me], 0));
        // A thread kept alive until its id was looked up.
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            tid_tx.send(link.file_name().unwrap().to_str().unwrap().parse::<u32>().unwrap()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        assert_ne!(tid, me);
        let (pids, notices) = processes_of(&[tid], Path::new("/proc"));
        drop(done_tx);
        thread.join().unwrap();
        assert_eq!(pids, vec![me]);
        assert_eq!(
            notices,
            vec![format!("{tid} is a thread of process {me}; profiling process {me} (all its threads)")]
        );
    }

    /// A throwaway directory (std only), removed on drop.
    mod tempdir {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicU32, Ordering};

        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path = std::env::temp_dir().join(format!("ep-cli-pids-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
