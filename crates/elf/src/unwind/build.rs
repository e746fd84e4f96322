//! From `.eh_frame`/`.debug_frame` to an [`UnwindTable`].
//!
//! Every FDE's CFI program is run by gimli's `UnwindTable` (the whole
//! DW_CFA instruction set, including remember/restore state and the CIE's
//! initial instructions). Each resulting row is reduced to an
//! [`UnwindRule`]; the FDEs' rows are then laid out in address order with
//! `.eh_frame` winning over `.debug_frame`, gaps marked
//! [`UnwindRule::NoCoverage`] and equal neighbours merged.

use std::collections::HashMap;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, CommonInformationEntry, DebugFrame, EhFrame, EhFrameHdr, EndianSlice,
    LittleEndian, Register, RegisterRule, UnwindContext, UnwindSection, UnwindTableRow,
};

use super::expr::{parse_cfa_expression, parse_rbp_expression, CfaExpr};
use super::fxhash::FxBuildHasher;
use super::rules::{CfaBase, InvalidReason, RbpRule, StackDelta, UnwindRule};
use super::stats::{CfiErrorKind, CfiSection, EhFrameSource, UnwindStats};
use super::UnwindTable;
use crate::file::{slice, ElfFile, PT_GNU_EH_FRAME, SHF_COMPRESSED};

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// x86-64 DWARF register numbers (psABI "DWARF Register Number Mapping").
const RBP: Register = Register(6);
const RSP: Register = Register(7);
const RA: Register = Register(16);

/// FDEs longer than this are taken as corrupt (row addresses are kept
/// as 32-bit offsets from their FDE's start).
const MAX_FDE_LEN: u64 = u32::MAX as u64;
/// The longest FDE checked for the `rt_sigreturn` trampoline: its 9 bytes,
/// a leading `nop`, alignment padding. (Large binaries have ten thousands
/// of FDEs this short, so each check is a `pread`, not a page fault.)
const MAX_TRAMPOLINE_FDE_LEN: u64 = 16;
/// `mov $15,%rax; syscall` (15 = `__NR_rt_sigreturn` on x86-64): the whole
/// body of a signal return trampoline.
const RT_SIGRETURN: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// The rows of one FDE, as collected.
#[derive(Clone, Copy, Debug)]
struct FdeSpan {
    start: u64,
    end: u64,
    /// Range in `Collector::rows`.
    first_row: u32,
    row_end: u32,
}

/// Rows of all FDEs of one section.
///
/// A row is 8 bytes: its address relative to its FDE's start (FDEs are
/// shorter than 4 GiB) and the index of its rule in `rules`, which holds
/// each distinct rule once (a few hundred in a large library).
#[derive(Default)]
struct Collector {
    rows: Vec<(u32, u32)>,
    spans: Vec<FdeSpan>,
    rules: Vec<UnwindRule>,
    rule_ids: HashMap<UnwindRule, u32, FxBuildHasher>,
}

impl Collector {
    /// Starts the rows of a new FDE.
    fn begin_fde(&mut self, start: u64, end: u64) {
        let first_row = self.rows.len() as u32;
        self.spans.push(FdeSpan { start, end, first_row, row_end: first_row });
    }

    /// Appends a row to the current FDE, merging it into the FDE's
    /// previous row when the rules are equal.
    fn push_row(&mut self, start: u64, rule: UnwindRule) {
        let Some(span) = self.spans.last_mut() else {
            return;
        };
        let id = match self.rule_ids.get(&rule) {
            Some(&id) => id,
            None => {
                let id = self.rules.len() as u32;
                self.rules.push(rule);
                self.rule_ids.insert(rule, id);
                id
            }
        };
        if self.rows.len() > span.first_row as usize && self.rows.last().is_some_and(|last| last.1 == id) {
            return;
        }
        // Rows lie inside their FDE, which is shorter than 4 GiB.
        let rel = u32::try_from(start.saturating_sub(span.start)).unwrap_or(u32::MAX);
        self.rows.push((rel, id));
        span.row_end = self.rows.len() as u32;
    }

    /// The rows of `span` as (address, rule).
    fn rows_of(&self, span: &FdeSpan) -> impl Iterator<Item = (u64, UnwindRule)> + '_ {
        let start = span.start;
        self.rows[span.first_row as usize..span.row_end as usize]
            .iter()
            .map(move |&(rel, id)| (start + u64::from(rel), self.rules[id as usize]))
    }
}

/// Reduces one CFI row. `section` holds the bytes expressions refer to.
fn reduce_row(row: &UnwindTableRow<usize>, section: &[u8]) -> Result<UnwindRule, InvalidReason> {
    let expr_bytes = |e: &gimli::UnwindExpression<usize>| section.get(e.offset..e.offset.checked_add(e.length)?);

    match row.register(RA) {
        Some(RegisterRule::Undefined) => return Ok(UnwindRule::Stop),
        Some(RegisterRule::Offset(-8)) => {}
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
        UnwindRule::StackSwitch { .. } | UnwindRule::UnfollowedSwitch => {}
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
    let body = &code[code.iter().take_while(|&&b| b == 0x90).count()..];
    body.starts_with(&RT_SIGRETURN) && body[RT_SIGRETURN.len()..].iter().all(|&b| b == 0x90 || b == 0xcc)
}

/// Runs every FDE of one section into `out`.
#[allow(clippy::too_many_arguments)]
fn collect_section<'a, S>(
    elf: &ElfFile,
    section: &S,
    bytes: &'a [u8],
    bases: &BaseAddresses,
    which: CfiSection,
    ctx: &mut UnwindContext<usize>,
    out: &mut Collector,
    stats: &mut UnwindStats,
) where
    S: UnwindSection<Reader<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    let mut cies: HashMap<usize, CommonInformationEntry<Reader<'a>>> = HashMap::new();
    let mut entries = section.entries(bases);
    // Offset of the next entry, assuming 32-bit DWARF lengths (only used
    // to say where a parse error happened).
    let mut next_offset = 0u64;
    loop {
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
        let fde = partial.parse(|section, bases, offset| {
            let key = gimli::UnwindOffset::into(offset);
            if let Some(cie) = cies.get(&key) {
                return Ok(cie.clone());
            }
            let cie = section.cie_from_offset(bases, offset)?;
            cies.insert(key, cie.clone());
            Ok(cie)
        });
        let fde = match fde {
            Ok(fde) => fde,
            Err(e) => {
                stats.error(which, fde_offset as u64, CfiErrorKind::Dwarf(e));
                continue;
            }
        };
        let start = fde.initial_address();
        let len = fde.len();
        let Some(end) = start.checked_add(len).filter(|_| len <= MAX_FDE_LEN) else {
            stats.error(which, fde_offset as u64, CfiErrorKind::BadRange);
            continue;
        };
        if len == 0 {
            stats.fdes_empty += 1;
            continue;
        }
        out.begin_fde(start, end);

        if fde.is_signal_trampoline() || is_sigreturn_trampoline(elf, start, end) {
            stats.fdes_signal += 1;
            stats.rows.signal += 1;
            out.push_row(start, UnwindRule::Signal);
        } else {
            let mut covered_to = start;
            match fde.rows(section, bases, ctx) {
                Ok(mut table) => loop {
                    match table.next_row() {
                        Ok(Some(row)) => {
                            let (row_start, row_end) = (row.start_address(), row.end_address());
                            if row_start >= row_end || row_start < covered_to || row_end > end {
                                continue;
                            }
                            let rule = match reduce_row(row, bytes) {
                                Ok(rule) => {
                                    count_rule(stats, &rule);
                                    rule
                                }
                                Err(reason) => {
                                    stats.count_invalid(reason);
                                    UnwindRule::Invalid
                                }
                            };
                            covered_to = row_end;
                            out.push_row(row_start, rule);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            stats.error(which, fde_offset as u64, CfiErrorKind::Dwarf(e));
                            break;
                        }
                    }
                },
                Err(e) => stats.error(which, fde_offset as u64, CfiErrorKind::Dwarf(e)),
            }
            if covered_to < end {
                // The program failed (or stopped short): what it did not
                // describe is code we know nothing about but that it exists.
                stats.count_invalid(InvalidReason::Malformed);
                out.push_row(covered_to, UnwindRule::Invalid);
            }
        }
    }
}

/// An address interval with the span whose rows fill it.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: u64,
    end: u64,
    source: u8,
    span: u32,
}

/// Sorts one section's spans and clips overlaps (earlier start wins), then
/// removes the parts already covered by `covered` (sorted, disjoint).
fn place(spans: &[FdeSpan], source: u8, covered: &[(u64, u64)], stats: &mut UnwindStats) -> Vec<Piece> {
    let mut order: Vec<u32> = (0..spans.len() as u32).collect();
    order.sort_by_key(|&i| spans[i as usize].start);
    let mut pieces = Vec::with_capacity(order.len());
    let mut cursor = 0u64;
    let mut cov = 0usize;
    for i in order {
        let span = spans[i as usize];
        let mut start = span.start.max(cursor);
        let overlapped = start > span.start;
        if start >= span.end {
            stats.fdes_overlapped += 1;
            continue;
        }
        cursor = span.end;
        let mut shadowed = overlapped;
        while start < span.end {
            while cov < covered.len() && covered[cov].1 <= start {
                cov += 1;
            }
            match covered.get(cov) {
                Some(&(cs, ce)) if cs <= start => {
                    shadowed = true;
                    start = ce;
                }
                next => {
                    let stop = next.map_or(span.end, |&(cs, _)| cs.min(span.end));
                    if stop < span.end {
                        shadowed = true;
                    }
                    pieces.push(Piece { start, end: stop, source, span: i });
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

/// Merged, sorted intervals covered by `pieces` (sorted by start).
fn coverage(pieces: &[Piece]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in pieces {
        match out.last_mut() {
            Some(last) if last.1 >= p.start => last.1 = last.1.max(p.end),
            _ => out.push((p.start, p.end)),
        }
    }
    out
}

fn push_delta(deltas: &mut Vec<StackDelta>, address: u64, rule: UnwindRule) {
    if let Some(last) = deltas.last_mut() {
        if last.rule == rule {
            return;
        }
        if last.address == address {
            last.rule = rule;
            // Replacing may have made it equal to the one before.
            let n = deltas.len();
            if n >= 2 && deltas[n - 2].rule == rule {
                deltas.pop();
            }
            return;
        }
    }
    deltas.push(StackDelta { address, rule });
}

/// Lays the pieces out as deltas.
fn emit(pieces: &[Piece], sources: &[&Collector], deltas: &mut Vec<StackDelta>) {
    let mut prev_end: Option<u64> = None;
    for p in pieces {
        if let Some(end) = prev_end {
            if p.start > end {
                push_delta(deltas, end, UnwindRule::NoCoverage);
            }
        }
        let col = sources[p.source as usize];
        let span = &col.spans[p.span as usize];
        // The row in effect at p.start, then every later row before p.end.
        let rel_start = p.start - span.start;
        let rows = &col.rows[span.first_row as usize..span.row_end as usize];
        let first = rows.partition_point(|r| u64::from(r.0) <= rel_start).saturating_sub(1);
        for (i, (addr, rule)) in col.rows_of(span).enumerate().skip(first) {
            if addr >= p.end {
                break;
            }
            push_delta(deltas, if i == first { p.start.max(addr) } else { addr }, rule);
        }
        prev_end = Some(prev_end.map_or(p.end, |e| e.max(p.end)));
    }
    if let Some(end) = prev_end {
        push_delta(deltas, end, UnwindRule::NoCoverage);
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

/// Builds the table; see [`UnwindTable::from_elf`].
pub(super) fn build(elf: &ElfFile) -> UnwindTable {
    let mut stats = UnwindStats::default();
    stats.sections_ignored = elf.sections_ignored().is_some();
    let mut ctx = UnwindContext::new();
    let text = elf.section_by_name(".text").map_or(0, |s| s.addr);
    let got = elf.section_by_name(".got").map_or(0, |s| s.addr);

    let mut eh = Collector::default();
    if let Some((data, vaddr, hdr)) = find_eh_frame(elf, &mut stats) {
        stats.eh_frame_bytes = data.len() as u64;
        let mut bases = BaseAddresses::default().set_eh_frame(vaddr).set_text(text).set_got(got);
        if let Some(hdr) = hdr {
            bases = bases.set_eh_frame_hdr(hdr);
        }
        let mut section = EhFrame::new(data, LittleEndian);
        section.set_address_size(8);
        collect_section(elf, &section, data, &bases, CfiSection::EhFrame, &mut ctx, &mut eh, &mut stats);
    }

    let mut debug = Collector::default();
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
                    collect_section(
                        elf,
                        &section,
                        data,
                        &bases,
                        CfiSection::DebugFrame,
                        &mut ctx,
                        &mut debug,
                        &mut stats,
                    );
                }
                Err(_) => stats.error(CfiSection::DebugFrame, 0, CfiErrorKind::OutOfBounds),
            }
        }
    }

    let mut pieces = place(&eh.spans, 0, &[], &mut stats);
    if !debug.spans.is_empty() {
        let covered = coverage(&pieces);
        pieces.extend(place(&debug.spans, 1, &covered, &mut stats));
        pieces.sort_by_key(|p| p.start);
    }
    let mut deltas = Vec::with_capacity(eh.rows.len() + debug.rows.len() + pieces.len());
    emit(&pieces, &[&eh, &debug], &mut deltas);
    drop((eh, debug));
    if elf.changed_while_read() {
        // Parsed (partly) from zero pages: worthless.
        stats.file_changed = true;
        return UnwindTable { deltas: Vec::new(), stats };
    }
    deltas.shrink_to_fit();
    stats.deltas = deltas.len() as u64;
    UnwindTable { deltas, stats }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged };
    const B: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 16, rbp: RbpRule::Unchanged };
    const C: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    const NONE: UnwindRule = UnwindRule::NoCoverage;

    type TestFde<'a> = (u64, u64, &'a [(u64, UnwindRule)]);

    /// A collector from (start, end, rows) FDEs.
    fn collector(fdes: &[TestFde<'_>]) -> Collector {
        let mut c = Collector::default();
        for &(start, end, rows) in fdes {
            c.begin_fde(start, end);
            for &(addr, rule) in rows {
                c.push_row(addr, rule);
            }
        }
        c
    }

    fn layout(eh: &Collector, debug: &Collector) -> (Vec<(u64, UnwindRule)>, UnwindStats) {
        let mut stats = UnwindStats::default();
        let mut pieces = place(&eh.spans, 0, &[], &mut stats);
        let covered = coverage(&pieces);
        pieces.extend(place(&debug.spans, 1, &covered, &mut stats));
        pieces.sort_by_key(|p| p.start);
        let mut deltas = Vec::new();
        emit(&pieces, &[eh, debug], &mut deltas);
        (deltas.into_iter().map(|d| (d.address, d.rule)).collect(), stats)
    }

    #[test]
    fn eh_frame_wins_over_debug_frame() {
        let eh = collector(&[(100, 200, &[(100, A), (150, B)])]);
        let debug = collector(&[(50, 300, &[(50, C), (120, A)])]);
        let (deltas, stats) = layout(&eh, &debug);
        assert_eq!(deltas, vec![(50, C), (100, A), (150, B), (200, A), (300, NONE)]);
        assert_eq!(stats.fdes_overlapped, 1);
    }

    #[test]
    fn gaps_merges_and_overlaps() {
        // Unsorted FDEs, a gap, equal neighbours across FDEs, an overlap
        // and an FDE nested in another.
        let eh = collector(&[
            (120, 130, &[(120, A)]),
            (100, 110, &[(100, A)]),
            (130, 140, &[(130, A), (135, B)]),
            (140, 200, &[(140, B), (190, C)]),
            (180, 250, &[(180, A)]),
            (210, 220, &[(210, C)]),
        ]);
        let (deltas, stats) = layout(&eh, &Collector::default());
        assert_eq!(deltas, vec![(100, A), (110, NONE), (120, A), (135, B), (190, C), (200, A), (250, NONE)]);
        assert_eq!(stats.fdes_overlapped, 2);
    }

    #[test]
    fn rows_merge_within_an_fde() {
        let c = collector(&[(0, 10, &[(0, A), (2, A), (4, B), (6, B), (8, A)])]);
        let rows: Vec<_> = c.rows_of(&c.spans[0]).collect();
        assert_eq!(rows, vec![(0, A), (4, B), (8, A)]);
        assert_eq!(c.rules, vec![A, B]);
    }
}
