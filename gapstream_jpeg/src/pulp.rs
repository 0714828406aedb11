//! The RI5CY (GAP8 "Xpulpv2") kernels: the forward DCT on packed-SIMD dot products, the
//! quantiser's zero test on packed halfwords, and the block's quantisation and Huffman coding.
//! The arithmetic is [`crate::fdct`]'s and [`crate::entropy`]'s, bit for bit (every DCT
//! intermediate is an exact integer in range, see there; the coder is the same algorithm on the
//! same tables); GVSOC runs it, QEMU cannot. Every `make gvsoc-bench` run checks the file's
//! digest against the host's portable encoder.
//!
//! **DCT.** Pass 1, one pixel row per iteration of hardware loop 0 (rows in [`ROW_ORDER`], 48
//! instructions): two word loads, the pixels split into halfword pairs with a mask, a shift and
//! `pv.shuffle.sci.h` (`(p0, p2)`, `(p1, p3)`, `(p7, p5)`, `(p6, p4)`), the butterflies as one
//! `add` (sums of bytes never carry into the upper half) and one `pv.sub.h` per pair, then for
//! each of the 8 outputs `pv.dotsp.h` + `pv.sdotsp.h` (4 products), `p.addRN` (round and shift,
//! the DC with the level shift) and a halfword store into the transposed scratch. Pass 2, one
//! transposed row per iteration (48 instructions): four post-increment loads, the butterflies as
//! `pv.add.h` / `pv.sub.h` on the pairs, 8 × (2 dot products, `p.addRN`, the coefficient's slot
//! offset ([`crate::fdct::slot`]) from [`crate::fdct::ZZ_STORE`] by a post-increment `p.lbu` and a
//! register-offset `p.sh`). Both passes use the same 15 coefficient pairs, kept in registers for
//! the block. The loops keep the kernel at 0.5 KiB: the
//! 8 cores share a 4 KiB instruction cache.
//!
//! **Zero test** ([`Kernel::zero_mask`]): per group of two words (four slots: coefficients `j`,
//! `8 + j`, `16 + j`, `24 + j` of a half) two loads of coefficients and two of thresholds,
//! `pv.abs.h` and `pv.sub.h` on each word (negative: quantises to 0), the four sign bytes gathered
//! into one word by `pv.shuffle2.b`, their top bits masked and shifted into the mask: 12
//! instructions per group in hardware loop 0; the slots make the mask come out in zig-zag order.
//!
//! **Block coder** ([`Kernel::code_block`], when the output has room for a block at its worst):
//! the DC quantised (`p.abs`, `p.mac` with the entry's `recip` and `bias`) and coded as the
//! difference to the previous block; the zero mask inverted (bit `j` of word `w`: coefficient
//! `32 w + j` is not zero); per word, hardware loop 0 runs once per non-zero coefficient
//! (`p.cnt`, 27 instructions), each found with `p.ff1` and cleared with `p.bclr`, quantised (the
//! entry's fields by register offset, `p.mac`), `31 - size` from `p.clb` (the shift that makes
//! the sign field, and with `8 run` the AC entry's offset in one `p.msu`:
//! [`crate::tables::ac_index`]), its code from the AC table (already shifted by the
//! category, the total length on top: see [`crate::tables::coder_entry`]), ZRL for runs of 16;
//! EOB unless coefficient 63 was coded. Bits go into a 32-bit accumulator; a full word is stored
//! big-endian in one post-increment store of its bytes reversed (`pv.shuffle.b`) unless
//! `pv.cmpeq.sci.b` finds a `0xFF` byte in it, then byte by byte with a stuffed `0x00` after each
//! `0xFF`; the AC loop does this inline.
use crate::entropy::{Bits, MAX_BLOCK_BYTES, Out};
use crate::fdct::{DctCtx, Kernel, LEVEL_SHIFT, ROW_ORDER, Work, portable_fdct};
use crate::tables::{AC_RUN_STEP, AC_SIZE_STEP, Tables};
use asm_macros::{
    lp_setup, lp_setupi, p_abs, p_bclr, p_clb, p_cnt, p_extractui, p_ff1, p_fl1, p_lbu, p_lh_rr,
    p_lhu_rr, p_lw, p_lw_rr, p_mac, p_msu, p_sh, p_sw, pv_abs_h, pv_add_h, pv_cmpeq_sci_b,
    pv_shuffle_b, pv_shuffle_sci_h, pv_shuffle2_b, pv_sub_h,
};
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

/// One output of pass 2: `(dot(a, pa) + dot(b, pb) + 2^16) >> 17` stored at the next zig-zag
/// offset (a2, post-increment) of the output a1.
#[rustfmt::skip]
macro_rules! out2 {
    ($a:ident, $pa:ident, $b:ident, $pb:ident) => {
        concat!(
            asm_macros::p_lbu!(a0, 1(a2!)), "\n",
            asm_macros::pv_dotsp_h!(t5, $a, $pa), "\n",
            asm_macros::pv_sdotsp_h!(t5, $b, $pb), "\n",
            asm_macros::p_addrni!(t5, t5, zero, 17), "\n",
            asm_macros::p_sh!(t5, a0(a1)), "\n",
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

    #[inline(always)]
    fn code_block(
        f8: &[i16; 64],
        t: &Tables,
        dc_pred: &mut i32,
        bits: &mut Bits,
        out: &mut Out<'_>,
    ) {
        // The assembly writes without bounds checks: only with room for a block at its worst.
        let room = out.buf.len().saturating_sub(out.pos);
        if out.full || room < MAX_BLOCK_BYTES {
            code_block_checked(f8, t, dc_pred, bits, out);
            return;
        }
        let zero = zero_mask(f8, &t.thr);
        let at = out.buf[out.pos..].as_mut_ptr();
        let end = block(f8, zero, t, dc_pred, bits, at);
        out.pos += end as usize - at as usize;
    }
}

/// The bounds-checked coder for a block that might not fit: out of line and cold, so that the
/// block loop's hot code stays compact (the 8 cores share a 4 KiB instruction cache; inlined,
/// the worst picture of the benchmark took 4 % more cycles).
#[cold]
#[inline(never)]
fn code_block_checked(
    f8: &[i16; 64],
    t: &Tables,
    dc_pred: &mut i32,
    bits: &mut Bits,
    out: &mut Out<'_>,
) {
    crate::entropy::code_block::<Pulp>(f8, t, dc_pred, bits, out);
}

const _: () = assert!(ROW_ORDER[0] == 0 && ROW_ORDER[7] == 4);

/// The block at `src` (rows at `src + ctx.offs[k]`, word-aligned, all inside the caller's slice)
/// into `w.f8`, zig-zag order.
#[rustfmt::skip]
#[inline(never)]
#[unsafe(link_section = ".text.hot.4.jpeg.0.fdct")]
fn kernel(src: *const u8, ctx: &DctCtx, w: &mut Work) {
    // SAFETY: the asm reads 8 bytes at `src + ctx.offs[k]` for k in 0..8 (the caller checked
    // that these lie in its slice and are word-aligned), the 8 words of `ctx.offs`, the `zz`
    // pointer right after them (`repr(C)`) and the 64 bytes it points to, the 15 words of
    // `ctx.pairs`, and reads and writes the 256 bytes of `*w` (word-aligned, `repr(C)`: `f8` at
    // +0, `t` at +128; the zig-zag offsets are even and below 128); it writes only the
    // registers declared below. Hardware loop 0 is overwritten (this is never called from
    // inside a hardware loop).
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
            // Pass 1: 8 rows; a2 holds the address of the row, the next row's offset is
            // loaded one instruction before it is added (no load-use stall).
            p_lw!(a2, 4(a3!)),
            "li t0, 8",
            "add a2, a0, a2",
            ".balign 4",
            "20:", lp_setup!(x0, t0, 192),
            "lw t1, 0(a2)",
            "lw t2, 4(a2)",
            p_lw!(a2, 4(a3!)),
            "and t5, t1, a4",
            "add a2, a0, a2",
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
            // Pass 2: 8 transposed rows; a3 now points past `ctx.zz` (the last row's `p.lw`
            // read it as a ninth offset).
            "lw a2, -4(a3)",
            "addi a1, a1, -16",
            "addi a3, a1, 128",
            "li t0, 8",
            "22:", lp_setup!(x0, t0, 192),
            p_lw!(t0, 4(a3!)),
            p_lw!(t1, 4(a3!)),
            p_lw!(t2, 4(a3!)),
            p_lw!(t5, 4(a3!)),
            pv_add_h!(t6, t0, t2),
            pv_sub_h!(t0, t0, t2),
            pv_add_h!(t2, t1, t5),
            pv_sub_h!(t1, t1, t5),
            out2!(t6, ra, t2, ra),
            out2!(t0, a6, t1, a7),
            out2!(t6, s2, t2, s3),
            out2!(t0, s4, t1, s5),
            out2!(t6, s6, t2, s7),
            out2!(t0, s8, t1, s9),
            out2!(t6, s10, t2, s11),
            p_lbu!(a0, 1(a2!)),
            asm_macros::pv_dotsp_h!(t5, t0, t3),
            asm_macros::pv_sdotsp_h!(t5, t1, t4),
            asm_macros::p_addrni!(t5, t5, zero, 17),
            "23:", p_sh!(t5, a0(a1)),
            ".if (23b - 22b) != 192", ".error \"pass 2: lp.setup offset does not reach the loop end\"", ".endif",
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

/// [`Kernel::zero_mask`] on packed halfwords (see the module docs).
#[rustfmt::skip]
#[inline(always)]
fn zero_mask(f8: &[i16; 64], thr: &[u32; 32]) -> [u32; 2] {
    let (m0, m1): (u32, u32);
    // SAFETY: the asm reads the 128 bytes of `f8` and of `thr` (both word-aligned: `Work` is
    // `align(4)`, `thr` a `[u32; 32]`) with post-increment loads and writes only the registers
    // declared below; hardware loop 0 runs its 12-instruction body 8 times, twice.
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            "li t3, 0",
            "30:", lp_setupi!(x0, 8, 48),
            p_lw!(t0, 4(a0!)),
            p_lw!(t1, 4(a1!)),
            p_lw!(t5, 4(a0!)),
            p_lw!(t6, 4(a1!)),
            pv_abs_h!(t0, t0),
            pv_sub_h!(t0, t0, t1),
            pv_abs_h!(t5, t5),
            pv_sub_h!(t5, t5, t6),
            pv_shuffle2_b!(t0, t5, a3),
            "and t0, t0, a2",
            "srli t3, t3, 1",
            "31:", "or t3, t3, t0",
            ".if (31b - 30b) != 48", ".error \"zero mask: lp.setupi offset\"", ".endif",
            "li t4, 0",
            "32:", lp_setupi!(x0, 8, 48),
            p_lw!(t0, 4(a0!)),
            p_lw!(t1, 4(a1!)),
            p_lw!(t5, 4(a0!)),
            p_lw!(t6, 4(a1!)),
            pv_abs_h!(t0, t0),
            pv_sub_h!(t0, t0, t1),
            pv_abs_h!(t5, t5),
            pv_sub_h!(t5, t5, t6),
            pv_shuffle2_b!(t0, t5, a3),
            "and t0, t0, a2",
            "srli t4, t4, 1",
            "33:", "or t4, t4, t0",
            ".if (33b - 32b) != 48", ".error \"zero mask: lp.setupi offset\"", ".endif",
            ".option pop",
            inout("x10") f8.as_ptr() => _,
            inout("x11") thr.as_ptr() => _,
            in("x12") 0x8080_8080u32,
            // pv.shuffle2.b's selector: bytes 1 and 3 of t0 (the first word's two sign bytes),
            // then bytes 1 and 3 of t5.
            in("x13") 0x0705_0301u32,
            out("x5") _, out("x6") _, out("x30") _, out("x31") _,
            out("x28") m0, out("x29") m1,
            options(nostack, readonly),
        );
    }
    [m0, m1]
}

/// Where a4 points in the AC entries: `a4 + 8 run - 68 (31 - size)` is the entry of `(run, size)`
/// ([`crate::tables::ac_index`]).
const AC_BASE: usize = 31 * AC_SIZE_STEP - AC_SIZE_STEP;
const _: () = assert!(AC_RUN_STEP == 8 && AC_SIZE_STEP == 68);
/// The EOB and ZRL entries relative to a4 (within a load's 12-bit offset).
const EOB_AT: isize = core::mem::offset_of!(Tables, eob) as isize
    - core::mem::offset_of!(Tables, ac) as isize
    - AC_BASE as isize;
const ZRL_AT: isize = core::mem::offset_of!(Tables, zrl) as isize
    - core::mem::offset_of!(Tables, ac) as isize
    - AC_BASE as isize;
const _: () = assert!(EOB_AT >= -2048 && ZRL_AT >= -2048 && EOB_AT < 2048 && ZRL_AT < 2048);

/// Codes one block (DC, AC, EOB) into the bytes at `out` (room for [`MAX_BLOCK_BYTES`]
/// guaranteed by the caller); returns the new end.
///
/// Register plan: F8 a0 (coefficient `k` at the byte its quantiser entry names), zero masks a1
/// a2 (then the non-zero flags of the current word s8), quantiser entries a3 (of the current
/// word: + 32 entries for word 1), AC entries a4 (`t.ac` + [`AC_BASE`] bytes: the entry of
/// `(run, size)` at `a4 + 8 run - 68 (31 - size)`, `31 - size` being `p.clb` of the quantised
/// magnitude; EOB and ZRL at fixed offsets), DC entries a5 (then 68, the multiplier of
/// `31 - size`), output a6, DC predictor a7, bit accumulator s2 and free bits s3, the quantiser
/// entries + 4, + 2, + 1 in s4 s5 s6 for the AC loop's register-offset loads (s6 is 31 for the DC
/// before), the byte reversal's selector `0x00010203` in s7, 32 in a1, the zig-zag position t0
/// and, scaled by 8, `8 k` t1 and `8 (last + 1)` s9 (relative to the current word), word-1 flag
/// s10, 128 s11 (16 zeros, scaled); `8 run` t6.
/// The AC scan of a word is hardware loop 0, one iteration per non-zero coefficient. The put
/// routine (label 90, link ra)
/// takes the code in t3 and its length in t4 and clobbers t1 t2 t5.
#[rustfmt::skip]
#[inline(never)]
#[unsafe(link_section = ".text.hot.4.jpeg.2.block")]
fn block(
    f8: &[i16; 64],
    zero: [u32; 2],
    t: &Tables,
    dc_pred: &mut i32,
    bits: &mut Bits,
    out: *mut u8,
) -> *mut u8 {
    let (mut acc, mut free, mut pred, mut end) = (bits.acc, bits.free, *dc_pred, out);
    // SAFETY: the asm reads the 128 bytes of `f8`, entries 0..64 of `t.quant` (8 bytes each),
    // the words of `t.ac` at `ac_index(run, size)` for runs 0..=15 and sizes 1..=10 (through
    // `t.ac` + `AC_BASE` bytes; `t.ac` has `AC_WORDS` words) and `t.eob` / `t.zrl` (offsets
    // checked at compile time), and `t.dc[0..12]` (indices: a category is at most 11 for the
    // DC and 10 for AC coefficients of 8-bit samples, a run at most 15), and writes at most
    // `MAX_BLOCK_BYTES` bytes from `out` (the caller guarantees the room: one block is at most
    // 20 + 63 * 26 bits plus 31 pending, 52 words of at most 8 stuffed bytes); it writes only the
    // registers declared below. Hardware loop 0 is overwritten (this is never called from inside
    // a hardware loop).
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            "li s11, 128",
            // The non-zero flags of both words (bit j of word w: coefficient 32 w + j; the
            // DC's cleared; word 1 kept in a2).
            "not s8, a1",
            "andi s8, s8, -2",
            "not a2, a2",
            // s6 31, s7 the byte reversal's selector, a1 32.
            "li s6, 31",
            "li s7, 0x00010203",
            "li a1, 32",
            // ---- DC
            "lh t0, 0(a0)",
            "lw t1, 4(a3)",
            "lhu t2, 2(a3)",
            "lbu t6, 1(a3)",
            p_abs!(t4, t0),
            p_mac!(t1, t4, t2),
            "srl t4, t1, t6",
            "srai t5, t0, 31",
            "xor t4, t4, t5",
            "sub t4, t4, t5",
            "sub t0, t4, a7",
            "mv a7, t4",
            p_abs!(t1, t0),
            "li t2, 0",
            "beqz t1, 40f",
            p_fl1!(t2, t1),
            "addi t2, t2, 1",
            "40:",
            // field = a, or its complement in t2 bits for a negative difference.
            "srai t5, t0, 31",
            "sub t3, a1, t2",
            "srl t5, t5, t3",
            "xor t5, t1, t5",
            // The entry: the code shifted by the size, the total length in bits 27..32.
            "slli t3, t2, 2",
            p_lw_rr!(t3, t3(a5)),
            "srli t4, t3, 27",
            p_extractui!(t3, t3, 26, 0),
            "or t3, t3, t5",
            "jal ra, 90f",
            // The quantiser entries' fields by register offset (k * 8) from four bases: `at`
            // from a3, `bias` from s4, `recip` from s5, `shift` from s6.
            "addi s4, a3, 4",
            "addi s5, a3, 2",
            "addi s6, a3, 1",
            // The AC entry of (run, size) at a4 + 8 run - 68 (31 - size): a5 holds 68.
            "li a5, 68",
            // ---- AC, word 0 (the DC's bit cleared), then word 1: hardware loop 0 runs once per
            // non-zero coefficient of the word (`p.cnt`); its last instruction finds the next one,
            // so the put routine's return and the fast path both end there. Positions are
            // relative to the word and scaled by 8 (t1 = 8 k, s9 = 8 (last + 1), t6 = 8 run):
            // for word 1, a3 moves on by 32 entries and s9 back by 256.
            "li s9, 8",
            "li s10, 0",
            "50:",
            "beqz s8, 58f",
            p_cnt!(t1, s8),
            p_ff1!(t0, s8),
            lp_setup!(x0, t1, 108),
            p_bclr!(s8, s8, t0),
            "slli t1, t0, 3",
            "sub t6, t1, s9",
            "addi s9, t1, 8",
            "bgeu t6, s11, 70f",
            // The coefficient at its slot (the entry's byte 0), quantised: (|x| recip + bias)
            // >> shift.
            "52:",
            p_lbu!(t2, t1(a3)),
            p_lw_rr!(t3, t1(s4)),
            p_lh_rr!(t2, t2(a0)),
            p_lhu_rr!(t4, t1(s5)),
            p_lbu!(t5, t1(s6)),
            p_abs!(t0, t2),
            p_mac!(t3, t0, t4),
            "srli t2, t2, 1",
            "srl t0, t3, t5",
            // clb(q) = 31 - size; the entry of (run, size) at a4 + 8 run - 68 (31 - size)
            // (`tables::ac_index`: one p.msu); the field: q, or its complement in size bits for
            // a negative coefficient (the coefficient shifted right by 1, bits 14..31 =
            // 0x1FFFF << 14 when negative and below 2^14 otherwise, shifted right by
            // 31 - size >= 21). The multiply's and the load's results are used two instructions
            // later.
            p_clb!(t1, t0),
            p_msu!(t6, t1, a5),
            "srl t2, t2, t1",
            p_lw_rr!(t3, t6(a4)),
            "xor t2, t0, t2",
            "srli t4, t3, 27",
            p_extractui!(t3, t3, 26, 0),
            "or t3, t3, t2",
            "bgeu t4, s3, 56f",
            "sll s2, s2, t4",
            "or s2, s2, t3",
            "sub s3, s3, t4",
            // The loop's last instruction, 27 after the lp.setup (the branches out of the loop
            // keep the assembler from checking the distance here; `cargo xtask pulp-disasm`
            // does, on the built kernel).
            "55:", p_ff1!(t0, s8),
            "58:",
            "bnez s10, 60f",
            "li s10, 1",
            "addi a3, a3, 256",
            "addi s4, s4, 256",
            "addi s5, s5, 256",
            "addi s6, s6, 256",
            "addi s9, s9, -256",
            "mv s8, a2",
            "j 50b",
            // A full word to emit (the put routine's work, inline), back to the loop's last
            // instruction.
            "56:",
            "sub t1, t4, s3",
            "sll t2, s2, s3",
            "srl t5, t3, t1",
            "or t2, t2, t5",
            "mv s2, t3",
            "sub s3, a1, t1",
            pv_cmpeq_sci_b!(t1, t2, -1),
            "bnez t1, 57f",
            pv_shuffle_b!(t2, t2, s7),
            p_sw!(t2, 4(a6!)),
            "j 55b",
            "57:",
            "jal ra, 93f",
            "j 55b",
            // ---- EOB unless coefficient 63 was the last coded (s9, relative to word 1, is 256).
            "60:",
            "li t0, 256",
            "beq s9, t0, 99f",
            "lw t3, {eob}(a4)",
            "srli t4, t3, 27",
            p_extractui!(t3, t3, 26, 0),
            "jal ra, 90f",
            "j 99f",
            // ---- ZRL for every 16 zeros of a run (t0: k and t6: 8 run kept), back into the loop
            // (t1 = 8 k again: the put routine clobbers it).
            "70:",
            "lw t3, {zrl}(a4)",
            "srli t4, t3, 27",
            p_extractui!(t3, t3, 26, 0),
            "jal ra, 90f",
            "addi t6, t6, -128",
            "bgeu t6, s11, 70b",
            "slli t1, t0, 3",
            "j 52b",
            // ---- put(t3 = code, t4 = length), return through t6.
            "90:",
            "bltu t4, s3, 91f",
            "sub t1, t4, s3",
            "sll t2, s2, s3",
            "srl t5, t3, t1",
            "or t2, t2, t5",
            "mv s2, t3",
            "sub s3, a1, t1",
            // Does the word hold a 0xFF byte? If not, its bytes reversed in one store
            // (big-endian; the output need not be word-aligned: RI5CY splits a misaligned
            // store).
            pv_cmpeq_sci_b!(t1, t2, -1),
            "bnez t1, 93f",
            pv_shuffle_b!(t2, t2, s7),
            p_sw!(t2, 4(a6!)),
            "jr ra",
            "91:",
            "sll s2, s2, t4",
            "or s2, s2, t3",
            "sub s3, s3, t4",
            "jr ra",
            // Byte by byte, a 0x00 after each 0xFF.
            "93:",
            "li t4, 24",
            "94:",
            "srl t5, t2, t4",
            "andi t5, t5, 255",
            "sb t5, 0(a6)",
            "addi a6, a6, 1",
            "li t1, 255",
            "bne t5, t1, 95f",
            "sb zero, 0(a6)",
            "addi a6, a6, 1",
            "95:",
            "addi t4, t4, -8",
            "bgez t4, 94b",
            "jr ra",
            "99:",
            ".option pop",
            in("x10") f8.as_ptr(),
            inout("x11") zero[0] => _,
            inout("x12") zero[1] => _,
            inout("x13") t.quant.as_ptr() => _,
            in("x14") t.ac.as_ptr().wrapping_byte_add(AC_BASE),
            inout("x15") t.dc.as_ptr() => _,
            inout("x16") end,
            inout("x17") pred,
            inout("x18") acc,
            inout("x19") free,
            out("x1") _, out("x5") _, out("x6") _, out("x7") _,
            out("x20") _, out("x21") _, out("x22") _, out("x23") _, out("x24") _,
            out("x25") _, out("x26") _, out("x27") _,
            out("x28") _, out("x29") _, out("x30") _, out("x31") _,
            eob = const EOB_AT,
            zrl = const ZRL_AT,
            options(nostack),
        );
    }
    *dc_pred = pred;
    bits.acc = acc;
    bits.free = free;
    end
}
