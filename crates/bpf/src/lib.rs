//! The kernel side of the profiler, seen from user space.
//!
//! [`Sampler::load`] checks privileges and kernel features, loads the eBPF
//! programs built from `ebpf/` (see `build.rs`), and attaches the entry
//! program to one software cpu-clock perf event per online CPU. Samples
//! arrive through a BPF ring buffer: [`Sampler::sample_reader`] gives a
//! [`SampleReader`] to run on a thread of its own, which hands the
//! [`RawSample`]s of each drain to a callback. [`Sampler::counters`] reads the programs'
//! own counters ([`Counters`]).
//!
//! The native unwinder in the kernel needs per-file stack deltas and
//! per-process address maps: [`Sampler::unwind_maps`] gives the
//! [`UnwindMaps`] that load them, and [`Sampler::process_event_reader`]
//! the [`ProcessEventReader`] that says when (new processes, unknown pcs,
//! exits). Each [`RawSample`] says how its user stack ended
//! ([`UnwindStop`]); its frame words decode with [`UserFrame`] (from `profiler_trace`: native
//! pcs, and CPython frames the interpreter unwinder recorded in place of
//! the evaluation loop, whose builds [`InterpreterMaps`] loads).
//!
//! A sample of a process (or a pc) not loaded yet carries a copy of its
//! user stack ([`StackCopy`]); once the process is loaded,
//! [`MapTables`] unwinds the rest of it in user space with the same
//! tables and rules ([`LateUnwind`]).
//!
//! With [`SamplerOptions::off_cpu_threshold`], a share of the scheduler's
//! switches also take the stack of the thread leaving the CPU; the
//! reader delivers it when the thread runs again, with the time it was
//! off the CPU ([`RawSample::off_cpu_ns`]).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod arch;
mod contract;
mod error;
mod events;
mod go_labels;
mod interpreter_maps;
mod late_hotspot;
mod late_unwind;
mod late_v8;
mod off_cpu;
mod perf;
mod pid_namespace;
mod preflight;
mod reader;
mod ring;
mod runtimes;
mod sample;
mod sampler;
mod sampling_switch;
mod selection;
mod skel;
mod types;
mod unwind_maps;

pub use error::BpfError;
pub use events::ProcessEventReader;
pub use go_labels::{
    GoLabelMaps, GoLabelsLayout, GoLabelsValue, GO_LABELS_MAX, GO_LABEL_KEY_MAX, GO_LABEL_VALUE_MAX,
    MAX_GO_LABEL_PROCESSES,
};
pub use interpreter_maps::{InterpreterMaps, RuntimeMapValue, MAX_INTERPRETER_PROCESSES};
pub use late_hotspot::{HotspotStop, LateHotspot};
pub use late_unwind::{LateUnwind, LookupCounts, MapTables};
pub use late_v8::LateV8;
pub use off_cpu::{OffCpuJoinCounts, MAX_PENDING_OFF_CPU};
pub use perf::online_cpus;
pub use pid_namespace::PidNamespace;
pub use reader::SampleReader;
pub use sample::{RawSample, StackCopy, STACK_COPY_MAX};

/// The most user frames a sample carries (the BPF unwinders' frame
/// limit; a deeper stack ends with `UnwindStop::MaxFrames`).
pub const MAX_USER_FRAMES: usize = contract::c::MAX_USER_FRAMES as usize;
pub use sampler::{Counters, Sampler, SamplerOptions};
pub use sampling_switch::SamplingSwitch;
pub use selection::{PidSelection, SELECTED_PIDS_MAX};
pub use types::{
    InterpreterUnwinder, ProcessEvent, ProcessEventKind, UnwindStop, UserFrame, FRAME_EXACT_PC, FRAME_INTERPRETED,
};
pub use unwind_maps::{EncodedDeltas, MappingRange, MappingTarget, UnwindMaps, UnwindMapsStats};
