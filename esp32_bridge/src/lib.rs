//! The ESP32 bridge of gapstream: forwards CPX messages between the GAP8 (SPI side) and WiFi
//! clients (TCP port 5000 like the stock firmware, and UDP), with bounded queues that drop whole
//! frames instead of blocking, several clients at once (a leader and listeners), and no key.
//!
//! | module | what |
//! |---|---|
//! | [`cookie`] | UDP registration, sans I/O: who gets the stream over UDP and for how long (cookies and probes an address must echo, budgets), the bridge's side ([`cookie::Gate`]) and the receiver's ([`cookie::Client`]) |
//! | [`cpx`] | the CPX framing the bridge needs: packet lengths, routing header, message grouping (`last_packet`) |
//! | [`fec`] | forward error correction for UDP clients (requested per client): blocks of packets, Reed-Solomon parity (`gapstream_fec`), the adaptive mode; sans I/O |
//! | [`forward`] | the forwarding state machine (`no_std` + `alloc`, sans I/O): client set, queues, drop policy, upstream routing |
//! | [`spi_slave`] | the ESP32's end of the SPI link to the GAP8 (one CPX packet per transaction each way, stock protocol), sans I/O |
//! | `capi` (feature `capi`) | C entry points (`include/esp32_bridge.h`) for the ESP-IDF firmware (`esp-idf/`) and the GVSOC stand-in |
//! | `netsim` (feature `host`) | the host bridge's WiFi model (a shared channel of a set rate, backpressure to the SPI side) and seeded UDP loss (independent or Gilbert–Elliott bursts) |
//! | `host` (feature `host`) | the std/tokio driver: SPI side as a TCP socket, TCP and UDP servers, the `esp32-bridge` binary |
//! | `mdns` (feature `host`) | the bridge advertised over mDNS as the stock firmware advertises a deck (`aideck-XXXXXX`, `_cpx._tcp`, TXT `id` = MAC) |
//!
//! Without the `host` feature the crate is `no_std` + `alloc` (what the ESP-IDF glue in `esp-idf/` links).
#![cfg_attr(not(feature = "std"), no_std)]
extern crate alloc;

#[cfg(feature = "capi")]
pub mod capi;
pub mod cookie;
pub mod cpx;
pub mod fec;
pub mod forward;
#[cfg(feature = "host")]
pub mod host;
#[cfg(feature = "host")]
pub mod mdns;
#[cfg(feature = "host")]
pub mod netsim;
pub mod spi_slave;
