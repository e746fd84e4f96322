//! The bytes of a file as the symbolizer reads them after a load:
//! mapped read-only (files under a page are read into memory), with a
//! way to give the mapped pages back.
//!
//! A loaded file is read now and then (a symbol's name, a DWARF unit),
//! but every page read stays in our resident set for as long as the file
//! stays mapped: after a few thousand lookups in a 150 MB library that
//! is tens of MB of RSS for bytes the page cache holds anyway.
//! [`FileMap::release`] drops them (`MADV_DONTNEED`): the next read
//! faults the page back in from the page cache.

use std::fs::File;
use std::sync::Arc;

use memmap2::Mmap;
use profiler_elf::map_guard::MapGuard;

/// Files smaller than this are read into memory instead of mapped. Not
/// more: a file read into memory is heap for as long as it stays loaded,
/// while the pages of a mapped one go back to the page cache at each
/// release (under process churn, small libraries and Python modules
/// read into memory add up to megabytes of heap).
const READ_THRESHOLD: u64 = 4096;

enum Data {
    /// The `SIGBUS` guard's registration (dropped before the map), the map.
    Mapped(MapGuard, Mmap),
    Owned(Vec<u8>),
}

/// A whole file's bytes, mapped or owned; they never move while the
/// `FileMap` lives.
pub(crate) struct FileMap {
    data: Data,
}

impl FileMap {
    /// Maps (or reads, when small) the first `len` bytes of an open file.
    pub(crate) fn from_file(file: &File, len: u64) -> std::io::Result<FileMap> {
        let data = if len < READ_THRESHOLD {
            let mut buf = vec![0u8; len as usize];
            std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, 0)?;
            Data::Owned(buf)
        } else {
            let len = usize::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
            // SAFETY: a private read-only map we never write through. As
            // for `ElfFile::open`: a file truncated under us faults reads
            // past its new end; the map guard turns them into zero pages
            // and marks the map changed (lookups then stop using it);
            // every read is bounds-checked against the length mapped.
            let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }?;
            Data::Mapped(MapGuard::register(map.as_ptr(), map.len()), map)
        };
        Ok(FileMap { data })
    }

    /// The bytes.
    pub(crate) fn data(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(_, m) => m,
            Data::Owned(v) => v,
        }
    }

    /// Whether the file shrank under the map (see
    /// [`profiler_elf::map_guard`]).
    pub(crate) fn changed(&self) -> bool {
        matches!(&self.data, Data::Mapped(guard, _) if guard.changed())
    }

    /// Drops the mapped pages from our resident set (the bytes stay
    /// readable: a later read faults them in again). No-op when owned.
    pub(crate) fn release(&self) {
        if let Data::Mapped(_, m) = &self.data {
            profiler_elf::release_mapped(m, m);
        }
    }
}

/// Who keeps bytes the symbolizer reads after a load alive.
#[derive(Clone)]
pub(crate) enum Backing {
    /// The symbolizer's own map of a file (pages can be released).
    Map(Arc<FileMap>),
    /// An ELF file given as bytes (e.g. the vDSO), or opened elsewhere.
    Elf(Arc<profiler_elf::ElfFile>),
    /// Bytes decompressed into memory (a `Vec` decompressed in place at
    /// its final size: no copy, no slack).
    Owned(Arc<Vec<u8>>),
}

impl Backing {
    /// All the bytes.
    pub(crate) fn data(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m.data(),
            Backing::Elf(e) => e.data(),
            Backing::Owned(v) => v,
        }
    }

    /// Heap bytes held (owned data only; mapped bytes are the page
    /// cache's).
    pub(crate) fn heap_bytes(&self) -> u64 {
        match self {
            Backing::Map(m) => match &m.data {
                Data::Owned(v) => v.capacity() as u64,
                Data::Mapped(..) => 0,
            },
            // Small files are read into memory by `ElfFile::open` (and
            // the vDSO comes as bytes); larger ones are mapped.
            Backing::Elf(e) if (e.data().len() as u64) < profiler_elf::READ_INTO_MEMORY_BELOW => e.data().len() as u64,
            Backing::Elf(_) => 0,
            Backing::Owned(v) => v.capacity() as u64,
        }
    }

    /// Identity of the bytes (two clones of one backing are the same).
    pub(crate) fn id(&self) -> *const u8 {
        match self {
            Backing::Map(m) => Arc::as_ptr(m).cast(),
            Backing::Elf(e) => Arc::as_ptr(e).cast(),
            Backing::Owned(v) => Arc::as_ptr(v).cast(),
        }
    }

    /// Whether the file under these bytes shrank while mapped: what is
    /// read from them is garbage.
    pub(crate) fn changed(&self) -> bool {
        match self {
            Backing::Map(m) => m.changed(),
            Backing::Elf(e) => e.changed_while_read(),
            Backing::Owned(_) => false,
        }
    }

    /// See [`FileMap::release`].
    pub(crate) fn release(&self) {
        if let Backing::Map(m) = self {
            m.release();
        }
    }
}
