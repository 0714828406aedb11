//! A seekable stream cipher spread over the cores of the GAP8 cluster.
//!
//! Three L1 buffers rotate through the roles *work* (a core XORs the keystream into it),
//! *prefetch* (the DMA loads the next chunk into it) and *commit* (the DMA writes the previous
//! chunk back), as in §3.2 of the paper (F. Barchi et al., "RUST-Encoded Stream Ciphers on a
//! RISC-V Parallel Ultra-Low-Power Processor", PARMA-DITAM 2023). One fork covers the whole call. By default
//! ([`Rounds::Auto`], for [`Engine::apply`] / [`Engine::apply_b2b`]) every core runs its own such
//! pipeline: it takes one contiguous part of the payload, its own slice of each buffer and its own
//! DMA commands, and no core waits for another until the fork ends. With the other round policies
//! (and for any other [`Source`]) the cores share team rounds: inside a round every core takes one
//! piece of the work buffer, cluster core 0 drives the DMA, and the team barrier ends each round.
//!
//! ```text
//! lane i, chunk k:  work = its slice of B[k%3]   prefetch = its slice of B[(k+1)%3] <- part_i[k+1]   commit = its slice of B[(k+2)%3] -> part_i[k-1]
//! round r:          work = B[r%3] (all cores)     prefetch = B[(r+1)%3] <- payload[r+1]            commit = B[(r-1)%3] -> payload[r-1]
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`Engine`] | owns the three L1 buffers; [`Engine::apply`] (in place), [`Engine::apply_b2b`] (separate output), [`Engine::apply_direct`] (no DMA: payload already in L1, or cores read L2 directly), [`Engine::apply_source`] (any [`Source`]) |
//! | [`Config`], [`Rounds`] | cores (1..=8, changeable per call), buffer size, round sizes (fixed, chosen from the payload, or given), piece alignment, DMA timing |
//! | [`cipher`] | [`CipherFactory`] and [`Keystream`]: each core's cipher for a call — the generic `StreamCipher + StreamCipherSeek` path ([`KeyIv`], [`Cloned`]) and the block-level fast path ([`Blocks`]) |
//! | [`source`] | [`Source`]: where the payload lives and how rounds reach L1 — [`InPlace`], [`Separate`] (L2 through the cluster DMA); external RAM drivers implement it too; [`Split`]: payloads cut into per-core parts (per-core pipelines) |
//! | [`split`] | how a round is cut into per-core pieces aligned to keystream blocks |
//!
//! Generic over the backend ([`gap_rust_sdk::Cluster`]: pmsis, bare, host) and the cipher: any
//! `C: KeyIvInit + StreamCipher + StreamCipherSeek` (e.g. `chacha20::ChaCha20`,
//! `ctr::Ctr128BE<aes::Aes128>`), which every core builds for itself from the key and IV
//! ([`KeyIv`], [`Engine::apply_keyiv`]) once per call and seeks per round; or a `Clone` cipher
//! template ([`Cloned`]). Ciphers whose block-level core (`StreamCipherCore +
//! StreamCipherSeekCore`) is `Clone` take the fast path ([`Blocks`]): the core is built once per
//! call, cloned by every core, and each piece (cut on block boundaries) is one "apply these whole
//! blocks at this counter" call, without the byte-level wrapper. See [`CipherFactory`].
//!
//! The round loop is not generic over the cipher (each core's [`Keystream`] worker is resolved to a
//! function pointer once per call), so one copy
//! of it serves every cipher; on riscv32 it and the fast path's per-piece code are placed in
//! `.text.hot`, which the bare-metal link script puts at the start of `.text`: on GAP8 the code of
//! a round must stay in the cluster's shared 4 KiB instruction cache.
//!
//! Guarantees: any core count 1..=8 and buffer size ≥ 1, any length including 0 (which touches
//! nothing and issues no DMA), lengths not multiple of the core count, the block size or 4; no DMA
//! command is waited on unless it was started (the DMA scopes of `gap_rust_sdk` make that
//! structural); the L1 buffers are freed with exactly the layout they were allocated with.
//!
//! `unsafe` (the crate denies it elsewhere) is in three modules, each with the access rule it
//! relies on spelled out there: `rotation.rs` (the three buffers shared by the cores of the round
//! fork, whose roles rotate at each team barrier), `source.rs` (`RawShares` and `Split::take`:
//! the payload handed to the fork as one raw pointer, from which each core takes its own disjoint
//! part, so that cutting the payload needs no serial work before the fork) and `erase.rs` (a worker
//! borrowed as a data pointer plus its own method's address, so that the round loop does not read
//! a vtable from L2 while the DMA occupies it). `engine.rs` calls those modules' `unsafe`
//! accessors, each call with its `SAFETY:` reason, and places its round code with `link_section`.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cipher;
mod engine;
mod erase;
mod rotation;
pub mod source;
pub mod split;

pub use cipher::{Blocks, CipherFactory, Cloned, KeyIv, Keystream};
pub use engine::Engine;
pub use source::{InPlace, Separate, Source, Split};

use gap_rust_sdk::{AllocError, ClusterError, DmaError, ForkError};

/// What an [`Engine`] is configured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Cores per round, 1..=8 (1..=the cluster's core count).
    pub cores: usize,
    /// Bytes of each of the three L1 buffers (the largest round).
    pub buffer: usize,
    /// How long the rounds are (see [`Rounds`]).
    pub rounds: Rounds,
    /// Pieces start at keystream positions that are multiples of this (a multiple of every
    /// cipher's block size: 64 covers ChaCha20 and AES). Must be a power of two.
    pub split_align: usize,
    /// Bytes of its own piece core 0 processes in each round before it starts the round's DMA
    /// transfers (rounded to whole pieces of `split_align`; default 0). In the first round of a
    /// call every core first processes at least one `split_align` unit and the team meets at a
    /// barrier before the first transfer: on GAP8 an instruction-cache refill waits behind a
    /// running DMA transfer in L2, so the transfers start once the cores have run the round's
    /// code.
    pub dma_lead: usize,
    /// Largest DMA command in bytes; a round's transfers are split into commands of this size
    /// (raised if a round would need more than 8 per direction). On GAP8 a command holds L2 until
    /// it is done, so shorter ones let instruction-cache refills through sooner. 0: one command per
    /// transfer where the engine allows.
    pub dma_chunk: usize,
}

impl Config {
    /// `cores` cores, three L1 buffers of `buffer` bytes, round sizes chosen from the payload
    /// ([`Rounds::Auto`]), pieces aligned to 64-byte keystream blocks.
    pub const fn new(cores: usize, buffer: usize) -> Config {
        Config {
            cores,
            buffer,
            rounds: Rounds::Auto,
            split_align: 64,
            dma_lead: 0,
            dma_chunk: 0,
        }
    }

    /// Same, with another DMA lead (see [`Config::dma_lead`]).
    pub const fn with_dma_lead(mut self, bytes: usize) -> Config {
        self.dma_lead = bytes;
        self
    }

    /// Same, with another DMA command size (see [`Config::dma_chunk`]).
    pub const fn with_dma_chunk(mut self, bytes: usize) -> Config {
        self.dma_chunk = bytes;
        self
    }

    /// Same, with another round policy (see [`Rounds`]).
    pub const fn with_rounds(mut self, rounds: Rounds) -> Config {
        self.rounds = rounds;
        self
    }

    /// `(first, round)`: the byte sizes of round 0 and of a full round for a payload of `len`
    /// bytes (each at most [`Config::buffer`]; with [`Rounds::Auto`] the rounds in between
    /// double from `first` up to `round`).
    pub fn round_sizes(&self, len: usize) -> (usize, usize) {
        let z = engine::round_sizes(self, len);
        (z.first, z.round)
    }

    /// Rounds a call over `len` bytes makes (0 for an empty payload).
    pub fn round_count(&self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        engine::Plan::new(self, len, 0).count()
    }

    /// Same, with another piece alignment (a power of two).
    pub const fn with_split_align(mut self, align: usize) -> Config {
        self.split_align = align;
        self
    }
}

/// How a call cuts its payload into rounds. Every round is at most [`Config::buffer`] bytes.
///
/// The first round's fetch and the last round's write-back cannot overlap with work, and every
/// round ends with a team barrier and starts two DMA transfers; small payloads therefore want
/// small rounds, large ones large rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounds {
    /// Every round is one whole buffer (the paper's scheme).
    Fixed,
    /// Chosen by the engine (default). For the payloads of [`Engine::apply`] and
    /// [`Engine::apply_b2b`] (which can be cut into per-core parts, [`Split`]): per-core
    /// pipelines. Each core takes one contiguous part of the payload (cut on keystream blocks)
    /// and moves it through its own slice of the three L1 buffers with its own DMA commands, in
    /// chunks of one block doubling up to its slice and halving again towards the end of its part
    /// (short transfers where nothing overlaps them); there is no team barrier between chunks, so
    /// no core waits for another until the end of the call. Used when every core's slice of a
    /// buffer holds at least one piece alignment unit; otherwise, and for other sources, as
    /// [`Rounds::Ramp`].
    Auto,
    /// Team rounds chosen from the payload length and the core count: a first round of 1 KiB or
    /// two 64-byte blocks per core if that is more (its fetch is the one transfer nothing
    /// overlaps), then rounds that double up to about `sqrt(512 * len)` bytes (a power of two
    /// within a factor of sqrt(2), rounded up to whole blocks per core), at most the buffer. For 8
    /// cores the full round is 4 KiB at 16 KiB and 8 KiB from 128 KiB on. With several cores
    /// every round is one 64-byte block short of that: the missing block is core 0's, which also
    /// drives the DMA.
    Ramp,
    /// Round 0 is `first` bytes, every later round `round` bytes (both clamped to `1..=buffer`,
    /// `first <= round`).
    Sized {
        /// Bytes of round 0.
        first: usize,
        /// Bytes of every later round.
        round: usize,
    },
}

/// Why the engine did not (fully) run. On an error before the first round nothing was written;
/// later errors (DMA or fork failures) can leave the payload partly processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Bad configuration: cores out of range, zero buffer, alignment not a power of two.
    Config,
    /// The L1 buffers could not be allocated.
    Alloc(AllocError),
    /// `offset + len` runs past the end of the cipher's keystream.
    CounterOverflow,
    /// The key or IV has the wrong length for the cipher.
    KeyIv,
    /// Input and output lengths differ.
    Length,
    /// The cluster refused the offload.
    Cluster(ClusterError),
    /// A fork failed.
    Fork(ForkError),
    /// A DMA transfer could not be started (e.g. buffer longer than one DMA command).
    Dma(DmaError),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Config => f.write_str("invalid engine configuration"),
            Error::Alloc(e) => write!(f, "L1 allocation failed: {e}"),
            Error::CounterOverflow => {
                f.write_str("keystream position past the end of the counter range")
            }
            Error::KeyIv => f.write_str("wrong key or IV length for the cipher"),
            Error::Length => f.write_str("input and output lengths differ"),
            Error::Cluster(e) => write!(f, "cluster: {e}"),
            Error::Fork(e) => write!(f, "fork: {e}"),
            Error::Dma(e) => write!(f, "DMA: {e}"),
        }
    }
}

impl From<DmaError> for Error {
    fn from(e: DmaError) -> Self {
        Error::Dma(e)
    }
}
