//! `/proc/PID/maps` parsing.
//!
//! Line format (Documentation/filesystems/proc.rst):
//! `start-end perms offset dev inode pathname`, e.g.
//! `7f3c1a000000-7f3c1a022000 r-xp 00028000 fe:01 1234 /usr/lib/libc.so.6`.
//! Where the kernel has it (6.11+), the `PROCMAP_QUERY` ioctl of the same
//! file gives the executable mappings alone ([`query_executable`]).

use profiler_trace::Mapping;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// One executable, file-backed mapping (what frames can point into).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Device of the file, `(major, minor)`.
    pub dev: (u32, u32),
    /// Inode number (0 for anonymous memory).
    pub inode: u64,
    /// The path, or a pseudo name such as `[vdso]`.
    pub path: String,
    /// One past the last address of the inaccessible (`---p`) anonymous
    /// memory that starts right at the end of an anonymous executable
    /// mapping: a JIT's reservation whose pages are made executable
    /// later (V8's code range). `end` when there is none.
    pub reserved_end: u64,
}

impl MapsEntry {
    /// As the shared trace model's mapping (no file identity yet).
    pub fn to_mapping(&self) -> Mapping {
        Mapping {
            start: self.start,
            end: self.end,
            file_offset: self.offset,
            path: Arc::from(self.path.as_str()),
            file_id: None,
            gnu_build_id: None,
            go_build_id: None,
        }
    }
}

/// Parses the executable mappings of a maps file (`x` permission): files,
/// `[vdso]`, and anonymous memory (JIT code; empty `path`, with the
/// reservation after it, [`MapsEntry::reserved_end`]). Kernel pseudo
/// mappings (`[vsyscall]`) and malformed lines are skipped.
pub fn parse_executable(text: &str) -> Vec<MapsEntry> {
    let mut out: Vec<MapsEntry> = Vec::new();
    // Whether the last line was an anonymous executable mapping (the
    // last entry): the next line may be its reservation.
    let mut after_anonymous = false;
    for line in text.lines() {
        // Most lines are data: skipped before their fields are parsed.
        let perms = line.split(' ').nth(1).unwrap_or("");
        let wanted = perms.as_bytes().get(2) == Some(&b'x') || (after_anonymous && perms == "---p");
        let Some((entry, perms, name)) = wanted.then(|| parse_line(line)).flatten() else {
            after_anonymous = false;
            continue;
        };
        if after_anonymous && perms == "---p" && entry.inode == 0 && reservation_name(name) {
            if let Some(last) = out.last_mut().filter(|l| l.end == entry.start) {
                last.reserved_end = entry.end;
            }
        }
        after_anonymous = false;
        if perms.as_bytes().get(2) != Some(&b'x') || entry.start >= KERNEL_SPACE {
            continue;
        }
        after_anonymous = entry.may_precede_reservation();
        out.push(entry);
    }
    out
}

/// Whether a mapping of this name (as the kernel shows it) can be a
/// JIT's reservation: unnamed or named anonymous memory.
fn reservation_name(name: &str) -> bool {
    name.is_empty() || name.starts_with("[anon:")
}

/// User addresses are below this on x86-64 (even with 5-level paging).
const KERNEL_SPACE: u64 = 1 << 63;

impl MapsEntry {
    /// Whether nothing is mapped from a file (anonymous executable memory).
    pub fn is_anonymous(&self) -> bool {
        self.path.is_empty()
    }

    /// Whether a JIT's reservation may follow it ([`Self::reserved_end`]):
    /// anonymous memory, no inode behind it.
    fn may_precede_reservation(&self) -> bool {
        self.is_anonymous() && self.inode == 0
    }

    /// Whether this is the vDSO.
    pub fn is_vdso(&self) -> bool {
        self.path == "[vdso]"
    }
}

/// The path of a mapping as [`MapsEntry::path`] keeps it, from the name
/// the kernel shows: pseudo names other than `[vdso]` have no file.
fn entry_path(name: &str) -> String {
    match name {
        "" => String::new(),
        p if p.starts_with('[') => {
            if p == "[vdso]" {
                p.to_string()
            } else {
                // [stack], [heap], [vsyscall], anon names: no file behind.
                String::new()
            }
        }
        // A file deleted after mapping keeps working; its name gets a suffix.
        p => p.strip_suffix(" (deleted)").unwrap_or(p).to_string(),
    }
}

/// One line of any mapping: the entry, its permissions and its name as
/// the kernel shows it.
fn parse_line(line: &str) -> Option<(MapsEntry, &str, &str)> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let dev = fields.next()?;
    let inode = fields.next()?;
    let name = fields.next().unwrap_or("").trim_start();
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    if start >= end {
        return None;
    }
    let path = entry_path(name);
    let (major, minor) = dev.split_once(':')?;
    let dev = (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
    let offset = u64::from_str_radix(offset, 16).ok()?;
    let entry = MapsEntry { start, end, offset, dev, inode: inode.parse().ok()?, path, reserved_end: end };
    Some((entry, perms, name))
}

/// `struct procmap_query` of linux/fs.h (uapi, Linux 6.11).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = 0xc068_6611;
/// `PROCMAP_QUERY_VMA_READABLE | _WRITABLE | _EXECUTABLE | _SHARED`: a
/// reservation (`---p`) has none of them.
const PROCMAP_QUERY_VMA_ACCESS: u64 = 0x0f;
const PROCMAP_QUERY_VMA_EXECUTABLE: u64 = 0x04;
const PROCMAP_QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;
/// Longest name the kernel gives (`PATH_MAX`, with its NUL).
const MAX_NAME: usize = 4096;

/// Whether the running kernel answers `PROCMAP_QUERY`: 0 not known yet,
/// 1 yes, 2 no.
static QUERY_SUPPORT: AtomicU8 = AtomicU8::new(0);

/// The executable mappings of the process whose `/proc/PID/maps` is
/// `maps`, at most `max` of them, as [`parse_executable`] reads them from
/// the text, through the `PROCMAP_QUERY` ioctl: the kernel walks the
/// executable mappings alone, where the text formats every mapping (most
/// are data and anonymous memory; that was a third of a process's load).
/// `None` when the kernel has no such ioctl (before 6.11): read the text.
pub fn query_executable(maps: &File, max: usize) -> Option<std::io::Result<Vec<MapsEntry>>> {
    if QUERY_SUPPORT.load(Ordering::Relaxed) == 2 {
        return None;
    }
    let mut name = vec![0u8; MAX_NAME];
    let mut out = Vec::new();
    let mut addr = 0u64;
    while out.len() < max {
        let q = match query(maps, addr, PROCMAP_QUERY_VMA_EXECUTABLE, &mut name) {
            Ok(Some(q)) => q,
            Ok(None) => break, // no executable mapping past `addr`
            // Exited (a zombie has no memory left): as the text, empty.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Some(Ok(Vec::new())),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                if QUERY_SUPPORT.load(Ordering::Relaxed) == 0 {
                    QUERY_SUPPORT.store(2, Ordering::Relaxed);
                    return None;
                }
                return Some(Err(e));
            }
            Err(e) => return Some(Err(e)),
        };
        QUERY_SUPPORT.store(1, Ordering::Relaxed);
        if q.vma_start >= KERNEL_SPACE {
            break;
        }
        let path = entry_path(&query_name(&q, &name));
        let mut entry = MapsEntry {
            start: q.vma_start,
            end: q.vma_end,
            offset: q.vma_offset,
            dev: (q.dev_major, q.dev_minor),
            inode: q.inode,
            path,
            reserved_end: q.vma_end,
        };
        if entry.may_precede_reservation() {
            // One more query: the mapping right after it, of any kind.
            match query(maps, entry.end, 0, &mut name) {
                Ok(Some(next))
                    if next.vma_start == entry.end
                        && next.vma_flags & PROCMAP_QUERY_VMA_ACCESS == 0
                        && next.inode == 0
                        && reservation_name(&query_name(&next, &name)) =>
                {
                    entry.reserved_end = next.vma_end;
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Some(Ok(Vec::new())),
                Err(e) => return Some(Err(e)),
            }
        }
        addr = entry.end;
        out.push(entry);
    }
    Some(Ok(out))
}

/// One `PROCMAP_QUERY`: the first mapping at or after `addr` with the
/// access `flags` (`PROCMAP_QUERY_VMA_*`), its name in `name`; `None`
/// when there is none.
fn query(maps: &File, addr: u64, flags: u64, name: &mut [u8]) -> std::io::Result<Option<ProcmapQuery>> {
    let mut q = ProcmapQuery {
        size: std::mem::size_of::<ProcmapQuery>() as u64,
        query_flags: PROCMAP_QUERY_COVERING_OR_NEXT_VMA | flags,
        query_addr: addr,
        vma_name_size: name.len().min(MAX_NAME) as u32,
        vma_name_addr: name.as_mut_ptr() as u64,
        ..ProcmapQuery::default()
    };
    // SAFETY: `q` is the kernel's struct, and its name buffer is `name`,
    // at least `vma_name_size` bytes that live across the call.
    let r = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY, &mut q as *mut ProcmapQuery) };
    if r < 0 {
        let err = std::io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(err),
        };
    }
    // The kernel's answers are checked as any input: the mapping ends
    // past `addr`, and the name fits its buffer.
    if q.vma_start >= q.vma_end || q.vma_end <= addr || q.vma_name_size as usize > name.len() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "PROCMAP_QUERY: bad answer"));
    }
    Ok(Some(q))
}

/// The name `query` put in `name` for `q` (empty: none).
fn query_name(q: &ProcmapQuery, name: &[u8]) -> String {
    // The size counts the terminating NUL; 0: no name.
    let len = (q.vma_name_size as usize).saturating_sub(1).min(name.len());
    String::from_utf8_lossy(&name[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 131 /usr/bin/dd
55d0c0a02000-55d0c0a0e000 r-xp 00002000 fe:01 131 /usr/bin/dd
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
7f3c1a028000-7f3c1a17d000 r-xp 00028000 fe:01 2345                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f3c1a200000-7f3c1a201000 r-xp 00000000 00:00 0 
7f3c1a201000-7f3c1a280000 ---p 00000000 00:00 0 
7f3c1a300000-7f3c1a301000 r-xp 00001000 fe:01 77 /tmp/my lib.so (deleted)
7f3c1a301000-7f3c1a380000 ---p 00000000 00:00 0 
7f3c1a400000-7f3c1a401000 rwxp 00000000 00:00 0 
7f3c1a401000-7f3c1a402000 rw-p 00000000 00:00 0 
7f3c1a402000-7f3c1a480000 ---p 00000000 00:00 0 
7f3c1a500000-7f3c1a501000 rwxp 00000000 00:00 0                          [anon:jit]
7f3c1a502000-7f3c1a580000 ---p 00000000 00:00 0 
7f3c1a600000-7f3c1a601000 rwxp 00000000 00:00 0 
7f3c1a601000-7f3c1a680000 ---p 00000000 00:00 0                          [anon:code range]
7ffd5a1f0000-7ffd5a1f2000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
broken line
";

    #[test]
    fn keeps_executable_file_mappings_and_vdso() {
        let e = parse_executable(MAPS);
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/usr/bin/dd", "/usr/lib/x86_64-linux-gnu/libc.so.6", "", "/tmp/my lib.so", "", "", "", "[vdso]"]
        );
        assert!(e[2].is_anonymous() && e[7].is_vdso());
        // The inaccessible anonymous memory right after anonymous code
        // (not after a file's, nor after other memory, nor apart from it).
        let reserved: Vec<u64> = e.iter().map(|e| e.reserved_end - e.end).collect();
        assert_eq!(reserved, [0, 0, 0x7f000, 0, 0, 0, 0x7f000, 0]);
        assert_eq!(
            e[1],
            MapsEntry {
                start: 0x7f3c1a028000,
                end: 0x7f3c1a17d000,
                offset: 0x28000,
                dev: (0xfe, 1),
                inode: 2345,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                reserved_end: 0x7f3c1a17d000,
            }
        );
    }

    /// The ioctl and the text agree, for this process and a `sleep`,
    /// reservations after anonymous code included.
    #[test]
    fn query_gives_what_the_text_gives() {
        // Four pages reserved, the first made executable (a JIT's code
        // range with its first code committed).
        const PAGE: usize = 4096;
        // SAFETY: a fresh private mapping of our own, unmapped below; no
        // memory of anything else is touched.
        let reservation = unsafe {
            libc::mmap(std::ptr::null_mut(), 4 * PAGE, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(reservation, libc::MAP_FAILED);
        // SAFETY: the first page of the mapping just made.
        let exec = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
        assert_eq!(unsafe { libc::mprotect(reservation, PAGE, exec) }, 0);
        let code_start = reservation as u64;
        let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        for pid in ["self".to_string(), child.id().to_string()] {
            let path = format!("/proc/{pid}/maps");
            let text = parse_executable(&std::fs::read_to_string(&path).unwrap());
            let Some(queried) = query_executable(&File::open(&path).unwrap(), 1 << 16) else {
                let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
                let (major, minor) = release.split_once('.').unwrap();
                let minor: u32 = minor.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
                assert!((major.parse::<u32>().unwrap(), minor) < (6, 11), "PROCMAP_QUERY refused on {release}");
                continue;
            };
            assert_eq!(queried.unwrap(), text, "{pid}");
            assert!(!text.is_empty());
            if pid == "self" {
                let code = text.iter().find(|e| e.start == code_start).expect("the executable page");
                assert_eq!((code.end, code.reserved_end), (code_start + PAGE as u64, code_start + 4 * PAGE as u64));
            }
        }
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(reservation, 4 * PAGE) };
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        // At most `max`.
        let few = query_executable(&File::open("/proc/self/maps").unwrap(), 2);
        assert!(few.is_none_or(|r| r.unwrap().len() == 2));
    }

    #[test]
    fn reads_own_maps() {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let e = parse_executable(&text);
        assert!(e.iter().any(|m| std::path::Path::new(&m.path) == exe), "{e:#?}");
    }
}
