//! The PULP (RI5CY, GAP8 "Xpulpv2") assembly kernel: `p.ror`, hardware loops, post-increment
//! loads and stores, encoded by `asm_macros`. QEMU cannot execute it; GVSOC and the GAP8 can.
//!
//! Register plan:
//!
//! | state x0-x7 | x8-x15 | ror 16 / 20 / 24 / 25 | ctx | in | out | counter | temps | init x1, x2 |
//! |---|---|---|---|---|---|---|---|---|
//! | a0-a7 | s2-s9 | s10 / s11 / t3 / t4 | t5 | t6 | ra | t0 | t1 (first: block count), t2 | s0, s1 |
//!
//! (`s0`/`s1` cannot be `asm!` operands — frame and base pointer to LLVM — so the kernel saves
//! them on the stack and restores them before it ends.)
//!
//! Layout (`.option norvc`: every instruction 4 bytes; hardware-loop bodies hold no compressed
//! instruction and start word-aligned, as RI5CY requires):
//!
//! ```text
//!      save s0 s1, li ×4, lw s0 s1   rotate amounts (rotl 16/12/8/7 = ror 16/20/24/25), init x1 x2
//!   0: lp.starti x0, +296         inner loop start = 3:
//!   1: lp.endi   x0, +672         inner loop end   = last instruction before 4:
//!   2: lp.setup  x1, t1, +980     outer loop: t1 blocks, body 3: .. last instruction before 5:
//!      15 loads                   x4 x8, the 12 column-round words, ctx.diag (x0+x4, x1+x6, x2+x7, x13')
//!      11 + 44                    column-0 quarter-round, diagonal round (less what ctx.diag holds)
//!      lp.counti x0, 9
//!   3: 96                         double round            × 9 (hardware loop 0)
//!   4: 77                         feed-forward, p.lw input, xor, p.sw output
//!      addi t0, t0, 1             counter                 (end of hardware loop 1)
//!   5: restore s0 s1
//! ```
//!
//! Of the first double round only what depends on the block counter is computed per block: the
//! column round of columns 1-3, the first step of column 0's quarter-round, and the first one to
//! three steps of two diagonal quarter-rounds come from the per-message context (`ctx.rs`).
//! 1013 instructions per block, no branch, no load whose result is used by the next instruction:
//! 15.83 cycles per byte on an RI5CY core with data in L1. The `.if` lines make the assembler
//! check the three hardware-loop offsets against the labels.
use super::ctx::{Ctx, run_aligned};
use super::{Backend, ChaChaBlock, sealed};
use asm_macros::{lp_counti, lp_endi, lp_setup, lp_starti, p_lw, p_ror, p_sw};
use cipher::inout::InOutBuf;
use core::arch::asm;

/// One quarter-round, 12 instructions.
#[rustfmt::skip]
macro_rules! qr {
    ($a:ident, $b:ident, $c:ident, $d:ident) => {
        concat!(
            "add ", stringify!($a), ", ", stringify!($a), ", ", stringify!($b), "\n",
            qr_from_xor!($a, $b, $c, $d),
        )
    };
}

/// A quarter-round without its first step (`a += b`, precomputed), 11 instructions.
#[rustfmt::skip]
macro_rules! qr_from_xor {
    ($a:ident, $b:ident, $c:ident, $d:ident) => {
        concat!(
            "xor ", stringify!($d), ", ", stringify!($d), ", ", stringify!($a), "\n",
            p_ror!($d, $d, s10), "\n",
            qr_from_c!($a, $b, $c, $d),
        )
    };
}

/// A quarter-round from its fourth step on (`a += b; d ^= a; d <<<= 16` precomputed), 9
/// instructions.
#[rustfmt::skip]
macro_rules! qr_from_c {
    ($a:ident, $b:ident, $c:ident, $d:ident) => {
        concat!(
            "add ", stringify!($c), ", ", stringify!($c), ", ", stringify!($d), "\n",
            "xor ", stringify!($b), ", ", stringify!($b), ", ", stringify!($c), "\n",
            p_ror!($b, $b, s11), "\n",
            "add ", stringify!($a), ", ", stringify!($a), ", ", stringify!($b), "\n",
            "xor ", stringify!($d), ", ", stringify!($d), ", ", stringify!($a), "\n",
            p_ror!($d, $d, t3), "\n",
            "add ", stringify!($c), ", ", stringify!($c), ", ", stringify!($d), "\n",
            "xor ", stringify!($b), ", ", stringify!($b), ", ", stringify!($c), "\n",
            p_ror!($b, $b, t4), "\n",
        )
    };
}

/// Feed-forward for state word `$s` whose input word is held in register `$i`, XOR with the next
/// input word, store to the next output word; 4 instructions.
#[rustfmt::skip]
macro_rules! ff_reg {
    ($s:ident, $i:ident) => {
        concat!(
            p_lw!(t2, 4(t6!)), "\n",
            "add ", stringify!($s), ", ", stringify!($s), ", ", stringify!($i), "\n",
            "xor ", stringify!($s), ", ", stringify!($s), ", t2\n",
            p_sw!($s, 4(ra!)), "\n",
        )
    };
}

/// Feed-forward for state word `$s` (byte offset `$off` in ctx.init), XOR with the next input
/// word, store to the next output word; 5 instructions.
#[rustfmt::skip]
macro_rules! ff {
    ($s:ident, $off:literal) => {
        concat!(
            "lw t1, ", $off, "(t5)\n",
            p_lw!(t2, 4(t6!)), "\n",
            "add ", stringify!($s), ", ", stringify!($s), ", t1\n",
            "xor ", stringify!($s), ", ", stringify!($s), ", t2\n",
            p_sw!($s, 4(ra!)), "\n",
        )
    };
}

/// XORs `n` ChaCha20 blocks (counters `counter..counter + n`) from `input` into `output`.
///
/// # Safety
/// `input` / `output` are valid for reads / writes of `64 * n` bytes, 4-byte aligned, and either
/// equal or non-overlapping; `n >= 1` (hardware loops run their body at least once). Must run on
/// an RI5CY core with Xpulpv2 (GAP8): other RV32 cores trap. Hardware loops 0 and 1 are
/// overwritten, so it must not be called from inside a hardware loop.
#[rustfmt::skip]
#[inline(never)]
// Runs every round of the cluster engine: linked with its hot code (GAP8's 4 KiB instruction
// cache), next to `engine::ChaCha20Worker::apply_at`.
#[unsafe(link_section = ".text.hot.1.chacha")]
unsafe fn blocks(ctx: &Ctx, counter: u32, input: *const u8, output: *mut u8, n: usize) {
    // SAFETY: the asm reads the 128-byte `ctx` (valid: a reference) and `64 * n` bytes at
    // `input`, writes `64 * n` bytes at `output`, all word-aligned (caller contract). It uses the
    // registers declared below, and s0/s1, which it saves in 16 bytes of stack it allocates and
    // restores before the end; the block loop runs exactly `n >= 1` times.
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            ".balign 4",
            "addi sp, sp, -16", "sw s0, 8(sp)", "sw s1, 12(sp)",
            "li s10, 16", "li s11, 20", "li t3, 24", "li t4, 25",
            "lw s0, 4(t5)", "lw s1, 8(t5)",
            "0:", lp_starti!(x0, 296),
            "1:", lp_endi!(x0, 672),
            "2:", lp_setup!(x1, t1, 980),
            "lw a4, 16(t5)", "lw a0, 112(t5)", "lw s2, 32(t5)",
            "lw a1, 116(t5)", "lw a5, 68(t5)", "lw s3, 72(t5)", "lw s7, 124(t5)",
            "lw a2, 120(t5)", "lw a6, 84(t5)", "lw s4, 88(t5)", "lw s8, 92(t5)",
            "lw a3, 96(t5)", "lw a7, 100(t5)", "lw s5, 104(t5)", "lw s9, 108(t5)",
            // Column 0 (x0 + x4 came precomputed; x12 is the counter), then the diagonals
            // ((1,6,11,12) from its second step, (2,7,8,13) from its fourth).
            "xor s6, t0, a0",
            p_ror!(s6, s6, s10),
            qr_from_c!(a0, a4, s2, s6),
            qr!(a0, a5, s4, s9), qr_from_xor!(a1, a6, s5, s6), qr_from_c!(a2, a7, s2, s7), qr!(a3, a4, s3, s8),
            lp_counti!(x0, 9),
            "3:",
            qr!(a0, a4, s2, s6), qr!(a1, a5, s3, s7), qr!(a2, a6, s4, s8), qr!(a3, a7, s5, s9),
            qr!(a0, a5, s4, s9), qr!(a1, a6, s5, s6), qr!(a2, a7, s2, s7), qr!(a3, a4, s3, s8),
            "4:",
            ff!(a0, 0), ff_reg!(a1, s0), ff_reg!(a2, s1), ff!(a3, 12),
            ff!(a4, 16), ff!(a5, 20), ff!(a6, 24), ff!(a7, 28),
            ff!(s2, 32), ff!(s3, 36), ff!(s4, 40), ff!(s5, 44),
            // Word 12: the counter is its own input word.
            p_lw!(t2, 4(t6!)), "add s6, s6, t0", "xor s6, s6, t2", p_sw!(s6, 4(ra!)),
            ff!(s7, 52), ff!(s8, 56), ff!(s9, 60),
            "addi t0, t0, 1",
            "5:",
            "lw s0, 8(sp)", "lw s1, 12(sp)", "addi sp, sp, 16",
            ".if (3b - 0b) != 296", ".error \"lp.starti x0 offset does not reach the inner loop\"", ".endif",
            ".if (4b - 4 - 1b) != 672", ".error \"lp.endi x0 offset does not reach the inner loop end\"", ".endif",
            ".if (5b - 4 - 2b) != 980", ".error \"lp.setup x1 offset does not reach the outer loop end\"", ".endif",
            ".option pop",
            in("x30") ctx as *const Ctx,
            inout("x31") input => _,
            inout("x1") output => _,
            inout("x5") counter => _,
            inout("x6") n => _,
            out("x7") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _,
            out("x15") _, out("x16") _, out("x17") _, out("x18") _, out("x19") _, out("x20") _,
            out("x21") _, out("x22") _, out("x23") _, out("x24") _, out("x25") _, out("x26") _,
            out("x27") _, out("x28") _, out("x29") _,
        );
    }
}

/// The PULP assembly kernel as a [`Backend`].
#[derive(Clone)]
pub struct PulpAsm(Ctx);

impl sealed::Sealed for PulpAsm {}

impl Backend for PulpAsm {
    #[inline(always)]
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        PulpAsm(Ctx::new(key, nonce))
    }

    fn apply_blocks(&mut self, counter: u32, data: InOutBuf<'_, '_, ChaChaBlock>) {
        let ctx = &self.0;
        run_aligned(counter, data, |ctr, i, o, n| {
            // SAFETY: `run_aligned` passes word-aligned pointers valid for `64 * n >= 64` bytes,
            // equal or non-overlapping (InOutBuf's guarantee, or its own bounce buffer).
            unsafe { blocks(ctx, ctr, i, o, n) }
        });
    }
}

// Every encoder form once, at a known symbol, so `cargo xtask pulp-disasm` can compare the words
// LLVM assembled from the macro expansions with the golden words (see asm_macros/tests). Never
// executed; in its own section, so `--gc-sections` drops it from programs.
#[rustfmt::skip]
core::arch::global_asm!(
    ".pushsection .text.gap_pulp_encoding_table,\"ax\",@progbits",
    ".option push",
    ".option norvc",
    ".balign 4",
    ".globl gap_pulp_encoding_table",
    "gap_pulp_encoding_table:",
    p_ror!(a0, a0, a1), p_ror!(x31, x31, x31), p_ror!(zero, t6, ra),
    p_lw!(a2, 4(a3!)), p_lw!(x31, 2047(x31!)), p_lw!(ra, -2048(zero!)), p_lw!(t0, -4(sp!)),
    p_lw!(a0, a1(a2!)), p_lw!(x31, x31(x31!)), p_lw!(x1, x0(x31!)),
    p_sw!(a2, 4(a3!)), p_sw!(x31, 2047(x31!)), p_sw!(zero, -2048(ra!)),
    p_sw!(a0, a1(a2!)), p_sw!(x31, x31(x31!)), p_sw!(x0, x31(x1!)),
    asm_macros::lp_starti!(x0, 0), asm_macros::lp_starti!(1, 8), asm_macros::lp_starti!(x0, 8190),
    asm_macros::lp_endi!(x0, 0), asm_macros::lp_endi!(x1, 384), asm_macros::lp_endi!(0, 8190),
    asm_macros::lp_count!(x0, zero), asm_macros::lp_count!(x1, a0), asm_macros::lp_count!(x0, x31),
    asm_macros::lp_counti!(x0, 9), asm_macros::lp_counti!(x1, 1), asm_macros::lp_counti!(x0, 4095),
    asm_macros::lp_setup!(x1, t1, 8), asm_macros::lp_setup!(x0, a1, 384), asm_macros::lp_setup!(x0, x31, 8190),
    asm_macros::lp_setupi!(x0, 10, 16), asm_macros::lp_setupi!(x1, 4095, 62), asm_macros::lp_setupi!(0, 1, 8),
    p_lw!(t0, 4(t6!)), p_lw!(t2, 4(t6!)), p_lw!(t3, 4(t6!)), p_lw!(t4, 4(t6!)),
    asm_macros::lp_setup!(x0, t1, 544),
    ".size gap_pulp_encoding_table, . - gap_pulp_encoding_table",
    ".option pop",
    ".popsection",
);
