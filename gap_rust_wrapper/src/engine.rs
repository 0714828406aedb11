//! The engine: three L1 buffers and the round loop.
use crate::cipher::{CipherFactory, KeyIv};
use crate::erase::{MacRef, Worker};
use crate::mac::{MacFactory, MacLane};
use crate::rotation::{Rotation, Turn};
use crate::source::{InPlace, Part, Separate, Source, Split};
use crate::split::{boundaries, piece};
use crate::{Config, Error, Rounds};
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use gap_rust_sdk::{Buf, Cluster, Controller, Dma, DmaRaw, MAX_CORES, Team};

/// The parallel stream-cipher engine of one cluster.
///
/// It allocates its three L1 buffers once (in [`Engine::new`]) and frees them when dropped; every
/// call reuses them. A call offloads once to the cluster ([`Cluster::run`]) and forks the team once;
/// the team barrier separates the rounds.
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

    /// Uses `rounds` from the next call on (see [`Rounds`]).
    pub fn set_rounds(&mut self, rounds: Rounds) {
        self.cfg.rounds = rounds;
    }

    /// XORs the keystream of the ciphers `factory` makes, from keystream position `offset`, into
    /// `data` (in L2), in place.
    pub fn apply<F: CipherFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), Error> {
        self.apply_split(factory, offset, &mut InPlace(data))
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
        self.apply_split(factory, offset, &mut Separate { input, output })
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
        self.apply_direct_mac(factory, offset, data, &NoMac)
    }

    /// [`Engine::apply_direct`] with a MAC of the payload computed in the same pass (see
    /// [`crate::mac`]): returns the sum of the cores' contributions.
    pub fn apply_direct_mac<F: CipherFactory, M: MacFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        data: &mut [u8],
        mac: &M,
    ) -> Result<M::Output, Error> {
        if data.is_empty() {
            factory.prepare(offset, 0, &mut None)?;
            return empty(mac);
        }
        let cfg = self.cfg;
        self.cluster
            .run(move |ctrl| direct(ctrl, cfg, factory, offset, data, mac))
            .map_err(Error::Cluster)?
    }

    /// [`Engine::apply`] with a MAC of the payload computed in the same pass: each core absorbs
    /// each of its pieces while it is in L1, right after (or, for [`MacInput::Input`], right
    /// before) applying the keystream and before the write-back (see [`crate::mac`],
    /// [`MacInput`](crate::MacInput)). Returns the
    /// sum of the cores' contributions ([`MacFactory::combine`]).
    pub fn apply_mac<F: CipherFactory, M: MacFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        data: &mut [u8],
        mac: &M,
    ) -> Result<M::Output, Error> {
        self.apply_split_mac(factory, offset, &mut InPlace(data), mac)
    }

    /// [`Engine::apply_b2b`] with a MAC in the same pass (see [`Engine::apply_mac`]).
    pub fn apply_b2b_mac<F: CipherFactory, M: MacFactory>(
        &mut self,
        factory: &F,
        offset: u64,
        input: &[u8],
        output: &mut [u8],
        mac: &M,
    ) -> Result<M::Output, Error> {
        if input.len() != output.len() {
            return Err(Error::Length);
        }
        self.apply_split_mac(factory, offset, &mut Separate { input, output }, mac)
    }

    /// Runs a payload that can be cut into per-core parts: per-core pipelines with
    /// [`Rounds::Auto`] (see there), the team rounds otherwise.
    pub fn apply_split<F, S>(
        &mut self,
        factory: &F,
        offset: u64,
        payload: &mut S,
    ) -> Result<(), Error>
    where
        F: CipherFactory,
        S: Split,
    {
        self.apply_split_mac(factory, offset, payload, &NoMac)
    }

    /// [`Engine::apply_split`] with a MAC in the same pass (see [`Engine::apply_mac`]).
    pub fn apply_split_mac<F, S, M>(
        &mut self,
        factory: &F,
        offset: u64,
        payload: &mut S,
        mac: &M,
    ) -> Result<M::Output, Error>
    where
        F: CipherFactory,
        S: Split,
        M: MacFactory,
    {
        if payload.is_empty() {
            factory.prepare(offset, 0, &mut None)?;
            return empty(mac);
        }
        let cfg = self.cfg;
        let [a, b, c] = &mut self.bufs;
        // The job captures one reference: cluster core 0 reads what it needs from the caller's
        // frame instead of copying the whole closure first.
        let mut call = Call {
            cfg,
            bufs: Some([&mut a[..], &mut b[..], &mut c[..]]),
            factory,
            offset,
            payload,
            mac,
        };
        let call = &mut call;
        self.cluster
            .run(move |ctrl| {
                let cfg = call.cfg;
                let Some(bufs) = call.bufs.take() else {
                    return Err(Error::Config);
                };
                let share = lane_share::<F>(&cfg);
                if cfg.rounds == Rounds::Auto && share > 0 {
                    lanes(
                        ctrl,
                        cfg,
                        share,
                        bufs,
                        call.factory,
                        call.offset,
                        call.payload,
                        call.mac,
                    )
                } else {
                    rounds(
                        ctrl,
                        cfg,
                        bufs,
                        call.factory,
                        call.offset,
                        call.payload,
                        call.mac,
                    )
                }
            })
            .map_err(Error::Cluster)?
    }

    /// Runs the team rounds over any [`Source`].
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
        if payload.is_empty() {
            return factory.prepare(offset, 0, &mut None);
        }
        let cfg = self.cfg;
        let [a, b, c] = &mut self.bufs;
        let bufs: [&mut [u8]; 3] = [&mut a[..], &mut b[..], &mut c[..]];
        self.cluster
            .run(move |ctrl| rounds(ctrl, cfg, bufs, factory, offset, payload, &NoMac))
            .map_err(Error::Cluster)?
    }
}

/// The arguments of one call, on the caller's stack (see [`Engine::apply_split`]).
struct Call<'a, F, S, M> {
    cfg: Config,
    bufs: Option<[&'a mut [u8]; 3]>,
    factory: &'a F,
    offset: u64,
    payload: &'a mut S,
    mac: &'a M,
}

/// Rounds of one call: round 0 covers `[0, first)`, round `r >= 1` covers
/// `[first + (r - 1) * round, first + r * round)`, clamped to the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) len: usize,
    /// Bytes of round 0.
    first: usize,
    /// Bytes of a full round.
    round: usize,
    /// Rounds double from `first` up to `round`.
    ramp: bool,
    /// Bytes every round is shorter than its nominal size (one block with several cores: core 0,
    /// which also drives the DMA, then has one block less than the others).
    discount: usize,
    cores: usize,
    offset: u64,
    align: usize,
    lead: usize,
}

impl Plan {
    /// The rounds `cfg` gives a payload of `len > 0` bytes at keystream position `offset`.
    pub(crate) fn new(cfg: &Config, len: usize, offset: u64) -> Plan {
        let z = round_sizes(cfg, len);
        Plan {
            len,
            first: z.first,
            round: z.round,
            ramp: z.ramp,
            discount: z.discount,
            cores: cfg.cores,
            offset,
            align: cfg.split_align,
            lead: cfg.dma_lead.next_multiple_of(cfg.split_align),
        }
    }

    /// Number of rounds (iterates over them; the round loop itself runs until they are done).
    pub(crate) fn count(&self) -> usize {
        let mut n = 1;
        let mut now = self.first_round();
        let mut nominal = self.grow(self.first);
        loop {
            let next = self.after(now.1, nominal);
            if next.0 == next.1 {
                return n;
            }
            n += 1;
            now = next;
            nominal = self.grow(nominal);
        }
    }

    /// Payload range of round 0.
    #[inline(always)]
    fn first_round(&self) -> (usize, usize) {
        (0, self.len.min(self.first - self.discount))
    }

    /// The round after the one that ends at `end`, given its nominal size `nominal` (empty
    /// after the last round).
    #[inline(always)]
    fn after(&self, end: usize, nominal: usize) -> (usize, usize) {
        (end, self.len.min(end + nominal - self.discount))
    }

    /// Nominal size of the round after one of nominal size `nominal`: double while ramping, at
    /// most a full round (no division: this runs on every core every round).
    #[inline(always)]
    fn grow(&self, nominal: usize) -> usize {
        if self.ramp {
            nominal.saturating_mul(2).min(self.round)
        } else {
            self.round
        }
    }

    /// Payload range of core `core`'s piece of the round `[w0, w1)` (pieces of one round are
    /// disjoint). Out of line and not with the hot code: the round loop calls it only when a
    /// round's length or keystream phase changes (a few times per call, in the first rounds).
    #[inline(never)]
    fn piece(&self, (w0, w1): (usize, usize), core: usize) -> (usize, usize) {
        piece(w0, w1, self.cores, core, self.offset, self.align)
    }
}

/// Nominal round sizes of a call (see [`Plan`]).
pub(crate) struct Sizes {
    pub(crate) first: usize,
    pub(crate) round: usize,
    ramp: bool,
    discount: usize,
}

/// The round sizes for a payload of `len` bytes: every round in `1..=cfg.buffer` bytes.
pub(crate) fn round_sizes(cfg: &Config, len: usize) -> Sizes {
    let buf = cfg.buffer.max(1);
    let unit = cfg.cores.saturating_mul(cfg.split_align).max(1);
    let (first, round, ramp) = match cfg.rounds {
        Rounds::Fixed => (buf, buf, false),
        Rounds::Sized { first, round } => (first, round, false),
        Rounds::Auto | Rounds::Ramp => {
            // Each round costs a barrier and the DMA issue (a few hundred cycles); the first
            // fetch and the last write-back are not overlapped with work (round / 8 cycles each
            // at the DMA's ~8 bytes per cycle). The round minimising the sum is about
            // sqrt(len * AUTO_K), in whole blocks per core.
            // `sqrt(len * AUTO_K)` to within a factor of sqrt(2), as a power of two (no division).
            let bits = usize::BITS - len.saturating_mul(AUTO_K).leading_zeros();
            let r = (1usize << bits.div_ceil(2)).next_multiple_of(unit);
            // A short first round (its fetch is the only one nothing overlaps), then rounds that
            // double up to `r`: while the instruction cache refills after the call's set-up code,
            // the transfers a refill may wait behind are short.
            (AUTO_FIRST.max(unit.saturating_mul(2)), r, true)
        }
    };
    let round = round.clamp(1, buf);
    let first = first.clamp(1, round);
    // With Auto and several cores, every round is one block short of whole blocks per core: the
    // piece split gives the shortfall to core 0, whose DMA work then costs the round nothing.
    let discount = if ramp && cfg.cores > 1 && first >= unit {
        cfg.split_align
    } else {
        0
    };
    Sizes {
        first,
        round,
        ramp,
        discount,
    }
}

/// See [`Rounds::Ramp`].
const AUTO_K: usize = 512;
/// Bytes of the first round with [`Rounds::Ramp`] (at least two blocks per core).
const AUTO_FIRST: usize = 1024;

/// `cfg` with pieces aligned to what the cipher's worker asks for too.
fn with_piece_align<F: CipherFactory>(cfg: Config) -> Config {
    let want = <F::Worker as crate::cipher::Keystream>::PIECE_ALIGN;
    Config {
        split_align: if want.is_power_of_two() {
            cfg.split_align.max(want)
        } else {
            cfg.split_align
        },
        ..cfg
    }
}

/// A core's piece: applies the keystream unless the core already failed or has no cipher. One
/// copy, next to the round loop (it is called from three places of it).
#[inline(never)]
#[allow(unsafe_code)] // `link_section`
#[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.rounds"))]
fn work(
    ks: &mut Option<Worker<'_>>,
    mac: &mut Option<MacRef<'_>>,
    pos: u64,
    piece: &mut [u8],
    result: &mut Result<(), Error>,
) {
    if let (Ok(()), Some(k)) = (&*result, ks) {
        if !piece.is_empty() {
            if let Some(m) = mac.as_mut().filter(|m| m.before) {
                m.absorb(pos, piece);
            }
            if let Err(e) = k.apply_at(pos, piece) {
                fail(result, e);
                return;
            }
            if let Some(m) = mac.as_mut().filter(|m| !m.before) {
                m.absorb(pos, piece);
            }
        }
    }
}

/// The MAC of calls without one: no lane is built, so no piece is absorbed.
pub(crate) struct NoMac;

/// [`NoMac`]'s lane (never built).
pub(crate) enum NoLane {}

impl MacLane for NoLane {
    fn absorb(&mut self, _: usize, _: &[u8]) {
        match *self {}
    }
}

impl MacFactory for NoMac {
    type Shared = ();
    type Lane = NoLane;
    type Partial = ();
    type Output = ();
    fn prepare(&self, _: usize, slot: &mut Option<()>) {
        *slot = Some(());
    }
    fn lane_in(&self, _: &(), _: usize, _: &mut Option<NoLane>) {}
    fn finish(&self, _: &(), lane: &mut NoLane, _: usize) {
        match *lane {}
    }
    fn zero(&self) {}
    fn combine(&self, _: (), _: ()) {}
    fn conclude(&self, _: &(), _: (), _: usize) {}
}

/// The MAC of an empty payload (on the caller's core: the cluster is not started).
fn empty<M: MacFactory>(mac: &M) -> Result<M::Output, Error> {
    match &mac_shared(mac, 0)? {
        Some(sh) => Ok(mac.conclude(sh, mac.zero(), 0)),
        None => Err(Error::Config),
    }
}

/// The MAC's shared part of a call (on cluster core 0 before the fork).
fn mac_shared<M: MacFactory>(mac: &M, len: usize) -> Result<Option<M::Shared>, Error> {
    let mut shared = None;
    mac.prepare(len, &mut shared);
    if shared.is_none() {
        return Err(Error::Config);
    }
    Ok(shared)
}

/// The call's result from the lanes' contributions (on cluster core 0 after the fork).
fn total<M: MacFactory>(
    mac: &M,
    shared: &M::Shared,
    len: usize,
    parts: impl Iterator<Item = Option<M::Partial>>,
) -> M::Output {
    let sum = parts.flatten().fold(mac.zero(), |a, b| mac.combine(a, b));
    mac.conclude(shared, sum, len)
}

/// Core `i`'s MAC lane and, once its pieces are done, its contribution: builds the lane, runs
/// `body` with it (erased), finishes it into `out`.
#[inline(always)]
fn with_lane<M: MacFactory, R>(
    mac: &M,
    shared: &M::Shared,
    len: usize,
    base: u64,
    out: &mut Option<M::Partial>,
    body: impl FnOnce(Option<MacRef<'_>>) -> R,
) -> R {
    let mut lane = None;
    mac.lane_in(shared, len, &mut lane);
    let r = body(lane.as_mut().map(|l| MacRef::new(l, base, mac.input())));
    if let Some(l) = &mut lane {
        *out = Some(mac.finish(shared, l, len));
    }
    r
}

/// Records a core's first error (out of line: the round loop's code stays small).
#[cold]
#[inline(never)]
fn fail(result: &mut Result<(), Error>, e: Error) {
    if result.is_ok() {
        *result = Err(e);
    }
}

/// The no-DMA path, on cluster core 0: one fork, each core on its piece of `data` where it is.
fn direct<Ctl, F, M>(
    ctrl: &mut Ctl,
    cfg: Config,
    factory: &F,
    offset: u64,
    data: &mut [u8],
    mac: &M,
) -> Result<M::Output, Error>
where
    Ctl: Controller,
    F: CipherFactory,
    M: MacFactory,
{
    let len = data.len();
    let cfg = with_piece_align::<F>(cfg);
    let mut slot = None;
    factory.prepare(offset, data.len(), &mut slot)?;
    let Some(shared) = &slot else {
        return Err(Error::Config);
    };
    let mslot = mac_shared(mac, len)?;
    let Some(msh) = &mslot else {
        return Err(Error::Config);
    };
    let b = boundaries(0, data.len(), cfg.cores, offset, cfg.split_align);
    // Core i gets `(payload position, piece)` in slot i.
    let mut rest = data;
    type DirectSlot<'d, Q> = (usize, &'d mut [u8], Result<(), Error>, Option<Q>);
    let mut slots: [DirectSlot<'_, M::Partial>; MAX_CORES] = core::array::from_fn(|i| {
        let len = if i < cfg.cores { b[i + 1] - b[i] } else { 0 };
        let (piece, tail) = core::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        (b[i.min(cfg.cores)], piece, Ok(()), None)
    });
    let fork = ctrl.fork_each(
        cfg.cores,
        &(factory, shared, mac, msh),
        &mut slots,
        |_, &(factory, shared, mac, msh), slot| {
            let (pos, piece, result, part) = slot;
            match factory.worker(shared) {
                Ok(mut w) => {
                    let mut ks = Some(Worker::new(&mut w));
                    with_lane(mac, msh, len, offset, part, |mut m| {
                        work(&mut ks, &mut m, offset + *pos as u64, piece, result)
                    })
                }
                Err(e) => *result = Err(e),
            }
        },
    );
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.2)?;
    Ok(total(mac, msh, len, slots.iter_mut().map(|s| s.3.take())))
}

/// Bytes of each core's slice of an L1 buffer in the per-core pipelines: the buffer shared
/// equally, in whole piece alignment units (0: too small for one unit per core).
fn lane_share<F: CipherFactory>(cfg: &Config) -> usize {
    let cfg = with_piece_align::<F>(*cfg);
    (cfg.buffer / cfg.cores.max(1)) & !(cfg.split_align - 1)
}

/// Core `i`'s share of a per-core call: its part of the payload, its DMA, its slice of each of
/// the three L1 buffers, the keystream position of its first byte.
struct Lane<'a, P, D: DmaRaw> {
    part: P,
    dma: Dma<D>,
    bufs: [&'a mut [u8]; 3],
    pos: u64,
    /// Bytes the lane's first chunk is longer than one block (see [`run_lane`]).
    stagger: usize,
}

/// The smallest chunk of a lane's ramp-down, in piece alignment units: the last write-back,
/// which nothing overlaps, against one more chunk's DMA issue and wait (measured on the GAP8
/// model: 1 to 4 units are within the instruction-cache noise; 4 has the fewest chunks).
const LANE_LAST_BLOCKS: usize = 4;

/// Factor by which a lane's chunks grow from one block up to its slice: every chunk costs a DMA
/// issue and wait and a kernel call (about 200 cycles on GAP8), while the transfers of the
/// short first chunks must stay short.
const LANE_GROWTH: usize = 2;

/// Per-core slot of a lane fork: the core's DMA (none for cores past the team), its result.
type LaneSlot<D, Q> = (Option<Dma<D>>, Result<(), Error>, Option<Q>);

/// What every core of a lane fork reads.
struct LaneCtx<'a, F: CipherFactory, H, M: MacFactory> {
    factory: &'a F,
    mac: &'a M,
    mac_shared: &'a M::Shared,
    shared: &'a F::Shared,
    rot: Rotation<'a>,
    share: usize,
    align: usize,
    /// `share / (8 * cores)`: lane `i`'s first chunk is `i` of these longer, rounded down to
    /// whole units (see [`run_lane`]; with 8 KiB buffers on 8 cores lanes 4..7 by one block).
    /// Measured on the GAP8 model (5 code layouts): a quarter of the earlier `share / (2 * cores)`
    /// is faster at every payload once every core cuts its own part.
    stagger: usize,
    offset: u64,
    len: usize,
    cores: usize,
    /// The payload, from which each core takes its own part after the fork.
    shares: H,
}

/// The per-core pipelines, on cluster core 0: check the cipher's range, fork once; each core takes
/// its own part of the payload ([`piece`], [`Split::take`]) and its slices of the buffers, builds
/// its cipher and runs its lane ([`run_lane`]).
/// Kept small (no per-core structures built here): on GAP8 this runs on core 0 alone, before the
/// fork, and its code can evict lines of the lanes' code from the instruction cache.
#[inline(never)]
#[allow(unsafe_code)] // the `Rotation` lane accessor (rotation.rs), `Split::take` (source.rs)
#[allow(clippy::too_many_arguments)]
fn lanes<Ctl, F, S, M>(
    ctrl: &mut Ctl,
    cfg: Config,
    share: usize,
    bufs: [&mut [u8]; 3],
    factory: &F,
    offset: u64,
    payload: &mut S,
    mac: &M,
) -> Result<M::Output, Error>
where
    Ctl: Controller,
    F: CipherFactory,
    S: Split,
    M: MacFactory,
{
    let len = payload.len();
    let cfg = with_piece_align::<F>(cfg);
    let mut slot = None;
    factory.prepare(offset, len, &mut slot)?;
    let Some(shared) = &slot else {
        return Err(Error::Config);
    };
    let cores = cfg.cores;
    let mslot = mac_shared(mac, len)?;
    let Some(msh) = &mslot else {
        return Err(Error::Config);
    };
    let ctx = LaneCtx {
        factory,
        mac,
        mac_shared: msh,
        shared,
        rot: Rotation::new(bufs, cfg.buffer),
        share,
        align: cfg.split_align,
        stagger: share / (8 * cores),
        offset,
        len,
        cores,
        shares: payload.shares(),
    };
    let mut slots: [LaneSlot<Ctl::DmaRaw, M::Partial>; MAX_CORES] =
        core::array::from_fn(|_| (None, Ok(()), None));
    for s in slots.iter_mut().take(cores) {
        s.0 = Some(ctrl.dma());
    }
    let fork = ctrl.fork_each(cores, &ctx, &mut slots, |team, ctx, (io, result, part)| {
        let i = team.core_id();
        let Some(dma) = io.take() else {
            *result = Err(Error::Config);
            return;
        };
        // Every core cuts its own piece: pieces of distinct cores are disjoint (`split.rs`).
        let (lo, hi) = piece(0, ctx.len, ctx.cores, i, ctx.offset, ctx.align);
        let mut lane = Lane {
            // SAFETY: piece `i` of one cut of the payload, taken once by core `i` of this fork:
            // the fork's cores take pairwise disjoint ranges.
            part: unsafe { S::take(&ctx.shares, lo, hi) },
            dma,
            // SAFETY: core `i` of this lane fork, once; no round accessor is used in it.
            bufs: unsafe { ctx.rot.lane(i, ctx.share) },
            pos: ctx.offset + lo as u64,
            stagger: (i * ctx.stagger) & !(ctx.align - 1),
        };
        let mut w = None;
        match ctx.factory.worker_in(ctx.shared, &mut w) {
            Ok(()) => match &mut w {
                Some(w) => with_lane(ctx.mac, ctx.mac_shared, ctx.len, ctx.offset, part, |m| {
                    // Two copies of the lane loop: without a MAC it is the cipher's loop alone.
                    match m {
                        Some(m) => run_lane::<_, _, true>(
                            &mut lane,
                            Worker::new(w),
                            Some(m),
                            ctx.align,
                            result,
                        ),
                        None => run_lane::<_, _, false>(
                            &mut lane,
                            Worker::new(w),
                            None,
                            ctx.align,
                            result,
                        ),
                    }
                }),
                None => *result = Err(Error::Config),
            },
            Err(e) => *result = Err(e),
        }
    });
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.1)?;
    Ok(total(mac, msh, len, slots.iter_mut().map(|s| s.2.take())))
}

/// One core's pipeline over its part of the payload: chunk `k` is worked on in one of the lane's
/// three buffer slices while chunk `k + 1` is fetched into the next and chunk `k - 1` written
/// back from the third (its own DMA commands, [`Dma::overlap`], waited for before the next
/// chunk; the slices rotate after every chunk). Chunks: the first is one block (plus the lane's
/// stagger, and ending on a keystream block boundary), then they grow by [`LANE_GROWTH`] up to
/// the lane's slice and halve again towards the end of the part (each at most half of what is
/// left, at least [`LANE_LAST_BLOCKS`] units), so that the first fetch and the last write-back,
/// which nothing overlaps, are short. Every chunk but a part's last ends on a keystream block
/// boundary.
///
/// Not generic over the cipher (one copy per payload type), linked with the hot code
/// (`.text.hot.0.lane`, before the kernels `.text.hot.1.*`): on GAP8 the code of a chunk must
/// stay in the instruction cache. Two copies: without a MAC (`MAC = false`: the cipher's loop
/// alone) and with one.
#[inline(never)]
#[allow(unsafe_code)] // `link_section`
#[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.0.lane"))]
fn run_lane<P: Part, D: DmaRaw, const MAC: bool>(
    lane: &mut Lane<'_, P, D>,
    mut ks: Worker<'_>,
    mut mac: Option<MacRef<'_>>,
    align: usize,
    result: &mut Result<(), Error>,
) {
    let n = lane.part.len();
    let mask = align - 1;
    // A chunk is one DMA command (`Dma::overlap`).
    let share = lane.bufs[0]
        .len()
        .min(lane.dma.raw().max_len() & !mask)
        .max(align);
    let last = (align * LANE_LAST_BLOCKS).min(share);
    // Chunks are consecutive: `[a, b)` is written back, `[b, c)` worked on, `[c, d)` fetched;
    // `bufs[2]`, `bufs[0]`, `bufs[1]` hold them (rotated after every chunk).
    let (mut a, mut b, mut c) = (0, 0, 0);
    // Lane `i`'s first chunk is `stagger` longer than lane 0's (see [`LaneCtx::stagger`]): its
    // chunk boundaries, and so its transfers, then come that much later than lane 0's for the
    // whole call, and the lanes' transfers take turns on the DMA instead of queueing all at once
    // (an instruction-cache refill waits behind whatever is queued).
    let first = (align + lane.stagger).min(share);
    let mut d = n.min(first - (lane.pos as usize & mask));
    let mut size = first;
    while a < d {
        let [w, f, m] = &mut lane.bufs;
        let Some((out, inp)) = lane.part.io((a, b), (c, d)) else {
            fail(result, Error::Length);
            return;
        };
        // The piece is `w[..c - b]`. Every chunk but a part's last ends on a keystream block
        // boundary; a last one that does not gets the rest of the slice as scratch
        // (`Keystream::apply_in`: its ragged last block in the same kernel call).
        let len = c - b;
        let pos = lane.pos + b as u64;
        let (out_loc, in_loc) = (&m[..out.len()], &mut f[..inp.len()]);
        let r = lane.dma.overlap((out_loc, out), (inp, in_loc), || {
            if len == 0 {
                return Ok(());
            }
            if MAC {
                if let Some(m) = mac.as_mut().filter(|m| m.before) {
                    m.absorb(pos, &w[..len]);
                }
            }
            let r = if (pos as usize).wrapping_add(len) & mask == 0 {
                ks.apply_at(pos, &mut w[..len])
            } else {
                ks.apply_in(pos, w, len)
            };
            if MAC && r.is_ok() {
                if let Some(m) = mac.as_mut().filter(|m| !m.before) {
                    m.absorb(pos, &w[..len]);
                }
            }
            r
        });
        if let Err(e) = r.map_err(Error::Dma).and_then(|r| r) {
            fail(result, e);
            return;
        }
        lane.bufs.rotate_left(1);
        (a, b, c) = (b, c, d);
        size = (size * LANE_GROWTH).min(share);
        let step = size;
        let down = ((n - d) >> 1) & !mask;
        d = n.min(d + step.min(down.max(last)));
    }
}

/// What every core of a round fork reads.
struct RoundCtx<'a> {
    plan: Plan,
    rot: Rotation<'a>,
}

/// Per-core slot of the round fork: core 0's driver, and the core's result.
type RoundSlot<'a, P, D> = (Option<Driver<'a, P, D>>, Result<(), Error>);

/// Core 0's extra duties: the payload and the DMA.
struct Driver<'a, P, D: DmaRaw> {
    payload: &'a mut P,
    dma: &'a mut Dma<D>,
}

/// One call: check and build the ciphers, fetch round 0, fork the round loop, write the last
/// round back. Out of line: the per-core pipelines' call (`apply_split`) must not carry its code
/// (instruction-cache lines on GAP8).
#[inline(never)]
#[allow(unsafe_code)] // the `Rotation` accessor of the epilogue (contract in rotation.rs)
fn rounds<Ctl, F, P, M>(
    ctrl: &mut Ctl,
    cfg: Config,
    bufs: [&mut [u8]; 3],
    factory: &F,
    offset: u64,
    payload: &mut P,
    mac: &M,
) -> Result<M::Output, Error>
where
    Ctl: Controller,
    F: CipherFactory,
    P: Source,
    M: MacFactory,
{
    let len = payload.len();
    let cfg = with_piece_align::<F>(cfg);
    let mut slot = None;
    factory.prepare(offset, len, &mut slot)?;
    let Some(shared) = &slot else {
        return Err(Error::Config);
    };
    let mslot = mac_shared(mac, len)?;
    let Some(msh) = &mslot else {
        return Err(Error::Config);
    };
    let mut dma = ctrl.dma();
    // At most half the scope's command slots per direction and round.
    let per_direction = gap_rust_sdk::dma::SCOPE_SLOTS / 2;
    let chunk = match cfg.dma_chunk {
        0 => 0,
        c => c.max(cfg.buffer.div_ceil(per_direction)),
    };
    dma.set_chunk(chunk);
    let plan = Plan::new(&cfg, len, offset);
    let ctx = RoundCtx {
        plan,
        rot: Rotation::new(bufs, cfg.buffer),
    };
    type MacSlot<'a, P, D, Q> = (RoundSlot<'a, P, D>, Option<Q>);
    let mut slots: [MacSlot<'_, P, Ctl::DmaRaw, M::Partial>; MAX_CORES] =
        core::array::from_fn(|_| ((None, Ok(())), None));
    slots[0].0.0 = Some(Driver {
        payload: &mut *payload,
        dma: &mut dma,
    });
    let fork = ctrl.fork_each(
        cfg.cores,
        &(&ctx, factory, shared, mac, msh),
        &mut slots,
        |team, &(ctx, factory, shared, mac, msh), (slot, part)| {
            let mut worker = factory.worker(shared);
            let ks = match &mut worker {
                Ok(w) => Some(Worker::new(w)),
                Err(e) => {
                    slot.1 = Err(*e);
                    None
                }
            };
            with_lane(mac, msh, len, offset, part, |m| {
                round_loop(team, ctx, slot, ks, m)
            });
        },
    );
    fork.map_err(Error::Fork)?;
    slots.iter().try_for_each(|s| s.0.1)?;
    Ok(total(mac, msh, len, slots.iter_mut().map(|s| s.1.take())))
}

/// The round loop of one core. Every core loops over the rounds, and the team barrier ends each
/// round:
///
/// ```text
/// core 0:     head, exchange(fetch r+1 -> B[(r+1)%3], commit B[(r+2)%3] -> r-1, rest of its piece of B[r%3])  barrier
/// cores 1..:  its piece of B[r%3]                                                                              barrier
/// ```
///
/// The loop also runs a round -1 (core 0 fetches round 0) and a round `chunks` (core 0 writes the
/// last round back), so that the whole call's DMA code is this loop's (on GAP8: in the
/// instruction cache, where a refill would wait behind the transfer). In the first round every
/// core does its head first and all meet at an extra barrier before core 0 starts the next
/// transfers.
///
/// Core 0 waits for both transfers before it reaches the barrier, so when round r+1 starts the
/// buffer it works on has landed, the buffer it fetches into has been written back, and nobody
/// touches the buffer it commits any more. Errors do not leave the loop early (every core must
/// pass every barrier); a core that failed skips its later work and core 0 its later transfers.
///
/// Not generic over the cipher (the worker is type-erased, `erase.rs`): one copy of this loop
/// serves every cipher, and on GAP8 it is linked with the hot code (`.text.hot.3.rounds`, after
/// the per-core pipelines `.text.hot.0.*` and the kernels `.text.hot.1.*`, `.text.hot.2.*`), so
/// that the code of a round stays in the cluster's 4 KiB instruction cache.
#[inline(never)]
#[allow(unsafe_code)] // the `Rotation` accessors (contract in rotation.rs); `link_section`
#[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.rounds"))]
fn round_loop<T: Team, P: Source, D: DmaRaw>(
    team: &T,
    ctx: &RoundCtx<'_>,
    slot: &mut RoundSlot<'_, P, D>,
    mut ks: Option<Worker<'_>>,
    mut mac: Option<MacRef<'_>>,
) {
    let core = team.core_id();
    let plan = &ctx.plan;
    let (driver, result) = slot;
    let mut c = Cursor::new(plan);
    while c.more() {
        let mut tail: &mut [u8] = &mut [];
        let mut pos = 0;
        if c.now.1 > c.now.0 {
            // SAFETY: called in the round `c.now` by core `core`; `piece` is dropped (moved into
            // `work` calls / the exchange closure) before the barrier that ends the round.
            let (p, piece) = unsafe { c.piece(ctx, core) };
            // The head: the first bytes of the piece, before the round's transfers start —
            // core 0's `lead` (see `Config::dma_lead`) in every round; in the first round every
            // core's first `max(lead, one block)`, and the team meets at an extra barrier: the
            // transfers overlapping work begin only once every core has run the round's code.
            let lead = if c.first {
                plan.lead.max(plan.align)
            } else if driver.is_some() {
                plan.lead
            } else {
                0
            }
            .min(piece.len());
            let (head, rest) = piece.split_at_mut(lead);
            if lead > 0 {
                work(&mut ks, &mut mac, p, head, result);
            }
            if c.first {
                team.barrier();
                c.first = false;
            }
            pos = p + lead as u64;
            tail = rest;
        }
        match driver {
            Some(d) if result.is_ok() => drive(d, ctx, &c, &mut ks, &mut mac, pos, tail, result),
            Some(_) => {}
            None => work(&mut ks, &mut mac, pos, tail, result),
        }
        team.barrier();
        c.advance(plan);
    }
}

/// A core's position in the rounds of a call: rounds r - 1, r, r + 1 (empty when they do not
/// exist) and round r's turn, kept incrementally from round -1 on; `nominal` is the nominal size
/// of round r + 2. `key` / `rel`: this core's piece relative to the round's start, for rounds of
/// `key.0` bytes starting at keystream phase `key.1` (the cuts depend on nothing else), so the
/// full rounds of a call reuse it instead of dividing again.
struct Cursor {
    turn: Turn,
    prev: (usize, usize),
    now: (usize, usize),
    next: (usize, usize),
    nominal: usize,
    first: bool,
    key: (usize, usize),
    rel: (usize, usize),
}

impl Cursor {
    #[inline(always)]
    fn new(plan: &Plan) -> Cursor {
        Cursor {
            turn: Turn::of(2),
            prev: (0, 0),
            now: (0, 0),
            next: plan.first_round(),
            nominal: plan.grow(plan.first),
            first: true,
            key: (usize::MAX, 0),
            rel: (0, 0),
        }
    }

    /// Until rounds r - 1, r and r + 1 are all past the end.
    #[inline(always)]
    fn more(&self) -> bool {
        self.prev.1 > self.prev.0 || self.now.1 > self.now.0 || self.next.1 > self.next.0
    }

    #[inline(always)]
    fn advance(&mut self, plan: &Plan) {
        self.prev = self.now;
        self.now = self.next;
        self.next = plan.after(self.now.1, self.nominal);
        self.nominal = plan.grow(self.nominal);
        self.turn = self.turn.next();
    }

    /// This core's piece of round `now` of the work buffer, and its keystream position.
    ///
    /// # Safety
    /// Called during round `now` by core `core` of the round fork, which drops the reference
    /// before the barrier that ends the round.
    #[inline(never)]
    #[allow(unsafe_code)] // `link_section`
    #[allow(clippy::mut_from_ref)] // the buffer is shared by the round fork (rotation.rs)
    #[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.rounds"))]
    unsafe fn piece<'b>(&mut self, ctx: &'b RoundCtx<'_>, core: usize) -> (u64, &'b mut [u8]) {
        let plan = &ctx.plan;
        let now = self.now;
        let k = (
            now.1 - now.0,
            (plan.offset as usize).wrapping_add(now.0) & plan.align.wrapping_sub(1),
        );
        if k != self.key {
            self.rel = if plan.cores == 1 {
                (0, k.0)
            } else {
                let (p0, p1) = plan.piece(now, core);
                (p0 - now.0, p1 - now.0)
            };
            self.key = k;
        }
        // SAFETY: this round; this core's piece of the work buffer is disjoint from every other
        // core's (`Plan::piece`: `rel` is this round's piece, the cuts depending only on the
        // round's length and keystream phase), and the caller drops the reference before the
        // barrier that ends the round.
        let piece = unsafe { ctx.rot.work(self.turn, self.rel.0, self.rel.1) };
        (plan.offset + (now.0 + self.rel.0) as u64, piece)
    }
}

/// Core 0's part of a round: start the write-back of round r - 1 and the fetch of round r + 1,
/// work on the rest of its piece meanwhile, wait for both.
#[inline(never)]
#[allow(unsafe_code)] // the `Rotation` accessors (contract in rotation.rs); `link_section`
#[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.3.rounds"))]
#[allow(clippy::too_many_arguments)]
fn drive<P: Source, D: DmaRaw>(
    d: &mut Driver<'_, P, D>,
    ctx: &RoundCtx<'_>,
    c: &Cursor,
    ks: &mut Option<Worker<'_>>,
    mac: &mut Option<MacRef<'_>>,
    pos: u64,
    tail: &mut [u8],
    result: &mut Result<(), Error>,
) {
    let (prev, next, turn) = (c.prev, c.next, c.turn);
    let fetch = (next.1 > next.0).then(|| {
        // SAFETY: this round; only core 0 touches the prefetch buffer, until the exchange below
        // returns (it waits for the transfer).
        (next.0, unsafe { ctx.rot.prefetch(turn, next.1 - next.0) })
    });
    let commit = (prev.1 > prev.0).then(|| {
        // SAFETY: this round; the commit buffer was the work buffer of the previous round,
        // finished by every core before the last barrier; only core 0 reads it.
        (prev.0, unsafe { ctx.rot.commit(turn, prev.1 - prev.0) })
    });
    let x = d
        .payload
        .exchange(d.dma, fetch, commit, || work(ks, mac, pos, tail, result));
    if let Err(e) = x {
        fail(result, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_the_payload_in_rounds_that_fit_the_buffer() {
        for rounds in [
            Rounds::Fixed,
            Rounds::Auto,
            Rounds::Sized {
                first: 512,
                round: 4096,
            },
            Rounds::Sized { first: 1, round: 3 },
        ] {
            for cores in 1..=8 {
                for buffer in [64, 65, 100, 1000, 1500, 4096, 8192] {
                    for len in [1, 63, 64, 65, 999, 4096, 16_384, 79_056, 131_072] {
                        let cfg = Config {
                            rounds,
                            ..Config::new(cores, buffer)
                        };
                        let p = Plan::new(&cfg, len, 0);
                        let mut at = 0;
                        let mut now = p.first_round();
                        let mut nominal = p.grow(p.first);
                        for r in 0..p.count() {
                            let (s, e) = now;
                            assert_eq!(s, at);
                            assert!(
                                e > s && e - s <= buffer,
                                "{rounds:?} {cores} {buffer} {len} r{r}"
                            );
                            at = e;
                            now = p.after(e, nominal);
                            nominal = p.grow(nominal);
                        }
                        assert_eq!(at, len);
                        assert_eq!(now.0, now.1, "no round after the last");
                        assert_eq!(cfg.round_count(len), p.count());
                    }
                }
            }
        }
    }
}
