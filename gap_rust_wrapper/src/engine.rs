//! The engine: three L1 buffers and the round loop.
use crate::source::{InPlace, Separate, Source};
use crate::split::boundaries;
use crate::{Config, Error};
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use core::marker::PhantomData;
use gap_rust_sdk::{Buf, Cluster, Controller, Dma, DmaRaw, MAX_CORES};

/// The parallel stream-cipher engine of one cluster.
///
/// It allocates its three L1 buffers once (in [`Engine::new`]) and frees them when dropped; every
/// call reuses them. A call offloads once to the cluster ([`Cluster::run`]) and forks the team once
/// per round.
pub struct Engine<'c, C: Cluster> {
    cluster: &'c C,
    bufs: [Buf<'c, C::L1>; 3],
    cfg: Config,
}

impl<'c, C: Cluster> Engine<'c, C> {
    /// Allocates three L1 buffers of `cfg.buffer` bytes on `cluster`.
    pub fn new(cluster: &'c C, cfg: Config) -> Result<Self, Error> {
        Self::check(cluster, &cfg)?;
        let alloc = |_| Buf::zeroed(cluster.l1(), cfg.buffer, 8).map_err(Error::Alloc);
        let [a, b, c] = [0, 1, 2].map(alloc);
        Ok(Engine {
            cluster,
            bufs: [a?, b?, c?],
            cfg,
        })
    }

    fn check(cluster: &C, cfg: &Config) -> Result<(), Error> {
        if cfg.cores == 0 || cfg.cores > cluster.max_cores().min(MAX_CORES) {
            return Err(Error::Config);
        }
        if cfg.buffer == 0 || !cfg.split_align.is_power_of_two() {
            return Err(Error::Config);
        }
        Ok(())
    }

    /// The cluster the engine runs on.
    pub fn cluster(&self) -> &'c C {
        self.cluster
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Uses `cores` cores (1..=the cluster's) from the next call on.
    pub fn set_cores(&mut self, cores: usize) -> Result<(), Error> {
        let cfg = Config { cores, ..self.cfg };
        Self::check(self.cluster, &cfg)?;
        self.cfg = cfg;
        Ok(())
    }

    /// XORs the keystream of the ciphers `factory` makes, from keystream position `offset`, into
    /// `data` (in L2), in place.
    pub fn apply<F: CipherFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), Error> {
        self.apply_source(factory, offset, &mut InPlace(data))
    }

    /// Same, reading `input` and writing `output` (same length, both in L2).
    pub fn apply_b2b<F: CipherFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), Error> {
        if input.len() != output.len() {
            return Err(Error::Length);
        }
        self.apply_source(factory, offset, &mut Separate { input, output })
    }

    /// [`Engine::apply`] with cipher `S` made from `key` and `iv` on every core.
    pub fn apply_keyiv<S>(
        &mut self,
        key: &[u8],
        iv: &[u8],
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), Error>
    where
        S: KeyIvInit + StreamCipher + StreamCipherSeek + Send,
    {
        self.apply(&KeyIv::<S>::new(key, iv), offset, data)
    }

    /// Without DMA: the cores work on `data` where it is — a payload already in L1, or (the
    /// "no-DMA" variant) cores reading and writing L2 directly. One fork, one piece per core.
    pub fn apply_direct<F: CipherFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), Error> {
        check_range(factory, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let cfg = self.cfg;
        self.cluster
            .run(move |ctrl| direct(ctrl, cfg, factory, offset, data))
            .map_err(Error::Cluster)?
    }

    /// Runs the rounds over any [`Source`].
    pub fn apply_source<F, P>(
        &mut self,
        factory: &F,
        offset: u64,
        payload: &mut P,
    ) -> Result<(), Error>
    where
        F: CipherFactory,
        P: Source,
    {
        let len = payload.len();
        check_range(factory, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let cfg = self.cfg;
        let [a, b, c] = &mut self.bufs;
        let bufs: [&mut [u8]; 3] = [&mut a[..], &mut b[..], &mut c[..]];
        self.cluster
            .run(move |ctrl| rounds(ctrl, cfg, bufs, factory, offset, payload))
            .map_err(Error::Cluster)?
    }
}

/// Makes the cipher instance each core seeks and applies (once per core per call).
///
/// RustCrypto's ciphers are deliberately not `Clone`, so each core builds its own from the key and
/// IV ([`KeyIv`]); a cipher that is `Clone` can be shared as a template with [`Cloned`].
pub trait CipherFactory: Sync {
    /// The cipher.
    type Cipher: StreamCipher + StreamCipherSeek + Send;
    /// A fresh instance at keystream position 0.
    fn make(&self) -> Result<Self::Cipher, Error>;
}

/// A key and IV from which every core builds its own `S`.
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
    type Cipher = S;
    fn make(&self) -> Result<S, Error> {
        S::new_from_slices(self.key, self.iv).map_err(|_| Error::KeyIv)
    }
}

/// A cipher template that every core clones.
pub struct Cloned<'a, S>(pub &'a S);

impl<S: StreamCipher + StreamCipherSeek + Clone + Send + Sync> CipherFactory for Cloned<'_, S> {
    type Cipher = S;
    fn make(&self) -> Result<S, Error> {
        Ok(self.0.clone())
    }
}

/// `offset + len` must stay inside the cipher's keystream (as `Sequential` checks it).
fn check_range<F: CipherFactory>(factory: &F, offset: u64, len: usize) -> Result<(), Error> {
    offset
        .checked_add(len as u64)
        .ok_or(Error::CounterOverflow)?;
    let mut probe = factory.make()?;
    probe.try_seek(offset).map_err(|_| Error::CounterOverflow)?;
    probe
        .check_remaining(len)
        .map_err(|_| Error::CounterOverflow)
}

/// Core `i`'s work: its own cipher (made on first use, kept for the rounds of this call), seeked to
/// the piece's keystream position.
fn apply_piece<F: CipherFactory>(
    factory: &F,
    cipher: &mut Option<F::Cipher>,
    pos: u64,
    piece: &mut [u8],
) -> Result<(), Error> {
    if piece.is_empty() {
        return Ok(());
    }
    let c = match cipher {
        Some(c) => c,
        None => cipher.insert(factory.make()?),
    };
    c.try_seek(pos).map_err(|_| Error::CounterOverflow)?;
    c.try_apply_keystream(piece)
        .map_err(|_| Error::CounterOverflow)
}

/// What core 0 does besides its piece: the round's DMA exchange.
struct Exchange<'a, P, D: DmaRaw> {
    payload: &'a mut P,
    dma: &'a mut Dma<D>,
    fetch: Option<(usize, &'a mut [u8])>,
    commit: Option<(usize, &'a [u8])>,
}

/// One core's part of a round.
struct Slot<'a, C, P, D: DmaRaw> {
    cipher: &'a mut Option<C>,
    piece: &'a mut [u8],
    /// Payload position of `piece[0]` (the keystream position is `offset + pos`).
    pos: usize,
    exchange: Option<Exchange<'a, P, D>>,
    result: Result<(), Error>,
}

/// Cuts `work` (payload positions `b[0]..b[n]`) into the slots of `n` cores.
fn pieces<'a, C, P, D: DmaRaw>(
    ciphers: &'a mut [Option<C>; MAX_CORES],
    work: &'a mut [u8],
    b: &[usize; 9],
    n: usize,
) -> [Slot<'a, C, P, D>; MAX_CORES] {
    let mut rest = work;
    let base = b[0];
    let mut ciphers = ciphers.iter_mut();
    core::array::from_fn(|i| {
        let len = if i < n { b[i + 1] - b[i] } else { 0 };
        let (piece, tail) = core::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        let cipher = ciphers.next().expect("MAX_CORES ciphers");
        Slot {
            cipher,
            piece,
            pos: if i < n { b[i] } else { base },
            exchange: None,
            result: Ok(()),
        }
    })
}

fn collect<C, P, D: DmaRaw>(
    fork: Result<(), gap_rust_sdk::ForkError>,
    slots: &[Slot<'_, C, P, D>],
) -> Result<(), Error> {
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.result)
}

/// The no-DMA path, on cluster core 0: one fork, each core on its piece of `data` where it is.
fn direct<Ctl, F>(
    ctrl: &mut Ctl,
    cfg: Config,
    factory: &F,
    offset: u64,
    data: &mut [u8],
) -> Result<(), Error>
where
    Ctl: Controller,
    F: CipherFactory,
{
    let b = boundaries(0, data.len(), cfg.cores, offset, cfg.split_align);
    let mut ciphers: [Option<F::Cipher>; MAX_CORES] = Default::default();
    let mut slots: [Slot<'_, F::Cipher, InPlace<'_>, Ctl::DmaRaw>; MAX_CORES] =
        pieces(&mut ciphers, data, &b, cfg.cores);
    let fork = ctrl.fork_each(cfg.cores, factory, &mut slots, |_, factory, slot| {
        slot.result = apply_piece(factory, slot.cipher, offset + slot.pos as u64, slot.piece);
    });
    collect(fork, &slots)
}

/// The round loop, on cluster core 0.
fn rounds<Ctl, F, P>(
    ctrl: &mut Ctl,
    cfg: Config,
    bufs: [&mut [u8]; 3],
    factory: &F,
    offset: u64,
    payload: &mut P,
) -> Result<(), Error>
where
    Ctl: Controller,
    F: CipherFactory,
    P: Source,
{
    let mut ciphers: [Option<F::Cipher>; MAX_CORES] = Default::default();
    let len = payload.len();
    let mut dma = ctrl.dma();
    // A round is one DMA command each way: at most the engine's per-command limit.
    let buf = cfg.buffer.min(dma.raw().max_len());
    let chunks = len.div_ceil(buf);
    let chunk = |j: usize| (j * buf, len.min((j + 1) * buf));
    let [b0, b1, b2] = bufs;
    let mut bufs = [b0, b1, b2];

    // Prologue: round 0's data into buffer 0.
    let (s0, e0) = chunk(0);
    payload.exchange(&mut dma, Some((s0, &mut bufs[0][..e0 - s0])), None, || ())?;

    for r in 0..chunks {
        let [work, fetch_buf, commit_buf] = rotate(&mut bufs, r);
        let (w0, w1) = chunk(r);
        let fetch = (r + 1 < chunks).then(|| {
            let (f0, f1) = chunk(r + 1);
            (f0, &mut fetch_buf[..f1 - f0])
        });
        let commit = (r >= 1).then(|| {
            let (c0, c1) = chunk(r - 1);
            (c0, &commit_buf[..c1 - c0])
        });
        let b = boundaries(w0, w1, cfg.cores, offset, cfg.split_align);
        let mut slots = pieces(&mut ciphers, &mut work[..w1 - w0], &b, cfg.cores);
        slots[0].exchange = Some(Exchange {
            payload: &mut *payload,
            dma: &mut dma,
            fetch,
            commit,
        });
        let fork = ctrl.fork_each(cfg.cores, factory, &mut slots, |_, factory, slot| {
            let (cipher, piece, pos) = (&mut *slot.cipher, &mut *slot.piece, slot.pos);
            let mut work = || apply_piece(factory, cipher, offset + pos as u64, piece);
            slot.result = match slot.exchange.take() {
                Some(x) => x
                    .payload
                    .exchange(x.dma, x.fetch, x.commit, work)
                    .and_then(|r| r),
                None => work(),
            };
        });
        collect(fork, &slots)?;
    }

    // Epilogue: the last round back to the payload.
    let last = chunks - 1;
    let (c0, c1) = chunk(last);
    let commit_buf: &[u8] = &bufs[last % 3][..c1 - c0];
    payload.exchange(&mut dma, None, Some((c0, commit_buf)), || ())
}

/// `[work, prefetch, commit]` = buffers `r % 3`, `(r + 1) % 3`, `(r + 2) % 3` as disjoint borrows.
fn rotate<'b>(bufs: &'b mut [&mut [u8]; 3], r: usize) -> [&'b mut [u8]; 3] {
    let [a, b, c] = bufs;
    match r % 3 {
        0 => [&mut **a, &mut **b, &mut **c],
        1 => [&mut **b, &mut **c, &mut **a],
        _ => [&mut **c, &mut **a, &mut **b],
    }
}
