//! Waiting on a BPF ring buffer.

use crate::BpfError;
use libbpf_rs::{ErrorKind, RingBuffer};
use std::time::Duration;

/// Waits up to `timeout` for `ring`'s records and delivers them. A signal
/// that interrupts the wait (`strace` attaching, SIGSTOP/SIGCONT, a
/// debugger) is no error: the wait simply ended early, and the caller's
/// loop waits again.
pub(crate) fn poll(ring: &RingBuffer<'_>, timeout: Duration, map: &'static str) -> Result<(), BpfError> {
    match ring.poll(timeout) {
        Err(source) if source.kind() == ErrorKind::Interrupted => Ok(()),
        other => other.map_err(|source| BpfError::Map { map, source }),
    }
}
