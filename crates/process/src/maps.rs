//! `/proc/PID/maps` parsing.
//!
//! Line format (Documentation/filesystems/proc.rst):
//! `start-end perms offset dev inode pathname`, e.g.
//! `7f3c1a000000-7f3c1a022000 r-xp 00028000 fe:01 1234 /usr/lib/libc.so.6`.

use profiler_trace::Mapping;
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
/// `[vdso]`, and anonymous memory (JIT code; empty `path`). Kernel
/// pseudo mappings (`[vsyscall]`) and malformed lines are skipped.
pub fn parse_executable(text: &str) -> Vec<MapsEntry> {
    text.lines().filter_map(parse_line).filter(|e| e.start < KERNEL_SPACE).collect()
}

/// User addresses are below this on x86-64 (even with 5-level paging).
const KERNEL_SPACE: u64 = 1 << 63;

impl MapsEntry {
    /// Whether nothing is mapped from a file (anonymous executable memory).
    pub fn is_anonymous(&self) -> bool {
        self.path.is_empty()
    }

    /// Whether this is the vDSO.
    pub fn is_vdso(&self) -> bool {
        self.path == "[vdso]"
    }
}

fn parse_line(line: &str) -> Option<MapsEntry> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let dev = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    if start >= end {
        return None;
    }
    let path = match path {
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
    };
    let (major, minor) = dev.split_once(':')?;
    let dev = (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
    Some(MapsEntry { start, end, offset: u64::from_str_radix(offset, 16).ok()?, dev, inode: inode.parse().ok()?, path })
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
7f3c1a300000-7f3c1a301000 r-xp 00001000 fe:01 77 /tmp/my lib.so (deleted)
7ffd5a1f0000-7ffd5a1f2000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
broken line
";

    #[test]
    fn keeps_executable_file_mappings_and_vdso() {
        let e = parse_executable(MAPS);
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/usr/bin/dd", "/usr/lib/x86_64-linux-gnu/libc.so.6", "", "/tmp/my lib.so", "[vdso]"]);
        assert!(e[2].is_anonymous() && e[4].is_vdso());
        assert_eq!(
            e[1],
            MapsEntry {
                start: 0x7f3c1a028000,
                end: 0x7f3c1a17d000,
                offset: 0x28000,
                dev: (0xfe, 1),
                inode: 2345,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
            }
        );
    }

    #[test]
    fn reads_own_maps() {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let e = parse_executable(&text);
        assert!(e.iter().any(|m| std::path::Path::new(&m.path) == exe), "{e:#?}");
    }
}
