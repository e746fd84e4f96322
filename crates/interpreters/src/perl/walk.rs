//! Walking a Perl interpreter's context stacks from user space and naming
//! what they hold: the proof of the layout, and the naming half the BPF
//! unwinder will hand its `(CV, COP)` pairs to.
//!
//! A Perl thread's calls are the `CXt_SUB` entries of its context stacks:
//! the current stack (`PL_curstackinfo`) and the stacks it was pushed
//! over (`si_prev`: sort blocks, signal handlers, overloading). The line
//! a sub is at is the current statement (`PL_curcop`) for the innermost
//! one, and the `blk_oldcop` of the sub it called for the others.

use super::layout::{consts, PerlLayout};
use crate::failures::RecentFailures;
use crate::memory::ProcessMemory;
use std::collections::HashMap;

/// Frames returned at most (as many as the BPF unwinder collects);
/// deeper ones are dropped and counted.
pub const MAX_FRAMES: usize = profiler_bpf::MAX_USER_FRAMES;
/// Contexts looked at per walk at most (all stacks together).
pub const MAX_CONTEXTS: usize = 16_384;
/// Stacks (`PERL_SI`) followed at most.
pub const MAX_STACKS: usize = 256;
/// Names and positions cached at most, each; when one is full both are
/// cleared.
pub const MAX_CACHED: usize = 4096;
/// Most bytes of names and file names the two caches of one symbolizer
/// keep together: entries count alone would let a process's 5 KiB names
/// and files hold 40 MB of the agent.
pub const MAX_CACHED_BYTES: usize = 4 << 20;
/// Longest name (`HEK`) read.
pub const MAX_NAME: usize = 1024;
/// Longest file name read.
pub const MAX_FILE: usize = 4096;

/// One Perl frame, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerlFrame {
    /// `Package::sub`, or `main` for the file's top level (`eval` for an
    /// `eval`/`require` frame).
    pub name: String,
    /// The file of the statement running in this frame.
    pub file: String,
    /// Its line.
    pub line: u32,
}

/// Why a walk failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// A read of `what` at `address` failed.
    Unreadable {
        /// What was being read.
        what: &'static str,
        /// Where.
        address: u64,
    },
    /// A value read made no sense.
    Invalid(String),
    /// Reading the object at `address` failed lately: not tried again
    /// yet ([`RecentFailures`]).
    FailedLately {
        /// Where.
        address: u64,
    },
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Unreadable { what, address } => write!(f, "cannot read {what} at {address:#x}"),
            WalkError::Invalid(why) => write!(f, "{why}"),
            WalkError::FailedLately { address } => write!(f, "reading {address:#x} failed lately"),
        }
    }
}

impl std::error::Error for WalkError {}

/// The two interpreter variables a walk starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerlThreadState {
    /// `PL_curcop`: the statement running now.
    pub curcop: u64,
    /// `PL_curstackinfo`: the current context stack.
    pub curstackinfo: u64,
}

/// Reads the state of the interpreter at `interpreter` (a
/// `PerlInterpreter*`, threaded builds: e.g. what `PL_curinterp` holds
/// for the main thread).
pub fn threaded_state(
    memory: &dyn ProcessMemory,
    layout: &PerlLayout,
    interpreter: u64,
) -> Result<PerlThreadState, WalkError> {
    Ok(PerlThreadState {
        curcop: read_ptr(memory, interpreter.wrapping_add(layout.interp_curcop.into()), "PL_curcop")?,
        curstackinfo: read_ptr(memory, interpreter.wrapping_add(layout.interp_curstackinfo.into()), "PL_curstackinfo")?,
    })
}

/// Reads the state of a non-threaded interpreter from its globals
/// (`PL_curcop`, `PL_curstackinfo`, at run-time addresses).
pub fn global_state(memory: &dyn ProcessMemory, curcop: u64, curstackinfo: u64) -> Result<PerlThreadState, WalkError> {
    Ok(PerlThreadState {
        curcop: read_ptr(memory, curcop, "PL_curcop")?,
        curstackinfo: read_ptr(memory, curstackinfo, "PL_curstackinfo")?,
    })
}

/// Names Perl frames of one process, with bounded caches.
pub struct PerlSymbolizer {
    layout: PerlLayout,
    /// CV -> (name, `CvFILE`, the line of its first op).
    subs: HashMap<u64, (String, String, Option<u32>)>,
    positions: HashMap<u64, (String, u32)>,
    /// Bytes of the names and file names in `subs` and `positions`.
    cached_bytes: usize,
    /// CVs and COPs that could not be read lately (not read again at
    /// every sample).
    pub failures: RecentFailures,
    /// Times a full cache was cleared.
    pub evictions: u64,
    /// Frames dropped past [`MAX_FRAMES`].
    pub truncated: u64,
}

impl PerlSymbolizer {
    /// A symbolizer for processes running `layout`.
    pub fn new(layout: PerlLayout) -> Self {
        PerlSymbolizer {
            layout,
            subs: HashMap::new(),
            positions: HashMap::new(),
            cached_bytes: 0,
            failures: RecentFailures::default(),
            evictions: 0,
            truncated: 0,
        }
    }

    /// The frames of a thread, innermost first, down to `main`.
    pub fn walk(&mut self, memory: &dyn ProcessMemory, state: PerlThreadState) -> Result<Vec<PerlFrame>, WalkError> {
        let l = self.layout.clone();
        let mut frames = Vec::new();
        // The statement running in the frame being built: the innermost
        // sub's is PL_curcop; each sub's call site is its caller's.
        let mut cop = state.curcop;
        let mut si = state.curstackinfo;
        let mut contexts = 0usize;
        let mut stacks = 0usize;
        while si != 0 {
            stacks += 1;
            if stacks > MAX_STACKS {
                return Err(WalkError::Invalid(format!("more than {MAX_STACKS} context stacks")));
            }
            let head = read_bytes(memory, si, l.si_size as usize, "PERL_SI")?;
            let cxstack = field_u64(&head, l.si_cxstack)?;
            let cxix = field_i32(&head, l.si_cxix)?;
            if cxix >= 0 {
                let count = cxix as usize + 1;
                if contexts.saturating_add(count) > MAX_CONTEXTS {
                    return Err(WalkError::Invalid(format!("more than {MAX_CONTEXTS} contexts")));
                }
                contexts += count;
            }
            for ix in (0..=cxix).rev() {
                let at = cxstack.wrapping_add(ix as u64 * u64::from(l.cx_size));
                let cx = read_bytes(memory, at, l.cx_size as usize, "PERL_CONTEXT")?;
                let cx_type = byte(&cx, l.cx_type)?;
                let name = match cx_type & consts::CXTYPEMASK {
                    // The fake sub of a `(?{ })` in the current scope is
                    // no call.
                    consts::CXT_SUB if cx_type & consts::CXP_SUB_RE_FAKE != 0 => continue,
                    consts::CXT_SUB | consts::CXT_FORMAT => {
                        let cv = field_u64(&cx, l.cx_blk_sub_cv)?;
                        self.sub_name(memory, cv)?
                    }
                    // `eval { }` and `try { }` are blocks of the sub around
                    // them; its line stays the one inside the block.
                    consts::CXT_EVAL if cx_type & (consts::CXP_EVALBLOCK | consts::CXP_TRY) != 0 => continue,
                    // `eval ''`, `require`, `do FILE` run code of their own.
                    consts::CXT_EVAL => "eval".to_string(),
                    _ => continue,
                };
                self.push(memory, &mut frames, name, cop)?;
                cop = field_u64(&cx, l.cx_blk_oldcop)?;
            }
            si = field_u64(&head, l.si_prev)?;
        }
        self.push(memory, &mut frames, "main".to_string(), cop)?;
        Ok(frames)
    }

    fn push(
        &mut self,
        memory: &dyn ProcessMemory,
        frames: &mut Vec<PerlFrame>,
        name: String,
        cop: u64,
    ) -> Result<(), WalkError> {
        if frames.len() >= MAX_FRAMES {
            self.truncated += 1;
            return Ok(());
        }
        let (file, line) = self.position(memory, cop)?;
        frames.push(PerlFrame { name, file, line });
        Ok(())
    }

    /// The file and line of the statement `cop`.
    pub fn position(&mut self, memory: &dyn ProcessMemory, cop: u64) -> Result<(String, u32), WalkError> {
        if let Some(p) = self.positions.get(&cop) {
            return Ok(p.clone());
        }
        if self.failures.failed_lately(cop) {
            return Err(WalkError::FailedLately { address: cop });
        }
        let read = self.read_position(memory, cop);
        self.failures.outcome(cop, read.is_ok());
        read
    }

    fn read_position(&mut self, memory: &dyn ProcessMemory, cop: u64) -> Result<(String, u32), WalkError> {
        let l = &self.layout;
        let body = read_bytes(memory, cop, l.cop_size as usize, "COP")?;
        let line = field_u32(&body, l.cop_line)?;
        let file_ptr = field_u64(&body, l.cop_file)?;
        let file = if file_ptr == 0 {
            String::new()
        } else if l.threaded {
            read_cstr(memory, file_ptr, MAX_FILE)
                .ok_or(WalkError::Unreadable { what: "cop_file", address: file_ptr })?
        } else {
            // The file's GV is named "_<" followed by the file name.
            let name = self.gv_name(memory, file_ptr)?;
            name.strip_prefix("_<").map(str::to_string).unwrap_or(name)
        };
        self.make_room(file.len());
        self.positions.insert(cop, (file.clone(), line));
        Ok((file, line))
    }

    /// `Package::sub` for the code value `cv`.
    pub fn sub_name(&mut self, memory: &dyn ProcessMemory, cv: u64) -> Result<String, WalkError> {
        self.sub(memory, cv).map(|(name, _)| name)
    }

    /// The sub `cv`'s name ([`PerlSymbolizer::sub_name`]) and the file it
    /// was defined in (`CvFILE`; empty when unknown).
    pub fn sub(&mut self, memory: &dyn ProcessMemory, cv: u64) -> Result<(String, String), WalkError> {
        self.sub_with_first_line(memory, cv).map(|(name, file, _)| (name, file))
    }

    /// The sub `cv` (name, file) at the line `offset` lines after the
    /// line of its first op (`CvSTART`, its first statement), as the BPF
    /// unwinder records it; 0 when unknown.
    pub fn sub_at(
        &mut self,
        memory: &dyn ProcessMemory,
        cv: u64,
        offset: Option<u32>,
    ) -> Result<(String, String, u32), WalkError> {
        let (name, file, first) = self.sub_with_first_line(memory, cv)?;
        let line = offset.zip(first).and_then(|(o, f)| f.checked_add(o)).unwrap_or(0);
        Ok((name, file, line))
    }

    fn sub_with_first_line(
        &mut self,
        memory: &dyn ProcessMemory,
        cv: u64,
    ) -> Result<(String, String, Option<u32>), WalkError> {
        if let Some(sub) = self.subs.get(&cv) {
            return Ok(sub.clone());
        }
        if self.failures.failed_lately(cv) {
            return Err(WalkError::FailedLately { address: cv });
        }
        let read = self.read_sub(memory, cv);
        self.failures.outcome(cv, read.is_ok());
        read
    }

    fn read_sub(&mut self, memory: &dyn ProcessMemory, cv: u64) -> Result<(String, String, Option<u32>), WalkError> {
        let l = self.layout.clone();
        let head = read_bytes(memory, cv, l.sv_size as usize, "CV")?;
        let flags = field_u32(&head, l.sv_flags)?;
        if flags & consts::SVT_MASK != consts::SVT_PVCV {
            return Err(WalkError::Invalid(format!("{cv:#x} is not a CV (flags {flags:#x})")));
        }
        let any = field_u64(&head, l.sv_any)?;
        let body = read_bytes(memory, any, l.xpvcv_size as usize, "XPVCV")?;
        let cv_flags = field_u32(&body, l.xcv_flags)?;
        let gv_u = field_u64(&body, l.xcv_gv_u)?;
        let name = if cv_flags & consts::CVF_NAMED != 0 {
            // A sub stored without a glob: its own name and stash.
            let sub = read_hek(memory, &l, gv_u)?;
            let package = self.hv_name(memory, field_u64(&body, l.xcv_stash)?)?;
            qualify(package, sub)
        } else if gv_u == 0 {
            "__ANON__".to_string()
        } else {
            self.glob_name(memory, gv_u)?
        };
        let file = match field_u64(&body, l.xcv_file)? {
            0 => String::new(),
            at => read_cstr(memory, at, MAX_FILE).ok_or(WalkError::Unreadable { what: "CvFILE", address: at })?,
        };
        // Whatever the first op is, the BPF side read the same word there.
        let first_line = match field_u64(&body, l.xcv_start)? {
            0 => None,
            start => start.checked_add(u64::from(l.cop_line)).and_then(|at| {
                let mut raw = [0u8; 4];
                memory.read(at, &mut raw).then(|| u32::from_le_bytes(raw))
            }),
        };
        self.make_room(name.len() + file.len());
        self.subs.insert(cv, (name.clone(), file.clone(), first_line));
        Ok((name, file, first_line))
    }

    /// Counts `bytes` about to be cached (a new entry: misses only),
    /// first clearing both caches if either is full ([`MAX_CACHED`]) or
    /// they would hold more than [`MAX_CACHED_BYTES`].
    fn make_room(&mut self, bytes: usize) {
        let full = self.subs.len().max(self.positions.len()) >= MAX_CACHED;
        if full || self.cached_bytes + bytes > MAX_CACHED_BYTES {
            self.subs.clear();
            self.positions.clear();
            self.cached_bytes = 0;
            self.evictions += 1;
        }
        self.cached_bytes += bytes;
    }

    /// `Package::name` of the glob `gv`.
    fn glob_name(&mut self, memory: &dyn ProcessMemory, gv: u64) -> Result<String, WalkError> {
        let l = self.layout.clone();
        let body = self.gv_body(memory, gv)?;
        let name = read_hek(memory, &l, field_u64(&body, l.xgv_namehek)?)?;
        let package = self.hv_name(memory, field_u64(&body, l.xgv_stash)?)?;
        Ok(qualify(package, name))
    }

    /// The bare name of the glob `gv`.
    fn gv_name(&mut self, memory: &dyn ProcessMemory, gv: u64) -> Result<String, WalkError> {
        let body = self.gv_body(memory, gv)?;
        read_hek(memory, &self.layout, field_u64(&body, self.layout.xgv_namehek)?)
    }

    fn gv_body(&self, memory: &dyn ProcessMemory, gv: u64) -> Result<Vec<u8>, WalkError> {
        let l = &self.layout;
        let head = read_bytes(memory, gv, l.sv_size as usize, "GV")?;
        let flags = field_u32(&head, l.sv_flags)?;
        if flags & consts::SVT_MASK != consts::SVT_PVGV {
            return Err(WalkError::Invalid(format!("{gv:#x} is not a GV (flags {flags:#x})")));
        }
        let any = field_u64(&head, l.sv_any)?;
        read_bytes(memory, any, (l.xgv_stash + 8) as usize, "XPVGV")
    }

    /// `HvNAME` of the stash `hv`; `None` for no stash or a nameless one.
    fn hv_name(&self, memory: &dyn ProcessMemory, hv: u64) -> Result<Option<String>, WalkError> {
        if hv == 0 {
            return Ok(None);
        }
        let l = &self.layout;
        let head = read_bytes(memory, hv, l.sv_size as usize, "HV")?;
        let flags = field_u32(&head, l.sv_flags)?;
        if flags & consts::SVT_MASK != consts::SVT_PVHV {
            return Err(WalkError::Invalid(format!("{hv:#x} is not a HV (flags {flags:#x})")));
        }
        if flags & consts::SVF_OOK == 0 {
            return Ok(None);
        }
        let any = field_u64(&head, l.sv_any)?;
        let aux = match l.xhv_aux_in_body {
            Some(off) => any.wrapping_add(off.into()),
            None => {
                // Before 5.35 the aux struct follows the bucket array.
                let max = read_ptr(memory, any.wrapping_add(l.xhv_max.into()), "xhv_max")?;
                let buckets = max.checked_add(1).and_then(|n| n.checked_mul(8)).filter(|&n| n <= 1 << 40);
                let buckets = buckets.ok_or_else(|| WalkError::Invalid(format!("hash of {max:#x} buckets")))?;
                field_u64(&head, l.sv_u)?.wrapping_add(buckets)
            }
        };
        let aux_body = read_bytes(memory, aux, (l.xhv_name_count + 4) as usize, "xpvhv_aux")?;
        let name_u = field_u64(&aux_body, l.xhv_name_u)?;
        let count = field_i32(&aux_body, l.xhv_name_count)?;
        // With several names, name_u is an array: its first entry is the
        // name, or (count < 0) NULL and the effective names follow.
        let hek = match count {
            0 => name_u,
            c if c > 0 => read_ptr(memory, name_u, "xhv_name_u")?,
            _ => read_ptr(memory, name_u.wrapping_add(8), "xhv_name_u")?,
        };
        if hek == 0 {
            return Ok(None);
        }
        read_hek(memory, l, hek).map(Some)
    }
}

fn qualify(package: Option<String>, name: String) -> String {
    format!("{}::{name}", package.as_deref().unwrap_or("__ANON__"))
}

/// The key of the shared hash key `hek`, bounded by [`MAX_NAME`].
fn read_hek(memory: &dyn ProcessMemory, layout: &PerlLayout, hek: u64) -> Result<String, WalkError> {
    if hek == 0 {
        return Err(WalkError::Invalid("null HEK".into()));
    }
    let head = read_bytes(memory, hek, layout.hek_key as usize, "HEK")?;
    let len = field_i32(&head, layout.hek_len)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_NAME)
        .ok_or_else(|| WalkError::Invalid(format!("HEK at {hek:#x} of length {len}")))?;
    let key = read_bytes(memory, hek.wrapping_add(layout.hek_key.into()), len, "HEK key")?;
    Ok(String::from_utf8_lossy(&key).into_owned())
}

fn read_bytes(memory: &dyn ProcessMemory, address: u64, len: usize, what: &'static str) -> Result<Vec<u8>, WalkError> {
    let mut buf = vec![0u8; len];
    if address == 0 || !memory.read(address, &mut buf) {
        return Err(WalkError::Unreadable { what, address });
    }
    Ok(buf)
}

fn read_ptr(memory: &dyn ProcessMemory, address: u64, what: &'static str) -> Result<u64, WalkError> {
    let b = read_bytes(memory, address, 8, what)?;
    field_u64(&b, 0)
}

/// The NUL-terminated string at `address`, of at most `max` bytes, read
/// in chunks that never cross a page (it may end just before an unmapped
/// one).
fn read_cstr(memory: &dyn ProcessMemory, address: u64, max: usize) -> Option<String> {
    const CHUNK: usize = 128;
    let mut out = Vec::new();
    let mut at = address;
    while out.len() <= max {
        let n = ((4096 - (at & 4095)) as usize).min(CHUNK);
        let mut chunk = [0u8; CHUNK];
        if !memory.read(at, &mut chunk[..n]) {
            return None;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return (out.len() <= max).then(|| String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(&chunk[..n]);
        at = at.checked_add(n as u64)?;
    }
    None
}

fn truncated(off: u32) -> WalkError {
    WalkError::Invalid(format!("field at {off:#x} past the bytes read"))
}

fn field_u64(buf: &[u8], off: u32) -> Result<u64, WalkError> {
    crate::memory::u64_in(buf, off).ok_or_else(|| truncated(off))
}

fn field_i32(buf: &[u8], off: u32) -> Result<i32, WalkError> {
    crate::memory::i32_in(buf, off).ok_or_else(|| truncated(off))
}

fn field_u32(buf: &[u8], off: u32) -> Result<u32, WalkError> {
    field_i32(buf, off).map(|v| v as u32)
}

fn byte(buf: &[u8], off: u32) -> Result<u8, WalkError> {
    buf.get(off as usize).copied().ok_or_else(|| truncated(off))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perl::layout::PerlVersion;

    /// A process memory built object by object, for tests.
    #[derive(Default)]
    struct Fake {
        regions: Vec<(u64, Vec<u8>)>,
        next: u64,
    }

    impl ProcessMemory for Fake {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.regions.iter().any(|(start, bytes)| {
                let Some(off) = address.checked_sub(*start).and_then(|o| usize::try_from(o).ok()) else { return false };
                match off.checked_add(buf.len()).and_then(|end| bytes.get(off..end)) {
                    Some(src) => {
                        buf.copy_from_slice(src);
                        true
                    }
                    None => false,
                }
            })
        }
    }

    impl Fake {
        /// A zeroed object of `len` bytes at a fresh address.
        fn alloc(&mut self, len: usize) -> u64 {
            self.next += 0x1000;
            self.regions.push((self.next, vec![0; len]));
            self.next
        }
        fn put(&mut self, address: u64, bytes: &[u8]) {
            for (start, region) in &mut self.regions {
                if let Some(off) = address.checked_sub(*start).map(|o| o as usize) {
                    if off + bytes.len() <= region.len() {
                        region[off..off + bytes.len()].copy_from_slice(bytes);
                        return;
                    }
                }
            }
            panic!("put outside the objects at {address:#x}");
        }
        fn put_u64(&mut self, at: u64, v: u64) {
            self.put(at, &v.to_le_bytes());
        }
        fn put_u32(&mut self, at: u64, v: u32) {
            self.put(at, &v.to_le_bytes());
        }
        fn hek(&mut self, l: &PerlLayout, key: &str) -> u64 {
            let h = self.alloc(l.hek_key as usize + key.len() + 1);
            self.put_u32(h + u64::from(l.hek_len), key.len() as u32);
            self.put(h + u64::from(l.hek_key), key.as_bytes());
            h
        }
        /// An SV head of type `svt` with a body of `body_len` bytes.
        fn sv(&mut self, l: &PerlLayout, svt: u32, flags: u32, body_len: usize) -> (u64, u64) {
            let head = self.alloc(l.sv_size as usize);
            let body = self.alloc(body_len);
            self.put_u64(head + u64::from(l.sv_any), body);
            self.put_u32(head + u64::from(l.sv_flags), svt | flags);
            (head, body)
        }
        /// A stash named `name`, its aux struct laid out as `l` says.
        fn stash(&mut self, l: &PerlLayout, name: &str) -> u64 {
            let hek = self.hek(l, name);
            let (hv, body) = self.sv(l, consts::SVT_PVHV, consts::SVF_OOK, 0x80);
            let aux = match l.xhv_aux_in_body {
                Some(off) => body + u64::from(off),
                None => {
                    // 8 buckets, then the aux struct.
                    self.put_u64(body + u64::from(l.xhv_max), 7);
                    let buckets = self.alloc(8 * 8 + 0x40);
                    self.put_u64(hv + u64::from(l.sv_u), buckets);
                    buckets + 8 * 8
                }
            };
            // Two names (the stash was aliased): an array of HEK*.
            let names = self.alloc(16);
            self.put_u64(names, hek);
            self.put_u64(aux + u64::from(l.xhv_name_u), names);
            self.put_u32(aux + u64::from(l.xhv_name_count), 2);
            hv
        }
        fn gv(&mut self, l: &PerlLayout, name: &str, stash: u64) -> u64 {
            let hek = self.hek(l, name);
            let (gv, body) = self.sv(l, consts::SVT_PVGV, 0, 0x40);
            self.put_u64(body + u64::from(l.xgv_namehek), hek);
            self.put_u64(body + u64::from(l.xgv_stash), stash);
            gv
        }
        /// A sub named through a glob, or (`named`) through its own HEK.
        fn cv(&mut self, l: &PerlLayout, package: &str, name: &str, named: bool) -> u64 {
            let stash = self.stash(l, package);
            let (cv, body) = self.sv(l, consts::SVT_PVCV, 0, l.xpvcv_size as usize);
            if named {
                let hek = self.hek(l, name);
                self.put_u64(body + u64::from(l.xcv_gv_u), hek);
                self.put_u64(body + u64::from(l.xcv_stash), stash);
                self.put_u32(body + u64::from(l.xcv_flags), consts::CVF_NAMED);
            } else {
                let gv = self.gv(l, name, stash);
                self.put_u64(body + u64::from(l.xcv_gv_u), gv);
            }
            cv
        }
        fn cop(&mut self, l: &PerlLayout, file: &str, line: u32) -> u64 {
            let cop = self.alloc(l.cop_size as usize);
            self.put_u32(cop + u64::from(l.cop_line), line);
            let file = if l.threaded {
                // A whole page: strings are read in chunks up to a page end.
                let s = self.alloc(4096);
                self.put(s, file.as_bytes());
                s
            } else {
                self.gv(l, &format!("_<{file}"), 0)
            };
            self.put_u64(cop + u64::from(l.cop_file), file);
            cop
        }
        /// A context stack of `(cx_type, cv, oldcop)`, oldest first.
        fn stack(&mut self, l: &PerlLayout, cxs: &[(u8, u64, u64)], prev: u64) -> u64 {
            let si = self.alloc(l.si_size as usize);
            let cxstack = self.alloc(l.cx_size as usize * cxs.len().max(1));
            for (i, &(kind, cv, oldcop)) in cxs.iter().enumerate() {
                let cx = cxstack + (i * l.cx_size as usize) as u64;
                self.put(cx + u64::from(l.cx_type), &[kind]);
                self.put_u64(cx + u64::from(l.cx_blk_sub_cv), cv);
                self.put_u64(cx + u64::from(l.cx_blk_oldcop), oldcop);
            }
            self.put_u64(si + u64::from(l.si_cxstack), cxstack);
            self.put_u64(si + u64::from(l.si_prev), prev);
            self.put_u32(si + u64::from(l.si_cxix), (cxs.len() as i32 - 1) as u32);
            si
        }
    }

    fn frame(name: &str, line: u32) -> PerlFrame {
        PerlFrame { name: name.into(), file: "t.pl".into(), line }
    }

    /// main -> (string eval) -> P::outer -> (own stack) Q::inner, in the
    /// layout of `version`, threaded or not.
    fn walks_in(version: u8, threaded: bool) {
        let l = PerlLayout::for_version(PerlVersion::five(version), threaded).unwrap();
        let mut m = Fake::default();
        let outer = m.cv(&l, "P", "outer", false);
        let inner = m.cv(&l, "Q", "inner", true);
        let main_cop = m.cop(&l, "t.pl", 10);
        let eval_cop = m.cop(&l, "t.pl", 20);
        let outer_cop = m.cop(&l, "t.pl", 30);
        let inner_cop = m.cop(&l, "t.pl", 40);
        let block = consts::CXT_EVAL | consts::CXP_EVALBLOCK;
        let main_stack = m.stack(
            &l,
            &[(2, 0, 0), (consts::CXT_EVAL, 0, main_cop), (consts::CXT_SUB | 0x20, outer, eval_cop), (block, 0, 1)],
            0,
        );
        let sort_stack = m.stack(&l, &[(0, 0, 0), (consts::CXT_SUB, inner, outer_cop)], main_stack);
        let state = PerlThreadState { curcop: inner_cop, curstackinfo: sort_stack };
        let mut s = PerlSymbolizer::new(l);
        let want = vec![frame("Q::inner", 40), frame("P::outer", 30), frame("eval", 20), frame("main", 10)];
        assert_eq!(s.walk(&m, state).unwrap(), want);
        assert_eq!(s.walk(&m, state).unwrap(), want, "from the caches");
    }

    #[test]
    fn walks_every_layout_threaded_or_not() {
        for v in [28, 30, 32, 34, 36, 38, 40] {
            walks_in(v, true);
            walks_in(v, false);
        }
    }

    #[test]
    fn a_recorded_line_counts_from_the_subs_first_op() {
        let l = PerlLayout::for_version(PerlVersion::five(36), true).unwrap();
        let mut m = Fake::default();
        let cv = m.cv(&l, "Far", "spin", true);
        let mut s = PerlSymbolizer::new(l.clone());
        // No first op (CvSTART 0): the line is unknown.
        assert_eq!(s.sub_at(&m, cv, Some(3)).unwrap(), ("Far::spin".into(), String::new(), 0));
        let cv = m.cv(&l, "Far", "run", true);
        let first = m.cop(&l, "t.pl", 5020);
        let body = read_ptr(&m, cv + u64::from(l.sv_any), "body").unwrap();
        m.put_u64(body + u64::from(l.xcv_start), first);
        assert_eq!(s.sub_at(&m, cv, Some(3)).unwrap().2, 5023);
        assert_eq!(s.sub_at(&m, cv, Some(0)).unwrap().2, 5020);
        assert_eq!(s.sub_at(&m, cv, None).unwrap().2, 0);
    }

    #[test]
    fn bad_memory_is_an_error_not_a_guess() {
        let l = PerlLayout::for_version(PerlVersion::five(36), true).unwrap();
        let mut m = Fake::default();
        let cop = m.cop(&l, "t.pl", 1);
        // A context index past the mapped contexts.
        let si = m.stack(&l, &[(consts::CXT_SUB, 0, cop)], 0);
        m.put_u32(si + u64::from(l.si_cxix), 5);
        let state = PerlThreadState { curcop: cop, curstackinfo: si };
        let err = PerlSymbolizer::new(l.clone()).walk(&m, state).unwrap_err();
        assert!(matches!(err, WalkError::Unreadable { what: "PERL_CONTEXT", .. }), "{err}");
        // Absurdly many contexts are refused before reading any.
        m.put_u32(si + u64::from(l.si_cxix), i32::MAX as u32);
        assert!(matches!(PerlSymbolizer::new(l.clone()).walk(&m, state), Err(WalkError::Invalid(_))));
        // A stack that is its own predecessor ends at MAX_STACKS.
        let looped = m.stack(&l, &[], 0);
        m.put_u64(looped + u64::from(l.si_prev), looped);
        let state = PerlThreadState { curcop: cop, curstackinfo: looped };
        let err = PerlSymbolizer::new(l.clone()).walk(&m, state).unwrap_err();
        assert_eq!(err, WalkError::Invalid(format!("more than {MAX_STACKS} context stacks")));
        // A sub whose CV is something else, and a name of absurd length.
        let not_cv = m.gv(&l, "x", 0);
        let si = m.stack(&l, &[(consts::CXT_SUB, not_cv, cop)], 0);
        let state = PerlThreadState { curcop: cop, curstackinfo: si };
        assert!(matches!(PerlSymbolizer::new(l.clone()).walk(&m, state), Err(WalkError::Invalid(_))));
        let cv = m.cv(&l, "P", "long", true);
        let mut s = PerlSymbolizer::new(l.clone());
        let body = read_ptr(&m, cv, "sv_any").unwrap();
        let hek = read_ptr(&m, body + u64::from(l.xcv_gv_u), "hek").unwrap();
        m.put_u32(hek + u64::from(l.hek_len), (MAX_NAME + 1) as u32);
        assert!(matches!(s.sub_name(&m, cv), Err(WalkError::Invalid(_))));
    }

    #[test]
    fn caches_are_bounded() {
        let l = PerlLayout::for_version(PerlVersion::five(36), true).unwrap();
        let mut m = Fake::default();
        let cop = m.cop(&l, "t.pl", 7);
        let mut s = PerlSymbolizer::new(l);
        for _ in 0..=MAX_CACHED {
            s.positions.insert(m.alloc(0), (String::new(), 0));
        }
        assert_eq!(s.position(&m, cop).unwrap(), ("t.pl".to_string(), 7));
        assert_eq!((s.evictions, s.positions.len()), (1, 1));
    }

    /// Subs of 1 KiB names defined in files of 4 KiB names: far fewer
    /// than MAX_CACHED entries hold MAX_CACHED_BYTES.
    #[test]
    fn caches_are_bounded_in_bytes() {
        let l = PerlLayout::for_version(PerlVersion::five(36), true).unwrap();
        let mut m = Fake::default();
        let long_file = m.alloc(4096);
        m.put(long_file, &[b'f'; 4000]);
        let subs: Vec<u64> = (0..1200)
            .map(|i| {
                let cv = m.cv(&l, "P", &format!("{i:0>1000}"), true);
                let body = read_ptr(&m, cv, "sv_any").unwrap();
                m.put_u64(body + u64::from(l.xcv_file), long_file);
                cv
            })
            .collect();
        let mut s = PerlSymbolizer::new(l);
        for &cv in &subs {
            let (name, file) = s.sub(&m, cv).unwrap();
            assert_eq!((name.len(), file.len()), (1003, 4000));
            assert!(s.cached_bytes <= MAX_CACHED_BYTES);
        }
        // 1,200 subs of 5,003 bytes: the byte bound cleared the caches
        // once, long before MAX_CACHED entries.
        assert_eq!(s.evictions, 1);
        assert!(s.subs.len() < subs.len() && s.subs.len() > 300, "{}", s.subs.len());
        assert_eq!(s.cached_bytes, s.subs.len() * 5003);
    }
}
