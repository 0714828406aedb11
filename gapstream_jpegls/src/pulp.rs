//! The PULP line coder (feature `pulp`, riscv32 targets: RI5CY / GAP8 only): the regular mode in
//! RI5CY assembly with a hardware loop over the line, post-increment byte loads, register-register
//! table loads, `p.mac` / `p.msu`, `p.fl1`, `p.min` / `p.max`, `p.clip*`, `p.extbs`, the context
//! and the bit writer in registers. Its arithmetic is [`crate::pulp_model`]'s, instruction for
//! formula (the module docs there say how it differs from [`crate::line`] and why the stream is
//! the same). Run mode and codes longer than 16 bits leave the assembly for the model's Rust
//! ([`crate::pulp_model::run_mode`], the kernel's bit writer) inside [`AsmKernel`]'s line loop;
//! full buffers go back to the driver ([`encode_line_with`]). The words come from `asm_macros` (golden-word tests); the stream is
//! checked on the GAP8 model: `make gvsoc-bench` compares every PULP run's output with the host
//! encoder's.
//!
//! Register plan of the kernel:
//!
//! | line pointers cur / prev | Q table, contexts | acc, −used, out | Ra Rb Rc, Q2 | 9, 16, −15, 255, 64 |
//! |---|---|---|---|---|
//! | a0 / a1 | a2, a3 | a4, a5, a6 | a7 s2 s3, s4 | s5 s6 s7 s8 s9 |
//!
//! Per sample: t0 = Rd, t1 = X, t4 = the context's address, t5 = A, t6 = N, s10 = D, s11 = C,
//! t2 (Q1, then k), t3, s0, s1 and ra temporaries. The stack frame holds s0, s1 (not `asm!`
//! operands), the state pointer and the buffer limit.
//!
//! ```text
//!      entry: state into registers, Ra Rb Rc Q2 from the line, constants
//!  20: lp.setup x0, count, +296       the samples left on the line
//!      74 instructions per sample     (loads, context, k, MED, error, code, update, flush test)
//!  21: mv s2, t0                      last instruction of the loop: Rb = Rd
//!      out of line: 30 run context (exit), 31 long code (update, exit), 32/34 the context
//!      halving of RESET, 40-43 two bytes out (0xFF: the stuffed bit), 45 buffer full (exit)
//!  50: state back to memory
//! ```
#![allow(unsafe_code)] // inline assembly of PULP instructions: the hardware edge

use crate::bits::{Sink, Writer};
use crate::line::Ops;
use crate::model::LIMIT;
use crate::model::Model;
use crate::pulp_model::{Bw, Exit, Kernel, MARGIN, QUANT6, State, encode_line_with, run_mode};
use asm_macros::{
    lp_setup, p_abs, p_clipi, p_clipui, p_clipur, p_extbs, p_extractui, p_fl1, p_lb, p_lbu, p_mac,
    p_max, p_min, p_msu, p_sb,
};
use core::arch::asm;

/// The PULP variant: the assembly line coder (and the PULP forms of the generic coder's
/// operations).
pub struct Pulp;

impl Ops for Pulp {
    const QUANT: &'static [i8; 511] = &QUANT6;

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
    /// 28: the regular contexts (6 bytes each: A u16, D i16, C i8, N u8).
    ctx: *mut u8,
    /// 32: the centre of the 6·Q table (`quant[255]`).
    quant: *const i8,
    /// 36: why it stopped: 0 line end, 1 run context, 2 long code, 3 buffer full.
    exit: u32,
    /// 40: the long code's mapped error.
    merr: u32,
    /// 44: the long code's Golomb parameter.
    k: u32,
}

/// The context update (A.6.1, A.6.2) of the sample in the registers, with `$halve` / `$back` the
/// labels of its out-of-line RESET halving: A += |e|, D += e + 1 (or the halving), N + 1, the
/// branch-free bias correction, the four fields stored. 17 instructions.
#[rustfmt::skip]
macro_rules! update {
    ($halve:literal, $back:literal) => {
        concat!(
            p_abs!(ra, s0), "\n",
            "add t5, t5, ra\n",
            "add s10, s10, s0\n",
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
            "sb ra, 5(t4)\n",
        )
    };
}

/// The halving of A.6.1 when N = RESET = 64 (A and B halved, N = 32), in the D form
/// (`D' = ((D + e − 63) >> 1) + 32`, the bias code then sees N_old = 32).
#[rustfmt::skip]
macro_rules! halve {
    ($label:literal, $back:literal) => {
        concat!(
            $label, ":\n",
            "srai t5, t5, 1\n",
            "addi s10, s10, -63\n",
            "srai s10, s10, 1\n",
            "addi s10, s10, 32\n",
            "li t6, 32\n",
            "j ", $back, "b\n",
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
        loop {
            if st.i > width {
                return Exit::LineEnd;
            }
            if st.pos >= limit || st.used >= 16 {
                return Exit::Spill;
            }
            // SAFETY: `1 <= st.i <= width`, both lines `width + 2` long, `st.pos < limit <=
            // buf.len() - MARGIN`, fewer than 16 bits pending: checked above.
            let (exit, merr, k) = unsafe { regular(m, quant, prev, cur, width, st, buf, limit) };
            match exit {
                EXIT_RUN | EXIT_LONG => {
                    // Run mode, or the code of a sample whose context is updated: the same
                    // Rust as the model's, on the kernel's bit writer.
                    let mut w = Bw {
                        acc: st.acc,
                        nu: -(st.used as i32),
                        pos: st.pos,
                        buf: &mut *buf,
                        overflow: st.overflow,
                    };
                    if exit == EXIT_RUN {
                        st.i = run_mode(m, &mut w, prev, cur, st.i, width).unwrap_or(width + 1);
                    } else {
                        w.golomb(k as i32, merr, LIMIT as i32);
                    }
                    w.flush2();
                    st.acc = w.acc;
                    st.used = w.nu.unsigned_abs();
                    st.pos = w.pos;
                    st.overflow = w.overflow;
                }
                EXIT_LINE_END => return Exit::LineEnd,
                _ => return Exit::Spill,
            }
        }
    }
}

/// The kernel's exits: the line's end, a run context at `st.i` (nothing of it coded), a code
/// longer than 16 bits (the sample's context updated, its code not written), a full buffer.
const EXIT_LINE_END: u32 = 0;
const EXIT_RUN: u32 = 1;
const EXIT_LONG: u32 = 2;

/// The assembly regular mode from sample `st.i` until a run context, a long code, a full buffer
/// or the line's end; returns the exit and, for a long code, its mapped error and parameter.
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
) -> (u32, u32, u32) {
    let i = st.i;
    let mut r = Regs {
        pc: cur[i..].as_ptr(),
        pp: prev[i + 1..].as_ptr(),
        count: (width + 1 - i) as u32,
        acc: st.acc,
        nu: -(st.used as i32),
        out: buf[st.pos..].as_mut_ptr(),
        limit: buf[limit..].as_ptr(),
        ctx: m.ctx.as_mut_ptr().cast(),
        quant: quant[255..].as_ptr(),
        exit: 0,
        merr: 0,
        k: 0,
    };
    // SAFETY: the kernel reads `cur[i - 1..=width]`, `prev[i - 1..=width + 1]` (both at
    // least `width + 2` long, `1 <= i <= width`: the caller's contract) and `quant[255 + d]` for
    // sample differences d in −255..=255 (a 511-byte table); it reads and writes the 365
    // six-byte contexts of `m` at offsets 6·|Q| (|Q| <= 364, from the table's values) and
    // the fields of `r`; it writes at most 4 bytes per sample from `out` and stops at the
    // end of the sample that reaches `limit <= buf.len() - MARGIN` (MARGIN = 16), so within
    // `buf`. It runs the samples left on the line (`count >= 1`) at most. It saves s0/s1 in
    // 16 bytes of stack it allocates and restores them; every other register it uses is
    // declared clobbered. Hardware loop 0 is overwritten (no caller is inside one).
    unsafe {
        asm!(
            ".option push",
            ".option norvc",
            ".balign 4",
            "addi sp, sp, -16",
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
            "lw a1, 4(a0)",
            "lw a0, 0(a0)",
            "lbu a7, -1(a0)",
            "lbu s2, -1(a1)",
            "lbu s3, -2(a1)",
            "li s5, 9",
            "li s6, 16",
            "li s7, -15",
            "li s8, 255",
            "li s9, 64",
            "sub t2, s2, s3",
            p_lb!(s4, t2(a2)),
            "20:",
            lp_setup!(x0, t1, 296),
            // Rd, X; Q1 and Q3 (Q2 is the last sample's Q1); 6·context = Q3 + 9 (Q2 + 9 Q1).
            p_lbu!(t0, 1(a1!)),
            p_lbu!(t1, 1(a0!)),
            "sub t2, t0, s2",
            "sub t3, s3, a7",
            p_lb!(t2, t2(a2)),
            p_lb!(s1, t3(a2)),
            p_mac!(s4, t2, s5),
            p_mac!(s1, s4, s5),
            "mv s4, t2",
            "beqz s1, 30f",
            // The context: 6 bytes at 6·|Q|.
            p_abs!(t4, s1),
            "add t4, t4, a3",
            "lhu t5, 0(t4)",
            "lbu t6, 5(t4)",
            "lh s10, 2(t4)",
            "lb s11, 4(t4)",
            // MED = max(min(Ra, Rb), min(max(Ra, Rb), Rb - (Rc - Ra))).
            p_min!(s0, a7, s2),
            p_max!(t2, a7, s2),
            "sub ra, s2, t3",
            p_min!(ra, ra, t2),
            p_max!(s0, ra, s0),
            // k = t + (N << t < A), t = fl1(A | N) - fl1(N).
            "or t2, t5, t6",
            p_fl1!(t2, t2),
            p_fl1!(ra, t6),
            "sub t2, t2, ra",
            "sll ra, t6, t2",
            "sltu ra, ra, t5",
            "add t2, t2, ra",
            // s = ±1; Px = clip(MED + s·C); e = (s·(X - Px)) mod 256.
            "srai t3, s1, 31",
            "ori t3, t3, 1",
            p_mac!(s0, s11, t3),
            p_clipui!(s0, s0, 9),
            "sub s0, t1, s0",
            "mul s0, s0, t3",
            "srli ra, t6, 1",
            p_extbs!(s0, s0),
            // MErrval, its lowest bit flipped when k = 0 and D < N/2 (2B <= -N).
            "slli t3, s0, 1",
            "srai s1, s0, 31",
            "xor t3, t3, s1",
            "slli s1, t2, 6",
            "add s1, s1, s10",
            "slt s1, s1, ra",
            "xor t3, t3, s1",
            // high = MErrval >> k, 16 bits or fewer: high zeros, a one, k bits.
            "srl ra, t3, t2",
            "add s1, ra, t2",
            "bgeu s1, s6, 31f",
            "xori ra, ra, 1",
            "sll ra, ra, t2",
            "xor t3, t3, ra",
            "sub a5, a5, s1",
            "addi a5, a5, -1",
            "sll t3, t3, a5",
            "or a4, a4, t3",
            update!("32", "33"),
            // 16 bits pending: two bytes out.
            "blt a5, s7, 40f",
            "44:",
            "mv a7, t1",
            "mv s3, s2",
            "21:",
            "mv s2, t0",
            // The line's end.
            "li t2, 0",
            "j 50f",
            // A run context: back to this sample.
            "30:",
            "addi a0, a0, -1",
            "addi a1, a1, -1",
            "li t2, 1",
            "j 50f",
            // A long code: the update, then the driver writes the code.
            "31:",
            "lw ra, 8(sp)",
            "sw t3, 40(ra)",
            "sw t2, 44(ra)",
            update!("34", "35"),
            "li t2, 2",
            "j 50f",
            halve!("34", "35"),
            halve!("32", "33"),
            // Two bytes out; after 0xFF the stuffed 0 bit goes into the accumulator.
            "40:",
            "srli t2, a4, 24",
            p_extractui!(t3, a4, 7, 16),
            p_sb!(t2, 1(a6!)),
            "beq t2, s8, 42f",
            p_sb!(t3, 1(a6!)),
            "slli a4, a4, 16",
            "addi a5, a5, 16",
            "beq t3, s8, 43f",
            "41:",
            "lw t2, 12(sp)",
            "bgeu a6, t2, 45f",
            "j 44b",
            "42:",
            "slli a4, a4, 8",
            "srli a4, a4, 1",
            "addi a5, a5, 7",
            "blt a5, s7, 40b",
            "j 41b",
            "43:",
            "srli a4, a4, 1",
            "addi a5, a5, -1",
            "blt a5, s7, 40b",
            "j 41b",
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
            "addi sp, sp, 16",
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
    (r.exit, r.merr, r.k)
}
