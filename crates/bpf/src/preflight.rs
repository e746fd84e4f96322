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
    // The exit and exec programs are BTF-typed tracepoints (tp_btf, Linux
    // 5.5, below the 5.10 we claim); the kernel's BTF must describe both
    // tracepoints for them to attach. (libbpf's generic probe of the
    // tracing program type answers "unsupported" on 6.18, where tp_btf
    // works: it is not asked.)
    for (tracepoint, feature) in [
        (c"sched_process_exit", "the sched_process_exit tracepoint in the kernel's BTF"),
        (c"sched_process_exec", "the sched_process_exec tracepoint in the kernel's BTF"),
    ] {
        // SAFETY: a NUL-terminated name; libbpf loads and frees the
        // kernel's BTF itself.
        let id = unsafe { libbpf_sys::libbpf_find_vmlinux_btf_id(tracepoint.as_ptr(), libbpf_sys::BPF_TRACE_RAW_TP) };
        if id <= 0 {
            return Err(BpfError::MissingFeature { feature, needs: "Linux 5.5 with CONFIG_DEBUG_INFO_BTF=y" });
        }
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
/// Without it (5.10 to 5.14) the programs find the user registers of
/// in-kernel samples at the top of the task's kernel stack instead; make
/// test-kernels asserts which path each kernel takes.
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

/// Whether perf_event programs may use hash maps that allocate on update
/// (`BPF_F_NO_PREALLOC`). Before Linux 6.1 the verifier refuses them
/// ("perf_event programs can only use preallocated hash map"): probed by
/// loading a 7-instruction program that looks up such a map. A probe that
/// fails for another reason answers yes, and the real load names the cause.
pub(crate) fn allows_unpreallocated_hash_maps() -> bool {
    let opts = libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
        map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
        // SAFETY: all-zero is the documented default of every other field.
        ..unsafe { std::mem::zeroed() }
    };
    // SAFETY: plain sizes and a valid options struct; the fd is ours.
    let map_fd = unsafe { libbpf_sys::bpf_map_create(libbpf_sys::BPF_MAP_TYPE_HASH, std::ptr::null(), 4, 4, 1, &opts) };
    if map_fd < 0 {
        return true;
    }
    let insn = |code: u8, dst: u8, src: u8, off: i16, imm: i32| libbpf_sys::bpf_insn {
        code,
        _bitfield_align_1: [],
        _bitfield_1: libbpf_sys::bpf_insn::new_bitfield_1(dst, src),
        off,
        imm,
    };
    let program = [
        insn(0x62, 10, 0, -4, 0),                                      // *(u32 *)(r10 - 4) = 0
        insn(0xbf, 2, 10, 0, 0),                                       // r2 = r10
        insn(0x07, 2, 0, 0, -4),                                       // r2 += -4
        insn(0x18, 1, libbpf_sys::BPF_PSEUDO_MAP_FD as u8, 0, map_fd), // r1 = map (ld_imm64)
        insn(0x00, 0, 0, 0, 0),
        insn(0x85, 0, 0, 0, libbpf_sys::BPF_FUNC_map_lookup_elem as i32), // call
        insn(0xb7, 0, 0, 0, 0),                                           // r0 = 0
        insn(0x95, 0, 0, 0, 0),                                           // exit
    ];
    // SAFETY: a valid instruction array of the given length; null
    // options; the returned fd (if any) is closed below.
    let prog_fd = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_PERF_EVENT,
            std::ptr::null(),
            c"GPL".as_ptr(),
            program.as_ptr(),
            program.len() as _,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: closing fds this function opened.
    unsafe {
        if prog_fd >= 0 {
            libc::close(prog_fd);
        }
        libc::close(map_fd);
    }
    prog_fd >= 0 || prog_fd != -libc::EINVAL
}

/// Before Linux 6.1, makes the object's hash maps preallocated (clears
/// `BPF_F_NO_PREALLOC`) so that the perf_event programs load: every entry
/// is then allocated at load, up to each map's max_entries. Returns how
/// many maps were changed.
pub(crate) fn preallocate_hash_maps_if_needed(object: &mut libbpf_rs::OpenObject) -> Result<usize, BpfError> {
    if allows_unpreallocated_hash_maps() {
        return Ok(0);
    }
    let mut changed = 0;
    for mut map in object.maps_mut() {
        let hash = matches!(map.map_type(), libbpf_rs::MapType::Hash | libbpf_rs::MapType::HashOfMaps);
        let flags = map.map_flags();
        if hash && flags & libbpf_sys::BPF_F_NO_PREALLOC != 0 {
            map.set_map_flags(flags & !libbpf_sys::BPF_F_NO_PREALLOC)
                .map_err(|source| BpfError::Map { map: "a hash map (preallocating for Linux < 6.1)", source })?;
            changed += 1;
        }
    }
    Ok(changed)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_results_name_the_feature_or_the_cause() {
        assert!(interpret(1, "x", "Linux 1").is_ok());
        match interpret(0, "BPF ring buffer maps", "Linux 5.8") {
            Err(BpfError::MissingFeature { feature, needs }) => {
                assert_eq!((feature, needs), ("BPF ring buffer maps", "Linux 5.8"));
            }
            other => panic!("expected MissingFeature, got {other:?}"),
        }
        match interpret(-libc::EPERM, "tp_btf", "Linux 5.5") {
            Err(BpfError::NotPrivileged { what }) => assert!(what.starts_with("probing tp_btf: "), "{what}"),
            other => panic!("expected NotPrivileged, got {other:?}"),
        }
        match interpret(-libc::ENOSYS, "x", "y") {
            Err(BpfError::Unavailable(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSYS)),
            other => panic!("expected Unavailable, got {other:?}"),
        }
        match interpret(-libc::EINVAL, "x", "y") {
            Err(BpfError::Unavailable(e)) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL)),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}
