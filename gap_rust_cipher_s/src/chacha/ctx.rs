//! The per-(key, nonce) context of the assembly kernels: input state and the precomputed part of
//! the first double round.
use zeroize::Zeroize;

/// "expand 32-byte k" (RFC 8439 §2.3).
pub(crate) const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Byte offset of [`Ctx::pre`] in the `#[repr(C)]` layout (the kernels address it from the base).
pub(crate) const PRE_OFFSET: usize = 64;
/// Byte offset of [`Ctx::diag`].
pub(crate) const DIAG_OFFSET: usize = 112;

/// Layout read by the kernels (offsets are part of the assembly, checked below).
///
/// * `init`: the RFC 8439 input state, counter word (12) zero: the kernels keep the counter in a
///   register.
/// * `pre`: state words after the first-round quarter-rounds of columns 1, 2, 3 (they do not
///   involve word 12, the counter), in the order x1 x5 x9 x13, x2 x6 x10 x14, x3 x7 x11 x15.
/// * `diag` (PULP kernel): the further steps of the first double round that do not depend on the
///   counter either — `x0 + x4` (first step of column 0), `x1 + x6` and `x2 + x7` (first steps
///   of the diagonal quarter-rounds (1,6,11,12) and (2,7,8,13)), and `rotl(x13 ^ (x2 + x7), 16)`
///   (the second and third steps of (2,7,8,13)), all on the words after the column round.
#[repr(C)]
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) init: [u32; 16],
    pub(crate) pre: [u32; 12],
    pub(crate) diag: [u32; 4],
}

const _: () = {
    assert!(core::mem::offset_of!(Ctx, init) == 0);
    assert!(core::mem::offset_of!(Ctx, pre) == PRE_OFFSET);
    assert!(core::mem::offset_of!(Ctx, diag) == DIAG_OFFSET);
    assert!(core::mem::size_of::<Ctx>() == 128);
    assert!(core::mem::align_of::<Ctx>() == 4);
};

/// Which state word each `pre` entry holds.
pub(crate) const PRE_WORDS: [usize; 12] = [1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

/// One quarter-round on the state (out of line: the per-message set-up runs on a cluster core
/// once per call, and its code size counts more than its speed there — every line of it that
/// enters the shared 4 KiB instruction cache can evict a line of the kernel).
#[inline(never)]
pub(crate) fn quarter_round(x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(16);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(12);
    x[a] = x[a].wrapping_add(x[b]);
    x[d] = (x[d] ^ x[a]).rotate_left(8);
    x[c] = x[c].wrapping_add(x[d]);
    x[b] = (x[b] ^ x[c]).rotate_left(7);
}

/// Little-endian words from bytes (out of line, see [`quarter_round`]). Word-aligned bytes are
/// read a word at a time: on a GAP8 cluster core the key sits in L2, where every load costs
/// about 15 cycles.
#[inline(never)]
fn load_le(words: &mut [u32], bytes: &[u8]) {
    // SAFETY: every bit pattern is a valid `u32`; `align_to` only hands out the aligned middle.
    let (head, mid, _) = unsafe { bytes.align_to::<u32>() };
    if head.is_empty() && mid.len() >= words.len() && cfg!(target_endian = "little") {
        words.copy_from_slice(&mid[..words.len()]);
        return;
    }
    for (w, c) in words.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

impl Ctx {
    pub(crate) fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Ctx {
        let mut init = [0u32; 16];
        init[..4].copy_from_slice(&SIGMA);
        load_le(&mut init[4..12], key);
        load_le(&mut init[13..16], nonce);
        let mut x = init;
        for col in 1..4 {
            quarter_round(&mut x, col, 4 + col, 8 + col, 12 + col);
        }
        let mut pre = [0u32; 12];
        for (p, &i) in pre.iter_mut().zip(PRE_WORDS.iter()) {
            *p = x[i];
        }
        let x2x7 = x[2].wrapping_add(x[7]);
        let diag = [
            x[0].wrapping_add(x[4]),
            x[1].wrapping_add(x[6]),
            x2x7,
            (x[13] ^ x2x7).rotate_left(16),
        ];
        x.zeroize();
        Ctx { init, pre, diag }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        self.init.zeroize();
        self.pre.zeroize();
        self.diag.zeroize();
    }
}

/// 4 blocks with 4-byte alignment: the bounce buffer for unaligned data.
#[repr(C, align(4))]
pub(crate) struct AlignedBlocks(pub(crate) [super::ChaChaBlock; BOUNCE_BLOCKS]);

pub(crate) const BOUNCE_BLOCKS: usize = 4;

impl Drop for AlignedBlocks {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            b.as_mut_slice().zeroize();
        }
    }
}

/// Runs `kernel` (which needs 4-byte aligned input and output) over `blocks`: directly when both
/// pointers are aligned, else 4 blocks at a time through an aligned buffer.
///
/// `kernel(counter, input, output, n)` must process `n >= 1` whole blocks from `input` to
/// `output` (equal or non-overlapping, 4-byte aligned, valid for `64 * n` bytes).
#[cfg(any(target_arch = "riscv32", test))]
pub(crate) fn run_aligned(
    counter: u32,
    mut blocks: cipher::inout::InOutBuf<'_, '_, super::ChaChaBlock>,
    mut kernel: impl FnMut(u32, *const u8, *mut u8, usize),
) {
    let n = blocks.len();
    if n == 0 {
        return;
    }
    let aligned = {
        let (i, o) = blocks.reborrow().into_raw();
        (i as usize) % 4 == 0 && (o as usize) % 4 == 0
    };
    if aligned {
        let (i, o) = blocks.into_raw();
        kernel(counter, i.cast::<u8>(), o.cast::<u8>(), n);
        return;
    }
    bounce(counter, blocks, kernel);
}

/// The unaligned case of [`run_aligned`] (out of line and cold: the cluster engine's pieces are
/// aligned, and this keeps the code of a round small).
#[cfg(any(target_arch = "riscv32", test))]
#[cold]
#[inline(never)]
fn bounce(
    mut counter: u32,
    mut blocks: cipher::inout::InOutBuf<'_, '_, super::ChaChaBlock>,
    mut kernel: impl FnMut(u32, *const u8, *mut u8, usize),
) {
    let mut buf = AlignedBlocks([Default::default(); BOUNCE_BLOCKS]);
    while !blocks.is_empty() {
        let k = blocks.len().min(BOUNCE_BLOCKS);
        let (mut head, tail) = blocks.split_at(k);
        buf.0[..k].copy_from_slice(head.get_in());
        let p = buf.0.as_mut_ptr().cast::<u8>();
        kernel(counter, p, p, k);
        head.get_out().copy_from_slice(&buf.0[..k]);
        counter = counter.wrapping_add(k as u32);
        blocks = tail;
    }
}
