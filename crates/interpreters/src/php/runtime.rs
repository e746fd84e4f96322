//! PHP as a [`Runtime`]: detection ([`detect`]), its `php_files` entry
//! and `execute_ex` range for the BPF unwinder
//! (`ebpf/runtimes/php/unwinder.bpf.h`), and its frames named by a
//! [`PhpSymbolizer`] per process.

use super::{consts, detect, Detection, PhpBuild, PhpFrame, PhpSymbolizer};
use crate::memory::ProcessMemory;
use crate::php::map_value::{
    PhpFileValue, PHP_EXECUTE_DATA_READ, PHP_FRAME_LINE_MAX, PHP_FRAME_LINE_SHIFT, PHP_FRAME_TOP,
};
use crate::refusal::Refusal;
use crate::runtime::{
    frame_payload, Attach, CacheUse, FileDetection, InterpreterFile, NamerStats, Runtime, SymbolizerFile,
    SymbolizerProcess,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue, UserFrame};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::sync::Arc;

// The tag and the line lie below the runtime's slot bits, the line above
// the function's.
const _: () = assert!(PHP_FRAME_TOP < 1 << UserFrame::payload_bits(InterpreterUnwinder::Php as u8));
const _: () = assert!(PHP_FRAME_LINE_MAX << PHP_FRAME_LINE_SHIFT < PHP_FRAME_TOP);
const _: () = assert!(1u64 << (47 - 3) <= 1 << PHP_FRAME_LINE_SHIFT);

/// Most processes with a symbolizer at once (each bounds its own cache);
/// all are dropped when more would be.
const MAX_PROCESSES: usize = 256;

/// PHP 7.4-8.4, NTS builds (8.2 tested).
#[derive(Clone, Copy, Debug, Default)]
pub struct Php;

/// A PHP build the BPF unwinder can walk.
#[derive(Debug)]
pub struct PhpFile {
    /// What [`detect`] found.
    pub build: PhpBuild,
    ranges: Vec<(u64, u64)>,
    value: PhpFileValue,
}

/// A PHP frame word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhpWord {
    /// The `zend_function` (0: the unwinder read no valid pointer).
    pub function: u64,
    /// The line of the frame's opline, counted from the function's
    /// `line_start` (`None`: unknown).
    pub line: Option<u32>,
    /// The frame had `ZEND_CALL_TOP` (the first of its `execute_ex` run).
    pub top: bool,
}

/// A PHP frame word's fields; `None` if it is not a PHP frame.
pub fn decode_word(word: u64) -> Option<PhpWord> {
    let bits = frame_payload(word, InterpreterUnwinder::Php)?;
    let line = (bits >> PHP_FRAME_LINE_SHIFT) & PHP_FRAME_LINE_MAX;
    Some(PhpWord {
        function: (bits & ((1 << PHP_FRAME_LINE_SHIFT) - 1)) << 3,
        line: (line != PHP_FRAME_LINE_MAX).then_some(line as u32),
        top: bits & PHP_FRAME_TOP != 0,
    })
}

impl Runtime for Php {
    fn name(&self) -> &'static str {
        "PHP"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::Php
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Php
    }

    fn frame_address(&self, word: u64) -> u64 {
        decode_word(word).and_then(|w| w.line).map_or(0, u64::from)
    }

    fn marker_symbols(&self) -> &'static [&'static str] {
        &["zend_execute_ex"]
    }

    fn detect_file(&self, elf: &ElfFile, _path: &str) -> FileDetection {
        match detect(elf) {
            Detection::NotPhp => FileDetection::NotFound,
            Detection::Unsupported { version, reason } => {
                FileDetection::Unsupported { version: version.map(|v| v.to_string()), reason }
            }
            Detection::Php(build) => {
                let exec = elf.function_symbol("execute_ex").filter(|&(_, size)| size > 0);
                match PhpFile::new(*build, exec) {
                    Ok(file) => FileDetection::Found(Arc::new(file)),
                    Err((version, reason)) => FileDetection::Unsupported { version: Some(version), reason },
                }
            }
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CacheUse::entries(MAX_PROCESSES)
    }
}

impl PhpFile {
    /// The build, with what its unwinder needs (`exec`: `execute_ex`'s
    /// address and size); or (its version, why it cannot be unwound).
    fn new(build: PhpBuild, exec: Option<(u64, u64)>) -> Result<PhpFile, (String, Refusal)> {
        let version = build.version.to_string();
        let Some((start, size)) = exec else {
            return Err((version, Refusal::Symbol("execute_ex (the VM loop) with its size".into())));
        };
        let l = &build.layout;
        if [l.ex_opline, l.ex_func, l.ex_prev].iter().any(|&o| o + 8 > PHP_EXECUTE_DATA_READ)
            || l.ex_this_type_info + 4 > PHP_EXECUTE_DATA_READ
        {
            return Err((version, Refusal::Layout("zend_execute_data fields beyond what the unwinder reads".into())));
        }
        let value = PhpFileValue {
            executor_globals_vaddr: build.executor_globals_vaddr,
            eg_current_execute_data: l.eg_current_execute_data,
            ex_opline: l.ex_opline,
            ex_func: l.ex_func,
            ex_call_info: l.ex_this_type_info,
            ex_prev: l.ex_prev,
            op_lineno: l.op_lineno,
            call_top: consts::CALL_TOP,
            op_array_line_start: l.op_array_line_start,
        };
        Ok(PhpFile { build, ranges: vec![(start, start.saturating_add(size))], value })
    }
}

impl InterpreterFile for PhpFile {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Php
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        Some(self.value.map_value())
    }

    fn attach(self: Arc<Self>, _pid: u32, _memory: &dyn ProcessMemory, _bias: u64) -> Attach {
        // Its frame words hold process addresses: the bias is not needed.
        SymbolizerProcess::attach(self)
    }
}

/// PHP names a process's frames (`Class::method`, `function`,
/// `{main}` with the file and line, or an internal function's name).
impl SymbolizerFile for PhpFile {
    type Symbolizer = PhpSymbolizer;

    fn symbolizer(&self) -> PhpSymbolizer {
        PhpSymbolizer::new(self.build.layout.clone())
    }

    fn name(
        &self,
        symbolizer: &mut PhpSymbolizer,
        memory: &dyn ProcessMemory,
        word: u64,
        stats: &mut NamerStats,
    ) -> Option<SourceLine> {
        let w = decode_word(word)?;
        let (before, skipped_before) = (symbolizer.cached(), symbolizer.failures.skipped);
        let call_info = if w.top { consts::CALL_TOP } else { 0 };
        // The frame's line came with the word, from the function's first:
        // it is checked against the function's lines like a line read
        // from an opline.
        let frame =
            if w.function == 0 { None } else { symbolizer.frame_at_offset(memory, w.function, w.line, call_info).ok() };
        if symbolizer.cached() != before {
            stats.reads += 1;
        }
        // Kept in `stats`: the process's symbolizer, and its count, go
        // when it exits.
        stats.failures_skipped += symbolizer.failures.skipped - skipped_before;
        let Some(frame) = frame else {
            stats.unknown += 1;
            return None;
        };
        stats.frames += 1;
        Some(match frame {
            PhpFrame::User { name, file, line } => {
                SourceLine { function: name.into(), file: Some(file.into()), line, approximate: false }
            }
            PhpFrame::Internal { name } => {
                SourceLine { function: name.into(), file: None, line: 0, approximate: false }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::frame_word;

    #[test]
    fn words_decode_to_function_line_and_top() {
        let word = |function: u64, line: u64, top: bool| {
            let bits = (if top { PHP_FRAME_TOP } else { 0 }) | (line << PHP_FRAME_LINE_SHIFT) | (function >> 3);
            frame_word(InterpreterUnwinder::Php, bits)
        };
        assert_eq!(
            decode_word(word(0x7f00_1234_5678, 17, false)),
            Some(PhpWord { function: 0x7f00_1234_5678, line: Some(17), top: false })
        );
        assert_eq!(
            decode_word(word(0x5555_0000_1000, PHP_FRAME_LINE_MAX, true)),
            Some(PhpWord { function: 0x5555_0000_1000, line: None, top: true })
        );
        // Another runtime's words, CPython's, native pcs.
        assert_eq!(decode_word(UserFrame::interpreted_word(4, 0x1000)), None);
        assert_eq!(decode_word(crate::python::PythonWord { code: 0x7f00_0000_1000, offset: 4 }.encode()), None);
        assert_eq!(decode_word(0x7f00_0000_1000), None);
        assert!(Php.owns_frame(word(0x1000, 1, false)));
        assert_eq!(Php.frame_address(word(0x1000, 9, true)), 9);
    }

    /// A PHP 8.2 build.
    fn php_8_2() -> PhpBuild {
        use crate::php::{PhpLayout, PhpVersion};
        let version = PhpVersion::new(8, 2, 36);
        PhpBuild {
            version,
            layout: PhpLayout::for_version(version).unwrap(),
            executor_globals_vaddr: 0x58ae60,
            execute_ex_vaddr: Some(0x36cbe0),
        }
    }

    #[test]
    fn a_function_that_failed_lately_is_not_read_again_and_counted() {
        let file = Arc::new(PhpFile::new(php_8_2(), Some((0x36cbe0, 0x931e))).unwrap());
        let word = frame_word(InterpreterUnwinder::Php, (7 << PHP_FRAME_LINE_SHIFT) | 0x200);
        let unreadable = crate::memory::fake::FakeMemory::default();
        let attach = |pid| match file.clone().attach(pid, &unreadable, 0x5000_0000) {
            Attach::Attached(process) => process,
            _ => panic!("attached"),
        };
        let (mut first, mut second) = (attach(10), attach(11));
        let mut stats = NamerStats::default();
        assert_eq!(first.cached(), CacheUse::default(), "no symbolizer before its first frame");
        for _ in 0..3 {
            assert!(first.lines(&unreadable, word, &mut stats).is_empty());
        }
        assert_eq!(stats.failures_skipped, 2, "read once, then skipped");
        assert!(second.lines(&unreadable, word, &mut stats).is_empty());
        assert_eq!(stats.failures_skipped, 2, "another process reads it");
        assert_eq!((first.cached().entries, stats.unknown), (1, 4));
        first.clear();
        assert_eq!(first.cached(), CacheUse::default());
        assert!(first.lines(&unreadable, word, &mut stats).is_empty());
        assert_eq!(stats.failures_skipped, 2, "its failures went with its symbolizer");
    }

    #[test]
    fn a_build_gives_its_loop_and_map_value() {
        let build = php_8_2();
        let err = PhpFile::new(build.clone(), None).unwrap_err();
        assert_eq!(err.0, "8.2.36");
        let file = PhpFile::new(build, Some((0x36cbe0, 0x931e))).unwrap();
        assert_eq!(file.loop_ranges(), &[(0x36cbe0, 0x36cbe0 + 0x931e)]);
        let value = file.file_value().expect("a php_files value");
        assert_eq!(value.unwinder(), InterpreterUnwinder::Php);
        assert_eq!(
            value,
            PhpFileValue {
                executor_globals_vaddr: 0x58ae60,
                eg_current_execute_data: 488,
                ex_opline: 0,
                ex_func: 24,
                ex_call_info: 40,
                ex_prev: 48,
                op_lineno: 24,
                call_top: 1 << 17,
                op_array_line_start: 160,
            }
            .map_value()
        );
    }
}
