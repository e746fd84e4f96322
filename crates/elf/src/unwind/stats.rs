//! What happened while building an [`crate::UnwindTable`].

use std::fmt;

use super::rules::InvalidReason;

/// A CFI section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CfiSection {
    /// `.eh_frame`.
    EhFrame,
    /// `.eh_frame_hdr` (or the `PT_GNU_EH_FRAME` segment).
    EhFrameHdr,
    /// `.debug_frame`.
    DebugFrame,
}

impl CfiSection {
    /// The section name.
    pub fn as_str(self) -> &'static str {
        match self {
            CfiSection::EhFrame => ".eh_frame",
            CfiSection::EhFrameHdr => ".eh_frame_hdr",
            CfiSection::DebugFrame => ".debug_frame",
        }
    }
}

/// Where the `.eh_frame` data was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EhFrameSource {
    /// The `.eh_frame` section header.
    Section,
    /// The `eh_frame_ptr` of `.eh_frame_hdr`, found through `PT_GNU_EH_FRAME`
    /// (section headers stripped); the data runs to the end of its segment.
    EhFrameHdr,
}

/// What went wrong in a CFI section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CfiErrorKind {
    /// The DWARF parser rejected an entry or an instruction.
    Dwarf(gimli::Error),
    /// The section's bytes lie (partly) outside the file.
    OutOfBounds,
    /// The section is compressed (`SHF_COMPRESSED`); not supported yet.
    Compressed,
    /// An FDE claims an address range over 4 GiB or one that wraps.
    BadRange,
    /// `eh_frame_ptr` of `.eh_frame_hdr` does not point into the file.
    BadEhFramePtr,
}

/// One problem met while reading CFI. Parsing a section stops at an entry
/// it cannot frame (the next one cannot be found); an FDE whose
/// instructions fail keeps the rows before the failure and is
/// [`crate::UnwindRule::Invalid`] after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfiError {
    /// Which section.
    pub section: CfiSection,
    /// Offset of the entry in the section.
    pub offset: u64,
    /// What happened.
    pub kind: CfiErrorKind,
}

impl fmt::Display for CfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {:#x}: ", self.section.as_str(), self.offset)?;
        match self.kind {
            CfiErrorKind::Dwarf(e) => write!(f, "{e}"),
            CfiErrorKind::OutOfBounds => f.write_str("section data outside the file"),
            CfiErrorKind::Compressed => f.write_str("compressed section not supported"),
            CfiErrorKind::BadRange => f.write_str("FDE address range too large or wrapping"),
            CfiErrorKind::BadEhFramePtr => f.write_str("eh_frame_ptr points outside the loaded file data"),
        }
    }
}

/// CFI rows by the rule they were reduced to (before merging).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCounts {
    /// [`crate::UnwindRule::Cfa`].
    pub cfa: u64,
    /// [`crate::UnwindRule::CfaDeref`].
    pub cfa_deref: u64,
    /// [`crate::UnwindRule::Plt`].
    pub plt: u64,
    /// [`crate::UnwindRule::Signal`] (one per signal FDE).
    pub signal: u64,
    /// [`crate::UnwindRule::Stop`].
    pub stop: u64,
    /// [`crate::UnwindRule::Invalid`].
    pub invalid: u64,
}

impl RowCounts {
    /// All rows.
    pub fn total(&self) -> u64 {
        self.cfa + self.cfa_deref + self.plt + self.signal + self.stop + self.invalid
    }
}

/// Most errors kept in [`UnwindStats::errors`]; the rest are only counted.
pub const MAX_KEPT_ERRORS: usize = 32;

/// Counters of one table build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindStats {
    /// Where `.eh_frame` came from, `None` without one.
    pub eh_frame_source: Option<EhFrameSource>,
    /// Bytes of `.eh_frame` read.
    pub eh_frame_bytes: u64,
    /// Bytes of `.debug_frame` read.
    pub debug_frame_bytes: u64,
    /// CIEs seen (both sections).
    pub cies: u64,
    /// FDEs in `.eh_frame`.
    pub fdes_eh_frame: u64,
    /// FDEs in `.debug_frame`.
    pub fdes_debug_frame: u64,
    /// FDEs made into one [`crate::UnwindRule::Signal`] entry.
    pub fdes_signal: u64,
    /// FDEs covering no address.
    pub fdes_empty: u64,
    /// FDEs (partly) shadowed by others: `.debug_frame` ones under
    /// `.eh_frame`, or overlapping ones in the same section.
    pub fdes_overlapped: u64,
    /// Framed functions without CFI described from their code
    /// (`build::FRAMED_WITHOUT_CFI`).
    pub framed_without_cfi: u64,
    /// The program's entry point had no CFI and was made a root
    /// ([`crate::UnwindRule::Stop`]; ld.so's `_start`).
    pub entry_without_cfi: bool,
    /// Rows by rule, of the FDEs that describe some address of the table
    /// (an FDE wholly shadowed by others is not run).
    pub rows: RowCounts,
    invalid: [u64; InvalidReason::ALL.len()],
    /// Entries in the final table.
    pub deltas: u64,
    /// Deltas left out: beyond 65,536 distinct rules in one file, or out
    /// of address order (never seen in a real file).
    pub deltas_dropped: u64,
    /// Problems met, the first [`MAX_KEPT_ERRORS`] of them.
    pub errors: Vec<CfiError>,
    /// Number of problems met.
    pub error_count: u64,
    /// The file shrank while it was read: the table was discarded (see
    /// [`crate::map_guard`]).
    pub file_changed: bool,
    /// The section header table was unusable (truncated, absurd) and
    /// ignored: `.eh_frame` came through `PT_GNU_EH_FRAME`, without
    /// `.debug_frame` ([`crate::ElfFile::sections_ignored`] says why).
    pub sections_ignored: bool,
}

impl UnwindStats {
    /// Invalid rows with this reason.
    pub fn invalid(&self, reason: InvalidReason) -> u64 {
        self.invalid[reason.index()]
    }

    /// Invalid rows by reason, every reason listed.
    pub fn invalid_by_reason(&self) -> impl Iterator<Item = (InvalidReason, u64)> + '_ {
        InvalidReason::ALL.iter().map(|&r| (r, self.invalid(r)))
    }

    pub(crate) fn count_invalid(&mut self, reason: InvalidReason) {
        self.rows.invalid += 1;
        self.invalid[reason.index()] += 1;
    }

    pub(crate) fn error(&mut self, section: CfiSection, offset: u64, kind: CfiErrorKind) {
        self.error_count += 1;
        if self.errors.len() < MAX_KEPT_ERRORS {
            self.errors.push(CfiError { section, offset, kind });
        }
    }
}
