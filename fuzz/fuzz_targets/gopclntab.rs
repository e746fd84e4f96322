//! `.gopclntab`: the table's parser (functions, names, files, lines,
//! inlining, pcsp) and the Go stack deltas built from it. The first byte
//! picks a whole ELF file, or a minimal ELF whose `.gopclntab` is the
//! input up to the marker `TEXT` and whose `.text` is the rest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profiler_elf::{ElfFile, GoPclntab, UnwindTable};
use profiler_fuzz::{elf_with_sections, split_at_marker};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode % 2 {
        0 => rest.to_vec(),
        _ => {
            let (table, text) = split_at_marker(rest, b"TEXT");
            elf_with_sections(&[(".gopclntab", table), (".text", text)], None).0
        }
    };
    let Ok(elf) = ElfFile::from_bytes(file) else {
        return;
    };
    if let Ok(Some(tab)) = GoPclntab::find(&elf) {
        let _ = tab.text_range();
        for f in tab.funcs().take(4096) {
            let _ = tab.func_name(&f);
            let _ = tab.sp_deltas(&f).take(4096).count();
            let _ = tab.sp_delta(&f, f.entry);
            let _ = tab.file_line(&f, f.entry);
            let _ = tab.frames(f.entry);
            let _ = tab.frames(f.end.wrapping_sub(1));
            let _ = tab.find_func(f.entry);
        }
        let layout = tab.layout();
        let _ = layout.bind(&elf).map(|t| t.len());
    }
    let _ = profiler_process::__fuzz::with_go_tables(&elf, UnwindTable::default());
});
