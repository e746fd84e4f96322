//! A user-space walk of one Ruby thread's control frames, naming each:
//! what the BPF unwinder will record (iseq and pc, or the method entry of
//! a C function) and how user space will name it.

use super::classes::class_path;
use super::layout::{consts, RubyLayout};
use super::lines::line_at;
use super::objects::{at, flags_of, rarray_entry, read_bytes, read_pathobj, read_rstring, read_u32, read_u64};
use crate::memory::ProcessMemory;
use std::collections::HashMap;

/// Most control frames walked on one thread.
pub const MAX_FRAMES: usize = 4096;
/// Largest VM stack accepted (`VALUE`s): Ruby's default is 1 MiB of them
/// at most.
const MAX_VM_STACK: u64 = 1 << 24;
/// Most iseqs and method names kept by a [`RubySymbolizer`].
pub const MAX_CACHED: usize = 16384;
/// Most bytes of names (labels, files, method and class names) its
/// caches hold: a crafted process's names are 4 KiB each (12 KiB once
/// bytes that are not UTF-8 are replaced), so entries alone would let
/// one process's caches grow to hundreds of megabytes.
pub const MAX_CACHED_BYTES: usize = 4 << 20;
/// Most environments followed from a block's to its method's.
const MAX_EP_HOPS: usize = 256;
/// `VM_ENV_FLAG_LOCAL`: the method-level environment.
const ENV_FLAG_LOCAL: u64 = 0x2;
/// `ISEQ_TYPE_METHOD`.
const ISEQ_TYPE_METHOD: u32 = 1;
/// `ISEQ_TYPE_BLOCK`.
const ISEQ_TYPE_BLOCK: u32 = 2;
/// Largest writable segment scanned for the symbol table.
const MAX_SCAN: u64 = 64 << 20;
/// Most places of the segment that look like the table checked by
/// reading its ids (a dozen reads and a name each): Debian's 3.1 finds
/// it at the 8th or so; a crafted segment of 64 MiB of such places would
/// cost millions of reads in one go on the reporter's thread.
const MAX_SCAN_CANDIDATES: usize = 4096;

/// One frame, top first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RubyFrame {
    /// Ruby code: `Class#method` or `block in Class#method` when the
    /// method's class has a name, else the iseq's label (`<main>`,
    /// `<class:Foo>`); its file, and the line at the frame's pc.
    Ruby {
        /// The name.
        label: String,
        /// The file, as given to Ruby.
        file: String,
        /// The line at the pc (0 if unknown).
        line: u32,
    },
    /// A C function called as a method, named `Class#id` by the id it
    /// was called as (`Array#each`), or the id alone.
    CFunc {
        /// The method name.
        name: String,
    },
}

/// The execution context of the process's main thread:
/// `ruby_current_vm_ptr->ractor.main_thread->ec` (3.0+). `vm_ptr` is the
/// address of `ruby_current_vm_ptr` in the process.
pub fn main_execution_context(memory: &dyn ProcessMemory, layout: &RubyLayout, vm_ptr: u64) -> Result<u64, String> {
    let off = layout.vm_main_thread.ok_or_else(|| format!("Ruby {}: no main thread in rb_vm_t", layout.version))?;
    let vm = read_u64(memory, vm_ptr).ok_or("ruby_current_vm_ptr unreadable")?;
    if vm == 0 {
        return Err("the VM is not created yet".into());
    }
    let thread = read_u64(memory, vm.wrapping_add(u64::from(off))).filter(|&t| t != 0).ok_or("no main thread")?;
    let back = read_u64(memory, at(thread, layout.thread_vm).ok_or("bad thread")?);
    if back != Some(vm) {
        return Err(format!("main thread {thread:#x} does not point back to the VM {vm:#x}"));
    }
    read_u64(memory, at(thread, layout.thread_ec).ok_or("bad thread")?)
        .filter(|&e| e != 0)
        .ok_or_else(|| "no execution context".into())
}

/// The current execution context before 3.0: the value of
/// `ruby_current_execution_context_ptr` (at `ec_ptr` in the process),
/// the thread that last held the GVL.
pub fn current_execution_context(memory: &dyn ProcessMemory, ec_ptr: u64) -> Result<u64, String> {
    read_u64(memory, ec_ptr).filter(|&e| e != 0).ok_or_else(|| "no current execution context".into())
}

/// Names iseqs and method ids, with bounded caches.
pub struct RubySymbolizer {
    layout: RubyLayout,
    /// The address of `ruby_global_symbols` in the process, if found.
    symbols: Option<u64>,
    iseqs: HashMap<u64, (String, String, u64)>,
    ids: HashMap<u64, String>,
    classes: HashMap<u64, Option<String>>,
    /// Bytes of the names the caches hold (counted at each insertion).
    cached_bytes: usize,
    /// The process's id of `__classpath__`, once a class was found by it.
    classpath_id: Option<u64>,
    /// Entries dropped because a cache was full (it is then cleared).
    pub evictions: u64,
}

impl RubySymbolizer {
    /// A symbolizer for one process; `symbols` is where
    /// `ruby_global_symbols` is (see [`find_global_symbols`]).
    pub fn new(layout: RubyLayout, symbols: Option<u64>) -> RubySymbolizer {
        RubySymbolizer {
            layout,
            symbols,
            iseqs: HashMap::new(),
            ids: HashMap::new(),
            classes: HashMap::new(),
            cached_bytes: 0,
            classpath_id: None,
            evictions: 0,
        }
    }

    /// Counts `bytes` about to be cached, first clearing every cache if
    /// one is full ([`MAX_CACHED`]) or they would hold more than
    /// [`MAX_CACHED_BYTES`]; the entries dropped are counted.
    fn make_room(&mut self, bytes: usize) {
        let full = self.iseqs.len().max(self.ids.len()).max(self.classes.len()) >= MAX_CACHED;
        if full || self.cached_bytes + bytes > MAX_CACHED_BYTES {
            self.evictions += (self.iseqs.len() + self.ids.len() + self.classes.len()) as u64;
            self.iseqs.clear();
            self.ids.clear();
            self.classes.clear();
            self.cached_bytes = 0;
        }
        self.cached_bytes += bytes;
    }

    /// Bytes of the names its caches hold.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Whether its caches hold anything.
    pub fn holds_names(&self) -> bool {
        !(self.iseqs.is_empty() && self.ids.is_empty() && self.classes.is_empty())
    }

    /// Empties its caches, their tables' room too (where the global
    /// symbols are is kept): the registry empties every process's
    /// caches to bound them together.
    pub fn clear_caches(&mut self) {
        self.iseqs = HashMap::new();
        self.ids = HashMap::new();
        self.classes = HashMap::new();
        self.cached_bytes = 0;
    }

    /// The layout in use.
    pub fn layout(&self) -> &RubyLayout {
        &self.layout
    }

    /// The frames of the thread whose execution context is at `ec`, from
    /// its current frame to the bottom of its VM stack (Ruby's dummy
    /// frames, and iseq frames with no pc yet, are left out). An
    /// unreadable frame ends the walk with an error naming it; a C
    /// function whose name cannot be read is `<cfunc>`.
    pub fn walk(&mut self, memory: &dyn ProcessMemory, ec: u64) -> Result<Vec<RubyFrame>, String> {
        let l = self.layout.clone();
        let field = |off: u32| at(ec, off).and_then(|a| read_u64(memory, a)).ok_or("ec unreadable");
        let (stack, words, mut cfp) = (field(l.ec_vm_stack)?, field(l.ec_vm_stack_size)?, field(l.ec_cfp)?);
        if words == 0 || words > MAX_VM_STACK {
            return Err(format!("VM stack of {words} values"));
        }
        let end = stack.checked_add(words * 8).ok_or("VM stack wraps")?;
        if cfp < stack || cfp >= end {
            return Err(format!("cfp {cfp:#x} outside the VM stack {stack:#x}..{end:#x}"));
        }
        let mut frames = Vec::new();
        let size = u64::from(l.cfp_size);
        while cfp.checked_add(size).is_some_and(|e| e <= end) {
            if frames.len() >= MAX_FRAMES {
                return Err(format!("more than {MAX_FRAMES} frames"));
            }
            let raw =
                read_bytes(memory, cfp, l.cfp_size as usize).ok_or_else(|| format!("frame {cfp:#x} unreadable"))?;
            let word = |off: u32| u64::from_le_bytes(raw[off as usize..off as usize + 8].try_into().unwrap());
            let (pc, iseq, ep) = (word(l.cfp_pc), word(l.cfp_iseq), word(l.cfp_ep));
            // `ep` is on the VM stack, or on the heap once a closure
            // captured the environment: only its alignment is checked.
            if ep < 16 || ep & 7 != 0 {
                return Err(format!("frame {cfp:#x}: bad ep {ep:#x}"));
            }
            let env_flags = read_u64(memory, ep).ok_or("ep unreadable")?;
            if env_flags & consts::FRAME_MAGIC_MASK == consts::FRAME_MAGIC_CFUNC {
                let me = read_u64(memory, ep.wrapping_add((consts::EP_ME_CREF * 8) as u64)).ok_or("ep unreadable")?;
                let name = self.cfunc_name(memory, me).unwrap_or_else(|| "<cfunc>".into());
                frames.push(RubyFrame::CFunc { name });
            } else if iseq != 0
                && pc != 0
                && env_flags & consts::FRAME_FLAG_CFRAME == 0
                && env_flags & consts::FRAME_MAGIC_MASK != consts::FRAME_MAGIC_DUMMY
            {
                // (Dummy frames, such as the VM's own top-level frame
                // under `<main>`, and frames with no pc yet run no code;
                // Ruby's backtraces skip them too.)
                let (label, file, body) = self
                    .iseq_names(memory, iseq)
                    .ok_or_else(|| format!("frame {cfp:#x}: iseq {iseq:#x} unreadable"))?;
                let line = line_at(memory, &l, body, pc).or_else(|| first_line(memory, &l, body)).unwrap_or(0);
                let label = self.qualified(memory, body, ep, label);
                frames.push(RubyFrame::Ruby { label, file, line });
            }
            cfp += size;
        }
        Ok(frames)
    }

    /// Names one frame the BPF unwinder recorded: `pointer` is an iseq,
    /// with `pos` the index of its pc in the iseq's instructions (`None`:
    /// unknown, the iseq's first line), or a C function's method entry.
    /// The object's type is checked at every call (a freed slot holds
    /// something else, or nothing): `None` when it is neither, or cannot
    /// be read. A method's frame, recorded as its method entry, is named
    /// `Class#label`; other iseq frames keep Ruby's own label (`block in
    /// caller`, `<main>`): the method's class is in an outer environment
    /// the unwinder does not follow.
    pub fn frame(&mut self, memory: &dyn ProcessMemory, pointer: u64, pos: Option<u64>) -> Option<RubyFrame> {
        let flags = flags_of(memory, pointer, consts::T_IMEMO)?;
        match (flags >> consts::IMEMO_SHIFT) & 0xf {
            consts::IMEMO_ISEQ => self.iseq_frame(memory, pointer, pos),
            consts::IMEMO_MENT => {
                // A method frame's entry (the unwinder checked that its
                // definition runs the frame's iseq): `Class#label`.
                let l = &self.layout;
                let def = read_u64(memory, at(pointer, l.me_def)?)?;
                let kind = read_u32(memory, def)? & consts::METHOD_TYPE_MASK;
                if kind != consts::METHOD_TYPE_ISEQ {
                    return self.cfunc_name(memory, pointer).map(|name| RubyFrame::CFunc { name });
                }
                let iseq = read_u64(memory, at(def, l.def_iseq)?)?;
                let RubyFrame::Ruby { label, file, line } = self.iseq_frame(memory, iseq, pos)? else { return None };
                let label = match self.owner_name(memory, pointer) {
                    Some(class) => format!("{class}#{label}"),
                    None => label,
                };
                Some(RubyFrame::Ruby { label, file, line })
            }
            _ => None,
        }
    }

    /// The iseq at `iseq` (type checked), its label, file and the line
    /// of instruction `pos` (`None`: its first line).
    fn iseq_frame(&mut self, memory: &dyn ProcessMemory, iseq: u64, pos: Option<u64>) -> Option<RubyFrame> {
        let (label, file, body) = self.iseq_names(memory, iseq)?;
        let l = &self.layout;
        let pc = pos.and_then(|pos| {
            let encoded = read_u64(memory, at(body, l.body_iseq_encoded)?)?;
            encoded.checked_add(pos.checked_mul(8)?)
        });
        let line = pc.and_then(|pc| line_at(memory, l, body, pc)).or_else(|| first_line(memory, l, body)).unwrap_or(0);
        Some(RubyFrame::Ruby { label, file, line })
    }

    /// `(label, file, body)` of the iseq at `iseq`, cached.
    fn iseq_names(&mut self, memory: &dyn ProcessMemory, iseq: u64) -> Option<(String, String, u64)> {
        let l = &self.layout;
        let flags = flags_of(memory, iseq, consts::T_IMEMO)?;
        if (flags >> consts::IMEMO_SHIFT) & 0xf != consts::IMEMO_ISEQ {
            return None;
        }
        let body = read_u64(memory, at(iseq, l.iseq_body)?)?;
        // A slot freed and reused by another iseq has another body: the
        // cached names are then not its.
        if let Some(hit) = self.iseqs.get(&iseq).filter(|hit| hit.2 == body) {
            return Some(hit.clone());
        }
        let label = read_rstring(memory, l, read_u64(memory, at(body, l.body_label)?)?)?;
        let file = read_pathobj(memory, l, read_u64(memory, at(body, l.body_pathobj)?)?)?;
        self.make_room(label.len() + file.len());
        let entry = (label, file, body);
        self.iseqs.insert(iseq, entry.clone());
        Some(entry)
    }

    /// The name a C function was called by, from its method entry.
    fn cfunc_name(&mut self, memory: &dyn ProcessMemory, me: u64) -> Option<String> {
        let flags = flags_of(memory, me, consts::T_IMEMO)?;
        if (flags >> consts::IMEMO_SHIFT) & 0xf != consts::IMEMO_MENT {
            return None;
        }
        let id = read_u64(memory, at(me, self.layout.me_called_id)?)?;
        let name = self.id_name(memory, id)?;
        Some(match self.owner_name(memory, me) {
            Some(class) => format!("{class}#{name}"),
            None => name,
        })
    }

    /// The name of the class owning the method entry `me`, cached.
    fn owner_name(&mut self, memory: &dyn ProcessMemory, me: u64) -> Option<String> {
        let owner = read_u64(memory, at(me, self.layout.me_owner)?)?;
        if let Some(hit) = self.classes.get(&owner) {
            return hit.clone();
        }
        let layout = self.layout.clone();
        let mut classpath_id = self.classpath_id;
        let name = class_path(memory, &layout, owner, &mut classpath_id, &mut |id| self.id_name(memory, id));
        self.classpath_id = classpath_id;
        self.make_room(name.as_ref().map_or(0, String::len));
        self.classes.insert(owner, name.clone());
        name
    }

    /// `label` with the class of the method it belongs to, as Ruby 3.4
    /// prints it for every version: `Class#m`, `block in Class#m`;
    /// unchanged for class bodies, `<main>` and unnamed classes.
    fn qualified(&mut self, memory: &dyn ProcessMemory, body: u64, ep: u64, label: String) -> String {
        let kind = read_u32(memory, body.wrapping_add(u64::from(self.layout.body_type)));
        if kind != Some(ISEQ_TYPE_METHOD) && kind != Some(ISEQ_TYPE_BLOCK) {
            return label;
        }
        let Some(class) = self.method_class(memory, ep) else { return label };
        if kind == Some(ISEQ_TYPE_METHOD) {
            return format!("{class}#{label}");
        }
        // "block in m", "block (2 levels) in m".
        match label.rsplit_once(" in ") {
            Some((head, method)) => format!("{head} in {class}#{method}"),
            None => label,
        }
    }

    /// The class owning the method whose frame (or block within it) has
    /// the environment `ep`: the method entry at `ep[-2]` of the
    /// method-level environment.
    fn method_class(&mut self, memory: &dyn ProcessMemory, ep: u64) -> Option<String> {
        let mut ep = ep;
        for _ in 0..MAX_EP_HOPS {
            let flags = read_u64(memory, ep)?;
            if flags & ENV_FLAG_LOCAL != 0 {
                let me = read_u64(memory, ep.wrapping_add((consts::EP_ME_CREF * 8) as u64))?;
                let me_flags = flags_of(memory, me, consts::T_IMEMO)?;
                if (me_flags >> consts::IMEMO_SHIFT) & 0xf != consts::IMEMO_MENT {
                    return None;
                }
                return self.owner_name(memory, me);
            }
            // `ep[-1]` is the outer environment, tagged in its low bits.
            ep = read_u64(memory, ep.wrapping_sub(8))? & !3;
        }
        None
    }

    /// The name of the `ID` `id`, from the global symbol table, cached.
    pub fn id_name(&mut self, memory: &dyn ProcessMemory, id: u64) -> Option<String> {
        if let Some(hit) = self.ids.get(&id) {
            return Some(hit.clone());
        }
        let name = id_name(memory, &self.layout, self.symbols?, id)?;
        self.make_room(name.len());
        self.ids.insert(id, name.clone());
        Some(name)
    }
}

/// The first line of the iseq whose body is at `body` (a Fixnum).
fn first_line(memory: &dyn ProcessMemory, l: &RubyLayout, body: u64) -> Option<u32> {
    let value = read_u64(memory, at(body, l.body_first_lineno)?)?;
    (value & 1 == 1).then(|| u32::try_from(value >> 1).ok()).flatten()
}

/// The name of `id` in the symbol table at `symbols`.
fn id_name(memory: &dyn ProcessMemory, l: &RubyLayout, symbols: u64, id: u64) -> Option<String> {
    let serial = if id > l.last_op_id { id >> consts::ID_SCOPE_SHIFT } else { id };
    let last = read_u32(memory, at(symbols, l.symbols_last_id)?)?;
    if serial == 0 || serial > u64::from(last) {
        return None;
    }
    let ids = read_u64(memory, at(symbols, l.symbols_ids)?)?;
    let unit = rarray_entry(memory, l, ids, serial / consts::ID_ENTRY_UNIT)?;
    let string = rarray_entry(memory, l, unit, (serial % consts::ID_ENTRY_UNIT) * consts::ID_ENTRY_SIZE)?;
    read_rstring(memory, l, string)
}

/// Finds `ruby_global_symbols` in the process when the file does not
/// name it (Debian strips `.symtab`, and it is not exported): the
/// word-aligned place in the writable segment `[start, start + len)`
/// whose `ids` table names the operator ids `+` and `-` as "+" and "-"
/// (Ruby registers every one-character operator at start-up), among the
/// first [`MAX_SCAN_CANDIDATES`] places that look like it. Done once
/// per build: the result is a fixed offset in the file.
pub fn find_global_symbols(memory: &dyn ProcessMemory, l: &RubyLayout, start: u64, len: u64) -> Option<u64> {
    if len > MAX_SCAN {
        return None;
    }
    const CHUNK: u64 = 1 << 16;
    let mut off = 0u64;
    let mut candidates = 0;
    while off < len {
        let n = CHUNK.min(len - off) as usize;
        let chunk =
            read_bytes(memory, start.checked_add(off)?, n + 32).or_else(|| read_bytes(memory, start + off, n))?;
        let word = |i: usize| chunk.get(i..i + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        for i in (0..n).step_by(8) {
            let (Some(last), Some(ids)) = (word(i + l.symbols_last_id as usize), word(i + l.symbols_ids as usize))
            else {
                continue;
            };
            // `last_id` is a 32-bit serial padded to 8 bytes.
            if last >> 32 != 0 || last < l.last_op_id || !super::objects::is_heap_object(ids) {
                continue;
            }
            candidates += 1;
            if candidates > MAX_SCAN_CANDIDATES {
                return None;
            }
            let at = start + off + i as u64;
            if id_name(memory, l, at, u64::from(b'+')).as_deref() == Some("+")
                && id_name(memory, l, at, u64::from(b'-')).as_deref() == Some("-")
            {
                return Some(at);
            }
        }
        off += CHUNK;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use crate::ruby::RubyVersion;

    const EC: u64 = 0x1000;
    const STACK: u64 = 0x10000;
    const SYMBOLS: u64 = 0x30000;

    fn heap_string(m: &mut FakeMemory, at: u64, text: &str) {
        m.words(at, &[consts::T_STRING | consts::FL_USER1, 0, text.len() as u64, at + 32]);
        m.add(at + 32, text.as_bytes().to_vec());
    }

    fn heap_array(m: &mut FakeMemory, at: u64, elements: &[u64]) {
        m.words(at, &[consts::T_ARRAY, 0, elements.len() as u64, 0, at + 40]);
        m.words(at + 40, elements);
    }

    /// A 3.1 process: a cfunc frame (`sleep`, no class) over a `<main>`
    /// frame at line 42 of `main.rb`, then the dummy frame Ruby starts
    /// with.
    fn process(cfp_index: u64, stack_words: u64) -> FakeMemory {
        let mut m = FakeMemory::default();
        m.words(EC, &[STACK, stack_words, STACK + 64 * 8 - (3 - cfp_index) * 64]);
        let mut stack = vec![0u64; 64];
        // Environments: cfunc at word 8 (me at 6), main at 16, dummy at 24.
        stack[8] = consts::FRAME_MAGIC_CFUNC | 0x82;
        stack[6] = 0x20000;
        stack[16] = 0x4444_0003;
        stack[24] = consts::FRAME_MAGIC_DUMMY | 0x2;
        // Frames (8 words each) at words 40, 48, 56.
        let frames = [(0, 0, 8), (0x50000 + 8 * 2, 0x40000, 16), (0x1234, 0x40000, 24)];
        for (i, (pc, iseq, ep)) in frames.into_iter().enumerate() {
            let f = 40 + i * 8;
            stack[f] = pc;
            stack[f + 2] = iseq;
            stack[f + 4] = STACK + ep * 8;
        }
        m.words(STACK, &stack);
        // The method entry of `sleep`: id serial 100, no owner.
        m.words(0x20000, &[consts::T_IMEMO | (consts::IMEMO_MENT << 12), 0, 0, 100 << 4, 0]);
        // The symbol table: one unit whose entry 100 is "sleep".
        m.words(SYMBOLS, &[1000, 0, 0x31000, 0]);
        heap_array(&mut m, 0x31000, &[0x32000]);
        let mut unit = vec![0u64; 1024];
        unit[200] = 0x35000;
        heap_array(&mut m, 0x32000, &unit);
        heap_string(&mut m, 0x35000, "sleep");
        // The iseq of `<main>`: type 0, one line entry (42).
        m.words(0x40000, &[consts::T_IMEMO | (consts::IMEMO_ISEQ << 12), 0, 0x41000]);
        let mut body = vec![0u64; 20];
        body[0] = 10 << 32;
        body[1] = 0x50000;
        body[8] = 0x42000; // pathobj
        body[10] = 0x43000; // label
        body[15] = 0x44000; // insns_info.body
        body[17] = 1; // one entry
        m.words(0x41000, &body);
        heap_string(&mut m, 0x42000, "main.rb");
        heap_string(&mut m, 0x43000, "<main>");
        m.add(0x44000, [42u32.to_le_bytes(), [0; 4], [0; 4]].concat());
        m
    }

    fn symbolizer() -> RubySymbolizer {
        RubySymbolizer::new(RubyLayout::for_version(RubyVersion::new(3, 1, 7)).unwrap(), Some(SYMBOLS))
    }

    #[test]
    fn walks_cfunc_and_iseq_frames_and_skips_dummies() {
        let m = process(0, 64);
        let frames = symbolizer().walk(&m, EC).unwrap();
        assert_eq!(
            frames,
            vec![
                RubyFrame::CFunc { name: "sleep".into() },
                RubyFrame::Ruby { label: "<main>".into(), file: "main.rb".into(), line: 42 },
            ]
        );
        // From the second frame: only `<main>`.
        let frames = symbolizer().walk(&process(1, 64), EC).unwrap();
        assert_eq!(frames.len(), 1);
    }

    #[test]
    fn a_pc_without_a_line_entry_gets_the_first_line() {
        let mut m = process(1, 64);
        let region = m.regions.iter_mut().find(|(start, _)| *start == 0x41000).unwrap();
        region.1[17 * 8..18 * 8].copy_from_slice(&0u64.to_le_bytes()); // no entries
        region.1[11 * 8..12 * 8].copy_from_slice(&((7u64 << 1) | 1).to_le_bytes()); // first_lineno 7
        let frames = symbolizer().walk(&m, EC).unwrap();
        assert_eq!(frames, vec![RubyFrame::Ruby { label: "<main>".into(), file: "main.rb".into(), line: 7 }]);
    }

    #[test]
    fn bad_stacks_are_errors() {
        let err = symbolizer().walk(&process(0, MAX_VM_STACK + 1), EC).unwrap_err();
        assert!(err.contains("VM stack of"), "{err}");
        // cfp above the stack's end.
        let err = symbolizer().walk(&process(3, 64), EC).unwrap_err();
        assert!(err.contains("outside the VM stack"), "{err}");
        // A frame whose iseq is not an iseq.
        let mut m = process(0, 64);
        m.regions.retain(|(start, _)| *start != 0x40000);
        m.words(0x40000, &[consts::T_STRING, 0, 0x41000]);
        let err = symbolizer().walk(&m, EC).unwrap_err();
        assert!(err.contains("iseq 0x40000 unreadable"), "{err}");
    }

    #[test]
    fn ids_are_bounded_by_the_table() {
        let m = process(0, 64);
        let mut s = symbolizer();
        assert_eq!(s.id_name(&m, 100 << 4).as_deref(), Some("sleep"));
        assert_eq!(s.id_name(&m, 2000 << 4), None, "past last_id");
        assert_eq!(s.id_name(&m, 101 << 4), None, "an empty entry");
        let none = RubySymbolizer::new(s.layout().clone(), None).id_name(&m, 100 << 4);
        assert_eq!(none, None, "no symbol table");
        // The table is found by its operator entries.
        let mut m = process(0, 64);
        let mut unit = vec![0u64; 1024];
        unit[(b'+' as usize) * 2] = 0x36000;
        unit[(b'-' as usize) * 2] = 0x37000;
        m.regions.retain(|(start, _)| *start != 0x32000 && *start != 0x32000 + 40);
        heap_array(&mut m, 0x32000, &unit);
        heap_string(&mut m, 0x36000, "+");
        heap_string(&mut m, 0x37000, "-");
        m.add(0x2f000, vec![0; 0x1000]);
        assert_eq!(find_global_symbols(&m, s.layout(), 0x2f000, 0x1000), None, "zeros");
        assert_eq!(find_global_symbols(&m, s.layout(), SYMBOLS, 32), Some(SYMBOLS));
        assert_eq!(find_global_symbols(&m, s.layout(), SYMBOLS, MAX_SCAN + 1), None, "too large to scan");
    }

    #[test]
    fn recorded_frames_are_named_by_their_type() {
        let mut m = process(0, 64);
        let mut s = symbolizer();
        let main = RubyFrame::Ruby { label: "<main>".into(), file: "main.rb".into(), line: 42 };
        // An iseq, with its instruction index or without (the first
        // line: one line entry here either way).
        assert_eq!(s.frame(&m, 0x40000, Some(2)), Some(main.clone()));
        // A C function's method entry (definition type CFUNC).
        m.words(0x60000, &[1, 0, 0]);
        m.regions.retain(|(start, _)| *start != 0x20000);
        m.words(0x20000, &[consts::T_IMEMO | (consts::IMEMO_MENT << 12), 0, 0x60000, 100 << 4, 0]);
        assert_eq!(s.frame(&m, 0x20000, None), Some(RubyFrame::CFunc { name: "sleep".into() }));
        // A method's entry whose definition runs the iseq (no class
        // here: the bare label).
        m.words(0x61000, &[consts::METHOD_TYPE_ISEQ as u64, 0x40000, 0]);
        m.words(0x21000, &[consts::T_IMEMO | (consts::IMEMO_MENT << 12), 0, 0x61000, 100 << 4, 0]);
        assert_eq!(s.frame(&m, 0x21000, Some(2)), Some(main.clone()));
        // Whose definition points at something that is not an iseq.
        m.words(0x62000, &[consts::METHOD_TYPE_ISEQ as u64, 0x20000, 0]);
        m.words(0x22000, &[consts::T_IMEMO | (consts::IMEMO_MENT << 12), 0, 0x62000, 100 << 4, 0]);
        assert_eq!(s.frame(&m, 0x22000, Some(2)), None);
        // Not an iseq or a method entry, or nothing: unknown.
        m.words(0x23000, &[consts::T_STRING, 0, 0]);
        assert_eq!(s.frame(&m, 0x23000, None), None);
        assert_eq!(s.frame(&m, 0x9_0000, None), None);
        // The slot freed and reused by another iseq (another body): not
        // the cached names.
        let region = m.regions.iter_mut().find(|(start, _)| *start == 0x40000).unwrap();
        region.1[16..24].copy_from_slice(&0x45000u64.to_le_bytes());
        let mut body = vec![0u64; 20];
        body[0] = 10 << 32;
        body[1] = 0x50000;
        body[8] = 0x42000;
        body[10] = 0x46000;
        body[15] = 0x44000;
        body[17] = 1;
        m.words(0x45000, &body);
        heap_string(&mut m, 0x46000, "other");
        let other = RubyFrame::Ruby { label: "other".into(), file: "main.rb".into(), line: 42 };
        assert_eq!(s.frame(&m, 0x40000, Some(2)), Some(other));
    }

    /// Counts the reads of the memory it wraps.
    struct Counting<'a>(&'a FakeMemory, std::cell::Cell<u64>);

    impl ProcessMemory for Counting<'_> {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.1.set(self.1.get() + 1);
            self.0.read(address, buf)
        }
    }

    /// Iseqs of 4,000-byte labels in files of 4,000-byte names (a
    /// crafted process's): far fewer than MAX_CACHED entries hold
    /// MAX_CACHED_BYTES, and the caches never hold more.
    #[test]
    fn caches_are_bounded_in_bytes() {
        let mut m = process(0, 64);
        heap_string(&mut m, 0x70000, &"l".repeat(4000));
        heap_string(&mut m, 0x72000, &"f".repeat(4000));
        let mut body = vec![0u64; 20];
        body[8] = 0x72000;
        body[10] = 0x70000;
        body[11] = (7 << 1) | 1;
        m.words(0x74000, &body);
        let iseqs = 0x100_0000u64;
        let n = 1200u64;
        for i in 0..n {
            m.words(iseqs + i * 24, &[consts::T_IMEMO | (consts::IMEMO_ISEQ << 12), 0, 0x74000]);
        }
        let mut s = symbolizer();
        for i in 0..n {
            let RubyFrame::Ruby { label, file, line } = s.frame(&m, iseqs + i * 24, None).unwrap() else { panic!() };
            assert_eq!((label.len(), file.len(), line), (4000, 4000, 7));
            assert!(s.cached_bytes <= MAX_CACHED_BYTES);
        }
        // 1,200 iseqs of 8,000 bytes: the byte bound cleared the caches
        // twice, long before MAX_CACHED entries.
        let kept = MAX_CACHED_BYTES / 8000;
        assert_eq!(s.evictions, 2 * kept as u64);
        assert_eq!(s.iseqs.len(), n as usize - 2 * kept);
        assert_eq!(s.cached_bytes, s.iseqs.len() * 8000);
        assert_eq!(s.cached_bytes(), s.cached_bytes);
        // Emptied (the registry's bound over all processes): nothing
        // held, the global symbols still known, and names read again.
        assert!(s.holds_names());
        s.clear_caches();
        assert_eq!((s.cached_bytes(), s.iseqs.len(), s.iseqs.capacity()), (0, 0, 0));
        assert!(!s.holds_names());
        assert_eq!(s.symbols, Some(SYMBOLS));
        assert!(s.frame(&m, iseqs, None).is_some());
        assert_eq!(s.cached_bytes(), 8000);
    }

    /// A class's ivar table of 256 entries, none `__classpath__` (a
    /// crafted process's): only the first MAX_IVARS ids are named. Once a
    /// class was found by its `__classpath__`, the others' keys are
    /// compared with that id, not named.
    #[test]
    fn class_paths_name_a_bounded_number_of_ids() {
        use super::super::classes::MAX_IVARS;
        let mut m = process(0, 64);
        // Serial 101 is "__classpath__".
        let region = m.regions.iter_mut().find(|(start, _)| *start == 0x32000 + 40).unwrap();
        region.1[202 * 8..203 * 8].copy_from_slice(&0x38000u64.to_le_bytes());
        heap_string(&mut m, 0x38000, "__classpath__");
        heap_string(&mut m, 0x39000, "Chain::Worker");
        // A class (flags, ext at 24) -> ext (iv_tbl at 8) -> st_table
        // (start, bound, entries at 32, 40, 48) of (hash, key, value).
        let class = |m: &mut FakeMemory, at: u64, keys: &[u64]| {
            m.words(at, &[2, 0, 0, at + 0x100]);
            m.words(at + 0x100, &[0, at + 0x200]);
            m.words(at + 0x200, &[0, 0, 0, 0, 0, keys.len() as u64, at + 0x300]);
            let entries: Vec<u64> = keys.iter().flat_map(|&k| [1, k, 0x39000]).collect();
            m.words(at + 0x300, &entries);
        };
        let crafted: Vec<u64> = (0..256).map(|i| (500 + i) << 4).collect();
        class(&mut m, 0x80000, &crafted);
        let mut named = vec![(600u64 << 4), (601 << 4), 101 << 4];
        class(&mut m, 0x90000, &named);
        named.insert(0, 602 << 4);
        class(&mut m, 0xa0000, &named);
        let owner = |m: &mut FakeMemory, me: u64, class: u64| {
            m.words(me, &[consts::T_IMEMO | (consts::IMEMO_MENT << 12), 0, 0, 0, class]);
        };
        owner(&mut m, 0xb0000, 0x80000);
        owner(&mut m, 0xb1000, 0x90000);
        owner(&mut m, 0xb2000, 0xa0000);
        let mut s = symbolizer();
        let counted = Counting(&m, Default::default());
        assert_eq!(s.owner_name(&counted, 0xb0000), None);
        // Each id named costs about ten reads (table, unit, string).
        let reads = counted.1.take();
        assert!(reads <= 16 * MAX_IVARS, "{reads} reads for a table of 256");
        assert_eq!(s.owner_name(&counted, 0xb1000).as_deref(), Some("Chain::Worker"));
        assert_eq!(s.classpath_id, Some(101 << 4));
        counted.1.take();
        assert_eq!(s.owner_name(&counted, 0xb2000).as_deref(), Some("Chain::Worker"));
        assert!(counted.1.get() <= 24, "{} reads: keys compared, not named", counted.1.get());
        assert_eq!(s.owner_name(&counted, 0xb0000), None, "cached");
    }

    /// A writable segment whose every word looks like the symbol table
    /// (a crafted libruby's): the scan gives up after
    /// MAX_SCAN_CANDIDATES of them, a bounded number of reads.
    #[test]
    fn the_symbol_scan_checks_a_bounded_number_of_places() {
        let mut m = process(0, 64);
        // Each word is 0x32000: a last id below 2^32 and a heap array.
        let segment = 0x100_0000u64;
        let words = vec![0x32000u64; (1 << 20) / 8];
        m.words(segment, &words);
        let s = symbolizer();
        let counted = Counting(&m, Default::default());
        assert_eq!(find_global_symbols(&counted, s.layout(), segment, 1 << 20), None);
        let reads = counted.1.get();
        assert!(reads > MAX_SCAN_CANDIDATES as u64 && reads <= 16 * MAX_SCAN_CANDIDATES as u64, "{reads} reads");
    }
}
