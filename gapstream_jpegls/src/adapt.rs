//! The band count and preset of a frame chosen from the frame itself ([`BandChooser`], with
//! [`estimate`]).
//!
//! Every restart costs a frame its first line coded against zeros and the context model learnt
//! again. On a picture that codes as the photographs do (1.7 bits a sample and more on the frame
//! set) 8 bands stay within 1.05× of one scan; on a picture that codes in few bits a sample (the
//! synthetic pattern: 1.2 bits a sample with 8 bands) the same restarts are a much larger share of
//! the stream, and fewer bands with a preset for them keep it within 1.05×. Such pictures are also
//! the fastest to code per sample (long runs), so fewer cores code them in about the time 8 cores
//! take for a photograph.
//!
//! Which kind a frame is comes from a cheap look at its own pixels before it is coded
//! ([`estimate`]): on a few lines of each plane, the LOCO-I prediction residual of every sample
//! (MED), its bit length as a stand-in for its Golomb code's length, and the samples of a run
//! (entered where the gradients are all zero, as the coder does) as free but the one that ends
//! it. Integer only, no
//! allocation, the same on every target: the host's coder, the firmware's and the checkers take
//! the same plan for the same frame.
use crate::encode::Plan;
use crate::model::{Preset, predict};
use crate::{EncodeError, Layout};

/// Lines the estimate reads: line 1 of each plane (with line 0 above it), then every
/// `ESTIMATE_LINE_STEP`-th line (62, 123, 184 of a 244-line frame), each with the line above.
/// An odd step: with an even one (16, in an earlier version of the estimate) the moon
/// photograph's estimate was 0.8 bits a sample for some crops and 1.7 for others, by the parity
/// of the crop's first line (its lines come in near-equal pairs); an odd step reads both.
pub const ESTIMATE_LINE_STEP: usize = 61;

/// `COST[e & 511]`: `1 + bits(|e|)` for `e` in −255 ..= 255 (`bits(0)` = 0), the proxy length of a
/// sample coded in regular mode with MED residual `e`; a negative `e` is at `512 + e`, so that a
/// residual's entry is one `and` away, with neither its absolute value nor a bounds check
/// (entry 256, for −256, is no residual's).
const COST: [u8; 512] = {
    let mut t = [0u8; 512];
    let mut v = 0;
    while v < 256 {
        let len = 1 + (u32::BITS - (v as u32).leading_zeros()) as u8;
        t[v] = len;
        t[(512 - v) % 512] = len;
        v += 1;
    }
    t
};

/// The proxy length of a residual `e` (−255 ..= 255): [`COST`]'s entry.
#[inline(always)]
fn cost(e: i32) -> u32 {
    COST[(e as u32 & 511) as usize] as u32
}

/// What [`estimate`] found: the proxy code length of the samples it read, in bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Estimate {
    /// The samples' proxy code lengths, summed: `1 + bits(|e|)` for a sample coded in regular
    /// mode (MED residual `e`), 0 for a sample a run codes, `2 + bits(|x − Rb|)` for the
    /// sample that ends a run.
    pub bits: u64,
    /// Samples read.
    pub samples: u64,
}

impl Estimate {
    /// Thousandths of a bit a sample ([`u32::MAX`] when no sample was read).
    pub const fn millibits(&self) -> u32 {
        match self.bits.saturating_mul(1000).checked_div(self.samples) {
            Some(m) if m <= u32::MAX as u64 => m as u32,
            _ => u32::MAX,
        }
    }

    /// True when the estimate is below `millibits` thousandths of a bit a sample (false when no
    /// sample was read). Exact: no rounding of the quotient.
    pub const fn below(&self, millibits: u32) -> bool {
        self.samples != 0
            && (self.bits as u128) * 1000 < (millibits as u128) * (self.samples as u128)
    }
}

/// The proxy cost of a line so far: the three neighbours of the next sample (Ra, Rb, Rc), whether
/// a run is on, and the bits of the samples read.
struct Scan {
    a: i32,
    b: i32,
    c: i32,
    run: bool,
    bits: u32,
}

impl Scan {
    /// Before sample 1: `c0`, `b0` the first two samples of the line above, `a0` the line's first.
    fn new(c0: u8, b0: u8, a0: u8) -> Scan {
        Scan {
            a: a0 as i32,
            b: b0 as i32,
            c: c0 as i32,
            run: false,
            bits: 0,
        }
    }

    /// One sample: `x`, with `d` (Rd) the sample above and to the right of it.
    #[inline(always)]
    fn sample(&mut self, d: u32, x: u32) {
        let (d, x) = (d as i32, x as i32);
        let Scan { a, b, c, .. } = *self;
        // In a run (A.7, entered where the gradients are all zero): the samples equal to the
        // run's value are free; the one that ends it is coded against Rb (a run-interruption
        // sample), plus a bit for the run's length.
        self.run = self.run || (d == b && b == c && c == a);
        if self.run {
            if x != a {
                self.run = false;
                self.bits += 1 + cost(x - b);
            }
        } else {
            // MED (A.2.1).
            // (MED is symmetric in Ra and Rb: with them in order the compiler drops its first
            // comparison, one branch less on the FC.)
            let p = if a < b {
                predict(a, b, c)
            } else {
                predict(b, a, c)
            };
            self.bits += cost(x - p);
        }
        (self.a, self.c, self.b) = (x, b, d);
    }
}

/// One line's proxy cost: `up` and `cur` are the samples of the line above and of the line
/// (same length). Samples 1 ..= len − 2 (those with all four neighbours) are read.
fn line_cost<'a>(
    mut up: impl Iterator<Item = &'a u8>,
    mut cur: impl Iterator<Item = &'a u8>,
) -> (u32, u32) {
    let (Some(&c0), Some(&b0), Some(&a0)) = (up.next(), up.next(), cur.next()) else {
        return (0, 0);
    };
    let mut s = Scan::new(c0, b0, a0);
    let mut n = 0;
    for (&d, &x) in up.zip(cur) {
        s.sample(d as u32, x as u32);
        n += 1;
    }
    (s.bits, n)
}

/// [`line_cost`] of two contiguous lines (a grey picture's), 4 samples of each line a word load
/// where both lines are aligned alike, the few samples at their ends and any other pair of lines
/// by bytes; the same sums as [`line_cost`] of their bytes. (On the GAP8 model the FC waits 9
/// cycles for every load from L2, a word as long as a byte: docs/jpegls.md, "Bands chosen per
/// frame". Out of line: one copy of the unrolled loop for every line, with its own registers.)
#[inline(never)]
fn line_cost_words(up: &[u8], cur: &[u8]) -> (u32, u32) {
    let len = cur.len().min(up.len());
    let (up, cur) = (&up[..len], &cur[..len]);
    let (uh, uw, _) = bytemuck::pod_align_to::<u8, u32>(up);
    let (ch, cw, _) = bytemuck::pod_align_to::<u8, u32>(cur);
    // Word j of `cw` holds samples h0 + 4j ..= h0 + 4j + 3 of the line, `uw`'s of the line above
    // when both have the same head. The words start at sample h (1 ..= 4; sample 0 is no
    // sample's), and a word of samples needs the next word of the line above (Rd of its last).
    let h0 = ch.len();
    let j0 = usize::from(h0 == 0);
    let h = h0 + 4 * j0;
    let words = if uh.len() == h0 && len >= 3 {
        cw.len()
            .saturating_sub(j0)
            .min(uw.len().saturating_sub(j0 + 1))
            .min((len - 1).saturating_sub(h) / 4)
    } else {
        0
    };
    if words == 0 {
        return line_cost(up.iter(), cur.iter());
    }
    let mut s = Scan::new(up[0], up[1], cur[0]);
    for i in 1..h {
        s.sample(up[i + 1] as u32, cur[i] as u32);
    }
    // `from_le`: sample 4j + k in bits 8k .. 8k + 8 on any host.
    let mut wu = u32::from_le(uw[j0]);
    for (&wc, &next) in cw[j0..j0 + words].iter().zip(&uw[j0 + 1..=j0 + words]) {
        let (wc, wn) = (u32::from_le(wc), u32::from_le(next));
        s.sample((wu >> 8) & 0xff, wc & 0xff);
        s.sample((wu >> 16) & 0xff, (wc >> 8) & 0xff);
        s.sample(wu >> 24, (wc >> 16) & 0xff);
        s.sample(wn & 0xff, wc >> 24);
        wu = wn;
    }
    for i in h + 4 * words..len - 1 {
        s.sample(up[i + 1] as u32, cur[i] as u32);
    }
    (s.bits, len as u32 - 2)
}

/// The estimate of a `width × height` picture in `layout` (for a Bayer mosaic each of the four
/// planes) from its lines 1, 1 + [`ESTIMATE_LINE_STEP`], …: see the module docs. Deterministic,
/// integer only, no allocation; reads `2 · ⌈(plane height − 1) / ESTIMATE_LINE_STEP⌉` lines of
/// each plane. A picture of one line or fewer than three columns (per plane) has no sample
/// read ([`Estimate::samples`] 0).
pub fn estimate(
    width: usize,
    height: usize,
    layout: Layout,
    pixels: &[u8],
) -> Result<Estimate, EncodeError> {
    // Validates the size and the layout.
    let plan = Plan::new(width, height, layout, 1)?;
    if width.checked_mul(height) != Some(pixels.len()) {
        return Err(EncodeError::Input);
    }
    let mut e = Estimate::default();
    for comp in 0..plan.components() {
        for y in (1..plan.plane_height()).step_by(ESTIMATE_LINE_STEP) {
            let (bits, n) = match layout {
                Layout::Grey => line_cost_words(
                    &pixels[(y - 1) * width..][..width],
                    &pixels[y * width..][..width],
                ),
                Layout::BayerRggb => {
                    let row =
                        |y: usize| &pixels[(2 * y + comp / 2) * width + comp % 2..][..width - 1];
                    line_cost(row(y - 1).iter().step_by(2), row(y).iter().step_by(2))
                }
            };
            e.bits += bits as u64;
            e.samples += n as u64;
        }
    }
    Ok(e)
}

/// Chooses a frame's [`Plan`] from the frame itself: `bands` bands with [`Plan::new`]'s preset,
/// or [`BandChooser::SPARSE_BANDS`] bands with [`BandChooser::SPARSE_PRESET`] when the frame's
/// [`estimate`] is below [`BandChooser::SPARSE_BELOW_MILLIBITS`] thousandths of a bit a sample.
///
/// Nothing carries over from one frame to the next: the same frame always gets the same plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandChooser {
    bands: usize,
}

impl BandChooser {
    /// Bands of a sparse frame (when the chooser's `bands` is larger).
    pub const SPARSE_BANDS: usize = 5;
    /// The preset of a sparse frame: T1 = 4, T2 = 12, T3 = 128, RESET = 4. With 5 bands the
    /// best for the synthetic pattern of a sweep over 4,321 settings with small RESET
    /// (`PRESET_GRID=sparse PRESET_BANDS=5` in `examples/preset_sweep.rs`: 1.037× CharLS; RESET
    /// decides, T1 and T2 hardly matter to it), and of the settings that give it that, one that
    /// costs a photograph coded with it less: 1.07–1.11× against up to 1.20× with T1 = 1, T2 = 2.
    pub const SPARSE_PRESET: Preset = Preset {
        t1: 4,
        t2: 12,
        t3: 128,
        reset: 4,
    };
    /// A frame is sparse when its [`estimate`] is below this many thousandths of a bit a sample
    /// (calibration: docs/jpegls.md, "Bands chosen per frame").
    pub const SPARSE_BELOW_MILLIBITS: u32 = 870;

    /// A chooser for a coder of `bands` bands per component (its core count).
    pub const fn new(bands: usize) -> BandChooser {
        BandChooser { bands }
    }

    /// The coder's band count (what a frame that is not sparse gets).
    pub const fn max_bands(&self) -> usize {
        self.bands
    }

    /// True when a frame of estimate `e` is sparse.
    pub const fn is_sparse(e: &Estimate) -> bool {
        e.below(Self::SPARSE_BELOW_MILLIBITS)
    }

    /// The band count of a frame of estimate `e`.
    pub const fn bands_for(&self, e: &Estimate) -> usize {
        if Self::is_sparse(e) && self.bands > Self::SPARSE_BANDS {
            Self::SPARSE_BANDS
        } else {
            self.bands
        }
    }

    /// The plan of a frame of estimate `e` ([`estimate`] of the frame): [`Plan::new`] with
    /// [`BandChooser::bands_for`], with [`BandChooser::SPARSE_PRESET`] when the band count was
    /// lowered.
    pub fn plan_for(
        &self,
        width: usize,
        height: usize,
        layout: Layout,
        e: &Estimate,
    ) -> Result<Plan, EncodeError> {
        let bands = self.bands_for(e);
        let plan = Plan::new(width, height, layout, bands)?;
        Ok(if bands < self.bands {
            plan.with_preset(Self::SPARSE_PRESET)
        } else {
            plan
        })
    }

    /// The plan of the frame `pixels` (`width × height` in `layout`): [`estimate`], then
    /// [`BandChooser::plan_for`].
    pub fn plan(
        &self,
        width: usize,
        height: usize,
        layout: Layout,
        pixels: &[u8],
    ) -> Result<Plan, EncodeError> {
        let e = estimate(width, height, layout, pixels)?;
        self.plan_for(width, height, layout, &e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const W: usize = 324;
    const H: usize = 244;

    /// The estimate written out from the module docs, sample by sample on the planes' lines
    /// (`Plan::plane_line`): the reference the proptest holds `estimate` to.
    fn reference(width: usize, height: usize, layout: Layout, pixels: &[u8]) -> Estimate {
        let plan = Plan::new(width, height, layout, 1).unwrap();
        let pw = plan.plane_width();
        let (mut up, mut cur) = (vec![0u8; pw], vec![0u8; pw]);
        let mut e = Estimate::default();
        for comp in 0..plan.components() {
            let mut y = 1;
            while y < plan.plane_height() {
                plan.plane_line(pixels, comp, y - 1, &mut up);
                plan.plane_line(pixels, comp, y, &mut cur);
                let mut run = false;
                for x in 1..pw.saturating_sub(1) {
                    let (a, b, c, d, v) = (
                        cur[x - 1] as i32,
                        up[x] as i32,
                        up[x - 1] as i32,
                        up[x + 1] as i32,
                        cur[x] as i32,
                    );
                    e.samples += 1;
                    if !run && a == b && b == c && c == d {
                        run = true;
                    }
                    let len = |v: i32| (32 - v.unsigned_abs().leading_zeros()) as u64;
                    if run {
                        if v != a {
                            run = false;
                            e.bits += 2 + len(v - b);
                        }
                    } else {
                        let p = if c >= a.max(b) {
                            a.min(b)
                        } else if c <= a.min(b) {
                            a.max(b)
                        } else {
                            a + b - c
                        };
                        e.bits += 1 + len(v - p);
                    }
                }
                y += ESTIMATE_LINE_STEP;
            }
        }
        e
    }

    #[test]
    fn costs() {
        for e in -255i32..=255 {
            assert_eq!(cost(e), 1 + u32::BITS - e.unsigned_abs().leading_zeros());
        }
    }

    #[test]
    fn flat_frames_are_all_run_and_sparse() {
        let e = estimate(W, H, Layout::Grey, &vec![77; W * H]).unwrap();
        let lines = (H - 1).div_ceil(ESTIMATE_LINE_STEP) as u64;
        assert_eq!(
            e,
            Estimate {
                bits: 0,
                samples: lines * (W as u64 - 2)
            }
        );
        assert!(BandChooser::is_sparse(&e));
        let plan = BandChooser::new(8)
            .plan(W, H, Layout::Grey, &vec![77; W * H])
            .unwrap();
        assert_eq!(
            plan,
            Plan::new(W, H, Layout::Grey, BandChooser::SPARSE_BANDS)
                .unwrap()
                .with_preset(BandChooser::SPARSE_PRESET)
        );
    }

    #[test]
    fn known_residuals() {
        // A horizontal ramp: every line equal, x + 10 at column x. MED predicts from above and
        // left: a = x + 9, b = x + 10, c = x + 9 gives a + b - c = x + 10, residual 0: 1 bit each.
        let px: Vec<u8> = (0..W * H).map(|i| (i % W + 10) as u8).collect();
        let e = estimate(W, H, Layout::Grey, &px).unwrap();
        assert_eq!(e.bits, e.samples);
        assert_eq!(e.millibits(), 1000);
        // Every other sample 0 / 200 in a checkerboard: no runs, MED gives the worst guesses.
        let px: Vec<u8> = (0..W * H)
            .map(|i| if (i % W + i / W) % 2 == 0 { 0 } else { 200 })
            .collect();
        let e = estimate(W, H, Layout::Grey, &px).unwrap();
        assert_eq!(e, reference(W, H, Layout::Grey, &px));
        assert_eq!(e.bits, 9 * e.samples);
        assert!(!BandChooser::is_sparse(&e));
        assert_eq!(
            BandChooser::new(8)
                .plan(W, H, Layout::Grey, &px)
                .unwrap()
                .bands(),
            8
        );
    }

    #[test]
    fn the_threshold_is_exact() {
        let t = BandChooser::SPARSE_BELOW_MILLIBITS as u64;
        let below = Estimate {
            bits: t - 1,
            samples: 1000,
        };
        let at = Estimate {
            bits: t,
            samples: 1000,
        };
        assert!(BandChooser::is_sparse(&below));
        assert!(!BandChooser::is_sparse(&at));
        assert_eq!(at.millibits(), t as u32);
        // No sample read (a tiny picture): not sparse, the coder's band count.
        assert!(!BandChooser::is_sparse(&Estimate::default()));
        assert_eq!(Estimate::default().millibits(), u32::MAX);
        assert_eq!(
            estimate(2, 100, Layout::Grey, &[0; 200]).unwrap().samples,
            0
        );
        assert_eq!(
            estimate(100, 1, Layout::Grey, &[0; 100]).unwrap().samples,
            0
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(estimate(0, 5, Layout::Grey, &[]), Err(EncodeError::Size));
        assert_eq!(
            estimate(4, 4, Layout::Grey, &[0; 15]),
            Err(EncodeError::Input)
        );
        assert_eq!(
            estimate(5, 4, Layout::BayerRggb, &[0; 20]),
            Err(EncodeError::OddBayer)
        );
        assert_eq!(
            BandChooser::new(8).plan(4, 4, Layout::Grey, &[0; 17]),
            Err(EncodeError::Input)
        );
    }

    #[test]
    fn few_cores_never_get_more_bands() {
        let flat = vec![9u8; W * H];
        for bands in 1..=BandChooser::SPARSE_BANDS {
            assert_eq!(
                BandChooser::new(bands)
                    .plan(W, H, Layout::Grey, &flat)
                    .unwrap(),
                Plan::new(W, H, Layout::Grey, bands).unwrap()
            );
        }
    }

    fn picture(w: usize, h: usize, kind: u8, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..w * h)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let (x, y) = (i % w, i / w);
                match kind % 4 {
                    0 => s as u8,
                    1 => ((x + 2 * y) as u64).wrapping_add(s % 4) as u8,
                    2 => {
                        if (x / 9 + y / 4) % 3 == 0 {
                            17
                        } else {
                            230
                        }
                    }
                    _ => (s % 3) as u8 + 100,
                }
            })
            .collect()
    }

    proptest! {
        #[test]
        fn estimate_is_the_reference_and_deterministic(
            w in 1usize..=400,
            h in 1usize..=300,
            kind in any::<u8>(),
            seed in any::<u64>(),
            bayer in any::<bool>(),
            bands in 1usize..=16,
        ) {
            let layout = if bayer { Layout::BayerRggb } else { Layout::Grey };
            let (w, h) = if bayer { ((w + 1) & !1, (h + 1) & !1) } else { (w, h) };
            let px = picture(w, h, kind, seed);
            let e = estimate(w, h, layout, &px).unwrap();
            prop_assert_eq!(e, reference(w, h, layout, &px));
            prop_assert_eq!(e, estimate(w, h, layout, &px).unwrap());
            prop_assert!(e.bits <= 10 * e.samples);
            let c = BandChooser::new(bands);
            let plan = c.plan(w, h, layout, &px).unwrap();
            prop_assert_eq!(plan, c.plan_for(w, h, layout, &e).unwrap());
            let sparse = e.samples != 0 && (e.bits as u128) * 1000
                < BandChooser::SPARSE_BELOW_MILLIBITS as u128 * e.samples as u128;
            if sparse && bands > BandChooser::SPARSE_BANDS {
                prop_assert_eq!(
                    plan,
                    Plan::new(w, h, layout, BandChooser::SPARSE_BANDS)
                        .unwrap()
                        .with_preset(BandChooser::SPARSE_PRESET)
                );
            } else {
                prop_assert_eq!(plan, Plan::new(w, h, layout, bands).unwrap());
            }
            // A wrong length is an error, never a panic.
            prop_assert_eq!(estimate(w, h, layout, &px[..px.len() - 1]), Err(EncodeError::Input));
        }

        /// The word loop on two lines at every alignment of each (the same: word loads; not the
        /// same: the byte loop), any length, against [`reference`] of the two lines.
        #[test]
        fn word_loads_at_every_alignment(
            len in 1usize..=400,
            up_at in 0usize..8,
            cur_at in 0usize..8,
            same in any::<bool>(),
            kind in any::<u8>(),
            seed in any::<u64>(),
        ) {
            // Lines 408 bytes apart: at the same alignment when `same`.
            let cur_at = if same { up_at } else { cur_at };
            let px = picture(408, 2, kind, seed);
            let (up, cur) = (&px[up_at..][..len], &px[408 + cur_at..][..len]);
            let r = reference(len, 2, Layout::Grey, &[up, cur].concat());
            prop_assert_eq!(line_cost_words(up, cur), (r.bits as u32, r.samples as u32));
        }
    }
}
