//! A file's stack deltas in 4 bytes each.
//!
//! A [`StackDelta`] is 32 bytes (an address and a rule); a large library
//! has over a million of them, so a table of them held 37 MB for
//! librustc_driver while it waited to be loaded. Here addresses are
//! grouped by 64 KiB page and each delta is one `u32`: its offset in the
//! page and the index of its rule among the file's distinct rules (a few
//! hundred). The BPF unwinder's own layout is the same shape, so loading
//! the table is a walk over it.

use std::collections::HashMap;

use super::fxhash::FxBuildHasher;
use super::rules::{StackDelta, UnwindRule};

/// Bits of an address inside its page.
const PAGE_BITS: u32 = 16;
const OFFSET_MASK: u64 = (1 << PAGE_BITS) - 1;
/// Distinct rules one table can hold (the rule index is 16 bits).
pub const MAX_RULES_PER_TABLE: usize = 1 << 16;
/// Most deltas one table holds (entry indices are 32 bits).
const MAX_ENTRIES: usize = u32::MAX as usize;

/// Sorted stack deltas, no two neighbours with the same rule; each rule
/// applies up to the next delta.
#[derive(Clone, Debug, Default)]
pub struct Deltas {
    /// `offset in page | rule index << 16`, in address order.
    entries: Vec<u32>,
    /// `(page, index of its first entry)` of every page holding entries,
    /// ascending.
    pages: Vec<(u64, u32)>,
    /// The distinct rules, indexed by entries.
    rules: Vec<UnwindRule>,
}

impl Deltas {
    /// Number of deltas.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no delta.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The distinct rules the deltas use, indexed by
    /// [`Deltas::iter_indexed`].
    pub fn rules(&self) -> &[UnwindRule] {
        &self.rules
    }

    /// The deltas in address order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = StackDelta> + '_ {
        self.iter_indexed().map(|(address, rule)| StackDelta { address, rule: self.rules[usize::from(rule)] })
    }

    /// The deltas in address order as (address, index in [`Deltas::rules`]).
    pub fn iter_indexed(&self) -> IndexedIter<'_> {
        IndexedIter { deltas: self, entry: 0, page: 0 }
    }

    /// The deltas as a vector of [`StackDelta`] (32 bytes each: for tests
    /// and small tables).
    pub fn to_vec(&self) -> Vec<StackDelta> {
        self.iter().collect()
    }

    /// [`Deltas::iter_indexed`], consuming the table: its memory is freed
    /// as soon as the last delta has been read, so that a caller encoding
    /// it into another form does not hold both afterwards.
    pub fn into_indexed(self) -> IntoIndexed {
        IntoIndexed { deltas: self, entry: 0, page: 0 }
    }

    /// The last delta.
    pub fn last(&self) -> Option<StackDelta> {
        let entry = *self.entries.last()?;
        let page = self.pages.last()?.0;
        Some(self.delta(page, entry))
    }

    /// The rule in effect at `vaddr` ([`UnwindRule::NoCoverage`] before
    /// the first delta).
    pub fn lookup(&self, vaddr: u64) -> UnwindRule {
        let page = vaddr >> PAGE_BITS;
        let p = self.pages.partition_point(|&(pg, _)| pg <= page);
        let Some(p) = p.checked_sub(1) else {
            return UnwindRule::NoCoverage;
        };
        let (pg, first) = self.pages[p];
        let end = self.pages.get(p + 1).map_or(self.entries.len(), |&(_, f)| f as usize);
        let entries = &self.entries[first as usize..end];
        let at = if pg < page {
            // The page is before vaddr's: its last delta is in effect.
            entries.len()
        } else {
            let offset = (vaddr & OFFSET_MASK) as u32;
            entries.partition_point(|&e| e & 0xffff <= offset)
        };
        // Before the page's first delta, the previous page's last applies.
        match (first as usize + at).checked_sub(1) {
            Some(i) => self.rules[(self.entries[i] >> 16) as usize],
            None => UnwindRule::NoCoverage,
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * 4
            + self.pages.capacity() * std::mem::size_of::<(u64, u32)>()
            + self.rules.capacity() * std::mem::size_of::<UnwindRule>()
    }

    fn delta(&self, page: u64, entry: u32) -> StackDelta {
        StackDelta { address: page << PAGE_BITS | u64::from(entry & 0xffff), rule: self.rules[(entry >> 16) as usize] }
    }
}

impl PartialEq for Deltas {
    fn eq(&self, other: &Deltas) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Deltas {}

impl FromIterator<StackDelta> for Deltas {
    /// Deltas from sorted `(address, rule)` pairs (see [`DeltasBuilder::push`]).
    fn from_iter<I: IntoIterator<Item = StackDelta>>(iter: I) -> Deltas {
        let mut b = DeltasBuilder::default();
        for d in iter {
            b.push(d.address, d.rule);
        }
        b.finish()
    }
}

/// Iterator of [`Deltas::iter_indexed`].
pub struct IndexedIter<'a> {
    deltas: &'a Deltas,
    entry: usize,
    page: usize,
}

impl Iterator for IndexedIter<'_> {
    type Item = (u64, u16);

    fn next(&mut self) -> Option<(u64, u16)> {
        let d = self.deltas;
        let entry = *d.entries.get(self.entry)?;
        while self.page + 1 < d.pages.len() && d.pages[self.page + 1].1 as usize <= self.entry {
            self.page += 1;
        }
        self.entry += 1;
        Some((d.pages[self.page].0 << PAGE_BITS | u64::from(entry & 0xffff), (entry >> 16) as u16))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.deltas.entries.len() - self.entry;
        (n, Some(n))
    }
}

impl ExactSizeIterator for IndexedIter<'_> {}

/// Iterator of [`Deltas::into_indexed`].
pub struct IntoIndexed {
    deltas: Deltas,
    entry: usize,
    page: usize,
}

impl Iterator for IntoIndexed {
    type Item = (u64, u16);

    fn next(&mut self) -> Option<(u64, u16)> {
        let mut it = IndexedIter { deltas: &self.deltas, entry: self.entry, page: self.page };
        let next = it.next();
        (self.entry, self.page) = (it.entry, it.page);
        if next.is_none() {
            // Exhausted: give the memory back now.
            self.deltas = Deltas::default();
            self.entry = 0;
        }
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.deltas.entries.len().saturating_sub(self.entry);
        (n, Some(n))
    }
}

/// Builds [`Deltas`] from rows in address order.
#[derive(Default)]
pub struct DeltasBuilder {
    deltas: Deltas,
    ids: HashMap<UnwindRule, u16, FxBuildHasher>,
    /// Deltas left out: a rule beyond [`MAX_RULES_PER_TABLE`], an address
    /// before the previous one, or a table beyond 2^32 deltas.
    dropped: u64,
}

impl DeltasBuilder {
    /// Number of deltas so far.
    pub fn len(&self) -> usize {
        self.deltas.len()
    }

    /// Whether there is no delta yet.
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }

    /// Deltas left out so far (see the field).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// `rule` from `address` on. Equal neighbours merge; a second rule at
    /// the address of the last delta replaces it. Addresses must not
    /// decrease: an earlier one is dropped and counted.
    pub fn push(&mut self, address: u64, rule: UnwindRule) {
        let d = &mut self.deltas;
        let last = d.last();
        if let Some(last) = last {
            if address < last.address {
                self.dropped += 1;
                return;
            }
            if last.rule == rule {
                return;
            }
        }
        let Some(id) = self.rule_id(rule) else {
            self.dropped += 1;
            return;
        };
        let d = &mut self.deltas;
        if last.is_some_and(|l| l.address == address) {
            // Replace; that may make it equal to the one before.
            let n = d.entries.len();
            let before = n.checked_sub(2).map(|i| d.entries[i] >> 16);
            if before == Some(u32::from(id)) {
                d.entries.pop();
                if d.pages.last().is_some_and(|&(_, first)| first as usize == d.entries.len()) {
                    d.pages.pop();
                }
            } else {
                d.entries[n - 1] = (d.entries[n - 1] & 0xffff) | u32::from(id) << 16;
            }
            return;
        }
        if d.entries.len() >= MAX_ENTRIES {
            self.dropped += 1;
            return;
        }
        let page = address >> PAGE_BITS;
        if d.pages.last().is_none_or(|&(p, _)| p != page) {
            d.pages.push((page, d.entries.len() as u32));
        }
        d.entries.push((address & OFFSET_MASK) as u32 | u32::from(id) << 16);
    }

    fn rule_id(&mut self, rule: UnwindRule) -> Option<u16> {
        if let Some(&id) = self.ids.get(&rule) {
            return Some(id);
        }
        let id = u16::try_from(self.deltas.rules.len()).ok()?;
        self.deltas.rules.push(rule);
        self.ids.insert(rule, id);
        Some(id)
    }

    /// The deltas, their memory trimmed to their size.
    pub fn finish(self) -> Deltas {
        let mut d = self.deltas;
        d.entries.shrink_to_fit();
        d.pages.shrink_to_fit();
        d.rules.shrink_to_fit();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::rules::{CfaBase, RbpRule};

    const A: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged };
    const B: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 16, rbp: RbpRule::Unchanged };
    const C: UnwindRule = UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    const NONE: UnwindRule = UnwindRule::NoCoverage;

    fn pairs(d: &Deltas) -> Vec<(u64, UnwindRule)> {
        d.iter().map(|d| (d.address, d.rule)).collect()
    }

    #[test]
    fn round_trip_across_pages() {
        let want = [
            (0x1_0000, A),
            (0x1_0004, B),
            (0x1_ffff, C),
            (0x2_0000, A),
            (0x7_0010, B),
            (0x1234_5678_9abc, C),
            (0x1234_5678_9abd, NONE),
        ];
        let d: Deltas = want.iter().map(|&(address, rule)| StackDelta { address, rule }).collect();
        assert_eq!(pairs(&d), want);
        assert_eq!(d.len(), want.len());
        assert_eq!(d.iter().len(), want.len());
        assert_eq!(d.rules(), [A, B, C, NONE]);
        assert_eq!(d.last(), Some(StackDelta { address: 0x1234_5678_9abd, rule: NONE }));
        assert_eq!(d.pages.len(), 4);
        let indexed: Vec<(u64, u16)> = d.iter_indexed().collect();
        assert_eq!(indexed[4], (0x7_0010, 1));
        let mut owned = d.clone().into_indexed();
        assert_eq!(owned.size_hint(), (want.len(), Some(want.len())));
        assert_eq!(owned.by_ref().collect::<Vec<_>>(), indexed);
        assert_eq!(owned.deltas.heap_bytes(), 0, "freed once read");
        assert_eq!(owned.next(), None);
    }

    #[test]
    fn lookup_matches_a_linear_scan() {
        let want = [(0x1_0010, A), (0x1_0020, B), (0x3_0000, C), (0x3_0008, A), (0x5_fff0, NONE)];
        let d: Deltas = want.iter().map(|&(address, rule)| StackDelta { address, rule }).collect();
        for vaddr in [
            0, 0x1_000f, 0x1_0010, 0x1_001f, 0x1_0020, 0x2_0000, 0x2_ffff, 0x3_0000, 0x3_0007, 0x3_0008, 0x4_1234,
            0x5_ffef, 0x5_fff0, 0x9_0000,
        ] {
            let linear = want.iter().rev().find(|&&(a, _)| a <= vaddr).map_or(NONE, |&(_, r)| r);
            assert_eq!(d.lookup(vaddr), linear, "{vaddr:#x}");
        }
        assert_eq!(Deltas::default().lookup(5), NONE);
    }

    #[test]
    fn merges_replaces_and_drops() {
        let mut b = DeltasBuilder::default();
        b.push(0x10, A);
        b.push(0x14, A); // equal neighbour
        b.push(0x18, B);
        b.push(0x18, A); // replaces B, then equals A before it: gone
        b.push(0x1_0000, C);
        b.push(0x1_0000, A); // replaces C, equal to A: the page goes too
        b.push(0x1_0004, B);
        b.push(0x8, C); // out of order
        assert_eq!(b.dropped(), 1);
        let d = b.finish();
        assert_eq!(pairs(&d), [(0x10, A), (0x1_0004, B)]);
        assert_eq!(d.pages, [(0, 0), (1, 1)]);
        assert_eq!(d.lookup(0x1_0000), A);
    }

    #[test]
    fn rules_beyond_capacity_are_counted() {
        let mut b = DeltasBuilder::default();
        for i in 0..MAX_RULES_PER_TABLE as u64 + 3 {
            b.push(i, UnwindRule::Cfa { base: CfaBase::Rsp, offset: i as i32, rbp: RbpRule::Unchanged });
        }
        assert_eq!(b.dropped(), 3);
        assert_eq!(b.len(), MAX_RULES_PER_TABLE);
    }
}
