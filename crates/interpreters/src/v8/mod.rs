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

use crate::refusal::Refusal;
use profiler_elf::ElfFile;

/// What [`detect`] found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detection {
    /// No V8 postmortem metadata.
    NotV8,
    /// A supported V8 build.
    V8(Box<V8Layout>),
    /// A V8 this crate does not unwind (its frames stay native).
    Unsupported {
        /// Its version, when it could be read.
        version: Option<V8Version>,
        /// Why.
        reason: Refusal,
    },
}

/// Looks at one mapped file: a `node` executable or a `libnode.so` (or
/// any embedder) exporting `v8dbg_*`.
pub fn detect(elf: &ElfFile) -> Detection {
    let Some(metadata) = Metadata::find(elf) else {
        return Detection::NotV8;
    };
    let Some(version) = metadata.version() else {
        let reason = Refusal::UnknownVersion { what: "V8 metadata but no version string" };
        return Detection::Unsupported { version: None, reason };
    };
    match V8Layout::from_metadata(&metadata, version) {
        // Without the builtins' range the interpreter's frames (its
        // bytecode handlers are builtins) would be lost: refused whole.
        Ok(layout) if layout.builtins_code.is_none() => Detection::Unsupported {
            version: Some(version),
            reason: Refusal::Symbol("the embedded builtins' range (blob symbols, or getters of the known form)".into()),
        },
        Ok(layout) => Detection::V8(Box::new(layout)),
        Err(reason) => Detection::Unsupported { version: Some(version), reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_metadata_is_not_v8() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let elf = ElfFile::open(&exe).unwrap();
        assert_eq!(detect(&elf), Detection::NotV8);
    }
}
