//! The emulator as a runtime of the registry ([`Beam`], [`BeamFile`], and
//! its object per node: what its BPF unwinder needs of the node), and the
//! naming of the pcs it records ([`BeamNamer`], one per node).

use super::{
    atom_index, detect, function_name, BeamBuild, Detection, CODE_INDICES, LINE_TAB_FUNC_TAB, MAX_ATOM_BYTES,
    MAX_FILE_NAME, MAX_FUNCTIONS, MAX_LINE_ITEMS, MAX_MODULES, RANGES_SIZE,
};
use crate::beam::map_value::{BeamProcessValue, BEAM_FRAME_PC_MASK, BEAM_FRAME_RETURN_ADDRESS};
use crate::memory::{u64_in, ProcessMemory};
use crate::recent::RecentWords;
use crate::refusal::Refusal;
use crate::runtime::{
    frame_payload, Attach, CacheUse, ExecutableMapping, FileDetection, InterpreterFile, NamerStats, ProcessUnwinding,
    Runtime, RuntimeProcess,
};
use profiler_bpf::{InterpreterUnwinder, RuntimeMapValue};
use profiler_elf::ElfFile;
use profiler_trace::{FrameKind, SourceLine};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
/// Most atom names cached, all nodes together (and each alone).
const MAX_CACHED_ATOMS: usize = 65_536;
/// Most frame words a node keeps named ([`RecentWords`]).
const MAX_RECENT_WORDS: usize = 16_384;
/// How long a word named lately is taken as it is (see [`RecentWords`]).
const RECENT_TRUST: Duration = Duration::from_millis(100);
/// What every node's words named lately hold together at most.
const MAX_RECENT_BYTES: usize = 16 << 20;
/// Most source file names cached, all nodes together (and each alone).
const MAX_CACHED_FILES: usize = 4096;
/// The empty list (`NIL`), which ends a string.
const NIL: u64 = 0x3b;
/// Steps of a binary search over modules or functions (2^24 > every
/// bound above).
const MAX_SEARCH_STEPS: u32 = 24;

/// An emulator as one process maps it.
#[derive(Clone, Debug)]
pub struct BeamProcess {
    /// The mapping's load bias.
    pub bias: u64,
    /// The build.
    pub build: Arc<BeamBuild>,
}

/// The Erlang emulator (the BEAM), a runtime of the registry: its JIT's
/// code is walked by `ebpf/runtimes/beam/unwinder.bpf.h` (slot 7) and its frames
/// named from the node's code index.
pub struct Beam;

impl Runtime for Beam {
    fn name(&self) -> &'static str {
        "BEAM"
    }

    fn frame_kind(&self) -> FrameKind {
        FrameKind::Beam
    }

    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Beam
    }

    fn frame_address(&self, word: u64) -> u64 {
        frame_payload(word, InterpreterUnwinder::Beam).map_or(0, |p| p & BEAM_FRAME_PC_MASK)
    }

    fn detect_file(&self, elf: &ElfFile, path: &str) -> FileDetection {
        match detect(elf, path) {
            Detection::NotBeam => FileDetection::NotFound,
            Detection::Beam(build) => FileDetection::Found(Arc::new(BeamFile { build: Arc::from(build) })),
            Detection::Unsupported { version, reason } => FileDetection::Unsupported { version, reason },
        }
    }

    fn cache_bound(&self) -> CacheUse {
        // Words named lately count by their bytes (each node keeps
        // MAX_RECENT_WORDS of them): in entries, a few busy nodes would
        // empty every node's caches again and again.
        CacheUse { entries: MAX_CACHED_ATOMS + MAX_CACHED_FILES, bytes: MAX_RECENT_BYTES }
    }

    fn naming_counters(&self) -> NamerStats {
        BeamNamer::default().stats()
    }
}

/// An emulator build found in one file.
#[derive(Debug)]
pub struct BeamFile {
    /// What was found.
    pub build: Arc<BeamBuild>,
}

/// The emulator in one node ([`InterpreterFile::attach`]): what attaching
/// read of it, and the names read from it since.
struct BeamNode {
    /// The code address in `beam_normal_exit`.
    normal_exit: u64,
    /// `erts_frame_layout`.
    frame_layout: u32,
    process: BeamProcess,
    namer: BeamNamer,
    /// Its frame words named lately, by the `{module, function, arity}`
    /// of the function's code info they were named from: a compiler's
    /// deep recursion brings hundreds of words back in every sample, and
    /// naming one from memory takes about 25 reads (two binary searches
    /// and the line table). Code is not changed while its module is
    /// loaded; code purged and its memory reused reads another head.
    recent: RecentWords,
}

impl BeamNode {
    fn new(normal_exit: u64, frame_layout: u32, process: BeamProcess) -> BeamNode {
        let recent = RecentWords::new(MAX_RECENT_WORDS, RECENT_TRUST);
        BeamNode { normal_exit, frame_layout, process, namer: BeamNamer::default(), recent }
    }
}

/// `[start, end)` of code.
type CodeRange = (u64, u64);

/// Bytes of a function's `{module, function, arity}` in its code info.
const MFA_BYTES: usize = 24;

/// The JIT's executable code among a process's executable mappings: its
/// ranges and the smallest range holding them. By default the JIT maps
/// its code twice from one memfd, `rw-s` to write and `r-xs` to run: the
/// `/memfd:vmem` views (only the latter are executable). A node that maps
/// its code once (`+JPperf` on OTP 25, where perf cannot read a second
/// view; `+JMsingle true`) writes and runs it in anonymous `rwxp` memory:
/// without a memfd view, the anonymous executable mappings are the JIT's.
fn jit_code(maps: &[ExecutableMapping<'_>]) -> Option<(Vec<CodeRange>, CodeRange)> {
    let views = |anonymous: bool| -> Vec<CodeRange> {
        maps.iter()
            .filter(|m| m.start < m.end)
            .filter(|m| if anonymous { m.path.is_empty() } else { m.path.starts_with("/memfd:vmem") })
            .map(|m| (m.start, m.end))
            .collect()
    };
    let mut code = views(false);
    if code.is_empty() {
        code = views(true);
    }
    let low = code.iter().map(|r| r.0).min()?;
    let high = code.iter().map(|r| r.1).max()?;
    Some((code, (low, high)))
}

impl InterpreterFile for BeamFile {
    fn unwinder(&self) -> InterpreterUnwinder {
        InterpreterUnwinder::Beam
    }

    fn loop_ranges(&self) -> &[(u64, u64)] {
        &[]
    }

    fn file_value(&self) -> Option<RuntimeMapValue> {
        None
    }

    fn attach(self: Arc<Self>, _pid: u32, memory: &dyn ProcessMemory, bias: u64) -> Attach {
        let Some(normal_exit) = read_u64(memory, bias.wrapping_add(self.build.normal_exit)) else {
            return Attach::Failed(Refusal::Unreadable("beam_normal_exit"));
        };
        if normal_exit == 0 {
            // The emulator is starting.
            return Attach::NotYet;
        }
        let mut layout = [0u8; 4];
        if !memory.read(bias.wrapping_add(self.build.frame_layout), &mut layout) {
            return Attach::Failed(Refusal::Unreadable("erts_frame_layout"));
        }
        let frame_layout = u32::from_le_bytes(layout);
        if frame_layout > 1 {
            return Attach::Failed(Refusal::Layout(format!("unknown frame layout {frame_layout}")));
        }
        let process = BeamProcess { bias, build: self.build.clone() };
        Attach::Attached(Box::new(BeamNode::new(normal_exit, frame_layout, process)))
    }
}

impl RuntimeProcess for BeamNode {
    /// The frame's pc (`pc - 1` for a return address: the call) in the
    /// node's code index.
    fn lines(&mut self, memory: &dyn ProcessMemory, word: u64, stats: &mut NamerStats) -> Vec<SourceLine> {
        let Some(payload) = frame_payload(word, InterpreterUnwinder::Beam) else { return Vec::new() };
        let pc = payload & BEAM_FRAME_PC_MASK;
        let pc = if payload & BEAM_FRAME_RETURN_ADDRESS != 0 { pc.checked_sub(1) } else { Some(pc) };
        let Some(pc) = pc else { return Vec::new() };
        let now = Instant::now();
        if let Some(lines) = self.recent.trusted(word, now) {
            stats.frames += 1;
            return lines;
        }
        let mfa_at = |info: u64| info.checked_add(self.process.build.layout.code_info_mfa);
        if let Some(at) = self.recent.object(word).and_then(mfa_at) {
            let mut head = [0u8; MFA_BYTES];
            stats.reads += 1;
            if memory.read(at, &mut head) {
                if let Some(lines) = self.recent.same_head(word, &head, now) {
                    stats.frames += 1;
                    return lines;
                }
            }
        }
        let before = self.namer.stats();
        let named = self.namer.name_pc(memory, &self.process, pc);
        stats.add_change(&before, &self.namer.stats());
        let Some((line, info, mfa)) = named else {
            self.recent.forget(word);
            return Vec::new();
        };
        let lines = vec![line];
        self.recent.remember(word, info, &mfa, &lines, now);
        lines
    }

    fn sync(&mut self, _memory: &dyn ProcessMemory, maps: &[ExecutableMapping<'_>]) -> Option<ProcessUnwinding> {
        let (code, (code_low, code_high)) = jit_code(maps)?;
        let layout = &self.process.build.layout;
        let value = BeamProcessValue {
            normal_exit: self.normal_exit,
            code_low,
            code_high,
            scheduler_return: layout.scheduler_return,
            runtime_stack: layout.runtime_stack,
            current_process: layout.current_process,
            process_stop: layout.process_stop,
            frame_layout: self.frame_layout,
        };
        // The executable views mapped now; a grown JIT area is a new
        // mapping, found at the next read of the process's maps.
        let value = value.map_value();
        Some(ProcessUnwinding::new(InterpreterUnwinder::Beam, code, value))
    }

    fn cached(&self) -> CacheUse {
        CacheUse { entries: self.namer.atoms.len() + self.namer.files.len(), bytes: self.recent.bytes() }
    }

    fn clear(&mut self) {
        self.namer.atoms.clear();
        self.namer.files.clear();
        self.recent.clear();
    }
}

/// Why a pc was not named: the namer's `frames_unknown_<reason>`
/// counters, in [`UNKNOWN_REASONS`]'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unknown {
    /// In no loaded module: code purged since the sample (hot code
    /// loading), or the JIT's shared fragments.
    NoModule,
    /// In a module's range but outside its functions (its header).
    NoFunction,
    /// A read of the node's memory failed (it exited, or freed what was
    /// being read).
    Unreadable,
    /// A value out of its bounds: a code index, a count, an arity, a
    /// term that is not an atom.
    BadData,
}

/// The counter of each [`Unknown`] reason.
const UNKNOWN_REASONS: [&str; 4] =
    ["frames_unknown_no_module", "frames_unknown_no_function", "frames_unknown_unreadable", "frames_unknown_bad_data"];

/// Names pcs in the JIT code of an emulator process, with a bounded
/// cache of atom names.
#[derive(Default)]
pub struct BeamNamer {
    /// Atom index -> name.
    atoms: HashMap<u64, Arc<str>>,
    /// File name term -> the name.
    files: HashMap<u64, Arc<str>>,
    stats: NamerStats,
    /// Unnamed frames by [`Unknown`] reason.
    unknown: [u64; 4],
}

fn read_u64(memory: &dyn ProcessMemory, address: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    memory.read(address, &mut b).then(|| u64::from_le_bytes(b))
}

/// The range holding `pc` among `n` sorted ranges at `base`, range `i`
/// being [start, end) in the two words at `base + i * stride`: its index
/// and start (`None`: no range holds it). A binary search of at most
/// [`MAX_SEARCH_STEPS`] reads, each counted in `reads`.
fn search_ranges(
    memory: &dyn ProcessMemory,
    base: u64,
    stride: u64,
    n: u64,
    pc: u64,
    reads: &mut u64,
) -> Result<Option<(u64, u64)>, Unknown> {
    let (mut lo, mut hi) = (0u64, n);
    for _ in 0..MAX_SEARCH_STEPS {
        if lo >= hi {
            return Ok(None);
        }
        let mid = lo + (hi - lo) / 2;
        *reads += 1;
        let at = mid.checked_mul(stride).and_then(|o| base.checked_add(o)).ok_or(Unknown::BadData)?;
        let (start, end) = read_pair(memory, at).ok_or(Unknown::Unreadable)?;
        if pc < start {
            hi = mid;
        } else if pc >= end {
            lo = mid + 1;
        } else {
            return Ok(Some((mid, start)));
        }
    }
    Ok(None)
}

fn read_pair(memory: &dyn ProcessMemory, address: u64) -> Option<(u64, u64)> {
    let mut b = [0u8; 16];
    memory.read(address, &mut b).then(|| (u64_in(&b, 0).unwrap_or(0), u64_in(&b, 8).unwrap_or(0)))
}

impl BeamNamer {
    /// Names `pc` of the process running `process`'s emulator, if it
    /// lies in the code of a loaded module: its line, with the address of
    /// its function's code info and the `{module, function, arity}` read
    /// there.
    pub fn name_pc(
        &mut self,
        memory: &dyn ProcessMemory,
        process: &BeamProcess,
        pc: u64,
    ) -> Option<(SourceLine, u64, [u8; MFA_BYTES])> {
        match self.lookup(memory, process, pc) {
            Ok(named) => {
                self.stats.frames += 1;
                Some(named)
            }
            Err(why) => {
                self.stats.unknown += 1;
                self.unknown[why as usize] += 1;
                None
            }
        }
    }

    fn lookup(
        &mut self,
        memory: &dyn ProcessMemory,
        process: &BeamProcess,
        pc: u64,
    ) -> Result<(SourceLine, u64, [u8; MFA_BYTES]), Unknown> {
        use Unknown::{BadData, NoFunction, NoModule, Unreadable};
        let build = &process.build;
        let layout = &build.layout;
        let mut ix = [0u8; 4];
        self.stats.reads += 1;
        if !memory.read(process.bias.wrapping_add(build.active_code_index), &mut ix) {
            return Err(Unreadable);
        }
        let ix = u32::from_le_bytes(ix);
        if ix >= CODE_INDICES {
            return Err(BadData);
        }
        let ranges = process.bias.wrapping_add(build.ranges).wrapping_add(u64::from(ix) * RANGES_SIZE);
        self.stats.reads += 1;
        let (modules, n) = read_pair(memory, ranges).ok_or(Unreadable)?;
        if n == 0 || n > MAX_MODULES {
            return Err(BadData);
        }
        // The module: ranges sorted by start, each [start, end). The
        // active index only: a module purged since the sample is gone.
        let (_, header) = search_ranges(memory, modules, 16, n, pc, &mut self.stats.reads)?.ok_or(NoModule)?;
        // The function: functions[0..=count] sorted, pc in [f[i], f[i+1]).
        self.stats.reads += 1;
        let count = read_u64(memory, header).ok_or(Unreadable)? & 0xffff_ffff;
        if count == 0 || count > MAX_FUNCTIONS {
            return Err(BadData);
        }
        let functions = header.checked_add(layout.functions).ok_or(BadData)?;
        let (index, info) = search_ranges(memory, functions, 8, count, pc, &mut self.stats.reads)?.ok_or(NoFunction)?;
        let mut mfa = [0u8; MFA_BYTES];
        self.stats.reads += 1;
        if !memory.read(info.checked_add(layout.code_info_mfa).ok_or(BadData)?, &mut mfa) {
            return Err(Unreadable);
        }
        let word = |i| u64_in(&mfa, i).ok_or(BadData);
        let (module, function, arity) = (word(0)?, word(8)?, word(16)?);
        if arity > 255 {
            return Err(BadData);
        }
        let module = self.atom(memory, process, module)?;
        let function = self.atom(memory, process, function)?;
        let function = Arc::from(function_name(&module, &function, arity));
        // The line is a bonus: a function without one keeps its name.
        let (file, line) = self.line(memory, process, header, index, pc).unwrap_or((None, 0));
        Ok((SourceLine { function, file, line, approximate: false }, info, mfa))
    }

    /// The source file and line of `pc` in function `index` of the
    /// module at `header`, from its line table: the last `line`
    /// instruction at or before `pc` (the first, for a pc before all).
    fn line(
        &mut self,
        memory: &dyn ProcessMemory,
        process: &BeamProcess,
        header: u64,
        index: u64,
        pc: u64,
    ) -> Option<(Option<Arc<str>>, u32)> {
        self.stats.reads += 1;
        let table = read_u64(memory, header.checked_add(process.build.layout.line_table)?)?;
        if table == 0 {
            return None;
        }
        let mut head = [0u8; 24];
        self.stats.reads += 3;
        if !memory.read(table, &mut head) {
            return None;
        }
        let (names, loc_size, locs) = (u64_in(&head, 0)?, u64_in(&head, 8)? & 0xffff_ffff, u64_in(&head, 16)?);
        let func_tab = table.checked_add(LINE_TAB_FUNC_TAB)?;
        let first = read_u64(memory, func_tab)?;
        let (lo, hi) = read_pair(memory, func_tab.checked_add(index.checked_mul(8)?)?)?;
        if lo < first || hi <= lo || (lo - first) % 8 != 0 || (hi - lo) % 8 != 0 || (hi - lo) / 8 > MAX_LINE_ITEMS {
            return None;
        }
        // The greatest item <= pc, else the first.
        let (mut at, mut a, mut b) = (lo, 0u64, (hi - lo) / 8);
        for _ in 0..MAX_SEARCH_STEPS {
            if a >= b {
                break;
            }
            let mid = a + (b - a) / 2;
            self.stats.reads += 1;
            if read_u64(memory, lo + mid * 8)? <= pc {
                at = lo + mid * 8;
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        let item = (at - first) / 8;
        let mut loc = [0u8; 4];
        let loc_bytes = match loc_size {
            2 => &mut loc[..2],
            4 => &mut loc[..],
            _ => return None,
        };
        self.stats.reads += 1;
        if !memory.read(locs.checked_add(item.checked_mul(loc_size)?)?, loc_bytes) {
            return None;
        }
        let loc = u32::from_le_bytes(loc);
        // LOC_FILE and LOC_LINE; line 0: no location.
        let (file, line) = (u64::from(loc >> 24), loc & 0xff_ffff);
        if line == 0 {
            return None;
        }
        self.stats.reads += 1;
        let name = read_u64(memory, names.checked_add(file * 8)?)?;
        Some((self.file_name(memory, name), line))
    }

    /// A source file name: an Erlang string (a list of character
    /// terms), cached per process.
    fn file_name(&mut self, memory: &dyn ProcessMemory, term: u64) -> Option<Arc<str>> {
        if let Some(name) = self.files.get(&term) {
            return Some(name.clone());
        }
        let mut name = String::new();
        let mut cell = term;
        while cell != NIL {
            // A list cell (tag 01): [head, tail], the head a small integer.
            if cell & 3 != 1 || name.len() >= MAX_FILE_NAME {
                return None;
            }
            self.stats.reads += 1;
            let (head, tail) = read_pair(memory, cell & !3)?;
            if head & 0xf != 0xf {
                return None;
            }
            name.push(char::from_u32(u32::try_from(head >> 4).ok()?)?);
            cell = tail;
        }
        let name: Arc<str> = Arc::from(name);
        if self.files.len() >= MAX_CACHED_FILES {
            self.files.clear();
        }
        self.files.insert(term, name.clone());
        Some(name)
    }

    /// The name of atom `term`, cached per process.
    fn atom(&mut self, memory: &dyn ProcessMemory, process: &BeamProcess, term: u64) -> Result<Arc<str>, Unknown> {
        let index = atom_index(term).ok_or(Unknown::BadData)?;
        if let Some(name) = self.atoms.get(&index) {
            return Ok(name.clone());
        }
        self.read_atom(memory, process, index)
    }

    fn read_atom(
        &mut self,
        memory: &dyn ProcessMemory,
        process: &BeamProcess,
        index: u64,
    ) -> Result<Arc<str>, Unknown> {
        use Unknown::{BadData, Unreadable};
        let layout = &process.build.layout;
        let table = process.bias.wrapping_add(process.build.atom_table);
        // seg_table[index >> 10][index & 1023]: pages of 1024 entries.
        self.stats.reads += 3;
        let segments = read_u64(memory, table.checked_add(layout.seg_table).ok_or(BadData)?).ok_or(Unreadable)?;
        let segment = (index >> 10).checked_mul(8).and_then(|o| segments.checked_add(o)).ok_or(BadData)?;
        let segment = read_u64(memory, segment).ok_or(Unreadable)?;
        let entry = read_u64(memory, segment.checked_add((index & 1023) * 8).ok_or(BadData)?).ok_or(Unreadable)?;
        let mut len = [0u8; 2];
        self.stats.reads += 2;
        if !memory.read(entry.checked_add(layout.atom_len).ok_or(BadData)?, &mut len) {
            return Err(Unreadable);
        }
        let len = usize::try_from(i16::from_le_bytes(len)).ok().filter(|&l| l <= MAX_ATOM_BYTES).ok_or(BadData)?;
        let name = read_u64(memory, entry.checked_add(layout.atom_name).ok_or(BadData)?).ok_or(Unreadable)?;
        let mut bytes = vec![0u8; len];
        self.stats.reads += 1;
        if !memory.read(name, &mut bytes) {
            return Err(Unreadable);
        }
        let name: Arc<str> = Arc::from(String::from_utf8_lossy(&bytes).as_ref());
        if self.atoms.len() >= MAX_CACHED_ATOMS {
            self.atoms.clear();
        }
        self.atoms.insert(index, name.clone());
        Ok(name)
    }
}

impl BeamNamer {
    /// Its counters, with the names of its reasons for unknown frames.
    pub fn stats(&self) -> NamerStats {
        let mut stats = self.stats;
        for (slot, (name, n)) in stats.unknown_by_reason.iter_mut().zip(UNKNOWN_REASONS.iter().zip(self.unknown)) {
            *slot = (name, n);
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beam::BeamLayout;
    use crate::memory::fake::FakeMemory;

    const BIAS: u64 = 0x5500_0000_0000;

    fn build() -> BeamProcess {
        let build = BeamBuild {
            otp: 25,
            erts: "13.1.5".into(),
            active_code_index: 0x1000,
            ranges: 0x2000,
            atom_table: 0x3000,
            normal_exit: 0x4000,
            frame_layout: 0x5000,
            layout: BeamLayout::for_release(25).unwrap(),
        };
        BeamProcess { bias: BIAS, build: Arc::new(build) }
    }

    fn atom(i: u64) -> u64 {
        i << 6 | 0x0b
    }

    /// A node with two modules (code index 1), the second with three
    /// functions; atoms 0 "false", 1 "chain", 2 "a", 3 "leaf_spin".
    fn node() -> FakeMemory {
        let mut m = FakeMemory::default();
        m.add(BIAS + 0x1000, 1u32.to_le_bytes().to_vec());
        let modules = 0x7000_0000u64;
        m.words(BIAS + 0x2000 + RANGES_SIZE, &[modules, 2]);
        let header = 0x7f00_0000_1000u64;
        m.words(modules, &[0x7f00_0000_0000, 0x7f00_0000_0800, header, header + 0x1000]);
        // num_functions, ..., functions[] at 0x60.
        let f = [header + 0x200, header + 0x300, header + 0x500, header + 0x900];
        let mut words = vec![3u64];
        words.resize(0x60 / 8, 0);
        words.extend(f);
        let table = 0x7e00_0000_0000u64;
        words[0x48 / 8] = table;
        m.words(header, &words);
        // The line table: file 1 "c.erl"; a/1's items before its start
        // and inside, leaf_spin/2's two, a/0's one without a location.
        let (names, locs, items) = (table + 0x100, table + 0x200, table + 0x300);
        m.words(table, &[names, 4, locs, items, items + 16, items + 32, items + 40]);
        let string = table + 0x400;
        m.words(names, &[NIL, string | 1]);
        let cells: Vec<u64> = "c.erl"
            .chars()
            .enumerate()
            .flat_map(|(i, c)| [u64::from(c) << 4 | 0xf, if i == 4 { NIL } else { (string + 16 * (i as u64 + 1)) | 1 }])
            .collect();
        m.words(string, &cells);
        let loc = |file: u32, line: u32| file << 24 | line;
        let locs_bytes: Vec<u8> =
            [loc(1, 16), loc(1, 17), loc(1, 21), loc(1, 22), 0].iter().flat_map(|l| l.to_le_bytes()).collect();
        m.add(locs, locs_bytes);
        m.words(items, &[header + 0x1f0, header + 0x280, header + 0x300, header + 0x400, header + 0x500]);
        for (i, (&info, (fun, arity))) in f.iter().zip([(2, 1), (3, 2), (2, 0)]).enumerate().take(3) {
            let _ = i;
            m.words(info + 16, &[atom(1), atom(fun), arity]);
        }
        let segments = 0x6000_0000u64;
        m.words(BIAS + 0x3000 + 120, &[segments]);
        m.words(segments, &[segments + 0x100]);
        let entries: Vec<u64> = (0..4).map(|i| 0x6100_0000 + i * 0x100).collect();
        m.words(segments + 0x100, &entries);
        for (e, name) in entries.iter().zip(["false", "chain", "a", "leaf_spin"]) {
            let mut bytes = vec![0u8; 40];
            bytes[24..26].copy_from_slice(&(name.len() as i16).to_le_bytes());
            bytes[32..40].copy_from_slice(&(e + 0x80).to_le_bytes());
            m.add(*e, bytes);
            m.add(e + 0x80, name.as_bytes().to_vec());
        }
        m
    }

    #[test]
    fn names_pcs_of_each_function() {
        let m = node();
        let p = build();
        let mut namer = BeamNamer::default();
        let name = |namer: &mut BeamNamer, pc| namer.name_pc(&m, &p, pc).map(|(l, _, _)| l.function.to_string());
        let line = |namer: &mut BeamNamer, pc| {
            namer.name_pc(&m, &p, pc).map(|(l, _, _)| (l.file.map(|f| f.to_string()), l.line)).unwrap()
        };
        let c = Some("c.erl".to_string());
        assert_eq!(line(&mut namer, 0x7f00_0000_1250), (c.clone(), 16), "the item before the function's start");
        assert_eq!(line(&mut namer, 0x7f00_0000_1290), (c.clone(), 17));
        assert_eq!(line(&mut namer, 0x7f00_0000_1300), (c.clone(), 21));
        assert_eq!(line(&mut namer, 0x7f00_0000_14ff), (c, 22));
        assert_eq!(line(&mut namer, 0x7f00_0000_1600), (None, 0), "no location");
        namer.stats = NamerStats::default();
        assert_eq!(name(&mut namer, 0x7f00_0000_1250).as_deref(), Some("chain:a/1"));
        assert_eq!(name(&mut namer, 0x7f00_0000_1300).as_deref(), Some("chain:leaf_spin/2"));
        assert_eq!(name(&mut namer, 0x7f00_0000_14ff).as_deref(), Some("chain:leaf_spin/2"));
        assert_eq!(name(&mut namer, 0x7f00_0000_1600).as_deref(), Some("chain:a/0"));
        assert_eq!(name(&mut namer, 0x7f00_0000_1100), None, "the header, before the first function");
        assert_eq!(name(&mut namer, 0x7f00_0000_1900), None, "after the last function");
        assert_eq!(name(&mut namer, 0x7f00_0000_0100), None, "a module whose header is unreadable");
        assert_eq!(name(&mut namer, 0x7f00_0000_3000), None, "no module");
        assert_eq!(namer.stats().frames, 4);
        assert_eq!(namer.stats().unknown, 4);
        let reasons = namer.stats().unknown_by_reason;
        assert_eq!(
            reasons.map(|(_, n)| n),
            [1, 2, 1, 0],
            "{reasons:?}: no module; the header and past the last function; the unreadable header"
        );
        assert!(!namer.atoms.is_empty());
    }

    #[test]
    fn garbage_is_refused() {
        let p = build();
        let mut namer = BeamNamer::default();
        // A code index out of range.
        let mut m = node();
        m.regions[0].1 = 3u32.to_le_bytes().to_vec();
        assert_eq!(namer.name_pc(&m, &p, 0x7f00_0000_1250), None);
        // A module count beyond the bound.
        let mut m = node();
        m.regions[1].1[8..16].copy_from_slice(&(MAX_MODULES + 1).to_le_bytes());
        assert_eq!(namer.name_pc(&m, &p, 0x7f00_0000_1250), None);
        // A function count beyond the bound.
        let mut m = node();
        m.regions[3].1[0..8].copy_from_slice(&(MAX_FUNCTIONS + 1).to_le_bytes());
        assert_eq!(namer.name_pc(&m, &p, 0x7f00_0000_1250), None);
        assert_eq!(namer.stats().frames, 0);
        assert_eq!(namer.stats().unknown_by_reason.map(|(_, n)| n), [0, 0, 0, 3]);
    }

    #[test]
    fn jit_code_is_the_executable_view_of_the_memfd() {
        let m = |start, end, path| ExecutableMapping { start, end, path, reserved_end: end };
        let maps = [
            m(0x55ef_86c2_5000, 0x55ef_86eb_0000, "/usr/lib/erlang/erts-13.1.5/bin/beam.smp"),
            m(0x7fab_04bf_f000, 0x7fab_053f_f000, "/memfd:vmem (deleted)"),
            m(0x7fab_0600_0000, 0x7fab_0610_0000, "/memfd:vmem (deleted)"),
            m(0x7fab_0700_0000, 0x7fab_0710_0000, ""),
        ];
        assert_eq!(
            jit_code(&maps),
            Some((
                vec![(0x7fab_04bf_f000, 0x7fab_053f_f000), (0x7fab_0600_0000, 0x7fab_0610_0000)],
                (0x7fab_04bf_f000, 0x7fab_0610_0000)
            ))
        );
        assert_eq!(jit_code(&maps[..1]), None);
        assert_eq!(jit_code(&[m(2, 1, "/memfd:vmem")]), None, "an empty range");
    }

    #[test]
    fn single_mapped_jit_code_is_the_anonymous_executable_memory() {
        // Measured on OTP 25 with +JPperf true: no memfd, rwxp anonymous
        // mappings with a library between them.
        let m = |start, end, path| ExecutableMapping { start, end, path, reserved_end: end };
        let maps = [
            m(0x5602_4c27_3000, 0x5602_4c4f_e000, "/usr/lib/erlang/erts-13.1.5/bin/beam.smp"),
            m(0x7f97_9560_0000, 0x7f97_95a0_0000, ""),
            m(0x7f97_95c0_0000, 0x7f97_95e0_0000, ""),
            m(0x7f97_96f0_0000, 0x7f97_96f1_0000, "/usr/lib/x86_64-linux-gnu/libm.so.6"),
            m(0x7f97_9777_8000, 0x7f97_9779_8000, ""),
        ];
        assert_eq!(
            jit_code(&maps),
            Some((
                vec![
                    (0x7f97_9560_0000, 0x7f97_95a0_0000),
                    (0x7f97_95c0_0000, 0x7f97_95e0_0000),
                    (0x7f97_9777_8000, 0x7f97_9779_8000)
                ],
                (0x7f97_9560_0000, 0x7f97_9779_8000)
            ))
        );
    }

    #[test]
    fn unwinding_of_a_node_is_its_jit_code() {
        let mut node = BeamNode::new(0x7fab_0500_0010, 1, build());
        let maps = [ExecutableMapping {
            start: 0x7fab_04bf_f000,
            end: 0x7fab_053f_f000,
            path: "/memfd:vmem (deleted)",
            reserved_end: 0x7fab_053f_f000,
        }];
        let memory = FakeMemory::default();
        let u = node.sync(&memory, &maps).expect("unwinding");
        assert_eq!(u.code, vec![(0x7fab_04bf_f000, 0x7fab_053f_f000)]);
        assert_eq!(u.value.unwinder(), InterpreterUnwinder::Beam);
        let v = u.value.read::<profiler_contract::c::beam_process>().expect("a beam_process");
        assert_eq!(
            (v.normal_exit, v.code_low, v.code_high, v.frame_layout),
            (0x7fab_0500_0010, 0x7fab_04bf_f000, 0x7fab_053f_f000, 1)
        );
        assert!(node.sync(&memory, &[]).is_none(), "no JIT code mapped yet");
    }

    #[test]
    fn frame_words_name_their_pc_or_the_call_before_a_return_address() {
        let m = node();
        let mut namer = BeamNode::new(0x7f00_0000_0010, 0, build());
        let word = |payload| crate::runtime::frame_word(InterpreterUnwinder::Beam, payload);
        let mut stats = Beam.naming_counters();
        let mut name = |namer: &mut BeamNode, w| {
            let lines = namer.lines(&m, w, &mut stats);
            lines.first().map(|l| l.function.to_string())
        };
        assert_eq!(name(&mut namer, word(0x7f00_0000_1300)).as_deref(), Some("chain:leaf_spin/2"));
        // A return address just past leaf_spin/2's last byte is its call.
        assert_eq!(
            name(&mut namer, word(0x7f00_0000_1500 | BEAM_FRAME_RETURN_ADDRESS)).as_deref(),
            Some("chain:leaf_spin/2")
        );
        assert_eq!(name(&mut namer, word(0x7f00_0000_1500)).as_deref(), Some("chain:a/0"));
        assert_eq!(name(&mut namer, word(0x7f00_0000_3000)), None, "no module");
        assert_eq!(Beam.frame_address(word(0x7f00_0000_1500 | BEAM_FRAME_RETURN_ADDRESS)), 0x7f00_0000_1500);
        assert_eq!((stats.frames, stats.unknown), (3, 1));
        assert_eq!(stats.unknown_by_reason[0], ("frames_unknown_no_module", 1));
        assert_eq!(stats.unknown_by_reason[3], ("frames_unknown_bad_data", 0));
        assert!(namer.cached().entries > 0);
        namer.clear();
        assert_eq!(namer.cached(), CacheUse::default());
    }

    /// A word named lately is taken as it is, then kept while its
    /// function's `{module, function, arity}` reads the same (one read),
    /// and named again when it does not (code purged, memory reused).
    #[test]
    fn words_named_lately_are_checked_by_their_functions_mfa() {
        struct Counted<'a>(&'a FakeMemory, std::cell::Cell<u32>);
        impl ProcessMemory for Counted<'_> {
            fn read(&self, address: u64, buf: &mut [u8]) -> bool {
                self.1.set(self.1.get() + 1);
                self.0.read(address, buf)
            }
        }
        let mut m = node();
        let mut node = BeamNode::new(0x7f00_0000_0010, 0, build());
        let word = crate::runtime::frame_word(InterpreterUnwinder::Beam, 0x7f00_0000_1300);
        let mut stats = Beam.naming_counters();
        let name = |node: &mut BeamNode, m: &FakeMemory, stats: &mut NamerStats| {
            let counted = Counted(m, std::cell::Cell::new(0));
            let lines = node.lines(&counted, word, stats);
            (lines.first().map(|l| l.function.to_string()), counted.1.get())
        };
        let (named, reads) = name(&mut node, &m, &mut stats);
        assert_eq!(named.as_deref(), Some("chain:leaf_spin/2"));
        assert!(reads > 10, "named in full: {reads} reads");
        assert_eq!(name(&mut node, &m, &mut stats), (named.clone(), 0), "trusted: no read");
        node.recent.trust = Duration::ZERO;
        assert_eq!(name(&mut node, &m, &mut stats), (named, 1), "the same function: one read");
        // Another function's code info at the address: named again.
        let info = node.recent.object(word).unwrap();
        let region = m.regions.iter_mut().find(|(start, _)| *start == info + 16).unwrap();
        region.1[8..16].copy_from_slice(&atom(2).to_le_bytes());
        let (renamed, reads) = name(&mut node, &m, &mut stats);
        assert_eq!(renamed.as_deref(), Some("chain:a/2"));
        assert!(reads > 10, "{reads}");
        assert_eq!(stats.frames, 4);
    }

    #[test]
    fn attaching_reads_the_bottom_of_the_stacks_and_the_frame_layout() {
        let file = Arc::new(BeamFile { build: build().build });
        let mut m = FakeMemory::default();
        m.words(BIAS + 0x4000, &[0x7f00_0000_0010]);
        m.add(BIAS + 0x5000, 0u32.to_le_bytes().to_vec());
        let Attach::Attached(mut node) = file.clone().attach(9, &m, BIAS) else { panic!("not attached") };
        let maps = [ExecutableMapping { start: 0x7f00_0000_0000, end: 0x7f00_0010_0000, path: "", reserved_end: 0 }];
        let u = node.sync(&m, &maps).expect("unwinding");
        let v = u.value.read::<profiler_contract::c::beam_process>().expect("a beam_process");
        assert_eq!((v.normal_exit, v.frame_layout), (0x7f00_0000_0010, 0));
        let mut starting = FakeMemory::default();
        starting.words(BIAS + 0x4000, &[0]);
        assert!(matches!(file.clone().attach(9, &starting, BIAS), Attach::NotYet));
        assert!(matches!(file.attach(9, &FakeMemory::default(), BIAS), Attach::Failed(_)));
    }
}
