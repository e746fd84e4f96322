//! The queue between the thread that drains the kernel's process events
//! and the process manager: bounded, one entry per pid with pending work
//! (a burst of events for one process is one piece of work), an exit
//! cancelling the loads still pending for its pid. The drain side never
//! blocks on the manager, so the kernel's ring buffer does not fill while
//! the manager is busy.

use profiler_trace::Pid;
use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// What the kernel told about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A sample of a process the unwinder does not know.
    New,
    /// A known process ran code in no loaded mapping.
    UnknownPc,
    /// The process called execve.
    Exec,
    /// The last thread of the process exited.
    Exit,
}

/// The load a pid waits for; the strongest of its events wins
/// (an exec reloads everything, an unknown pc forces a maps read that a
/// new-process event may skip).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoadKind {
    /// Load the process if it is not loaded (recently).
    New,
    /// Read its maps again.
    UnknownPc,
    /// Everything is new: reload.
    Exec,
}

/// The pending work of one pid: its exit first (if any), then the load
/// asked after it (if any: a reused pid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWork {
    /// The process.
    pub pid: Pid,
    /// It exited.
    pub exit: bool,
    /// The load to do (after the exit).
    pub load: Option<LoadKind>,
    /// `CLOCK_MONOTONIC` time of the first event merged into this work
    /// (ns; 0 when unknown).
    pub ktime_ns: u64,
}

/// The queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Events pushed.
    pub received: u64,
    /// Events merged into the pending work of their pid.
    pub coalesced: u64,
    /// Loads cancelled by their process's exit before they ran.
    pub cancelled: u64,
    /// Events dropped because `capacity` pids were waiting.
    pub dropped: u64,
    /// Pids waiting now.
    pub pending: u64,
}

#[derive(Default)]
struct State {
    order: VecDeque<Pid>,
    work: HashMap<Pid, PendingWork>,
    woken: bool,
    closed: bool,
    stats: QueueStats,
}

/// See the module documentation.
pub struct EventQueue {
    state: Mutex<State>,
    ready: Condvar,
    capacity: usize,
}

impl EventQueue {
    /// A queue holding the work of at most `capacity` pids.
    pub fn new(capacity: usize) -> EventQueue {
        EventQueue { state: Mutex::new(State::default()), ready: Condvar::new(), capacity: capacity.max(1) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an event (never blocks beyond the queue's short lock).
    pub fn push(&self, kind: EventKind, pid: Pid, ktime_ns: u64) {
        let mut s = self.lock();
        s.stats.received += 1;
        let load = match kind {
            EventKind::New => Some(LoadKind::New),
            EventKind::UnknownPc => Some(LoadKind::UnknownPc),
            EventKind::Exec => Some(LoadKind::Exec),
            EventKind::Exit => None,
        };
        if let Some(w) = s.work.get_mut(&pid) {
            let cancelled = kind == EventKind::Exit && w.load.is_some();
            match load {
                Some(l) => w.load = Some(w.load.map_or(l, |old| old.max(l))),
                None => {
                    w.exit = true;
                    w.load = None;
                }
            }
            s.stats.coalesced += 1;
            if cancelled {
                s.stats.cancelled += 1;
            }
            return;
        }
        if s.work.len() >= self.capacity {
            s.stats.dropped += 1;
            return;
        }
        s.work.insert(pid, PendingWork { pid, exit: load.is_none(), load, ktime_ns });
        s.order.push_back(pid);
        drop(s);
        self.ready.notify_one();
    }

    /// Wakes [`EventQueue::wait`] without an event (other work is ready).
    pub fn wake(&self) {
        self.lock().woken = true;
        self.ready.notify_one();
    }

    /// The producer is done: no event will come any more (wakes
    /// [`EventQueue::wait`]).
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake();
    }

    /// Whether [`EventQueue::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Takes up to `max` pieces of work, oldest first; waits up to
    /// `timeout` for the first one or a [`EventQueue::wake`].
    pub fn wait(&self, timeout: Duration, max: usize) -> Vec<PendingWork> {
        let mut s = self.lock();
        if s.order.is_empty() && !s.woken && !timeout.is_zero() {
            s = self
                .ready
                .wait_timeout_while(s, timeout, |s| s.order.is_empty() && !s.woken)
                .map(|r| r.0)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        s.woken = false;
        let n = s.order.len().min(max);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(pid) = s.order.pop_front() else { break };
            if let Some(w) = s.work.remove(&pid) {
                out.push(w);
            }
        }
        out
    }

    /// The counters.
    pub fn stats(&self) -> QueueStats {
        let s = self.lock();
        QueueStats { pending: s.work.len() as u64, ..s.stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_pid_and_exit_cancels_loads() {
        let q = EventQueue::new(16);
        q.push(EventKind::New, Pid(1), 10);
        q.push(EventKind::UnknownPc, Pid(1), 11);
        q.push(EventKind::New, Pid(1), 12);
        q.push(EventKind::Exec, Pid(2), 20);
        q.push(EventKind::Exit, Pid(2), 21);
        q.push(EventKind::Exit, Pid(3), 30);
        q.push(EventKind::New, Pid(3), 31); // pid reuse: exit, then load
        let got = q.wait(Duration::ZERO, 100);
        assert_eq!(
            got,
            vec![
                PendingWork { pid: Pid(1), exit: false, load: Some(LoadKind::UnknownPc), ktime_ns: 10 },
                PendingWork { pid: Pid(2), exit: true, load: None, ktime_ns: 20 },
                PendingWork { pid: Pid(3), exit: true, load: Some(LoadKind::New), ktime_ns: 30 },
            ]
        );
        let s = q.stats();
        assert_eq!((s.received, s.coalesced, s.cancelled, s.dropped, s.pending), (7, 4, 1, 0, 0));
    }

    #[test]
    fn bounded_and_counted() {
        let q = EventQueue::new(2);
        for pid in 1..=5 {
            q.push(EventKind::New, Pid(pid), 0);
        }
        q.push(EventKind::Exit, Pid(1), 0); // merges into a waiting pid: kept
        assert_eq!(q.stats().dropped, 3);
        let got = q.wait(Duration::ZERO, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0], PendingWork { pid: Pid(1), exit: true, load: None, ktime_ns: 0 });
        assert_eq!(q.wait(Duration::ZERO, 10).len(), 1);
        assert_eq!(q.stats().pending, 0);
    }

    #[test]
    fn wait_returns_on_wake_and_on_events() {
        let q = std::sync::Arc::new(EventQueue::new(4));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            q2.wake();
        });
        let started = std::time::Instant::now();
        assert!(q.wait(Duration::from_secs(10), 10).is_empty());
        assert!(started.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        q.push(EventKind::Exec, Pid(9), 1);
        assert_eq!(q.wait(Duration::from_secs(10), 10).len(), 1);
        assert!(!q.is_closed());
        q.close();
        assert!(q.is_closed());
        assert!(q.wait(Duration::from_secs(10), 10).is_empty(), "closing wakes the consumer");
    }
}
