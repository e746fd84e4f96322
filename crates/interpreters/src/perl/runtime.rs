//! Perl as a [`Runtime`]: detection ([`detect`]), its `perl_files` entry
//! and `Perl_runops_standard` range for the BPF unwinder
//! (`ebpf/runtimes/perl/unwinder.bpf.h`), and its frames named by a
//! [`PerlSymbolizer`] per process.

use super::{detect, Detection, PerlBuild, PerlState, PerlSymbolizer};
use crate::memory::ProcessMemory;
use crate::perl::map_value::{
    PerlFileValue, PERL_CONTEXT_READ, PERL_COP_EVAL, PERL_COP_MAIN, PERL_FRAME_COP, PERL_FRAME_LINE_MAX,
    PERL_FRAME_LINE_SHIFT, PERL_SI_READ,
};
use crate::refusal::Refusal;
use crate::runtime::{
    frame_payload, Attach, CacheUse, FileDetection, InterpreterFile, NamerStats, Runtime, SymbolizerFile,
    SymbolizerProcess,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue, UserFrame};
use profiler_elf::ElfFile;
use profiler_trace::{Frame, FrameKind, SourceLine};
use std::sync::Arc;

// The tag and the line lie below the runtime's slot bits, the line above
// the pointer's.
const _: () = assert!(PERL_FRAME_COP < 1 << UserFrame::payload_bits(InterpreterUnwinder::Perl as u8));
const _: () = assert!(PERL_FRAME_LINE_MAX << PERL_FRAME_LINE_SHIFT < PERL_FRAME_COP);
const _: () = assert!(1u64 << (47 - 3) <= 1 << PERL_FRAME_LINE_SHIFT);

/// Most processes with a symbolizer at once (each bounds its own
/// caches); all are dropped when more would be.
const MAX_PROCESSES: usize = 256;

/// Perl 5.28-5.42 (threaded 5.36, 5.40 and 5.42 tested).
#[derive(Clone, Copy, Debug, Default)]
pub struct Perl;

/// A Perl build the BPF unwinder can walk.
#[derive(Debug)]
pub struct PerlFile {
    /// What [`detect`] found.
    pub build: PerlBuild,
    ranges: Vec<(u64, u64)>,
    value: PerlFileValue,
}

/// The name of a sub's frame whose CV could not be read as a named CV
/// when the sample was named: mostly a `BEGIN` block (a `use` line),
/// which Perl frees once it has run, or a process that has exited.
pub const UNNAMED_SUB: &str = "[unnamed Perl sub]";

/// Names `BEGIN` the unnamed subs that Perl runs as `BEGIN` blocks: a
/// sub called by `Perl_call_sv` from `Perl_call_list`, which the compiler
/// (`Perl_newATTRSUB_x`, through a static helper: one or two frames out)
/// calls as soon as a `BEGIN` block (or a `use` line) is compiled, and
/// which is freed once run, often before the sample is named. (The
/// other blocks `Perl_call_list` runs, `END`, `INIT`, `CHECK`,
/// `UNITCHECK`, are run from elsewhere and keep the placeholder.)
fn name_begin_blocks(frames: &mut [Frame]) {
    fn name(frames: &[Frame], i: usize) -> Option<&str> {
        frames.get(i).and_then(Frame::function_name)
    }
    for i in 0..frames.len() {
        if frames[i].kind != FrameKind::Perl || frames[i].function_name() != Some(UNNAMED_SUB) {
            continue;
        }
        let compiled = name(frames, i + 1) == Some("Perl_call_sv")
            && name(frames, i + 2) == Some("Perl_call_list")
            && (3..=4).any(|k| name(frames, i + k) == Some("Perl_newATTRSUB_x"));
        if compiled {
            frames[i].lines =
                vec![SourceLine { function: Arc::from(BEGIN_BLOCK), file: None, line: 0, approximate: false }];
        }
    }
}

/// The name of a `BEGIN` block's frame named by [`name_begin_blocks`].
pub const BEGIN_BLOCK: &str = "BEGIN";

/// A Perl frame word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerlWord {
    /// A sub's frame: its CV and the line of its COP (`None`: unknown).
    Sub {
        /// The `CV*` (0: the unwinder read no valid pointer).
        cv: u64,
        /// The line, counted from the line of the sub's first op (`None`: unknown).
        line: Option<u32>,
    },
    /// The script's top level, at the `COP*`.
    Main {
        /// The `COP*`.
        cop: u64,
    },
    /// A string `eval`, `require` or `do FILE`, at the `COP*`.
    Eval {
        /// The `COP*`.
        cop: u64,
    },
}

/// A Perl frame word's fields; `None` if it is not a Perl frame.
pub fn decode_word(word: u64) -> Option<PerlWord> {
    let bits = frame_payload(word, InterpreterUnwinder::Perl)?;
    let pointer = (bits & ((1 << PERL_FRAME_LINE_SHIFT) - 1)) << 3;
    let line = (bits >> PERL_FRAME_LINE_SHIFT) & PERL_FRAME_LINE_MAX;
    Some(match (bits & PERL_FRAME_COP != 0, line) {
        (false, _) => PerlWord::Sub { cv: pointer, line: (line != PERL_FRAME_LINE_MAX).then_some(line as u32) },
        (true, PERL_COP_MAIN) => PerlWord::Main { cop: pointer },
        (true, PERL_COP_EVAL) => PerlWord::Eval { cop: pointer },
        (true, _) => return None,
    })
}

impl Runtime for Perl {
    fn name(&self) -> &'static str {
        "Perl"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::Perl
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Perl
    }

    fn frame_address(&self, word: u64) -> u64 {
        match decode_word(word) {
            Some(PerlWord::Sub { line, .. }) => line.map_or(0, u64::from),
            _ => 0,
        }
    }

    fn unnamed_frame(&self, word: u64) -> Option<&'static str> {
        // Its line alone (the frame's address) would read as an address.
        match decode_word(word)? {
            PerlWord::Sub { .. } => Some(UNNAMED_SUB),
            PerlWord::Main { .. } => Some("main"),
            PerlWord::Eval { .. } => Some("eval"),
        }
    }

    fn name_from_context(&self, frames: &mut [Frame]) {
        name_begin_blocks(frames)
    }

    fn marker_symbols(&self) -> &'static [&'static str] {
        &["Perl_runops_standard"]
    }

    fn detect_file(&self, elf: &ElfFile, _path: &str) -> FileDetection {
        match detect(elf) {
            Detection::NotPerl => FileDetection::NotFound,
            Detection::Unsupported { version, reason } => {
                FileDetection::Unsupported { version: version.map(|v| v.to_string()), reason }
            }
            Detection::Perl(build) => match PerlFile::new(*build) {
                Ok(file) => FileDetection::Found(Arc::new(file)),
                Err((version, reason)) => FileDetection::Unsupported { version: Some(version), reason },
            },
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CacheUse::entries(MAX_PROCESSES)
    }
}

impl PerlFile {
    /// The build, with what its unwinder needs; or (its version, why it
    /// cannot be unwound).
    fn new(build: PerlBuild) -> Result<PerlFile, (String, Refusal)> {
        let version = build.version.to_string();
        let (start, size) = build.runops;
        if size == 0 {
            return Err((version, Refusal::Symbol("Perl_runops_standard with its size".into())));
        }
        let l = &build.layout;
        let fits = |offset: u32, width: u32, read: u32| offset + width <= read;
        let sane = fits(l.si_cxstack, 8, PERL_SI_READ)
            && fits(l.si_cxix, 4, PERL_SI_READ)
            && fits(l.cx_type, 1, PERL_CONTEXT_READ)
            && fits(l.cx_blk_oldcop, 8, PERL_CONTEXT_READ)
            && fits(l.cx_blk_sub_cv, 8, PERL_CONTEXT_READ)
            && l.cx_size >= PERL_CONTEXT_READ;
        if !sane {
            return Err((version, Refusal::Layout("contexts laid out beyond what the unwinder reads".into())));
        }
        let mut value = PerlFileValue {
            threaded: l.threaded,
            interp_curcop: l.interp_curcop,
            interp_curstackinfo: l.interp_curstackinfo,
            si_cxstack: l.si_cxstack,
            si_prev: l.si_prev,
            si_cxix: l.si_cxix,
            cx_type: l.cx_type,
            cx_blk_oldcop: l.cx_blk_oldcop,
            cx_blk_sub_cv: l.cx_blk_sub_cv,
            cx_size: l.cx_size,
            cop_line: l.cop_line,
            xcv_start: l.xcv_start,
            tls_offset: build.current_context_tls,
            ..PerlFileValue::default()
        };
        match build.state {
            PerlState::Threaded { curinterp_vaddr, .. } => value.curinterp_vaddr = curinterp_vaddr,
            PerlState::Globals { curcop_vaddr, curstackinfo_vaddr } => {
                value.curcop_vaddr = curcop_vaddr;
                value.curstackinfo_vaddr = curstackinfo_vaddr;
            }
        }
        Ok(PerlFile { build, ranges: vec![(start, start.saturating_add(size))], value })
    }
}

impl InterpreterFile for PerlFile {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Perl
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

/// Perl names a process's frames (`Package::sub` with the file it
/// was defined in and the line, `main` or `eval` at their statement).
impl SymbolizerFile for PerlFile {
    type Symbolizer = PerlSymbolizer;

    fn symbolizer(&self) -> PerlSymbolizer {
        PerlSymbolizer::new(self.build.layout.clone())
    }

    fn name(
        &self,
        symbolizer: &mut PerlSymbolizer,
        memory: &dyn ProcessMemory,
        word: u64,
        stats: &mut NamerStats,
    ) -> Option<SourceLine> {
        let w = decode_word(word)?;
        stats.reads += 1;
        let skipped_before = symbolizer.failures.skipped;
        let named = match w {
            PerlWord::Sub { cv: 0, .. } | PerlWord::Main { cop: 0 } | PerlWord::Eval { cop: 0 } => None,
            PerlWord::Sub { cv, line } => symbolizer.sub_at(memory, cv, line).ok(),
            PerlWord::Main { cop } => symbolizer.position(memory, cop).ok().map(|(f, l)| ("main".to_string(), f, l)),
            PerlWord::Eval { cop } => symbolizer.position(memory, cop).ok().map(|(f, l)| ("eval".to_string(), f, l)),
        };
        // Kept in `stats`: the process's symbolizer, and its count, go
        // when it exits.
        stats.failures_skipped += symbolizer.failures.skipped - skipped_before;
        let Some((name, file, line)) = named else {
            stats.unknown += 1;
            return None;
        };
        stats.frames += 1;
        Some(SourceLine {
            function: name.into(),
            file: (!file.is_empty()).then(|| file.into()),
            line,
            approximate: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::consts;
    use super::*;
    use crate::perl::map_value::PERL_CX_BITS;
    use crate::runtime::frame_word;

    #[test]
    fn words_decode_to_subs_main_and_evals() {
        let word = |bits: u64| frame_word(InterpreterUnwinder::Perl, bits);
        let sub = |cv: u64, line: u64| word((line << PERL_FRAME_LINE_SHIFT) | (cv >> 3));
        assert_eq!(
            decode_word(sub(0x5555_1234_5678, 42)),
            Some(PerlWord::Sub { cv: 0x5555_1234_5678, line: Some(42) })
        );
        assert_eq!(
            decode_word(sub(0x5555_0000_1000, PERL_FRAME_LINE_MAX)),
            Some(PerlWord::Sub { cv: 0x5555_0000_1000, line: None })
        );
        let cop = |cop: u64, kind: u64| word(PERL_FRAME_COP | (kind << PERL_FRAME_LINE_SHIFT) | (cop >> 3));
        assert_eq!(decode_word(cop(0x7f00_0000_0040, PERL_COP_MAIN)), Some(PerlWord::Main { cop: 0x7f00_0000_0040 }));
        assert_eq!(decode_word(cop(0x7f00_0000_0040, PERL_COP_EVAL)), Some(PerlWord::Eval { cop: 0x7f00_0000_0040 }));
        // An unknown COP kind, another runtime's words, native pcs.
        assert_eq!(decode_word(cop(0x1000, 7)), None);
        assert_eq!(decode_word(UserFrame::interpreted_word(5, 0x1000)), None);
        assert_eq!(decode_word(0x7f00_0000_1000), None);
        assert!(Perl.owns_frame(sub(0x1000, 1)));
        assert_eq!(Perl.frame_address(sub(0x1000, 9)), 9);
        // Never a raw address when it cannot be named.
        assert_eq!(Perl.unnamed_frame(sub(0x1000, 9)), Some(UNNAMED_SUB));
        assert_eq!(Perl.unnamed_frame(cop(0x7f00_0000_0040, PERL_COP_MAIN)), Some("main"));
        assert_eq!(Perl.unnamed_frame(cop(0x7f00_0000_0040, PERL_COP_EVAL)), Some("eval"));
        assert_eq!(Perl.unnamed_frame(UserFrame::interpreted_word(5, 0x1000)), None);
    }

    /// A threaded Perl 5.36 build.
    fn threaded_5_36() -> PerlBuild {
        use crate::perl::{PerlLayout, PerlVersion};
        let version = PerlVersion::five(36);
        PerlBuild {
            version,
            layout: PerlLayout::for_version(version, true).unwrap(),
            state: PerlState::Threaded { thr_key_vaddr: 0x3a66d4, curinterp_vaddr: 0x3a66d8 },
            runops: (0x1000, 0x200),
            current_context_tls: Some(-8),
        }
    }

    #[test]
    fn a_sub_that_failed_lately_is_not_read_again_and_counted() {
        let file = Arc::new(PerlFile::new(threaded_5_36()).unwrap());
        let word = frame_word(InterpreterUnwinder::Perl, (7 << PERL_FRAME_LINE_SHIFT) | 0x200);
        let unreadable = crate::memory::fake::FakeMemory::default();
        let Attach::Attached(mut process) = file.attach(10, &unreadable, 0x5000_0000) else { panic!("attached") };
        let mut stats = NamerStats::default();
        for _ in 0..3 {
            assert!(process.lines(&unreadable, word, &mut stats).is_empty());
        }
        assert_eq!(stats.failures_skipped, 2, "read once, then skipped");
        assert_eq!((process.cached().entries, stats.unknown, stats.reads), (1, 3, 3));
        process.clear();
        assert_eq!(process.cached(), CacheUse::default());
        assert!(process.lines(&unreadable, word, &mut stats).is_empty());
        assert_eq!(stats.failures_skipped, 2, "its failures went with its symbolizer");
    }

    #[test]
    fn unnamed_begin_blocks_are_named_from_the_compiler_frames() {
        let native = |name: &str| Frame {
            kind: FrameKind::Native,
            address: 0x1000,
            mapping: None,
            lines: vec![SourceLine { function: Arc::from(name), file: None, line: 0, approximate: false }],
        };
        let perl = |name: &str| Frame { kind: FrameKind::Perl, ..native(name) };
        // Innermost first: a sample in a `use` line's BEGIN block.
        let begin = |between: &[Frame]| {
            let mut frames = vec![native("Perl_pp_add"), perl(UNNAMED_SUB), native("Perl_call_sv")];
            frames.push(native("Perl_call_list"));
            frames.extend_from_slice(between);
            frames.extend([native("Perl_newATTRSUB_x"), native("Perl_utilize"), perl("eval")]);
            frames
        };
        let mut frames = begin(&[native("perl+0x546bb")]);
        Perl.name_from_context(&mut frames);
        assert_eq!(frames[1].function_name(), Some(BEGIN_BLOCK));
        assert_eq!(frames[0].function_name(), Some("Perl_pp_add"));
        let mut frames = begin(&[]);
        Perl.name_from_context(&mut frames);
        assert_eq!(frames[1].function_name(), Some(BEGIN_BLOCK));
        // Too far from the compiler, or not through call_list: unchanged.
        for between in [&[native("a"), native("b")][..], &[native("a"), native("b"), native("c")]] {
            let mut frames = begin(between);
            Perl.name_from_context(&mut frames);
            assert_eq!(frames[1].function_name(), Some(UNNAMED_SUB));
        }
        let mut frames = vec![perl(UNNAMED_SUB), native("Perl_call_sv"), native("Perl_pp_entersub")];
        Perl.name_from_context(&mut frames);
        assert_eq!(frames[0].function_name(), Some(UNNAMED_SUB));
        // A named sub keeps its name.
        let mut frames = begin(&[]);
        frames[1] = perl("Outer::BEGIN");
        Perl.name_from_context(&mut frames);
        assert_eq!(frames[1].function_name(), Some("Outer::BEGIN"));
    }

    #[test]
    fn context_bits_are_the_walks() {
        let walk = [
            consts::CXTYPEMASK,
            consts::CXT_SUB,
            consts::CXT_FORMAT,
            consts::CXT_EVAL,
            consts::CXP_SUB_RE_FAKE,
            consts::CXP_EVALBLOCK,
            consts::CXP_TRY,
        ];
        assert_eq!(PERL_CX_BITS, walk.map(u32::from));
    }

    #[test]
    fn a_build_gives_its_loop_and_map_value() {
        let build = threaded_5_36();
        let file = PerlFile::new(build.clone()).unwrap();
        assert_eq!(file.loop_ranges(), &[(0x1000, 0x1200)]);
        let value = file.file_value().expect("a perl_files value");
        assert_eq!(value.unwinder(), InterpreterUnwinder::Perl);
        let v = value.read::<profiler_contract::c::perl_file>().expect("a perl_file");
        assert_eq!((v.curinterp_vaddr, v.tls_offset, v.has_tls, v.threaded), (0x3a66d8, -8, 1, 1));
        assert_eq!((v.interp_curcop, v.interp_curstackinfo, v.cx_blk_sub_cv, v.cx_size), (0xd0, 0xe0, 0x48, 0x68));
        // No size for the op loop: nothing to mark.
        assert!(PerlFile::new(PerlBuild { runops: (0x1000, 0), ..build }).is_err());
    }
}
