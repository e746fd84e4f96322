//! Go pprof labels, seen from user space: the per-process map that tells
//! the programs how to read a Go process's goroutine labels
//! (`go_label_processes`, `ebpf/go_labels.bpf.h`), and the labels a
//! sample carries (`struct go_labels` after its frame words).

use crate::contract::{bytes_of, c};
use crate::BpfError;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashSet;

/// Most labels a sample carries (`GO_LABELS_MAX`).
pub const GO_LABELS_MAX: usize = c::GO_LABELS_MAX as usize;
/// Longest key kept, bytes (`GO_LABEL_KEY_LEN - 1`).
pub const GO_LABEL_KEY_MAX: usize = c::GO_LABEL_KEY_LEN as usize - 1;
/// Longest value kept, bytes (`GO_LABEL_VALUE_LEN - 1`).
pub const GO_LABEL_VALUE_MAX: usize = c::GO_LABEL_VALUE_LEN as usize - 1;
/// Most processes with an entry (the map's `max_entries`).
pub const MAX_GO_LABEL_PROCESSES: usize = 4096;

/// `enum go_labels_layout`: how a Go version keeps a goroutine's labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoLabelsLayout {
    /// Go 1.13-1.23: a `map[string]string`.
    Map = c::GO_LABELS_HMAP as isize,
    /// Go 1.24+: a slice of `{key, value string}`.
    Slice = c::GO_LABELS_SLICE as isize,
}

/// `struct go_labels_process`: where a Go process keeps the current
/// goroutine and its labels. Offsets are in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoLabelsValue {
    /// The current g is at the thread pointer + this.
    pub tls_g: i32,
    /// `runtime.g.m`.
    pub g_m: u32,
    /// `runtime.m.curg`.
    pub m_curg: u32,
    /// `runtime.g.labels`.
    pub g_labels: u32,
    /// The label set's layout.
    pub layout: GoLabelsLayout,
    /// `runtime.g.sched` (a `gobuf`, `sp` at 0 and `pc` at 8), read to
    /// unwind `runtime.morestack` (`ebpf/native_unwinder.bpf.h`).
    pub g_sched: u8,
    /// `runtime.gobuf.bp`.
    pub gobuf_bp: u8,
}

impl GoLabelsValue {
    pub(crate) fn to_c(self) -> c::go_labels_process {
        c::go_labels_process {
            tls_g: self.tls_g,
            g_m: self.g_m,
            m_curg: self.m_curg,
            g_labels: self.g_labels,
            layout: self.layout as u8,
            g_sched: self.g_sched,
            gobuf_bp: self.gobuf_bp,
            reserved: [0; 5],
        }
    }
}

/// The `go_label_processes` map, with what it holds (one deletion path
/// per entry). Made by [`crate::Sampler::go_label_maps`].
pub struct GoLabelMaps {
    map: MapHandle,
    pids: HashSet<u32>,
}

impl GoLabelMaps {
    pub(crate) fn new(map: MapHandle) -> GoLabelMaps {
        GoLabelMaps { map, pids: HashSet::new() }
    }

    /// Sets (replaces) the entry of process `pid`.
    pub fn set_process(&mut self, pid: u32, value: GoLabelsValue) -> Result<(), BpfError> {
        let v = value.to_c();
        self.map
            .update(&pid.to_ne_bytes(), bytes_of(&v), MapFlags::ANY)
            .map_err(|source| BpfError::Map { map: "go_label_processes", source })?;
        self.pids.insert(pid);
        Ok(())
    }

    /// Removes the entry of process `pid`, if it has one.
    pub fn remove_process(&mut self, pid: u32) -> Result<(), BpfError> {
        if !self.pids.remove(&pid) {
            return Ok(());
        }
        match self.map.delete(&pid.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(BpfError::Map { map: "go_label_processes", source }),
        }
    }

    /// Processes with an entry.
    pub fn len(&self) -> usize {
        self.pids.len()
    }

    /// Whether no process has an entry.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }
}

/// Decodes a `struct go_labels` cut after its labels; `None` when it is
/// shorter than its count says, or counts more than [`GO_LABELS_MAX`].
/// Returns the labels and the bytes read.
pub(crate) fn parse_labels(data: &[u8]) -> Option<(Vec<(String, String)>, usize)> {
    let count = usize::from(*data.first()?);
    if count > GO_LABELS_MAX {
        return None;
    }
    let label_size = size_of::<c::go_label>();
    let header = c::GO_LABELS_HEADER_SIZE as usize;
    let end = header + count * label_size;
    let body = data.get(header..end)?;
    let key_len = c::GO_LABEL_KEY_LEN as usize;
    let labels =
        body.chunks_exact(label_size).map(|label| (c_str(&label[..key_len]), c_str(&label[key_len..]))).collect();
    Some((labels, end))
}

fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `struct go_labels` as the programs send it.
    fn encode(labels: &[(&str, &str)]) -> Vec<u8> {
        let mut out = vec![0u8; c::GO_LABELS_HEADER_SIZE as usize];
        out[0] = labels.len() as u8;
        for (k, v) in labels {
            let mut key = [0u8; c::GO_LABEL_KEY_LEN as usize];
            key[..k.len()].copy_from_slice(k.as_bytes());
            let mut value = [0u8; c::GO_LABEL_VALUE_LEN as usize];
            value[..v.len()].copy_from_slice(v.as_bytes());
            out.extend_from_slice(&key);
            out.extend_from_slice(&value);
        }
        out
    }

    #[test]
    fn parses_labels_and_their_length() {
        let data = encode(&[("request", "r1"), ("user", "a-rather-long-value")]);
        let (labels, used) = parse_labels(&data).unwrap();
        assert_eq!(labels, vec![("request".into(), "r1".into()), ("user".into(), "a-rather-long-value".into())]);
        assert_eq!(used, 8 + 2 * 96);
        for len in 0..data.len() {
            assert_eq!(parse_labels(&data[..len]), None, "length {len}");
        }
        let mut too_many = encode(&[]);
        too_many[0] = GO_LABELS_MAX as u8 + 1;
        too_many.resize(8 + 11 * 96, 0);
        assert_eq!(parse_labels(&too_many), None);
    }

    #[test]
    fn value_layout_matches_the_header() {
        let v = GoLabelsValue {
            tls_g: -8,
            g_m: 48,
            m_curg: 184,
            g_labels: 352,
            layout: GoLabelsLayout::Slice,
            g_sched: 56,
            gobuf_bp: 40,
        };
        let b = bytes_of(&v.to_c()).to_vec();
        assert_eq!(b.len(), 24);
        assert_eq!(i32::from_ne_bytes(b[0..4].try_into().unwrap()), -8);
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), 352);
        assert_eq!(b[16], c::GO_LABELS_SLICE as u8);
        assert_eq!((b[17], b[18]), (56, 40));
    }
}
