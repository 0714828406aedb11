//! Start-up code, exit, traps and `println!` for bare-metal GAP8 programs.
//!
//! Boot: the GAP8 ROM loads the ELF (flash image) and jumps to `_start` on the FC. Cluster cores,
//! once [`super::BareCluster::take`] has powered the cluster and set their boot address to
//! `__vectors`, start at `__vectors + 0x80` — the same `_start`. `_start` reads `mhartid`: the FC
//! clears `.bss`, takes the FC stack and runs the program's `main` (named with [`crate::bare_main!`]);
//! a cluster core takes its L1 stack and enters the cluster runtime (core 0: offload loop, cores
//! 1..8: fork loop). The vector table sends every trap to a handler that prints `mcause` / `mepc`
//! and ends the simulation with status 100.
//!
//! Output goes to GVSOC's stdout peripheral (one line-buffered channel per core), and the exit
//! status to the SoC's `CORESTATUS` register, which ends a GVSOC run with that status. On a board
//! the stdout peripheral does not exist (a UART driver would replace [`Stdout`]).
use super::mmio;
use core::fmt::{self, Write};

#[cfg(target_arch = "riscv32")]
core::arch::global_asm!(
    r#"
    .section .vectors, "ax"
    .option push
    .option norvc
    .global __vectors
__vectors:
    .rept 32
    j __bare_trap
    .endr
    .global _start
_start:
    j __bare_entry
    .option pop

    .section .text.start, "ax"
    .global __bare_entry
__bare_entry:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    csrr a0, 0xF14
    srli a1, a0, 5
    andi a2, a0, 0x1f
    li t0, 32
    bne a1, t0, 2f
    /* FC: clear .bss, FC stack, main */
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 3f
    sw zero, 0(t0)
    addi t0, t0, 4
    j 1b
3:  la sp, __fc_stack_top
    call __bare_fc_start
4:  j 4b
    /* cluster core a2: core 0 has the big stack, cores 1..8 one slave stack each */
2:  bnez a2, 5f
    la sp, __cl_stack0_top
    j 6f
5:  la sp, __cl_slave_stacks
    la t1, __cl_slave_stack_size
    mv t2, a2
9:  add sp, sp, t1
    addi t2, t2, -1
    bnez t2, 9b
6:  mv a0, a2
    call __bare_cluster_start
7:  j 7b

    .align 2
__bare_trap:
    csrr a0, mcause
    csrr a1, mepc
    csrr a2, 0xF14
    call __bare_trap_rust
8:  j 8b
"#
);

/// Ends the simulation (GVSOC) / signals end of computation with `status` (0 = success).
pub fn exit(status: u32) -> ! {
    // SAFETY: CORESTATUS is the SoC's end-of-computation register; writing it has no effect on
    // memory.
    unsafe {
        mmio::write(
            mmio::APB_SOC_CORESTATUS,
            0x8000_0000 | (status & 0x7FFF_FFFF),
        )
    };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// The calling core's channel of the GVSOC stdout peripheral.
pub struct Stdout;

impl Write for Stdout {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let h = mmio::hartid() as usize;
        let chan = mmio::STDOUT + ((h >> 5) << 7) + ((h & 0x1F) << 3);
        for b in s.bytes() {
            // SAFETY: the stdout peripheral's per-core channel register; a write emits a byte.
            unsafe { mmio::write(chan, b as u32) };
        }
        Ok(())
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let _ = Stdout.write_fmt(args);
}

/// `print!` to the calling core's stdout channel.
#[macro_export]
macro_rules! bare_print {
    ($($arg:tt)*) => { $crate::bare::rt::_print(format_args!($($arg)*)) };
}

/// `println!` to the calling core's stdout channel (lines of different cores do not mix).
#[macro_export]
macro_rules! bare_println {
    () => { $crate::bare::rt::_print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::bare::rt::_print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Names the program's FC entry, `fn() -> u32` (the exit status), and defines the panic handler
/// (prints the panic with the core, exits with status 101).
#[macro_export]
macro_rules! bare_main {
    ($f:path) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn __bare_main() -> u32 {
            $f()
        }

        #[panic_handler]
        fn __bare_panic(info: &core::panic::PanicInfo) -> ! {
            $crate::bare_println!("PANIC hart {:#x}: {}", $crate::bare::mmio::hartid(), info);
            $crate::bare::rt::exit(101)
        }
    };
}

#[cfg(target_arch = "riscv32")]
#[unsafe(no_mangle)]
extern "C" fn __bare_fc_start() -> ! {
    // SAFETY: enabling the FC instruction cache (all sets) only changes timing.
    unsafe { mmio::write(mmio::FC_ICACHE_CTRL, 0xFFFF_FFFF) };
    super::paint_fc_stack();
    super::perf::start();
    unsafe extern "C" {
        fn __bare_main() -> u32;
    }
    // SAFETY: defined by the program with `bare_main!`, with this signature.
    let status = unsafe { __bare_main() };
    exit(status)
}

#[cfg(target_arch = "riscv32")]
#[unsafe(no_mangle)]
extern "C" fn __bare_trap_rust(mcause: u32, mepc: u32, hart: u32) -> ! {
    crate::bare_println!("TRAP hart={hart:#x} mcause={mcause:#x} mepc={mepc:#010x}");
    exit(100)
}
