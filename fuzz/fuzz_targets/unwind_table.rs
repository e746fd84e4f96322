//! `.eh_frame` / `.debug_frame` -> stack deltas. The first byte picks how
//! the rest is presented: a whole ELF file, or the bytes of one section
//! in a minimal ELF (`.eh_frame`, `.debug_frame`, or `.eh_frame_hdr` +
//! `.eh_frame` found through `PT_GNU_EH_FRAME` only).
#![no_main]

use libfuzzer_sys::fuzz_target;
use profiler_elf::ElfFile;
use profiler_fuzz::{elf_with_sections, split_at_marker};

const TEXT: [u8; 64] = [0x90; 64];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode % 4 {
        0 => rest.to_vec(),
        1 => elf_with_sections(&[(".eh_frame", rest), (".text", &TEXT)], None).0,
        2 => elf_with_sections(&[(".debug_frame", rest), (".text", &TEXT)], None).0,
        _ => {
            let (hdr, frames) = split_at_marker(rest, b"EHFR");
            // Unrecognised names: found through the program header only.
            elf_with_sections(&[("hdr", hdr), ("frames", frames), (".text", &TEXT)], Some("hdr")).0
        }
    };
    let Ok(elf) = ElfFile::from_bytes(file) else {
        return;
    };
    let table = elf.unwind_table();
    let addresses: Vec<u64> = table.deltas.iter().map(|d| d.address).collect();
    assert!(addresses.windows(2).all(|w| w[0] <= w[1]), "deltas sorted");
    for d in table.deltas.iter().take(256) {
        let _ = table.lookup(d.address);
    }
    let _ = table.distinct_rules();
    // Go's tables merge into the CFI table.
    let (merged, _) = profiler_process::__fuzz::with_go_tables(&elf, table);
    let merged: Vec<u64> = merged.deltas.iter().map(|d| d.address).collect();
    assert!(merged.windows(2).all(|w| w[0] <= w[1]), "merged deltas sorted");
});
