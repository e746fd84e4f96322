//! CRuby as a [`Runtime`]: detection ([`detect`]), its `ruby_files`
//! entry and `rb_vm_exec` range for the BPF unwinder
//! (`ebpf/runtimes/ruby/unwinder.bpf.h`), and its frames named by a
//! [`RubySymbolizer`] per process.

use super::{detect, find_global_symbols, Detection, RubyBuild, RubyFrame, RubySymbolizer, RubyTls};
use crate::memory::ProcessMemory;
use crate::recent::RecentWords;
use crate::refusal::Refusal;
use crate::ruby::map_value::{
    RubyFileValue, RubyTlsModel, RUBY_CFP_READ_MAX, RUBY_FRAME_POS_MAX, RUBY_FRAME_POS_SHIFT,
};
use crate::runtime::{
    frame_payload, Attach, CacheUse, FileDetection, InterpreterFile, NamerStats, Runtime, RuntimeProcess,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most processes whose symbolizer holds names at once (each bounds its
/// own caches); all are emptied when more would.
const MAX_PROCESSES: usize = 256;
/// How long a process whose symbol table was not found (Ruby is
/// starting) waits before it is looked for again.
const SYMBOLS_RETRY: Duration = Duration::from_secs(2);
/// Most frame words a process keeps named ([`RecentWords`]).
const MAX_RECENT_WORDS: usize = 16_384;
/// How long a word named lately is taken as it is (see [`RecentWords`]).
const RECENT_TRUST: Duration = Duration::from_millis(100);
/// Bytes of a frame's object compared to name its word again: the
/// object's flags and the two words after them, which hold an iseq's
/// body and a method entry's definition (another object at the address,
/// or the same one reused, reads otherwise).
const HEAD_BYTES: usize = 24;
/// What every process's words named lately hold together at most.
const MAX_RECENT_BYTES: usize = 16 << 20;
/// What every process's symbolizer caches (iseqs, method names, classes:
/// [`MAX_CACHED_BYTES`](super::MAX_CACHED_BYTES) each) hold together at most: 256 processes of a
/// full cache each would otherwise be 1 GiB.
const MAX_NAMES_BYTES: usize = 16 << 20;

/// CRuby 3.0-3.4 (3.1 and 3.3 tested).
#[derive(Clone, Copy, Debug, Default)]
pub struct CRuby;

/// A CRuby build the BPF unwinder can walk.
#[derive(Debug)]
pub struct RubyFile {
    /// What [`detect`] found.
    pub build: RubyBuild,
    ranges: Vec<(u64, u64)>,
    value: RubyFileValue,
}

/// A Ruby frame word's pointer and `pos` (`None`: unknown).
pub fn decode_word(word: u64) -> Option<(u64, Option<u64>)> {
    let bits = frame_payload(word, InterpreterUnwinder::Ruby)?;
    let pointer = (bits & ((1 << RUBY_FRAME_POS_SHIFT) - 1)) << 3;
    let pos = (bits >> RUBY_FRAME_POS_SHIFT) & RUBY_FRAME_POS_MAX;
    Some((pointer, (pos != RUBY_FRAME_POS_MAX).then_some(pos)))
}

impl Runtime for CRuby {
    fn name(&self) -> &'static str {
        "CRuby"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::Ruby
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Ruby
    }

    fn frame_address(&self, word: u64) -> u64 {
        decode_word(word).and_then(|(_, pos)| pos).unwrap_or(0)
    }

    fn marker_symbols(&self) -> &'static [&'static str] {
        &["ruby_current_vm_ptr", "ruby_current_execution_context_ptr", "ruby_api_version"]
    }

    fn detect_file(&self, elf: &ElfFile, _path: &str) -> FileDetection {
        match detect(elf) {
            Detection::NotRuby => FileDetection::NotFound,
            Detection::Unsupported { version, reason } => {
                FileDetection::Unsupported { version: version.map(|v| v.to_string()), reason }
            }
            Detection::Ruby(build) => match RubyFile::new(*build) {
                Ok(file) => FileDetection::Found(Arc::new(file)),
                Err((version, reason)) => FileDetection::Unsupported { version: Some(version), reason },
            },
        }
    }

    fn cache_bound(&self) -> CacheUse {
        CacheUse { entries: MAX_PROCESSES, bytes: MAX_RECENT_BYTES + MAX_NAMES_BYTES }
    }
}

impl RubyFile {
    /// The build, with what its unwinder needs; or (its version, why it
    /// cannot be unwound).
    fn new(build: RubyBuild) -> Result<RubyFile, (String, Refusal)> {
        let version = build.version.to_string();
        let Some(range) = build.exec_range else {
            return Err((
                version,
                Refusal::Symbol("rb_vm_exec (its symbol, or rb_iseq_eval's tail call to it)".into()),
            ));
        };
        let Some(tls) = build.tls else {
            let how = "ruby_current_ec (a relocation of its symbol, or a local-dynamic load in rb_iseq_eval)";
            return Err((version, Refusal::Symbol(how.into())));
        };
        let l = &build.layout;
        if l.cfp_size > RUBY_CFP_READ_MAX || [l.cfp_pc, l.cfp_iseq, l.cfp_ep].iter().any(|&o| o + 8 > l.cfp_size) {
            return Err((version, Refusal::Layout(format!("control frames of {} bytes", l.cfp_size))));
        }
        let (tls_model, tls_vaddr, tls_offset) = match tls {
            RubyTls::Dynamic { module_slot, offset } => (RubyTlsModel::Dynamic, module_slot, offset),
            RubyTls::InitialExec { offset_slot } => (RubyTlsModel::InitialExec, offset_slot, 0),
        };
        let value = RubyFileValue {
            tls_vaddr,
            tls_offset,
            tls_model,
            ec_vm_stack: l.ec_vm_stack,
            ec_vm_stack_size: l.ec_vm_stack_size,
            ec_cfp: l.ec_cfp,
            cfp_size: l.cfp_size,
            cfp_pc: l.cfp_pc,
            cfp_iseq: l.cfp_iseq,
            cfp_ep: l.cfp_ep,
            iseq_body: l.iseq_body,
            body_iseq_encoded: l.body_iseq_encoded,
            me_def: l.me_def,
            def_iseq: l.def_iseq,
        };
        Ok(RubyFile { build, ranges: vec![range], value })
    }
}

impl InterpreterFile for RubyFile {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Ruby
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        Some(self.value.map_value())
    }

    fn attach(self: Arc<Self>, _pid: u32, _memory: &dyn ProcessMemory, bias: u64) -> Attach {
        // The process is read when its first frame is named.
        let recent = RecentWords::new(MAX_RECENT_WORDS, RECENT_TRUST);
        Attach::Attached(Box::new(RubyProcess { file: self, bias, names: None, recent }))
    }
}

/// One process's naming state.
struct ProcessNames {
    symbolizer: RubySymbolizer,
    /// `ruby_global_symbols` was found (C functions can be named).
    has_symbols: bool,
    looked_at: Instant,
}

/// CRuby in one process: names its frames (`label` with the file and
/// line at the pc, or a C function's `Class#name`).
struct RubyProcess {
    file: Arc<RubyFile>,
    /// The Ruby file's bias.
    bias: u64,
    names: Option<ProcessNames>,
    /// Its frame words named lately: a deep stack's outer frames come
    /// back in every sample, and naming one from memory takes several
    /// reads (the object, its definition, its iseq, the line table).
    recent: RecentWords,
}

impl RubyProcess {
    fn names(&mut self, memory: &dyn ProcessMemory) -> &mut ProcessNames {
        let stale = self.names.as_ref().is_some_and(|p| !p.has_symbols && p.looked_at.elapsed() >= SYMBOLS_RETRY);
        if stale {
            self.names = None;
        }
        let (build, bias) = (&self.file.build, self.bias);
        self.names.get_or_insert_with(|| {
            let symbols = match (build.global_symbols_vaddr, build.data_segment) {
                (Some(vaddr), _) => vaddr.checked_add(bias),
                (None, Some((start, len))) => {
                    start.checked_add(bias).and_then(|s| find_global_symbols(memory, &build.layout, s, len))
                }
                (None, None) => None,
            };
            ProcessNames {
                symbolizer: RubySymbolizer::new(build.layout.clone(), symbols),
                has_symbols: symbols.is_some(),
                looked_at: Instant::now(),
            }
        })
    }
}

impl RuntimeProcess for RubyProcess {
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let Some((pointer, pos)) = decode_word(word) else { return Vec::new() };
        let now = Instant::now();
        let mut head = [0u8; HEAD_BYTES];
        let known = self.recent.trusted(word, now).or_else(|| {
            let read = pointer != 0 && memory.read(pointer, &mut head);
            read.then(|| self.recent.same_head(word, &head, now)).flatten()
        });
        if let Some(lines) = known {
            stats.frames += 1;
            return lines;
        }
        stats.reads += 1;
        let frame = if pointer == 0 { None } else { self.names(memory).symbolizer.frame(memory, pointer, pos) };
        let Some(frame) = frame else {
            self.recent.forget(word);
            stats.unknown += 1;
            return Vec::new();
        };
        stats.frames += 1;
        let lines = vec![match frame {
            RubyFrame::Ruby { label, file, line } => {
                SourceLine { function: label.into(), file: Some(file.into()), line, approximate: false }
            }
            RubyFrame::CFunc { name } => SourceLine { function: name.into(), file: None, line: 0, approximate: false },
        }];
        self.recent.remember(word, pointer, &head, &lines, now);
        lines
    }

    fn cached(&self) -> CacheUse {
        let names = self.names.as_ref().map(|n| &n.symbolizer);
        // An emptied symbolizer is not counted: emptying must bring the
        // processes back under the bound, or every naming would empty
        // them all again.
        CacheUse {
            entries: usize::from(names.is_some_and(|s| s.holds_names())),
            bytes: self.recent.bytes() + names.map_or(0, |s| s.cached_bytes()),
        }
    }

    /// Empties its caches; where its global symbols are stays known (a
    /// scan of the data segment to find them again).
    fn clear(&mut self) {
        if let Some(names) = &mut self.names {
            names.symbolizer.clear_caches();
        }
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::frame_word;
    use profiler_bpf::UserFrame;

    #[test]
    fn words_decode_to_pointer_and_position() {
        let word = |pointer: u64, pos: u64| {
            frame_word(InterpreterUnwinder::Ruby, (pos << RUBY_FRAME_POS_SHIFT) | (pointer >> 3))
        };
        assert_eq!(decode_word(word(0x7f00_1234_5678, 17)), Some((0x7f00_1234_5678, Some(17))));
        assert_eq!(decode_word(word(0x5555_0000_1000, RUBY_FRAME_POS_MAX)), Some((0x5555_0000_1000, None)));
        // Another runtime's words, CPython's, native pcs.
        assert_eq!(decode_word(UserFrame::interpreted_word(3, 0x1000)), None);
        assert_eq!(decode_word(crate::python::PythonWord { code: 0x7f00_0000_1000, offset: 4 }.encode()), None);
        assert_eq!(decode_word(0x7f00_0000_1000), None);
        assert!(CRuby.owns_frame(word(0x1000, 1)));
        assert_eq!(CRuby.frame_address(word(0x1000, 9)), 9);
    }

    /// A process whose caches were emptied counts for nothing in Ruby's
    /// bound over all processes, and keeps where its global symbols are.
    #[test]
    fn an_emptied_process_counts_for_nothing() {
        let layout = crate::ruby::RubyLayout::for_version(crate::ruby::RubyVersion::new(3, 1, 7)).unwrap();
        let build = RubyBuild {
            version: crate::ruby::RubyVersion::new(3, 1, 7),
            layout: layout.clone(),
            vm_ptr_vaddr: None,
            current_ec_vaddr: None,
            global_symbols_vaddr: Some(0x1000),
            data_segment: None,
            exec_range: Some((0x1000, 0x2000)),
            tls: Some(crate::ruby::RubyTls::InitialExec { offset_slot: 0x3000 }),
        };
        let file = Arc::new(RubyFile::new(build).unwrap());
        let names = ProcessNames {
            symbolizer: RubySymbolizer::new(layout, Some(0x1000)),
            has_symbols: true,
            looked_at: Instant::now(),
        };
        let recent = RecentWords::new(MAX_RECENT_WORDS, RECENT_TRUST);
        let mut process = RubyProcess { file, bias: 0, names: Some(names), recent };
        process.clear();
        assert_eq!(process.cached(), CacheUse::default());
        assert!(process.names.as_ref().is_some_and(|n| n.has_symbols));
    }

    /// A libruby of a release without a layout here is never silent:
    /// Debian 12's 3.1 (or Debian 13's 3.3 from its root file system)
    /// with its two version symbols rewritten to 3.9.0 is refused with
    /// the release and the reason, and the registry's notice names the
    /// file and counts it.
    #[test]
    fn an_unknown_release_is_refused_with_a_notice() {
        let paths = [
            "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1",
            "/var/cache/ebpf-profiler-runtimes/trixie/usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3.8",
        ];
        let mut tested = 0;
        for path in paths {
            let Ok(elf) = ElfFile::open(path) else { continue };
            let version = elf.symbol_address("ruby_version").unwrap();
            let api = elf.symbol_address("ruby_api_version").unwrap();
            let (at_version, at_api) =
                (elf.vaddr_to_file_offset(version).unwrap(), elf.vaddr_to_file_offset(api).unwrap());
            let mut bytes = std::fs::read(path).unwrap();
            bytes[at_version as usize..at_version as usize + 6].copy_from_slice(b"3.9.0\0");
            bytes[at_api as usize + 4..at_api as usize + 8].copy_from_slice(&9u32.to_le_bytes());
            let patched = ElfFile::from_bytes(bytes).unwrap();
            let FileDetection::Unsupported { version, reason } = CRuby.detect_file(&patched, path) else {
                panic!("{path} as 3.9.0 is not refused")
            };
            assert_eq!(version.as_deref(), Some("3.9.0"));
            assert_eq!(reason, Refusal::Version { supported: "2.7 to 3.4".into() });

            let registry = crate::Registry::new(vec![Box::new(CRuby)]);
            let crate::Inspection::Unsupported { notice: Some(notice), .. } =
                registry.inspect(profiler_trace::TableKey([7; 32]), &patched, path)
            else {
                panic!("no notice for {path}")
            };
            assert!(notice.contains("CRuby 3.9.0") && notice.contains(path), "{notice}");
            assert_eq!(registry.stats()[0].unsupported, 1);
            tested += 1;
        }
        if tested == 0 {
            println!("SKIPPED: no libruby here");
        }
    }
}
