//! A forward DCT whose first pass is the Arai–Agui–Nakajima factorisation on packed 16-bit
//! lanes, two columns at a time, the AAN output scale folded into the quantiser's divisors: the
//! portable model ([`PortableAan`]) of the PULP kernel that feature `aan` builds into `Pulp`
//! (and `Portable`). Not the default DCT ([`crate::fdct`] is): on the GAP8 model it ran 3.5–5.1 %
//! fewer instructions and no fewer cycles on the worst of 8 code layouts (docs/jpeg.md, "What
//! is left").
//!
//! Pass 1 runs down the columns: libjpeg's `jfdctfst.c` factorisation (Y. Arai, T. Agui,
//! M. Nakajima, "A fast DCT-SQ scheme for images", Trans. IEICE E71(11), 1988: 29 additions and
//! 5 multiplications by constants) on lanes holding two columns, in the pairs `(0, 2)`, `(3, 1)`,
//! `(7, 5)`, `(4, 6)` that [`crate::fdct`]'s pass 2 reads as halfword pairs. Its output `v` is
//! the 1-D DCT scaled by `sqrt 8 aan(v)` (`aan(0) = 1`, `aan(k) = sqrt 2 cos(k pi / 16)`). Every
//! value is one 16-bit lane of the packed kernel (`pv.add.h` / `pv.sub.h`; the products as
//! RI5CY's `p.mulsRN` / `p.mulhhsRN`, a 16 × 16 multiply of the low / high halves, rounded and
//! shifted right by an immediate, and `pv.pack.h` to put the halves back); the lanes of a packed
//! instruction do not interact, so one column at a time here is the same integers as two there.
//!
//! * Pass 1: pixels `p << P1` (the kernel may shift fewer values: every product's input is a sum
//!   of pixels, so `(x 2^P1 c + 2^(n-1)) >> n = (x c + 2^(n-P1-1)) >> (n - P1)` exactly and only
//!   the sums that meet a product need the shift), the butterflies, the products `(x C +
//!   2^(N-1)) >> N` with `C` in `N` = 15 fraction bits (14 for 1.3066), the level shift `128 * 8
//!   << P1` off the DC output. No descale. `P1 = 0` (integer pixels, the kernel measured): `|T|
//!   <= 1,283.5`; `P1 = 2` gives `|T| <= 5,129.4` and more precision for 4 more instructions a
//!   lane pair (`P1 = 3` wraps in pass 2).
//! * Pass 2 along the rows: [`crate::fdct`]'s pass 2 (the even/odd butterflies in halfwords, dot
//!   products of the 16-bit cosines in 32 bits) with the final shift `K2` instead of 16: `F[v][u]
//!   = (acc + 2^(K2-1)) >> K2 = F8 aan(v) 2^(13.5 + P1 - K2)`, written to the coefficient's slot
//!   ([`crate::fdct::slot`]).
//!
//! The quantiser ([`crate::tables::Tables::new_aan`]) divides coefficient `(u, v)` by `d = 8 Q
//! aan(v) sqrt 8 2^(P1 + 12 - K2)` (its reciprocal `round(2^r / d)` in `[2^15, 2^16]` and the
//! bias `2^(r-1)`, so that `q = round(|x| / d)` up to the reciprocal's rounding); the zero
//! thresholds follow from the entries ([`crate::tables::QuantEntry::threshold`]).
//!
//! No lane wraps for any pixels 0..=255: the test `lanes_never_wrap` carries every value through
//! both passes as an affine form of the 64 pixels plus an interval for the roundings so far and
//! checks the form's extremes over the pixel box (which bound every value of every block, not
//! only the ones tried) against `-32768..=32767`; the figures it prints are in `docs/jpeg.md`.

use crate::fdct::{DctCtx, Kernel, Work, ZZ_OF_NAT, slot};

/// Fraction bits of the pixels in pass 1 (and of its output).
pub const P1: u32 = 0;
/// The final shift of pass 2.
pub const K2: u32 = 12;

/// `cos(pi / 4)` in 15 fraction bits.
pub const C0_707: i32 = 23_170;
/// `cos(3 pi / 8)` in 15 fraction bits.
pub const C0_382: i32 = 12_540;
/// `cos(pi / 8) - cos(3 pi / 8)` in 15 fraction bits.
pub const C0_541: i32 = 17_734;
/// `cos(pi / 8) + cos(3 pi / 8)` in 14 fraction bits.
pub const C1_306: i32 = 21_407;

/// `round(2^15 sqrt 8 aan(k))`, `aan(0) = 1`, `aan(k) = sqrt 2 cos(k pi / 16)`: the output
/// scale of pass 1's output `k`.
pub const AAN_SCALE: [u32; 8] = [
    92_682, 128_553, 121_095, 108_982, 92_682, 72_820, 50_159, 25_571,
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
    /// A dot product in 32 bits rounded to a lane: `(sum x_i c_i + 2^(k-1)) >> k`.
    fn dotr(x: [Self; 4], c: [i32; 4], k: u32) -> Self;
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
    #[inline(always)]
    fn dotr(x: [Self; 4], c: [i32; 4], k: u32) -> Self {
        h((x[0] * c[0] + x[1] * c[1] + x[2] * c[2] + x[3] * c[3] + (1 << (k - 1))) >> k)
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

/// Pass 1 on one column of pixels already shifted left by [`P1`]: `T[v]`.
#[inline(always)]
pub fn col1<L: Lane>(x: [L; 8]) -> [L; 8] {
    pass(x, 1024 << P1)
}

/// Pass 2 on one row `v` of pass-1 values: [`crate::fdct`]'s pass 2 (the halfword butterflies,
/// the even half's second level, the dot products of [`crate::fdct::COEF`]) with the final shift
/// [`K2`]: `F[v][u]` for `u = 0..8`.
#[inline(always)]
pub fn row2<L: Lane>(t: [L; 8]) -> [L; 8] {
    let s = [
        t[0].add(t[7]),
        t[1].add(t[6]),
        t[2].add(t[5]),
        t[3].add(t[4]),
    ];
    let d = [
        t[0].sub(t[7]),
        t[1].sub(t[6]),
        t[2].sub(t[5]),
        t[3].sub(t[4]),
    ];
    // The second level (the kernel's even outputs are one dot product of these): only its lanes'
    // bounds matter here, the sums below are the same integers.
    let _ = (
        s[0].add(s[3]),
        s[2].add(s[1]),
        s[0].sub(s[3]),
        s[2].sub(s[1]),
    );
    core::array::from_fn(|u| {
        let c = crate::fdct::COEF[u].map(|c| c as i32);
        L::dotr(if u % 2 == 0 { s } else { d }, c, K2)
    })
}

/// Byte offset in the output ([`crate::fdct::slot`] order) of each pass-2 output in the order
/// this pass 2 makes them (row `v`, then `u`): `2 slot(ZZ_OF_NAT[8 v + u])` at `8 v + u`; what
/// [`crate::tables::Tables::new_aan`] puts in [`crate::tables::Tables::zz`] for a PULP kernel's
/// stores (the islow kernel's pass 2 makes them column by column, [`crate::fdct::ZZ_STORE`]).
pub const ZZ_ROWS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut n = 0;
    while n < 64 {
        t[n] = 2 * slot(ZZ_OF_NAT[n] as usize) as u8;
        n += 1;
    }
    t
};

/// The model on a block whose rows are `stride` bytes apart: `F8 aan(v) 2^(13.5 + P1 - K2)` in
/// [`crate::fdct::slot`] order.
pub fn aan_fdct(src: &[u8], stride: usize, out: &mut [i16; 64]) {
    let mut t = [[0i32; 8]; 8]; // t[v][x]
    for x in 0..8 {
        let c = col1::<i32>(core::array::from_fn(|y| (src[y * stride + x] as i32) << P1));
        for (v, &c) in c.iter().enumerate() {
            t[v][x] = c;
        }
    }
    for (v, t) in t.iter().enumerate() {
        for (u, &f) in row2(*t).iter().enumerate() {
            out[(ZZ_ROWS[8 * v + u] / 2) as usize] = f as i16;
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
        fn dotr(x: [Self; 4], c: [i32; 4], k: u32) -> Self {
            // floor((acc + 2^(k-1)) / 2^k) = acc / 2^k + e, e in [-1/2, 1/2).
            let s = 1.0 / (1u64 << k) as f64;
            let mut r = Aff::konst(0);
            for (x, &c) in x.iter().zip(&c) {
                let m = c as f64 * s;
                for (a, b) in r.a.iter_mut().zip(x.a) {
                    *a += m * b;
                }
                r.c += m * x.c;
                let (l, h) = (m * x.lo, m * x.hi);
                r.lo += l.min(h);
                r.hi += l.max(h);
            }
            (r.lo, r.hi) = (r.lo - 0.5, r.hi + 0.5);
            r.check()
        }
    }

    /// No lane of either pass wraps for any block of pixels 0..=255 (the affine bound of
    /// [`Aff`], which covers every block), and the bounds the module docs state hold.
    #[test]
    fn lanes_never_wrap() {
        let mut p1 = (0f64, 0f64);
        let cols: Vec<[Aff; 8]> = (0..8)
            .map(|x| {
                let c = col1::<Aff>(core::array::from_fn(|y| {
                    let mut v = Aff::konst(0);
                    v.a[8 * y + x] = (1u32 << P1) as f64;
                    v
                }));
                for t in &c {
                    let (a, b) = t.range();
                    p1 = (p1.0.min(a), p1.1.max(b));
                }
                c
            })
            .collect();
        let w1 = WIDEST.with(|w| w.get());
        WIDEST.with(|w| w.set((0.0, 0.0)));
        let mut out = (0f64, 0f64);
        let rows = (0..8).map(|v| core::array::from_fn(|x| cols[x][v]));
        for r in rows {
            for o in row2::<Aff>(r) {
                let (a, b) = o.range();
                out = (out.0.min(a), out.1.max(b));
            }
        }
        let w2 = WIDEST.with(|w| w.get());
        eprintln!(
            "aan lanes: pass 1 widest {:.1}..{:.1}, its output {:.1}..{:.1}; pass 2 widest {:.1}..{:.1}, its output {:.1}..{:.1}",
            w1.0, w1.1, p1.0, p1.1, w2.0, w2.1, out.0, out.1
        );
        // The figures of the module docs and of docs/jpeg.md (P1 = 0: pass 1's widest lane is
        // the DC's pixel sum 8 * 255 before the level shift; pass 2's halfword sums of four `T`
        // and its output fit; up to P1 = 2 they do, P1 = 3 wraps).
        assert!(w1.1 == 2_040.0 && w1.0 > -1_283.6 && p1.0 > -1_283.6 && p1.1 < 1_283.6);
        assert!(w2.0 > -29_041.7 && w2.1 < 29_041.7);
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
                let v = nat / 8;
                let scale = aan(v) * 2f64.powf(13.5 + P1 as f64 - K2 as f64);
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
        // With P1 = 0, 24.141 measured (P1 = 2: 6.213), at v = 7 (pass 1's output 7 is scaled by
        // sqrt 8 aan(7) = 0.78: its products' roundings, to integers, weigh most); the islow
        // model's bound is 1.064 (fdct_error_bound); a quantiser step is 8 Q >= 8 units.
        assert!(worst <= 24.2, "worst error {worst}");
    }

    /// Each row-order store offset lands on its coefficient's slot.
    #[test]
    fn zz_rows_are_the_slots_in_row_order() {
        for v in 0..8 {
            for u in 0..8 {
                let k = crate::fdct::coef_of_slot(ZZ_ROWS[8 * v + u] as usize / 2);
                assert_eq!(ZIGZAG[k] as usize, 8 * v + u);
            }
        }
    }

    /// The AAN quantiser: `q = round(|x| / d)` within the reciprocal's rounding, and the zero
    /// thresholds are where `q` becomes 1.
    #[test]
    fn aan_quantiser_divides() {
        for quality in [10u8, 50, 75, 90, 95] {
            let t = Tables::new_aan(quality);
            for (k, e) in t.quant.iter().enumerate() {
                let nat = ZIGZAG[k] as usize;
                let d =
                    8.0 * t.dqt[k] as f64 * aan(nat / 8) * 2f64.powf(13.5 + P1 as f64 - K2 as f64);
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
            assert_eq!(t.zz, ZZ_ROWS);
        }
    }
}
