//! Where PHP (the Zend Engine) keeps what the unwinder reads, per
//! version (x86-64 and arm64: LP64).
//!
//! PHP exports no offset tables, so these are facts taken from the
//! php-src headers of each release (`Zend/zend_globals.h`,
//! `Zend/zend_compile.h`, `Zend/zend_types.h`) and cross-checked against
//! the offsets the OpenTelemetry eBPF profiler uses. Only 8.2 is proven
//! against a live process here (`tests/php_live.rs`); the others are
//! untested facts.

use crate::refusal::Refusal;
use std::fmt;

/// A PHP release, `major.minor.release`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhpVersion {
    /// 8 in 8.2.36.
    pub major: u8,
    /// 2 in 8.2.36.
    pub minor: u8,
    /// 36 in 8.2.36.
    pub release: u8,
}

impl PhpVersion {
    /// `major.minor.release`.
    pub const fn new(major: u8, minor: u8, release: u8) -> PhpVersion {
        PhpVersion { major, minor, release }
    }

    /// Parses the start of a version string ("8.2.36", "7.4.33-1+deb");
    /// anything after the third number is ignored.
    pub fn parse(text: &str) -> Option<PhpVersion> {
        let (major, minor, release) = crate::version::leading_triple(text)?;
        Some(PhpVersion::new(major, minor, release))
    }

    fn at_least(self, major: u8, minor: u8) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for PhpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.release)
    }
}

/// The oldest release with a layout here.
pub const MIN_PHP: PhpVersion = PhpVersion::new(7, 4, 0);
/// The newest minor release with a layout here (any release).
pub const MAX_PHP: PhpVersion = PhpVersion::new(8, 4, 255);

/// Constants of the Zend Engine, the same in every supported release.
pub mod consts {
    /// `ZEND_INTERNAL_FUNCTION`: `zend_function.type` of a C function.
    pub const INTERNAL_FUNCTION: u8 = 1;
    /// `ZEND_USER_FUNCTION`: a PHP function or the script's body.
    pub const USER_FUNCTION: u8 = 2;
    /// `ZEND_EVAL_CODE`: code compiled by `eval()`.
    pub const EVAL_CODE: u8 = 4;
    /// `ZEND_CALL_CODE` in `This.u1.type_info`: a script body (top level
    /// or included), not a function.
    pub const CALL_CODE: u32 = 1 << 16;
    /// `ZEND_CALL_TOP` in `This.u1.type_info`: the first frame of an
    /// `execute_ex` invocation.
    pub const CALL_TOP: u32 = 1 << 17;
}

/// Offsets (bytes) of one PHP minor release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhpLayout {
    /// The release these facts describe.
    pub version: PhpVersion,
    /// `zend_executor_globals.current_execute_data`.
    pub eg_current_execute_data: u32,
    /// `zend_execute_data.opline` (the current `zend_op`; in a caller,
    /// the call being made).
    pub ex_opline: u32,
    /// `zend_execute_data.func`.
    pub ex_func: u32,
    /// `zend_execute_data.This.u1.type_info` (call-info flags).
    pub ex_this_type_info: u32,
    /// `zend_execute_data.prev_execute_data`.
    pub ex_prev: u32,
    /// `zend_function.type` (`common.type`, a byte).
    pub func_type: u32,
    /// `zend_function.common.function_name` (`zend_string *`).
    pub func_name: u32,
    /// `zend_function.common.scope` (`zend_class_entry *`).
    pub func_scope: u32,
    /// `zend_op_array.filename` (`zend_string *`).
    pub op_array_filename: u32,
    /// `zend_op_array.line_start`; `line_end` follows it.
    pub op_array_line_start: u32,
    /// `zend_class_entry.name` (`zend_string *`).
    pub ce_name: u32,
    /// `zend_string.len`.
    pub string_len: u32,
    /// `zend_string.val` (the bytes, inline).
    pub string_val: u32,
    /// `zend_op.lineno`.
    pub op_lineno: u32,
}

impl PhpLayout {
    /// The layout of `version`'s minor release, or why there is none.
    pub fn for_version(version: PhpVersion) -> Result<PhpLayout, Refusal> {
        if version < MIN_PHP || version > MAX_PHP {
            let supported = format!("{}.{} to {}.{}", MIN_PHP.major, MIN_PHP.minor, MAX_PHP.major, MAX_PHP.minor);
            return Err(Refusal::Version { supported });
        }
        // `zend_op_array` grows between releases: 8.0 added `attributes`
        // to the common head, 8.2 moved `T` and `run_time_cache` into
        // it, 8.3 dropped a pointer, 8.4 added property-hook fields.
        let (filename, line_start) = if version.at_least(8, 4) {
            (168, 176)
        } else if version.at_least(8, 3) {
            (144, 152)
        } else if version.at_least(8, 2) {
            (152, 160)
        } else if version.at_least(8, 0) {
            (144, 152)
        } else {
            (136, 144)
        };
        Ok(PhpLayout {
            version,
            // Unchanged from 7.3 through 8.4 (8.5 moves it to 512).
            eg_current_execute_data: 488,
            ex_opline: 0,
            ex_func: 24,
            ex_this_type_info: 40,
            ex_prev: 48,
            func_type: 0,
            func_name: 8,
            func_scope: 16,
            op_array_filename: filename,
            op_array_line_start: line_start,
            ce_name: 8,
            string_len: 16,
            string_val: 24,
            op_lineno: 24,
        })
    }

    /// Bytes of a `zend_execute_data` read to walk it.
    pub fn execute_data_read(&self) -> u32 {
        [self.ex_opline, self.ex_func, self.ex_this_type_info, self.ex_prev].into_iter().max().unwrap_or(0) + 8
    }

    /// Bytes of a `zend_function` read to name it (through `line_end`).
    pub fn function_read(&self) -> u32 {
        [self.func_type, self.func_name, self.func_scope, self.op_array_filename, self.op_array_line_start]
            .into_iter()
            .max()
            .unwrap_or(0)
            + 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(PhpVersion::parse("8.2.36"), Some(PhpVersion::new(8, 2, 36)));
        assert_eq!(PhpVersion::parse("7.4.33-1+deb11u5"), Some(PhpVersion::new(7, 4, 33)));
        assert_eq!(PhpVersion::parse("8.3.0RC1"), Some(PhpVersion::new(8, 3, 0)));
        assert_eq!(PhpVersion::parse("8.2"), None);
        assert_eq!(PhpVersion::parse("x.2.1"), None);
        assert_eq!(PhpVersion::parse("8.2.1000"), None);
    }

    #[test]
    fn supports_7_4_to_8_4_only() {
        assert!(PhpLayout::for_version(PhpVersion::new(7, 3, 33)).is_err());
        assert!(PhpLayout::for_version(PhpVersion::new(8, 5, 0)).is_err());
        let op_array = |v| {
            let l = PhpLayout::for_version(v).unwrap();
            (l.op_array_filename, l.op_array_line_start)
        };
        assert_eq!(op_array(PhpVersion::new(7, 4, 0)), (136, 144));
        assert_eq!(op_array(PhpVersion::new(8, 1, 2)), (144, 152));
        assert_eq!(op_array(PhpVersion::new(8, 2, 36)), (152, 160));
        assert_eq!(op_array(PhpVersion::new(8, 3, 1)), (144, 152));
        assert_eq!(op_array(PhpVersion::new(8, 4, 255)), (168, 176));
    }

    #[test]
    fn read_sizes_cover_every_field() {
        let l = PhpLayout::for_version(PhpVersion::new(8, 2, 0)).unwrap();
        assert_eq!(l.execute_data_read(), 56);
        assert_eq!(l.function_read(), 168);
    }
}
