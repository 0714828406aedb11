//! The PULP (RI5CY, GAP8 "Xpulpv2") Poly1305 block loops: [`Pulp13`], the radix-2^13 kernel on
//! 16-bit dot products (the one GAP8 runs, see below and [`super::Radix13`]), and [`Pulp`], the
//! radix-2^32 kernel ([`super::Radix32`]) in assembly, with a hardware loop and post-increment loads (`asm_macros` words, pinned by the
//! golden-word table of `asm_macros`). QEMU cannot execute it; GVSOC and the GAP8 can; every GVSOC
//! benchmark run checks its tag against RustCrypto.
//!
//! On RI5CY `mulhu` takes 5 cycles and stalls the pipeline, so the 16 of a block (64 cycles) are
//! the floor of this representation; the assembly removes what the compiled loop adds around them:
//! the loop counter and branch (hardware loop), the pointer increments (post-increment loads), and
//! the separate carry chain of the reduction, which is merged with the next block's message
//! addition (`c`, the `5 * (h4 >> 2)` of the previous block, is added with the message words).
//!
//! Register plan: `h0..h4` a0-a4, `r0..r3` a5 a6 a7 s2, `s1..s3 = r_i + r_i/4` s3 s4 s5, data t6,
//! blocks t1, `c` ra, product lo / hi t0 / t2, `d1..d3` lo t3 t5 s7, hi t4 s6 s8, `d0` hi s9.
//!
//! ```text
//!   lp.setup x0, t1, end
//!   4 p.lw                                    w0..w3
//!   h += c + w, h4 += carry + 1               (c from the previous block; 0 for the first)
//!   d3, d2, d1 (lo, hi) from h0..h4            mul / mulhu, 64-bit accumulation (add, sltu, add, add)
//!   d0 into (h0, s9)
//!   h4 *= r0; carry d0 -> d1 -> d2 -> d3 -> h4
//!   c = (h4 & ~3) + (h4 >> 2), h4 &= 3         end of the loop body
//!   h += c                                     after the loop
//! ```
use super::radix13::{from13, to13};
use super::{BlockKernel, Fe, Poly1305Key, to26, to32};
use asm_macros::{
    lp_setup, p_addrni, p_extracti, p_extractui, p_inserti, p_lw, pv_add_h, pv_dotsp_h, pv_pack_h,
    pv_sdotsp_h,
};
use core::arch::asm;

/// The PULP block loop as a [`BlockKernel`].
pub struct Pulp;

/// One 32×32→64 product `x * y` added to the 64-bit accumulator (`lo`, `hi`): 6 instructions.
#[rustfmt::skip]
macro_rules! acc {
    ($lo:ident, $hi:ident, $x:ident, $y:ident) => {
        concat!(
            "mul t0, ", stringify!($x), ", ", stringify!($y), "\n",
            "mulhu t2, ", stringify!($x), ", ", stringify!($y), "\n",
            "add ", stringify!($lo), ", ", stringify!($lo), ", t0\n",
            "sltu t0, ", stringify!($lo), ", t0\n",
            "add ", stringify!($hi), ", ", stringify!($hi), ", t2\n",
            "add ", stringify!($hi), ", ", stringify!($hi), ", t0\n",
        )
    };
}

/// `h4 * s` (32 bits: h4 is at most a few bits) added to the 64-bit accumulator: 4 instructions.
#[rustfmt::skip]
macro_rules! acc32 {
    ($lo:ident, $hi:ident, $s:ident) => {
        concat!(
            "mul t0, a4, ", stringify!($s), "\n",
            "add ", stringify!($lo), ", ", stringify!($lo), ", t0\n",
            "sltu t0, ", stringify!($lo), ", t0\n",
            "add ", stringify!($hi), ", ", stringify!($hi), ", t0\n",
        )
    };
}

/// `(hi:lo) += x` for a 32-bit `x`, the carry into `hi`: 3 instructions.
#[rustfmt::skip]
macro_rules! carry_into {
    ($lo:ident, $hi:ident, $x:ident) => {
        concat!(
            "add ", stringify!($lo), ", ", stringify!($lo), ", ", stringify!($x), "\n",
            "sltu t0, ", stringify!($lo), ", ", stringify!($x), "\n",
            "add ", stringify!($hi), ", ", stringify!($hi), ", t0\n",
        )
    };
}

impl BlockKernel for Pulp {
    /// On GAP8 in the hot text, after the ChaCha20 kernel (`.text.hot.1.chacha.2.poly1305`).
    #[rustfmt::skip]
    #[inline(never)]
    #[unsafe(link_section = ".text.hot.1.chacha.2.poly1305")]
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]) {
        let n = words.len() / 4;
        if n == 0 {
            return;
        }
        let [r0, r1, r2, r3] = key.r32;
        let (s1, s2, s3) = (r1 + (r1 >> 2), r2 + (r2 >> 2), r3 + (r3 >> 2));
        let [mut h0, mut h1, mut h2, mut h3, mut h4] = to32(acc);
        // SAFETY: the asm reads `16 * n` bytes from `words` (valid, 4-byte aligned: a `&[u32]` of
        // at least `4 * n` words) with post-increment loads, and only the registers declared
        // below; the hardware loop runs its body exactly `n >= 1` times; hardware loop 0 is
        // overwritten (this is never called from inside a hardware loop).
        unsafe {
            asm!(
                ".option push",
                ".option norvc",
                ".balign 4",
                "li ra, 0",
                "2:", lp_setup!(x0, t1, 544),
                p_lw!(t0, 4(t6!)), p_lw!(t2, 4(t6!)), p_lw!(t3, 4(t6!)), p_lw!(t4, 4(t6!)),
                // h += c + w (c: the previous block's fold, at most 2^31.4), carries up to h4.
                "add a0, a0, ra", "sltu ra, a0, ra",
                "add a0, a0, t0", "sltu t0, a0, t0", "add ra, ra, t0",
                "add a1, a1, ra", "sltu ra, a1, ra",
                "add a1, a1, t2", "sltu t2, a1, t2", "add ra, ra, t2",
                "add a2, a2, ra", "sltu ra, a2, ra",
                "add a2, a2, t3", "sltu t3, a2, t3", "add ra, ra, t3",
                "add a3, a3, ra", "sltu ra, a3, ra",
                "add a3, a3, t4", "sltu t4, a3, t4", "add ra, ra, t4",
                "add a4, a4, ra", "addi a4, a4, 1",
                // d3 = h0 r3 + h1 r2 + h2 r1 + h3 r0 + h4 s3 -> (s7, s8)
                "mul s7, a0, s2", "mulhu s8, a0, s2",
                acc!(s7, s8, a1, a7), acc!(s7, s8, a2, a6), acc!(s7, s8, a3, a5), acc32!(s7, s8, s5),
                // d2 = h0 r2 + h1 r1 + h2 r0 + h3 s3 + h4 s2 -> (t5, s6)
                "mul t5, a0, a7", "mulhu s6, a0, a7",
                acc!(t5, s6, a1, a6), acc!(t5, s6, a2, a5), acc!(t5, s6, a3, s5), acc32!(t5, s6, s4),
                // d1 = h0 r1 + h1 r0 + h2 s3 + h3 s2 + h4 s1 -> (t3, t4)
                "mul t3, a0, a6", "mulhu t4, a0, a6",
                acc!(t3, t4, a1, a5), acc!(t3, t4, a2, s5), acc!(t3, t4, a3, s4), acc32!(t3, t4, s3),
                // d0 = h0 r0 + h1 s3 + h2 s2 + h3 s1 -> (a0, s9); h1..h3 are free after it.
                "mulhu s9, a0, a5", "mul a0, a0, a5",
                acc!(a0, s9, a1, s5), acc!(a0, s9, a2, s4), acc!(a0, s9, a3, s3),
                "mul a4, a4, a5",
                // Carries d0 -> d1 -> d2 -> d3 -> h4.
                carry_into!(t3, t4, s9), "mv a1, t3",
                carry_into!(t5, s6, t4), "mv a2, t5",
                carry_into!(s7, s8, s6), "mv a3, s7",
                "add a4, a4, s8",
                // Fold the bits above 2^130 (2^130 = 5 mod p): c = 5 * (h4 >> 2), added with the
                // next block's message (or after the loop).
                "srli t0, a4, 2", "andi ra, a4, -4", "andi a4, a4, 3",
                "3:", "add ra, ra, t0",
                // After the loop: h += c.
                "add a0, a0, ra", "sltu ra, a0, ra",
                "add a1, a1, ra", "sltu ra, a1, ra",
                "add a2, a2, ra", "sltu ra, a2, ra",
                "add a3, a3, ra", "sltu ra, a3, ra",
                "add a4, a4, ra",
                ".if (3b - 2b) != 544", ".error \"lp.setup x0 offset does not reach the loop end\"", ".endif",
                ".option pop",
                inout("x10") h0, inout("x11") h1, inout("x12") h2, inout("x13") h3, inout("x14") h4,
                in("x15") r0, in("x16") r1, in("x17") r2, in("x18") r3,
                in("x19") s1, in("x20") s2, in("x21") s3,
                inout("x31") words.as_ptr() => _,
                inout("x6") n => _,
                out("x1") _, out("x5") _, out("x7") _, out("x28") _, out("x29") _, out("x30") _,
                out("x22") _, out("x23") _, out("x24") _, out("x25") _,
                options(nostack, readonly),
            );
        }
        *acc = to26([h0, h1, h2, h3, h4]);
    }
}

/// The radix-2^13 dot-product loop ([`super::Radix13`] is its portable model, with the overflow
/// argument): per block 4 `p.lw`, 18 instructions that cut the block into packed 13-bit limbs, 5
/// `pv.add.h`, 50 `pv.dotsp.h` / `pv.sdotsp.h` against the key's coefficient pairs `Q(j)` (8 kept
/// in registers, 10 loaded from the key: `lw` from L1), and the signed carries (`p.addRN` +
/// `p.extract` + `add` per limb, `5 c_9` into limb 0, `pv.pack.h` into the next block's pairs):
/// 129 instructions and no `mulhu`, against 136 instructions and 16 `mulhu` (5 cycles each) of
/// [`Pulp`].
///
/// Register plan: state pairs `H_0..H_4` a0-a4 (the sums `x = h + m` in place during the
/// products), `t_0..t_9` a5 a6 a7 s2-s8, resident `Q(0, 1, -2, -1, 2, 3, -4, 4)` s9 s10 s11 ra t0
/// t1 t2 t3, load temp / carry t4 (the block count before the loop), `Q` table t5, data t6. The
/// body is generated (one product schedule: each loaded `Q` is used one instruction after its
/// `lw`, with a resident product in between).
pub struct Pulp13;

impl BlockKernel for Pulp13 {
    /// On GAP8 in the hot text, after the ChaCha20 kernel (`.text.hot.1.chacha.2.poly1305`).
    #[rustfmt::skip]
    #[inline(never)]
    #[unsafe(link_section = ".text.hot.1.chacha.2.poly1305")]
    fn words(key: &Poly1305Key, acc: &mut Fe, words: &[u32]) {
        let n = words.len() / 4;
        if n == 0 {
            return;
        }
        let [mut h0, mut h1, mut h2, mut h3, mut h4] = to13(acc);
        // SAFETY: the asm reads `16 * n` bytes from `words` (valid, 4-byte aligned: a `&[u32]` of
        // at least `4 * n` words) with post-increment loads and the 18 words of `key.q` (a
        // `[u32; 18]`, offsets 0..=68), and only the registers declared below; the hardware loop
        // runs its body exactly `n >= 1` times; hardware loop 0 is overwritten (this is never
        // called from inside a hardware loop).
        unsafe {
            asm!(
                ".option push",
                ".option norvc",
                ".balign 4",
                "lw s9, 32(t5)",
                "lw s10, 36(t5)",
                "lw s11, 24(t5)",
                "lw ra, 28(t5)",
                "lw t0, 40(t5)",
                "lw t1, 44(t5)",
                "lw t2, 16(t5)",
                "lw t3, 48(t5)",
                "2:", lp_setup!(x0, t4, 516),
                p_lw!(a5, 4(t6!)),
                p_lw!(a6, 4(t6!)),
                p_lw!(a7, 4(t6!)),
                p_lw!(s2, 4(t6!)),
                p_extractui!(s3, a5, 12, 13),
                p_extractui!(s4, a5, 12, 0),
                pv_pack_h!(s3, s3, s4),
                pv_add_h!(a0, a0, s3),
                "srli s4, a5, 26",
                p_inserti!(s4, a6, 6, 6),
                p_extractui!(s3, a6, 12, 7),
                pv_pack_h!(s3, s3, s4),
                pv_add_h!(a1, a1, s3),
                "srli s4, a6, 20",
                p_inserti!(s4, a7, 0, 12),
                p_extractui!(s3, a7, 12, 1),
                pv_pack_h!(s3, s3, s4),
                pv_add_h!(a2, a2, s3),
                "srli s4, a7, 27",
                p_inserti!(s4, s2, 7, 5),
                p_extractui!(s3, a7, 12, 14),
                pv_pack_h!(s3, s4, s3),
                pv_add_h!(a3, a3, s3),
                "srli s4, s2, 21",
                p_extractui!(s3, s2, 12, 8),
                pv_pack_h!(s3, s4, s3),
                pv_add_h!(a4, a4, s3),
                "lw t4, 0(t5)",
                pv_dotsp_h!(a5, a0, s9),
                pv_sdotsp_h!(a5, a4, t4),
                "lw t4, 4(t5)",
                pv_dotsp_h!(a7, a1, s9),
                pv_dotsp_h!(a6, a4, t4),
                "lw t4, 8(t5)",
                pv_dotsp_h!(s3, a2, s9),
                pv_sdotsp_h!(a5, a3, t4),
                pv_sdotsp_h!(a7, a4, t4),
                "lw t4, 12(t5)",
                pv_dotsp_h!(s5, a3, s9),
                pv_sdotsp_h!(a6, a3, t4),
                pv_dotsp_h!(s2, a4, t4),
                "lw t4, 20(t5)",
                pv_dotsp_h!(s7, a4, s9),
                pv_sdotsp_h!(a6, a2, t4),
                pv_sdotsp_h!(s2, a3, t4),
                pv_dotsp_h!(s4, a4, t4),
                "lw t4, 52(t5)",
                pv_sdotsp_h!(a6, a0, s10),
                pv_sdotsp_h!(s4, a0, t4),
                pv_dotsp_h!(s6, a1, t4),
                pv_dotsp_h!(s8, a2, t4),
                "lw t4, 56(t5)",
                pv_sdotsp_h!(s2, a1, s10),
                pv_sdotsp_h!(s5, a0, t4),
                pv_sdotsp_h!(s7, a1, t4),
                "lw t4, 60(t5)",
                pv_sdotsp_h!(s4, a2, s10),
                pv_sdotsp_h!(s6, a0, t4),
                pv_sdotsp_h!(s8, a1, t4),
                "lw t4, 64(t5)",
                pv_sdotsp_h!(s6, a3, s10),
                pv_sdotsp_h!(s7, a0, t4),
                "lw t4, 68(t5)",
                pv_sdotsp_h!(s8, a4, s10),
                pv_sdotsp_h!(s8, a0, t4),
                pv_sdotsp_h!(a5, a1, s11),
                pv_sdotsp_h!(a7, a2, s11),
                pv_sdotsp_h!(s3, a3, s11),
                pv_sdotsp_h!(s5, a4, s11),
                pv_sdotsp_h!(a6, a1, ra),
                pv_sdotsp_h!(s2, a2, ra),
                pv_sdotsp_h!(s4, a3, ra),
                pv_sdotsp_h!(s6, a4, ra),
                pv_sdotsp_h!(a7, a0, t0),
                pv_sdotsp_h!(s3, a1, t0),
                pv_sdotsp_h!(s5, a2, t0),
                pv_sdotsp_h!(s7, a3, t0),
                pv_sdotsp_h!(s2, a0, t1),
                pv_sdotsp_h!(s4, a1, t1),
                pv_sdotsp_h!(s6, a2, t1),
                pv_sdotsp_h!(s8, a3, t1),
                pv_sdotsp_h!(a5, a2, t2),
                pv_sdotsp_h!(a7, a3, t2),
                pv_sdotsp_h!(s3, a4, t2),
                pv_sdotsp_h!(s3, a0, t3),
                pv_sdotsp_h!(s5, a1, t3),
                pv_sdotsp_h!(s7, a2, t3),
                p_addrni!(t4, a5, zero, 13),
                p_extracti!(a0, a5, 12, 0),
                "add a6, a6, t4",
                p_addrni!(t4, a6, zero, 13),
                p_extracti!(a5, a6, 12, 0),
                "add a7, a7, t4",
                p_addrni!(t4, a7, zero, 13),
                p_extracti!(a6, a7, 12, 0),
                "add s2, s2, t4",
                p_addrni!(t4, s2, zero, 13),
                p_extracti!(a7, s2, 12, 0),
                "add s3, s3, t4",
                pv_pack_h!(a1, a7, a6),
                p_addrni!(t4, s3, zero, 13),
                p_extracti!(s2, s3, 12, 0),
                "add s4, s4, t4",
                p_addrni!(t4, s4, zero, 13),
                p_extracti!(s3, s4, 12, 0),
                "add s5, s5, t4",
                pv_pack_h!(a2, s3, s2),
                p_addrni!(t4, s5, zero, 13),
                p_extracti!(s4, s5, 12, 0),
                "add s6, s6, t4",
                p_addrni!(t4, s6, zero, 13),
                p_extracti!(s5, s6, 12, 0),
                "add s7, s7, t4",
                pv_pack_h!(a3, s5, s4),
                p_addrni!(t4, s7, zero, 13),
                p_extracti!(s6, s7, 12, 0),
                "add s8, s8, t4",
                "addi s8, s8, 1024",
                "addi s8, s8, 1024",
                p_addrni!(t4, s8, zero, 13),
                p_extracti!(s7, s8, 12, 0),
                pv_pack_h!(a4, s7, s6),
                "slli s8, t4, 2",
                "add s8, s8, t4",
                "add a0, a0, s8",
                p_addrni!(t4, a0, zero, 13),
                p_extracti!(a0, a0, 12, 0),
                "add a5, a5, t4",
                "3:", pv_pack_h!(a0, a5, a0),
                ".if (3b - 2b) != 516", ".error \"lp.setup x0 offset does not reach the loop end\"", ".endif",
                ".option pop",
                inout("x10") h0, inout("x11") h1, inout("x12") h2, inout("x13") h3, inout("x14") h4,
                in("x30") key.q.as_ptr(),
                inout("x31") words.as_ptr() => _,
                inout("x29") n => _,
                out("x1") _, out("x5") _, out("x6") _, out("x7") _, out("x28") _,
                out("x15") _, out("x16") _, out("x17") _,
                out("x18") _, out("x19") _, out("x20") _, out("x21") _, out("x22") _, out("x23") _,
                out("x24") _, out("x25") _, out("x26") _, out("x27") _,
                options(nostack, readonly),
            );
        }
        *acc = from13(&[h0, h1, h2, h3, h4]);
    }
}
