//! Reading another process's memory.

/// Memory of one process, read by address.
pub trait ProcessMemory {
    /// Fills `buf` with the bytes at `address`; false unless all of them
    /// could be read.
    fn read(&self, address: u64, buf: &mut [u8]) -> bool;

    /// Does each of `reads`, setting its `done` as [`ProcessMemory::read`]
    /// would return it. The default reads them one by one; a live
    /// process's memory reads them with one system call (the call, not
    /// the bytes, is most of a small read's cost).
    fn read_many(&self, reads: &mut [RangeRead<'_>]) {
        for r in reads {
            r.done = self.read(r.address, r.buf);
        }
    }
}

/// One range of a [`ProcessMemory::read_many`].
#[derive(Debug)]
pub struct RangeRead<'a> {
    /// Where it is in the process.
    pub address: u64,
    /// Filled with its bytes.
    pub buf: &'a mut [u8],
    /// Whether all of them were read.
    pub done: bool,
}

impl<'a> RangeRead<'a> {
    /// A read of `buf.len()` bytes at `address`, not done yet.
    pub fn new(address: u64, buf: &'a mut [u8]) -> RangeRead<'a> {
        RangeRead { address, buf, done: false }
    }
}

/// Ranges read in one `process_vm_readv` at most (`UIO_MAXIOV`: more
/// fail the call).
const MAX_IOVECS: usize = 1024;

/// The memory of a live process, read with `process_vm_readv` (root, or
/// the same user with ptrace rights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidMemory(pub u32);

impl ProcessMemory for PidMemory {
    fn read(&self, address: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: `local` describes `buf`, writable for its length; the
        // remote range is only read by the kernel, which checks it.
        let n = unsafe { libc::process_vm_readv(self.0 as libc::pid_t, &local, 1, &remote, 1, 0) };
        n == buf.len() as isize
    }

    /// One `process_vm_readv` for up to [`MAX_IOVECS`] ranges. The call
    /// stops at the first range it cannot read, and says how many bytes
    /// it read before: the ranges before are done, that one is not (it is
    /// unreadable from its first page, or across a page within it), and
    /// the call goes on after it. A process gone or not ours: none is done.
    fn read_many(&self, reads: &mut [RangeRead<'_>]) {
        let mut next = 0;
        while next < reads.len() {
            let end = (next + MAX_IOVECS).min(reads.len());
            let batch = &mut reads[next..end];
            let local: Vec<libc::iovec> = batch
                .iter_mut()
                .map(|r| libc::iovec { iov_base: r.buf.as_mut_ptr().cast(), iov_len: r.buf.len() })
                .collect();
            let remote: Vec<libc::iovec> = batch
                .iter()
                .map(|r| libc::iovec { iov_base: r.address as *mut libc::c_void, iov_len: r.buf.len() })
                .collect();
            // SAFETY: each `local` iovec describes a distinct `buf`,
            // writable for its length, alive until the call returns;
            // `remote` is only read by the kernel, which checks it. At
            // most MAX_IOVECS of each.
            let n = unsafe {
                libc::process_vm_readv(
                    self.0 as libc::pid_t,
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            let read = match usize::try_from(n) {
                Ok(n) => n,
                // The first range is unreadable (any other error: the
                // process, not a range).
                Err(_) if std::io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT) => 0,
                Err(_) => {
                    reads[next..].iter_mut().for_each(|r| r.done = false);
                    return;
                }
            };
            let mut end = 0usize;
            let mut stopped = None;
            for (i, r) in batch.iter_mut().enumerate() {
                end = end.saturating_add(r.buf.len());
                r.done = end <= read;
                if !r.done {
                    stopped = Some(i);
                    break;
                }
            }
            next += match stopped {
                Some(i) => i + 1,
                None => batch.len(),
            };
        }
    }
}

/// The little-endian `u64` at `off` in `buf`, if it is all there.
pub(crate) fn u64_in(buf: &[u8], off: u32) -> Option<u64> {
    let off = usize::try_from(off).ok()?;
    Some(u64::from_le_bytes(buf.get(off..off.checked_add(8)?)?.try_into().ok()?))
}

/// The little-endian `i32` at `off` in `buf`, if it is all there.
pub(crate) fn i32_in(buf: &[u8], off: u32) -> Option<i32> {
    let off = usize::try_from(off).ok()?;
    Some(i32::from_le_bytes(buf.get(off..off.checked_add(4)?)?.try_into().ok()?))
}

#[cfg(test)]
pub(crate) mod fake {
    //! A process memory made of a few byte ranges, for the unit tests of
    //! every runtime.
    use super::ProcessMemory;

    /// Regions `(start, bytes)`; a read must fall inside one.
    #[derive(Default)]
    pub(crate) struct FakeMemory {
        pub(crate) regions: Vec<(u64, Vec<u8>)>,
    }

    impl FakeMemory {
        /// `bytes` at `start`.
        pub(crate) fn add(&mut self, start: u64, bytes: Vec<u8>) {
            self.regions.push((start, bytes));
        }

        /// Little-endian `words` at `start`.
        pub(crate) fn words(&mut self, start: u64, words: &[u64]) {
            self.add(start, words.iter().flat_map(|w| w.to_le_bytes()).collect());
        }
    }

    impl ProcessMemory for FakeMemory {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            for (start, bytes) in &self.regions {
                let Some(off) = address.checked_sub(*start) else { continue };
                let Ok(off) = usize::try_from(off) else { continue };
                if let Some(src) = off.checked_add(buf.len()).and_then(|end| bytes.get(off..end)) {
                    buf.copy_from_slice(src);
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory() {
        let value: u64 = 0x1122_3344_5566_7788;
        let mut buf = [0u8; 8];
        assert!(PidMemory(std::process::id()).read(&value as *const u64 as u64, &mut buf));
        assert_eq!(u64::from_ne_bytes(buf), value);
        assert!(!PidMemory(std::process::id()).read(8, &mut buf), "unmapped");
    }

    /// One call reads every range it can: those after an unreadable one
    /// (unmapped, or running into an unmapped page) too, and more ranges
    /// than one call takes.
    #[test]
    fn reads_many_ranges_of_own_memory() {
        let page = 4096;
        // SAFETY: a fresh private anonymous mapping of two pages; the
        // second is unmapped before any range reads it.
        let pages = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            std::ptr::write_bytes(p.cast::<u8>(), 0xab, page);
            assert_eq!(libc::munmap(p.cast::<u8>().add(page).cast(), page), 0);
            p as u64
        };
        let values: Vec<u64> = (0..1500u64).map(|i| i * 0x0101_0101).collect();
        let at = |i: usize| &values[i] as *const u64 as u64;
        let mut bufs = vec![[0u8; 8]; values.len() + 3];
        let (mine, odd) = bufs.split_at_mut(values.len());
        let [unmapped, across, last] = odd else { unreachable!() };
        let mut reads: Vec<RangeRead<'_>> = Vec::new();
        let mut mine = mine.iter_mut().enumerate();
        for (i, buf) in mine.by_ref().take(10) {
            reads.push(RangeRead::new(at(i), buf));
        }
        reads.push(RangeRead::new(8, unmapped));
        reads.push(RangeRead::new(pages + page as u64 - 4, across));
        for (i, buf) in mine {
            reads.push(RangeRead::new(at(i), buf));
        }
        reads.push(RangeRead::new(pages + 8, last));
        PidMemory(std::process::id()).read_many(&mut reads);
        let failed: Vec<usize> = reads.iter().enumerate().filter(|(_, r)| !r.done).map(|(i, _)| i).collect();
        assert_eq!(failed, [10, 11], "all but the unreadable ones");
        drop(reads);
        for (i, buf) in bufs.iter().take(values.len()).enumerate() {
            assert_eq!(u64::from_ne_bytes(*buf), values[i], "{i}");
        }
        assert_eq!(bufs[values.len() + 2], [0xab; 8]);
        // SAFETY: the first page, mapped above.
        unsafe { libc::munmap(pages as *mut libc::c_void, page) };
        // No such process: nothing is done.
        let mut buf = [0u8; 8];
        let mut reads = [RangeRead::new(at(0), &mut buf)];
        reads[0].done = true;
        PidMemory(0x7fff_fff0).read_many(&mut reads);
        assert!(!reads[0].done);
    }

    #[test]
    fn fake_memory_reads_inside_one_region_only() {
        let mut m = fake::FakeMemory::default();
        m.add(0x1000, vec![1, 2, 3, 4]);
        m.words(0x1004, &[0x0807_0605]);
        let mut buf = [0u8; 2];
        assert!(m.read(0x1002, &mut buf));
        assert_eq!(buf, [3, 4]);
        assert!(!m.read(0x1003, &mut buf), "across two regions");
        assert!(m.read(0x1004, &mut buf));
        assert_eq!(buf, [5, 6]);
        assert!(!m.read(0xfff, &mut buf), "below every region");
        assert!(!m.read(0x100b, &mut buf), "past the end");
        assert!(!m.read(u64::MAX, &mut buf));
        assert!(m.read(0x100c, &mut []), "nothing to read");
    }
}
