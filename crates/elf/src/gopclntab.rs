//! Go's function table, `.gopclntab`: function names, source positions,
//! inlining and stack-pointer deltas of every Go function in a binary,
//! present even in binaries linked with `-ldflags='-s -w'` (the runtime
//! needs it for tracebacks and garbage collection).
//!
//! Layout (Go 1.16 and later; the Go source's `runtime/symtab.go`,
//! `cmd/link/internal/ld/pcln.go` and `debug/gosym` describe it):
//!
//! - a header (`runtime.pcHeader`): magic, `0, 0`, the pc quantum, the
//!   pointer size, the function and file counts, then offsets from the
//!   header to the sub-tables `funcnametab`, `cutab`, `filetab`, `pctab`
//!   and `pclntab` (the function table). Go 1.18 added `textStart` before
//!   the offsets (later linkers write 0 there and the runtime takes the
//!   text start from `runtime.firstmoduledata`).
//! - the function table: `nfunc + 1` pairs `(entry, funcoff)`, the last
//!   holding only the end of the text; 8-byte absolute addresses in Go
//!   1.16, 4-byte offsets from the text start since Go 1.18.
//! - per function a `_func` record at `pclntab + funcoff`: name offset,
//!   offsets of its pc-value tables (`pcsp`, `pcfile`, `pcln`), its
//!   compilation unit, then `npcdata` table offsets and `nfuncdata`
//!   pointers (absolute in Go 1.16, offsets from `moduledata.gofunc` since
//!   Go 1.18).
//! - a pc-value table is a sequence of (zig-zag value delta, pc delta /
//!   quantum) varint pairs, starting from value -1 at the function entry.
//! - inlining: `pcdata[PCDATA_InlTreeIndex]` maps a pc to an index into
//!   the function's `funcdata[FUNCDATA_InlTree]` array of inlined calls;
//!   each names the inlined function and a `parentPc`, an instruction of
//!   the caller whose source position is the call site.
//!
//! When the section headers are gone, the table is found by scanning the
//! loaded segments for a valid header. `moduledata.text` and
//! `moduledata.gofunc` come from `runtime.firstmoduledata`, found in the
//! writable data as the record whose first two words point at the header
//! and at `funcnametab`; symbols (`runtime.text`, `go:func.*`) are the
//! fallback when it is not found.
//!
//! Only 64-bit little-endian tables are read (the crate's x86-64 scope).
//! Every read is bounds-checked: malformed tables give `None`, errors or
//! empty results, never a panic.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::file::{cstr_at, ElfFile, ReadLe, PF_X, PT_LOAD, SHT_NOBITS};

/// Header magic of Go 1.16 and 1.17 tables.
pub const GO116_MAGIC: u32 = 0xffff_fffa;
/// Header magic of Go 1.18 and 1.19 tables.
pub const GO118_MAGIC: u32 = 0xffff_fff0;
/// Header magic of Go 1.20 and later tables.
pub const GO120_MAGIC: u32 = 0xffff_fff1;

/// `PF_W`: writable segment.
const PF_W: u32 = 2;
/// `_PCDATA_InlTreeIndex`: the pc-value table giving the inline tree index.
const PCDATA_INL_TREE_INDEX: u32 = 2;
/// `_FUNCDATA_InlTree`: the function's array of inlined calls.
const FUNCDATA_INL_TREE: u32 = 3;
/// Inline depth we follow at most (a guard against cyclic trees).
const MAX_INLINE_DEPTH: usize = 64;
/// Offset of `text` in `runtime.moduledata` (1.16 and later): after
/// `pcHeader`, six slices and `findfunctab, minpc, maxpc`.
const MODULEDATA_TEXT: u64 = 8 + 6 * 24 + 3 * 8;
/// Offset of `minpc` in `runtime.moduledata`.
const MODULEDATA_MINPC: u64 = 8 + 6 * 24 + 8;
/// Offset of `gofunc` in `runtime.moduledata` of Go 1.18 and 1.19 (after
/// `text` ... `enoptrbss`, `end, gcdata, gcbss`, `types, etypes`, `rodata`).
const MODULEDATA_GOFUNC_118: u64 = MODULEDATA_TEXT + 10 * 8 + 3 * 8 + 2 * 8 + 8;
/// Offset of `gofunc` in Go 1.20 and later (`covctrs, ecovctrs` added).
const MODULEDATA_GOFUNC_120: u64 = MODULEDATA_GOFUNC_118 + 2 * 8;

/// `abi.FuncFlagTopFrame`: the function is at the top of its stack
/// (`runtime.goexit`, `runtime.mstart`, ...); unwinding stops there.
pub const FUNC_FLAG_TOP_FRAME: u8 = 1;
/// `abi.FuncFlagSPWrite`: the function writes SP in a way the `pcsp`
/// table cannot express; unwinding cannot continue past it.
pub const FUNC_FLAG_SP_WRITE: u8 = 2;
/// `abi.FuncFlagAsm`: the function is written in assembly.
pub const FUNC_FLAG_ASM: u8 = 4;

/// Which table format a binary uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GoPclntabVersion {
    /// Go 1.16 and 1.17 (magic `0xfffffffa`).
    Go116,
    /// Go 1.18 and 1.19 (magic `0xfffffff0`).
    Go118,
    /// Go 1.20 and later (magic `0xfffffff1`).
    Go120,
}

impl GoPclntabVersion {
    fn from_magic(magic: u32) -> Option<GoPclntabVersion> {
        match magic {
            GO116_MAGIC => Some(GoPclntabVersion::Go116),
            GO118_MAGIC => Some(GoPclntabVersion::Go118),
            GO120_MAGIC => Some(GoPclntabVersion::Go120),
            _ => None,
        }
    }

    /// Size of the header.
    fn header_size(self) -> usize {
        match self {
            GoPclntabVersion::Go116 => 8 + 7 * 8,
            _ => 8 + 8 * 8,
        }
    }

    /// Size of one field of the function table.
    fn functab_field(self) -> usize {
        match self {
            GoPclntabVersion::Go116 => 8,
            _ => 4,
        }
    }

    /// Size of the fixed part of `_func`.
    fn func_size(self) -> usize {
        match self {
            GoPclntabVersion::Go116 => 44,
            GoPclntabVersion::Go118 => 40,
            GoPclntabVersion::Go120 => 44,
        }
    }

    /// Size of one `inlinedCall`.
    fn inlined_call_size(self) -> u64 {
        match self {
            GoPclntabVersion::Go120 => 16,
            _ => 20,
        }
    }
}

/// Where a table is and how to read it, without borrowing the file: keep
/// it next to the (shared) file and [`GoPclntabLayout::bind`] it to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoPclntabLayout {
    version: GoPclntabVersion,
    /// File offset and length of the whole table (header first).
    offset: usize,
    len: usize,
    /// Virtual address of the header.
    vaddr: u64,
    quantum: u8,
    nfunc: u32,
    /// Offsets from the header.
    funcnametab: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// Base of 1.18+ function entry offsets (`moduledata.text`).
    text_start: u64,
    /// Base of 1.18+ funcdata offsets (`moduledata.gofunc`), when found.
    gofunc: Option<u64>,
}

impl GoPclntabLayout {
    /// Reads the table again from `elf`, which must be the file the
    /// layout was found in (another file gives garbage or `None`, never a
    /// panic).
    pub fn bind(self, elf: &ElfFile) -> Option<GoPclntab<'_>> {
        let data = elf.data().get(self.offset..self.offset.checked_add(self.len)?)?;
        Some(GoPclntab { elf, data, layout: self })
    }

    /// The table format.
    pub fn version(&self) -> GoPclntabVersion {
        self.version
    }

    /// Bytes of the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty (never, for a found table).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One Go function's `_func` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoFunc {
    /// Index in the function table.
    pub index: u32,
    /// Entry pc (ELF virtual address).
    pub entry: u64,
    /// One past the last pc (the next function's entry).
    pub end: u64,
    /// Offset of the name in `funcnametab`.
    pub name_off: i32,
    /// Size of the arguments and results.
    pub args: i32,
    /// Offset of the `pcsp` table in `pctab` (0: none).
    pub pcsp: u32,
    /// Offset of the `pcfile` table.
    pub pcfile: u32,
    /// Offset of the `pcln` table.
    pub pcln: u32,
    /// Number of pcdata tables.
    pub npcdata: u32,
    /// The compilation unit's first index in `cutab`.
    pub cu_offset: u32,
    /// Line of the `func` keyword (Go 1.20+), else 0.
    pub start_line: i32,
    /// `abi.FuncID`: which special runtime function this is (0: none).
    pub func_id: u8,
    /// `abi.FuncFlag` bits ([`FUNC_FLAG_TOP_FRAME`], ...; 0 before Go 1.17).
    pub flag: u8,
    /// Number of funcdata entries.
    pub nfuncdata: u8,
    /// Offset of the record from the function table.
    record: usize,
}

impl GoFunc {
    /// Whether unwinding should stop at this function as the stack's
    /// natural end (`runtime.goexit`, `runtime.mstart`, ...).
    pub fn is_top_frame(&self) -> bool {
        self.flag & FUNC_FLAG_TOP_FRAME != 0
    }

    /// Whether the function changes SP in a way `pcsp` cannot describe.
    pub fn writes_sp(&self) -> bool {
        self.flag & FUNC_FLAG_SP_WRITE != 0
    }

    /// Whether the function is written in assembly (Go 1.17+ tables).
    pub fn is_asm(&self) -> bool {
        self.flag & FUNC_FLAG_ASM != 0
    }

    /// Whether `pc` is in the function.
    pub fn contains(&self, pc: u64) -> bool {
        (self.entry..self.end).contains(&pc)
    }
}

/// One source position of a pc, innermost (inlined) first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoFrame<'a> {
    /// Function name (e.g. `main.main`, `net/http.(*conn).serve`).
    pub function: &'a str,
    /// Source file, when the table names one.
    pub file: Option<&'a str>,
    /// Line, 0 when unknown.
    pub line: u32,
    /// Whether this function was inlined into the next frame.
    pub inlined: bool,
}

/// A run of pcs sharing one value of a pc-value table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcRange {
    /// First pc.
    pub start: u64,
    /// One past the last pc.
    pub end: u64,
    /// The value (for `pcsp`: bytes the function has pushed below the
    /// SP it was entered with, excluding the return address).
    pub value: i32,
}

/// Iterator over a pc-value table; see [`GoPclntab::sp_deltas`].
#[derive(Clone, Debug)]
pub struct PcValues<'a> {
    data: &'a [u8],
    pos: usize,
    pc: u64,
    value: i32,
    quantum: u64,
    first: bool,
}

impl Iterator for PcValues<'_> {
    type Item = PcRange;

    fn next(&mut self) -> Option<PcRange> {
        let uvdelta = read_uvarint(self.data, &mut self.pos)?;
        if uvdelta == 0 && !self.first {
            self.data = &[];
            return None;
        }
        self.first = false;
        // Zig-zag: the low bit is the sign.
        let vdelta = if uvdelta & 1 != 0 { !(uvdelta >> 1) as i32 } else { (uvdelta >> 1) as i32 };
        let pcdelta = u64::from(read_uvarint(self.data, &mut self.pos)?) * self.quantum;
        let start = self.pc;
        self.pc = self.pc.checked_add(pcdelta)?;
        self.value = self.value.wrapping_add(vdelta);
        Some(PcRange { start, end: self.pc, value: self.value })
    }
}

/// A u32 LEB128 varint at `*pos`; `None` when truncated or too long.
fn read_uvarint(data: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// A Go function table, borrowed from its file.
#[derive(Clone, Copy, Debug)]
pub struct GoPclntab<'a> {
    elf: &'a ElfFile,
    data: &'a [u8],
    layout: GoPclntabLayout,
}

/// The header fields that matter, read and checked.
struct Header {
    version: GoPclntabVersion,
    quantum: u8,
    nfunc: u32,
    text_start: u64,
    funcnametab: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
}

/// Most functions a table may declare. The largest Go binaries have a
/// few hundred thousand; a table's byte size bounds the count further
/// (every function has a pair in the function table and a `_func` record).
pub const MAX_GO_FUNCTIONS: u32 = 1 << 22;

/// Most bytes of one segment searched for a table header when there is
/// no `.gopclntab` section (the largest Go binaries' read-only segments
/// are a few hundred MB).
const MAX_PCLNTAB_SCAN: usize = 1 << 30;

/// Why a header was not accepted.
enum HeaderError {
    /// Not a (supported) table header.
    NotATable,
    /// A header declaring more functions (first) than allowed (second).
    TooManyFunctions(u32, u64),
}

/// Reads and checks a header at the start of `data`.
fn parse_header(data: &[u8]) -> Option<Header> {
    checked_header(data).ok()
}

/// Reads and checks a header at the start of `data`, saying why it is
/// refused.
fn checked_header(data: &[u8]) -> Result<Header, HeaderError> {
    let header = header_fields(data).ok_or(HeaderError::NotATable)?;
    // Each function takes a function table pair and a record.
    let version = header.version;
    let per_function = 2 * version.functab_field() + version.func_size();
    let room = data.len().saturating_sub(header.functab) / per_function;
    let limit = u64::from(MAX_GO_FUNCTIONS).min(room as u64);
    if u64::from(header.nfunc) > limit {
        return Err(HeaderError::TooManyFunctions(header.nfunc, limit));
    }
    Ok(header)
}

/// The header fields at the start of `data`, checked for consistency.
fn header_fields(data: &[u8]) -> Option<Header> {
    let version = GoPclntabVersion::from_magic(data.u32_at(0)?)?;
    if data.u8_at(4)? != 0 || data.u8_at(5)? != 0 {
        return None;
    }
    let quantum = data.u8_at(6)?;
    if !matches!(quantum, 1 | 2 | 4) || data.u8_at(7)? != 8 {
        return None;
    }
    let word = |i: usize| data.u64_at(8 + 8 * i);
    let nfunc = u32::try_from(word(0)?).ok()?;
    let (text_start, first) = match version {
        GoPclntabVersion::Go116 => (0, 2),
        _ => (word(2)?, 3),
    };
    let off = |i: usize| -> Option<usize> {
        let v = usize::try_from(word(first + i)?).ok()?;
        (v >= version.header_size() && v <= data.len()).then_some(v)
    };
    let header = Header {
        version,
        quantum,
        nfunc,
        text_start,
        funcnametab: off(0)?,
        cutab: off(1)?,
        filetab: off(2)?,
        pctab: off(3)?,
        functab: off(4)?,
    };
    // The function table must fit.
    let functab_len = (nfunc as usize).checked_mul(2)?.checked_add(1)?.checked_mul(version.functab_field())?;
    if header.functab.checked_add(functab_len)? > data.len() || nfunc == 0 {
        return None;
    }
    Some(header)
}

impl<'a> GoPclntab<'a> {
    /// Finds the table of a Go binary: the `.gopclntab` section, else a
    /// valid header in a loaded segment. `Ok(None)` for files without one
    /// (not Go, or a Go version before 1.16).
    pub fn find(elf: &'a ElfFile) -> Result<Option<GoPclntab<'a>>> {
        let Some((offset, len, vaddr, header)) = locate(elf)? else {
            return Ok(None);
        };
        let mut layout = GoPclntabLayout {
            version: header.version,
            offset,
            len,
            vaddr,
            quantum: header.quantum,
            nfunc: header.nfunc,
            funcnametab: header.funcnametab,
            cutab: header.cutab,
            filetab: header.filetab,
            pctab: header.pctab,
            functab: header.functab,
            text_start: header.text_start,
            gofunc: None,
        };
        if header.version != GoPclntabVersion::Go116 {
            // `runtime.firstmoduledata`, accepted when its `minpc` is the
            // first function's entry computed from its `text`.
            let moduledata = find_moduledata(elf, vaddr, header.funcnametab as u64).filter(|&md| {
                let text = read_u64_at_vaddr(elf, md + MODULEDATA_TEXT);
                let minpc = read_u64_at_vaddr(elf, md + MODULEDATA_MINPC);
                let first = functab_entry(elf, &layout, 0).map(u64::from);
                matches!((text, minpc, first), (Some(t), Some(m), Some(f)) if t.checked_add(f) == Some(m))
            });
            let read = |field: u64| moduledata.and_then(|md| read_u64_at_vaddr(elf, md + field));
            if layout.text_start == 0 {
                layout.text_start = read(MODULEDATA_TEXT)
                    .or_else(|| elf.symbol_address("runtime.text"))
                    .or_else(|| elf.section_by_name(".text").map(|s| s.addr))
                    .unwrap_or(0);
            }
            let gofunc_field = match header.version {
                GoPclntabVersion::Go118 => MODULEDATA_GOFUNC_118,
                _ => MODULEDATA_GOFUNC_120,
            };
            layout.gofunc = read(gofunc_field)
                .filter(|&a| elf.load_segment_for_vaddr(a).is_some())
                .or_else(|| elf.symbol_address("go:func.*"))
                .or_else(|| elf.symbol_address("go.func.*"));
        }
        let data =
            slice_of(elf, &layout).ok_or(Error::Malformed { what: ".gopclntab bounds", value: offset as u64 })?;
        Ok(Some(GoPclntab { elf, data, layout }))
    }

    /// The table's position, to keep without borrowing the file.
    pub fn layout(&self) -> GoPclntabLayout {
        self.layout
    }

    /// The table format.
    pub fn version(&self) -> GoPclntabVersion {
        self.layout.version
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.layout.nfunc as usize
    }

    /// Whether the table has no function.
    pub fn is_empty(&self) -> bool {
        self.layout.nfunc == 0
    }

    /// The virtual address of the table's header.
    pub fn vaddr(&self) -> u64 {
        self.layout.vaddr
    }

    /// The pc range the table covers (first entry to the end of the last
    /// function).
    pub fn text_range(&self) -> Range<u64> {
        let start = self.entry_pc(0).unwrap_or(0);
        let end = self.entry_pc(self.layout.nfunc).unwrap_or(start);
        start..end.max(start)
    }

    /// Whether inline frames can be read (Go 1.16, or 1.18+ with
    /// `moduledata.gofunc` found).
    pub fn has_inline_info(&self) -> bool {
        self.layout.version == GoPclntabVersion::Go116 || self.layout.gofunc.is_some()
    }

    fn functab(&self) -> &'a [u8] {
        self.data.get(self.layout.functab..).unwrap_or(&[])
    }

    /// Entry pc of function `i` (`i == nfunc`: the end of the text).
    fn entry_pc(&self, i: u32) -> Option<u64> {
        if i > self.layout.nfunc {
            return None;
        }
        let ft = self.functab();
        match self.layout.version {
            GoPclntabVersion::Go116 => ft.u64_at(i as usize * 16),
            _ => ft.u32_at(i as usize * 8).and_then(|o| self.layout.text_start.checked_add(u64::from(o))),
        }
    }

    /// Offset of function `i`'s record from the function table.
    fn func_offset(&self, i: u32) -> Option<usize> {
        if i >= self.layout.nfunc {
            return None;
        }
        let ft = self.functab();
        let off = match self.layout.version {
            GoPclntabVersion::Go116 => ft.u64_at(i as usize * 16 + 8)?,
            _ => u64::from(ft.u32_at(i as usize * 8 + 4)?),
        };
        // All ones marks a hole (code the Go linker does not know).
        if off == u64::from(u32::MAX) || off == u64::MAX {
            return None;
        }
        usize::try_from(off).ok()
    }

    /// Function `i` of the table.
    pub fn func(&self, i: u32) -> Option<GoFunc> {
        let record = self.func_offset(i)?;
        let ft = self.functab();
        let r = ft.get(record..)?;
        if r.len() < self.layout.version.func_size() {
            return None;
        }
        let entry = self.entry_pc(i)?;
        let end = self.entry_pc(i + 1)?;
        // 1.18+ records start with entryoff instead of the 8-byte entry.
        let b = match self.layout.version {
            GoPclntabVersion::Go116 => 8,
            _ => 4,
        };
        let (start_line, tail) = match self.layout.version {
            GoPclntabVersion::Go120 => (r.u32_at(b + 32)? as i32, b + 36),
            _ => (0, b + 32),
        };
        let (flag, nfuncdata) = match self.layout.version {
            // 1.16: funcID, 2 bytes of padding, nfuncdata.
            GoPclntabVersion::Go116 => (0, r.u8_at(tail + 3)?),
            _ => (r.u8_at(tail + 1)?, r.u8_at(tail + 3)?),
        };
        Some(GoFunc {
            index: i,
            entry,
            end: end.max(entry),
            name_off: r.u32_at(b)? as i32,
            args: r.u32_at(b + 4)? as i32,
            pcsp: r.u32_at(b + 12)?,
            pcfile: r.u32_at(b + 16)?,
            pcln: r.u32_at(b + 20)?,
            npcdata: r.u32_at(b + 24)?,
            cu_offset: r.u32_at(b + 28)?,
            start_line,
            func_id: r.u8_at(tail)?,
            flag,
            nfuncdata,
            record,
        })
    }

    /// The function containing `pc`.
    pub fn find_func(&self, pc: u64) -> Option<GoFunc> {
        let n = self.layout.nfunc;
        if !self.text_range().contains(&pc) {
            return None;
        }
        // Greatest i < n with entry(i) <= pc.
        let (mut lo, mut hi) = (0u32, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.entry_pc(mid)? <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.func(lo).filter(|f| f.contains(pc))
    }

    /// All functions, in address order.
    pub fn funcs(&self) -> impl Iterator<Item = GoFunc> + '_ {
        (0..self.layout.nfunc).filter_map(move |i| self.func(i))
    }

    /// The NUL-terminated string at `off` of the sub-table at `table`.
    fn string_at(&self, table: usize, off: usize) -> Option<&'a str> {
        let bytes = cstr_at(self.data, table.checked_add(off)?)?;
        std::str::from_utf8(bytes).ok()
    }

    /// The name at `name_off` of `funcnametab`.
    fn name(&self, name_off: i32) -> Option<&'a str> {
        self.string_at(self.layout.funcnametab, usize::try_from(name_off).ok()?)
    }

    /// A function's name.
    pub fn func_name(&self, f: &GoFunc) -> Option<&'a str> {
        self.name(f.name_off)
    }

    /// The pc-value table at `off` of `pctab`, starting at `entry`.
    fn pc_values(&self, off: u32, entry: u64) -> PcValues<'a> {
        let data = if off == 0 {
            &[][..]
        } else {
            self.data.get(self.layout.pctab.saturating_add(off as usize)..).unwrap_or(&[])
        };
        PcValues { data, pos: 0, pc: entry, value: -1, quantum: u64::from(self.layout.quantum), first: true }
    }

    /// The value of the table at `off` for `pc`.
    fn pc_value(&self, off: u32, entry: u64, pc: u64) -> Option<i32> {
        self.pc_values(off, entry).find(|r| pc < r.end).filter(|r| pc >= r.start).map(|r| r.value)
    }

    /// The `pcsp` table of `f`: for each pc range, how many bytes the
    /// function has pushed below the SP it was entered with (the return
    /// address is at `SP + value` and the caller's SP at `SP + value + 8`
    /// on x86-64). What a Go unwinder needs, with [`GoFunc::entry`],
    /// [`GoFunc::end`] and [`GoFunc::is_top_frame`].
    pub fn sp_deltas(&self, f: &GoFunc) -> PcValues<'a> {
        self.pc_values(f.pcsp, f.entry)
    }

    /// The `pcsp` value at `pc` in `f`.
    pub fn sp_delta(&self, f: &GoFunc, pc: u64) -> Option<i32> {
        self.pc_value(f.pcsp, f.entry, pc)
    }

    /// File and line of `pc` in `f` (for an inlined pc: the position in
    /// the inlined function's body).
    pub fn file_line(&self, f: &GoFunc, pc: u64) -> (Option<&'a str>, u32) {
        let line = self.pc_value(f.pcln, f.entry, pc).and_then(|l| u32::try_from(l).ok()).unwrap_or(0);
        let file =
            self.pc_value(f.pcfile, f.entry, pc).and_then(|i| u32::try_from(i).ok()).and_then(|i| self.file_name(f, i));
        (file, line)
    }

    /// File `index` of `f`'s compilation unit.
    fn file_name(&self, f: &GoFunc, index: u32) -> Option<&'a str> {
        let slot = f.cu_offset.checked_add(index)? as usize;
        let off = self.data.u32_at(self.layout.cutab.checked_add(slot.checked_mul(4)?)?)?;
        if off == u32::MAX {
            return None;
        }
        self.string_at(self.layout.filetab, off as usize)
    }

    /// Offset of `pcdata[i]` of `f` in `pctab` (`None` when absent).
    fn pcdata(&self, f: &GoFunc, i: u32) -> Option<u32> {
        if i >= f.npcdata {
            return None;
        }
        let at = f.record + self.layout.version.func_size() + i as usize * 4;
        self.functab().u32_at(at).filter(|&o| o != 0)
    }

    /// Address of `funcdata[i]` of `f`.
    fn funcdata(&self, f: &GoFunc, i: u32) -> Option<u64> {
        if i >= u32::from(f.nfuncdata) {
            return None;
        }
        let after_pcdata = f.record + self.layout.version.func_size() + (f.npcdata as usize).checked_mul(4)?;
        match self.layout.version {
            GoPclntabVersion::Go116 => {
                // Pointers are 8-aligned in memory.
                let abs = self.layout.vaddr.checked_add((self.layout.functab + after_pcdata) as u64)?;
                let at = after_pcdata + (abs % 8) as usize;
                self.functab().u64_at(at + i as usize * 8).filter(|&p| p != 0)
            }
            _ => {
                let off = self.functab().u32_at(after_pcdata + i as usize * 4)?;
                if off == u32::MAX {
                    return None;
                }
                self.layout.gofunc?.checked_add(u64::from(off))
            }
        }
    }

    /// The source positions of `pc`, innermost first: the functions
    /// inlined at `pc` (each with the position in its body), then the
    /// function containing `pc`. Empty when no function contains `pc`.
    pub fn frames(&self, pc: u64) -> Vec<GoFrame<'a>> {
        let Some(f) = self.find_func(pc) else {
            return Vec::new();
        };
        let mut frames = Vec::new();
        let mut at = pc;
        if let (Some(index_table), Some(tree)) =
            (self.pcdata(&f, PCDATA_INL_TREE_INDEX), self.funcdata(&f, FUNCDATA_INL_TREE))
        {
            let size = self.layout.version.inlined_call_size();
            while frames.len() < MAX_INLINE_DEPTH {
                let Some(ix) = self.pc_value(index_table, f.entry, at).and_then(|ix| u64::try_from(ix).ok()) else {
                    break;
                };
                let Some(call) = ix
                    .checked_mul(size)
                    .and_then(|o| tree.checked_add(o))
                    .and_then(|a| self.elf.bytes_at_vaddr(a, size as usize))
                else {
                    break;
                };
                let (name_off, parent_pc) = match self.layout.version {
                    GoPclntabVersion::Go120 => (call.u32_at(4), call.u32_at(8)),
                    _ => (call.u32_at(12), call.u32_at(16)),
                };
                let (Some(name_off), Some(parent_pc)) = (name_off, parent_pc) else {
                    break;
                };
                let (file, line) = self.file_line(&f, at);
                frames.push(GoFrame { function: self.name(name_off as i32).unwrap_or("?"), file, line, inlined: true });
                let Some(next) = f.entry.checked_add(u64::from(parent_pc)) else {
                    break;
                };
                if !f.contains(next) {
                    break;
                }
                at = next;
            }
        }
        let (file, line) = self.file_line(&f, at);
        frames.push(GoFrame { function: self.func_name(&f).unwrap_or("?"), file, line, inlined: false });
        frames
    }
}

/// The 1.18+ entry offset of function `i` (from the text start).
fn functab_entry(elf: &ElfFile, layout: &GoPclntabLayout, i: usize) -> Option<u32> {
    slice_of(elf, layout)?.u32_at(layout.functab.checked_add(i.checked_mul(8)?)?)
}

/// The table's bytes.
fn slice_of<'e>(elf: &'e ElfFile, layout: &GoPclntabLayout) -> Option<&'e [u8]> {
    elf.data().get(layout.offset..layout.offset.checked_add(layout.len)?)
}

/// (file offset, length, vaddr, header) of the table.
fn locate(elf: &ElfFile) -> Result<Option<(usize, usize, u64, Header)>> {
    // Internal linking names it `.gopclntab`; some external links keep a
    // prefix (`.data.rel.ro.gopclntab`).
    for s in elf.sections().iter().filter(|s| s.name.ends_with(".gopclntab") && s.sh_type != SHT_NOBITS) {
        let data = elf.section_data(s)?;
        let header = match checked_header(data) {
            Ok(h) => Some(h),
            Err(HeaderError::TooManyFunctions(n, limit)) => {
                return Err(Error::OverLimit { what: ".gopclntab functions", value: n.into(), limit })
            }
            Err(HeaderError::NotATable) => None,
        };
        if let Some(h) = header {
            let offset = usize::try_from(s.offset)
                .map_err(|_| Error::Malformed { what: ".gopclntab offset", value: s.offset })?;
            return Ok(Some((offset, data.len(), s.addr, h)));
        }
    }
    // No section: scan the loaded, non-executable segments (the table is
    // read-only data) at 8-byte aligned addresses. Only in files that may
    // be Go: the scan reads (and makes resident) every read-only page.
    if !may_be_go(elf) {
        return Ok(None);
    }
    for p in elf.program_headers().iter().filter(|p| p.p_type == PT_LOAD && p.flags & PF_X == 0) {
        let Ok(seg) = elf.segment_data(p) else {
            continue;
        };
        // A (sparse) file can claim a segment of terabytes.
        let seg = &seg[..seg.len().min(MAX_PCLNTAB_SCAN)];
        let magics = [GO120_MAGIC, GO118_MAGIC, GO116_MAGIC].map(u32::to_le_bytes);
        let first = ((8 - p.vaddr % 8) % 8) as usize;
        let mut at = first;
        while at + 8 <= seg.len() {
            let word = &seg[at..at + 4];
            if magics.iter().any(|m| m == word) && seg[at + 4..at + 6] == [0, 0] {
                let data = &seg[at..];
                if let Some(h) = parse_header(data) {
                    if plausible(elf, data, &h) {
                        let offset = usize::try_from(p.offset).unwrap_or(usize::MAX);
                        return Ok(Some((offset.saturating_add(at), data.len(), p.vaddr + at as u64, h)));
                    }
                }
            }
            at += 8;
        }
    }
    Ok(None)
}

/// Whether `elf` may hold Go's function table without a section naming
/// it: a section or note only Go binaries have, or no section headers
/// (then only a scan can tell). A C++ library of 200 MB has none of them,
/// and scanning its read-only segments would read tens of MB for nothing.
pub fn may_be_go(elf: &ElfFile) -> bool {
    let sections = elf.sections();
    sections.is_empty()
        || sections
            .iter()
            .any(|s| s.name.ends_with(".gopclntab") || s.name == ".go.buildinfo" || s.name == ".note.go.buildid")
        || elf.go_build_id().ok().flatten().is_some()
}

/// Whether a header found by scanning describes a real table: its first
/// function's name is a string and, for Go 1.16, its functions lie in an
/// executable segment in increasing order.
fn plausible(elf: &ElfFile, data: &[u8], h: &Header) -> bool {
    let ft = &data[h.functab..];
    let field = h.version.functab_field();
    let entry = |i: usize| match h.version {
        GoPclntabVersion::Go116 => ft.u64_at(i * 2 * field),
        _ => ft.u32_at(i * 2 * field).map(u64::from),
    };
    let (Some(first), Some(last)) = (entry(0), entry(h.nfunc as usize)) else {
        return false;
    };
    if first > last {
        return false;
    }
    if h.version == GoPclntabVersion::Go116 {
        let exec = |a: u64| {
            elf.program_headers()
                .iter()
                .any(|p| p.p_type == PT_LOAD && p.flags & PF_X != 0 && a >= p.vaddr && a <= p.vaddr + p.memsz)
        };
        if !exec(first) || !exec(last) {
            return false;
        }
    }
    let funcoff = match h.version {
        GoPclntabVersion::Go116 => ft.u64_at(field),
        _ => ft.u32_at(field).map(u64::from),
    };
    let name_off =
        funcoff.and_then(|o| usize::try_from(o).ok()).and_then(|o| ft.u32_at(o + if field == 8 { 8 } else { 4 }));
    name_off
        .and_then(|n| cstr_at(data, h.funcnametab.checked_add(n as usize)?))
        .is_some_and(|n| !n.is_empty() && std::str::from_utf8(n).is_ok())
}

/// The 8 bytes at `vaddr`, when file-backed.
fn read_u64_at_vaddr(elf: &ElfFile, vaddr: u64) -> Option<u64> {
    elf.bytes_at_vaddr(vaddr, 8)?.u64_at(0)
}

/// The address of `runtime.firstmoduledata`: an 8-aligned word in the
/// writable segments equal to the table's address, followed by the
/// `funcnametab` slice pointing at the table's name table.
fn find_moduledata(elf: &ElfFile, pclntab: u64, funcnametab: u64) -> Option<u64> {
    let names = pclntab.checked_add(funcnametab)?;
    for p in elf.program_headers().iter().filter(|p| p.p_type == PT_LOAD && p.flags & PF_W != 0) {
        let Ok(seg) = elf.segment_data(p) else {
            continue;
        };
        let first = ((8 - p.vaddr % 8) % 8) as usize;
        let mut at = first;
        while at + 16 <= seg.len() {
            if seg.u64_at(at) == Some(pclntab) && seg.u64_at(at + 8) == Some(names) {
                return Some(p.vaddr + at as u64);
            }
            at += 8;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut pos = 0;
        assert_eq!(read_uvarint(&[0x96, 0x01], &mut pos), Some(150));
        assert_eq!(pos, 2);
        let mut pos = 0;
        assert_eq!(read_uvarint(&[0x80, 0x80], &mut pos), None);
        let mut pos = 0;
        assert_eq!(read_uvarint(&[0xff; 6], &mut pos), None);
    }

    #[test]
    fn pc_value_steps() {
        // Value -1 -> 7 over [100, 104), 7 -> 3 over [104, 110), end.
        // Deltas: +8 (zig-zag 16), pc 4; -4 (zig-zag 7), pc 6; 0 ends.
        let table = [16u8, 4, 7, 6, 0];
        let values: Vec<_> = PcValues { data: &table, pos: 0, pc: 100, value: -1, quantum: 1, first: true }.collect();
        assert_eq!(
            values,
            vec![PcRange { start: 100, end: 104, value: 7 }, PcRange { start: 104, end: 110, value: 3 },]
        );
    }

    /// Writers for little-endian test data.
    trait Put {
        fn u8(&mut self, v: u8);
        fn u16(&mut self, v: u16);
        fn u32(&mut self, v: u32);
        fn u64(&mut self, v: u64);
        fn align(&mut self, a: usize);
    }
    impl Put for Vec<u8> {
        fn u8(&mut self, v: u8) {
            self.push(v);
        }
        fn u16(&mut self, v: u16) {
            self.extend(v.to_le_bytes());
        }
        fn u32(&mut self, v: u32) {
            self.extend(v.to_le_bytes());
        }
        fn u64(&mut self, v: u64) {
            self.extend(v.to_le_bytes());
        }
        fn align(&mut self, a: usize) {
            while !self.len().is_multiple_of(a) {
                self.push(0);
            }
        }
    }

    /// A pc-value table from (value, pc length) runs, starting at -1.
    fn pc_table(runs: &[(i32, u32)]) -> Vec<u8> {
        fn uvarint(out: &mut Vec<u8>, mut v: u32) {
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        let mut out = Vec::new();
        let mut prev = -1;
        for &(value, len) in runs {
            let d = value - prev;
            uvarint(&mut out, if d < 0 { ((!d as u32) << 1) | 1 } else { (d as u32) << 1 });
            uvarint(&mut out, len);
            prev = value;
        }
        out.push(0);
        out
    }

    const TEXT: u64 = 0x40_1000;
    const RO_VADDR: u64 = 0x50_0000;
    const RW_VADDR: u64 = 0x60_0000;
    /// File offset of the table in the synthetic binary.
    const PCLN_AT: usize = 0x100;

    /// A synthetic x86-64 executable holding a Go function table of
    /// `version` with two functions, `main.outer` (0x401000..0x401040,
    /// with `main.inner` inlined at 0x401010..0x401020) and `main.other`
    /// (..0x401080), and a `runtime.firstmoduledata` for Go 1.18+.
    fn synthetic(version: GoPclntabVersion, with_sections: bool) -> Vec<u8> {
        let v116 = version == GoPclntabVersion::Go116;
        let hsize = version.header_size();
        // Sub-tables, offsets relative to the header.
        let names = b"\0main.outer\0main.other\0main.inner\0";
        let (outer, other, inner) = (1i32, 12i32, 23i32);
        let mut t = vec![0u8; hsize];
        let funcnametab = t.len();
        t.extend(names);
        t.align(4);
        let cutab = t.len();
        t.u32(0);
        let filetab = t.len();
        t.extend(b"main.go\0");
        let pctab = t.len();
        t.push(0);
        let mut table = |runs: &[(i32, u32)]| {
            let off = (t.len() - pctab) as u32;
            t.extend(pc_table(runs));
            off
        };
        let pcsp = table(&[(0, 4), (24, 0x38), (0, 4)]);
        let pcfile = table(&[(0, 0x40)]);
        let pcln = table(&[(10, 0x10), (20, 0x10), (11, 0x20)]);
        let inl = table(&[(-1, 0x10), (0, 0x10), (-1, 0x20)]);
        let pcsp2 = table(&[(8, 0x40)]);
        let pcln2 = table(&[(30, 0x40)]);
        t.align(8);
        let functab = t.len();
        let field = version.functab_field();
        let records_at = (2 * 2 + 1) * field;
        // Records after the function table; the inline tree after them.
        let mut recs: Vec<u8> = Vec::new();
        let mut funcoffs = Vec::new();
        let inl_tree_vaddr =
            |recs_len: usize| (RO_VADDR + (PCLN_AT + functab + records_at + recs_len + 64) as u64) & !7;
        for (i, (entry, name, sp, ln, has_inl)) in
            [(TEXT, outer, pcsp, pcln, true), (TEXT + 0x40, other, pcsp2, pcln2, false)].into_iter().enumerate()
        {
            let _ = i;
            recs.align(8);
            funcoffs.push(records_at + recs.len());
            let npcdata = if has_inl { 3 } else { 0 };
            let nfuncdata = if has_inl { 4 } else { 0 };
            if v116 {
                recs.u64(entry);
            } else {
                recs.u32((entry - TEXT) as u32);
            }
            recs.u32(name as u32);
            recs.u32(0); // args
            recs.u32(0); // deferreturn
            recs.u32(sp);
            recs.u32(pcfile);
            recs.u32(ln);
            recs.u32(npcdata);
            recs.u32(0); // cuOffset
            if version == GoPclntabVersion::Go120 {
                recs.u32(9); // startLine
            }
            recs.u8(0); // funcID
            recs.u8(0); // flag / pad
            recs.u8(0);
            recs.u8(nfuncdata);
            if has_inl {
                recs.u32(0);
                recs.u32(0);
                recs.u32(inl);
                // Placeholder for funcdata; patched below.
                recs.extend([0xaa; 40]);
            }
        }
        // Patch funcdata of function 0 now that the records' size is known.
        let tree = inl_tree_vaddr(recs.len());
        {
            let rec0 = funcoffs[0] - records_at;
            let after_pcdata = rec0 + version.func_size() + 12;
            let mut fd = Vec::new();
            if v116 {
                let abs = RO_VADDR + (PCLN_AT + functab + records_at + after_pcdata) as u64;
                let pad = (abs % 8) as usize;
                fd.extend(vec![0u8; pad]);
                fd.u64(0);
                fd.u64(0);
                fd.u64(0);
                fd.u64(tree);
            } else {
                fd.u32(u32::MAX);
                fd.u32(u32::MAX);
                fd.u32(u32::MAX);
                fd.u32(0); // offset from gofunc = the tree
            }
            recs[after_pcdata..after_pcdata + fd.len()].copy_from_slice(&fd);
        }
        for (i, entry) in [TEXT, TEXT + 0x40, TEXT + 0x80].into_iter().enumerate() {
            let e = if v116 { entry } else { entry - TEXT };
            if field == 8 {
                t.u64(e);
                if i < 2 {
                    t.u64(funcoffs[i] as u64);
                }
            } else {
                t.u32(e as u32);
                if i < 2 {
                    t.u32(funcoffs[i] as u32);
                }
            }
        }
        assert_eq!(t.len(), functab + records_at);
        t.extend(&recs);
        // Header.
        let magic = match version {
            GoPclntabVersion::Go116 => GO116_MAGIC,
            GoPclntabVersion::Go118 => GO118_MAGIC,
            GoPclntabVersion::Go120 => GO120_MAGIC,
        };
        let mut h = Vec::new();
        h.u32(magic);
        h.extend([0, 0, 1, 8]);
        h.u64(2);
        h.u64(1);
        if !v116 {
            h.u64(0); // textStart: left to moduledata, as recent linkers do
        }
        for off in [funcnametab, cutab, filetab, pctab, functab] {
            h.u64(off as u64);
        }
        t[..hsize].copy_from_slice(&h);
        let pcln_len = t.len();

        // The file: header, program headers, table, inline tree, moduledata.
        let mut f = vec![0u8; PCLN_AT];
        f.extend(&t);
        f.align(8);
        let tree_off = (tree - RO_VADDR) as usize;
        assert!(tree_off >= f.len(), "tree placement");
        f.resize(tree_off, 0);
        let call_site_pc = 0x24u32; // in main.outer, line 11
        if version == GoPclntabVersion::Go120 {
            f.u8(0);
            f.extend([0; 3]);
            f.u32(inner as u32);
            f.u32(call_site_pc);
            f.u32(19); // startLine
        } else {
            f.u16(u16::MAX); // parent -1
            f.u8(0);
            f.u8(0);
            f.u32(0); // file
            f.u32(11); // line
            f.u32(inner as u32);
            f.u32(call_site_pc);
        }
        f.align(16);
        let md_off = f.len();
        let mut md = vec![0u8; 400];
        let pcln_vaddr = RO_VADDR + PCLN_AT as u64;
        md[..8].copy_from_slice(&pcln_vaddr.to_le_bytes());
        md[8..16].copy_from_slice(&(pcln_vaddr + funcnametab as u64).to_le_bytes());
        let put =
            |md: &mut Vec<u8>, at: u64, v: u64| md[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut md, MODULEDATA_MINPC, TEXT);
        put(&mut md, MODULEDATA_TEXT, TEXT);
        let gofunc_at = if version == GoPclntabVersion::Go118 { MODULEDATA_GOFUNC_118 } else { MODULEDATA_GOFUNC_120 };
        put(&mut md, gofunc_at, tree);
        f.extend(&md);
        let end_of_data = f.len();

        // Sections: NULL, .gopclntab, .shstrtab.
        let mut shoff = 0;
        if with_sections {
            let strtab_off = f.len();
            f.extend(b"\0.gopclntab\0.shstrtab\0");
            f.align(8);
            shoff = f.len();
            f.extend([0u8; 64]);
            for (name, addr, off, size, ty) in
                [(1u32, pcln_vaddr, PCLN_AT as u64, pcln_len as u64, 1u32), (12, 0, strtab_off as u64, 23, 3)]
            {
                f.u32(name);
                f.u32(ty);
                f.u64(2); // SHF_ALLOC
                f.u64(addr);
                f.u64(off);
                f.u64(size);
                f.u32(0);
                f.u32(0);
                f.u64(8);
                f.u64(0);
            }
        }
        // ELF header and program headers.
        let mut e = Vec::new();
        e.extend(b"\x7fELF");
        e.extend([2, 1, 1, 0]);
        e.extend([0u8; 8]);
        e.u16(2); // ET_EXEC
        e.u16(62);
        e.u32(1);
        e.u64(TEXT);
        e.u64(64); // phoff
        e.u64(shoff as u64);
        e.u32(0);
        e.u16(64);
        e.u16(56);
        e.u16(3);
        e.u16(64);
        e.u16(if with_sections { 3 } else { 0 });
        e.u16(if with_sections { 2 } else { 0 });
        for (flags, off, vaddr, filesz, memsz) in [
            (5u32, 0u64, TEXT, 0u64, 0x1000u64),
            (4, 0, RO_VADDR, end_of_data as u64, end_of_data as u64),
            (6, md_off as u64, RW_VADDR, 400, 400),
        ] {
            e.u32(PT_LOAD);
            e.u32(flags);
            e.u64(off);
            e.u64(vaddr);
            e.u64(vaddr);
            e.u64(filesz);
            e.u64(memsz);
            e.u64(0x1000);
        }
        f[..e.len()].copy_from_slice(&e);
        // The moduledata's address must be what the RW segment maps.
        assert_eq!(f[md_off..md_off + 8], pcln_vaddr.to_le_bytes());
        f
    }

    fn check_synthetic(version: GoPclntabVersion, with_sections: bool) {
        let elf = ElfFile::from_bytes(synthetic(version, with_sections)).expect("elf");
        let tab = GoPclntab::find(&elf).expect("find").expect("a table");
        assert_eq!(tab.version(), version);
        assert_eq!(tab.len(), 2);
        assert_eq!(tab.text_range(), TEXT..TEXT + 0x80);
        assert!(tab.has_inline_info());
        let frames = tab.frames(TEXT + 0x14);
        assert_eq!(
            frames,
            vec![
                GoFrame { function: "main.inner", file: Some("main.go"), line: 20, inlined: true },
                GoFrame { function: "main.outer", file: Some("main.go"), line: 11, inlined: false },
            ],
            "{version:?}"
        );
        assert_eq!(
            tab.frames(TEXT + 4),
            vec![GoFrame { function: "main.outer", file: Some("main.go"), line: 10, inlined: false }]
        );
        assert_eq!(tab.frames(TEXT + 0x50)[0].function, "main.other");
        assert_eq!(tab.frames(TEXT + 0x50)[0].line, 30);
        assert!(tab.frames(TEXT + 0x80).is_empty());
        assert!(tab.frames(TEXT - 1).is_empty());
        let f = tab.find_func(TEXT + 0x3c).expect("func");
        assert_eq!((f.entry, f.end), (TEXT, TEXT + 0x40));
        assert_eq!(
            tab.sp_deltas(&f).collect::<Vec<_>>(),
            vec![
                PcRange { start: TEXT, end: TEXT + 4, value: 0 },
                PcRange { start: TEXT + 4, end: TEXT + 0x3c, value: 24 },
                PcRange { start: TEXT + 0x3c, end: TEXT + 0x40, value: 0 },
            ]
        );
        assert_eq!(tab.sp_delta(&f, TEXT + 0x10), Some(24));
        if version == GoPclntabVersion::Go120 {
            assert_eq!(f.start_line, 9);
        }
        // The layout binds again to the same file.
        let again = tab.layout().bind(&elf).expect("bind");
        assert_eq!(again.frames(TEXT + 0x14), frames);
    }

    #[test]
    fn synthetic_tables_of_each_version() {
        for version in [GoPclntabVersion::Go116, GoPclntabVersion::Go118, GoPclntabVersion::Go120] {
            check_synthetic(version, true);
            check_synthetic(version, false);
        }
    }

    #[test]
    fn scans_only_files_that_may_be_go() {
        let data = synthetic(GoPclntabVersion::Go120, true);
        let at = data.windows(12).position(|w| w == b"\0.gopclntab\0").expect("the section name") + 1;
        // The same table under a section name no Go linker writes: the file
        // has section headers and nothing of Go, so it is not scanned.
        let mut renamed = data.clone();
        renamed[at..at + 10].copy_from_slice(b".rodata.xy");
        let elf = ElfFile::from_bytes(renamed).expect("elf");
        assert!(!may_be_go(&elf));
        assert!(GoPclntab::find(&elf).expect("find").is_none());
        // Without section headers the scan finds it.
        let elf = ElfFile::from_bytes(synthetic(GoPclntabVersion::Go120, false)).expect("elf");
        assert!(may_be_go(&elf));
        assert_eq!(GoPclntab::find(&elf).expect("find").expect("a table").len(), 2);
    }

    #[test]
    fn truncated_and_corrupted_tables_never_panic() {
        for version in [GoPclntabVersion::Go116, GoPclntabVersion::Go118, GoPclntabVersion::Go120] {
            let data = synthetic(version, true);
            // Truncations: the section runs past the end.
            for cut in (0..data.len()).step_by(3) {
                if let Ok(elf) = ElfFile::from_bytes(data[..cut].to_vec()) {
                    if let Ok(Some(t)) = GoPclntab::find(&elf) {
                        for pc in (TEXT - 4..TEXT + 0x90).step_by(4) {
                            let _ = t.frames(pc);
                        }
                    }
                }
            }
            // Every byte of the table flipped in turn.
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            for i in PCLN_AT..data.len() {
                let mut d = data.clone();
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                d[i] ^= (seed as u8) | 1;
                if let Ok(elf) = ElfFile::from_bytes(d) {
                    if let Ok(Some(t)) = GoPclntab::find(&elf) {
                        for pc in (TEXT - 4..TEXT + 0x90).step_by(4) {
                            let _ = t.frames(pc);
                            if let Some(f) = t.find_func(pc) {
                                let _ = t.sp_deltas(&f).count();
                            }
                        }
                        let _ = t.funcs().count();
                    }
                }
            }
        }
    }

    #[test]
    fn header_checks() {
        let mut h = vec![0u8; 72];
        h[..4].copy_from_slice(&GO120_MAGIC.to_le_bytes());
        h[6] = 1;
        h[7] = 8;
        assert!(parse_header(&h).is_none(), "no functions, offsets 0");
        h[8] = 1; // nfunc
        for (i, off) in [72u64, 72, 72, 72, 72].iter().enumerate() {
            h[32 + 8 * i..40 + 8 * i].copy_from_slice(&off.to_le_bytes());
        }
        assert!(parse_header(&h).is_none(), "functab does not fit");
        h.extend([0u8; 12]);
        assert!(parse_header(&h).is_none(), "no room for the function's record");
        h.extend([0u8; 44]);
        assert!(parse_header(&h).is_some());
        h[7] = 4;
        assert!(parse_header(&h).is_none(), "32-bit");
    }

    /// Issue 19: a header claiming 2^32 - 1 functions aborted the agent
    /// (a `Vec` sized from the count). The count is bounded by the table's
    /// size and by `MAX_GO_FUNCTIONS`.
    #[test]
    fn issue_19_function_count_over_the_table_size() {
        let mut h = vec![0u8; 72];
        h[..4].copy_from_slice(&GO120_MAGIC.to_le_bytes());
        h[6] = 1;
        h[7] = 8;
        for (i, off) in [72u64, 72, 72, 72, 72].iter().enumerate() {
            h[32 + 8 * i..40 + 8 * i].copy_from_slice(&off.to_le_bytes());
        }
        // Room for the pairs of 2^20 functions, not for their records (a
        // sparse file gives room for the pairs of 2^32 - 1: see
        // the tests of unwind/go.rs).
        h[8..16].copy_from_slice(&(1u64 << 20).to_le_bytes());
        h.resize(72 + (2 << 20) * 4 + 4, 0);
        match checked_header(&h) {
            Err(HeaderError::TooManyFunctions(n, limit)) => {
                assert_eq!(n, 1 << 20);
                assert_eq!(limit, ((2 << 20) * 4 + 4) as u64 / 52);
            }
            _ => panic!("accepted"),
        }
        h[8..16].copy_from_slice(&(u64::from(MAX_GO_FUNCTIONS) + 1).to_le_bytes());
        h.resize(72 + (MAX_GO_FUNCTIONS as usize + 2) * 52, 0);
        assert!(
            matches!(checked_header(&h), Err(HeaderError::TooManyFunctions(_, l)) if l == u64::from(MAX_GO_FUNCTIONS))
        );
    }
}
