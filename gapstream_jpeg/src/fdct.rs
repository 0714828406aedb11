//! The forward DCT: one fixed-point arithmetic, two implementations that give the same bits.
//!
//! Each 1-D pass is an 8-point DCT computed as dot products of 16-bit values with 16-bit
//! coefficients (the shape of RI5CY's `pv.dotsp.h` / `pv.sdotsp.h`, two products per
//! instruction), after an even/odd butterfly that halves the products: for `u` even
//! `X(u) = sum_{n<4} C[u][n] (x_n + x_{7-n})`, for `u` odd `X(u) = sum_{n<4} C[u][n] (x_n - x_{7-n})`,
//! `C[u][n] = round(2^15 * c(u)/2 * cos((2n+1) u pi / 16))`, `c(0) = 1/sqrt 2`, else 1.
//!
//! * Rows (pass 1): pixels (0..=255, the level shift of 128 applied to the DC term alone: the
//!   other even rows of `C` sum to exactly 0), `T[u][y] = (acc + 2^10) >> 11`: 4 fraction bits,
//!   `|T| <= 5,793`, stored transposed so that pass 2 reads pairs of rows as halfword pairs.
//! * Columns (pass 2): `|t_n +- t_{7-n}| <= 11,586` and the even half's second level
//!   `|s_0 +- s_3|, |s_2 +- s_1| <= 23,172` (fit a halfword, so the packed adds of the PULP
//!   kernel never wrap), `|acc| <= 23,172 * 41,990 < 2^30`, and
//!   `F8[v][u] = (acc + 2^15) >> 16`: the 2-D DCT scaled by 8, libjpeg's `jpeg_fdct_islow`
//!   output scale, which the quantiser divides by `8 Q`; written in zig-zag order (the order
//!   the entropy coder reads).
//!
//! Every intermediate is an exact integer of the bounds above, so the portable model
//! ([`Portable`]) and the PULP kernel (`Pulp`, feature `pulp` on riscv32) agree bit for bit; the
//! test `fdct_error_bound` measures the distance to the exact DCT: at most 1.064 in `F8` units
//! (1/8 of a DCT unit, the final rounding's 0.5 included) over the worst-case blocks and 50,000
//! random ones (the worst a random block; with 5 fraction bits after pass 1 it was 1.0, but pass
//! 2's even half could not take the second butterfly level in halfwords). A quantiser step is
//! `8 Q >= 8` such units.

/// `C[u][n]` for `n < 4`, as described in the module docs (the other half follows by symmetry).
pub const COEF: [[i16; 4]; 8] = coef_table();

const fn coef_table() -> [[i16; 4]; 8] {
    // cos(k pi / 16) for k = 0..=8 scaled by 2^30, to compute the table without floats in a const.
    const COS: [i64; 9] = [
        1_073_741_824,
        1_053_110_176,
        992_008_094,
        892_783_698,
        759_250_125,
        596_538_995,
        410_903_207,
        209_476_638,
        0,
    ];
    const INV_SQRT2: i64 = 759_250_125; // 2^30 / sqrt(2) = cos(4 pi / 16)
    let mut t = [[0i16; 4]; 8];
    let mut u = 0;
    while u < 8 {
        let mut n = 0;
        while n < 4 {
            // cos((2n+1) u pi / 16): reduce (2n+1)u mod 32 to 0..=8 with a sign.
            let mut k = ((2 * n + 1) * u) % 32;
            let mut sign = 1i64;
            if k > 16 {
                k = 32 - k;
            }
            if k > 8 {
                k = 16 - k;
                sign = -1;
            }
            let mut v = sign * COS[k]; // 2^30 * cos
            if u == 0 {
                v = v * INV_SQRT2 / (1 << 30);
            }
            // 2^15 * v / 2^30 / 2 = v / 2^16, rounded half away from zero.
            let r = if v >= 0 {
                (v + (1 << 15)) >> 16
            } else {
                -((-v + (1 << 15)) >> 16)
            };
            t[u][n] = r as i16;
            n += 1;
        }
        u += 1;
    }
    t
}

/// The DC row of pass 1 sums `C[0][0] * (p_n + p_{7-n})` over raw pixels; this is the level
/// shift `-128 * 8 * C[0][0]` it needs, added before the rounding shift.
pub const LEVEL_SHIFT: i32 = -1024 * COEF[0][0] as i32;

/// The order in which the kernels read a block's pixel rows in pass 1: pass 1 writes row `y`'s
/// outputs to position `k` of each transposed row (`ROW_ORDER[k] = y`), so that pass 2 loads
/// `(t0, t2)`, `(t3, t1)`, `(t7, t5)`, `(t4, t6)` as halfword pairs and forms `(s0, s2) = (t0 +
/// t7, t2 + t5)` and `(s3, s1) = (t3 + t4, t1 + t6)` with one packed add each, then the even
/// half's second level `(s0 + s3, s2 + s1)` and `(s0 - s3, s2 - s1)` with one more each (as pass
/// 1 does, no halfword swap): both passes use the same coefficient pairs ([`PAIRS`]), pass 2 the
/// odd rows' second pair with its halves swapped (`(C[u][3], C[u][1])`, for `(d3, d1)`).
pub const ROW_ORDER: [usize; 8] = [0, 2, 3, 1, 7, 5, 4, 6];

/// The coefficient pairs of both passes as packed halfwords: `(C[0][0], C[0][0])` (used for both
/// halves of the DC), then for `u = 1..8` `(C[u][0] | C[u][2] << 16, C[u][1] | C[u][3] << 16)`.
pub const PAIRS: [u32; 15] = pairs();

const fn pack(lo: i16, hi: i16) -> u32 {
    (lo as u16 as u32) | ((hi as u16 as u32) << 16)
}

const fn pairs() -> [u32; 15] {
    let mut p = [0u32; 15];
    p[0] = pack(COEF[0][0], COEF[0][0]);
    let mut u = 1;
    while u < 8 {
        p[2 * u - 1] = pack(COEF[u][0], COEF[u][2]);
        p[2 * u] = pack(COEF[u][1], COEF[u][3]);
        u += 1;
    }
    p
}

/// Where zig-zag coefficient `k` sits in [`Work::f8`] (its slot). Each half (coefficients
/// 0..32, 32..64, slots likewise) is 8 groups of two words: group `j` holds coefficients `j`,
/// `8 + j`, `16 + j`, `24 + j` (of the half) in that order, so that the zero mask
/// ([`Kernel::zero_mask`]: the PULP kernel gathers the four compare results of a group into the
/// bytes of one word and collects their top bits, 8 groups, 4 bits each) comes out with bit
/// `k % 32` of word `k / 32` for coefficient `k`: zig-zag order, nothing to interleave.
pub const fn slot(k: usize) -> usize {
    let (g, j) = (k & 32, k & 31);
    g + 4 * (j & 7) + (j >> 3)
}

/// The zig-zag coefficient in slot `s` (the inverse of [`slot`]).
pub const fn coef_of_slot(s: usize) -> usize {
    let (g, r) = (s & 32, s & 31);
    g + 8 * (r & 3) + (r >> 2)
}

/// Byte offset in the output ([`slot`] order) of each pass-2 output, in the order pass 2 makes
/// them (column `u`, then `v`): `2 * slot(ZZ_OF_NAT[8 v + u])` at index `8 u + v`.
pub const ZZ_STORE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut u = 0;
    while u < 8 {
        let mut v = 0;
        while v < 8 {
            t[8 * u + v] = 2 * slot(ZZ_OF_NAT[8 * v + u] as usize) as u8;
            v += 1;
        }
        u += 1;
    }
    t
};

/// What the kernels need for the blocks of one strip: the byte offsets of the rows in
/// [`ROW_ORDER`], the coefficient pairs and the zig-zag store offsets (both in the tables, next
/// to the core: L1 on GAP8), the stride. `repr(C)`: the PULP kernel reads `zz` right after
/// `offs`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct DctCtx<'a> {
    /// `ROW_ORDER[k] * stride`.
    pub offs: [u32; 8],
    /// [`ZZ_STORE`].
    pub zz: &'a [u8; 64],
    /// [`PAIRS`].
    pub pairs: &'a [u32; 15],
    /// Bytes between rows.
    pub stride: usize,
}

impl<'a> DctCtx<'a> {
    /// The context of a strip whose rows are `stride` bytes apart.
    pub fn new(stride: usize, pairs: &'a [u32; 15], zz: &'a [u8; 64]) -> DctCtx<'a> {
        let mut offs = [0u32; 8];
        for (o, &y) in offs.iter_mut().zip(ROW_ORDER.iter()) {
            *o = (y * stride) as u32;
        }
        DctCtx {
            offs,
            zz,
            pairs,
            stride,
        }
    }
}

/// A block's DCT output and the kernels' scratch (the transposed pass-1 values), word-aligned.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(4))]
pub struct Work {
    /// `F8` in zig-zag order.
    pub f8: [i16; 64],
    /// Pass 1's output (kernel scratch).
    pub t: [i16; 64],
}

impl Default for Work {
    fn default() -> Self {
        Work {
            f8: [0; 64],
            t: [0; 64],
        }
    }
}

/// Zig-zag position of natural index `n` (the inverse of [`crate::tables::ZIGZAG`]).
pub const ZZ_OF_NAT: [u8; 64] = {
    let mut inv = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        inv[crate::tables::ZIGZAG[k] as usize] = k as u8;
        k += 1;
    }
    inv
};

/// The per-block kernels of a variant: the DCT, the zero test of the quantiser, and the bit
/// scans of the entropy coder. [`Portable`] is plain Rust; `Pulp` (feature `pulp`, riscv32) the
/// RI5CY instructions; both compute the same values.
pub trait Kernel {
    /// Short name for benchmarks (`portable`, `pulp`).
    const NAME: &'static str;

    /// The block whose rows start at `src[0]`, `src[ctx.stride]`, ... (`src.len() >= 7 stride +
    /// 8`) into `w.f8`, zig-zag coefficient `k` in halfword [`slot`]`(k)`.
    fn fdct(src: &[u8], ctx: &DctCtx, w: &mut Work);

    /// Which coefficients of `f8` ([`slot`] order) quantise to 0: `thr` holds the thresholds in
    /// the same order as halfword pairs (`thr[i]` = the thresholds of slots `2 i` and `2 i + 1`,
    /// see [`crate::tables::Tables::thr`]); in the result, bit `k % 32` of word `k / 32` says
    /// zig-zag coefficient `k` is 0 (`|f8[slot(k)]| < t[k]`).
    #[inline(always)]
    fn zero_mask(f8: &[i16; 64], thr: &[u32; 32]) -> [u32; 2] {
        portable_zero_mask(f8, thr)
    }

    /// Index of the lowest set bit of `x != 0`.
    #[inline(always)]
    fn ff1(x: u32) -> u32 {
        x.trailing_zeros()
    }

    /// Bits of `x > 0` (`32 - leading_zeros`): the magnitude category of the entropy coder.
    #[inline(always)]
    fn bit_len(x: u32) -> u32 {
        32 - x.leading_zeros()
    }

    /// Quantises and codes one block ([`crate::entropy::code_block`]).
    #[inline(always)]
    fn code_block(
        f8: &[i16; 64],
        t: &crate::tables::Tables,
        dc_pred: &mut i32,
        bits: &mut crate::entropy::Bits,
        out: &mut crate::entropy::Out<'_>,
    ) where
        Self: Sized,
    {
        crate::entropy::code_block::<Self>(f8, t, dc_pred, bits, out)
    }

    /// Transforms and codes blocks `from..to` of a strip (block `b`'s rows at `strip[8 b]`,
    /// `ctx.stride` apart) one after the other while `out.pos <= limit`; returns the first block
    /// not coded. The caller keeps `limit` at least [`crate::entropy::MAX_BLOCK_BYTES`] below
    /// the end of `out` (see [`crate::band::code_blocks_reserved`]), so no block overflows.
    /// A kernel may code nothing (return `from`) when the strip or `out` does not meet what its
    /// loop needs: the PULP loop wants word-aligned rows (`ctx.stride` and the strip a multiple
    /// of 4) and `limit + MAX_BLOCK_BYTES <= out.buf.len()`, which the cluster encoder's L1
    /// strips and chunks always give.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn code_run(
        strip: &[u8],
        ctx: &DctCtx,
        from: usize,
        to: usize,
        t: &crate::tables::Tables,
        dc_pred: &mut i32,
        bits: &mut crate::entropy::Bits,
        out: &mut crate::entropy::Out<'_>,
        w: &mut Work,
        limit: usize,
    ) -> usize
    where
        Self: Sized,
    {
        // Block by block: the DCT, then the block coder.
        let mut b = from;
        while b < to && out.pos <= limit {
            Self::fdct(&strip[8 * b..], ctx, w);
            Self::code_block(&w.f8, t, dc_pred, bits, out);
            b += 1;
        }
        b
    }
}

/// [`Kernel::zero_mask`] in plain Rust.
pub fn portable_zero_mask(f8: &[i16; 64], thr: &[u32; 32]) -> [u32; 2] {
    let mut m = [0u32; 2];
    for (s, &v) in f8.iter().enumerate() {
        let t = (thr[s / 2] >> (16 * (s % 2))) & 0xffff;
        if (v as i32).unsigned_abs() < t {
            let k = coef_of_slot(s);
            m[k / 32] |= 1 << (k % 32);
        }
    }
    m
}

/// The portable model: the arithmetic of the module docs in plain Rust (host, rv32imc).
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable;

/// Pass 1 for one row of pixels: `T[u]` for `u = 0..8`.
#[inline(always)]
fn row(p: &[u8]) -> [i32; 8] {
    let s = |n: usize| p[n] as i32 + p[7 - n] as i32;
    let d = |n: usize| p[n] as i32 - p[7 - n] as i32;
    let (s0, s1, s2, s3) = (s(0), s(1), s(2), s(3));
    let (d0, d1, d2, d3) = (d(0), d(1), d(2), d(3));
    let mut t = [0i32; 8];
    for (u, c) in COEF.iter().enumerate() {
        let c = [c[0] as i32, c[1] as i32, c[2] as i32, c[3] as i32];
        let acc = if u % 2 == 0 {
            c[0] * s0 + c[1] * s1 + c[2] * s2 + c[3] * s3
        } else {
            c[0] * d0 + c[1] * d1 + c[2] * d2 + c[3] * d3
        };
        let acc = if u == 0 { acc + LEVEL_SHIFT } else { acc };
        t[u] = (acc + (1 << 10)) >> 11;
    }
    t
}

/// Pass 2 for one column of pass-1 values: `F8[v]` for `v = 0..8`.
#[inline(always)]
fn col(t: &[i32; 8]) -> [i32; 8] {
    let (s0, s1, s2, s3) = (t[0] + t[7], t[1] + t[6], t[2] + t[5], t[3] + t[4]);
    let (d0, d1, d2, d3) = (t[0] - t[7], t[1] - t[6], t[2] - t[5], t[3] - t[4]);
    let mut f = [0i32; 8];
    for (v, c) in COEF.iter().enumerate() {
        let c = [c[0] as i32, c[1] as i32, c[2] as i32, c[3] as i32];
        let acc = if v % 2 == 0 {
            c[0] * s0 + c[1] * s1 + c[2] * s2 + c[3] * s3
        } else {
            c[0] * d0 + c[1] * d1 + c[2] * d2 + c[3] * d3
        };
        f[v] = (acc + (1 << 15)) >> 16;
    }
    f
}

impl Kernel for Portable {
    const NAME: &'static str = "portable";

    fn fdct(src: &[u8], ctx: &DctCtx, w: &mut Work) {
        portable_fdct(src, ctx.stride, &mut w.f8);
    }
}

/// The portable arithmetic on a block with rows `stride` bytes apart (output in [`slot`] order).
pub fn portable_fdct(src: &[u8], stride: usize, out: &mut [i16; 64]) {
    // tt[u][y]: pass 1 transposed.
    let mut tt = [[0i32; 8]; 8];
    for y in 0..8 {
        let r = row(&src[y * stride..y * stride + 8]);
        for u in 0..8 {
            tt[u][y] = r[u];
        }
    }
    for (u, t) in tt.iter().enumerate() {
        let f = col(t);
        // ZZ_STORE[8 u + v] = 2 slot(ZZ_OF_NAT[8 v + u]): a table instead of the slot arithmetic.
        for (v, &f) in f.iter().enumerate() {
            out[(ZZ_STORE[8 * u + v] / 2) as usize] = f as i16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact 2-D DCT scaled by 8 (libjpeg's output scale) in f64, as two 1-D passes.
    fn exact(p: &[u8; 64]) -> [f64; 64] {
        let mut cos = [[0f64; 8]; 8];
        for (u, row) in cos.iter_mut().enumerate() {
            let c = if u == 0 { 1.0 / 2f64.sqrt() } else { 1.0 };
            for (x, v) in row.iter_mut().enumerate() {
                *v = 0.5 * c * ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos();
            }
        }
        let mut rows = [[0f64; 8]; 8]; // rows[y][u]
        for y in 0..8 {
            for u in 0..8 {
                rows[y][u] = (0..8)
                    .map(|x| (p[y * 8 + x] as f64 - 128.0) * cos[u][x])
                    .sum();
            }
        }
        let mut out = [0f64; 64];
        for v in 0..8 {
            for u in 0..8 {
                out[v * 8 + u] = 8.0 * (0..8).map(|y| rows[y][u] * cos[v][y]).sum::<f64>();
            }
        }
        out
    }

    #[test]
    fn coefficients_are_the_rounded_cosines() {
        for (u, row) in COEF.iter().enumerate() {
            for (n, &c) in row.iter().enumerate() {
                let cu = if u == 0 { 1.0 / 2f64.sqrt() } else { 1.0 };
                let want = 32768.0 * cu / 2.0
                    * ((2 * n + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos();
                assert!(
                    (c as f64 - want).abs() <= 0.5,
                    "C[{u}][{n}] = {c}, want {want}"
                );
            }
        }
        // The even rows other than the DC sum to 0 over all 8 taps (symmetric halves): the level
        // shift only touches the DC term.
        for u in [2, 4, 6] {
            assert_eq!(COEF[u].iter().map(|&c| c as i32).sum::<i32>(), 0, "row {u}");
        }
        assert_eq!(COEF[0], [11585; 4]);
        // What the PULP pass 1's second butterfly level relies on: C[4] = (c, -c, -c, c) and
        // C[u][3 - n] = -C[u][n] for u = 2, 6, exactly, so that C[u] . s equals one dot product
        // of (s0 + s3, s2 + s1) or (s0 - s3, s2 - s1) with (C[u][0], C[u][2]).
        assert_eq!(COEF[4], [COEF[4][0], -COEF[4][0], -COEF[4][0], COEF[4][0]]);
        for u in [2, 6] {
            assert_eq!(COEF[u][3], -COEF[u][0], "row {u}");
            assert_eq!(COEF[u][2], -COEF[u][1], "row {u}");
        }
        // The pairs: (C[u][0], C[u][2]) and (C[u][1], C[u][3]) as halfwords.
        assert_eq!(PAIRS[0], 11585 | 11585 << 16);
        assert_eq!(PAIRS[1], 16069 | 9102 << 16);
        assert_eq!(PAIRS[2], 13623 | 3196 << 16);
        assert_eq!(PAIRS[14] >> 16, (-16069i16) as u16 as u32);
    }

    /// The pass-2 pairing the row order sets up: position k of a transposed row holds row
    /// ROW_ORDER[k], and words (0,1), (2,3), (4,5), (6,7) pair as (t0,t2), (t1,t3), (t7,t5), (t6,t4).
    #[test]
    fn zz_store_is_the_zigzag_position_of_each_pass_2_output() {
        for u in 0..8 {
            for v in 0..8 {
                let k = coef_of_slot(ZZ_STORE[8 * u + v] as usize / 2);
                assert_eq!(crate::tables::ZIGZAG[k] as usize, 8 * v + u);
            }
        }
    }

    /// The slots are a permutation, and the mask bit of each slot's halfword lands on its
    /// coefficient's bit.
    #[test]
    fn slots_group_k_with_k_plus_8_16_24() {
        let mut seen = [false; 64];
        for k in 0..64 {
            let s = slot(k);
            assert!(!seen[s]);
            seen[s] = true;
            assert_eq!(coef_of_slot(s), k);
            // Group (s % 32) / 4 of its half (two words), byte (s % 4) of the gathered word: mask
            // bit 8 (s % 4) + (s % 32) / 4.
            assert_eq!(8 * (s % 4) + (s % 32) / 4, k % 32);
            assert_eq!(s / 32, k / 32);
        }
        // The zero mask, on a block with only coefficient k non-zero.
        let thr = crate::tables::Tables::new(50).thr;
        for k in 1..64 {
            let mut f8 = [0i16; 64];
            f8[slot(k)] = 2000;
            let m = portable_zero_mask(&f8, &thr);
            let nz = [!m[0] & !1, !m[1]];
            assert_eq!(nz[k / 32], 1 << (k % 32), "k {k}");
            assert_eq!(nz[1 - k / 32], 0, "k {k}");
        }
    }

    #[test]
    fn row_order_pairs_the_butterflies() {
        let w = |k: usize| (ROW_ORDER[2 * k], ROW_ORDER[2 * k + 1]);
        assert_eq!([w(0), w(1), w(2), w(3)], [(0, 2), (3, 1), (7, 5), (4, 6)]);
        // w0 + w2 = (t0 + t7, t2 + t5) = (s0, s2), w1 + w3 = (t3 + t4, t1 + t6) = (s3, s1): the
        // butterflies n, 7 - n, and (s0, s2) +- (s3, s1) the even half's second level.
        for (a, b) in [(w(0), w(2)), (w(1), w(3))] {
            assert_eq!(a.0 + b.0, 7);
            assert_eq!(a.1 + b.1, 7);
        }
    }

    fn max_error(p: &[u8; 64]) -> f64 {
        let mut f = [0i16; 64];
        portable_fdct(p, 8, &mut f);
        let e = exact(p);
        (0..64)
            .map(|n| (f[slot(ZZ_OF_NAT[n] as usize)] as f64 - e[n]).abs())
            .fold(0.0, f64::max)
    }

    /// The distance to the exact DCT in `F8` units over the extreme blocks (constant 0 / 255,
    /// the sign patterns of every basis function) and random ones, and the intermediate bounds
    /// of the module docs hold.
    #[test]
    fn fdct_error_bound() {
        let mut worst: f64 = 0.0;
        let mut blocks: Vec<[u8; 64]> = vec![[0; 64], [255; 64], [128; 64]];
        for u in 0..8 {
            for v in 0..8 {
                let mut b = [0u8; 64];
                for y in 0..8 {
                    for x in 0..8 {
                        let a = ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
                            * ((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI / 16.0).cos();
                        b[y * 8 + x] = if a >= 0.0 { 255 } else { 0 };
                    }
                }
                blocks.push(b);
            }
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..50_000 {
            let mut b = [0u8; 64];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = (x >> 24) as u8;
            }
            blocks.push(b);
        }
        let mut worst_at = 0;
        for (i, b) in blocks.iter().enumerate() {
            let e = max_error(b);
            if e > worst {
                (worst, worst_at) = (e, i);
            }
            for y in 0..8 {
                let r = row(&b[y * 8..y * 8 + 8]);
                assert!(r.iter().all(|t| t.abs() <= 5_793));
            }
        }
        // 1.064 (a random block): pass 1 keeps 4 fraction bits so that pass 2's even half takes
        // the second butterfly level in halfwords (5 bits gave 1.0, the DC of a constant block).
        assert!(worst <= 1.07, "worst error {worst}, block {worst_at}");
    }

    proptest! {
        /// A strided source gives the same result as a packed one.
        #[test]
        fn stride_only_moves_rows(p in proptest::array::uniform32(any::<u8>()), q in proptest::array::uniform32(any::<u8>()), pad in 0usize..20) {
            let mut packed = [0u8; 64];
            packed[..32].copy_from_slice(&p);
            packed[32..].copy_from_slice(&q);
            let stride = 8 + pad;
            let mut wide = vec![0xAAu8; 7 * stride + 8];
            for y in 0..8 {
                wide[y * stride..y * stride + 8].copy_from_slice(&packed[y * 8..y * 8 + 8]);
            }
            let (mut a, mut b) = ([0i16; 64], [0i16; 64]);
            portable_fdct(&packed, 8, &mut a);
            portable_fdct(&wide, stride, &mut b);
            prop_assert_eq!(a, b);
        }
    }
}
