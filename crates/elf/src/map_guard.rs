//! Files that shrink while they are mapped.
//!
//! Large files are parsed through a read-only private map (reading them
//! whole into the heap would cost their size in RSS). Any user can
//! truncate their own file while we parse it; a read of a mapped page
//! past the new end then raises `SIGBUS`, which would kill the agent.
//!
//! Each map we parse is registered here (a fixed table of atomics, so
//! that the signal handler needs no lock and no allocation). Our
//! `SIGBUS` handler, when the faulting address lies in a registered
//! range, maps anonymous zero pages over the rest of that range
//! (`MAP_FIXED`) and marks the registration as changed; the faulting
//! read is retried and reads zeros. Every parser is bounds-checked
//! against the length mapped, so it finishes on garbage, and the owner
//! of the map discards what it produced ([`MapGuard::changed`]); each
//! such file is counted in [`files_changed_while_read`].
//!
//! A fault anywhere else is not ours: it goes to the handler that was
//! installed before ours (the Go runtime installs one when the agent is
//! linked into the Collector), or, when there was none, the default
//! action is restored and the fault repeats, killing the process as it
//! would have without us. Ours is installed with `SA_ONSTACK`, which Go
//! requires of every handler in its process.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Once;

/// Maps guarded at the same time; more are mapped unguarded and counted
/// in [`unguarded_maps`].
pub const MAX_GUARDED_MAPS: usize = 4096;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const ACTIVE: u8 = 2;

struct Slot {
    state: AtomicU8,
    changed: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
    state: AtomicU8::new(FREE),
    changed: AtomicU8::new(0),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};

static SLOTS: [Slot; MAX_GUARDED_MAPS] = [EMPTY_SLOT; MAX_GUARDED_MAPS];
static CHANGED_FILES: AtomicU64 = AtomicU64::new(0);
static UNGUARDED: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

/// The `sigaction` that was in place before ours, written once (inside
/// `INSTALL`) before our handler can run, read-only afterwards.
struct Previous(UnsafeCell<MaybeUninit<libc::sigaction>>);
// SAFETY: written once under `INSTALL` before any reader exists.
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(UnsafeCell::new(MaybeUninit::uninit()));

/// Files found changed (truncated) while mapped and parsed, since start.
pub fn files_changed_while_read() -> u64 {
    CHANGED_FILES.load(Ordering::Relaxed)
}

/// Maps left unguarded because [`MAX_GUARDED_MAPS`] were in use.
pub fn unguarded_maps() -> u64 {
    UNGUARDED.load(Ordering::Relaxed)
}

/// The registration of one mapped range; unregisters on drop, which must
/// happen before the range is unmapped.
#[derive(Debug)]
pub struct MapGuard {
    slot: Option<usize>,
}

impl MapGuard {
    /// Registers `[start, start + len)`, a read-only private file map.
    pub fn register(start: *const u8, len: usize) -> MapGuard {
        INSTALL.call_once(install);
        for (i, slot) in SLOTS.iter().enumerate() {
            if slot.state.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                slot.start.store(start as usize, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.changed.store(0, Ordering::Relaxed);
                slot.state.store(ACTIVE, Ordering::Release);
                return MapGuard { slot: Some(i) };
            }
        }
        UNGUARDED.fetch_add(1, Ordering::Relaxed);
        MapGuard { slot: None }
    }

    /// Whether the file shrank under the map: what was parsed from it is
    /// garbage and must be discarded.
    pub fn changed(&self) -> bool {
        self.slot.is_some_and(|i| SLOTS[i].changed.load(Ordering::Acquire) != 0)
    }
}

impl Drop for MapGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let slot = &SLOTS[i];
            slot.state.store(CLAIMED, Ordering::Release);
            slot.start.store(0, Ordering::Relaxed);
            slot.len.store(0, Ordering::Relaxed);
            slot.state.store(FREE, Ordering::Release);
        }
    }
}

fn install() {
    // SAFETY: plain libc calls on zeroed, owned structs; `PREVIOUS` is
    // written here only, before our handler is installed.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = (*PREVIOUS.0.get()).as_mut_ptr();
        std::ptr::write(previous, std::mem::zeroed());
        libc::sigaction(libc::SIGBUS, &action, previous);
    }
}

/// Finds the registration containing `addr` and zero-fills the range
/// from its page on; true if it was ours.
fn rescue(addr: usize) -> bool {
    for slot in &SLOTS {
        if slot.state.load(Ordering::Acquire) != ACTIVE {
            continue;
        }
        let start = slot.start.load(Ordering::Relaxed);
        let len = slot.len.load(Ordering::Relaxed);
        if addr < start || addr - start >= len {
            continue;
        }
        // SAFETY: sysconf is async-signal-safe.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => 4096,
        };
        let from = addr & !(page - 1);
        let from = from.max(start);
        let end = start + len;
        // SAFETY: `[from, end)` lies inside a read-only private map that
        // its owner keeps alive while registered (it unregisters before
        // unmapping); replacing its pages with zero pages changes what
        // the owner reads, never memory that is not the map's.
        let mapped = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_FIXED | libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return false;
        }
        if slot.changed.swap(1, Ordering::AcqRel) == 0 {
            CHANGED_FILES.fetch_add(1, Ordering::Relaxed);
        }
        return true;
    }
    false
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = if info.is_null() { 0 } else { unsafe { (*info).si_addr() as usize } };
    if addr != 0 && rescue(addr) {
        return;
    }
    // Not ours: the previous handler's, or the default action.
    // SAFETY: `PREVIOUS` was written before this handler was installed.
    let previous = unsafe { &*(*PREVIOUS.0.get()).as_ptr() };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: async-signal-safe calls; returning repeats the faulting
        // access, which the default action then handles (a core dump).
        unsafe {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            if (*info).si_code <= 0 {
                // Sent by kill(): nothing repeats it.
                libc::raise(sig);
            }
        }
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed for SIGBUS with
        // SA_SIGINFO, so it takes these three arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, context);
    } else {
        // SAFETY: a plain handler takes the signal number only.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_unmatched_addresses_are_not_ours() {
        let data = [0u8; 64];
        let before = SLOTS.iter().filter(|s| s.state.load(Ordering::Relaxed) == ACTIVE).count();
        {
            let g = MapGuard::register(data.as_ptr(), data.len());
            assert!(g.slot.is_some());
            assert!(!g.changed());
            assert_eq!(SLOTS.iter().filter(|s| s.state.load(Ordering::Relaxed) == ACTIVE).count(), before + 1);
        }
        assert_eq!(SLOTS.iter().filter(|s| s.state.load(Ordering::Relaxed) == ACTIVE).count(), before);
        assert!(!rescue(1), "no registration covers address 1");
    }
}
