//! Pausing and resuming the cpu-clock perf events without detaching the
//! programs (probabilistic profiling: sampling on for some intervals,
//! off for others, on every CPU at once).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Weak};

// include/uapi/linux/perf_event.h: _IO('$', 0) and _IO('$', 1).
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// Turns every CPU's sampling event on or off. Holds the events weakly:
/// once the sampler detached them, switching does nothing (a handle kept
/// by another thread cannot keep a detached event, and its program,
/// alive).
#[derive(Clone, Debug)]
pub struct SamplingSwitch {
    events: Weak<Vec<OwnedFd>>,
}

impl SamplingSwitch {
    pub(crate) fn new(events: &Arc<Vec<OwnedFd>>) -> SamplingSwitch {
        SamplingSwitch { events: Arc::downgrade(events) }
    }

    /// Enables (`on`) or disables every event. Returns how many events
    /// were switched (0 once detached); the first failure is returned
    /// after trying them all.
    pub fn set(&self, on: bool) -> io::Result<usize> {
        let Some(events) = self.events.upgrade() else { return Ok(0) };
        let request = if on { PERF_EVENT_IOC_ENABLE } else { PERF_EVENT_IOC_DISABLE };
        let mut first_error = None;
        for fd in events.iter() {
            // SAFETY: fd is an open perf event we own; these ioctls take
            // no argument.
            if unsafe { libc::ioctl(fd.as_raw_fd(), request, 0) } != 0 {
                first_error.get_or_insert_with(io::Error::last_os_error);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(events.len()),
        }
    }
}

/// A second descriptor of the perf event `fd` (the link owns `fd`).
pub(crate) fn dup_event(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: fd is open (it was just created and attached); the
    // duplicate is owned by the returned OwnedFd alone.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: dup is a fresh descriptor nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dup) })
}
