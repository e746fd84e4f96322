//! The unwinder's maps in the real kernel: what `UnwindMaps` writes, a
//! batch at a time where the kernel can, is exactly what its bookkeeping
//! says, through re-sets, file loads and unloads, and removals; and a
//! process's ranges are found again the way the unwinder searches them.

use profiler_bpf::{EncodedDeltas, MappingRange, MappingTarget, Sampler, SamplerOptions};
use profiler_elf::RuleId;
use profiler_tests::{in_ci, serial};

/// Entries a process takes: its own and one per chunk of 64 ranges.
fn entries(ranges: &[MappingRange]) -> usize {
    1 + ranges.len().div_ceil(64)
}

#[test]
fn maps_hold_exactly_what_the_bookkeeping_says() {
    let _serial = serial();
    let sampler = match Sampler::load(&SamplerOptions::default()) {
        Ok(s) => s,
        Err(e) if !in_ci() => {
            eprintln!("SKIPPED: BPF is not available here ({e}); under CI=true this fails");
            return;
        }
        Err(e) => panic!("loading the programs: {e}"),
    };
    let mut maps = sampler.unwind_maps().expect("the unwinder's maps");
    assert_eq!(maps.count_map_entries(), (0, 0, 0), "fresh maps are empty");

    // A file of 1,100 pages of 64 KiB (more than one batch), two deltas
    // a page (rules 0 and 1 are built in).
    let deltas: Vec<(u64, RuleId)> = (0..2200u64).map(|i| (i * 0x8000, RuleId((i % 2) as u16))).collect();
    let encoded = EncodedDeltas::encode(&deltas);
    maps.load_file(7, &encoded).expect("load a file");
    let pages = maps.stats().pages as usize;
    assert_eq!(pages, 1100, "{:?}", maps.stats());
    assert_eq!(maps.count_map_entries(), (0, pages, 1));
    assert_eq!(maps.file_entries(7).as_deref(), Some(encoded.entries_slice()));

    // A file loaded as the process manager does, encoded on the way in:
    // 150,001 deltas on 3 pages (more than one batch of 65,536 elements),
    // an odd entry count, and the same array as encoding it whole.
    let dense: Vec<(u64, RuleId)> = (0..150_001u64)
        .map(|i| (0x10_0000 + (i / 50_000) * 0x10000 + i % 50_000 + 1, RuleId((i % 2) as u16)))
        .collect();
    let whole = EncodedDeltas::encode(&dense);
    assert_eq!(whole.entries() % 2, 0, "{} entries", whole.entries());
    maps.load_file_streamed(8, &|| Box::new(dense.iter().copied())).expect("load streamed");
    assert_eq!(maps.file_entries(8).as_deref(), Some(whole.entries_slice()));
    assert_eq!(maps.count_map_entries(), (0, pages + whole.pages(), 2));
    let odd = &dense[..7];
    maps.load_file_streamed(9, &|| Box::new(odd.iter().copied())).expect("load streamed");
    let odd_whole = EncodedDeltas::encode(odd);
    assert_eq!(odd_whole.entries() % 2, 1);
    assert_eq!(maps.file_entries(9).as_deref(), Some(odd_whole.entries_slice()));
    maps.unload_file(8).expect("unload 8");
    maps.unload_file(9).expect("unload 9");
    assert_eq!(maps.count_map_entries(), (0, pages, 1));

    // Two processes, one of 1,000 ranges (16 chunks), every other one
    // with unwind tables.
    let native = MappingTarget::Native { file_id: 7, bias: 0x5555_0000_0000 };
    let first = vec![
        MappingRange { start: 0x5555_0000_1000, end: 0x5555_0003_f000, target: native },
        MappingRange { start: 0x7f00_0000_0000, end: 0x7f00_0001_0000, target: MappingTarget::NoUnwindInfo },
    ];
    let many: Vec<MappingRange> = (0..1000u64)
        .map(|i| MappingRange {
            start: 0x6000_0000_0000 + i * 0x10000 + 0x1000,
            end: 0x6000_0000_0000 + i * 0x10000 + 0x3000,
            target: if i % 2 == 0 { native } else { MappingTarget::NoUnwindInfo },
        })
        .rev()
        .collect();
    maps.set_process(1001, &first).expect("set 1001");
    maps.set_process(1002, &many).expect("set 1002");
    let (a, b) = (entries(&first), entries(&many));
    assert_eq!(b, 17);
    assert_eq!(maps.count_map_entries(), (a + b, pages, 1));
    assert_eq!(maps.stats().ranges as usize, first.len() + many.len());
    let mut tables = sampler.map_tables().expect("the unwinder's tables");
    for i in [0u64, 1, 2, 63, 64, 65, 127, 128, 500, 998, 999] {
        let start = 0x6000_0000_0000 + i * 0x10000 + 0x1000;
        for address in [start, start + 0x1000, start + 0x1fff] {
            assert_eq!(tables.is_loaded(1002, address), i % 2 == 0, "range {i} at {address:#x}");
        }
        assert!(!tables.is_loaded(1002, start - 1), "before range {i}");
        assert!(!tables.is_loaded(1002, start + 0x2000), "after range {i}");
    }
    assert!(tables.is_loaded(1001, 0x5555_0003_efff));
    assert!(!tables.is_loaded(1001, 0x5555_0003_f000));
    assert!(!tables.is_loaded(1003, 0x5555_0003_e000), "an unknown pid");

    // Re-set 1001: the first range keeps its place with a new value (the
    // file finished), the second moves, a third appears.
    let second = vec![
        MappingRange { start: 0x5555_0000_1000, end: 0x5555_0003_f000, target: MappingTarget::NoUnwindInfo },
        MappingRange { start: 0x7f00_0010_0000, end: 0x7f00_0013_0000, target: native },
        MappingRange { start: 0x7f00_0020_0000, end: 0x7f00_0020_1000, target: native },
    ];
    maps.set_process(1001, &second).expect("re-set 1001");
    let a2 = entries(&second);
    assert_eq!(maps.count_map_entries(), (a2 + b, pages, 1), "the old chunks of 1001 are gone");
    assert!(!tables.is_loaded(1001, 0x5555_0003_e000), "the new value is seen");
    assert!(tables.is_loaded(1001, 0x7f00_0020_0fff));
    // Setting the same ranges again changes nothing.
    maps.set_process(1001, &second).expect("same again");
    assert_eq!(maps.count_map_entries(), (a2 + b, pages, 1));

    maps.remove_process(1002).expect("remove 1002");
    assert_eq!(maps.count_map_entries(), (a2, pages, 1));
    maps.unload_file(7).expect("unload the file");
    assert_eq!(maps.count_map_entries(), (a2, 0, 0));
    maps.remove_process(1001).expect("remove 1001");
    maps.remove_process(1001).expect("removing twice is a no-op");
    assert_eq!(maps.count_map_entries(), (0, 0, 0), "everything inserted was deleted");
    assert_eq!(maps.stats().ranges, 0);
    assert!(!tables.is_loaded(1001, 0x7f00_0020_0fff));
}
