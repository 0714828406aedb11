//! Constant-time multiplication in GCM's GF(2^128), for 32-bit cores without carry-less multiply.
//!
//! # Representation
//!
//! An element is four 32-bit words `w`, loaded big-endian from the 16-byte block with `w[3]` =
//! bytes 0..4 and `w[0]` = bytes 12..16. Read as one 128-bit integer (`w[0]` least significant),
//! this is the *bit reversal* of GCM's polynomial (GCM puts the coefficient of `x^0` in the most
//! significant bit of byte 0). Carry-less products commute with bit reversal up to a shift:
//! `rev128(a) ⊗ rev128(b) = rev255(a ⊗ b)`, so the 255-bit integer product shifted left by one
//! is `rev256(a ⊗ b)`, and the reduction modulo `x^128 + x^7 + x^2 + x + 1` folds its low four
//! words into the high four. This is the layout and reduction of T. Pornin's BearSSL
//! (`ghash_ctmul`, `ghash_ctmul32`), reimplemented here.
//!
//! # Carry-less products from integer multiplies ("holes")
//!
//! A 32×32 carry-less product is computed with ordinary integer multiplies on operands split
//! into four masks `0x11111111 << i`: in the product of two such pieces every bit position gets
//! at most 8 partial products, and the carries of a sum of at most 8 ones never reach the next
//! bit of the same residue class mod 4 (4 bits apart), so masking the integer products keeps
//! exactly the carry-less bits. Sixteen multiplies give one 32×32 carry-less product.
//!
//! Three kernels ([`Multiplier`]):
//!
//! * [`Half`] (the default, [`Prepared`]): a third Karatsuba level down to 16×16 products,
//!   which fit the low half of an integer multiply; with holes three bits apart (at most 6
//!   partial products per position, sums below 8) 9 `mul` give one, 243 `mul` a 128×128
//!   product, no `mulhu`, no bit reversal.
//! * [`Wide`]: 32×32 → 64 products (`mul` and `mulhu` on rv32), 9 per 128×128 product
//!   (two levels of Karatsuba): 144 `mul` + 144 `mulhu`.
//! * [`Low`]: only the low 32 bits of each product (`mul`); the high half comes from the
//!   same product of the bit-reversed operands (`ghash_ctmul32`), 18 per 128×128 product: 288
//!   `mul` and 13 word bit reversals (no `mulhu`, which takes several cycles on some cores).
//!
//! # Constant time
//!
//! No table, no branch, no memory index depends on an operand: only `and`, `or`, `xor`, shifts
//! by constants and integer multiplies. Multiplies on RI5CY (GAP8) and on common hosts take a
//! fixed number of cycles regardless of their operands.

/// One field element (see the module docs for the word order).
pub type Elem = [u32; 4];

const M0: u32 = 0x1111_1111;
const M1: u32 = 0x2222_2222;
const M2: u32 = 0x4444_4444;
const M3: u32 = 0x8888_8888;

/// A fixed multiplier (the hash key `H`, or a power of it) prepared once, and the multiply by it.
/// The kernels are [`Half`], [`Wide`] and [`Low`].
pub trait Multiplier: Clone {
    /// Prepares `h` as the right operand of [`Multiplier::mul`].
    fn new(h: &Elem) -> Self;
    /// `y · h`.
    fn mul(&self, y: &Elem) -> Elem;
}

/// The kernel [`super::Ghash`] and the cluster's GHASH lanes use by default: [`Half`]. On QEMU
/// (instructions) [`Wide`] is smaller, but its 144 `mulhu` take 5 cycles each on RI5CY; on the
/// GAP8 model AES-128-GCM over 128 KiB on one core was 126.8 cycles/byte with `Half` against
/// 166.3 with `Wide`, both inlined (`docs/aead.md`, AES-128-GCM).
pub type Prepared = Half;

/// Loads a block (big-endian words, `w[3]` first).
#[inline(always)]
pub fn load(b: &[u8; 16]) -> Elem {
    let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    [w(12), w(8), w(4), w(0)]
}

/// Stores an element as a block.
#[inline(always)]
pub fn store(e: &Elem) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&e[3].to_be_bytes());
    b[4..8].copy_from_slice(&e[2].to_be_bytes());
    b[8..12].copy_from_slice(&e[1].to_be_bytes());
    b[12..16].copy_from_slice(&e[0].to_be_bytes());
    b
}

/// An operand split into its four hole masks.
type Split = [u32; 4];

#[inline(always)]
fn split(y: u32) -> Split {
    [y & M0, y & M1, y & M2, y & M3]
}

/// The nine Karatsuba operands of a 128-bit value: `a0, a1, a0^a1` (low half), `a2, a3, a2^a3`
/// (high half), `a0^a2, a1^a3, a0^a1^a2^a3` (sum of halves).
#[inline(always)]
fn kara9(a: &Elem) -> [u32; 9] {
    let (l, h) = (a[0] ^ a[2], a[1] ^ a[3]);
    [
        a[0],
        a[1],
        a[0] ^ a[1],
        a[2],
        a[3],
        a[2] ^ a[3],
        l,
        h,
        l ^ h,
    ]
}

/// Kernel `wide`: `h`'s Karatsuba operands split into hole masks; 32×32 → 64-bit integer
/// products (`mul` + `mulhu` on rv32), 9 carry-less products per multiply. Wiped on drop.
#[derive(Clone)]
pub struct Wide {
    plain: [Split; 9],
}

/// Kernel `low`: also the bit-reversed operands; only the low 32 bits of each integer product
/// (`mul`), 18 carry-less products per multiply (as BearSSL's `ghash_ctmul32`). Wiped on drop.
#[derive(Clone)]
pub struct Low {
    plain: [Split; 9],
    rev: [Split; 9],
}

impl Drop for Wide {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.plain);
    }
}

impl Drop for Low {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.plain);
        zeroize::Zeroize::zeroize(&mut self.rev);
    }
}

fn split9(k: [u32; 9]) -> [Split; 9] {
    let mut p = [[0; 4]; 9];
    for (d, &w) in p.iter_mut().zip(k.iter()) {
        *d = split(w);
    }
    p
}

impl Multiplier for Wide {
    #[inline]
    fn new(h: &Elem) -> Self {
        Wide {
            plain: split9(kara9(h)),
        }
    }

    #[inline(always)]
    fn mul(&self, y: &Elem) -> Elem {
        let a = kara9(y);
        let p = &self.plain;
        // Each 64×64 Karatsuba product is finished before the next starts, so that at most
        // three 64-bit products are live (fewer spills on rv32).
        let l = k64(
            clmul_wide(a[0], &p[0]),
            clmul_wide(a[1], &p[1]),
            clmul_wide(a[2], &p[2]),
        );
        let h = k64(
            clmul_wide(a[3], &p[3]),
            clmul_wide(a[4], &p[4]),
            clmul_wide(a[5], &p[5]),
        );
        let m = k64(
            clmul_wide(a[6], &p[6]),
            clmul_wide(a[7], &p[7]),
            clmul_wide(a[8], &p[8]),
        );
        reduce(combine4(&l, &h, &m))
    }
}

impl Multiplier for Low {
    #[inline]
    fn new(h: &Elem) -> Self {
        Low {
            plain: split9(kara9(h)),
            rev: split9(kara9(&[
                h[0].reverse_bits(),
                h[1].reverse_bits(),
                h[2].reverse_bits(),
                h[3].reverse_bits(),
            ])),
        }
    }

    #[inline(always)]
    fn mul(&self, y: &Elem) -> Elem {
        let a = kara9(y);
        // The bit-reversed operands' Karatsuba words are the reversals of the plain ones
        // (reversal is linear over XOR): reverse the four words, rebuild the sums.
        let r = kara9(&[
            y[0].reverse_bits(),
            y[1].reverse_bits(),
            y[2].reverse_bits(),
            y[3].reverse_bits(),
        ]);
        // rev32(x) ⊗ rev32(y) = rev63(x ⊗ y): its low 32 bits, reversed, are bits 31..62 of
        // x ⊗ y, so one more shift gives the high word (bits 32..62).
        let c = |i: usize| {
            let lo = clmul_low(a[i], &self.plain[i]);
            let hi = clmul_low(r[i], &self.rev[i]).reverse_bits() >> 1;
            (lo as u64) | ((hi as u64) << 32)
        };
        let l = k64(c(0), c(1), c(2));
        let h = k64(c(3), c(4), c(5));
        let m = k64(c(6), c(7), c(8));
        reduce(combine4(&l, &h, &m))
    }
}

/// Kernel `half`: `h`'s Karatsuba operands cut into 16-bit halves and their sum (a third level of
/// Karatsuba), each split into three hole masks `0x49249249 << k`: a 16×16 carry-less product
/// fits the low half of one integer multiply, and with holes three bits apart at most 6 partial
/// products meet in a bit position (sums up to 6 fit in 3 bits), so 9 `mul` give it. 27 such
/// products per multiply: 243 `mul`, no `mulhu` (5 cycles on RI5CY) and no bit reversal. Wiped on
/// drop.
#[derive(Clone)]
pub struct Half {
    /// Per Karatsuba operand: low half, high half, their XOR, each as three class masks.
    y: [[u32; 9]; 9],
}

impl Drop for Half {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.y);
    }
}

const T0: u32 = 0x4924_9249;
const T1: u32 = 0x9249_2492;
const T2: u32 = 0x2492_4924;

fn split3(v: u32) -> [u32; 3] {
    [v & T0, v & T1, v & T2]
}

impl Multiplier for Half {
    #[inline]
    fn new(h: &Elem) -> Self {
        let mut y = [[0u32; 9]; 9];
        for (d, w) in y.iter_mut().zip(kara9(h)) {
            let (l, hh) = (w & 0xffff, w >> 16);
            d[0..3].copy_from_slice(&split3(l));
            d[3..6].copy_from_slice(&split3(hh));
            d[6..9].copy_from_slice(&split3(l ^ hh));
        }
        Half { y }
    }

    /// One copy, out of line (about 3.9 KB on riscv32: every caller inlining it cost the
    /// firmware ~15 KB of L2, which the frame buffers need); the call costs ~1 % of a block.
    #[inline(never)]
    #[cfg_attr(
        target_arch = "riscv32",
        unsafe(link_section = ".text.hot.3.ghash.mul")
    )]
    fn mul(&self, y: &Elem) -> Elem {
        let a = kara9(y);
        let p = &self.y;
        let l = k64(
            clmul_half(a[0], &p[0]),
            clmul_half(a[1], &p[1]),
            clmul_half(a[2], &p[2]),
        );
        let h = k64(
            clmul_half(a[3], &p[3]),
            clmul_half(a[4], &p[4]),
            clmul_half(a[5], &p[5]),
        );
        let m = k64(
            clmul_half(a[6], &p[6]),
            clmul_half(a[7], &p[7]),
            clmul_half(a[8], &p[8]),
        );
        reduce(combine4(&l, &h, &m))
    }
}

/// 16×16 carry-less product (31 bits) from 9 integer multiplies, `y` split by [`split3`].
#[cfg(not(target_arch = "riscv32"))]
#[inline(always)]
fn clmul16(x: u32, y: &[u32]) -> u32 {
    let x = split3(x);
    let m = |a: u32, b: u32| a.wrapping_mul(b);
    let z0 = m(x[0], y[0]) ^ m(x[1], y[2]) ^ m(x[2], y[1]);
    let z1 = m(x[0], y[1]) ^ m(x[1], y[0]) ^ m(x[2], y[2]);
    let z2 = m(x[0], y[2]) ^ m(x[1], y[1]) ^ m(x[2], y[0]);
    (z0 & T0) | (z1 & T1) | (z2 & T2)
}

/// 32×32 → 63-bit carry-less product from three 16×16 ones (Karatsuba), 27 `mul`.
#[cfg(not(target_arch = "riscv32"))]
#[inline(always)]
fn clmul_half(x: u32, y: &[u32; 9]) -> u64 {
    let (xl, xh) = (x & 0xffff, x >> 16);
    let lo = clmul16(xl, &y[0..3]);
    let hi = clmul16(xh, &y[3..6]);
    let mid = clmul16(xl ^ xh, &y[6..9]) ^ lo ^ hi;
    (lo as u64) ^ ((mid as u64) << 16) ^ ((hi as u64) << 32)
}

/// 32×32 → 63-bit carry-less product from three 16×16 ones (Karatsuba), 27 `mul`: one `asm!`
/// block of 88 rv32imc instructions on riscv32 (`lw`, `and`, `mul`, `xor`, `or`, shifts),
/// ordered so that no product or load is used by the next instruction. The same operations as
/// the portable version; checked against RustCrypto `ghash` on QEMU (`rv32_qemu` `ghash_check`).
#[cfg(target_arch = "riscv32")]
#[inline(always)]
fn clmul_half(x: u32, y: &[u32; 9]) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads the nine words of `y` (a valid `&[u32; 9]`); no other memory access, no
    // stack use; every register written is an output or a declared temporary.
    unsafe {
        core::arch::asm!(
            "srli {xh}, {x}, 16",
            "slli {xl}, {x}, 16",
            "srli {xl}, {xl}, 16",
            // lo = xl ⊗ y[0..3] (16×16, three classes).
            "lw {y0}, 0({yp})",
            "lw {y1}, 4({yp})",
            "lw {y2}, 8({yp})",
            "and {x0}, {xl}, {m0}",
            "and {x1}, {xl}, {m1}",
            "and {x2}, {xl}, {m2}",
            "mul {t0}, {x0}, {y0}",
            "mul {t1}, {x1}, {y2}",
            "mul {t2}, {x2}, {y1}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {lo}, {t0}, {m0}",
            "mul {t0}, {x0}, {y1}",
            "mul {t1}, {x1}, {y0}",
            "mul {t2}, {x2}, {y2}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m1}",
            "or {lo}, {lo}, {t0}",
            "mul {t0}, {x0}, {y2}",
            "mul {t1}, {x1}, {y1}",
            "mul {t2}, {x2}, {y0}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m2}",
            "or {lo}, {lo}, {t0}",
            // hi = xh ⊗ y[3..6] (16×16, three classes).
            "lw {y0}, 12({yp})",
            "lw {y1}, 16({yp})",
            "lw {y2}, 20({yp})",
            "and {x0}, {xh}, {m0}",
            "and {x1}, {xh}, {m1}",
            "and {x2}, {xh}, {m2}",
            "mul {t0}, {x0}, {y0}",
            "mul {t1}, {x1}, {y2}",
            "mul {t2}, {x2}, {y1}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {hi}, {t0}, {m0}",
            "mul {t0}, {x0}, {y1}",
            "mul {t1}, {x1}, {y0}",
            "mul {t2}, {x2}, {y2}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m1}",
            "or {hi}, {hi}, {t0}",
            "mul {t0}, {x0}, {y2}",
            "mul {t1}, {x1}, {y1}",
            "mul {t2}, {x2}, {y0}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m2}",
            "or {hi}, {hi}, {t0}",
            "xor {xl}, {xl}, {xh}",
            // mid = xl ⊗ y[6..9] (16×16, three classes).
            "lw {y0}, 24({yp})",
            "lw {y1}, 28({yp})",
            "lw {y2}, 32({yp})",
            "and {x0}, {xl}, {m0}",
            "and {x1}, {xl}, {m1}",
            "and {x2}, {xl}, {m2}",
            "mul {t0}, {x0}, {y0}",
            "mul {t1}, {x1}, {y2}",
            "mul {t2}, {x2}, {y1}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {mid}, {t0}, {m0}",
            "mul {t0}, {x0}, {y1}",
            "mul {t1}, {x1}, {y0}",
            "mul {t2}, {x2}, {y2}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m1}",
            "or {mid}, {mid}, {t0}",
            "mul {t0}, {x0}, {y2}",
            "mul {t1}, {x1}, {y1}",
            "mul {t2}, {x2}, {y0}",
            "xor {t0}, {t0}, {t1}",
            "xor {t0}, {t0}, {t2}",
            "and {t0}, {t0}, {m2}",
            "or {mid}, {mid}, {t0}",
            // Karatsuba: lo ^ (mid ^ lo ^ hi) << 16 ^ hi << 32.
            "xor {mid}, {mid}, {lo}",
            "xor {mid}, {mid}, {hi}",
            "slli {t0}, {mid}, 16",
            "srli {t1}, {mid}, 16",
            "xor {lo}, {lo}, {t0}",
            "xor {hi}, {hi}, {t1}",
            x = in(reg) x,
            yp = in(reg) y.as_ptr(),
            m0 = in(reg) T0,
            m1 = in(reg) T1,
            m2 = in(reg) T2,
            xl = out(reg) _,
            xh = out(reg) _,
            x0 = out(reg) _,
            x1 = out(reg) _,
            x2 = out(reg) _,
            y0 = out(reg) _,
            y1 = out(reg) _,
            y2 = out(reg) _,
            t0 = out(reg) _,
            t1 = out(reg) _,
            t2 = out(reg) _,
            mid = out(reg) _,
            lo = out(reg) lo,
            hi = out(reg) hi,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    (lo as u64) | ((hi as u64) << 32)
}

/// 32×32 → 63-bit carry-less product from 16 integer 32×32 → 64 multiplies.
///
/// On riscv32 one `asm!` block (rv32imc: `mul`, `mulhu`, `and`, `or`, `xor`, `slli`, `lw`;
/// 84 instructions): written by hand only so that the compiler cannot hoist the 32 multiplies of
/// all nine products of a block to the top and spill their results (it did: about 280 of the
/// 1,270 instructions of a block were spill loads and stores). Same operations as the portable
/// version below; checked against RustCrypto `ghash` on QEMU (`rv32_qemu` `ghash_check`).
#[cfg(target_arch = "riscv32")]
#[inline(always)]
fn clmul_wide(x: u32, y: &Split) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads the four words of `y` (a valid `&[u32; 4]`); no other memory access, no
    // stack use; every register written is an output or a declared temporary.
    unsafe {
        core::arch::asm!(
            // Split x by the masks 0x11111111 << k (m walks through them), load y's splits.
            "and {x0}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x1}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x2}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x3}, {x}, {m}",
            "srli {m}, {m}, 3",
            "lw {y0}, 0({yp})",
            "lw {y1}, 4({yp})",
            "lw {y2}, 8({yp})",
            "lw {y3}, 12({yp})",
            // z0 = x0 y0 ^ x1 y3 ^ x2 y2 ^ x3 y1, kept in class 0: lo/hi = z0 & m.
            "mul {l}, {x0}, {y0}",
            "mulhu {h}, {x0}, {y0}",
            "mul {t}, {x1}, {y3}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x1}, {y3}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x2}, {y2}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x2}, {y2}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x3}, {y1}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x3}, {y1}",
            "xor {h}, {h}, {t}",
            "and {lo}, {l}, {m}",
            "and {hi}, {h}, {m}",
            "slli {m}, {m}, 1",
            // z1 = x0 y1 ^ x1 y0 ^ x2 y3 ^ x3 y2, class 1.
            "mul {l}, {x0}, {y1}",
            "mulhu {h}, {x0}, {y1}",
            "mul {t}, {x1}, {y0}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x1}, {y0}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x2}, {y3}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x2}, {y3}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x3}, {y2}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x3}, {y2}",
            "xor {h}, {h}, {t}",
            "and {l}, {l}, {m}",
            "and {h}, {h}, {m}",
            "or {lo}, {lo}, {l}",
            "or {hi}, {hi}, {h}",
            "slli {m}, {m}, 1",
            // z2 = x0 y2 ^ x1 y1 ^ x2 y0 ^ x3 y3, class 2.
            "mul {l}, {x0}, {y2}",
            "mulhu {h}, {x0}, {y2}",
            "mul {t}, {x1}, {y1}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x1}, {y1}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x2}, {y0}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x2}, {y0}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x3}, {y3}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x3}, {y3}",
            "xor {h}, {h}, {t}",
            "and {l}, {l}, {m}",
            "and {h}, {h}, {m}",
            "or {lo}, {lo}, {l}",
            "or {hi}, {hi}, {h}",
            "slli {m}, {m}, 1",
            // z3 = x0 y3 ^ x1 y2 ^ x2 y1 ^ x3 y0, class 3.
            "mul {l}, {x0}, {y3}",
            "mulhu {h}, {x0}, {y3}",
            "mul {t}, {x1}, {y2}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x1}, {y2}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x2}, {y1}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x2}, {y1}",
            "xor {h}, {h}, {t}",
            "mul {t}, {x3}, {y0}",
            "xor {l}, {l}, {t}",
            "mulhu {t}, {x3}, {y0}",
            "xor {h}, {h}, {t}",
            "and {l}, {l}, {m}",
            "and {h}, {h}, {m}",
            "or {lo}, {lo}, {l}",
            "or {hi}, {hi}, {h}",
            x = in(reg) x,
            yp = in(reg) y.as_ptr(),
            m = inout(reg) M0 => _,
            x0 = out(reg) _,
            x1 = out(reg) _,
            x2 = out(reg) _,
            x3 = out(reg) _,
            y0 = out(reg) _,
            y1 = out(reg) _,
            y2 = out(reg) _,
            y3 = out(reg) _,
            l = out(reg) _,
            h = out(reg) _,
            t = out(reg) _,
            lo = out(reg) lo,
            hi = out(reg) hi,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    (lo as u64) | ((hi as u64) << 32)
}

/// 32×32 → 63-bit carry-less product from 16 integer 32×32 → 64 multiplies.
#[cfg(not(target_arch = "riscv32"))]
#[inline(always)]
fn clmul_wide(x: u32, y: &Split) -> u64 {
    let x = split(x);
    let m = |a: u32, b: u32| (a as u64).wrapping_mul(b as u64);
    let z0 = m(x[0], y[0]) ^ m(x[1], y[3]) ^ m(x[2], y[2]) ^ m(x[3], y[1]);
    let z1 = m(x[0], y[1]) ^ m(x[1], y[0]) ^ m(x[2], y[3]) ^ m(x[3], y[2]);
    let z2 = m(x[0], y[2]) ^ m(x[1], y[1]) ^ m(x[2], y[0]) ^ m(x[3], y[3]);
    let z3 = m(x[0], y[3]) ^ m(x[1], y[2]) ^ m(x[2], y[1]) ^ m(x[3], y[0]);
    let w = |m: u32| (m as u64) | ((m as u64) << 32);
    (z0 & w(M0)) | (z1 & w(M1)) | (z2 & w(M2)) | (z3 & w(M3))
}

/// Low 32 bits of the 32×32 carry-less product from 16 integer multiplies (low halves only).
///
/// On riscv32 one `asm!` block (rv32imc: `mul`, `and`, `or`, `xor`, shifts, `lw`; 53
/// instructions), for the same reason as [`clmul_wide`]'s, ordered so that no product is used by
/// the next instruction (RI5CY's `mul` result arrives a cycle later). Checked against RustCrypto
/// `ghash` on QEMU (`rv32_qemu` `ghash_check`).
#[cfg(target_arch = "riscv32")]
#[inline(always)]
fn clmul_low(x: u32, y: &Split) -> u32 {
    let z: u32;
    // SAFETY: reads the four words of `y` (a valid `&[u32; 4]`); no other memory access, no
    // stack use; every register written is an output or a declared temporary.
    unsafe {
        core::arch::asm!(
            "and {x0}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x1}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x2}, {x}, {m}",
            "slli {m}, {m}, 1",
            "and {x3}, {x}, {m}",
            "srli {m}, {m}, 3",
            "lw {y0}, 0({yp})",
            "lw {y1}, 4({yp})",
            "lw {y2}, 8({yp})",
            "lw {y3}, 12({yp})",
            // z0 = x0 y0 ^ x1 y3 ^ x2 y2 ^ x3 y1, class 0.
            "mul {t0}, {x0}, {y0}",
            "mul {t1}, {x1}, {y3}",
            "mul {t2}, {x2}, {y2}",
            "xor {t0}, {t0}, {t1}",
            "mul {t1}, {x3}, {y1}",
            "xor {t0}, {t0}, {t2}",
            "xor {t0}, {t0}, {t1}",
            "and {z}, {t0}, {m}",
            "slli {m}, {m}, 1",
            // z1 = x0 y1 ^ x1 y0 ^ x2 y3 ^ x3 y2, class 1.
            "mul {t0}, {x0}, {y1}",
            "mul {t1}, {x1}, {y0}",
            "mul {t2}, {x2}, {y3}",
            "xor {t0}, {t0}, {t1}",
            "mul {t1}, {x3}, {y2}",
            "xor {t0}, {t0}, {t2}",
            "xor {t0}, {t0}, {t1}",
            "and {t0}, {t0}, {m}",
            "or {z}, {z}, {t0}",
            "slli {m}, {m}, 1",
            // z2 = x0 y2 ^ x1 y1 ^ x2 y0 ^ x3 y3, class 2.
            "mul {t0}, {x0}, {y2}",
            "mul {t1}, {x1}, {y1}",
            "mul {t2}, {x2}, {y0}",
            "xor {t0}, {t0}, {t1}",
            "mul {t1}, {x3}, {y3}",
            "xor {t0}, {t0}, {t2}",
            "xor {t0}, {t0}, {t1}",
            "and {t0}, {t0}, {m}",
            "or {z}, {z}, {t0}",
            "slli {m}, {m}, 1",
            // z3 = x0 y3 ^ x1 y2 ^ x2 y1 ^ x3 y0, class 3.
            "mul {t0}, {x0}, {y3}",
            "mul {t1}, {x1}, {y2}",
            "mul {t2}, {x2}, {y1}",
            "xor {t0}, {t0}, {t1}",
            "mul {t1}, {x3}, {y0}",
            "xor {t0}, {t0}, {t2}",
            "xor {t0}, {t0}, {t1}",
            "and {t0}, {t0}, {m}",
            "or {z}, {z}, {t0}",
            x = in(reg) x,
            yp = in(reg) y.as_ptr(),
            m = inout(reg) M0 => _,
            x0 = out(reg) _,
            x1 = out(reg) _,
            x2 = out(reg) _,
            x3 = out(reg) _,
            y0 = out(reg) _,
            y1 = out(reg) _,
            y2 = out(reg) _,
            y3 = out(reg) _,
            t0 = out(reg) _,
            t1 = out(reg) _,
            t2 = out(reg) _,
            z = out(reg) z,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    z
}

/// Low 32 bits of the 32×32 carry-less product from 16 integer multiplies (low halves only).
#[cfg(not(target_arch = "riscv32"))]
#[inline(always)]
fn clmul_low(x: u32, y: &Split) -> u32 {
    let x = split(x);
    let m = |a: u32, b: u32| a.wrapping_mul(b);
    let z0 = m(x[0], y[0]) ^ m(x[1], y[3]) ^ m(x[2], y[2]) ^ m(x[3], y[1]);
    let z1 = m(x[0], y[1]) ^ m(x[1], y[0]) ^ m(x[2], y[3]) ^ m(x[3], y[2]);
    let z2 = m(x[0], y[2]) ^ m(x[1], y[1]) ^ m(x[2], y[0]) ^ m(x[3], y[3]);
    let z3 = m(x[0], y[3]) ^ m(x[1], y[2]) ^ m(x[2], y[1]) ^ m(x[3], y[0]);
    (z0 & M0) | (z1 & M1) | (z2 & M2) | (z3 & M3)
}

/// 64×64 from three 32×32 carry-less products: `lo ^ (mid ^ lo ^ hi) << 32 ^ hi << 64`, as four
/// words.
#[inline(always)]
fn k64(lo: u64, hi: u64, mid: u64) -> [u32; 4] {
    let m = mid ^ lo ^ hi;
    [
        lo as u32,
        (lo >> 32) as u32 ^ m as u32,
        hi as u32 ^ (m >> 32) as u32,
        (hi >> 32) as u32,
    ]
}

/// The 128-bit Karatsuba level: `l ^ (m ^ l ^ h) << 64 ^ h << 128`.
#[inline(always)]
fn combine4(l: &[u32; 4], h: &[u32; 4], m: &[u32; 4]) -> [u32; 8] {
    let mut z = [0u32; 8];
    for i in 0..4 {
        z[i] ^= l[i];
        z[i + 4] ^= h[i];
        z[i + 2] ^= m[i] ^ l[i] ^ h[i];
    }
    z
}

/// Shift the 255-bit bit-reversed product left by one and reduce modulo GCM's polynomial.
#[inline(always)]
fn reduce(d: [u32; 8]) -> Elem {
    let mut z = [0u32; 8];
    z[0] = d[0] << 1;
    for i in 1..8 {
        z[i] = (d[i] << 1) | (d[i - 1] >> 31);
    }
    for i in 0..4 {
        let lw = z[i];
        z[i + 4] ^= lw ^ (lw >> 1) ^ (lw >> 2) ^ (lw >> 7);
        z[i + 3] ^= (lw << 31) ^ (lw << 30) ^ (lw << 25);
    }
    [z[4], z[5], z[6], z[7]]
}

/// `a · b` for two arbitrary elements (prepares `b`; for a fixed multiplier keep a
/// [`Prepared`]).
pub fn mul(a: &Elem, b: &Elem) -> Elem {
    Prepared::new(b).mul(a)
}

/// `y · h^k`, by square-and-multiply over the bits of `k` (public: a length), `k ≥ 0`.
pub fn mul_pow(y: &Elem, h: &Elem, k: u64) -> Elem {
    mul_pow_with(y, h, &Prepared::new(h), k)
}

/// [`mul_pow`] with `h` also prepared: exponents up to 8 take `k` multiplies by the prepared
/// `h` (a gap of a few blocks between a core's pieces), larger ones square-and-multiply.
pub fn mul_pow_with<M: Multiplier>(y: &Elem, h: &Elem, hp: &M, mut k: u64) -> Elem {
    if k <= 8 {
        let mut acc = *y;
        for _ in 0..k {
            acc = hp.mul(&acc);
        }
        return acc;
    }
    let mut acc = *y;
    let mut p = *h;
    while k != 0 {
        if k & 1 == 1 {
            acc = mul(&acc, &p);
        }
        k >>= 1;
        if k != 0 {
            p = mul(&p, &p);
        }
    }
    zeroize::Zeroize::zeroize(&mut p);
    acc
}
