#![no_main]
// Body and invariants: gapstream_fuzz_targets::cpx::cpx_assembler.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::cpx::cpx_assembler(data));
