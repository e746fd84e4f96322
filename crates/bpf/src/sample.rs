//! One sample as the ring buffer delivers it (`struct sample_event` in
//! `ebpf/types.h`: a fixed header, then only the used frame words, then
//! for a process not loaded yet a `struct stack_copy` and its bytes).

use crate::skel::types::{sample_event, sample_record};
use crate::types::UnwindStop;
use std::mem::{offset_of, size_of};

/// Size of the header before `frames[]` (SAMPLE_EVENT_HEADER_SIZE in C).
const HEADER_SIZE: usize = 64;
const MAX_FRAMES: usize = 128 + 256;
const _: () = assert!(offset_of!(sample_event, frames) == HEADER_SIZE);
const _: () = assert!(size_of::<sample_event>() == HEADER_SIZE + MAX_FRAMES * 8);
const _: () = assert!(offset_of!(sample_event, ktime_ns) == 8);
const _: () = assert!(offset_of!(sample_event, cpu) == 16);
const _: () = assert!(offset_of!(sample_event, kernel_frames) == 20);
const _: () = assert!(offset_of!(sample_event, user_frames) == 22);
const _: () = assert!(offset_of!(sample_event, comm) == 24);
const _: () = assert!(offset_of!(sample_event, process_comm) == 40);
const _: () = assert!(offset_of!(sample_event, unwind_stop) == 56);
const _: () = assert!(offset_of!(sample_event, flags) == 57);

/// `SAMPLE_FLAG_STACK_COPY`: a `struct stack_copy` follows the frames.
const SAMPLE_FLAG_STACK_COPY: u8 = 1;
/// `STACK_COPY_MAX`: most bytes of stack in one copy.
pub const STACK_COPY_MAX: usize = 16384;

/// `struct stack_copy` (the header before the copied bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StackCopyHeader {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    pub exact: u8,
    pub stack_switches: u8,
    pub reserved: [u8; 2],
    pub size: u32,
}
const STACK_COPY_HEADER_SIZE: usize = 32;
const _: () = assert!(size_of::<StackCopyHeader>() == STACK_COPY_HEADER_SIZE);
const _: () = assert!(offset_of!(StackCopyHeader, fp) == 16);
const _: () = assert!(offset_of!(StackCopyHeader, exact) == 24);
const _: () = assert!(offset_of!(StackCopyHeader, stack_switches) == 25);
const _: () = assert!(offset_of!(StackCopyHeader, size) == 28);
// The scratch record has room for a header and a full window after the
// last frame word.
const _: () = assert!(
    size_of::<sample_record>() - offset_of!(sample_record, stack_copy_room) == STACK_COPY_HEADER_SIZE + STACK_COPY_MAX
);

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
}

impl RawSample {
    /// Decodes one ring buffer record; `None` if it is too short for what
    /// its header announces, or announces more frames than a sample holds.
    pub fn parse(data: &[u8]) -> Option<RawSample> {
        let header: &[u8; HEADER_SIZE] = data.get(..HEADER_SIZE)?.try_into().ok()?;
        let u32_at = |o: usize| u32::from_ne_bytes([header[o], header[o + 1], header[o + 2], header[o + 3]]);
        let u16_at = |o: usize| u16::from_ne_bytes([header[o], header[o + 1]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&header[o..o + 8]);
            u64::from_ne_bytes(b)
        };
        let kernel = usize::from(u16_at(20));
        let user = usize::from(u16_at(22));
        if kernel + user > MAX_FRAMES {
            return None;
        }
        let frames_end = HEADER_SIZE + (kernel + user) * 8;
        let words = data.get(HEADER_SIZE..frames_end)?;
        let stack = if header[57] & SAMPLE_FLAG_STACK_COPY != 0 {
            Some(parse_stack_copy(data.get(frames_end..)?)?)
        } else {
            None
        };
        let mut frames = words.chunks_exact(8).map(|c| c.try_into().map_or(0, u64::from_ne_bytes));
        Some(RawSample {
            stack,
            pid: u32_at(0),
            tid: u32_at(4),
            ktime_ns: u64_at(8),
            cpu: u32_at(16),
            comm: c_string(&header[24..40]),
            process_comm: c_string(&header[40..56]),
            kernel_frames: frames.by_ref().take(kernel).collect(),
            user_frames: frames.collect(),
            unwind_stop: UnwindStop::from_raw(header[56]),
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
    let header = data.get(..STACK_COPY_HEADER_SIZE)?;
    let u64_at = |o: usize| u64::from_ne_bytes(header[o..o + 8].try_into().unwrap());
    let size = u32::from_ne_bytes(header[28..32].try_into().unwrap()) as usize;
    if size > STACK_COPY_MAX {
        return None;
    }
    let bytes = data.get(STACK_COPY_HEADER_SIZE..STACK_COPY_HEADER_SIZE + size)?.to_vec();
    Some(StackCopy {
        pc: u64_at(0),
        sp: u64_at(8),
        fp: u64_at(16),
        exact: header[24] != 0,
        stack_switches: header[25],
        bytes,
    })
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kernel: &[u64], user: &[u64]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&42u32.to_ne_bytes());
        d.extend_from_slice(&43u32.to_ne_bytes());
        d.extend_from_slice(&1234u64.to_ne_bytes());
        d.extend_from_slice(&1u32.to_ne_bytes());
        d.extend_from_slice(&(kernel.len() as u16).to_ne_bytes());
        d.extend_from_slice(&(user.len() as u16).to_ne_bytes());
        let mut comm = [0u8; 16];
        comm[..6].copy_from_slice(b"worker");
        d.extend_from_slice(&comm);
        let mut pcomm = [0u8; 16];
        pcomm.copy_from_slice(b"sixteen-chars-xx");
        d.extend_from_slice(&pcomm);
        d.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
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
    }

    fn with_copy(mut record: Vec<u8>, size: u32, bytes: &[u8]) -> Vec<u8> {
        record[57] = SAMPLE_FLAG_STACK_COPY;
        let header = StackCopyHeader {
            pc: 0x4011,
            sp: 0x7ffe_0000,
            fp: 5,
            exact: 1,
            stack_switches: 2,
            size,
            ..Default::default()
        };
        record.extend_from_slice(&header.pc.to_ne_bytes());
        record.extend_from_slice(&header.sp.to_ne_bytes());
        record.extend_from_slice(&header.fp.to_ne_bytes());
        record.extend_from_slice(&[header.exact, header.stack_switches, 0, 0]);
        record.extend_from_slice(&header.size.to_ne_bytes());
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

    #[test]
    fn rejects_more_frames_than_a_sample_holds() {
        let mut r = record(&[1; 200], &[2; 184]);
        assert!(RawSample::parse(&r).is_some());
        r[22] = 185;
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
