//! The bounded cache of names the symbolizers answer from, with
//! approximately least-recently-used eviction in O(1): two generations;
//! a hit in the old one moves the entry to the new one; when the new one
//! is full, the old one is dropped whole and the new one becomes old. At
//! most `capacity` entries live at once, and an entry used at least once
//! per `capacity / 2` insertions is never evicted. Hits, misses and
//! evictions are counted.

use std::collections::HashMap;
use std::hash::Hash;

/// Counters and size of a name cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups not in the cache.
    pub misses: u64,
    /// Entries dropped to stay within the bound.
    pub evictions: u64,
    /// Entries held now.
    pub entries: u64,
}

pub(crate) struct NameCache<K, V> {
    young: HashMap<K, V>,
    old: HashMap<K, V>,
    half: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> NameCache<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        NameCache {
            young: HashMap::new(),
            old: HashMap::new(),
            half: (capacity / 2).max(1),
            hits: 0,
            misses: 0,
            evictions: 0,
        }
    }

    /// The cached value of `key` (a hit or a miss, counted).
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        if let Some(v) = self.young.get(key) {
            self.hits += 1;
            return Some(v.clone());
        }
        let Some(v) = self.old.remove(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        self.insert(key.clone(), v.clone());
        Some(v)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        if self.young.len() >= self.half && !self.young.contains_key(&key) {
            self.evictions += self.old.len() as u64;
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(key, value);
    }

    /// Drops every entry (counted as evictions): what they say is stale.
    pub(crate) fn clear(&mut self) {
        self.evictions += (self.young.len() + self.old.len()) as u64;
        self.young.clear();
        self.old.clear();
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits,
            misses: self.misses,
            evictions: self.evictions,
            entries: (self.young.len() + self.old.len()) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_keeps_hot_entries() {
        let mut c = NameCache::new(10);
        for i in 0..1000u32 {
            c.insert(i, i);
            // Key 0 is used all the time.
            assert_eq!(c.get(&0), Some(0));
            assert!(c.stats().entries <= 10, "{:?}", c.stats());
        }
        assert_eq!(c.get(&999), Some(999));
        assert_eq!(c.get(&1), None);
        let s = c.stats();
        // Everything inserted is held or was evicted, key 0 once.
        assert_eq!(s.evictions + s.entries, 1000);
        assert_eq!((s.hits, s.misses), (1001, 1));
    }

    #[test]
    fn counts_hits_misses_and_each_eviction() {
        let mut c = NameCache::new(4);
        for k in 1..=4u32 {
            c.insert(k, k * 10);
        }
        // 1 and 2 went old when 3 came; nothing evicted yet.
        assert_eq!(c.stats(), CacheStats { hits: 0, misses: 0, evictions: 0, entries: 4 });
        c.insert(5, 50);
        // The old generation (1, 2) dropped whole.
        assert_eq!(c.stats(), CacheStats { hits: 0, misses: 0, evictions: 2, entries: 3 });
        assert_eq!(c.get(&1), None);
        assert_eq!(c.get(&3), Some(30));
        assert_eq!(c.get(&5), Some(50));
        assert_eq!(c.stats(), CacheStats { hits: 2, misses: 1, evictions: 2, entries: 3 });
        // 3 was promoted: the next rotation drops 4, not 3.
        c.insert(6, 60);
        c.insert(7, 70);
        assert_eq!(c.get(&4), None);
        assert_eq!(c.get(&3), Some(30));
        c.clear();
        let s = c.stats();
        assert_eq!((s.entries, s.evictions + s.entries), (0, 7));
    }
}
