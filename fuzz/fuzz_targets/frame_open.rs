#![no_main]
// Body and invariants: gapstream_fuzz_targets::wire::frame_open.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::wire::frame_open(data));
