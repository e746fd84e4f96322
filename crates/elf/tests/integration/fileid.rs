//! FileID against `sha256sum` over the concatenation built by hand.

use std::path::Path;
use std::process::Command;

use profiler_elf::{file_id_of_bytes, file_id_of_path};

use crate::support::{run, test_dir, LIBC};

/// The FileID as hex, computed by sha256sum over head ‖ tail ‖ len.
fn oracle(data: &[u8], dir: &Path) -> String {
    let part = data.len().min(4096);
    let mut concat = data[..part].to_vec();
    concat.extend_from_slice(&data[data.len() - part..]);
    concat.extend_from_slice(&(data.len() as u64).to_be_bytes());
    let input = dir.join("concat");
    std::fs::write(&input, concat).expect("write");
    let out = run(Command::new("sha256sum").arg(&input));
    out[..32].to_owned()
}

#[test]
fn file_id_matches_sha256sum() {
    let dir = test_dir("fileid");
    // Sizes around the 4 KiB head/tail boundaries, including files short
    // enough for head and tail to overlap or be the whole file.
    for len in [0usize, 1, 100, 4095, 4096, 4097, 8191, 8192, 8193, 100_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let path = dir.join(format!("f{len}"));
        std::fs::write(&path, &data).expect("write");
        let want = oracle(&data, &dir);
        assert_eq!(file_id_of_bytes(&data).to_hex(), want, "bytes, len {len}");
        assert_eq!(file_id_of_path(&path).expect("path").to_hex(), want, "path, len {len}");
    }
    let libc = std::fs::read(LIBC).expect("libc");
    assert_eq!(file_id_of_path(LIBC).expect("libc").to_hex(), oracle(&libc, &dir));
}

#[test]
fn file_id_of_missing_file_is_an_io_error() {
    let err = file_id_of_path("/nonexistent/file").unwrap_err();
    assert!(matches!(err, profiler_elf::Error::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/file"));
}
