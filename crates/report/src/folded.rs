//! Folded stacks: one line per distinct stack, `process;root;...;leaf N`,
//! the input format of flame graph tools (flamegraph.pl, inferno,
//! speedscope). Kernel frames carry the `_[k]` suffix those tools colour
//! as kernel code.

use hashbrown::HashTable;
use profiler_trace::{Frame, FrameKind, Trace};
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::mem::size_of;

/// Distinct stacks with their sample counts, bounded in size.
///
/// Each distinct frame text (a `;`-separated segment of the folded line,
/// the process name included) is kept once; a stack is kept as the ids of
/// its frames. Lines are rendered only for output. At 1000 Hz under
/// process churn a run sees ~50,000 distinct deep stacks, which as lines
/// took tens of megabytes.
#[derive(Debug)]
pub struct FoldedStacks {
    /// Frame texts by id.
    frames: Vec<Box<str>>,
    /// Ids into `frames`, found by the hash of the text and compared with
    /// it: no second copy of each text is kept as a key.
    frame_index: HashTable<u32>,
    /// Distinct stacks (frame ids, root first) and their counts.
    stacks: Vec<(Box<[u32]>, u64)>,
    /// Indices into `stacks`, found by the hash of the frame ids.
    stack_index: HashTable<u32>,
    hasher: RandomState,
    /// The sample being added: its frame ids and one segment's text,
    /// reused so that a known stack costs no allocation.
    ids: Vec<u32>,
    segment: String,
    max_distinct: usize,
    /// Bytes of frame texts kept, and their bound.
    frame_bytes: usize,
    max_frame_bytes: usize,
    total: u64,
    dropped: u64,
}

/// Default bound on distinct stacks kept (a stack takes 4 bytes a frame
/// and ~30 besides; frame texts are shared).
pub const DEFAULT_MAX_DISTINCT_STACKS: usize = 500_000;

/// Default bound on the bytes of distinct frame texts kept: names come
/// from the profiled processes, and a process that rewrites its
/// functions' names all the time (each up to kilobytes) would make every
/// sample's frames new.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 32 << 20;

impl Default for FoldedStacks {
    fn default() -> Self {
        FoldedStacks::with_limit(DEFAULT_MAX_DISTINCT_STACKS)
    }
}

impl FoldedStacks {
    /// Keeps at most `max_distinct` distinct stacks; samples of further new
    /// stacks are counted in [`FoldedStacks::dropped`].
    pub fn with_limit(max_distinct: usize) -> FoldedStacks {
        FoldedStacks::with_limits(max_distinct, DEFAULT_MAX_FRAME_BYTES)
    }

    /// Keeps at most `max_distinct` distinct stacks, and at most
    /// `max_frame_bytes` bytes of distinct frame texts; samples of stacks
    /// beyond either are counted in [`FoldedStacks::dropped`].
    pub fn with_limits(max_distinct: usize, max_frame_bytes: usize) -> FoldedStacks {
        FoldedStacks {
            frames: Vec::new(),
            frame_index: HashTable::new(),
            stacks: Vec::new(),
            stack_index: HashTable::new(),
            hasher: RandomState::new(),
            ids: Vec::new(),
            segment: String::new(),
            max_distinct,
            frame_bytes: 0,
            max_frame_bytes,
            total: 0,
            dropped: 0,
        }
    }

    /// Counts one sample.
    pub fn add(&mut self, trace: &Trace) {
        self.add_weighted(trace, 1);
    }

    /// Adds `weight` to the trace's stack (off-CPU stacks weigh their
    /// time off the CPU in microseconds). [`FoldedStacks::total`] and
    /// [`FoldedStacks::dropped`] sum weights.
    pub fn add_weighted(&mut self, trace: &Trace, weight: u64) {
        let FoldedStacks {
            frames,
            frame_index,
            stacks,
            stack_index,
            hasher,
            ids,
            segment,
            max_distinct,
            frame_bytes,
            ..
        } = self;
        let max_frame_bytes = self.max_frame_bytes;
        // A frame not seen yet makes a new stack: at the bound it is
        // dropped before its frames are kept.
        let full = stacks.len() >= *max_distinct;
        ids.clear();
        let complete = each_segment(trace, segment, |text| {
            let hash = hasher.hash_one(text);
            let id = match frame_index.find(hash, |&i| *frames[i as usize] == *text) {
                Some(&id) => id,
                None => {
                    let id = match u32::try_from(frames.len()) {
                        Ok(id) if !full && *frame_bytes + text.len() <= max_frame_bytes => id,
                        _ => return false,
                    };
                    *frame_bytes += text.len();
                    frames.push(text.into());
                    frame_index.insert_unique(hash, id, |&i| hasher.hash_one(&*frames[i as usize]));
                    id
                }
            };
            ids.push(id);
            true
        });
        if complete {
            let hash = hasher.hash_one(&ids[..]);
            if let Some(&i) = stack_index.find(hash, |&i| *stacks[i as usize].0 == ids[..]) {
                let count = &mut stacks[i as usize].1;
                *count = count.saturating_add(weight);
                self.total = self.total.saturating_add(weight);
                return;
            }
            if let (false, Ok(i)) = (full, u32::try_from(stacks.len())) {
                stacks.push((ids[..].into(), weight));
                stack_index.insert_unique(hash, i, |&j| hasher.hash_one(&*stacks[j as usize].0));
                self.total = self.total.saturating_add(weight);
                return;
            }
        }
        self.dropped = self.dropped.saturating_add(weight);
    }

    /// Samples counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Samples not counted because the bound on distinct stacks was hit.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Distinct stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The `n` most frequent stacks, most frequent first (ties by text).
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        if n == 0 {
            return Vec::new();
        }
        // Only stacks at least as frequent as the n-th are rendered.
        let mut counts: Vec<u64> = self.stacks.iter().map(|(_, c)| *c).collect();
        let least = if n < counts.len() { *counts.select_nth_unstable_by_key(n - 1, |&c| Reverse(c)).1 } else { 0 };
        let mut top: Vec<(String, u64)> =
            self.stacks.iter().filter(|(_, c)| *c >= least).map(|(ids, c)| (self.render(ids), *c)).collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(n);
        top
    }

    /// Every stack as `line count`, sorted by line so output is
    /// reproducible.
    pub fn lines(&self) -> Vec<String> {
        self.sorted_stacks().into_iter().map(|k| self.line(k)).collect()
    }

    /// Writes [`FoldedStacks::lines`], one per line, rendering one at a
    /// time: the whole text can be far larger than what is kept (each
    /// stack repeats its frames' texts, and a process chooses their
    /// length).
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for k in self.sorted_stacks() {
            writeln!(out, "{}", self.line(k))?;
        }
        out.flush()
    }

    /// The indices of the kept stacks in the order of their lines.
    /// By the line alone: with the count appended the order could
    /// differ (a tab in a name sorts before the space).
    fn sorted_stacks(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.stacks.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            self.rendered_bytes(&self.stacks[a].0).cmp(self.rendered_bytes(&self.stacks[b].0))
        });
        order
    }

    /// The bytes of [`FoldedStacks::render`]'s line, without building it.
    fn rendered_bytes<'a>(&'a self, ids: &'a [u32]) -> impl Iterator<Item = u8> + 'a {
        ids.iter()
            .enumerate()
            .flat_map(move |(k, &i)| (k > 0).then_some(b';').into_iter().chain(self.frames[i as usize].bytes()))
    }

    /// The `k`th kept stack as `line count`.
    fn line(&self, k: usize) -> String {
        let (ids, count) = &self.stacks[k];
        let mut line = self.render(ids);
        let _ = write!(line, " {count}");
        line
    }

    /// Approximate heap bytes held: the tables' capacities and the kept
    /// frame texts and stacks.
    pub fn heap_bytes(&self) -> usize {
        self.frames.capacity() * size_of::<Box<str>>()
            + self.frames.iter().map(|f| f.len()).sum::<usize>()
            + table_bytes(self.frame_index.capacity())
            + self.stacks.capacity() * size_of::<(Box<[u32]>, u64)>()
            + self.stacks.iter().map(|(ids, _)| ids.len() * size_of::<u32>()).sum::<usize>()
            + table_bytes(self.stack_index.capacity())
            + self.ids.capacity() * size_of::<u32>()
            + self.segment.capacity()
    }

    /// The folded line of a kept stack.
    fn render(&self, ids: &[u32]) -> String {
        let len = ids.iter().map(|&i| self.frames[i as usize].len() + 1).sum::<usize>();
        let mut line = String::with_capacity(len + 21);
        for (k, &i) in ids.iter().enumerate() {
            if k > 0 {
                line.push(';');
            }
            line.push_str(&self.frames[i as usize]);
        }
        line
    }
}

/// Approximate bytes of a hash table of `u32` holding `capacity` items:
/// buckets (a power of two, at most 7/8 full) of 4 bytes and a control
/// byte each, and a group of trailing control bytes.
fn table_bytes(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets =
        if capacity < 8 { (capacity + 1).next_power_of_two() } else { (capacity * 8 / 7).next_power_of_two() };
    buckets * (size_of::<u32>() + 1) + 16
}

/// The folded form of one trace: process name, then frames root first.
pub fn folded_line(trace: &Trace) -> String {
    let mut line = String::with_capacity(64 + 32 * trace.frames.len());
    let mut segment = String::new();
    let mut first = true;
    each_segment(trace, &mut segment, |text| {
        if !first {
            line.push(';');
        }
        first = false;
        line.push_str(text);
        true
    });
    line
}

/// Calls `each` with the text of every segment of the trace's folded
/// line, the process name first, built in `segment`; stops when `each`
/// returns false, and then returns false.
fn each_segment(trace: &Trace, segment: &mut String, mut each: impl FnMut(&str) -> bool) -> bool {
    segment.clear();
    push_sanitized(segment, &trace.process.executable_name);
    if !each(segment) {
        return false;
    }
    for frame in trace.frames.iter().rev() {
        if frame.lines.is_empty() {
            segment.clear();
            push_unsymbolized(segment, frame);
            if !each(segment) {
                return false;
            }
        } else {
            // Lines are innermost first: the containing function is the
            // caller of its inlined callees.
            for source in frame.lines.iter().rev() {
                segment.clear();
                push_sanitized(segment, &source.function);
                if frame.kind == FrameKind::Kernel {
                    segment.push_str("_[k]");
                }
                if !each(segment) {
                    return false;
                }
            }
        }
    }
    true
}

fn push_unsymbolized(line: &mut String, frame: &Frame) {
    match &frame.mapping {
        Some(mapping) => {
            push_sanitized(line, mapping.file_name());
            let _ = write!(line, "+{:#x}", frame.address);
        }
        None => {
            let _ = write!(line, "{:#x}", frame.address);
        }
    }
    if frame.kind == FrameKind::Kernel {
        line.push_str("_[k]");
    }
}

/// `;` separates frames and a newline ends the record: neither may appear
/// inside a name.
fn push_sanitized(line: &mut String, name: &str) {
    line.extend(name.chars().map(|c| match c {
        ';' => ':',
        '\n' | '\r' => ' ',
        c => c,
    }));
}

/// Trace builders shared by this crate's tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use profiler_trace::{Frame, FrameKind, Pid, ProcessInfo, SourceLine, Tid, Trace};
    use std::sync::Arc;

    /// A trace of process `name` with `user` frames (root first) and then
    /// `kernel` frames (outermost first).
    pub(crate) fn trace(name: &str, user: &[&str], kernel: &[&str]) -> Trace {
        let frame = |kind, n: &str| Frame {
            kind,
            address: 0,
            mapping: None,
            lines: vec![SourceLine { function: Arc::from(n), file: None, line: 0, approximate: false }],
        };
        let mut frames: Vec<Frame> = user.iter().map(|n| frame(FrameKind::Native, n)).collect();
        frames.extend(kernel.iter().map(|n| frame(FrameKind::Kernel, n)));
        frames.reverse();
        Trace {
            process: Arc::new(ProcessInfo {
                pid: Pid(1),
                executable_path: Arc::from(""),
                executable_name: Arc::from(name),
                container_id: None,
                service_name: "x".into(),
                env_vars: vec![],
            }),
            tid: Tid(1),
            thread_name: Arc::from(name),
            cpu: 0,
            timestamp_unix_ns: 0,
            frames,
            off_cpu_ns: None,
            labels: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_trace::{Mapping, Pid, ProcessInfo, SourceLine, Tid};
    use std::collections::HashMap;
    use std::sync::Arc;

    fn named(kind: FrameKind, names: &[&str]) -> Frame {
        Frame {
            kind,
            address: 0,
            mapping: None,
            lines: names
                .iter()
                .map(|n| SourceLine { function: Arc::from(*n), file: None, line: 0, approximate: false })
                .collect(),
        }
    }

    fn trace(process: &str, frames: Vec<Frame>) -> Trace {
        Trace {
            process: Arc::new(ProcessInfo {
                pid: Pid(7),
                executable_path: Arc::from(""),
                executable_name: Arc::from(process),
                container_id: None,
                service_name: "x".into(),
                env_vars: vec![],
            }),
            tid: Tid(7),
            thread_name: Arc::from(process),
            cpu: 0,
            timestamp_unix_ns: 0,
            frames,
            off_cpu_ns: None,
            labels: vec![],
        }
    }

    fn libc() -> Arc<Mapping> {
        Arc::new(Mapping {
            start: 0x7f00_0000_0000,
            end: 0x7f00_0010_0000,
            file_offset: 0,
            path: Arc::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            file_id: None,
            gnu_build_id: None,
            go_build_id: None,
        })
    }

    #[test]
    fn root_first_kernel_marked_inlines_expanded() {
        let libc = libc();
        let t = trace(
            "dd",
            vec![
                named(FrameKind::Kernel, &["read_zero"]),
                named(FrameKind::Kernel, &["vfs_read"]),
                Frame { kind: FrameKind::Native, address: 0x1c2e0, mapping: Some(libc), lines: vec![] },
                named(FrameKind::Native, &["inlined_helper", "main"]),
                Frame { kind: FrameKind::Native, address: 0xdead, mapping: None, lines: vec![] },
            ],
        );
        assert_eq!(folded_line(&t), "dd;0xdead;main;inlined_helper;libc.so.6+0x1c2e0;vfs_read_[k];read_zero_[k]");
    }

    #[test]
    fn names_cannot_break_the_format() {
        let t = trace("a;b\nc", vec![named(FrameKind::Native, &["operator;()"])]);
        assert_eq!(folded_line(&t), "a:b c;operator:()");
    }

    #[test]
    fn counts_sorted_output_top_and_bound() {
        let mut f = FoldedStacks::with_limit(2);
        let a = trace("p", vec![named(FrameKind::Native, &["a"])]);
        let b = trace("p", vec![named(FrameKind::Native, &["b"])]);
        let c = trace("p", vec![named(FrameKind::Native, &["c"])]);
        for t in [&b, &a, &b, &c, &b] {
            f.add(t);
        }
        assert_eq!(f.total(), 4);
        assert_eq!(f.dropped(), 1);
        assert_eq!(f.top(1), vec![("p;b".to_string(), 3)]);
        let mut out = Vec::new();
        f.write_to(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "p;a 1\np;b 3\n");
    }

    /// Frames named from a process's memory can be long and always new:
    /// their texts are bounded in bytes, what goes beyond is dropped and
    /// counted, and known stacks are still counted.
    #[test]
    fn frame_texts_are_bounded_in_bytes() {
        let mut f = FoldedStacks::with_limits(1000, 3000);
        let long = |i: usize| trace("p", vec![named(FrameKind::Native, &[&format!("{i:01000}")])]);
        for i in 0..10 {
            f.add(&long(i));
        }
        // "p" (1 byte) and two 1000-byte names fit in 3000 bytes.
        assert_eq!((f.len(), f.total(), f.dropped()), (2, 2, 8));
        f.add(&long(1));
        assert_eq!((f.total(), f.dropped()), (3, 8), "a known stack is still counted");
    }

    /// Off-CPU stacks weigh their microseconds; the bound drops weights.
    #[test]
    fn weighted_stacks_sum_weights() {
        let mut f = FoldedStacks::with_limit(1);
        let a = trace("p", vec![named(FrameKind::Kernel, &["schedule"])]);
        let b = trace("p", vec![named(FrameKind::Native, &["b"])]);
        f.add_weighted(&a, 100_000);
        f.add_weighted(&a, 250);
        f.add_weighted(&b, 7);
        assert_eq!((f.total(), f.dropped()), (100_250, 7));
        assert_eq!(f.lines(), vec!["p;schedule_[k] 100250".to_string()]);
    }

    /// A small deterministic generator, so the tests need no dependency.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    /// Varied traces: kernel frames, inlined lines, unsymbolized frames
    /// with and without a mapping, names needing sanitizing (two of
    /// which fold to one text), several processes, stacks that are
    /// prefixes of others and the empty stack.
    fn varied_traces() -> Vec<Trace> {
        let libc = libc();
        let names =
            ["main", "run", "operator;()", "operator:()", "line\nbreak", "tab\tname", "ünïcode", "a b", "", "x_[k]"];
        let processes = ["dd", "a;b\nc", "a:b c", "py\tthon", "java", ""];
        let mut rng = Lcg(42);
        let mut traces = Vec::new();
        for _ in 0..600 {
            let depth = rng.below(7);
            let mut frames = Vec::new();
            for _ in 0..depth {
                let frame = match rng.below(5) {
                    0 => named(FrameKind::Kernel, &[names[rng.below(names.len())]]),
                    1 => {
                        let inlined: Vec<&str> = (0..1 + rng.below(3)).map(|_| names[rng.below(names.len())]).collect();
                        named(FrameKind::Native, &inlined)
                    }
                    2 => Frame {
                        kind: FrameKind::Native,
                        address: 0x1c2e0 + rng.below(3) as u64,
                        mapping: Some(libc.clone()),
                        lines: vec![],
                    },
                    3 => Frame {
                        kind: if rng.below(2) == 0 { FrameKind::Kernel } else { FrameKind::Native },
                        address: 0xdead + rng.below(2) as u64,
                        mapping: None,
                        lines: vec![],
                    },
                    _ => named(FrameKind::Native, &[names[rng.below(names.len())]]),
                };
                frames.push(frame);
            }
            traces.push(trace(processes[rng.below(processes.len())], frames));
        }
        traces
    }

    /// Lines and top of `f` against a map of [`folded_line`]s fed the same
    /// samples, keeping at most `limit` distinct lines.
    fn assert_same_as_reference(limit: usize) {
        let mut f = FoldedStacks::with_limit(limit);
        let mut reference: HashMap<String, u64> = HashMap::new();
        let (mut total, mut dropped) = (0, 0);
        let mut rng = Lcg(7);
        let traces = varied_traces();
        for _ in 0..3000 {
            let t = &traces[rng.below(traces.len())];
            let weight = 1 + rng.below(3) as u64;
            f.add_weighted(t, weight);
            let line = folded_line(t);
            if reference.len() < limit || reference.contains_key(&line) {
                *reference.entry(line).or_default() += weight;
                total += weight;
            } else {
                dropped += weight;
            }
        }
        assert_eq!(dropped > 0, limit < 100, "the bound is hit only when set low");
        assert_eq!((f.total(), f.dropped(), f.len()), (total, dropped, reference.len()));

        let mut sorted: Vec<(&String, &u64)> = reference.iter().collect();
        sorted.sort();
        let lines: Vec<String> = sorted.iter().map(|(l, c)| format!("{l} {c}")).collect();
        assert_eq!(f.lines(), lines);
        let mut out = Vec::new();
        f.write_to(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), lines.iter().map(|l| format!("{l}\n")).collect::<String>());

        let mut by_count: Vec<(String, u64)> = reference.iter().map(|(l, c)| (l.clone(), *c)).collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for n in [0, 1, 2, 5, 17, by_count.len(), by_count.len() + 3] {
            assert_eq!(f.top(n), by_count[..n.min(by_count.len())].to_vec(), "top({n})");
        }
    }

    #[test]
    fn same_output_as_a_map_of_lines() {
        assert_same_as_reference(usize::MAX);
        assert_same_as_reference(DEFAULT_MAX_DISTINCT_STACKS);
    }

    #[test]
    fn same_output_as_a_map_of_lines_at_the_bound() {
        assert_same_as_reference(40);
    }

    /// A tab sorts before the space that precedes the count: lines are
    /// sorted by their text alone.
    #[test]
    fn sorted_by_line_not_by_line_and_count() {
        let mut f = FoldedStacks::default();
        f.add(&trace("p", vec![named(FrameKind::Native, &["a\tb"])]));
        f.add(&trace("p", vec![named(FrameKind::Native, &["a"])]));
        assert_eq!(f.lines(), vec!["p;a 1".to_string(), "p;a\tb 1".to_string()]);
    }

    /// 1,000 distinct stacks of 150 frames named from a pool of 300 take
    /// at most a third of the bytes of their folded lines.
    #[test]
    fn deep_stacks_take_a_fraction_of_their_lines() {
        let pool: Vec<String> = (0..300).map(|i| format!("app::module_{:02}::function_{i:03}", i % 37)).collect();
        let mut rng = Lcg(1);
        let mut f = FoldedStacks::default();
        let mut line_bytes = 0;
        for s in 0..1000 {
            let names: Vec<&str> = (0..150).map(|_| pool[rng.below(pool.len())].as_str()).collect();
            let t = trace(&format!("proc{}", s % 10), names.iter().map(|n| named(FrameKind::Native, &[n])).collect());
            line_bytes += folded_line(&t).len();
            f.add(&t);
        }
        assert_eq!(f.len(), 1000);
        let held = f.heap_bytes();
        eprintln!("1000 stacks x 150 frames: folded lines {line_bytes} bytes, held {held} bytes");
        assert!(held * 3 <= line_bytes, "{held} bytes held for {line_bytes} bytes of lines");
    }

    /// Adding a sample of a known stack allocates nothing.
    #[test]
    fn known_stacks_cost_no_allocation() {
        let traces = varied_traces();
        let mut f = FoldedStacks::default();
        for t in &traces {
            f.add(t);
        }
        let before = counting::allocations();
        for t in &traces {
            f.add_weighted(t, 2);
        }
        assert_eq!(counting::allocations(), before);
        assert_eq!(f.total(), 3 * traces.len() as u64);
        // The count sees a new stack's allocations.
        f.add(&trace("new", vec![named(FrameKind::Native, &["new"])]));
        assert!(counting::allocations() > before);
    }
}

/// Counts this thread's allocations, for the test that a known stack
/// costs none.
#[cfg(test)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: forwards to the system allocator; the counter is a
    // const-initialized thread local, which allocates nothing.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's contract is System's.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as above.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: as above.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Allocations (and reallocations) made by this thread so far.
    pub(super) fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }
}
