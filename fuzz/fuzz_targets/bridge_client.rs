#![no_main]
// Body and invariants: gapstream_fuzz_targets::bridge::bridge_client.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::bridge::bridge_client(data));
