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
//! | `slice` | bitsliced state (2 blocks in 8 words), Boyar–Peralta S-box, fixsliced MixColumns, ShiftRows on planes |
//! | `key` | key schedule (once per key) into the round-key representation of a [`Schedule`] |
//! | `ctr` | counter-mode caching of rounds 1 and 2 (per 256-block run, per 8-block group), the portable pair kernel |
//! | `asm` | the generated rv32imc and PULP pair kernels (`asm/gen.py`) |
//! | `stream` | the `cipher` core traits, the [`Backend`] choice, unaligned and partial-pair handling, the run context and half-pair kept between calls |
//!
//! # Variants
//!
//! | type | backend | where |
//! |---|---|---|
//! | [`Aes128Ctr`] | the best one compiled in ([`Best`]) | everywhere |
//! | [`Aes128CtrWith<Portable>`](Aes128CtrWith) | [`Portable`]: plain Rust | everywhere |
//! | `Aes128CtrWith<Rv32>` | `Rv32`: rv32imc assembly | riscv32 |
//! | `Aes128CtrWith<Pulp>` | `Pulp`: assembly with `p.ror`, `pv.srl.b`, `pv.sll.b`, `p.lw`, a hardware loop | riscv32 with feature `pulp` (or `aes-pulp-kernel`); GAP8 / GVSOC |
//! | [`Aes128CtrWith<PortableShiftRows>`](Aes128CtrWith) | [`PortableShiftRows`]: the PULP kernel's schedule in plain Rust | everywhere (tests) |
//! | [`Reference`] | RustCrypto `aes` (fixsliced) + `ctr` | everywhere (tests and benchmarks) |
//!
//! # Design
//!
//! * **Bitsliced, two blocks per state.** Eight 32-bit words hold bit `i` of all 32 bytes of two
//!   blocks. SubBytes is the 113-gate Boyar–Peralta circuit (32 AND, 81 XOR) on the eight words;
//!   its four NOTs are folded into the round keys.
//! * **Fixsliced** (portable, rv32): ShiftRows is never executed; each round uses the MixColumns
//!   variant for its drift (one of four; rotations by 8 and 16 for drift 0, a column rotation
//!   inside each byte plus a rotation otherwise) and round keys pre-permuted to match. Starting
//!   at drift 2 makes the ten skipped ShiftRows cancel, so the output needs no final permutation.
//! * **ShiftRows executed** (PULP, [`Schedule::ShiftRows`]): rounds 3..=10 run ShiftRows as two
//!   packed-SIMD byte shifts and an OR per plane (24 instructions a round, against 34 on average
//!   for the fixsliced MixColumns variants) and MixColumns for drift 0 only, so every round is
//!   the same code: one hardware-loop body of 196 instructions.
//! * **Counter-mode caching.** Two blocks of a pair differ only in the counter's low byte. Round 1
//!   and the parts of round 2 that do not depend on that byte are computed once per 256-block
//!   run; the round-2 S-boxes of the varying bytes of 8 blocks take two bitsliced S-boxes per
//!   group, in a lane layout that gives each pair its bits with one rotation (see `ctr`). Rounds
//!   1 and 2 of 8 blocks cost 2 S-boxes instead of 16.
//! * **One key schedule per key**, 11 × 8 words.
//! * **Compact hot path.** No tables. The PULP kernel is 2,520 bytes (round loop, pair and group
//!   code, one S-box subroutine for the group): it fits the GAP8 cluster's 4 KiB instruction
//!   cache, where RustCrypto's AES (about 12 KB) does not.
//! * **State kept between calls.** The cipher keeps the last run context (with its group cache)
//!   and, when a call ends inside a pair, that pair's unused block of keystream, so a message
//!   applied in pieces (the cluster engine's chunks) does not rebuild either.
//!
//! # Constant-time argument
//!
//! Secret data are the key, the round keys, every intermediate state and the keystream. The
//! counter, the length, the position and the alignment of the buffer are public.
//!
//! 1. *No secret-dependent memory index.* There is no S-box table or T-table: SubBytes is a
//!    Boolean circuit of AND and XOR on whole words, MixColumns, AddRoundKey, packing and
//!    unpacking are XOR, AND, OR, shifts and rotates by constants. The only memory indexed at
//!    run time is the round-key array (by round number), the run and group caches (by the
//!    counter) and the data buffers (by position): all public.
//! 2. *No secret-dependent branch.* Loops run over rounds, pairs and groups; the branches choose
//!    between aligned and unaligned buffers, partial first or last pairs and a new run or group,
//!    all functions of the counter, the length and the address. The key schedule's only branch is
//!    on the word index (`i % 4 == 0`); `rcon` is updated with a mask, not a branch.
//! 3. *Constant-time instructions.* The kernels use only `xor`, `and`, `or`, shifts and rotates
//!    by constants (`p.ror` by a constant register, `pv.srl.b`/`pv.sll.b` by constant per-byte
//!    amounts), loads and stores at public addresses (`p.lw` post-increments a public pointer),
//!    and a hardware loop with a constant count;
//!    none of them has a data-dependent latency on RI5CY (which has no data cache) or on
//!    common hosts. No multiply or divide touches secret data.
//! 4. *Caching stays constant time.* The run and group caches and the kept half pair are
//!    functions of the key and the public counter and are looked up by the public counter;
//!    building them runs the same circuit every time. They are zeroised on drop.
//!
//! The key schedule and round keys are zeroised on drop (`zeroize`).
//!
//! # Performance
//!
//! `cargo xtask bench-qemu aes` (QEMU, `minstret`) at 32 KiB: PULP 56.87, rv32 73.56, portable
//! 80.85 instructions/byte, RustCrypto 100.32. On the GAP8 GVSOC model through the cluster
//! engine, 128 KiB in L2: PULP 59.20 cycles/byte on one core (DMA rounds), 7.97 on eight (no
//! DMA, the engine's choice for AES on several cores); RustCrypto 238.6 and 32.6. Details,
//! code sizes and limits: `docs/aes.md`.
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
pub use key::{RoundKeys, Schedule};
pub use stream::{Aes128CtrCore, Backend, Portable, PortableShiftRows};

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
