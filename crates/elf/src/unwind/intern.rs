//! System-wide deduplication of unwind rules.

use std::collections::HashMap;

use super::fxhash::FxBuildHasher;
use super::rules::{StackDelta, UnwindRule};
use crate::error::{Error, Result};

/// A small integer standing for an [`UnwindRule`] in a [`RuleInterner`].
///
/// 16 bits, so that a BPF table entry can be 4 bytes: 16 low address bits
/// and a rule id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u16);

/// A file's deltas as sorted `(ELF vaddr, global rule id)` pairs, walked
/// anew at each call (a loader may size its tables, then fill them,
/// without a copy of them).
pub type DeltaWalk<'a> = dyn Fn() -> Box<dyn Iterator<Item = (u64, RuleId)> + 'a> + 'a;

impl RuleId {
    /// Always [`UnwindRule::NoCoverage`].
    pub const NO_COVERAGE: RuleId = RuleId(0);
    /// Always [`UnwindRule::Invalid`].
    pub const INVALID: RuleId = RuleId(1);
    /// Always [`UnwindRule::Stop`].
    pub const STOP: RuleId = RuleId(2);
    /// Always [`UnwindRule::Signal`].
    pub const SIGNAL: RuleId = RuleId(3);
    /// Always [`UnwindRule::UnfollowedSwitch`].
    pub const UNFOLLOWED_SWITCH: RuleId = RuleId(4);
    /// Always [`UnwindRule::GoMorestack`].
    pub const GO_MORESTACK: RuleId = RuleId(5);
    /// Always [`UnwindRule::GoMcall`].
    pub const GO_MCALL: RuleId = RuleId(6);
}

/// The rules every table starts with, in id order.
const FIXED_RULES: [UnwindRule; 7] = [
    UnwindRule::NoCoverage,
    UnwindRule::Invalid,
    UnwindRule::Stop,
    UnwindRule::Signal,
    UnwindRule::UnfollowedSwitch,
    UnwindRule::GoMorestack,
    UnwindRule::GoMcall,
];

/// Deduplicates rules across all files to [`RuleId`]s, so that the
/// system-wide table of distinct rules stays small (about 10k on a
/// desktop).
///
/// Ids 0–6 are fixed (see the [`RuleId`] constants) so the unwinder can
/// test for them without a lookup. Ids are never reused or renumbered.
#[derive(Clone, Debug)]
pub struct RuleInterner {
    ids: HashMap<UnwindRule, RuleId, FxBuildHasher>,
    rules: Vec<UnwindRule>,
    /// Most distinct rules: the table they are loaded into may hold fewer
    /// than ids can name (the BPF `unwind_rules` array).
    capacity: usize,
}

impl Default for RuleInterner {
    fn default() -> Self {
        RuleInterner::new()
    }
}

impl RuleInterner {
    /// How many distinct rules ids can name (they are 16 bits).
    pub const CAPACITY: usize = 1 << 16;

    /// An interner holding only the fixed rules, with room for
    /// [`RuleInterner::CAPACITY`] rules.
    pub fn new() -> RuleInterner {
        RuleInterner::with_capacity(Self::CAPACITY)
    }

    /// An interner holding only the fixed rules that refuses rules past
    /// `capacity` (at least the fixed rules, at most
    /// [`RuleInterner::CAPACITY`]), so that an id it gives always fits
    /// the table it is loaded into.
    pub fn with_capacity(capacity: usize) -> RuleInterner {
        let mut interner = RuleInterner {
            ids: HashMap::default(),
            rules: Vec::new(),
            capacity: capacity.clamp(FIXED_RULES.len(), Self::CAPACITY),
        };
        for rule in FIXED_RULES {
            // Cannot fail: the table is empty.
            let _ = interner.intern(rule);
        }
        interner
    }

    /// The id of `rule`, adding it if new.
    pub fn intern(&mut self, rule: UnwindRule) -> Result<RuleId> {
        if let Some(&id) = self.ids.get(&rule) {
            return Ok(id);
        }
        let full = Error::RuleTableFull { capacity: self.capacity };
        if self.rules.len() >= self.capacity {
            return Err(full);
        }
        let id = u16::try_from(self.rules.len()).map_err(|_| full)?;
        self.rules.push(rule);
        self.ids.insert(rule, RuleId(id));
        Ok(RuleId(id))
    }

    /// Interns every rule of `deltas`, giving `(address, id)` pairs. On
    /// error the rules interned so far stay.
    pub fn intern_deltas(&mut self, deltas: &[StackDelta]) -> Result<Vec<(u64, RuleId)>> {
        deltas.iter().map(|d| Ok((d.address, self.intern(d.rule)?))).collect()
    }

    /// The rule with id `id`.
    pub fn get(&self, id: RuleId) -> Option<UnwindRule> {
        self.rules.get(usize::from(id.0)).copied()
    }

    /// Most distinct rules this interner gives ids to.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of distinct rules, the fixed ones included.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Always false: the fixed rules are always there.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// All rules, indexed by id.
    pub fn rules(&self) -> &[UnwindRule] {
        &self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::rules::{CfaBase, RbpRule};

    #[test]
    fn dedups_and_fills_up() {
        let mut i = RuleInterner::new();
        assert_eq!(i.len(), 7);
        assert_eq!(i.intern(UnwindRule::GoMorestack).unwrap(), RuleId::GO_MORESTACK);
        assert_eq!(i.intern(UnwindRule::GoMcall).unwrap(), RuleId::GO_MCALL);
        assert_eq!(i.intern(UnwindRule::Stop).unwrap(), RuleId::STOP);
        assert_eq!(i.get(RuleId::SIGNAL), Some(UnwindRule::Signal));
        assert_eq!(i.intern(UnwindRule::UnfollowedSwitch).unwrap(), RuleId::UNFOLLOWED_SWITCH);
        let rule = |offset| UnwindRule::Cfa { base: CfaBase::Rsp, offset, rbp: RbpRule::Unchanged };
        let a = i.intern(rule(8)).unwrap();
        assert_eq!(i.intern(rule(8)).unwrap(), a);
        assert_eq!(a, RuleId(7));
        for n in 0..(RuleInterner::CAPACITY as i32 - 8) {
            i.intern(rule(16 + n)).unwrap();
        }
        assert_eq!(i.len(), RuleInterner::CAPACITY);
        assert!(matches!(i.intern(rule(-1)), Err(Error::RuleTableFull { .. })));
        assert_eq!(i.intern(rule(8)).unwrap(), a);
        assert_eq!(i.get(RuleId(u16::MAX)), Some(rule(16 + RuleInterner::CAPACITY as i32 - 9)));
    }

    #[test]
    fn a_smaller_table_refuses_past_its_size() {
        let mut i = RuleInterner::with_capacity(8);
        assert_eq!(i.capacity(), 8);
        let rule = |offset| UnwindRule::Cfa { base: CfaBase::Rsp, offset, rbp: RbpRule::Unchanged };
        assert_eq!(i.intern(rule(8)).unwrap(), RuleId(7));
        assert!(matches!(i.intern(rule(99)), Err(Error::RuleTableFull { capacity: 8 })));
        assert_eq!(i.intern(rule(8)).unwrap(), RuleId(7), "a known rule still has its id");
        assert_eq!(RuleInterner::with_capacity(1).capacity(), 7, "the fixed rules always fit");
        assert_eq!(RuleInterner::with_capacity(1 << 20).capacity(), RuleInterner::CAPACITY);
    }
}
