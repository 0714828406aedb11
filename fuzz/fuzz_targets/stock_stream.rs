#![no_main]
// Body and invariants: gapstream_fuzz_targets::stock::stock_stream.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::stock::stock_stream(data));
