//! Process addresses to ELF addresses, checked on running programs.

use std::process::Command;

use profiler_elf::ElfFile;

use crate::support::{compile, run, test_dir};

/// Prints the address of `target` and its own memory map.
const PRINT_MAPS_C: &str = r#"
#include <stdio.h>
__attribute__((noinline)) int target(int x) { return x + 1; }
int main(void) {
  printf("%lx\n", (unsigned long)&target);
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
  return target(0) - 1;
}
"#;

fn check(args: &[&str], name: &str, pie: bool) {
    let dir = test_dir(&format!("mapping-{name}"));
    let bin = compile(&dir, name, PRINT_MAPS_C, args);
    let out = run(&mut Command::new(&bin));
    let mut lines = out.lines();
    let addr = u64::from_str_radix(lines.next().expect("address"), 16).expect("hex");
    // The maps line holding `target`.
    let (start, offset) = lines
        .find_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let (s, e) = t.first()?.split_once('-')?;
            let (s, e) = (u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?);
            let path = t.get(5)?;
            (s <= addr && addr < e && path.ends_with(name)).then(|| (s, u64::from_str_radix(t[2], 16).ok()))
        })
        .expect("mapping of target");
    let offset = offset.expect("offset");
    let elf = ElfFile::open(&bin).expect("open");
    assert_eq!(elf.is_position_independent(), pie);
    let (want, _) = elf.symbols().expect("symbols").find("target").expect("target");
    let segments = elf.load_segments();
    assert_eq!(segments.elf_vaddr(addr, start, offset), Some(want), "{name}: {out}");
    let bias = segments.bias(start, offset).expect("bias");
    assert_eq!(want.wrapping_add(bias), addr);
    if !pie {
        assert_eq!(bias, 0);
    }
}

#[test]
fn pie_executable() {
    check(&["-O2", "-fPIE", "-pie"], "pie", true);
}

#[test]
fn non_pie_executable() {
    check(&["-O2", "-fno-pie", "-no-pie"], "nopie", false);
}
