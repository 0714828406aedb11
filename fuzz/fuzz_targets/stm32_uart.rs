#![no_main]
// Body and invariants: gapstream_fuzz_targets::stm32::stm32_uart.
libfuzzer_sys::fuzz_target!(|data: &[u8]| gapstream_fuzz_targets::stm32::stm32_uart(data));
