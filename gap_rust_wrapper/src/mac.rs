//! A MAC computed in the same pass as the cipher: every core absorbs the bytes it has just
//! encrypted while they are still in L1, before the DMA writes them back.
//!
//! The engine gives each core of a call one [`MacLane`] ([`MacFactory::lane_in`]); the core
//! calls [`MacLane::absorb`] on every piece right after it applied the keystream to it
//! ([`MacInput::Output`], sealing: the ciphertext) or right before ([`MacInput::Input`], opening:
//! the ciphertext again). After its last piece each core turns its lane into a
//! [`MacFactory::Partial`] ([`MacFactory::finish`], still in parallel); the engine adds the
//! partials up ([`MacFactory::combine`]) and returns the sum. What is left of the tag (associated
//! data, length block, final mask) is the AEAD's, outside the engine.
//!
//! The polynomial MACs of the AEADs (Poly1305, GHASH) are all evaluated by Horner's rule over
//! 16-byte blocks, and are linear in the blocks: [`Horner`] implements [`MacLane`] for any such
//! [`Polynomial`] once. A core's pieces need not be contiguous nor block-aligned (team rounds
//! with odd buffer sizes hand a core scattered pieces, and a block can be cut between cores):
//! each lane evaluates its own blocks at their own positions, with the blocks it does not hold
//! counting as zero, and multiplies by a power of the key over every gap. The sum of the lanes is
//! then exactly the polynomial of the whole payload.
//!
//! ```text
//! payload blocks m_0 .. m_{N-1} (last one zero-padded):  P = sum_j m_j * k^(N - j)
//! lane i holds some of them (or parts):                  P_i = sum_{j in lane i} m_j * k^(N - j)
//! engine returns                                          P = P_0 + P_1 + ... (MacFactory::combine)
//! ```
//!
//! For Poly1305 (RFC 8439 §2.8) every padded ciphertext block carries the 2^128 bit: a block
//! cut between lanes carries it once, in the lane that holds its first byte (`lead` in
//! [`Polynomial::block`]). GHASH (NIST SP 800-38D) ignores `lead`.

/// Which bytes of a piece a call's MAC lanes see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacInput {
    /// What the keystream made (sealing: the ciphertext): absorbed right after the keystream is
    /// applied to a piece.
    Output,
    /// What the piece held before (opening: the ciphertext): absorbed right before.
    Input,
}

/// One core's MAC state for a call.
pub trait MacLane {
    /// Absorbs `data`, the bytes at payload positions `at .. at + data.len()` (`data` is in L1 on
    /// GAP8 when the engine calls this; it is never empty). The calls of one lane cover disjoint
    /// ranges in increasing order of `at`; the lanes of a call together cover the payload exactly
    /// once. Ranges start and end anywhere (not only on block boundaries).
    fn absorb(&mut self, at: usize, data: &[u8]);
}

/// Makes the per-core MAC lanes of a call and adds up their results.
///
/// The order of a call (all inside the cluster job when the payload is not empty):
/// [`prepare`](MacFactory::prepare) on cluster core 0 before the fork, then on every core
/// [`lane_in`](MacFactory::lane_in), its pieces, [`finish`](MacFactory::finish); after the fork,
/// on core 0, [`combine`](MacFactory::combine) over the cores' partials and
/// [`conclude`](MacFactory::conclude). For an empty payload the engine calls `prepare` and
/// `conclude` (with [`MacFactory::zero`]) on the caller's core, without starting the cluster.
pub trait MacFactory: Sync {
    /// What every lane reads (built once per call, e.g. a one-time key).
    type Shared: Sync;
    /// One core's lane.
    type Lane: MacLane + Send;
    /// A lane's contribution to the MAC of the payload (Poly1305: a number mod 2^130 - 5; GHASH: a
    /// GF(2^128) element).
    type Partial: Send;
    /// What the call returns (e.g. the tag).
    type Output: Send;

    /// Which bytes the lanes see.
    fn input(&self) -> MacInput {
        MacInput::Output
    }

    /// Builds the shared part into `slot` for a payload of `len` bytes.
    fn prepare(&self, len: usize, slot: &mut Option<Self::Shared>);

    /// Builds one core's lane in `slot` (on that core, in its own stack: on GAP8 a lane that
    /// copies the key works from L1).
    fn lane_in(&self, shared: &Self::Shared, len: usize, slot: &mut Option<Self::Lane>);

    /// The lane's contribution once it has absorbed all its pieces of a `len`-byte payload (on
    /// its core, in parallel with the others). A lane that absorbed nothing gives
    /// [`MacFactory::zero`].
    fn finish(&self, shared: &Self::Shared, lane: &mut Self::Lane, len: usize) -> Self::Partial;

    /// The contribution of nothing (the sum of no lanes; what an empty payload returns).
    fn zero(&self) -> Self::Partial;

    /// `a + b`.
    fn combine(&self, a: Self::Partial, b: Self::Partial) -> Self::Partial;

    /// The call's result from the sum of the lanes (e.g. the AEAD's length block and tag).
    fn conclude(&self, shared: &Self::Shared, sum: Self::Partial, len: usize) -> Self::Output;
}

/// A polynomial MAC over 16-byte blocks evaluated by Horner's rule in a field, with key `k`:
/// the block step is `acc = (acc + m) * k`. Implementors hold the key (and whatever they
/// precompute from it); [`Horner`] clones it into each core's lane.
pub trait Polynomial: Clone + Send + Sync {
    /// A field element (the accumulator, and a lane's contribution).
    type Acc: Copy + Send;

    /// The zero element.
    fn zero(&self) -> Self::Acc;

    /// For each 16-byte block of `blocks` (`blocks.len()` a multiple of 16), in order:
    /// `acc = (acc + m) * k`, every block whole (Poly1305: with its 2^128 bit). The hot loop.
    fn blocks(&self, acc: &mut Self::Acc, blocks: &[u8]);

    /// `acc = (acc + m) * k` for one block given as 16 bytes where the bytes a lane does not hold
    /// are zero; `lead`: the lane holds the block's first byte (Poly1305 adds 2^128 iff `lead`;
    /// GHASH ignores it).
    fn block(&self, acc: &mut Self::Acc, block: &[u8; 16], lead: bool);

    /// `acc = acc * k^n` (`n` public; constant time in the key and `acc`).
    fn shift(&self, acc: &mut Self::Acc, n: u64);

    /// `a = a + b`.
    fn add(&self, a: &mut Self::Acc, b: &Self::Acc);
}

/// [`MacFactory`] for any [`Polynomial`]: every core gets a [`Horner`] lane with its own copy
/// of the key.
pub struct PolyMac<P> {
    /// The key (cloned into each lane).
    pub key: P,
    /// Which bytes the lanes see.
    pub input: MacInput,
}

/// The sum of the lanes is the call's result: `sum_j m_j * k^(N - j)`.
impl<P: Polynomial> MacFactory for PolyMac<P> {
    type Shared = ();
    type Lane = Horner<P>;
    type Partial = P::Acc;
    type Output = P::Acc;

    fn input(&self) -> MacInput {
        self.input
    }

    fn prepare(&self, _len: usize, slot: &mut Option<()>) {
        *slot = Some(());
    }

    fn lane_in(&self, _: &(), _len: usize, slot: &mut Option<Horner<P>>) {
        *slot = Some(Horner::new(self.key.clone()));
    }

    fn finish(&self, _: &(), lane: &mut Horner<P>, len: usize) -> P::Acc {
        lane.finish(len)
    }

    fn conclude(&self, _: &(), sum: P::Acc, _len: usize) -> P::Acc {
        sum
    }

    fn zero(&self) -> P::Acc {
        self.key.zero()
    }

    fn combine(&self, mut a: P::Acc, b: P::Acc) -> P::Acc {
        self.key.add(&mut a, &b);
        a
    }
}

/// One lane of a [`Polynomial`] MAC. Invariant: `acc = sum over the blocks j < next this lane
/// absorbed of m_j * k^(next - j)`; `pend` is block `pend_at` as far as this lane holds it, not
/// yet in `acc`.
pub struct Horner<P: Polynomial> {
    key: P,
    acc: P::Acc,
    /// Index of the block after the last one in `acc` (0 while `acc` is zero).
    next: u64,
    pend: [u8; 16],
    /// Block index of `pend` (`u64::MAX`: none).
    pend_at: u64,
    pend_lead: bool,
    /// `acc` may be non-zero: a seed ([`Horner::seed`]) or an absorbed block. Until then a jump
    /// over blocks of other lanes needs no multiplication (zero times a power is zero): a lane
    /// whose part starts at block `j` does not compute `k^j`.
    live: bool,
}

impl<P: Polynomial> Horner<P> {
    /// A lane that has absorbed nothing.
    pub fn new(key: P) -> Self {
        let acc = key.zero();
        Horner {
            key,
            acc,
            next: 0,
            pend: [0; 16],
            pend_at: u64::MAX,
            pend_lead: false,
            live: false,
        }
    }

    /// The key.
    pub fn key(&self) -> &P {
        &self.key
    }

    /// Starts the lane from `acc` as the value of blocks before block 0 (e.g. an AEAD's
    /// associated data): its contribution then includes `acc * k^N`. Only before the first
    /// absorbed byte (otherwise ignored); in the lane that absorbs payload byte 0.
    pub fn seed(&mut self, acc: P::Acc) {
        if self.next == 0 && self.pend_at == u64::MAX {
            self.acc = acc;
            self.live = true;
        }
    }

    /// Brings `acc` to `next = j` (blocks `next .. j` are not this lane's: zero).
    #[inline(always)]
    fn reach(&mut self, j: u64) {
        if j > self.next && self.live {
            self.key.shift(&mut self.acc, j - self.next);
        }
        self.next = j;
        self.live = true;
    }

    /// Adds the pending partial block to `acc`.
    #[inline(never)]
    fn flush(&mut self) {
        if self.pend_at != u64::MAX {
            self.reach(self.pend_at);
            self.key.block(&mut self.acc, &self.pend, self.pend_lead);
            self.next = self.pend_at + 1;
            self.pend = [0; 16];
            self.pend_at = u64::MAX;
            self.pend_lead = false;
        }
    }

    /// Absorbs payload bytes `at .. at + data.len()` (after every range absorbed before).
    pub fn absorb_at(&mut self, mut at: usize, mut data: &[u8]) {
        while !data.is_empty() {
            let j = (at / 16) as u64;
            let k = at % 16;
            if self.pend_at != u64::MAX && self.pend_at != j {
                self.flush();
            }
            if k == 0 && self.pend_at == u64::MAX && data.len() >= 16 {
                let n = data.len() & !15;
                self.reach(j);
                self.key.blocks(&mut self.acc, &data[..n]);
                self.next = j + (n / 16) as u64;
                at += n;
                data = &data[n..];
                continue;
            }
            let take = (16 - k).min(data.len());
            self.pend[k..k + take].copy_from_slice(&data[..take]);
            self.pend_at = j;
            self.pend_lead |= k == 0;
            at += take;
            data = &data[take..];
            if k + take == 16 {
                self.flush();
            }
        }
    }

    /// This lane's contribution to the polynomial of a `len`-byte payload:
    /// `sum_j m_j * k^(N - j)` over its blocks, `N = ceil(len / 16)`.
    pub fn finish(&mut self, len: usize) -> P::Acc {
        self.flush();
        if !self.live {
            return self.key.zero();
        }
        self.reach(len.div_ceil(16) as u64);
        self.acc
    }
}

impl<P: Polynomial> MacLane for Horner<P> {
    #[inline(always)]
    fn absorb(&mut self, at: usize, data: &[u8]) {
        self.absorb_at(at, data)
    }
}

impl<P: Polynomial> Drop for Horner<P> {
    fn drop(&mut self) {
        // The pending block holds payload bytes (plaintext when opening).
        zeroize::Zeroize::zeroize(&mut self.pend);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy polynomial MAC mod a 61-bit prime, with Poly1305's "2^128 bit" as an extra term
    /// `+ 1` per lead block, so the decomposition is checked with `lead` too.
    #[derive(Clone)]
    struct Toy(u128);
    const P: u128 = (1 << 61) - 1;
    fn val(b: &[u8; 16]) -> u128 {
        u128::from_le_bytes(*b) % P
    }
    impl Polynomial for Toy {
        type Acc = u128;
        fn zero(&self) -> u128 {
            0
        }
        fn blocks(&self, acc: &mut u128, blocks: &[u8]) {
            for b in blocks.chunks_exact(16) {
                self.block(acc, b.try_into().unwrap(), true);
            }
        }
        fn block(&self, acc: &mut u128, b: &[u8; 16], lead: bool) {
            *acc = (*acc + val(b) + lead as u128) % P * self.0 % P;
        }
        fn shift(&self, acc: &mut u128, n: u64) {
            for _ in 0..n {
                *acc = *acc * self.0 % P;
            }
        }
        fn add(&self, a: &mut u128, b: &u128) {
            *a = (*a + b) % P;
        }
    }

    fn whole(key: &Toy, data: &[u8]) -> u128 {
        let mut acc = 0;
        for c in data.chunks(16) {
            let mut b = [0u8; 16];
            b[..c.len()].copy_from_slice(c);
            key.block(&mut acc, &b, true);
        }
        acc
    }

    #[test]
    fn lanes_with_scattered_pieces_sum_to_the_whole_polynomial() {
        let key = Toy(0x1234_5678_9abc_def1);
        let data: [u8; 200] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        let want = whole(&key, &data);
        // Cut the payload at many points and deal the pieces round-robin to 1..=5 lanes.
        for lanes in 1..=5usize {
            for step in [1usize, 3, 7, 15, 16, 17, 31, 48, 64, 199, 200] {
                let mac = PolyMac {
                    key: key.clone(),
                    input: MacInput::Output,
                };
                let mut ls: [Option<Horner<Toy>>; 5] = Default::default();
                for l in ls.iter_mut() {
                    mac.lane_in(&(), data.len(), l);
                }
                let mut at = 0;
                let mut i = 0;
                while at < data.len() {
                    let e = (at + step + i % 3).min(data.len());
                    ls[i % lanes].as_mut().unwrap().absorb(at, &data[at..e]);
                    at = e;
                    i += 1;
                }
                let sum = ls
                    .iter_mut()
                    .map(|l| mac.finish(&(), l.as_mut().unwrap(), data.len()))
                    .fold(mac.zero(), |a, b| mac.combine(a, b));
                assert_eq!(sum, want, "{lanes} lanes, step {step}");
            }
        }
    }
}
