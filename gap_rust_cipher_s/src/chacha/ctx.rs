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
#[cfg(test)]
pub(crate) const PRE_WORDS: [usize; 12] = [1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

/// One quarter-round on one column `[a, b, c, d]` (out of line: the per-message set-up runs on a
/// cluster core once per call, and its code size counts more than its speed there — every line of
/// it that enters the shared 4 KiB instruction cache can evict a line of the kernel).
#[inline(never)]
pub(crate) fn quarter_round(x: &mut [u32; 4]) {
    let [mut a, mut b, mut c, mut d] = *x;
    a = a.wrapping_add(b);
    d = (d ^ a).rotate_left(16);
    c = c.wrapping_add(d);
    b = (b ^ c).rotate_left(12);
    a = a.wrapping_add(b);
    d = (d ^ a).rotate_left(8);
    c = c.wrapping_add(d);
    b = (b ^ c).rotate_left(7);
    *x = [a, b, c, d];
}

/// `N` little-endian words of `bytes` (at least `4 * N` of them). Word-aligned bytes are read a
/// word at a time, as one fixed-size copy (no call to `memcpy`): on a GAP8 cluster core the key
/// sits in L2, where every load costs about 15 cycles.
#[inline(always)]
fn words<const N: usize>(bytes: &[u8]) -> [u32; N] {
    // SAFETY: every bit pattern is a valid `u32`; `align_to` only hands out the aligned middle.
    let (head, mid, _) = unsafe { bytes.align_to::<u32>() };
    if head.is_empty() && cfg!(target_endian = "little") {
        if let Some(w) = mid.first_chunk::<N>() {
            return *w;
        }
    }
    words_unaligned(bytes)
}

/// [`words`] for bytes that are not word-aligned (out of line: the engine's keys are aligned).
#[cold]
#[inline(never)]
fn words_unaligned<const N: usize>(bytes: &[u8]) -> [u32; N] {
    let mut w = [0; N];
    for (w, c) in w.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

impl Ctx {
    /// The context for `key` and `nonce`, every word computed once and stored once (no zeroing and
    /// no copies of the 128-byte state: on a cluster core every moved byte is a load and a store,
    /// and a call to `memset` / `memcpy` is code outside the kernel's that enters the shared
    /// instruction cache).
    #[inline(always)]
    pub(crate) fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Ctx {
        let k: [u32; 8] = words(key);
        let n: [u32; 3] = words(nonce);
        let init = [
            SIGMA[0], SIGMA[1], SIGMA[2], SIGMA[3], k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7],
            0, n[0], n[1], n[2],
        ];
        // The column quarter-rounds of columns 1, 2, 3 (words c, c + 4, c + 8, c + 12) do not
        // touch the counter (word 12).
        let mut c1 = [init[1], init[5], init[9], init[13]];
        let mut c2 = [init[2], init[6], init[10], init[14]];
        let mut c3 = [init[3], init[7], init[11], init[15]];
        quarter_round(&mut c1);
        quarter_round(&mut c2);
        quarter_round(&mut c3);
        // After the column round: x0, x4 unchanged (column 0 needs the counter); x1 = c1[0],
        // x6 = c2[1], x2 = c2[0], x7 = c3[1], x13 = c1[3].
        let x2x7 = c2[0].wrapping_add(c3[1]);
        Ctx {
            init,
            pre: [
                c1[0], c1[1], c1[2], c1[3], c2[0], c2[1], c2[2], c2[3], c3[0], c3[1], c3[2], c3[3],
            ],
            diag: [
                init[0].wrapping_add(init[4]),
                c1[0].wrapping_add(c2[1]),
                x2x7,
                (c1[3] ^ x2x7).rotate_left(16),
            ],
        }
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
