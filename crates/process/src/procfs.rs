//! Reading what a process is from `/proc/PID`: its executable, start
//! time (to tell a reused pid from the old process), container, service
//! name, and the vDSO's bytes.

use profiler_trace::{Pid, ProcessInfo};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Size of one read of a `/proc` file past the first.
const PROC_READ_CHUNK: usize = 64 * 1024;
/// Size of the first read, into the stack: most files read here (`stat`,
/// `cgroup`, a short-lived command's `environ`) fit, and are then copied
/// into a buffer of their size rather than a zeroed 64 KiB one.
const PROC_FIRST_READ: usize = 4096;

/// One `read` of `file` into `buf`, retried when interrupted.
fn read_once(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// The first `max` bytes of a `/proc` file (the rest is left unread).
/// The kernel generates these files at each read call, and a growing
/// buffer (std's `read_to_end` starts with a 32-byte probe) costs 5 to
/// 10 calls for one `stat` or `maps`: a small file takes one read, plus
/// the one that sees the end, and larger reads are 64 KiB.
pub fn read_proc_file(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let mut first = [0u8; PROC_FIRST_READ];
    let n = read_once(&mut file, &mut first[..PROC_FIRST_READ.min(max)])?;
    let mut buf = first[..n].to_vec();
    if n == 0 {
        return Ok(buf);
    }
    while buf.len() < max {
        let len = buf.len();
        let want = PROC_READ_CHUNK.min(max - len);
        buf.resize(len + want, 0);
        let n = match read_once(&mut file, &mut buf[len..]) {
            Ok(n) => n,
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        };
        buf.truncate(len + n);
        if n == 0 {
            break;
        }
    }
    Ok(buf)
}

/// A small `/proc` text file (`stat`, `comm`, `cgroup`), lossily
/// decoded, at most `max` bytes.
pub fn read_proc_text(path: &Path, max: usize) -> std::io::Result<String> {
    read_proc_file(path, max).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Longest `/proc/PID/cgroup` read.
pub(crate) const MAX_CGROUP_BYTES: usize = 64 * 1024;

/// The identity of process `pid` under `proc_root` (normally `/proc`);
/// `comm` names it when its executable cannot be read. `env_names` are
/// the environment variables to report (`ProcessInfo::env_vars`).
pub fn read_info(proc_root: &Path, pid: Pid, comm: &str, env_names: &[Arc<str>]) -> ProcessInfo {
    let dir = proc_root.join(pid.0.to_string());
    let executable_path: Arc<str> = std::fs::read_link(dir.join("exe"))
        .map(|p| {
            let p = p.to_string_lossy();
            Arc::from(p.strip_suffix(" (deleted)").unwrap_or(&p))
        })
        .unwrap_or_else(|_| Arc::from(""));
    let executable_name: Arc<str> = match executable_path.rsplit('/').next() {
        Some(name) if !name.is_empty() => Arc::from(name),
        _ => Arc::from(comm),
    };
    let container_id = read_proc_text(&dir.join("cgroup"), MAX_CGROUP_BYTES)
        .ok()
        .and_then(|text| container_id_from_cgroup(&text))
        .map(Arc::from);
    let environ = read_environ(&dir);
    let service_name = environ
        .as_deref()
        .and_then(service_name_from_environ)
        .map(Arc::from)
        .unwrap_or_else(|| executable_name.clone());
    let env_vars = environ.as_deref().map(|e| named_env_vars(e, env_names)).unwrap_or_default();
    ProcessInfo { pid, executable_path, executable_name, container_id, service_name, env_vars }
}

/// Longest environment variable value reported; longer ones are left out
/// (the process controls them, and each becomes a resource attribute).
const MAX_ENV_VALUE_BYTES: usize = 4096;

/// The variables of `environ` named in `names`, in the order named (the
/// first definition of each, as getenv finds it). Values that are not
/// UTF-8 or longer than [`MAX_ENV_VALUE_BYTES`] are left out.
pub(crate) fn named_env_vars(environ: &[u8], names: &[Arc<str>]) -> Vec<(Arc<str>, Arc<str>)> {
    if names.is_empty() {
        return Vec::new();
    }
    let mut found: Vec<Option<&[u8]>> = vec![None; names.len()];
    for var in environ.split(|&b| b == 0) {
        let Some(eq) = var.iter().position(|&b| b == b'=') else { continue };
        let (name, value) = (&var[..eq], &var[eq + 1..]);
        if let Some(i) = names.iter().position(|n| n.as_bytes() == name) {
            found[i].get_or_insert(value);
        }
    }
    names
        .iter()
        .zip(found)
        .filter_map(|(name, value)| {
            let value = std::str::from_utf8(value?).ok().filter(|v| v.len() <= MAX_ENV_VALUE_BYTES)?;
            Some((name.clone(), Arc::from(value)))
        })
        .collect()
}

/// Most bytes of `/proc/PID/environ` read: the process controls its
/// environment, and the variables we look for come early in practice.
const MAX_ENVIRON_BYTES: usize = 256 * 1024;
/// Longest service name taken from a process's environment.
const MAX_SERVICE_NAME_BYTES: usize = 256;

/// The first [`MAX_ENVIRON_BYTES`] of the process's initial environment.
fn read_environ(dir: &Path) -> Option<Vec<u8>> {
    read_proc_file(&dir.join("environ"), MAX_ENVIRON_BYTES).ok()
}

/// The service a process says it is, as the OpenTelemetry SDKs read it:
/// `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`
/// (comma-separated `key=value`, values percent-encoded). Names that are
/// empty, too long or not UTF-8 are ignored.
pub(crate) fn service_name_from_environ(environ: &[u8]) -> Option<String> {
    let mut from_attributes = None;
    for var in environ.split(|&b| b == 0) {
        if let Some(value) = var.strip_prefix(b"OTEL_SERVICE_NAME=") {
            if let Some(name) = plausible_name(value) {
                return Some(name);
            }
        } else if let Some(list) = var.strip_prefix(b"OTEL_RESOURCE_ATTRIBUTES=") {
            let list = std::str::from_utf8(list).ok();
            let pair =
                list.into_iter().flat_map(|l| l.split(',')).find_map(|kv| kv.trim().strip_prefix("service.name="));
            from_attributes = from_attributes.or_else(|| pair.and_then(|v| plausible_name(&percent_decode(v.trim()))));
        }
    }
    from_attributes
}

fn plausible_name(value: &[u8]) -> Option<String> {
    let name = std::str::from_utf8(value).ok()?.trim();
    (!name.is_empty() && name.len() <= MAX_SERVICE_NAME_BYTES && !name.chars().any(char::is_control))
        .then(|| name.to_string())
}

/// `%XX` escapes decoded (W3C baggage octets); anything malformed kept as is.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Field 22 (starttime) of `/proc/PID/stat`. The comm field (2) may hold
/// spaces and parentheses, so count from the last `)`.
pub(crate) fn parse_start_time(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // after_comm starts at field 3; starttime is field 22.
    after_comm.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The container id in a process's cgroup paths: the 64-hex-digit id that
/// Docker, containerd, CRI-O and Podman put in the path
/// (`/docker/<id>`, `docker-<id>.scope`, `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `libpod-<id>.scope`, kubepods `.../<id>`).
pub(crate) fn container_id_from_cgroup(text: &str) -> Option<String> {
    for line in text.lines() {
        let path = line.splitn(3, ':').nth(2)?;
        for component in path.rsplit('/') {
            let core = component.strip_suffix(".scope").unwrap_or(component);
            let id = core.rsplit(['-', ':']).next().unwrap_or(core);
            if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(id.to_ascii_lowercase());
            }
        }
    }
    None
}

/// Field 22 (starttime, clock ticks since boot) of `/proc/PID/stat`.
pub fn read_start_time(proc_root: &Path, pid: Pid) -> Option<u64> {
    let stat = read_proc_text(&proc_root.join(pid.0.to_string()).join("stat"), 4096).ok()?;
    parse_start_time(&stat)
}

/// Reads `[start, end)` of the memory of `pid` (the vDSO).
pub fn read_memory(proc_root: &Path, pid: Pid, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    const MAX: u64 = 1 << 20;
    let len = end.saturating_sub(start);
    if len == 0 || len > MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "implausible size"));
    }
    let file = std::fs::File::open(proc_root.join(pid.0.to_string()).join("mem"))?;
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, start)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_whole_and_bounded() {
        let maps = read_proc_file(Path::new("/proc/self/maps"), 32 << 20).unwrap();
        let text = String::from_utf8(maps).unwrap();
        assert!(text.ends_with('\n') && text.contains("[stack]"), "whole: {}", &text[text.len().saturating_sub(200)..]);
        // More than one read of 64 KiB, and a bound that cuts.
        let path = std::env::temp_dir().join(format!("ep-procfs-{}", std::process::id()));
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        assert_eq!(read_proc_file(&path, 1 << 20).unwrap(), content);
        assert_eq!(read_proc_file(&path, 70_000).unwrap(), content[..70_000]);
        // Bounds around the first read (into the stack).
        for max in [0, 100, PROC_FIRST_READ - 1, PROC_FIRST_READ, PROC_FIRST_READ + 1] {
            assert_eq!(read_proc_file(&path, max).unwrap(), content[..max], "max {max}");
        }
        std::fs::write(&path, b"").unwrap();
        assert_eq!(read_proc_file(&path, 1 << 20).unwrap(), b"");
        std::fs::remove_file(&path).unwrap();
        let stat = read_proc_text(Path::new("/proc/self/stat"), 4096).unwrap();
        assert_eq!(parse_start_time(&stat), read_start_time(Path::new("/proc"), Pid(std::process::id())));
    }

    #[test]
    fn start_time_survives_odd_comms() {
        let stat = "1234 (a) b (c) R 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn service_names_from_the_environment() {
        let env = |vars: &[&str]| vars.iter().flat_map(|v| v.bytes().chain([0])).collect::<Vec<u8>>();
        assert_eq!(
            service_name_from_environ(&env(&["PATH=/bin", "OTEL_SERVICE_NAME=checkout"])).as_deref(),
            Some("checkout")
        );
        // OTEL_SERVICE_NAME wins over the resource attributes, wherever it is.
        let both =
            env(&["OTEL_RESOURCE_ATTRIBUTES=service.name=cart,deployment.environment=prod", "OTEL_SERVICE_NAME=pay"]);
        assert_eq!(service_name_from_environ(&both).as_deref(), Some("pay"));
        let attrs = env(&["OTEL_RESOURCE_ATTRIBUTES=team=a, service.name=cart%20api ,x=y"]);
        assert_eq!(service_name_from_environ(&attrs).as_deref(), Some("cart api"));
        assert_eq!(service_name_from_environ(&env(&["OTEL_SERVICE_NAME=", "HOME=/root"])), None);
        assert_eq!(service_name_from_environ(&env(&["OTEL_SERVICE_NAME=a\tb"])), None);
        let long = format!("OTEL_SERVICE_NAME={}", "s".repeat(MAX_SERVICE_NAME_BYTES + 1));
        assert_eq!(service_name_from_environ(&env(&[&long])), None);
        assert_eq!(service_name_from_environ(b"OTEL_SERVICE_NAME=\xff\xfe"), None);
        assert_eq!(service_name_from_environ(b""), None);
    }

    #[test]
    fn service_name_of_a_live_process() {
        let mut child =
            std::process::Command::new("sleep").arg("30").env("OTEL_SERVICE_NAME", "svc-under-test").spawn().unwrap();
        // spawn can return once the exec replaced the memory, before the
        // kernel has written the new environment (vfork-style spawn).
        let environ = format!("/proc/{}/environ", child.id());
        for _ in 0..400 {
            if std::fs::read(&environ).unwrap_or_default().windows(17).any(|w| w == b"OTEL_SERVICE_NAME") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let names: Vec<Arc<str>> = vec!["EP_TEST_ABSENT".into(), "OTEL_SERVICE_NAME".into()];
        let info = read_info(Path::new("/proc"), Pid(child.id()), "sleep", &names);
        let plain = read_info(Path::new("/proc"), Pid(std::process::id()), "x", &[]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(&*info.service_name, "svc-under-test");
        assert_eq!(info.env_vars, vec![("OTEL_SERVICE_NAME".into(), "svc-under-test".into())]);
        assert!(plain.env_vars.is_empty());
        // Our test process has no OTEL_SERVICE_NAME: the executable's name.
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() && std::env::var_os("OTEL_RESOURCE_ATTRIBUTES").is_none() {
            assert_eq!(plain.service_name, plain.executable_name);
        }
    }

    #[test]
    fn named_env_vars_in_the_order_named_first_definition_bounded() {
        let names: Vec<Arc<str>> = vec!["B".into(), "A".into(), "LONG".into(), "BAD".into(), "NONE".into()];
        let long = format!("LONG={}", "x".repeat(MAX_ENV_VALUE_BYTES + 1));
        let mut environ = Vec::new();
        for var in [b"A=1".as_slice(), b"AB=no", b"B=x=y", b"A=2", long.as_bytes(), b"BAD=\xff", b"noequals"] {
            environ.extend_from_slice(var);
            environ.push(0);
        }
        let got = named_env_vars(&environ, &names);
        assert_eq!(got, vec![("B".into(), "x=y".into()), ("A".into(), "1".into())]);
        assert!(named_env_vars(&environ, &[]).is_empty());
        let empty: Vec<Arc<str>> = vec!["E".into()];
        assert_eq!(named_env_vars(b"E=\0", &empty), vec![("E".into(), "".into())]);
    }

    #[test]
    fn container_ids() {
        let id = "3f2a".repeat(16);
        for text in [
            format!("0::/system.slice/docker-{id}.scope\n"),
            format!("12:pids:/docker/{id}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-{id}.scope\n"),
            format!("0::/kubepods/besteffort/pod1234/{id}\n"),
            format!("0::/machine.slice/libpod-{id}.scope/container\n"),
        ] {
            assert_eq!(container_id_from_cgroup(&text).as_deref(), Some(id.as_str()), "{text}");
        }
        assert_eq!(container_id_from_cgroup("0::/user.slice/user-0.slice/session-1.scope\n"), None);
    }
}
