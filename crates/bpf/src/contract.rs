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
            // The stats name of UNWIND_STOP_RUNTIME_CODE predates the
            // constant's runtime-neutral name.
            let expected = match *name {
                "UNWIND_STOP_RUNTIME_CODE" => "hotspot".to_string(),
                name => name.trim_start_matches("UNWIND_STOP_").to_lowercase(),
            };
            assert_eq!(stop.as_str(), expected, "{name}");
        }
    }

    /// `Counters` reads every counter of `enum counter_id`: the shared
    /// ones by name (but the bounds of the per-reason block, which it
    /// reads by `UnwindStop`), the runtimes' ones (from
    /// COUNTER_RUNTIMES_BASE up) through `RUNTIME_COUNTERS`.
    #[test]
    fn counters_are_the_headers() {
        let (_, ids) = RUST_ENUMS.iter().find(|(n, _)| *n == "counter_id").expect("enum counter_id");
        let base = i64::from(crate::contract::c::COUNTER_RUNTIMES_BASE);
        let read: Vec<(&str, i64)> =
            crate::sampler::COUNTER_IDS.iter().map(|&(name, id)| (name, i64::from(id))).collect();
        let shared: Vec<(&str, i64)> = ids
            .iter()
            .copied()
            .filter(|(name, id)| *id < base && !matches!(*name, "COUNTER_UNWIND_STOP_BASE" | "COUNTER_RUNTIMES_BEFORE"))
            .collect();
        assert_eq!(read, shared);
        let runtimes: Vec<(String, i64)> = ids
            .iter()
            .filter(|(name, id)| *id >= base && !matches!(*name, "COUNTER_RUNTIMES_BASE" | "COUNTER_MAX"))
            .map(|(name, id)| (name.trim_start_matches("COUNTER_").to_lowercase(), *id))
            .collect();
        let generated: Vec<(String, i64)> =
            profiler_contract::RUNTIME_COUNTERS.iter().map(|(name, id)| (name.to_string(), i64::from(*id))).collect();
        assert_eq!(runtimes, generated);
        assert!(generated.len() >= 14, "the runtimes' counters: {generated:?}");
    }
}
