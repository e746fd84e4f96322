//! CPython: line tables of every format, the 3.13 debug offsets, and
//! code objects read from (fake) process memory with any layout. The
//! first byte picks which.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profiler_interpreters::python::{
    line_for_offset, Layout, LayoutSource, LineTableFormat, PythonBuild, PythonSymbolizer, Version,
};
use profiler_interpreters::ProcessMemory;

/// The fuzzer's bytes as a process's memory at `BASE`.
struct Memory<'a>(&'a [u8]);

const BASE: u64 = 0x1000;

impl ProcessMemory for Memory<'_> {
    fn read(&self, address: u64, buf: &mut [u8]) -> bool {
        let Some(off) = address.checked_sub(BASE).and_then(|o| usize::try_from(o).ok()) else {
            return false;
        };
        match self.0.get(off..off.saturating_add(buf.len())) {
            Some(src) if src.len() == buf.len() => {
                buf.copy_from_slice(src);
                true
            }
            _ => false,
        }
    }
}

fn build(layout: Layout, minor: u8) -> PythonBuild {
    PythonBuild {
        version: Version { major: 3, minor, micro: None },
        layout,
        layout_source: LayoutSource::Table,
        runtime_vaddr: 0,
        code_type_vaddr: None,
        eval_ranges: vec![],
    }
}

fn symbolize(build: &PythonBuild, memory: &[u8]) {
    let memory = Memory(memory);
    let mut s = PythonSymbolizer::new(64, 1 << 20);
    for code in [BASE, BASE + 8, BASE + 64, BASE + 256] {
        for offset in [0, 2, 10, 1000] {
            let _ = s.symbolize(&memory, build, 0, code, offset);
        }
    }
    let _ = profiler_interpreters::python::walk_thread(&memory, build, 0, 1);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let Some((&pick, table)) = rest.split_first() else { return };
            let format = [LineTableFormat::Lnotab, LineTableFormat::Linetable310, LineTableFormat::Locations]
                [usize::from(pick % 3)];
            for offset in [0, 1, 2, 6, 100, 4096, u32::MAX] {
                let _ = line_for_offset(format, table, i32::from(pick) - 128, offset);
            }
            let _ = line_for_offset(format, table, i32::MAX, 1 << 20);
            let _ = line_for_offset(format, table, i32::MIN, 1 << 20);
        }
        1 => {
            if let Ok((_, layout)) = Layout::from_debug_offsets(rest) {
                symbolize(&build(layout, 13), rest);
            }
        }
        _ => {
            let Some((&minor, memory)) = rest.split_first() else { return };
            let minor = 8 + minor % 6;
            if let Some(layout) = Layout::for_version(3, minor) {
                symbolize(&build(layout, minor), memory);
            }
        }
    }
});
