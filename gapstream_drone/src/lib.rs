//! The drone application of gapstream: capture a frame, seal it, send it as CPX packets to the
//! ESP32, answer the receiver's handshake and rekey messages. `#![no_std]` + `alloc`, generic over
//! small traits so the GAP8 firmware (`firmware/`, pmsis implementations) and the host simulation behind
//! `make demo` (the `gapstream` crate, std implementations) run exactly this code.
//!
//! | module | what |
//! |---|---|
//! | [`traits`] | `Camera`, `Link`, `Clock`, `Entropy`, `FrameCoder`: what the firmware and the host simulation implement |
//! | [`drone`] | the main loop: double-buffered capture, seal (once for every receiver), CPX packets over the link, the receivers' handshakes, keepalives and group keys |
//! | [`rng`] | ChaCha20 DRBG seeded from `Entropy` (and the boot counter) for the handshake's randomness |
//! | [`boot`] | the persistent boot counter: `BootCounter` with flash (A/B sectors over `BootFlash`), file (`std`) and RAM backends |
//! | [`testpattern`] | synthetic camera scene with the frame number and capture time burned in, and its decoder |
#![no_std]
extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod boot;
pub mod drone;
pub mod rng;
pub mod state;
pub mod testpattern;
pub mod traits;

pub use boot::{Boot, BootCounter, BootCounterError};
pub use drone::{Drone, DroneConfig, DroneError, DroneStats, Mode, SecureConfig};
pub use traits::{
    Camera, Capture, Clock, CoderError, Entropy, EntropyError, FrameCoder, FrameFormat, Link,
    PixelFormat,
};
