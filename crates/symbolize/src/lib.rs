//! Naming frames on the host.
//!
//! - [`KernelSymbols`]: `/proc/kallsyms` (kernel and module text symbols),
//!   parsed once into a compact sorted table and looked up by binary
//!   search; [`KernelSymbolizer`] caches it and reloads it, rate-limited,
//!   when an address falls outside every known symbol (a module loaded
//!   after start).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod kallsyms;

pub use kallsyms::{KallsymsError, KernelSymbol, KernelSymbolizer, KernelSymbols};
