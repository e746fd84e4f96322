//! The data model shared by the stages of the profiler pipeline.
//!
//! The BPF reader produces [`Trace`]s (one per sample, leaf frame first),
//! the symbolizer fills in [`Frame::lines`], and the reporter aggregates
//! them into profiles. Identities that cross crates are newtypes
//! ([`Pid`], [`Tid`], [`FileId`]) so they cannot be mixed up.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod frame_word;

pub use frame_word::{
    CodeAddress, UserFrame, FRAME_COMPACT, FRAME_COMPACT_PAYLOAD_BITS, FRAME_COMPACT_SLOT_MASK, FRAME_COMPACT_SLOT_MIN,
    FRAME_COMPACT_SLOT_SHIFT, FRAME_EXACT_PC, FRAME_EXTENDED_PAYLOAD_BITS, FRAME_EXTENDED_SLOT_MASK,
    FRAME_EXTENDED_SLOT_MIN, FRAME_EXTENDED_SLOT_SHIFT, FRAME_INTERPRETED, FRAME_PLAIN_PAYLOAD_BITS, FRAME_PLAIN_SLOT,
    FRAME_WIDE, FRAME_WIDE_PAYLOAD_BITS, FRAME_WIDE_SLOT,
};

use std::fmt;
use std::sync::Arc;

/// A process id (the kernel's tgid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(pub u32);

/// A thread id (the kernel's pid of the task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid(pub u32);

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The identity of an executable file's content: the first 16 bytes of
/// SHA-256 over `file[..4096] ‖ file[len-4096..] ‖ len as big-endian u64`
/// (the reference agent's "htlhash", so backends can match our files).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub [u8; 16]);

impl FileId {
    /// The high 64 bits, the short id the BPF maps use.
    pub fn high64(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().expect("8 bytes"))
    }

    /// Lower-case hex of all 16 bytes.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileId({})", self.to_hex())
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// What the profiler's per-file state (unwind tables, symbols, interpreter
/// builds) is keyed by: a SHA-256 digest of a file's whole content and
/// length (files up to 16 MiB), or of its FileId and the identity of the
/// inode version parsed (larger files; `profiler_elf::source::
/// table_key_of_opened`). Unlike [`FileId`], which hashes only the head
/// and tail (so a crafted file can share it with a real library), two
/// files with the same key have the same bytes, or are the same inode
/// version. SHA-256 because the input is
/// adversarial: a non-cryptographic hash (xxh3, ...) can be made to
/// collide on purpose.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableKey(pub [u8; 32]);

impl TableKey {
    /// The 64-bit id the BPF maps know the file by: the digest's first 8
    /// bytes, big-endian.
    pub fn bpf_id(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().expect("8 bytes"))
    }

    /// Lower-case hex of the digest.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for TableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableKey({})", &self.to_hex()[..16])
    }
}

/// What produced a frame; its OTLP spelling is [`FrameKind::as_str`].
///
/// The profiler's own unwinders are variants; an interpreted frame is
/// [`FrameKind::Interpreted`] with its runtime's frame type, which the
/// runtime names in its own folder (`Runtime::frame_kind` in
/// profiler-interpreters): a new runtime adds no variant here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FrameKind {
    /// Kernel code, symbolized from kallsyms.
    Kernel,
    /// Native user code (C, C++, Rust, ...).
    Native,
    /// Go code, unwound and named from `.gopclntab`.
    Go,
    /// A runtime's interpreted or JIT-compiled frame, by the value of its
    /// `profile.frame.type` attribute, as the reference agent spells it
    /// (`cpython`, `jvm`, `v8js`): lower-case ASCII.
    Interpreted(&'static str),
}

// The seven runtimes' frame types, by the names their folders and the
// tests use (the same values as `FrameKind::Interpreted(<type>)`).
#[allow(non_upper_case_globals)]
impl FrameKind {
    /// CPython interpreted code.
    pub const CPython: FrameKind = FrameKind::Interpreted("cpython");
    /// Java and other HotSpot JVM code.
    pub const Jvm: FrameKind = FrameKind::Interpreted("jvm");
    /// V8 JavaScript.
    pub const V8Js: FrameKind = FrameKind::Interpreted("v8js");
    /// PHP.
    pub const Php: FrameKind = FrameKind::Interpreted("php");
    /// Ruby.
    pub const Ruby: FrameKind = FrameKind::Interpreted("ruby");
    /// Perl.
    pub const Perl: FrameKind = FrameKind::Interpreted("perl");
    /// Erlang BEAM.
    pub const Beam: FrameKind = FrameKind::Interpreted("beam");
}

impl FrameKind {
    /// The value of the `profile.frame.type` attribute, as the reference
    /// agent writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::Kernel => "kernel",
            FrameKind::Native => "native",
            FrameKind::Go => "go",
            FrameKind::Interpreted(frame_type) => frame_type,
        }
    }

    /// Whether an interpreter's unwinder produced the frame.
    pub fn is_interpreted(self) -> bool {
        matches!(self, FrameKind::Interpreted(_))
    }
}

/// A file mapped into a process (one line of `/proc/PID/maps`, or the
/// kernel image).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First virtual address of the mapping in the process.
    pub start: u64,
    /// One past the last virtual address.
    pub end: u64,
    /// Offset in the file of the byte mapped at `start`.
    pub file_offset: u64,
    /// Path of the file as the process sees it (e.g. `/usr/lib/x86_64-linux-gnu/libc.so.6`).
    pub path: Arc<str>,
    /// Content identity of the file, when it could be read.
    pub file_id: Option<FileId>,
    /// GNU build id (`.note.gnu.build-id`), lower-case hex.
    pub gnu_build_id: Option<Arc<str>>,
    /// Go build id (`.note.go.buildid`).
    pub go_build_id: Option<Arc<str>>,
}

impl Mapping {
    /// The file name part of [`Mapping::path`].
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// One source position of a frame: a function and where in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLine {
    /// Function name, demangled.
    pub function: Arc<str>,
    /// Source file, when known.
    pub file: Option<Arc<str>>,
    /// Line number, 0 when unknown.
    pub line: u32,
    /// The runtime could only guess this position: a JIT-compiled pc
    /// without debug information of its own, named by the nearest one
    /// recorded (an inlined method may stand for its caller, or the
    /// reverse). Written as the location's `profile.frame.approximate`
    /// attribute in OTLP.
    pub approximate: bool,
}

/// One frame of a stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Which unwinder produced it.
    pub kind: FrameKind,
    /// For native frames the address in the ELF file's virtual address
    /// space (what a backend symbolizes with the build id); for kernel
    /// frames the kernel address; for interpreted frames a
    /// runtime-specific id.
    pub address: u64,
    /// The mapped file, when known.
    pub mapping: Option<Arc<Mapping>>,
    /// Symbolization: innermost (inlined) first, the containing function
    /// last. Empty when the frame is not symbolized.
    pub lines: Vec<SourceLine>,
}

/// The name of the frame that ends a stack cut at the unwinders' frame
/// limit ([`Frame::truncated`]).
pub const TRUNCATED_FRAME_NAME: &str = "[truncated]";

impl Frame {
    /// The outermost frame of a stack the unwinder cut at its frame limit,
    /// standing for the frames not collected: such a stack never looks
    /// whole, nor ends at some inner function as if it were the root.
    pub fn truncated() -> Frame {
        Frame {
            kind: FrameKind::Native,
            address: 0,
            mapping: None,
            lines: vec![SourceLine {
                function: Arc::from(TRUNCATED_FRAME_NAME),
                file: None,
                line: 0,
                approximate: false,
            }],
        }
    }

    /// Whether this is [`Frame::truncated`].
    pub fn is_truncated(&self) -> bool {
        self.mapping.is_none() && self.address == 0 && self.function_name() == Some(TRUNCATED_FRAME_NAME)
    }

    /// The name of the frame's outermost function, if symbolized.
    pub fn function_name(&self) -> Option<&str> {
        self.lines.last().map(|l| &*l.function)
    }
}

/// What is known about a process, shared by all of its traces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcessInfo {
    /// The process id.
    pub pid: Pid,
    /// Path of the executable (`/proc/PID/exe`), empty if unknown.
    pub executable_path: Arc<str>,
    /// Name of the executable: the file name of the path, else the comm.
    pub executable_name: Arc<str>,
    /// Container id from the process's cgroup, when it runs in one.
    pub container_id: Option<Arc<str>>,
    /// The service the process belongs to (`service.name`): its
    /// `OTEL_SERVICE_NAME` or the `service.name` of its
    /// `OTEL_RESOURCE_ATTRIBUTES`, else the executable's name.
    pub service_name: Arc<str>,
    /// The environment variables the agent was told to report
    /// (`include_env_vars`) that the process has, as (name, value), in
    /// the order they were named.
    pub env_vars: Vec<(Arc<str>, Arc<str>)>,
}

impl ProcessInfo {
    /// A process known by its name alone (gone before it could be read).
    pub fn named(pid: Pid, name: &str) -> ProcessInfo {
        let name: Arc<str> = Arc::from(name);
        ProcessInfo {
            pid,
            executable_path: Arc::from(""),
            executable_name: name.clone(),
            container_id: None,
            service_name: name,
            env_vars: Vec::new(),
        }
    }
}

/// One sampled stack of one thread.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Trace {
    /// The process the thread belongs to.
    pub process: Arc<ProcessInfo>,
    /// The sampled thread.
    pub tid: Tid,
    /// The thread's name (`comm`).
    pub thread_name: Arc<str>,
    /// The CPU the sample was taken on.
    pub cpu: u32,
    /// Wall-clock time of the sample, nanoseconds since the Unix epoch.
    pub timestamp_unix_ns: u64,
    /// Frames, leaf (innermost) first.
    pub frames: Vec<Frame>,
    /// `None` for an on-CPU sample (a tick of the sampling clock); for an
    /// off-CPU sample, nanoseconds the thread stayed off the CPU after it
    /// was switched out with this stack (at `timestamp_unix_ns`).
    pub off_cpu_ns: Option<u64>,
    /// Labels of the sample (key, value): the pprof labels of the
    /// goroutine a Go program's thread ran; empty for none.
    pub labels: Vec<(Arc<str>, Arc<str>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_id_high64_is_big_endian_prefix() {
        let mut b = [0u8; 16];
        b[0] = 0x12;
        b[7] = 0x34;
        let id = FileId(b);
        assert_eq!(id.high64(), 0x1200_0000_0000_0034);
        assert_eq!(id.to_hex(), "12000000000000340000000000000000");
    }

    /// The `profile.frame.type` values are the reference agent's, for
    /// the profiler's own kinds and for every runtime's.
    #[test]
    fn frame_kinds_use_reference_spelling() {
        let kinds = [
            (FrameKind::Kernel, "kernel"),
            (FrameKind::Native, "native"),
            (FrameKind::Go, "go"),
            (FrameKind::CPython, "cpython"),
            (FrameKind::Jvm, "jvm"),
            (FrameKind::V8Js, "v8js"),
            (FrameKind::Php, "php"),
            (FrameKind::Ruby, "ruby"),
            (FrameKind::Perl, "perl"),
            (FrameKind::Beam, "beam"),
            (FrameKind::Interpreted("dotnet"), "dotnet"),
        ];
        for (kind, name) in kinds {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.is_interpreted(), !matches!(name, "kernel" | "native" | "go"), "{name}");
        }
        assert_eq!(FrameKind::Perl, FrameKind::Interpreted("perl"));
        assert_ne!(FrameKind::Perl, FrameKind::Php);
    }
}
