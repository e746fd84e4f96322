//! Unwind tables compared row by row with `readelf --debug-dump=frames-interp`.

use std::path::Path;

use profiler_elf::{
    CfaBase, EhFrameSource, ElfFile, InvalidReason, RbpRule, RuleInterner, UnwindRule, UnwindTable, MAX_ENTRY_LEN,
};

use crate::support::{assert_fdes_match, compile, readelf_frames, strip_section_headers, test_dir, Fde, LIBC};

/// Functions of the usual shapes: a leaf, one saving many registers, one
/// with a frame pointer forced by alloca, one realigning its stack through
/// a DRAP register (the `DW_CFA_def_cfa_expression` deref form).
pub const SHAPES_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <alloca.h>

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }

__attribute__((noinline)) long many_regs(long *a, int n) {
  long s0 = 0, s1 = 1, s2 = 2, s3 = 3, s4 = 4, s5 = 5;
  for (int i = 0; i < n; i++) {
    s0 += a[i] * s5; s1 ^= s0 + leaf(i); s2 += s1 * s4;
    s3 -= s2; s4 += s3 ^ s0; s5 += leaf((int)s4);
  }
  return s0 + s1 + s2 + s3 + s4 + s5;
}

__attribute__((noinline)) int uses_alloca(int n) {
  char *p = alloca(n + 16);
  memset(p, n, n + 16);
  return leaf(p[n / 2]) + (int)many_regs((long *)p, n / 8);
}

typedef double v4d __attribute__((vector_size(32)));
__attribute__((noinline, target("avx"))) double realigned(int n) {
  v4d a __attribute__((aligned(64))) = {1, 2, 3, 4};
  volatile v4d b __attribute__((aligned(64)));
  b = a;
  for (int i = 0; i < n; i++) b = b * a;
  printf("%f\n", b[0]);
  return b[1];
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc > 5) return (int)realigned(argc);
  return uses_alloca(argc * 64);
}
"#;

fn table_of(path: &Path) -> (ElfFile, UnwindTable) {
    let elf = ElfFile::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let table = elf.unwind_table();
    assert_eq!(table.stats.error_count, 0, "{}: {:?}", path.display(), table.stats.errors);
    (elf, table)
}

fn fde_at(fdes: &[Fde], addr: u64) -> &Fde {
    fdes.iter().find(|f| f.start <= addr && addr < f.end).unwrap_or_else(|| panic!("no FDE covers {addr:#x}"))
}

fn symbol(elf: &ElfFile, name: &str) -> (u64, u64) {
    elf.symbols().expect("symbols").find(name).unwrap_or_else(|| panic!("no symbol {name}"))
}

/// Table invariants: sorted, strictly increasing, no equal neighbours,
/// ends with NoCoverage.
fn check_shape(table: &UnwindTable) {
    assert!(!table.deltas.is_empty());
    for w in table.deltas.to_vec().windows(2) {
        assert!(w[0].address < w[1].address, "not sorted: {w:?}");
        assert_ne!(w[0].rule, w[1].rule, "unmerged neighbours: {w:?}");
    }
    assert_eq!(table.deltas.last().map(|d| d.rule), Some(UnwindRule::NoCoverage));
    assert_eq!(table.stats.deltas, table.deltas.len() as u64);
}

#[test]
fn gcc_omit_frame_pointer_matches_readelf() {
    let dir = test_dir("unwind-omit-fp");
    let bin = compile(&dir, "shapes", SHAPES_C, &["-O2", "-fomit-frame-pointer", "-Wl,--build-id"]);
    let (elf, table) = table_of(&bin);
    check_shape(&table);
    let fdes = readelf_frames(&bin);
    assert_fdes_match(&table, &fdes.iter().collect::<Vec<_>>(), "shapes -fomit-frame-pointer");

    // _start: the return address is undefined.
    assert_eq!(table.lookup(elf.entry()), UnwindRule::Stop);

    // The PLT's expression, from the second stub on (the first 16 bytes
    // are PLT0 with its own pushes).
    let plt = elf.section_by_name(".plt").expect(".plt").addr;
    assert_eq!(table.lookup(plt + 16), UnwindRule::Plt { threshold: 11 });
    assert_eq!(table.lookup(plt + 16 + 11), UnwindRule::Plt { threshold: 11 });

    // many_regs saves registers but never rbp-based CFA.
    let (addr, size) = symbol(&elf, "many_regs");
    let fde = fde_at(&fdes, addr);
    assert!(fde.rows.len() > 3, "many_regs should push registers: {fde:?}");
    for a in addr..addr + size {
        assert!(matches!(table.lookup(a), UnwindRule::Cfa { base: CfaBase::Rsp, .. }), "{a:#x}");
    }

    // realigned: the DRAP form CFA = *(rbp - 8), rbp saved at [rbp].
    let (addr, _) = symbol(&elf, "realigned");
    let fde = fde_at(&fdes, addr);
    let deref_rows: Vec<_> = fde.rows.iter().filter(|r| r.cols["CFA"] == "exp").collect();
    assert!(!deref_rows.is_empty(), "no DRAP rows in realigned: {fde:?}");
    for row in deref_rows {
        assert_eq!(
            table.lookup(row.loc),
            UnwindRule::CfaDeref { base: CfaBase::Rbp, inner: -8, outer: 0, rbp: RbpRule::AtRbp(0) }
        );
    }
    // The DRAP prologue's CFA = r10 rows are not expressible.
    assert!(table.stats.invalid(InvalidReason::CfaRegister) > 0);
    assert_eq!(table.stats.invalid(InvalidReason::CfaExpression), 0);
    assert_eq!(table.stats.invalid(InvalidReason::ReturnAddress), 0);
}

#[test]
fn gcc_frame_pointer_matches_readelf() {
    let dir = test_dir("unwind-fp");
    let bin = compile(&dir, "shapes", SHAPES_C, &["-O2", "-fno-omit-frame-pointer"]);
    let (elf, table) = table_of(&bin);
    check_shape(&table);
    let fdes = readelf_frames(&bin);
    assert_fdes_match(&table, &fdes.iter().collect::<Vec<_>>(), "shapes -fno-omit-frame-pointer");
    // After the prologue, leaf frames use the frame pointer.
    let (addr, size) = symbol(&elf, "many_regs");
    let fp_rule = UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    assert!((addr..addr + size).any(|a| table.lookup(a) == fp_rule));
}

#[test]
fn debug_frame_merges_with_eh_frame() {
    // Without asynchronous unwind tables, gcc puts the program's CFI in
    // .debug_frame while crt1.o's _start keeps its .eh_frame.
    let dir = test_dir("unwind-debug-frame");
    let bin =
        compile(&dir, "shapes", SHAPES_C, &["-O2", "-g", "-fno-asynchronous-unwind-tables", "-fomit-frame-pointer"]);
    let (elf, table) = table_of(&bin);
    check_shape(&table);
    assert!(table.stats.fdes_eh_frame > 0 && table.stats.fdes_debug_frame > 0, "{:?}", table.stats);
    let fdes = readelf_frames(&bin);
    assert!(fdes.iter().any(|f| f.section == ".debug_frame"));
    assert_fdes_match(&table, &fdes.iter().collect::<Vec<_>>(), "shapes with .debug_frame");
    let (addr, _) = symbol(&elf, "many_regs");
    assert_eq!(fde_at(&fdes, addr).section, ".debug_frame");
    assert_eq!(table.lookup(elf.entry()), UnwindRule::Stop);
}

#[test]
fn libc_matches_readelf() {
    let (elf, table) = table_of(Path::new(LIBC));
    check_shape(&table);
    let fdes = readelf_frames(Path::new(LIBC));
    // Every FDE of libc, row by row.
    assert_fdes_match(&table, &fdes.iter().collect::<Vec<_>>(), "libc");
    let symbols = elf.symbols().expect("symbols");

    // Selected functions, by their exported names.
    for name in ["qsort", "qsort_r", "memcpy", "memmove", "memset", "__clone", "malloc"] {
        let (addr, _) = symbols.find(name).unwrap_or_else(|| panic!("libc has no {name}"));
        let fde = fde_at(&fdes, addr);
        assert_fdes_match(&table, &[fde], name);
        assert!(matches!(table.lookup(addr), UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, .. }), "{name}");
    }

    // __restore_rt (not exported): the 'S' CIE and the rt_sigreturn code.
    let sig: Vec<&Fde> = fdes.iter().filter(|f| f.augmentation.contains('S')).collect();
    assert_eq!(sig.len(), 1, "one signal trampoline in libc");
    let code = elf.bytes_at_vaddr(sig[0].start, (sig[0].end - sig[0].start) as usize).expect("code");
    assert!(code.windows(9).any(|w| w == [0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05]), "{code:x?}");
    for a in sig[0].start..sig[0].end {
        assert_eq!(table.lookup(a), UnwindRule::Signal);
    }
    assert_eq!(table.stats.fdes_signal, 1);

    // __clone's child part and clone3 (not exported: found by its
    // `mov $435,%eax; syscall`) end in Stop after the syscall.
    let (clone, size) = symbols.find("__clone").expect("__clone");
    assert!((clone..clone + size + 64).any(|a| table.lookup(a) == UnwindRule::Stop), "__clone");
    let text = elf.section_by_name(".text").expect(".text");
    let text_data = elf.section_data(text).expect("text");
    let clone3_syscall = [0xb8, 0xb3, 0x01, 0x00, 0x00, 0x0f, 0x05];
    let at = text_data.windows(7).position(|w| w == clone3_syscall).expect("clone3 syscall") as u64 + text.addr;
    let after: Vec<UnwindRule> = (at..at + 64).map(|a| table.lookup(a)).collect();
    assert!(matches!(table.lookup(at), UnwindRule::Cfa { .. }), "clone3 before the syscall");
    assert!(after.contains(&UnwindRule::Stop), "clone3 child: {after:?}");

    // Rules dedupe well across files.
    let mut interner = RuleInterner::new();
    let ids = interner.intern_deltas(&table.deltas.to_vec()).expect("intern");
    assert_eq!(ids.len(), table.deltas.len());
    let fixed = [
        UnwindRule::NoCoverage,
        UnwindRule::Invalid,
        UnwindRule::Stop,
        UnwindRule::Signal,
        UnwindRule::UnfollowedSwitch,
        UnwindRule::GoMorestack,
        UnwindRule::GoMcall,
    ];
    let fixed_present = fixed.iter().filter(|r| table.deltas.iter().any(|d| d.rule == **r)).count();
    assert_eq!(interner.len(), table.distinct_rules() + fixed.len() - fixed_present);
    for (d, (addr, id)) in table.deltas.iter().zip(&ids) {
        assert_eq!((d.address, Some(d.rule)), (*addr, interner.get(*id)));
    }
}

#[test]
fn stripped_section_headers_give_the_same_deltas() {
    let dir = test_dir("unwind-stripped");
    let bin = compile(&dir, "shapes", SHAPES_C, &["-O2", "-fomit-frame-pointer"]);
    for original in [bin.as_path(), Path::new(LIBC)] {
        let stripped = strip_section_headers(original, &dir.join("stripped"));
        let (_, want) = table_of(original);
        let (elf, got) = table_of(&stripped);
        assert!(elf.sections().is_empty());
        assert_eq!(want.stats.eh_frame_source, Some(EhFrameSource::Section));
        assert_eq!(got.stats.eh_frame_source, Some(EhFrameSource::EhFrameHdr));
        assert_eq!(got.deltas, want.deltas, "{}", original.display());
        assert_eq!(got.stats.rows, want.stats.rows);
    }
}

/// Two hand-written trampolines: one marked with `.cfi_signal_frame` (the
/// 'S' augmentation), one recognized only by its code.
const TRAMPOLINES_C: &str = r#"
__asm__(
  ".text\n"
  ".globl marked_restore\n.type marked_restore,@function\n"
  "marked_restore:\n.cfi_startproc\n.cfi_signal_frame\n"
  "  movq $15, %rax\n  syscall\n.cfi_endproc\n.size marked_restore, .-marked_restore\n"
  ".globl plain_restore\n.type plain_restore,@function\n"
  "plain_restore:\n.cfi_startproc\n"
  "  nop\n  movq $15, %rax\n  syscall\n.cfi_endproc\n.size plain_restore, .-plain_restore\n"
  ".globl not_restore\n.type not_restore,@function\n"
  "not_restore:\n.cfi_startproc\n"
  "  movq $14, %rax\n  syscall\n.cfi_endproc\n.size not_restore, .-not_restore\n");
int main(void) { return 0; }
"#;

#[test]
fn signal_trampolines() {
    let dir = test_dir("unwind-signal");
    let bin = compile(&dir, "tramp", TRAMPOLINES_C, &["-O2"]);
    let (elf, table) = table_of(&bin);
    let (marked, _) = symbol(&elf, "marked_restore");
    let (plain, _) = symbol(&elf, "plain_restore");
    let (not, _) = symbol(&elf, "not_restore");
    assert_eq!(table.lookup(marked), UnwindRule::Signal);
    assert_eq!(table.lookup(marked + 8), UnwindRule::Signal);
    assert_eq!(table.lookup(plain), UnwindRule::Signal);
    assert_eq!(table.lookup(plain + 9), UnwindRule::Signal);
    let leaf = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged };
    assert_eq!(table.lookup(not), leaf);
    assert_eq!(table.stats.fdes_signal, 2);
    // readelf agrees except where the code, not the CFI, makes the frame
    // a signal frame.
    let fdes = readelf_frames(&bin);
    let others: Vec<&Fde> = fdes.iter().filter(|f| f.start != plain).collect();
    assert_fdes_match(&table, &others, "trampolines");
}

/// The vDSO of this process, read from memory.
fn vdso_bytes() -> Vec<u8> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let line = maps.lines().find(|l| l.ends_with("[vdso]")).expect("a vDSO");
    let (start, end) = line.split_whitespace().next().and_then(|r| r.split_once('-')).expect("range");
    let start = u64::from_str_radix(start, 16).expect("hex");
    let end = u64::from_str_radix(end, 16).expect("hex");
    let mut buf = vec![0u8; (end - start) as usize];
    let mem = std::fs::File::open("/proc/self/mem").expect("mem");
    std::os::unix::fs::FileExt::read_exact_at(&mem, &mut buf, start).expect("read vDSO");
    buf
}

#[test]
fn vdso_from_memory() {
    let data = vdso_bytes();
    let dir = test_dir("unwind-vdso");
    let path = dir.join("vdso.so");
    std::fs::write(&path, &data).expect("write");
    let elf = ElfFile::from_bytes(data).expect("vDSO parses");
    assert!(elf.gnu_build_id().expect("notes").is_some());
    let symbols = elf.symbols().expect("symbols");
    let (gettime, _) = symbols.find("__vdso_clock_gettime").expect("__vdso_clock_gettime");
    assert_eq!(symbols.lookup(gettime + 1), Some(("__vdso_clock_gettime".into(), 1)));
    let table = elf.unwind_table();
    assert_eq!(table.stats.error_count, 0, "{:?}", table.stats.errors);
    check_shape(&table);
    let fdes = readelf_frames(&path);
    assert_fdes_match(&table, &fdes.iter().collect::<Vec<_>>(), "vDSO");
    assert!(matches!(table.lookup(gettime), UnwindRule::Cfa { .. }));
}

/// V8's conservative stack scan trampoline as Node's builds have it: a
/// hand-written framed function, no CFI; and a namesake-shaped function
/// under another name (not described).
const FRAMED_WITHOUT_CFI_C: &str = r#"
__asm__(".text\n"
        ".globl PushAllRegistersAndIterateStack\n"
        ".type PushAllRegistersAndIterateStack, @function\n"
        "PushAllRegistersAndIterateStack:\n"
        "  push %rbp\n  mov %rsp,%rbp\n  push $0xcdcdcd\n  push %rbx\n  push %r12\n"
        "  push %r13\n  push %r14\n  push %r15\n  mov %rdx,%r8\n  mov %rsp,%rdx\n"
        "  call *%r8\n  add $0x30,%rsp\n  pop %rbp\n  ret\n"
        ".globl OtherFramedAsm\n"
        ".type OtherFramedAsm, @function\n"
        "OtherFramedAsm:\n"
        "  push %rbp\n  mov %rsp,%rbp\n  call *%rdx\n  pop %rbp\n  ret\n");
void PushAllRegistersAndIterateStack(void *, void *, void (*)(void));
void OtherFramedAsm(void *, void *, void (*)(void));
static void callback(void) {}
int main(void) {
  PushAllRegistersAndIterateStack(0, 0, callback);
  OtherFramedAsm(0, 0, callback);
  return 0;
}
"#;

#[test]
fn framed_function_without_cfi_is_described_from_its_code() {
    let dir = test_dir("unwind-framed");
    let bin = compile(&dir, "framed", FRAMED_WITHOUT_CFI_C, &["-O2"]);
    let (elf, table) = table_of(&bin);
    let (push, _) = symbol(&elf, "PushAllRegistersAndIterateStack");
    let (other, _) = symbol(&elf, "OtherFramedAsm");
    let entry = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 8, rbp: RbpRule::Unchanged };
    let pushed = UnwindRule::Cfa { base: CfaBase::Rsp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    let framed = UnwindRule::Cfa { base: CfaBase::Rbp, offset: 16, rbp: RbpRule::AtCfa(-16) };
    // push %rbp (1) mov (3) push imm (5) push rbx (1) 4 x push r (2)
    // mov (3) mov (3) call (3): the return address at +27; add (4), pop
    // (1), ret at +32.
    assert_eq!(table.lookup(push), entry);
    assert_eq!(table.lookup(push + 1), pushed);
    assert_eq!(table.lookup(push + 4), framed);
    assert_eq!(table.lookup(push + 26), framed, "the call's return address - 1");
    assert_eq!(table.lookup(push + 31), framed, "pop %rbp");
    assert_eq!(table.lookup(push + 32), entry, "ret");
    assert_eq!(table.lookup(push + 33), UnwindRule::NoCoverage);
    assert_eq!(table.lookup(other + 4), UnwindRule::NoCoverage);
    assert_eq!(table.stats.framed_without_cfi, 1);
    check_shape(&table);
}

/// A static program's own `_start` without CFI: typed and sized
/// (`-DTYPED`), or a bare label as in ld.so.
const ENTRY_WITHOUT_CFI_C: &str = r#"
#ifdef TYPED
#define TYPE ".type _start, @function\n"
#define SIZE ".size _start, .-_start\n"
#else
#define TYPE ""
#define SIZE ""
#endif
__asm__(".text\n"
        ".globl _start\n" TYPE
        "_start:\n"
        "  xor %ebp,%ebp\n  call work\n  mov %eax,%edi\n  mov $60,%eax\n  syscall\n  hlt\n" SIZE);
__attribute__((noinline)) int work(void) { return 0; }
"#;
/// The bytes of that `_start`: xor (2) call (5) mov (2) mov (5)
/// syscall (2) hlt (1).
const ENTRY_LEN: u64 = 17;

/// Where the root made at `entry` should end: the symbol's end when
/// `sized`, else [`MAX_ENTRY_LEN`] on, before the next FDE (by readelf)
/// and within the file's bytes of the segment.
fn expected_entry_end(elf: &ElfFile, path: &Path, entry: u64, sized: Option<u64>) -> u64 {
    let next_fde = readelf_frames(path).iter().map(|f| f.start).filter(|&s| s > entry).min();
    let in_file = elf.data_from_vaddr(entry).map_or(0, <[u8]>::len) as u64;
    (entry + sized.unwrap_or(MAX_ENTRY_LEN).min(in_file)).min(next_fde.unwrap_or(u64::MAX))
}

/// The root made at `entry`: `[entry, end)` is [`UnwindRule::Stop`],
/// `end` is not.
fn assert_entry_root(table: &UnwindTable, entry: u64, end: u64, what: &str) {
    assert!(table.stats.entry_without_cfi, "{what}");
    let deltas = table.deltas.to_vec();
    let at = deltas.iter().position(|d| d.address == entry).unwrap_or_else(|| panic!("{what}: no delta at the entry"));
    assert_eq!(deltas[at].rule, UnwindRule::Stop, "{what}");
    assert_eq!(deltas.get(at + 1).map(|d| d.address), Some(end), "{what}: where the root ends");
    assert_ne!(table.lookup(end), UnwindRule::Stop, "{what}");
    check_shape(table);
}

#[test]
fn entry_point_without_cfi_is_a_root() {
    let dir = test_dir("unwind-entry");
    for typed in [true, false] {
        let what = if typed { "typed _start" } else { "untyped _start" };
        let flags: &[&str] =
            if typed { &["-O2", "-static", "-nostdlib", "-DTYPED"] } else { &["-O2", "-static", "-nostdlib"] };
        let bin = compile(&dir, if typed { "typed" } else { "untyped" }, ENTRY_WITHOUT_CFI_C, flags);
        let (elf, table) = table_of(&bin);
        let entry = elf.entry();
        assert_eq!(elf.program_entry(), Some(entry), "{what}");
        assert!(elf.fde_ranges_containing(&[entry]).is_empty(), "{what}: the entry has CFI");
        let sized = typed.then(|| symbol(&elf, "_start").1);
        assert_eq!(sized, typed.then_some(ENTRY_LEN), "{what}");
        let end = expected_entry_end(&elf, &bin, entry, sized);
        assert!(end >= entry + ENTRY_LEN, "{what}: {entry:#x}..{end:#x}");
        assert_entry_root(&table, entry, end, what);
        // Named, the bare label too: the return address of `call work`.
        let symbols = elf.symbols().expect("symbols");
        assert_eq!(symbols.lookup(entry + 7), Some(("_start".into(), 7)), "{what}");
    }
}

/// ld.so's `_start` (and `_dl_start_user` after it) has no FDE: the
/// process's first frames end there, a root.
#[test]
fn ld_so_entry_point_is_a_root() {
    let path = Path::new("/lib64/ld-linux-x86-64.so.2");
    let (elf, table) = table_of(path);
    let entry = elf.entry();
    assert_eq!(elf.program_entry(), Some(entry));
    if !elf.fde_ranges_containing(&[entry]).is_empty() {
        eprintln!("SKIPPED: this ld.so's entry point has CFI");
        assert!(!table.stats.entry_without_cfi);
        return;
    }
    let end = expected_entry_end(&elf, path, entry, None);
    assert_entry_root(&table, entry, end, "ld.so");
    assert!(matches!(table.lookup(end), UnwindRule::Cfa { .. }), "ld.so: the next FDE starts at {end:#x}");
}

/// A library's `e_entry` (GNU ld's default: the start of `.text`) is no
/// program's entry; an executable's with CFI keeps its rows.
#[test]
fn library_entry_is_no_root() {
    let dir = test_dir("unwind-entry-lib");
    let lib = compile(&dir, "libentry.so", SHAPES_C, &["-O2", "-shared", "-fPIC"]);
    // Newer linkers leave a library's e_entry 0: set it where older ones
    // put it (as in Debian 12's libXau).
    let text = ElfFile::open(&lib).expect("open").section_by_name(".text").expect(".text").addr;
    let mut data = std::fs::read(&lib).expect("read");
    data[24..32].copy_from_slice(&text.to_le_bytes());
    let patched = dir.join("libentry-patched.so");
    std::fs::write(&patched, data).expect("write");
    let (elf, table) = table_of(&patched);
    assert_eq!(elf.entry(), text);
    assert_eq!(elf.program_entry(), None);
    assert!(!table.stats.entry_without_cfi);
    let exe = compile(&dir, "exe", SHAPES_C, &["-O2"]);
    let (elf, table) = table_of(&exe);
    assert_eq!(elf.program_entry(), Some(elf.entry()));
    assert!(!table.stats.entry_without_cfi);
    assert_eq!(table.lookup(elf.entry()), UnwindRule::Stop, "crt1's _start: DW_CFA_undefined rip");
}
