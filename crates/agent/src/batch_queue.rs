//! The reader's hand-over of sample batches to the reporter: a bounded
//! queue whose receiver sleeps on a condition variable until a batch or
//! its deadline comes.
//!
//! crossbeam's blocking receive spins, then yields the CPU four times,
//! each time it finds its channel empty before it sleeps. The reporter
//! finds it empty at almost every wake-up (a batch every 100 ms), and on
//! a busy machine each yield is a context switch: about 3% of the
//! agent's CPU at 20 Hz under process churn.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

pub(crate) use crossbeam_channel::RecvTimeoutError;

struct State<T> {
    items: VecDeque<T>,
    capacity: usize,
    /// The receiver sleeps: a send must wake it.
    waiting: bool,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Inner<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A queue of at most `capacity` items (zero: always full), one sender
/// and one receiver.
pub(crate) fn batch_queue<T>(capacity: usize) -> (BatchSender<T>, BatchReceiver<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            items: VecDeque::new(),
            capacity,
            waiting: false,
            sender_gone: false,
            receiver_gone: false,
        }),
        ready: Condvar::new(),
    });
    (BatchSender { inner: inner.clone() }, BatchReceiver { inner })
}

/// The sending end; dropping it tells the receiver once the queue is empty.
pub(crate) struct BatchSender<T> {
    inner: Arc<Inner<T>>,
}

impl<T> BatchSender<T> {
    /// Queues `item`, or gives it back when the queue is full or the
    /// receiver has gone.
    pub(crate) fn try_send(&self, item: T) -> Result<(), T> {
        let mut state = self.inner.lock();
        if state.receiver_gone || state.items.len() >= state.capacity {
            return Err(item);
        }
        state.items.push_back(item);
        if std::mem::take(&mut state.waiting) {
            self.inner.ready.notify_one();
        }
        Ok(())
    }
}

impl<T> Drop for BatchSender<T> {
    fn drop(&mut self) {
        self.inner.lock().sender_gone = true;
        self.inner.ready.notify_one();
    }
}

/// The receiving end.
pub(crate) struct BatchReceiver<T> {
    inner: Arc<Inner<T>>,
}

impl<T> BatchReceiver<T> {
    /// The oldest item, waiting for one until `deadline`; `Disconnected`
    /// once the sender has gone and every item was taken.
    pub(crate) fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        let mut state = self.inner.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Ok(item);
            }
            if state.sender_gone {
                return Err(RecvTimeoutError::Disconnected);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RecvTimeoutError::Timeout);
            }
            state.waiting = true;
            state = self.inner.ready.wait_timeout(state, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
            state.waiting = false;
        }
    }

    /// Items queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().items.len()
    }
}

impl<T> Drop for BatchReceiver<T> {
    fn drop(&mut self) {
        let mut state = self.inner.lock();
        state.receiver_gone = true;
        // What was queued goes now, not with the sender.
        state.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn items_come_in_order_within_the_capacity_then_the_end() {
        let (tx, rx) = batch_queue(2);
        assert_eq!(tx.try_send(1), Ok(()));
        assert_eq!(tx.try_send(2), Ok(()));
        assert_eq!(tx.try_send(3), Err(3), "full");
        assert_eq!(rx.len(), 2);
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(rx.recv_deadline(soon), Ok(1));
        assert_eq!(rx.recv_deadline(soon), Ok(2));
        assert_eq!(rx.recv_deadline(soon), Err(RecvTimeoutError::Timeout));
        assert!(Instant::now() >= soon, "waited for the deadline");
        assert_eq!(tx.try_send(4), Ok(()));
        drop(tx);
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(rx.recv_deadline(later), Ok(4), "what was queued before the sender went");
        assert_eq!(rx.recv_deadline(later), Err(RecvTimeoutError::Disconnected));
        let (tx, rx) = batch_queue(0);
        assert_eq!(tx.try_send(1), Err(1), "no room at all");
        drop(rx);
    }

    #[test]
    fn a_send_or_the_sender_leaving_wakes_the_receiver() {
        let (tx, rx) = batch_queue::<u32>(4);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.try_send(7).expect("room");
            std::thread::sleep(Duration::from_millis(50));
        });
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(rx.recv_deadline(far), Ok(7));
        assert_eq!(rx.recv_deadline(far), Err(RecvTimeoutError::Disconnected), "woken by the drop, not the deadline");
        assert!(Instant::now() < far);
        sender.join().expect("sender");
        // The receiver gone: sends fail.
        let (tx, rx) = batch_queue(4);
        drop(rx);
        assert_eq!(tx.try_send(1), Err(1));
    }
}
