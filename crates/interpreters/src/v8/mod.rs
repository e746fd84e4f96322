//! V8 (Node.js): finding it in a file ([`detect`]: the `v8dbg_*`
//! postmortem metadata and the version), the offsets the BPF unwinder and
//! the naming need ([`V8Layout`]), naming functions from a process's
//! memory ([`V8Symbolizer`]) and a user-space walk of a thread's
//! JavaScript frames ([`walk_frames`]) that proves the layout against
//! live Node processes; [`V8`] wires it to the BPF unwinder
//! (`ebpf/runtimes/v8/unwinder.bpf.h`). See `docs/v8.md`.
//!
//! Unlike HotSpot's tables, V8's metadata is constant data in the file,
//! so the whole layout is known from the file alone, once per build.

mod heap;
mod layout;
mod map_value;
mod metadata;
mod naming;
mod positions;
mod runtime;
mod walk;

pub use heap::{untag, Heap, MAX_BYTE_ARRAY, MAX_SMI_ARRAY, MAX_STRING};
pub use layout::{FrameTypes, V8Layout, HEAP_OBJECT_TAG, MAX_V8, MIN_V8};
pub use metadata::{Metadata, V8Version};
pub use naming::{
    bytecode_positions, bytecode_script_offset, code_at_pc, code_function, inlined_scopes, read_code, read_function,
    CodeInfo, FunctionInfo, ScriptLines, V8Symbolizer, V8SymbolizerStats, ANONYMOUS, MAX_CACHED_FUNCTIONS,
    MAX_CODE_SCAN, MAX_INLINING_DEPTH, MAX_SOURCE, SCOPE_INFO_SLOTS,
};
pub use positions::{decode_positions, decode_positions_of, line_column, position_at, PositionEntry};
pub use runtime::{process_value, V8File, V8Namer, V8Word, FRAME_OFFSET_MAX, MAX_NAMED_FUNCTIONS, V8};
pub use walk::{find_exit_frame, walk_frames, Tier, V8Frame, WalkEnd, EXIT_SCAN_BYTES, MAX_FRAMES};

use profiler_elf::ElfFile;

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// No V8 postmortem metadata.
    NotV8,
    /// A supported V8 build.
    V8(Box<V8Layout>),
    /// A V8 this crate does not unwind (its frames stay native): the
    /// reason, for a notice.
    Unsupported(String),
}

/// Looks at one mapped file (`path` is its name, for messages): a `node`
/// executable or a `libnode.so` (or any embedder) exporting `v8dbg_*`.
pub fn detect(elf: &ElfFile, path: &str) -> Detection {
    let Some(metadata) = Metadata::find(elf) else {
        return Detection::NotV8;
    };
    let Some(version) = metadata.version() else {
        return Detection::Unsupported(format!("{path}: V8 metadata but no V8 version string"));
    };
    match V8Layout::from_metadata(&metadata, version) {
        // Without the builtins' range the interpreter's frames (its
        // bytecode handlers are builtins) would be lost: refused whole.
        Ok(layout) if layout.builtins_code.is_none() => Detection::Unsupported(format!(
            "{path}: V8 {version}: no embedded builtins range (no blob symbols, no getters of the known form)"
        )),
        Ok(layout) => Detection::V8(Box::new(layout)),
        Err(why) => Detection::Unsupported(format!("{path}: V8 {version}: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_metadata_is_not_v8() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert_eq!(detect(&elf, exe.to_str().unwrap()), Detection::NotV8);
    }
}
