//! From `.eh_frame`/`.debug_frame` to an [`UnwindTable`], in two passes
//! so that no row is held:
//!
//! 1. every FDE's address range is read (24 bytes each), and the ranges
//!    are laid out in address order, `.eh_frame` winning over
//!    `.debug_frame` and earlier starts over later ones;
//! 2. the FDEs are run in that order by gimli's `UnwindTable` (the whole
//!    DW_CFA instruction set, including remember/restore state and the
//!    CIE's initial instructions); each row is reduced to an
//!    [`UnwindRule`] and goes straight into the compact
//!    [`Deltas`](super::Deltas)
//!    (4 bytes each), gaps marked [`UnwindRule::NoCoverage`] and equal
//!    neighbours merged.
//!
//! Building the table of librustc_driver (1.1 M deltas) so peaks at its
//! final size plus the ranges (7 MB), where holding every row and then a
//! table of 32-byte deltas peaked at 57 MB.

use std::collections::HashMap;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, CommonInformationEntry, DebugFrame, EhFrame, EhFrameHdr, EndianSlice,
    LittleEndian, Register, RegisterRule, UnwindContext, UnwindSection, UnwindTableRow,
};

use super::deltas::DeltasBuilder;
use super::expr::{parse_cfa_expression, parse_rbp_expression, CfaExpr};
use super::fxhash::FxBuildHasher;
use super::rules::{CfaBase, InvalidReason, RbpRule, UnwindRule};
use super::stats::{CfiErrorKind, CfiSection, EhFrameSource, UnwindStats};
use super::UnwindTable;
use crate::arch::{DWARF_RA, DWARF_RBP, DWARF_RSP, INT3, NOP, POP_RBP_RET, PUSH_RBP_MOV, RETURN_ADDRESS_AT_CFA};
use crate::file::{slice, ElfFile, PT_GNU_EH_FRAME, SHF_COMPRESSED};

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// The DWARF registers the reduction reads (x86-64: crate::arch).
const RBP: Register = Register(DWARF_RBP);
const RSP: Register = Register(DWARF_RSP);
const RA: Register = Register(DWARF_RA);

/// The longest FDE checked for the `rt_sigreturn` trampoline: its 9 bytes,
/// a leading `nop`, alignment padding. (Large binaries have ten thousands
/// of FDEs this short, so each check is a `pread`, not a page fault.)
const MAX_TRAMPOLINE_FDE_LEN: u64 = 16;
/// `mov $15,%rax; syscall` (crate::arch): the whole body of a signal
/// return trampoline.
const RT_SIGRETURN: &[u8] = crate::arch::RT_SIGRETURN[0];

/// Reduces one CFI row. `section` holds the bytes expressions refer to.
fn reduce_row(row: &UnwindTableRow<usize>, section: &[u8]) -> Result<UnwindRule, InvalidReason> {
    let expr_bytes = |e: &gimli::UnwindExpression<usize>| section.get(e.offset..e.offset.checked_add(e.length)?);

    match row.register(RA) {
        Some(RegisterRule::Undefined) => return Ok(UnwindRule::Stop),
        Some(RegisterRule::Offset(RETURN_ADDRESS_AT_CFA)) => {}
        _ => {
            // The CFA reason is more telling when both are wrong.
            if !matches!(row.cfa(), CfaRule::RegisterAndOffset { register: RSP | RBP, .. }) {
                return Err(cfa_reason(row.cfa(), section));
            }
            return Err(InvalidReason::ReturnAddress);
        }
    }

    let narrow = |v: i64| i32::try_from(v).map_err(|_| InvalidReason::OffsetRange);
    let rbp = match row.register(RBP) {
        None | Some(RegisterRule::Undefined | RegisterRule::SameValue) => RbpRule::Unchanged,
        Some(RegisterRule::Offset(n)) => RbpRule::AtCfa(narrow(n)?),
        Some(RegisterRule::Expression(e)) => {
            let offset = expr_bytes(&e).and_then(parse_rbp_expression).ok_or(InvalidReason::RbpRule)?;
            RbpRule::AtRbp(narrow(offset)?)
        }
        Some(_) => return Err(InvalidReason::RbpRule),
    };

    match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let base = match *register {
                RSP => CfaBase::Rsp,
                RBP => CfaBase::Rbp,
                _ => return Err(InvalidReason::CfaRegister),
            };
            // GCC before 16 omits `.cfi_restore 6` after the `leave` of a
            // DRAP epilogue, so the rows from there to the `ret` (CFA back to
            // rsp-based) still say "rbp saved at [rbp]" although rbp already
            // holds the caller's value. "Saved relative to rbp" only makes
            // sense while rbp is this frame's pointer, i.e. with a CFA not
            // computed from rsp.
            let rbp = match (base, rbp) {
                (CfaBase::Rsp, RbpRule::AtRbp(_)) => RbpRule::Unchanged,
                _ => rbp,
            };
            Ok(UnwindRule::Cfa { base, offset: narrow(*offset)?, rbp })
        }
        CfaRule::Expression(e) => match expr_bytes(e).and_then(parse_cfa_expression) {
            Some(CfaExpr::Plt { threshold }) => Ok(UnwindRule::Plt { threshold }),
            Some(CfaExpr::Deref { base, inner, outer }) => Ok(UnwindRule::CfaDeref {
                base,
                inner: narrow(inner)?,
                outer: i32::try_from(outer).map_err(|_| InvalidReason::OffsetRange)?,
                rbp,
            }),
            None => Err(InvalidReason::CfaExpression),
        },
    }
}

fn cfa_reason(cfa: &CfaRule<usize>, section: &[u8]) -> InvalidReason {
    match cfa {
        CfaRule::RegisterAndOffset { .. } => InvalidReason::CfaRegister,
        CfaRule::Expression(e) => {
            let known = section.get(e.offset..e.offset.saturating_add(e.length)).and_then(parse_cfa_expression);
            if known.is_some() {
                InvalidReason::ReturnAddress
            } else {
                InvalidReason::CfaExpression
            }
        }
    }
}

fn count_rule(stats: &mut UnwindStats, rule: &UnwindRule) {
    let rows = &mut stats.rows;
    match rule {
        UnwindRule::Cfa { .. } => rows.cfa += 1,
        UnwindRule::CfaDeref { .. } => rows.cfa_deref += 1,
        UnwindRule::Plt { .. } => rows.plt += 1,
        UnwindRule::Signal => rows.signal += 1,
        UnwindRule::Stop => rows.stop += 1,
        // Never reduced from CFI (Go tables only).
        UnwindRule::StackSwitch { .. }
        | UnwindRule::UnfollowedSwitch
        | UnwindRule::GoMorestack
        | UnwindRule::GoMcall => {}
        UnwindRule::Invalid | UnwindRule::NoCoverage => {}
    }
}

/// Whether the code of `[start, end)` is exactly the `rt_sigreturn`
/// trampoline, after leading `nop`s (glibc starts the FDE of `__restore_rt`
/// one byte early, on a `nop`, so that return-address-minus-one lookups
/// land in it).
fn is_sigreturn_trampoline(elf: &ElfFile, start: u64, end: u64) -> bool {
    let len = end - start;
    if !(RT_SIGRETURN.len() as u64..=MAX_TRAMPOLINE_FDE_LEN).contains(&len) {
        return false;
    }
    let mut code = [0u8; MAX_TRAMPOLINE_FDE_LEN as usize];
    let code = &mut code[..len as usize];
    if !elf.read_at_vaddr(start, code) {
        return false;
    }
    let body = &code[code.iter().take_while(|&&b| b == NOP).count()..];
    body.starts_with(RT_SIGRETURN) && body[RT_SIGRETURN.len()..].iter().all(|&b| b == NOP || b == INT3)
}

/// Most CIEs kept parsed per section (a file has a handful; a crafted one
/// could have one per FDE).
const MAX_CACHED_CIES: usize = 1024;

/// One section's CFI, parsed on demand.
struct SectionCfi<'a, S> {
    section: S,
    /// The section's bytes (expressions point into them).
    bytes: &'a [u8],
    bases: BaseAddresses,
    which: CfiSection,
    cies: HashMap<usize, CommonInformationEntry<Reader<'a>>, FxBuildHasher>,
}

/// The address range of one FDE, from pass 1. FDEs are shorter than
/// 4 GiB and sections too, so 24 bytes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FdeSpan {
    start: u64,
    len: u32,
    /// Offset of the FDE in its section.
    offset: u32,
    /// The FDE is a signal return trampoline.
    signal: bool,
}

impl FdeSpan {
    fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

impl<'a, S> SectionCfi<'a, S>
where
    S: UnwindSection<Reader<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    fn new(section: S, bytes: &'a [u8], bases: BaseAddresses, which: CfiSection) -> Self {
        SectionCfi { section, bytes, bases, which, cies: HashMap::default() }
    }

    fn parse_fde(
        &mut self,
        partial: gimli::PartialFrameDescriptionEntry<'_, S, Reader<'a>>,
    ) -> gimli::Result<gimli::FrameDescriptionEntry<Reader<'a>>> {
        let cies = &mut self.cies;
        partial.parse(|section, bases, offset| {
            let key = gimli::UnwindOffset::into(offset);
            if let Some(cie) = cies.get(&key) {
                return Ok(cie.clone());
            }
            let cie = section.cie_from_offset(bases, offset)?;
            if cies.len() < MAX_CACHED_CIES {
                cies.insert(key, cie.clone());
            }
            Ok(cie)
        })
    }

    /// Pass 1: the address range of every FDE.
    fn spans(&mut self, elf: &ElfFile, stats: &mut UnwindStats) -> Vec<FdeSpan> {
        let mut spans = Vec::new();
        let section = self.section.clone();
        let bases = self.bases.clone();
        let which = self.which;
        let mut entries = section.entries(&bases);
        // Offset of the next entry, assuming 32-bit DWARF lengths (only used
        // to say where a parse error happened).
        let mut next_offset = 0u64;
        let mut read = 0usize;
        loop {
            read += 1;
            if read.is_multiple_of(RELEASE_EVERY_PIECES) {
                // The section (10 MB in the largest libraries) is read
                // front to back: what is behind is not read again here.
                // Counted by entries read, so that entries skipped (CIEs,
                // empty or malformed FDEs) count too.
                elf.release(self.bytes);
            }
            let entry = match entries.next() {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) => {
                    // The entry cannot be framed, so neither can the ones after it.
                    stats.error(which, next_offset, CfiErrorKind::Dwarf(e));
                    break;
                }
            };
            let partial = match entry {
                CieOrFde::Cie(cie) => {
                    next_offset = (cie.offset() + cie.entry_len()) as u64 + 4;
                    stats.cies += 1;
                    continue;
                }
                CieOrFde::Fde(partial) => partial,
            };
            next_offset = (partial.offset() + partial.entry_len()) as u64 + 4;
            match which {
                CfiSection::DebugFrame => stats.fdes_debug_frame += 1,
                _ => stats.fdes_eh_frame += 1,
            }
            let fde_offset = partial.offset();
            let fde = match self.parse_fde(partial) {
                Ok(fde) => fde,
                Err(e) => {
                    stats.error(which, fde_offset as u64, CfiErrorKind::Dwarf(e));
                    continue;
                }
            };
            let start = fde.initial_address();
            let (Ok(len), Ok(offset)) = (u32::try_from(fde.len()), u32::try_from(fde_offset)) else {
                stats.error(which, fde_offset as u64, CfiErrorKind::BadRange);
                continue;
            };
            if start.checked_add(u64::from(len)).is_none() {
                stats.error(which, fde_offset as u64, CfiErrorKind::BadRange);
                continue;
            }
            if len == 0 {
                stats.fdes_empty += 1;
                continue;
            }
            let end = start + u64::from(len);
            let signal = fde.is_signal_trampoline() || is_sigreturn_trampoline(elf, start, end);
            if signal {
                stats.fdes_signal += 1;
                stats.rows.signal += 1;
            }
            spans.push(FdeSpan { start, len, offset, signal });
        }
        spans
    }

    /// Pass 2: runs the FDE of `piece`, giving its rows to `sink` in
    /// address order until `sink` says it has enough. With `count`, every
    /// row is counted in `stats` (the FDE's first piece).
    fn run(
        &mut self,
        piece: &Piece,
        count: bool,
        ctx: &mut UnwindContext<usize>,
        stats: &mut UnwindStats,
        sink: &mut dyn FnMut(u64, UnwindRule) -> bool,
    ) {
        if piece.signal {
            sink(piece.fde_start(), UnwindRule::Signal);
            return;
        }
        let which = self.which;
        let offset = piece.offset as usize;
        let (section, bases) = (self.section.clone(), self.bases.clone());
        let fde = match section.partial_fde_from_offset(&bases, S::Offset::from(offset)) {
            Ok(partial) => self.parse_fde(partial),
            Err(e) => Err(e),
        };
        let fde = match fde {
            Ok(fde) if fde.initial_address() == piece.fde_start() => fde,
            // Parsed in pass 1: only a file changed under us gets here.
            _ => {
                sink(piece.start, UnwindRule::Invalid);
                return;
            }
        };
        let (start, end) = (fde.initial_address(), fde.initial_address() + fde.len());
        let mut covered_to = start;
        let mut wanted = true;
        match fde.rows(&self.section, &self.bases, ctx) {
            Ok(mut table) => loop {
                match table.next_row() {
                    Ok(Some(row)) => {
                        let (row_start, row_end) = (row.start_address(), row.end_address());
                        if row_start >= row_end || row_start < covered_to || row_end > end {
                            continue;
                        }
                        let rule = match reduce_row(row, self.bytes) {
                            Ok(rule) => {
                                if count {
                                    count_rule(stats, &rule);
                                }
                                rule
                            }
                            Err(reason) => {
                                if count {
                                    stats.count_invalid(reason);
                                }
                                UnwindRule::Invalid
                            }
                        };
                        covered_to = row_end;
                        if wanted {
                            wanted = sink(row_start, rule);
                        }
                        if !wanted && !count {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        if count {
                            stats.error(which, offset as u64, CfiErrorKind::Dwarf(e));
                        }
                        break;
                    }
                }
            },
            Err(e) => {
                if count {
                    stats.error(which, offset as u64, CfiErrorKind::Dwarf(e));
                }
            }
        }
        if covered_to < end {
            // The program failed (or stopped short): what it did not
            // describe is code we know nothing about but that it exists.
            if count {
                stats.count_invalid(InvalidReason::Malformed);
            }
            if wanted {
                sink(covered_to, UnwindRule::Invalid);
            }
        }
    }
}

/// An address interval and the FDE whose rows fill it; 24 bytes, as
/// [`FdeSpan`], so that `.eh_frame`'s pieces take its spans' place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: u64,
    /// `end - start` (FDEs are shorter than 4 GiB).
    len: u32,
    /// `start - ` the FDE's start.
    into_fde: u32,
    /// The FDE's offset in its section.
    offset: u32,
    /// 0: `.eh_frame`, 1: `.debug_frame`, [`FRAMED`]: a framed function
    /// without CFI, [`ENTRY`]: a program's entry point without CFI.
    source: u8,
    signal: bool,
    /// The first piece of its FDE (whose rows are counted).
    first: bool,
}

impl Piece {
    /// The piece `[start, end)` of `span` (within it).
    fn of(span: &FdeSpan, start: u64, end: u64, source: u8, first: bool) -> Piece {
        Piece {
            start,
            len: (end - start) as u32,
            into_fde: (start - span.start) as u32,
            offset: span.offset,
            source,
            signal: span.signal,
            first,
        }
    }

    fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }

    fn fde_start(&self) -> u64 {
        self.start - u64::from(self.into_fde)
    }
}

const _: () = assert!(std::mem::size_of::<Piece>() == std::mem::size_of::<FdeSpan>());

/// Sorts one section's spans and clips overlaps (earlier start wins), then
/// removes the parts already covered by `covered` (sorted, disjoint).
/// With nothing covered (`.eh_frame`, the first section) a span gives at
/// most one piece, made in the spans' own memory.
fn place(mut spans: Vec<FdeSpan>, source: u8, covered: &[(u64, u64)], stats: &mut UnwindStats) -> Vec<Piece> {
    spans.sort_by_key(|s| s.start);
    if covered.is_empty() {
        let mut cursor = 0u64;
        // Same size and alignment: collected in place.
        return spans
            .into_iter()
            .filter_map(|span| {
                let (start, end) = (span.start.max(cursor), span.end());
                if start > span.start {
                    stats.fdes_overlapped += 1;
                }
                if start >= end {
                    return None;
                }
                cursor = end;
                Some(Piece::of(&span, start, end, source, true))
            })
            .collect();
    }
    let mut pieces = Vec::with_capacity(spans.len());
    let mut cursor = 0u64;
    let mut cov = 0usize;
    for span in spans {
        let end = span.end();
        let mut start = span.start.max(cursor);
        let overlapped = start > span.start;
        if start >= end {
            stats.fdes_overlapped += 1;
            continue;
        }
        cursor = end;
        let mut shadowed = overlapped;
        let mut first = true;
        while start < end {
            while cov < covered.len() && covered[cov].1 <= start {
                cov += 1;
            }
            match covered.get(cov) {
                Some(&(cs, ce)) if cs <= start => {
                    shadowed = true;
                    start = ce;
                }
                next => {
                    let stop = next.map_or(end, |&(cs, _)| cs.min(end));
                    if stop < end {
                        shadowed = true;
                    }
                    pieces.push(Piece::of(&span, start, stop, source, first));
                    first = false;
                    start = stop;
                }
            }
        }
        if shadowed {
            stats.fdes_overlapped += 1;
        }
    }
    pieces
}

/// The [`Piece::source`] of a framed function without CFI.
const FRAMED: u8 = 2;

/// Hand-written functions that set up a frame pointer but have no CFI,
/// by their `.symtab` names. V8's conservative stack scan
/// (`heap/base/asm/x64/push_registers_asm.cc`, in every Node since 12)
/// calls its garbage collector through `PushAllRegistersAndIterateStack`:
/// without it, every stack sampled in a major GC of a Node thread ended
/// there (2.7% of TypeScript's compiler's samples on Node 24).
const FRAMED_WITHOUT_CFI: &[&str] = &["PushAllRegistersAndIterateStack"];
/// The longest of these functions looked for (theirs is 33 bytes).
const MAX_FRAMED_LEN: usize = 64;

/// `[start, end)` of each function of [`FRAMED_WITHOUT_CFI`] the file
/// defines that starts `push %rbp; mov %rsp,%rbp`, ends at its first
/// `pop %rbp; ret` and lies where no FDE does (`covered`: sorted,
/// disjoint).
fn framed_without_cfi(elf: &ElfFile, covered: &[(u64, u64)]) -> Vec<Piece> {
    let mut out = Vec::new();
    for name in FRAMED_WITHOUT_CFI {
        // Any symbol of the name: hand-written code may have no type or size.
        let Some(start) = elf.symbol_address(name) else { continue };
        let mut code = [0u8; MAX_FRAMED_LEN];
        // Fewer bytes where the segment's file bytes end sooner.
        let len = elf.data_from_vaddr(start).map_or(0, <[u8]>::len);
        let code = &mut code[..len.min(MAX_FRAMED_LEN)];
        if code.len() < PUSH_RBP_MOV.len()
            || !elf.read_at_vaddr(start, code)
            || code[..PUSH_RBP_MOV.len()] != PUSH_RBP_MOV
        {
            continue;
        }
        let Some(at) = code[PUSH_RBP_MOV.len()..].windows(POP_RBP_RET.len()).position(|w| w == POP_RBP_RET) else {
            continue;
        };
        let end = start + (PUSH_RBP_MOV.len() + at + POP_RBP_RET.len()) as u64;
        if covered.iter().any(|&(s, e)| s < end && start < e) {
            continue;
        }
        let span = FdeSpan { start, len: (end - start) as u32, offset: 0, signal: false };
        out.push(Piece::of(&span, start, end, FRAMED, true));
    }
    out
}

/// The rows of a framed function (a [`framed_without_cfi`] piece): the
/// return address on top at its entry, `%rbp` pushed, then the frame
/// pointer's frame up to the `ret`.
fn framed_rows(piece: &Piece, sink: &mut dyn FnMut(u64, UnwindRule) -> bool) {
    let start = piece.start;
    let ret = piece.end() - 1;
    let rows = [
        (start, UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged }),
        (start + 1, UnwindRule::Cfa { base: CfaBase::Rsp, offset: 16, rbp: RbpRule::AtCfa(-16) }),
        (
            start + PUSH_RBP_MOV.len() as u64,
            UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) },
        ),
        (ret, UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged }),
    ];
    for (addr, rule) in rows {
        if !sink(addr, rule) {
            return;
        }
    }
}

/// The [`Piece::source`] of a program's entry point without CFI.
const ENTRY: u8 = 3;
/// How far the root at an entry point without CFI reaches when no symbol
/// gives its size and no FDE follows: ld.so's `_start` and
/// `_dl_start_user` (61 bytes on glibc 2.36) hold the return addresses
/// of the process's first calls.
pub const MAX_ENTRY_LEN: u64 = 128;

/// The program's entry point ([`ElfFile::program_entry`]) when no FDE
/// covers it (ld.so's `_start`, some static executables'): the
/// process's first frame, whose caller nothing describes because there
/// is none, a root as `DW_CFA_undefined rip` would make it. From the
/// entry to the end of a function symbol there that gives its size,
/// else to [`MAX_ENTRY_LEN`] on; never past the next FDE (`covered`:
/// sorted, disjoint) nor the segment's end.
fn entry_without_cfi(elf: &ElfFile, covered: &[(u64, u64)]) -> Option<Piece> {
    let start = elf.program_entry()?;
    let next = covered.partition_point(|&(_, end)| end <= start);
    let next_start = match covered.get(next) {
        Some(&(cs, _)) if cs <= start => return None,
        Some(&(cs, _)) => cs,
        None => u64::MAX,
    };
    let len = elf.function_size_at(start).unwrap_or(MAX_ENTRY_LEN);
    // The code's bytes, not only its place (its rows are not read, but
    // the unwinder has no use for a root where no code is).
    let in_file = elf.data_from_vaddr(start).map_or(0, <[u8]>::len) as u64;
    let end = start.saturating_add(len.min(in_file).min(u64::from(u32::MAX))).min(next_start);
    if end <= start {
        return None;
    }
    let span = FdeSpan { start, len: (end - start) as u32, offset: 0, signal: false };
    Some(Piece::of(&span, start, end, ENTRY, true))
}

/// Merged, sorted intervals covered by `pieces` (sorted by start).
fn coverage(pieces: &[Piece]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in pieces {
        match out.last_mut() {
            Some(last) if last.1 >= p.start => last.1 = last.1.max(p.end()),
            _ => out.push((p.start, p.end())),
        }
    }
    out
}

/// Lays the pieces (sorted by start) out as deltas; `run(piece, sink)`
/// gives the rows of the piece's FDE to `sink` in address order.
fn lay_out(
    pieces: &[Piece],
    out: &mut DeltasBuilder,
    mut run: impl FnMut(&Piece, &mut dyn FnMut(u64, UnwindRule) -> bool),
) {
    let mut prev_end: Option<u64> = None;
    for p in pieces {
        if let Some(end) = prev_end {
            if p.start > end {
                out.push(end, UnwindRule::NoCoverage);
            }
        }
        // The row in effect at p.start, then every later row before p.end.
        let mut in_effect: Option<UnwindRule> = None;
        let mut sink = |addr: u64, rule: UnwindRule| {
            if addr <= p.start {
                in_effect = Some(rule);
                return true;
            }
            if let Some(r) = in_effect.take() {
                out.push(p.start, r);
            }
            if addr >= p.end() {
                return false;
            }
            out.push(addr, rule);
            true
        };
        run(p, &mut sink);
        if let Some(r) = in_effect {
            out.push(p.start, r);
        }
        prev_end = Some(prev_end.map_or(p.end(), |e| e.max(p.end())));
    }
    if let Some(end) = prev_end {
        out.push(end, UnwindRule::NoCoverage);
    }
}

/// Finds `.eh_frame`: the section, else through `PT_GNU_EH_FRAME`.
/// Returns the data, its virtual address and the hdr's address if used.
fn find_eh_frame<'a>(elf: &'a ElfFile, stats: &mut UnwindStats) -> Option<(&'a [u8], u64, Option<u64>)> {
    if let Some(section) = elf.section_by_name(".eh_frame") {
        return match elf.section_data(section) {
            Ok(data) => {
                stats.eh_frame_source = Some(EhFrameSource::Section);
                Some((data, section.addr, elf.section_by_name(".eh_frame_hdr").map(|s| s.addr)))
            }
            Err(_) => {
                stats.error(CfiSection::EhFrame, 0, CfiErrorKind::OutOfBounds);
                None
            }
        };
    }
    let phdr = elf.program_headers().iter().find(|p| p.p_type == PT_GNU_EH_FRAME)?;
    let Ok(hdr) = slice(elf.data(), "PT_GNU_EH_FRAME", phdr.offset, phdr.filesz) else {
        stats.error(CfiSection::EhFrameHdr, 0, CfiErrorKind::OutOfBounds);
        return None;
    };
    let bases = BaseAddresses::default().set_eh_frame_hdr(phdr.vaddr);
    let parsed = match EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8) {
        Ok(parsed) => parsed,
        Err(e) => {
            stats.error(CfiSection::EhFrameHdr, 0, CfiErrorKind::Dwarf(e));
            return None;
        }
    };
    let gimli::Pointer::Direct(vaddr) = parsed.eh_frame_ptr() else {
        stats.error(CfiSection::EhFrameHdr, 0, CfiErrorKind::BadEhFramePtr);
        return None;
    };
    let Some(data) = elf.data_from_vaddr(vaddr) else {
        stats.error(CfiSection::EhFrameHdr, 0, CfiErrorKind::BadEhFramePtr);
        return None;
    };
    stats.eh_frame_source = Some(EhFrameSource::EhFrameHdr);
    Some((data, vaddr, Some(phdr.vaddr)))
}

/// The addresses of `.text` and `.got`, the bases of pointers encoded
/// relative to them (0 when the section is missing).
fn text_and_got(elf: &ElfFile) -> (u64, u64) {
    let text = elf.section_by_name(".text").map_or(0, |s| s.addr);
    let got = elf.section_by_name(".got").map_or(0, |s| s.addr);
    (text, got)
}

/// `.eh_frame`, found by [`find_eh_frame`], with the bases its pointer
/// encodings need: what [`build`], [`fde_ranges_containing`] and
/// [`fde_extent`] parse.
fn eh_frame_cfi<'a>(elf: &'a ElfFile, stats: &mut UnwindStats) -> Option<SectionCfi<'a, EhFrame<Reader<'a>>>> {
    let (data, vaddr, hdr) = find_eh_frame(elf, stats)?;
    let (text, got) = text_and_got(elf);
    let mut bases = BaseAddresses::default().set_eh_frame(vaddr).set_text(text).set_got(got);
    if let Some(hdr) = hdr {
        bases = bases.set_eh_frame_hdr(hdr);
    }
    let mut section = EhFrame::new(data, LittleEndian);
    section.set_address_size(8);
    Some(SectionCfi::new(section, data, bases, CfiSection::EhFrame))
}

/// How many FDEs pass 1 reads, or pass 2 runs, between releases of the
/// CFI sections' pages (about 1 MB of a large `.eh_frame`).
const RELEASE_EVERY_PIECES: usize = 16_384;

/// Drops the CFI sections' pages from the resident set (a 200 MB
/// library's `.eh_frame` is 6-10 MB, read twice).
fn release_cfi<S1, S2>(elf: &ElfFile, eh: Option<&SectionCfi<'_, S1>>, debug: Option<&SectionCfi<'_, S2>>) {
    if let Some(s) = eh {
        elf.release(s.bytes);
    }
    if let Some(s) = debug {
        elf.release(s.bytes);
    }
}

/// The `.eh_frame` FDE ranges `[start, end)` that hold one of `addresses`
/// (sorted), in address order; see [`ElfFile::fde_ranges_containing`].
pub(super) fn fde_ranges_containing(elf: &ElfFile, addresses: &[u64]) -> Vec<(u64, u64)> {
    let mut stats = UnwindStats::default();
    let Some(mut cfi) = eh_frame_cfi(elf, &mut stats) else { return Vec::new() };
    let mut ranges: Vec<(u64, u64)> = cfi
        .spans(elf, &mut stats)
        .into_iter()
        .map(|span| (span.start, span.start + u64::from(span.len)))
        .filter(|&(start, end)| {
            let first = addresses.partition_point(|&a| a < start);
            addresses.get(first).is_some_and(|&a| a < end)
        })
        .collect();
    ranges.sort_unstable();
    ranges.dedup();
    ranges
}

/// Builds the table; see [`UnwindTable::from_elf`].
pub(super) fn build(elf: &ElfFile) -> UnwindTable {
    let mut stats = UnwindStats::default();
    stats.sections_ignored = elf.sections_ignored().is_some();
    let (text, got) = text_and_got(elf);

    let mut eh = eh_frame_cfi(elf, &mut stats);
    if let Some(eh) = &eh {
        stats.eh_frame_bytes = eh.bytes.len() as u64;
    }

    let mut debug = None;
    if let Some(section) = elf.section_by_name(".debug_frame") {
        if section.flags & SHF_COMPRESSED != 0 {
            stats.error(CfiSection::DebugFrame, 0, CfiErrorKind::Compressed);
        } else {
            match elf.section_data(section) {
                Ok(data) => {
                    stats.debug_frame_bytes = data.len() as u64;
                    let bases = BaseAddresses::default().set_text(text).set_got(got);
                    let mut section = DebugFrame::new(data, LittleEndian);
                    section.set_address_size(8);
                    debug = Some(SectionCfi::new(section, data, bases, CfiSection::DebugFrame));
                }
                Err(_) => stats.error(CfiSection::DebugFrame, 0, CfiErrorKind::OutOfBounds),
            }
        }
    }

    // Pass 1: where each FDE lies.
    let eh_spans = eh.as_mut().map_or_else(Vec::new, |s| s.spans(elf, &mut stats));
    release_cfi(elf, eh.as_ref(), debug.as_ref());
    let mut pieces = place(eh_spans, 0, &[], &mut stats);
    let debug_spans = debug.as_mut().map_or_else(Vec::new, |s| s.spans(elf, &mut stats));
    release_cfi(elf, eh.as_ref(), debug.as_ref());
    if !debug_spans.is_empty() {
        let covered = coverage(&pieces);
        pieces.extend(place(debug_spans, 1, &covered, &mut stats));
        pieces.sort_by_key(|p| p.start);
    }
    let framed = framed_without_cfi(elf, &coverage(&pieces));
    if !framed.is_empty() {
        stats.framed_without_cfi += framed.len() as u64;
        pieces.extend(framed);
        pieces.sort_by_key(|p| p.start);
    }
    // A file without any CFI stays without rules (a pure Go binary has
    // its own tables, which describe its entry point).
    let entry = if pieces.is_empty() { None } else { entry_without_cfi(elf, &coverage(&pieces)) };
    if let Some(entry) = entry {
        stats.entry_without_cfi = true;
        pieces.push(entry);
        pieces.sort_by_key(|p| p.start);
    }
    pieces.shrink_to_fit();

    // Pass 2: their rows, in address order.
    let mut ctx = UnwindContext::new();
    let mut out = DeltasBuilder::default();
    let mut run = 0usize;
    lay_out(&pieces, &mut out, |piece, sink| {
        // Pieces go in address order, which in most files is the FDEs'
        // order too: what pass 2 read a while ago is not needed soon.
        run += 1;
        if run.is_multiple_of(RELEASE_EVERY_PIECES) {
            release_cfi(elf, eh.as_ref(), debug.as_ref());
        }
        match (piece.source, &mut eh, &mut debug) {
            (FRAMED, _, _) => framed_rows(piece, sink),
            (ENTRY, _, _) => {
                sink(piece.start, UnwindRule::Stop);
            }
            (0, Some(eh), _) => eh.run(piece, piece.first, &mut ctx, &mut stats, sink),
            (_, _, Some(debug)) => debug.run(piece, piece.first, &mut ctx, &mut stats, sink),
            _ => {}
        }
    });
    drop(pieces);
    stats.deltas_dropped = out.dropped();
    let deltas = out.finish();
    if elf.changed_while_read() {
        // Parsed (partly) from zero pages: worthless.
        stats.file_changed = true;
        return UnwindTable { deltas: Default::default(), stats };
    }
    stats.deltas = deltas.len() as u64;
    UnwindTable { deltas, stats }
}

/// `[start, end)` of the function whose `.eh_frame` FDE starts exactly at
/// `start`: the extent of a function the symbol tables do not name (a
/// hidden one found from its callers' code). A linear pass over the FDEs.
pub(super) fn fde_extent(elf: &ElfFile, start: u64) -> Option<(u64, u64)> {
    let mut stats = UnwindStats::default();
    let cfi = eh_frame_cfi(elf, &mut stats)?;
    let mut entries = cfi.section.entries(&cfi.bases);
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else { continue };
        let Ok(fde) = partial.parse(EhFrame::cie_from_offset) else { continue };
        if fde.initial_address() == start && fde.len() > 0 {
            return Some((start, start + fde.len()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FDEs of this test binary's `main`: found by an address inside
    /// and at its start, each once; an address in no function finds none.
    #[test]
    fn fde_ranges_containing_addresses_of_this_binary() {
        let elf = ElfFile::open("/proc/self/exe").unwrap();
        let (main, size) = elf.function_symbol("main").expect("main in .symtab");
        let found = elf.fde_ranges_containing(&[main, main + size / 2]);
        assert_eq!(found.len(), 1, "{found:x?}");
        let (start, end) = found[0];
        assert!(start <= main && main + size <= end, "{found:x?} for main at {main:#x}+{size}");
        assert!(elf.fde_ranges_containing(&[1, 2]).is_empty());
        assert!(elf.fde_ranges_containing(&[]).is_empty());
    }

    const A: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged };
    const B: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 16, rbp: RbpRule::Unchanged };
    const C: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    const NONE: UnwindRule = UnwindRule::NoCoverage;

    type TestFde<'a> = (u64, u64, &'a [(u64, UnwindRule)]);

    /// Spans of (start, end, rows) FDEs; an FDE's offset is its index.
    fn spans(fdes: &[TestFde<'_>]) -> Vec<FdeSpan> {
        let span = |(i, &(start, end, _)): (usize, &TestFde<'_>)| FdeSpan {
            start,
            len: (end - start) as u32,
            offset: i as u32,
            signal: false,
        };
        fdes.iter().enumerate().map(span).collect()
    }

    fn layout(eh: &[TestFde<'_>], debug: &[TestFde<'_>]) -> (Vec<(u64, UnwindRule)>, UnwindStats) {
        let mut stats = UnwindStats::default();
        let mut pieces = place(spans(eh), 0, &[], &mut stats);
        let covered = coverage(&pieces);
        pieces.extend(place(spans(debug), 1, &covered, &mut stats));
        pieces.sort_by_key(|p| p.start);
        let mut out = DeltasBuilder::default();
        let mut runs = 0;
        lay_out(&pieces, &mut out, |piece, sink| {
            runs += 1;
            let fdes = if piece.source == 0 { eh } else { debug };
            for &(addr, rule) in fdes[piece.offset as usize].2 {
                if !sink(addr, rule) {
                    break;
                }
            }
        });
        assert_eq!(runs, pieces.len());
        (out.finish().iter().map(|d| (d.address, d.rule)).collect(), stats)
    }

    #[test]
    fn eh_frame_wins_over_debug_frame() {
        let eh = [(100, 200, &[(100, A), (150, B)][..])];
        let debug = [(50, 300, &[(50, C), (120, A)][..])];
        let (deltas, stats) = layout(&eh, &debug);
        assert_eq!(deltas, vec![(50, C), (100, A), (150, B), (200, A), (300, NONE)]);
        assert_eq!(stats.fdes_overlapped, 1);
    }

    #[test]
    fn gaps_merges_and_overlaps() {
        // Unsorted FDEs, a gap, equal neighbours across FDEs, an overlap
        // and an FDE nested in another.
        let eh = [
            (120, 130, &[(120, A)][..]),
            (100, 110, &[(100, A)][..]),
            (130, 140, &[(130, A), (135, B)][..]),
            (140, 200, &[(140, B), (190, C)][..]),
            (180, 250, &[(180, A)][..]),
            (210, 220, &[(210, C)][..]),
        ];
        let (deltas, stats) = layout(&eh, &[]);
        assert_eq!(deltas, vec![(100, A), (110, NONE), (120, A), (135, B), (190, C), (200, A), (250, NONE)]);
        assert_eq!(stats.fdes_overlapped, 2);
    }

    #[test]
    fn a_piece_starts_with_the_row_in_effect() {
        // The debug FDE is cut by the eh one: its second piece starts
        // mid-FDE with the row in effect there (B from 140), and the rows
        // after the piece's end are not laid out.
        let eh = [(150, 160, &[(150, A)][..])];
        let debug = [(100, 200, &[(100, C), (140, B), (155, C), (170, A)][..])];
        let (deltas, _) = layout(&eh, &debug);
        assert_eq!(deltas, vec![(100, C), (140, B), (150, A), (160, C), (170, A), (200, NONE)]);
    }
}
