//! The engine: three L1 buffers and the round loop.
use crate::rotation::Rotation;
use crate::source::{InPlace, Separate, Source};
use crate::split::boundaries;
use crate::{Config, Error};
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use core::marker::PhantomData;
use gap_rust_sdk::{Buf, Cluster, Controller, Dma, DmaRaw, MAX_CORES, Team};

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

/// The rounds of one call: where each round's bytes and each core's piece are.
#[derive(Clone, Copy)]
struct Plan {
    len: usize,
    buf: usize,
    chunks: usize,
    cores: usize,
    offset: u64,
    align: usize,
    lead: usize,
}

impl Plan {
    /// Payload range `[start, end)` of round `r`.
    fn chunk(&self, r: usize) -> (usize, usize) {
        let start = (r * self.buf).min(self.len);
        (start, self.len.min(start + self.buf))
    }

    /// Payload range of core `core`'s piece of round `r` (pieces of one round are disjoint).
    fn piece(&self, r: usize, core: usize) -> (usize, usize) {
        let (w0, w1) = self.chunk(r);
        let b = boundaries(w0, w1, self.cores, self.offset, self.align);
        (b[core], b[core + 1])
    }
}

/// Applies the keystream to one piece, keeping the core's first error.
fn work<F: CipherFactory>(
    factory: &F,
    cipher: &mut Option<F::Cipher>,
    pos: u64,
    piece: &mut [u8],
    result: &mut Result<(), Error>,
) {
    if result.is_ok() {
        *result = apply_piece(factory, cipher, pos, piece);
    }
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
    // Core i gets `(payload position, piece)` in slot i.
    let mut rest = data;
    let mut slots: [(usize, &mut [u8], Result<(), Error>); MAX_CORES] = core::array::from_fn(|i| {
        let len = if i < cfg.cores { b[i + 1] - b[i] } else { 0 };
        let (piece, tail) = core::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        (b[i.min(cfg.cores)], piece, Ok(()))
    });
    let fork = ctrl.fork_each(cfg.cores, factory, &mut slots, |_, factory, slot| {
        let (pos, piece, result) = slot;
        work(factory, &mut None, offset + *pos as u64, piece, result);
    });
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.2)
}

/// What every core of a round fork reads.
struct Shared<'a, F> {
    plan: Plan,
    factory: &'a F,
    rot: Rotation<'a>,
}

/// Per-core slot of the round fork: core 0's driver, and the core's result.
type RoundSlot<'a, P, D> = (Option<Driver<'a, P, D>>, Result<(), Error>);

/// Core 0's extra duties: the payload and the DMA.
struct Driver<'a, P, D: DmaRaw> {
    payload: &'a mut P,
    dma: &'a mut Dma<D>,
}

/// The round loop. One fork for the whole call; inside it every core loops over the rounds, and
/// the team barrier ends each round:
///
/// ```text
/// core 0:     exchange(fetch r+1 -> B[(r+1)%3], commit B[(r+2)%3] -> r-1, work on its piece of B[r%3])  barrier
/// cores 1..:  work on its piece of B[r%3]                                                                 barrier
/// ```
///
/// Core 0 waits for both transfers before it reaches the barrier, so when round r+1 starts the
/// buffer it works on has landed, the buffer it fetches into has been written back, and nobody
/// touches the buffer it commits any more. Each core builds its own cipher once (on its own stack)
/// and seeks it per piece. Errors do not leave the loop early (every core must pass every
/// barrier); a core that failed skips its later work and core 0 its later transfers.
#[allow(unsafe_code)] // the `Rotation` accessors; their contract is in rotation.rs
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
    let len = payload.len();
    let mut dma = ctrl.dma();
    let buf = cfg.buffer;
    // At most half the scope's command slots per direction and round.
    let per_direction = gap_rust_sdk::dma::SCOPE_SLOTS / 2;
    let chunk = match cfg.dma_chunk {
        0 => 0,
        c => c.max(buf.div_ceil(per_direction)),
    };
    dma.set_chunk(chunk);
    let plan = Plan {
        len,
        buf,
        chunks: len.div_ceil(buf),
        cores: cfg.cores,
        offset,
        align: cfg.split_align,
        lead: cfg.dma_lead.next_multiple_of(cfg.split_align),
    };
    let [b0, b1, b2] = bufs;

    // Prologue: round 0's data into buffer 0 (nothing to overlap with).
    let (s0, e0) = plan.chunk(0);
    payload.exchange(&mut dma, Some((s0, &mut b0[..e0 - s0])), None, || ())?;

    let shared = Shared {
        plan,
        factory,
        rot: Rotation::new([b0, b1, b2], buf),
    };
    let mut slots: [RoundSlot<'_, P, Ctl::DmaRaw>; MAX_CORES] =
        core::array::from_fn(|_| (None, Ok(())));
    slots[0].0 = Some(Driver {
        payload: &mut *payload,
        dma: &mut dma,
    });
    let fork = ctrl.fork_each(cfg.cores, &shared, &mut slots, |team, sh, slot| {
        let core = team.core_id();
        let plan = &sh.plan;
        let mut cipher = None;
        let (driver, result) = slot;
        for r in 0..plan.chunks {
            let (w0, _) = plan.chunk(r);
            let (p0, p1) = plan.piece(r, core);
            // SAFETY: round r; this core's piece `[p0, p1)` of the work buffer is disjoint from
            // every other core's (`Plan::piece`), and the reference is dropped before the
            // barrier that ends the round.
            let piece = unsafe { sh.rot.work(r, p0 - w0, p1 - w0) };
            let pos = offset + p0 as u64;
            match driver {
                Some(d) if result.is_ok() => {
                    let fetch = (r + 1 < plan.chunks).then(|| {
                        let (f0, f1) = plan.chunk(r + 1);
                        // SAFETY: round r; only core 0 touches the prefetch buffer, until the
                        // exchange below returns (it waits for the transfer).
                        (f0, unsafe { sh.rot.prefetch(r, f1 - f0) })
                    });
                    let commit = (r >= 1).then(|| {
                        let (c0, c1) = plan.chunk(r - 1);
                        // SAFETY: round r; the commit buffer was the work buffer of round r - 1,
                        // finished by every core before the last barrier; only core 0 reads it.
                        (c0, unsafe { sh.rot.commit(r, c1 - c0) })
                    });
                    // The first `lead` bytes before the transfers start (see `Config::dma_lead`).
                    let lead = plan.lead.min(piece.len());
                    let (head, tail) = piece.split_at_mut(lead);
                    let mut res = Ok(());
                    work(sh.factory, &mut cipher, pos, head, &mut res);
                    let x = d.payload.exchange(d.dma, fetch, commit, || {
                        work(sh.factory, &mut cipher, pos + lead as u64, tail, &mut res)
                    });
                    *result = x.and(res);
                }
                Some(_) => {}
                None => work(sh.factory, &mut cipher, pos, piece, result),
            }
            team.barrier();
        }
    });
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.1)?;
    drop(slots);

    // Epilogue: the last round back to the payload.
    let last = plan.chunks - 1;
    let (c0, c1) = plan.chunk(last);
    // SAFETY: the fork is over; nothing else references the buffers.
    let commit_buf: &[u8] = unsafe { shared.rot.commit(last + 1, c1 - c0) };
    payload.exchange(&mut dma, None, Some((c0, commit_buf)), || ())
}
