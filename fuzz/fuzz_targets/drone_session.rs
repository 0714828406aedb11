#![no_main]
// Body and invariants: gapstream_fuzz_targets::session::drone_session.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::session::drone_session(data));
