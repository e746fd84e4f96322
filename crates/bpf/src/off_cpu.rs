//! Off-CPU records (`ebpf/off_cpu.bpf.h`): a sampled switch-out sends the
//! thread's stack as a sample flagged off-CPU, its switch-in a short
//! `struct off_cpu_end` through the same ring buffer; [`OffCpuJoin`]
//! pairs them into one [`RawSample`] whose `off_cpu_ns` is the time the
//! thread spent off the CPU.

use crate::contract::{c, read};
use crate::sample::RawSample;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a `struct off_cpu_end`: the only record of the samples ring
/// buffer shorter than a sample header.
pub(crate) const OFF_CPU_END_SIZE: usize = size_of::<c::off_cpu_end>();
const _: () = assert!(OFF_CPU_END_SIZE < c::SAMPLE_EVENT_HEADER_SIZE as usize);

/// Switch-outs waiting for their switch-in: as many as the programs'
/// `off_cpu_starts` map holds (an entry it evicted never ends).
pub const MAX_PENDING_OFF_CPU: usize = 4096;

/// The end of an off-CPU period, as decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffCpuEnd {
    pub tid: u32,
    /// The `ktime_ns` of the switch-out's sample.
    pub switch_out_ns: u64,
    pub off_cpu_ns: u64,
}

impl OffCpuEnd {
    pub(crate) fn parse(data: &[u8]) -> Option<OffCpuEnd> {
        if data.len() != OFF_CPU_END_SIZE {
            return None;
        }
        let end: c::off_cpu_end = read(data)?;
        Some(OffCpuEnd { tid: end.tid, switch_out_ns: end.switch_out_ns, off_cpu_ns: end.off_cpu_ns })
    }
}

/// What the join did, for the agent's counters.
#[derive(Debug, Default)]
pub struct OffCpuJoinCounts {
    /// Switch-outs joined with their switch-in and delivered.
    pub joined: AtomicU64,
    /// Switch-ins whose switch-out's stack was not waiting (lost in the
    /// ring buffer, or dropped here).
    pub ends_unmatched: AtomicU64,
    /// Stacks dropped before their switch-in came: the oldest, when
    /// [`MAX_PENDING_OFF_CPU`] waited, or one whose switch-in was lost
    /// (the thread was switched out again), or still waiting at stop.
    pub stacks_dropped: AtomicU64,
}

impl OffCpuJoinCounts {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Pairs off-CPU stacks with their ends, by thread: a thread has at most
/// one switch-out waiting, and its end follows it in the ring buffer.
pub(crate) struct OffCpuJoin<'a> {
    /// tid -> its switch-out's sample.
    pending: HashMap<u32, RawSample>,
    /// (tid, switch-out time) in arrival order, to drop the oldest; may
    /// name samples already joined (skipped when met).
    order: VecDeque<(u32, u64)>,
    capacity: usize,
    counts: &'a OffCpuJoinCounts,
}

impl<'a> OffCpuJoin<'a> {
    pub(crate) fn new(capacity: usize, counts: &'a OffCpuJoinCounts) -> OffCpuJoin<'a> {
        OffCpuJoin { pending: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1), counts }
    }

    /// Holds a switch-out's sample until its end.
    pub(crate) fn hold(&mut self, sample: RawSample) {
        let (tid, at) = (sample.tid, sample.ktime_ns);
        if self.pending.insert(tid, sample).is_some() {
            // The previous switch-in of the thread never arrived.
            OffCpuJoinCounts::add(&self.counts.stacks_dropped);
        }
        self.order.push_back((tid, at));
        while self.pending.len() > self.capacity && self.drop_oldest() {}
        if self.order.len() > 2 * self.capacity {
            let pending = &self.pending;
            self.order.retain(|(tid, at)| pending.get(tid).is_some_and(|s| s.ktime_ns == *at));
        }
    }

    /// Drops the oldest waiting sample; false if none was found.
    fn drop_oldest(&mut self) -> bool {
        while let Some((tid, at)) = self.order.pop_front() {
            if self.pending.get(&tid).is_some_and(|s| s.ktime_ns == at) {
                self.pending.remove(&tid);
                OffCpuJoinCounts::add(&self.counts.stacks_dropped);
                return true;
            }
        }
        false
    }

    /// The switch-out's sample `end` closes, with its time off the CPU.
    pub(crate) fn end(&mut self, end: OffCpuEnd) -> Option<RawSample> {
        match self.pending.get(&end.tid) {
            Some(s) if s.ktime_ns == end.switch_out_ns => {}
            _ => {
                OffCpuJoinCounts::add(&self.counts.ends_unmatched);
                return None;
            }
        }
        let mut sample = self.pending.remove(&end.tid)?;
        sample.off_cpu_ns = Some(end.off_cpu_ns);
        OffCpuJoinCounts::add(&self.counts.joined);
        Some(sample)
    }

    /// Samples still waiting (for tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.pending.len()
    }
}

impl Drop for OffCpuJoin<'_> {
    fn drop(&mut self) {
        self.counts.stacks_dropped.fetch_add(self.pending.len() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::bytes_of;
    use crate::types::UnwindStop;

    fn off_cpu_sample(tid: u32, at: u64) -> RawSample {
        RawSample {
            pid: 7,
            tid,
            ktime_ns: at,
            cpu: 0,
            comm: "t".into(),
            process_comm: "p".into(),
            kernel_frames: vec![0xffff_1000],
            user_frames: vec![0x1000],
            unwind_stop: UnwindStop::Root,
            stack: None,
            off_cpu_ns: Some(0),
            go_labels: Vec::new(),
        }
    }

    fn end(tid: u32, at: u64, ns: u64) -> OffCpuEnd {
        OffCpuEnd { tid, switch_out_ns: at, off_cpu_ns: ns }
    }

    fn count(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    #[test]
    fn parses_an_end_of_exactly_its_size() {
        let raw = c::off_cpu_end { pid: 7, tid: 8, switch_out_ns: 100, off_cpu_ns: 5_000 };
        let bytes = bytes_of(&raw);
        assert_eq!(bytes.len(), 24);
        assert_eq!(OffCpuEnd::parse(bytes), Some(end(8, 100, 5_000)));
        assert_eq!(OffCpuEnd::parse(&bytes[..23]), None);
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(OffCpuEnd::parse(&longer), None);
    }

    #[test]
    fn joins_a_switch_out_with_its_switch_in() {
        let counts = OffCpuJoinCounts::default();
        let mut join = OffCpuJoin::new(4, &counts);
        join.hold(off_cpu_sample(1, 100));
        join.hold(off_cpu_sample(2, 150));
        assert_eq!(join.end(end(3, 100, 9)), None, "no thread 3 waiting");
        assert_eq!(join.end(end(1, 99, 9)), None, "another switch-out of thread 1");
        let s = join.end(end(1, 100, 42_000)).expect("joined");
        assert_eq!((s.tid, s.ktime_ns, s.off_cpu_ns), (1, 100, Some(42_000)));
        assert_eq!(join.end(end(1, 100, 42_000)), None, "joined once");
        assert_eq!(join.waiting(), 1);
        assert_eq!((count(&counts.joined), count(&counts.ends_unmatched)), (1, 3));
        drop(join);
        assert_eq!(count(&counts.stacks_dropped), 1, "thread 2 still waited at the end");
    }

    #[test]
    fn a_lost_switch_in_costs_one_stack() {
        let counts = OffCpuJoinCounts::default();
        let mut join = OffCpuJoin::new(4, &counts);
        join.hold(off_cpu_sample(1, 100));
        join.hold(off_cpu_sample(1, 300));
        assert_eq!(count(&counts.stacks_dropped), 1);
        assert_eq!(join.end(end(1, 300, 7)).map(|s| s.off_cpu_ns), Some(Some(7)));
    }

    #[test]
    fn the_oldest_waiting_stack_goes_first_and_memory_stays_bounded() {
        let counts = OffCpuJoinCounts::default();
        let mut join = OffCpuJoin::new(3, &counts);
        for tid in 0..10 {
            join.hold(off_cpu_sample(tid, u64::from(tid) * 10));
        }
        assert_eq!(join.waiting(), 3);
        assert_eq!(count(&counts.stacks_dropped), 7);
        assert!(join.end(end(6, 60, 1)).is_none(), "dropped");
        assert!(join.end(end(7, 70, 1)).is_some());
        // Joined entries leave stale order entries: they are compacted.
        for round in 0..100u64 {
            join.hold(off_cpu_sample(100, 1_000 + round));
            assert!(join.end(end(100, 1_000 + round, 1)).is_some());
        }
        assert!(join.order.len() <= 6, "order compacted: {}", join.order.len());
        assert_eq!(join.waiting(), 2);
    }
}
