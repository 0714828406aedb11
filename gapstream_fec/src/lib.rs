//! Forward error correction for gapstream's UDP stream, added by the (untrusted, keyless) ESP32
//! bridge over ciphertext and removed by the receiver before the protocol session sees the
//! packets: a lost packet no longer loses its frame. `no_std`; the decoder and the reassembler
//! need `alloc` (feature `alloc`, on by default).
//!
//! | module | what |
//! |---|---|
//! | [`gf`] | GF(2^8) (polynomial 0x11D), table driven |
//! | [`code`] | systematic Reed-Solomon: the Vandermonde construction of `reed-solomon-erasure` (same parity bytes), encoder and decoder by closed-form Lagrange coefficients, variable-length datagrams |
//! | [`wire`] | the FEC datagrams: shard header (block, index, k, m), the receiver's request and loss report |
//! | [`reassembler`] | (alloc) the receiver's side, sans I/O: in-order delivery, recovery, give-up rules, bounded memory, counters |
//! | [`adaptive`] | the redundancy rule the bridge applies to loss reports, bounded by a floor and a ceiling |
//!
//! The format and the rules are in `docs/stream.md` ("Forward error correction"), with a hex
//! test vector that `tests/vector.rs` checks.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_debug_implementations)]

#[cfg(any(feature = "alloc", test))]
extern crate alloc;

pub mod adaptive;
pub mod code;
pub mod gf;
#[cfg(feature = "alloc")]
pub mod reassembler;
#[cfg(all(test, feature = "alloc"))]
mod spec_vector;
pub mod wire;
