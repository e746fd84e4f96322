//! Why a runtime leaves a build it found, or a process of it, to the
//! native unwinder: the reasons behind the registry's notices and its
//! `refused_*` counters.

use std::fmt;

/// Why a runtime does not unwind a build ([`crate::FileDetection::Unsupported`])
/// or cannot read one of its processes ([`crate::Attach::Failed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its version is not one the unwinder reads; `supported` says which
    /// are ("3.8 to 3.15").
    Version {
        /// The versions read.
        supported: String,
    },
    /// Its version could not be told (`what` was missing or unreadable).
    UnknownVersion {
        /// What said nothing.
        what: &'static str,
    },
    /// A symbol the unwinder needs is missing (or has no size).
    Symbol(String),
    /// A kind of build the unwinder does not read (thread-safe PHP,
    /// OpenJ9, BEAM's interpreter flavour).
    Build(&'static str),
    /// Its data is laid out beyond what the unwinder reads, or does not
    /// agree with itself.
    Layout(String),
    /// What the unwinder needs could not be read from the process.
    Unreadable(&'static str),
}

impl Refusal {
    /// The counter of each kind of refusal, in the order of
    /// [`Refusal::index`].
    pub const COUNTERS: [&'static str; 6] = [
        "refused_version",
        "refused_unknown_version",
        "refused_symbol",
        "refused_build",
        "refused_layout",
        "refused_unreadable",
    ];

    /// Its kind's place in [`Refusal::COUNTERS`].
    pub fn index(&self) -> usize {
        match self {
            Refusal::Version { .. } => 0,
            Refusal::UnknownVersion { .. } => 1,
            Refusal::Symbol(_) => 2,
            Refusal::Build(_) => 3,
            Refusal::Layout(_) => 4,
            Refusal::Unreadable(_) => 5,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Version { supported } => write!(f, "only {supported} are read"),
            Refusal::UnknownVersion { what } => write!(f, "its version is unknown: {what}"),
            Refusal::Symbol(symbol) => write!(f, "no {symbol}"),
            Refusal::Build(what) => write!(f, "{what}"),
            Refusal::Layout(what) => write!(f, "{what}"),
            Refusal::Unreadable(what) => write!(f, "{what} could not be read"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Refusal;

    #[test]
    fn each_kind_has_its_counter_suffix() {
        let all = [
            Refusal::Version { supported: "1 to 2".into() },
            Refusal::UnknownVersion { what: "no version string" },
            Refusal::Symbol("x".into()),
            Refusal::Build("a debug build"),
            Refusal::Layout("frames of 900 bytes".into()),
            Refusal::Unreadable("the table"),
        ];
        let indexes: Vec<usize> = all.iter().map(Refusal::index).collect();
        assert_eq!(indexes, (0..Refusal::COUNTERS.len()).collect::<Vec<_>>());
        assert_eq!(all[0].to_string(), "only 1 to 2 are read");
        assert_eq!(all[2].to_string(), "no x");
        assert_eq!(all[5].to_string(), "the table could not be read");
    }
}
