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

/// Quantised gradient of `d` (−255..=255), −4..=4.
pub const fn quantize(d: i32) -> i32 {
    if d <= -T3 {
        -4
    } else if d <= -T2 {
        -3
    } else if d <= -T1 {
        -2
    } else if d < 0 {
        -1
    } else if d == 0 {
        0
    } else if d < T1 {
        1
    } else if d < T2 {
        2
    } else if d < T3 {
        3
    } else {
        4
    }
}

/// `QUANT[d + 255]` = [`quantize`]`(d)`.
pub static QUANT: [i8; 511] = {
    let mut t = [0i8; 511];
    let mut i = 0;
    while i < 511 {
        t[i] = quantize(i as i32 - 255) as i8;
        i += 1;
    }
    t
};

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

    /// Updates A, B, C, N with a (modulo-reduced) error, as ISO/IEC 14495-1 A.6.1 / A.6.2.
    #[inline(always)]
    pub fn update(&mut self, err: i32) {
        let mut a = self.a as i32 + err.abs();
        let mut b = self.b as i32 + err;
        let mut n = self.n as i32;
        if n == RESET as i32 {
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

    /// Updates A, N, Nn (A.7.2.2).
    #[inline(always)]
    pub fn update(&mut self, err: i32, emerr: i32, ritype: i32) {
        if err < 0 {
            self.nn += 1;
        }
        self.a += (emerr + 1 - ritype) >> 1;
        if self.n == RESET as i32 {
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
    _pad: u16,
    /// Run-interruption contexts (RItype 0 and 1).
    pub run: [RunCtx; 2],
    /// `RUNindex`, 0..=31.
    pub run_index: u32,
}

impl Model {
    /// Fresh state (start of a scan, or after a restart marker).
    pub const fn new() -> Model {
        Model {
            ctx: [Ctx::INIT; CONTEXTS],
            _pad: 0,
            run: [RunCtx::INIT; 2],
            run_index: 0,
        }
    }

    /// Back to the initial state.
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

/// Context number `81 q1 + 9 q2 + q3` of the three local gradients.
#[inline(always)]
pub fn context(rd: i32, rb: i32, rc: i32, ra: i32) -> i32 {
    let q = |d: i32| QUANT[(d + 255) as usize] as i32;
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
            c.update(err);
            assert!((1..=64).contains(&c.n));
            assert!(c.b <= 0 && c.b as i32 > -(c.n as i32));
            assert!(c.a as i32 <= 64 * 128 + 4 + 128);
        }
    }
}
