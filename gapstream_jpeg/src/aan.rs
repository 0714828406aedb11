//! An Arai–Agui–Nakajima forward DCT in 16-bit lanes: the portable model of a packed kernel that
//! would transform two rows (pass 1) or two columns (pass 2) per instruction, with the AAN output
//! scale folded into the quantiser's divisors. Not the default DCT ([`crate::fdct`] is): the
//! model exists to measure whether the packed kernel's arithmetic meets the precision targets.
//!
//! Each 1-D pass is libjpeg's `jfdctfst.c` factorisation (Y. Arai, T. Agui, M. Nakajima, "A fast
//! DCT-SQ scheme for images", Trans. IEICE E71(11), 1988): 29 additions and 5 multiplications by
//! constants. Its outputs are the DCT scaled by `sqrt 8 * aan(u)` (`aan(0) = 1`, `aan(k) =
//! sqrt 2 cos(k pi / 16)`), so the 2-D output is `8 aan(u) aan(v)` times the orthonormal DCT:
//! `F8 * aan(u) aan(v)`. Every value the model computes is one 16-bit lane of what the packed
//! kernel holds (`pv.add.h` / `pv.sub.h` for the additions; RI5CY's `p.mulsRN` / `p.mulhhsRN`,
//! a 16 × 16 multiply of the low / high halves rounded and shifted right by an immediate, for the
//! multiplications), and the lanes of a packed instruction do not interact, so one row at a time
//! here is the same integers as two rows at a time there.
//!
//! The arithmetic (fixed by the constants below):
//!
//! * pass 1, rows: pixels `p << P1` (0..=4080 with `P1 = 4`), the butterflies, the products
//!   `(x * C + 2^(N-1)) >> N` with `C` the constant in `N` = 15 (or 14 for 1.3066) fraction
//!   bits, the level shift `128 * 8 << P1` off the DC output, then output `u` descaled to
//!   `P2[u]` fraction bits by `(o + 2^(d-1)) >> d` (`d = P1 - P2[u]`, one immediate per output
//!   word of the packed kernel);
//! * pass 2, columns: the same butterflies and products on the pass-1 values, no descale: the
//!   output is `F8 * aan(u) aan(v) * 2^P2[u]`, written to the coefficient's slot
//!   ([`crate::fdct::slot`]) like [`crate::fdct::portable_fdct`]. Column `u`'s pass 2 reads pass
//!   1's outputs `u` alone, so each column keeps as many fraction bits as its widest lane allows
//!   (`P2`: 1 for columns 0..=4, 2 for 5 and 6, 3 for 7, whose values are smaller).
//!
//! The quantiser ([`crate::tables::Tables::new_aan`]) divides by `d = 8 Q aan(u) aan(v) 2^P2[u]`
//! (a real number:
//! its reciprocal `round(2^r / d)` in `[2^15, 2^16]` and the bias `2^(r-1)`, so that `q =
//! round(|x| / d)` up to the reciprocal's rounding), and the zero thresholds follow from the
//! entries ([`crate::tables::QuantEntry::threshold`]).
//!
//! No lane wraps for any pixels 0..=255: the test `lanes_never_wrap` carries every value through
//! both passes as an affine form of the 64 pixels plus an interval for the roundings so far, and
//! checks the form's extremes over the pixel box (which bound every value of every block, not
//! only the ones tried) against `-32768..=32767`. The widest lanes it prints: pass 1
//! `-20,513.1..=32,640` (the DC's pixel sum `8 * 255 << 4` before the level shift), its
//! outputs `|T| <= 2,905.6`; pass 2 `|x| <= 20,518.8` (column 0), 25,789.4 (1), 24,767.4 (2),
//! 21,864.6 (3), 20,518.8 (4), 29,217.5 (5), 20,519.6 (6), 20,526.2 (7): one more fraction bit
//! would wrap in every column.
//!
//! Precision (test `aan_error_against_the_exact_dct`, the extreme blocks and 50,000 random ones):
//! at most 3.44 `F8` units from the exact DCT (the islow model of [`crate::fdct`]: 1.064), rms
//! 0.46; the worst at `v = 7` (`aan(7) = 0.276`: pass 2's roundings weigh most there). On the
//! frame set against libjpeg-turbo (`cargo test -p gapstream_jpeg --test pillow`, test
//! `aan_against_pillow_on_the_frame_set`): PSNR at worst 0.009 dB below, size at most 1.000
//! times, at quality 50 / 75 / 90 and 1 / 8 bands.

use crate::fdct::{DctCtx, Kernel, Work, ZZ_STORE};

/// Fraction bits of the pixels in pass 1.
pub const P1: u32 = 4;
/// Fraction bits of pass 1's output `u` and so of the 2-D output's column `u` (pass 2 of column
/// `u` works on pass 1's outputs `u` alone: each column takes as many bits as its lanes allow).
pub const P2: [u32; 8] = [1, 1, 1, 1, 1, 2, 2, 3];

/// `cos(pi / 4)` in 15 fraction bits.
pub const C0_707: i32 = 23_170;
/// `cos(3 pi / 8)` in 15 fraction bits.
pub const C0_382: i32 = 12_540;
/// `cos(pi / 8) - cos(3 pi / 8)` in 15 fraction bits.
pub const C0_541: i32 = 17_734;
/// `cos(pi / 8) + cos(3 pi / 8)` in 14 fraction bits.
pub const C1_306: i32 = 21_407;

/// `round(2^15 aan(k))`, `aan(0) = 1`, `aan(k) = sqrt 2 cos(k pi / 16)`: the output scale of each
/// 1-D pass's output `k` (besides `sqrt 8`).
pub const AAN_SCALE: [u32; 8] = [
    32_768, 45_451, 42_813, 38_531, 32_768, 25_746, 17_734, 9_041,
];

/// One 16-bit lane of the packed kernel: the operations the model uses.
pub trait Lane: Copy {
    /// A constant.
    fn konst(c: i32) -> Self;
    /// `pv.add.h`.
    fn add(self, o: Self) -> Self;
    /// `pv.sub.h`.
    fn sub(self, o: Self) -> Self;
    /// `p.mulsRN` / `p.mulhhsRN` by a constant: `(self * c + 2^(n-1)) >> n`.
    fn mulr(self, c: i32, n: u32) -> Self;
    /// `pv.sra.h` by an immediate (arithmetic shift right).
    fn sra(self, n: u32) -> Self;
}

/// The lanes' values: in the model a debug build checks that each fits a halfword (a release
/// build computes the same integers; `lanes_never_wrap` proves they fit).
impl Lane for i32 {
    #[inline(always)]
    fn konst(c: i32) -> Self {
        c
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        h(self + o)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        h(self - o)
    }
    #[inline(always)]
    fn mulr(self, c: i32, n: u32) -> Self {
        h((self * c + (1 << (n - 1))) >> n)
    }
    #[inline(always)]
    fn sra(self, n: u32) -> Self {
        self >> n
    }
}

#[inline(always)]
fn h(x: i32) -> i32 {
    debug_assert!(x == x as i16 as i32, "lane wraps: {x}");
    x
}

/// One 1-D AAN pass (`jfdctfst.c`'s order of operations) on eight lanes, outputs in natural
/// order `o[u]`, before any descale. `level` is subtracted from the DC output.
#[inline(always)]
pub fn pass<L: Lane>(x: [L; 8], level: i32) -> [L; 8] {
    let tmp0 = x[0].add(x[7]);
    let tmp7 = x[0].sub(x[7]);
    let tmp1 = x[1].add(x[6]);
    let tmp6 = x[1].sub(x[6]);
    let tmp2 = x[2].add(x[5]);
    let tmp5 = x[2].sub(x[5]);
    let tmp3 = x[3].add(x[4]);
    let tmp4 = x[3].sub(x[4]);
    // Even part.
    let tmp10 = tmp0.add(tmp3);
    let tmp13 = tmp0.sub(tmp3);
    let tmp11 = tmp1.add(tmp2);
    let tmp12 = tmp1.sub(tmp2);
    let o0 = tmp10.add(tmp11).sub(L::konst(level));
    let o4 = tmp10.sub(tmp11);
    let z1 = tmp12.add(tmp13).mulr(C0_707, 15);
    let o2 = tmp13.add(z1);
    let o6 = tmp13.sub(z1);
    // Odd part.
    let t10 = tmp4.add(tmp5);
    let t11 = tmp5.add(tmp6);
    let t12 = tmp6.add(tmp7);
    let z5 = t10.sub(t12).mulr(C0_382, 15);
    let z2 = t10.mulr(C0_541, 15).add(z5);
    let z4 = t12.mulr(C1_306, 14).add(z5);
    let z3 = t11.mulr(C0_707, 15);
    let z11 = tmp7.add(z3);
    let z13 = tmp7.sub(z3);
    let o5 = z13.add(z2);
    let o3 = z13.sub(z2);
    let o1 = z11.add(z4);
    let o7 = z11.sub(z4);
    [o0, o1, o2, o3, o4, o5, o6, o7]
}

/// Pass 1 on one row of pixels already shifted left by `P1` (what the kernel's unpacking gives):
/// `T[u]` in `P2` fraction bits.
#[inline(always)]
pub fn row<L: Lane>(x: [L; 8]) -> [L; 8] {
    let o = pass(x, 1024 << P1);
    core::array::from_fn(|u| {
        let d = P1 - P2[u];
        if d == 0 {
            o[u]
        } else {
            o[u].add(L::konst(1 << (d - 1))).sra(d)
        }
    })
}

/// The model on a block whose rows are `stride` bytes apart: `F8 aan(u) aan(v) 2^P2` in
/// [`crate::fdct::slot`] order.
pub fn aan_fdct(src: &[u8], stride: usize, out: &mut [i16; 64]) {
    let mut tt = [[0i32; 8]; 8]; // tt[u][y]
    for y in 0..8 {
        let r = &src[y * stride..y * stride + 8];
        let t = row(core::array::from_fn(|n| (r[n] as i32) << P1));
        for u in 0..8 {
            tt[u][y] = t[u];
        }
    }
    for (u, t) in tt.iter().enumerate() {
        let f = pass(*t, 0);
        for (v, &f) in f.iter().enumerate() {
            out[(ZZ_STORE[8 * u + v] / 2) as usize] = f as i16;
        }
    }
}

/// The portable AAN kernel: [`aan_fdct`] and the rest of [`crate::fdct::Portable`]; its frames
/// use [`crate::tables::Tables::new_aan`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PortableAan;

impl Kernel for PortableAan {
    const NAME: &'static str = "portable-aan";
    const AAN: bool = true;

    fn fdct(src: &[u8], ctx: &DctCtx, w: &mut Work) {
        aan_fdct(src, ctx.stride, &mut w.f8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fdct::{ZZ_OF_NAT, slot};
    use crate::tables::{Tables, ZIGZAG};
    use std::cell::Cell;

    /// `aan(k)` in f64.
    fn aan(k: usize) -> f64 {
        if k == 0 {
            1.0
        } else {
            2f64.sqrt() * (k as f64 * std::f64::consts::PI / 16.0).cos()
        }
    }

    /// The exact 2-D DCT scaled by 8 (`F8`, libjpeg's scale), natural order.
    fn exact(p: &[u8; 64]) -> [f64; 64] {
        let basis = |u: usize, x: usize| {
            let c = if u == 0 { 1.0 / 2f64.sqrt() } else { 1.0 };
            0.5 * c * ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
        };
        let mut out = [0f64; 64];
        for v in 0..8 {
            for u in 0..8 {
                let mut s = 0.0;
                for y in 0..8 {
                    for x in 0..8 {
                        s += (p[8 * y + x] as f64 - 128.0) * basis(u, x) * basis(v, y);
                    }
                }
                out[8 * v + u] = 8.0 * s;
            }
        }
        out
    }

    thread_local! {
        /// The widest lane seen by [`Aff::check`]: (least lower bound, greatest upper bound).
        static WIDEST: Cell<(f64, f64)> = const { Cell::new((0.0, 0.0)) };
    }

    /// A lane as an affine form of the 64 pixels (`c + sum a_i p_i`) plus the interval
    /// `[lo, hi]` of the roundings so far: every block's value of that lane is in
    /// [`Aff::range`].
    #[derive(Clone, Copy)]
    struct Aff {
        a: [f64; 64],
        c: f64,
        lo: f64,
        hi: f64,
    }

    impl Aff {
        /// The value's least and greatest over pixels 0..=255.
        fn range(&self) -> (f64, f64) {
            let (mut mn, mut mx) = (self.c + self.lo, self.c + self.hi);
            for &a in &self.a {
                if a > 0.0 {
                    mx += 255.0 * a;
                } else {
                    mn += 255.0 * a;
                }
            }
            (mn, mx)
        }

        fn check(self) -> Self {
            let (mn, mx) = self.range();
            assert!(
                mn >= -32768.0 && mx <= 32767.0,
                "a lane may wrap: {mn}..{mx}"
            );
            WIDEST.with(|w| {
                let (a, b) = w.get();
                w.set((a.min(mn), b.max(mx)));
            });
            self
        }

        fn zip(self, o: Self, s: f64) -> Self {
            let mut r = self;
            for (x, y) in r.a.iter_mut().zip(o.a) {
                *x += s * y;
            }
            r.c += s * o.c;
            if s > 0.0 {
                (r.lo, r.hi) = (self.lo + o.lo, self.hi + o.hi);
            } else {
                (r.lo, r.hi) = (self.lo - o.hi, self.hi - o.lo);
            }
            r.check()
        }
    }

    impl Lane for Aff {
        fn konst(c: i32) -> Self {
            Aff {
                a: [0.0; 64],
                c: c as f64,
                lo: 0.0,
                hi: 0.0,
            }
        }
        fn add(self, o: Self) -> Self {
            self.zip(o, 1.0)
        }
        fn sub(self, o: Self) -> Self {
            self.zip(o, -1.0)
        }
        fn mulr(self, c: i32, n: u32) -> Self {
            // floor(y c / 2^n + 1/2) = y c / 2^n + e, e in (-1/2, 1/2]; c > 0 here.
            assert!(c > 0);
            let k = c as f64 / (1u64 << n) as f64;
            let mut r = self;
            r.a.iter_mut().for_each(|x| *x *= k);
            r.c *= k;
            (r.lo, r.hi) = (self.lo * k - 0.5, self.hi * k + 0.5);
            r.check()
        }
        fn sra(self, n: u32) -> Self {
            // floor(y / 2^n) = y / 2^n + e, e in (-(1 - 2^-n), 0].
            let k = 1.0 / (1u64 << n) as f64;
            let mut r = self;
            r.a.iter_mut().for_each(|x| *x *= k);
            r.c *= k;
            (r.lo, r.hi) = (self.lo * k - (1.0 - k), self.hi * k);
            r.check()
        }
    }

    /// No lane of either pass wraps for any block of pixels 0..=255 (the affine bound of
    /// [`Aff`], which covers every block), and the bounds the module docs state hold.
    #[test]
    fn lanes_never_wrap() {
        let mut p1 = (0f64, 0f64);
        let rows: Vec<[Aff; 8]> = (0..8)
            .map(|y| {
                let r = row::<Aff>(core::array::from_fn(|n| {
                    let mut v = Aff::konst(0);
                    v.a[8 * y + n] = (1u32 << P1) as f64;
                    v
                }));
                for t in &r {
                    let (a, b) = t.range();
                    p1 = (p1.0.min(a), p1.1.max(b));
                }
                r
            })
            .collect();
        let tt: Vec<[Aff; 8]> = (0..8)
            .map(|u| core::array::from_fn(|y| rows[y][u]))
            .collect();
        let w1 = WIDEST.with(|w| w.get());
        let mut out = (0f64, 0f64);
        for (u, t) in tt.iter().enumerate() {
            WIDEST.with(|w| w.set((0.0, 0.0)));
            for o in pass(*t, 0) {
                let (a, b) = o.range();
                out = (out.0.min(a), out.1.max(b));
            }
            let w = WIDEST.with(|w| w.get());
            eprintln!(
                "aan lanes: pass 2 of column {u} ({} fraction bits): widest {:.1}..{:.1}",
                P2[u], w.0, w.1
            );
        }
        eprintln!(
            "aan lanes: pass 1 widest {:.1}..{:.1}, its output {:.1}..{:.1}; the 2-D output {:.1}..{:.1}",
            w1.0, w1.1, p1.0, p1.1, out.0, out.1
        );
        // The module docs' figures.
        assert!(w1.1 == 32_640.0 && w1.0 > -20_513.2 && p1.0 > -2_905.7 && p1.1 < 2_905.7);
    }

    /// Blocks of extremes (constant 0 / 255, the sign patterns of every basis function) and
    /// random ones: the model's integers (a debug build checks every lane) against the exact DCT
    /// at the AAN scale, in `F8` units.
    #[test]
    fn aan_error_against_the_exact_dct() {
        let mut blocks: Vec<[u8; 64]> = vec![[0; 64], [255; 64], [128; 64]];
        for u in 0..8 {
            for v in 0..8 {
                let mut b = [0u8; 64];
                let mut nb = [0u8; 64];
                for y in 0..8 {
                    for x in 0..8 {
                        let a = ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
                            * ((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI / 16.0).cos();
                        b[8 * y + x] = if a >= 0.0 { 255 } else { 0 };
                        nb[8 * y + x] = 255 - b[8 * y + x];
                    }
                }
                blocks.push(b);
                blocks.push(nb);
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
        let (mut worst, mut sum, mut n) = (0f64, 0f64, 0usize);
        let mut wc = [0f64; 64];
        for b in &blocks {
            let mut f = [0i16; 64];
            aan_fdct(b, 8, &mut f);
            let e = exact(b);
            for nat in 0..64 {
                let (u, v) = (nat % 8, nat / 8);
                let scale = aan(u) * aan(v) * (1u32 << P2[u]) as f64;
                let got = f[slot(ZZ_OF_NAT[nat] as usize)] as f64 / scale;
                let err = (got - e[nat]).abs();
                worst = worst.max(err);
                wc[nat] = wc[nat].max(err);
                sum += err * err;
                n += 1;
            }
        }
        eprintln!(
            "aan error in F8 units: worst {worst:.3}, rms {:.3} over {} blocks",
            (sum / n as f64).sqrt(),
            blocks.len()
        );
        for v in 0..8 {
            let r: Vec<String> = wc[8 * v..8 * v + 8]
                .iter()
                .map(|e| format!("{e:.2}"))
                .collect();
            eprintln!("aan worst error of row v = {v}, u = 0..8: {}", r.join(" "));
        }
        // 3.437 measured (the islow model's bound is 1.064, fdct_error_bound; a quantiser step
        // is 8 Q >= 8 units).
        assert!(worst <= 3.5, "worst error {worst}");
    }

    /// The AAN quantiser: `q = round(|x| / d)` within the reciprocal's rounding, and the zero
    /// thresholds are where `q` becomes 1.
    #[test]
    fn aan_quantiser_divides() {
        for quality in [10u8, 50, 75, 90, 95] {
            let t = Tables::new_aan(quality);
            for (k, e) in t.quant.iter().enumerate() {
                let nat = ZIGZAG[k] as usize;
                let d = 8.0
                    * t.dqt[k] as f64
                    * aan(nat % 8)
                    * aan(nat / 8)
                    * (1u32 << P2[nat % 8]) as f64;
                for a in (0..=32767u32).step_by(7) {
                    let q = e.quantise(a) as f64;
                    let want = a as f64 / d;
                    assert!(
                        (q - want).abs() <= 0.5 + 1e-3 * want.max(1.0),
                        "q{quality} k {k}: {a} / {d} = {want}, got {q}"
                    );
                }
                if k > 0 {
                    let th = e.threshold();
                    assert!(th >= 1 && e.quantise(th) == 1 && e.quantise(th - 1) == 0);
                }
            }
            assert_eq!(t.quality, Tables::id(quality, true));
            assert_eq!(t.dqt, Tables::new(quality).dqt);
        }
    }
}
