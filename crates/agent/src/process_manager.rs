//! The process manager's thread: process events from the BPF programs
//! drive a [`ProcessManager`] that loads unwinding state into the BPF
//! maps through [`BpfLoader`].

use profiler_bpf::{EncodedDeltas, MappingRange, MappingTarget, ProcessEventKind, ProcessEventReader, UnwindMaps};
use profiler_elf::{RuleId, UnwindRule};
use profiler_process::{LoaderError, ManagerStats, ProcessManager, UnwindLoader, UnwindMapping, UnwindTarget};
use profiler_trace::{FileId, Pid};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the thread sleeps when no event comes (housekeeping period).
const TICK: Duration = Duration::from_millis(250);
/// Housekeeping at most this often.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// [`UnwindLoader`] over the BPF maps.
pub(crate) struct BpfLoader(pub UnwindMaps);

impl UnwindLoader for BpfLoader {
    fn set_rule(&mut self, id: RuleId, rule: &UnwindRule) -> Result<(), LoaderError> {
        Ok(self.0.set_rule(id, rule)?)
    }

    fn load_file(&mut self, file_id: FileId, deltas: &[(u64, RuleId)]) -> Result<(), LoaderError> {
        Ok(self.0.load_file(file_id.high64(), &EncodedDeltas::encode(deltas))?)
    }

    fn unload_file(&mut self, file_id: FileId) -> Result<(), LoaderError> {
        Ok(self.0.unload_file(file_id.high64())?)
    }

    fn set_process(&mut self, pid: Pid, mappings: &[UnwindMapping]) -> Result<(), LoaderError> {
        let ranges: Vec<MappingRange> = mappings
            .iter()
            .map(|m| MappingRange {
                start: m.start,
                end: m.end,
                target: match m.target {
                    UnwindTarget::File { file_id, bias } => MappingTarget::Native { file_id: file_id.high64(), bias },
                    UnwindTarget::NoUnwindInfo => MappingTarget::NoUnwindInfo,
                },
            })
            .collect();
        Ok(self.0.set_process(pid.0, &ranges)?)
    }

    fn remove_process(&mut self, pid: Pid) -> Result<(), LoaderError> {
        Ok(self.0.remove_process(pid.0)?)
    }
}

/// What the thread publishes for [`crate::Agent::stats`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ManagerReport {
    pub manager: ManagerStats,
    pub maps: profiler_bpf::UnwindMapsStats,
}

/// The thread's body: follows events until `stop`, then unloads
/// everything.
pub(crate) fn run(
    reader: ProcessEventReader,
    mut manager: ProcessManager<BpfLoader>,
    stop: &AtomicBool,
    report: &Mutex<ManagerReport>,
) -> Result<(), profiler_bpf::BpfError> {
    let publish = |m: &ProcessManager<BpfLoader>| {
        let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
        r.manager = m.stats();
        r.maps = m.loader().0.stats();
    };
    publish(&manager);
    let mut last_housekeeping = Instant::now();
    let result = reader.run(TICK, stop, |event| {
        match event {
            Some(e) => match e.kind {
                ProcessEventKind::New => manager.on_new_process(Pid(e.pid)),
                ProcessEventKind::UnknownPc => manager.on_unknown_pc(Pid(e.pid), e.pc),
                ProcessEventKind::Exit => manager.on_exit(Pid(e.pid)),
                ProcessEventKind::Exec => manager.on_exec(Pid(e.pid)),
            },
            None => {
                manager.run_due();
                if last_housekeeping.elapsed() >= HOUSEKEEPING {
                    last_housekeeping = Instant::now();
                    manager.tick();
                }
                publish(&manager);
            }
        }
        manager.next_deadline().map_or(TICK, |d| d.saturating_duration_since(Instant::now()))
    });
    manager.unload_all();
    publish(&manager);
    result
}

