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
//! are unwound as native frames; V8's code and a JVM's code cache (ranges
//! marked for their unwinders, in a process with its `v8_processes` or
//! `hotspot_processes` entry) are walked as the BPF unwinders do
//! ([`crate::late_v8`], [`crate::late_hotspot`]), then the native walk
//! goes on from their entry frame.

use crate::arch::{plt_cfa, RETURN_ADDRESS_BELOW_CFA, UCONTEXT_RBP, UCONTEXT_RIP, UCONTEXT_RSP};
use crate::contract::c::{self, DELTA_SEARCH_STEPS};
use crate::contract::read;
use crate::late_hotspot::{self, HotspotProcess, HotspotWalk, Jvm, LateHotspot};
use crate::late_v8::{self, LateV8, Regs, V8Process, V8Walk};
use crate::sample::StackCopy;
use crate::types::{
    delta_page_key, range_chunk_key, InterpreterUnwinder, ProcessRangesValue, RangeChunk, UnwindRuleValue, UnwindStop,
    UserFrame, CFA_BASE_RBP, DELTA_PAGE_BITS, MAPPING_FLAG_INTERPRETER_LOOP, MAPPING_KIND_NATIVE,
    MAPPING_KIND_NO_UNWIND_INFO, MAPPING_UNWINDER_SHIFT, PROCESS_RANGES_MAX, RANGES_PER_CHUNK, RBP_AT_CFA, RBP_AT_RBP,
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
    /// A runtime's code (a range marked for its unwinder: V8's, a JVM's
    /// code cache): in anonymous memory (`jit`), or in a file (`native`:
    /// its deltas, for a process without its runtime's entry, unwound
    /// natively as the BPF unwinder does then).
    RuntimeCode { unwinder: InterpreterUnwinder, jit: bool, native: Option<(u64, u64)> },
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
    /// `v8_processes[pid]`.
    fn v8_process(&mut self, pid: u32) -> Option<V8Process>;
    /// `hotspot_processes[pid]`.
    fn hotspot_process(&mut self, pid: u32) -> Option<HotspotProcess>;
    /// Fills `buf` from `pid`'s memory at `address`; false unless all of
    /// it could be read.
    fn read_memory(&mut self, pid: u32, address: u64, buf: &mut [u8]) -> bool;
}

/// The frames unwound in user space from a stack copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LateUnwind {
    /// Frame words, leaf first, starting with the copy's own pc (the
    /// frame the BPF unwinder recorded last).
    pub frames: Vec<u64>,
    /// Why the stack ends there.
    pub stop: UnwindStop,
    /// What the walk did in V8's frames.
    pub v8: LateV8,
    /// What the walk did in HotSpot's frames.
    pub hotspot: LateHotspot,
}

/// The copied window of the stack.
pub(crate) struct Window<'a> {
    base: u64,
    bytes: &'a [u8],
}

impl Window<'_> {
    pub(crate) fn read(&self, address: u64) -> Result<u64, UnwindStop> {
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
    let mut late = LateUnwind {
        frames: Vec::new(),
        stop: UnwindStop::Root,
        v8: LateV8::default(),
        hotspot: LateHotspot::default(),
    };
    late.stop = unwind_into(tables, pid, copy, max_frames, &mut frames, &mut late);
    late.frames = frames;
    late
}

fn unwind_into(
    tables: &mut impl UnwindTables,
    pid: u32,
    copy: &StackCopy,
    max_frames: usize,
    frames: &mut Vec<u64>,
    counts: &mut LateUnwind,
) -> UnwindStop {
    let window = Window { base: copy.sp, bytes: &copy.bytes };
    let (mut pc, mut sp, mut fp, mut exact) = (copy.pc, copy.sp, copy.fp, copy.exact);
    let mut switches = copy.stack_switches;
    // `v8_processes[pid]`, `hotspot_processes[pid]` (attached), looked up
    // at the first hand-over.
    let mut v8_process: Option<Option<V8Process>> = None;
    let mut jvm: Option<Option<Jvm>> = None;
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
            TableMapping::RuntimeCode { unwinder, native, .. } => {
                // The runtime's frames stand in the pc's place.
                frames.pop();
                let mut regs = Regs { pc, sp, fp, exact };
                let walked = match unwinder {
                    InterpreterUnwinder::V8 => {
                        let process = *v8_process.get_or_insert_with(|| tables.v8_process(pid));
                        process.map(|v8| {
                            let walk = V8Walk { pid, window: &window, v8, max_frames };
                            late_v8::walk(tables, &walk, &mut regs, frames, &mut counts.v8).inspect_err(|_| {
                                counts.v8.stopped = true;
                            })
                        })
                    }
                    InterpreterUnwinder::Hotspot => {
                        let attached = *jvm.get_or_insert_with(|| {
                            tables.hotspot_process(pid).and_then(|entry| late_hotspot::attach(tables, pid, entry))
                        });
                        attached.filter(|jvm| jvm.in_code_cache(pc)).map(|jvm| {
                            let walk = HotspotWalk { pid, window: &window, jvm, max_frames };
                            late_hotspot::walk(tables, &walk, &mut regs, frames, &mut counts.hotspot).map_err(|stop| {
                                counts.hotspot.stop = Some(stop);
                                stop.unwind_stop()
                            })
                        })
                    }
                    _ => None,
                };
                match walked {
                    Some(Ok(())) => {
                        Regs { pc, sp, fp, exact } = regs;
                        continue;
                    }
                    Some(Err(stop)) => return stop,
                    None => frames.push(UserFrame::native_word(pc, exact)),
                }
                // No entry (or, for a JVM, its code cache not set or the pc
                // outside it): unwound as native code (`STEP_JIT_STAYS_NATIVE`).
                match native {
                    Some(file) => file,
                    None => return UnwindStop::NoUnwindInfo,
                }
            }
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
    /// `v8_processes`: the V8 unwinder's layout of each Node process.
    v8_processes: MapHandle,
    /// `hotspot_processes`: the HotSpot unwinder's view of each JVM.
    hotspot_processes: MapHandle,
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
    /// Reads of a process's memory (the V8 walk's heap reads, the
    /// HotSpot walk's metadata and code reads; each a system call).
    pub memory_reads: u64,
}

/// `pid`'s memory at `address`, with `process_vm_readv`.
fn read_process_memory(pid: u32, address: u64, buf: &mut [u8]) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` describes `buf`, writable for its length; the
    // remote range is only read by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    usize::try_from(n) == Ok(buf.len())
}

impl MapTables {
    pub(crate) fn new(
        process_ranges: MapHandle,
        range_chunks: MapHandle,
        delta_pages: MapHandle,
        file_deltas: MapHandle,
        unwind_rules: MapHandle,
        v8_processes: MapHandle,
        hotspot_processes: MapHandle,
    ) -> MapTables {
        MapTables {
            process_ranges,
            range_chunks,
            delta_pages,
            file_deltas,
            unwind_rules,
            v8_processes,
            hotspot_processes,
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
        // V8's code is ready with the process's entry (the process
        // manager writes it before the ranges), or as native code without
        // it (an attach put off or failed: the BPF unwinder does the same).
        // A JVM's code cache is ready with its entry (written once
        // libjvm.so is analysed, after the ranges): a sample there waits.
        let loaded = match self.mapping(pid, address) {
            TableMapping::Native { .. } | TableMapping::RuntimeCode { native: Some(_), .. } => true,
            TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::V8, .. } => self.v8_process(pid).is_some(),
            TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::Hotspot, .. } => {
                self.hotspot_process(pid).is_some()
            }
            _ => false,
        };
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
        let slot = (m.flags >> MAPPING_UNWINDER_SHIFT) & c::MAPPING_UNWINDER_MASK;
        let unwinder =
            [InterpreterUnwinder::V8, InterpreterUnwinder::Hotspot].into_iter().find(|&u| u32::from(u as u8) == slot);
        if let Some(unwinder) = unwinder.filter(|_| m.flags & MAPPING_FLAG_INTERPRETER_LOOP != 0) {
            let native = (m.kind == MAPPING_KIND_NATIVE).then_some((m.file_id, m.bias));
            return TableMapping::RuntimeCode { unwinder, jit: m.kind == MAPPING_KIND_NO_UNWIND_INFO, native };
        }
        match m.kind {
            MAPPING_KIND_NATIVE => TableMapping::Native { file_id: m.file_id, bias: m.bias },
            _ => TableMapping::NoUnwindInfo,
        }
    }

    fn v8_process(&mut self, pid: u32) -> Option<V8Process> {
        self.lookups.map_lookups += 1;
        let value = self.v8_processes.lookup(&pid.to_ne_bytes(), MapFlags::ANY).ok()??;
        read::<V8Process>(&value)
    }

    fn hotspot_process(&mut self, pid: u32) -> Option<HotspotProcess> {
        self.lookups.map_lookups += 1;
        let value = self.hotspot_processes.lookup(&pid.to_ne_bytes(), MapFlags::ANY).ok()??;
        read::<HotspotProcess>(&value)
    }

    fn read_memory(&mut self, pid: u32, address: u64, buf: &mut [u8]) -> bool {
        self.lookups.memory_reads += 1;
        read_process_memory(pid, address, buf)
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
    use crate::late_hotspot::HotspotStop;
    use crate::types::{CFA_BASE_RSP, FRAME_EXACT_PC, RBP_UNCHANGED};
    use crate::EncodedDeltas;
    use profiler_elf::RuleId;
    use std::collections::HashMap;

    const PID: u32 = 42;
    /// The test file is mapped at [BASE, BASE + 0x10000) with bias BASE.
    const BASE: u64 = 0x40_0000;
    const SP: u64 = 0x7ffe_1000;
    /// V8's builtins in the test file (a loop range for its unwinder),
    /// and its JIT code (anonymous).
    const BUILTINS: u64 = BASE + 0x8000;
    const JIT: u64 = 0x5000_0000;
    /// A JVM's code cache (anonymous, one code heap).
    const CODE_CACHE: u64 = 0x6000_0000;

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
        /// The process's `v8_processes` entry.
        v8: Option<V8Process>,
        /// Its `hotspot_processes` entry.
        hotspot: Option<HotspotProcess>,
        /// Its memory: (address, bytes) regions.
        memory: Vec<(u64, Vec<u8>)>,
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
            HandTables { deltas, rules, unknown_from: BASE + 0x1_0000, v8: None, hotspot: None, memory: Vec::new() }
        }
    }

    impl UnwindTables for HandTables {
        fn mapping(&mut self, pid: u32, address: u64) -> TableMapping {
            if pid != PID {
                TableMapping::UnknownPid
            } else if (BUILTINS..BUILTINS + 0x1000).contains(&address) {
                TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::V8, jit: false, native: Some((1, BASE)) }
            } else if (JIT..JIT + 0x1000).contains(&address) {
                TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::V8, jit: true, native: None }
            } else if (CODE_CACHE..CODE_CACHE + 0x1_0000).contains(&address) {
                TableMapping::RuntimeCode { unwinder: InterpreterUnwinder::Hotspot, jit: true, native: None }
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

        fn v8_process(&mut self, pid: u32) -> Option<V8Process> {
            assert_eq!(pid, PID);
            self.v8
        }

        fn hotspot_process(&mut self, pid: u32) -> Option<HotspotProcess> {
            assert_eq!(pid, PID);
            self.hotspot
        }

        fn read_memory(&mut self, pid: u32, address: u64, buf: &mut [u8]) -> bool {
            assert_eq!(pid, PID);
            let Some((start, bytes)) = self.memory.iter().find(|(start, bytes)| {
                address >= *start && address.saturating_add(buf.len() as u64) <= start + bytes.len() as u64
            }) else {
                return false;
            };
            let at = (address - start) as usize;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            true
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
            v8: None,
            hotspot: None,
            memory: Vec::new(),
        };
        // At `_dl_start`'s first instruction its return address is on top.
        let late = unwind(&mut tables, PID, &copy(BASE + dl_start, 0, true, &[BASE + returns_to, 0, 0]), 256);
        assert_eq!(late.frames, vec![(BASE + dl_start) | FRAME_EXACT_PC, BASE + returns_to]);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    /// V8's layout in the tests: the slots of Node's frames; frame types
    /// entry 1, construct entry 2, exit 4.
    fn v8_layout() -> V8Process {
        V8Process {
            fp_marker: -8,
            fp_function: -16,
            fp_bytecode_array: -32,
            fp_bytecode_offset: -40,
            marker_entry: 1,
            marker_construct_entry: 2,
            smi_shift: 32,
            bytecode_offset_bias: 53,
            heap_object_map: 0,
            map_instance_type: 12,
            js_function_code: 48,
            code_instruction_start: 24,
            type_bytecode_array: 0xa0,
            ..V8Process::default()
        }
    }

    /// A frame marker: `StackFrame::Type << 1`.
    const fn marker(frame_type: u64) -> u64 {
        frame_type << 1
    }
    const EXIT: u64 = marker(4);
    const ENTRY: u64 = marker(1);
    /// Heap objects (tagged): two functions, a BytecodeArray, its map, the
    /// second function's Code and where its instructions start.
    const F1: u64 = 0x1000_0001;
    const F2: u64 = 0x1000_0101;
    const BYTECODE: u64 = 0x2000_0001;
    const MAP: u64 = 0x3000_0001;
    const CODE: u64 = 0x4000_0001;
    const CONTEXT: u64 = 0x6000_0001;
    const CODE_START: u64 = JIT + 0x100;

    /// A V8 word as the BPF unwinder writes it (`v8_record`, by hand).
    fn v8_word(function: u64, compiled: bool, offset: u64) -> u64 {
        let payload =
            if compiled { c::V8_FRAME_COMPILED } else { 0 } | offset << c::V8_FRAME_OFFSET_SHIFT | (function - 1) >> 3;
        UserFrame::interpreted_word(InterpreterUnwinder::V8 as u8, payload)
    }

    /// The stack of a runtime function called from JavaScript: a native
    /// leaf (0x110, its return address on top) called by CEntry (an exit
    /// frame at SP + 0x40), called by an interpreted frame (SP + 0x90,
    /// function F1 at bytecode 7), called by compiled code in JIT memory
    /// (SP + 0xe0, function F2 at 0x23 into its code), called from JSEntry
    /// (an entry frame at SP + 0x130) by native code (0x310: CFA = rbp + 16)
    /// which returns to `_start`. The heap holds what the walk reads.
    fn v8_stack() -> (HandTables, StackCopy) {
        let mut w = vec![0u64; 64];
        let slot = |fp_index: usize, off: i64| (fp_index as i64 + off / 8) as usize;
        w[0] = BUILTINS + 0x10; // into Builtins_CEntry
        let (exit, interp, compiled, entry, native) = (8, 18, 28, 38, 48);
        let fp = |i: usize| SP + 8 * i as u64;
        w[slot(exit, -8)] = EXIT;
        w[exit] = fp(interp);
        w[slot(exit, 8)] = BUILTINS + 0x110; // the interpreter's bytecode handler
        w[slot(interp, -40)] = (7 + 53) << 32;
        w[slot(interp, -32)] = BYTECODE;
        w[slot(interp, -16)] = F1;
        w[slot(interp, -8)] = CONTEXT;
        w[interp] = fp(compiled);
        w[slot(interp, 8)] = JIT + 0x123;
        w[slot(compiled, -16)] = F2;
        w[slot(compiled, -8)] = CONTEXT;
        w[compiled] = fp(entry);
        w[slot(compiled, 8)] = BUILTINS + 0x210; // into Builtins_JSEntry
        w[slot(entry, -8)] = ENTRY;
        w[entry] = fp(native);
        w[slot(entry, 8)] = BASE + 0x310;
        w[native] = 0;
        w[native + 1] = BASE + 0x701;
        let mut tables = HandTables::new();
        tables.v8 = Some(v8_layout());
        let mut map = vec![0u8; 16];
        map[12..14].copy_from_slice(&0xa0u16.to_ne_bytes());
        tables.memory = vec![
            (BYTECODE - 1, MAP.to_ne_bytes().to_vec()),
            (MAP - 1, map),
            (F2 - 1 + 48, CODE.to_ne_bytes().to_vec()),
            (CODE - 1 + 24, CODE_START.to_ne_bytes().to_vec()),
        ];
        (tables, copy(BASE + 0x110, fp(exit), true, &w))
    }

    #[test]
    fn v8_frames_are_walked_between_native_ones() {
        let (mut tables, c) = v8_stack();
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(
            late.frames,
            vec![
                (BASE + 0x110) | FRAME_EXACT_PC,
                v8_word(F1, false, 7),
                v8_word(F2, true, 0x23),
                BASE + 0x310,
                BASE + 0x701
            ]
        );
        assert_eq!(late.stop, UnwindStop::Root);
        assert_eq!(late.v8, LateV8 { walks: 1, frames: 2, stopped: false });
    }

    #[test]
    fn v8_13_compiled_frames_are_recorded_by_their_pc() {
        let (mut tables, c) = v8_stack();
        tables.v8 = Some(V8Process { compiled_by_pc: 1, ..v8_layout() });
        let late = unwind(&mut tables, PID, &c, 256);
        let by_pc = UserFrame::interpreted_word(InterpreterUnwinder::V8 as u8, c::V8_FRAME_COMPILED | (JIT + 0x123));
        assert_eq!(late.frames[1..3], [v8_word(F1, false, 7), by_pc]);
        assert_eq!(late.stop, UnwindStop::Root);
        // A compiled frame in the builtins (not JIT memory): its function,
        // offset unknown. F1's frame becomes one when its BytecodeArray is
        // not one.
        tables.memory.remove(1);
        tables.memory.push((MAP - 1, vec![0; 16]));
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames[1], v8_word(F1, true, c::V8_FRAME_OFFSET_MAX));
    }

    #[test]
    fn a_leaf_in_jit_code_starts_the_v8_walk() {
        // Sampled in F2's code: the copy's pc is JIT + 0x123, fp its frame.
        let (mut tables, mut c) = v8_stack();
        let compiled_fp = SP + 8 * 28;
        c.pc = JIT + 0x123;
        c.fp = compiled_fp;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![v8_word(F2, true, 0x23), BASE + 0x310, BASE + 0x701]);
        assert_eq!(late.stop, UnwindStop::Root);
    }

    #[test]
    fn v8_walks_stop_distinctly_with_the_frames_so_far() {
        // The interpreted frame's caller fp below its own: bad sp, after
        // F1's frame.
        let (mut tables, mut c) = v8_stack();
        c.bytes[8 * 18..8 * 19].copy_from_slice(&(SP + 8).to_ne_bytes());
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, v8_word(F1, false, 7)]);
        assert_eq!((late.stop, late.v8.stopped), (UnwindStop::BadSp, true));
        // The BytecodeArray's map cannot be read: read error, before F1.
        let (mut tables, c) = v8_stack();
        tables.memory.remove(1);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC]);
        assert_eq!((late.stop, late.v8.stopped), (UnwindStop::ReadError, true));
        // F2's code: the same after F1.
        let (mut tables, c) = v8_stack();
        tables.memory.remove(2);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, v8_word(F1, false, 7)]);
        assert_eq!(late.stop, UnwindStop::ReadError);
        // A frame slot past the copy.
        let (mut tables, mut c) = v8_stack();
        c.bytes.truncate(8 * 30);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames.len(), 3);
        assert_eq!(late.stop, UnwindStop::OutsideCopy);
        // Neither a marker nor a function: bad sp.
        let (mut tables, mut c) = v8_stack();
        c.bytes[8 * 26..8 * 27].copy_from_slice(&8u64.to_ne_bytes());
        assert_eq!(unwind(&mut tables, PID, &c, 256).stop, UnwindStop::BadSp);
        // A marker beyond V8's frame types.
        let (mut tables, mut c) = v8_stack();
        c.bytes[8 * 7..8 * 8].copy_from_slice(&marker(64).to_ne_bytes());
        assert_eq!(unwind(&mut tables, PID, &c, 256).stop, UnwindStop::BadSp);
        // The frame limit, within V8's frames.
        let (mut tables, c) = v8_stack();
        let late = unwind(&mut tables, PID, &c, 2);
        assert_eq!((late.frames.len(), late.stop), (2, UnwindStop::MaxFrames));
    }

    #[test]
    fn without_its_entry_v8_code_is_native() {
        // No v8_processes entry: the builtins are unwound with the file's
        // deltas (none there: no coverage), as the BPF unwinder does.
        let (mut tables, c) = v8_stack();
        tables.v8 = None;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, BUILTINS + 0x10]);
        assert_eq!((late.stop, late.v8.walks), (UnwindStop::NoCoverage, 0));
    }

    /// The JVM of the HotSpot tests: its code cache at CODE_CACHE (one
    /// heap of 64-byte segments), the template interpreter's code at
    /// INTERPRETER, the call stub's return address, an nmethod.
    const INTERPRETER: u64 = CODE_CACHE + 0x1000;
    const CALL_STUB_RETURN: u64 = CODE_CACHE + 0x3010;
    /// The nmethod's HeapBlock (16 bytes, its used flag at 8), then the
    /// blob: its frame size (4 words), compile id, deopt handler offset,
    /// orig pc offset.
    const BLOCK: u64 = CODE_CACHE + 0x4000;
    const BLOB: u64 = BLOCK + 16;
    const NMETHOD_PC: u64 = CODE_CACHE + 0x4100;
    const DEOPT_HANDLER: u64 = BLOB + 0x300;
    const COMPILE_ID: u32 = 0x1_2345;
    /// The JVM's variables and metadata.
    const SEGMAP: u64 = 0x7000_0000;
    const VARS: u64 = 0x7100_0000; // &_code, &_call_stub_return_address
    const QUEUE: u64 = 0x7200_0000; // the interpreter's StubQueue
    const METHOD_A: u64 = 0x7300_0000;
    const METHOD_B: u64 = 0x7300_0100;
    const CONST_A: u64 = 0x7400_0000;
    const CONST_B: u64 = 0x7400_1000;

    fn hotspot_layout() -> HotspotProcess {
        let mut p = HotspotProcess {
            code_low: CODE_CACHE,
            code_high: CODE_CACHE + 0x1_0000,
            interpreter_code: VARS,
            call_stub_return: VARS + 8,
            heap_count: 1,
            heap_block_size: 16,
            heap_block_used: 8,
            stub_queue_buffer: 0,
            stub_queue_limit: 8,
            blob_frame_size: 0,
            nmethod_compile_id: 4,
            nmethod_deopt_handler: 8,
            deopt_handler_is_offset: 1,
            nmethod_orig_pc_offset: 12,
            method_const_method: 8,
            const_method_size: 0x30,
            interp_method_slot: -3,
            interp_bcp_slot: -7,
            interp_sender_sp_slot: -1,
            ..HotspotProcess::default()
        };
        p.heaps[0] = c::hotspot_heap {
            low: CODE_CACHE,
            high: CODE_CACHE + 0x1_0000,
            segmap: SEGMAP,
            log2_segment_size: 6,
            reserved: 0,
        };
        p
    }

    /// A HotSpot frame word as the BPF unwinder writes it (by hand).
    fn interpreted(method: u64, bci: u64) -> u64 {
        UserFrame::interpreted_word(InterpreterUnwinder::Hotspot as u8, bci << 44 | method >> 3)
    }
    fn compiled(pc: u64, exact: bool) -> u64 {
        let payload = 1 << 60 | 0x2345 << 44 | 1 << 32 | if exact { 1 << 31 } else { 0 } | (pc - CODE_CACHE);
        UserFrame::interpreted_word(InterpreterUnwinder::Hotspot as u8, payload)
    }

    /// Slot indices (words from SP) of the frames of `hotspot_stack`.
    const FP_A: usize = 10;
    const SP_C: usize = 12;
    const FP_B: usize = 26;
    const FP_ENTRY: usize = 30;

    /// The stack of a JVM thread in the VM's C++ code: a native leaf
    /// (0x110, its return address on top) called by the interpreter
    /// (frame A at SP + 8 * FP_A: METHOD_A at bci 5), called by an
    /// nmethod (its frame of 4 words at SP + 8 * SP_C), called by the
    /// interpreter (frame B: METHOD_B at bci 0x20), called through the
    /// call stub (its entry frame at SP + 8 * FP_ENTRY) by native code
    /// (0x310: CFA = rbp + 16) that returns to `_start`.
    fn hotspot_stack() -> (HandTables, StackCopy) {
        let fp = |i: usize| SP + 8 * i as u64;
        let mut w = vec![0u64; 40];
        w[0] = INTERPRETER + 0x100;
        w[FP_A - 7] = CONST_A + 0x30 + 5;
        w[FP_A - 3] = METHOD_A;
        w[FP_A - 1] = fp(SP_C);
        w[FP_A] = 0x1234; // rbp of the interpreter's caller: any value
        w[FP_A + 1] = NMETHOD_PC;
        w[SP_C + 2] = fp(FP_B); // the nmethod's saved rbp
        w[SP_C + 3] = INTERPRETER + 0x200;
        w[FP_B - 7] = CONST_B + 0x30 + 0x20;
        w[FP_B - 3] = METHOD_B;
        w[FP_B - 1] = fp(FP_B + 2);
        w[FP_B] = fp(FP_ENTRY);
        w[FP_B + 1] = CALL_STUB_RETURN;
        w[FP_ENTRY] = fp(34);
        w[FP_ENTRY + 1] = BASE + 0x310;
        w[34] = 0;
        w[35] = BASE + 0x701;
        let mut tables = HandTables::new();
        tables.hotspot = Some(hotspot_layout());
        // The segment map: the nmethod's segments (0x100..) step back
        // to its first; the others are free.
        let mut segmap = vec![0xffu8; 0x400];
        for i in 0..0x40 {
            segmap[0x100 + i] = i as u8;
        }
        let mut block = vec![0u8; 0x30];
        block[8] = 1;
        block[16..20].copy_from_slice(&4i32.to_ne_bytes());
        block[20..24].copy_from_slice(&COMPILE_ID.to_ne_bytes());
        block[24..28].copy_from_slice(&((DEOPT_HANDLER - BLOB) as u32).to_ne_bytes());
        block[28..32].copy_from_slice(&8i32.to_ne_bytes());
        let vars: Vec<u8> = [QUEUE, CALL_STUB_RETURN].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut queue = INTERPRETER.to_ne_bytes().to_vec();
        queue.extend(0x1000i32.to_ne_bytes());
        tables.memory = vec![
            (SEGMAP, segmap),
            (BLOCK, block),
            (VARS, vars),
            (QUEUE, queue),
            (METHOD_A + 8, CONST_A.to_ne_bytes().to_vec()),
            (METHOD_B + 8, CONST_B.to_ne_bytes().to_vec()),
        ];
        (tables, copy(BASE + 0x110, fp(FP_A), true, &w))
    }

    fn set(c: &mut StackCopy, index: usize, value: u64) {
        c.bytes[8 * index..8 * index + 8].copy_from_slice(&value.to_ne_bytes());
    }

    #[test]
    fn hotspot_frames_are_walked_between_native_ones() {
        let (mut tables, c) = hotspot_stack();
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(
            late.frames,
            vec![
                (BASE + 0x110) | FRAME_EXACT_PC,
                interpreted(METHOD_A, 5),
                compiled(NMETHOD_PC, false),
                interpreted(METHOD_B, 0x20),
                BASE + 0x310,
                BASE + 0x701
            ]
        );
        assert_eq!(late.stop, UnwindStop::Root);
        assert_eq!(late.hotspot, LateHotspot { walks: 1, frames: 3, stop: None });
    }

    #[test]
    fn hotspot_code_heaps_are_read_from_the_jvm_when_the_entry_lacks_them() {
        let (mut tables, c) = hotspot_stack();
        let mut entry = HotspotProcess {
            code_low: 0,
            heap_count: 0,
            heaps: Default::default(),
            code_low_bound: 0x7500_0000,
            code_high_bound: 0x7500_0008,
            code_heaps: 0x7500_0010,
            growable_array_len: 0,
            growable_array_data: 8,
            code_heap_memory: 0x10,
            virtual_space_low: 0,
            virtual_space_high: 8,
            code_heap_segmap: 0x20,
            code_heap_log2_segment_size: 0x30,
            ..hotspot_layout()
        };
        let (array, heaps, heap) = (0x7600_0000u64, 0x7600_0100u64, 0x7600_0200u64);
        let words = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|w| w.to_ne_bytes()).collect() };
        let mut heap_bytes = words(&[0, 0, CODE_CACHE, CODE_CACHE + 0x1_0000, SEGMAP, 0]);
        heap_bytes.extend(6i32.to_ne_bytes());
        tables.memory.extend([
            (0x7500_0000, words(&[CODE_CACHE, CODE_CACHE + 0x1_0000, array])),
            (array, words(&[1, heaps])),
            (heaps, words(&[heap])),
            (heap, heap_bytes),
        ]);
        tables.hotspot = Some(entry);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!((late.frames.len(), late.stop, late.hotspot.frames), (6, UnwindStop::Root, 3));
        // Not set yet: the code cache stays code without unwind tables.
        entry.code_low_bound = 0x7700_0000;
        tables.hotspot = Some(entry);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, INTERPRETER + 0x100]);
        assert_eq!((late.stop, late.hotspot.walks), (UnwindStop::NoUnwindInfo, 0));
    }

    #[test]
    fn a_deoptimised_return_address_stands_for_the_saved_pc() {
        // The nmethod's return address patched to its deopt handler; the
        // pc it stands for saved at sp + orig_pc_offset (8).
        let (mut tables, mut c) = hotspot_stack();
        set(&mut c, FP_A + 1, DEOPT_HANDLER);
        set(&mut c, SP_C + 1, NMETHOD_PC + 0x20);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames[2], compiled(NMETHOD_PC + 0x20, false));
        assert_eq!(late.stop, UnwindStop::Root);
        // A handler elsewhere: the return address is the frame's pc.
        let mut block = tables.memory[1].1.clone();
        block[24..28].copy_from_slice(&0x200u32.to_ne_bytes());
        tables.memory[1].1 = block;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames[2], compiled(DEOPT_HANDLER, false));
    }

    #[test]
    fn hotspot_walks_stop_distinctly_with_the_frames_so_far() {
        let leaf = (BASE + 0x110) | FRAME_EXACT_PC;
        // Frame A's sender sp below its own sp: after A's frame.
        let (mut tables, mut c) = hotspot_stack();
        set(&mut c, FP_A - 1, SP);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![leaf, interpreted(METHOD_A, 5)]);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::BadSp, Some(HotspotStop::BadFrame)));
        // METHOD_A unreadable: before it.
        let (mut tables, c) = hotspot_stack();
        tables.memory.retain(|(at, _)| *at != METHOD_A + 8);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![leaf]);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::ReadError, Some(HotspotStop::ReadError)));
        // A return address in no blob (a free segment).
        let (mut tables, mut c) = hotspot_stack();
        set(&mut c, FP_A + 1, CODE_CACHE + 0x8000);
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames.len(), 2);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::Hotspot, Some(HotspotStop::NoBlob)));
        // The nmethod's frame past the copy.
        let (mut tables, mut c) = hotspot_stack();
        c.bytes.truncate(8 * (SP_C + 3));
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames.len(), 3);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::OutsideCopy, Some(HotspotStop::OutsideCopy)));
        // The entry frame's caller below it.
        let (mut tables, mut c) = hotspot_stack();
        set(&mut c, FP_B - 1, SP + 8 * (FP_ENTRY as u64 + 2));
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames.len(), 4);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::BadSp, Some(HotspotStop::BadFrame)));
        // The frame limit.
        let (mut tables, c) = hotspot_stack();
        let late = unwind(&mut tables, PID, &c, 3);
        assert_eq!((late.frames.len(), late.stop), (3, UnwindStop::MaxFrames));
        assert_eq!(late.hotspot.stop, Some(HotspotStop::MaxFrames));
        // A stub without a frame size that does not build an rbp frame:
        // recorded, then the end.
        let (mut tables, c) = hotspot_stack();
        tables.memory[1].1[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames.len(), 3);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::Hotspot, Some(HotspotStop::UnknownStub)));
    }

    #[test]
    fn hotspot_stubs_without_a_frame_size_are_followed_when_simple() {
        let expected = |late: &LateUnwind| {
            assert_eq!(
                late.frames[1..4],
                [interpreted(METHOD_A, 5), compiled(NMETHOD_PC, false), interpreted(METHOD_B, 0x20)]
            );
            assert_eq!((late.frames.len(), late.stop), (6, UnwindStop::Root));
        };
        // A blob of 0 words that pushed nothing: its return address at
        // sp, rbp its caller's.
        let (mut tables, mut c) = hotspot_stack();
        tables.memory[1].1[16..20].copy_from_slice(&0i32.to_ne_bytes());
        set(&mut c, SP_C, INTERPRETER + 0x200);
        set(&mut c, FP_A, SP + 8 * FP_B as u64);
        expected(&unwind(&mut tables, PID, &c, 256));
        // A C1 stub without a frame size that starts with enter(): an rbp
        // frame (its saved rbp and return address where the nmethod's
        // were).
        let (mut tables, mut c) = hotspot_stack();
        let code = CODE_CACHE + 0x5000;
        tables.memory[1].1[16..20].copy_from_slice(&(-1i32).to_ne_bytes());
        tables.memory.push((BLOB + 0x20, code.to_ne_bytes().to_vec()));
        tables.memory.push((code, vec![0x55, 0x48, 0x89, 0xe5]));
        tables.hotspot = Some(HotspotProcess { blob_code_begin: 0x20, ..hotspot_layout() });
        set(&mut c, FP_A, SP + 8 * (SP_C as u64 + 2));
        expected(&unwind(&mut tables, PID, &c, 256));
        // Without enter(): not followed.
        tables.memory.pop();
        tables.memory.push((code, vec![0x53, 0x51, 0x52, 0x56]));
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!((late.frames.len(), late.hotspot.stop), (3, Some(HotspotStop::UnknownStub)));
    }

    #[test]
    fn a_hotspot_leaf_in_the_interpreter_is_walked_in_compiled_code_recorded() {
        // Sampled in the interpreter, in frame A.
        let (mut tables, mut c) = hotspot_stack();
        c.pc = INTERPRETER + 0x80;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames[0], interpreted(METHOD_A, 5));
        assert_eq!((late.frames.len(), late.stop), (5, UnwindStop::Root));
        // Sampled in the nmethod: its frame may be half built.
        c.pc = NMETHOD_PC;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![compiled(NMETHOD_PC, true)]);
        assert_eq!((late.stop, late.hotspot.stop), (UnwindStop::Hotspot, Some(HotspotStop::CompiledLeaf)));
    }

    #[test]
    fn without_its_entry_the_code_cache_has_no_unwind_info() {
        let (mut tables, c) = hotspot_stack();
        tables.hotspot = None;
        let late = unwind(&mut tables, PID, &c, 256);
        assert_eq!(late.frames, vec![(BASE + 0x110) | FRAME_EXACT_PC, INTERPRETER + 0x100]);
        assert_eq!((late.stop, late.hotspot.walks), (UnwindStop::NoUnwindInfo, 0));
    }
}
