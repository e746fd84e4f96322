//! The content identity of a file ([`FileId`]).
//!
//! Definition (the reference agent's `libpf.FileIDFromExecutableReader`,
//! which backends expect): the first 16 bytes of
//! `SHA-256(head ‖ tail ‖ len as big-endian u64)`, where `head` is the first
//! `min(len, 4096)` bytes and `tail` the last `min(len, 4096)` bytes. Files
//! shorter than 8 KiB thus hash overlapping bytes twice, and files shorter
//! than 4 KiB hash the whole file twice.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use profiler_trace::FileId;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::source::{open_regular, Purpose};

/// Size of the head and of the tail that are hashed.
const PART: u64 = 4096;

/// The [`FileId`] of data in memory (e.g. the vDSO).
pub fn file_id_of_bytes(data: &[u8]) -> FileId {
    let len = data.len();
    let part = len.min(PART as usize);
    finish(&data[..part], &data[len - part..], len as u64)
}

/// The [`FileId`] of a file, reading only its first and last 4 KiB
/// (opened as [`crate::source::open_regular`] does).
pub fn file_id_of_path(path: impl AsRef<Path>) -> Result<FileId> {
    let path = path.as_ref();
    let io_err = |source| Error::Io { path: path.to_owned(), source };
    let opened = open_regular(path, Purpose::Executable).map_err(|e| io_err(e.into()))?;
    file_id_of_file(&opened.file, opened.identity.size).map_err(io_err)
}

/// The [`FileId`] of an open file of `len` bytes.
pub fn file_id_of_file(file: &File, len: u64) -> std::io::Result<FileId> {
    let part = len.min(PART) as usize;
    let mut head = vec![0u8; part];
    file.read_exact_at(&mut head, 0)?;
    let mut tail = vec![0u8; part];
    file.read_exact_at(&mut tail, len - part as u64)?;
    Ok(finish(&head, &tail, len))
}

fn finish(head: &[u8], tail: &[u8], len: u64) -> FileId {
    let mut h = Sha256::new();
    h.update(head);
    h.update(tail);
    h.update(len.to_be_bytes());
    let digest = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    FileId(id)
}
