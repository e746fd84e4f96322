//! Samples waiting for their process to be loaded: a sample of a process
//! (or a pc) the process manager had not loaded yet carries a copy of its
//! user stack; it is held here, bounded, until the tables it needs are in
//! the BPF maps and the process's snapshot is published, then the rest
//! of its stack is unwound in user space ([`profiler_bpf::MapTables`])
//! and the sample goes on to the trace builder with its original
//! timestamp. A sample whose process is not loaded within
//! [`PENDING_TIMEOUT`], or has exited without being loaded, goes on as
//! it is (its leaf only): under churn most copies are of processes that
//! end before their load, and holding each for the whole timeout kept
//! megabytes of copies that could never be unwound.

use profiler_bpf::{HotspotStop, LateUnwind, LookupCounts, MapTables, RawSample, StackCopy, UnwindStop, UserFrame};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a sample waits for its process at most: a busy process
/// manager (large files to analyse, many new processes) has been seen to
/// take 6-9 s.
pub(crate) const PENDING_TIMEOUT: Duration = Duration::from_secs(8);
/// Bounds on the samples held: count and stack bytes (the oldest goes on
/// as it is when a new one does not fit). 8 MiB holds the BPF budget of
/// two CPUs at 20 Hz for the whole timeout.
const MAX_PENDING_SAMPLES: usize = 1024;
/// The stack bytes held at most.
pub const MAX_PENDING_BYTES: usize = 8 << 20;
/// How often held samples are checked.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
// MAX_USER_FRAMES of the BPF unwinder: the late frames continue the
// sample's, within the same bound.
use profiler_bpf::MAX_USER_FRAMES;

/// What late unwinding needs of the tables (the BPF maps, or a test's).
pub(crate) trait LateTables {
    /// Whether `address` of `pid` can be unwound now.
    fn is_loaded(&mut self, pid: u32, address: u64) -> bool;
    /// Unwinds from the copy.
    fn unwind(&mut self, pid: u32, copy: &StackCopy, max_frames: usize) -> LateUnwind;
    /// Whether process `pid` still exists: once it is gone, whatever is
    /// not loaded for it never will be (the manager loads live processes
    /// only, and unloads a process at its exit).
    fn process_exists(&mut self, pid: u32) -> bool;
    /// Table lookups made in the kernel's maps, and those answered from
    /// caches instead.
    fn lookups(&self) -> LookupCounts {
        LookupCounts::default()
    }
}

/// Whether `pid` exists (a zombie still does), by signal 0: one syscall.
fn pid_exists(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else { return false };
    if raw <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(raw, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

impl LateTables for MapTables {
    fn is_loaded(&mut self, pid: u32, address: u64) -> bool {
        MapTables::is_loaded(self, pid, address)
    }

    fn unwind(&mut self, pid: u32, copy: &StackCopy, max_frames: usize) -> LateUnwind {
        MapTables::unwind(self, pid, copy, max_frames)
    }

    fn process_exists(&mut self, pid: u32) -> bool {
        pid_exists(pid)
    }

    fn lookups(&self) -> LookupCounts {
        self.lookup_counts()
    }
}

/// No tables: nothing is ever loaded (for tests of the reporter).
#[cfg(test)]
pub(crate) struct NoTables;

#[cfg(test)]
impl LateTables for NoTables {
    fn is_loaded(&mut self, _pid: u32, _address: u64) -> bool {
        false
    }

    fn unwind(&mut self, _pid: u32, copy: &StackCopy, _max_frames: usize) -> LateUnwind {
        LateUnwind {
            frames: vec![copy.pc],
            stop: UnwindStop::UnknownPid,
            v8: Default::default(),
            hotspot: Default::default(),
        }
    }

    fn process_exists(&mut self, _pid: u32) -> bool {
        true
    }
}

/// Counters of late unwinding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LateUnwindCounts {
    /// Samples unwound in user space, by how their stack ended.
    pub stops: BTreeMap<UnwindStop, u64>,
    /// Samples that went on without late unwinding because the pending
    /// bounds were reached (oldest first).
    pub dropped_queue_full: u64,
    /// Samples that went on without late unwinding because their process
    /// was not loaded in time, or exited before it was.
    pub timed_out: u64,
    /// Lookups in the unwinder's BPF maps, and answers from caches.
    pub lookups: LookupCounts,
    /// Samples whose late walk went through V8's frames, the JavaScript
    /// frames it recorded there, and the samples whose stack ended in
    /// them (`stops` says why).
    pub v8_samples: u64,
    pub v8_frames: u64,
    pub v8_stops: u64,
    /// The same for HotSpot's frames (Java frames), with why the stacks
    /// that ended in them did.
    pub hotspot_samples: u64,
    pub hotspot_frames: u64,
    pub hotspot_stops: BTreeMap<HotspotStop, u64>,
}

struct Pending {
    sample: RawSample,
    arrived: Instant,
}

/// The pending samples.
pub(crate) struct LateUnwinder<T> {
    tables: T,
    queue: VecDeque<Pending>,
    bytes: usize,
    counts: LateUnwindCounts,
    next_poll: Instant,
}

/// The address the BPF unwinder looked up at the copy's pc.
fn lookup_address(copy: &StackCopy) -> u64 {
    if copy.exact {
        copy.pc
    } else {
        copy.pc.wrapping_sub(1)
    }
}

impl<T: LateTables> LateUnwinder<T> {
    pub(crate) fn new(tables: T) -> LateUnwinder<T> {
        LateUnwinder {
            tables,
            queue: VecDeque::new(),
            bytes: 0,
            counts: LateUnwindCounts::default(),
            next_poll: Instant::now(),
        }
    }

    pub(crate) fn counts(&self) -> LateUnwindCounts {
        LateUnwindCounts { lookups: self.tables.lookups(), ..self.counts.clone() }
    }

    /// Samples held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.len()
    }

    /// When [`LateUnwinder::poll`] has work next, if ever.
    pub(crate) fn next_poll(&self) -> Option<Instant> {
        (!self.queue.is_empty()).then_some(self.next_poll)
    }

    /// Holds `sample` (which has a stack copy) until its process is
    /// loaded; samples pushed out by the bounds go to `ready` as they are.
    pub(crate) fn hold(&mut self, sample: RawSample, now: Instant, ready: &mut Vec<RawSample>) {
        let size = sample.stack.as_ref().map_or(0, |s| s.bytes.len());
        while !self.queue.is_empty()
            && (self.queue.len() >= MAX_PENDING_SAMPLES || self.bytes + size > MAX_PENDING_BYTES)
        {
            let oldest = self.pop_front().expect("not empty");
            self.counts.dropped_queue_full += 1;
            ready.push(without_stack(oldest.sample));
        }
        if self.queue.is_empty() {
            self.next_poll = now;
        }
        self.bytes += size;
        self.queue.push_back(Pending { sample, arrived: now });
    }

    fn pop_front(&mut self) -> Option<Pending> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.sample.stack.as_ref().map_or(0, |s| s.bytes.len());
        Some(p)
    }

    /// Unwinds the held samples whose process is loaded, and lets those
    /// that waited too long go as they are, into `ready` (in arrival
    /// order of each kind). `ready_pid` says whether user space knows the
    /// process's mappings too (the trace builder names frames with them).
    pub(crate) fn poll(&mut self, now: Instant, ready_pid: impl Fn(u32, u64) -> bool, ready: &mut Vec<RawSample>) {
        if self.queue.is_empty() || now < self.next_poll {
            return;
        }
        self.next_poll = now + POLL_INTERVAL;
        self.release(now, false, ready_pid, ready);
    }

    /// Lets every held sample go (the agent stops): unwound when its
    /// process is loaded, else as it is.
    pub(crate) fn flush(&mut self, ready_pid: impl Fn(u32, u64) -> bool, ready: &mut Vec<RawSample>) {
        self.release(Instant::now(), true, ready_pid, ready);
    }

    fn release(
        &mut self,
        now: Instant,
        expire_all: bool,
        ready_pid: impl Fn(u32, u64) -> bool,
        ready: &mut Vec<RawSample>,
    ) {
        // Whether each (pid, address) is loaded, and each pid still
        // exists, asked once per poll.
        let mut loaded: HashMap<(u32, u64), bool> = HashMap::new();
        let mut gone: HashMap<u32, bool> = HashMap::new();
        let mut keep = VecDeque::with_capacity(self.queue.len());
        while let Some(p) = self.pop_front() {
            let Some(copy) = &p.sample.stack else {
                ready.push(p.sample);
                continue;
            };
            let pid = p.sample.pid;
            let address = lookup_address(copy);
            let is_loaded = *loaded
                .entry((pid, address))
                .or_insert_with(|| self.tables.is_loaded(pid, address) && ready_pid(pid, address));
            let mut expired = expire_all || now.duration_since(p.arrived) >= PENDING_TIMEOUT;
            if !expired && !is_loaded {
                expired = *gone.entry(pid).or_insert_with(|| !self.tables.process_exists(pid));
            }
            if is_loaded {
                let prior = p.sample.user_frames.len().saturating_sub(1);
                let late = self.tables.unwind(pid, copy, MAX_USER_FRAMES.saturating_sub(prior));
                // A later frame may be in a mapping loaded a moment
                // later (the dynamic loader at work): wait for it.
                let waiting = matches!(late.stop, UnwindStop::UnknownPid | UnwindStop::UnknownPc)
                    && !expired
                    && !*gone.entry(pid).or_insert_with(|| !self.tables.process_exists(pid));
                if !waiting {
                    *self.counts.stops.entry(late.stop).or_default() += 1;
                    if late.v8.walks > 0 {
                        self.counts.v8_samples += 1;
                        self.counts.v8_frames += u64::from(late.v8.frames);
                        self.counts.v8_stops += u64::from(late.v8.stopped);
                    }
                    if late.hotspot.walks > 0 {
                        self.counts.hotspot_samples += 1;
                        self.counts.hotspot_frames += u64::from(late.hotspot.frames);
                        if let Some(stop) = late.hotspot.stop {
                            *self.counts.hotspot_stops.entry(stop).or_default() += 1;
                        }
                    }
                    ready.push(apply(p.sample, late));
                    continue;
                }
            } else if expired {
                self.counts.timed_out += 1;
                ready.push(without_stack(p.sample));
                continue;
            }
            keep.push_back(p);
        }
        self.bytes = keep.iter().map(|p| p.sample.stack.as_ref().map_or(0, |s| s.bytes.len())).sum();
        self.queue = keep;
    }
}

fn without_stack(mut sample: RawSample) -> RawSample {
    sample.stack = None;
    sample
}

/// The sample with the late frames in place of its last one (the copy's
/// pc, which the late unwinder records again).
fn apply(mut sample: RawSample, late: LateUnwind) -> RawSample {
    if let Some(copy) = sample.stack.take() {
        let word = UserFrame::native_word(copy.pc, copy.exact);
        if sample.user_frames.last() == Some(&word) {
            sample.user_frames.pop();
        }
    }
    sample.user_frames.extend(late.frames);
    sample.unwind_stop = late.stop;
    sample
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::FRAME_EXACT_PC;
    use std::collections::HashSet;

    const PC: u64 = 0x40_1000;

    #[derive(Default)]
    struct FakeTables {
        loaded: HashSet<u32>,
        /// What unwinding gives (frames after the copy's pc, stop).
        tail: Vec<u64>,
        stop: Option<UnwindStop>,
        /// Processes that have exited.
        exited: HashSet<u32>,
    }

    impl LateTables for FakeTables {
        fn is_loaded(&mut self, pid: u32, _address: u64) -> bool {
            self.loaded.contains(&pid)
        }

        fn unwind(&mut self, _pid: u32, copy: &StackCopy, max_frames: usize) -> LateUnwind {
            let mut frames = vec![copy.pc | FRAME_EXACT_PC];
            frames.extend(&self.tail);
            frames.truncate(max_frames);
            LateUnwind {
                frames,
                stop: self.stop.unwrap_or(UnwindStop::Root),
                v8: Default::default(),
                hotspot: Default::default(),
            }
        }

        fn process_exists(&mut self, pid: u32) -> bool {
            !self.exited.contains(&pid)
        }
    }

    fn sample(pid: u32, ktime_ns: u64, size: usize) -> RawSample {
        RawSample {
            off_cpu_ns: None,
            go_labels: Vec::new(),
            pid,
            tid: pid,
            ktime_ns,
            cpu: 0,
            comm: "new".into(),
            process_comm: "new".into(),
            kernel_frames: vec![],
            user_frames: vec![PC | FRAME_EXACT_PC],
            unwind_stop: UnwindStop::UnknownPid,
            stack: Some(StackCopy {
                pc: PC,
                sp: 0x7ff0_0000,
                fp: 0,
                exact: true,
                stack_switches: 0,
                bytes: vec![0; size],
            }),
        }
    }

    #[test]
    fn held_until_loaded_then_unwound_with_their_timestamps() {
        let tables = FakeTables { tail: vec![0x40_2000, 0x40_3000], ..Default::default() };
        let mut late = LateUnwinder::new(tables);
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 100, 64), t0, &mut ready);
        late.hold(sample(7, 200, 64), t0, &mut ready);
        late.poll(t0, |_, _| true, &mut ready);
        assert!(ready.is_empty());
        assert_eq!(late.len(), 2);
        // Loaded in the BPF maps but not yet in user space: still held.
        late.tables.loaded.insert(7);
        late.poll(t0 + POLL_INTERVAL, |_, _| false, &mut ready);
        assert!(ready.is_empty());
        late.poll(t0 + 2 * POLL_INTERVAL, |_, _| true, &mut ready);
        assert_eq!(ready.len(), 2);
        assert_eq!(ready.iter().map(|s| s.ktime_ns).collect::<Vec<_>>(), vec![100, 200]);
        assert_eq!(ready[0].user_frames, vec![PC | FRAME_EXACT_PC, 0x40_2000, 0x40_3000]);
        assert_eq!(ready[0].unwind_stop, UnwindStop::Root);
        assert_eq!(ready[0].stack, None);
        assert_eq!(late.counts().stops.get(&UnwindStop::Root), Some(&2));
        assert_eq!(late.next_poll(), None);
    }

    #[test]
    fn not_loaded_in_time_goes_as_it_is() {
        let mut late = LateUnwinder::new(FakeTables::default());
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 100, 64), t0, &mut ready);
        late.poll(t0 + PENDING_TIMEOUT - POLL_INTERVAL, |_, _| true, &mut ready);
        assert!(ready.is_empty());
        late.poll(t0 + PENDING_TIMEOUT, |_, _| true, &mut ready);
        assert_eq!(ready.len(), 1);
        assert_eq!((ready[0].user_frames.len(), ready[0].unwind_stop), (1, UnwindStop::UnknownPid));
        assert_eq!(ready[0].stack, None);
        assert_eq!(late.counts().timed_out, 1);
    }

    #[test]
    fn a_process_gone_before_its_load_goes_at_once() {
        let mut late = LateUnwinder::new(FakeTables::default());
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 100, 64), t0, &mut ready);
        late.hold(sample(8, 200, 64), t0, &mut ready);
        late.tables.exited.insert(7);
        late.poll(t0, |_, _| true, &mut ready);
        assert_eq!(ready.iter().map(|s| s.ktime_ns).collect::<Vec<_>>(), vec![100]);
        assert_eq!((ready[0].user_frames.len(), ready[0].unwind_stop), (1, UnwindStop::UnknownPid));
        assert_eq!(ready[0].stack, None);
        assert_eq!(late.counts().timed_out, 1);
        // The live one still waits for its load.
        assert_eq!(late.len(), 1);
        assert_eq!(late.bytes, 64);
    }

    #[test]
    fn a_gone_process_waiting_for_a_later_mapping_goes_at_once() {
        let tables = FakeTables { loaded: [7].into(), stop: Some(UnwindStop::UnknownPc), ..Default::default() };
        let mut late = LateUnwinder::new(tables);
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 1, 64), t0, &mut ready);
        late.poll(t0, |_, _| true, &mut ready);
        assert!(ready.is_empty());
        late.tables.exited.insert(7);
        late.poll(t0 + POLL_INTERVAL, |_, _| true, &mut ready);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].unwind_stop, UnwindStop::UnknownPc);
        assert_eq!(late.counts().stops.get(&UnwindStop::UnknownPc), Some(&1));
        assert_eq!(late.counts().timed_out, 0);
    }

    #[test]
    fn the_agent_itself_exists() {
        assert!(pid_exists(std::process::id()));
        assert!(!pid_exists(0));
        assert!(!pid_exists(u32::MAX));
    }

    #[test]
    fn a_frame_in_a_mapping_not_loaded_yet_waits_until_the_timeout() {
        let tables = FakeTables { loaded: [7].into(), stop: Some(UnwindStop::UnknownPc), ..Default::default() };
        let mut late = LateUnwinder::new(tables);
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 1, 64), t0, &mut ready);
        late.poll(t0, |_, _| true, &mut ready);
        assert!(ready.is_empty());
        late.poll(t0 + PENDING_TIMEOUT, |_, _| true, &mut ready);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].unwind_stop, UnwindStop::UnknownPc);
        assert_eq!(late.counts().stops.get(&UnwindStop::UnknownPc), Some(&1));
    }

    #[test]
    fn bounded_in_count_and_bytes_oldest_out_first() {
        let mut late = LateUnwinder::new(FakeTables::default());
        let t0 = Instant::now();
        let mut ready = Vec::new();
        for i in 0..MAX_PENDING_SAMPLES as u64 + 3 {
            late.hold(sample(7, i, 16), t0, &mut ready);
        }
        assert_eq!(late.len(), MAX_PENDING_SAMPLES);
        assert_eq!(ready.iter().map(|s| s.ktime_ns).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(ready.iter().all(|s| s.stack.is_none()));
        assert_eq!(late.counts().dropped_queue_full, 3);
        // Bytes: a copy of half the bound pushes out everything before it
        // that does not fit beside it.
        let mut late = LateUnwinder::new(FakeTables::default());
        ready.clear();
        late.hold(sample(7, 0, MAX_PENDING_BYTES / 2), t0, &mut ready);
        late.hold(sample(7, 1, MAX_PENDING_BYTES / 2), t0, &mut ready);
        assert!(ready.is_empty());
        late.hold(sample(7, 2, 1), t0, &mut ready);
        assert_eq!(ready.iter().map(|s| s.ktime_ns).collect::<Vec<_>>(), vec![0]);
        assert_eq!(late.len(), 2);
    }

    #[test]
    fn flush_unwinds_the_loaded_and_lets_the_rest_go() {
        let tables = FakeTables { loaded: [7].into(), tail: vec![0x40_2000], ..Default::default() };
        let mut late = LateUnwinder::new(tables);
        let t0 = Instant::now();
        let mut ready = Vec::new();
        late.hold(sample(7, 1, 8), t0, &mut ready);
        late.hold(sample(8, 2, 8), t0, &mut ready);
        late.flush(|_, _| true, &mut ready);
        assert_eq!(ready.len(), 2);
        assert_eq!(ready[0].user_frames.len(), 2);
        assert_eq!(ready[1].user_frames.len(), 1);
        assert_eq!(late.len(), 0);
    }
}
