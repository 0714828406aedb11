//! The PULP line coder (feature `pulp`, riscv32 targets: RI5CY / GAP8 only): the regular mode in
//! RI5CY assembly with a hardware loop over the line, post-increment byte loads, register-register
//! table loads, `p.mac` / `p.msu`, `p.fl1`, `p.min` / `p.max`, `p.clip*`, `p.extbs`, the context
//! and the bit writer in registers, two samples a pass. Its arithmetic is [`crate::pulp_model`]'s, instruction for
//! formula (the module docs there say how it differs from [`crate::line`] and why the stream is
//! the same). The run mode is assembly too ([`crate::pulp_model::run_mode`]'s arithmetic: the
//! run, its length, the interruption sample with its run context), after which the loop starts
//! again at the next sample, and so are codes longer than 16 bits (out of line, back into the
//! loop); the kernel returns only at the line's end and when the buffer is full (then the driver,
//! [`encode_line_with`], spills it and enters the kernel again). The words come from `asm_macros` (golden-word tests); the stream is
//! checked on the GAP8 model: `make gvsoc-bench` compares every PULP run's output with the host
//! encoder's.
//!
//! Register plan of the kernel (two samples a hardware-loop pass, A and B, whose registers
//! swap roles so that no sample ends with moves):
//!
//! | | Ra | Rb | Rc, then Rd | Q2 (6·Q) | X | Q1 | k |
//! |---|---|---|---|---|---|---|---|
//! | A | a7 | s2 | t0 | s4 | t1 | t2 | s3 |
//! | B | t1 | t0 | s2 | t2 | a7 | s4 | t2 |
//!
//! Line pointers cur / prev a0 / a1, the Q table and the contexts a2 / a3, the bit writer
//! (acc, −used, out) a4 / a5 / a6, the constants 9, 16, −15, 2 and RESET in s5–s9 (the flushes
//! test for 0xFF with `p.beqimm` on sign-extended bytes, so no register holds 255). Per sample:
//! t4 = the context's address, t5 = A, t6 = N, s10 = D, s11 = C, t3, s0, s1 and ra
//! temporaries. The stack frame holds s0, s1 (not `asm!` operands), the state pointer, the
//! buffer limit and the line's end (for the run mode).
//!
//! ```text
//!      entry: state into registers, constants; passes = (count + 1) / 2, Ra Rb Rc Q2 from the
//!             line in A's registers (even count) or B's (odd count: the first pass enters at B)
//!      lp.starti / lp.endi / lp.count
//!  21: A: 67 instructions (loads, context, MED, k, error, code, update), sb N, flush test
//!  22: B: 67 instructions, flush test
//!  25: sb N                           last instruction of the loop
//!      out of line: 30 run context: the run mode (61-69, 91-94), then back to the entry
//!      (20) at the next sample, or exit (line end, buffer full); 31/36 long code (update,
//!      the code through the subroutine at 85, back to 44 / 74), the context halvings of RESET, 40-45 / 70-75 two bytes out after A / B (0xFF:
//!      the stuffed bit; buffer full: exit), 80 the run mode's two bytes out (a subroutine)
//!  50: state back to memory
//! ```
//!
//! 69 instructions a sample (the one-sample loop took 74: four moves); a run costs 4
//! instructions a sample of the run and about 130 for its length, the interruption sample and
//! the loop's new start.
#![allow(unsafe_code)] // inline assembly of PULP instructions: the hardware edge

use crate::bits::{Sink, Writer};
use crate::line::Ops;
use crate::model::Model;
use crate::pulp_model::{Exit, Kernel, MARGIN, QUANT6, State, encode_line_with};
use asm_macros::{
    lp_count, lp_endi, lp_starti, p_abs, p_beqimm, p_bneimm, p_clipi, p_clipui, p_clipur, p_extbs,
    p_extracti, p_fl1, p_lb, p_lbu, p_mac, p_max, p_min, p_msu, p_sb,
};
use core::arch::asm;

/// The PULP variant: the assembly line coder (and the PULP forms of the generic coder's
/// operations).
pub struct Pulp;

impl Ops for Pulp {
    const QUANT: &'static [i8; 511] = &QUANT6;
    const QUANT_SCALE: i8 = 6;

    #[inline(always)]
    fn encode_line<S: Sink>(
        m: &mut Model,
        quant: &[i8; 511],
        w: &mut Writer<'_, S>,
        prev: &mut [u8],
        cur: &mut [u8],
        width: usize,
    ) {
        encode_line_with::<AsmKernel, S>(m, quant, w, prev, cur, width)
    }

    #[inline(always)]
    fn k(n: u32, a: u32) -> u32 {
        let (fa, fnn): (u32, u32);
        // SAFETY: two register-to-register PULP ALU instructions (RI5CY's p.fl1); no memory, no
        // stack, no flags. `a | 1`: p.fl1 of 0 is not an index.
        unsafe {
            asm!(
                p_fl1!(a0, a0),
                p_fl1!(a1, a1),
                inlateout("a0") a | 1 => fa,
                inlateout("a1") n => fnn,
                options(pure, nomem, nostack),
            )
        };
        let mut k = fa.saturating_sub(fnn);
        if (n << k) < a {
            k += 1;
        }
        k
    }

    #[inline(always)]
    fn med(ra: i32, rb: i32, rc: i32) -> i32 {
        let r: i32;
        // SAFETY: four register-to-register PULP ALU instructions (p.min / p.max); no memory,
        // no stack; a3 is declared clobbered.
        unsafe {
            asm!(
                p_min!(a2, a0, a1),
                p_max!(a3, a0, a1),
                p_min!(a3, a3, a4),
                p_max!(a2, a2, a3),
                in("a0") ra,
                in("a1") rb,
                in("a4") ra + rb - rc,
                lateout("a2") r,
                out("a3") _,
                options(pure, nomem, nostack),
            )
        };
        r
    }

    #[inline(always)]
    fn clamp255(v: i32) -> i32 {
        let r: i32;
        // SAFETY: one register-to-register PULP ALU instruction (p.clipu, 0..=255); no memory.
        unsafe {
            asm!(
                p_clipui!(a0, a0, 9),
                inlateout("a0") v => r,
                options(pure, nomem, nostack),
            )
        };
        r
    }

    #[inline(always)]
    fn abs(v: i32) -> i32 {
        let r: i32;
        // SAFETY: one register-to-register PULP ALU instruction (p.abs); no memory.
        unsafe {
            asm!(
                p_abs!(a0, a0),
                inlateout("a0") v => r,
                options(pure, nomem, nostack),
            )
        };
        r
    }
}

/// The kernel's state in memory (offsets fixed: the assembly reads and writes them).
#[repr(C)]
struct Regs {
    /// 0: the next sample, `cur[i]`.
    pc: *const u8,
    /// 4: `prev[i + 1]`.
    pp: *const u8,
    /// 8: samples left on the line (at least 1).
    count: u32,
    /// 12: pending bits, left-aligned.
    acc: u32,
    /// 16: −(pending bit count).
    nu: i32,
    /// 20: write position.
    out: *mut u8,
    /// 24: the kernel stops at a sample's end once `out >= limit`.
    limit: *const u8,
    /// 28: the model: the regular contexts (6 bytes each: A u16, D i16, C i8, N u8), the run
    /// contexts at 2192 and 2204 (A, N, Nn: i32), RUNindex at 2216 (u32).
    ctx: *mut u8,
    /// 32: the centre of the 6·Q table (`quant[255]`).
    quant: *const i8,
    /// 36: why it stopped: 0 line end, 3 buffer full.
    exit: u32,
    /// 40: RESET (the model's [`Model::reset_at`], 3..=255).
    reset: u32,
}

/// The rest of the context update (A.6.1, A.6.2) of the sample in the registers (A += |e| and
/// D += e are done with the error mapping), with `$halve` / `$back` the labels of its
/// out-of-line RESET halving: D + 1 (or the halving), N + 1, the branch-free bias correction,
/// three fields stored (the caller stores N, `sb ra, 5(t4)`). 13 instructions.
#[rustfmt::skip]
macro_rules! update {
    ($halve:literal, $back:literal) => {
        concat!(
            "beq t6, s9, ", $halve, "f\n",
            "addi s10, s10, 1\n",
            $back, ":\n",
            "addi ra, t6, 1\n",
            "slti s1, s10, 0\n",
            "slt t3, t6, s10\n",
            "sub t3, t3, s1\n",
            "add s11, s11, t3\n",
            p_clipi!(s11, s11, 8), "\n",
            p_msu!(s10, ra, t3), "\n",
            p_clipur!(s10, s10, t6), "\n",
            "sh t5, 0(t4)\n",
            "sh s10, 2(t4)\n",
            "sb s11, 4(t4)\n",
        )
    };
}

/// One regular-mode sample up to its context update (67 instructions with [`update!`]), the
/// registers named: `$ra`, `$rb` hold Ra, Rb; `$rc` holds Rc and receives Rd; `$q2` holds 6·Q2
/// (destroyed); `$x` receives X, `$q1` 6·Q1 (the next sample's Q2); `$k` is k. `$long` is the
/// label of the long-code exit, `$halve` / `$back` the update's.
#[rustfmt::skip]
macro_rules! sample {
    ($ra:ident, $rb:ident, $rc:ident, $q2:ident, $x:ident, $q1:ident, $k:ident,
     $long:literal, $halve:literal, $back:literal) => {
        concat!(
            // Rc − Ra, then Rd (into Rc's register) and X; 6·context = Q3 + 9 (Q2 + 9 Q1).
            "sub t3, ", stringify!($rc), ", ", stringify!($ra), "\n",
            p_lbu!($rc, 1(a1!)), "\n",
            p_lbu!($x, 1(a0!)), "\n",
            "sub ", stringify!($q1), ", ", stringify!($rc), ", ", stringify!($rb), "\n",
            p_lb!($q1, $q1(a2)), "\n",
            p_lb!(s1, t3(a2)), "\n",
            p_mac!($q2, $q1, s5), "\n",
            p_mac!(s1, $q2, s5), "\n",
            "beqz s1, 30f\n",
            // The context: 6 bytes at 6·|Q|.
            p_abs!(t4, s1), "\n",
            "add t4, t4, a3\n",
            "lhu t5, 0(t4)\n",
            "lbu t6, 5(t4)\n",
            "lh s10, 2(t4)\n",
            "lb s11, 4(t4)\n",
            // MED = max(min(Ra, Rb), min(max(Ra, Rb), Rb - (Rc - Ra))).
            p_min!(s0, $ra, $rb), "\n",
            p_max!($k, $ra, $rb), "\n",
            "sub ra, ", stringify!($rb), ", t3\n",
            p_min!(ra, ra, $k), "\n",
            p_max!(s0, ra, s0), "\n",
            // k = t + (N << t < A), t = fl1(A | N) - fl1(N).
            "or ", stringify!($k), ", t5, t6\n",
            p_fl1!($k, $k), "\n",
            p_fl1!(ra, t6), "\n",
            "sub ", stringify!($k), ", ", stringify!($k), ", ra\n",
            "sll ra, t6, ", stringify!($k), "\n",
            "sltu ra, ra, t5\n",
            "add ", stringify!($k), ", ", stringify!($k), ", ra\n",
            // s = ±1; Px = clip(MED + s·C); e = (s·(X - Px)) mod 256.
            "srai t3, s1, 31\n",
            "ori t3, t3, 1\n",
            p_mac!(s0, s11, t3), "\n",
            p_clipui!(s0, s0, 9), "\n",
            "sub s0, ", stringify!($x), ", s0\n",
            "mul s0, s0, t3\n",
            "srli ra, t6, 1\n",
            "slli s1, ", stringify!($k), ", 8\n",
            p_extbs!(s0, s0), "\n",
            // MErrval = 2|e| - (e < 0), its lowest bit flipped (f) when k = 0 and D < N/2
            // (2B <= -N): D + 256k < N/2 (N <= RESET <= 255, so k >= 1 never flips it);
            // 2|e| + (-(e < 0) ^ f), one p.mac with the constant 2; then A += |e|, D += e
            // (the update's first half).
            "add s1, s1, s10\n",
            "slt s1, s1, ra\n",
            "srai t3, s0, 31\n",
            "xor t3, t3, s1\n",
            p_abs!(ra, s0), "\n",
            p_mac!(t3, ra, s8), "\n",
            "add t5, t5, ra\n",
            "add s10, s10, s0\n",
            // high = MErrval >> k, 16 bits or fewer: high zeros, a one, k bits.
            "srl ra, t3, ", stringify!($k), "\n",
            "add s1, ra, ", stringify!($k), "\n",
            "bgeu s1, s6, ", $long, "f\n",
            "xori ra, ra, 1\n",
            "sll ra, ra, ", stringify!($k), "\n",
            "xor t3, t3, ra\n",
            "sub a5, a5, s1\n",
            "addi a5, a5, -1\n",
            "sll t3, t3, a5\n",
            "or a4, a4, t3\n",
            update!($halve, $back),
        )
    };
}

/// A code longer than 16 bits (`$k` the sample's k register, MErrval in t3): MErrval kept in
/// `$m` (a register free after the sample and not used by [`update!`]), the update with its own
/// halving labels, N stored, then the limited-length code (`high` zeros in steps of 16 at most,
/// a one and k bits, or the escape: 23 zeros, a one, MErrval − 1 in 8 bits) through the flush
/// subroutine at 85, and back into the loop (`$resume`), or to 45 once the buffer's limit is
/// reached. Uses s0, s1, s10, ra (t5, t6, s11 in the flush); the next sample's registers and t4
/// are left alone. `$l` are six labels.
#[rustfmt::skip]
macro_rules! long_code {
    ($label:literal, $k:ident, $m:ident, $halve:literal, $back:literal,
     $z1:literal, $z1d:literal, $esc:literal, $z2:literal, $z2d:literal, $done:literal,
     $resume:literal) => {
        concat!(
            $label, ":\n",
            "mv ", stringify!($m), ", t3\n",
            update!($halve, $back),
            "sb ra, 5(t4)\n",
            "srl s0, ", stringify!($m), ", ", stringify!($k), "\n",
            "li ra, 23\n",
            "bge s0, ra, ", $esc, "f\n",
            $z1, ":\n",
            "blez s0, ", $z1d, "f\n",
            "jal s11, 85f\n",
            p_min!(ra, s0, s6), "\n",
            "sub a5, a5, ra\n",
            "sub s0, s0, ra\n",
            "j ", $z1, "b\n",
            $z1d, ":\n",
            "jal s11, 85f\n",
            "li ra, 1\n",
            "sll ra, ra, ", stringify!($k), "\n",
            "addi s1, ra, -1\n",
            "and s1, s1, ", stringify!($m), "\n",
            "or s1, s1, ra\n",
            "addi s10, ", stringify!($k), ", 1\n",
            "sub a5, a5, s10\n",
            "sll s1, s1, a5\n",
            "or a4, a4, s1\n",
            "j ", $done, "f\n",
            $esc, ":\n",
            "li s0, 23\n",
            $z2, ":\n",
            "blez s0, ", $z2d, "f\n",
            "jal s11, 85f\n",
            p_min!(ra, s0, s6), "\n",
            "sub a5, a5, ra\n",
            "sub s0, s0, ra\n",
            "j ", $z2, "b\n",
            $z2d, ":\n",
            "jal s11, 85f\n",
            "addi s1, ", stringify!($m), ", -1\n",
            "andi s1, s1, 255\n",
            "ori s1, s1, 256\n",
            "addi a5, a5, -9\n",
            "sll s1, s1, a5\n",
            "or a4, a4, s1\n",
            $done, ":\n",
            "jal s11, 85f\n",
            "lw ra, 12(sp)\n",
            "bgeu a6, ra, 45f\n",
            $resume,
        )
    };
}

/// Two bytes out while 16 bits or more are pending (after 0xFF the stuffed 0 bit goes into the
/// accumulator), then back to `$back`, or to `$full` when the buffer's limit is reached (loaded
/// into s0 first, so that its compare does not wait for the load). Uses s0, s3 and t3 only.
#[rustfmt::skip]
macro_rules! flush {
    ($l40:literal, $l41:literal, $l42:literal, $l43:literal, $back:literal, $full:literal) => {
        concat!(
            $l40, ":\n",
            "lw s0, 12(sp)\n",
            "srai s3, a4, 24\n",
            p_extracti!(t3, a4, 7, 16), "\n",
            p_sb!(s3, 1(a6!)), "\n",
            p_beqimm!(s3, -1), $l42, "f\n",
            p_sb!(t3, 1(a6!)), "\n",
            "slli a4, a4, 16\n",
            "addi a5, a5, 16\n",
            p_beqimm!(t3, -1), $l43, "f\n",
            $l41, ":\n",
            "bgeu a6, s0, ", $full, "f\n",
            "j ", $back, "b\n",
            $l42, ":\n",
            "slli a4, a4, 8\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, 7\n",
            "blt a5, s7, ", $l40, "b\n",
            "j ", $l41, "b\n",
            $l43, ":\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, -1\n",
            "blt a5, s7, ", $l40, "b\n",
            "j ", $l41, "b\n",
        )
    };
}

/// The halving of A.6.1 when N = RESET (in t6: A and B halved, N = RESET / 2), in the D form
/// (`D' = ((D + e − (RESET − 1)) >> 1) + RESET / 2`, the bias code then sees
/// N_old = RESET / 2).
#[rustfmt::skip]
macro_rules! halve {
    ($label:literal, $back:literal) => {
        concat!(
            $label, ":\n",
            "srai t5, t5, 1\n",
            "sub s10, s10, t6\n",
            "addi s10, s10, 1\n",
            "srai s10, s10, 1\n",
            "srai t6, t6, 1\n",
            "add s10, s10, t6\n",
            "j ", $back, "b\n",
        )
    };
}

/// `put` of the run mode: `$len` bits (1..=16, a register) of `$v` (a register) after a
/// [`flush_call!`]. Uses ra.
#[rustfmt::skip]
macro_rules! put {
    ($v:ident, $len:ident) => {
        concat!(
            "jal t2, 80f\n",
            "sub a5, a5, ", stringify!($len), "\n",
            "sll ra, ", stringify!($v), ", a5\n",
            "or a4, a4, ra\n",
        )
    };
}

/// `z` zero bits (`$z`, a register, destroyed), 16 at most between two flushes. Uses ra.
#[rustfmt::skip]
macro_rules! zeros {
    ($z:ident, $l:literal, $done:literal) => {
        concat!(
            $l, ":\n",
            "blez ", stringify!($z), ", ", $done, "f\n",
            "jal t2, 80f\n",
            p_min!(ra, $z, s6), "\n",
            "sub a5, a5, ra\n",
            "sub ", stringify!($z), ", ", stringify!($z), ", ra\n",
            "j ", $l, "b\n",
            $done, ":\n",
        )
    };
}

/// The run mode of A.7 at sample i (a0 = &cur[i], a1 = &prev[i + 1]), [`crate::pulp_model::run_mode`]'s
/// arithmetic: the run of samples equal to Ra, its length in units of 2^J[RUNindex] (one bits),
/// the rest in J + 1 bits, the interruption sample with its run context and the limited-length
/// Golomb code of `LIMIT − J − 1` bits at most; then the loop again at the next sample (label
/// 20), or exit 0 at the line's end, or exit 3 once the buffer's limit is reached. At most 12
/// bytes out (a run of at most 65,535 samples: 34 one bits; the rest and the interruption 32
/// bits; 15 pending), within `MARGIN`.
///
/// Registers: t3 the run's end (&cur[j]), t5 Ra then A, t6 the line's end then N, t4 the count
/// then Nn, s0 RUNindex, s1 J then `22 − J` (the escape's zeros), s11 the model + 2000 (run
/// contexts at 192 and 204, RUNindex at 216), s10 the run context, s2 RItype, a7 the error.
#[rustfmt::skip]
macro_rules! run_mode {
    () => {
        concat!(
            "lbu t5, -1(a0)\n",
            "lw t6, 16(sp)\n",
            "mv t3, a0\n",
            // The run: samples equal to Ra up to the line's end.
            "61:\n",
            "bgeu t3, t6, 62f\n",
            p_lbu!(t0, 1(t3!)), "\n",
            "beq t0, t5, 61b\n",
            "addi t3, t3, -1\n",
            "62:\n",
            "sub t4, t3, a0\n",
            "addi s11, a3, 2000\n",
            "lw s0, 216(s11)\n",
            // While count >= 2^J[ri]: a one bit, count -= 2^J, ri + 1 (31 at most).
            "63:\n",
            "srai s1, s0, 2\n",
            "srai ra, s0, 1\n",
            "addi ra, ra, -4\n",
            p_max!(s1, s1, ra), "\n",
            "addi ra, s0, -16\n",
            p_max!(s1, s1, ra), "\n",
            "li ra, 1\n",
            "sll ra, ra, s1\n",
            "blt t4, ra, 64f\n",
            "sub t4, t4, ra\n",
            "li s2, 1\n",
            put!(s2, s2),
            "addi s0, s0, 1\n",
            "li ra, 31\n",
            p_min!(s0, s0, ra), "\n",
            "j 63b\n",
            "64:\n",
            "bltu t3, t6, 65f\n",
            // The run reached the line's end: a one bit for a partial unit, exit 0.
            "beqz t4, 66f\n",
            "li s2, 1\n",
            put!(s2, s2),
            "66:\n",
            "sw s0, 216(s11)\n",
            "jal t2, 80f\n",
            "sub ra, t3, a0\n",
            "add a1, a1, ra\n",
            "mv a0, t3\n",
            "li t2, 0\n",
            "j 50f\n",
            // The rest of the run in J + 1 bits.
            "65:\n",
            "addi s2, s1, 1\n",
            put!(t4, s2),
            "li ra, 22\n",
            "sub s1, ra, s1\n",
            // The interruption sample: Rb = prev[j], X = cur[j]; RItype = (Ra == Rb); the
            // error against Rb, negated when Rb < Ra, modulo 256.
            "sub ra, t3, a0\n",
            "add ra, ra, a1\n",
            "lbu t1, -1(ra)\n",
            "lbu t0, 0(t3)\n",
            "xor ra, t5, t1\n",
            "sltiu s2, ra, 1\n",
            "sub a7, t0, t1\n",
            "slt ra, t1, t5\n",
            "sub ra, zero, ra\n",
            "xor a7, a7, ra\n",
            "sub a7, a7, ra\n",
            p_extbs!(a7, a7), "\n",
            // The run context (12 bytes: A, N, Nn).
            "slli ra, s2, 3\n",
            "slli s10, s2, 2\n",
            "add s10, s10, ra\n",
            "add s10, s10, s11\n",
            "lw t5, 192(s10)\n",
            "lw t6, 196(s10)\n",
            "lw t4, 200(s10)\n",
            // k: the least k with N << k >= A + (N >> 1)·RItype.
            "srai ra, t6, 1\n",
            "sub t0, zero, s2\n",
            "and ra, ra, t0\n",
            "add ra, ra, t5\n",
            "ori t0, ra, 1\n",
            p_fl1!(t0, t0), "\n",
            p_fl1!(t1, t6), "\n",
            "sub t0, t0, t1\n",
            p_max!(t0, t0, zero), "\n",
            "sll t1, t6, t0\n",
            "sltu t1, t1, ra\n",
            "add t0, t0, t1\n",
            // map = (z ^ (e < 0)) & (e != 0), z = (k == 0) & (2 Nn < N).
            "slli t1, t4, 1\n",
            "slt t1, t1, t6\n",
            "sltiu ra, t0, 1\n",
            "and t1, t1, ra\n",
            "slti ra, a7, 0\n",
            "xor t1, t1, ra\n",
            "sltu s4, zero, a7\n",
            "and t1, t1, s4\n",
            // EMErrval = 2|e| − RItype − map.
            p_abs!(s4, a7), "\n",
            "slli s4, s4, 1\n",
            "sub s4, s4, s2\n",
            "sub s4, s4, t1\n",
            // The update (A.7.2.2): Nn + (e < 0), A + (EMErrval + 1 − RItype) / 2, the
            // halving at N = RESET, N + 1; RUNindex − 1 (0 at least).
            "add t4, t4, ra\n",
            "addi ra, s4, 1\n",
            "sub ra, ra, s2\n",
            "srai ra, ra, 1\n",
            "add t5, t5, ra\n",
            "bne t6, s9, 67f\n",
            "srai t5, t5, 1\n",
            "srai t6, t6, 1\n",
            "srai t4, t4, 1\n",
            "67:\n",
            "addi t6, t6, 1\n",
            "sw t5, 192(s10)\n",
            "sw t6, 196(s10)\n",
            "sw t4, 200(s10)\n",
            "addi s0, s0, -1\n",
            p_max!(s0, s0, zero), "\n",
            "sw s0, 216(s11)\n",
            // The limited-length Golomb code: high zeros, a one and k bits, or the escape
            // (22 − J zeros, a one, EMErrval − 1 in 8 bits).
            "mv a7, s4\n",
            "srl t1, a7, t0\n",
            "bge t1, s1, 68f\n",
            zeros!(t1, "91", "92"),
            "li ra, 1\n",
            "sll ra, ra, t0\n",
            "addi t1, ra, -1\n",
            "and t1, t1, a7\n",
            "or t1, t1, ra\n",
            "addi t0, t0, 1\n",
            put!(t1, t0),
            "j 69f\n",
            "68:\n",
            zeros!(s1, "93", "94"),
            "addi t1, a7, -1\n",
            "andi t1, t1, 255\n",
            "ori t1, t1, 256\n",
            "li t0, 9\n",
            put!(t1, t0),
            "69:\n",
            "jal t2, 80f\n",
            // The next sample, j + 1: exit 3 once the buffer's limit is reached, exit 0 at
            // the line's end, else the loop again.
            "addi t3, t3, 1\n",
            "sub ra, t3, a0\n",
            "add a1, a1, ra\n",
            "mv a0, t3\n",
            "lw t1, 16(sp)\n",
            "sub t1, t1, a0\n",
            "lw ra, 12(sp)\n",
            "bgeu a6, ra, 45f\n",
            "bnez t1, 20b\n",
            "li t2, 0\n",
            "j 50f\n",
        )
    };
}

/// The run mode's flush (`jal t2, 80f`): two bytes out while 16 bits or more are pending (after
/// 0xFF the stuffed 0 bit goes into the accumulator), no limit test (the run mode writes
/// within `MARGIN`); returns through t2. Uses s3 and s4.
#[rustfmt::skip]
macro_rules! flush_call {
    () => {
        concat!(
            "80:\n",
            "bge a5, s7, 89f\n",
            "srai s3, a4, 24\n",
            p_extracti!(s4, a4, 7, 16), "\n",
            p_sb!(s3, 1(a6!)), "\n",
            p_beqimm!(s3, -1), "82f\n",
            p_sb!(s4, 1(a6!)), "\n",
            "slli a4, a4, 16\n",
            "addi a5, a5, 16\n",
            p_bneimm!(s4, -1), "80b\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, -1\n",
            "j 80b\n",
            "82:\n",
            "slli a4, a4, 8\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, 7\n",
            "j 80b\n",
            "89:\n",
            "jr t2\n",
        )
    };
}

/// [`long_code!`]'s flush (`jal s11, 85f`): as [`flush_call!`] with t5 and t6, which the
/// regular samples' registers leave free after a sample.
#[rustfmt::skip]
macro_rules! flush_long {
    () => {
        concat!(
            "85:\n",
            "bge a5, s7, 86f\n",
            "srai t5, a4, 24\n",
            p_extracti!(t6, a4, 7, 16), "\n",
            p_sb!(t5, 1(a6!)), "\n",
            p_beqimm!(t5, -1), "87f\n",
            p_sb!(t6, 1(a6!)), "\n",
            "slli a4, a4, 16\n",
            "addi a5, a5, 16\n",
            p_bneimm!(t6, -1), "85b\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, -1\n",
            "j 85b\n",
            "87:\n",
            "slli a4, a4, 8\n",
            "srli a4, a4, 1\n",
            "addi a5, a5, 7\n",
            "j 85b\n",
            "86:\n",
            "jr s11\n",
        )
    };
}

/// The assembly kernel ([`Kernel`]).
pub struct AsmKernel;

impl Kernel for AsmKernel {
    fn line(
        m: &mut Model,
        quant: &[i8; 511],
        prev: &[u8],
        cur: &[u8],
        width: usize,
        st: &mut State,
        buf: &mut [u8],
    ) -> Exit {
        if st.i == 0 || prev.len() < width + 2 || cur.len() < width + 2 {
            return Exit::LineEnd;
        }
        let limit = st.limit.min(buf.len().saturating_sub(MARGIN));
        if st.i > width {
            return Exit::LineEnd;
        }
        if st.pos >= limit || st.used >= 16 {
            return Exit::Spill;
        }
        // SAFETY: `1 <= st.i <= width`, both lines `width + 2` long, `st.pos < limit <=
        // buf.len() - MARGIN`, fewer than 16 bits pending: checked above.
        let exit = unsafe { regular(m, quant, prev, cur, width, st, buf, limit) };
        if exit == EXIT_LINE_END {
            Exit::LineEnd
        } else {
            Exit::Spill
        }
    }
}

/// The kernel's exits: the line's end (0), or a full buffer (3: the sample or run that reached
/// the limit is complete).
const EXIT_LINE_END: u32 = 0;

// The run mode's offsets in the model (`addi s11, a3, 2000`; then 192, 204, 216).
const _: () = assert!(
    core::mem::offset_of!(Model, run) == 2192
        && core::mem::offset_of!(Model, run_index) == 2216
        && core::mem::size_of::<crate::model::RunCtx>() == 12
);

/// The assembly regular and run modes from sample `st.i` until a full buffer or the line's end;
/// returns the exit.
///
/// # Safety
///
/// `1 <= st.i <= width`, `prev` and `cur` at least `width + 2` bytes, `st.pos < limit <=
/// buf.len() - MARGIN`, `st.used < 16`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn regular(
    m: &mut Model,
    quant: &[i8; 511],
    prev: &[u8],
    cur: &[u8],
    width: usize,
    st: &mut State,
    buf: &mut [u8],
    limit: usize,
) -> u32 {
    let i = st.i;
    let mut r = Regs {
        pc: cur[i..].as_ptr(),
        pp: prev[i + 1..].as_ptr(),
        count: (width + 1 - i) as u32,
        acc: st.acc,
        nu: -(st.used as i32),
        out: buf[st.pos..].as_mut_ptr(),
        limit: buf[limit..].as_ptr(),
        ctx: (m as *mut Model).cast(),
        quant: quant[255..].as_ptr(),
        exit: 0,
        reset: m.reset_at as u32,
    };
    // SAFETY: the kernel reads `cur[i - 1..=width]`, `prev[i - 1..=width + 1]` (both at
    // least `width + 2` long, `1 <= i <= width`: the caller's contract) and `quant[255 + d]` for
    // sample differences d in −255..=255 (a 511-byte table); it reads and writes the 365
    // six-byte contexts of `m` at offsets 6·|Q| (|Q| <= 364, from the table's values), its
    // two run contexts and RUNindex (the offsets asserted above; `r.ctx` is `m` itself) and
    // the fields of `r`; it writes at most 7 bytes per sample (32 bits, 15 pending) and 12 per
    // run (of at most 65,535 samples, `MAX_DIM`) from `out` and stops at the end of the sample
    // or run that reaches `limit <= buf.len() - MARGIN` (MARGIN = 16), so within `buf`. It
    // runs the samples left on the line (`count >= 1`) at most. It saves s0/s1 in 32 bytes
    // of stack it allocates (with the state pointer, the limit and the line's end) and
    // restores them; every other register it uses is declared clobbered. Hardware loop 0 is
    // overwritten (no caller is inside one).
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            ".balign 4",
            "addi sp, sp, -32",
            "sw s0, 0(sp)",
            "sw s1, 4(sp)",
            "sw a0, 8(sp)",
            "lw t0, 24(a0)",
            "sw t0, 12(sp)",
            "lw t1, 8(a0)",
            "lw a4, 12(a0)",
            "lw a5, 16(a0)",
            "lw a6, 20(a0)",
            "lw a3, 28(a0)",
            "lw a2, 32(a0)",
            "lw s9, 40(a0)",
            "lw a1, 4(a0)",
            "lw a0, 0(a0)",
            // The line's end, &cur[width + 1], for the run mode.
            "add t0, a0, t1",
            "sw t0, 16(sp)",
            "li s5, 9",
            "li s6, 16",
            "li s7, -15",
            "li s8, 2",
            // Two samples a pass (A, B: the registers change roles, no moves); an odd count
            // enters at B. Passes: (count + 1) / 2 in t4. The run mode comes back here with
            // the count in t1.
            "20:",
            "andi t3, t1, 1",
            "srli t4, t1, 1",
            "add t4, t4, t3",
            "bnez t3, 23f",
            // A's registers: Ra a7, Rb s2, Rc t0, Q2 s4.
            "lbu a7, -1(a0)",
            "lbu s2, -1(a1)",
            "lbu t0, -2(a1)",
            "sub t2, s2, t0",
            p_lb!(s4, t2(a2)),
            "j 24f",
            // B's registers: Ra t1, Rb t0, Rc s2, Q2 t2.
            "23:",
            "lbu t1, -1(a0)",
            "lbu t0, -1(a1)",
            "lbu s2, -2(a1)",
            "sub t2, t0, s2",
            p_lb!(t2, t2(a2)),
            "24:",
            lp_starti!(x0, 16),
            lp_endi!(x0, 560),
            lp_count!(x0, t4),
            "bnez t3, 22f",
            // A: Ra a7, Rb s2, Rc t0 (<- Rd), Q2 s4; X -> t1, Q1 -> t2, k in s3.
            "21:",
            sample!(a7, s2, t0, s4, t1, t2, s3, "31", "32", "33"),
            "sb ra, 5(t4)",
            "blt a5, s7, 40f",
            "44:",
            // B: Ra t1, Rb t0, Rc s2 (<- Rd), Q2 t2; X -> a7, Q1 -> s4, k in t2.
            "22:",
            sample!(t1, t0, s2, t2, a7, s4, t2, "36", "37", "38"),
            "blt a5, s7, 70f",
            "74:",
            // The loop's last instruction (21 + 137 instructions: lp.endi's offset).
            "25:",
            "sb ra, 5(t4)",
            // The line's end.
            "li t2, 0",
            "j 50f",
            // A run context: back to this sample, the run mode, then the loop again.
            "30:",
            "addi a0, a0, -1",
            "addi a1, a1, -1",
            run_mode!(),
            // After A: on to B (44). After B: N again in ra for the loop's last instruction.
            long_code!("31", s3, a7, "34", "35", "51", "52", "53", "54", "55", "56", "j 44b\n"),
            long_code!("36", t2, t1, "39", "48", "57", "58", "59", "60", "76", "77",
                "lbu ra, 5(t4)\nj 74b\n"),
            halve!("34", "35"),
            halve!("32", "33"),
            halve!("39", "48"),
            halve!("37", "38"),
            flush!("40", "41", "42", "43", "44", "45"),
            flush!("70", "71", "72", "73", "74", "75"),
            flush_call!(),
            flush_long!(),
            // B's flush filled the buffer: N still to store.
            "75:",
            "sb ra, 5(t4)",
            // The buffer is full: stop after this sample.
            "45:",
            "li t2, 3",
            // Exit: the state back to memory.
            "50:",
            "lw t0, 8(sp)",
            "sw a0, 0(t0)",
            "sw a1, 4(t0)",
            "sw a4, 12(t0)",
            "sw a5, 16(t0)",
            "sw a6, 20(t0)",
            "sw t2, 36(t0)",
            "lw s0, 0(sp)",
            "lw s1, 4(sp)",
            "addi sp, sp, 32",
            ".option pop",
            inout("a0") &mut r as *mut Regs => _,
            out("x1") _, out("x5") _, out("x6") _, out("x7") _,
            out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _,
            out("x16") _, out("x17") _, out("x18") _, out("x19") _, out("x20") _,
            out("x21") _, out("x22") _, out("x23") _, out("x24") _, out("x25") _,
            out("x26") _, out("x27") _, out("x28") _, out("x29") _, out("x30") _,
            out("x31") _,
        );
    }
    st.i = r.pc as usize - cur.as_ptr() as usize;
    st.pos = r.out as usize - buf.as_ptr() as usize;
    st.acc = r.acc;
    st.used = r.nu.unsigned_abs();
    r.exit
}
