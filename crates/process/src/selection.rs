//! Which processes to profile when the user names containers or cgroups:
//! a process is chosen by the cgroup paths in `/proc/PID/cgroup` (read
//! bounded, as every `/proc` file), so the same rule holds with cgroup
//! v1, v2 and both (hybrid hosts, where container runtimes may use v1
//! hierarchies only).

use std::path::Path;

use profiler_trace::Pid;

use crate::procfs::{container_id_from_cgroup, read_proc_text, MAX_CGROUP_BYTES};

/// Shortest container id prefix accepted (`docker ps` shows 12 digits).
pub const MIN_CONTAINER_ID_PREFIX: usize = 12;
/// Most container ids and most cgroups one filter names.
pub const MAX_SELECTORS: usize = 64;

/// Why a selector was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectorError {
    /// Not 12 to 64 hexadecimal digits.
    #[error("container id {0:?}: 12 to 64 hexadecimal digits expected")]
    ContainerId(String),
    /// Not an absolute cgroup path (as `/proc/PID/cgroup` shows them).
    #[error("cgroup {0:?}: an absolute path inside the cgroup hierarchy expected, e.g. /system.slice/app.service")]
    Cgroup(String),
    /// More than [`MAX_SELECTORS`] of a kind.
    #[error("at most {MAX_SELECTORS} container ids and {MAX_SELECTORS} cgroups are supported")]
    TooMany,
}

/// The processes of some containers (by id or id prefix) and of some
/// cgroups (a cgroup and every cgroup below it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessFilter {
    container_ids: Vec<String>,
    cgroups: Vec<String>,
}

impl ProcessFilter {
    /// A filter of `container_ids` (ids or prefixes of at least 12 hex
    /// digits) and `cgroups` (paths as `/proc/PID/cgroup` shows them; a
    /// trailing `/` is ignored). Both empty: no filter.
    pub fn new(container_ids: &[String], cgroups: &[String]) -> Result<ProcessFilter, SelectorError> {
        if container_ids.len() > MAX_SELECTORS || cgroups.len() > MAX_SELECTORS {
            return Err(SelectorError::TooMany);
        }
        let ids = container_ids
            .iter()
            .map(|id| {
                let ok =
                    (MIN_CONTAINER_ID_PREFIX..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
                ok.then(|| id.to_ascii_lowercase()).ok_or_else(|| SelectorError::ContainerId(id.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let groups = cgroups
            .iter()
            .map(|path| {
                let trimmed = path.trim_end_matches('/');
                let ok = path.starts_with('/') && path.len() <= 4096 && !path.split('/').any(|c| c == "..");
                ok.then(|| trimmed.to_owned()).ok_or_else(|| SelectorError::Cgroup(path.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ProcessFilter { container_ids: ids, cgroups: groups })
    }

    /// Whether it selects anything (else every process is profiled).
    pub fn is_active(&self) -> bool {
        !self.container_ids.is_empty() || !self.cgroups.is_empty()
    }

    /// Whether a process whose `/proc/PID/cgroup` reads `text` is chosen.
    pub fn matches_cgroup_text(&self, text: &str) -> bool {
        if !self.container_ids.is_empty() {
            if let Some(id) = container_id_from_cgroup(text) {
                if self.container_ids.iter().any(|want| id.starts_with(want.as_str())) {
                    return true;
                }
            }
        }
        text.lines().filter_map(|line| line.splitn(3, ':').nth(2)).any(|path| {
            self.cgroups.iter().any(|want| {
                // "/" selects everything; "/a" selects "/a" and "/a/b", not "/ab".
                want.is_empty()
                    || path.strip_prefix(want.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
        })
    }

    /// Whether process `pid` is chosen now (false when it is gone).
    pub fn matches(&self, proc_root: &Path, pid: Pid) -> bool {
        read_proc_text(&proc_root.join(pid.0.to_string()).join("cgroup"), MAX_CGROUP_BYTES)
            .is_ok_and(|text| self.matches_cgroup_text(&text))
    }

    /// The processes chosen now, at most `max`, in `/proc` order.
    pub fn scan(&self, proc_root: &Path, max: usize) -> Vec<Pid> {
        let Ok(dir) = std::fs::read_dir(proc_root) else { return Vec::new() };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .map(Pid)
            .filter(|&pid| self.matches(proc_root, pid))
            .take(max)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKER_V1: &str =
        "12:memory:/docker/4f5c6a9e0b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e\n0::/\n";
    const SYSTEMD_V2: &str = "0::/system.slice/app.service/worker\n";

    #[test]
    fn containers_by_id_or_prefix_and_cgroups_with_their_children() {
        let by_id = ProcessFilter::new(&["4F5C6A9E0B1D".into()], &[]).unwrap();
        assert!(by_id.is_active());
        assert!(by_id.matches_cgroup_text(DOCKER_V1), "a 12-digit prefix, any case");
        assert!(!by_id.matches_cgroup_text(SYSTEMD_V2));
        let other = ProcessFilter::new(&["4f5c6a9e0b1e".into()], &[]).unwrap();
        assert!(!other.matches_cgroup_text(DOCKER_V1));

        let unit = ProcessFilter::new(&[], &["/system.slice/app.service/".into()]).unwrap();
        assert!(unit.matches_cgroup_text(SYSTEMD_V2), "a cgroup below the one named");
        assert!(unit.matches_cgroup_text("0::/system.slice/app.service\n"));
        assert!(!unit.matches_cgroup_text("0::/system.slice/app.service2\n"), "a sibling whose name starts alike");
        assert!(!unit.matches_cgroup_text(DOCKER_V1));
        let v1 = ProcessFilter::new(&[], &["/docker".into()]).unwrap();
        assert!(v1.matches_cgroup_text(DOCKER_V1), "a v1 hierarchy's path counts too");

        assert!(!ProcessFilter::new(&[], &[]).unwrap().is_active());
    }

    #[test]
    fn bad_selectors_are_refused() {
        assert_eq!(ProcessFilter::new(&["4f5c6a".into()], &[]), Err(SelectorError::ContainerId("4f5c6a".into())));
        assert!(ProcessFilter::new(&["g".repeat(12)], &[]).is_err());
        assert!(ProcessFilter::new(&[], &["system.slice".into()]).is_err(), "relative");
        assert!(ProcessFilter::new(&[], &["/a/../b".into()]).is_err());
        let many: Vec<String> = (0..=MAX_SELECTORS).map(|i| format!("/g{i}")).collect();
        assert_eq!(ProcessFilter::new(&[], &many), Err(SelectorError::TooMany));
    }

    #[test]
    fn this_process_is_found_by_its_own_cgroup() {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let path = text.lines().find_map(|l| l.splitn(3, ':').nth(2)).unwrap().to_owned();
        let filter = ProcessFilter::new(&[], &[path]).unwrap();
        let me = Pid(std::process::id());
        assert!(filter.matches(Path::new("/proc"), me));
        assert!(filter.scan(Path::new("/proc"), usize::MAX).contains(&me));
        assert!(!filter.matches(Path::new("/proc"), Pid(u32::MAX - 1)), "no such process");
    }
}
