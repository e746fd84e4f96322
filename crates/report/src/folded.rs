//! Folded stacks: one line per distinct stack, `process;root;...;leaf N`,
//! the input format of flame graph tools (flamegraph.pl, inferno,
//! speedscope). Kernel frames carry the `_[k]` suffix those tools colour
//! as kernel code.

use profiler_trace::{Frame, FrameKind, Trace};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Distinct stacks with their sample counts, bounded in size.
#[derive(Debug)]
pub struct FoldedStacks {
    counts: HashMap<String, u64>,
    max_distinct: usize,
    total: u64,
    dropped: u64,
}

/// Default bound on distinct stacks kept (about 100 MB of lines at worst).
pub const DEFAULT_MAX_DISTINCT_STACKS: usize = 500_000;

impl Default for FoldedStacks {
    fn default() -> Self {
        FoldedStacks::with_limit(DEFAULT_MAX_DISTINCT_STACKS)
    }
}

impl FoldedStacks {
    /// Keeps at most `max_distinct` distinct stacks; samples of further new
    /// stacks are counted in [`FoldedStacks::dropped`].
    pub fn with_limit(max_distinct: usize) -> FoldedStacks {
        FoldedStacks { counts: HashMap::new(), max_distinct, total: 0, dropped: 0 }
    }

    /// Counts one sample.
    pub fn add(&mut self, trace: &Trace) {
        self.add_weighted(trace, 1);
    }

    /// Adds `weight` to the trace's stack (off-CPU stacks weigh their
    /// time off the CPU in microseconds). [`FoldedStacks::total`] and
    /// [`FoldedStacks::dropped`] sum weights.
    pub fn add_weighted(&mut self, trace: &Trace, weight: u64) {
        let line = folded_line(trace);
        if let Some(count) = self.counts.get_mut(&line) {
            *count = count.saturating_add(weight);
        } else if self.counts.len() < self.max_distinct {
            // Kept for the whole run: without the slack of its building.
            let mut line = line;
            line.shrink_to_fit();
            self.counts.insert(line, weight);
        } else {
            self.dropped = self.dropped.saturating_add(weight);
            return;
        }
        self.total = self.total.saturating_add(weight);
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
        self.counts.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The `n` most frequent stacks, most frequent first (ties by text).
    pub fn top(&self, n: usize) -> Vec<(&str, u64)> {
        let mut all: Vec<(&str, u64)> = self.counts.iter().map(|(l, c)| (l.as_str(), *c)).collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        all.truncate(n);
        all
    }

    /// Every stack as `line count`, sorted by line so output is
    /// reproducible.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<(&String, &u64)> = self.counts.iter().collect();
        lines.sort();
        lines.into_iter().map(|(line, count)| format!("{line} {count}")).collect()
    }

    /// Writes [`FoldedStacks::lines`], one per line.
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for line in self.lines() {
            writeln!(out, "{line}")?;
        }
        out.flush()
    }
}

/// The folded form of one trace: process name, then frames root first.
pub fn folded_line(trace: &Trace) -> String {
    let mut line = String::with_capacity(64 + 32 * trace.frames.len());
    push_sanitized(&mut line, &trace.process.executable_name);
    for frame in trace.frames.iter().rev() {
        if frame.lines.is_empty() {
            line.push(';');
            push_unsymbolized(&mut line, frame);
        } else {
            // Lines are innermost first: the containing function is the
            // caller of its inlined callees.
            for source in frame.lines.iter().rev() {
                line.push(';');
                push_sanitized(&mut line, &source.function);
                if frame.kind == FrameKind::Kernel {
                    line.push_str("_[k]");
                }
            }
        }
    }
    line
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
            lines: vec![SourceLine { function: Arc::from(n), file: None, line: 0 }],
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
    use std::sync::Arc;

    fn named(kind: FrameKind, names: &[&str]) -> Frame {
        Frame {
            kind,
            address: 0,
            mapping: None,
            lines: names.iter().map(|n| SourceLine { function: Arc::from(*n), file: None, line: 0 }).collect(),
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

    #[test]
    fn root_first_kernel_marked_inlines_expanded() {
        let libc = Arc::new(Mapping {
            start: 0x7f00_0000_0000,
            end: 0x7f00_0010_0000,
            file_offset: 0,
            path: Arc::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            file_id: None,
            gnu_build_id: None,
            go_build_id: None,
        });
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
        assert_eq!(f.top(1), vec![("p;b", 3)]);
        let mut out = Vec::new();
        f.write_to(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "p;a 1\np;b 3\n");
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
}
