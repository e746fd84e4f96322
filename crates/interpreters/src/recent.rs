//! Frame words named lately, for a runtime object to name them again
//! cheaply: a deep stack's outer frames come back in every sample, and
//! naming each from the process's memory every time costs a busy
//! genuine process its whole naming budget (several reads a frame).
//!
//! A word named less than [`RecentWords::trust`] ago is taken as it was,
//! with no read: naming already comes a fraction of a second after the
//! sample. After that, the first bytes of the object it was named from
//! (its head: the object the word points to, or for a V8 pc the `Code`
//! found for it, kept as [`RecentWords::object`]) are read once and
//! compared with those read when it was named: the same bytes name it as
//! before; other bytes (the object freed, moved, or another at that
//! address) have it named again. Used by CRuby's and V8's objects.

use profiler_trace::SourceLine;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One word's lines, the object they were named from and its head.
struct Recent {
    head: Box<[u8]>,
    lines: Vec<SourceLine>,
    checked: Instant,
    object: u64,
}

/// See the module documentation. Bounded in words (emptied when full)
/// and in bytes: heads are at most a few dozen bytes, and lines are
/// counted by their text.
pub(crate) struct RecentWords {
    words: HashMap<u64, Recent>,
    max_words: usize,
    /// How long a word is taken as it is (tests change it).
    pub(crate) trust: Duration,
    bytes: usize,
}

impl RecentWords {
    /// At most `max_words` words, each taken as it is for `trust`.
    pub(crate) fn new(max_words: usize, trust: Duration) -> RecentWords {
        RecentWords { words: HashMap::new(), max_words: max_words.max(1), trust, bytes: 0 }
    }

    /// The lines of `word` if it was named or checked less than `trust`
    /// before `now`.
    pub(crate) fn trusted(&self, word: u64, now: Instant) -> Option<Vec<SourceLine>> {
        self.words.get(&word).filter(|r| self.fresh(r, now)).map(|r| r.lines.clone())
    }

    /// Whether `word` would be [`RecentWords::trusted`] at `now` (no
    /// read of it is due).
    pub(crate) fn is_trusted(&self, word: u64, now: Instant) -> bool {
        self.words.get(&word).is_some_and(|r| self.fresh(r, now))
    }

    fn fresh(&self, r: &Recent, now: Instant) -> bool {
        now.saturating_duration_since(r.checked) < self.trust
    }

    /// The object `word` was last named from, if it is kept.
    pub(crate) fn object(&self, word: u64) -> Option<u64> {
        self.words.get(&word).map(|r| r.object)
    }

    /// The lines of `word` if its object's head still reads `head`
    /// (counted as checked at `now`).
    pub(crate) fn same_head(&mut self, word: u64, head: &[u8], now: Instant) -> Option<Vec<SourceLine>> {
        let r = self.words.get_mut(&word)?;
        if *r.head != *head {
            return None;
        }
        r.checked = now;
        Some(r.lines.clone())
    }

    /// `word` named `lines` from `object`, whose head read `head`, at
    /// `now`; a word that could not be named is forgotten, so that it is
    /// tried again.
    pub(crate) fn remember(&mut self, word: u64, object: u64, head: &[u8], lines: &[SourceLine], now: Instant) {
        self.forget(word);
        if lines.is_empty() {
            return;
        }
        if self.words.len() >= self.max_words {
            self.clear();
        }
        let recent = Recent { head: head.into(), lines: lines.to_vec(), checked: now, object };
        self.bytes += cost(&recent);
        self.words.insert(word, recent);
    }

    /// Drops `word`.
    pub(crate) fn forget(&mut self, word: u64) {
        if let Some(old) = self.words.remove(&word) {
            self.bytes -= cost(&old);
        }
    }

    /// Words kept.
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    /// Bytes held (see [`cost`]).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops every word.
    pub(crate) fn clear(&mut self) {
        self.words.clear();
        self.bytes = 0;
    }
}

/// Bytes a word holds: its head, its lines' texts, the entry itself.
fn cost(r: &Recent) -> usize {
    let texts: usize = r.lines.iter().map(|l| l.function.len() + l.file.as_ref().map_or(0, |f| f.len())).sum();
    std::mem::size_of::<Recent>() + r.head.len() + texts + r.lines.len() * std::mem::size_of::<SourceLine>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str) -> Vec<SourceLine> {
        vec![SourceLine { function: name.into(), file: Some("a.rb".into()), line: 3, approximate: false }]
    }

    #[test]
    fn a_word_is_trusted_for_a_while_then_checked_by_its_head() {
        let t0 = Instant::now();
        let mut r = RecentWords::new(8, Duration::from_millis(100));
        r.remember(1, 0x10, b"head", &line("f"), t0);
        assert_eq!(r.trusted(1, t0 + Duration::from_millis(99)), Some(line("f")));
        assert!(r.is_trusted(1, t0 + Duration::from_millis(99)));
        assert_eq!(r.object(1), Some(0x10));
        let later = t0 + Duration::from_millis(100);
        assert_eq!(r.trusted(1, later), None, "checked again after the trust");
        assert!(!r.is_trusted(1, later));
        assert_eq!(r.same_head(1, b"HEAD", later), None, "another object at the address");
        assert_eq!(r.same_head(1, b"head", later), Some(line("f")));
        assert_eq!(r.trusted(1, later + Duration::from_millis(50)), Some(line("f")), "trusted again once checked");
        assert_eq!(r.trusted(2, t0), None);
    }

    #[test]
    fn unnamed_words_are_not_kept_and_the_bound_empties_it() {
        let t0 = Instant::now();
        let mut r = RecentWords::new(2, Duration::from_secs(1));
        r.remember(1, 0x10, b"h", &line("f"), t0);
        r.remember(1, 0x10, b"h", &[], t0);
        assert_eq!((r.len(), r.bytes()), (0, 0), "a word that could not be named is tried again");
        r.remember(1, 0x10, b"h", &line("f"), t0);
        r.remember(2, 0x20, b"h", &line("g"), t0);
        let two = r.bytes();
        r.remember(3, 0x30, b"h", &line("h"), t0);
        assert_eq!(r.len(), 1, "emptied when full");
        assert_eq!(r.trusted(3, t0), Some(line("h")));
        assert!(r.bytes() > 0 && r.bytes() < two);
        r.clear();
        assert_eq!((r.len(), r.bytes()), (0, 0));
    }
}
