//! A user-space walk of PHP's call frames (`zend_execute_data`), from
//! `executor_globals.current_execute_data` down `prev_execute_data`,
//! naming each: what the BPF unwinder will record (the `zend_function`
//! and the line of the frame's opline) and how user space will name it.

use super::layout::{consts, PhpLayout};
use crate::failures::RecentFailures;
use crate::memory::{i32_in, u64_in, ProcessMemory};
use std::collections::HashMap;

/// Most frames walked on one thread.
pub const MAX_FRAMES: usize = 4096;
/// Most functions kept by a [`PhpSymbolizer`].
pub const MAX_CACHED: usize = 16384;
/// Most bytes of names and file names one symbolizer keeps (each can be
/// kilobytes: a process's function names are its own to choose).
pub const MAX_CACHED_BYTES: usize = 4 << 20;
/// Longest name or file name read (bytes); longer ones are an error.
pub const MAX_STRING: u64 = 4096;

/// One frame, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PhpFrame {
    /// PHP code: `Class::method`, `function`, or `{main}` (a script's
    /// top level), `{include}` (an included file's body), `{eval}`; its
    /// file, and the line of the frame's current opline (0 if unknown).
    User {
        /// The name.
        name: String,
        /// The file, as PHP opened it.
        file: String,
        /// The line at the frame's opline.
        line: u32,
    },
    /// A function written in C (`usort`, `ArrayObject::count`).
    Internal {
        /// The name.
        name: String,
    },
}

/// What a `zend_function` names, read once and cached.
#[derive(Clone, Debug)]
struct Function {
    kind: u8,
    /// `Class::name` or `name`; `None` for code bodies.
    name: Option<String>,
    file: String,
    lines: (u32, u32),
}

/// The address of the innermost frame of the thread whose
/// `executor_globals` is at `eg` (0 when no PHP code runs).
pub fn current_execute_data(memory: &dyn ProcessMemory, layout: &PhpLayout, eg: u64) -> Result<u64, String> {
    let at = eg.checked_add(u64::from(layout.eg_current_execute_data)).ok_or("bad executor_globals")?;
    read_u64(memory, at).ok_or_else(|| format!("executor_globals at {eg:#x} unreadable"))
}

/// Names `zend_function`s, with a bounded cache.
pub struct PhpSymbolizer {
    layout: PhpLayout,
    functions: HashMap<u64, Function>,
    /// Bytes of the names and file names in `functions`.
    cached_bytes: usize,
    /// Functions that could not be read lately (not read again at every
    /// sample).
    pub failures: RecentFailures,
    /// Entries dropped because the cache was full (it is then cleared).
    pub evictions: u64,
}

impl PhpSymbolizer {
    /// A symbolizer for one process.
    pub fn new(layout: PhpLayout) -> PhpSymbolizer {
        PhpSymbolizer {
            layout,
            functions: HashMap::new(),
            cached_bytes: 0,
            failures: RecentFailures::default(),
            evictions: 0,
        }
    }

    /// The frames from the `zend_execute_data` at `ex` down to the
    /// script's top level. Frames without a function (VM-internal dummy
    /// frames) are left out; an unreadable frame or function ends the
    /// walk with an error naming it.
    pub fn walk(&mut self, memory: &dyn ProcessMemory, mut ex: u64) -> Result<Vec<PhpFrame>, String> {
        let l = self.layout.clone();
        let mut frames = Vec::new();
        let mut buf = vec![0u8; l.execute_data_read() as usize];
        while ex != 0 {
            if frames.len() >= MAX_FRAMES {
                return Err(format!("more than {MAX_FRAMES} frames"));
            }
            if ex & 7 != 0 || !memory.read(ex, &mut buf) {
                return Err(format!("frame {ex:#x} unreadable"));
            }
            let word = |off: u32| u64_in(&buf, off).unwrap_or(0);
            let (opline, func, prev) = (word(l.ex_opline), word(l.ex_func), word(l.ex_prev));
            let call_info = i32_in(&buf, l.ex_this_type_info).unwrap_or(0) as u32;
            if func != 0 {
                frames.push(self.frame(memory, func, opline, call_info)?);
            }
            ex = prev;
        }
        Ok(frames)
    }

    /// The frame running `func` at `opline`.
    pub fn frame(
        &mut self,
        memory: &dyn ProcessMemory,
        func: u64,
        opline: u64,
        call_info: u32,
    ) -> Result<PhpFrame, String> {
        let line = self.opline_line(memory, opline);
        self.frame_at_line(memory, func, line, call_info)
    }

    /// The frame running `func` at `line` (as the BPF unwinder read it
    /// from the frame's opline; `None`: unknown). A line outside the
    /// function's lines is reported as 0 (a stale or foreign opline, or a
    /// function freed and its memory reused since).
    pub fn frame_at_line(
        &mut self,
        memory: &dyn ProcessMemory,
        func: u64,
        line: Option<u32>,
        call_info: u32,
    ) -> Result<PhpFrame, String> {
        self.frame_from(memory, func, call_info, |_| line)
    }

    /// The frame running `func` at the line `offset` lines after the
    /// function's first (as the BPF unwinder records it; `None`:
    /// unknown), checked as in [`PhpSymbolizer::frame_at_line`].
    pub fn frame_at_offset(
        &mut self,
        memory: &dyn ProcessMemory,
        func: u64,
        offset: Option<u32>,
        call_info: u32,
    ) -> Result<PhpFrame, String> {
        self.frame_from(memory, func, call_info, |start| offset.and_then(|o| start.checked_add(o)))
    }

    /// The frame running `func` at the line `line_of` gives from the
    /// function's first line.
    fn frame_from(
        &mut self,
        memory: &dyn ProcessMemory,
        func: u64,
        call_info: u32,
        line_of: impl FnOnce(u32) -> Option<u32>,
    ) -> Result<PhpFrame, String> {
        let f = self.function(memory, func)?;
        if f.kind == consts::INTERNAL_FUNCTION {
            return Ok(PhpFrame::Internal { name: f.name.unwrap_or_else(|| "<internal>".into()) });
        }
        let name = f.name.unwrap_or_else(|| {
            if f.kind == consts::EVAL_CODE {
                "{eval}".into()
            } else if call_info & consts::CALL_TOP != 0 {
                "{main}".into()
            } else {
                "{include}".into()
            }
        });
        let (start, end) = f.lines;
        let line = line_of(start).filter(|l| (start..=end).contains(l)).unwrap_or(0);
        Ok(PhpFrame::User { name, file: f.file, line })
    }

    /// Functions in the cache (it grows by one per function read).
    pub fn cached(&self) -> usize {
        self.functions.len()
    }

    /// The line of `opline` (`None`: no opline, or unreadable).
    fn opline_line(&self, memory: &dyn ProcessMemory, opline: u64) -> Option<u32> {
        let mut raw = [0u8; 4];
        let ok = opline != 0
            && opline.checked_add(u64::from(self.layout.op_lineno)).is_some_and(|a| memory.read(a, &mut raw));
        ok.then(|| u32::from_le_bytes(raw))
    }

    fn function(&mut self, memory: &dyn ProcessMemory, func: u64) -> Result<Function, String> {
        if let Some(f) = self.functions.get(&func) {
            return Ok(f.clone());
        }
        if self.failures.failed_lately(func) {
            return Err(format!("function {func:#x}: failed lately"));
        }
        let read = self.read_function(memory, func);
        self.failures.outcome(func, read.is_ok());
        let f = read?;
        let bytes = f.name.as_ref().map_or(0, String::len) + f.file.len();
        if self.functions.len() >= MAX_CACHED || self.cached_bytes + bytes > MAX_CACHED_BYTES {
            self.evictions += self.functions.len() as u64;
            self.functions.clear();
            self.cached_bytes = 0;
        }
        self.cached_bytes += bytes;
        self.functions.insert(func, f.clone());
        Ok(f)
    }

    fn read_function(&self, memory: &dyn ProcessMemory, func: u64) -> Result<Function, String> {
        let l = &self.layout;
        let mut raw = vec![0u8; l.function_read() as usize];
        let kind = read_u8(memory, func.checked_add(u64::from(l.func_type)).unwrap_or(0))
            .ok_or_else(|| format!("function {func:#x} unreadable"))?;
        // Internal functions are shorter than op arrays: read only their
        // common head.
        let head = if kind == consts::INTERNAL_FUNCTION { l.func_scope as usize + 8 } else { raw.len() };
        if func & 7 != 0 || !memory.read(func, &mut raw[..head]) {
            return Err(format!("function {func:#x} unreadable"));
        }
        if ![consts::INTERNAL_FUNCTION, consts::USER_FUNCTION, consts::EVAL_CODE].contains(&kind) {
            return Err(format!("function {func:#x}: type {kind}"));
        }
        let word = |off: u32| u64_in(&raw, off).unwrap_or(0);
        let name = match word(l.func_name) {
            0 => None,
            s => Some(self.string(memory, s).map_err(|e| format!("function {func:#x} name: {e}"))?),
        };
        let name = match (name, word(l.func_scope)) {
            (Some(n), scope) if scope != 0 => {
                let class = read_u64(memory, scope.wrapping_add(u64::from(l.ce_name)))
                    .filter(|&s| s != 0)
                    .ok_or_else(|| format!("class {scope:#x} unreadable"))?;
                Some(format!("{}::{n}", self.string(memory, class).map_err(|e| format!("class {scope:#x}: {e}"))?))
            }
            (n, _) => n,
        };
        if kind == consts::INTERNAL_FUNCTION {
            return Ok(Function { kind, name, file: String::new(), lines: (0, 0) });
        }
        let file = match word(l.op_array_filename) {
            0 => String::new(),
            s => self.string(memory, s).map_err(|e| format!("function {func:#x} file: {e}"))?,
        };
        let start = i32_in(&raw, l.op_array_line_start).unwrap_or(0) as u32;
        let end = i32_in(&raw, l.op_array_line_start + 4).unwrap_or(0) as u32;
        Ok(Function { kind, name, file, lines: (start, end.max(start)) })
    }

    /// The text of the `zend_string` at `s`, bounded by [`MAX_STRING`].
    fn string(&self, memory: &dyn ProcessMemory, s: u64) -> Result<String, String> {
        let len = read_u64(memory, s.wrapping_add(u64::from(self.layout.string_len)))
            .ok_or_else(|| format!("string {s:#x} unreadable"))?;
        if len > MAX_STRING {
            return Err(format!("string {s:#x} of {len} bytes"));
        }
        let mut bytes = vec![0u8; len as usize];
        let val = s.checked_add(u64::from(self.layout.string_val)).ok_or("string wraps")?;
        if !memory.read(val, &mut bytes) {
            return Err(format!("string {s:#x} unreadable"));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

fn read_u64(memory: &dyn ProcessMemory, address: u64) -> Option<u64> {
    let mut raw = [0u8; 8];
    memory.read(address, &mut raw).then(|| u64::from_le_bytes(raw))
}

fn read_u8(memory: &dyn ProcessMemory, address: u64) -> Option<u8> {
    let mut raw = [0u8; 1];
    (address != 0 && memory.read(address, &mut raw)).then_some(raw[0])
}
