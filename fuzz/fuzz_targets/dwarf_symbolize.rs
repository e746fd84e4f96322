//! The symbolizer on one file: ELF symbols, Go tables and DWARF (units,
//! line programs, inlined functions, compressed sections). The first
//! byte picks a whole ELF file, or a minimal ELF whose DWARF sections are
//! the input's parts separated by the marker `|SEC|`.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use profiler_elf::ElfFile;
use profiler_fuzz::{elf_with_sections, split_at_marker, BASE};
use profiler_symbolize::{DebugConfig, FileSource, FileSymbolizer};

const NAMES: [&str; 9] = [
    ".debug_info",
    ".debug_abbrev",
    ".debug_line",
    ".debug_str",
    ".debug_aranges",
    ".debug_rnglists",
    ".debug_line_str",
    ".debug_ranges",
    ".debug_str_offsets",
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode % 2 {
        0 => rest.to_vec(),
        _ => {
            let mut parts: Vec<(&str, &[u8])> = Vec::new();
            let mut rest = rest;
            for name in NAMES {
                let (part, tail) = split_at_marker(rest, b"|SEC|");
                parts.push((name, part));
                rest = tail;
            }
            parts.push((".text", &[0x90; 256]));
            elf_with_sections(&parts, None).0
        }
    };
    let Ok(elf) = ElfFile::from_bytes(file) else {
        return;
    };
    // No debug roots: nothing is looked up on this machine's disk.
    let config = DebugConfig { use_dwarf: true, debug_roots: vec![], max_dwarf_bytes: 64 << 20 };
    let sym = FileSymbolizer::from_elf(Arc::new(elf), &FileSource::new("/nonexistent/fuzz"), &config);
    let _ = sym.info();
    for i in 0..64u64 {
        let _ = sym.symbolize(BASE + i * 37);
        let _ = sym.symbolize(0x1000 + i * 4099);
    }
    let _ = sym.cost();
});
