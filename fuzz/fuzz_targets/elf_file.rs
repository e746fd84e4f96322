//! The ELF reader: headers, sections, notes (build ids, debug link),
//! symbols, load segments, addresses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profiler_elf::ElfFile;

fuzz_target!(|data: &[u8]| {
    let Ok(elf) = ElfFile::from_bytes(data.to_vec()) else {
        return;
    };
    let _ = elf.gnu_build_id();
    let _ = elf.go_build_id();
    let _ = elf.gnu_debuglink();
    let _ = elf.sections_ignored();
    for s in elf.sections() {
        let _ = elf.section_data(s);
    }
    for p in elf.program_headers() {
        let _ = elf.segment_data(p);
        let _ = elf.data_from_vaddr(p.vaddr);
        let mut buf = [0u8; 16];
        let _ = elf.read_at_vaddr(p.vaddr.wrapping_add(p.filesz / 2), &mut buf);
    }
    let segments = elf.load_segments();
    for addr in [0, 0x1000, 0x40_1000, u64::MAX] {
        let _ = segments.elf_vaddr(addr, 0x40_0000, 0);
        let _ = elf.elf_vaddr(addr, 0x1000, 0x1000);
    }
    if let Ok(symbols) = elf.symbols() {
        let named: Vec<u64> = symbols.iter().take(64).map(|(a, _, _)| a).collect();
        for a in named {
            let _ = symbols.lookup(a);
            let _ = symbols.lookup(a.wrapping_add(1));
        }
        let _ = elf.symbol_address("main");
    }
});
