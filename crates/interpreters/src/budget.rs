//! What one process may cost the agent to read: a budget of reads, bytes
//! and CPU time for naming its frames (or attaching to it), per process.
//!
//! The agent runs as root and reads the memory of every process that
//! looks like a runtime, and any local user can start one whose memory
//! is shaped to make each read lead to another (frame chains that loop,
//! huge line tables, strings without an end, names rewritten all the
//! time). Each runtime's walk is bounded on its own; this bounds the sum.
//! Every process has a token bucket per resource, refilled at a steady
//! rate up to a burst (a process's first seconds, when nothing is cached
//! yet, cost many reads at once). A read that would overdraw the bucket
//! is refused as if the memory were unreadable: the runtime's namer
//! leaves the frame unnamed, and the agent goes on. The first time a
//! process is refused, one notice says so; every refused read is
//! counted. Buckets of processes that exited are forgotten, and their
//! number is bounded.

use crate::memory::{ProcessMemory, RangeRead};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most processes whose buckets are kept at once; beyond it the buckets
/// of those not seen for the longest are dropped (a process whose bucket
/// was dropped starts again full: an attacker gains one burst by forcing
/// it, which a bound of this size makes take thousands of processes).
pub const MAX_BUDGETED_PROCESSES: usize = 8192;

/// Buckets dropped at once when [`MAX_BUDGETED_PROCESSES`] is reached:
/// finding the oldest scans every bucket, so each scan makes room for
/// this many new processes (a scan per process would make each new one
/// cost thousands of comparisons once the table is full).
const EVICTION_BATCH: usize = MAX_BUDGETED_PROCESSES / 8;

/// Reads between two looks at the thread's CPU clock while work on a
/// process's behalf is metered ([`ReadBudget::start_metering`]): what one
/// sample (or attach) may spend beyond the budget is what this many reads
/// and the work between them cost, not the whole sample's walk. The clock
/// is a system call, a few times cheaper than one read.
const METER_READS: u32 = 16;

/// How much reading one process may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetLimits {
    /// Reads a second, in the long run.
    pub reads_per_second: u64,
    /// Bytes read a second, in the long run.
    pub bytes_per_second: u64,
    /// CPU time a second spent on its behalf, in the long run.
    pub cpu_per_second: Duration,
    /// How many seconds' worth each bucket holds when full: what a
    /// process may take at once after a calm period.
    pub burst_seconds: u64,
}

impl BudgetLimits {
    /// Naming frames (the reporter). A genuine process is named in a few
    /// thousand reads a second at 99 Hz; the reads allowance covers the
    /// busiest genuine case, a Node process sampled off the CPU (hundreds
    /// of stacks a second of a dozen JavaScript frames). One starting
    /// (TypeScript's compiler: thousands of functions named in its first
    /// seconds) fits in the burst. CPU time binds first: a process held
    /// to it costs at most 2% of a core in the long run (the agent's
    /// target with one such process is under 5%, its own cost at 99 Hz
    /// and the burst included).
    pub const NAMING: BudgetLimits = BudgetLimits {
        reads_per_second: 65_536,
        bytes_per_second: 8 << 20,
        cpu_per_second: cpu_per_second(20),
        burst_seconds: 10,
    };

    /// Attaching to a process (the process manager reads a JVM's
    /// vmStructs, a runtime's symbols in memory): less often, larger.
    pub const ATTACH: BudgetLimits = BudgetLimits {
        reads_per_second: 4096,
        bytes_per_second: 4 << 20,
        cpu_per_second: cpu_per_second(20),
        burst_seconds: 30,
    };
}

/// `ms` of CPU time a second, for the optimised build; a debug build
/// (the tests') does the same work about ten times slower, and gets ten
/// times the time for it.
const fn cpu_per_second(ms: u64) -> Duration {
    Duration::from_millis(if cfg!(debug_assertions) { ms * 10 } else { ms })
}

/// Which resource a process ran out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overdrawn {
    /// Too many reads.
    Reads,
    /// Too many bytes.
    Bytes,
    /// Too much CPU time.
    Cpu,
}

impl Overdrawn {
    fn as_str(self) -> &'static str {
        match self {
            Overdrawn::Reads => "reads",
            Overdrawn::Bytes => "bytes read",
            Overdrawn::Cpu => "CPU time",
        }
    }
}

/// Counters of a [`ReadBudget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Reads refused because a process was over budget.
    pub reads_refused: u64,
    /// Times a process went over budget (told once a process, counted
    /// every time).
    pub overdrafts: u64,
    /// Processes told over budget (one notice each).
    pub processes_over: u64,
    /// Buckets dropped to stay within [`MAX_BUDGETED_PROCESSES`].
    pub evicted: u64,
}

/// What [`ReadBudget::take`] did.
enum Take {
    Granted,
    /// Refused, within an overdraft counted before.
    Refused,
    /// Refused, starting an overdraft: the resource short, and whether
    /// the process is over budget for the first time (to be told).
    Overdrawn(Overdrawn, bool),
}

/// One resource's tokens, in units of the resource (nanoseconds for
/// CPU time).
#[derive(Clone, Copy, Debug)]
struct Tokens {
    left: u64,
    /// What was spent beyond `left` (CPU time is charged after the
    /// work): paid back by the refill before anything is added to `left`,
    /// so a costly moment is waited for in full. At most a bucket's
    /// capacity.
    debt: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    reads: Tokens,
    bytes: Tokens,
    cpu_ns: Tokens,
    refilled: Instant,
    /// Whether it is over budget now (an overdraft is counted when it
    /// starts, not at each refused read).
    over: bool,
    told: bool,
}

/// The budgets of every process, for one thread's reads (the reporter's
/// naming, or the process manager's attaching): not shared, no lock.
pub struct ReadBudget {
    limits: BudgetLimits,
    /// Of what is read, for whom: "naming" or "attaching".
    purpose: &'static str,
    buckets: RefCell<HashMap<u32, Bucket>>,
    stats: Cell<BudgetStats>,
    notices: RefCell<Vec<String>>,
    /// The work being metered now: for whom, the thread's CPU time at
    /// the last charge, reads since.
    meter: Cell<Option<Meter>>,
}

#[derive(Clone, Copy, Debug)]
struct Meter {
    pid: u32,
    since: Duration,
    reads: u32,
}

impl ReadBudget {
    /// Budgets of `limits` for `purpose` ("naming frames").
    pub fn new(limits: BudgetLimits, purpose: &'static str) -> ReadBudget {
        ReadBudget {
            limits,
            purpose,
            buckets: RefCell::new(HashMap::new()),
            stats: Cell::new(BudgetStats::default()),
            notices: RefCell::new(Vec::new()),
            meter: Cell::new(None),
        }
    }

    /// Process `pid`'s memory, read within its budget (`memory` reads
    /// it).
    pub fn memory<'a, M: ProcessMemory>(&'a self, pid: u32, memory: &'a M) -> BudgetedMemory<'a, M> {
        BudgetedMemory { budget: self, pid, memory }
    }

    /// Whether `pid` may be read now (its buckets are not empty): a
    /// caller skips its work for a process over budget.
    pub fn allows(&self, pid: u32) -> bool {
        self.with_bucket(pid, |_, b| !b.over)
    }

    /// Charges `cpu` spent on `pid`'s behalf (measured by the caller
    /// around its work).
    pub fn charge_cpu(&self, pid: u32, cpu: Duration) {
        let ns = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
        self.take(pid, 0, 0, ns);
    }

    /// Starts metering this thread's CPU time on `pid`'s behalf (ending
    /// the metering of another process): charged every [`METER_READS`]
    /// of its reads, and at [`ReadBudget::stop_metering`]. A walk that
    /// costs much between reads goes over budget within it, and its
    /// next reads are refused.
    pub fn start_metering(&self, pid: u32) {
        self.stop_metering();
        self.meter.set(Some(Meter { pid, since: thread_cpu(), reads: 0 }));
    }

    /// Charges what the metered work cost since the last charge, and
    /// ends the metering.
    pub fn stop_metering(&self) {
        if let Some(m) = self.meter.take() {
            self.charge_cpu(m.pid, thread_cpu().saturating_sub(m.since));
        }
    }

    /// Counts a read of `pid`'s while metered; every [`METER_READS`],
    /// charges the CPU time since the last charge.
    fn metered_read(&self, pid: u32) {
        let Some(mut m) = self.meter.get() else { return };
        if m.pid != pid {
            return;
        }
        m.reads += 1;
        if m.reads < METER_READS {
            self.meter.set(Some(m));
            return;
        }
        let now = thread_cpu();
        self.meter.set(Some(Meter { pid, since: now, reads: 0 }));
        self.charge_cpu(pid, now.saturating_sub(m.since));
    }

    /// Forgets the buckets of the processes `alive` says are gone.
    pub fn forget_processes(&self, alive: &dyn Fn(u32) -> bool) {
        self.buckets.borrow_mut().retain(|&pid, _| alive(pid));
    }

    /// Forgets the bucket of `pid` (it exited).
    pub fn forget(&self, pid: u32) {
        self.buckets.borrow_mut().remove(&pid);
    }

    /// Processes with a bucket now.
    pub fn processes(&self) -> usize {
        self.buckets.borrow().len()
    }

    /// Its counters.
    pub fn stats(&self) -> BudgetStats {
        self.stats.get()
    }

    /// The notices since the last call (one per process over budget).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.notices.borrow_mut())
    }

    /// Takes `reads`, `bytes` and `cpu_ns` from `pid`'s buckets; false
    /// (and nothing taken) when one of them has not enough.
    fn take(&self, pid: u32, reads: u64, bytes: u64, cpu_ns: u64) -> bool {
        let outcome = self.with_bucket(pid, |limits, b| {
            // CPU time is charged after the work: it may overdraw, and
            // the process waits until its bucket has paid the debt and
            // refilled.
            if cpu_ns > b.cpu_ns.left {
                let capacity = nanos(limits.cpu_per_second).saturating_mul(limits.burst_seconds);
                b.cpu_ns.debt = b.cpu_ns.debt.saturating_add(cpu_ns - b.cpu_ns.left).min(capacity);
                b.cpu_ns.left = 0;
            } else {
                b.cpu_ns.left -= cpu_ns;
            }
            if b.over {
                return Take::Refused;
            }
            let short = if b.reads.left < reads {
                Overdrawn::Reads
            } else if b.bytes.left < bytes {
                Overdrawn::Bytes
            } else if cpu_ns > 0 && b.cpu_ns.left == 0 && limits.cpu_per_second > Duration::ZERO {
                Overdrawn::Cpu
            } else {
                b.reads.left -= reads;
                b.bytes.left -= bytes;
                return Take::Granted;
            };
            b.over = true;
            Take::Overdrawn(short, !std::mem::replace(&mut b.told, true))
        });
        match outcome {
            Take::Granted => true,
            Take::Refused => {
                self.refused(pid, None, reads > 0);
                false
            }
            Take::Overdrawn(why, tell) => {
                self.refused(pid, Some((why, tell)), reads > 0);
                false
            }
        }
    }

    /// Counts a refusal; `overdraft` is set when it starts one (the
    /// process was under budget until now): what ran short, and whether
    /// the process is to be told (its first overdraft). The bucket was
    /// marked over by the caller.
    fn refused(&self, pid: u32, overdraft: Option<(Overdrawn, bool)>, refused_a_read: bool) {
        let mut stats = self.stats.get();
        if refused_a_read {
            stats.reads_refused += 1;
        }
        if let Some((why, tell)) = overdraft {
            stats.overdrafts += 1;
            if tell {
                stats.processes_over += 1;
                let mut notices = self.notices.borrow_mut();
                if notices.len() < 64 {
                    notices.push(format!(
                        "process {pid} went over its budget of {} for {} (its runtime's memory costs more \
                         than a genuine process's): its interpreted frames are left unnamed while it stays over",
                        why.as_str(),
                        self.purpose
                    ));
                }
            }
        }
        self.stats.set(stats);
    }

    /// Runs `f` on `pid`'s bucket, refilled for the time since its last
    /// refill (made full if new).
    fn with_bucket<T>(&self, pid: u32, f: impl FnOnce(&BudgetLimits, &mut Bucket) -> T) -> T {
        let limits = &self.limits;
        let now = Instant::now();
        let mut buckets = self.buckets.borrow_mut();
        if buckets.len() >= MAX_BUDGETED_PROCESSES && !buckets.contains_key(&pid) {
            self.evict_oldest(&mut buckets);
        }
        let b = buckets.entry(pid).or_insert_with(|| Bucket {
            reads: Tokens { left: limits.reads_per_second * limits.burst_seconds, debt: 0 },
            bytes: Tokens { left: limits.bytes_per_second * limits.burst_seconds, debt: 0 },
            cpu_ns: Tokens { left: nanos(limits.cpu_per_second) * limits.burst_seconds, debt: 0 },
            refilled: now,
            over: false,
            told: false,
        });
        let elapsed = now.saturating_duration_since(b.refilled);
        if elapsed >= Duration::from_millis(10) {
            refill(&mut b.reads, limits.reads_per_second, limits.burst_seconds, elapsed);
            refill(&mut b.bytes, limits.bytes_per_second, limits.burst_seconds, elapsed);
            refill(&mut b.cpu_ns, nanos(limits.cpu_per_second), limits.burst_seconds, elapsed);
            b.refilled = now;
            // Back under budget once a tenth of each bucket is there
            // again: no flapping at the edge.
            let tenth = |rate: u64| rate * limits.burst_seconds / 10;
            if b.over
                && b.reads.left >= tenth(limits.reads_per_second)
                && b.bytes.left >= tenth(limits.bytes_per_second)
                && b.cpu_ns.left >= tenth(nanos(limits.cpu_per_second))
            {
                b.over = false;
            }
        }
        f(limits, b)
    }

    /// Drops the [`EVICTION_BATCH`] buckets refilled longest ago (about:
    /// a bucket is refilled when its process is read, at most every
    /// 10 ms): one scan of the table, and a partial sort of its times.
    fn evict_oldest(&self, buckets: &mut HashMap<u32, Bucket>) {
        let mut by_age: Vec<(Instant, u32)> = buckets.iter().map(|(&pid, b)| (b.refilled, pid)).collect();
        let batch = EVICTION_BATCH.min(by_age.len());
        if batch == 0 {
            return;
        }
        by_age.select_nth_unstable(batch - 1);
        for &(_, pid) in &by_age[..batch] {
            buckets.remove(&pid);
        }
        let mut stats = self.stats.get();
        stats.evicted += batch as u64;
        self.stats.set(stats);
    }
}

/// The calling thread's CPU time.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn refill(tokens: &mut Tokens, per_second: u64, burst_seconds: u64, elapsed: Duration) {
    let capacity = per_second.saturating_mul(burst_seconds);
    let added = u64::try_from(u128::from(per_second) * elapsed.as_nanos() / 1_000_000_000).unwrap_or(u64::MAX);
    let paid = added.min(tokens.debt);
    tokens.debt -= paid;
    tokens.left = tokens.left.saturating_add(added - paid).min(capacity);
}

/// One process's memory, read within its [`ReadBudget`].
pub struct BudgetedMemory<'a, M> {
    budget: &'a ReadBudget,
    pid: u32,
    memory: &'a M,
}

impl<M: ProcessMemory> ProcessMemory for BudgetedMemory<'_, M> {
    fn read(&self, address: u64, buf: &mut [u8]) -> bool {
        self.budget.metered_read(self.pid);
        self.budget.take(self.pid, 1, buf.len() as u64, 0) && self.memory.read(address, buf)
    }

    /// One system call (metered as one read), taking a read and its bytes
    /// from the budget for each range: all of them or none.
    fn read_many(&self, reads: &mut [RangeRead<'_>]) {
        self.budget.metered_read(self.pid);
        let bytes = reads.iter().map(|r| r.buf.len() as u64).sum();
        if self.budget.take(self.pid, reads.len() as u64, bytes, 0) {
            self.memory.read_many(reads);
        } else {
            reads.iter_mut().for_each(|r| r.done = false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;

    const SMALL: BudgetLimits = BudgetLimits {
        reads_per_second: 100,
        bytes_per_second: 1000,
        cpu_per_second: Duration::from_millis(10),
        burst_seconds: 2,
    };

    fn memory() -> FakeMemory {
        let mut m = FakeMemory::default();
        m.add(0x1000, vec![7; 4096]);
        m
    }

    #[test]
    fn reads_beyond_the_burst_are_refused_counted_and_told_once() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let m = memory();
        let mem = budget.memory(42, &m);
        let mut buf = [0u8; 1];
        let granted = (0..1000).filter(|_| mem.read(0x1000, &mut buf)).count();
        // The burst (200 reads), and what the bucket refilled meanwhile
        // (100 a second: at most a few in this loop).
        assert!((200..=210).contains(&granted), "{granted}");
        let stats = budget.stats();
        assert_eq!(stats.reads_refused, 1000 - granted as u64);
        assert_eq!((stats.overdrafts, stats.processes_over), (1, 1));
        let notices = budget.take_notices();
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(notices[0].contains("process 42") && notices[0].contains("reads"), "{notices:?}");
        assert!(!budget.allows(42));
        assert!(budget.allows(43), "another process keeps its own budget");
        assert!(budget.memory(43, &m).read(0x1000, &mut buf));
        assert!(budget.take_notices().is_empty(), "told once");
    }

    #[test]
    fn bytes_are_budgeted_as_well_as_reads() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let m = memory();
        let mem = budget.memory(1, &m);
        let mut buf = [0u8; 1500];
        assert!(mem.read(0x1000, &mut buf), "1500 of the 2000 bytes of the burst");
        assert!(!mem.read(0x1000, &mut buf), "over");
        assert!(budget.take_notices()[0].contains("bytes read"));
        assert!(!mem.read(0x1000, &mut buf[..400]), "over budget: nothing is read, however small");
        std::thread::sleep(Duration::from_millis(20));
        assert!(mem.read(0x1000, &mut buf[..400]), "more than a tenth of each bucket left: read again");
    }

    /// A batch costs a read and its bytes per range, and is one read of
    /// the memory's: refused whole when the budget cannot take it all.
    #[test]
    fn a_batch_is_one_call_budgeted_as_its_ranges() {
        struct Calls<'a>(&'a FakeMemory, Cell<u32>);
        impl ProcessMemory for Calls<'_> {
            fn read(&self, _: u64, _: &mut [u8]) -> bool {
                unreachable!("read in one batch")
            }
            fn read_many(&self, reads: &mut [RangeRead<'_>]) {
                self.1.set(self.1.get() + 1);
                reads.iter_mut().for_each(|r| r.done = self.0.read(r.address, r.buf));
            }
        }
        let budget = ReadBudget::new(SMALL, "naming frames");
        let m = memory();
        let calls = Calls(&m, Cell::new(0));
        let mem = budget.memory(7, &calls);
        let mut bufs = [[0u8; 8]; 150];
        let mut reads: Vec<RangeRead<'_>> =
            bufs.iter_mut().enumerate().map(|(i, b)| RangeRead::new(0x1000 + 8 * i as u64, b)).collect();
        reads[3].address = 0x10;
        mem.read_many(&mut reads[..120]);
        assert_eq!(calls.1.get(), 1);
        let done = reads.iter().filter(|r| r.done).count();
        assert_eq!(done, 119, "all but the unreadable one");
        // 200 reads in the burst: 80 left, and the 30 left of the
        // 150 are granted, then 60 more are not.
        mem.read_many(&mut reads[120..]);
        assert!(reads[120..].iter().all(|r| r.done));
        assert_eq!(budget.stats().reads_refused, 0);
        let mut more: Vec<[u8; 8]> = vec![[0; 8]; 60];
        let mut more: Vec<RangeRead<'_>> = more.iter_mut().map(|b| RangeRead::new(0x1000, b)).collect();
        more[0].done = true;
        mem.read_many(&mut more);
        assert!(more.iter().all(|r| !r.done));
        assert_eq!(calls.1.get(), 2, "refused before the call");
        assert!(budget.take_notices()[0].contains("reads"));
    }

    #[test]
    fn an_unreadable_address_costs_a_read_and_stays_unreadable() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let m = memory();
        let mut buf = [0u8; 8];
        assert!(!budget.memory(1, &m).read(0x10, &mut buf));
        assert_eq!(budget.stats().reads_refused, 0, "refused by the memory, not the budget");
    }

    /// Moves `pid`'s last refill `by` into the past: the next look at
    /// its bucket refills for that long.
    fn age(budget: &ReadBudget, pid: u32, by: Duration) {
        let mut buckets = budget.buckets.borrow_mut();
        let b = buckets.get_mut(&pid).unwrap();
        b.refilled = b.refilled.checked_sub(by).unwrap();
    }

    #[test]
    fn cpu_time_overdraws_then_the_bucket_refills() {
        let limits = BudgetLimits { burst_seconds: 1, ..SMALL };
        let budget = ReadBudget::new(limits, "naming frames");
        budget.charge_cpu(5, Duration::from_millis(15));
        assert!(!budget.allows(5), "10 ms of burst, 15 charged");
        assert!(budget.take_notices()[0].contains("CPU time"));
        // 10 ms a second: the 5 ms of debt paid after 500 ms, then a
        // tenth of the bucket (1 ms) after 100 ms more.
        age(&budget, 5, Duration::from_millis(550));
        assert!(!budget.allows(5), "the debt is paid first");
        age(&budget, 5, Duration::from_millis(60));
        assert!(budget.allows(5));
        let m = memory();
        assert!(budget.memory(5, &m).read(0x1000, &mut [0u8; 4]));
        assert_eq!(budget.stats().overdrafts, 1);
    }

    #[test]
    fn a_debt_is_at_most_a_bucket() {
        let limits = BudgetLimits { burst_seconds: 1, ..SMALL };
        let budget = ReadBudget::new(limits, "naming frames");
        // A minute charged at once owes one bucket (10 ms): back after
        // a second and a tenth, not a minute.
        budget.charge_cpu(5, Duration::from_secs(60));
        age(&budget, 5, Duration::from_millis(1050));
        assert!(!budget.allows(5));
        age(&budget, 5, Duration::from_millis(60));
        assert!(budget.allows(5));
    }

    /// Spins until this thread has used `cpu` more CPU time.
    fn spin(cpu: Duration) {
        let until = thread_cpu() + cpu;
        while thread_cpu() < until {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn metered_work_is_charged_within_a_sample() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let m = memory();
        let mem = budget.memory(3, &m);
        let mut buf = [0u8; 1];
        budget.start_metering(3);
        // Costly work between reads (20 ms of burst, 30 spent): charged
        // at the next look at the clock, METER_READS reads on at most.
        spin(Duration::from_millis(30));
        let granted = (0..100).take_while(|_| mem.read(0x1000, &mut buf)).count();
        assert_eq!(granted, METER_READS as usize - 1, "refused from the read that charged");
        assert!(budget.take_notices()[0].contains("CPU time"));
        budget.stop_metering();
        // Another process's reads are not metered; nothing is once stopped.
        budget.start_metering(3);
        let other = budget.memory(4, &m);
        spin(Duration::from_millis(30));
        assert!((0..100).all(|_| other.read(0x1000, &mut buf)));
        budget.stop_metering();
        assert!(budget.allows(4));
        spin(Duration::from_millis(30));
        assert!((0..100).all(|_| other.read(0x1000, &mut buf)));
    }

    #[test]
    fn a_process_over_budget_is_read_again_once_its_buckets_refill() {
        let limits = BudgetLimits { reads_per_second: 1000, burst_seconds: 1, ..SMALL };
        let budget = ReadBudget::new(limits, "attaching");
        let m = memory();
        let mem = budget.memory(9, &m);
        let mut buf = [0u8; 1];
        while mem.read(0x1000, &mut buf) {}
        assert!(!budget.allows(9));
        std::thread::sleep(Duration::from_millis(200));
        assert!(budget.allows(9), "a tenth of the bucket is back");
        assert!(mem.read(0x1000, &mut buf));
        while mem.read(0x1000, &mut buf) {}
        assert_eq!(budget.stats().overdrafts, 2, "each overdraft counted");
        assert_eq!(budget.stats().processes_over, 1, "told once");
    }

    #[test]
    fn buckets_are_bounded_and_forgotten_with_their_processes() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let max = MAX_BUDGETED_PROCESSES as u32;
        for pid in 0..max {
            assert!(budget.allows(pid));
        }
        assert_eq!(budget.processes(), MAX_BUDGETED_PROCESSES);
        assert_eq!(budget.stats().evicted, 0);
        // Full: the next process makes room for a batch at once.
        for pid in max..max + 10 {
            assert!(budget.allows(pid));
        }
        assert_eq!(budget.processes(), MAX_BUDGETED_PROCESSES - EVICTION_BATCH + 10);
        assert_eq!(budget.stats().evicted, EVICTION_BATCH as u64);
        // Never above the bound, however many processes come.
        for pid in max + 10..3 * max {
            assert!(budget.allows(pid));
            assert!(budget.processes() <= MAX_BUDGETED_PROCESSES);
        }
        budget.forget_processes(&|pid| pid % 2 == 0);
        assert!(budget.processes() <= MAX_BUDGETED_PROCESSES / 2 + 1);
    }

    #[test]
    fn eviction_drops_the_buckets_refilled_longest_ago() {
        let budget = ReadBudget::new(SMALL, "naming frames");
        let max = MAX_BUDGETED_PROCESSES as u32;
        let m = memory();
        let mut buf = [0u8; 1];
        // The first half a while ago, the second half now; then a read
        // of the first process refills its bucket, and it is recent too.
        for pid in 0..max / 2 {
            assert!(budget.allows(pid));
        }
        std::thread::sleep(Duration::from_millis(20));
        for pid in max / 2..max {
            assert!(budget.allows(pid));
        }
        assert!(budget.memory(0, &m).read(0x1000, &mut buf));
        assert!(budget.allows(max), "a new process");
        let kept = |pid: u32| budget.buckets.borrow().contains_key(&pid);
        let dropped = (0..max).filter(|&pid| !kept(pid)).collect::<Vec<_>>();
        assert_eq!(dropped.len(), EVICTION_BATCH);
        assert!(dropped.iter().all(|&pid| pid > 0 && pid < max / 2), "only old buckets: {dropped:?}");
        assert!(kept(0) && kept(max), "refilled lately, new");
    }
}
