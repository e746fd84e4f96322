//! Heap accounting of the symbolizer's tables (see `FileSymbolizer::cost`).

/// Heap of a `HashMap`/`HashSet` of `capacity` with `slot`-byte entries:
/// a power-of-two number of buckets (8 per 7 entries), one control byte
/// each, and a group of trailing control bytes.
pub(crate) fn table_bytes(capacity: usize, slot: u64) -> u64 {
    if capacity == 0 {
        return 0;
    }
    let buckets =
        if capacity < 8 { (capacity + 1).next_power_of_two() } else { (capacity * 8 / 7).next_power_of_two() } as u64;
    buckets * (slot + 1) + 16
}
