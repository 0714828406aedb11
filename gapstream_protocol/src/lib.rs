//! The gapstream wire protocol (version 2): authenticated, encrypted camera frames from a GAP8 drone
//! through an untrusted ESP32 / WiFi to one or several receivers (a leader and listeners). Each
//! receiver runs its own authenticated handshake with the drone; frames are sealed once per epoch
//! under a group frame key that the drone sends to every member over its own session, and a
//! receiver joining or leaving starts a new epoch. `no_std`; the handshake and the session state
//! machines need `alloc` (feature `alloc`, on by default). The full specification, byte by byte, with the security
//! argument and test vectors, is `docs/protocol.md` (its hex examples are checked by `spec_vectors`).
//!
//! | module | concern |
//! |---|---|
//! | [`clock`] | [`Clock`], monotonic nanoseconds: the one clock trait of the sessions, the drone and the receivers |
//! | [`cpx`] | CPX packets as the AI-deck speaks them: routing header, stream decoder, packetizer |
//! | [`assembler`] | CPX packets → protocol messages, recovering from lost packets, bounded memory |
//! | [`wire`] | byte layouts of every message (frame / control / handshake headers, alerts), nonces |
//! | [`suite`] | frame suites (ChaCha20-Poly1305, AES-128-GCM, unauthenticated ChaCha20 / AES-CTR, none) and key-establishment modes |
//! | [`aead`] | payload sealing over [`gap_rust_cipher_s::KeystreamApplier`] + `poly1305` / `ghash` |
//! | [`frame`] | sealing / opening frames and control messages on caller buffers |
//! | [`keys`] | HKDF-SHA256 key schedule: session control keys, the drone's group pool, per-epoch group frame keys, key-log lines |
//! | [`noise`] | `snow` resolver for `Noise_KK_25519_ChaChaPoly_SHA256` on riscv32imc-friendly crates |
//! | [`rsa_oaep`] | RSA-OAEP-2048 encryption without allocation (drone), `rsa`-crate decryption (receiver) |
//! | [`handshake`] | pairing (one key per receiver, [`handshake::DroneIdentity`]), HELLO / ACCEPT, negotiation of suite and mode inside the Noise handshake |
//! | [`session`] | the I/O-free [`session::DroneSession`] (one session per receiver, group epochs, joins and leaves) and [`session::ReceiverSession`], counters |
//! | [`connection`] | the sans-I/O [`Connection`] of each role ([`DroneConnection`], [`ReceiverConnection`]): CPX bytes in, events and CPX bytes out, around the deframer, reassembler, session and packetizer |
//! | [`replay`] | sliding replay window over u64 sequence numbers, loss from gaps |
//! | [`compat`] | the stock plaintext `0xBC` image stream, for stock viewers and A/B runs |
//! | `test_rng` | (feature `test-rng`) a deterministic generator for tests and the rv32 benchmarks: never for real keys |
//!
//! An implementation drives one [`Connection`] per link, the same way on both sides (rustls'
//! connections are the model): [`Connection::read_stream`] (TCP, SPI) or
//! [`Connection::read_datagram`] (UDP) with the bytes that arrived — packets of other CPX
//! functions, garbled stretches and dropped messages come back through its callback as
//! [`connection::Incoming`] — then, while [`Connection::has_message`], `process_message` with the
//! keystream engine, a random generator and the [`Clock`] (a [`session::ReceiverEvent`] /
//! [`session::DroneEvent`], or the session's typed rejection); `handle_timeout` regularly (the
//! receiver about every 100 ms, the drone once per frame); and it sends every packet
//! [`Connection::poll_transmit`] lends (or cuts the [`Connection::poll_message`] packetizers into a
//! buffer of its own). The drone seals each frame with [`DroneConnection::seal_frame`] and sends
//! [`DroneConnection::frame_packetizer`]'s packets after what its session queued; a receiver
//! starts with [`ReceiverConnection::connect`]. The sessions underneath ([`session`]) take whole messages
//! and are there for callers that move messages by other means.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_debug_implementations)]

#[cfg(any(feature = "alloc", test))]
extern crate alloc;

pub mod aead;
#[cfg(feature = "alloc")]
pub mod assembler;
pub mod clock;
pub mod compat;
#[cfg(feature = "alloc")]
pub mod connection;
pub mod cpx;
pub mod frame;
#[cfg(feature = "alloc")]
pub mod handshake;
pub mod keys;
#[cfg(feature = "alloc")]
pub mod noise;
pub mod replay;
pub mod rsa_oaep;
#[cfg(feature = "alloc")]
pub mod session;
pub mod state;
pub mod suite;
pub mod wire;

#[cfg(all(test, feature = "alloc"))]
mod rv32_golden;
#[cfg(all(test, feature = "alloc"))]
mod spec_vectors;

pub use clock::Clock;
#[cfg(feature = "alloc")]
pub use connection::{Connection, DroneConnection, ReceiverConnection};
pub use gap_rust_cipher_s::{CipherId, KeystreamApplier, KeystreamError, Sequential};
#[cfg(feature = "alloc")]
pub use handshake::{DroneIdentity, Identity, Role, StaticSecret, pair, pair_group};
/// The `rand_core` this crate takes entropy through (`CryptoRng`).
pub use rand_core;
#[cfg(feature = "alloc")]
pub use session::{
    DroneConfig, DroneEvent, DroneSession, Frame, HandshakeStats, LeaveReason, ReceiverConfig,
    ReceiverCounters, ReceiverEvent, ReceiverSession, Rejected, SealError,
};
pub use suite::{KexMode, Suite};

/// A deterministic random generator for tests and benchmarks (feature `test-rng`): the same bytes
/// on the host and on rv32, so the rv32 programs can reproduce the host tests' golden handshakes.
/// Never for real keys.
#[cfg(any(test, feature = "test-rng"))]
pub mod test_rng {
    /// Deterministic ChaCha20 keystream (key = the seed, zero nonce) as a `CryptoRng`: tests and
    /// benchmarks only, never for real keys.
    pub struct TestRng {
        key: [u8; 32],
        offset: u64,
    }
    impl TestRng {
        /// The generator for `seed` (the key's first 8 bytes, little-endian; the rest zero).
        pub fn new(seed: u64) -> Self {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&seed.to_le_bytes());
            TestRng { key, offset: 0 }
        }
    }
    impl rand_core::TryRng for TestRng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            let mut b = [0u8; 4];
            self.try_fill_bytes(&mut b)?;
            Ok(u32::from_le_bytes(b))
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            let mut b = [0u8; 8];
            self.try_fill_bytes(&mut b)?;
            Ok(u64::from_le_bytes(b))
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            use gap_rust_cipher_s::KeystreamApplier;
            dst.fill(0);
            gap_rust_cipher_s::Sequential
                .apply_keystream(
                    gap_rust_cipher_s::CipherId::ChaCha20,
                    &self.key,
                    &[0; 12],
                    self.offset,
                    dst,
                )
                .unwrap();
            self.offset += dst.len() as u64;
            Ok(())
        }
    }
    impl rand_core::TryCryptoRng for TestRng {}
    impl core::fmt::Debug for TestRng {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("TestRng")
                .field("offset", &self.offset)
                .finish_non_exhaustive()
        }
    }
}

#[cfg(test)]
#[cfg_attr(not(feature = "alloc"), allow(dead_code))]
pub(crate) mod test_util {
    use alloc::vec::Vec;
    /// Hex to bytes; whitespace ignored. Panics on bad input (tests only).
    pub fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        s.chunks(2)
            .map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    /// Bytes to lower-case hex.
    pub fn to_hex(b: &[u8]) -> alloc::string::String {
        use core::fmt::Write;
        let mut s = alloc::string::String::new();
        for x in b {
            write!(s, "{x:02x}").unwrap();
        }
        s
    }

    pub use crate::test_rng::TestRng;

    /// An RSA-2048 test key (made with `openssl genrsa 2048` for the tests; e = 65537).
    pub const RSA_TEST_N: &str = "8342d4d7c1fc992376c5515d491b435b0a0794b5aa04360637d42f7c547445cb33c96439e6969fe47e71f9e6810d8aa7\
         3441153878fd04fac854b72c9fa28405895677fbce12a3f5de8cb2e269b9f43583e1ddfcc3ca16ee47192d92f9abeac0\
         4dacbc5efffc7f94e2fe86f8290f442421e982833582bf1bb1d38a9716aae08c11275f5526e86919308f03b2923ccea5\
         19e9ecfdeaf3456af2788c7fa606d953c86ffa787da59c26e8eb0821e5603de2f633a8ce7872473fb8fdc1567b3550df\
         009587a0191dc0ab7c69e38c18aecce15f13c6533dc9849c179a7cbfd86742852e5c45407a10866f85f606506cce9b42\
         e1d7da2fb45aa920f3fcd5aeae76ebcb";
    pub const RSA_TEST_P: &str = "b7fae7de7508b9f611a7c00cf74c71035746a51368f562481c50f1d76b6785c751e5a57131a106b7f4625109e6004858\
         1f00fbb9ec304e09e107b42e46a9ef802e0edd1762f6680f3acbf089690b04b1ac5573b4fb2dcb499ebf37f2e4dfd7b4\
         5ac3bfdabf8b1371dd7a31757537d4bc6469b3fef22cfd089277b5726a14f699";
    pub const RSA_TEST_Q: &str = "b6a4d27964d822ab3a95adbe5d8451c591ed8f9072e72b574be6e7fc6e62b423c7a2ed453981ef2e21413269dd53fa83\
         f7bfd850deb46c3dfe8b77ab266c547279816bfaf1724552ac9719b78d3a6a9ecf4f4ddf976ec8026a1d9c474f4afe12\
         63da98a6b9bb4b7ba543be7f1f182f13573e1fe35d3a705776e5328514e54803";
}
