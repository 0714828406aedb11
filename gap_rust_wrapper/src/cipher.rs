//! How each core gets its own cipher for a call, and how it applies the keystream to a piece.
//!
//! A [`CipherFactory`] is asked once per call, on cluster core 0 before any data moves, to
//! [`prepare`](CipherFactory::prepare) (build what all cores share and check that the keystream
//! range exists), then once per core for that core's [`Keystream`] worker. The round loop only sees
//! `&mut dyn Keystream`, so its code is the same for every cipher (one copy, small enough to stay
//! in the GAP8 cluster's 4 KiB instruction cache next to the kernel).
//!
//! | factory | cipher | per piece |
//! |---|---|---|
//! | [`KeyIv`] | any `KeyIvInit + StreamCipher + StreamCipherSeek`, built by every core | `try_seek` + `try_apply_keystream` (the generic path) |
//! | [`Cloned`] | any `StreamCipher + StreamCipherSeek + Clone`, cloned from a template | the generic path |
//! | [`Blocks`] | a cipher *core* (`KeyIvInit + StreamCipherCore + StreamCipherSeekCore + Clone`), built once and cloned per core | set the block position and apply whole blocks in one call (the fast path: no partial-block buffer, no byte-level seek) |
use crate::Error;
use cipher::array::Array;
use cipher::typenum::Unsigned;
use cipher::{
    Block, BlockSizeUser, KeyIvInit, StreamCipher, StreamCipherCore, StreamCipherCounter,
    StreamCipherSeek, StreamCipherSeekCore,
};
use core::marker::PhantomData;
use zeroize::Zeroize;

/// A core's cipher for one call: XORs the keystream into a piece of the payload.
pub trait Keystream {
    /// Pieces should start at keystream positions that are multiples of this (a power of two;
    /// the engine uses the larger of it and [`Config::split_align`](crate::Config)). For a
    /// kernel that works on groups of blocks (AES-CTR's bitsliced pairs and 8-block groups), a
    /// piece starting inside a group costs work twice.
    const PIECE_ALIGN: usize = 1;

    /// XORs the keystream bytes `pos .. pos + data.len()` into `data`.
    fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error>;

    /// XORs the keystream bytes `pos .. pos + len` into `buf[..len]`; `buf[len..]` is scratch
    /// space the worker may overwrite (the rest of the engine's L1 buffer slice after the piece:
    /// never written back). A block kernel can then take a piece that ends inside a block as
    /// whole blocks, in the same kernel call, instead of on a separate path for the partial
    /// block; it must wipe what it leaves in the scratch. `Error::Length` if `len > buf.len()`.
    /// Default: [`Self::apply_at`] on `buf[..len]`.
    fn apply_in(&mut self, pos: u64, buf: &mut [u8], len: usize) -> Result<(), Error> {
        match buf.get_mut(..len) {
            Some(data) => self.apply_at(pos, data),
            None => Err(Error::Length),
        }
    }
}

/// Makes the per-core ciphers of a call.
pub trait CipherFactory: Sync {
    /// What every core reads during the call (built once, on cluster core 0).
    type Shared: Sync;
    /// One core's cipher.
    type Worker: Keystream + Send;

    /// Builds the shared part into `slot` and checks that keystream bytes `offset .. offset + len`
    /// exist (the same errors as seeking and applying with the cipher itself). (Into a slot the
    /// caller owns: a cipher core can be a few hundred bytes, which are then built in place.)
    fn prepare(
        &self,
        offset: u64,
        len: usize,
        slot: &mut Option<Self::Shared>,
    ) -> Result<(), Error>;

    /// Builds one core's worker.
    fn worker(&self, shared: &Self::Shared) -> Result<Self::Worker, Error>;

    /// Builds one core's worker in `slot` (what the engine calls). The default moves
    /// [`CipherFactory::worker`]'s result there; a factory whose worker is large can build it in
    /// place (on a GAP8 cluster core a moved byte is a load and a store).
    #[inline(always)]
    fn worker_in(
        &self,
        shared: &Self::Shared,
        slot: &mut Option<Self::Worker>,
    ) -> Result<(), Error> {
        *slot = Some(self.worker(shared)?);
        Ok(())
    }
}

/// A cipher used through `StreamCipher + StreamCipherSeek`: seek to the piece, apply.
pub struct Seeking<S>(S);

impl<S: StreamCipher + StreamCipherSeek> Keystream for Seeking<S> {
    fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
        if data.is_empty() {
            return Ok(());
        }
        self.0.try_seek(pos).map_err(|_| Error::CounterOverflow)?;
        self.0
            .try_apply_keystream(data)
            .map_err(|_| Error::CounterOverflow)
    }
}

/// `offset + len` must stay inside the cipher's keystream (as `Sequential` checks it).
fn check_seekable<S: StreamCipher + StreamCipherSeek>(
    probe: &mut S,
    offset: u64,
    len: usize,
) -> Result<(), Error> {
    offset
        .checked_add(len as u64)
        .ok_or(Error::CounterOverflow)?;
    probe.try_seek(offset).map_err(|_| Error::CounterOverflow)?;
    probe
        .check_remaining(len)
        .map_err(|_| Error::CounterOverflow)
}

/// A key and IV from which every core builds its own `S` (any RustCrypto stream cipher).
pub struct KeyIv<'a, S> {
    key: &'a [u8],
    iv: &'a [u8],
    _s: PhantomData<fn() -> S>,
}

impl<'a, S> KeyIv<'a, S> {
    /// Key and IV for cipher `S` (lengths are checked when a cipher is made).
    pub fn new(key: &'a [u8], iv: &'a [u8]) -> Self {
        KeyIv {
            key,
            iv,
            _s: PhantomData,
        }
    }
}

impl<S: KeyIvInit + StreamCipher + StreamCipherSeek + Send> CipherFactory for KeyIv<'_, S> {
    type Shared = ();
    type Worker = Seeking<S>;

    fn prepare(&self, offset: u64, len: usize, slot: &mut Option<()>) -> Result<(), Error> {
        let mut probe = S::new_from_slices(self.key, self.iv).map_err(|_| Error::KeyIv)?;
        check_seekable(&mut probe, offset, len)?;
        *slot = Some(());
        Ok(())
    }

    fn worker(&self, _: &()) -> Result<Seeking<S>, Error> {
        S::new_from_slices(self.key, self.iv)
            .map(Seeking)
            .map_err(|_| Error::KeyIv)
    }
}

/// A cipher template that every core clones.
pub struct Cloned<'a, S>(pub &'a S);

impl<S: StreamCipher + StreamCipherSeek + Clone + Send + Sync> CipherFactory for Cloned<'_, S> {
    type Shared = ();
    type Worker = Seeking<S>;

    fn prepare(&self, offset: u64, len: usize, slot: &mut Option<()>) -> Result<(), Error> {
        check_seekable(&mut self.0.clone(), offset, len)?;
        *slot = Some(());
        Ok(())
    }

    fn worker(&self, _: &()) -> Result<Seeking<S>, Error> {
        Ok(Seeking(self.0.clone()))
    }
}

/// The fast path: a stream-cipher *core* (RustCrypto's block-level API) built once per call from
/// the key and IV on cluster core 0, cloned by every core, set to each piece's block and applied
/// to the piece's whole blocks in one call.
///
/// The engine cuts pieces at block boundaries, so only the first piece of a payload that starts
/// inside a block and the last piece of a payload that ends inside one take the (cold)
/// partial-block path. The keystream range is checked once per call with the cipher's own
/// `StreamCipherCoreWrapper` semantics, so errors are exactly those of the wrapped cipher.
///
/// `W` is the per-core worker: by default [`BlockWorker`]; a kernel crate may give its own type
/// (built `From` the core, calling [`apply_blocks_at`]) to control where that code is linked.
pub struct Blocks<'a, C, W = BlockWorker<C>> {
    key: &'a [u8],
    iv: &'a [u8],
    _c: PhantomData<fn() -> (C, W)>,
}

impl<'a, C, W> Blocks<'a, C, W> {
    /// Key and IV for cipher core `C` (lengths are checked when the core is made).
    pub fn new(key: &'a [u8], iv: &'a [u8]) -> Self {
        Blocks {
            key,
            iv,
            _c: PhantomData,
        }
    }
}

/// The block-level ciphers [`Blocks`] accepts.
pub trait BlockCore:
    KeyIvInit + StreamCipherCore + StreamCipherSeekCore + Clone + Send + Sync
{
}
impl<C: KeyIvInit + StreamCipherCore + StreamCipherSeekCore + Clone + Send + Sync> BlockCore for C {}

impl<C: BlockCore, W: From<C> + Keystream + Send> CipherFactory for Blocks<'_, C, W> {
    type Shared = C;
    type Worker = W;

    fn prepare(&self, offset: u64, len: usize, slot: &mut Option<C>) -> Result<(), Error> {
        // Key and IV by reference (no copies), the core built in the caller's slot.
        let key = <&cipher::Key<C>>::try_from(self.key).map_err(|_| Error::KeyIv)?;
        let iv = <&cipher::Iv<C>>::try_from(self.iv).map_err(|_| Error::KeyIv)?;
        let core = slot.insert(C::new(key, iv));
        // Checked on the template itself: its block position does not matter (every piece sets
        // its own).
        check_core(core, offset, len)
    }

    fn worker(&self, shared: &C) -> Result<W, Error> {
        Ok(W::from(shared.clone()))
    }
}

/// Exactly the checks of `StreamCipherCoreWrapper::try_seek(offset)` followed by
/// `check_remaining(len)`, on the core (the wrapper's buffer type is not public): the block
/// position must be representable, a position inside the last block is refused, and the blocks
/// still needed after the partly used first block must not exceed `remaining_blocks`. Moves the
/// core's block position (and may generate one keystream block).
pub fn check_core<C: StreamCipherCore + StreamCipherSeekCore>(
    core: &mut C,
    offset: u64,
    len: usize,
) -> Result<(), Error> {
    offset
        .checked_add(len as u64)
        .ok_or(Error::CounterOverflow)?;
    let bs = <C as BlockSizeUser>::BlockSize::USIZE;
    let block = C::Counter::try_from(offset / bs as u64).map_err(|_| Error::CounterOverflow)?;
    let skip = (offset % bs as u64) as usize;
    if skip != 0 && block.is_max() {
        return Err(Error::CounterOverflow);
    }
    core.set_block_pos(block);
    let mut buffered = 0;
    if skip != 0 {
        // The wrapper generates the first block at the seek and keeps its tail.
        let mut ks = Block::<C>::default();
        core.write_keystream_block(&mut ks);
        zeroize_block(&mut ks);
        buffered = bs - skip;
    }
    let Some(rem) = core.remaining_blocks() else {
        return Ok(());
    };
    match len.checked_sub(buffered) {
        Some(n) if n.div_ceil(bs) > rem => Err(Error::CounterOverflow),
        _ => Ok(()),
    }
}

/// A core's copy of a cipher core (see [`Blocks`]).
pub struct BlockWorker<C>(C);

impl<C> From<C> for BlockWorker<C> {
    fn from(core: C) -> Self {
        BlockWorker(core)
    }
}

impl<C: StreamCipherCore + StreamCipherSeekCore> Keystream for BlockWorker<C> {
    fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
        apply_blocks_at(&mut self.0, pos, data)
    }
}

/// The fast path's per-piece work: set `core` to the block of keystream position `pos`, apply
/// the piece's whole blocks in one call, and the partial first / last block (cold) if any.
///
/// Kernels that want their per-piece code linked next to them (GAP8's instruction cache) define
/// their own worker type whose `apply_at` calls this, and use it with [`Blocks`]' `W` parameter.
#[inline(always)]
pub fn apply_blocks_at<C: StreamCipherCore + StreamCipherSeekCore>(
    core: &mut C,
    pos: u64,
    data: &mut [u8],
) -> Result<(), Error> {
    let bs = <C as BlockSizeUser>::BlockSize::USIZE as u64;
    let block = C::Counter::try_from(pos / bs).map_err(|_| Error::CounterOverflow)?;
    core.set_block_pos(block);
    let skip = (pos % bs) as usize;
    let data = if skip != 0 {
        partial_head(core, skip, data)
    } else {
        data
    };
    let (blocks, tail) = Array::slice_as_chunks_mut(data);
    if !blocks.is_empty() {
        core.apply_keystream_blocks(blocks);
    }
    if !tail.is_empty() {
        partial_tail(core, tail);
    }
    Ok(())
}

/// The bytes of `data` that lie in the current block from byte `skip` on: XORed with that block's
/// keystream (which advances the core to the next block). Returns the rest of `data`.
#[cold]
#[inline(never)]
fn partial_head<'d, C: StreamCipherCore>(
    core: &mut C,
    skip: usize,
    data: &'d mut [u8],
) -> &'d mut [u8] {
    let mut ks = Block::<C>::default();
    core.write_keystream_block(&mut ks);
    let n = data.len().min(ks.len() - skip);
    let (head, rest) = data.split_at_mut(n);
    for (d, k) in head.iter_mut().zip(&ks[skip..]) {
        *d ^= k;
    }
    zeroize_block(&mut ks);
    rest
}

/// The first `data.len() < block size` keystream bytes of the current block, XORed into `data`.
#[cold]
#[inline(never)]
fn partial_tail<C: StreamCipherCore>(core: &mut C, data: &mut [u8]) {
    let mut ks = Block::<C>::default();
    core.write_keystream_block(&mut ks);
    for (d, k) in data.iter_mut().zip(ks.iter()) {
        *d ^= k;
    }
    zeroize_block(&mut ks);
}

/// Keystream bytes left on the stack are overwritten.
fn zeroize_block(b: &mut [u8]) {
    b.zeroize();
}
