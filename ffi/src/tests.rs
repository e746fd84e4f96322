//! Calls the extern functions the way a C caller does.

use super::*;
use std::ffi::CStr;
use std::path::PathBuf;

fn last_error() -> String {
    let p = ebpf_profiler_last_error();
    assert!(!p.is_null(), "a failed call must leave a message");
    // SAFETY: a NUL-terminated string owned by this thread's slot.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

fn start(json: &str) -> (ebpf_profiler_status, *mut ebpf_profiler) {
    let json = CString::new(json).unwrap();
    let mut handle = ptr::null_mut();
    // SAFETY: valid string and out pointer.
    let status = unsafe { ebpf_profiler_start(json.as_ptr(), &mut handle) };
    (status, handle)
}

#[test]
fn abi_version() {
    assert_eq!(ebpf_profiler_abi_version(), EBPF_PROFILER_ABI_VERSION);
}

#[test]
fn start_with_bad_json_is_a_config_error_with_message() {
    let (status, handle) = start("{not json");
    assert_eq!(status, EBPF_PROFILER_ERR_CONFIG);
    assert!(handle.is_null());
    let message = last_error();
    assert!(message.starts_with("invalid configuration: invalid configuration JSON"), "{message}");
}

#[test]
fn start_with_unknown_field_or_bad_value_is_a_config_error() {
    let (status, _) = start(r#"{"samples_per_secnd": 20}"#);
    assert_eq!(status, EBPF_PROFILER_ERR_CONFIG);
    assert!(last_error().contains("unknown field `samples_per_secnd`"), "{}", last_error());

    let (status, _) = start(r#"{"samples_per_second": 0}"#);
    assert_eq!(status, EBPF_PROFILER_ERR_CONFIG);
    assert!(last_error().contains("samples_per_second must be between 1 and"), "{}", last_error());
}

/// Every bad configuration comes back as `ERR_CONFIG` with a message that
/// names the problem, from validation alone: no handle, nothing loaded
/// (before the fix, a huge `batch_queue_capacity` aborted the process and
/// `usize::MAX` panicked after the BPF programs were attached).
#[test]
fn bad_configs_are_config_errors_before_anything_is_loaded() {
    let cases: &[(String, &str)] = &[
        (
            r#"{"batch_queue_capacity": 100000000000}"#.into(),
            "batch_queue_capacity must be between 1 and 1024, got 100000000000",
        ),
        (
            format!(r#"{{"batch_queue_capacity": {}}}"#, usize::MAX),
            "batch_queue_capacity must be between 1 and 1024, got 18446744073709551615",
        ),
        ("[]".into(), "invalid configuration JSON: expected a JSON object, got an array"),
        (r#""{}""#.into(), "invalid configuration JSON: expected a JSON object, got a string"),
        (r#"{"batch_queue_capacity": -1}"#.into(), "invalid value: integer `-1`"),
        (r#"{"samples_per_second": -20}"#.into(), "invalid value: integer `-20`"),
        (r#"{"samples_per_second": "20"}"#.into(), "invalid type: string \"20\""),
        (r#"{"pids": "1"}"#.into(), "invalid type: string \"1\", expected a sequence"),
        (r#"{"symbolize_native": "yes"}"#.into(), "expected a boolean"),
        (
            format!(r#"{{"reporter_interval_ms": {}}}"#, u64::MAX),
            "reporter_interval_ms must be between 100 and 3600000",
        ),
        (r#"{"unused_tables_budget_mib": 86400000}"#.into(), "unused_tables_budget_mib must be between 0 and 4096"),
        (r#"{"pids": [0]}"#.into(), "pids must be between 1 and 4194304, got 0"),
        (
            format!(r#"{{"pids": {:?}}}"#, (1..=1025).collect::<Vec<u32>>()),
            "pids lists 1025 processes, at most 1024 are supported",
        ),
    ];
    for (json, expected) in cases {
        let (status, handle) = start(json);
        assert_eq!(status, EBPF_PROFILER_ERR_CONFIG, "{json}: {}", last_error());
        assert!(handle.is_null(), "{json}");
        let message = last_error();
        assert!(message.starts_with("invalid configuration: "), "{json}: {message}");
        assert!(message.contains(expected), "{json}: {message}");
    }
}

#[test]
fn null_arguments_are_rejected() {
    let mut handle = ptr::null_mut();
    // SAFETY: NULL is allowed by the contract.
    assert_eq!(unsafe { ebpf_profiler_start(ptr::null(), &mut handle) }, EBPF_PROFILER_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("must not be NULL"));
    let json = CString::new("{}").unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { ebpf_profiler_start(json.as_ptr(), ptr::null_mut()) }, EBPF_PROFILER_ERR_INVALID_ARGUMENT);

    let mut batch = ebpf_profiler_batch { data: ptr::null(), len: 0 };
    // SAFETY: as above.
    unsafe {
        assert_eq!(ebpf_profiler_next_batch(ptr::null(), 0, &mut batch), EBPF_PROFILER_ERR_INVALID_ARGUMENT);
        assert_eq!(ebpf_profiler_stop(ptr::null()), EBPF_PROFILER_ERR_INVALID_ARGUMENT);
        assert!(ebpf_profiler_stats(ptr::null()).is_null());
        assert!(ebpf_profiler_warnings(ptr::null()).is_null());
        ebpf_profiler_free_batch(ptr::null_mut());
        ebpf_profiler_free_batch(&mut batch);
        ebpf_profiler_free_string(ptr::null_mut());
        ebpf_profiler_free(ptr::null_mut());
    }
}

#[test]
fn invalid_utf8_config_is_rejected() {
    let json = CString::new(vec![b'{', 0xff, b'}']).unwrap();
    let mut handle = ptr::null_mut();
    // SAFETY: valid NUL-terminated string and out pointer.
    let status = unsafe { ebpf_profiler_start(json.as_ptr(), &mut handle) };
    assert_eq!(status, EBPF_PROFILER_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("not UTF-8"));
}

/// A valid configuration either starts (root, BPF available) and then runs
/// the whole handle life cycle, or fails with `ERR_START` and a message;
/// it never crashes. Under `CI=true` it must start.
#[test]
fn valid_config_starts_or_fails_cleanly() {
    let (status, handle) = start(r#"{"samples_per_second": 20, "reporter_interval_ms": 1000}"#);
    match status {
        EBPF_PROFILER_OK => {
            assert!(!handle.is_null());
            // SAFETY: a live handle, used from this thread only.
            unsafe {
                let stats = ebpf_profiler_stats(handle);
                assert!(!stats.is_null());
                let json: serde_json::Value = serde_json::from_str(CStr::from_ptr(stats).to_str().unwrap()).unwrap();
                assert!(json.get("samples").is_some(), "{json}");
                ebpf_profiler_free_string(stats);
                let warnings = ebpf_profiler_warnings(handle);
                assert!(!warnings.is_null());
                let json: serde_json::Value = serde_json::from_str(CStr::from_ptr(warnings).to_str().unwrap()).unwrap();
                assert!(json.is_array(), "{json}");
                ebpf_profiler_free_string(warnings);
                assert_eq!(ebpf_profiler_stop(handle), EBPF_PROFILER_OK);
                let mut batch = ebpf_profiler_batch { data: ptr::null(), len: 0 };
                let mut pulls = 0;
                loop {
                    match ebpf_profiler_next_batch(handle, 100, &mut batch) {
                        EBPF_PROFILER_OK => ebpf_profiler_free_batch(&mut batch),
                        EBPF_PROFILER_STOPPED => break,
                        EBPF_PROFILER_TIMEOUT => {}
                        other => panic!("next_batch: {other:?}: {}", last_error()),
                    }
                    pulls += 1;
                    assert!(pulls < 100, "a stopped agent must reach STOPPED");
                }
                ebpf_profiler_free(handle);
            }
        }
        EBPF_PROFILER_ERR_START => {
            // Under CI (root, a BPF-capable kernel) the profiler must start.
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI: {}", last_error());
            assert!(handle.is_null());
            assert!(last_error().starts_with("the profiler could not start: "), "{}", last_error());
        }
        other => panic!("unexpected status {other:?}: {}", last_error()),
    }
}

#[test]
fn panics_become_an_error_status() {
    let status = guard("test_entry", EBPF_PROFILER_ERR_PANIC, || -> ebpf_profiler_status { panic!("boom {}", 7) });
    assert_eq!(status, EBPF_PROFILER_ERR_PANIC);
    assert_eq!(last_error(), "panic in test_entry: boom 7");
    let status = guard("test_entry", EBPF_PROFILER_ERR_PANIC, || -> ebpf_profiler_status { panic!("static") });
    assert_eq!(status, EBPF_PROFILER_ERR_PANIC);
    assert_eq!(last_error(), "panic in test_entry: static");
}

#[test]
fn batches_round_trip_through_free_batch() {
    let bytes = vec![1u8, 2, 3].into_boxed_slice();
    let len = bytes.len();
    let mut batch = ebpf_profiler_batch { data: Box::into_raw(bytes) as *const u8, len };
    // SAFETY: the batch owns a boxed slice, as next_batch makes them.
    unsafe { ebpf_profiler_free_batch(&mut batch) };
    assert!(batch.data.is_null());
    assert_eq!(batch.len, 0);
}

#[test]
fn messages_with_nul_are_cut() {
    set_last_error("before\0after");
    assert_eq!(last_error(), "before");
}

/// `include/ebpf_profiler.h` must be what cbindgen makes of this crate now.
/// With `EBPF_PROFILER_HEADER_OUT=path` the header is written there instead
/// (`make update-header`, `make check-header`).
#[test]
fn header_is_fresh() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut header = Vec::new();
    bindings.write(&mut header);
    if let Some(out) = std::env::var_os("EBPF_PROFILER_HEADER_OUT") {
        std::fs::write(&out, &header).expect("write header");
        return;
    }
    let committed_path = crate_dir.join("../include/ebpf_profiler.h");
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    assert!(committed == header, "{} is stale; run `make update-header` and commit it", committed_path.display());
}
