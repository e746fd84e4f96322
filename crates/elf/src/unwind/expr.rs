//! Recognizing the few DWARF expressions that x86-64 CFI uses in practice.
//!
//! Opcode values are from the DWARF 5 specification, section 7.7.1.

use super::rules::CfaBase;
use crate::arch::{DWARF_RA, DWARF_RBP, DWARF_RSP};

const DW_OP_DEREF: u8 = 0x06;
const DW_OP_AND: u8 = 0x1a;
const DW_OP_PLUS: u8 = 0x22;
const DW_OP_PLUS_UCONST: u8 = 0x23;
const DW_OP_SHL: u8 = 0x24;
const DW_OP_GE: u8 = 0x2a;
const DW_OP_LIT0: u8 = 0x30;
const DW_OP_BREG0: u8 = 0x70;
/// The DWARF registers of `DW_OP_bregN` operands (x86-64: crate::arch).
const REG_RBP: u8 = DWARF_RBP as u8;
const REG_RSP: u8 = DWARF_RSP as u8;
const REG_RIP: u8 = DWARF_RA as u8;

/// A CFA expression we can express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CfaExpr {
    /// `DW_OP_bregN inner; DW_OP_deref; [DW_OP_plus_uconst outer]`.
    Deref { base: CfaBase, inner: i64, outer: u64 },
    /// The GNU ld `.plt` expression with the given `DW_OP_litN` threshold.
    Plt { threshold: u8 },
}

/// A cursor over expression bytes.
struct Ops<'a> {
    bytes: &'a [u8],
}

impl Ops<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(b)
    }

    fn uleb(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            value |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn sleb(&mut self) -> Option<i64> {
        let mut value = 0i64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift >= 64 {
                return None;
            }
            value |= i64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Some(value);
            }
        }
    }

    /// `DW_OP_bregN` with `N` rsp or rbp: the base and the offset.
    fn breg_sp_fp(&mut self) -> Option<(CfaBase, i64)> {
        let base = match self.u8()?.checked_sub(DW_OP_BREG0)? {
            REG_RSP => CfaBase::Rsp,
            REG_RBP => CfaBase::Rbp,
            _ => return None,
        };
        Some((base, self.sleb()?))
    }

    fn done(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The GNU ld PLT CFA expression, except for the `DW_OP_litN` threshold:
/// `DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litN;
/// DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus`.
const PLT_PREFIX: [u8; 6] = [DW_OP_BREG0 + REG_RSP, 8, DW_OP_BREG0 + REG_RIP, 0, DW_OP_LIT0 + 15, DW_OP_AND];
const PLT_SUFFIX: [u8; 4] = [DW_OP_GE, DW_OP_LIT0 + 3, DW_OP_SHL, DW_OP_PLUS];

/// Recognizes a `DW_CFA_def_cfa_expression` body.
pub(crate) fn parse_cfa_expression(bytes: &[u8]) -> Option<CfaExpr> {
    if let Some(rest) = bytes.strip_prefix(&PLT_PREFIX) {
        if let [lit, suffix @ ..] = rest {
            if suffix == PLT_SUFFIX && (DW_OP_LIT0..DW_OP_LIT0 + 16).contains(lit) {
                return Some(CfaExpr::Plt { threshold: lit - DW_OP_LIT0 });
            }
        }
        return None;
    }
    let mut ops = Ops { bytes };
    let (base, inner) = ops.breg_sp_fp()?;
    if ops.u8()? != DW_OP_DEREF {
        return None;
    }
    let mut outer = 0;
    if !ops.done() {
        if ops.u8()? != DW_OP_PLUS_UCONST {
            return None;
        }
        outer = ops.uleb()?;
    }
    ops.done().then_some(CfaExpr::Deref { base, inner, outer })
}

/// Recognizes a `DW_CFA_expression rbp` body of the form `DW_OP_breg6 N`
/// (rbp saved at this frame's `rbp + N`) and returns `N`.
pub(crate) fn parse_rbp_expression(bytes: &[u8]) -> Option<i64> {
    let mut ops = Ops { bytes };
    let (base, offset) = ops.breg_sp_fp()?;
    (base == CfaBase::Rbp && ops.done()).then_some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plt_forms() {
        let mut e = vec![0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(parse_cfa_expression(&e), Some(CfaExpr::Plt { threshold: 11 }));
        e[6] = 0x3a;
        assert_eq!(parse_cfa_expression(&e), Some(CfaExpr::Plt { threshold: 10 }));
        e[1] = 0x10; // breg7 16: not the PLT form
        assert_eq!(parse_cfa_expression(&e), None);
        e[1] = 0x08;
        for cut in 0..e.len() {
            assert_eq!(parse_cfa_expression(&e[..cut]), None);
        }
        e.push(0x22);
        assert_eq!(parse_cfa_expression(&e), None);
    }

    #[test]
    fn deref_forms() {
        // DW_OP_breg6 -8; DW_OP_deref (GCC DRAP)
        assert_eq!(
            parse_cfa_expression(&[0x76, 0x78, 0x06]),
            Some(CfaExpr::Deref { base: CfaBase::Rbp, inner: -8, outer: 0 })
        );
        // DW_OP_breg7 16; DW_OP_deref; DW_OP_plus_uconst 200
        assert_eq!(
            parse_cfa_expression(&[0x77, 0x10, 0x06, 0x23, 0xc8, 0x01]),
            Some(CfaExpr::Deref { base: CfaBase::Rsp, inner: 16, outer: 200 })
        );
        // breg3 (rbx) is not expressible; neither is a trailing op.
        assert_eq!(parse_cfa_expression(&[0x73, 0x00, 0x06]), None);
        assert_eq!(parse_cfa_expression(&[0x76, 0x78, 0x06, 0x06]), None);
        assert_eq!(parse_cfa_expression(&[0x76, 0x78]), None);
        assert_eq!(
            parse_cfa_expression(&[0x76, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x06]),
            None
        );
        assert_eq!(parse_cfa_expression(&[]), None);
    }

    #[test]
    fn rbp_forms() {
        assert_eq!(parse_rbp_expression(&[0x76, 0x00]), Some(0));
        assert_eq!(parse_rbp_expression(&[0x76, 0x70]), Some(-16));
        assert_eq!(parse_rbp_expression(&[0x77, 0x00]), None);
        assert_eq!(parse_rbp_expression(&[0x76, 0x00, 0x06]), None);
        assert_eq!(parse_rbp_expression(&[0x76]), None);
    }
}
