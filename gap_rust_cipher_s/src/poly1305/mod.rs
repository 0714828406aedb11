//! Poly1305 (RFC 8439 §2.5) for rv32: kernels in three limb radices, the parallel form
//! the cluster engine uses ([`Poly1305Key`] implements `gap_rust_wrapper::Polynomial`), and the
//! sequential MAC ([`Poly1305`]).
//!
//! Field elements mod p = 2^130 - 5 are kept as five 26-bit limbs ([`Fe`], the classic 32-bit
//! representation of D. J. Bernstein's poly1305 and A. Moon's poly1305-donna): every product of
//! two limbs fits 64 bits, and the reduction folds the limbs above 2^130 back with `* 5`. This
//! radix serves the cold operations (multiplying by a power of r, adding lanes, the final
//! reduction). The hot loop over whole blocks (`acc = (acc + m) * r`) has three kernels:
//!
//! | kernel | limbs | products per block | on rv32 |
//! |---|---|---|---|
//! | [`Radix26`] | 5 × 26 bits, `5 r_i` precomputed | 25 of 32×32→64 bits | `mul` + `mulhu` each |
//! | [`Radix32`] | 4 × 32 bits + 2 bits, `r_i + r_i/4` precomputed (r is clamped, so `r_i` is a multiple of 4 for i ≥ 1) | 16 of 32×32→64 and 4 of 32×32→32 | `mul` + `mulhu` / `mul` |
//! | [`Radix13`] | 10 signed × 13 bits, packed in halfword pairs, `5 r_i` in the pairs | 100 of 16×16→32 | 50 PULP `pv.sdotsp.h` (`Pulp13` on GAP8; [`Radix13`] is its portable model) |
//!
//! [`Kernel`] is [`Radix32`] on hosts and plain rv32 (the cheaper of the portable two on QEMU's
//! instruction count) and `Pulp13` on GAP8 (the cheaper on the GVSOC cycle count: no `mulhu`,
//! which stalls RI5CY for 5 cycles; see docs/aead.md).
//! Everything is constant time: no branch or address depends on the key, the accumulator or
//! the message (carries are computed with shifts and `sltu`, or `p.addRN` / `p.extract`; the
//! multiply and dot-product instructions of rv32 and RI5CY take a fixed number of cycles); loop
//! counts depend only on lengths.
use gap_rust_wrapper::Polynomial;
use zeroize::Zeroize;

#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
mod pulp;
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub use pulp::{Pulp, Pulp13};
mod radix13;
#[cfg(test)]
mod tests;
pub use radix13::Radix13;
use radix13::q_table;

const M26: u32 = (1 << 26) - 1;

/// A field element mod 2^130 - 5 as five 26-bit limbs (each may exceed 26 bits by a little
/// between operations; [`Fe::freeze`] gives the canonical value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fe(pub [u32; 5]);

impl Fe {
    /// Zero.
    pub const ZERO: Fe = Fe([0; 5]);
    /// One.
    pub const ONE: Fe = Fe([1, 0, 0, 0, 0]);

    /// The 16 bytes of `b` as a little-endian number, plus `hibit << 128`.
    #[inline(always)]
    pub fn from_block(b: &[u8; 16], hibit: u32) -> Fe {
        let w = words(b);
        Fe::from_words(w, hibit)
    }

    #[inline(always)]
    fn from_words(w: [u32; 4], hibit: u32) -> Fe {
        Fe([
            w[0] & M26,
            ((w[0] >> 26) | (w[1] << 6)) & M26,
            ((w[1] >> 20) | (w[2] << 12)) & M26,
            ((w[2] >> 14) | (w[3] << 18)) & M26,
            (w[3] >> 8) | (hibit << 24),
        ])
    }

    /// `self + o` (limb-wise; no carry).
    #[inline(always)]
    pub fn add(&self, o: &Fe) -> Fe {
        let (a, b) = (&self.0, &o.0);
        Fe([
            a[0] + b[0],
            a[1] + b[1],
            a[2] + b[2],
            a[3] + b[3],
            a[4] + b[4],
        ])
    }

    /// `self * o mod p` (both with limbs below 2^27), limbs carried to 26 bits (limb 1 may be
    /// slightly above).
    #[inline(always)]
    pub fn mul(&self, o: &Fe) -> Fe {
        let r = &o.0;
        let s = [r[1] * 5, r[2] * 5, r[3] * 5, r[4] * 5];
        mul_r(&self.0, r, &s)
    }

    /// `self * self mod p`: the same column sums as [`Fe::mul`] of `self` by itself (so the same
    /// bounds and the same limbs), from 15 products instead of 25 (each cross product once,
    /// doubled). [`Fe::mul_pow`]'s squarings.
    #[inline(always)]
    pub fn square(&self) -> Fe {
        let h = &self.0;
        let m = |a: u32, b: u32| a as u64 * b as u64;
        let (x0, x1) = (h[0] * 2, h[1] * 2); // doubled cross products
        let (s3, s4) = (h[3] * 5, h[4] * 5);
        let (t2, t4) = (h[2] * 10, h[4] * 10);
        let d0 = m(h[0], h[0]) + m(h[1], t4) + m(h[3], t2);
        let d1 = m(x0, h[1]) + m(h[2], t4) + m(h[3], s3);
        let d2 = m(x0, h[2]) + m(h[1], h[1]) + m(h[3], t4);
        let d3 = m(x0, h[3]) + m(x1, h[2]) + m(h[4], s4);
        let d4 = m(x0, h[4]) + m(x1, h[3]) + m(h[2], h[2]);
        carry([d0, d1, d2, d3, d4])
    }

    /// Carries every limb to 26 bits and reduces below p (canonical).
    pub fn freeze(&self) -> Fe {
        let mut h = self.0;
        // Two carry passes bring every limb below 2^26 and the value below 2^130 + small.
        for _ in 0..2 {
            let mut c;
            c = h[0] >> 26;
            h[0] &= M26;
            h[1] += c;
            c = h[1] >> 26;
            h[1] &= M26;
            h[2] += c;
            c = h[2] >> 26;
            h[2] &= M26;
            h[3] += c;
            c = h[3] >> 26;
            h[3] &= M26;
            h[4] += c;
            c = h[4] >> 26;
            h[4] &= M26;
            h[0] += c * 5;
        }
        // g = h + 5 - 2^130; take g if it is non-negative (constant-time select).
        let mut g = [0u32; 5];
        let mut c = 5;
        for i in 0..5 {
            g[i] = h[i] + c;
            c = g[i] >> 26;
            g[i] &= M26;
        }
        // c == 1 iff h + 5 >= 2^130, i.e. h >= p.
        let mask = 0u32.wrapping_sub(c);
        for i in 0..5 {
            h[i] = (h[i] & !mask) | (g[i] & mask);
        }
        Fe(h)
    }

    /// The low 128 bits of the canonical value, little-endian words.
    pub fn to_words(&self) -> [u32; 4] {
        let h = self.freeze().0;
        [
            h[0] | (h[1] << 26),
            (h[1] >> 6) | (h[2] << 20),
            (h[2] >> 12) | (h[3] << 14),
            (h[3] >> 18) | (h[4] << 8),
        ]
    }

    /// `self * r^n mod p` by square and multiply over the bits of `n` (public).
    pub fn mul_pow(&self, r: &Fe, mut n: u64) -> Fe {
        let mut acc = *self;
        let mut base = *r;
        while n != 0 {
            if n & 1 == 1 {
                acc = acc.mul(&base);
            }
            n >>= 1;
            if n != 0 {
                base = base.square();
            }
        }
        base.zeroize();
        acc
    }
}

impl Zeroize for Fe {
    fn zeroize(&mut self) {
        self.0.zeroize();
    }
}

/// Little-endian words of a 16-byte block.
#[inline(always)]
fn words(b: &[u8; 16]) -> [u32; 4] {
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    [w(0), w(4), w(8), w(12)]
}

/// `h * r mod p` with `s = 5 * r[1..]`, carried.
#[inline(always)]
fn mul_r(h: &[u32; 5], r: &[u32; 5], s: &[u32; 4]) -> Fe {
    let m = |a: u32, b: u32| a as u64 * b as u64;
    let d0 = m(h[0], r[0]) + m(h[1], s[3]) + m(h[2], s[2]) + m(h[3], s[1]) + m(h[4], s[0]);
    let d1 = m(h[0], r[1]) + m(h[1], r[0]) + m(h[2], s[3]) + m(h[3], s[2]) + m(h[4], s[1]);
    let d2 = m(h[0], r[2]) + m(h[1], r[1]) + m(h[2], r[0]) + m(h[3], s[3]) + m(h[4], s[2]);
    let d3 = m(h[0], r[3]) + m(h[1], r[2]) + m(h[2], r[1]) + m(h[3], r[0]) + m(h[4], s[3]);
    let d4 = m(h[0], r[4]) + m(h[1], r[3]) + m(h[2], r[2]) + m(h[3], r[1]) + m(h[4], r[0]);
    carry([d0, d1, d2, d3, d4])
}

/// The column sums `d` of a product carried to 26-bit limbs (limb 1 may be slightly above).
#[inline(always)]
fn carry(d: [u64; 5]) -> Fe {
    let [d0, mut d1, mut d2, mut d3, mut d4] = d;
    let mut o = [0u32; 5];
    d1 += d0 >> 26;
    o[0] = d0 as u32 & M26;
    d2 += d1 >> 26;
    o[1] = d1 as u32 & M26;
    d3 += d2 >> 26;
    o[2] = d2 as u32 & M26;
    d4 += d3 >> 26;
    o[3] = d3 as u32 & M26;
    let c = (d4 >> 26) as u32;
    o[4] = d4 as u32 & M26;
    o[0] += c * 5;
    let c = o[0] >> 26;
    o[0] &= M26;
    o[1] += c;
    Fe(o)
}

/// A hot-loop kernel: `acc = (acc + m) * r` for every whole 16-byte block of `data` (each with
/// its 2^128 bit).
pub trait BlockKernel {
    /// Runs the blocks given as little-endian words (`words.len()` a multiple of 4; a partial
    /// last block is ignored). The hot loop.
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]);

    /// Runs the whole blocks of `data` (a partial last block is ignored): as words in place when
    /// `data` is 4-byte aligned (the engine's L1 buffers and chunks are), otherwise each block
    /// copied into an aligned one first (the alignment is the buffer's address, not a secret).
    #[inline(always)]
    fn blocks(key: &Poly1305Key, acc: &mut Fe, data: &[u8]) {
        let data = &data[..data.len() & !15];
        if data.as_ptr() as usize & 3 == 0 {
            // SAFETY: every bit pattern is a valid `u32`; the slice starts 4-byte aligned and is
            // a multiple of 16 bytes long, so `align_to` puts all of it in the middle part.
            let (head, mid, _) = unsafe { data.align_to::<u32>() };
            if head.is_empty() {
                return Self::words(key, acc, mid);
            }
        }
        unaligned::<Self>(key, acc, data)
    }
}

/// [`BlockKernel::blocks`] on a buffer that is not 4-byte aligned: block by block through an
/// aligned copy (out of line: the engine's chunks are aligned).
#[cold]
#[inline(never)]
fn unaligned<K: BlockKernel + ?Sized>(key: &Poly1305Key, acc: &mut Fe, data: &[u8]) {
    let mut w = [0u32; 4];
    for b in data.chunks_exact(16) {
        w = words(b.try_into().unwrap_or(&[0; 16])).map(u32::to_le);
        K::words(key, acc, &w);
    }
    w.zeroize();
}

/// The radix-2^26 kernel (five 26-bit limbs, 25 products of 64 bits per block).
pub struct Radix26;

impl BlockKernel for Radix26 {
    #[inline(never)]
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]) {
        let (r, s) = (&key.r.0, &key.s5);
        let mut h = *acc;
        for c in words.chunks_exact(4) {
            let w = [c[0], c[1], c[2], c[3]].map(u32::from_le);
            h = mul_r(&h.add(&Fe::from_words(w, 1)).0, r, s);
        }
        *acc = h;
    }
}

/// The radix-2^32 kernel (OpenSSL's 32-bit Poly1305 by A. Polyakov: four 32-bit limbs and two
/// bits, 16 products of 64 bits and 4 of 32 bits per block, the clamping of r makes
/// `r_i * 2^130 / 4 = 5 r_i / 4` exact).
pub struct Radix32;

impl BlockKernel for Radix32 {
    /// On GAP8 in the hot text, after the ChaCha20 kernel (`.text.hot.1.chacha.2.poly1305`): a
    /// fused chunk runs one after the other, so both stay in the cluster's instruction cache.
    #[inline(never)]
    #[cfg_attr(
        target_arch = "riscv32",
        unsafe(link_section = ".text.hot.1.chacha.2.poly1305")
    )]
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]) {
        let [r0, r1, r2, r3] = key.r32;
        let (s1, s2, s3) = (r1 + (r1 >> 2), r2 + (r2 >> 2), r3 + (r3 >> 2));
        let [mut h0, mut h1, mut h2, mut h3, mut h4] = to32(acc);
        let m = |a: u32, b: u32| a as u64 * b as u64;
        for c in words.chunks_exact(4) {
            let w = [c[0], c[1], c[2], c[3]].map(u32::from_le);
            let d0 = h0 as u64 + w[0] as u64;
            h0 = d0 as u32;
            let d1 = h1 as u64 + (d0 >> 32) + w[1] as u64;
            h1 = d1 as u32;
            let d2 = h2 as u64 + (d1 >> 32) + w[2] as u64;
            h2 = d2 as u32;
            let d3 = h3 as u64 + (d2 >> 32) + w[3] as u64;
            h3 = d3 as u32;
            h4 = h4 + (d3 >> 32) as u32 + 1;
            let d0 = m(h0, r0) + m(h1, s3) + m(h2, s2) + m(h3, s1);
            let mut d1 = m(h0, r1) + m(h1, r0) + m(h2, s3) + m(h3, s2) + (h4 * s1) as u64;
            let mut d2 = m(h0, r2) + m(h1, r1) + m(h2, r0) + m(h3, s3) + (h4 * s2) as u64;
            let mut d3 = m(h0, r3) + m(h1, r2) + m(h2, r1) + m(h3, r0) + (h4 * s3) as u64;
            h4 *= r0;
            h0 = d0 as u32;
            d1 += d0 >> 32;
            h1 = d1 as u32;
            d2 += d1 >> 32;
            h2 = d2 as u32;
            d3 += d2 >> 32;
            h3 = d3 as u32;
            h4 += (d3 >> 32) as u32;
            // Fold the bits above 2^130: 2^130 = 5 (mod p).
            let c = (h4 >> 2) + (h4 & !3);
            h4 &= 3;
            let (t, c0) = h0.overflowing_add(c);
            h0 = t;
            let (t, c1) = h1.overflowing_add(c0 as u32);
            h1 = t;
            let (t, c2) = h2.overflowing_add(c1 as u32);
            h2 = t;
            let (t, c3) = h3.overflowing_add(c2 as u32);
            h3 = t;
            h4 += c3 as u32;
        }
        *acc = to26([h0, h1, h2, h3, h4]);
    }
}

/// Radix 2^26 to 2^32 (the value carried first; the top limb keeps what is above 2^128).
#[inline(always)]
pub(crate) fn to32(a: &Fe) -> [u32; 5] {
    let mut h = a.0;
    let mut c;
    c = h[0] >> 26;
    h[0] &= M26;
    h[1] += c;
    c = h[1] >> 26;
    h[1] &= M26;
    h[2] += c;
    c = h[2] >> 26;
    h[2] &= M26;
    h[3] += c;
    c = h[3] >> 26;
    h[3] &= M26;
    h[4] += c;
    [
        h[0] | (h[1] << 26),
        (h[1] >> 6) | (h[2] << 20),
        (h[2] >> 12) | (h[3] << 14),
        (h[3] >> 18) | (h[4] << 8),
        h[4] >> 24,
    ]
}

/// Radix 2^32 to 2^26.
#[inline(always)]
pub(crate) fn to26(h: [u32; 5]) -> Fe {
    let mut f = Fe::from_words([h[0], h[1], h[2], h[3]], 0);
    f.0[4] += h[4] << 24;
    f
}

/// The kernel of the hot loop on GAP8 (`pulp` feature): the radix-2^13 dot-product loop (the
/// cheaper on GVSOC's cycle count, docs/aead.md).
#[cfg(all(target_arch = "riscv32", feature = "pulp"))]
pub type Kernel = Pulp13;
/// The kernel of the hot loop: the radix-2^32 one (the cheaper on QEMU's instruction count,
/// docs/aead.md); GAP8 runs the radix-2^13 dot-product loop instead.
#[cfg(not(all(target_arch = "riscv32", feature = "pulp")))]
pub type Kernel = Radix32;

/// A Poly1305 key: r (clamped) in both radices and s. Cloned into every core's MAC lane.
#[derive(Clone)]
pub struct Poly1305Key {
    r: Fe,
    s5: [u32; 4],
    r32: [u32; 4],
    s: [u32; 4],
    /// The radix-2^13 kernel's packed coefficient pairs ([`Radix13`], `q_table`).
    q: [u32; 18],
}

impl Poly1305Key {
    /// The one-time key `r || s` (RFC 8439 §2.5); r is clamped here.
    pub fn new(key: &[u8; 32]) -> Self {
        let k = |i: usize| u32::from_le_bytes([key[i], key[i + 1], key[i + 2], key[i + 3]]);
        let r32 = [
            k(0) & 0x0fff_ffff,
            k(4) & 0x0fff_fffc,
            k(8) & 0x0fff_fffc,
            k(12) & 0x0fff_fffc,
        ];
        let r = Fe::from_words(r32, 0);
        let s5 = [r.0[1] * 5, r.0[2] * 5, r.0[3] * 5, r.0[4] * 5];
        let q = q_table(&r32);
        Poly1305Key {
            r,
            s5,
            r32,
            s: [k(16), k(20), k(24), k(28)],
            q,
        }
    }

    /// r as a field element.
    pub fn r(&self) -> &Fe {
        &self.r
    }

    /// `(h + s) mod 2^128`, little-endian: the tag of the polynomial value `h`.
    pub fn tag(&self, h: &Fe) -> [u8; 16] {
        let w = h.to_words();
        let mut out = [0u8; 16];
        let mut c = 0u64;
        for i in 0..4 {
            c += w[i] as u64 + self.s[i] as u64;
            out[4 * i..4 * i + 4].copy_from_slice(&(c as u32).to_le_bytes());
            c >>= 32;
        }
        out
    }

    /// `acc = (acc + m) * r` over the whole blocks of `data`, then the last partial block (if
    /// any) zero-padded with its 2^128 bit *after* its bytes (RFC 8439 §2.5, the MAC of a
    /// message; the AEAD pads with zeros to whole blocks instead, see [`Polynomial::blocks`]).
    pub fn update_padded_one(&self, acc: &mut Fe, data: &[u8]) {
        let whole = data.len() & !15;
        Kernel::blocks(self, acc, &data[..whole]);
        let rest = &data[whole..];
        if !rest.is_empty() {
            let mut b = [0u8; 16];
            b[..rest.len()].copy_from_slice(rest);
            // The 1 byte after the message's last byte; no 2^128 bit.
            b[rest.len()] = 1;
            *acc = mul_r(&acc.add(&Fe::from_block(&b, 0)).0, &self.r.0, &self.s5);
            b.zeroize();
        }
    }

    /// `acc = (acc + m) * r` over `data` zero-padded to whole blocks, each block with its 2^128
    /// bit (the AEAD's padding, RFC 8439 §2.8).
    pub fn update_zero_padded(&self, acc: &mut Fe, data: &[u8]) {
        let whole = data.len() & !15;
        Kernel::blocks(self, acc, &data[..whole]);
        let rest = &data[whole..];
        if !rest.is_empty() {
            let mut b = [0u8; 16];
            b[..rest.len()].copy_from_slice(rest);
            self.block(acc, &b, true);
            b.zeroize();
        }
    }
}

impl Drop for Poly1305Key {
    fn drop(&mut self) {
        self.r.zeroize();
        self.s5.zeroize();
        self.r32.zeroize();
        self.s.zeroize();
        self.q.zeroize();
    }
}

impl Polynomial for Poly1305Key {
    type Acc = Fe;

    fn zero(&self) -> Fe {
        Fe::ZERO
    }

    #[inline(always)]
    fn blocks(&self, acc: &mut Fe, blocks: &[u8]) {
        Kernel::blocks(self, acc, blocks)
    }

    fn block(&self, acc: &mut Fe, block: &[u8; 16], lead: bool) {
        let m = Fe::from_block(block, lead as u32);
        *acc = mul_r(&acc.add(&m).0, &self.r.0, &self.s5);
    }

    fn shift(&self, acc: &mut Fe, n: u64) {
        *acc = acc.mul_pow(&self.r, n);
    }

    fn add(&self, a: &mut Fe, b: &Fe) {
        // Carried so that repeated additions stay within the multiplication's bounds.
        *a = Fe(a.add(b).freeze().0);
    }
}

/// The sequential Poly1305 MAC of one message (RFC 8439 §2.5) with this crate's kernel.
pub struct Poly1305 {
    key: Poly1305Key,
    acc: Fe,
    buf: [u8; 16],
    used: usize,
}

impl Poly1305 {
    /// A MAC with one-time key `key`.
    pub fn new(key: &[u8; 32]) -> Self {
        Poly1305 {
            key: Poly1305Key::new(key),
            acc: Fe::ZERO,
            buf: [0; 16],
            used: 0,
        }
    }

    /// Absorbs message bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        if self.used > 0 {
            let take = (16 - self.used).min(data.len());
            self.buf[self.used..self.used + take].copy_from_slice(&data[..take]);
            self.used += take;
            data = &data[take..];
            if self.used < 16 {
                return;
            }
            Kernel::blocks(&self.key, &mut self.acc, &self.buf);
            self.used = 0;
        }
        let whole = data.len() & !15;
        Kernel::blocks(&self.key, &mut self.acc, &data[..whole]);
        let rest = &data[whole..];
        self.buf[..rest.len()].copy_from_slice(rest);
        self.used = rest.len();
    }

    /// The 16-byte tag.
    pub fn finalize(self) -> [u8; 16] {
        let mut acc = self.acc;
        self.key.update_padded_one(&mut acc, &self.buf[..self.used]);
        let t = self.key.tag(&acc);
        acc.zeroize();
        t
    }
}

impl Drop for Poly1305 {
    fn drop(&mut self) {
        self.acc.zeroize();
        self.buf.zeroize();
    }
}
