//! Turns a raw sample from the ring buffer into a [`Trace`]: process
//! identity, kernel frames named from kallsyms, user frames attached to
//! their mapping.

use profiler_bpf::RawSample;
use profiler_process::ProcessTable;
use profiler_symbolize::KernelSymbolizer;
use profiler_trace::{Frame, FrameKind, Pid, SourceLine, Tid, Trace};
use std::collections::HashMap;
use std::sync::Arc;

/// Bound on cached kernel frames (distinct kernel addresses).
const MAX_CACHED_KERNEL_FRAMES: usize = 65_536;

pub(crate) struct TraceBuilder {
    processes: ProcessTable,
    kernel: Option<KernelSymbolizer>,
    // Kernel address (as looked up) -> its named frame.
    kernel_frames: HashMap<u64, Frame>,
    // Thread names are few; share one allocation per distinct name.
    names: HashMap<String, Arc<str>>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, to date samples.
    realtime_offset_ns: i128,
}

impl TraceBuilder {
    pub(crate) fn new(processes: ProcessTable, kernel: Option<KernelSymbolizer>) -> TraceBuilder {
        TraceBuilder {
            processes,
            kernel,
            kernel_frames: HashMap::new(),
            names: HashMap::new(),
            realtime_offset_ns: realtime_offset_ns(),
        }
    }

    pub(crate) fn processes(&self) -> &ProcessTable {
        &self.processes
    }

    pub(crate) fn processes_mut(&mut self) -> &mut ProcessTable {
        &mut self.processes
    }

    pub(crate) fn build(&mut self, sample: &RawSample) -> Trace {
        let pid = Pid(sample.pid);
        let process = self.processes.process(pid, &sample.process_comm);
        let mut frames = Vec::with_capacity(sample.kernel_frames.len() + sample.user_frames.len());
        for (i, &address) in sample.kernel_frames.iter().enumerate() {
            frames.push(self.kernel_frame(address, i == 0));
        }
        for (i, &address) in sample.user_frames.iter().enumerate() {
            // Return addresses point after the call; step back into it so
            // the frame names the calling instruction (not the next one,
            // which may belong to another function after a noreturn call).
            let lookup = if i == 0 { address } else { address.saturating_sub(1) };
            let frame = match self.processes.resolve(pid, lookup) {
                // Until ELF program headers are read, the frame's address is
                // the file offset of the instruction.
                Some(r) => Frame { kind: FrameKind::Native, address: r.file_offset, mapping: Some(r.mapping), lines: vec![] },
                None => Frame { kind: FrameKind::Native, address, mapping: None, lines: vec![] },
            };
            frames.push(frame);
        }
        Trace {
            process,
            tid: Tid(sample.tid),
            thread_name: self.intern(&sample.comm),
            cpu: sample.cpu,
            timestamp_unix_ns: (i128::from(sample.ktime_ns) + self.realtime_offset_ns).max(0) as u64,
            frames,
        }
    }

    fn kernel_frame(&mut self, address: u64, is_leaf: bool) -> Frame {
        let lookup = if is_leaf { address } else { address.saturating_sub(1) };
        if let Some(frame) = self.kernel_frames.get(&lookup) {
            return frame.clone();
        }
        let lines = match self.kernel.as_mut().and_then(|k| k.lookup(lookup)) {
            Some(symbol) => {
                let function: Arc<str> = match symbol.module {
                    Some(module) => Arc::from(format!("{} [{module}]", symbol.name)),
                    None => Arc::from(symbol.name),
                };
                vec![SourceLine { function, file: None, line: 0 }]
            }
            None => vec![],
        };
        let frame = Frame { kind: FrameKind::Kernel, address, mapping: None, lines };
        if self.kernel_frames.len() >= MAX_CACHED_KERNEL_FRAMES {
            self.kernel_frames.clear();
        }
        self.kernel_frames.insert(lookup, frame.clone());
        frame
    }

    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        if self.names.len() < 65_536 {
            self.names.insert(name.to_owned(), n.clone());
        }
        n
    }
}

fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// bpf_ktime_get_ns() reads CLOCK_MONOTONIC; this turns it into wall time.
fn realtime_offset_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_MONOTONIC)
}
