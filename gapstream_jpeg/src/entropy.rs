//! Quantisation, zig-zag and Huffman coding of one block, and the bit writer with byte stuffing.
//!
//! The bit writer keeps up to 32 pending bits in one register and emits them as a whole word
//! (four bytes, or byte by byte with a `0x00` after every `0xFF` when the word holds one: T.81
//! F.1.2.3), like libjpeg-turbo's `jchuff.c` with a 32-bit buffer. A symbol and its magnitude
//! bits go in as one `put` of at most 26 bits.
//!
//! Output goes to an [`Out`]: a byte slice and a position. When a write does not fit, the
//! writer stops writing and marks the output `full`; the caller either fails (a frame larger
//! than the caller's buffer) or rolls back to the last block boundary and continues in a fresh
//! buffer (the cluster lanes, whose L1 staging chunks fill up regularly).
use crate::fdct::{Kernel, slot};
use crate::tables::{CODE_MASK, LEN_SHIFT, Tables, ac_index};

/// Bytes one block can add to an [`Out`] at most: 20 DC bits + 63 × 26 AC bits + 31 pending bits
/// make at most 52 words, each at most 8 bytes once stuffed.
pub const MAX_BLOCK_BYTES: usize = 52 * 8;

/// Bytes the end of a restart interval adds at most: the pending bits padded to a byte (at most
/// 4 bytes, 8 stuffed) and the RST marker.
pub const MAX_FLUSH_BYTES: usize = 8 + 2;

/// An output buffer and how far it is written.
#[derive(Debug)]
pub struct Out<'a> {
    /// The bytes written so far are `buf[..pos]`.
    pub buf: &'a mut [u8],
    /// Bytes written.
    pub pos: usize,
    /// A write did not fit (and was dropped, with everything after it).
    pub full: bool,
}

impl<'a> Out<'a> {
    /// An empty output over `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Out {
            buf,
            pos: 0,
            full: false,
        }
    }

    /// Appends `bytes`, or marks the output full.
    pub fn put_bytes(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.pos..self.pos + bytes.len()) {
            Some(d) if !self.full => {
                d.copy_from_slice(bytes);
                self.pos += bytes.len();
            }
            _ => self.full = true,
        }
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.pos) {
            Some(d) if !self.full => {
                *d = b;
                self.pos += 1;
            }
            _ => self.full = true,
        }
    }

    /// One byte of entropy-coded data: `0xFF` is followed by a stuffed `0x00`.
    #[inline(always)]
    fn stuffed(&mut self, b: u8) {
        self.byte(b);
        if b == 0xff {
            self.byte(0);
        }
    }

    /// A full word of entropy-coded data, most significant byte first.
    #[inline(always)]
    fn word(&mut self, w: u32) {
        // A byte of w is 0xFF iff the same byte of !w is 0.
        let x = !w;
        let has_ff = x.wrapping_sub(0x0101_0101) & !x & 0x8080_8080 != 0;
        if !has_ff {
            if let Some(d) = self.buf.get_mut(self.pos..self.pos + 4) {
                if !self.full {
                    d.copy_from_slice(&w.to_be_bytes());
                    self.pos += 4;
                    return;
                }
            }
            self.full = true;
            return;
        }
        for b in w.to_be_bytes() {
            self.stuffed(b);
        }
    }
}

/// The bit writer's pending bits: `32 - free` bits at the bottom of `acc` (bits above them are
/// stale and shifted out before they are emitted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bits {
    pub(crate) acc: u32,
    /// Free bits, 1..=32 (32: nothing pending).
    pub(crate) free: u32,
}

impl Default for Bits {
    fn default() -> Self {
        Bits { acc: 0, free: 32 }
    }
}

impl Bits {
    /// Appends the `size` low bits of `code` (`1 <= size <= 26`, `code < 2^size`).
    #[inline(always)]
    pub fn put(&mut self, out: &mut Out<'_>, code: u32, size: u32) {
        if size < self.free {
            self.acc = (self.acc << size) | code;
            self.free -= size;
        } else {
            // size >= free: fill the word (free < 32 here since size <= 26), emit it, keep the rest.
            let over = size - self.free;
            out.word((self.acc << self.free) | (code >> over));
            self.acc = code;
            self.free = 32 - over;
        }
    }

    /// Pads the pending bits with 1s to a byte boundary and emits them (end of a restart interval
    /// or of the scan, T.81 F.1.2.3).
    pub fn flush(&mut self, out: &mut Out<'_>) {
        let pending = 32 - self.free;
        let pad = (8 - pending % 8) % 8;
        let n = pending + pad;
        // The pending bits followed by `pad` ones, as `n` (at most 38) bits.
        let bits = if pending == 0 {
            0
        } else {
            (self.acc & (u32::MAX >> (32 - pending))) as u64
        };
        let v = (bits << pad) | ((1u64 << pad) - 1);
        let mut k = n;
        while k >= 8 {
            k -= 8;
            out.stuffed((v >> k) as u8);
        }
        *self = Bits::default();
    }
}

/// The magnitude field of a coefficient or DC difference `v` with `nbits` bits: `v` if positive,
/// `v - 1` in `nbits` bits if negative (T.81 F.1.2.1).
#[inline(always)]
fn field(v: i32, a: u32, nbits: u32) -> u32 {
    if v < 0 { !a & ((1u32 << nbits) - 1) } else { a }
}

/// Quantises and codes one coefficient `v` at zig-zag position `k > 0` after `run` zeros.
#[inline(always)]
fn code_ac<K: Kernel>(v: i32, k: usize, run: u32, t: &Tables, bits: &mut Bits, out: &mut Out<'_>) {
    let mut run = run;
    while run >= 16 {
        let p = t.zrl;
        bits.put(out, p & CODE_MASK, p >> LEN_SHIFT);
        run -= 16;
    }
    let a = v.unsigned_abs();
    let q = t.quant[k & 63].quantise(a);
    let nb = K::bit_len(q);
    let p = t.ac[ac_index(run, nb)];
    bits.put(out, (p & CODE_MASK) | field(v, q, nb), p >> LEN_SHIFT);
}

/// Quantises and codes one block of DCT output (`f8`, zig-zag coefficient `k` at
/// [`slot`]`(k)`, scaled by 8) after the block whose quantised DC was `*dc_pred`; updates the
/// predictor. The AC coefficients that are not zero are found from the kernel's zero mask
/// ([`Kernel::zero_mask`], bit `k % 32` of word `k / 32`): a lowest-set-bit scan, so the zeros
/// cost nothing here.
#[inline(always)]
pub fn code_block<K: Kernel>(
    f8: &[i16; 64],
    t: &Tables,
    dc_pred: &mut i32,
    bits: &mut Bits,
    out: &mut Out<'_>,
) {
    let zero = K::zero_mask(f8, &t.thr);
    // DC: quantised like every coefficient, coded as the difference to the previous block.
    let v = f8[0] as i32;
    let q = t.quant[0].quantise(v.unsigned_abs()) as i32;
    let q = if v < 0 { -q } else { q };
    let diff = q - *dc_pred;
    *dc_pred = q;
    let a = diff.unsigned_abs();
    let nb = if a == 0 { 0 } else { K::bit_len(a) };
    let p = t.dc[nb as usize];
    bits.put(out, (p & CODE_MASK) | field(diff, a, nb), p >> LEN_SHIFT);
    // AC in zig-zag order: runs of zeros, ZRL for every 16, EOB after the last non-zero.
    let mut last = 0usize;
    for (w, &z) in zero.iter().enumerate() {
        // Bit i: coefficient 32 w + i is not zero (the DC excluded).
        let mut nz = !z & if w == 0 { !1 } else { !0 };
        while nz != 0 {
            let k = 32 * w + K::ff1(nz) as usize;
            nz &= nz - 1;
            code_ac::<K>(
                f8[slot(k & 63)] as i32,
                k,
                (k - last - 1) as u32,
                t,
                bits,
                out,
            );
            last = k;
        }
    }
    if last < 63 {
        let p = t.eob;
        bits.put(out, p & CODE_MASK, p >> LEN_SHIFT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(f: impl FnOnce(&mut Bits, &mut Out<'_>)) -> Vec<u8> {
        let mut buf = vec![0u8; 64];
        let mut out = Out::new(&mut buf);
        let mut b = Bits::default();
        f(&mut b, &mut out);
        b.flush(&mut out);
        assert!(!out.full);
        let n = out.pos;
        buf.truncate(n);
        buf
    }

    #[test]
    fn bits_are_msb_first_padded_with_ones() {
        assert_eq!(collect(|b, o| b.put(o, 0b101, 3)), vec![0b1011_1111]);
        assert_eq!(collect(|_, _| {}), Vec::<u8>::new());
        // 26 + 26 + 12 bits = 8 bytes exactly.
        let v = collect(|b, o| {
            b.put(o, 0x2aa_aaaa, 26);
            b.put(o, 0x155_5555, 26);
            b.put(o, 0xabc, 12);
        });
        assert_eq!(v, vec![0xaa, 0xaa, 0xaa, 0x95, 0x55, 0x55, 0x5a, 0xbc]);
    }

    #[test]
    fn ff_bytes_are_stuffed_in_words_and_in_the_flush() {
        let v = collect(|b, o| {
            b.put(o, 0xff, 8);
            b.put(o, 0x12, 8);
            b.put(o, 0xff, 8);
            b.put(o, 0x34, 8);
            b.put(o, 0x7f, 7);
        });
        assert_eq!(v, vec![0xff, 0, 0x12, 0xff, 0, 0x34, 0xff, 0]);
    }

    #[test]
    fn a_full_output_is_flagged_not_overrun() {
        let mut buf = [0u8; 5];
        let mut out = Out::new(&mut buf);
        let mut b = Bits::default();
        for _ in 0..3 {
            b.put(&mut out, 0x00ff_ffff, 24);
        }
        b.flush(&mut out);
        assert!(out.full);
        assert!(out.pos <= 5);
    }
}
