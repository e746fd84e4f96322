//! One ring buffer record -> a sample.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profiler_bpf::RawSample;

fuzz_target!(|data: &[u8]| {
    if let Some(s) = RawSample::parse(data) {
        assert!(64 + 8 * (s.kernel_frames.len() + s.user_frames.len()) <= data.len());
    }
});
