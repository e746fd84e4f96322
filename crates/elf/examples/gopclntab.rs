//! Prints what `.gopclntab` says about pcs of a Go binary:
//! `cargo run -p profiler-elf --example gopclntab -- BINARY [PC...]`
//! (hex pcs; without pcs, a summary of the table).

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: gopclntab BINARY [PC...]");
        std::process::exit(2);
    };
    let elf = profiler_elf::ElfFile::open(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    let tab = match profiler_elf::GoPclntab::find(&elf) {
        Ok(Some(t)) => t,
        Ok(None) => {
            eprintln!("{path}: no Go function table");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let pcs: Vec<u64> = args.map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).expect("hex pc")).collect();
    if pcs.is_empty() {
        let r = tab.text_range();
        println!(
            "{:?}: {} functions, text {:#x}..{:#x}, inline info: {}",
            tab.version(),
            tab.len(),
            r.start,
            r.end,
            tab.has_inline_info()
        );
    }
    for pc in pcs {
        println!("{pc:#x}:");
        for f in tab.frames(pc) {
            println!(
                "  {}{} {}:{}",
                f.function,
                if f.inlined { " (inlined)" } else { "" },
                f.file.unwrap_or("?"),
                f.line
            );
        }
        if let Some(f) = tab.find_func(pc) {
            println!("  sp delta {:?}", tab.sp_delta(&f, pc));
        }
    }
}
