//! The RustCrypto `cipher` 0.5 core traits for AES-128-CTR, over a compile-time [`Backend`].
use super::ctr::{PairJob, RunCtx};
use super::key::{RoundKeys, Schedule};
use cipher::consts::{U1, U16};
use cipher::{
    AlgorithmName, Block, BlockSizeUser, IvSizeUser, KeyIvInit, KeySizeUser, ParBlocksSizeUser,
    StreamCipherBackend, StreamCipherClosure, StreamCipherCore, StreamCipherSeekCore,
    inout::InOutBuf,
};
use core::marker::PhantomData;

/// A compile-time choice of AES-128-CTR kernel (see the variant table in [`crate::aes`]).
pub trait Backend: Copy + Default + core::fmt::Debug + Send + Sync + 'static {
    /// Variant name used by benchmarks and logs.
    const NAME: &'static str;
    /// The drift of each round key the kernel expects.
    #[doc(hidden)]
    const SCHEDULE: Schedule = Schedule::Fixsliced;
    /// XORs the keystream of `job.w.len()` pairs of blocks into `data` (8 words per pair).
    #[doc(hidden)]
    fn xor_pairs(job: &mut PairJob<'_>, data: &mut [u32]);
}

/// AES-128-CTR block core: key schedule, initial counter block and block position.
///
/// Semantics are exactly those of `ctr::CtrCore<aes::Aes128, ctr::flavors::Ctr128BE>`: block `n`
/// of the keystream is `AES_K(IV + n mod 2^128)` with the 16-byte IV read as a big-endian
/// integer, the block position is a `u128`, and `remaining_blocks` is `u128::MAX - pos`.
pub struct Aes128CtrCore<B: Backend> {
    keys: RoundKeys,
    iv: u128,
    pos: u128,
    /// The run context of the last run a call used, kept for the next call (a caller that
    /// applies a message piece by piece, like the cluster engine's per-core chunks, would
    /// otherwise rebuild it for every piece: about 1,200 instructions).
    run: RunCache,
    _backend: PhantomData<B>,
}

/// A [`RunCtx`] and the run it belongs to, and the unused half of the last partial pair.
#[derive(Clone)]
pub(crate) struct RunCache {
    /// Counter block of the run with the low byte 0; meaningless while `valid` is false.
    base: u128,
    valid: bool,
    ctx: RunCtx,
    half: HalfPair,
}

/// The keystream of block `ctr` (odd), the second block of a pair whose first block ended the
/// previous call: a call that starts there (the next piece of the same message) takes it instead
/// of computing the pair again.
#[derive(Clone)]
struct HalfPair {
    ctr: u128,
    valid: bool,
    ks: [u32; 4],
}

impl Drop for HalfPair {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.ks);
    }
}

impl HalfPair {
    /// XORs the cached keystream into `data` (16 bytes) if it is block `ctr`'s.
    fn take(&self, ctr: u128, data: &mut [u8]) -> bool {
        if !self.valid || self.ctr != ctr {
            return false;
        }
        xor_keystream(&self.ks, data);
        true
    }
}

impl RunCache {
    pub(crate) fn new() -> Self {
        RunCache {
            base: 0,
            valid: false,
            ctx: RunCtx::empty(),
            half: HalfPair {
                ctr: 0,
                valid: false,
                ks: [0; 4],
            },
        }
    }

    /// The run context of the run `ctr` is in, built (in place) unless it is the cached one.
    #[inline(never)]
    #[cfg_attr(
        target_arch = "riscv32",
        unsafe(link_section = ".text.hot.2.aes.2.run")
    )]
    fn get(&mut self, keys: &RoundKeys, ctr: u128) -> &mut RunCtx {
        let base = ctr & !0xff;
        if !self.valid || self.base != base {
            self.ctx.fill(keys, ctr);
            self.base = base;
            self.valid = true;
        }
        &mut self.ctx
    }
}

impl<B: Backend> Clone for Aes128CtrCore<B> {
    fn clone(&self) -> Self {
        Aes128CtrCore {
            keys: self.keys.clone(),
            iv: self.iv,
            pos: self.pos,
            run: self.run.clone(),
            _backend: PhantomData,
        }
    }
}

impl<B: Backend> core::fmt::Debug for Aes128CtrCore<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Aes128CtrCore<{}> {{ .. }}", B::NAME)
    }
}

impl<B: Backend> AlgorithmName for Aes128CtrCore<B> {
    fn write_alg_name(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Ctr128BE<Aes128>")
    }
}

impl<B: Backend> KeySizeUser for Aes128CtrCore<B> {
    type KeySize = U16;
}

impl<B: Backend> IvSizeUser for Aes128CtrCore<B> {
    type IvSize = U16;
}

impl<B: Backend> BlockSizeUser for Aes128CtrCore<B> {
    type BlockSize = U16;
}

impl<B: Backend> KeyIvInit for Aes128CtrCore<B> {
    fn new(key: &cipher::Key<Self>, iv: &cipher::Iv<Self>) -> Self {
        Aes128CtrCore {
            keys: RoundKeys::with_schedule(&key.0, B::SCHEDULE),
            iv: u128::from_be_bytes(iv.0),
            pos: 0,
            run: RunCache::new(),
            _backend: PhantomData,
        }
    }
}

impl<B: Backend> Aes128CtrCore<B> {
    /// XORs the keystream from the current position into `data` (whole blocks) and advances.
    fn apply(&mut self, data: &mut [u8]) {
        debug_assert_eq!(data.len() % 16, 0);
        let ctr = self.iv.wrapping_add(self.pos);
        self.pos = self.pos.wrapping_add((data.len() / 16) as u128);
        xor_blocks::<B>(&self.keys, &mut self.run, ctr, data);
    }
}

impl<B: Backend> StreamCipherCore for Aes128CtrCore<B> {
    fn remaining_blocks(&self) -> Option<usize> {
        (u128::MAX - self.pos).try_into().ok()
    }

    fn process_with_backend(&mut self, f: impl StreamCipherClosure<BlockSize = Self::BlockSize>) {
        f.call(&mut OneBlock(self));
    }

    fn write_keystream_block(&mut self, block: &mut Block<Self>) {
        block.0 = [0; 16];
        self.apply(&mut block.0);
    }

    fn write_keystream_blocks(&mut self, blocks: &mut [Block<Self>]) {
        let bytes = cipher::array::Array::slice_as_flattened_mut(blocks);
        bytes.fill(0);
        self.apply(bytes);
    }

    fn apply_keystream_blocks(&mut self, blocks: &mut [Block<Self>]) {
        self.apply(cipher::array::Array::slice_as_flattened_mut(blocks));
    }

    fn apply_keystream_blocks_inout(&mut self, blocks: InOutBuf<'_, '_, Block<Self>>) {
        let out = blocks.into_out_with_copied_in();
        self.apply(cipher::array::Array::slice_as_flattened_mut(out));
    }
}

impl<B: Backend> StreamCipherSeekCore for Aes128CtrCore<B> {
    type Counter = u128;

    fn get_block_pos(&self) -> u128 {
        self.pos
    }

    fn set_block_pos(&mut self, pos: u128) {
        self.pos = pos;
    }
}

/// The block-at-a-time backend `process_with_backend` hands out (the bulk paths above bypass it).
struct OneBlock<'a, B: Backend>(&'a mut Aes128CtrCore<B>);

impl<B: Backend> BlockSizeUser for OneBlock<'_, B> {
    type BlockSize = U16;
}

impl<B: Backend> ParBlocksSizeUser for OneBlock<'_, B> {
    type ParBlocksSize = U1;
}

impl<B: Backend> StreamCipherBackend for OneBlock<'_, B> {
    fn gen_ks_block(&mut self, block: &mut Block<Self>) {
        self.0.write_keystream_block(block);
    }
}

/// `bytes` as little-endian words when it is 4-byte aligned (little-endian targets only).
fn as_words(bytes: &mut [u8]) -> Option<&mut [u32]> {
    if !cfg!(target_endian = "little") {
        return None;
    }
    // SAFETY: every bit pattern is a valid `u32`, and `align_to_mut` only returns a correctly
    // aligned middle part; we use it only when it covers the whole slice.
    let (pre, mid, post) = unsafe { bytes.align_to_mut::<u32>() };
    if pre.is_empty() && post.is_empty() {
        Some(mid)
    } else {
        None
    }
}

/// Pairs the scratch keystream buffer holds (64 bytes: cluster cores have 2 KiB stacks).
const SCRATCH_PAIRS: usize = 2;

/// One kernel call: pairs `p..p + n` of `run` into `words`.
fn call<B: Backend>(keys: &RoundKeys, run: &mut RunCtx, p: usize, n: usize, words: &mut [u32]) {
    let mut job = PairJob {
        keys,
        run,
        v0: (2 * p) as u8,
        npairs: n,
    };
    B::xor_pairs(&mut job, words);
}

/// XORs into `data` the keystream of pairs `p0..p1` of `run` (pair `p` = low bytes `2p`,
/// `2p + 1`), skipping the first block of the first pair (`skip_first`) and the second block of
/// the last pair (`skip_last`).
///
/// Word-aligned data is XORed in place by the kernel. A partial first or last pair goes through
/// a scratch buffer (a message of at most [`SCRATCH_PAIRS`] pairs in one call, so that its group
/// of 8 blocks is computed once); unaligned data goes through it entirely.
fn xor_pairs_partial<B: Backend>(
    keys: &RoundKeys,
    run: &mut RunCtx,
    (half, base): (&mut HalfPair, u128),
    (mut p0, p1): (usize, usize),
    skip_first: bool,
    skip_last: bool,
    mut data: &mut [u8],
) {
    let aligned = as_words(data).is_some();
    let mut skip = if skip_first { 16 } else { 0 };
    while !data.is_empty() {
        let left = p1 - p0;
        // Pairs that can go straight into the data: all but a partial last one.
        let direct = left - usize::from(skip_last);
        if aligned && skip == 0 && direct > 0 && !(skip_last && left <= SCRATCH_PAIRS) {
            let (now, rest) = data.split_at_mut(32 * direct);
            if let Some(words) = as_words(now) {
                call::<B>(keys, run, p0, direct, words);
            }
            data = rest;
            p0 += direct;
            continue;
        }
        let n = core::cmp::min(SCRATCH_PAIRS, left);
        let take = core::cmp::min(32 * n - skip, data.len());
        let (now, rest) = data.split_at_mut(take);
        via_scratch::<B>(keys, run, (&mut *half, base), (p0, n), skip, now);
        data = rest;
        p0 += n;
        skip = 0;
    }
}

/// Keystream of pairs `p..p + n` (`n ≤ SCRATCH_PAIRS`) of the run starting at counter `base`
/// into a scratch buffer, then from byte `skip` of it into `data`. When `data` ends one block
/// short of the keystream (a partial last pair), that block's keystream is kept in `half`.
/// Not inlined, so the buffer is not on the stack while the direct path runs the kernel.
#[inline(never)]
fn via_scratch<B: Backend>(
    keys: &RoundKeys,
    run: &mut RunCtx,
    (half, base): (&mut HalfPair, u128),
    (p, n): (usize, usize),
    skip: usize,
    data: &mut [u8],
) {
    let mut ks = [0u32; 8 * SCRATCH_PAIRS];
    call::<B>(keys, run, p, n, &mut ks[..8 * n]);
    xor_keystream(&ks[skip / 4..8 * n], data);
    if skip + data.len() == 32 * n - 16 {
        half.ks.copy_from_slice(&ks[8 * n - 4..8 * n]);
        half.ctr = base.wrapping_add((2 * (p + n) - 1) as u128);
        half.valid = true;
    }
    zeroize::Zeroize::zeroize(&mut ks);
}

/// `data ^= keystream` for `data.len() ≤ 4·ks.len()`: by words when `data` is word aligned.
fn xor_keystream(ks: &[u32], data: &mut [u8]) {
    if let Some(words) = as_words(data) {
        for (d, k) in words.iter_mut().zip(ks) {
            *d ^= *k;
        }
        return;
    }
    for (k, d) in ks.iter().zip(data.chunks_mut(4)) {
        for (kb, db) in k.to_le_bytes().iter().zip(d) {
            *db ^= kb;
        }
    }
}

/// XORs the keystream for counter blocks `ctr, ctr + 1, …` (mod 2^128) into `data` (whole blocks).
///
/// On GAP8 it sits with the AES kernel in the hot text (`.text.hot.2.aes.*`, see
/// `gap_rust_sdk`'s `gap8.x`): it runs for every piece the cluster engine hands a core.
#[inline(never)]
#[cfg_attr(
    target_arch = "riscv32",
    unsafe(link_section = ".text.hot.2.aes.1.blocks")
)]
pub(crate) fn xor_blocks<B: Backend>(
    keys: &RoundKeys,
    cache: &mut RunCache,
    mut ctr: u128,
    mut data: &mut [u8],
) {
    // A piece that starts on the second block of a pair the previous piece ended in.
    if data.len() >= 16 && cache.half.take(ctr, &mut data[..16]) {
        data = &mut data[16..];
        ctr = ctr.wrapping_add(1);
    }
    while !data.is_empty() {
        let low = (ctr & 0xff) as usize;
        let nb = core::cmp::min(data.len() / 16, 256 - low);
        cache.get(keys, ctr);
        let (run, half, base) = (&mut cache.ctx, &mut cache.half, cache.base);
        let (chunk, rest) = core::mem::take(&mut data).split_at_mut(16 * nb);
        let pairs = (low / 2, (low + nb).div_ceil(2));
        let skips = (low % 2 == 1, (low + nb) % 2 == 1);
        xor_pairs_partial::<B>(keys, run, (half, base), pairs, skips.0, skips.1, chunk);
        data = rest;
        ctr = ctr.wrapping_add(nb as u128);
    }
}

/// The portable kernel: plain Rust, rotates with `u32::rotate_right`. Runs everywhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable;

impl Backend for Portable {
    const NAME: &'static str = "portable";
    #[inline(never)]
    fn xor_pairs(job: &mut PairJob<'_>, data: &mut [u32]) {
        super::ctr::xor_pairs_generic::<super::slice::NativeRotate, false>(job, data);
    }
}

/// The PULP kernel's computation in plain Rust: rounds 3..=10 with an explicit ShiftRows
/// ([`Schedule::ShiftRows`]). Runs everywhere; it is the model the tests check the schedule and
/// its round keys with on hosts (the assembly itself runs on GVSOC, or on QEMU with its PULP
/// instructions emulated).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortableShiftRows;

impl Backend for PortableShiftRows {
    const NAME: &'static str = "portable-sr";
    const SCHEDULE: Schedule = Schedule::ShiftRows;
    #[inline(never)]
    fn xor_pairs(job: &mut PairJob<'_>, data: &mut [u32]) {
        super::ctr::xor_pairs_generic::<super::slice::NativeRotate, true>(job, data);
    }
}
