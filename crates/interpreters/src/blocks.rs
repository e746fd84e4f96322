//! Small aligned blocks of a process's memory, read once for the many
//! small reads a namer makes of the same objects within one sample.
//!
//! Naming a frame of optimised V8 code in full reads a few fields each
//! of a dozen objects (its code, deoptimization data, literal array,
//! inlined functions and their maps): about 60 system calls of 8 bytes
//! for a frame with five inlined functions, most of them next to each
//! other. A block holds [`BLOCK_BYTES`] around such a read, so the
//! fields that follow, and the maps every object names, cost no call.
//! Blocks are aligned to their size, hence never straddle a page: a
//! block reads whole or not at all, exactly as the reads inside it would.
//!
//! The blocks are a snapshot: the namer drops them before each sample
//! ([`BlockCache::clear`]), and they are never kept longer than
//! [`BLOCK_LIFETIME`], so what it reads is no older than the sample's
//! own naming. Reads that must see the memory as it is now (the heads a
//! namer compares to trust what it named before) bypass them; the head
//! kept with a name is read through them, as the name was.

use crate::memory::{ProcessMemory, RangeRead};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Bytes of a block: about a V8 object's head and fields; a power of two
/// no larger than a page.
pub const BLOCK_BYTES: usize = 256;
/// Most blocks kept at once (emptied when full): 64 KiB.
pub const MAX_BLOCKS: usize = 256;
/// How long blocks are used after the first was read.
pub const BLOCK_LIFETIME: Duration = Duration::from_millis(10);
/// Bytes one held block counts for: its bytes and its entry.
const ENTRY_BYTES: usize = BLOCK_BYTES + std::mem::size_of::<(u64, Option<Box<[u8; BLOCK_BYTES]>>)>();
/// Most bytes a [`BlockCache`] holds.
pub const MAX_BLOCK_CACHE_BYTES: usize = MAX_BLOCKS * ENTRY_BYTES;

/// Blocks read lately, by address; `None` for one that could not be read.
#[derive(Default)]
pub struct BlockCache {
    blocks: HashMap<u64, Option<Box<[u8; BLOCK_BYTES]>>>,
    /// When the oldest block kept was read.
    since: Option<Instant>,
}

impl BlockCache {
    /// Drops every block.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.since = None;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.blocks.len() * ENTRY_BYTES
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// `memory`, read through these blocks; those older than
    /// [`BLOCK_LIFETIME`] at `now` are dropped first.
    pub fn over<'a>(&'a mut self, memory: &'a dyn ProcessMemory, now: Instant) -> BlockMemory<'a> {
        if self.since.is_some_and(|t| now.saturating_duration_since(t) >= BLOCK_LIFETIME) {
            self.clear();
        }
        BlockMemory { memory, cache: RefCell::new(self), now }
    }

    /// The block at `at` (aligned), read from `memory` if not held.
    fn block(&mut self, memory: &dyn ProcessMemory, at: u64, now: Instant) -> Option<&[u8; BLOCK_BYTES]> {
        if !self.blocks.contains_key(&at) {
            if self.blocks.len() >= MAX_BLOCKS {
                self.clear();
            }
            let mut bytes = Box::new([0u8; BLOCK_BYTES]);
            let block = memory.read(at, &mut bytes[..]).then_some(bytes);
            self.blocks.insert(at, block);
            self.since.get_or_insert(now);
        }
        self.blocks.get(&at)?.as_deref()
    }
}

/// A process's memory read through a [`BlockCache`]: a read within two
/// blocks is served from them (each read whole once); a larger one, or
/// one in a block that could not be read whole, goes to the memory
/// itself (a block at the edge of a test's fake memory; in a process,
/// a block is unreadable only where its bytes are).
pub struct BlockMemory<'a> {
    memory: &'a dyn ProcessMemory,
    cache: RefCell<&'a mut BlockCache>,
    now: Instant,
}

impl ProcessMemory for BlockMemory<'_> {
    fn read(&self, address: u64, buf: &mut [u8]) -> bool {
        let block = BLOCK_BYTES as u64;
        let first = address & !(block - 1);
        let Some(last) = address.checked_add(buf.len() as u64).and_then(|end| end.checked_sub(1)) else {
            return self.memory.read(address, buf);
        };
        if buf.is_empty() || (last & !(block - 1)) - first > block {
            return self.memory.read(address, buf);
        }
        let mut cache = self.cache.borrow_mut();
        let mut done = 0usize;
        let mut at = first;
        while done < buf.len() {
            let Some(bytes) = cache.block(self.memory, at, self.now) else {
                drop(cache);
                return self.memory.read(address, buf);
            };
            let from = (address + done as u64 - at) as usize;
            let n = (BLOCK_BYTES - from).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&bytes[from..from + n]);
            done += n;
            // Past the last block of the address space once done.
            at = at.wrapping_add(block);
        }
        true
    }

    /// Batches go to the memory itself: they are what a namer reads
    /// fresh.
    fn read_many(&self, reads: &mut [RangeRead<'_>]) {
        self.memory.read_many(reads);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fake::FakeMemory;
    use std::cell::Cell;

    struct Counted<'a>(&'a FakeMemory, Cell<u32>);

    impl ProcessMemory for Counted<'_> {
        fn read(&self, address: u64, buf: &mut [u8]) -> bool {
            self.1.set(self.1.get() + 1);
            self.0.read(address, buf)
        }
    }

    fn memory() -> FakeMemory {
        let mut m = FakeMemory::default();
        m.add(0x1000, (0..1024u32).map(|i| i as u8).collect());
        m
    }

    #[test]
    fn reads_within_a_block_cost_one_read_and_straddling_ones_two() {
        let fake = memory();
        let counted = Counted(&fake, Cell::new(0));
        let mut cache = BlockCache::default();
        let now = Instant::now();
        {
            let blocks = cache.over(&counted, now);
            let mut b = [0u8; 8];
            assert!(blocks.read(0x1008, &mut b));
            assert_eq!(b, [8, 9, 10, 11, 12, 13, 14, 15]);
            assert!(blocks.read(0x10f0, &mut b));
            assert_eq!(counted.1.get(), 1, "the same block");
            assert!(blocks.read(0x10fc, &mut b), "across two blocks");
            assert_eq!(b, [0xfc, 0xfd, 0xfe, 0xff, 0, 1, 2, 3]);
            assert_eq!(counted.1.get(), 2);
            let mut big = [0u8; 600];
            assert!(blocks.read(0x1010, &mut big), "more than two blocks: read as it is");
            assert_eq!((big[0], big[599]), (0x10, (0x10 + 599u32) as u8));
            assert_eq!(counted.1.get(), 3);
        }
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn unreadable_blocks_fall_back_and_old_blocks_are_dropped() {
        let mut fake = memory();
        // 16 bytes alone in their block: the block cannot be read whole.
        fake.add(0x8010, vec![7; 16]);
        let counted = Counted(&fake, Cell::new(0));
        let mut cache = BlockCache::default();
        let now = Instant::now();
        let mut b = [0u8; 8];
        {
            let blocks = cache.over(&counted, now);
            assert!(blocks.read(0x8018, &mut b), "read as it is");
            assert_eq!(b, [7; 8]);
            assert!(!blocks.read(0x9000, &mut b), "unmapped");
            assert!(blocks.read(0x1000, &mut b));
        }
        let reads = counted.1.get();
        {
            let blocks = cache.over(&counted, now + BLOCK_LIFETIME / 2);
            assert!(blocks.read(0x1008, &mut b));
            assert_eq!(counted.1.get(), reads, "still held");
        }
        let blocks = cache.over(&counted, now + BLOCK_LIFETIME);
        assert!(blocks.read(0x1008, &mut b));
        assert_eq!(counted.1.get(), reads + 1, "read again once old");
        let mut many = [RangeRead::new(0x1000, &mut b)];
        blocks.read_many(&mut many);
        assert!(many[0].done);
        assert_eq!(counted.1.get(), reads + 2, "batches are read fresh");
    }

    /// The last block of the address space (a hostile word's address,
    /// readable in a fake memory): read whole, with no overflow past it.
    #[test]
    fn the_last_block_of_the_address_space_reads() {
        let mut fake = FakeMemory::default();
        let last = u64::MAX - (BLOCK_BYTES as u64 - 1);
        fake.add(last, vec![5; BLOCK_BYTES]);
        let mut cache = BlockCache::default();
        let blocks = cache.over(&fake, Instant::now());
        let mut b = [0u8; 8];
        assert!(blocks.read(u64::MAX - 15, &mut b));
        assert_eq!(b, [5; 8]);
    }

    #[test]
    fn the_blocks_are_bounded() {
        let mut fake = FakeMemory::default();
        fake.add(0, vec![1; (MAX_BLOCKS + 1) * BLOCK_BYTES]);
        let mut cache = BlockCache::default();
        {
            let blocks = cache.over(&fake, Instant::now());
            let mut b = [0u8; 1];
            for i in 0..=MAX_BLOCKS {
                assert!(blocks.read((i * BLOCK_BYTES) as u64, &mut b));
            }
        }
        assert_eq!(cache.len(), 1, "emptied when full");
        assert!(cache.bytes() > BLOCK_BYTES);
    }
}
