//! Opening files that a profiled process controls.
//!
//! The agent runs as root and opens what other users' processes map or
//! name (libraries, `.gnu_debuglink` and `.gnu_debugaltlink` targets). A
//! path there may be a FIFO (an open or read blocks forever), a device
//! (`/dev/zero` reads without end; opening some devices has side
//! effects), a file far too large, or, inside a container's root, a
//! symlink leading out of it. Every such open goes through here:
//!
//! - the path is resolved with `O_PATH` (nothing is opened for reading
//!   yet, no driver's `open` runs), `fstat` must say `S_ISREG` and the
//!   size must be within the bound of the [`Purpose`]; only then is the
//!   same inode reopened for reading through `/proc/self/fd/N`;
//! - inside a process's root ([`open_in_root`]) the path is resolved by
//!   `openat2(root, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`
//!   (Linux 5.6): absolute symlinks and `..` stay inside that root, and
//!   `/proc/.../root`-style magic links are refused. Without `openat2`
//!   (ENOSYS) the open is refused ([`OpenError::NoOpenat2`]) rather than
//!   resolved less safely;
//! - callers get the descriptor and its [`FileIdentity`] and read or map
//!   from that descriptor, never from the path again.
//!
//! [`Refusals`] counts the refusals by reason.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use profiler_trace::{FileId, TableKey};
use sha2::{Digest, Sha256};

/// Largest executable or library opened (the largest real ones, browser
/// and database binaries, are a few hundred MB).
pub const MAX_EXECUTABLE_BYTES: u64 = 2 << 30;
/// Largest separate debug file opened (debug files of large C++
/// programs reach a few GB).
pub const MAX_DEBUG_FILE_BYTES: u64 = 4 << 30;

/// What a file is opened for, which bounds its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// An executable or library a process maps.
    Executable,
    /// A separate debug file (debuglink, build id, dwz supplement).
    DebugFile,
}

impl Purpose {
    /// The largest file accepted for this purpose.
    pub fn max_bytes(self) -> u64 {
        match self {
            Purpose::Executable => MAX_EXECUTABLE_BYTES,
            Purpose::DebugFile => MAX_DEBUG_FILE_BYTES,
        }
    }
}

/// Which inode a descriptor is, and which version of it (`fstat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device (`st_dev`).
    pub dev: u64,
    /// Inode (`st_ino`).
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Status change time, seconds and nanoseconds.
    pub ctime: (i64, i64),
}

impl FileIdentity {
    fn of(st: &libc::stat) -> FileIdentity {
        FileIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size.max(0) as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// Whether this is the inode a `/proc/PID/maps` line names
    /// (`major:minor inode`). On overlayfs the maps line shows the
    /// underlying layer's device while `fstat` through the overlay shows
    /// the overlay's, so there only the inode is compared (overlayfs
    /// keeps the real inode number when its layers share a filesystem;
    /// with `xino` it does not, and such files are refused: a file that
    /// cannot be shown to be the mapped one is never used).
    pub fn is_mapped(&self, major: u32, minor: u32, ino: u64, on_overlay: bool) -> bool {
        let same_dev = libc::major(self.dev) == major && libc::minor(self.dev) == minor;
        self.ino == ino && (same_dev || on_overlay)
    }

    /// Whether `other` is the same inode at the same version (size and
    /// times): what was analysed is what is opened now.
    pub fn same_version(&self, other: &FileIdentity) -> bool {
        self == other
    }
}

/// An open regular file and what `fstat` said of it.
#[derive(Debug)]
pub struct OpenedFile {
    /// Open for reading.
    pub file: File,
    /// Its identity when opened.
    pub identity: FileIdentity,
    /// Whether it lives on overlayfs (see [`FileIdentity::is_mapped`]).
    pub on_overlay: bool,
}

/// Why a file was not opened. The variants other than `Io` are
/// refusals, counted in [`Refusals`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The path does not lead to a regular file.
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    /// Larger than the bound of its purpose.
    #[error("{size} bytes, more than the {max} accepted")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// Not the inode the process maps (replaced on disk, or a crafted
    /// path).
    #[error("not the file the process maps")]
    Mismatch,
    /// Resolving it inside a process's root met a magic link or too many
    /// symlinks (`ELOOP`/`EXDEV` of `openat2`).
    #[error("refused a path that tries to leave its root")]
    Escape,
    /// `openat2` is missing (Linux before 5.6): files inside a process's
    /// root are not opened.
    #[error("openat2 is not available: files inside a process's root are not opened")]
    NoOpenat2,
    /// The file is missing or unreadable (not a refusal).
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        match e {
            OpenError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

impl OpenError {
    /// Whether this is a refusal (not a plain I/O failure).
    pub fn is_refusal(&self) -> bool {
        !matches!(self, OpenError::Io(_))
    }
}

/// Refusals counted by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    /// FIFOs, devices, sockets, directories.
    pub not_regular: u64,
    /// Over the size bound of their purpose.
    pub too_large: u64,
    /// Not the file the process maps.
    pub mismatch: u64,
    /// Paths that tried to leave a process's root (magic links, loops).
    pub escape: u64,
    /// Opens inside a root refused for want of `openat2`.
    pub no_openat2: u64,
}

impl Refusals {
    /// Counts `e` if it is a refusal.
    pub fn count(&mut self, e: &OpenError) {
        match e {
            OpenError::NotRegular(_) => self.not_regular += 1,
            OpenError::TooLarge { .. } => self.too_large += 1,
            OpenError::Mismatch => self.mismatch += 1,
            OpenError::Escape => self.escape += 1,
            OpenError::NoOpenat2 => self.no_openat2 += 1,
            OpenError::Io(_) => {}
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Refusals) {
        self.not_regular += other.not_regular;
        self.too_large += other.too_large;
        self.mismatch += other.mismatch;
        self.escape += other.escape;
        self.no_openat2 += other.no_openat2;
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.not_regular + self.too_large + self.mismatch + self.escape + self.no_openat2
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid, writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "FIFO",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        libc::S_IFSOCK => "socket",
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symlink",
        _ => "unknown type",
    }
}

/// `OVERLAYFS_SUPER_MAGIC` of `statfs(2)`.
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

fn on_overlay(fd: &OwnedFd) -> bool {
    // SAFETY: an all-zero statfs is a valid value to be overwritten.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; sfs is a valid, writable statfs.
    unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sfs) == 0 && sfs.f_type as i64 == OVERLAYFS_SUPER_MAGIC }
}

/// Checks what an `O_PATH` descriptor is, then opens that same inode for
/// reading.
fn reopen_regular(path_fd: OwnedFd, purpose: Purpose) -> Result<OpenedFile, OpenError> {
    let st = fstat(&path_fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(OpenError::NotRegular(kind_of(st.st_mode)));
    }
    let identity = FileIdentity::of(&st);
    if identity.size > purpose.max_bytes() {
        return Err(OpenError::TooLarge { size: identity.size, max: purpose.max_bytes() });
    }
    // Reopening through our own descriptor's magic link opens exactly the
    // inode checked above, whatever happened to the path since.
    let fd_path = c_path(Path::new(&format!("/proc/self/fd/{}", path_fd.as_raw_fd())))?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    // SAFETY: fd_path is a NUL-terminated path; the result is checked.
    let raw = unsafe { libc::open(fd_path.as_ptr(), flags) };
    if raw < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: raw is a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let reopened = FileIdentity::of(&fstat(&fd)?);
    if (reopened.dev, reopened.ino) != (identity.dev, identity.ino) {
        return Err(OpenError::Mismatch);
    }
    let on_overlay = on_overlay(&fd);
    Ok(OpenedFile { file: File::from(fd), identity, on_overlay })
}

/// The identity of the regular file `path` leads to (a
/// `/proc/PID/map_files` entry: the mapped file), without opening it:
/// one `stat` where opening and checking takes seven calls, for files
/// already analysed under that identity. Not a regular file: refused.
pub fn stat_regular(path: &Path) -> Result<FileIdentity, OpenError> {
    let c = c_path(path)?;
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path; st is a valid, writable stat.
    if unsafe { libc::stat(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error().into());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(OpenError::NotRegular(kind_of(st.st_mode)));
    }
    Ok(FileIdentity::of(&st))
}

/// Opens `path` (of the host's namespace, or a `/proc/PID/map_files`
/// entry) when it is a regular file within `purpose`'s bound. Symlinks
/// are followed as the host sees them: for paths a process controls
/// inside its root use [`open_in_root`].
pub fn open_regular(path: &Path, purpose: Purpose) -> Result<OpenedFile, OpenError> {
    let c = c_path(path)?;
    // SAFETY: c is a NUL-terminated path; the result is checked.
    let raw = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: raw is a descriptor we just opened and own.
    reopen_regular(unsafe { OwnedFd::from_raw_fd(raw) }, purpose)
}

/// A descriptor of its own on `file` (opened earlier by one of the
/// functions here, and kept), checked as [`open_regular`] checks a path:
/// a regular file within `purpose`'s bound, with its identity now.
pub fn reopen_file(file: &File, purpose: Purpose) -> Result<OpenedFile, OpenError> {
    let fd = OwnedFd::from(file.try_clone()?);
    let st = fstat(&fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(OpenError::NotRegular(kind_of(st.st_mode)));
    }
    let identity = FileIdentity::of(&st);
    if identity.size > purpose.max_bytes() {
        return Err(OpenError::TooLarge { size: identity.size, max: purpose.max_bytes() });
    }
    let on_overlay = on_overlay(&fd);
    Ok(OpenedFile { file: File::from(fd), identity, on_overlay })
}

/// `struct open_how` of `openat2(2)`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_MAGICLINKS`: refuse `/proc/PID/fd/N`-style links.
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `RESOLVE_IN_ROOT`: resolve as if the directory were `/`.
const RESOLVE_IN_ROOT: u64 = 0x10;

/// Opens `path` as a process whose root directory is `root` (e.g.
/// `/proc/PID/root`) sees it: absolute symlinks and `..` are resolved
/// inside `root` and cannot leave it, magic links are refused. Then as
/// [`open_regular`].
pub fn open_in_root(root: &Path, path: &Path, purpose: Purpose) -> Result<OpenedFile, OpenError> {
    let root_c = c_path(root)?;
    // SAFETY: root_c is NUL-terminated; the result is checked.
    let raw = unsafe { libc::open(root_c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: raw is a descriptor we just opened and own.
    let root_fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let path_c = c_path(path)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: the arguments are an open directory descriptor, a
    // NUL-terminated path, and an open_how of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_fd.as_raw_fd(),
            path_c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => OpenError::NoOpenat2,
            Some(libc::ELOOP) | Some(libc::EXDEV) => OpenError::Escape,
            _ => OpenError::Io(e),
        });
    }
    // SAFETY: ret is a descriptor the kernel just gave us.
    reopen_regular(unsafe { OwnedFd::from_raw_fd(ret as i32) }, purpose)
}

/// `path`, as `/proc/PID/maps` shows it to us, as the process whose root
/// is `root` (`/proc/PID/root`) names it. A process in another mount
/// namespace (a container) is shown its own paths already; a chrooted
/// process of ours is shown with its root's prefix, which is removed.
pub fn path_in_root(root: &Path, path: &Path) -> std::path::PathBuf {
    match std::fs::read_link(root) {
        Ok(target) if target != Path::new("/") && target.is_absolute() => match path.strip_prefix(&target) {
            Ok(rest) => Path::new("/").join(rest),
            Err(_) => path.to_owned(),
        },
        _ => path.to_owned(),
    }
}

/// Bytes read at a time when hashing a whole file.
const DIGEST_CHUNK: usize = 256 * 1024;

/// The [`TableKey`] of an opened file: SHA-256 over its `size` bytes and
/// the size, read through the descriptor a chunk at a time (no copy of
/// the file on the heap). Fails if the file is shorter than `size` now.
pub fn table_key_of_file(file: &File, size: u64) -> io::Result<TableKey> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; DIGEST_CHUNK.min(size as usize).max(1)];
    let mut at = 0u64;
    while at < size {
        let want = (size - at).min(buf.len() as u64) as usize;
        let n = file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while hashed"));
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    h.update(size.to_be_bytes());
    Ok(TableKey(h.finalize().into()))
}

/// Files up to this size are keyed by a digest of their content
/// ([`table_key_of_opened`]); larger ones by their FileID and the
/// identity of the inode version parsed.
pub const CONTENT_DIGEST_MAX_BYTES: u64 = 16 << 20;

/// The [`TableKey`] of an opened file whose wire FileID is `file_id`:
/// for files up to [`CONTENT_DIGEST_MAX_BYTES`], [`table_key_of_file`]
/// (two files share it only with the same bytes, wherever they are); for
/// larger ones SHA-256 of the FileID and the inode version opened
/// (device, inode, size, modification and change times): a crafted
/// file cannot share it (another inode, or a change time it cannot set),
/// and hashing 150-200 MB libraries whole (rustc's, LLVM's: 340 MB per
/// compiler version) costs more CPU than the rest of a churn's loads.
/// The price: two copies of a big file on different inodes (container
/// layers) are analysed once each.
pub fn table_key_of_opened(opened: &OpenedFile, file_id: FileId) -> io::Result<TableKey> {
    let id = &opened.identity;
    if id.size <= CONTENT_DIGEST_MAX_BYTES {
        return table_key_of_file(&opened.file, id.size);
    }
    let mut h = Sha256::new();
    // Domain-separated from the content digests.
    h.update(b"ebpf-profiler inode version\0");
    h.update(file_id.0);
    for n in [id.dev, id.ino, id.size] {
        h.update(n.to_be_bytes());
    }
    for (secs, nanos) in [id.mtime, id.ctime] {
        h.update(secs.to_be_bytes());
        h.update(nanos.to_be_bytes());
    }
    Ok(TableKey(h.finalize().into()))
}

/// The [`TableKey`] of the host file at `path` (as [`open_regular`]
/// opens it, for an executable), as the process manager keys it.
pub fn table_key_of_path(path: impl AsRef<Path>) -> Result<TableKey, OpenError> {
    let opened = open_regular(path.as_ref(), Purpose::Executable)?;
    let file_id = crate::file_id_of_file(&opened.file, opened.identity.size)?;
    Ok(table_key_of_opened(&opened, file_id)?)
}

/// The [`TableKey`] of bytes in memory (the vDSO).
pub fn table_key_of_bytes(data: &[u8]) -> TableKey {
    let mut h = Sha256::new();
    h.update(data);
    h.update((data.len() as u64).to_be_bytes());
    TableKey(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ep-source-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mkfifo(path: &Path) {
        let c = c_path(path).unwrap();
        // SAFETY: c is NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    #[test]
    fn big_files_are_keyed_by_their_inode_version_small_ones_by_content() {
        let dir = temp_dir("keys");
        let key = |p: &Path| {
            let o = open_regular(p, Purpose::Executable).unwrap();
            let id = crate::file_id_of_file(&o.file, o.identity.size).unwrap();
            (id, table_key_of_opened(&o, id).unwrap(), table_key_of_file(&o.file, o.identity.size).unwrap())
        };
        // Small: the content digest, the same for two copies.
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, b"\x7fELF small").unwrap();
        std::fs::copy(&a, &b).unwrap();
        let (ka, kb) = (key(&a), key(&b));
        assert_eq!(ka.1, ka.2, "a small file's key is its content digest");
        assert_eq!(ka.1, kb.1, "two copies of a small file share tables");
        // Big (sparse): same bytes, same FileId, but not the same key.
        let (c, d) = (dir.join("c"), dir.join("d"));
        for p in [&c, &d] {
            let f = File::create(p).unwrap();
            f.set_len(CONTENT_DIGEST_MAX_BYTES + 1).unwrap();
            f.write_at(b"\x7fELF big", 0).unwrap();
        }
        let (kc, kd) = (key(&c), key(&d));
        assert_eq!(kc.0, kd.0, "the same head, tail and length");
        assert_eq!(kc.2, kd.2, "the same bytes");
        assert_ne!(kc.1, kd.1, "another inode: another key");
        assert_ne!(kc.1, kc.2, "not the content digest");
        assert_eq!(key(&c).1, kc.1, "the same inode version: the same key");
        // A change in place (the same size) is a new version.
        std::thread::sleep(std::time::Duration::from_millis(10));
        File::options().write(true).open(&c).unwrap().write_at(b"X", 100).unwrap();
        assert_ne!(key(&c).1, kc.1, "modified: another key");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stat_regular_is_the_identity_an_open_finds_and_refuses_fifos() {
        let dir = temp_dir("stat");
        let file = dir.join("lib.so");
        std::fs::write(&file, b"\x7fELF and more").unwrap();
        let link = dir.join("link");
        symlink(&file, &link).unwrap();
        let opened = open_regular(&file, Purpose::Executable).unwrap();
        assert_eq!(stat_regular(&link).unwrap(), opened.identity, "links followed, as map_files entries are");
        let fifo = dir.join("fifo");
        mkfifo(&fifo);
        assert!(matches!(stat_regular(&fifo), Err(OpenError::NotRegular("FIFO"))));
        assert!(matches!(stat_regular(&dir.join("absent")), Err(OpenError::Io(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_kept_file_reopens_after_its_path_is_gone_with_its_identity_now() {
        let dir = temp_dir("reopen");
        let path = dir.join("lib.so");
        std::fs::write(&path, b"\x7fELF kept").unwrap();
        let writer = File::options().write(true).open(&path).unwrap();
        let kept = open_regular(&path, Purpose::Executable).unwrap();
        std::fs::remove_file(&path).unwrap();
        let again = reopen_file(&kept.file, Purpose::Executable).unwrap();
        let version = |i: &FileIdentity| (i.dev, i.ino, i.size, i.mtime);
        // (Unlinking changed its ctime only.)
        assert_eq!(version(&again.identity), version(&kept.identity), "the same inode and version, through no path");
        // Its own descriptor: closing the kept one does not close it.
        drop(kept);
        let mut head = [0u8; 4];
        again.file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(&head, b"\x7fELF");
        // Grown past the bound since: refused.
        writer.set_len(Purpose::Executable.max_bytes() + 1).unwrap();
        assert!(matches!(reopen_file(&again.file, Purpose::Executable), Err(OpenError::TooLarge { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn opens_regular_files_and_reports_identity() {
        let d = temp_dir("regular");
        let p = d.join("f");
        std::fs::write(&p, b"hello").unwrap();
        let o = open_regular(&p, Purpose::Executable).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!((o.identity.dev, o.identity.ino, o.identity.size), (meta.dev(), meta.ino(), 5));
        let mut buf = [0u8; 5];
        o.file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(o.identity.same_version(&open_regular(&p, Purpose::DebugFile).unwrap().identity));
    }

    #[test]
    fn refuses_fifo_device_directory_without_blocking() {
        let d = temp_dir("special");
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        // Opening a FIFO for reading with no writer would block: O_PATH
        // does not.
        assert!(matches!(open_regular(&fifo, Purpose::Executable), Err(OpenError::NotRegular("FIFO"))));
        assert!(matches!(
            open_regular(Path::new("/dev/zero"), Purpose::Executable),
            Err(OpenError::NotRegular("character device"))
        ));
        assert!(matches!(open_regular(&d, Purpose::DebugFile), Err(OpenError::NotRegular("directory"))));
        // A symlink to a FIFO is the FIFO.
        symlink(&fifo, d.join("link")).unwrap();
        assert!(matches!(open_regular(&d.join("link"), Purpose::Executable), Err(OpenError::NotRegular("FIFO"))));
        assert!(matches!(open_regular(&d.join("missing"), Purpose::Executable), Err(OpenError::Io(_))));
        let mut r = Refusals::default();
        for e in [OpenError::NotRegular("FIFO"), OpenError::Mismatch, OpenError::Io(io::ErrorKind::NotFound.into())] {
            r.count(&e);
        }
        assert_eq!((r.not_regular, r.mismatch, r.total()), (1, 1, 2));
    }

    #[test]
    fn refuses_oversize_files() {
        let d = temp_dir("large");
        let p = d.join("sparse");
        let f = File::create(&p).unwrap();
        f.set_len(MAX_EXECUTABLE_BYTES + 1).unwrap();
        assert!(matches!(
            open_regular(&p, Purpose::Executable),
            Err(OpenError::TooLarge { size, max: MAX_EXECUTABLE_BYTES }) if size == MAX_EXECUTABLE_BYTES + 1
        ));
        assert!(open_regular(&p, Purpose::DebugFile).is_ok(), "within the debug file bound");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn symlinks_stay_inside_the_root() {
        let d = temp_dir("root");
        let root = d.join("root");
        std::fs::create_dir_all(root.join("app")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/secret"), b"inside").unwrap();
        // The host file an escape would read.
        std::fs::create_dir_all(d.join("etc")).unwrap();
        std::fs::write(d.join("etc/secret"), b"host").unwrap();
        let host_secret = d.join("etc/secret");
        // Absolute symlink, relative escape with .., and a plain .. path.
        symlink(&host_secret, root.join("app/abs")).unwrap();
        symlink("../../../../../../etc/secret", root.join("app/rel")).unwrap();
        let read = |o: OpenedFile| {
            let mut buf = vec![0u8; o.identity.size as usize];
            o.file.read_exact_at(&mut buf, 0).unwrap();
            buf
        };
        // `abs` points at <d>/etc/secret, which inside the root does not
        // exist: not found, not the host file.
        assert!(matches!(open_in_root(&root, Path::new("/app/abs"), Purpose::DebugFile), Err(OpenError::Io(_))));
        assert_eq!(read(open_in_root(&root, Path::new("/app/rel"), Purpose::DebugFile).unwrap()), b"inside");
        assert_eq!(read(open_in_root(&root, Path::new("/../../etc/secret"), Purpose::DebugFile).unwrap()), b"inside");
        // A magic link is refused.
        symlink("/proc/self/root/etc/hostname", root.join("app/magic")).unwrap();
        std::fs::create_dir_all(root.join("proc")).unwrap();
        let magic = open_in_root(Path::new("/"), &root.join("app/magic"), Purpose::DebugFile);
        assert!(matches!(magic, Err(OpenError::Escape)), "{magic:?}");
        // Special files inside the root are refused as well.
        mkfifo(&root.join("app/fifo"));
        assert!(matches!(
            open_in_root(&root, Path::new("/app/fifo"), Purpose::Executable),
            Err(OpenError::NotRegular("FIFO"))
        ));
    }

    #[test]
    fn identity_matches_maps_lines() {
        let o = open_regular(Path::new("/proc/self/exe"), Purpose::Executable).unwrap();
        let (maj, min) = (libc::major(o.identity.dev), libc::minor(o.identity.dev));
        assert!(o.identity.is_mapped(maj, min, o.identity.ino, false));
        assert!(!o.identity.is_mapped(maj, min.wrapping_add(1), o.identity.ino, false));
        assert!(o.identity.is_mapped(maj, min.wrapping_add(1), o.identity.ino, true), "overlay: inode only");
        assert!(!o.identity.is_mapped(maj, min, o.identity.ino + 1, true));
    }

    #[test]
    fn table_key_hashes_the_whole_content() {
        let d = temp_dir("digest");
        let data: Vec<u8> = (0..(DIGEST_CHUNK * 2 + 17)).map(|i| (i * 7) as u8).collect();
        let p = d.join("f");
        std::fs::write(&p, &data).unwrap();
        let o = open_regular(&p, Purpose::Executable).unwrap();
        let key = table_key_of_file(&o.file, o.identity.size).unwrap();
        assert_eq!(key, table_key_of_bytes(&data));
        let mut other = data.clone();
        other[DIGEST_CHUNK] ^= 1; // the middle only
        assert_ne!(key, table_key_of_bytes(&other));
        assert!(table_key_of_file(&o.file, o.identity.size + 1).is_err(), "shorter than said");
    }
}
