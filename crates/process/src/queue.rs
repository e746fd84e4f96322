//! The queue between the thread that drains the kernel's process events
//! and the process manager: bounded, one entry per pid with pending work
//! (a burst of events for one process is one piece of work), an exit
//! cancelling the loads still pending for its pid. The drain side never
//! blocks on the manager, so the kernel's ring buffer does not fill while
//! the manager is busy.
//!
//! Only work a sample waits for (a load asked by a sample) wakes the
//! manager at once. Execs and exits wait up to [`LAZY_DELAY`], so that a
//! churn's tens of them a second take a few wake-ups together with the
//! manager's scheduled work, not one each: an exec's load is scheduled
//! [`LAZY_DELAY`] or more after it anyway, and an exited process stays
//! loaded for a grace.

use profiler_trace::Pid;
use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long work nobody waits for (execs, exits) may stay queued before
/// it wakes the manager.
pub const LAZY_DELAY: Duration = Duration::from_millis(50);

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
    /// A sample waits for the load (since the exit, if any): the manager
    /// is woken at once, and an exec's load is not deferred.
    pub sampled: bool,
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
    /// Pending work a sample waits for ([`PendingWork::sampled`]).
    urgent: usize,
    /// When the oldest pending work nobody waits for was queued.
    lazy_since: Option<Instant>,
    /// Until when the consumer sleeps, while it does.
    sleeping_until: Option<Instant>,
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
        let sampled = matches!(kind, EventKind::New | EventKind::UnknownPc);
        let (was_urgent, urgent) = if let Some(w) = s.work.get_mut(&pid) {
            let was_urgent = w.sampled;
            let cancelled = kind == EventKind::Exit && w.load.is_some();
            match load {
                Some(l) => {
                    w.load = Some(w.load.map_or(l, |old| old.max(l)));
                    w.sampled |= sampled;
                }
                None => {
                    w.exit = true;
                    w.load = None;
                    w.sampled = false;
                }
            }
            let urgent = w.sampled;
            s.stats.coalesced += 1;
            if cancelled {
                s.stats.cancelled += 1;
            }
            (was_urgent, urgent)
        } else {
            if s.work.len() >= self.capacity {
                s.stats.dropped += 1;
                return;
            }
            s.work.insert(pid, PendingWork { pid, exit: load.is_none(), load, sampled, ktime_ns });
            s.order.push_back(pid);
            (false, sampled)
        };
        s.urgent = (s.urgent + usize::from(urgent)).saturating_sub(usize::from(was_urgent));
        let now = Instant::now();
        let wake = if urgent {
            !was_urgent
        } else {
            let since = *s.lazy_since.get_or_insert(now);
            // A consumer asleep past this work's due time sets its alarm
            // again.
            s.sleeping_until.is_some_and(|until| until > since + LAZY_DELAY)
        };
        drop(s);
        if wake {
            self.ready.notify_one();
        }
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

    /// Takes up to `max` pieces of work, oldest first. Waits up to
    /// `timeout` for work a sample waits for or a [`EventQueue::wake`];
    /// other work ends the wait [`LAZY_DELAY`] after it was queued.
    pub fn wait(&self, timeout: Duration, max: usize) -> Vec<PendingWork> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        while s.urgent == 0 && !s.woken {
            let until = s.lazy_since.map_or(deadline, |since| deadline.min(since + LAZY_DELAY));
            let now = Instant::now();
            if now >= until {
                break;
            }
            s.sleeping_until = Some(until);
            s = self.ready.wait_timeout(s, until - now).map(|r| r.0).unwrap_or_else(|p| p.into_inner().0);
            s.sleeping_until = None;
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
        // What is left (over `max`) is due now.
        s.urgent = s.work.values().filter(|w| w.sampled).count();
        let now = Instant::now();
        s.lazy_since = if s.work.is_empty() { None } else { Some(now.checked_sub(LAZY_DELAY).unwrap_or(now)) };
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
                PendingWork { pid: Pid(1), exit: false, load: Some(LoadKind::UnknownPc), sampled: true, ktime_ns: 10 },
                PendingWork { pid: Pid(2), exit: true, load: None, sampled: false, ktime_ns: 20 },
                PendingWork { pid: Pid(3), exit: true, load: Some(LoadKind::New), sampled: true, ktime_ns: 30 },
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
        assert_eq!(got[0], PendingWork { pid: Pid(1), exit: true, load: None, sampled: false, ktime_ns: 0 });
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
        q.push(EventKind::New, Pid(9), 1);
        assert_eq!(q.wait(Duration::from_secs(10), 10).len(), 1);
        assert!(!q.is_closed());
        q.close();
        assert!(q.is_closed());
        assert!(q.wait(Duration::from_secs(10), 10).is_empty(), "closing wakes the consumer");
    }

    #[test]
    fn execs_and_exits_wait_a_moment_samples_do_not() {
        let q = std::sync::Arc::new(EventQueue::new(8));
        // Queued before the wait: due LAZY_DELAY after the push.
        q.push(EventKind::Exec, Pid(1), 1);
        let started = Instant::now();
        assert_eq!(q.wait(Duration::from_secs(10), 10).len(), 1);
        let waited = started.elapsed();
        assert!(waited >= LAZY_DELAY - Duration::from_millis(5), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");

        // Queued during a long wait: the consumer sets its alarm again.
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            q2.push(EventKind::Exit, Pid(2), 2);
            q2.push(EventKind::Exec, Pid(3), 3);
        });
        let started = Instant::now();
        let got = q.wait(Duration::from_secs(10), 10);
        let waited = started.elapsed();
        assert_eq!(got.iter().map(|w| w.pid).collect::<Vec<_>>(), [Pid(2), Pid(3)]);
        assert!(waited >= Duration::from_millis(20) + LAZY_DELAY - Duration::from_millis(5), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        t.join().unwrap();

        // A sample's load ends the wait at once, and takes the exec along.
        q.push(EventKind::Exec, Pid(4), 4);
        q.push(EventKind::New, Pid(5), 5);
        q.push(EventKind::UnknownPc, Pid(5), 6);
        let started = Instant::now();
        let got = q.wait(Duration::from_secs(10), 10);
        assert!(started.elapsed() < LAZY_DELAY, "{:?}", started.elapsed());
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].load, Some(LoadKind::UnknownPc));
        // An exec and a sample of the new program: an exec's load that a
        // sample waits for, at once.
        q.push(EventKind::Exec, Pid(8), 10);
        q.push(EventKind::New, Pid(8), 11);
        let started = Instant::now();
        let got = q.wait(Duration::from_secs(10), 10);
        assert!(started.elapsed() < LAZY_DELAY, "{:?}", started.elapsed());
        assert_eq!((got[0].load, got[0].sampled), (Some(LoadKind::Exec), true));

        // An exit cancelling a sample's load leaves lazy work only.
        q.push(EventKind::New, Pid(6), 7);
        q.push(EventKind::Exit, Pid(6), 8);
        let started = Instant::now();
        assert_eq!(q.wait(Duration::from_secs(10), 10).len(), 1);
        assert!(started.elapsed() >= LAZY_DELAY - Duration::from_millis(5));
        // A timeout shorter than the delay ends the wait first.
        q.push(EventKind::Exit, Pid(7), 9);
        assert_eq!(q.wait(Duration::ZERO, 10).len(), 1);
    }
}
