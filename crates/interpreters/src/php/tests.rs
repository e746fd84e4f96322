//! Detection and the walk, against fake memory laid out as PHP 8.2 does.

use super::*;
use crate::memory::ProcessMemory;
use std::collections::BTreeMap;

#[test]
fn a_file_without_php_is_not_php() {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let elf = ElfFile::open(&exe).unwrap();
    assert_eq!(detect(&elf), Detection::NotPhp);
}

#[test]
fn finds_a_needle() {
    assert_eq!(find(b"abcX-Powered-By: PHP/8.2.1", VERSION_NEEDLE), Some(3));
    assert_eq!(find(b"XX-Powered-By: PHP", VERSION_NEEDLE), None);
    assert_eq!(find(b"", VERSION_NEEDLE), None);
}

/// Byte ranges at addresses; reads must fall inside one.
#[derive(Default)]
struct Fake(BTreeMap<u64, Vec<u8>>);

impl ProcessMemory for Fake {
    fn read(&self, address: u64, buf: &mut [u8]) -> bool {
        let Some((&start, bytes)) = self.0.range(..=address).next_back() else { return false };
        let off = (address - start) as usize;
        match bytes.get(off..off + buf.len()) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

impl Fake {
    fn put(&mut self, at: u64, bytes: Vec<u8>) {
        self.0.insert(at, bytes);
    }

    fn string(&mut self, at: u64, text: &str) {
        let mut b = vec![0u8; 24];
        b[16..24].copy_from_slice(&(text.len() as u64).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        b.push(0);
        self.put(at, b);
    }

    fn frame(&mut self, at: u64, opline: u64, func: u64, call_info: u32, prev: u64) {
        let mut b = vec![0u8; 72];
        b[0..8].copy_from_slice(&opline.to_le_bytes());
        b[24..32].copy_from_slice(&func.to_le_bytes());
        b[40..44].copy_from_slice(&call_info.to_le_bytes());
        b[48..56].copy_from_slice(&prev.to_le_bytes());
        self.put(at, b);
    }

    fn function(&mut self, at: u64, kind: u8, name: u64, scope: u64, file: u64, lines: (u32, u32)) {
        let mut b = vec![0u8; if kind == consts::INTERNAL_FUNCTION { 24 } else { 168 }];
        b[0] = kind;
        b[8..16].copy_from_slice(&name.to_le_bytes());
        b[16..24].copy_from_slice(&scope.to_le_bytes());
        if kind != consts::INTERNAL_FUNCTION {
            b[152..160].copy_from_slice(&file.to_le_bytes());
            b[160..164].copy_from_slice(&lines.0.to_le_bytes());
            b[164..168].copy_from_slice(&lines.1.to_le_bytes());
        }
        self.put(at, b);
    }

    fn op(&mut self, at: u64, line: u32) {
        let mut b = vec![0u8; 32];
        b[24..28].copy_from_slice(&line.to_le_bytes());
        self.put(at, b);
    }
}

fn layout() -> PhpLayout {
    PhpLayout::for_version(PhpVersion::new(8, 2, 0)).unwrap()
}

/// `{main}` -> `Box::run` -> `strlen`, with a dummy frame between.
fn program() -> Fake {
    let mut m = Fake::default();
    m.string(0x1000, "/app/x.php");
    m.string(0x1100, "run");
    m.string(0x1200, "Box");
    m.string(0x1300, "strlen");
    m.put(0x2000, [vec![0u8; 8], 0x1200u64.to_le_bytes().to_vec()].concat()); // class entry
    m.function(0x3000, consts::USER_FUNCTION, 0, 0, 0x1000, (1, 20));
    m.function(0x3200, consts::USER_FUNCTION, 0x1100, 0x2000, 0x1000, (5, 9));
    m.function(0x3400, consts::INTERNAL_FUNCTION, 0x1300, 0, 0, (0, 0));
    m.op(0x4000, 15);
    m.op(0x4100, 7);
    m.frame(0x5000, 0x4000, 0x3000, consts::CALL_TOP | consts::CALL_CODE, 0);
    m.frame(0x5100, 0, 0, 0, 0x5000);
    m.frame(0x5200, 0x4100, 0x3200, 0, 0x5100);
    m.frame(0x5300, 0, 0x3400, 0, 0x5200);
    m
}

fn user(name: &str, line: u32) -> PhpFrame {
    PhpFrame::User { name: name.into(), file: "/app/x.php".into(), line }
}

#[test]
fn walks_and_names_frames() {
    let m = program();
    let mut s = PhpSymbolizer::new(layout());
    let want = vec![PhpFrame::Internal { name: "strlen".into() }, user("Box::run", 7), user("{main}", 15)];
    assert_eq!(s.walk(&m, 0x5300).unwrap(), want);
    assert_eq!(s.walk(&m, 0x5300).unwrap(), want, "from the cache");
    assert_eq!(s.evictions, 0);
}

#[test]
fn a_line_outside_the_function_is_unknown() {
    let mut m = program();
    m.op(0x4100, 99);
    let frames = PhpSymbolizer::new(layout()).walk(&m, 0x5200).unwrap();
    assert_eq!(frames[0], user("Box::run", 0));
}

#[test]
fn a_recorded_line_counts_from_the_functions_first() {
    let mut m = program();
    m.function(0x3200, consts::USER_FUNCTION, 0x1100, 0x2000, 0x1000, (5000, 5020));
    let mut s = PhpSymbolizer::new(layout());
    assert_eq!(s.frame_at_offset(&m, 0x3200, Some(7), 0).unwrap(), user("Box::run", 5007));
    assert_eq!(s.frame_at_offset(&m, 0x3200, Some(0), 0).unwrap(), user("Box::run", 5000));
    // Past the function's last line, or unknown: 0.
    assert_eq!(s.frame_at_offset(&m, 0x3200, Some(21), 0).unwrap(), user("Box::run", 0));
    assert_eq!(s.frame_at_offset(&m, 0x3200, None, 0).unwrap(), user("Box::run", 0));
    assert_eq!(s.frame_at_offset(&m, 0x3400, Some(3), 0).unwrap(), PhpFrame::Internal { name: "strlen".into() });
}

#[test]
fn bad_memory_ends_the_walk_with_an_error() {
    let mut m = program();
    m.frame(0x5200, 0x4100, 0x3200, 0, 0x9000); // prev unmapped
    assert_eq!(PhpSymbolizer::new(layout()).walk(&m, 0x5300), Err("frame 0x9000 unreadable".into()));
    let mut m = program();
    m.put(0x1100, [vec![0u8; 16], (1u64 << 40).to_le_bytes().to_vec()].concat()); // huge name
    let err = PhpSymbolizer::new(layout()).walk(&m, 0x5300).unwrap_err();
    assert!(err.contains("of 1099511627776 bytes"), "{err}");
    let mut m = program();
    m.function(0x3200, 9, 0x1100, 0, 0x1000, (5, 9));
    assert_eq!(PhpSymbolizer::new(layout()).walk(&m, 0x5200), Err("function 0x3200: type 9".into()));
}

#[test]
fn a_cycle_is_bounded() {
    let mut m = program();
    m.frame(0x5000, 0x4000, 0x3000, consts::CALL_TOP, 0x5300);
    assert_eq!(PhpSymbolizer::new(layout()).walk(&m, 0x5300), Err(format!("more than {MAX_FRAMES} frames")));
}
