//! A fast non-cryptographic hasher for small keys (unwind rules).
//!
//! The algorithm is the "Fx" hash of Firefox and rustc: per word,
//! `h = (h.rotl(5) ^ word) * 0x51_7c_c1_b7_27_22_0a_95`. Keys here come
//! from files, but a collision flood only costs time on one file's build.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of the Fx hash.
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// See the module docs.
#[derive(Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `HashMap<K, V, FxBuildHasher>` hashes with [`FxHasher`].
pub(crate) type FxBuildHasher = BuildHasherDefault<FxHasher>;
