//! The user-space half of the interpreter unwinders.
//!
//! The BPF side records interpreted frames in place of the native frames
//! of an interpreter's evaluation loop (`ebpf/interpreters.bpf.h` hands
//! the loop over to the interpreter's unwinder); it needs, per file
//! holding an interpreter, where the loop is and how the interpreter lays
//! out its threads and frames, and user space needs to turn the recorded
//! frames into names, files and lines. Both come from here:
//!
//! - [`Runtime`], [`InterpreterFile`], [`RuntimeProcess`]: what every
//!   runtime implements (detection in a file, its BPF map value and loop
//!   ranges, and one object per process that maps it: what it needs of
//!   the process, naming its frames with caches bounded per runtime).
//! - [`Registry`]: the registered runtimes ([`runtimes`]) and the one
//!   record of what they found in the files processes map now.
//! - One module per runtime, each a [`Runtime`] in [`runtimes`] with its
//!   BPF unwinder: [`python`] (CPython 3.8-3.15), [`hotspot`] (HotSpot
//!   JVM, JDK 11-26, layouts from the JVM's own vmStructs tables), [`v8`]
//!   (Node.js 18 to 26, V8 9.5 up to 14.x, from the `v8dbg_*` metadata in the
//!   binary), [`ruby`] (CRuby 2.7-3.4), [`php`] (PHP 7.4-8.4),
//!   [`perl`] (Perl 5.28-5.42, stable releases) and [`beam`] (Erlang/OTP's
//!   JIT emulator, OTP 25 and 27, named from the node's code index); a
//!   build outside its range is refused with a notice and profiled as
//!   native code.
//! - [`budget`]: what reading one process may cost (reads, bytes, CPU
//!   time), for naming its frames and attaching to it.
//! - [`go_labels`]: what reading a Go program's pprof labels needs (not
//!   a runtime: its labels go with the samples, its frames are native).
//! - [`memory`]: reading another process's memory.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod beam;
mod blocks;
pub mod budget;
pub mod failures;
pub mod go_labels;
pub mod hotspot;
pub mod memory;
pub mod perl;
pub mod php;
pub mod python;
mod recent;
mod refusal;
mod registry;
pub mod ruby;
mod runtime;
pub mod v8;
mod version;

pub use budget::{BudgetLimits, BudgetStats, BudgetedMemory, ReadBudget};
pub use memory::{PidMemory, ProcessMemory, RangeRead};
pub use refusal::Refusal;
pub use registry::{Inspection, ProcessObject, Registry, RuntimeId, RuntimeStats, MAX_INTERPRETER_FILES};
pub use runtime::{
    frame_payload, frame_word, Attach, CacheUse, ExecutableMapping, FileDetection, InterpreterFile, NamerStats,
    ProcessUnwinding, Runtime, RuntimeProcess,
};

/// Builds one runtime.
type MakeRuntime = fn() -> Box<dyn Runtime>;

/// Every runtime the profiler unwinds, in the order they are tried on a
/// file, by the name that switches it off (`disabled_interpreters`, the
/// reference receiver's `tracers` and `interpreters.<name>.disabled`).
/// Adding one: its folder in `src/<runtime>/` and one line here
/// (docs/internals.md, "Adding a runtime").
const RUNTIMES: [(&str, MakeRuntime); 7] = [
    ("python", || Box::new(python::CPython)),
    ("hotspot", || Box::new(hotspot::Hotspot)),
    ("v8", || Box::new(v8::V8)),
    ("ruby", || Box::new(ruby::CRuby)),
    ("php", || Box::new(php::Php)),
    ("perl", || Box::new(perl::Perl)),
    ("beam", || Box::new(beam::Beam)),
];

/// The names of [`runtimes`], in their order.
pub fn runtime_names() -> impl Iterator<Item = &'static str> {
    RUNTIMES.iter().map(|(name, _)| *name)
}

/// Every runtime the profiler unwinds (see `RUNTIMES`).
pub fn runtimes() -> Vec<Box<dyn Runtime>> {
    runtimes_except(&[] as &[&str])
}

/// The runtimes but those named in `disabled` (names of
/// [`runtime_names`]; others are ignored: the caller checks them). A
/// runtime left out is never looked for: its processes are profiled as
/// native code.
pub fn runtimes_except(disabled: &[impl AsRef<str>]) -> Vec<Box<dyn Runtime>> {
    RUNTIMES.iter().filter(|(name, _)| !disabled.iter().any(|d| d.as_ref() == *name)).map(|(_, make)| make()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiler_bpf::InterpreterUnwinder;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// The names of `ebpf/runtimes.h`'s list, in its order.
    fn bpf_runtimes() -> Vec<String> {
        include_str!("../../../ebpf/runtimes.h")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("RUNTIME(")?.split(',').next())
            .map(|name| name.trim().to_string())
            .filter(|name| name != "name")
            .collect()
    }

    /// A runtime of the BPF list is registered on the Rust side too: its
    /// folder here (with its map value), its line in `RUNTIMES`, whose
    /// runtime names it, and its `InterpreterUnwinder`; and `RUNTIMES`
    /// holds no runtime the list lacks. A half-registered runtime fails.
    #[test]
    fn every_runtime_is_registered() {
        let list = bpf_runtimes();
        assert!(list.len() >= 7, "ebpf/runtimes.h: {list:?}");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for name in &list {
            for file in ["mod.rs", "map_value.rs"] {
                let path = src.join(name).join(file);
                assert!(path.is_file(), "{} is missing", path.display());
            }
        }
        let listed: BTreeSet<&str> = list.iter().map(String::as_str).collect();
        let registered: BTreeSet<&str> = runtime_names().collect();
        assert_eq!(registered, listed, "RUNTIMES (lib.rs) and ebpf/runtimes.h");
        let unwinders: BTreeSet<&str> = InterpreterUnwinder::ALL.iter().map(|u| u.name()).collect();
        assert_eq!(unwinders, listed, "InterpreterUnwinder and ebpf/runtimes.h");
        for (name, make) in RUNTIMES {
            assert_eq!(make().unwinder().name(), name, "the unwinder of RUNTIMES' {name}");
        }
    }
}
