//! The crate's one error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while reading an ELF file.
///
/// Malformed input always ends up here (or, for unwind information, in
/// [`crate::UnwindStats::errors`]); the crate never panics on file data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening, mapping or reading a file failed.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// The file does not start with the ELF magic `\x7fELF`.
    #[error("not an ELF file (bad magic)")]
    NotElf,

    /// A valid ELF file of a kind this crate does not handle (only x86-64,
    /// 64-bit, little-endian files are supported).
    #[error("unsupported ELF file: {what} is {value:#x}, only {expected} is supported")]
    Unsupported {
        /// Which header field.
        what: &'static str,
        /// Its value in the file.
        value: u64,
        /// What would have been accepted.
        expected: &'static str,
    },

    /// A structure described by the headers extends past the end of the data.
    #[error(
        "truncated ELF file: {what} at offset {offset:#x} (size {size:#x}) extends past the end \
         of the data ({file_len:#x} bytes)"
    )]
    Truncated {
        /// Which structure.
        what: &'static str,
        /// Its file offset.
        offset: u64,
        /// Its size in bytes.
        size: u64,
        /// The size of the data we have.
        file_len: u64,
    },

    /// A header field has a value that makes no sense (e.g. a wrong entry size).
    #[error("malformed ELF file: {what} ({value:#x})")]
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// The offending value.
        value: u64,
    },

    /// A `.eh_frame`/`.debug_frame`/`.eh_frame_hdr` entry could not be parsed.
    #[error("malformed {section} at offset {offset:#x}")]
    Dwarf {
        /// Section name.
        section: &'static str,
        /// Offset of the entry within the section.
        offset: u64,
        /// The parser's complaint.
        #[source]
        source: gimli::Error,
    },

    /// A count or size read from the file is over the limit this crate
    /// sets for it (the file claims more than any real one has).
    #[error("{what} is {value}, over the limit of {limit}")]
    OverLimit {
        /// Which count or size.
        what: &'static str,
        /// Its value in the file.
        value: u64,
        /// The limit (`MAX_*` constant).
        limit: u64,
    },

    /// The file shrank while it was mapped and read: what was read from it
    /// is not trustworthy (see [`crate::map_guard`]).
    #[error("the file changed while it was read")]
    ChangedWhileRead,

    /// The system-wide table of distinct unwind rules has no room left.
    #[error("unwind rule table is full ({capacity} distinct rules)")]
    RuleTableFull {
        /// How many rules fit.
        capacity: usize,
    },
}

/// Short alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
