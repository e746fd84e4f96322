//! Per-version offsets of the Perl structures the walk reads, for 64-bit
//! little-endian Linux builds (x86_64, aarch64).
//!
//! Perl exports no offset tables, so these are facts taken from the
//! public headers of each release (`intrpvar.h`, `cop.h`, `cv.h`, `gv.h`,
//! `hv.h`, `sv.h`, `hv_func.h`) and cross-checked with the public notes of
//! the OpenTelemetry eBPF profiler; 5.36 is proven against the live
//! interpreter by `tests/perl_live.rs`, 5.40 and 5.42 by `tests/perl.rs`
//! in Debian 13's and unstable's root file systems, the others rest on
//! facts only (see `docs/perl.md`). 5.42 changed none of them: its
//! `CORE/*.h` (Debian's 5.42.3) against tag v5.40.0 differ, in what is
//! read here, only by `COP.cop_features` becoming a one-`U32` struct
//! (same size, after `cop_file`).

use std::fmt;

/// The oldest release with a layout here.
pub const MIN_PERL: PerlVersion = PerlVersion { major: 5, minor: 28, patch: 0 };
/// The newest release with a layout here (any 5.42.x).
pub const MAX_PERL: PerlVersion = PerlVersion { major: 5, minor: 42, patch: u8::MAX };
/// Development releases refused although in range: 5.41.3-5.41.x
/// renumbered the context types (`CXt_SUB` 9 -> 7, given/when removed;
/// Perl's git, tag v5.41.3, `cop.h`), 5.42.0 restored them.
const REFUSED_DEVELOPMENT_MINOR: u8 = 41;

/// A Perl release, from `PL_revision`, `PL_version`, `PL_subversion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PerlVersion {
    /// Always 5 here.
    pub major: u8,
    /// 36 for 5.36.0.
    pub minor: u8,
    /// 0 for 5.36.0.
    pub patch: u8,
}

impl PerlVersion {
    /// Shorthand for a `5.minor.0` release.
    pub const fn five(minor: u8) -> Self {
        PerlVersion { major: 5, minor, patch: 0 }
    }
}

impl fmt::Display for PerlVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Constants that do not move between the supported releases.
pub mod consts {
    /// `SVTYPEMASK`: the type bits of `sv_flags`.
    pub const SVT_MASK: u32 = 0x1f;
    /// `SVt_PVGV`.
    pub const SVT_PVGV: u32 = 9;
    /// `SVt_PVHV`.
    pub const SVT_PVHV: u32 = 12;
    /// `SVt_PVCV`.
    pub const SVT_PVCV: u32 = 13;
    /// `SVf_OOK` on a hash: it has the auxiliary struct holding its name.
    pub const SVF_OOK: u32 = 0x0200_0000;
    /// `CVf_NAMED`: `xcv_gv_u` holds a name `HEK*`, not a `GV*`.
    pub const CVF_NAMED: u32 = 0x8000;
    /// `CXTYPEMASK`: the type bits of `cx_type`.
    pub const CXTYPEMASK: u8 = 0xf;
    /// `CXt_SUB`: a call of a Perl sub.
    pub const CXT_SUB: u8 = 9;
    /// `CXt_FORMAT`: a `write` running a format (named like a sub).
    pub const CXT_FORMAT: u8 = 10;
    /// `CXt_EVAL`: `eval`, `require`, `do FILE`.
    pub const CXT_EVAL: u8 = 11;
    /// `CXp_SUB_RE_FAKE` on a `CXt_SUB`: the fake sub of a `(?{ })`.
    pub const CXP_SUB_RE_FAKE: u8 = 0x80;
    /// `CXp_EVALBLOCK` on a `CXt_EVAL`: `eval { }`, not `eval ''`.
    pub const CXP_EVALBLOCK: u8 = 0x40;
    /// `CXp_TRY` on a `CXt_EVAL`: a `try { }` block (5.34+).
    pub const CXP_TRY: u8 = 0x80;
}

/// Where the walk finds things in one release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerlLayout {
    /// The release these offsets are for.
    pub version: PerlVersion,
    /// Threaded (`MULTIPLICITY`): the interpreter variables live in a
    /// `PerlInterpreter` struct; otherwise they are globals.
    pub threaded: bool,
    /// `PerlInterpreter.Icurcop` (threaded builds).
    pub interp_curcop: u32,
    /// `PerlInterpreter.Icurstackinfo` (threaded builds).
    pub interp_curstackinfo: u32,
    /// `PERL_SI.si_cxstack`.
    pub si_cxstack: u32,
    /// `PERL_SI.si_prev`: the stack this one was pushed over (sort,
    /// signal handlers, overloading, ...).
    pub si_prev: u32,
    /// `PERL_SI.si_cxix`: the index of the top context, -1 when empty.
    pub si_cxix: u32,
    /// Bytes read of a `PERL_SI`.
    pub si_size: u32,
    /// `PERL_CONTEXT.cx_type` (a byte).
    pub cx_type: u32,
    /// `PERL_CONTEXT.blk_oldcop`: the statement running in the caller.
    pub cx_blk_oldcop: u32,
    /// `PERL_CONTEXT.blk_sub.cv`.
    pub cx_blk_sub_cv: u32,
    /// `sizeof(PERL_CONTEXT)`.
    pub cx_size: u32,
    /// `COP.cop_line`.
    pub cop_line: u32,
    /// `COP.cop_file` (`char *`, threaded) or `COP.cop_filegv` (`GV *`).
    pub cop_file: u32,
    /// Bytes read of a `COP`.
    pub cop_size: u32,
    /// `SV.sv_any`: the body.
    pub sv_any: u32,
    /// `SV.sv_flags`.
    pub sv_flags: u32,
    /// `SV.sv_u`: for a hash, its bucket array.
    pub sv_u: u32,
    /// Bytes read of an SV head.
    pub sv_size: u32,
    /// `XPVCV.xcv_stash`.
    pub xcv_stash: u32,
    /// `XPVCV.xcv_start_u` (`CvSTART`: the sub's first op).
    pub xcv_start: u32,
    /// `XPVCV.xcv_gv_u`.
    pub xcv_gv_u: u32,
    /// `XPVCV.xcv_file` (`char *`: the file the sub was defined in).
    pub xcv_file: u32,
    /// `XPVCV.xcv_flags` (a `U32`).
    pub xcv_flags: u32,
    /// Bytes read of an `XPVCV`.
    pub xpvcv_size: u32,
    /// `XPVGV.xiv_u.xivu_namehek`.
    pub xgv_namehek: u32,
    /// `XPVGV.xnv_u.xgv_stash`.
    pub xgv_stash: u32,
    /// `XPVHV.xhv_max`: buckets minus one (the aux struct follows the
    /// buckets before 5.35).
    pub xhv_max: u32,
    /// Offset of `struct xpvhv_aux` in `struct xpvhv_with_aux` (5.35+);
    /// `None` when it follows the bucket array.
    pub xhv_aux_in_body: Option<u32>,
    /// `xpvhv_aux.xhv_name_u`.
    pub xhv_name_u: u32,
    /// `xpvhv_aux.xhv_name_count`.
    pub xhv_name_count: u32,
    /// `HEK.hek_len`.
    pub hek_len: u32,
    /// `HEK.hek_key`.
    pub hek_key: u32,
}

impl PerlLayout {
    /// The layout of `version`, if supported.
    pub fn for_version(version: PerlVersion, threaded: bool) -> Option<PerlLayout> {
        if version < MIN_PERL || version > MAX_PERL || version.major != 5 || version.minor == REFUSED_DEVELOPMENT_MINOR
        {
            return None;
        }
        // intrpvar.h: Icurcop and Icurstackinfo sit 16 bytes lower from
        // 5.34 on (variables ahead of them changed; not re-derived here).
        let (interp_curcop, interp_curstackinfo) =
            if version >= PerlVersion::five(34) { (0xd0, 0xe0) } else { (0xe0, 0xf0) };
        // cop.h: 5.32 grew `struct block` (`blk_old_cxsubix`), which
        // precedes `blk_sub` in every context.
        let (cx_blk_sub_cv, cx_size) = if version >= PerlVersion::five(32) { (0x48, 0x68) } else { (0x40, 0x60) };
        Some(PerlLayout {
            version,
            threaded,
            interp_curcop,
            interp_curstackinfo,
            si_cxstack: 0x08,
            si_prev: 0x10,
            si_cxix: 0x20,
            si_size: 0x28,
            cx_type: 0,
            cx_blk_oldcop: 0x10,
            cx_blk_sub_cv,
            cx_size,
            cop_line: 0x24,
            cop_file: 0x30,
            cop_size: 0x38,
            sv_any: 0,
            sv_flags: 0x0c,
            sv_u: 0x10,
            sv_size: 0x18,
            xcv_stash: 0x20,
            xcv_start: 0x28,
            xcv_gv_u: 0x38,
            xcv_file: 0x40,
            xcv_flags: 0x5c,
            xpvcv_size: 0x60,
            xgv_namehek: 0x20,
            xgv_stash: 0x28,
            xhv_max: 0x18,
            xhv_aux_in_body: (version >= PerlVersion::five(35)).then_some(0x20),
            xhv_name_u: 0,
            xhv_name_count: 0x1c,
            hek_len: 4,
            hek_key: 8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_outside_the_range_have_no_layout() {
        assert!(PerlLayout::for_version(PerlVersion::five(26), true).is_none());
        assert!(PerlLayout::for_version(PerlVersion::five(44), true).is_none());
        assert!(PerlLayout::for_version(PerlVersion { major: 5, minor: 41, patch: 5 }, true).is_none());
        assert!(PerlLayout::for_version(PerlVersion { major: 7, minor: 30, patch: 0 }, true).is_none());
        let l = PerlLayout::for_version(PerlVersion { major: 5, minor: 40, patch: 2 }, false).unwrap();
        assert!(!l.threaded);
    }

    #[test]
    fn offsets_move_where_the_headers_changed() {
        let v = |m| PerlLayout::for_version(PerlVersion::five(m), true).unwrap();
        assert_eq!((v(28).interp_curcop, v(28).cx_blk_sub_cv, v(28).cx_size), (0xe0, 0x40, 0x60));
        assert_eq!((v(32).interp_curcop, v(32).cx_blk_sub_cv, v(32).cx_size), (0xe0, 0x48, 0x68));
        assert_eq!((v(36).interp_curcop, v(36).interp_curstackinfo), (0xd0, 0xe0));
        assert_eq!(v(34).xhv_aux_in_body, None);
        assert_eq!(v(36).xhv_aux_in_body, Some(0x20));
        // 5.42 reads as 5.40.
        let (v40, v42) = (v(40), v(42));
        assert_eq!(PerlLayout { version: v40.version, ..v42 }, v40);
    }
}
