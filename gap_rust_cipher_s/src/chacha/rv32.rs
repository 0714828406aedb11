//! The RV32IMC assembly kernel (no PULP instruction: runs on QEMU and on any RV32IMC core).
//!
//! Register plan (fixed registers, so the template reads like plain assembly):
//!
//! | state x0-x7 | x8-x15 | ctx | in | out | counter | input end | round count | rotate temp | feed-forward temps |
//! |---|---|---|---|---|---|---|---|---|---|
//! | a0-a7 | s2-s9 | t5 | t6 | ra | t0 | t1 | t2 | t3 | s10, s11 |
//!
//! Per block: 16 loads (x0/x4/x8, the 12 precomputed words) and `mv x12, counter`; the column-0
//! quarter-round and a diagonal round (100); 9 double rounds in a loop (9 × 162); feed-forward,
//! XOR and store of 16 words (79); 4 for pointers, counter and the block loop: ≈ 1658
//! instructions, 25.9 per byte. No instruction uses the result of the load right before it.
use super::ctx::{Ctx, run_aligned};
use super::{Backend, ChaChaBlock, sealed};
use cipher::inout::InOutBuf;
use core::arch::asm;

/// One quarter-round, 20 instructions (rotate-left n = slli n / srli 32-n / or).
#[rustfmt::skip]
macro_rules! qr {
    ($a:ident, $b:ident, $c:ident, $d:ident) => {
        concat!(
            "add ", stringify!($a), ", ", stringify!($a), ", ", stringify!($b), "\n",
            "xor ", stringify!($d), ", ", stringify!($d), ", ", stringify!($a), "\n",
            "slli t3, ", stringify!($d), ", 16\n",
            "srli ", stringify!($d), ", ", stringify!($d), ", 16\n",
            "or ", stringify!($d), ", ", stringify!($d), ", t3\n",
            "add ", stringify!($c), ", ", stringify!($c), ", ", stringify!($d), "\n",
            "xor ", stringify!($b), ", ", stringify!($b), ", ", stringify!($c), "\n",
            "slli t3, ", stringify!($b), ", 12\n",
            "srli ", stringify!($b), ", ", stringify!($b), ", 20\n",
            "or ", stringify!($b), ", ", stringify!($b), ", t3\n",
            "add ", stringify!($a), ", ", stringify!($a), ", ", stringify!($b), "\n",
            "xor ", stringify!($d), ", ", stringify!($d), ", ", stringify!($a), "\n",
            "slli t3, ", stringify!($d), ", 8\n",
            "srli ", stringify!($d), ", ", stringify!($d), ", 24\n",
            "or ", stringify!($d), ", ", stringify!($d), ", t3\n",
            "add ", stringify!($c), ", ", stringify!($c), ", ", stringify!($d), "\n",
            "xor ", stringify!($b), ", ", stringify!($b), ", ", stringify!($c), "\n",
            "slli t3, ", stringify!($b), ", 7\n",
            "srli ", stringify!($b), ", ", stringify!($b), ", 25\n",
            "or ", stringify!($b), ", ", stringify!($b), ", t3\n",
        )
    };
}

/// Feed-forward, XOR with the input word and store, for state word `$s` at byte offset `$off`.
#[rustfmt::skip]
macro_rules! ff {
    ($s:ident, $off:literal) => {
        concat!(
            "lw s10, ", $off, "(t5)\n",
            "lw s11, ", $off, "(t6)\n",
            "add ", stringify!($s), ", ", stringify!($s), ", s10\n",
            "xor ", stringify!($s), ", ", stringify!($s), ", s11\n",
            "sw ", stringify!($s), ", ", $off, "(ra)\n",
        )
    };
}

/// XORs `n` ChaCha20 blocks (counters `counter..counter + n`) from `input` into `output`.
///
/// # Safety
/// `input` / `output` are valid for reads / writes of `64 * n` bytes, 4-byte aligned, and either
/// equal or non-overlapping; `n >= 1`.
#[rustfmt::skip]
#[inline(never)]
unsafe fn blocks(ctx: &Ctx, counter: u32, input: *const u8, output: *mut u8, n: usize) {
    let end = input.wrapping_add(64 * n);
    // SAFETY: the asm reads the first 112 bytes of `ctx` (valid: a reference) and `64 * n` bytes at
    // `input`, writes `64 * n` bytes at `output`, all word-aligned (caller contract). It uses only
    // the registers declared below and no stack; `n >= 1` so the `bne` loop ends exactly at `end`.
    unsafe {
        asm!(
            "1:",
            "lw a4, 16(t5)", "lw a0, 0(t5)", "lw s2, 32(t5)",
            "lw a1, 64(t5)", "lw a5, 68(t5)", "lw s3, 72(t5)", "lw s7, 76(t5)",
            "lw a2, 80(t5)", "lw a6, 84(t5)", "lw s4, 88(t5)", "lw s8, 92(t5)",
            "lw a3, 96(t5)", "lw a7, 100(t5)", "lw s5, 104(t5)", "lw s9, 108(t5)",
            "mv s6, t0",
            // First double round: column 0 here, columns 1-3 came precomputed; then the diagonals.
            qr!(a0, a4, s2, s6),
            qr!(a0, a5, s4, s9), qr!(a1, a6, s5, s6), qr!(a2, a7, s2, s7), qr!(a3, a4, s3, s8),
            "li t2, 9",
            "2:",
            qr!(a0, a4, s2, s6), qr!(a1, a5, s3, s7), qr!(a2, a6, s4, s8), qr!(a3, a7, s5, s9),
            qr!(a0, a5, s4, s9), qr!(a1, a6, s5, s6), qr!(a2, a7, s2, s7), qr!(a3, a4, s3, s8),
            "addi t2, t2, -1",
            "bnez t2, 2b",
            ff!(a0, 0), ff!(a1, 4), ff!(a2, 8), ff!(a3, 12),
            ff!(a4, 16), ff!(a5, 20), ff!(a6, 24), ff!(a7, 28),
            ff!(s2, 32), ff!(s3, 36), ff!(s4, 40), ff!(s5, 44),
            // Word 12: the counter is its own input word.
            "lw s11, 48(t6)", "add s6, s6, t0", "xor s6, s6, s11", "sw s6, 48(ra)",
            ff!(s7, 52), ff!(s8, 56), ff!(s9, 60),
            "addi t6, t6, 64",
            "addi ra, ra, 64",
            "addi t0, t0, 1",
            "bne t6, t1, 1b",
            in("x30") ctx as *const Ctx,
            inout("x31") input => _,
            inout("x1") output => _,
            inout("x5") counter => _,
            inout("x6") end => _,
            out("x7") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _,
            out("x15") _, out("x16") _, out("x17") _, out("x18") _, out("x19") _, out("x20") _,
            out("x21") _, out("x22") _, out("x23") _, out("x24") _, out("x25") _, out("x26") _,
            out("x27") _, out("x28") _,
            options(nostack),
        );
    }
}

/// The RV32IMC assembly kernel as a [`Backend`].
#[derive(Clone)]
pub struct Rv32Asm(Ctx);

impl sealed::Sealed for Rv32Asm {}

impl Backend for Rv32Asm {
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        Rv32Asm(Ctx::new(key, nonce))
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
