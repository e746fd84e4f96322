//! A bounded map with approximately least-recently-used eviction, in O(1):
//! two generations; a hit in the old one moves the entry to the new one;
//! when the new one is full, the old one is dropped whole and the new one
//! becomes old. At most `capacity` entries live at once, and an entry
//! used at least once per `capacity / 2` insertions is never evicted.

use std::collections::HashMap;
use std::hash::Hash;

pub(crate) struct GenerationalCache<K, V> {
    young: HashMap<K, V>,
    old: HashMap<K, V>,
    half: usize,
    evictions: u64,
}

impl<K: Hash + Eq, V: Clone> GenerationalCache<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        GenerationalCache { young: HashMap::new(), old: HashMap::new(), half: (capacity / 2).max(1), evictions: 0 }
    }

    pub(crate) fn get(&mut self, key: &K) -> Option<V>
    where
        K: Clone,
    {
        if let Some(v) = self.young.get(key) {
            return Some(v.clone());
        }
        let v = self.old.remove(key)?;
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

    pub(crate) fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }

    /// Entries dropped so far.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_keeps_hot_entries() {
        let mut c = GenerationalCache::new(10);
        for i in 0..1000u32 {
            c.insert(i, i);
            // Key 0 is used all the time.
            assert_eq!(c.get(&0), Some(0));
            assert!(c.len() <= 10, "{} entries", c.len());
        }
        assert_eq!(c.get(&999), Some(999));
        assert_eq!(c.get(&1), None);
        assert!(c.evictions() > 900);
    }
}
