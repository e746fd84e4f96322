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
use crate::memory::ProcessMemory;
use std::collections::HashMap;

/// Frames returned at most; deeper ones are dropped and counted.
pub const MAX_FRAMES: usize = 512;
/// Contexts looked at per walk at most (all stacks together).
pub const MAX_CONTEXTS: usize = 16_384;
/// Stacks (`PERL_SI`) followed at most.
pub const MAX_STACKS: usize = 256;
/// Names and positions cached at most, each; a full cache is cleared.
pub const MAX_CACHED: usize = 4096;
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
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Unreadable { what, address } => write!(f, "cannot read {what} at {address:#x}"),
            WalkError::Invalid(why) => write!(f, "{why}"),
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
    subs: HashMap<u64, String>,
    positions: HashMap<u64, (String, u32)>,
    /// Times a full cache was cleared.
    pub evictions: u64,
    /// Frames dropped past [`MAX_FRAMES`].
    pub truncated: u64,
}

impl PerlSymbolizer {
    /// A symbolizer for processes running `layout`.
    pub fn new(layout: PerlLayout) -> Self {
        PerlSymbolizer { layout, subs: HashMap::new(), positions: HashMap::new(), evictions: 0, truncated: 0 }
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
        if self.positions.len() >= MAX_CACHED {
            self.positions.clear();
            self.evictions += 1;
        }
        self.positions.insert(cop, (file.clone(), line));
        Ok((file, line))
    }

    /// `Package::sub` for the code value `cv`.
    pub fn sub_name(&mut self, memory: &dyn ProcessMemory, cv: u64) -> Result<String, WalkError> {
        if let Some(name) = self.subs.get(&cv) {
            return Ok(name.clone());
        }
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
        if self.subs.len() >= MAX_CACHED {
            self.subs.clear();
            self.evictions += 1;
        }
        self.subs.insert(cv, name.clone());
        Ok(name)
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
