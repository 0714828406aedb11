//! The LOCO-I context model of ISO/IEC 14495-1 for 8-bit samples, NEAR = 0, default parameters:
//! gradient quantisation (T1 = 3, T2 = 7, T3 = 21), 365 regular contexts (A, B, C, N with bias
//! correction and RESET = 64), the two run-interruption contexts and the run index with its
//! J table. Encoder and decoder share it.

/// Largest sample value (8 bits).
pub const MAXVAL: i32 = 255;
/// `RANGE` for NEAR = 0.
pub const RANGE: i32 = 256;
/// `qbpp`: bits of a mapped error in an escape code.
pub const QBPP: u32 = 8;
/// `LIMIT = 2 * (bpp + max(8, bpp))`: the longest regular-mode code, bits.
pub const LIMIT: u32 = 32;
/// `RESET`: counts are halved when `N` reaches it.
pub const RESET: u32 = 64;
/// Default gradient thresholds for MAXVAL = 255, NEAR = 0 (ISO/IEC 14495-1, C.2.4.1.1).
pub const T1: i32 = 3;
/// See [`T1`].
pub const T2: i32 = 7;
/// See [`T1`].
pub const T3: i32 = 21;
/// Initial `A`: `max(2, (RANGE + 32) / 64)`.
pub const A_INIT: u16 = 4;
/// Regular-mode contexts.
pub const CONTEXTS: usize = 365;

/// The run-length order table `J` (ISO/IEC 14495-1, A.7.1.2).
pub const J: [u8; 32] = [
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 9, 10, 11, 12, 13,
    14, 15,
];

/// The preset coding parameters of ISO/IEC 14495-1 (C.2.4.1.1) that a stream may set in an LSE
/// segment (id 1) for 8-bit samples, NEAR = 0: the gradient thresholds and RESET (MAXVAL stays
/// 255). [`Preset::DEFAULT`] is what a stream without LSE uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// Gradient thresholds, `1 <= t1 <= t2 <= t3 <= 255`.
    pub t1: u8,
    /// See [`Preset::t1`].
    pub t2: u8,
    /// See [`Preset::t1`].
    pub t3: u8,
    /// Counts are halved when `N` reaches RESET, `3..=255`.
    pub reset: u8,
}

impl Preset {
    /// The defaults for MAXVAL = 255, NEAR = 0: T1 = 3, T2 = 7, T3 = 21, RESET = 64.
    pub const DEFAULT: Preset = Preset {
        t1: T1 as u8,
        t2: T2 as u8,
        t3: T3 as u8,
        reset: RESET as u8,
    };

    /// The encoder's choice for pictures cut into 8 or more bands (restart intervals) per
    /// component: T1 = 3, T2 = 8, T3 = 128, RESET = 40. Every restart learns the contexts again;
    /// with a large T3 fewer of them are in use and each learns faster, and a smaller RESET
    /// follows a band's statistics sooner. Chosen by a sweep over the frame set
    /// (`examples/preset_sweep.rs`; docs/jpegls.md, "Bands and restart markers").
    pub const BANDED: Preset = Preset {
        t1: 3,
        t2: 8,
        t3: 128,
        reset: 40,
    };

    /// What [`crate::Plan::new`] codes a picture of `bands` bands per component with:
    /// [`Preset::DEFAULT`] below 8 bands (with one band the stream is CharLS's; with 4 the
    /// defaults code the frame set in fewer bytes), else [`Preset::BANDED`].
    pub const fn for_bands(bands: usize) -> Preset {
        if bands >= 8 {
            Preset::BANDED
        } else {
            Preset::DEFAULT
        }
    }

    /// The parameters if they are valid for 8-bit samples, NEAR = 0 (C.2.4.1.1): `None` otherwise.
    pub const fn new(t1: u8, t2: u8, t3: u8, reset: u8) -> Option<Preset> {
        if t1 >= 1 && t1 <= t2 && t2 <= t3 && reset >= 3 {
            Some(Preset { t1, t2, t3, reset })
        } else {
            None
        }
    }

    /// Whether these are the defaults (a stream then needs no LSE segment).
    pub const fn is_default(&self) -> bool {
        self.t1 == Self::DEFAULT.t1
            && self.t2 == Self::DEFAULT.t2
            && self.t3 == Self::DEFAULT.t3
            && self.reset == Self::DEFAULT.reset
    }

    /// Quantised gradient of `d` (−255..=255), −4..=4, with these thresholds.
    pub const fn quantize(&self, d: i32) -> i32 {
        let (t1, t2, t3) = (self.t1 as i32, self.t2 as i32, self.t3 as i32);
        if d <= -t3 {
            -4
        } else if d <= -t2 {
            -3
        } else if d <= -t1 {
            -2
        } else if d < 0 {
            -1
        } else if d == 0 {
            0
        } else if d < t1 {
            1
        } else if d < t2 {
            2
        } else if d < t3 {
            3
        } else {
            4
        }
    }

    /// The gradient quantisation table `table[d + 255] = scale · Q(d)` (`scale` 1 for the
    /// portable coder's [`QUANT`], 6 for the PULP coder's byte offsets).
    pub const fn table(&self, scale: i8) -> [i8; 511] {
        let mut t = [0i8; 511];
        let mut i = 0;
        while i < 511 {
            t[i] = scale * self.quantize(i as i32 - 255) as i8;
            i += 1;
        }
        t
    }
}

impl Preset {
    /// Writes [`Preset::table`]`(scale)` into `t` a run of equal entries at a time (9 runs: what
    /// core 0 does in L1 before the cluster's fork, without a 511-byte table on its stack).
    pub fn fill_table(&self, scale: i8, t: &mut [i8; 511]) {
        let (t1, t2, t3) = (self.t1 as usize, self.t2 as usize, self.t3 as usize);
        // `t[d + 255]`: d <= −T3, −T3 < d <= −T2, −T2 < d <= −T1, −T1 < d < 0, 0, 0 < d < T1,
        // T1 <= d < T2, T2 <= d < T3, d >= T3.
        let ends = [
            256 - t3,
            256 - t2,
            256 - t1,
            255,
            256,
            255 + t1,
            255 + t2,
            255 + t3,
            511,
        ];
        let mut start = 0;
        for (q, end) in (-4i8..=4).zip(ends) {
            t[start..end].fill(scale * q);
            start = end;
        }
    }
}

impl Default for Preset {
    fn default() -> Self {
        Preset::DEFAULT
    }
}

/// Quantised gradient of `d` (−255..=255), −4..=4, with the default thresholds.
pub const fn quantize(d: i32) -> i32 {
    Preset::DEFAULT.quantize(d)
}

/// `QUANT[d + 255]` = [`quantize`]`(d)`: the default thresholds' table.
pub static QUANT: [i8; 511] = Preset::DEFAULT.table(1);

/// One regular-mode context: 6 bytes (the cluster keeps one set per core in L1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Ctx {
    /// Sum of |errors| (≤ 64 · 128 + 4 for 8-bit lossless).
    pub a: u16,
    /// Bias accumulator, in (−N, 0] after every update.
    pub b: i16,
    /// Prediction correction, −128..=127.
    pub c: i8,
    /// Occurrences, 1..=64.
    pub n: u8,
}

impl Ctx {
    /// The initial state.
    pub const INIT: Ctx = Ctx {
        a: A_INIT,
        b: 0,
        c: 0,
        n: 1,
    };

    /// Golomb parameter: the least `k` with `N << k >= A`.
    #[inline(always)]
    pub fn k(&self) -> u32 {
        let (n, a) = (self.n as u32, self.a as u32);
        let mut k = 0;
        while (n << k) < a {
            k += 1;
        }
        k
    }

    /// Updates A, B, C, N with a (modulo-reduced) error, as ISO/IEC 14495-1 A.6.1 / A.6.2;
    /// `reset` is the stream's RESET ([`Preset::reset`]).
    #[inline(always)]
    pub fn update(&mut self, err: i32, reset: i32) {
        let mut a = self.a as i32 + err.abs();
        let mut b = self.b as i32 + err;
        let mut n = self.n as i32;
        if n == reset {
            a >>= 1;
            b >>= 1;
            n >>= 1;
        }
        n += 1;
        let mut c = self.c as i32;
        if b + n <= 0 {
            b += n;
            if b <= -n {
                b = -n + 1;
            }
            if c > -128 {
                c -= 1;
            }
        } else if b > 0 {
            b -= n;
            if b > 0 {
                b = 0;
            }
            if c < 127 {
                c += 1;
            }
        }
        *self = Ctx {
            a: a as u16,
            b: b as i16,
            c: c as i8,
            n: n as u8,
        };
    }

    /// The error-correction mask of A.5.2 for NEAR = 0: −1 when `k == 0` and `2B <= −N`.
    #[inline(always)]
    pub fn correction(&self, k: u32) -> i32 {
        if k == 0 {
            (2 * self.b as i32 + self.n as i32 - 1) >> 31
        } else {
            0
        }
    }
}

/// A run-interruption context (index 365 + RItype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct RunCtx {
    pub a: i32,
    pub n: i32,
    pub nn: i32,
}

impl RunCtx {
    /// The initial state.
    pub const INIT: RunCtx = RunCtx {
        a: A_INIT as i32,
        n: 1,
        nn: 0,
    };

    /// Golomb parameter of A.7.2.1: the least `k` with `N << k >= A + (N >> 1) * RItype`.
    #[inline(always)]
    pub fn k(&self, ritype: i32) -> u32 {
        let t = self.a + (self.n >> 1) * ritype;
        let mut k = 0;
        while k < 31 && (self.n << k) < t {
            k += 1;
        }
        k
    }

    /// The `map` bit of A.7.2.1.
    #[inline(always)]
    pub fn map(&self, err: i32, k: u32) -> bool {
        (k == 0 && err > 0 && 2 * self.nn < self.n)
            || (err < 0 && (2 * self.nn >= self.n || k != 0))
    }

    /// Updates A, N, Nn (A.7.2.2); `reset` is the stream's RESET.
    #[inline(always)]
    pub fn update(&mut self, err: i32, emerr: i32, ritype: i32, reset: i32) {
        if err < 0 {
            self.nn += 1;
        }
        self.a += (emerr + 1 - ritype) >> 1;
        if self.n == reset {
            self.a >>= 1;
            self.n >>= 1;
            self.nn >>= 1;
        }
        self.n += 1;
    }
}

/// The whole adaptive state of one component of one restart interval.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Model {
    /// Regular contexts, indexed by |Q|.
    pub ctx: [Ctx; CONTEXTS],
    /// RESET of the stream ([`Preset::reset`], 3..=255): kept by [`Model::reset`].
    pub reset_at: u16,
    /// Run-interruption contexts (RItype 0 and 1).
    pub run: [RunCtx; 2],
    /// `RUNindex`, 0..=31.
    pub run_index: u32,
}

impl Model {
    /// Fresh state (start of a scan, or after a restart marker) with the default RESET.
    pub const fn new() -> Model {
        Model::with_reset(RESET as u16)
    }

    /// Fresh state with the stream's RESET ([`Preset::reset`]).
    pub const fn with_reset(reset: u16) -> Model {
        Model {
            ctx: [Ctx::INIT; CONTEXTS],
            reset_at: reset,
            run: [RunCtx::INIT; 2],
            run_index: 0,
        }
    }

    /// Back to the initial state (RESET, [`Model::reset_at`], stays).
    ///
    /// The contexts' initial bytes repeat every 12 bytes (two contexts), so they are written as
    /// three words at a time, a third of the stores of six-byte structures: every cluster core
    /// resets a model at the start of each band, before its first sample.
    pub fn reset(&mut self) {
        let pair = [Ctx::INIT; 2];
        let pat: [u32; 3] = bytemuck::cast(pair);
        let bytes: &mut [u8] = bytemuck::bytes_of_mut(&mut self.ctx);
        let whole = bytes.len() / 12 * 12;
        match bytemuck::try_cast_slice_mut::<u8, u32>(&mut bytes[..whole]) {
            Ok(words) => {
                // Three plain stores (`copy_from_slice` would call memcpy for 12 bytes).
                for w in words.chunks_exact_mut(3) {
                    w[0] = pat[0];
                    w[1] = pat[1];
                    w[2] = pat[2];
                }
                for c in &mut self.ctx[whole / 6..] {
                    *c = Ctx::INIT;
                }
            }
            // Not 4-aligned: does not happen (the run contexts' i32 fields align the model, the
            // contexts are at its start); one context at a time rather than a panic.
            Err(_) => self.ctx = [Ctx::INIT; CONTEXTS],
        }
        self.run = [RunCtx::INIT; 2];
        self.run_index = 0;
    }
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

/// The median edge detector (MED) prediction.
#[inline(always)]
pub fn predict(ra: i32, rb: i32, rc: i32) -> i32 {
    let (mn, mx) = if ra < rb { (ra, rb) } else { (rb, ra) };
    if rc >= mx {
        mn
    } else if rc <= mn {
        mx
    } else {
        ra + rb - rc
    }
}

/// Context number `81 q1 + 9 q2 + q3` of the three local gradients (default thresholds).
#[inline(always)]
pub fn context(rd: i32, rb: i32, rc: i32, ra: i32) -> i32 {
    context_with(&QUANT, rd, rb, rc, ra)
}

/// [`context`] with the quantisation table `quant` ([`Preset::table`]`(1)`).
#[inline(always)]
pub fn context_with(quant: &[i8; 511], rd: i32, rb: i32, rc: i32, ra: i32) -> i32 {
    let q = |d: i32| quant[(d + 255) as usize] as i32;
    (q(rd - rb) * 9 + q(rb - rc)) * 9 + q(rc - ra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_gives_a_fresh_model() {
        let mut m = Model::new();
        for (i, c) in m.ctx.iter_mut().enumerate() {
            *c = Ctx {
                a: i as u16 + 7,
                b: -(i as i16),
                c: i as i8,
                n: (i % 64) as u8 + 2,
            };
        }
        m.run[1].a = 99;
        m.run_index = 5;
        m.reset();
        assert_eq!(bytemuck::bytes_of(&m), bytemuck::bytes_of(&Model::new()));
    }

    #[test]
    fn med_matches_the_standards_definition() {
        for ra in (0..256).step_by(17) {
            for rb in (0..256).step_by(13) {
                for rc in (0..256).step_by(11) {
                    let want = if rc >= ra.max(rb) {
                        ra.min(rb)
                    } else if rc <= ra.min(rb) {
                        ra.max(rb)
                    } else {
                        ra + rb - rc
                    };
                    assert_eq!(predict(ra, rb, rc), want);
                }
            }
        }
    }

    #[test]
    fn preset_tables() {
        assert_eq!(Preset::DEFAULT.table(1), QUANT);
        let mut t = [0i8; 511];
        for (t1, t2, t3) in [
            (1, 1, 1),
            (3, 7, 21),
            (3, 8, 128),
            (1, 255, 255),
            (255, 255, 255),
        ] {
            for scale in [1, 6] {
                let p = Preset::new(t1, t2, t3, 40).unwrap();
                p.fill_table(scale, &mut t);
                assert_eq!(t, p.table(scale));
                for d in -255..=255 {
                    let q = p.quantize(d);
                    assert_eq!(t[(d + 255) as usize] as i32, scale as i32 * q);
                    // C.3.3: the regions of the thresholds.
                    let want = match d {
                        d if d <= -(t3 as i32) => -4,
                        d if d <= -(t2 as i32) => -3,
                        d if d <= -(t1 as i32) => -2,
                        d if d < 0 => -1,
                        0 => 0,
                        d if d < t1 as i32 => 1,
                        d if d < t2 as i32 => 2,
                        d if d < t3 as i32 => 3,
                        _ => 4,
                    };
                    assert_eq!(q, want, "{p:?} {d}");
                }
            }
        }
        assert_eq!(Preset::new(0, 7, 21, 64), None);
        assert_eq!(Preset::new(8, 7, 21, 64), None);
        assert_eq!(Preset::new(3, 22, 21, 64), None);
        assert_eq!(Preset::new(3, 7, 21, 2), None);
        assert!(Preset::new(3, 7, 21, 64).unwrap().is_default());
        assert!(!Preset::BANDED.is_default());
        assert_eq!(Preset::for_bands(7), Preset::DEFAULT);
        assert_eq!(Preset::for_bands(8), Preset::BANDED);
    }

    #[test]
    fn quantisation_regions() {
        assert_eq!(
            [
                -255, -21, -20, -7, -6, -3, -2, -1, 0, 1, 2, 3, 6, 7, 20, 21, 255
            ]
            .map(quantize),
            [-4, -4, -3, -3, -2, -2, -1, -1, 0, 1, 1, 2, 2, 3, 3, 4, 4]
        );
        // 365 contexts: |Q| of the 729 triples, Q and −Q merged.
        let mut max = 0;
        for q1 in -4..=4 {
            for q2 in -4..=4 {
                for q3 in -4..=4 {
                    let q: i32 = (q1 * 9 + q2) * 9 + q3;
                    max = max.max(q.abs());
                }
            }
        }
        assert_eq!(max as usize, CONTEXTS - 1);
    }

    #[test]
    fn k_is_the_least_with_n_shifted_at_least_a() {
        for n in 1..=64u8 {
            for a in [1u16, 2, 3, 4, 5, 63, 64, 65, 1000, 8196] {
                let c = Ctx { a, b: 0, c: 0, n };
                let k = c.k();
                assert!((n as u32) << k >= a as u32);
                assert!(k == 0 || ((n as u32) << (k - 1)) < a as u32);
            }
        }
    }

    #[test]
    fn context_update_keeps_its_ranges() {
        let mut c = Ctx::INIT;
        let mut x = 12345u32;
        for _ in 0..100_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let err = ((x >> 16) as i32 & 255) - 128;
            c.update(err, RESET as i32);
            assert!((1..=64).contains(&c.n));
            assert!(c.b <= 0 && c.b as i32 > -(c.n as i32));
            assert!(c.a as i32 <= 64 * 128 + 4 + 128);
        }
    }
}
