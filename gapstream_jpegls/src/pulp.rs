//! The PULP kernel operations (feature `pulp`, riscv32 targets: RI5CY / GAP8 only): `p.fl1` for
//! the Golomb parameter (CharLS's `k = max(0, fl1(A) − fl1(N))`, plus one when `N << k < A`),
//! `p.min` / `p.max` for the median predictor (the median of Ra, Rb and Ra + Rb − Rc), `p.clipu`
//! for the corrected prediction and `p.abs`. The words come from `asm_macros` (golden-word
//! tests from the RI5CY manual). The line coder around them is the portable one; the stream is
//! the same bit for bit (checked on the GAP8 model: `make gvsoc-bench` compares every PULP run's
//! output with the host encoder's).
#![allow(unsafe_code)] // inline assembly of PULP instructions: the hardware edge

use crate::line::Ops;
use asm_macros::{p_abs, p_clipui, p_fl1, p_max, p_min};
use core::arch::asm;

/// The PULP operations.
pub struct Pulp;

impl Ops for Pulp {
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
