#![no_main]
// Body and invariants: gapstream_fuzz_targets::jpeg::jpeg_decode.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::jpeg::jpeg_decode(data));
