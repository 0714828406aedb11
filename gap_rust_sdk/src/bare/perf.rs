//! PULP performance counters of the calling core (RI5CY `PCER` 0x7A0, `PCMR` 0x7A1, counters
//! `PCCR0..` at 0x780; writing `PCCR31` 0x79F resets all). On the GAP8 GVSOC model the standard
//! `mcycle` reads 0, while these count; the model counts cycles and instructions only.
//!
//! The cycle counter counts the cycles the core *runs*: a core sleeping in a hardware barrier (or
//! on any event) is not counted (GVSOC `iss_wrapper.cpp`: "Count the number of cycles the core
//! was running"). Elapsed time comes from the cluster timer instead ([`wall_start`],
//! [`wall_cycles`]), which counts every cluster clock cycle.

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

/// Starts the cluster timer (timer 0, cluster clock, no prescaler) from 0. Cluster cores only.
pub fn wall_start() {
    // SAFETY: the cluster timer's configuration register (cluster peripherals, powered while a
    // cluster core runs this); no effect on memory.
    unsafe {
        super::mmio::write(
            super::mmio::CL_TIMER_CFG_LO,
            super::mmio::TIMER_ENABLE | super::mmio::TIMER_RESET,
        )
    };
}

/// Cluster clock cycles since [`wall_start`] (32 bits, wraps). Cluster cores only.
#[inline(always)]
pub fn wall_cycles() -> u32 {
    // SAFETY: reading the cluster timer's counter has no side effect.
    unsafe { super::mmio::read(super::mmio::CL_TIMER_CNT_LO) }
}
