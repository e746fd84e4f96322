//! One sample as the ring buffer delivers it (`struct sample_event` in
//! `ebpf/types.h`: a fixed header, then only the used frame words, then
//! for a process not loaded yet a `struct stack_copy` and its bytes).

use crate::contract::{c, read};
use crate::skel::types::sample_record;
use crate::types::UnwindStop;
use std::mem::offset_of;

/// Size of the header before `frames[]`.
const HEADER_SIZE: usize = offset_of!(c::sample_event, frames);
const _: () = assert!(HEADER_SIZE == c::SAMPLE_EVENT_HEADER_SIZE as usize);
const MAX_FRAMES: usize = (c::MAX_KERNEL_FRAMES + c::MAX_USER_FRAMES) as usize;
/// `STACK_COPY_MAX`: most bytes of stack in one copy.
pub const STACK_COPY_MAX: usize = c::STACK_COPY_MAX as usize;
const STACK_COPY_HEADER_SIZE: usize = size_of::<c::stack_copy>();
// The scratch record's area from frames[] on (ebpf/maps.h) holds the most
// frame words and the Go labels, or a full window after a kernel stack and
// 256 user frames.
const AREA: usize = size_of::<sample_record>() - offset_of!(sample_record, event) - HEADER_SIZE;
const LABELS_SIZE: usize = size_of::<c::go_labels>();
const _: () = assert!(size_of::<sample_record>() == 32768);
const _: () = assert!(AREA >= MAX_FRAMES * 8 + STACK_COPY_HEADER_SIZE + LABELS_SIZE);
const _: () =
    assert!(AREA >= (c::MAX_KERNEL_FRAMES as usize + 256) * 8 + STACK_COPY_HEADER_SIZE + STACK_COPY_MAX + LABELS_SIZE);

/// The user stack of a sample whose process (or pc) was not loaded yet,
/// copied where the in-kernel unwinder stopped, for
/// [`crate::late_unwind`] to go on from.
#[derive(Clone, PartialEq, Eq)]
pub struct StackCopy {
    /// The pc the unwinder stopped at (the sample's last user frame).
    pub pc: u64,
    /// The stack pointer there: `bytes[0]` is the byte at `sp`.
    pub sp: u64,
    /// rbp there.
    pub fp: u64,
    /// `pc` is exact (the sampled instruction, or one a signal
    /// interrupted), not a return address.
    pub exact: bool,
    /// Stack switches followed so far.
    pub stack_switches: u8,
    /// The stack from `sp` up.
    pub bytes: Vec<u8>,
}

/// A sample decoded from the ring buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSample {
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// `CLOCK_MONOTONIC` time of the sample, ns.
    pub ktime_ns: u64,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// The thread's name.
    pub comm: String,
    /// The name of the thread group leader (the process).
    pub process_comm: String,
    /// Kernel return addresses, leaf first.
    pub kernel_frames: Vec<u64>,
    /// User pcs, leaf first: return addresses, or exact pcs (the sampled
    /// one, one a signal interrupted) with [`crate::FRAME_EXACT_PC`] set.
    pub user_frames: Vec<u64>,
    /// Why the user stack ends where it does.
    pub unwind_stop: UnwindStop,
    /// For [`UnwindStop::UnknownPid`] and [`UnwindStop::UnknownPc`], the
    /// user stack from where the unwinder stopped (when the programs'
    /// budget allowed a copy).
    pub stack: Option<StackCopy>,
    /// An off-CPU sample (taken when the thread left the CPU): how long
    /// it was off, ns, once joined with its switch-in (0 until then);
    /// `None` for a sample of the running thread.
    pub off_cpu_ns: Option<u64>,
    /// The pprof labels of the goroutine the thread ran (a Go process,
    /// `ebpf/go_labels.bpf.h`), as (key, value); empty for none.
    pub go_labels: Vec<(String, String)>,
}

impl RawSample {
    /// Decodes one ring buffer record; `None` if it is too short for what
    /// its header announces, or announces more frames than a sample holds.
    pub fn parse(data: &[u8]) -> Option<RawSample> {
        // Only the used frame words are sent: read the header alone.
        let mut header = c::sample_event::default();
        let header_bytes = data.get(..HEADER_SIZE)?;
        // SAFETY: sample_event is plain integers (Pod) and HEADER_SIZE is
        // the offset of its last field, so the copy stays inside it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                header_bytes.as_ptr(),
                (&mut header as *mut c::sample_event).cast(),
                HEADER_SIZE,
            )
        };
        let kernel = usize::from(header.kernel_frames);
        let user = usize::from(header.user_frames);
        if kernel + user > MAX_FRAMES {
            return None;
        }
        let frames_end = HEADER_SIZE + (kernel + user) * 8;
        let words = data.get(HEADER_SIZE..frames_end)?;
        let mut end = frames_end;
        let stack = if u32::from(header.flags) & c::SAMPLE_FLAG_STACK_COPY != 0 {
            let copy = parse_stack_copy(data.get(end..)?)?;
            end += STACK_COPY_HEADER_SIZE + copy.bytes.len();
            Some(copy)
        } else {
            None
        };
        let go_labels = if u32::from(header.flags) & c::SAMPLE_FLAG_GO_LABELS != 0 {
            crate::go_labels::parse_labels(data.get(end..)?)?.0
        } else {
            Vec::new()
        };
        let mut frames = words.chunks_exact(8).map(|c| c.try_into().map_or(0, u64::from_ne_bytes));
        Some(RawSample {
            stack,
            pid: header.pid,
            tid: header.tid,
            ktime_ns: header.ktime_ns,
            cpu: header.cpu,
            comm: c_string(&header.comm),
            process_comm: c_string(&header.process_comm),
            kernel_frames: frames.by_ref().take(kernel).collect(),
            user_frames: frames.collect(),
            unwind_stop: UnwindStop::from_raw(header.unwind_stop),
            off_cpu_ns: (u32::from(header.flags) & c::SAMPLE_FLAG_OFF_CPU != 0).then_some(0),
            go_labels,
        })
    }
}

/// A `struct stack_copy` and its bytes; `None` when the record is
/// shorter than the header says or the size is beyond the maximum.
impl std::fmt::Debug for StackCopy {
    // The bytes are noise in logs: their count says enough.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackCopy")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("sp", &format_args!("{:#x}", self.sp))
            .field("fp", &format_args!("{:#x}", self.fp))
            .field("exact", &self.exact)
            .field("stack_switches", &self.stack_switches)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

fn parse_stack_copy(data: &[u8]) -> Option<StackCopy> {
    let header: c::stack_copy = read(data)?;
    let size = header.size as usize;
    if size > STACK_COPY_MAX {
        return None;
    }
    let bytes = data.get(STACK_COPY_HEADER_SIZE..STACK_COPY_HEADER_SIZE + size)?.to_vec();
    Some(StackCopy {
        pc: header.pc,
        sp: header.sp,
        fp: header.fp,
        exact: header.exact != 0,
        stack_switches: header.stack_switches,
        bytes,
    })
}

/// A NUL-terminated C string (`char[]`, whose bindgen type is `i8`).
fn c_string(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&ch| ch != 0).map(|&ch| ch as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::bytes_of;

    fn chars(text: &[u8]) -> [std::ffi::c_char; c::COMM_LEN as usize] {
        let mut out = [0; c::COMM_LEN as usize];
        for (o, &b) in out.iter_mut().zip(text) {
            *o = b as std::ffi::c_char;
        }
        out
    }

    /// A record as the program sends it: the header, the used frames.
    fn record(kernel: &[u64], user: &[u64]) -> Vec<u8> {
        let event = c::sample_event {
            pid: 42,
            tid: 43,
            ktime_ns: 1234,
            cpu: 1,
            kernel_frames: kernel.len() as u16,
            user_frames: user.len() as u16,
            comm: chars(b"worker"),
            process_comm: chars(b"sixteen-chars-xx"),
            unwind_stop: UnwindStop::UnknownPc.raw(),
            ..Default::default()
        };
        let mut d = bytes_of(&event)[..HEADER_SIZE].to_vec();
        for f in kernel.iter().chain(user) {
            d.extend_from_slice(&f.to_ne_bytes());
        }
        d
    }

    #[test]
    fn parses_header_and_frames() {
        let s = RawSample::parse(&record(&[0xffff1, 0xffff2], &[0x401000])).unwrap();
        assert_eq!((s.pid, s.tid, s.ktime_ns, s.cpu), (42, 43, 1234, 1));
        assert_eq!(s.comm, "worker");
        assert_eq!(s.process_comm, "sixteen-chars-xx");
        assert_eq!(s.kernel_frames, vec![0xffff1, 0xffff2]);
        assert_eq!(s.user_frames, vec![0x401000]);
        assert_eq!(s.unwind_stop, UnwindStop::UnknownPc);
        assert_eq!(s.off_cpu_ns, None);
        let mut off = record(&[0xffff1], &[0x401000]);
        off[offset_of!(c::sample_event, flags)] = c::SAMPLE_FLAG_OFF_CPU as u8;
        assert_eq!(RawSample::parse(&off).unwrap().off_cpu_ns, Some(0), "an off-CPU stack waiting for its end");
    }

    fn with_copy(mut record: Vec<u8>, size: u32, bytes: &[u8]) -> Vec<u8> {
        record[offset_of!(c::sample_event, flags)] = c::SAMPLE_FLAG_STACK_COPY as u8;
        let header = c::stack_copy {
            pc: 0x4011,
            sp: 0x7ffe_0000,
            fp: 5,
            exact: 1,
            stack_switches: 2,
            size,
            ..Default::default()
        };
        record.extend_from_slice(bytes_of(&header));
        record.extend_from_slice(bytes);
        record
    }

    #[test]
    fn parses_a_stack_copy_after_the_frames() {
        let data = with_copy(record(&[0xffff1], &[0x4011]), 4, &[1, 2, 3, 4]);
        let s = RawSample::parse(&data).unwrap();
        assert_eq!(s.user_frames, vec![0x4011]);
        assert_eq!(
            s.stack,
            Some(StackCopy {
                pc: 0x4011,
                sp: 0x7ffe_0000,
                fp: 5,
                exact: true,
                stack_switches: 2,
                bytes: vec![1, 2, 3, 4]
            })
        );
        assert_eq!(RawSample::parse(&record(&[], &[1])).unwrap().stack, None);
        // Truncated copies and sizes beyond the maximum are malformed.
        for len in 0..data.len() {
            assert_eq!(RawSample::parse(&data[..len]), None, "length {len}");
        }
        let huge = with_copy(record(&[], &[1]), STACK_COPY_MAX as u32 + 8, &vec![0; STACK_COPY_MAX + 8]);
        assert_eq!(RawSample::parse(&huge), None);
    }

    /// `struct go_labels` bytes as the programs append them.
    fn labels(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut out = vec![pairs.len() as u8, 0, 0, 0, 0, 0, 0, 0];
        for (k, v) in pairs {
            let mut label = c::go_label::default();
            for (o, b) in label.key.iter_mut().zip(k.bytes()) {
                *o = b as std::ffi::c_char;
            }
            for (o, b) in label.value.iter_mut().zip(v.bytes()) {
                *o = b as std::ffi::c_char;
            }
            // SAFETY: go_label is two char arrays: plain bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts((&label as *const c::go_label).cast::<u8>(), size_of::<c::go_label>())
            };
            out.extend_from_slice(bytes);
        }
        out
    }

    #[test]
    fn parses_go_labels_after_the_frames_and_the_stack_copy() {
        let flag = offset_of!(c::sample_event, flags);
        let mut data = record(&[0xffff1], &[0x4011, 0x4022]);
        data[flag] = c::SAMPLE_FLAG_GO_LABELS as u8;
        data.extend_from_slice(&labels(&[("request", "r1"), ("k", "")]));
        let s = RawSample::parse(&data).unwrap();
        assert_eq!(s.user_frames, vec![0x4011, 0x4022]);
        assert_eq!(s.go_labels, vec![("request".to_string(), "r1".to_string()), ("k".to_string(), String::new())]);
        for len in 0..data.len() {
            assert_eq!(RawSample::parse(&data[..len]), None, "length {len}");
        }
        // After a stack copy: the copy's size says where they start.
        let mut data = with_copy(record(&[], &[0x4011]), 3, &[9, 9, 9]);
        data[flag] |= c::SAMPLE_FLAG_GO_LABELS as u8;
        data.extend_from_slice(&labels(&[("a", "b")]));
        let s = RawSample::parse(&data).unwrap();
        assert_eq!(s.stack.as_ref().map(|c| c.bytes.clone()), Some(vec![9, 9, 9]));
        assert_eq!(s.go_labels, vec![("a".to_string(), "b".to_string())]);
        // No flag, no labels.
        assert_eq!(RawSample::parse(&record(&[], &[1])).unwrap().go_labels, Vec::<(String, String)>::new());
    }

    #[test]
    fn rejects_more_frames_than_a_sample_holds() {
        // As many as a sample holds, more kernel frames than user ones.
        let kernel = 200;
        let mut r = record(&[1; 200], &vec![2; MAX_FRAMES - kernel]);
        assert!(RawSample::parse(&r).is_some());
        let at = offset_of!(c::sample_event, user_frames);
        r[at..at + 2].copy_from_slice(&((MAX_FRAMES - kernel + 1) as u16).to_le_bytes());
        r.extend_from_slice(&[0; 8]);
        assert_eq!(RawSample::parse(&r), None);
    }

    #[test]
    fn rejects_truncated_records() {
        let full = record(&[1, 2], &[3]);
        for len in 0..full.len() {
            assert_eq!(RawSample::parse(&full[..len]), None, "length {len}");
        }
    }
}
