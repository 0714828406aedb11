//! Drone application logic for gapstream (no_std + alloc). Filled in by issue 6.
#![no_std]
extern crate alloc;
