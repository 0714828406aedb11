//! PULP performance counters of the calling core (RI5CY `PCER` 0x7A0, `PCMR` 0x7A1, counters
//! `PCCR0..` at 0x780; writing `PCCR31` 0x79F resets all). On the GAP8 GVSOC model the standard
//! `mcycle` reads 0, while these count; the model counts cycles and instructions only.

/// Resets the counters and starts counting cycles (event 0) and instructions (event 1).
#[inline(always)]
pub fn start() {
    #[cfg(target_arch = "riscv32")]
    // SAFETY: performance-counter CSRs of the calling core; no effect on memory.
    unsafe {
        core::arch::asm!(
            "csrw 0x79F, zero",
            "csrw 0x7A0, {events}",
            "csrw 0x7A1, {active}",
            events = in(reg) 3u32,
            active = in(reg) 1u32,
            options(nomem, nostack, preserves_flags)
        );
    }
}

/// Cycles counted since [`start`] (32 bits, wraps).
#[inline(always)]
pub fn cycles() -> u32 {
    #[cfg(target_arch = "riscv32")]
    {
        let r: u32;
        // SAFETY: reading a counter CSR has no side effect.
        unsafe {
            core::arch::asm!("csrr {0}, 0x780", out(reg) r, options(nomem, nostack, preserves_flags))
        };
        r
    }
    #[cfg(not(target_arch = "riscv32"))]
    0
}

/// Instructions retired since [`start`] (32 bits, wraps).
#[inline(always)]
pub fn instructions() -> u32 {
    #[cfg(target_arch = "riscv32")]
    {
        let r: u32;
        // SAFETY: reading a counter CSR has no side effect.
        unsafe {
            core::arch::asm!("csrr {0}, 0x781", out(reg) r, options(nomem, nostack, preserves_flags))
        };
        r
    }
    #[cfg(not(target_arch = "riscv32"))]
    0
}
