//! AES-128-CTR (NIST SP 800-38A, 128-bit big-endian counter) for RI5CY, constant time, sized for
//! the GAP8 cluster's 4 KiB instruction cache.
//!
//! [`Aes128Ctr`] is `KeyIvInit + StreamCipher + StreamCipherSeek` through the `cipher` 0.5 core
//! traits ([`Aes128CtrCore`] wrapped in `StreamCipherCoreWrapper`), with exactly the semantics of
//! `ctr::Ctr128BE<aes::Aes128>` ([`Reference`]): 16-byte key, 16-byte initial counter block
//! incremented as one 128-bit big-endian integer (wrapping mod 2^128), byte-exact seeking.
//!
//! | module | what |
//! |---|---|
//! | `slice` | bitsliced state (2 blocks in 8 words), Boyar–Peralta S-box, fixsliced MixColumns |
//! | `key` | key schedule (once per key) into the fixsliced round-key representation |
//! | `ctr` | counter-mode caching of round 1 (per 256-block run and per 32-block batch), the portable pair kernel |
//! | `stream` | the `cipher` core traits, the [`Backend`] choice, unaligned and partial-pair handling |
//!
//! # Variants
//!
//! | type | backend | where |
//! |---|---|---|
//! | [`Aes128Ctr`] | the best one compiled in ([`Best`]) | everywhere |
//! | [`Aes128CtrWith<Portable>`](Aes128CtrWith) | [`Portable`]: plain Rust | everywhere |
//! | [`Reference`] | RustCrypto `aes` (fixsliced) + `ctr` | everywhere (tests and benchmarks) |
//!
//! # Design
//!
//! * **Bitsliced, two blocks per state.** Eight 32-bit words hold bit `i` of all 32 bytes of two
//!   blocks. SubBytes is the 113-gate Boyar–Peralta circuit (32 AND, 81 XOR) on the eight words;
//!   its four NOTs are folded into the round keys.
//! * **Fixsliced.** ShiftRows is never executed; each round uses the MixColumns variant for its
//!   drift (one of four; rotations by 8 and 16 for drift 0, two rotations and a mask merge per
//!   "row step" otherwise) and round keys pre-permuted to match. Starting at drift 2 makes the
//!   ten skipped ShiftRows cancel, so the output needs no final permutation.
//! * **Counter-mode caching.** Two blocks of a pair differ only in the counter's low byte; round 1
//!   of a pair is rebuilt from a per-run constant and two words per pair computed for 32 blocks
//!   at once (see `ctr`), which removes about an eighth of the work.
//! * **One key schedule per key**, 11 × 8 words.
//! * **Compact hot path.** One S-box body and four MixColumns bodies in a round loop; no tables.
//!
//! # Constant-time argument
//!
//! Secret data are the key, the round keys, every intermediate state and the keystream. The
//! counter, the length, the position and the alignment of the buffer are public.
//!
//! 1. *No secret-dependent memory index.* There is no S-box table or T-table: SubBytes is a
//!    Boolean circuit of AND and XOR on whole words, MixColumns, AddRoundKey, packing and
//!    unpacking are XOR, AND, OR, shifts and rotates by constants. The only memory indexed at
//!    run time is the round-key array (by round number), the per-batch cache (by the counter's
//!    low byte) and the data buffers (by position): all public.
//! 2. *No secret-dependent branch.* Loops run over rounds, pairs and batches; the branches choose
//!    between aligned and unaligned buffers, partial first or last pairs and a new run or batch,
//!    all functions of the counter, the length and the address. The key schedule's only branch is
//!    on the word index (`i % 4 == 0`); `rcon` is updated with a mask, not a branch.
//! 3. *Constant-time instructions.* The kernels use only `xor`, `and`, `or`, shifts and rotates
//!    by immediates (or `p.ror` by a constant register), loads and stores at public addresses;
//!    none of them has a data-dependent latency on RI5CY (which has no data cache) or on
//!    common hosts. No multiply or divide touches secret data.
//! 4. *Caching stays constant time.* The round-1 cache is a function of the key and the public
//!    counter and is looked up by the public counter; building it runs the same circuit on every
//!    call.
//!
//! The key schedule and round keys are zeroised on drop (`zeroize`).
//!
//! # Performance
//!
//! Measured with `cargo xtask bench-qemu aes` (instructions per byte under QEMU, `minstret`);
//! see `docs/aes.md` for the figures and the hot-path code sizes.
mod asm;
mod ctr;
mod key;
mod slice;
mod stream;
#[cfg(test)]
mod tests;

#[cfg(all(
    target_arch = "riscv32",
    any(feature = "pulp", feature = "aes-pulp-kernel")
))]
pub use asm::Pulp;
#[cfg(target_arch = "riscv32")]
pub use asm::Rv32;
pub use ctr::PairJob;
pub use key::RoundKeys;
pub use stream::{Aes128CtrCore, Backend, Portable};

/// AES-128-CTR with the best kernel compiled in.
pub type Aes128Ctr = cipher::StreamCipherCoreWrapper<Aes128CtrCore<Best>>;

/// AES-128-CTR with a chosen kernel, e.g. `Aes128CtrWith<Portable>`.
pub type Aes128CtrWith<B> = cipher::StreamCipherCoreWrapper<Aes128CtrCore<B>>;

/// The RustCrypto pair this module is checked against and compared with:
/// `ctr::Ctr128BE<aes::Aes128>`.
pub type Reference = ::ctr::Ctr128BE<::aes::Aes128>;

/// The backend [`Aes128Ctr`] uses on this target: [`Pulp`] on riscv32 with feature `pulp`, the
/// rv32imc assembly [`Rv32`] on other riscv32 builds, [`Portable`] elsewhere.
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub type Best = Pulp;
/// The backend [`Aes128Ctr`] uses on this target.
#[cfg(all(target_arch = "riscv32", not(feature = "pulp")))]
pub type Best = Rv32;
/// The backend [`Aes128Ctr`] uses on this target.
#[cfg(not(target_arch = "riscv32"))]
pub type Best = Portable;

/// Encrypts two blocks with AES-128 (the block function the CTR kernels are built on; no
/// counter caching). For known-answer tests and diagnostics.
pub fn encrypt_blocks(key: &[u8; 16], b0: &[u8; 16], b1: &[u8; 16]) -> ([u8; 16], [u8; 16]) {
    ctr::encrypt_pair(&RoundKeys::new(key), b0, b1)
}
