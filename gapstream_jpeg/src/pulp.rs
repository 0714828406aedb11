//! The RI5CY (GAP8 "Xpulpv2") kernels: the forward DCT on packed-SIMD dot products, the
//! quantiser's zero test on packed halfwords, and `p.ff1` / `p.fl1` for the entropy coder's bit
//! scans. The arithmetic is [`crate::fdct`]'s, bit for bit (every intermediate is an exact
//! integer in range, see there); GVSOC runs it, QEMU cannot.
//!
//! Pass 1, one pixel row per iteration of hardware loop 0 (rows in [`ROW_ORDER`], 48
//! instructions): two word loads, the pixels split into halfword pairs with a mask, a shift and
//! `pv.shuffle.sci.h` (`(p0, p2)`, `(p1, p3)`, `(p7, p5)`, `(p6, p4)`), the butterflies as one
//! `add` (sums of bytes never carry into the upper half) and one `pv.sub.h` per pair, then for
//! each of the 8 outputs `pv.dotsp.h` + `pv.sdotsp.h` (4 products), `p.addRN` (round and shift,
//! the DC with the level shift) and a halfword store into the transposed scratch.
//! Pass 2, one transposed row per block of 41 instructions, unrolled (each column's 8 outputs
//! go to their zig-zag positions, immediate offsets): four post-increment loads, the
//! butterflies as `pv.add.h` / `pv.sub.h` on the pairs, the same 8 × (2 dot products, `p.addRN`,
//! store). Both passes use the same 15 coefficient pairs, kept in registers for the block.
//!
//! The zero test ([`Kernel::zero_mask`]): per pair of zig-zag positions one load of the
//! coefficients and one of the thresholds, `pv.abs.h`, `pv.sub.h` (negative: quantises to 0),
//! the two sign bits masked and shifted into the mask: 7 instructions per pair in hardware
//! loop 0.
//!
//! Register plan: pixels a0, work a1 (`F8` at +0, scratch at +128), row offsets / scratch reads
//! a3, mask `0x00FF00FF` a4, level shift a5, pairs ra a6 a7 s2-s11 t3 t4 (loaded through a2),
//! temporaries t0 t1 t2 t5 t6.
use crate::fdct::{DctCtx, Kernel, LEVEL_SHIFT, ROW_ORDER, Work, portable_fdct};
use asm_macros::{lp_setup, lp_setupi, p_ff1, p_fl1, p_lw, pv_abs_h, pv_shuffle_sci_h, pv_sub_h};
use core::arch::asm;

/// The PULP kernels (feature `pulp`, riscv32).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pulp;

/// One output of pass 1: `(dot(a, pa) + dot(b, pb) + rs2 + 2^9) >> 10` stored at `off(a1)`.
#[rustfmt::skip]
macro_rules! out1 {
    ($a:ident, $pa:ident, $b:ident, $pb:ident, $rs2:ident, $off:literal) => {
        concat!(
            asm_macros::pv_dotsp_h!(t6, $a, $pa), "\n",
            asm_macros::pv_sdotsp_h!(t6, $b, $pb), "\n",
            asm_macros::p_addrni!(t6, t6, $rs2, 10), "\n",
            "sh t6, ", $off, "(a1)\n",
        )
    };
}

/// One output of pass 2: `(dot(a, pa) + dot(b, pb) + 2^16) >> 17` stored at `off(a1)`.
#[rustfmt::skip]
macro_rules! out2 {
    ($a:ident, $pa:ident, $b:ident, $pb:ident, $off:literal) => {
        concat!(
            asm_macros::pv_dotsp_h!(t5, $a, $pa), "\n",
            asm_macros::pv_sdotsp_h!(t5, $b, $pb), "\n",
            asm_macros::p_addrni!(t5, t5, zero, 17), "\n",
            "sh t5, ", $off, "(a1)\n",
        )
    };
}

/// Pass 2 for one transposed row (the next 16 bytes at a3): its 8 outputs stored at the given
/// byte offsets of the output (their zig-zag positions).
#[rustfmt::skip]
macro_rules! col2 {
    ($o0:literal, $o1:literal, $o2:literal, $o3:literal, $o4:literal, $o5:literal, $o6:literal, $o7:literal) => {
        concat!(
            asm_macros::p_lw!(t0, 4(a3!)), "\n",
            asm_macros::p_lw!(t1, 4(a3!)), "\n",
            asm_macros::p_lw!(t2, 4(a3!)), "\n",
            asm_macros::p_lw!(t5, 4(a3!)), "\n",
            asm_macros::pv_add_h!(t6, t0, t2), "\n",
            asm_macros::pv_sub_h!(t0, t0, t2), "\n",
            asm_macros::pv_add_h!(t2, t1, t5), "\n",
            asm_macros::pv_sub_h!(t1, t1, t5), "\n",
            out2!(t6, ra, t2, ra, $o0),
            out2!(t0, a6, t1, a7, $o1),
            out2!(t6, s2, t2, s3, $o2),
            out2!(t0, s4, t1, s5, $o3),
            out2!(t6, s6, t2, s7, $o4),
            out2!(t0, s8, t1, s9, $o5),
            out2!(t6, s10, t2, s11, $o6),
            out2!(t0, t3, t1, t4, $o7),
        )
    };
}

impl Kernel for Pulp {
    const NAME: &'static str = "pulp";

    #[inline(always)]
    fn fdct(src: &[u8], ctx: &DctCtx, w: &mut Work) {
        let stride = ctx.stride;
        // The kernel loads words: rows must be word-aligned. Otherwise (never for the encoder's
        // strips) the portable model computes the same bits.
        if src.len() < 7 * stride + 8 || stride % 4 != 0 || src.as_ptr() as usize % 4 != 0 {
            portable_fdct(src, stride, &mut w.f8);
            return;
        }
        kernel(src.as_ptr(), ctx, w);
    }

    #[inline(always)]
    fn zero_mask(f8: &[i16; 64], thr: &[u32; 32]) -> [u32; 2] {
        zero_mask(f8, thr)
    }

    #[inline(always)]
    fn ff1(x: u32) -> u32 {
        let r: u32;
        // SAFETY: `p.ff1` reads a0 and writes a0, nothing else.
        unsafe {
            asm!(p_ff1!(a0, a0), inlateout("a0") x => r, options(pure, nomem, nostack));
        }
        r
    }

    #[inline(always)]
    fn bit_len(x: u32) -> u32 {
        let r: u32;
        // SAFETY: `p.fl1` reads a0 and writes a0, nothing else.
        unsafe {
            asm!(p_fl1!(a0, a0), inlateout("a0") x => r, options(pure, nomem, nostack));
        }
        r + 1
    }
}

/// [`Kernel::zero_mask`] on packed halfwords (see the module docs).
#[rustfmt::skip]
#[inline(always)]
fn zero_mask(f8: &[i16; 64], thr: &[u32; 32]) -> [u32; 2] {
    let (m0, m1): (u32, u32);
    // SAFETY: the asm reads the 128 bytes of `f8` and of `thr` (both word-aligned: `Work` is
    // `align(4)`, `thr` a `[u32; 32]`) with post-increment loads and writes only the registers
    // declared below; hardware loop 0 runs its 7-instruction body 16 times, twice.
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            "li t3, 0",
            "30:", lp_setupi!(x0, 16, 28),
            p_lw!(t0, 4(a0!)),
            p_lw!(t1, 4(a1!)),
            pv_abs_h!(t0, t0),
            pv_sub_h!(t0, t0, t1),
            "and t0, t0, a2",
            "srli t3, t3, 1",
            "31:", "or t3, t3, t0",
            ".if (31b - 30b) != 28", ".error \"zero mask: lp.setupi offset\"", ".endif",
            "li t4, 0",
            "32:", lp_setupi!(x0, 16, 28),
            p_lw!(t0, 4(a0!)),
            p_lw!(t1, 4(a1!)),
            pv_abs_h!(t0, t0),
            pv_sub_h!(t0, t0, t1),
            "and t0, t0, a2",
            "srli t4, t4, 1",
            "33:", "or t4, t4, t0",
            ".if (33b - 32b) != 28", ".error \"zero mask: lp.setupi offset\"", ".endif",
            ".option pop",
            inout("x10") f8.as_ptr() => _,
            inout("x11") thr.as_ptr() => _,
            in("x12") 0x8000_8000u32,
            out("x5") _, out("x6") _,
            out("x28") m0, out("x29") m1,
            options(nostack, readonly),
        );
    }
    [m0, m1]
}

const _: () = assert!(ROW_ORDER[0] == 0 && ROW_ORDER[7] == 4);

/// The block at `src` (rows at `src + ctx.offs[k]`, word-aligned, all inside the caller's slice)
/// into `w.f8`.
#[rustfmt::skip]
#[inline(never)]
#[unsafe(link_section = ".text.hot.4.jpeg.0.fdct")]
fn kernel(src: *const u8, ctx: &DctCtx, w: &mut Work) {
    // SAFETY: the asm reads 8 bytes at `src + ctx.offs[k]` for k in 0..8 (the caller checked
    // that these lie in its slice and are word-aligned), the 8 words of `ctx.offs` and the 15 of
    // `ctx.pairs`, and reads and writes the 256 bytes of `*w` (word-aligned, `repr(C)`: `f8` at
    // +0, `t` at +128); it writes only the registers declared below. Hardware loop 0 is
    // overwritten (this is never called from inside a hardware loop).
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            "lw ra, 0(a2)",
            "lw a6, 4(a2)", "lw a7, 8(a2)",
            "lw s2, 12(a2)", "lw s3, 16(a2)",
            "lw s4, 20(a2)", "lw s5, 24(a2)",
            "lw s6, 28(a2)", "lw s7, 32(a2)",
            "lw s8, 36(a2)", "lw s9, 40(a2)",
            "lw s10, 44(a2)", "lw s11, 48(a2)",
            "lw t3, 52(a2)", "lw t4, 56(a2)",
            // Pass 1: 8 rows.
            "li t0, 8",
            ".balign 4",
            "20:", lp_setup!(x0, t0, 192),
            p_lw!(t0, 4(a3!)),
            "add t0, a0, t0",
            "lw t1, 0(t0)",
            "lw t2, 4(t0)",
            "and t5, t1, a4",
            "srli t1, t1, 8",
            "and t1, t1, a4",
            pv_shuffle_sci_h!(t2, t2, 1),
            "and t6, t2, a4",
            "srli t2, t2, 8",
            "and t2, t2, a4",
            "add t0, t5, t2",
            pv_sub_h!(t5, t5, t2),
            "add t2, t1, t6",
            pv_sub_h!(t1, t1, t6),
            out1!(t0, ra, t2, ra, a5, "128"),
            out1!(t5, a6, t1, a7, zero, "144"),
            out1!(t0, s2, t2, s3, zero, "160"),
            out1!(t5, s4, t1, s5, zero, "176"),
            out1!(t0, s6, t2, s7, zero, "192"),
            out1!(t5, s8, t1, s9, zero, "208"),
            out1!(t0, s10, t2, s11, zero, "224"),
            out1!(t5, t3, t1, t4, zero, "240"),
            "21:", "addi a1, a1, 2",
            ".if (21b - 20b) != 192", ".error \"pass 1: lp.setup offset does not reach the loop end\"", ".endif",
            // Pass 2: 8 transposed rows, each output to its zig-zag position.
            "addi a1, a1, -16",
            "addi a3, a1, 128",
            col2!("0", "4", "6", "18", "20", "40", "42", "70"),
            col2!("2", "8", "16", "22", "38", "44", "68", "72"),
            col2!("10", "14", "24", "36", "46", "66", "74", "96"),
            col2!("12", "26", "34", "48", "64", "76", "94", "98"),
            col2!("28", "32", "50", "62", "78", "92", "100", "114"),
            col2!("30", "52", "60", "80", "90", "102", "112", "116"),
            col2!("54", "58", "82", "88", "104", "110", "118", "124"),
            col2!("56", "84", "86", "106", "108", "120", "122", "126"),
            ".option pop",
            inout("x10") src => _,
            inout("x11") w as *mut Work => _,
            inout("x12") ctx.pairs.as_ptr() => _,
            inout("x13") ctx.offs.as_ptr() => _,
            in("x14") 0x00ff_00ffu32,
            in("x15") LEVEL_SHIFT,
            out("x1") _, out("x5") _, out("x6") _, out("x7") _,
            out("x16") _, out("x17") _,
            out("x18") _, out("x19") _, out("x20") _, out("x21") _, out("x22") _,
            out("x23") _, out("x24") _, out("x25") _, out("x26") _, out("x27") _,
            out("x28") _, out("x29") _, out("x30") _, out("x31") _,
            options(nostack),
        );
    }
}
