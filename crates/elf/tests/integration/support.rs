//! Helpers: building test programs, running tools, and reading
//! `readelf --debug-dump=frames-interp` as an independent oracle.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use profiler_elf::{CfaBase, RbpRule, UnwindRule, UnwindTable};

/// The system C library the tests compare against.
pub const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// Whether we run under CI (`CI=true`), where a missing tool fails the
/// test instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A fresh directory for one test.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profiler-elf").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Runs `cmd`, panicking with the command, status and output on failure.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles `source` with gcc and `args` into `dir/name`.
pub fn compile(dir: &Path, name: &str, source: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write source");
    let out = dir.join(name);
    run(Command::new("gcc").args(args).arg("-o").arg(&out).arg(&src));
    out
}

/// A copy of `path` with the section header table unreachable (e_shoff,
/// e_shnum and e_shstrndx zeroed), as `strip --strip-section-headers`
/// would leave it.
pub fn strip_section_headers(path: &Path, out: &Path) -> PathBuf {
    let mut data = std::fs::read(path).expect("read");
    data[40..48].fill(0); // e_shoff
    data[60..64].fill(0); // e_shnum, e_shstrndx
    std::fs::write(out, data).expect("write");
    out.to_owned()
}

/// One row of readelf's interpreted CFI table.
#[derive(Clone, Debug)]
pub struct Row {
    pub loc: u64,
    /// Column name ("CFA", "rbp", "ra", ...) to readelf's text.
    pub cols: HashMap<String, String>,
}

/// One FDE as readelf shows it.
#[derive(Clone, Debug)]
pub struct Fde {
    pub section: String,
    pub start: u64,
    pub end: u64,
    pub augmentation: String,
    /// The rows; an FDE without instructions gets its CIE's initial row.
    pub rows: Vec<Row>,
}

/// Parses `readelf --debug-dump=frames-interp FILE`.
pub fn readelf_frames(path: &Path) -> Vec<Fde> {
    // readelf exits 1 on libraries whose .gnu_debuglink file is missing,
    // after printing everything: judge by the output instead.
    let out = Command::new("readelf").arg("--debug-dump=frames-interp").arg(path).output().expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("Contents of the"), "readelf printed no CFI for {}: {out:?}", path.display());
    // CIE (section, offset) -> (augmentation, initial rows)
    let mut cies: HashMap<(String, String), (String, Vec<Row>)> = HashMap::new();
    let mut fdes: Vec<Fde> = Vec::new();
    let mut section = String::new();
    // Where rows go: a CIE key or the last FDE.
    enum Target {
        None,
        Cie((String, String)),
        Fde,
    }
    let mut target = Target::None;
    let mut header: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Contents of the ") {
            section = rest.split_whitespace().next().unwrap_or("").to_owned();
            target = Target::None;
            continue;
        }
        let mut tokens: Vec<&str> = Vec::new();
        for t in line.split_whitespace() {
            // "r9 (r9)" is one value (register rule): keep "r9".
            if !t.starts_with('(') || tokens.is_empty() {
                tokens.push(t);
            }
        }
        if tokens.len() >= 5 && tokens[3] == "CIE" {
            let aug = tokens[4].trim_matches('"').to_owned();
            let key = (section.clone(), tokens[0].to_owned());
            cies.insert(key.clone(), (aug, Vec::new()));
            target = Target::Cie(key);
            continue;
        }
        if tokens.len() >= 6 && tokens[3] == "FDE" {
            let cie = tokens[4].strip_prefix("cie=").expect("cie=");
            let (start, end) = tokens[5].strip_prefix("pc=").and_then(|r| r.split_once("..")).expect("pc=");
            let (aug, cie_rows) = cies.get(&(section.clone(), cie.to_owned())).cloned().expect("CIE of FDE");
            let start = u64::from_str_radix(start, 16).expect("hex");
            let end = u64::from_str_radix(end, 16).expect("hex");
            let rows = cie_rows.into_iter().take(1).map(|mut r| {
                r.loc = start;
                r
            });
            fdes.push(Fde { section: section.clone(), start, end, augmentation: aug, rows: rows.collect() });
            target = Target::Fde;
            continue;
        }
        if tokens.first() == Some(&"LOC") {
            header = tokens.iter().map(|s| s.to_string()).collect();
            if let (Target::Fde, Some(fde)) = (&target, fdes.last_mut()) {
                // The FDE has its own table: forget the CIE's row.
                fde.rows.clear();
            }
            continue;
        }
        if !tokens.is_empty()
            && tokens.len() == header.len()
            && tokens[0].len() == 16
            && u64::from_str_radix(tokens[0], 16).is_ok()
        {
            let loc = u64::from_str_radix(tokens[0], 16).expect("hex");
            let cols = header[1..].iter().cloned().zip(tokens[1..].iter().map(|s| s.to_string())).collect();
            let row = Row { loc, cols };
            match &target {
                Target::Cie(key) => cies.get_mut(key).expect("cie").1.push(row),
                Target::Fde => {
                    let fde = fdes.last_mut().expect("fde");
                    if fde.rows.last().is_some_and(|r| r.loc == loc) {
                        fde.rows.pop();
                    }
                    fde.rows.push(row);
                }
                Target::None => {}
            }
        }
    }
    fdes
}

/// What a readelf row should reduce to.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Exact(UnwindRule),
    /// CFA given by an expression: some `CfaDeref` (with this rbp rule
    /// family) or `Plt`.
    CfaExpression {
        rbp_is_expression: bool,
    },
    /// `Cfa { base, offset, rbp: AtRbp(_) }`.
    CfaWithRbpExpression {
        base: CfaBase,
        offset: i32,
    },
}

fn parse_cfa_offset(text: &str) -> Option<(CfaBase, i32)> {
    let (reg, off) = text
        .split_once('+')
        .map(|(r, o)| (r, o.parse().ok()))
        .or_else(|| text.split_once('-').map(|(r, o)| (r, o.parse::<i32>().ok().map(|v| -v))))?;
    let base = match reg {
        "rsp" => CfaBase::Rsp,
        "rbp" => CfaBase::Rbp,
        _ => return None,
    };
    Some((base, off?))
}

/// The reduction of one readelf row, computed from readelf's text alone.
pub fn expected(fde: &Fde, row: &Row) -> Expected {
    if fde.augmentation.contains('S') {
        return Expected::Exact(UnwindRule::Signal);
    }
    let col = |name: &str| row.cols.get(name).map(String::as_str).unwrap_or("u");
    let ra = col("ra");
    if ra == "u" {
        return Expected::Exact(UnwindRule::Stop);
    }
    let cfa = col("CFA");
    let rbp_text = col("rbp");
    let rbp = match rbp_text {
        "u" | "s" => Some(RbpRule::Unchanged),
        t if t.starts_with('c') => t[1..].parse::<i32>().ok().map(RbpRule::AtCfa),
        _ => None,
    };
    if cfa == "exp" {
        if ra != "c-8" {
            return Expected::Exact(UnwindRule::Invalid);
        }
        if rbp.is_none() && rbp_text != "exp" {
            return Expected::Exact(UnwindRule::Invalid);
        }
        return Expected::CfaExpression { rbp_is_expression: rbp_text == "exp" };
    }
    let Some((base, offset)) = parse_cfa_offset(cfa) else {
        return Expected::Exact(UnwindRule::Invalid);
    };
    if ra != "c-8" {
        return Expected::Exact(UnwindRule::Invalid);
    }
    let rbp = match rbp {
        Some(r) => r,
        // GCC's DRAP epilogue bug: see the note in the crate's row reduction.
        None if rbp_text == "exp" && base == CfaBase::Rsp => RbpRule::Unchanged,
        // Saved relative to rbp: readelf's "exp" does not show the offset.
        None if rbp_text == "exp" => return Expected::CfaWithRbpExpression { base, offset },
        None => return Expected::Exact(UnwindRule::Invalid),
    };
    Expected::Exact(UnwindRule::Cfa { base, offset, rbp })
}

fn matches(expected: &Expected, actual: UnwindRule) -> bool {
    match (expected, actual) {
        (Expected::Exact(e), a) => *e == a,
        (Expected::CfaExpression { rbp_is_expression }, UnwindRule::CfaDeref { rbp, .. }) => {
            *rbp_is_expression == matches!(rbp, RbpRule::AtRbp(_))
        }
        (Expected::CfaExpression { .. }, UnwindRule::Plt { .. }) => true,
        (Expected::CfaWithRbpExpression { base, offset }, UnwindRule::Cfa { base: b, offset: o, rbp }) => {
            *base == b && *offset == o && matches!(rbp, RbpRule::AtRbp(_))
        }
        _ => false,
    }
}

/// Compares every row of `fde` with `table`; returns the mismatches.
///
/// Checks that the rule at each readelf row's address is the reduction of
/// that row, and that the table changes rule inside the FDE only at
/// readelf row addresses.
pub fn compare_fde(table: &UnwindTable, fde: &Fde) -> Vec<String> {
    let mut problems = Vec::new();
    // A row at the FDE's end (an advance to exactly the end, as in a PLT
    // with no stub after PLT0) covers nothing.
    for row in fde.rows.iter().filter(|r| r.loc < fde.end) {
        let want = expected(fde, row);
        let got = table.lookup(row.loc);
        if !matches(&want, got) {
            problems.push(format!(
                "{} FDE {:#x}..{:#x} row {:#x} {:?}: expected {want:?}, got {got:?}",
                fde.section, fde.start, fde.end, row.loc, row.cols
            ));
        }
    }
    let locs: Vec<u64> = fde.rows.iter().map(|r| r.loc).collect();
    let deltas = table.deltas.to_vec();
    let first = deltas.partition_point(|d| d.address <= fde.start);
    for d in deltas[first..].iter().take_while(|d| d.address < fde.end) {
        if !locs.contains(&d.address) {
            problems.push(format!(
                "{} FDE {:#x}..{:#x}: table has a rule change at {:#x} ({:?}) where readelf has no row",
                fde.section, fde.start, fde.end, d.address, d.rule
            ));
        }
    }
    problems
}

/// Compares every FDE; panics listing the first mismatches.
pub fn assert_fdes_match(table: &UnwindTable, fdes: &[&Fde], what: &str) {
    assert!(!fdes.is_empty(), "{what}: no FDEs to compare");
    let problems: Vec<String> = fdes.iter().flat_map(|f| compare_fde(table, f)).collect();
    assert!(
        problems.is_empty(),
        "{what}: {} mismatches with readelf, first ones:\n{}",
        problems.len(),
        problems.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
