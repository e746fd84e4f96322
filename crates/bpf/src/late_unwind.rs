//! Late unwinding: the rest of a user stack the BPF native unwinder could
//! not walk because the process (or the mapping of a pc) was not loaded
//! yet, unwound in user space from the stack copy the sample carries
//! ([`StackCopy`]) once the process manager has loaded it.
//!
//! The rules are the BPF unwinder's, step for step
//! (`ebpf/native_unwinder.bpf.h`, `unwind_step`), over the same tables:
//! [`MapTables`] reads them from the BPF maps themselves (a few lookups
//! per frame, fine for the few samples concerned), so nothing is held
//! twice. Stack words are read only from the copied window; a read
//! outside it ends the stack with [`UnwindStop::OutsideCopy`]. The frame
//! words are the BPF unwinder's (exact pcs flagged with
//! [`FRAME_EXACT_PC`]), so traces need no special case. Interpreter loops
//! are unwound as native frames.

use crate::arch::{plt_cfa, RETURN_ADDRESS_BELOW_CFA, UCONTEXT_RBP, UCONTEXT_RIP, UCONTEXT_RSP};
use crate::contract::c::{self, DELTA_SEARCH_STEPS};
use crate::contract::read;
use crate::sample::StackCopy;
use crate::types::{
    delta_page_key, range_chunk_key, ProcessRangesValue, RangeChunk, UnwindRuleValue, UnwindStop, UserFrame,
    CFA_BASE_RBP, DELTA_PAGE_BITS, MAPPING_KIND_NATIVE, PROCESS_RANGES_MAX, RANGES_PER_CHUNK, RBP_AT_CFA, RBP_AT_RBP,
    RULE_ID_GO_MCALL, RULE_ID_GO_MORESTACK, RULE_ID_INVALID, RULE_ID_NO_COVERAGE, RULE_ID_SIGNAL, RULE_ID_STOP,
    RULE_ID_UNFOLLOWED_SWITCH, RULE_KIND_CFA, RULE_KIND_CFA_DEREF, RULE_KIND_PLT, RULE_KIND_STACK_SWITCH,
};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashMap;

/// The BPF unwinder's bounds, which user space follows too.
const MAX_STACK_SWITCHES: u8 = c::MAX_STACK_SWITCHES as u8;
/// Delta arrays kept open between lookups (by map id).
const OPEN_ARRAYS: usize = 8;
/// Rule ids remembered by (file, address): a rule id costs a dozen map
/// lookups (system calls) and the same return addresses come back in
/// stack after stack. A file's tables never change under its id, so an
/// answer stays true; the cache is emptied when full.
const CACHED_RULE_IDS: usize = 16_384;

/// What a process's ranges (`process_ranges`) say about an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TableMapping {
    /// No entry: the pid is not loaded.
    UnknownPid,
    /// The pid is known; the address is in none of its ranges.
    UnknownPc,
    /// Executable memory without unwind tables.
    NoUnwindInfo,
    /// A file with deltas.
    Native { file_id: u64, bias: u64 },
}

/// The tables the unwinder reads, as the BPF maps hold them.
pub(crate) trait UnwindTables {
    /// What `pid` has mapped at `address`.
    fn mapping(&mut self, pid: u32, address: u64) -> TableMapping;
    /// The rule id in effect at `vaddr` of the file, or why there is none
    /// (`find_rule`).
    fn rule_id(&mut self, file_id: u64, vaddr: u64) -> Result<u16, UnwindStop>;
    /// `unwind_rules[id]`.
    fn rule(&mut self, id: u16) -> Option<UnwindRuleValue>;
}

/// The frames unwound in user space from a stack copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateUnwind {
    /// Frame words, leaf first, starting with the copy's own pc (the
    /// frame the BPF unwinder recorded last).
    pub frames: Vec<u64>,
    /// Why the stack ends there.
    pub stop: UnwindStop,
}

/// The copied window of the stack.
struct Window<'a> {
    base: u64,
    bytes: &'a [u8],
}

impl Window<'_> {
    fn read(&self, address: u64) -> Result<u64, UnwindStop> {
        let offset = address.checked_sub(self.base).ok_or(UnwindStop::OutsideCopy)?;
        let offset = usize::try_from(offset).map_err(|_| UnwindStop::OutsideCopy)?;
        let end = offset.checked_add(8).ok_or(UnwindStop::OutsideCopy)?;
        let word = self.bytes.get(offset..end).ok_or(UnwindStop::OutsideCopy)?;
        Ok(u64::from_ne_bytes(word.try_into().expect("8 bytes")))
    }
}

/// Unwinds from `copy` with `tables`, collecting at most `max_frames`
/// frames.
pub(crate) fn unwind(tables: &mut impl UnwindTables, pid: u32, copy: &StackCopy, max_frames: usize) -> LateUnwind {
    let mut frames = Vec::new();
    let stop = unwind_into(tables, pid, copy, max_frames, &mut frames);
    LateUnwind { frames, stop }
}

fn unwind_into(
    tables: &mut impl UnwindTables,
    pid: u32,
    copy: &StackCopy,
    max_frames: usize,
    frames: &mut Vec<u64>,
) -> UnwindStop {
    let window = Window { base: copy.sp, bytes: &copy.bytes };
    let (mut pc, mut sp, mut fp, mut exact) = (copy.pc, copy.sp, copy.fp, copy.exact);
    let mut switches = copy.stack_switches;
    loop {
        if frames.len() >= max_frames {
            return UnwindStop::MaxFrames;
        }
        frames.push(UserFrame::native_word(pc, exact));
        // A return address stands for its call, which may be the last
        // instruction of its function.
        let lookup = if exact { pc } else { pc.wrapping_sub(1) };
        let (file_id, bias) = match tables.mapping(pid, lookup) {
            TableMapping::UnknownPid => return UnwindStop::UnknownPid,
            TableMapping::UnknownPc => return UnwindStop::UnknownPc,
            TableMapping::NoUnwindInfo => return UnwindStop::NoUnwindInfo,
            TableMapping::Native { file_id, bias } => (file_id, bias),
        };
        let rule_id = match tables.rule_id(file_id, lookup.wrapping_sub(bias)) {
            Ok(id) => id,
            Err(stop) => return stop,
        };
        match rule_id {
            RULE_ID_NO_COVERAGE => return UnwindStop::NoCoverage,
            RULE_ID_INVALID => return UnwindStop::InvalidRule,
            RULE_ID_STOP => return UnwindStop::Root,
            // Following morestack or mcall needs the thread's current g
            // (its TLS), which a stack copy does not hold.
            RULE_ID_UNFOLLOWED_SWITCH | RULE_ID_GO_MORESTACK | RULE_ID_GO_MCALL => return UnwindStop::StackSwitch,
            RULE_ID_SIGNAL => {
                // The trampoline is no frame: the interrupted code is,
                // at an exact pc.
                frames.pop();
                let read = |offset: u64| window.read(sp.wrapping_add(offset));
                let (new_fp, new_sp, new_pc) = match (read(UCONTEXT_RBP), read(UCONTEXT_RSP), read(UCONTEXT_RIP)) {
                    (Ok(f), Ok(s), Ok(p)) => (f, s, p),
                    _ => return UnwindStop::OutsideCopy,
                };
                (fp, sp, pc, exact) = (new_fp, new_sp, new_pc, true);
                if pc == 0 {
                    return UnwindStop::ZeroPc;
                }
                continue;
            }
            _ => {}
        }
        let Some(rule) = tables.rule(rule_id) else { return UnwindStop::Internal };
        let base = if rule.cfa_base == CFA_BASE_RBP { fp } else { sp };
        let cfa = match rule.kind {
            RULE_KIND_CFA => base.wrapping_add(i64::from(rule.cfa_offset) as u64),
            RULE_KIND_CFA_DEREF => match window.read(base.wrapping_add(i64::from(rule.cfa_offset) as u64)) {
                Ok(value) => value.wrapping_add(i64::from(rule.deref_outer) as u64),
                Err(stop) => return stop,
            },
            RULE_KIND_PLT => plt_cfa(sp, pc, rule.plt_threshold),
            RULE_KIND_STACK_SWITCH => {
                if switches >= MAX_STACK_SWITCHES {
                    return UnwindStop::StackSwitch;
                }
                switches += 1;
                let cfa = fp.wrapping_add(i64::from(rule.cfa_offset) as u64);
                if cfa & 7 != 0 {
                    return UnwindStop::BadSp;
                }
                cfa
            }
            _ => return UnwindStop::Internal,
        };
        if cfa <= sp && rule.kind != RULE_KIND_STACK_SWITCH {
            return UnwindStop::BadSp;
        }
        let return_address = match window.read(cfa.wrapping_sub(RETURN_ADDRESS_BELOW_CFA)) {
            Ok(v) => v,
            Err(stop) => return stop,
        };
        let saved_fp = match rule.rbp_kind {
            RBP_AT_CFA => window.read(cfa.wrapping_add(i64::from(rule.rbp_offset) as u64)),
            RBP_AT_RBP => window.read(fp.wrapping_add(i64::from(rule.rbp_offset) as u64)),
            _ => Ok(fp),
        };
        match saved_fp {
            Ok(v) => fp = v,
            Err(stop) => return stop,
        }
        if return_address == 0 {
            return UnwindStop::ZeroPc;
        }
        (pc, sp, exact) = (return_address, cfa, false);
    }
}

/// The native unwinder's tables read from its BPF maps. Made by
/// [`crate::Sampler::map_tables`]; only reads.
pub struct MapTables {
    process_ranges: MapHandle,
    range_chunks: MapHandle,
    delta_pages: MapHandle,
    file_deltas: MapHandle,
    unwind_rules: MapHandle,
    /// Delta arrays opened by id, most recent last.
    arrays: Vec<(u32, MapHandle)>,
    /// Found rule ids by (table key, ELF address) (see [`CACHED_RULE_IDS`]).
    rule_ids: HashMap<(u64, u64), u16>,
    /// Rules by id: ids are handed out once and never reused.
    rules: HashMap<u16, UnwindRuleValue>,
    /// The process's ranges and range chunks read during one call
    /// ([`MapTables::unwind`], [`MapTables::is_loaded`]): a sample's
    /// frames fall in a few mappings, each then read once, not once a
    /// frame. Never kept across calls: the process manager may load the
    /// process again meanwhile.
    process: Option<(u32, ProcessRangesValue)>,
    chunks: Vec<(usize, RangeChunk)>,
    /// Map lookups made, and answers taken from the caches instead.
    lookups: LookupCounts,
}

/// What [`MapTables`] asked the kernel, and what its caches answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupCounts {
    /// Map lookups of the unwinding itself (each a system call).
    pub map_lookups: u64,
    /// Map lookups that asked whether a sample's process was loaded yet
    /// ([`MapTables::is_loaded`]): they grow with the wait, not with the
    /// samples unwound.
    pub readiness_lookups: u64,
    /// Rule ids, rules, and a call's process ranges and range chunks
    /// answered from the caches.
    pub cache_hits: u64,
}

impl MapTables {
    pub(crate) fn new(
        process_ranges: MapHandle,
        range_chunks: MapHandle,
        delta_pages: MapHandle,
        file_deltas: MapHandle,
        unwind_rules: MapHandle,
    ) -> MapTables {
        MapTables {
            process_ranges,
            range_chunks,
            delta_pages,
            file_deltas,
            unwind_rules,
            arrays: Vec::new(),
            rule_ids: HashMap::new(),
            rules: HashMap::new(),
            process: None,
            chunks: Vec::new(),
            lookups: LookupCounts::default(),
        }
    }

    /// Forgets the ranges read by the last call.
    fn forget_ranges(&mut self) {
        self.process = None;
        self.chunks.clear();
    }

    /// The lookups made so far.
    pub fn lookup_counts(&self) -> LookupCounts {
        self.lookups
    }

    /// Whether the unwinder can unwind `address` of `pid`: the address
    /// lies in a file whose deltas are loaded. A mapping loaded without
    /// unwind information is not ready: its file may still be analysed
    /// (the process manager loads a process with the files that are ready
    /// and marks the others so until they are); a sample there waits, up
    /// to the queue's timeout.
    pub fn is_loaded(&mut self, pid: u32, address: u64) -> bool {
        self.forget_ranges();
        let before = self.lookups.map_lookups;
        let loaded = matches!(self.mapping(pid, address), TableMapping::Native { .. });
        self.lookups.readiness_lookups += self.lookups.map_lookups - before;
        self.lookups.map_lookups = before;
        loaded
    }

    /// Goes on unwinding the sample of `pid` the copy belongs to,
    /// collecting at most `max_frames` frames (the first is the copy's
    /// own pc).
    pub fn unwind(&mut self, pid: u32, copy: &StackCopy, max_frames: usize) -> LateUnwind {
        self.forget_ranges();
        unwind(self, pid, copy, max_frames)
    }

    fn delta_array(&mut self, file_id: u64) -> Option<&MapHandle> {
        self.lookups.map_lookups += 1;
        let value = self.file_deltas.lookup(&file_id.to_ne_bytes(), MapFlags::ANY).ok()??;
        let id = u32::from_ne_bytes(value.get(..4)?.try_into().ok()?);
        if let Some(i) = self.arrays.iter().position(|(open, _)| *open == id) {
            let entry = self.arrays.remove(i);
            self.arrays.push(entry);
        } else {
            let handle = MapHandle::from_map_id(id).ok()?;
            if self.arrays.len() >= OPEN_ARRAYS {
                self.arrays.remove(0);
            }
            self.arrays.push((id, handle));
        }
        self.arrays.last().map(|(_, h)| h)
    }
}

/// Entry `index` of a delta array (two per element), as `delta_at`.
fn delta_at(array: &MapHandle, index: u32) -> Option<u32> {
    let value = array.lookup(&(index >> 1).to_ne_bytes(), MapFlags::ANY).ok()??;
    let pair = u64::from_ne_bytes(value.get(..8)?.try_into().ok()?);
    Some(if index & 1 != 0 { (pair >> 32) as u32 } else { pair as u32 })
}

impl UnwindTables for MapTables {
    fn mapping(&mut self, pid: u32, address: u64) -> TableMapping {
        // The same two searches as lookup_mapping (mappings.bpf.h).
        let process = match self.process {
            Some((read_for, process)) if read_for == pid => {
                self.lookups.cache_hits += 1;
                process
            }
            _ => {
                self.lookups.map_lookups += 1;
                let Some(process) = self
                    .process_ranges
                    .lookup(&pid.to_ne_bytes(), MapFlags::ANY)
                    .ok()
                    .flatten()
                    .and_then(|v| read::<ProcessRangesValue>(&v))
                else {
                    return TableMapping::UnknownPid;
                };
                self.process = Some((pid, process));
                self.chunks.clear();
                process
            }
        };
        let count = process.count as usize;
        if count == 0 || count > PROCESS_RANGES_MAX as usize {
            return TableMapping::UnknownPc;
        }
        let chunks = count.div_ceil(RANGES_PER_CHUNK as usize);
        let index = process.chunk_start[..chunks].partition_point(|&start| start <= address);
        let Some(index) = index.checked_sub(1) else { return TableMapping::UnknownPc };
        let read = match self.chunks.iter().position(|(i, _)| *i == index) {
            Some(read) => {
                self.lookups.cache_hits += 1;
                read
            }
            None => {
                let key = range_chunk_key(pid, process.generation, index as u32);
                self.lookups.map_lookups += 1;
                let Some(chunk) =
                    self.range_chunks.lookup(&key, MapFlags::ANY).ok().flatten().and_then(|v| read::<RangeChunk>(&v))
                else {
                    return TableMapping::UnknownPc;
                };
                // At most RANGE_CHUNKS_MAX, all of one process.
                self.chunks.push((index, chunk));
                self.chunks.len() - 1
            }
        };
        let chunk = &self.chunks[read].1;
        let in_chunk = (count - index * RANGES_PER_CHUNK as usize).min(RANGES_PER_CHUNK as usize);
        let ranges = &chunk.ranges[..in_chunk];
        let at = ranges.partition_point(|r| r.start <= address);
        let Some(range) = at.checked_sub(1).map(|i| &ranges[i]).filter(|r| address < r.end) else {
            return TableMapping::UnknownPc;
        };
        let m = range.mapping;
        match m.kind {
            MAPPING_KIND_NATIVE => TableMapping::Native { file_id: m.file_id, bias: m.bias },
            _ => TableMapping::NoUnwindInfo,
        }
    }

    fn rule_id(&mut self, file_id: u64, vaddr: u64) -> Result<u16, UnwindStop> {
        if let Some(&id) = self.rule_ids.get(&(file_id, vaddr)) {
            self.lookups.cache_hits += 1;
            return Ok(id);
        }
        let id = self.search_rule_id(file_id, vaddr)?;
        if self.rule_ids.len() >= CACHED_RULE_IDS {
            self.rule_ids.clear();
        }
        self.rule_ids.insert((file_id, vaddr), id);
        Ok(id)
    }

    fn rule(&mut self, id: u16) -> Option<UnwindRuleValue> {
        if let Some(&rule) = self.rules.get(&id) {
            self.lookups.cache_hits += 1;
            return Some(rule);
        }
        self.lookups.map_lookups += 1;
        let value = self.unwind_rules.lookup(&u32::from(id).to_ne_bytes(), MapFlags::ANY).ok()??;
        let rule = read::<UnwindRuleValue>(&value)?;
        self.rules.insert(id, rule);
        Some(rule)
    }
}

impl MapTables {
    /// `find_rule`'s binary search over the file's deltas, in the maps.
    fn search_rule_id(&mut self, file_id: u64, vaddr: u64) -> Result<u16, UnwindStop> {
        let page = vaddr >> DELTA_PAGE_BITS;
        self.lookups.map_lookups += 1;
        let value = match self.delta_pages.lookup(&delta_page_key(file_id, page), MapFlags::ANY) {
            Ok(Some(v)) if v.len() >= 8 => v,
            _ => return Err(UnwindStop::NoDeltas),
        };
        let first = u32::from_ne_bytes(value[..4].try_into().expect("4 bytes"));
        let n = u32::from_ne_bytes(value[4..8].try_into().expect("4 bytes"));
        let Some(array) = self.delta_array(file_id) else { return Err(UnwindStop::NoDeltas) };
        let target = (vaddr & ((1 << DELTA_PAGE_BITS) - 1)) as u16;
        let mut reads = 0;
        let entry = search_page(array, first, n, target, &mut reads);
        self.lookups.map_lookups += reads;
        Ok((entry? >> 16) as u16)
    }
}

/// The search within one page's `n` deltas from entry `first`: the last
/// whose offset is at most `target`. Counts its reads of the array in
/// `reads`, also when one fails.
fn search_page(array: &MapHandle, first: u32, mut n: u32, target: u16, reads: &mut u64) -> Result<u32, UnwindStop> {
    let mut read = |index: u32| {
        *reads += 1;
        delta_at(array, first.wrapping_add(index)).ok_or(UnwindStop::Internal)
    };
    let mut lo = 0u32;
    for _ in 0..DELTA_SEARCH_STEPS {
        if n <= 1 {
            break;
        }
        let half = n / 2;
        if read(lo + half)? as u16 <= target {
            lo += half;
        }
        n -= half;
    }
    read(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CFA_BASE_RSP, FRAME_EXACT_PC, RBP_UNCHANGED};
    use crate::EncodedDeltas;
    use profiler_elf::RuleId;
    use std::collections::HashMap;

    const PID: u32 = 42;
    /// The test file is mapped at [BASE, BASE + 0x10000) with bias BASE.
    const BASE: u64 = 0x40_0000;
    const SP: u64 = 0x7ffe_1000;

    /// Rule ids of the hand-built table.
    const R_RSP8: u16 = 10; // CFA = rsp + 8: a leaf, nothing pushed
    const R_RSP24: u16 = 11; // CFA = rsp + 24, rbp at CFA - 16
    const R_RBP16: u16 = 12; // CFA = rbp + 16, rbp at CFA - 16
    const R_DEREF: u16 = 13; // CFA = *(rsp + 8) + 16
    const R_PLT: u16 = 14; // PLT, threshold 11
    const R_SWITCH: u16 = 15; // stack switch: CFA = rbp + 16, rbp at CFA - 16

    struct HandTables {
        deltas: EncodedDeltas,
        rules: HashMap<u16, UnwindRuleValue>,
        /// [start, end) mappings beyond the test file.
        unknown_from: u64,
    }

    fn rule(kind: u8, base: u8, cfa: i32, rbp_kind: u8, rbp: i32) -> UnwindRuleValue {
        UnwindRuleValue {
            kind,
            cfa_base: base,
            rbp_kind,
            cfa_offset: cfa,
            rbp_offset: rbp,
            ..UnwindRuleValue::default()
        }
    }

    impl HandTables {
        /// Functions of the file, by offset: 0x100 rsp+8, 0x200 rsp+24,
        /// 0x300 rbp+16, 0x400 deref, 0x500 PLT, 0x600 signal
        /// trampoline, 0x700 root (_start), 0x800 stack switch, 0x900
        /// invalid, 0xa00..: no coverage.
        fn new() -> HandTables {
            let deltas = EncodedDeltas::encode(&[
                (0x100, RuleId(R_RSP8)),
                (0x200, RuleId(R_RSP24)),
                (0x300, RuleId(R_RBP16)),
                (0x400, RuleId(R_DEREF)),
                (0x500, RuleId(R_PLT)),
                (0x600, RuleId(RULE_ID_SIGNAL)),
                (0x700, RuleId(RULE_ID_STOP)),
                (0x800, RuleId(R_SWITCH)),
                (0x900, RuleId(RULE_ID_INVALID)),
                (0xa00, RuleId(RULE_ID_NO_COVERAGE)),
            ]);
            let mut rules = HashMap::new();
            rules.insert(R_RSP8, rule(RULE_KIND_CFA, CFA_BASE_RSP, 8, RBP_UNCHANGED, 0));
            rules.insert(R_RSP24, rule(RULE_KIND_CFA, CFA_BASE_RSP, 24, RBP_AT_CFA, -16));
            rules.insert(R_RBP16, rule(RULE_KIND_CFA, CFA_BASE_RBP, 16, RBP_AT_CFA, -16));
            rules.insert(
                R_DEREF,
                UnwindRuleValue { deref_outer: 16, ..rule(RULE_KIND_CFA_DEREF, CFA_BASE_RSP, 8, RBP_UNCHANGED, 0) },
            );
            rules.insert(R_PLT, UnwindRuleValue { plt_threshold: 11, ..rule(RULE_KIND_PLT, 0, 0, RBP_UNCHANGED, 0) });
            rules.insert(R_SWITCH, rule(RULE_KIND_STACK_SWITCH, CFA_BASE_RBP, 16, RBP_AT_CFA, -16));
            HandTables { deltas, rules, unknown_from: BASE + 0x1_0000 }
        }
    }

    impl UnwindTables for HandTables {
        fn mapping(&mut self, pid: u32, address: u64) -> TableMapping {
            if pid != PID {
                TableMapping::UnknownPid
            } else if (BASE..self.unknown_from).contains(&address) {
                TableMapping::Native { file_id: 1, bias: BASE }
            } else {
                TableMapping::UnknownPc
            }
        }

        fn rule_id(&mut self, file_id: u64, vaddr: u64) -> Result<u16, UnwindStop> {
            assert_eq!(file_id, 1);
            self.deltas.lookup(vaddr).map(|r| r.0).ok_or(UnwindStop::NoDeltas)
        }

        fn rule(&mut self, id: u16) -> Option<UnwindRuleValue> {
            self.rules.get(&id).copied()
        }
    }

    /// A stack window at SP holding `words` (8-byte slots from SP).
    fn copy(pc: u64, fp: u64, exact: bool, words: &[u64]) -> StackCopy {
        StackCopy {
            pc,
            sp: SP,
            fp,
            exact,
            stack_switches: 0,
            bytes: words.iter().flat_map(|w| w.to_ne_bytes()).collect(),
        }
    }

    fn run(c: &StackCopy) -> LateUnwind {
        unwind(&mut HandTables::new(), PID, c, 256)
    }

    #[test]
    fn cfa_rules_walk_to_the_root() {
        // leaf at 0x110 (rsp+8: ra at SP) -> 0x210 (rsp+24: ra at SP+24,
        // rbp at SP+16) -> 0x310 (rbp+16 with the rbp just restored)
        // -> _start.
        let fp_frame = SP + 0x40;
        let mut words = vec![0u64; 16];
        words[0] = BASE + 0x210; // leaf's return address
        words[2] = fp_frame; // saved rbp of the 0x210 frame (CFA-16)
        words[3] = BASE + 0x310; // its return address (CFA-8, CFA = SP+8+24)
        words[8] = 0x1234; // at rbp: the caller's rbp (CFA-16 = rbp)
        words[9] = BASE + 0x701; // at rbp+8: return address into _start
        let late = run(&copy(BASE + 0x110, 0, true, &words));
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, BASE + 0x210, BASE + 0x310, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    #[test]
    fn return_addresses_are_looked_up_one_byte_back() {
        // A return address at 0x200 belongs to the call ending 0x1ff:
        // the rsp+8 rule, not rsp+24.
        let words = [BASE + 0x701, 0, 0];
        let late = run(&StackCopy { pc: BASE + 0x200, ..copy(0, 0, false, &words) });
        assert_eq!(late.frames, vec![BASE + 0x200, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    #[test]
    fn deref_and_plt_rules() {
        // Deref: CFA = *(SP + 8) + 16 = SP + 0x20 + 16; ra at CFA - 8.
        let mut words = vec![0u64; 8];
        words[1] = SP + 0x20;
        words[5] = BASE + 0x701;
        let late = run(&copy(BASE + 0x410, 0, true, &words));
        assert_eq!(late.frames, vec![(BASE + 0x410) | FRAME_EXACT_PC, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
        // PLT below the threshold: CFA = SP + 8; at or above: SP + 16.
        let late = run(&copy(BASE + 0x505, 0, true, &[BASE + 0x701, 0]));
        assert_eq!(late.frames[1], BASE + 0x701);
        let late = run(&copy(BASE + 0x50b, 0, true, &[0, BASE + 0x701]));
        assert_eq!(late.frames[1], BASE + 0x701);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    #[test]
    fn signal_frames_restore_the_interrupted_registers() {
        // At the trampoline (0x600) SP is the ucontext: rbp, rsp and rip
        // at 120, 160, 168. The interrupted code (0x110, exact) is a leaf
        // whose return address is at the restored rsp.
        let mut words = vec![0u64; 32];
        words[15] = 0x5555; // rbp
        words[20] = SP + 0xc0; // rsp
        words[21] = BASE + 0x110; // rip
        words[24] = BASE + 0x701; // at SP + 0xc0
        let late = run(&copy(BASE + 0x601, 0, false, &words));
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    #[test]
    fn reads_outside_the_window_stop_distinctly() {
        // The return address would be at CFA - 8 = SP + 16: not copied
        // (2 words hold SP .. SP + 16).
        let late = run(&copy(BASE + 0x210, 0, true, &[0, 0]));
        assert_eq!(late.frames, vec![(BASE + 0x210) | FRAME_EXACT_PC]);
        assert_eq!(late.stop, UnwindStop::OutsideCopy);
        // The word a deref rule reads is past the window.
        let late = run(&copy(BASE + 0x410, 0, true, &[0]));
        assert_eq!(late.stop, UnwindStop::OutsideCopy);
        // A signal frame whose ucontext is cut.
        let late = run(&copy(BASE + 0x601, 0, false, &[0; 16]));
        assert_eq!((late.frames.len(), late.stop), (0, UnwindStop::OutsideCopy));
        // A word straddling the end.
        let mut c = copy(BASE + 0x110, 0, true, &[BASE + 0x701]);
        c.bytes.truncate(7);
        assert_eq!(run(&c).stop, UnwindStop::OutsideCopy);
    }

    #[test]
    fn stops_as_the_bpf_unwinder_does() {
        assert_eq!(run(&copy(BASE + 0x910, 0, true, &[])).stop, UnwindStop::InvalidRule);
        assert_eq!(run(&copy(BASE + 0xa10, 0, true, &[])).stop, UnwindStop::NoCoverage);
        assert_eq!(run(&copy(BASE + 0x2_0000, 0, true, &[])).stop, UnwindStop::UnknownPc);
        assert_eq!(
            unwind(&mut HandTables::new(), 7, &copy(BASE + 0x110, 0, true, &[]), 256).stop,
            UnwindStop::UnknownPid
        );
        // A zero return address, and a CFA that does not grow (rbp + 16
        // below SP).
        assert_eq!(run(&copy(BASE + 0x110, 0, true, &[0])).stop, UnwindStop::ZeroPc);
        assert_eq!(run(&copy(BASE + 0x310, SP - 0x100, true, &[0; 4])).stop, UnwindStop::BadSp);
        // The frame limit.
        let late = unwind(&mut HandTables::new(), PID, &copy(BASE + 0x110, 0, true, &[BASE + 0x110; 4]), 2);
        assert_eq!((late.frames.len(), late.stop), (2, UnwindStop::MaxFrames));
        // Missing rule value: internal.
        let mut t = HandTables::new();
        t.rules.remove(&R_RSP8);
        assert_eq!(unwind(&mut t, PID, &copy(BASE + 0x110, 0, true, &[]), 256).stop, UnwindStop::Internal);
    }

    #[test]
    fn stack_switches_follow_rbp_anywhere_but_are_bounded() {
        // CFA = rbp + 16 may lie below SP (another stack), inside the
        // window here: rbp = SP + 0x10 -> CFA = SP + 0x20.
        let mut words = vec![0u64; 8];
        words[2] = 0x77; // saved rbp at CFA - 16
        words[3] = BASE + 0x701; // ra at CFA - 8
        let late = run(&copy(BASE + 0x810, SP + 0x10, true, &words));
        assert_eq!(late.frames, vec![(BASE + 0x810) | FRAME_EXACT_PC, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
        // Misaligned: bad sp; too many already: stack switch.
        assert_eq!(run(&copy(BASE + 0x810, SP + 0x11, true, &words)).stop, UnwindStop::BadSp);
        let c = StackCopy { stack_switches: MAX_STACK_SWITCHES, ..copy(BASE + 0x810, SP + 0x10, true, &words) };
        assert_eq!(run(&c).stop, UnwindStop::StackSwitch);
    }

    /// A process's first frames: ld.so's `_start` calls `_dl_start`
    /// (`mov %rsp,%rdi; call _dl_start`) and has no CFI. With the real
    /// table of ld.so, a stack at `_dl_start`'s first instruction ends at
    /// `_start` as a root (it ended there without coverage before).
    #[test]
    fn ld_so_start_up_ends_at_its_entry_point_as_a_root() {
        let elf = profiler_elf::ElfFile::open("/lib64/ld-linux-x86-64.so.2").expect("open ld.so");
        let entry = elf.entry();
        // `mov %rsp,%rdi` (3 bytes), then `call rel32`.
        let call = elf.bytes_at_vaddr(entry + 3, 5).expect("ld.so's entry code");
        if elf.bytes_at_vaddr(entry, 3) != Some(&[0x48, 0x89, 0xe7][..]) || call[0] != 0xe8 {
            eprintln!("SKIPPED: ld.so's entry is not `mov %rsp,%rdi; call _dl_start`");
            return;
        }
        let returns_to = entry + 8;
        let dl_start = returns_to.wrapping_add_signed(i64::from(i32::from_le_bytes(call[1..5].try_into().unwrap())));
        let table = elf.unwind_table();
        let mut interner = profiler_elf::RuleInterner::new();
        let ids = interner.intern_deltas(&table.deltas.to_vec()).expect("intern");
        let rules = ids.iter().filter_map(|&(_, id)| Some((id.0, crate::types::unwind_rule_of(&interner.get(id)?))));
        let mut tables = HandTables {
            deltas: EncodedDeltas::encode(&ids),
            rules: rules.collect(),
            unknown_from: BASE + table.deltas.last().map_or(0, |d| d.address),
        };
        // At `_dl_start`'s first instruction its return address is on top.
        let late = unwind(&mut tables, PID, &copy(BASE + dl_start, 0, true, &[BASE + returns_to, 0, 0]), 256);
        assert_eq!(late.frames, vec![(BASE + dl_start) | FRAME_EXACT_PC, BASE + returns_to]);
        assert_eq!(late.stop, UnwindStop::Root);
    }
}
