#![no_main]
// Body and invariants: gapstream_fuzz_targets::fec::fec_reassembly.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::fec::fec_reassembly(data));
