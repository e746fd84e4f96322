//! The reader's side of the pipeline: how often it drains the sample
//! ring buffer, how big the ring and the queue to the reporter are, and
//! the hand-over of each drain within those bounds (what does not fit is
//! dropped and counted).

use crate::batch_queue::BatchSender;
use crate::Shared;
use profiler_bpf::RawSample;
use profiler_trace::UserFrame;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Most samples the channel between the reader and the reporter holds
/// (a few seconds of 1000 Hz on 8 CPUs; off-CPU stacks come faster).
/// They take memory only while queued: the channel holds batches.
pub(crate) const SAMPLE_QUEUE_MAX: usize = 32_768;
/// Fewest (a burst of off-CPU switches or a reporter busy with a big
/// interval must not drop the samples of a low rate).
pub(crate) const SAMPLE_QUEUE_MIN: usize = 2048;

/// Most samples queued for the reporter: four seconds of samples (it
/// takes them continuously, but not while it emits an interval), within
/// [`SAMPLE_QUEUE_MIN`, `SAMPLE_QUEUE_MAX`]; the maximum with off-CPU
/// profiling, whose rate follows the machine's switches.
pub(crate) fn sample_queue_capacity(samples_per_second: u32, cpus: usize, off_cpu: bool) -> usize {
    if off_cpu {
        return SAMPLE_QUEUE_MAX;
    }
    (samples_per_second as usize)
        .saturating_mul(cpus.max(1))
        .saturating_mul(4)
        .clamp(SAMPLE_QUEUE_MIN, SAMPLE_QUEUE_MAX)
}
/// The reader's wait between drains of the ring buffer when nothing
/// wakes it earlier: the time every CPU's sampling takes to bring about
/// 64 samples, within 100-500 ms ([`ReaderPace`] shortens it to
/// [`READER_POLL_SOON`] at times).
///
/// Why by rate: each drain wakes the reader and then the reporter, and a
/// wake-up costs CPU whatever it brings; a fixed 100 ms at 20 Hz on
/// 2 CPUs (4 samples a drain) made those wake-ups most of the reader's
/// cost. Why 500 ms at most: below 2,048 samples a second the ring holds
/// a second of samples of the largest size ([`ring_buffer_bytes`]), so a
/// drain comes before it is half full. Why 100 ms at least: ten wake-ups
/// a second is little at any rate, and a burst does not wait for the
/// drain: the programs wake the reader once the ring is a quarter full
/// (and at once for the first sample of a process not loaded yet, whose
/// /proc entry must be read before a short-lived process is gone). With
/// off-CPU profiling, 100 ms: its stacks come with the context switches,
/// at a rate the sampling frequency does not tell.
pub(crate) fn reader_poll_interval(samples_per_second: u32, cpus: usize, off_cpu: bool) -> Duration {
    const SAMPLES_PER_DRAIN: u64 = 64;
    let per_second = u64::from(samples_per_second).saturating_mul(cpus.max(1) as u64).max(1);
    let ms = if off_cpu { 100 } else { (SAMPLES_PER_DRAIN * 1000 / per_second).clamp(100, 500) };
    Duration::from_millis(ms)
}
/// The reader's poll while the reporter waits for something (a file's
/// names loading, stacks held for their process's tables), and while
/// interpreted frames come in: the samples that follow are named or
/// unwound sooner, and fewer of them go out with frames still unnamed.
/// An interpreted frame is named from the live process when its sample
/// is built: V8 moves optimised code, a short-lived script exits.
pub(crate) const READER_POLL_SOON: Duration = Duration::from_millis(100);
/// How long after the last interpreted frame the reader keeps
/// [`READER_POLL_SOON`]: a runtime that samples rarely (a script asleep)
/// does not hold the short poll.
const INTERPRETED_POLL_SOON_FOR: Duration = Duration::from_secs(2);

/// When the reader drains the ring buffer next: [`reader_poll_interval`],
/// or [`READER_POLL_SOON`] while the reporter waits ([`Shared::poll_soon`])
/// or interpreted frames came in lately. The reader sees those frames
/// itself, so the drain right after them is already a short one.
pub(crate) struct ReaderPace {
    by_rate: Duration,
    interpreted_until: Cell<Option<Instant>>,
}

impl ReaderPace {
    pub(crate) fn new(by_rate: Duration) -> ReaderPace {
        ReaderPace { by_rate, interpreted_until: Cell::new(None) }
    }

    /// Notes a drain's samples, taken at `now`.
    pub(crate) fn saw(&self, batch: &[RawSample], now: Instant) {
        if batch.iter().any(|s| s.user_frames.iter().any(|&w| UserFrame::is_interpreted(w))) {
            self.interpreted_until.set(Some(now + INTERPRETED_POLL_SOON_FOR));
        }
    }

    /// The wait before the next drain, at `now`.
    pub(crate) fn interval(&self, reporter_waits: bool, now: Instant) -> Duration {
        let interpreted = self.interpreted_until.get().is_some_and(|until| now < until);
        match reporter_waits || interpreted {
            true => self.by_rate.min(READER_POLL_SOON),
            false => self.by_rate,
        }
    }
}
/// Batches (one a drain of the ring buffer) the channel to the reporter
/// holds; the samples in them are bounded by [`sample_queue_capacity`].
pub(crate) const SAMPLE_BATCH_QUEUE: usize = 256;
/// Most bytes of stack copies in the channel between the reader and the
/// reporter; beyond, samples go on without theirs (counted).
pub(crate) const MAX_STACK_BYTES_IN_FLIGHT: u64 = 4 << 20;

/// Bytes of the sample ring buffer: a second of samples at up to 2 KiB
/// each (the reader drains it every 500 ms at the latest), a power of two
/// from 256 KiB to 4 MiB. The ring's pages are mapped into the agent (its
/// data twice) and all become resident as it wraps: a fixed 4 MiB ring
/// was 8 MiB of the agent's RSS at 20 Hz, where 80 KiB a second arrive.
pub(crate) fn ring_buffer_bytes(samples_per_second: u32, cpus: usize) -> u32 {
    const MIN: u64 = 256 << 10;
    const MAX: u64 = 4 << 20;
    let per_second = u64::from(samples_per_second).saturating_mul(cpus.max(1) as u64).saturating_mul(2048);
    per_second.clamp(MIN, MAX).next_power_of_two().min(MAX) as u32
}

/// The reader's hand-over of one drain's samples to the reporter:
/// within `capacity` samples queued and [`MAX_STACK_BYTES_IN_FLIGHT`]
/// bytes of stack copies; what does not fit is dropped and counted.
pub(crate) fn hand_over(
    shared: &Shared,
    capacity: usize,
    to_reporter: &BatchSender<Vec<RawSample>>,
    batch: &mut Vec<RawSample>,
) {
    let queued = &shared.samples_queued;
    let room = (capacity as u64).saturating_sub(queued.load(Ordering::Relaxed));
    if batch.len() as u64 > room {
        let over = batch.len() - room as usize;
        batch.truncate(room as usize);
        shared.samples_dropped.fetch_add(over as u64, Ordering::Relaxed);
    }
    if batch.is_empty() {
        return;
    }
    let in_flight = &shared.stack_bytes_in_flight;
    let mut carried = 0;
    for sample in batch.iter_mut() {
        let copied = sample.stack.as_ref().map_or(0, |s| s.bytes.len() as u64);
        if copied == 0 {
            continue;
        }
        if in_flight.load(Ordering::Relaxed) + copied > MAX_STACK_BYTES_IN_FLIGHT {
            sample.stack = None;
            shared.stack_copies_backlogged.fetch_add(1, Ordering::Relaxed);
        } else {
            in_flight.fetch_add(copied, Ordering::Relaxed);
            carried += copied;
        }
    }
    let count = batch.len() as u64;
    queued.fetch_add(count, Ordering::Relaxed);
    // Its capacity kept for the next drain.
    let full = std::mem::replace(batch, Vec::with_capacity(batch.len()));
    // Full, or the reporter gone: dropped either way.
    if to_reporter.try_send(full).is_err() {
        queued.fetch_sub(count, Ordering::Relaxed);
        in_flight.fetch_sub(carried, Ordering::Relaxed);
        shared.samples_dropped.fetch_add(count, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch_queue::{batch_queue, BatchReceiver};
    use crate::test_sample as sample;

    #[test]
    fn the_reader_hands_over_whole_drains_within_the_queue_bounds() {
        let shared = Shared::default();
        let (tx, rx) = batch_queue(2);
        let recv =
            |rx: &BatchReceiver<Vec<RawSample>>| rx.recv_deadline(Instant::now() + Duration::from_secs(5)).unwrap();
        // 3 samples, room for 5: one hand-over, the stack bytes counted.
        let mut batch = vec![sample(1, 0), sample(2, 100), sample(3, 0)];
        hand_over(&shared, 5, &tx, &mut batch);
        assert!(batch.is_empty(), "taken");
        assert_eq!(rx.len(), 1);
        assert_eq!(shared.samples_queued.load(Ordering::Relaxed), 3);
        assert_eq!(shared.stack_bytes_in_flight.load(Ordering::Relaxed), 100);
        // 4 more: 2 fit the queue, the other 2 are dropped and counted.
        let mut batch = (4..8).map(|tid| sample(tid, 0)).collect();
        hand_over(&shared, 5, &tx, &mut batch);
        assert_eq!(shared.samples_queued.load(Ordering::Relaxed), 5);
        assert_eq!(shared.samples_dropped.load(Ordering::Relaxed), 2);
        let tids = |b: Vec<RawSample>| b.iter().map(|s| s.tid).collect::<Vec<_>>();
        assert_eq!(tids(recv(&rx)), vec![1, 2, 3]);
        assert_eq!(tids(recv(&rx)), vec![4, 5]);
        // A full channel drops the whole batch and gives back what it
        // counted (the reporter took nothing meanwhile here).
        shared.samples_queued.store(0, Ordering::Relaxed);
        let (full_tx, _full_rx) = batch_queue(0);
        let mut batch = vec![sample(9, 64)];
        hand_over(&shared, 5, &full_tx, &mut batch);
        assert_eq!(shared.samples_queued.load(Ordering::Relaxed), 0);
        assert_eq!(shared.samples_dropped.load(Ordering::Relaxed), 3);
        assert_eq!(shared.stack_bytes_in_flight.load(Ordering::Relaxed), 100, "the dropped copy's 64 given back");
        // Stack copies beyond the bytes in flight go on without theirs.
        shared.stack_bytes_in_flight.store(MAX_STACK_BYTES_IN_FLIGHT - 10, Ordering::Relaxed);
        let mut batch = vec![sample(10, 8), sample(11, 8)];
        hand_over(&shared, 5, &tx, &mut batch);
        let got = recv(&rx);
        assert_eq!(got.iter().map(|s| s.stack.is_some()).collect::<Vec<_>>(), vec![true, false]);
        assert_eq!(shared.stack_copies_backlogged.load(Ordering::Relaxed), 1);
        assert_eq!(shared.stack_bytes_in_flight.load(Ordering::Relaxed), MAX_STACK_BYTES_IN_FLIGHT - 2);
        // The reporter gone: dropped and given back as when full.
        drop(rx);
        let mut batch = vec![sample(12, 2)];
        hand_over(&shared, 5, &tx, &mut batch);
        assert_eq!(shared.samples_dropped.load(Ordering::Relaxed), 4);
        assert_eq!(shared.stack_bytes_in_flight.load(Ordering::Relaxed), MAX_STACK_BYTES_IN_FLIGHT - 2);
    }

    #[test]
    fn interpreted_frames_keep_the_reader_polling_soon_for_two_seconds() {
        let pace = ReaderPace::new(Duration::from_millis(500));
        let t0 = Instant::now();
        let native_only = sample(1, 0);
        let python = RawSample {
            user_frames: vec![UserFrame::interpreted_word(1, 0x7f00_0000_1000 >> 3 | 6 << 44), 0x1000],
            ..sample(2, 0)
        };
        let ms = |waits, at: Duration| pace.interval(waits, t0 + at).as_millis();
        assert_eq!(ms(false, Duration::ZERO), 500, "by rate");
        assert_eq!(ms(true, Duration::ZERO), 100, "the reporter waits");
        pace.saw(std::slice::from_ref(&native_only), t0);
        assert_eq!(ms(false, Duration::ZERO), 500, "native frames: by rate");
        pace.saw(&[native_only.clone(), python], t0);
        assert_eq!(ms(false, Duration::ZERO), 100, "the drain right after an interpreted frame");
        assert_eq!(ms(false, Duration::from_millis(1999)), 100);
        assert_eq!(ms(false, Duration::from_secs(2)), 500, "two seconds on: by rate again");
        pace.saw(&[native_only], t0 + Duration::from_secs(3));
        assert_eq!(ms(false, Duration::from_secs(3)), 500);
        let short = ReaderPace::new(Duration::from_millis(100));
        short.saw(&[RawSample { user_frames: vec![UserFrame::interpreted_word(3, 0x40)], ..sample(3, 0) }], t0);
        assert_eq!(short.interval(false, t0).as_millis(), 100, "never longer than by rate");
    }

    #[test]
    fn ring_buffer_follows_the_sample_rate() {
        assert_eq!(ring_buffer_bytes(20, 2), 256 << 10, "80 KiB a second");
        assert_eq!(ring_buffer_bytes(20, 16), 1 << 20, "640 KiB a second");
        assert_eq!(ring_buffer_bytes(1000, 2), 4 << 20, "3.9 MiB a second");
        assert_eq!(ring_buffer_bytes(1000, 128), 4 << 20, "never above the former fixed size");
        assert_eq!(ring_buffer_bytes(0, 0), 256 << 10);
        assert_eq!(ring_buffer_bytes(u32::MAX, usize::MAX), 4 << 20);
    }

    #[test]
    fn the_reader_drains_about_64_samples_at_a_time_within_bounds() {
        let ms = |hz, cpus, off_cpu| reader_poll_interval(hz, cpus, off_cpu).as_millis();
        assert_eq!(ms(20, 2, false), 500, "40 samples a second: the longest interval");
        assert_eq!(ms(100, 2, false), 320);
        assert_eq!(ms(1000, 2, false), 100, "2,000 a second: the shortest");
        assert_eq!(ms(20, 2, true), 100, "off-CPU stacks come with the switches");
        assert_eq!(ms(0, 0, false), 500);
        assert_eq!(ms(u32::MAX, usize::MAX, false), 100);
    }

    #[test]
    fn sample_queue_holds_four_seconds_within_bounds() {
        assert_eq!(sample_queue_capacity(20, 2, false), SAMPLE_QUEUE_MIN, "160 samples: the floor");
        assert_eq!(sample_queue_capacity(1000, 2, false), 8000);
        assert_eq!(sample_queue_capacity(1000, 8, false), 32_000);
        assert_eq!(sample_queue_capacity(1000, 16, false), SAMPLE_QUEUE_MAX, "64,000: the ceiling");
        assert_eq!(sample_queue_capacity(u32::MAX, usize::MAX, false), SAMPLE_QUEUE_MAX);
        assert_eq!(sample_queue_capacity(20, 2, true), SAMPLE_QUEUE_MAX, "off-CPU stacks follow the switches");
    }
}
