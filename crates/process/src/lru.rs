//! The files no process maps any more, least recently used first, within
//! a byte budget: their unwind tables stay in the kernel so that a
//! program started again (a build loop running `rustc` a thousand times)
//! finds them there instead of having them analysed again. Generic over
//! the key that names a table, so that the key can change without
//! touching this.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// See the module documentation.
pub struct UnusedFiles<K> {
    /// Use order -> key.
    order: BTreeMap<u64, K>,
    /// Key -> (use order, cost in bytes).
    entries: HashMap<K, (u64, u64)>,
    bytes: u64,
    budget: u64,
    next: u64,
}

impl<K: Copy + Eq + Hash> UnusedFiles<K> {
    /// Holds at most `budget` bytes of unused files.
    pub fn new(budget: u64) -> UnusedFiles<K> {
        UnusedFiles { order: BTreeMap::new(), entries: HashMap::new(), bytes: 0, budget, next: 0 }
    }

    /// `key` is no longer used; it costs `bytes` while held.
    pub fn insert(&mut self, key: K, bytes: u64) {
        self.remove(key);
        let at = self.next;
        self.next += 1;
        self.order.insert(at, key);
        self.entries.insert(key, (at, bytes));
        self.bytes += bytes;
    }

    /// `key` is used again (or gone): no longer a candidate for eviction.
    /// Whether it was held.
    pub fn remove(&mut self, key: K) -> bool {
        let Some((at, bytes)) = self.entries.remove(&key) else { return false };
        self.order.remove(&at);
        self.bytes -= bytes;
        true
    }

    /// The least recently used key, removed, while the held bytes exceed
    /// the budget.
    pub fn pop_over_budget(&mut self) -> Option<K> {
        if self.bytes <= self.budget {
            return None;
        }
        self.pop_oldest()
    }

    /// The least recently used key, removed.
    pub fn pop_oldest(&mut self) -> Option<K> {
        let (_, key) = self.order.pop_first()?;
        if let Some((_, bytes)) = self.entries.remove(&key) {
            self.bytes -= bytes;
        }
        Some(key)
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_unused_beyond_budget() {
        let mut u = UnusedFiles::new(100);
        u.insert('a', 40);
        u.insert('b', 40);
        assert_eq!(u.pop_over_budget(), None);
        u.insert('c', 40);
        u.insert('a', 40); // used and released again: now the newest
        assert_eq!(u.bytes(), 120);
        assert_eq!(u.pop_over_budget(), Some('b'));
        assert_eq!(u.pop_over_budget(), None);
        assert!(u.remove('c'));
        assert!(!u.remove('c'));
        assert_eq!((u.len(), u.bytes()), (1, 40));
        assert_eq!(u.pop_oldest(), Some('a'));
        assert_eq!(u.len(), 0);
    }

    #[test]
    fn zero_budget_keeps_nothing() {
        let mut u = UnusedFiles::new(0);
        u.insert(1u64, 0);
        assert_eq!(u.pop_over_budget(), None, "a file costing nothing fits");
        u.insert(2u64, 1);
        assert_eq!(u.pop_over_budget(), Some(1));
        assert_eq!(u.pop_over_budget(), Some(2));
    }
}
