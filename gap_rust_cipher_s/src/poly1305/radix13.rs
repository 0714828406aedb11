//! The radix-2^13 block kernel for PULP's 16-bit dot products (`pv.dotsp.h` / `pv.sdotsp.h`:
//! two signed 16×16-bit products summed into 32 bits in one single-cycle instruction).
//!
//! On RI5CY a 64-bit product costs `mul` + `mulhu`, and `mulhu` holds the pipeline for 5 cycles:
//! the radix-2^32 block (16 such products) spends 96 cycles on multiplying alone. Here a field
//! element is ten *signed* limbs of 13 bits (`h = Σ h_i 2^(13 i)`, `|h_i| ≤ 2^12` plus a little),
//! kept as five packed halfword pairs `(h_2a, h_2a+1)`, and a block's 100 limb products are 50
//! dot-product instructions:
//!
//! ```text
//! x   = h + m                              five `pv.add.h` (m: the block cut into 13-bit limbs)
//! t_k = Σ_a (x_2a, x_2a+1) · Q(k - 2a)      k = 0..9, a = 0..4
//! Q(j) = (ρ(j), ρ(j - 1)),  ρ(i) = r_i for i ≥ 0, 5 r_(i+10) for i < 0    (2^130 = 5 mod p)
//! h_k = t_k + carry - 2^13 round(.)        signed carries (`p.addRN`, `p.extract`), 5 c_9 into h_0
//! ```
//!
//! r is also in balanced signed limbs (`|r_i| ≤ 2^12`; clamping makes `r_4 ≤ 256` and
//! `r_9 ≤ 128`). Why nothing overflows: a limb of `x` is at most `4096 + 161 + 8191 = 12448` in
//! magnitude (`h_1` takes the small carry of the wrap-around), `|5 r_i| ≤ 20480` fits a halfword,
//! and the largest sum of coefficient magnitudes, `t_0`'s, is
//! `4096 + 5 (7·4096 + 256 + 128) = 149,376`, so `|t_k| ≤ 12448 · 149,376 + 2^18 < 1.86·10^9 <
//! 2^31` (`bound_of_the_dot_products` checks this arithmetic, and the model below asserts every
//! partial sum in debug builds).
//!
//! The 2^128 bit of each block is kept in the state: limb 9 of the stored accumulator holds
//! `h_9 + 2^11` (added with the carry of the previous block), so the message limbs are the bare
//! block; the conversions in and out of [`Fe`] add and remove it.
//!
//! [`Radix13`] is the portable model of the PULP loop (`Pulp13` (`pulp.rs`)): the same operations
//! in the same order on the same packed words, so the host tests (against RustCrypto) check the
//! arithmetic that GVSOC runs.
use super::{BlockKernel, Fe, M26, Poly1305Key, to32};

const M13: u32 = (1 << 13) - 1;

/// The ten balanced 13-bit limbs of a clamped r (`r32`: its four little-endian words).
fn r_limbs(r32: &[u32; 4]) -> [i32; 10] {
    let r =
        r32[0] as u128 | (r32[1] as u128) << 32 | (r32[2] as u128) << 64 | (r32[3] as u128) << 96;
    let mut out = [0i32; 10];
    let mut c = 0i32;
    for (i, o) in out.iter_mut().enumerate() {
        let v = ((r >> (13 * i)) as u32 & M13) as i32 + c;
        c = (v + 4096) >> 13;
        *o = v - (c << 13);
    }
    out
}

/// A packed halfword pair: `hi` in bits 31:16, `lo` in bits 15:0 (`pv.pack.h hi, lo`).
#[inline(always)]
fn pack(hi: i32, lo: i32) -> u32 {
    ((hi as u32 & 0xffff) << 16) | (lo as u32 & 0xffff)
}

/// The kernel's coefficient pairs `Q(j)` for `j = -8..=9` (index `j + 8`).
pub(super) fn q_table(r32: &[u32; 4]) -> [u32; 18] {
    let r = r_limbs(r32);
    let rho = |i: i32| {
        if i >= 0 {
            r[i as usize]
        } else {
            5 * r[(i + 10) as usize]
        }
    };
    let mut q = [0u32; 18];
    for (n, slot) in q.iter_mut().enumerate() {
        let j = n as i32 - 8;
        *slot = pack(rho(j - 1), rho(j));
    }
    q
}

/// `Fe` to the kernel's state: five packed pairs of balanced limbs, the 2^128 bit of the next
/// block already in limb 9.
pub(crate) fn to13(a: &Fe) -> [u32; 5] {
    let w = to32(a);
    let v = w[0] as u128 | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96;
    let mut l = [0i32; 10];
    for (i, x) in l.iter_mut().enumerate().take(9) {
        *x = ((v >> (13 * i)) as u32 & M13) as i32;
    }
    // Bits 117.. of the value (w[4] holds what is above 2^128: a few bits).
    l[9] = ((v >> 117) as u32 | (w[4] << 11)) as i32 + 2048;
    let mut c = 0;
    for x in l.iter_mut() {
        *x += c;
        c = (*x + 4096) >> 13;
        *x -= c << 13;
    }
    l[0] += 5 * c;
    let c = (l[0] + 4096) >> 13;
    l[0] -= c << 13;
    l[1] += c;
    [0, 1, 2, 3, 4].map(|a| pack(l[2 * a + 1], l[2 * a]))
}

/// The kernel's state back to `Fe` (the pending 2^128 bit taken out of limb 9).
pub(crate) fn from13(h: &[u32; 5]) -> Fe {
    let lo = |x: u32| x as u16 as i16 as i32;
    let hi = |x: u32| (x >> 16) as u16 as i16 as i32;
    // Radix-2^26 limbs (signed), plus p = 2^130 - 5 so that every limb is positive.
    const P26: [i32; 5] = [
        (1 << 26) - 5,
        M26 as i32,
        M26 as i32,
        M26 as i32,
        M26 as i32,
    ];
    let mut f = [0i32; 5];
    for k in 0..5 {
        f[k] = lo(h[k]) + (hi(h[k]) << 13) + P26[k];
    }
    f[4] -= 2048 << 13;
    // |limbs| < 2^25.1 before adding p: all positive now, below 2^27. One carry pass.
    let mut o = [0u32; 5];
    let mut c = 0i32;
    for k in 0..5 {
        let x = f[k] + c;
        o[k] = x as u32 & M26;
        c = x >> 26;
    }
    o[0] += 5 * c as u32;
    Fe(o)
}

/// The message limbs of one block (four little-endian words), packed in pairs `(m_2a, m_2a+1)`.
#[inline(always)]
fn message(w: [u32; 4]) -> [u32; 5] {
    let m = [
        w[0] & M13,
        (w[0] >> 13) & M13,
        (w[0] >> 26) | ((w[1] & 0x7f) << 6),
        (w[1] >> 7) & M13,
        (w[1] >> 20) | ((w[2] & 1) << 12),
        (w[2] >> 1) & M13,
        (w[2] >> 14) & M13,
        (w[2] >> 27) | ((w[3] & 0xff) << 5),
        (w[3] >> 8) & M13,
        w[3] >> 21,
    ];
    [0, 1, 2, 3, 4].map(|a| (m[2 * a + 1] << 16) | m[2 * a])
}

/// `pv.add.h`.
#[inline(always)]
fn add_h(a: u32, b: u32) -> u32 {
    let lo = (a as u16).wrapping_add(b as u16) as u32;
    let hi = ((a >> 16) as u16).wrapping_add((b >> 16) as u16) as u32;
    (hi << 16) | lo
}

/// `acc + pv.dotsp.h(a, b)`; every partial sum must fit 32 bits (checked in debug builds).
#[inline(always)]
fn sdot(acc: i32, a: u32, b: u32) -> i32 {
    let p = |x: u32, y: u32| (x as u16 as i16 as i64) * (y as u16 as i16 as i64);
    let s = acc as i64 + p(a, b);
    debug_assert!(s == s as i32 as i64, "radix-2^13 partial sum overflows");
    let s = s + p(a >> 16, b >> 16);
    debug_assert!(s == s as i32 as i64, "radix-2^13 partial sum overflows");
    s as i32
}

/// `p.addRN x, zero, 13`: `x / 2^13` rounded.
#[inline(always)]
fn round13(x: i32) -> i32 {
    x.wrapping_add(4096) >> 13
}

/// `p.extract x, 12, 0`: the low 13 bits of `x`, sign-extended.
#[inline(always)]
fn sext13(x: i32) -> i32 {
    (x << 19) >> 19
}

/// One block: `h = (h + m + 2^128) r`, `h` in the kernel's packed state.
#[inline(always)]
pub(super) fn block(h: &mut [u32; 5], q: &[u32; 18], w: [u32; 4]) {
    let m = message(w);
    let x = [0, 1, 2, 3, 4].map(|a| add_h(h[a], m[a]));
    let mut t = [0i32; 10];
    for (k, tk) in t.iter_mut().enumerate() {
        for (a, xa) in x.iter().enumerate() {
            *tk = sdot(*tk, *xa, q[k + 8 - 2 * a]);
        }
    }
    let mut e = [0i32; 10];
    let mut c = 0;
    for k in 0..10 {
        let mut v = t[k] + c;
        if k == 9 {
            v += 2048;
        }
        c = round13(v);
        e[k] = sext13(v);
    }
    let v = e[0] + 5 * c;
    e[0] = sext13(v);
    e[1] += round13(v);
    *h = [0, 1, 2, 3, 4].map(|a| pack(e[2 * a + 1], e[2 * a]));
}

/// The radix-2^13 kernel, portable model of `Pulp13` (`pulp.rs`) (see the module text).
pub struct Radix13;

impl BlockKernel for Radix13 {
    #[inline(never)]
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]) {
        if words.len() < 4 {
            return;
        }
        let mut h = to13(acc);
        for c in words.chunks_exact(4) {
            block(&mut h, &key.q, [c[0], c[1], c[2], c[3]].map(u32::from_le));
        }
        *acc = from13(&h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The overflow argument of the module text, as arithmetic on the worst limbs.
    #[test]
    fn bound_of_the_dot_products() {
        // Limb bounds: |r_i| <= 4096, r_4 <= 256, r_9 <= 128 (clamping).
        let rmax = [4096i64, 4096, 4096, 4096, 256, 4096, 4096, 4096, 4096, 128];
        let wrap_carry = (5 * ((1i64 << 31) >> 13) + 4096 + 4096) >> 13; // into h_1
        assert!(wrap_carry <= 161);
        let x = 4096 + wrap_carry + 8191;
        for k in 0..10 {
            let coef: i64 = (0..10)
                .map(|i| {
                    if i <= k {
                        rmax[k - i]
                    } else {
                        5 * rmax[k + 10 - i]
                    }
                })
                .sum();
            let t = x * coef + (1 << 18);
            assert!(t + 4096 < 1 << 31, "t_{k} could reach {t}");
        }
        let r5 = 5 * rmax.iter().max().unwrap();
        assert!(r5 < 1 << 15);
        assert!(x < 1 << 15);
    }

    fn keys() -> impl Strategy<Value = [u32; 4]> {
        any::<[u32; 4]>().prop_map(|k| {
            [
                k[0] & 0x0fff_ffff,
                k[1] & 0x0fff_fffc,
                k[2] & 0x0fff_fffc,
                k[3] & 0x0fff_fffc,
            ]
        })
    }

    proptest! {
        /// r's balanced limbs are the value, within the bounds the overflow argument uses.
        #[test]
        fn r_limbs_are_balanced(r32 in keys()) {
            let l = r_limbs(&r32);
            let v: i128 = l.iter().enumerate().map(|(i, &x)| (x as i128) << (13 * i)).sum();
            let r = r32[0] as i128 | (r32[1] as i128) << 32 | (r32[2] as i128) << 64 | (r32[3] as i128) << 96;
            prop_assert_eq!(v, r);
            prop_assert!(l.iter().all(|x| x.abs() <= 4096));
            prop_assert!(l[4].abs() <= 256 && l[9].abs() <= 128);
        }

        /// In and out of the packed state is the identity mod p.
        #[test]
        fn state_round_trip(a in any::<[u32; 5]>()) {
            let f = Fe(a.map(|l| l & M26));
            prop_assert_eq!(from13(&to13(&f)).freeze(), f.freeze());
        }
    }

    #[test]
    fn worst_keys_and_blocks_do_not_overflow() {
        // r with every clamped-in bit set, and alternating patterns; messages of all ones.
        for r32 in [
            [0x0fff_ffff, 0x0fff_fffc, 0x0fff_fffc, 0x0fff_fffc],
            [0x0800_1000, 0x0800_1000, 0x0800_1000, 0x0800_1000],
            [0x0aaa_aaaa, 0x0aaa_aaa8, 0x0aaa_aaa8, 0x0aaa_aaa8],
        ] {
            let q = q_table(&r32);
            for start in [Fe::ZERO, Fe([M26; 5])] {
                let mut h = to13(&start);
                for _ in 0..64 {
                    block(&mut h, &q, [u32::MAX; 4]);
                }
            }
        }
    }
}
