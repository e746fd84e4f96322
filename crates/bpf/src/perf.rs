//! Software cpu-clock perf events, one per online CPU.

use crate::BpfError;
use libbpf_rs::libbpf_sys;
use std::io;

// include/uapi/linux/perf_event.h
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// The CPUs that are online, from `/sys/devices/system/cpu/online`
/// (e.g. `0-3,8-11`).
pub fn online_cpus() -> Result<Vec<u32>, BpfError> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(PATH).map_err(|source| BpfError::System { path: PATH, source })?;
    parse_cpu_list(&text).ok_or_else(|| BpfError::System {
        path: PATH,
        source: io::Error::new(io::ErrorKind::InvalidData, format!("cannot parse {text:?}")),
    })
}

fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Opens a cpu-clock event on `cpu` sampling `frequency` times a second,
/// for every task. Returns the raw fd: whoever attaches it owns it.
pub(crate) fn open_cpu_clock(cpu: u32, frequency: u32) -> Result<i32, BpfError> {
    // SAFETY: perf_event_attr is a plain C struct; all-zero is its
    // documented "unset" state.
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.type_ = libbpf_sys::PERF_TYPE_SOFTWARE;
    attr.config = libbpf_sys::PERF_COUNT_SW_CPU_CLOCK as u64;
    attr.__bindgen_anon_1.sample_freq = u64::from(frequency);
    attr.set_freq(1);
    // SAFETY: attr is initialised and outlives the call; the other
    // arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let source = io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => BpfError::NotPrivileged {
                what: format!("perf_event_open on CPU {cpu} ({source}; see /proc/sys/kernel/perf_event_paranoid)"),
            },
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
                BpfError::MissingFeature { feature: "the software cpu-clock perf event", needs: "CONFIG_PERF_EVENTS" }
            }
            _ => BpfError::PerfEvent { cpu, source },
        });
    }
    Ok(fd as i32)
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
