//! The Rust part of gapstream's GAP8 firmware (`firmware/`): the AI-deck implementations of
//! `gapstream_drone`'s traits and the firmware's main loop. The C part (`firmware/src/`) opens the
//! SDK's drivers and calls [`pmsis::gapstream_main`]; everything above the drivers is here.
//!
//! | module | what |
//! |---|---|
//! | [`clock`] | `Clock` from the 32-bit FC timer, extended to 64 bits (cycles and ns) |
//! | [`camera`] | `Camera` for the Himax over CPI: double-buffered captures, per-capture timing; [`camera::OneShot`] for the sequential baseline |
//! | [`link`] | `Link`: CPX over SPI to the ESP32 with the two ready-to-talk lines (Bitcraze's protocol) |
//! | [`entropy`] | SHA-256 entropy pool (device seed, SRAM power-up state, pixel noise, timing jitter) behind `Entropy` |
//! | [`uart`] | the STM32's state messages from the GAP8's UART receive ring, each byte on the drone's clock (`StateSource`); `ReadPlanner`, the length of each uDMA read so that a message's last byte ends one |
//! | [`keys`] | the pairing file embedded at build time (never in source) → `Identity` |
//! | [`coder`] | compress, then seal: `FrameCoder` over the cluster JPEG encoder (one band per core, restart markers) |
//! | [`app`] | the main loop: wait for the receiver's handshake, stream N frames, report fps and cycles per stage |
//! | `pmsis` (feature `pmsis`, riscv32) | FFI to `firmware/src/board.c`, the C entry point, allocator, panic handler |
//! | [`bootflash`] | the boot counter's two HyperFlash sectors (`firmware/src/bootflash.c`, pmsis' flash driver; the board part with feature `pmsis` on riscv32), the C side's error codes as `FlashError`s |
//!
//! Everything except `pmsis` is hardware-independent and tested on the host (`cargo test -p
//! gapstream_firmware`), including a whole stream through the ESP32 side of `esp32_bridge` to a
//! receiver session.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod app;
pub mod bootflash;
pub mod camera;
pub mod clock;
pub mod coder;
pub mod entropy;
pub mod keys;
pub mod link;
#[cfg(all(feature = "pmsis", target_arch = "riscv32"))]
pub mod pmsis;
pub mod uart;
