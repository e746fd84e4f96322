//! Gives the file pages lookups read back to the kernel a moment after
//! the reads, even when no lookup follows (a release at the next lookup
//! would leave an interval's last pages resident until the next
//! interval, which is where the agent's RSS sits most of the time).
//!
//! The thread (`symbolize-pages`) sleeps until a map is queued, waits
//! [`RELEASE_AFTER`] for the lookups in flight, then drops the pages of
//! every map queued meanwhile. No wake-up while nothing is looked up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use crate::filemap::FileMap;

/// How long after the first read of a batch its pages are dropped.
pub(crate) const RELEASE_AFTER: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Queue {
    maps: Vec<Weak<FileMap>>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    queued: Condvar,
    /// Releases done: a file queued before the current release must be
    /// queued again after it.
    releases: AtomicU64,
}

/// The handle of the release thread; dropping it ends the thread.
pub(crate) struct PageReleaser {
    shared: Arc<Shared>,
}

impl PageReleaser {
    /// Starts the thread.
    pub(crate) fn start() -> std::io::Result<PageReleaser> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new().name("symbolize-pages".into()).spawn(move || run(&theirs))?;
        Ok(PageReleaser { shared })
    }

    /// How many releases are done: changes when what was queued is
    /// released.
    pub(crate) fn generation(&self) -> u64 {
        self.shared.releases.load(Ordering::Acquire)
    }

    /// Queues maps whose pages were read (dropped within
    /// [`RELEASE_AFTER`]; a map freed meanwhile is skipped).
    pub(crate) fn queue(&self, maps: impl IntoIterator<Item = Weak<FileMap>>) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = q.maps.is_empty();
        q.maps.extend(maps);
        if was_empty && !q.maps.is_empty() {
            self.shared.queued.notify_one();
        }
    }
}

impl Drop for PageReleaser {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        self.shared.queued.notify_one();
    }
}

fn run(shared: &Shared) {
    let lock = || shared.queue.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let mut q = lock();
        while q.maps.is_empty() && !q.stop {
            q = shared.queued.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        if q.stop {
            return;
        }
        // The lookups of this batch go on meanwhile; ended early by stop.
        let (q, _) = shared.queued.wait_timeout_while(q, RELEASE_AFTER, |q| !q.stop).unwrap_or_else(|p| p.into_inner());
        let mut q = q;
        if q.stop {
            return;
        }
        let maps = std::mem::take(&mut q.maps);
        shared.releases.fetch_add(1, Ordering::AcqRel);
        drop(q);
        let mut seen = std::collections::HashSet::new();
        for map in maps.iter().filter_map(Weak::upgrade) {
            if seen.insert(Arc::as_ptr(&map)) {
                map.release();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Resident KiB of the mapping that starts at `start` (from
    /// `/proc/self/smaps`).
    fn resident_kib(start: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((from, _)) = range.split_once('-') {
                    if let Ok(from) = usize::from_str_radix(from, 16) {
                        inside = from == start;
                        continue;
                    }
                }
            }
            if inside {
                if let Some(kib) = line.strip_prefix("Rss:") {
                    return kib.trim().trim_end_matches(" kB").parse().expect("Rss value");
                }
            }
        }
        panic!("no mapping at {start:#x}");
    }

    #[test]
    fn read_pages_leave_the_resident_set_after_a_moment() {
        let path = std::env::temp_dir().join(format!("symbolize-release-{}", std::process::id()));
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(&vec![7u8; 1 << 20]).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let map = Arc::new(FileMap::from_file(&file, 1 << 20).expect("map"));
        std::fs::remove_file(&path).expect("remove");
        let start = map.data().as_ptr() as usize;
        let sum: u64 = map.data().iter().step_by(4096).map(|&b| b as u64).sum();
        assert_eq!(sum, 7 * 256);
        assert_eq!(resident_kib(start), 1024);

        let releaser = PageReleaser::start().expect("thread");
        assert_eq!(releaser.generation(), 0);
        // A map freed before the release is skipped.
        let gone = Arc::new(FileMap::from_file(&file, 1 << 20).expect("map"));
        releaser.queue([Arc::downgrade(&map), Arc::downgrade(&map), Arc::downgrade(&gone)]);
        drop(gone);
        let waited = std::time::Instant::now();
        while releaser.generation() == 0 || resident_kib(start) != 0 {
            assert!(waited.elapsed() < Duration::from_secs(10), "not released: {} KiB", resident_kib(start));
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(waited.elapsed() >= RELEASE_AFTER - Duration::from_millis(50));
        assert_eq!(releaser.generation(), 1);
        // Still readable: faulted back in.
        assert_eq!(map.data()[12345], 7);
        assert!(resident_kib(start) > 0);
    }
}
