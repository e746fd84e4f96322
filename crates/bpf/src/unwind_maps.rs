//! The native unwinder's maps, seen from user space: unwind rules, each
//! file's stack deltas, and each process's sorted (address -> file) ranges.
//!
//! [`UnwindMaps`] owns the bookkeeping of what it put into the maps (the
//! ranges of each pid, the pages of each file), so that everything it
//! inserts has exactly one deletion path: [`UnwindMaps::remove_process`]
//! and [`UnwindMaps::unload_file`].

use crate::contract::bytes_of;
use crate::types::{
    delta_entry, delta_page, delta_page_key, process_ranges_of, range_chunk_key, range_chunk_of, unwind_rule_of,
    InterpreterUnwinder, PidMappingValue, ProcessRange, DELTA_PAGE_BITS, MAPPING_FLAG_INTERPRETER_LOOP,
    MAPPING_KIND_NATIVE, MAPPING_KIND_NO_UNWIND_INFO, MAPPING_UNWINDER_SHIFT, PROCESS_RANGES_MAX, RANGES_PER_CHUNK,
    RANGE_START_UNUSED,
};
use crate::BpfError;
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
use profiler_elf::{DeltaWalk, RuleId, UnwindRule};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd};

/// Entries per batch update of a delta array.
const BATCH: usize = 1 << 16;
/// Most pages filled after the last delta of a page when its rule runs
/// on (a 256 MiB function is not code).
const MAX_FILL_PAGES: u64 = 4096;
/// `BPF_F_INNER_MAP` (include/uapi/linux/bpf.h).
const BPF_F_INNER_MAP: u32 = 1 << 12;

/// A file's deltas in the unwinder's layout: 4-byte entries grouped by
/// 64 KiB page, each page starting with an entry at offset 0 that
/// carries the rule in effect there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodedDeltas {
    entries: Vec<u32>,
    /// (page, first entry, entry count)
    pages: Vec<(u64, u32, u32)>,
}

impl EncodedDeltas {
    /// Encodes `deltas` (sorted by address; each rule applies up to the
    /// next entry; [`RuleId::NO_COVERAGE`] marks gaps). Pages that hold no
    /// delta and lie in a gap are left out.
    pub fn encode(deltas: &[(u64, RuleId)]) -> EncodedDeltas {
        EncodedDeltas::encode_iter(deltas.iter().copied())
    }

    /// [`EncodedDeltas::encode`] from an iterator, so that a caller
    /// holding a compact table needs no second copy of it.
    pub fn encode_iter(deltas: impl Iterator<Item = (u64, RuleId)>) -> EncodedDeltas {
        let hint = deltas.size_hint().0;
        // A page-start entry per page besides the deltas: a little slack
        // spares doubling the block at the end.
        let mut out = EncodedDeltas { entries: Vec::with_capacity(hint + hint / 16 + 16), pages: Vec::new() };
        encode_with(deltas, |entry| out.entries.push(entry), |page| out.pages.push(page));
        out.entries.shrink_to_fit();
        out
    }

    /// The 4-byte entries, as the file's delta array holds them.
    pub fn entries_slice(&self) -> &[u32] {
        &self.entries
    }

    /// Number of 4-byte entries.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// Number of 64 KiB pages.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// The rule in effect at `vaddr`, looked up as the BPF unwinder does
    /// (`None` when the page has no deltas).
    pub fn lookup(&self, vaddr: u64) -> Option<RuleId> {
        let page = vaddr >> DELTA_PAGE_BITS;
        let i = self.pages.binary_search_by_key(&page, |p| p.0).ok()?;
        let (_, first, count) = self.pages[i];
        let slice = &self.entries[first as usize..(first + count) as usize];
        let offset = (vaddr & ((1 << DELTA_PAGE_BITS) - 1)) as u32;
        let at = slice.partition_point(|e| e & 0xffff <= offset).checked_sub(1)?;
        Some(RuleId((slice[at] >> 16) as u16))
    }
}

/// Encodes `deltas` (as [`EncodedDeltas::encode`]) a piece at a time:
/// `entry` gets the entries in order, `page` each page's (page, first
/// entry, entry count) once its entries are out. Returns the number of
/// entries.
fn encode_with(
    deltas: impl Iterator<Item = (u64, RuleId)>,
    mut entry: impl FnMut(u32),
    mut page_done: impl FnMut((u64, u32, u32)),
) -> u32 {
    let mut deltas = deltas.peekable();
    let page_mask = (1u64 << DELTA_PAGE_BITS) - 1;
    let mut in_effect = RuleId::NO_COVERAGE;
    let mut count = 0u32;
    let mut push = |e: u32, count: &mut u32| {
        entry(e);
        *count += 1;
    };
    while let Some(&(at, _)) = deltas.peek() {
        let page = at >> DELTA_PAGE_BITS;
        let first = count;
        if at & page_mask != 0 {
            push(delta_entry(0, in_effect.0), &mut count);
        }
        while let Some((address, rule)) = deltas.next_if(|d| d.0 >> DELTA_PAGE_BITS == page) {
            // Equal neighbours add nothing.
            if rule != in_effect || count == first {
                push(delta_entry((address & page_mask) as u16, rule.0), &mut count);
            }
            in_effect = rule;
        }
        page_done((page, first, count - first));
        // Pages wholly inside the last rule of this page, up to the next
        // delta (a function longer than a page).
        if in_effect != RuleId::NO_COVERAGE {
            let next_page = deltas.peek().map_or(page + 1, |d| d.0 >> DELTA_PAGE_BITS).min(page + 1 + MAX_FILL_PAGES);
            for p in page + 1..next_page {
                let first = count;
                push(delta_entry(0, in_effect.0), &mut count);
                page_done((p, first, 1));
            }
        }
    }
    count
}

/// Gives a file's encoded entries, in order, to the sink it is passed.
type Fill<'a> = dyn FnMut(&mut dyn FnMut(u32)) + 'a;

/// Fills a file's delta array a batch at a time: entries pair into
/// 8-byte elements; the first error stops the writes and is kept.
struct ArrayWriter<'a> {
    array: &'a MapHandle,
    elements: u32,
    keys: Vec<u8>,
    values: Vec<u8>,
    next_key: u32,
    pending_low: Option<u32>,
    error: Option<BpfError>,
}

impl<'a> ArrayWriter<'a> {
    fn new(array: &'a MapHandle, elements: u32) -> ArrayWriter<'a> {
        let batch = BATCH.min(elements as usize);
        ArrayWriter {
            array,
            elements,
            keys: Vec::with_capacity(4 * batch),
            values: Vec::with_capacity(8 * batch),
            next_key: 0,
            pending_low: None,
            error: None,
        }
    }

    fn push(&mut self, entry: u32) {
        match self.pending_low.take() {
            None => self.pending_low = Some(entry),
            Some(low) => self.element(u64::from(low) | (u64::from(entry) << 32)),
        }
    }

    fn element(&mut self, value: u64) {
        let key = self.next_key + (self.keys.len() / 4) as u32;
        if key >= self.elements || self.error.is_some() {
            return;
        }
        self.keys.extend_from_slice(&key.to_ne_bytes());
        self.values.extend_from_slice(&value.to_ne_bytes());
        if self.keys.len() / 4 == BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let n = (self.keys.len() / 4) as u32;
        if n == 0 || self.error.is_some() {
            return;
        }
        if let Err(e) = self.array.update_batch(&self.keys, &self.values, n, MapFlags::ANY, MapFlags::ANY) {
            self.error = Some(map_err("file delta array")(e));
        }
        self.next_key += n;
        self.keys.clear();
        self.values.clear();
    }

    fn finish(mut self) -> Result<(), BpfError> {
        if let Some(low) = self.pending_low.take() {
            self.element(u64::from(low));
        }
        self.flush();
        self.error.map_or(Ok(()), Err)
    }
}

/// What one executable mapping of a process is, for the unwinder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MappingTarget {
    /// A file whose deltas are loaded: `file_id` is `TableKey::bpf_id`,
    /// and `ELF vaddr = pc - bias`.
    Native {
        /// `TableKey::bpf_id()` of the file.
        file_id: u64,
        /// Load bias.
        bias: u64,
    },
    /// Executable memory without unwind tables.
    NoUnwindInfo,
    /// Part of a file with deltas (as [`MappingTarget::Native`]) that
    /// holds an interpreter's evaluation loop: the unwinder hands its
    /// frames over to the interpreter unwinder of the file
    /// ([`crate::InterpreterMaps`]).
    InterpreterLoop {
        /// `TableKey::bpf_id()` of the file.
        file_id: u64,
        /// Load bias.
        bias: u64,
        /// The program that unwinds the interpreter.
        unwinder: InterpreterUnwinder,
    },
    /// Executable memory without unwind tables that holds an
    /// interpreter's code (a JVM's code cache): its unwinder unwinds the
    /// frames there, with what it keeps per process
    /// ([`crate::InterpreterMaps::set_process`]).
    InterpreterCode {
        /// The program that unwinds the code.
        unwinder: InterpreterUnwinder,
    },
}

/// One executable mapping `[start, end)` of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MappingRange {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// What is mapped there.
    pub target: MappingTarget,
}

/// Counts of what [`UnwindMaps`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwindMapsStats {
    /// Processes in `process_ranges`.
    pub processes: u64,
    /// Their ranges (in `process_range_chunks`).
    pub ranges: u64,
    /// Ranges left out: overlapping another, empty, or beyond
    /// `PROCESS_RANGES_MAX` in one process (counted at each set).
    pub ranges_dropped: u64,
    /// Files with a delta array.
    pub files: u64,
    /// Pages in `delta_pages`.
    pub pages: u64,
    /// Entries in all delta arrays.
    pub delta_entries: u64,
    /// Rules written to `unwind_rules`.
    pub rules: u64,
}

struct LoadedFile {
    pages: Vec<u64>,
    entries: u32,
}

/// Handles on the unwinder's maps plus the bookkeeping of their content.
/// Made by [`crate::Sampler::unwind_maps`]; may move to another thread.
pub struct UnwindMaps {
    process_ranges: MapHandle,
    range_chunks: MapHandle,
    unwind_rules: MapHandle,
    delta_pages: MapHandle,
    file_deltas: MapHandle,
    rules_capacity: u32,
    rules_loaded: HashSet<u16>,
    files: HashMap<u64, LoadedFile>,
    /// Each pid's ranges as written, and the generation of their chunks.
    processes: HashMap<u32, WrittenRanges>,
    ranges_dropped: u64,
    /// Whether the kernel has batch operations for hash maps
    /// (`delta_pages`, `process_range_chunks`: 5.6 on); `None` until
    /// tried.
    batch_hash: Option<bool>,
}

struct WrittenRanges {
    generation: u32,
    ranges: Box<[ProcessRange]>,
}

impl WrittenRanges {
    fn chunks(&self) -> u32 {
        self.ranges.len().div_ceil(RANGES_PER_CHUNK as usize) as u32
    }
}

/// `ENOTSUPP` (include/linux/errno.h): the map type has no batch
/// operations.
const ENOTSUPP: i32 = 524;

/// Entries per batch update of `delta_pages` and `process_range_chunks`.
const SMALL_BATCH: usize = 1024;

/// Writes `count` entries (`keys` and `values` concatenated) into `map`:
/// a syscall per batch of [`SMALL_BATCH`] where the kernel has batch
/// operations for the map (`supported`, learnt on first use), else one a
/// key. One syscall instead of hundreds per process or file loaded.
fn update_all(
    map: &MapHandle,
    supported: &mut Option<bool>,
    keys: &[u8],
    values: &[u8],
    count: usize,
) -> Result<(), libbpf_rs::Error> {
    if count == 0 {
        return Ok(());
    }
    let (ks, vs) = (keys.len() / count, values.len() / count);
    if *supported != Some(false) {
        for (kc, vc) in keys.chunks(ks * SMALL_BATCH).zip(values.chunks(vs * SMALL_BATCH)) {
            match raw_batch(map, BatchOp::Update, kc, Some(vc), kc.len() / ks) {
                Ok(()) => *supported = Some(true),
                Err(e) if *supported.get_or_insert(false) || !unsupported(e) => {
                    return Err(libbpf_rs::Error::from_raw_os_error(e));
                }
                // The first batch: none, this map type has no batch
                // operations on this kernel.
                Err(_) => break,
            }
        }
        if *supported == Some(true) {
            return Ok(());
        }
    }
    for (k, v) in keys.chunks(ks).zip(values.chunks(vs)) {
        map.update(k, v, MapFlags::ANY)?;
    }
    Ok(())
}

/// Deletes `count` keys (concatenated) from `map`, a batch at a time
/// where supported; keys already gone are not an error. Returns the first
/// other error, after trying every key.
fn delete_all(
    map: &MapHandle,
    supported: &mut Option<bool>,
    keys: &[u8],
    count: usize,
) -> Result<(), libbpf_rs::Error> {
    if count == 0 {
        return Ok(());
    }
    let ks = keys.len() / count;
    if *supported != Some(false) {
        let mut all = true;
        for kc in keys.chunks(ks * SMALL_BATCH) {
            match raw_batch(map, BatchOp::Delete, kc, None, kc.len() / ks) {
                Ok(()) => *supported = Some(true),
                Err(e) => {
                    if supported.is_none() && unsupported(e) {
                        *supported = Some(false);
                    }
                    all = false;
                    break;
                }
            }
        }
        if all {
            return Ok(());
        }
    }
    // One by one (a batch stops at the first missing key).
    let mut first_error = None;
    for k in keys.chunks(ks) {
        if let Err(e) = map.delete(k) {
            if e.kind() != libbpf_rs::ErrorKind::NotFound {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// What the unwinder is told about a range.
fn mapping_value(target: MappingTarget) -> PidMappingValue {
    let loop_flags = |unwinder: InterpreterUnwinder| {
        MAPPING_FLAG_INTERPRETER_LOOP | u32::from(unwinder as u8) << MAPPING_UNWINDER_SHIFT
    };
    match target {
        MappingTarget::Native { file_id, bias } => {
            PidMappingValue { file_id, bias, kind: MAPPING_KIND_NATIVE, flags: 0 }
        }
        MappingTarget::NoUnwindInfo => {
            PidMappingValue { file_id: 0, bias: 0, kind: MAPPING_KIND_NO_UNWIND_INFO, flags: 0 }
        }
        MappingTarget::InterpreterLoop { file_id, bias, unwinder } => {
            PidMappingValue { file_id, bias, kind: MAPPING_KIND_NATIVE, flags: loop_flags(unwinder) }
        }
        MappingTarget::InterpreterCode { unwinder } => {
            PidMappingValue { file_id: 0, bias: 0, kind: MAPPING_KIND_NO_UNWIND_INFO, flags: loop_flags(unwinder) }
        }
    }
}

/// `ranges` as the unwinder searches them: sorted by start, disjoint, not
/// empty, at most `PROCESS_RANGES_MAX` (the lowest kept); and how many
/// were left out (a range overlapping the one before it is).
fn sorted_ranges(ranges: &[MappingRange]) -> (Vec<ProcessRange>, u64) {
    // (Starts from RANGE_START_UNUSED up are the padding; no process
    // address is that high.)
    let mut sorted: Vec<&MappingRange> =
        ranges.iter().filter(|r| r.start < r.end && r.start < RANGE_START_UNUSED).collect();
    sorted.sort_unstable_by_key(|r| (r.start, r.end));
    let mut out: Vec<ProcessRange> = Vec::with_capacity(sorted.len().min(PROCESS_RANGES_MAX as usize));
    for range in &sorted {
        if out.last().is_some_and(|last| range.start < last.end) || out.len() == PROCESS_RANGES_MAX as usize {
            continue;
        }
        out.push(ProcessRange { start: range.start, end: range.end, mapping: mapping_value(range.target) });
    }
    let dropped = (ranges.len() - out.len()) as u64;
    (out, dropped)
}

fn unsupported(errno: i32) -> bool {
    errno == ENOTSUPP || errno == libc::EINVAL || errno == libc::EOPNOTSUPP
}

#[derive(Clone, Copy)]
enum BatchOp {
    Update,
    Delete,
}

/// One `BPF_MAP_{UPDATE,DELETE}_BATCH` of `count` entries; `Err(errno)`.
fn raw_batch(map: &MapHandle, op: BatchOp, keys: &[u8], values: Option<&[u8]>, count: usize) -> Result<(), i32> {
    let mut n = u32::try_from(count).map_err(|_| libc::E2BIG)?;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let fd = map.as_fd().as_raw_fd();
    // SAFETY: `keys` (and `values`) hold `count` entries of the map's key
    // (value) size, checked by the callers' chunking; the kernel reads
    // them and writes only `n`.
    let rc = unsafe {
        match op {
            BatchOp::Update => libbpf_sys::bpf_map_update_batch(
                fd,
                keys.as_ptr().cast(),
                values.map_or(std::ptr::null(), |v| v.as_ptr().cast()),
                &mut n,
                &opts,
            ),
            BatchOp::Delete => libbpf_sys::bpf_map_delete_batch(fd, keys.as_ptr().cast(), &mut n, &opts),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-rc))
    }
}

fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |source| BpfError::Map { map, source }
}

impl UnwindMaps {
    pub(crate) fn new(
        process_ranges: MapHandle,
        range_chunks: MapHandle,
        unwind_rules: MapHandle,
        delta_pages: MapHandle,
        file_deltas: MapHandle,
    ) -> UnwindMaps {
        let rules_capacity = unwind_rules.max_entries();
        UnwindMaps {
            process_ranges,
            range_chunks,
            unwind_rules,
            delta_pages,
            file_deltas,
            rules_capacity,
            rules_loaded: HashSet::new(),
            files: HashMap::new(),
            processes: HashMap::new(),
            ranges_dropped: 0,
            batch_hash: None,
        }
    }

    /// How many rule ids the `unwind_rules` map holds.
    pub fn rules_capacity(&self) -> u32 {
        self.rules_capacity
    }

    /// Writes rule `id` (once; rules never change meaning).
    pub fn set_rule(&mut self, id: RuleId, rule: &UnwindRule) -> Result<(), BpfError> {
        if self.rules_loaded.contains(&id.0) {
            return Ok(());
        }
        if u32::from(id.0) >= self.rules_capacity {
            return Err(BpfError::MapFull { map: "unwind_rules", capacity: self.rules_capacity.into() });
        }
        let rule = unwind_rule_of(rule);
        let value = bytes_of(&rule);
        self.unwind_rules
            .update(&u32::from(id.0).to_ne_bytes(), value, MapFlags::ANY)
            .map_err(map_err("unwind_rules"))?;
        self.rules_loaded.insert(id.0);
        Ok(())
    }

    /// Whether the deltas of `file_id` are loaded.
    pub fn has_file(&self, file_id: u64) -> bool {
        self.files.contains_key(&file_id)
    }

    /// Loads a file's deltas: a delta array of its own, then its pages.
    /// The rules it uses must have been set. Loading a loaded file does
    /// nothing. An empty table is not loaded (its pcs stop with
    /// `NoDeltas`).
    pub fn load_file(&mut self, file_id: u64, deltas: &EncodedDeltas) -> Result<(), BpfError> {
        let pages = deltas.pages.clone();
        self.load_file_with(file_id, deltas.entries.len(), pages, &mut |sink| {
            deltas.entries.iter().for_each(|&e| sink(e))
        })
    }

    /// [`UnwindMaps::load_file`] from the `(ELF vaddr, rule)` pairs that
    /// `walk` gives (sorted), encoded on the way in: `walk` is called
    /// twice (to size the file's array, then to fill it a batch at a
    /// time), so that a big file's table is never held encoded whole.
    pub fn load_file_streamed(&mut self, file_id: u64, walk: &DeltaWalk<'_>) -> Result<(), BpfError> {
        if self.files.contains_key(&file_id) {
            return Ok(());
        }
        let mut pages = Vec::new();
        let count = encode_with(walk(), |_| {}, |page| pages.push(page));
        self.load_file_with(file_id, count as usize, pages, &mut |sink| {
            encode_with(walk(), sink, |_| {});
        })
    }

    /// Creates the file's array of `count` entries, fills it with what
    /// `fill` gives its sink (a batch update every `BATCH` elements),
    /// then adds `pages`.
    fn load_file_with(
        &mut self,
        file_id: u64,
        count: usize,
        pages: Vec<(u64, u32, u32)>,
        fill: &mut Fill<'_>,
    ) -> Result<(), BpfError> {
        if self.files.contains_key(&file_id) || count == 0 {
            return Ok(());
        }
        let entries = u32::try_from(count)
            .map_err(|_| BpfError::MapFull { map: "file delta array", capacity: u32::MAX.into() })?;
        // Two entries per 8-byte element (array elements take 8 bytes).
        let elements = entries.div_ceil(2);
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: BPF_F_INNER_MAP,
            ..Default::default()
        };
        let array = MapHandle::create(MapType::Array, Some("ep_deltas"), 4, 8, elements, &opts)
            .map_err(map_err("file delta array"))?;
        let mut writer = ArrayWriter::new(&array, elements);
        fill(&mut |entry| writer.push(entry));
        writer.finish()?;
        let fd = array.as_fd().as_raw_fd() as u32;
        self.file_deltas
            .update(&file_id.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(map_err("file_deltas"))?;
        // The outer map holds the array now; our fd closes with `array`.
        let loaded = LoadedFile { pages: pages.iter().map(|&(page, _, _)| page).collect(), entries };
        let keys: Vec<u8> = pages.iter().flat_map(|&(page, _, _)| delta_page_key(file_id, page)).collect();
        let values: Vec<u8> = pages.iter().flat_map(|&(_, first, n)| delta_page(first, n)).collect();
        let result = update_all(&self.delta_pages, &mut self.batch_hash, &keys, &values, pages.len());
        self.files.insert(file_id, loaded);
        if let Err(source) = result {
            // Leave nothing half loaded.
            let _ = self.unload_file(file_id);
            return Err(BpfError::Map { map: "delta_pages", source });
        }
        Ok(())
    }

    /// Removes a file's pages and delta array.
    pub fn unload_file(&mut self, file_id: u64) -> Result<(), BpfError> {
        let Some(loaded) = self.files.remove(&file_id) else { return Ok(()) };
        let mut first_error = None;
        let keys: Vec<u8> = loaded.pages.iter().flat_map(|&page| delta_page_key(file_id, page)).collect();
        if let Err(source) = delete_all(&self.delta_pages, &mut self.batch_hash, &keys, loaded.pages.len()) {
            first_error.get_or_insert(BpfError::Map { map: "delta_pages", source });
        }
        if let Err(source) = self.file_deltas.delete(&file_id.to_ne_bytes()) {
            first_error.get_or_insert(BpfError::Map { map: "file_deltas", source });
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Sets the executable mappings of `pid` (replacing what was there).
    /// Unchanged ranges cost no syscall. Changed ones are written as new
    /// chunks (the other generation) before the process's entry points at
    /// them, and the old chunks go after, so the unwinder never sees a
    /// gap. An entry with no ranges marks the pid as known.
    pub fn set_process(&mut self, pid: u32, ranges: &[MappingRange]) -> Result<(), BpfError> {
        let (ranges, dropped) = sorted_ranges(ranges);
        self.ranges_dropped += dropped;
        let old = self.processes.get(&pid);
        if old.is_some_and(|o| *o.ranges == *ranges) {
            return Ok(());
        }
        let generation = old.map_or(0, |o| o.generation ^ 1);
        let new = WrittenRanges { generation, ranges: ranges.into_boxed_slice() };
        let chunk_keys: Vec<u8> = (0..new.chunks()).flat_map(|i| range_chunk_key(pid, generation, i)).collect();
        let chunk_values: Vec<u8> = new
            .ranges
            .chunks(RANGES_PER_CHUNK as usize)
            .flat_map(|part| bytes_of(&range_chunk_of(part)).to_vec())
            .collect();
        let n = new.chunks() as usize;
        let written = update_all(&self.range_chunks, &mut self.batch_hash, &chunk_keys, &chunk_values, n)
            .map_err(|source| BpfError::Map { map: "process_range_chunks", source })
            .and_then(|()| {
                let entry = process_ranges_of(&new.ranges, generation);
                self.process_ranges
                    .update(&pid.to_ne_bytes(), bytes_of(&entry), MapFlags::ANY)
                    .map_err(|source| BpfError::Map { map: "process_ranges", source })
            });
        if let Err(e) = written {
            let _ = delete_all(&self.range_chunks, &mut self.batch_hash, &chunk_keys, n);
            return Err(e);
        }
        if let Some(old) = self.processes.insert(pid, new) {
            self.delete_chunks(pid, &old);
        }
        Ok(())
    }

    fn delete_chunks(&mut self, pid: u32, written: &WrittenRanges) {
        let keys: Vec<u8> = (0..written.chunks()).flat_map(|i| range_chunk_key(pid, written.generation, i)).collect();
        let _ = delete_all(&self.range_chunks, &mut self.batch_hash, &keys, written.chunks() as usize);
    }

    /// Removes `pid`'s ranges: its entry first (the pid is unknown from
    /// then on), then its chunks.
    pub fn remove_process(&mut self, pid: u32) -> Result<(), BpfError> {
        let Some(written) = self.processes.remove(&pid) else { return Ok(()) };
        let result = match self.process_ranges.delete(&pid.to_ne_bytes()) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        self.delete_chunks(pid, &written);
        result.map_err(|source| BpfError::Map { map: "process_ranges", source })
    }

    /// What the maps hold, from the bookkeeping.
    pub fn stats(&self) -> UnwindMapsStats {
        UnwindMapsStats {
            processes: self.processes.len() as u64,
            ranges: self.processes.values().map(|w| w.ranges.len() as u64).sum(),
            ranges_dropped: self.ranges_dropped,
            files: self.files.len() as u64,
            pages: self.files.values().map(|f| f.pages.len() as u64).sum(),
            delta_entries: self.files.values().map(|f| u64::from(f.entries)).sum(),
            rules: self.rules_loaded.len() as u64,
        }
    }

    /// Counts the entries really in the maps (by iterating their keys):
    /// (process_ranges + process_range_chunks, delta_pages, file_deltas).
    /// For tests and checks.
    pub fn count_map_entries(&self) -> (usize, usize, usize) {
        let processes = self.process_ranges.keys().count() + self.range_chunks.keys().count();
        (processes, self.delta_pages.keys().count(), self.file_deltas.keys().count())
    }

    /// The entries of a loaded file's delta array, read back from the
    /// kernel (tests: what the BPF unwinder sees).
    pub fn file_entries(&self, file_id: u64) -> Option<Vec<u32>> {
        let count = self.files.get(&file_id)?.entries as usize;
        let id = self.file_deltas.lookup(&file_id.to_ne_bytes(), MapFlags::ANY).ok()??;
        let array = MapHandle::from_map_id(u32::from_ne_bytes(id.get(..4)?.try_into().ok()?)).ok()?;
        let mut out = Vec::with_capacity(count + 1);
        for key in 0..count.div_ceil(2) as u32 {
            let v = array.lookup(&key.to_ne_bytes(), MapFlags::ANY).ok()??;
            let v = u64::from_ne_bytes(v.get(..8)?.try_into().ok()?);
            out.extend([v as u32, (v >> 32) as u32]);
        }
        out.truncate(count);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: RuleId = RuleId(10);
    const B: RuleId = RuleId(11);
    const NONE: RuleId = RuleId::NO_COVERAGE;

    #[test]
    fn ranges_are_sorted_disjoint_and_bounded() {
        let native = |file_id| MappingTarget::Native { file_id, bias: 0x1000 };
        let range = |start, end, target| MappingRange { start, end, target };
        let given = [
            range(0x5000, 0x6000, native(2)),
            range(0x1000, 0x3000, native(1)),
            range(0x2000, 0x4000, native(3)), // overlaps the one before
            range(0x7000, 0x7000, native(4)), // empty
            range(0x3000, 0x4000, MappingTarget::NoUnwindInfo),
        ];
        let (out, dropped) = sorted_ranges(&given);
        let starts: Vec<(u64, u64, u64)> = out.iter().map(|r| (r.start, r.end, r.mapping.file_id)).collect();
        assert_eq!(starts, vec![(0x1000, 0x3000, 1), (0x3000, 0x4000, 0), (0x5000, 0x6000, 2)]);
        assert_eq!(dropped, 2);
        assert_eq!(out[1].mapping.kind, MAPPING_KIND_NO_UNWIND_INFO);
        let many: Vec<MappingRange> =
            (0..PROCESS_RANGES_MAX as u64 + 3).map(|i| range(i * 0x1000, i * 0x1000 + 0x800, native(i))).collect();
        let (out, dropped) = sorted_ranges(&many);
        assert_eq!((out.len(), dropped), (PROCESS_RANGES_MAX as usize, 3));
        assert_eq!(out.last().map(|r| r.start), Some((PROCESS_RANGES_MAX as u64 - 1) * 0x1000));
    }

    #[test]
    fn interpreter_ranges_name_their_unwinder() {
        let v =
            mapping_value(MappingTarget::InterpreterLoop { file_id: 9, bias: 4, unwinder: InterpreterUnwinder::Ruby });
        assert_eq!((v.file_id, v.bias, v.kind), (9, 4, MAPPING_KIND_NATIVE));
        assert_eq!(
            v.flags,
            MAPPING_FLAG_INTERPRETER_LOOP | (InterpreterUnwinder::Ruby as u32) << MAPPING_UNWINDER_SHIFT
        );
        let v = mapping_value(MappingTarget::InterpreterCode { unwinder: InterpreterUnwinder::V8 });
        assert_eq!(v.kind, MAPPING_KIND_NO_UNWIND_INFO);
        assert_eq!(v.flags >> MAPPING_UNWINDER_SHIFT, InterpreterUnwinder::V8 as u32);
    }

    #[test]
    fn pages_start_with_the_rule_in_effect() {
        let deltas = [(0x1_0010, A), (0x1_0020, B), (0x1_0030, NONE), (0x3_0000, A), (0x5_8000, B), (0x5_9000, NONE)];
        let e = EncodedDeltas::encode(&deltas);
        // page 1: [0 NONE, 0x10 A, 0x20 B, 0x30 NONE]; page 3: [0 A];
        // page 4: [0 A] (A goes on); page 5: [0 A, 0x8000 B, 0x9000 NONE].
        assert_eq!(e.pages, vec![(1, 0, 4), (3, 4, 1), (4, 5, 1), (5, 6, 3)]);
        assert_eq!(e.entries[0], delta_entry(0, 0));
        assert_eq!(e.entries[6], delta_entry(0, A.0));
        for (vaddr, want) in [
            (0x1_0000, Some(NONE)),
            (0x1_0010, Some(A)),
            (0x1_001f, Some(A)),
            (0x1_0025, Some(B)),
            (0x1_ffff, Some(NONE)),
            (0x2_0000, None),
            (0x4_1234, Some(A)),
            (0x5_8001, Some(B)),
            (0x5_9001, Some(NONE)),
        ] {
            assert_eq!(e.lookup(vaddr), want, "{vaddr:#x}");
        }
    }

    #[test]
    fn equal_neighbours_merge_and_page_starts_are_not_duplicated() {
        let e = EncodedDeltas::encode(&[(0x2_0000, A), (0x2_0004, A), (0x2_0008, B)]);
        assert_eq!(e.entries, vec![delta_entry(0, A.0), delta_entry(8, B.0)]);
        assert_eq!(e.pages, vec![(2, 0, 2)]);
    }
}
