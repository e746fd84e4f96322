//! Turns symbolized [`profiler_trace::Trace`]s into outputs:
//!
//! - [`folded`]: one line per distinct stack, the format flame graph tools read.
//! - [`flamegraph`]: an interactive flame graph SVG of folded stacks.
//! - [`pprof`]: the gzip-compressed pprof protobuf (`go tool pprof`, Pyroscope, ...).
//! - [`otlp`]: OTLP profiles (`ExportProfilesServiceRequest`) per reporting interval.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod flamegraph;
pub mod folded;
pub mod otlp;
pub mod pprof;
