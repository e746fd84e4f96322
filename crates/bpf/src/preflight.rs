//! Checks made before loading, so that failures name their cause:
//! privileges first, then each kernel feature the programs rely on.

use crate::BpfError;
use libbpf_rs::libbpf_sys;
use std::io;

// Capability numbers from include/uapi/linux/capability.h.
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with [`BpfError::NotPrivileged`] unless the effective
/// capabilities allow loading tracing programs and opening perf events.
pub(crate) fn check_privileges() -> Result<(), BpfError> {
    const PATH: &str = "/proc/self/status";
    let status = std::fs::read_to_string(PATH).map_err(|source| BpfError::System { path: PATH, source })?;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| effective & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    Err(BpfError::NotPrivileged {
        what: format!(
            "effective capabilities are {effective:#x} (uid {})",
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() }
        ),
    })
}

/// Probes the kernel for what the programs use; names the first
/// missing piece.
pub(crate) fn check_kernel_features() -> Result<(), BpfError> {
    // SAFETY: libbpf probes take plain enum values and a null options
    // pointer; they create and free their own test objects.
    let prog =
        unsafe { libbpf_sys::libbpf_probe_bpf_prog_type(libbpf_sys::BPF_PROG_TYPE_PERF_EVENT, std::ptr::null()) };
    interpret(prog, "perf_event BPF programs", "Linux 4.9")?;
    // SAFETY: as above.
    let ringbuf = unsafe { libbpf_sys::libbpf_probe_bpf_map_type(libbpf_sys::BPF_MAP_TYPE_RINGBUF, std::ptr::null()) };
    interpret(ringbuf, "BPF ring buffer maps", "Linux 5.8")?;
    // SAFETY: as above.
    let lpm = unsafe { libbpf_sys::libbpf_probe_bpf_map_type(libbpf_sys::BPF_MAP_TYPE_LPM_TRIE, std::ptr::null()) };
    interpret(lpm, "BPF LPM trie maps", "Linux 4.11")?;
    // CO-RE and the tp_btf exit tracepoint need the kernel's BTF.
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(BpfError::MissingFeature {
            feature: "kernel BTF (/sys/kernel/btf/vmlinux)",
            needs: "CONFIG_DEBUG_INFO_BTF=y",
        });
    }
    let helpers = [
        (libbpf_sys::BPF_FUNC_get_stack, "the bpf_get_stack helper", "Linux 4.18"),
        (libbpf_sys::BPF_FUNC_ringbuf_query, "the bpf_ringbuf_query helper", "Linux 5.8"),
        (libbpf_sys::BPF_FUNC_probe_read_kernel_str, "the bpf_probe_read_kernel_str helper", "Linux 5.5"),
        (libbpf_sys::BPF_FUNC_probe_read_user, "the bpf_probe_read_user helper", "Linux 5.5"),
    ];
    for (helper, feature, needs) in helpers {
        // SAFETY: as above.
        let r = unsafe {
            libbpf_sys::libbpf_probe_bpf_helper(libbpf_sys::BPF_PROG_TYPE_PERF_EVENT, helper, std::ptr::null())
        };
        interpret(r, feature, needs)?;
    }
    Ok(())
}

/// Whether perf_event programs may call `bpf_task_pt_regs` (Linux 5.15).
pub(crate) fn has_task_pt_regs() -> bool {
    // SAFETY: as in check_kernel_features.
    let r = unsafe {
        libbpf_sys::libbpf_probe_bpf_helper(
            libbpf_sys::BPF_PROG_TYPE_PERF_EVENT,
            libbpf_sys::BPF_FUNC_task_pt_regs,
            std::ptr::null(),
        )
    };
    r == 1
}

/// libbpf probes return 1 (supported), 0 (not supported) or -errno.
fn interpret(result: i32, feature: &'static str, needs: &'static str) -> Result<(), BpfError> {
    match result {
        1 => Ok(()),
        0 => Err(BpfError::MissingFeature { feature, needs }),
        e if -e == libc::ENOSYS => Err(BpfError::Unavailable(io::Error::from_raw_os_error(libc::ENOSYS))),
        e if -e == libc::EPERM || -e == libc::EACCES => {
            Err(BpfError::NotPrivileged { what: format!("probing {feature}: {}", io::Error::from_raw_os_error(-e)) })
        }
        e => Err(BpfError::Unavailable(io::Error::from_raw_os_error(-e))),
    }
}
