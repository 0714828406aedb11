//! Stream-cipher kernels for the GAP8's RI5CY cores, behind the RustCrypto `cipher` traits.
//!
//! Every cipher here implements `KeyIvInit + StreamCipher + StreamCipherSeek` (through the `cipher`
//! crate's core traits), so `gap_rust_wrapper` can give each cluster core its own byte offset of the
//! keystream.
//!
//! | module | what |
//! |---|---|
//! | [`KeystreamApplier`], [`CipherId`] | the one interface the protocol uses to encrypt a payload, implemented by the sequential kernels here ([`Sequential`]) and by the cluster engine |
//! | [`chacha`] | ChaCha20 (RFC 8439): portable (RustCrypto), RV32IMC assembly and PULP assembly backends; [`ChaCha20`] is the one chosen for this target |
//! | [`aes`] | AES-128-CTR (SP 800-38A): constant-time bitsliced/fixsliced kernels with counter-mode caching, [`Aes128Ctr`] |
//! | [`engine`] | [`engine::ClusterEngine`]: the same [`KeystreamApplier`] spread over the GAP8 cluster by `gap_rust_wrapper` (any `gap_rust_sdk` backend) |
//! | `capi` (features `host` / `pmsis` / `bare`) | C entry points `gapcs_*` for C firmware; header `include/gap_rust_cipher_s.h` |
//!
//! Cargo feature `pulp`: on riscv32, [`ChaCha20`] (and so [`Sequential`]) uses the PULP kernel
//! (RI5CY only: GAP8 / GVSOC; QEMU cannot run it). Without it riscv32 builds use the RV32IMC
//! assembly, and host builds the portable backend.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod aes;
#[cfg(any(feature = "host", feature = "pmsis", feature = "bare"))]
pub mod capi;
pub mod chacha;
pub mod engine;

pub use aes::Aes128Ctr;
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub use chacha::ChaCha20Pulp;
#[cfg(target_arch = "riscv32")]
pub use chacha::ChaCha20Rv32;
pub use chacha::{ChaCha20, ChaCha20Portable};

/// The keystream generators a payload can be XORed with.
///
/// The numeric values are part of the C ABI (`gap_rust_cipher_s.h`) and of the wire protocol's
/// suite table, so they never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CipherId {
    /// ChaCha20 per RFC 8439: 32-byte key, 12-byte nonce, 32-bit block counter (64-byte blocks).
    ChaCha20 = 1,
    /// AES-128 in CTR mode per NIST SP 800-38A: 16-byte key, 16-byte initial counter block,
    /// incremented as one 128-bit big-endian integer (16-byte blocks).
    Aes128Ctr = 2,
}

impl CipherId {
    /// Key length in bytes.
    pub const fn key_len(self) -> usize {
        match self {
            CipherId::ChaCha20 => 32,
            CipherId::Aes128Ctr => 16,
        }
    }
    /// IV length in bytes (ChaCha20: the nonce; AES-CTR: the initial counter block).
    pub const fn iv_len(self) -> usize {
        match self {
            CipherId::ChaCha20 => 12,
            CipherId::Aes128Ctr => 16,
        }
    }
    /// Keystream block length in bytes.
    pub const fn block_len(self) -> usize {
        match self {
            CipherId::ChaCha20 => 64,
            CipherId::Aes128Ctr => 16,
        }
    }
    /// From the C ABI / wire value.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(CipherId::ChaCha20),
            2 => Some(CipherId::Aes128Ctr),
            _ => None,
        }
    }
}

/// Why a keystream could not be applied. Nothing was written when this is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeystreamError {
    /// The key is not [`CipherId::key_len`] bytes long.
    KeyLength,
    /// The IV is not [`CipherId::iv_len`] bytes long.
    IvLength,
    /// `offset + data.len()` runs past the end of the keystream (ChaCha20: 2^32 blocks of 64 bytes).
    /// The counter never wraps silently.
    CounterOverflow,
    /// The parallel engine could not run (for example L1 allocation failed).
    Engine,
}

impl core::fmt::Display for KeystreamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            KeystreamError::KeyLength => "wrong key length for the cipher",
            KeystreamError::IvLength => "wrong IV/nonce length for the cipher",
            KeystreamError::CounterOverflow => {
                "keystream position past the end of the counter range"
            }
            KeystreamError::Engine => "cluster engine failed",
        })
    }
}

/// XORs the keystream of a cipher into a buffer, in place.
///
/// `offset` is the byte position in the keystream where `data[0]` starts (any value, not only
/// block-aligned). For ChaCha20 the keystream starts at block counter 0, so RFC 8439's AEAD encrypts
/// its payload at `offset = 64`; for AES-CTR `iv` is the initial counter block, so GCM encrypts its
/// payload at `offset = 16` from `J0`.
///
/// Implemented by the single-core kernels of this crate ([`Sequential`]) and by the cluster engine
/// of `gap_rust_wrapper`, so the frame code of `gapstream_protocol` runs unchanged on one core, on the
/// 8-core cluster and on the host backend.
pub trait KeystreamApplier {
    fn apply_keystream(
        &mut self,
        id: CipherId,
        key: &[u8],
        iv: &[u8],
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), KeystreamError>;
}

/// Runs the kernels of this crate on the calling core, one after the other.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sequential;

impl KeystreamApplier for Sequential {
    fn apply_keystream(
        &mut self,
        id: CipherId,
        key: &[u8],
        iv: &[u8],
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), KeystreamError> {
        use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
        fn run<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
            key: &[u8],
            iv: &[u8],
            offset: u64,
            data: &mut [u8],
        ) -> Result<(), KeystreamError> {
            let mut c = C::new_from_slices(key, iv).map_err(|_| KeystreamError::KeyLength)?;
            c.try_seek(offset)
                .map_err(|_| KeystreamError::CounterOverflow)?;
            c.try_apply_keystream(data)
                .map_err(|_| KeystreamError::CounterOverflow)
        }
        if key.len() != id.key_len() {
            return Err(KeystreamError::KeyLength);
        }
        if iv.len() != id.iv_len() {
            return Err(KeystreamError::IvLength);
        }
        match id {
            CipherId::ChaCha20 => run::<chacha::ChaCha20>(key, iv, offset, data),
            CipherId::Aes128Ctr => run::<aes::Aes128Ctr>(key, iv, offset, data),
        }
    }
}
