//! ChaCha20 (RFC 8439: 256-bit key, 96-bit nonce, 32-bit block counter) with three backends.
//!
//! | type | backend | where it runs |
//! |---|---|---|
//! | [`ChaCha20Portable`] | RustCrypto `chacha20` (its `ChaChaCore`) | everywhere |
//! | `ChaCha20Rv32` | hand-written RV32IMC assembly (`chacha/rv32.rs`), no PULP instructions | `target_arch = "riscv32"` |
//! | `ChaCha20Pulp` | RI5CY assembly (`chacha/pulp.rs`): `p.ror`, hardware loops, post-increment loads/stores | `riscv32` + feature `pulp` (GAP8 / GVSOC, not QEMU) |
//! | [`ChaCha20`] | the compile-time choice: PULP if `pulp`, else RV32 asm on riscv32, else portable | |
//!
//! All are `StreamCipherCoreWrapper<ChaCha20Core<B>>`, so they implement
//! `KeyIvInit + StreamCipher + StreamCipherSeek` and seek exactly to the byte. They share one core
//! ([`ChaCha20Core`]) that owns the block position; a backend only turns "blocks `n..n+k` of this
//! key/nonce" into keystream XORed over the data.
//!
//! ## End of the keystream
//!
//! The block counter is 32 bits, so a (key, nonce) has 2^32 blocks = 2^38 bytes of keystream
//! (counters 0 ..= 0xFFFF_FFFF). Running past it is an error, never a wrap: `try_apply_keystream`
//! and `try_seek` return `Err` (the panicking `apply_keystream` / `seek` panic). The position
//! after the last byte, 2^38, can be sought to; nothing can be read there. The core keeps its
//! position as a [`BlockPos`] in `0..=2^32`, so even the last block (counter 0xFFFF_FFFF) is
//! usable. RustCrypto `chacha20` 0.10 stops one block earlier: its `remaining_blocks` is
//! `u32::MAX - pos` and its `try_seek` refuses any byte of block 0xFFFF_FFFF (its `u32` position
//! cannot say "after the last block"); the tests pin both behaviours.
//!
//! ## The assembly kernels
//!
//! Per (key, nonce) a context (`chacha/ctx.rs`) holds the input state and the first-round column
//! quarter-rounds of columns 1-3, which do not depend on the counter (3 of 80 quarter-rounds saved
//! per block). A kernel call processes `n` whole 64-byte blocks with input and output words
//! loaded/stored with `lw`/`sw`: both pointers must be 4-byte aligned, so unaligned buffers go
//! through a 256-byte aligned bounce buffer (never a cast of `&[u8]` to `&[u32]`).
//!
//! * RV32IMC: 20 instructions per quarter-round (rotate = `slli`/`srli`/`or`), a 9-iteration loop
//!   over double rounds, ≈ 1658 instructions per block (≈ 25.9 / byte).
//! * PULP: 12 instructions per quarter-round with `p.ror`, the 9 double rounds in hardware loop 0,
//!   the blocks in hardware loop 1, post-increment `p.lw`/`p.sw` for data; 1021 instructions per
//!   block (15.95 / byte) scheduled so that no load result is used by the next instruction (RI5CY
//!   load-use stall), no branches. The hot loop is 256 words (1 KiB) of code.
use cipher::consts::{U1, U12, U32, U64};
use cipher::inout::InOutBuf;
use cipher::{
    BlockSizeUser, IvSizeUser, KeyIvInit, KeySizeUser, ParBlocksSizeUser, StreamCipherBackend,
    StreamCipherClosure, StreamCipherCore, StreamCipherCoreWrapper, StreamCipherCounter,
    StreamCipherError, StreamCipherSeekCore,
};

#[cfg(any(target_arch = "riscv32", test))]
mod ctx;
mod portable;
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
mod pulp;
#[cfg(target_arch = "riscv32")]
mod rv32;
#[cfg(test)]
mod tests;

pub use portable::Portable;
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub use pulp::PulpAsm;
#[cfg(target_arch = "riscv32")]
pub use rv32::Rv32Asm;

/// Number of blocks in one (key, nonce) keystream: the 32-bit counter's range.
pub const BLOCKS: u64 = 1 << 32;
/// Keystream bytes of one (key, nonce): 2^38.
pub const KEYSTREAM_BYTES: u64 = BLOCKS * 64;

/// A 64-byte ChaCha20 block.
pub type ChaChaBlock = cipher::array::Array<u8, U64>;

mod sealed {
    pub trait Sealed {}
}

/// A way to compute ChaCha20 keystream blocks for one (key, nonce). Sealed: the backends are
/// [`Portable`], `Rv32Asm` and `PulpAsm`. `Clone`, so that the cluster engine can build a core once
/// per message and give every cluster core a copy (`gap_rust_wrapper::Blocks`).
pub trait Backend: sealed::Sealed + Sized + Clone {
    /// Set up for one key and nonce (the per-message work, e.g. the precomputed column round).
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self;
    /// XORs the keystream of blocks `counter, counter + 1, …` into `blocks` (in place or in to
    /// out). The core guarantees `counter + blocks.len() <= 2^32` and `blocks.len() >= 1`.
    fn apply_blocks(&mut self, counter: u32, blocks: InOutBuf<'_, '_, ChaChaBlock>);
}

/// No key material: a core over it knows only its block position. The cluster engine checks a
/// call's keystream range on one before every core builds its own keyed core
/// (`crate::engine::ChaCha20Blocks`); its keystream is zeros and is never used as keystream.
#[derive(Clone)]
pub struct Unkeyed;

impl sealed::Sealed for Unkeyed {}

impl Backend for Unkeyed {
    fn new(_: &[u8; 32], _: &[u8; 12]) -> Self {
        Unkeyed
    }

    fn apply_blocks(&mut self, _: u32, _: InOutBuf<'_, '_, ChaChaBlock>) {}
}

/// The ChaCha20 stream-cipher core over backend `B`; wrap it in `StreamCipherCoreWrapper` (the
/// aliases below do) for `StreamCipher + StreamCipherSeek`. The cluster engine uses the core
/// itself (block-level fast path, `gap_rust_wrapper::Blocks`).
#[derive(Clone)]
pub struct ChaCha20Core<B: Backend> {
    backend: B,
    /// Next block to produce, `0..=2^32` (2^32: keystream used up).
    pos: u64,
}

/// ChaCha20 on the portable backend (RustCrypto `chacha20`).
pub type ChaCha20Portable = StreamCipherCoreWrapper<ChaCha20Core<Portable>>;
/// ChaCha20 on the RV32IMC assembly kernel.
#[cfg(target_arch = "riscv32")]
pub type ChaCha20Rv32 = StreamCipherCoreWrapper<ChaCha20Core<Rv32Asm>>;
/// ChaCha20 on the PULP (RI5CY) assembly kernel.
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub type ChaCha20Pulp = StreamCipherCoreWrapper<ChaCha20Core<PulpAsm>>;

/// ChaCha20 on the backend chosen at compile time for this target.
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub type ChaCha20 = ChaCha20Pulp;
/// ChaCha20 on the backend chosen at compile time for this target.
#[cfg(all(target_arch = "riscv32", not(feature = "pulp")))]
pub type ChaCha20 = ChaCha20Rv32;
/// ChaCha20 on the backend chosen at compile time for this target.
#[cfg(not(target_arch = "riscv32"))]
pub type ChaCha20 = ChaCha20Portable;

/// Name of the backend behind [`ChaCha20`] ("pulp", "rv32-asm" or "portable").
pub const SELECTED_BACKEND: &str = if cfg!(all(target_arch = "riscv32", feature = "pulp")) {
    "pulp"
} else if cfg!(target_arch = "riscv32") {
    "rv32-asm"
} else {
    "portable"
};

impl<B: Backend> ChaCha20Core<B> {
    /// Applies keystream to whole blocks at the current position and advances it.
    ///
    /// # Panics
    /// If the blocks run past the end of the keystream. `StreamCipherCoreWrapper` checks
    /// [`StreamCipherCore::remaining_blocks`] first (its `try_*` methods return `Err` instead), so
    /// only direct core-level use past the end gets here: a panic, never a counter wrap.
    fn bulk(&mut self, blocks: InOutBuf<'_, '_, ChaChaBlock>) {
        let n = blocks.len() as u64;
        if n == 0 {
            return;
        }
        assert!(
            self.pos + n <= BLOCKS,
            "ChaCha20: keystream exhausted (32-bit block counter)"
        );
        self.backend.apply_blocks(self.pos as u32, blocks);
        self.pos += n;
    }
}

impl<B: Backend> ChaCha20Core<B> {
    /// XORs the keystream of blocks `block, block + 1, …` into `data` if `data` is whole blocks
    /// (at least one) and they exist; returns `false`, touching nothing, otherwise. The cluster
    /// engine's per-piece fast path (its pieces are cut on block boundaries); leaves the core's
    /// position after the last block, like the block-level API.
    #[inline(always)]
    pub fn xor_blocks_at(&mut self, block: u64, data: &mut [u8]) -> bool {
        let (blocks, tail) = cipher::array::Array::slice_as_chunks_mut(data);
        let n = blocks.len() as u64;
        if !tail.is_empty() || n == 0 || block > BLOCKS - n {
            return false;
        }
        self.pos = block;
        self.bulk(blocks.into());
        true
    }
}

impl<B: Backend> KeySizeUser for ChaCha20Core<B> {
    type KeySize = U32;
}
impl<B: Backend> IvSizeUser for ChaCha20Core<B> {
    type IvSize = U12;
}
impl<B: Backend> BlockSizeUser for ChaCha20Core<B> {
    type BlockSize = U64;
}

impl<B: Backend> KeyIvInit for ChaCha20Core<B> {
    #[inline(always)]
    fn new(key: &cipher::Key<Self>, iv: &cipher::Iv<Self>) -> Self {
        ChaCha20Core {
            backend: B::new(&key.0, &iv.0),
            pos: 0,
        }
    }
}

impl<B: Backend> StreamCipherCore for ChaCha20Core<B> {
    fn remaining_blocks(&self) -> Option<usize> {
        Some(usize::try_from(BLOCKS - self.pos).unwrap_or(usize::MAX))
    }

    fn process_with_backend(&mut self, f: impl StreamCipherClosure<BlockSize = Self::BlockSize>) {
        f.call(&mut OneBlock(self));
    }

    fn write_keystream_block(&mut self, block: &mut ChaChaBlock) {
        *block = Default::default();
        self.bulk(InOutBuf::from(core::slice::from_mut(block)));
    }

    fn write_keystream_blocks(&mut self, blocks: &mut [ChaChaBlock]) {
        blocks.fill(Default::default());
        self.bulk(blocks.into());
    }

    fn apply_keystream_blocks(&mut self, blocks: &mut [ChaChaBlock]) {
        self.bulk(blocks.into());
    }

    fn apply_keystream_blocks_inout(&mut self, blocks: InOutBuf<'_, '_, ChaChaBlock>) {
        self.bulk(blocks);
    }

    /// Like the provided method, but with an exact count: `remaining_blocks` here is the true
    /// number of blocks left (the provided method assumes one block fewer).
    fn try_apply_keystream_partial(
        mut self,
        buf: InOutBuf<'_, '_, u8>,
    ) -> Result<(), StreamCipherError> {
        let need = buf.len().div_ceil(64) as u64;
        if need > BLOCKS - self.pos {
            return Err(StreamCipherError);
        }
        let (blocks, mut tail) = buf.into_chunks::<U64>();
        self.bulk(blocks);
        let n = tail.len();
        if n != 0 {
            let mut block = ChaChaBlock::default();
            block[..n].copy_from_slice(tail.get_in());
            self.bulk(InOutBuf::from(core::slice::from_mut(&mut block)));
            tail.get_out().copy_from_slice(&block[..n]);
        }
        Ok(())
    }
}

/// One block at a time, for the generic `process_with_backend` path (the wrapper's bulk path
/// calls the overridden `apply_keystream_blocks_inout` instead).
struct OneBlock<'a, B: Backend>(&'a mut ChaCha20Core<B>);

impl<B: Backend> BlockSizeUser for OneBlock<'_, B> {
    type BlockSize = U64;
}
impl<B: Backend> ParBlocksSizeUser for OneBlock<'_, B> {
    type ParBlocksSize = U1;
}
impl<B: Backend> StreamCipherBackend for OneBlock<'_, B> {
    fn gen_ks_block(&mut self, block: &mut ChaChaBlock) {
        self.0.write_keystream_block(block);
    }
}

impl<B: Backend> StreamCipherSeekCore for ChaCha20Core<B> {
    type Counter = BlockPos;

    fn get_block_pos(&self) -> BlockPos {
        BlockPos(self.pos)
    }

    fn set_block_pos(&mut self, pos: BlockPos) {
        self.pos = pos.0;
    }
}

impl<B: Backend> core::fmt::Debug for ChaCha20Core<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChaCha20Core")
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

/// A block position `0..=2^32`: the 32-bit block counter plus "after the last block".
///
/// The `TryFrom` conversions fail outside that range, so `StreamCipherSeek::try_seek` beyond the
/// end of the keystream returns `Err` instead of wrapping the counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockPos(u64);

impl BlockPos {
    /// The position, `0..=2^32`.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// A value outside `0..=2^32` for a [`BlockPos`], or a position that does not fit the target type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPosRange;

macro_rules! block_pos_from {
    ($($t:ty),*) => {$(
        impl TryFrom<$t> for BlockPos {
            type Error = BlockPosRange;
            fn try_from(v: $t) -> Result<Self, BlockPosRange> {
                match u64::try_from(v) {
                    Ok(v) if v <= BLOCKS => Ok(BlockPos(v)),
                    _ => Err(BlockPosRange),
                }
            }
        }
        impl TryFrom<BlockPos> for $t {
            type Error = BlockPosRange;
            fn try_from(p: BlockPos) -> Result<$t, BlockPosRange> {
                <$t>::try_from(p.0).map_err(|_| BlockPosRange)
            }
        }
    )*};
}
block_pos_from!(i32, u32, u64, u128, usize);

impl StreamCipherCounter for BlockPos {
    /// "Max" is the end position 2^32: seeking into it with a non-zero byte offset is refused.
    fn is_max(&self) -> bool {
        self.0 == BLOCKS
    }
}
