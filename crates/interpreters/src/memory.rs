//! Reading another process's memory.

/// Memory of one process, read by address.
pub trait ProcessMemory {
    /// Fills `buf` with the bytes at `address`; false unless all of them
    /// could be read.
    fn read(&self, address: u64, buf: &mut [u8]) -> bool;
}

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
