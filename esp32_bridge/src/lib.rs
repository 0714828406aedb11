//! ESP32 bridge forwarding logic. Filled in by issue 6.
#![cfg_attr(not(feature = "host"), no_std)]
extern crate alloc;
