//! Differential tests of the DWARF index against `addr2line` 0.27 (a
//! dev-dependency only): for every line-table address of real files (or
//! an even sample of them), [`Dwarf::frames`] must give exactly the
//! frames `addr2line::Context::find_frames` gives (raw function name,
//! file, line), innermost first. And malformed DWARF must not panic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use profiler_elf::ElfFile;

use super::names::join_path;
use super::unit::parse_unit_at;
use super::*;

/// Most addresses checked per file (an even sample beyond).
const MAX_ADDRESSES: usize = 60_000;

fn open(path: &Path) -> Option<DwarfFile> {
    let elf = Arc::new(ElfFile::open(path).ok()?);
    Some(DwarfFile { bytes: Backing::Elf(elf.clone()), elf })
}

/// `addr2line`'s context over the same sections, and the sections'
/// owners (to keep while it lives).
fn context(file: &DwarfFile, sup: Option<&DwarfFile>) -> (addr2line::Context<Reader>, Vec<SectionBytes>) {
    let mut owners = Vec::new();
    let mut load = |f: &DwarfFile, id: gimli::SectionId| -> Result<Reader, DwarfError> {
        let bytes = section_bytes(f, id.name())?;
        let r = reader(&bytes);
        owners.push(bytes);
        Ok(r)
    };
    let mut dwarf = gimli::Dwarf::load(|id| load(file, id)).expect("sections");
    if let Some(sup) = sup {
        dwarf.load_sup(|id| load(sup, id)).expect("sup sections");
    }
    (addr2line::Context::from_dwarf(dwarf).expect("addr2line context"), owners)
}

/// The frames as the symbolizer took them from `addr2line` before it
/// had its own index.
fn addr2line_frames(context: &addr2line::Context<Reader>, vaddr: u64) -> Vec<DwarfFrame> {
    let mut out = Vec::new();
    let Ok(mut iter) = context.find_frames(vaddr).skip_all_loads() else {
        return out;
    };
    while out.len() < MAX_FRAMES {
        let frame = match iter.next() {
            Ok(Some(f)) => f,
            Ok(None) | Err(_) => break,
        };
        let function = frame.function.as_ref().and_then(|f| f.raw_name().ok()).map(|n| n.into_owned());
        let (file, line) = match &frame.location {
            Some(l) => (l.file.map(str::to_owned), l.line.unwrap_or(0)),
            None => (None, 0),
        };
        out.push(DwarfFrame { function, file, line });
    }
    out
}

/// Every address a line table of `dwarf` names, sorted, and the
/// address one past each (inside the row), sampled down to
/// [`MAX_ADDRESSES`].
fn line_addresses(dwarf: &Dwarf) -> Vec<u64> {
    let mut all = Vec::new();
    for &offset in dwarf.units.iter() {
        let Ok(unit) = parse_unit_at(&dwarf.sections, offset) else {
            continue;
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let mut rows = program.rows();
        while let Ok(Some((_, row))) = rows.next_row() {
            all.push(row.address());
            all.push(row.address() + 1);
        }
    }
    all.sort_unstable();
    all.dedup();
    if all.len() > MAX_ADDRESSES {
        let step = all.len().div_ceil(MAX_ADDRESSES);
        all = all.into_iter().step_by(step).collect();
    }
    all
}

/// How the two compare on one file's line addresses.
#[derive(Debug, Default)]
struct Comparison {
    /// Addresses in executable sections, and those that gave equal
    /// frames, and with inline frames.
    addresses: usize,
    equal: usize,
    inlined: usize,
    /// Addresses outside every executable section (code the linker
    /// dropped: its DWARF still describes it, at addresses from 0), and
    /// those that gave equal frames.
    dropped: usize,
    dropped_equal: usize,
}

/// Compares the two on every line address of `path`.
fn compare(path: &Path, sup: Option<&Path>) -> Comparison {
    let file = open(path).expect("open");
    let sup = sup.map(|s| open(s).expect("open sup"));
    let ours = Dwarf::load(&file, sup.as_ref(), 1 << 34).expect("load");
    let (theirs, _owners) = context(&file, sup.as_ref());
    let code: Vec<(u64, u64)> = file
        .elf
        .sections()
        .iter()
        .filter(|s| s.flags & 4 != 0 && s.addr != 0) // SHF_EXECINSTR
        .map(|s| (s.addr, s.addr + s.size))
        .collect();
    let mut c = Comparison::default();
    let mut shown = 0;
    for a in line_addresses(&ours) {
        let mine = ours.frames(a);
        let want = addr2line_frames(&theirs, a);
        let equal = mine == want;
        if code.iter().any(|&(lo, hi)| (lo..hi).contains(&a)) {
            c.addresses += 1;
            c.equal += usize::from(equal);
            c.inlined += usize::from(equal && mine.len() > 1);
            if !equal && shown < 5 {
                shown += 1;
                eprintln!("{}: {a:#x}:\n  ours      {mine:?}\n  addr2line {want:?}", path.display());
            }
        } else {
            c.dropped += 1;
            c.dropped_equal += usize::from(equal);
        }
    }
    eprintln!("{}: {c:?}, our heap {} bytes", path.display(), ours.cost());
    c
}

/// A C program with static inline functions, in two units (one calling
/// the other's function), built with `cc` and `flags` into `dir`.
fn c_program(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let a = "#include <stdio.h>\n\
             #include \"util.h\"\n\
             static inline int square(int x) { return x * x + seed(); }\n\
             static inline int sum_squares(int n) { int s = 0; for (int i = 0; i < n; i++) s += square(i) ^ twist(i); return s; }\n\
             static int __attribute__((noinline)) leaf(int n) { return sum_squares(n) + helper(n); }\n\
             int main(int argc, char **argv) { (void)argv; printf(\"%d\\n\", leaf(argc * 1000)); return 0; }\n";
    let b = "#include \"util.h\"\n\
             static inline int deeper(int x) { return twist(x) * 7 + (x >> 3); }\n\
             static inline int deep(int x) { return deeper(x + 1) - deeper(x - 1); }\n\
             int seed(void) { static int s = 3; return s++; }\n\
             int helper(int n) { int t = 0; for (int i = 0; i < n; i++) t += deep(i); return t; }\n";
    let h = "static inline int twist(int x) { return (x << 3) ^ (x >> 2); }\n\
             int seed(void);\n\
             int helper(int n);\n";
    std::fs::write(dir.join("a.c"), a).ok()?;
    std::fs::write(dir.join("b.c"), b).ok()?;
    std::fs::write(dir.join("util.h"), h).ok()?;
    let out = dir.join(name);
    let status = Command::new("cc").current_dir(dir).args(flags).args(["a.c", "b.c", "-o"]).arg(&out).status().ok()?;
    status.success().then_some(out)
}

fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dwarf-diff-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn assert_all_equal(what: &str, c: &Comparison) {
    assert!(c.addresses > 0, "{what}: no line addresses");
    assert_eq!(c.equal, c.addresses, "{what}: {c:?}");
}

#[test]
fn frames_match_addr2line_on_c_programs() {
    let dir = test_dir("c");
    let variants: [(&str, &[&str]); 5] = [
        ("o2", &["-g", "-O2"]),
        ("o2-dwarf4", &["-gdwarf-4", "-O2"]),
        ("o2-dwarf5", &["-gdwarf-5", "-O2"]),
        ("o0", &["-g", "-O0"]),
        // Cross-unit abstract origins (DW_FORM_ref_addr).
        ("lto", &["-g", "-O2", "-flto"]),
    ];
    let mut built = 0;
    let mut inlined = 0;
    for (name, flags) in variants {
        let Some(bin) = c_program(&dir, name, flags) else {
            eprintln!("{name}: cc failed, skipped");
            continue;
        };
        built += 1;
        let c = compare(&bin, None);
        inlined += c.inlined;
        assert_all_equal(name, &c);
    }
    if built > 0 {
        assert!(inlined > 0, "no inline frames seen");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn frames_match_addr2line_with_a_dwz_supplementary_file() {
    let dir = test_dir("dwz");
    let (Some(a), Some(b)) = (c_program(&dir, "one", &["-g", "-O2"]), c_program(&dir, "two", &["-g", "-O2", "-DTWO"]))
    else {
        return;
    };
    let common = dir.join("common.debug");
    let ok = Command::new("dwz")
        .arg("-m")
        .arg(&common)
        .arg("-M")
        .arg(&common)
        .args([&a, &b])
        .status()
        .is_ok_and(|s| s.success());
    if !ok || !common.exists() {
        eprintln!("dwz failed, skipped");
        return;
    }
    assert_all_equal("dwz", &compare(&a, Some(&common)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn frames_match_addr2line_on_this_test_binary() {
    let exe = std::env::current_exe().expect("exe");
    let c = compare(&exe, None);
    assert_all_equal("test binary", &c);
    // Code the linker dropped is described at addresses from 0, by many
    // units and functions at once: which of the overlapping entries
    // answers is arbitrary (both pick by binary search over entries
    // sorted by start address, ties in no set order), and the profiler
    // never sees these addresses. Reported, not compared.
    eprintln!("dropped code: {} of {} addresses equal", c.dropped_equal, c.dropped);
}

#[test]
fn frames_match_addr2line_on_installed_libraries() {
    // Real GCC -g libraries when the machine has them (pyenv's libpython).
    let Ok(home) = std::env::var("HOME") else {
        return;
    };
    let versions = Path::new(&home).join(".pyenv/versions");
    let Ok(dirs) = std::fs::read_dir(&versions) else {
        return;
    };
    let mut libs: Vec<PathBuf> = dirs
        .flatten()
        .filter_map(|d| {
            let lib = d.path().join("lib");
            std::fs::read_dir(lib).ok()?.flatten().map(|f| f.path()).find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libpython") && n.contains(".so."))
            })
        })
        .collect();
    libs.sort();
    // All of them with DWARF_DIFF_ALL set (slow in a debug build).
    let all = std::env::var_os("DWARF_DIFF_ALL").is_some();
    for lib in libs.iter().take(if all { usize::MAX } else { 2 }) {
        assert_all_equal(&lib.display().to_string(), &compare(lib, None));
    }
}

#[test]
fn frames_match_addr2line_on_distribution_debug_files() {
    // Separate debug files of the distribution (compressed sections,
    // DWARF 5 from GCC): the largest few.
    let Ok(dirs) = std::fs::read_dir("/usr/lib/debug/.build-id") else {
        return;
    };
    let mut files: Vec<(u64, PathBuf)> = dirs
        .flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|d| d.flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "debug"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.len(), p)))
        .collect();
    files.sort_unstable_by(|a, b| b.cmp(a));
    let all = std::env::var_os("DWARF_DIFF_ALL").is_some();
    for (_, f) in files.iter().take(if all { 20 } else { 2 }) {
        // Sections our loader refuses (e.g. over the compression ratio
        // it accepts) are not the index's business.
        if let Err(e) = open(f).map(|d| Dwarf::load(&d, None, 1 << 34)).transpose() {
            eprintln!("{}: not loaded: {e}", f.display());
            continue;
        }
        assert_all_equal(&f.display().to_string(), &compare(f, None));
    }
}

/// Garbles `section` of `bin` (`how`: truncate its data, or flip bytes)
/// and loads and looks up every address: no panic.
fn garble(bin: &Path, section: &str, seed: u64, truncate: bool) -> usize {
    let data = std::fs::read(bin).expect("read");
    let elf = ElfFile::from_bytes(data.clone()).expect("elf");
    let Some(s) = elf.section_by_name(section) else {
        return 0;
    };
    let (start, len) = (s.offset as usize, s.size as usize);
    let mut data = data;
    let mut x = seed;
    if truncate {
        // Zero the second half: units and programs end early.
        for b in &mut data[start + len / 2..start + len] {
            *b = 0;
        }
    } else {
        for _ in 0..len / 16 + 1 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = start + (x as usize % len.max(1));
            data[i] = (x >> 32) as u8;
        }
    }
    let elf = Arc::new(ElfFile::from_bytes(data).expect("elf"));
    let file = DwarfFile { bytes: Backing::Elf(elf.clone()), elf };
    let Ok(dwarf) = Dwarf::load(&file, None, 1 << 30) else {
        return 0;
    };
    let text = file.elf.section_by_name(".text").map_or((0, 0), |t| (t.addr, t.size));
    let mut frames = 0;
    for a in (text.0..text.0 + text.1).step_by(3) {
        frames += dwarf.frames(a).len();
    }
    let _ = dwarf.cost();
    frames
}

#[test]
fn malformed_dwarf_yields_fewer_frames_never_a_panic() {
    let dir = test_dir("garbled");
    let Some(bin) = c_program(&dir, "prog", &["-g", "-O2"]) else {
        return;
    };
    for section in [".debug_info", ".debug_line", ".debug_abbrev", ".debug_rnglists", ".debug_str", ".debug_aranges"] {
        garble(&bin, section, 0, true);
        for seed in 1..40u64 {
            garble(&bin, section, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), false);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn file_names_join_like_addr2line() {
    let mut p = String::from("/comp");
    join_path(&mut p, "inc");
    join_path(&mut p, "a.c");
    assert_eq!(p, "/comp/inc/a.c");
    let mut p = String::from("/comp/");
    join_path(&mut p, "/abs/dir");
    join_path(&mut p, "x.h");
    assert_eq!(p, "/abs/dir/x.h");
    let mut p = String::from("C:\\src");
    join_path(&mut p, "a.c");
    assert_eq!(p, "C:\\src\\a.c");
    let mut p = String::new();
    join_path(&mut p, "rel.c");
    assert_eq!(p, "rel.c");
}

#[test]
fn parsed_units_stay_within_the_file_limit_least_recently_used_dropped() {
    let exe = std::env::current_exe().expect("exe");
    let file = open(&exe).expect("open");
    let unlimited = Dwarf::load(&file, None, 1 << 34).expect("load");
    let base = unlimited.owned_bytes + estimate_index(&unlimited.sections, &mut || {}).max(unlimited.index_bytes);
    // Room for the largest units of this binary (1.5 MB), not for all.
    let limit = base + (2 << 20);
    let limited = Dwarf::load(&file, None, limit).expect("load within the limit");
    assert!(limited.max_parsed_bytes >= 2 << 20, "{}", limited.max_parsed_bytes);
    let addresses = line_addresses(&unlimited);
    assert!(addresses.len() > 1000, "{} addresses", addresses.len());
    // Forward, then back: units dropped on the way are parsed again.
    let (mut equal, mut too_large) = (0, 0);
    for &a in addresses.iter().chain(addresses.iter().rev()).step_by(7) {
        let (mine, want) = (limited.frames(a), unlimited.frames(a));
        if mine.is_empty() && !want.is_empty() {
            // In a unit larger than the limit leaves: not kept.
            too_large += 1;
        } else {
            assert_eq!(mine, want, "{a:#x}");
            equal += 1;
        }
        assert!(
            limited.lazy_bytes.get() <= limited.max_parsed_bytes,
            "{} parsed bytes over {}",
            limited.lazy_bytes.get(),
            limited.max_parsed_bytes
        );
    }
    eprintln!("{equal} lookups equal, {too_large} in units over the limit");
    assert!(equal > too_large * 10, "{equal} equal, {too_large} in units over the limit");
    let held = limited.parsed.borrow().iter().filter_map(Slot::parsed).count();
    let all = unlimited.parsed.borrow().iter().filter_map(Slot::parsed).count();
    assert!(limited.units_dropped() > 0 && held < all, "{} dropped, {held} of {all} held", limited.units_dropped());
    assert_eq!(unlimited.units_dropped(), 0);
    assert!(limited.cost() <= limit);
}
