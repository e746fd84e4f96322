//! Stack deltas for Go code, from `.gopclntab`.
//!
//! Go functions have no `.eh_frame` (the Go linker writes none, and
//! `-ldflags='-s -w'` drops its `.debug_frame`), but every Go binary keeps
//! `.gopclntab`, whose `pcsp` table says for each pc how far `rsp` is below
//! the stack pointer the function was entered with. On x86-64 that is a
//! CFI row: `CFA = rsp + pcsp + 8`, the return address at `CFA - 8`.
//! This module turns those tables into [`StackDelta`]s and merges them with
//! the file's CFI (C code in cgo binaries keeps its own).
//!
//! Facts about the Go runtime used here (Go's `src/runtime/asm_amd64.s`,
//! `sys_linux_amd64.s`, `cmd/internal/obj/x86/obj6.go`,
//! `internal/abi/symtab.go`; checked against Go 1.26 binaries):
//!
//! - **The caller's `rbp`.** A Go function with a frame saves `rbp` just
//!   below its return address: the compiler's prologue is `push %rbp;
//!   mov %rsp,%rbp` (Go 1.21+; before, `sub $n,%rsp; mov %rbp,n-8(%rsp)`).
//!   Recognised by its bytes, it gives "caller's rbp at `CFA - 16`"
//!   wherever `pcsp >= 8`; other functions leave `rbp` unchanged. Tracking
//!   `rbp` matters for the stack switches below and for C frames that use
//!   `rbp` as their CFA base after a cgo callback.
//! - **Roots.** Functions flagged `TOPFRAME` (`runtime.goexit`, the return
//!   address of every goroutine's first frame; `runtime.mstart`, the root
//!   of every thread's system stack; `runtime.rt0_go`) become
//!   [`UnwindRule::Stop`]. `runtime.sigtramp` is flagged too, because Go's
//!   own traceback cannot cross signal frames; we can (its caller is the
//!   signal return trampoline), so it is unwound normally.
//! - **Signal returns.** A function whose body is `mov $15,%rax; syscall`
//!   (`runtime.sigreturn__sigaction`) is [`UnwindRule::Signal`], from one
//!   padding byte before it (its address is pushed as a return address and
//!   looked up at `pc - 1`).
//! - **Stack switches.** Functions flagged `SPWRITE` move `rsp` in ways
//!   `pcsp` cannot describe. Those known to keep their own frame pointer
//!   in `rbp` throughout ([`FOLLOWED_SWITCHES`]: `runtime.systemstack`,
//!   `runtime.asmcgocall`, `runtime.cgocallback`, the vDSO callers, ...)
//!   and whose prologue is `push %rbp; mov %rsp,%rbp` are followed through
//!   `rbp` after the prologue: [`UnwindRule::StackSwitch`], `CFA = rbp +
//!   16` on whichever stack the caller is. `runtime.morestack` is
//!   [`UnwindRule::GoMorestack`]: the BPF unwinder finds its caller in the
//!   goroutine's `g.sched`; `runtime.mcall` is [`UnwindRule::GoMcall`]:
//!   below it on the system stack is `runtime.mstart0`, found in
//!   `m.g0.sched`. Every other `SPWRITE` function (`gogo` jumps away) is
//!   [`UnwindRule::UnfollowedSwitch`] after its first instruction: the
//!   stack ends there with its own counted reason, never a guess.
//!
//! Where `.eh_frame`/`.debug_frame` and a Go function's `pcsp` describe
//! the same address, the Go rule wins: Go's own `.debug_frame` (kept in
//! unstripped binaries) says nothing of `rbp`, nor of roots and stack
//! switches. CFI describes the rest (C code; `.gopclntab` lists C
//! functions linked internally without `pcsp`).

// `push %rbp`, `push %rbp; mov %rsp,%rbp` and the `rt_sigreturn`
// trampolines are x86-64 code: crate::arch.
use crate::arch::{PUSH_RBP, PUSH_RBP_MOV, RT_SIGRETURN};
use crate::{CfaBase, Deltas, ElfFile, GoFunc, GoPclntab, PcRange, RbpRule, StackDelta, UnwindRule, UnwindTable};

/// `SPWRITE` functions known to keep their own frame pointer in `rbp`
/// from their prologue to their epilogue while `rsp` is elsewhere, so that
/// their caller is always at `rbp + 8` (Go's `src/runtime/asm_amd64.s`,
/// `sys_linux_amd64.s`, `time_linux_amd64.s`). Each must also start with
/// `push %rbp; mov %rsp,%rbp` in the binary, or it is not followed.
pub const FOLLOWED_SWITCHES: &[&str] = &[
    // To the system stack and back; `gosave_systemstack_switch` requires
    // its callers to have a frame pointer.
    "runtime.systemstack",
    // Go -> C on the system stack (C preserves rbp).
    "runtime.asmcgocall",
    "runtime.asmcgocall_no_g",
    // C -> Go: runs the callback on the goroutine's stack with rbp still
    // pointing at its frame on the system stack.
    "runtime.cgocallback",
    // vDSO calls on the system stack.
    "runtime.nanotime1",
    "runtime.walltime",
    "runtime.walltime1",
    "runtime.vgetrandom1",
    "time.now",
    // C calls with a realigned rsp.
    "runtime.sigfwd",
    "runtime.callCgoSigaction",
    "runtime.callCgoMmap",
    "runtime.callCgoMunmap",
    "runtime.switchToCrashStack0",
];

/// Names of the `TOPFRAME` functions, for tables from before Go 1.17
/// (which have no function flags).
const TOP_FRAMES: &[&str] = &["runtime.goexit", "runtime.mstart", "runtime.rt0_go"];

/// Names of `SPWRITE` functions, for tables from before Go 1.17.
const SP_WRITERS: &[&str] = &["runtime.mcall", "runtime.morestack", "runtime.gogo", "gogo", "runtime.clone"];

/// The function that moves a goroutine to a larger stack (from the
/// system stack, after saving the goroutine's pc, sp and bp in
/// `g.sched`).
const MORESTACK: &str = "runtime.morestack";

/// The function that switches to the system stack to call the scheduler
/// (`park_m`, `gopreempt_m`, ...) from the base of that stack, where
/// `runtime.mstart0`'s frame is.
const MCALL: &str = "runtime.mcall";

/// `TOPFRAME` functions we unwind through anyway (see the module docs).
const NOT_ROOTS: &[&str] = &["runtime.sigtramp"];

/// Where the caller's `rbp` is in a framed Go function.
const RBP_SAVED: RbpRule = RbpRule::AtCfa(-16);

/// What building the Go part of a table found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoUnwindStats {
    /// Functions in `.gopclntab`.
    pub functions: u64,
    /// Functions unwound from their `pcsp` table.
    pub pcsp_functions: u64,
    /// Of those, the ones whose saved `rbp` is restored (framed).
    pub framed_functions: u64,
    /// `pcsp` ranges turned into rules.
    pub ranges: u64,
    /// Root functions ([`UnwindRule::Stop`]).
    pub roots: u64,
    /// Stack-switching functions followed through `rbp`.
    pub switches_followed: u64,
    /// Stack-switching functions that end the stack.
    pub switches_unfollowed: u64,
    /// Signal return trampolines.
    pub signal_trampolines: u64,
    /// Functions without a `pcsp` table (left uncovered).
    pub no_pcsp: u64,
    /// `pcsp` ranges that cannot be expressed (a negative delta: the
    /// return address is not on the stack): [`UnwindRule::Invalid`].
    pub invalid: u64,
    /// Go ranges that replaced a different CFI rule (Go's own
    /// `.debug_frame` in unstripped binaries).
    pub cfi_overridden: u64,
    /// Tables refused for declaring more functions than their size or
    /// [`crate::MAX_GO_FUNCTIONS`] allows (0 or 1).
    pub refused: u64,
}

/// A Go rule over `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: u64,
    end: u64,
    rule: UnwindRule,
}

/// Code bytes by virtual address.
trait Code {
    /// `len` bytes at `vaddr`, if all are in the file.
    fn bytes(&mut self, vaddr: u64, len: usize) -> Option<&[u8]>;
}

/// Reads a file's code through a window that moves forward (functions
/// come in address order), with `pread` rather than the map so that the
/// pages are not kept resident.
struct CodeWindow<'a> {
    elf: &'a ElfFile,
    base: u64,
    buf: Vec<u8>,
}

impl CodeWindow<'_> {
    const SIZE: usize = 256 << 10;
}

impl Code for CodeWindow<'_> {
    fn bytes(&mut self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let end = vaddr.checked_add(len as u64)?;
        if vaddr < self.base || end > self.base + self.buf.len() as u64 {
            // Refill from a little before, for looks behind.
            let start = vaddr.saturating_sub(16).max(self.elf.load_segment_for_vaddr(vaddr).map_or(vaddr, |p| p.vaddr));
            let available = self.elf.data_from_vaddr(start)?.len();
            let n = available.min(Self::SIZE.max(len + 16));
            self.buf.resize(n, 0);
            if !self.elf.read_at_vaddr(start, &mut self.buf) {
                self.buf.clear();
                return None;
            }
            self.base = start;
        }
        let off = usize::try_from(vaddr.checked_sub(self.base)?).ok()?;
        self.buf.get(off..off.checked_add(len)?)
    }
}

/// One function, as the rule generation sees it.
struct FuncDesc<'n> {
    entry: u64,
    name: &'n str,
    flag_top_frame: bool,
    flag_sp_write: bool,
    /// Whether the table has function flags (Go 1.17+).
    has_flags: bool,
    ranges: Vec<PcRange>,
}

/// How a function saves the caller's `rbp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// Not at all: `rbp` is unchanged.
    None,
    /// Saved at `CFA - 16` from `from` on, wherever `pcsp >= 8`.
    From(u64),
}

/// Reads the Go table of `elf`, if it has one, and merges its rules into
/// `cfi` (the table from `.eh_frame`/`.debug_frame`).
pub fn with_go_tables(elf: &ElfFile, cfi: UnwindTable) -> (UnwindTable, Option<GoUnwindStats>) {
    let tab = match GoPclntab::find(elf) {
        Ok(Some(tab)) => tab,
        Ok(None) => return (cfi, None),
        // A table declaring absurd counts: counted, CFI only.
        Err(_) => return (cfi, Some(GoUnwindStats { refused: 1, ..GoUnwindStats::default() })),
    };
    let mut stats = GoUnwindStats::default();
    let mut code = CodeWindow { elf, base: 0, buf: Vec::new() };
    let pieces = go_pieces(&tab, &mut code, &mut stats);
    // Go binaries' CFI (cgo's C code) is small: merged as plain deltas.
    let cfi_deltas: Vec<StackDelta> = cfi.deltas.iter().collect();
    let mut table = cfi;
    table.deltas = Deltas::default();
    let deltas: Deltas = merge(&cfi_deltas, &pieces, &mut stats).into_iter().collect();
    drop(cfi_deltas);
    table.stats.deltas = deltas.len() as u64;
    table.deltas = deltas;
    (table, Some(stats))
}

/// The Go rules of every function of `tab`, in address order.
fn go_pieces(tab: &GoPclntab<'_>, code: &mut impl Code, stats: &mut GoUnwindStats) -> Vec<Piece> {
    let has_flags = tab.version() != crate::GoPclntabVersion::Go116;
    // Grown as needed: the declared count is bounded, not trusted.
    let mut pieces = Vec::new();
    for f in tab.funcs() {
        stats.functions += 1;
        let desc = describe(tab, &f, has_flags);
        function_pieces(&desc, code, &mut pieces, stats);
    }
    pieces
}

fn describe<'a>(tab: &GoPclntab<'a>, f: &GoFunc, has_flags: bool) -> FuncDesc<'a> {
    // The pcsp table ends at the function's last instruction; padding
    // after it is nobody's.
    let mut ranges = Vec::new();
    for r in tab.sp_deltas(f) {
        if r.start >= f.end || ranges.len() >= 1 << 16 {
            break;
        }
        let end = r.end.min(f.end);
        if end > r.start {
            ranges.push(PcRange { start: r.start, end, value: r.value });
        }
    }
    FuncDesc {
        entry: f.entry,
        name: tab.func_name(f).unwrap_or(""),
        flag_top_frame: f.is_top_frame(),
        flag_sp_write: f.writes_sp(),
        has_flags,
        ranges,
    }
}

/// The rule of an ordinary frame `value` bytes below its entry `rsp`.
fn pcsp_rule(value: i32, rbp: RbpRule) -> Option<UnwindRule> {
    if value < 0 {
        // The return address is no longer on the stack (e.g.
        // syscall.rawVforkSyscall pops it around vfork).
        return None;
    }
    Some(UnwindRule::Cfa { base: CfaBase::Rsp, offset: value.checked_add(8)?, rbp })
}

/// How `f` saves the caller's `rbp`, from the instructions at its first
/// `pcsp` step: `push %rbp` (Go 1.21+), or `sub $n,%rsp; mov %rbp,n-8(%rsp)`.
fn framing(f: &FuncDesc<'_>, code: &mut impl Code) -> Framing {
    let Some(first) = f.ranges.iter().find(|r| r.value != 0) else {
        return Framing::None;
    };
    let at = first.start;
    if first.value == 8 && code.bytes(at - 1, 1) == Some(&[PUSH_RBP][..]) {
        return Framing::From(at);
    }
    let n = first.value;
    if n < 16 {
        return Framing::None;
    }
    // The `sub` that opened the frame ends at `at`.
    let sub_imm8 = i8::try_from(n).ok().map(|n| [0x48, 0x83, 0xec, n as u8]);
    let mut sub_imm32 = [0x48, 0x81, 0xec, 0, 0, 0, 0];
    sub_imm32[3..].copy_from_slice(&n.to_le_bytes());
    let sub_found = sub_imm8.is_some_and(|s| at >= 4 && code.bytes(at - 4, 4) == Some(&s[..]))
        || (at >= 7 && code.bytes(at - 7, 7) == Some(&sub_imm32[..]));
    if !sub_found {
        return Framing::None;
    }
    // Then `mov %rbp, n-8(%rsp)`.
    let disp = n - 8;
    if let Ok(d) = i8::try_from(disp) {
        if code.bytes(at, 5) == Some(&[0x48, 0x89, 0x6c, 0x24, d as u8][..]) {
            return Framing::From(at + 5);
        }
    }
    let mut mov32 = [0x48, 0x89, 0xac, 0x24, 0, 0, 0, 0];
    mov32[4..].copy_from_slice(&disp.to_le_bytes());
    if code.bytes(at, 8) == Some(&mov32[..]) {
        return Framing::From(at + 8);
    }
    Framing::None
}

/// Appends `[start, end)` with `rule`, keeping `out` sorted and disjoint
/// (a malformed table's overlapping functions are clipped).
fn push(out: &mut Vec<Piece>, start: u64, end: u64, rule: UnwindRule) {
    let start = out.last().map_or(start, |p| start.max(p.end));
    if start < end {
        out.push(Piece { start, end, rule });
    }
}

/// The ordinary rules of `f` over `[from, to)`: `pcsp` with `framing`.
fn pcsp_pieces(
    f: &FuncDesc<'_>,
    framing: Framing,
    from: u64,
    to: u64,
    out: &mut Vec<Piece>,
    stats: &mut GoUnwindStats,
) {
    for r in &f.ranges {
        let (start, end) = (r.start.max(from), r.end.min(to));
        if start >= end {
            continue;
        }
        // Split where the caller's rbp becomes saved.
        let saved_from = match framing {
            Framing::From(at) if r.value >= 8 => at.clamp(start, end),
            _ => end,
        };
        for (s, e, rbp) in [(start, saved_from, RbpRule::Unchanged), (saved_from, end, RBP_SAVED)] {
            if s >= e {
                continue;
            }
            stats.ranges += 1;
            match pcsp_rule(r.value, rbp) {
                Some(rule) => push(out, s, e, rule),
                None => {
                    stats.invalid += 1;
                    push(out, s, e, UnwindRule::Invalid);
                }
            }
        }
    }
}

/// The rules of one function.
fn function_pieces(f: &FuncDesc<'_>, code: &mut impl Code, out: &mut Vec<Piece>, stats: &mut GoUnwindStats) {
    let Some(last) = f.ranges.last() else {
        // No pcsp table: no code to describe (the linker's markers, e.g.
        // go:textfipsstart, cover only padding).
        stats.no_pcsp += 1;
        return;
    };
    let end = last.end;

    let body = code.bytes(f.entry, RT_SIGRETURN[0].len());
    if RT_SIGRETURN.iter().any(|s| body.is_some_and(|b| b.starts_with(s))) {
        stats.signal_trampolines += 1;
        // Its address is a return address: pc - 1 must find it too.
        let pad = matches!(code.bytes(f.entry - 1, 1), Some([0xcc | 0x90]));
        let start = if pad && out.last().is_none_or(|p| p.end < f.entry) { f.entry - 1 } else { f.entry };
        push(out, start, end, UnwindRule::Signal);
        return;
    }

    let top = if f.has_flags { f.flag_top_frame } else { TOP_FRAMES.contains(&f.name) };
    if top && !NOT_ROOTS.contains(&f.name) {
        stats.roots += 1;
        push(out, f.entry, end, UnwindRule::Stop);
        return;
    }

    let sp_write = if f.has_flags { f.flag_sp_write } else { SP_WRITERS.contains(&f.name) };
    let sp_write = sp_write || (!f.has_flags && FOLLOWED_SWITCHES.contains(&f.name));
    if sp_write && f.name == MORESTACK {
        stats.switches_followed += 1;
        push(out, f.entry, end, UnwindRule::GoMorestack);
        return;
    }
    if sp_write && f.name == MCALL {
        stats.switches_followed += 1;
        // Nothing is moved before the first instruction runs.
        pcsp_pieces(f, Framing::None, f.entry, f.entry + 1, out, stats);
        push(out, f.entry + 1, end, UnwindRule::GoMcall);
        return;
    }
    if sp_write {
        let prologue = f.entry + PUSH_RBP_MOV.len() as u64;
        let framed = code.bytes(f.entry, PUSH_RBP_MOV.len()) == Some(&PUSH_RBP_MOV[..]);
        if framed && FOLLOWED_SWITCHES.contains(&f.name) {
            stats.switches_followed += 1;
            // The prologue from pcsp, then rbp is the frame pointer
            // wherever the frame is open.
            pcsp_pieces(f, Framing::From(f.entry + 1), f.entry, prologue, out, stats);
            for r in &f.ranges {
                let (start, end) = (r.start.max(prologue), r.end);
                if start >= end {
                    continue;
                }
                stats.ranges += 1;
                let rule = match r.value {
                    v if v >= 8 => UnwindRule::StackSwitch { offset: 16, rbp: RBP_SAVED },
                    // Popped: back on the entry stack (the epilogue
                    // restores rsp before `pop %rbp`).
                    0 => UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged },
                    _ => {
                        stats.invalid += 1;
                        UnwindRule::Invalid
                    }
                };
                push(out, start, end, rule);
            }
        } else {
            stats.switches_unfollowed += 1;
            // Nothing is moved before the first instruction runs.
            pcsp_pieces(f, Framing::None, f.entry, f.entry + 1, out, stats);
            push(out, f.entry + 1, end, UnwindRule::UnfollowedSwitch);
        }
        return;
    }

    stats.pcsp_functions += 1;
    let framing = framing(f, code);
    if framing != Framing::None {
        stats.framed_functions += 1;
    }
    pcsp_pieces(f, framing, f.entry, end, out, stats);
}

/// The CFI table's covered intervals: `(start, end, rule)`.
fn cfi_intervals(deltas: &[StackDelta]) -> Vec<(u64, u64, UnwindRule)> {
    let mut out = Vec::with_capacity(deltas.len());
    for (i, d) in deltas.iter().enumerate() {
        if d.rule == UnwindRule::NoCoverage {
            continue;
        }
        // The last entry is always NoCoverage; guard anyway.
        let end = deltas.get(i + 1).map_or(u64::MAX, |n| n.address);
        if end > d.address {
            out.push((d.address, end, d.rule));
        }
    }
    out
}

/// Merges CFI deltas and Go pieces into one sorted delta list, the Go
/// pieces first.
fn merge(cfi: &[StackDelta], go: &[Piece], stats: &mut GoUnwindStats) -> Vec<StackDelta> {
    let a = cfi_intervals(cfi);
    // Every boundary, in order.
    let mut points: Vec<u64> = Vec::with_capacity(2 * (a.len() + go.len()));
    {
        let mut ia = a.iter().flat_map(|&(s, e, _)| [s, e]).peekable();
        let mut ib = go.iter().flat_map(|p| [p.start, p.end]).peekable();
        loop {
            let next = match (ia.peek(), ib.peek()) {
                (Some(&x), Some(&y)) if x <= y => ia.next(),
                (Some(_), Some(_)) => ib.next(),
                (Some(_), None) => ia.next(),
                (None, Some(_)) => ib.next(),
                (None, None) => break,
            };
            let Some(p) = next else { break };
            if points.last() != Some(&p) {
                points.push(p);
            }
        }
    }
    let mut out: Vec<StackDelta> = Vec::with_capacity(points.len());
    let (mut i, mut j) = (0usize, 0usize);
    for w in points.windows(2) {
        let s = w[0];
        while i < a.len() && a[i].1 <= s {
            i += 1;
        }
        while j < go.len() && go[j].end <= s {
            j += 1;
        }
        let in_a = a.get(i).filter(|x| x.0 <= s).map(|x| x.2);
        let in_b = go.get(j).filter(|p| p.start <= s);
        let rule = match (in_a, in_b) {
            (Some(c), Some(p)) => {
                if c != p.rule && p.start == s {
                    stats.cfi_overridden += 1;
                }
                p.rule
            }
            (Some(c), None) => c,
            (None, Some(p)) => p.rule,
            (None, None) => UnwindRule::NoCoverage,
        };
        push_delta(&mut out, s, rule);
    }
    if let Some(&last) = points.last() {
        push_delta(&mut out, last, UnwindRule::NoCoverage);
    }
    out
}

/// Appends a delta unless it repeats the rule in effect; a table starts
/// with a covered address.
fn push_delta(out: &mut Vec<StackDelta>, address: u64, rule: UnwindRule) {
    match out.last() {
        None if rule == UnwindRule::NoCoverage => {}
        Some(last) if last.rule == rule => {}
        _ => out.push(StackDelta { address, rule }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Code bytes for tests: address -> byte, 0xcc elsewhere.
    #[derive(Default)]
    struct FakeCode {
        bytes: BTreeMap<u64, u8>,
        buf: Vec<u8>,
    }

    impl FakeCode {
        fn put(&mut self, at: u64, bytes: &[u8]) {
            for (i, b) in bytes.iter().enumerate() {
                self.bytes.insert(at + i as u64, *b);
            }
        }
    }

    impl Code for FakeCode {
        fn bytes(&mut self, vaddr: u64, len: usize) -> Option<&[u8]> {
            self.buf = (0..len as u64).map(|i| *self.bytes.get(&(vaddr + i)).unwrap_or(&0xcc)).collect();
            Some(&self.buf)
        }
    }

    fn func<'a>(entry: u64, name: &'a str, runs: &[(u64, i32)], end: u64) -> FuncDesc<'a> {
        let mut ranges = Vec::new();
        for (i, &(start, value)) in runs.iter().enumerate() {
            let stop = runs.get(i + 1).map_or(end, |r| r.0);
            ranges.push(PcRange { start: entry + start, end: entry + stop, value });
        }
        FuncDesc { entry, name, flag_top_frame: false, flag_sp_write: false, has_flags: true, ranges }
    }

    fn rsp(offset: i32, rbp: RbpRule) -> UnwindRule {
        UnwindRule::Cfa { base: CfaBase::Rsp, offset, rbp }
    }
    const UNCHANGED: RbpRule = RbpRule::Unchanged;

    fn pieces_of(f: &FuncDesc<'_>, code: &mut FakeCode) -> (Vec<(u64, u64, UnwindRule)>, GoUnwindStats) {
        let mut out = Vec::new();
        let mut stats = GoUnwindStats::default();
        function_pieces(f, code, &mut out, &mut stats);
        (out.iter().map(|p| (p.start - f.entry, p.end - f.entry, p.rule)).collect(), stats)
    }

    #[test]
    fn framed_function_restores_rbp_where_it_is_saved() {
        // cmp 0x10(%r14),%rsp; jbe; push %rbp; mov %rsp,%rbp; sub $0x10,%rsp
        // ... add; pop %rbp; ret; then the morestack call block.
        let mut code = FakeCode::default();
        code.put(0x1000 + 6, &[0x55, 0x48, 0x89, 0xe5]);
        let f = func(0x1000, "main.c1", &[(0, 0), (7, 8), (0xe, 24), (0x31, 8), (0x32, 0)], 0x3a);
        let (p, stats) = pieces_of(&f, &mut code);
        assert_eq!(
            p,
            vec![
                (0, 7, rsp(8, UNCHANGED)),
                (7, 0xe, rsp(16, RBP_SAVED)),
                (0xe, 0x31, rsp(32, RBP_SAVED)),
                (0x31, 0x32, rsp(16, RBP_SAVED)),
                (0x32, 0x3a, rsp(8, UNCHANGED)),
            ]
        );
        assert_eq!((stats.pcsp_functions, stats.framed_functions), (1, 1));
    }

    #[test]
    fn old_prologue_saves_rbp_after_the_mov() {
        // sub $0x18,%rsp; mov %rbp,0x10(%rsp); lea 0x10(%rsp),%rbp
        let mut code = FakeCode::default();
        code.put(0x2000 + 6, &[0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x6c, 0x24, 0x10]);
        let f = func(0x2000, "main.old", &[(0, 0), (10, 0x18), (0x40, 0)], 0x48);
        let (p, _) = pieces_of(&f, &mut code);
        assert_eq!(
            p,
            vec![
                (0, 10, rsp(8, UNCHANGED)),
                (10, 15, rsp(0x20, UNCHANGED)),
                (15, 0x40, rsp(0x20, RBP_SAVED)),
                (0x40, 0x48, rsp(8, UNCHANGED)),
            ]
        );
        // A large frame: sub $0x1000,%rsp; mov %rbp,0xff8(%rsp).
        let mut code = FakeCode::default();
        code.put(0x3000 + 6, &[0x48, 0x81, 0xec, 0, 0x10, 0, 0, 0x48, 0x89, 0xac, 0x24, 0xf8, 0x0f, 0, 0]);
        let f = func(0x3000, "main.big", &[(0, 0), (13, 0x1000), (0x40, 0)], 0x48);
        let (p, _) = pieces_of(&f, &mut code);
        assert_eq!(p[1..3], [(13, 21, rsp(0x1008, UNCHANGED)), (21, 0x40, rsp(0x1008, RBP_SAVED))]);
    }

    #[test]
    fn frameless_and_pushing_asm_leave_rbp_alone() {
        let mut code = FakeCode::default();
        let leaf = func(0x1000, "main.leaf", &[(0, 0)], 0x20);
        assert_eq!(pieces_of(&leaf, &mut code).0, vec![(0, 0x20, rsp(8, UNCHANGED))]);
        // pushfq first (0x9c), not push %rbp.
        code.put(0x2000, &[0x9c]);
        let f = func(0x2000, "runtime.asm", &[(0, 0), (1, 8), (0x10, 0)], 0x11);
        assert_eq!(pieces_of(&f, &mut code).0[1], (1, 0x10, rsp(16, UNCHANGED)));
    }

    #[test]
    fn negative_deltas_are_invalid() {
        let mut code = FakeCode::default();
        let f = func(0x1000, "syscall.rawVforkSyscall", &[(0, 0), (0x2b, -8), (0x2f, 0)], 0x40);
        let (p, stats) = pieces_of(&f, &mut code);
        assert_eq!(p[1], (0x2b, 0x2f, UnwindRule::Invalid));
        assert_eq!(stats.invalid, 1);
    }

    #[test]
    fn top_frames_stop_but_sigtramp_does_not() {
        let mut code = FakeCode::default();
        let mut goexit = func(0x1000, "runtime.goexit", &[(0, 0)], 0x10);
        goexit.flag_top_frame = true;
        assert_eq!(pieces_of(&goexit, &mut code).0, vec![(0, 0x10, UnwindRule::Stop)]);
        let mut sigtramp =
            func(0x2000, "runtime.sigtramp", &[(0, 0), (4, 48), (0x38, 72), (0x4a, 48), (0x6b, 0)], 0x6c);
        sigtramp.flag_top_frame = true;
        let (p, stats) = pieces_of(&sigtramp, &mut code);
        assert_eq!(p[1], (4, 0x38, rsp(56, UNCHANGED)));
        assert_eq!(stats.roots, 0);
        // Go 1.16 tables have no flags: by name.
        let mut old = func(0x3000, "runtime.mstart", &[(0, 0)], 0x10);
        old.has_flags = false;
        assert_eq!(pieces_of(&old, &mut code).0, vec![(0, 0x10, UnwindRule::Stop)]);
    }

    #[test]
    fn signal_return_starts_one_padding_byte_early() {
        let mut code = FakeCode::default();
        code.put(0x1000, RT_SIGRETURN[0]);
        let f = func(0x1000, "runtime.sigreturn__sigaction", &[(0, 0)], 0xb);
        let mut out = Vec::new();
        let mut stats = GoUnwindStats::default();
        function_pieces(&f, &mut code, &mut out, &mut stats);
        assert_eq!(out, vec![Piece { start: 0xfff, end: 0x100b, rule: UnwindRule::Signal }]);
        assert_eq!(stats.signal_trampolines, 1);
    }

    #[test]
    fn followed_switch_uses_rbp_after_its_prologue() {
        // runtime.systemstack: push %rbp; mov %rsp,%rbp; ...; the noswitch
        // path pops rbp and tail-calls; the bad path has the frame again.
        let mut code = FakeCode::default();
        code.put(0x1000, &PUSH_RBP_MOV);
        let mut f = func(0x1000, "runtime.systemstack", &[(0, 0), (1, 8), (0x80, 0), (0x81, 8), (0x88, 0)], 0x94);
        f.flag_sp_write = true;
        let (p, stats) = pieces_of(&f, &mut code);
        let switch = UnwindRule::StackSwitch { offset: 16, rbp: RBP_SAVED };
        assert_eq!(
            p,
            vec![
                (0, 1, rsp(8, UNCHANGED)),
                (1, 4, rsp(16, RBP_SAVED)),
                (4, 0x80, switch),
                (0x80, 0x81, rsp(8, UNCHANGED)),
                (0x81, 0x88, switch),
                (0x88, 0x94, rsp(8, UNCHANGED)),
            ]
        );
        assert_eq!(stats.switches_followed, 1);
        // Without the frame-pointer prologue it is not followed.
        let mut code = FakeCode::default();
        let (p, stats) = pieces_of(&f, &mut code);
        assert_eq!(p, vec![(0, 1, rsp(8, UNCHANGED)), (1, 0x94, UnwindRule::UnfollowedSwitch)]);
        assert_eq!(stats.switches_unfollowed, 1);
    }

    #[test]
    fn other_sp_writers_end_the_stack_after_their_entry() {
        let mut code = FakeCode::default();
        code.put(0x1000, &PUSH_RBP_MOV);
        let mut gogo = func(0x1000, "runtime.gogo", &[(0, 0), (1, 8), (0x4f, 16), (0x57, 8), (0x5d, 0)], 0x5e);
        gogo.flag_sp_write = true;
        let (p, stats) = pieces_of(&gogo, &mut code);
        assert_eq!(p, vec![(0, 1, rsp(8, UNCHANGED)), (1, 0x5e, UnwindRule::UnfollowedSwitch)]);
        assert_eq!(stats.switches_unfollowed, 1);
        // Go 1.16: by name.
        let mut old = func(0x2000, "runtime.gogo", &[(0, 0)], 0x40);
        old.has_flags = false;
        assert_eq!(pieces_of(&old, &mut code).0[1], (1, 0x40, UnwindRule::UnfollowedSwitch));
    }

    #[test]
    fn mcall_goes_on_down_the_system_stack_after_its_entry() {
        let mut code = FakeCode::default();
        let mut mcall = func(0x1000, "runtime.mcall", &[(0, 0), (0x3c, 8), (0x45, 0)], 0x4e);
        mcall.flag_sp_write = true;
        let (p, stats) = pieces_of(&mcall, &mut code);
        assert_eq!(p, vec![(0, 1, rsp(8, UNCHANGED)), (1, 0x4e, UnwindRule::GoMcall)]);
        assert_eq!((stats.switches_followed, stats.switches_unfollowed), (1, 0));
        // Go 1.16: by name.
        mcall.has_flags = false;
        mcall.flag_sp_write = false;
        assert_eq!(pieces_of(&mcall, &mut code).0[1], (1, 0x4e, UnwindRule::GoMcall));
    }

    #[test]
    fn morestack_is_followed_through_the_goroutine() {
        let mut code = FakeCode::default();
        let mut f = func(0x1000, "runtime.morestack", &[(0, 0)], 0x94);
        f.flag_sp_write = true;
        let (p, stats) = pieces_of(&f, &mut code);
        assert_eq!((p, stats.switches_followed), (vec![(0, 0x94, UnwindRule::GoMorestack)], 1));
        // Go 1.16: by name.
        f.has_flags = false;
        f.flag_sp_write = false;
        assert_eq!(pieces_of(&f, &mut code).0, vec![(0, 0x94, UnwindRule::GoMorestack)]);
        // Another function is not.
        let mut g = func(0x1000, "runtime.morestackc", &[(0, 0)], 0x20);
        g.flag_sp_write = true;
        assert_eq!(pieces_of(&g, &mut code).0[1], (1, 0x20, UnwindRule::UnfollowedSwitch));
    }

    #[test]
    fn missing_pcsp_is_not_covered() {
        let mut code = FakeCode::default();
        let f = FuncDesc { ranges: Vec::new(), ..func(0x1000, "go:textfipsstart", &[], 0) };
        let (p, stats) = pieces_of(&f, &mut code);
        assert_eq!((p, stats.no_pcsp), (vec![], 1));
    }

    fn delta(address: u64, rule: UnwindRule) -> StackDelta {
        StackDelta { address, rule }
    }

    #[test]
    fn merge_prefers_go_rules_and_keeps_cfi_elsewhere() {
        let c = rsp(16, RbpRule::AtCfa(-16));
        let cfi = vec![
            delta(0x100, c),
            delta(0x120, UnwindRule::NoCoverage),
            delta(0x300, UnwindRule::Stop),
            delta(0x310, UnwindRule::NoCoverage),
        ];
        let go = vec![
            // Overlaps the CFI (Go's .debug_frame): the Go rule wins.
            Piece { start: 0x110, end: 0x140, rule: rsp(8, UNCHANGED) },
            Piece { start: 0x200, end: 0x220, rule: rsp(24, UNCHANGED) },
            Piece { start: 0x308, end: 0x320, rule: UnwindRule::UnfollowedSwitch },
        ];
        let mut stats = GoUnwindStats::default();
        let merged = merge(&cfi, &go, &mut stats);
        assert_eq!(
            merged,
            vec![
                delta(0x100, c),
                delta(0x110, rsp(8, UNCHANGED)),
                delta(0x140, UnwindRule::NoCoverage),
                delta(0x200, rsp(24, UNCHANGED)),
                delta(0x220, UnwindRule::NoCoverage),
                delta(0x300, UnwindRule::Stop),
                delta(0x308, UnwindRule::UnfollowedSwitch),
                delta(0x320, UnwindRule::NoCoverage),
            ]
        );
        assert_eq!(stats.cfi_overridden, 2);
        // Nothing from Go: the CFI table unchanged.
        assert_eq!(merge(&cfi, &[], &mut stats), cfi);
        assert_eq!(merge(&[], &[], &mut stats), vec![]);
    }
}

/// On a real Go binary, built here (needs the `go` tool; skipped without
/// it, except under CI).
#[cfg(test)]
mod real_binary {
    use super::*;
    use std::path::PathBuf;

    const PROGRAM: &str = r#"package main

import "fmt"

//go:noinline
func work(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i
	}
	return s
}

func main() { fmt.Println(work(10)) }
"#;

    fn build(name: &str, ldflags: &str) -> Option<PathBuf> {
        crate::testing::build_go_program(&format!("go-tables-{name}"), PROGRAM, ldflags)
    }

    #[test]
    fn stripped_go_binary_gets_whole_tables() {
        let Some(path) = build("stripped", "-s -w") else { return };
        let elf = ElfFile::open(&path).unwrap();
        let cfi = elf.unwind_table();
        assert!(cfi.deltas.is_empty(), "a pure Go binary has no CFI: {:?}", cfi.stats);
        let (table, stats) = with_go_tables(&elf, cfi);
        let stats = stats.expect("a Go table");
        eprintln!("{stats:#?}, {} deltas, {} rules", table.deltas.len(), table.distinct_rules());
        assert!(stats.functions > 1000 && stats.framed_functions > stats.functions / 2, "{stats:?}");
        assert_eq!(stats.roots, 3, "goexit, mstart, rt0_go: {stats:?}");
        assert!(stats.switches_followed >= 5 && stats.switches_unfollowed >= 2, "{stats:?}");
        assert_eq!(stats.signal_trampolines, 1);

        let tab = GoPclntab::find(&elf).unwrap().unwrap();
        let func = |name: &str| tab.funcs().find(|f| tab.func_name(f) == Some(name)).unwrap();
        let goexit = func("runtime.goexit");
        assert_eq!(table.lookup(goexit.entry), UnwindRule::Stop);
        // The return address of every goroutine's first frame, looked up
        // at pc - 1.
        assert_eq!(table.lookup(goexit.entry + 1 - 1), UnwindRule::Stop);
        let work = func("main.work");
        assert_eq!(
            table.lookup(work.entry),
            UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged }
        );
        let main = func("main.main");
        let framed = (main.entry..main.end)
            .map(|pc| table.lookup(pc))
            .any(|r| matches!(r, UnwindRule::Cfa { base: CfaBase::Rsp, offset, rbp: RBP_SAVED } if offset > 16));
        assert!(framed, "main.main's body restores rbp");
        let systemstack = func("runtime.systemstack");
        assert_eq!(table.lookup(systemstack.entry + 0x10), UnwindRule::StackSwitch { offset: 16, rbp: RBP_SAVED });
        let mcall = func("runtime.mcall");
        assert_eq!(table.lookup(mcall.entry + 0x10), UnwindRule::GoMcall);
        // gogo's body (named without its package: a file-local symbol).
        let gogo = func("gogo");
        assert_eq!(table.lookup(gogo.entry + 4), UnwindRule::UnfollowedSwitch);
        let sigreturn = func("runtime.sigreturn__sigaction");
        assert_eq!(table.lookup(sigreturn.entry - 1), UnwindRule::Signal);
        // Deltas sorted, no equal neighbours, NoCoverage last.
        let deltas: Vec<StackDelta> = table.deltas.iter().collect();
        assert!(deltas.windows(2).all(|w| w[0].address < w[1].address && w[0].rule != w[1].rule));
        assert_eq!(table.deltas.last().unwrap().rule, UnwindRule::NoCoverage);
        std::fs::remove_dir_all(path.parent().unwrap()).ok();
    }

    /// An unstripped binary keeps Go's `.debug_frame` (here uncompressed,
    /// so that it is read): it knows nothing of rbp, roots or stack
    /// switches, and the Go rules replace it.
    #[test]
    fn go_rules_win_over_gos_debug_frame() {
        let Some(path) = build("debug", "-compressdwarf=false") else { return };
        let elf = ElfFile::open(&path).unwrap();
        let cfi = elf.unwind_table();
        assert!(cfi.stats.fdes_debug_frame > 1000, "{:?}", cfi.stats);
        let (table, stats) = with_go_tables(&elf, cfi);
        let stats = stats.unwrap();
        assert!(stats.cfi_overridden > 1000, "{stats:?}");
        let tab = GoPclntab::find(&elf).unwrap().unwrap();
        let func = |name: &str| tab.funcs().find(|f| tab.func_name(f) == Some(name)).unwrap();
        let systemstack = func("runtime.systemstack");
        assert_eq!(table.lookup(systemstack.entry + 0x10), UnwindRule::StackSwitch { offset: 16, rbp: RBP_SAVED });
        assert_eq!(table.lookup(func("runtime.goexit").entry), UnwindRule::Stop);
        let main = func("main.main");
        assert!((main.entry..main.end).any(|pc| matches!(table.lookup(pc), UnwindRule::Cfa { rbp: RBP_SAVED, .. })));
        std::fs::remove_dir_all(path.parent().unwrap()).ok();
    }

    /// Issue 19: a `.gopclntab` claiming 2^32 - 1 functions, in a sparse
    /// file long enough for their function table, aborted the agent (a
    /// `Vec` sized from the count in `go_pieces`). It is refused and
    /// counted; the CFI table is kept.
    #[test]
    fn issue_19_sparse_pclntab_with_four_billion_functions() {
        let Some(path) = build("sparse", "-s -w") else { return };
        let mut data = std::fs::read(&path).unwrap();
        let elf = ElfFile::from_bytes(data.clone()).unwrap();
        let index = elf.sections().iter().position(|s| s.name == ".gopclntab").expect(".gopclntab");
        let section = elf.sections()[index].clone();
        let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
        let start = section.offset as usize;
        data[start + 8..start + 16].copy_from_slice(&u64::from(u32::MAX).to_le_bytes());
        // Room for (2^33 - 1) 4-byte function table fields after the header.
        let size = (1u64 << 35) + (1 << 20);
        let size_field = shoff + index * 64 + 32;
        data[size_field..size_field + 8].copy_from_slice(&size.to_le_bytes());
        let sparse = path.with_file_name("sparse-pclntab");
        std::fs::write(&sparse, &data).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&sparse).unwrap();
        file.set_len(section.offset + size).unwrap();
        drop(file);
        // Opened by path, the file is refused by its size first; the
        // parser must cope on its own too.
        assert!(ElfFile::open(&sparse).is_err());
        let elf = ElfFile::from_file(std::fs::File::open(&sparse).unwrap(), section.offset + size).unwrap();
        match GoPclntab::find(&elf) {
            Err(crate::Error::OverLimit { what: ".gopclntab functions", value, limit }) => {
                assert_eq!(value, u64::from(u32::MAX));
                assert!(limit <= u64::from(crate::MAX_GO_FUNCTIONS), "{limit}");
            }
            Err(e) => panic!("{e}"),
            Ok(t) => panic!("accepted: {:?}", t.map(|t| t.len())),
        }
        let (table, stats) = with_go_tables(&elf, elf.unwind_table());
        assert_eq!(stats.map(|s| (s.refused, s.functions)), Some((1, 0)));
        assert!(table.deltas.is_empty(), "a pure Go binary has no CFI");
        std::fs::remove_dir_all(path.parent().unwrap()).ok();
    }
}
