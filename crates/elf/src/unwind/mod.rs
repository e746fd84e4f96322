//! Native unwind tables: `.eh_frame`/`.debug_frame` reduced to a sorted
//! list of x86-64 [`UnwindRule`]s ("stack deltas"), and Go's `.gopclntab`
//! merged into them ([`with_go_tables`]).

mod build;
mod deltas;
mod expr;
mod fxhash;
mod go;
mod intern;
mod rules;
mod stats;

pub use build::MAX_ENTRY_LEN;
pub use deltas::{Deltas, DeltasBuilder, IndexedIter, IntoIndexed, MAX_RULES_PER_TABLE};
pub use go::{with_go_tables, GoUnwindStats, FOLLOWED_SWITCHES};
pub use intern::{DeltaWalk, RuleId, RuleInterner};
pub use rules::{CfaBase, InvalidReason, RbpRule, StackDelta, UnwindRule};
pub use stats::{CfiError, CfiErrorKind, CfiSection, EhFrameSource, RowCounts, UnwindStats, MAX_KEPT_ERRORS};

use crate::file::ElfFile;

/// The unwind rules of one file, by ELF virtual address.
///
/// `deltas` is sorted by address with no two neighbours holding the same
/// rule; each rule applies up to the next entry. Addresses before the
/// first entry, and from the last entry on (always
/// [`UnwindRule::NoCoverage`]), have no CFI.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindTable {
    /// The rules, sorted by address, 4 bytes each.
    pub deltas: Deltas,
    /// How the table was built, including any errors in the CFI.
    pub stats: UnwindStats,
}

impl ElfFile {
    /// `[start, end)` of the function whose `.eh_frame` entry (FDE)
    /// starts at `start`, for a function no symbol names; `None` when no
    /// FDE starts there.
    pub fn fde_extent(&self, start: u64) -> Option<(u64, u64)> {
        build::fde_extent(self, start)
    }
}

impl UnwindTable {
    /// Reads `.eh_frame` (the section, or through `PT_GNU_EH_FRAME` when the
    /// section headers are stripped) and `.debug_frame`; where both
    /// describe an address, `.eh_frame` wins.
    ///
    /// Never fails: malformed CFI yields a partial table, with the problems
    /// in [`UnwindStats::errors`]. A file without CFI gives an empty table.
    pub fn from_elf(elf: &ElfFile) -> UnwindTable {
        build::build(elf)
    }

    /// The rule in effect at `vaddr` ([`UnwindRule::NoCoverage`] outside
    /// the table).
    pub fn lookup(&self, vaddr: u64) -> UnwindRule {
        self.deltas.lookup(vaddr)
    }

    /// Number of distinct rules in the table.
    pub fn distinct_rules(&self) -> usize {
        let mut used = vec![false; self.deltas.rules().len()];
        for (_, rule) in self.deltas.iter_indexed() {
            used[usize::from(rule)] = true;
        }
        used.into_iter().filter(|&u| u).count()
    }
}

impl ElfFile {
    /// Shorthand for [`UnwindTable::from_elf`].
    pub fn unwind_table(&self) -> UnwindTable {
        UnwindTable::from_elf(self)
    }

    /// The address ranges `[start, end)` of the `.eh_frame` FDEs that hold
    /// one of `addresses` (sorted), in address order: the extent of code
    /// that has no symbol (a function's split-off cold part in a stripped
    /// file).
    pub fn fde_ranges_containing(&self, addresses: &[u64]) -> Vec<(u64, u64)> {
        build::fde_ranges_containing(self, addresses)
    }
}
