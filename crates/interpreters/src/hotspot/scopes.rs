//! The Java methods a pc of compiled code runs: the nmethod's pc
//! descriptor for the pc names a scope, and each scope its caller's, from
//! the innermost inlined method out to the nmethod's own method.
//!
//! Facts (the JDK's `pcDesc.hpp`, `scopeDesc.cpp`, `debugInfo.hpp`,
//! `nmethod.hpp`): `PcDesc`s are sorted by `_pc_offset` (from the code's
//! start); the one for a pc is the first whose offset is at or above it
//! (exact for return addresses, which is what a stack holds). Its
//! `_scope_decode_offset` points into the scope data, a stream of
//! UNSIGNED5 numbers: the caller scope's offset (0: none), the method's
//! index in the nmethod's metadata (1-based), `bci + 1`, then data this
//! module does not need.

use super::layout::{HotspotLayout, NmethodData};
use super::linetable::Unsigned5;
use super::remote::{read_bytes, u32_at, u64_at};
use super::walk::CodeBlobInfo;
use crate::memory::ProcessMemory;

/// Most pc descriptors read from one nmethod.
const MAX_PC_DESCS: u64 = 1 << 16;
/// Most scope data, or metadata, bytes read from one nmethod.
const MAX_SECTION: u64 = 4 << 20;
/// Deepest inlining followed (HotSpot's own limit is 15 by default).
const MAX_INLINE_DEPTH: usize = 64;

/// A method a compiled pc runs, and where in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// `Method*`.
    pub method: u64,
    /// Bytecode index (`None` at the method's entry, bci -1).
    pub bci: Option<u32>,
}

/// The sections of one nmethod: `(start, end)` process addresses.
struct Sections {
    pcs: (u64, u64),
    scopes: (u64, u64),
    metadata: (u64, u64),
}

fn sections(memory: &dyn ProcessMemory, l: &HotspotLayout, nmethod: u64) -> Option<Sections> {
    let header = read_bytes(memory, nmethod, l.nmethod_sizeof.max(l.code_blob_sizeof) as usize)?;
    let word = |off: u32| u64_at(&header, off as usize);
    let int = |off: u32| u32_at(&header, off as usize).map(u64::from);
    Some(match l.nmethod_data {
        NmethodData::InBlob { scopes_data_begin, scopes_pcs_offset, dependencies_offset, metadata_offset } => {
            let scopes_begin = word(scopes_data_begin)?;
            let pcs = nmethod.wrapping_add(int(scopes_pcs_offset)?);
            Sections {
                pcs: (pcs, nmethod.wrapping_add(int(dependencies_offset)?)),
                scopes: (scopes_begin, pcs),
                metadata: (nmethod.wrapping_add(int(metadata_offset)?), scopes_begin),
            }
        }
        NmethodData::Immutable {
            immutable_data,
            immutable_data_size,
            scopes_pcs_offset,
            scopes_data_offset,
            mutable_data,
            mutable_data_size,
            relocation_size,
        } => {
            let base = word(immutable_data)?;
            let size = int(immutable_data_size)?;
            let (pcs, data) = (int(scopes_pcs_offset)?, int(scopes_data_offset)?);
            // Each section ends where the next one starts, or at the end.
            let end_of = |start: u64| {
                if pcs > start {
                    pcs
                } else if data > start {
                    data
                } else {
                    size
                }
            };
            let mutable = word(mutable_data)?;
            Sections {
                pcs: (base.wrapping_add(pcs), base.wrapping_add(end_of(pcs).min(size))),
                scopes: (base.wrapping_add(data), base.wrapping_add(end_of(data).min(size))),
                metadata: (mutable.wrapping_add(int(relocation_size)?), mutable.wrapping_add(int(mutable_data_size)?)),
            }
        }
    })
}

/// Reads `[start, end)` if it is a sane size.
fn section(memory: &dyn ProcessMemory, (start, end): (u64, u64), max: u64) -> Option<Vec<u8>> {
    let len = end.checked_sub(start)?;
    if len > max {
        return None;
    }
    read_bytes(memory, start, len as usize)
}

/// The scopes `pc` of `blob` (an nmethod) runs, innermost first. `Err`
/// when the nmethod's data cannot be read or does not hold together; an
/// nmethod without a descriptor for `pc` gives its own method alone.
pub fn compiled_scopes(
    memory: &dyn ProcessMemory,
    l: &HotspotLayout,
    blob: &CodeBlobInfo,
    pc: u64,
) -> Result<Vec<Scope>, String> {
    scopes_near(memory, l, blob, pc).map(|(scopes, _)| scopes)
}

/// As [`compiled_scopes`], and whether a descriptor is at `pc` itself
/// (always so at a return address). Without one the scopes are those of
/// the next descriptor, or the nmethod's own method: a guess, since the
/// JIT records scopes only at safepoints unless
/// `-XX:+DebugNonSafepoints`.
pub fn scopes_near(
    memory: &dyn ProcessMemory,
    l: &HotspotLayout,
    blob: &CodeBlobInfo,
    pc: u64,
) -> Result<(Vec<Scope>, bool), String> {
    let own = blob.method.ok_or("not an nmethod")?;
    let s = sections(memory, l, blob.address).ok_or("cannot read the nmethod")?;
    let desc_size = u64::from(l.pc_desc_sizeof);
    let pcs = section(memory, s.pcs, MAX_PC_DESCS * desc_size).ok_or("bad pc descriptor table")?;
    let target = pc.wrapping_sub(blob.code_begin);
    let mut decode_offset = None;
    let mut exact = false;
    for desc in pcs.chunks_exact(desc_size as usize) {
        let Some(offset) = u32_at(desc, l.pc_desc_pc_offset as usize) else { break };
        let offset = offset as i32;
        if offset >= 0 && offset as u64 >= target {
            decode_offset = u32_at(desc, l.pc_desc_scope_decode_offset as usize);
            exact = offset as u64 == target;
            break;
        }
    }
    let Some(mut decode_offset) = decode_offset.filter(|&d| d != 0) else {
        return Ok((vec![Scope { method: own, bci: None }], false));
    };
    let scopes = section(memory, s.scopes, MAX_SECTION).ok_or("bad scope data")?;
    let metadata = section(memory, s.metadata, MAX_SECTION).ok_or("bad metadata")?;
    let mut out = Vec::new();
    while out.len() < MAX_INLINE_DEPTH {
        let mut r = Unsigned5 { bytes: &scopes, at: decode_offset as usize, excluded: l.unsigned5_excluded };
        let bad = || format!("bad scope at {decode_offset}");
        let sender = r.read().ok_or_else(bad)?;
        let index = r.read().ok_or_else(bad)?;
        let bci_plus_one = r.read().ok_or_else(bad)?;
        let method = index
            .checked_sub(1)
            .and_then(|i| u64_at(&metadata, 8 * i as usize))
            .ok_or_else(|| format!("metadata index {index} of {}", metadata.len() / 8))?;
        out.push(Scope { method, bci: bci_plus_one.checked_sub(1) });
        if sender == 0 {
            if method != own {
                return Err(format!("the outermost scope is {method:#x}, the nmethod's method {own:#x}"));
            }
            return Ok((out, exact));
        }
        decode_offset = sender;
    }
    Err(format!("inlining deeper than {MAX_INLINE_DEPTH}"))
}

#[cfg(test)]
mod tests {
    use super::super::layout::jdk17_fixture;
    use super::super::remote::fake::FakeMemory;
    use super::super::walk::BlobKind;
    use super::*;

    const NM: u64 = 0x100000;
    const CODE: u64 = NM + 0x400;
    const OUTER: u64 = 0xaaa0;
    const INNER: u64 = 0xbbb0;

    /// A JDK 17 style nmethod: metadata [OUTER, INNER] at +0x180, scope
    /// data at +0x190 (`scopes`), pcs at +0x200 (pc 10 -> scope 5, pc 40
    /// -> scope 1), dependencies at +0x220.
    fn nmethod(scopes: &[u8]) -> (FakeMemory, CodeBlobInfo) {
        let mut b = vec![0u8; 0x400];
        b[120..128].copy_from_slice(&(NM + 0x190).to_le_bytes());
        b[260..264].copy_from_slice(&0x180u32.to_le_bytes());
        b[268..272].copy_from_slice(&0x200u32.to_le_bytes());
        b[272..276].copy_from_slice(&0x220u32.to_le_bytes());
        b[0x180..0x188].copy_from_slice(&OUTER.to_le_bytes());
        b[0x188..0x190].copy_from_slice(&INNER.to_le_bytes());
        b[0x190..0x190 + scopes.len()].copy_from_slice(scopes);
        for (i, (pc, scope)) in [(10u32, 5u32), (40, 1)].iter().enumerate() {
            let at = 0x200 + 16 * i;
            b[at..at + 4].copy_from_slice(&pc.to_le_bytes());
            b[at + 4..at + 8].copy_from_slice(&scope.to_le_bytes());
        }
        let mut m = FakeMemory::default();
        m.add(NM, b);
        let blob = CodeBlobInfo {
            address: NM,
            name: "nmethod".into(),
            kind: BlobKind::Nmethod,
            size: 0x800,
            frame_size: 4,
            code_begin: CODE,
            code_end: CODE + 0x100,
            method: Some(OUTER),
            deopt_handler: None,
            orig_pc_offset: None,
        };
        (m, blob)
    }

    /// Scope 1: OUTER at bci 7, no caller; scope 5: INNER at bci 2, called
    /// from scope 1.
    const SCOPES: [u8; 8] = [0, 0, 1, 8, 0, 1, 2, 3];

    #[test]
    fn inlined_methods_innermost_first() {
        let (m, blob) = nmethod(&SCOPES);
        let l = jdk17_fixture();
        let inner = Scope { method: INNER, bci: Some(2) };
        let outer = Scope { method: OUTER, bci: Some(7) };
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 10).unwrap(), [inner, outer]);
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 3).unwrap(), [inner, outer], "the next descriptor");
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 40).unwrap(), [outer]);
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 41).unwrap(), [Scope { method: OUTER, bci: None }]);
    }

    #[test]
    fn scopes_are_exact_only_at_a_descriptor() {
        let (m, blob) = nmethod(&SCOPES);
        let l = jdk17_fixture();
        let exact = |pc| scopes_near(&m, &l, &blob, CODE + pc).unwrap().1;
        assert!(exact(10) && exact(40));
        assert!(!exact(3) && !exact(11) && !exact(41), "the next descriptor, or none: a guess");
    }

    #[test]
    fn hostile_scope_data_is_an_error() {
        let l = jdk17_fixture();
        // Scope 5 names itself as its caller: a cycle.
        let (m, blob) = nmethod(&[0, 0, 1, 8, 0, 5, 2, 3]);
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 10).unwrap_err(), "inlining deeper than 64");
        // A metadata index past the metadata.
        let (m, blob) = nmethod(&[0, 0, 1, 8, 0, 1, 9, 3]);
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 10).unwrap_err(), "metadata index 9 of 2");
        // The outermost scope is not the nmethod's method.
        let (m, mut blob) = nmethod(&SCOPES);
        blob.method = Some(0x1234);
        assert!(compiled_scopes(&m, &l, &blob, CODE + 40).unwrap_err().starts_with("the outermost scope is 0xaaa0"));
        // Sections that end before they start.
        let (mut m, blob) = nmethod(&SCOPES);
        m.regions[0].1[272..276].copy_from_slice(&0x100u32.to_le_bytes());
        assert_eq!(compiled_scopes(&m, &l, &blob, CODE + 10).unwrap_err(), "bad pc descriptor table");
    }
}
