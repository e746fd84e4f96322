//! The user-space half of the interpreter unwinders.
//!
//! The BPF side records interpreted frames in place of the native frames
//! of an interpreter's evaluation loop (`ebpf/python_unwinder.bpf.h`); it
//! needs, per file holding an interpreter, where the loop is and how the
//! interpreter lays out its threads and frames, and user space needs to
//! turn the recorded frames into names, files and lines. Both come from
//! here:
//!
//! - [`python`]: CPython 3.8-3.13. [`python::detect`] finds a build in an
//!   ELF file (version, `_PyRuntime`, the evaluation loop, the
//!   per-version [`python::Layout`]); [`python::PythonRegistry`] shares
//!   the builds by file id; [`python::PythonSymbolizer`] names frames from
//!   the process's memory with bounded caches.
//! - [`memory`]: reading another process's memory.
//! - Not wired into the agent yet (their BPF unwinders are to come), each
//!   proven against live processes by its `tests/*_live.rs`:
//!   [`hotspot`] (HotSpot JVM, JDK 11-25, layouts from the JVM's own
//!   vmStructs tables), [`v8`] (Node.js, V8 9.5-11.8, from the `v8dbg_*`
//!   metadata in the binary), [`ruby`] (CRuby 2.7-3.4), [`php`] (PHP
//!   7.4-8.4) and [`perl`] (Perl 5.28-5.40): detection, layouts, and
//!   naming frames walked in user space.
//!
//! Nothing here loads BPF maps: the agent converts a
//! [`python::PythonBuild`] into the map value and marks the loop's
//! addresses in each process that maps the file.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod hotspot;
pub mod memory;
pub mod perl;
pub mod php;
pub mod python;
pub mod ruby;
pub mod v8;

pub use memory::{PidMemory, ProcessMemory};
