//! What a libruby that hides its internals still shows in its code.
//!
//! Debian's stripped `libruby-3.3.so` (3.3.8 in Debian 13 and unstable)
//! exports none of `ruby_current_ec`, `ruby_current_vm_ptr` and
//! `rb_vm_exec` (`readelf --dyn-syms`), which 3.1's did; its
//! `ruby_current_ec` is reached with
//! the local-dynamic TLS model (a `R_X86_64_DTPMOD64` relocation with no
//! symbol, the offset an immediate in the code). The exported
//! `rb_iseq_eval` reads it and ends by tail-calling `rb_vm_exec` (the
//! body of `rb_iseq_eval` in `vm.c`: `GET_EC()`, `vm_set_top_stack`,
//! `vm_exec`), so both are found there:
//!
//! ```text
//! lea  rdi, [rip + DTPMOD64 slot]   48 8d 3d disp32
//! call __tls_get_addr               e8 rel32 | ff 15 disp32
//! ...
//! mov  r64, [rax + offset]          48/4c 8b modrm(mod 01/10, rm rax) disp
//! ...
//! pop  r15                          41 5f
//! jmp  rb_vm_exec                   e9 rel32
//! ```
//!
//! The bytes are matched, not decoded: each find is checked (the slot
//! must carry a `DTPMOD64` relocation, the offset must lie in the
//! file's `PT_TLS` block, the jump must land on the start of an
//! `.eh_frame` FDE outside `rb_iseq_eval`) and the live tests prove them
//! on the builds they run. x86-64 only.

use super::tls::{dtpmod_slots, RubyTls};
use profiler_elf::ElfFile;

/// `PT_TLS`.
const PT_TLS: u32 = 7;
/// How far after the `__tls_get_addr` call the load from its result is
/// looked for (3.3.8: 18 bytes, after three unrelated loads).
const LOAD_WINDOW: usize = 48;

/// `ruby_current_ec`'s access and `rb_vm_exec`'s extent, as
/// `rb_iseq_eval`'s code shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoundInCode {
    /// Local-dynamic access of `ruby_current_ec`.
    pub tls: Option<RubyTls>,
    /// `[start, end)` of `rb_vm_exec` (its FDE).
    pub exec_range: Option<(u64, u64)>,
}

/// Reads `rb_iseq_eval`'s code; nothing found when the file does not
/// export it or its code has another shape.
pub fn from_rb_iseq_eval(elf: &ElfFile) -> FoundInCode {
    let Some((start, size)) = elf.function_symbol("rb_iseq_eval") else { return FoundInCode::default() };
    let Some(code) = elf.bytes_at_vaddr(start, size.min(4096) as usize) else { return FoundInCode::default() };
    let tls_size = elf.program_headers().iter().find(|p| p.p_type == PT_TLS).map_or(0, |p| p.memsz);
    FoundInCode {
        tls: local_dynamic_load(code, start, &dtpmod_slots(elf), tls_size),
        exec_range: tail_call_target(code, start).and_then(|t| elf.fde_extent(t)),
    }
}

fn rel32(code: &[u8], at: usize) -> Option<i64> {
    Some(i64::from(i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?)))
}

/// The first `lea rdi, [rip+slot]; call __tls_get_addr; ... mov r64,
/// [rax+offset]` whose slot is one of `dtpmod_slots` and whose offset
/// holds a word of the `tls_size`-byte block.
fn local_dynamic_load(code: &[u8], start: u64, dtpmod_slots: &[u64], tls_size: u64) -> Option<RubyTls> {
    (0..code.len().saturating_sub(7)).find_map(|i| {
        if code[i..i + 3] != [0x48, 0x8d, 0x3d] {
            return None;
        }
        let next = i + 7;
        let slot = (start + next as u64).checked_add_signed(rel32(code, i + 3)?)?;
        if !dtpmod_slots.contains(&slot) {
            return None;
        }
        // `call rel32` or `call [rip+disp32]` (-fno-plt).
        let after_call = match code.get(next..next + 2)? {
            [0xe8, _] => next + 5,
            [0xff, 0x15] => next + 6,
            _ => return None,
        };
        let window = code.get(after_call..(after_call + LOAD_WINDOW).min(code.len()))?;
        let offset = (0..window.len().saturating_sub(3)).find_map(|j| {
            let (rex, op, modrm) = (window[j], window[j + 1], window[j + 2]);
            if !matches!(rex, 0x48 | 0x4c) || op != 0x8b {
                return None;
            }
            match modrm & 0xc7 {
                0x40 => Some(u64::from(*window.get(j + 3)?)),
                0x80 => Some(u64::from(u32::from_le_bytes(window.get(j + 3..j + 7)?.try_into().ok()?))),
                _ => None,
            }
        })?;
        (offset % 8 == 0 && offset + 8 <= tls_size).then_some(RubyTls::Dynamic { module_slot: slot, offset })
    })
}

/// The target of the first `pop; jmp rel32` out of `code` (a tail call
/// after the epilogue's pops).
fn tail_call_target(code: &[u8], start: u64) -> Option<u64> {
    let end = start + code.len() as u64;
    (1..code.len().saturating_sub(4)).find_map(|i| {
        let pop = (0x58..=0x5f).contains(&code[i - 1]);
        if !pop || code[i] != 0xe9 {
            return None;
        }
        let target = (start + i as u64 + 5).checked_add_signed(rel32(code, i + 1)?)?;
        (target < start || target >= end).then_some(target)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rb_iseq_eval` of Debian's libruby-3.3.so.3.3.8 (at 0x2854b0),
    /// its first 0x9e bytes as `objdump -d` shows them, shortened to the
    /// instructions read here and their neighbours.
    fn libruby_3_3_8() -> (Vec<u8>, u64) {
        let start = 0x2854b0;
        let mut code = vec![0x90u8; 0x93];
        let mut put = |at: u64, bytes: &[u8]| {
            let i = (at - start) as usize;
            code[i..i + bytes.len()].copy_from_slice(bytes);
        };
        // lea rdi,[rip+0x1da171] (0x45f648); call 0x3f700
        put(0x2854d0, &[0x48, 0x8d, 0x3d, 0x71, 0xa1, 0x1d, 0x00]);
        put(0x2854d7, &[0xe8, 0x24, 0xa2, 0xdb, 0xff]);
        // mov r15d,[rbp+0x100]; mov r14d,[rbp+0xe8]; mov rbp,[rbp+8]
        put(0x2854dc, &[0x44, 0x8b, 0xbd, 0x00, 0x01, 0x00, 0x00]);
        put(0x2854e3, &[0x44, 0x8b, 0xb5, 0xe8, 0x00, 0x00, 0x00]);
        put(0x2854ea, &[0x48, 0x8b, 0x6d, 0x08]);
        // mov rbx,[rax+0x10]: ruby_current_ec
        put(0x2854ee, &[0x48, 0x8b, 0x58, 0x10]);
        // pop r15; jmp 0x284aa0
        put(0x28553c, &[0x41, 0x5f]);
        put(0x28553e, &[0xe9, 0x5d, 0xf5, 0xff, 0xff]);
        (code, start)
    }

    #[test]
    fn the_tls_load_and_the_tail_call_of_3_3_8() {
        let (code, start) = libruby_3_3_8();
        let tls = local_dynamic_load(&code, start, &[0x45fab8, 0x45f648], 0x18);
        assert_eq!(tls, Some(RubyTls::Dynamic { module_slot: 0x45f648, offset: 0x10 }));
        assert_eq!(tail_call_target(&code, start), Some(0x284aa0));
    }

    #[test]
    fn a_slot_without_its_relocation_or_an_offset_past_the_block_is_refused() {
        let (code, start) = libruby_3_3_8();
        assert_eq!(local_dynamic_load(&code, start, &[0x45fab8], 0x18), None);
        assert_eq!(local_dynamic_load(&code, start, &[0x45f648], 0x10), None);
        assert_eq!(tail_call_target(&code[..0x8e], start), None);
    }

    /// Debian 12's libruby 3.1 exports both: its `rb_iseq_eval` (general
    /// dynamic TLS, `jmp rb_vm_exec@plt`) shows neither by this shape,
    /// and nothing wrong is found.
    #[test]
    fn libruby_3_1_shows_nothing_wrong() {
        let path = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1";
        let Ok(elf) = ElfFile::open(path) else { return };
        let found = from_rb_iseq_eval(&elf);
        assert_eq!(found.tls, None);
        // The PLT stub has no FDE of its own.
        assert_eq!(found.exec_range, None);
    }
}
