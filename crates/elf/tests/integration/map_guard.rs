//! Files truncated while mapped (issue 19): a read past the new end
//! raises SIGBUS; the map guard turns it into zero pages and a "changed"
//! mark, and leaves every other SIGBUS to whoever handled it before.

use std::fs::OpenOptions;
use std::process::Command;

use profiler_elf::{map_guard, ElfFile};

use crate::support::{test_dir, LIBC};

/// Maps a copy of libc (well over the 256 KiB read threshold), truncates
/// it before the table build: no crash, the table is discarded and the
/// file counted.
#[test]
fn issue_19_file_truncated_under_the_map() {
    let dir = test_dir("map-guard-truncate");
    let copy = dir.join("libc.so.6");
    std::fs::copy(LIBC, &copy).expect("copy libc");
    assert!(std::fs::metadata(&copy).unwrap().len() >= 256 << 10);
    let full = ElfFile::open(LIBC).expect("libc").unwind_table();
    assert!(!full.deltas.is_empty());

    let elf = ElfFile::open(&copy).expect("open the copy");
    assert!(!elf.changed_while_read());
    let before = map_guard::files_changed_while_read();
    OpenOptions::new().write(true).open(&copy).unwrap().set_len(64 << 10).expect("truncate");
    let table = elf.unwind_table();
    assert!(elf.changed_while_read(), "the reads past the new end were noticed");
    assert!(table.stats.file_changed);
    assert!(table.deltas.is_empty(), "a table parsed from zero pages is discarded");
    assert!(map_guard::files_changed_while_read() > before);
    // Reading on is harmless: zeros.
    let data = elf.data();
    assert_eq!(data[data.len() - 1], 0);
    let _ = elf.symbols();
    drop(elf);
    // The next file mapped at the same place is not marked.
    std::fs::copy(LIBC, &copy).expect("copy libc");
    let elf = ElfFile::open(&copy).expect("open the copy");
    assert_eq!(elf.unwind_table().deltas, full.deltas);
    assert!(!elf.changed_while_read());
}

/// Runs this test binary's `test` in a child with `MAP_GUARD_CHILD` set.
fn child(test: &str) -> std::process::ExitStatus {
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("MAP_GUARD_CHILD", "1")
        .status()
        .expect("run child")
}

/// Reads past the end of a truncated map that is not registered.
fn fault_outside_the_guard(name: &str) {
    let dir = test_dir(name);
    let path = dir.join("data");
    std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the test's own file; the fault is the point.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
    let byte = unsafe { std::ptr::read_volatile(map.as_ptr().add(512 << 10)) };
    eprintln!("read {byte}: no fault");
    std::process::exit(3);
}

extern "C" fn previous_handler(_: libc::c_int) {
    // SAFETY: async-signal-safe.
    unsafe { libc::_exit(42) };
}

/// A SIGBUS that is not ours reaches the handler installed before the
/// guard (as the Go runtime's is in the Collector).
#[test]
fn sigbus_outside_the_guard_chains_to_the_previous_handler() {
    if std::env::var_os("MAP_GUARD_CHILD").is_some() {
        // SAFETY: installing a plain handler in this child process.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = previous_handler as *const () as usize;
            action.sa_flags = libc::SA_ONSTACK;
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
        // Installs the guard (chaining to the handler above).
        let _elf = ElfFile::open(LIBC).expect("libc");
        fault_outside_the_guard("map-guard-chain");
    }
    let status = child("map_guard::sigbus_outside_the_guard_chains_to_the_previous_handler");
    assert_eq!(status.code(), Some(42), "{status:?}");
}

/// Without a previous handler, a SIGBUS that is not ours kills the
/// process as it would have without the guard.
#[test]
fn sigbus_outside_the_guard_without_a_previous_handler_is_fatal() {
    if std::env::var_os("MAP_GUARD_CHILD").is_some() {
        let _elf = ElfFile::open(LIBC).expect("libc");
        fault_outside_the_guard("map-guard-default");
    }
    let status = child("map_guard::sigbus_outside_the_guard_without_a_previous_handler_is_fatal");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
}

/// Released pages of a mapped file read the same bytes again, and the
/// table built (which releases `.eh_frame` between and during its passes)
/// is the one built from the file read into memory.
#[test]
fn released_pages_read_the_same() {
    let elf = ElfFile::open(LIBC).expect("libc");
    let section = elf.section_by_name(".eh_frame").expect(".eh_frame");
    let bytes = elf.section_data(section).expect("data");
    let copy = bytes.to_vec();
    elf.release(bytes);
    elf.release(&[]);
    assert_eq!(bytes, &copy[..]);
    let owned = ElfFile::from_bytes(std::fs::read(LIBC).unwrap()).expect("libc in memory");
    let (mapped, read) = (elf.unwind_table(), owned.unwind_table());
    assert!(!mapped.deltas.is_empty());
    assert_eq!(mapped.deltas.to_vec(), read.deltas.to_vec());
}
