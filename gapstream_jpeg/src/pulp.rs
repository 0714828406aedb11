//! The RI5CY (GAP8 "Xpulpv2") kernels: the forward DCT on packed-SIMD dot products, the
//! quantiser's zero test on packed halfwords, and the block's quantisation and Huffman coding.
//! The arithmetic is [`crate::fdct`]'s and [`crate::entropy`]'s, bit for bit (every DCT
//! intermediate is an exact integer in range, see there; the coder is the same algorithm on the
//! same tables); GVSOC runs it, QEMU cannot. Every `make gvsoc-bench` run checks the file's
//! digest against the host's portable encoder.
//!
//! **DCT.** Pass 1, one pixel row per iteration of hardware loop 0 (rows in [`ROW_ORDER`], 47
//! instructions): two word loads, the pixels split into halfword pairs with a mask, a shift and
//! `pv.shuffle.sci.h` (`(p0, p2)`, `(p1, p3)`, `(p7, p5)`, `(p6, p4)`), the butterflies as one
//! `add` (sums of bytes never carry into the upper half) and one `pv.sub.h` per pair, the even
//! half's second level (`(s0 + s3, s2 + s1)`, `(s0 - s3, s2 - s1)`: a halfword swap, an `add`, a
//! `pv.sub.h`), then for each odd output `pv.dotsp.h` + `pv.sdotsp.h` (4 products) and for each
//! even one `pv.dotsp.h` alone (`C[u]` is symmetric for `u` = 0, 4 and antisymmetric for 2, 6,
//! so the sums are the same integers), `p.addRN` (round and shift, the DC with the level shift)
//! and a halfword store into the transposed scratch (4 fraction bits). Pass 2, one transposed
//! row per iteration (46 instructions): four post-increment loads (the words `(t0, t2)`, `(t3,
//! t1)`, `(t7, t5)`, `(t4, t6)`), the butterflies as `pv.add.h` / `pv.sub.h` on the pairs, the
//! even half's second level as in pass 1 (`(s0, s2) ± (s3, s1)`, two more: within a halfword with
//! 4 fraction bits), then per output its dot products (one for an even output, two for an odd
//! one), `p.addRN`, the coefficient's slot offset ([`crate::fdct::slot`]) from
//! [`crate::fdct::ZZ_STORE`] by a post-increment `p.lbu` and a register-offset `p.sh`. Both
//! passes use the same 15 coefficient pairs, kept in registers for the block (pass 2 with the
//! odd rows' second pairs swapped to `(C[u][3], C[u][1])`, for `(d3, d1)`: 4 `pv.shuffle.sci.h`
//! between the passes). The loops keep the kernel at 0.5 KiB: the 8 cores share a 4 KiB
//! instruction cache.
//!
//! **Zero test** ([`Kernel::zero_mask`]): per group of two words (four slots: coefficients `j`,
//! `8 + j`, `16 + j`, `24 + j` of a half), from the last group to the first, two loads of
//! coefficients and two of thresholds, `pv.abs.h` and `pv.sub.h` on each word (negative:
//! quantises to 0), the four sign bytes gathered into one word by `pv.shuffle2.b` and shifted to
//! bit 0 of each byte (`pv.srl.sci.b`), added to twice the mask so far (`p.mac`): 11 instructions
//! per group, two groups per iteration of hardware loop 0; the slots make the mask come out in
//! zig-zag order.
//!
//! **Block coder** ([`Kernel::code_block`], when the output has room for a block at its worst):
//! the DC quantised (`p.abs`, `pv.sdotup.sc.h` with the entry's first word and `bias`, `srl` by
//! that word) and coded as the
//! difference to the previous block; the zero mask inverted (bit `j` of word `w`: coefficient
//! `32 w + j` is not zero); per word, hardware loop 0 runs once per non-zero coefficient
//! (`p.cnt`, 26 instructions), each found with `p.ff1` and cleared with `p.bclr`, quantised (the
//! entry's fields by register offset: `(|x| recip + bias) >> shift` as one `pv.sdotup.sc.h` of
//! `|x|` with the first word, whose halves sum to `recip`, and a `srl` by that word, whose low
//! 5 bits are `shift`: [`crate::tables::QuantEntry`]), `31 - size` from `p.clb` (the shift that makes
//! the sign field, and with `8 run` the AC entry's offset in one `p.msu`:
//! [`crate::tables::ac_index`]), its code from the AC table (already shifted by the
//! category, the total length on top: see [`crate::tables::coder_entry`]), ZRL for runs of 16;
//! EOB unless coefficient 63 was coded. Bits go into a 32-bit accumulator; a full word is stored
//! big-endian in one post-increment store of its bytes reversed (`pv.shuffle.b`) unless
//! `pv.cmpeq.sci.b` finds a `0xFF` byte in it, then byte by byte with a stuffed `0x00` after each
//! `0xFF`; the AC loop does this inline.
//!
//! **Run loop** ([`Kernel::code_run`], what the cluster encoder's strips use): the three
//! kernels' instructions (the same text, from one macro each) one after the other in one loop
//! over the blocks of a strip, the loop's state (the next block, the blocks left, the output's
//! limit, the DC predictor and the pending bits) in a stack frame of its own: no call, no
//! callee-saved registers saved and restored per block, no Rust glue in between.
use crate::entropy::{Bits, MAX_BLOCK_BYTES, Out};
use crate::fdct::{DctCtx, Kernel, LEVEL_SHIFT, ROW_ORDER, Work, portable_fdct};
use crate::tables::{AC_RUN_STEP, AC_SIZE_STEP, Tables};
use asm_macros::{p_ff1, p_fl1};
use core::arch::asm;

/// The PULP kernels (feature `pulp`, riscv32).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pulp;

/// One output of pass 1: `(dot(a, pa) + dot(b, pb) + rs2 + 2^10) >> 11` stored at `off(a1)`.
#[rustfmt::skip]
macro_rules! out1 {
    ($a:ident, $pa:ident, $b:ident, $pb:ident, $rs2:ident, $off:literal) => {
        concat!(
            asm_macros::pv_dotsp_h!(t6, $a, $pa), "\n",
            asm_macros::pv_sdotsp_h!(t6, $b, $pb), "\n",
            asm_macros::p_addrni!(t6, t6, $rs2, 11), "\n",
            "sh t6, ", $off, "(a1)\n",
        )
    };
}

/// One even output of pass 1 from the second butterfly level: `(dot(a, pa) + rs2 + 2^10) >> 11`
/// stored at `off(a1)`.
#[rustfmt::skip]
macro_rules! out1e {
    ($a:ident, $pa:ident, $rs2:ident, $off:literal) => {
        concat!(
            asm_macros::pv_dotsp_h!(t6, $a, $pa), "\n",
            asm_macros::p_addrni!(t6, t6, $rs2, 11), "\n",
            "sh t6, ", $off, "(a1)\n",
        )
    };
}

/// One odd output of pass 2: `(dot(a, pa) + dot(b, pb) + 2^15) >> 16` stored at the next zig-zag
/// offset (a2, post-increment) of the output a1.
#[rustfmt::skip]
macro_rules! out2 {
    ($a:ident, $pa:ident, $b:ident, $pb:ident) => {
        concat!(
            asm_macros::p_lbu!(a0, 1(a2!)), "\n",
            asm_macros::pv_dotsp_h!(t5, $a, $pa), "\n",
            asm_macros::pv_sdotsp_h!(t5, $b, $pb), "\n",
            asm_macros::p_addrni!(t5, t5, zero, 16), "\n",
            asm_macros::p_sh!(t5, a0(a1)), "\n",
        )
    };
}

/// One even output of pass 2 from the second butterfly level: `(dot(a, pa) + 2^15) >> 16` stored
/// at the next zig-zag offset (a2, post-increment) of the output a1.
#[rustfmt::skip]
macro_rules! out2e {
    ($a:ident, $pa:ident) => {
        concat!(
            asm_macros::p_lbu!(a0, 1(a2!)), "\n",
            asm_macros::pv_dotsp_h!(t5, $a, $pa), "\n",
            asm_macros::p_addrni!(t5, t5, zero, 16), "\n",
            asm_macros::p_sh!(t5, a0(a1)), "\n",
        )
    };
}

/// The DCT kernel's instructions ([`kernel`]; register plan there).
#[rustfmt::skip]
macro_rules! dct_asm {
    () => {
        concat!(
            "lw ra, 0(a2)", "\n",
            "lw a6, 4(a2)", "\n",
            "lw a7, 8(a2)", "\n",
            "lw s2, 12(a2)", "\n",
            "lw s3, 16(a2)", "\n",
            "lw s4, 20(a2)", "\n",
            "lw s5, 24(a2)", "\n",
            "lw s6, 28(a2)", "\n",
            "lw s7, 32(a2)", "\n",
            "lw s8, 36(a2)", "\n",
            "lw s9, 40(a2)", "\n",
            "lw s10, 44(a2)", "\n",
            "lw s11, 48(a2)", "\n",
            "lw t3, 52(a2)", "\n",
            "lw t4, 56(a2)", "\n",
            // Pass 1: 8 rows; a2 holds the address of the row, the next row's offset is
            // loaded one instruction before it is added (no load-use stall).
            asm_macros::p_lw!(a2, 4(a3!)), "\n",
            "li t0, 8", "\n",
            "add a2, a0, a2", "\n",
            ".balign 4", "\n",
            "20:", "\n",
            asm_macros::lp_setup!(x0, t0, 188), "\n",
            "lw t1, 0(a2)", "\n",
            "lw t2, 4(a2)", "\n",
            asm_macros::p_lw!(a2, 4(a3!)), "\n",
            "and t5, t1, a4", "\n",
            "add a2, a0, a2", "\n",
            "srli t1, t1, 8", "\n",
            "and t1, t1, a4", "\n",
            asm_macros::pv_shuffle_sci_h!(t2, t2, 1), "\n",
            "and t6, t2, a4", "\n",
            "srli t2, t2, 8", "\n",
            "and t2, t2, a4", "\n",
            "add t0, t5, t2", "\n",
            asm_macros::pv_sub_h!(t5, t5, t2), "\n",
            "add t2, t1, t6", "\n",
            asm_macros::pv_sub_h!(t1, t1, t6), "\n",
            // The even half's second butterfly level: e = (s0 + s3, s2 + s1), f = (s0 - s3,
            // s2 - s1) from (s0, s2) and (s3, s1) (sums of two sums of pixels: no carry into
            // the upper half), so that each even output is one dot product with pass 2's first
            // pair of its row (C[u] is symmetric for u = 0, 4 and antisymmetric for u = 2, 6).
            asm_macros::pv_shuffle_sci_h!(t6, t2, 1), "\n",
            "add t2, t0, t6", "\n",
            asm_macros::pv_sub_h!(t0, t0, t6), "\n",
            out1e!(t2, ra, a5, "128"), "\n",
            out1!(t5, a6, t1, a7, zero, "144"), "\n",
            out1e!(t0, s2, zero, "160"), "\n",
            out1!(t5, s4, t1, s5, zero, "176"), "\n",
            out1e!(t2, s6, zero, "192"), "\n",
            out1!(t5, s8, t1, s9, zero, "208"), "\n",
            out1e!(t0, s10, zero, "224"), "\n",
            out1!(t5, t3, t1, t4, zero, "240"), "\n",
            "21:", "\n",
            "addi a1, a1, 2", "\n",
            ".if (21b - 20b) != 188", "\n",
            ".error \"pass 1: lp.setup offset does not reach the loop end\"", "\n",
            ".endif", "\n",
            // Pass 2's odd outputs take the difference of the second and fourth words as
            // (d3, d1) (`ROW_ORDER`): the second pair of each odd row swapped to (C[u][3],
            // C[u][1]).
            asm_macros::pv_shuffle_sci_h!(a7, a7, 1), "\n",
            asm_macros::pv_shuffle_sci_h!(s5, s5, 1), "\n",
            asm_macros::pv_shuffle_sci_h!(s9, s9, 1), "\n",
            asm_macros::pv_shuffle_sci_h!(t4, t4, 1), "\n",
            // Pass 2: 8 transposed rows; a3 now points past `ctx.zz` (the last row's `p.lw`
            // read it as a ninth offset). A row's words are (t0, t2), (t3, t1), (t7, t5),
            // (t4, t6) (`ROW_ORDER`): the butterflies give (s0, s2) and (s3, s1), and the even
            // half's second level e = (s0 + s3, s2 + s1), f = (s0 - s3, s2 - s1) as in pass 1
            // (|e|, |f| <= 4 * 5,793: halfwords), one dot product per even output.
            "lw a2, -4(a3)", "\n",
            "addi a1, a1, -16", "\n",
            "addi a3, a1, 128", "\n",
            "li t0, 8", "\n",
            "22:", "\n",
            asm_macros::lp_setup!(x0, t0, 184), "\n",
            asm_macros::p_lw!(t0, 4(a3!)), "\n",
            asm_macros::p_lw!(t1, 4(a3!)), "\n",
            asm_macros::p_lw!(t2, 4(a3!)), "\n",
            asm_macros::p_lw!(t5, 4(a3!)), "\n",
            asm_macros::pv_add_h!(t6, t0, t2), "\n",
            asm_macros::pv_sub_h!(t0, t0, t2), "\n",
            asm_macros::pv_add_h!(t2, t1, t5), "\n",
            asm_macros::pv_sub_h!(t1, t1, t5), "\n",
            asm_macros::pv_add_h!(a4, t6, t2), "\n",
            asm_macros::pv_sub_h!(a5, t6, t2), "\n",
            out2e!(a4, ra), "\n",
            out2!(t0, a6, t1, a7), "\n",
            out2e!(a5, s2), "\n",
            out2!(t0, s4, t1, s5), "\n",
            out2e!(a4, s6), "\n",
            out2!(t0, s8, t1, s9), "\n",
            out2e!(a5, s10), "\n",
            asm_macros::p_lbu!(a0, 1(a2!)), "\n",
            asm_macros::pv_dotsp_h!(t5, t0, t3), "\n",
            asm_macros::pv_sdotsp_h!(t5, t1, t4), "\n",
            asm_macros::p_addrni!(t5, t5, zero, 16), "\n",
            "23:", "\n",
            asm_macros::p_sh!(t5, a0(a1)), "\n",
            ".if (23b - 22b) != 184", "\n",
            ".error \"pass 2: lp.setup offset does not reach the loop end\"", "\n",
            ".endif", "\n",
        )
    };
}

/// One half of the zero mask: its 8 groups of two words from the last to the first (post-decrement
/// loads from a0, the thresholds from a1, both at the half's last word) into the mask register
/// `$acc`, two groups per iteration of hardware loop 0 (4 iterations between the local labels
/// `$l0` and `$l1`, [`mask_asm`]). A group's four sign bytes, gathered into one word and shifted
/// down to bit 0 of each byte (`pv.srl.sci.b`), are added to twice the mask so far (`p.mac` with
/// a2 = 2; a byte never exceeds 255): the group taken last (group 0) ends in bit 0 of each byte,
/// group `j` in bit `j`. The two groups of an iteration swap the roles of `t0` and `$acc`, so the
/// mask needs no move.
#[rustfmt::skip]
macro_rules! mask_half {
    ($acc:ident, $l0:literal, $l1:literal) => {
        concat!(
            "li ", stringify!($acc), ", 0", "\n",
            "li t1, 4", "\n",
            $l0, ":", "\n",
            asm_macros::lp_setup!(x0, t1, 88), "\n",
            // Group 2i + 1 into t0 (word 2j + 1 of the group first: the loads go backwards).
            asm_macros::p_lw!(t5, -4(a0!)), "\n",
            asm_macros::p_lw!(t6, -4(a1!)), "\n",
            asm_macros::p_lw!(t0, -4(a0!)), "\n",
            asm_macros::p_lw!(t1, -4(a1!)), "\n",
            asm_macros::pv_abs_h!(t0, t0), "\n",
            asm_macros::pv_sub_h!(t0, t0, t1), "\n",
            asm_macros::pv_abs_h!(t5, t5), "\n",
            asm_macros::pv_sub_h!(t5, t5, t6), "\n",
            asm_macros::pv_shuffle2_b!(t0, t5, a3), "\n",
            asm_macros::pv_srl_sci_b!(t0, t0, 7), "\n",
            asm_macros::p_mac!(t0, $acc, a2), "\n",
            // Group 2i into the mask register.
            asm_macros::p_lw!(t5, -4(a0!)), "\n",
            asm_macros::p_lw!(t6, -4(a1!)), "\n",
            asm_macros::p_lw!($acc, -4(a0!)), "\n",
            asm_macros::p_lw!(t1, -4(a1!)), "\n",
            asm_macros::pv_abs_h!($acc, $acc), "\n",
            asm_macros::pv_sub_h!($acc, $acc, t1), "\n",
            asm_macros::pv_abs_h!(t5, t5), "\n",
            asm_macros::pv_sub_h!(t5, t5, t6), "\n",
            asm_macros::pv_shuffle2_b!($acc, t5, a3), "\n",
            asm_macros::pv_srl_sci_b!($acc, $acc, 7), "\n",
            $l1, ":", "\n",
            asm_macros::p_mac!($acc, t0, a2), "\n",
            ".if (", $l1, "b - ", $l0, "b) != 88", "\n",
            ".error \"zero mask: lp.setup offset\"", "\n",
            ".endif", "\n",
        )
    };
}

/// The zero mask's instructions ([`zero_mask`]; register plan there): the second half's mask in
/// `t4`, then the first's in `t3` (a0 and a1 at the last words of `f8` and of the thresholds).
macro_rules! mask_asm {
    () => {
        concat!(mask_half!(t4, "30", "31"), mask_half!(t3, "32", "33"))
    };
}

/// The block coder's instructions ([`block`]; register plan there), ending at label 99.
#[rustfmt::skip]
macro_rules! coder_asm {
    () => {
        concat!(
            "li s11, 128", "\n",
            // The non-zero flags of both words (bit j of word w: coefficient 32 w + j; the
            // DC's cleared; word 1 kept in a2).
            "not s8, a1", "\n",
            "andi s8, s8, -2", "\n",
            "not a2, a2", "\n",
            // s7 the byte reversal's selector, a1 32. The `nop` holds the code after it where it
            // was measured: without it (an unused `li` before) the five pictures of the JPEG
            // bench ran 0.1-1.6 % slower in the worst of 8 layouts.
            "nop", "\n",
            "li s7, 0x00010203", "\n",
            "li a1, 32", "\n",
            // ---- DC
            "lh t0, 0(a0)", "\n",
            "lw t1, 4(a3)", "\n",
            "lw t2, 0(a3)", "\n",
            asm_macros::p_abs!(t4, t0), "\n",
            // (|x| recip + bias) >> shift: the entry's first word's halves sum to recip, its low
            // 5 bits are the shift (`tables::QuantEntry`).
            asm_macros::pv_sdotup_sc_h!(t1, t2, t4), "\n",
            "srl t4, t1, t2", "\n",
            "srai t5, t0, 31", "\n",
            "xor t4, t4, t5", "\n",
            "sub t4, t4, t5", "\n",
            "sub t0, t4, a7", "\n",
            "mv a7, t4", "\n",
            asm_macros::p_abs!(t1, t0), "\n",
            "li t2, 0", "\n",
            "beqz t1, 40f", "\n",
            asm_macros::p_fl1!(t2, t1), "\n",
            "addi t2, t2, 1", "\n",
            "40:", "\n",
            // field = a, or its complement in t2 bits for a negative difference.
            "srai t5, t0, 31", "\n",
            "sub t3, a1, t2", "\n",
            "srl t5, t5, t3", "\n",
            "xor t5, t1, t5", "\n",
            // The entry: the code shifted by the size, the total length in bits 27..32.
            "slli t3, t2, 2", "\n",
            asm_macros::p_lw_rr!(t3, t3(a5)), "\n",
            "srli t4, t3, 27", "\n",
            asm_macros::p_extractui!(t3, t3, 26, 0), "\n",
            "or t3, t3, t5", "\n",
            "jal ra, 90f", "\n",
            // The quantiser entries' fields by register offset (k * 8) from three bases: the
            // first word (shift, at, recip - shift - 256 at) from a3, `bias` from s4, `at` from
            // s6.
            "addi s4, a3, 4", "\n",
            "addi s6, a3, 1", "\n",
            // The AC entry of (run, size) at a4 + 8 run - 68 (31 - size): a5 holds 68.
            "li a5, 68", "\n",
            // ---- AC, word 0 (the DC's bit cleared), then word 1: hardware loop 0 runs once per
            // non-zero coefficient of the word (`p.cnt`); its last instruction finds the next one,
            // so the put routine's return and the fast path both end there. Positions are
            // relative to the word and scaled by 8 (t1 = 8 k, s9 = 8 (last + 1), t6 = 8 run):
            // for word 1, a3 moves on by 32 entries and s9 back by 256.
            "li s9, 8", "\n",
            "li s10, 0", "\n",
            "50:", "\n",
            "beqz s8, 58f", "\n",
            asm_macros::p_cnt!(t1, s8), "\n",
            asm_macros::p_ff1!(t0, s8), "\n",
            asm_macros::lp_setup!(x0, t1, 104), "\n",
            asm_macros::p_bclr!(s8, s8, t0), "\n",
            "slli t1, t0, 3", "\n",
            "sub t6, t1, s9", "\n",
            "addi s9, t1, 8", "\n",
            "bgeu t6, s11, 70f", "\n",
            // The coefficient at its slot (the entry's byte 1), quantised: (|x| recip + bias)
            // >> shift, the multiply one `pv.sdotup.sc.h` of |x| with the entry's first word
            // (its halves sum to recip) and the shift by that word (its low 5 bits).
            "52:", "\n",
            asm_macros::p_lbu!(t2, t1(s6)), "\n",
            asm_macros::p_lw_rr!(t3, t1(s4)), "\n",
            asm_macros::p_lh_rr!(t2, t2(a0)), "\n",
            asm_macros::p_lw_rr!(t4, t1(a3)), "\n",
            asm_macros::p_abs!(t0, t2), "\n",
            asm_macros::pv_sdotup_sc_h!(t3, t4, t0), "\n",
            "srli t2, t2, 1", "\n",
            "srl t0, t3, t4", "\n",
            // clb(q) = 31 - size; the entry of (run, size) at a4 + 8 run - 68 (31 - size)
            // (`tables::ac_index`: one p.msu); the field: q, or its complement in size bits for
            // a negative coefficient (the coefficient shifted right by 1, bits 14..31 =
            // 0x1FFFF << 14 when negative and below 2^14 otherwise, shifted right by
            // 31 - size >= 21). The multiply's and the load's results are used two instructions
            // later.
            asm_macros::p_clb!(t1, t0), "\n",
            asm_macros::p_msu!(t6, t1, a5), "\n",
            "srl t2, t2, t1", "\n",
            asm_macros::p_lw_rr!(t3, t6(a4)), "\n",
            "xor t2, t0, t2", "\n",
            "srli t4, t3, 27", "\n",
            asm_macros::p_extractui!(t3, t3, 26, 0), "\n",
            "or t3, t3, t2", "\n",
            "bgeu t4, s3, 56f", "\n",
            "sll s2, s2, t4", "\n",
            "or s2, s2, t3", "\n",
            "sub s3, s3, t4", "\n",
            // The loop's last instruction, 26 after the lp.setup (the branches out of the loop
            // keep the assembler from checking the distance here; `cargo xtask pulp-disasm`
            // does, on the built kernel).
            "55:", "\n",
            asm_macros::p_ff1!(t0, s8), "\n",
            "58:", "\n",
            "bnez s10, 60f", "\n",
            "li s10, 1", "\n",
            "addi a3, a3, 256", "\n",
            "addi s4, s4, 256", "\n",
            "addi s6, s6, 256", "\n",
            "addi s9, s9, -256", "\n",
            "mv s8, a2", "\n",
            "j 50b", "\n",
            // A full word to emit (the put routine's work, inline), back to the loop's last
            // instruction.
            "56:", "\n",
            "sub t1, t4, s3", "\n",
            "sll t2, s2, s3", "\n",
            "srl t5, t3, t1", "\n",
            "or t2, t2, t5", "\n",
            "mv s2, t3", "\n",
            "sub s3, a1, t1", "\n",
            asm_macros::pv_cmpeq_sci_b!(t1, t2, -1), "\n",
            "bnez t1, 57f", "\n",
            asm_macros::pv_shuffle_b!(t2, t2, s7), "\n",
            asm_macros::p_sw!(t2, 4(a6!)), "\n",
            "j 55b", "\n",
            "57:", "\n",
            "jal ra, 93f", "\n",
            "j 55b", "\n",
            // ---- EOB unless coefficient 63 was the last coded (s9, relative to word 1, is 256).
            "60:", "\n",
            "li t0, 256", "\n",
            "beq s9, t0, 99f", "\n",
            "lw t3, {eob}(a4)", "\n",
            "srli t4, t3, 27", "\n",
            asm_macros::p_extractui!(t3, t3, 26, 0), "\n",
            "jal ra, 90f", "\n",
            "j 99f", "\n",
            // ---- ZRL for every 16 zeros of a run (t0: k and t6: 8 run kept), back into the loop
            // (t1 = 8 k again: the put routine clobbers it).
            "70:", "\n",
            "lw t3, {zrl}(a4)", "\n",
            "srli t4, t3, 27", "\n",
            asm_macros::p_extractui!(t3, t3, 26, 0), "\n",
            "jal ra, 90f", "\n",
            "addi t6, t6, -128", "\n",
            "bgeu t6, s11, 70b", "\n",
            "slli t1, t0, 3", "\n",
            "j 52b", "\n",
            // ---- put(t3 = code, t4 = length), return through t6.
            "90:", "\n",
            "bltu t4, s3, 91f", "\n",
            "sub t1, t4, s3", "\n",
            "sll t2, s2, s3", "\n",
            "srl t5, t3, t1", "\n",
            "or t2, t2, t5", "\n",
            "mv s2, t3", "\n",
            "sub s3, a1, t1", "\n",
            // Does the word hold a 0xFF byte? If not, its bytes reversed in one store
            // (big-endian; the output need not be word-aligned: RI5CY splits a misaligned
            // store).
            asm_macros::pv_cmpeq_sci_b!(t1, t2, -1), "\n",
            "bnez t1, 93f", "\n",
            asm_macros::pv_shuffle_b!(t2, t2, s7), "\n",
            asm_macros::p_sw!(t2, 4(a6!)), "\n",
            "jr ra", "\n",
            "91:", "\n",
            "sll s2, s2, t4", "\n",
            "or s2, s2, t3", "\n",
            "sub s3, s3, t4", "\n",
            "jr ra", "\n",
            // Byte by byte, a 0x00 after each 0xFF.
            "93:", "\n",
            "li t4, 24", "\n",
            "94:", "\n",
            "srl t5, t2, t4", "\n",
            "andi t5, t5, 255", "\n",
            "sb t5, 0(a6)", "\n",
            "addi a6, a6, 1", "\n",
            "li t1, 255", "\n",
            "bne t5, t1, 95f", "\n",
            "sb zero, 0(a6)", "\n",
            "addi a6, a6, 1", "\n",
            "95:", "\n",
            "addi t4, t4, -8", "\n",
            "bgez t4, 94b", "\n",
            "jr ra", "\n",
            "99:", "\n",
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
    fn code_run(
        strip: &[u8],
        ctx: &DctCtx,
        from: usize,
        to: usize,
        t: &Tables,
        dc_pred: &mut i32,
        bits: &mut Bits,
        out: &mut Out<'_>,
        w: &mut Work,
        limit: usize,
    ) -> usize {
        let stride = ctx.stride;
        // The assembly: word loads of every block's rows inside the strip, and room for a
        // block at its worst whenever it starts one (`out.pos <= limit`). Otherwise nothing is
        // coded (the cluster encoder's strips and chunks always qualify, and it fails the frame
        // with `Error::Config` if one did not): no second, bounds-checked copy of the kernels in
        // the program, which the firmware's L2 has no room for.
        let fits = from < to
            && out.pos <= limit
            && !out.full
            && limit.saturating_add(MAX_BLOCK_BYTES) <= out.buf.len()
            && stride % 4 == 0
            && strip.as_ptr() as usize % 4 == 0
            && strip.len() >= 8 * (to - 1) + 7 * stride + 8;
        if !fits {
            return from;
        }
        let base = out.buf.as_mut_ptr();
        let mut st = RunState {
            src: strip[8 * from..].as_ptr(),
            left: (to - from) as u32,
            limit: out.buf[limit..].as_ptr(),
            t,
            w,
            offs: ctx.offs.as_ptr(),
            pred: *dc_pred,
            acc: bits.acc,
            free: bits.free,
            out: out.buf[out.pos..].as_mut_ptr(),
        };
        run(&mut st);
        *dc_pred = st.pred;
        bits.acc = st.acc;
        bits.free = st.free;
        out.pos = st.out as usize - base as usize;
        to - st.left as usize
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

const _: () = assert!(ROW_ORDER[0] == 0 && ROW_ORDER[7] == 6);

/// The block at `src` (rows at `src + ctx.offs[k]`, word-aligned, all inside the caller's slice)
/// into `w.f8`, zig-zag order.
#[rustfmt::skip]
#[inline(never)]
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
            dct_asm!(),
            ".option pop",
            inout("x10") src => _,
            inout("x11") w as *mut Work => _,
            inout("x12") ctx.pairs.as_ptr() => _,
            inout("x13") ctx.offs.as_ptr() => _,
            inout("x14") 0x00ff_00ffu32 => _,
            inout("x15") LEVEL_SHIFT => _,
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
    // `align(4)`, `thr` a `[u32; 32]`) with post-decrement loads from their last words (the
    // pointers end one word before them, unused) and writes only the registers declared below;
    // hardware loop 0 runs its 22-instruction body 4 times, twice.
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            mask_asm!(),
            ".option pop",
            inout("x10") f8.as_ptr().wrapping_add(62) => _,
            inout("x11") thr.as_ptr().wrapping_add(31) => _,
            in("x12") 2u32,
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

/// What [`run`] reads and updates: its loop keeps these in memory, since the kernels use every
/// register (`repr(C)`: the assembly copies them to its stack frame at the offsets below).
#[repr(C)]
struct RunState<'a> {
    /// The next block's first pixel (+0).
    src: *const u8,
    /// Blocks left to code (+4).
    left: u32,
    /// The run stops before a block once the output is past this (+8).
    limit: *const u8,
    /// The tables (+12).
    t: &'a Tables,
    /// The DCT's output and scratch (+16).
    w: &'a mut Work,
    /// `ctx.offs`, the zig-zag store offsets' pointer right after them (+20).
    offs: *const u32,
    /// DC predictor, bit accumulator, free bits (+24, +28, +32).
    pred: i32,
    acc: u32,
    free: u32,
    /// The output (+36).
    out: *mut u8,
}

const _: () =
    assert!(core::mem::offset_of!(RunState, out) == 36 && core::mem::size_of::<RunState>() == 40);
const _: () = assert!(core::mem::offset_of!(Tables, quant) == 0);
/// Offsets in [`Tables`] the run loop adds to its pointer (each a 12-bit immediate).
const T_THR: usize = core::mem::offset_of!(Tables, thr);
const T_DCT: usize = core::mem::offset_of!(Tables, dct);
const T_DC: usize = core::mem::offset_of!(Tables, dc);
const T_AC: usize = core::mem::offset_of!(Tables, ac) + AC_BASE;
const _: () = assert!(T_THR < 2048 && T_DCT < 2048 && T_DC < 2048);

/// [`Kernel::code_run`]: `st.left` blocks from `st.src` (8 bytes apart), each through the DCT
/// kernel ([`kernel`]), the zero mask ([`zero_mask`]) and the block coder ([`block`]), the same
/// instructions in one loop: no call, no register saves, no Rust in between; stops early once
/// the output is past `st.limit` (checked after each block). Updates `st`.
#[rustfmt::skip]
#[inline(never)]
#[unsafe(link_section = ".text.hot.4.jpeg.0.run")]
fn run(st: &mut RunState<'_>) {
    // SAFETY: `Pulp::code_run` checked what the three kernels need for each of the
    // `st.left` blocks (see their SAFETY comments): the rows of block `b` (8 bytes at
    // `st.src + 8 b + ctx.offs[k]`) lie in the strip and are word-aligned, the tables and `*w`
    // are as in `kernel`, `zero_mask` and `block`, and every block starts with at least
    // `MAX_BLOCK_BYTES` of room after `st.out` (`st.out <= st.limit`, `limit + MAX_BLOCK_BYTES`
    // within the output). The asm keeps its state in a 48-byte frame below `sp` (restored before
    // it ends), reads and writes the 40 bytes of `*st`, and writes only the registers declared
    // below. Hardware loop 0 is overwritten (never called from inside a hardware loop).
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            "addi sp, sp, -48",
            "lw t0, 0(a0)", "sw t0, 0(sp)",
            "lw t0, 4(a0)", "sw t0, 4(sp)",
            "lw t0, 8(a0)", "sw t0, 8(sp)",
            "lw t0, 12(a0)", "sw t0, 12(sp)",
            "lw t0, 16(a0)", "sw t0, 16(sp)",
            "lw t0, 20(a0)", "sw t0, 20(sp)",
            "lw t0, 24(a0)", "sw t0, 24(sp)",
            "lw t0, 28(a0)", "sw t0, 28(sp)",
            "lw t0, 32(a0)", "sw t0, 32(sp)",
            "lw t0, 36(a0)", "sw t0, 36(sp)",
            "sw a0, 40(sp)",
            "100:",
            // The DCT: a0 the block, a1 the work area, a2 the pairs, a3 the row offsets.
            "lw a2, 12(sp)",
            "lw a0, 0(sp)",
            "lw a1, 16(sp)",
            "lw a3, 20(sp)",
            "addi a2, a2, {t_dct}",
            "li a4, 0x00ff00ff",
            "li a5, {level_shift}",
            dct_asm!(),
            // The zero mask of f8 (a1 is the work area again) into t3 t4.
            // (a0 and a1 at the last words of f8 and of the thresholds: the loads go backwards).
            "addi a0, a1, 124",
            "lw a1, 12(sp)",
            "li a2, 2",
            "li a3, 0x07050301",
            "addi a1, a1, {t_thr} + 124",
            mask_asm!(),
            // The block coder.
            "lw a0, 16(sp)",
            "mv a1, t3",
            "mv a2, t4",
            "lw a3, 12(sp)",
            "li a4, {t_ac}",
            "add a4, a4, a3",
            "addi a5, a3, {t_dc}",
            "lw a6, 36(sp)",
            "lw a7, 24(sp)",
            "lw s2, 28(sp)",
            "lw s3, 32(sp)",
            coder_asm!(),
            "sw a6, 36(sp)",
            "sw a7, 24(sp)",
            "sw s2, 28(sp)",
            "sw s3, 32(sp)",
            "lw t0, 0(sp)",
            "lw t1, 4(sp)",
            "lw t2, 8(sp)",
            "addi t0, t0, 8",
            "addi t1, t1, -1",
            "sw t0, 0(sp)",
            "sw t1, 4(sp)",
            // The next block while the output is not past the limit.
            "beqz t1, 101f",
            "bgeu t2, a6, 100b",
            "101:",
            "lw a0, 40(sp)",
            "sw t1, 4(a0)",
            "sw a7, 24(a0)",
            "sw s2, 28(a0)",
            "sw s3, 32(a0)",
            "sw a6, 36(a0)",
            "addi sp, sp, 48",
            ".option pop",
            inout("x10") st as *mut RunState<'_> => _,
            out("x1") _, out("x5") _, out("x6") _, out("x7") _,
            out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _,
            out("x16") _, out("x17") _,
            out("x18") _, out("x19") _, out("x20") _, out("x21") _, out("x22") _,
            out("x23") _, out("x24") _, out("x25") _, out("x26") _, out("x27") _,
            out("x28") _, out("x29") _, out("x30") _, out("x31") _,
            t_dct = const T_DCT,
            t_thr = const T_THR,
            t_dc = const T_DC,
            t_ac = const T_AC,
            level_shift = const LEVEL_SHIFT,
            eob = const EOB_AT,
            zrl = const ZRL_AT,
        );
    }
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
/// entries + 4 (`bias`) and + 1 (`at`) in s4 s6 for the AC loop's register-offset loads, the first
/// word from a3 itself, the byte reversal's selector `0x00010203` in s7, 32 in a1, the zig-zag position t0
/// and, scaled by 8, `8 k` t1 and `8 (last + 1)` s9 (relative to the current word), word-1 flag
/// s10, 128 s11 (16 zeros, scaled); `8 run` t6.
/// The AC scan of a word is hardware loop 0, one iteration per non-zero coefficient. The put
/// routine (label 90, link ra)
/// takes the code in t3 and its length in t4 and clobbers t1 t2 t5.
#[rustfmt::skip]
#[inline(never)]
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
            coder_asm!(),
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
