//! Turns symbolized [`profiler_trace::Trace`]s into outputs:
//!
//! - [`folded`]: one line per distinct stack, the format flame graph tools read.
//! - [`otlp`]: OTLP profiles (`ExportProfilesServiceRequest`) per reporting interval.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod folded;
pub mod otlp;
