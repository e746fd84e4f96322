//! The kernel side of the profiler, seen from user space.
//!
//! [`Sampler::load`] checks privileges and kernel features, loads the eBPF
//! programs built from `ebpf/` (see `build.rs`), and attaches the entry
//! program to one software cpu-clock perf event per online CPU. Samples
//! arrive through a BPF ring buffer: [`Sampler::sample_reader`] gives a
//! [`SampleReader`] to run on a thread of its own, which hands each
//! [`RawSample`] to a callback. [`Sampler::counters`] reads the programs'
//! own counters ([`Counters`]).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
mod perf;
mod preflight;
mod reader;
mod sample;
mod sampler;
mod skel;

pub use error::BpfError;
pub use perf::online_cpus;
pub use reader::SampleReader;
pub use sample::RawSample;
pub use sampler::{Counters, Sampler, SamplerOptions};
