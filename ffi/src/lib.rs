//! The C ABI of the profiler: `libebpf_profiler.a` and
//! `include/ebpf_profiler.h` (generated from this file by cbindgen).
//!
//! Pull, not push: the caller (the Go receiver) starts an agent from a JSON
//! configuration, then pulls serialized OTLP batches
//! (`ExportProfilesServiceRequest` protobuf bytes) with a timeout. Rust
//! never calls back into the caller.
//!
//! ```text
//! ebpf_profiler_start(json, &p)            -> OK | ERR_*
//! loop: ebpf_profiler_next_batch(p, ms, &b) -> OK (b filled) | TIMEOUT | STOPPED | ERR_*
//!       ... use b.data[0..b.len] ...; ebpf_profiler_free_batch(&b)
//! ebpf_profiler_stop(p)                    (flushes; keep pulling until STOPPED)
//! ebpf_profiler_free(p)                    (after every other call on p returned)
//! ```
//!
//! Every entry point catches panics and reports them as
//! [`ebpf_profiler_status::EBPF_PROFILER_ERR_PANIC`]; errors come back as
//! status values, with a message from [`ebpf_profiler_last_error`] (kept
//! per OS thread).
//!
//! Status values, the batch layout and the function signatures are the
//! ABI: never renumber or reorder, only add (and bump
//! [`EBPF_PROFILER_ABI_VERSION`] when a change is not backwards compatible).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// The C spelling of the types is the one the header shows.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::time::Duration;

use profiler_agent::{Agent, AgentConfig, NextBatch, StartError};

/// Version of this ABI; [`ebpf_profiler_abi_version`] returns it so that a
/// caller can refuse a library it was not built for.
pub const EBPF_PROFILER_ABI_VERSION: u32 = 1;

/// What a call did. Non-negative values are outcomes, negative ones errors
/// (with a message from [`ebpf_profiler_last_error`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ebpf_profiler_status {
    /// Success; for `next_batch`, the batch is filled.
    EBPF_PROFILER_OK = 0,
    /// `next_batch`: nothing arrived within the timeout.
    EBPF_PROFILER_TIMEOUT = 1,
    /// `next_batch`: the agent stopped and every batch was handed out.
    EBPF_PROFILER_STOPPED = 2,
    /// A pointer argument was NULL, or the configuration was not UTF-8.
    EBPF_PROFILER_ERR_INVALID_ARGUMENT = -1,
    /// The configuration JSON was malformed, had an unknown field or a
    /// value out of range.
    EBPF_PROFILER_ERR_CONFIG = -2,
    /// The agent could not start (privileges, kernel support, ...).
    EBPF_PROFILER_ERR_START = -3,
    /// A bug: the library panicked. The handle should be stopped and freed.
    EBPF_PROFILER_ERR_PANIC = -4,
    /// `stop`: the agent stopped, but a part of it had failed while running.
    EBPF_PROFILER_ERR_RUNTIME = -5,
}

use ebpf_profiler_status::*;

/// A running profiler. Opaque; made by [`ebpf_profiler_start`], released by
/// [`ebpf_profiler_free`].
pub struct ebpf_profiler {
    agent: Agent,
}

// `next_batch` (puller thread) and `stop`/`stats` (control thread) run
// concurrently on one handle.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Agent>();
};

/// One serialized OTLP `ExportProfilesServiceRequest`, owned by the
/// library until [`ebpf_profiler_free_batch`].
#[repr(C)]
pub struct ebpf_profiler_batch {
    /// The protobuf bytes; NULL when the batch is empty.
    pub data: *const u8,
    /// Number of bytes at `data`.
    pub len: usize,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(message: impl Into<String>) {
    // A message with an interior NUL is cut there rather than lost.
    let mut bytes = message.into().into_bytes();
    if let Some(nul) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(nul);
    }
    let message = CString::new(bytes).expect("NUL bytes were removed");
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(message));
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// Runs `f`, turning a panic into `on_panic` and a last-error message.
fn guard<T>(what: &str, on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(format!("panic in {what}: {}", panic_message(&*payload)));
            on_panic
        }
    }
}

fn fail(status: ebpf_profiler_status, message: impl Into<String>) -> ebpf_profiler_status {
    set_last_error(message);
    status
}

/// `value` as a JSON string owned by the caller, or NULL (with a last
/// error) if it cannot be serialized.
fn json_string(value: &impl serde::Serialize) -> *mut c_char {
    match serde_json::to_string(value) {
        // JSON text never contains a NUL byte.
        Ok(json) => CString::new(json).map_or(ptr::null_mut(), CString::into_raw),
        Err(e) => {
            set_last_error(format!("could not serialize to JSON: {e}"));
            ptr::null_mut()
        }
    }
}

/// The ABI version the library implements ([`EBPF_PROFILER_ABI_VERSION`]).
#[no_mangle]
pub extern "C" fn ebpf_profiler_abi_version() -> u32 {
    EBPF_PROFILER_ABI_VERSION
}

/// The message of the last failed call on this OS thread, or NULL if none
/// failed yet. Valid until the next failing call on the same thread; copy
/// it. Callers whose threads migrate (Go: lock the OS thread) must read it
/// on the thread that made the failing call.
#[no_mangle]
pub extern "C" fn ebpf_profiler_last_error() -> *const c_char {
    guard("ebpf_profiler_last_error", ptr::null(), || {
        LAST_ERROR.with(|e| e.borrow().as_ref().map_or(ptr::null(), |m| m.as_ptr()))
    })
}

/// Starts the profiler with `config_json`, a JSON object whose fields are
/// those of the agent configuration (`samples_per_second` 1..=10000,
/// `reporter_interval_ms` 100..=3600000, `pids` at most 1024 ids in
/// 1..=4194304, `batch_queue_capacity` 1..=1024, `unused_tables_budget_mib`
/// 0..=4096, `symbolize_native`, `probabilistic_threshold` 1..=100,
/// `probabilistic_interval_ms` 100..=300000, `include_env_vars` at most 64
/// names, `off_cpu_threshold` 0..=1); missing fields keep their defaults.
/// Anything else (not an object, an unknown field, a wrong type, a value
/// out of range) is `EBPF_PROFILER_ERR_CONFIG`, found before anything is
/// loaded into the kernel. OTLP batches are always on through this ABI.
/// On success stores the handle in `*out`.
///
/// # Safety
///
/// `config_json` must be NULL or a NUL-terminated string; `out` must be
/// NULL or valid for one pointer write.
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_start(
    config_json: *const c_char,
    out: *mut *mut ebpf_profiler,
) -> ebpf_profiler_status {
    guard("ebpf_profiler_start", EBPF_PROFILER_ERR_PANIC, || {
        if config_json.is_null() || out.is_null() {
            return fail(EBPF_PROFILER_ERR_INVALID_ARGUMENT, "config_json and out must not be NULL");
        }
        // SAFETY: non-NULL and NUL-terminated per the caller's contract.
        let text = match unsafe { CStr::from_ptr(config_json) }.to_str() {
            Ok(text) => text,
            Err(e) => return fail(EBPF_PROFILER_ERR_INVALID_ARGUMENT, format!("config_json is not UTF-8: {e}")),
        };
        let mut config = match AgentConfig::from_json(text) {
            Ok(config) => config,
            Err(e) => return fail(EBPF_PROFILER_ERR_CONFIG, format!("invalid configuration: {e}")),
        };
        config.otlp_batches = true;
        match Agent::start(config) {
            Ok(agent) => {
                let handle = Box::into_raw(Box::new(ebpf_profiler { agent }));
                // SAFETY: `out` is non-NULL and valid for a write per the contract.
                unsafe { out.write(handle) };
                EBPF_PROFILER_OK
            }
            Err(StartError::Config(e)) => fail(EBPF_PROFILER_ERR_CONFIG, format!("invalid configuration: {e}")),
            Err(e) => fail(EBPF_PROFILER_ERR_START, format!("the profiler could not start: {e}")),
        }
    })
}

/// Waits up to `timeout_ms` for the next batch. `EBPF_PROFILER_OK` fills
/// `*out`, which must then be released with [`ebpf_profiler_free_batch`];
/// otherwise `*out` is set empty.
///
/// # Safety
///
/// `profiler` must be NULL or a live handle from [`ebpf_profiler_start`];
/// `out` must be NULL or valid for writing one batch.
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_next_batch(
    profiler: *const ebpf_profiler,
    timeout_ms: u32,
    out: *mut ebpf_profiler_batch,
) -> ebpf_profiler_status {
    guard("ebpf_profiler_next_batch", EBPF_PROFILER_ERR_PANIC, || {
        if profiler.is_null() || out.is_null() {
            return fail(EBPF_PROFILER_ERR_INVALID_ARGUMENT, "profiler and out must not be NULL");
        }
        // SAFETY: `out` is valid for a write per the contract.
        unsafe { out.write(ebpf_profiler_batch { data: ptr::null(), len: 0 }) };
        // SAFETY: a live handle per the contract; only shared access.
        let agent = unsafe { &(*profiler).agent };
        match agent.next_otlp_batch(Duration::from_millis(u64::from(timeout_ms))) {
            NextBatch::Batch(bytes) => {
                let bytes = bytes.into_boxed_slice();
                let len = bytes.len();
                let data = Box::into_raw(bytes) as *const u8;
                // SAFETY: as above.
                unsafe { out.write(ebpf_profiler_batch { data, len }) };
                EBPF_PROFILER_OK
            }
            NextBatch::Timeout => EBPF_PROFILER_TIMEOUT,
            NextBatch::Stopped => EBPF_PROFILER_STOPPED,
        }
    })
}

/// Releases the bytes of a batch filled by [`ebpf_profiler_next_batch`] and
/// sets it empty. An empty batch (or NULL) is ignored.
///
/// # Safety
///
/// `batch` must be NULL or point to a batch that is empty or was filled by
/// [`ebpf_profiler_next_batch`] and not released since.
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_free_batch(batch: *mut ebpf_profiler_batch) {
    guard("ebpf_profiler_free_batch", (), || {
        if batch.is_null() {
            return;
        }
        // SAFETY: valid per the contract.
        let b = unsafe { &mut *batch };
        if !b.data.is_null() {
            let slice = ptr::slice_from_raw_parts_mut(b.data as *mut u8, b.len);
            // SAFETY: `data`/`len` came from `Box::into_raw` of a boxed
            // slice in `ebpf_profiler_next_batch` and were not freed since.
            drop(unsafe { Box::from_raw(slice) });
        }
        b.data = ptr::null();
        b.len = 0;
    })
}

/// The agent's counters as a JSON object, or NULL on error. Release the
/// string with [`ebpf_profiler_free_string`].
///
/// # Safety
///
/// `profiler` must be NULL or a live handle from [`ebpf_profiler_start`].
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_stats(profiler: *const ebpf_profiler) -> *mut c_char {
    guard("ebpf_profiler_stats", ptr::null_mut(), || {
        if profiler.is_null() {
            set_last_error("profiler must not be NULL");
            return ptr::null_mut();
        }
        // SAFETY: a live handle per the contract; only shared access.
        let agent = unsafe { &(*profiler).agent };
        json_string(&agent.stats())
    })
}

/// Problems that did not prevent the start (e.g. kernel symbols
/// unavailable) as a JSON array of strings, or NULL on error. Release the
/// string with [`ebpf_profiler_free_string`].
///
/// # Safety
///
/// `profiler` must be NULL or a live handle from [`ebpf_profiler_start`].
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_warnings(profiler: *const ebpf_profiler) -> *mut c_char {
    guard("ebpf_profiler_warnings", ptr::null_mut(), || {
        if profiler.is_null() {
            set_last_error("profiler must not be NULL");
            return ptr::null_mut();
        }
        // SAFETY: a live handle per the contract; only shared access.
        let agent = unsafe { &(*profiler).agent };
        json_string(&agent.warnings())
    })
}

/// Releases a string returned by [`ebpf_profiler_stats`] or
/// [`ebpf_profiler_warnings`]. NULL is ignored.
///
/// # Safety
///
/// `s` must be NULL or a string from [`ebpf_profiler_stats`] or
/// [`ebpf_profiler_warnings`] not released since.
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_free_string(s: *mut c_char) {
    guard("ebpf_profiler_free_string", (), || {
        if !s.is_null() {
            // SAFETY: made by `CString::into_raw` per the contract.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// Stops sampling and flushes the last interval; batches already made can
/// still be pulled until `next_batch` returns `EBPF_PROFILER_STOPPED`.
/// Idempotent; may run while another thread waits in `next_batch`.
///
/// # Safety
///
/// `profiler` must be NULL or a live handle from [`ebpf_profiler_start`].
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_stop(profiler: *const ebpf_profiler) -> ebpf_profiler_status {
    guard("ebpf_profiler_stop", EBPF_PROFILER_ERR_PANIC, || {
        if profiler.is_null() {
            return fail(EBPF_PROFILER_ERR_INVALID_ARGUMENT, "profiler must not be NULL");
        }
        // SAFETY: a live handle per the contract; only shared access.
        match unsafe { &(*profiler).agent }.stop() {
            Ok(()) => EBPF_PROFILER_OK,
            Err(e) => fail(EBPF_PROFILER_ERR_RUNTIME, format!("the profiler failed while running: {e}")),
        }
    })
}

/// Stops the agent if still running and releases the handle. NULL is
/// ignored.
///
/// # Safety
///
/// `profiler` must be NULL or a live handle from [`ebpf_profiler_start`],
/// and no other call on it may be running or follow.
#[no_mangle]
pub unsafe extern "C" fn ebpf_profiler_free(profiler: *mut ebpf_profiler) {
    guard("ebpf_profiler_free", (), || {
        if profiler.is_null() {
            return;
        }
        // SAFETY: made by `Box::into_raw` in `ebpf_profiler_start`, and the
        // caller guarantees exclusive, final access.
        let handle = unsafe { Box::from_raw(profiler) };
        // Nobody is left to hear about a failure here; `stop` reports it.
        let _ = handle.agent.stop();
        drop(handle);
    })
}

#[cfg(test)]
mod tests;
