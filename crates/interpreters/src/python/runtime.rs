//! CPython as a [`Runtime`]: detection ([`detect`]), its `python_files`
//! entry, and its frames named by a [`PythonSymbolizer`] per process.

use super::{detect, Detection, FrameModel, Lasti, PythonBuild, PythonSymbolizer, PythonWord, FRAME_READ_MAX};
use crate::memory::ProcessMemory;
use crate::python::map_value::{PythonFileValue, PythonFrameModel, PythonLasti, PYTHON_NO_OFFSET};
use crate::runtime::{Attach, CacheUse, FileDetection, InterpreterFile, NamerStats, Runtime, RuntimeProcess};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::sync::Arc;

/// Bounds on the code objects cached, all processes together (and each
/// process alone): entries and bytes. Under process churn every new
/// interpreter's code objects are new entries, so a large cache only
/// fills more slowly: 4 MiB holds thousands of code objects with their
/// line tables, and a miss costs one read of the process's memory.
const MAX_CACHED_CODES: usize = 16_384;
const MAX_CACHED_BYTES: usize = 4 << 20;

// The unwinder reads this much of a frame; every layout fits in it.
const _: () = assert!(FRAME_READ_MAX == crate::python::map_value::PYTHON_FRAME_READ_MAX);

/// CPython 3.8-3.15.
#[derive(Clone, Copy, Debug, Default)]
pub struct CPython;

impl Runtime for CPython {
    fn name(&self) -> &'static str {
        "CPython"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::CPython
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Python
    }

    fn frame_address(&self, word: u64) -> u64 {
        PythonWord::decode(word).map_or(0, |w| u64::from(w.offset))
    }

    fn marker_symbols(&self) -> &'static [&'static str] {
        &[super::EVAL_LOOP]
    }

    fn detect_file(&self, elf: &ElfFile, path: &str) -> FileDetection {
        match detect(elf, path) {
            Detection::NotPython => FileDetection::NotFound,
            Detection::Supported(build) => FileDetection::Found(Arc::new(build)),
            Detection::Unsupported { version, reason } => {
                FileDetection::Unsupported { version: version.map(|v| v.to_string()), reason }
            }
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CacheUse { entries: MAX_CACHED_CODES, bytes: MAX_CACHED_BYTES }
    }
}

impl InterpreterFile for PythonBuild {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Python
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        &self.eval_ranges
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        Some(python_file_value(self).map_value())
    }

    fn attach(self: Arc<Self>, _pid: u32, _memory: &dyn ProcessMemory, bias: u64) -> Attach {
        // Everything the unwinder needs is in the file.
        let symbolizer = PythonSymbolizer::new(MAX_CACHED_CODES, MAX_CACHED_BYTES);
        Attach::Attached(Box::new(PythonProcess { build: self, bias, symbolizer }))
    }
}

/// The `python_files` value of a build.
pub fn python_file_value(build: &PythonBuild) -> PythonFileValue {
    let l = &build.layout;
    PythonFileValue {
        runtime_vaddr: build.runtime_vaddr,
        version: build.version.short(),
        frame_model: match l.frame_model {
            FrameModel::Objects => PythonFrameModel::Objects,
            FrameModel::EntryFlag => PythonFrameModel::EntryFlag,
            FrameModel::CStackOwner => PythonFrameModel::CStackOwner,
        },
        lasti_kind: match l.lasti {
            Lasti::Bytes => PythonLasti::Bytes,
            Lasti::Units => PythonLasti::Units,
            Lasti::Pointer => PythonLasti::Pointer,
        },
        frame_read_size: l.frame_read_size,
        runtime_interpreters_head: l.runtime_interpreters_head,
        interp_next: l.interp_next,
        interp_threads_head: l.interp_threads_head,
        tstate_next: l.tstate_next,
        tstate_thread_id: l.tstate_thread_id,
        tstate_frame: l.tstate_frame,
        cframe_current_frame: l.cframe_current_frame.unwrap_or(PYTHON_NO_OFFSET),
        frame_previous: l.frame_previous,
        frame_code: l.frame_code,
        frame_lasti: l.frame_lasti,
        frame_entry: l.frame_entry.unwrap_or(PYTHON_NO_OFFSET),
        code_adaptive: l.code_adaptive.unwrap_or(0),
        frame_code_tag_mask: u32::from(l.frame_code_tag_mask),
    }
}

/// CPython in one process: names its frames (the code object's
/// qualified name, file and the line of the frame's instruction) with the
/// code objects it read from the process.
struct PythonProcess {
    build: Arc<PythonBuild>,
    bias: u64,
    symbolizer: PythonSymbolizer,
}

impl RuntimeProcess for PythonProcess {
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let Some(PythonWord { code, offset }) = PythonWord::decode(word) else { return Vec::new() };
        let before = self.symbolizer.stats();
        let line = self.symbolizer.symbolize(memory, &self.build, self.bias, code, offset);
        let after = self.symbolizer.stats();
        stats.frames += after.frames - before.frames;
        stats.unknown += after.unknown - before.unknown;
        stats.reads += after.code_reads - before.code_reads;
        line.into_iter().collect()
    }

    fn cached(&self) -> CacheUse {
        self.symbolizer.cached()
    }

    fn clear(&mut self) {
        self.symbolizer.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{Layout, LayoutSource, Version};

    fn build(minor: u8) -> PythonBuild {
        PythonBuild {
            version: Version { major: 3, minor, micro: None },
            layout: Layout::for_version(3, minor).unwrap(),
            layout_source: LayoutSource::Table,
            runtime_vaddr: 0x5000,
            code_type_vaddr: None,
            eval_ranges: vec![(0x1000, 0x1800), (0x9000, 0x9100)],
        }
    }

    #[test]
    fn file_value_carries_the_layout() {
        let b = build(12);
        let value = b.file_value().expect("a per-file value");
        assert_eq!(value.unwinder(), InterpreterUnwinder::Python);
        let v = value.read::<profiler_contract::c::python_file>().expect("a python_file");
        assert_eq!(v.runtime_vaddr, 0x5000);
        assert_eq!(v.version, 0x030c);
        assert_eq!(v.frame_model, PythonFrameModel::CStackOwner as u8);
        assert_eq!(v.frame_code, b.layout.frame_code);
        assert_eq!(v.cframe_current_frame, b.layout.cframe_current_frame.unwrap_or(PYTHON_NO_OFFSET));
        assert_eq!(b.unwinder(), InterpreterUnwinder::Python);
        assert_eq!(b.loop_ranges(), &[(0x1000, 0x1800), (0x9000, 0x9100)]);
        let v38 = python_file_value(&build(8));
        assert_eq!((v38.frame_model, v38.cframe_current_frame), (PythonFrameModel::Objects, PYTHON_NO_OFFSET));
    }

    #[test]
    fn owns_interpreted_words_only() {
        let word = profiler_bpf::FRAME_INTERPRETED | (0x7f00_0000_1000u64 >> 3) | (6u64 << 44);
        assert!(CPython.owns_frame(word));
        assert_eq!(CPython.frame_address(word), 6);
        assert!(!CPython.owns_frame(0x7f00_0000_1000));
        assert!(!CPython.owns_frame(0x7f00_0000_1000 | profiler_bpf::FRAME_EXACT_PC));
    }

    /// A process's object names nothing of a word that is not a frame
    /// of its (and counts nothing), and names its frames per process.
    #[test]
    fn a_process_names_its_own_frames() {
        let memory = crate::PidMemory(std::process::id());
        let Attach::Attached(mut process) = Arc::new(build(11)).attach(std::process::id(), &memory, 0) else {
            panic!("attached")
        };
        let mut stats = NamerStats::default();
        assert!(process.lines(&memory, 0x1234, &mut stats).is_empty(), "native word");
        assert_eq!(stats, NamerStats::default(), "not a frame to read");
        let word = profiler_bpf::FRAME_INTERPRETED | 0x200 | (6u64 << 44);
        assert!(process.lines(&memory, word, &mut stats).is_empty(), "not a code object");
        assert_eq!((stats.unknown, stats.reads), (1, 1));
        assert_eq!(process.cached().entries, 1, "its failure is cached");
        process.clear();
        assert_eq!(process.cached(), CacheUse::default());
    }
}
