//! The BPF/Rust contract is profiler-contract's (bindgen over
//! `ebpf/types.h`, checked against the BPF target's BTF); this crate's
//! modules reach it here. The tests below check what this crate mirrors
//! of the header: its stop reasons and its counters.

pub(crate) use profiler_contract::{bytes_of, c, read};

#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use profiler_contract::RUST_ENUMS;

    /// `UnwindStop` is the header's `enum unwind_stop`, one variant per
    /// constant, each named after it.
    #[test]
    fn unwind_stops_are_the_headers() {
        let (_, stops) = RUST_ENUMS.iter().find(|(n, _)| *n == "unwind_stop").expect("enum unwind_stop");
        let stops: Vec<_> = stops.iter().filter(|(n, _)| *n != "UNWIND_STOP_COUNT").collect();
        assert_eq!(stops.len(), crate::UnwindStop::ALL.len());
        for (name, value) in stops {
            let stop = crate::UnwindStop::from_raw(*value as u8);
            assert_eq!(i64::from(stop.raw()), *value);
            assert_eq!(stop.as_str(), name.trim_start_matches("UNWIND_STOP_").to_lowercase(), "{name}");
        }
    }

    /// `Counters` reads every counter of `enum counter_id` (but the
    /// bounds of the per-reason block, which it reads by `UnwindStop`).
    #[test]
    fn counters_are_the_headers() {
        let (_, ids) = RUST_ENUMS.iter().find(|(n, _)| *n == "counter_id").expect("enum counter_id");
        let read: Vec<(&str, i64)> =
            crate::sampler::COUNTER_IDS.iter().map(|&(name, id)| (name, i64::from(id))).collect();
        let header: Vec<(&str, i64)> = ids
            .iter()
            .copied()
            .filter(|(name, _)| !matches!(*name, "COUNTER_UNWIND_STOP_BASE" | "COUNTER_MAX"))
            .collect();
        assert_eq!(read, header);
    }
}
