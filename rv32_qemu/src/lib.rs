//! Bare-metal runtime for test and benchmark programs on `qemu-system-riscv32 -machine virt -bios none`.
//!
//! A program is a `src/bin/*.rs` file with `#![no_std] #![no_main]` that names its entry with
//! [`entry!`]. The entry returns `Ok(())` for a pass or `Err(message)` for a failure; the runtime then
//! ends QEMU through the SiFive test device with exit status 0 or 1, so `xtask` reads pass/fail from
//! the exit status. A panic or a trap (for example an illegal instruction) prints what happened and
//! exits with status 1 as well.
//!
//! | item | what |
//! |---|---|
//! | [`println!`] | text to the 16550 UART (QEMU's `-nographic` / `-serial stdio`) |
//! | [`instret`] | the `minstret` CSR: with `-icount shift=0` QEMU counts exactly one per instruction |
//! | [`bench`] | `BENCH ...` lines in the format `xtask` parses |
//! | [`Rng`] | xorshift generator for seeded randomised cross-checks |
//! | heap | with the `alloc` feature, a 4 MiB `embedded-alloc` heap behind `#[global_allocator]` |
#![no_std]

#[cfg(feature = "alloc")]
extern crate alloc;

use core::fmt::{self, Write};

#[cfg(target_arch = "riscv32")]
core::arch::global_asm!(
    r#"
    .section .text.init, "ax"
    .global _start
_start:
    .option push
    .option norelax
    la gp, __global_pointer$
    .option pop
    la sp, _stack_top
    la t0, __rv32_trap
    csrw mtvec, t0
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 2f
    sw zero, 0(t0)
    addi t0, t0, 4
    j 1b
2:  call __rv32_start
3:  j 3b

    .align 4
__rv32_trap:
    csrr a0, mcause
    csrr a1, mepc
    csrr a2, mtval
    call __rv32_trap_rust
4:  j 4b
"#
);

const UART: usize = 0x1000_0000;
const TEST_DEVICE: usize = 0x0010_0000;

/// Writes one byte to the UART (polling the line-status register).
fn uart_putc(b: u8) {
    // SAFETY: QEMU `virt` maps a 16550 UART at 0x1000_0000; THR is +0, LSR is +5 (bit 5 = THR empty).
    // Volatile MMIO on a device nobody else drives in this single-threaded program.
    unsafe {
        while core::ptr::read_volatile((UART + 5) as *const u8) & 0x20 == 0 {}
        core::ptr::write_volatile(UART as *mut u8, b);
    }
}

/// A `core::fmt::Write` sink on the UART.
pub struct Uart;

impl Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                uart_putc(b'\r');
            }
            uart_putc(b);
        }
        Ok(())
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let _ = Uart.write_fmt(args);
}

/// `println!` on the UART.
#[macro_export]
macro_rules! println {
    () => { $crate::_print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::_print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` on the UART.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::_print(format_args!($($arg)*)) };
}

/// Ends QEMU with `code` as the process exit status (0 = pass).
pub fn exit(code: u32) -> ! {
    let word = if code == 0 {
        0x5555
    } else {
        (code << 16) | 0x3333
    };
    // SAFETY: the SiFive test "finisher" at 0x10_0000 on QEMU `virt` powers off on 0x5555 (status 0)
    // and on (code << 16 | 0x3333) (status `code`).
    unsafe { core::ptr::write_volatile(TEST_DEVICE as *mut u32, word) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Retired-instruction counter (`minstret`/`minstreth`), read consistently across the carry.
#[inline(always)]
pub fn instret() -> u64 {
    #[cfg(target_arch = "riscv32")]
    loop {
        let (hi, lo, hi2): (u32, u32, u32);
        // SAFETY: reading machine-mode counters in machine mode has no side effect.
        unsafe {
            core::arch::asm!(
                "csrr {0}, minstreth", "csrr {1}, minstret", "csrr {2}, minstreth",
                out(reg) hi, out(reg) lo, out(reg) hi2,
                options(nomem, nostack, preserves_flags)
            );
        }
        if hi == hi2 {
            return ((hi as u64) << 32) | lo as u64;
        }
    }
    #[cfg(not(target_arch = "riscv32"))]
    0
}

/// Instructions retired by `f`, minus the cost of the two counter reads themselves.
#[inline(never)]
pub fn count_instructions<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let empty = {
        let a = instret();
        let b = instret();
        b - a
    };
    let a = instret();
    let r = f();
    let b = instret();
    (r, (b - a).saturating_sub(empty))
}

/// Prints one benchmark record: `BENCH kernel=<k> variant=<v> bytes=<n> instructions=<i>`.
pub fn bench(kernel: &str, variant: &str, bytes: usize, instructions: u64) {
    println!("BENCH kernel={kernel} variant={variant} bytes={bytes} instructions={instructions}");
}

/// Prints one extra measurement line: `METRIC name=<name> value=<v>` (for example key setup).
pub fn metric(name: &str, value: u64) {
    println!("METRIC name={name} value={value}");
}

/// xorshift64* — a deterministic generator for randomised cross-checks (not for keys).
pub struct Rng(u64);

impl Rng {
    pub const fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform-ish in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Declares the program's entry: `fn() -> Result<(), &'static str>` or any `E: Display`.
#[macro_export]
macro_rules! entry {
    ($f:path) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn __rv32_main() -> u32 {
            match $f() {
                Ok(()) => {
                    $crate::println!("RESULT pass");
                    0
                }
                Err(e) => {
                    $crate::println!("RESULT fail: {}", e);
                    1
                }
            }
        }
    };
}

#[cfg(all(feature = "alloc", target_arch = "riscv32"))]
mod heap {
    use embedded_alloc::LlffHeap;

    #[global_allocator]
    pub(crate) static HEAP: LlffHeap = LlffHeap::empty();
    pub(crate) const HEAP_SIZE: usize = 4 * 1024 * 1024;

    unsafe extern "C" {
        static _heap_start: u8;
    }

    pub(crate) fn init() {
        // SAFETY: `_heap_start` is the first free byte after the stack (link.x); the 4 MiB after it
        // are inside the 64 MiB RAM region and used by nothing else. Called once, before `main`.
        unsafe { HEAP.init(core::ptr::addr_of!(_heap_start) as usize, HEAP_SIZE) }
    }

    struct SingleHart;
    critical_section::set_impl!(SingleHart);
    // SAFETY: one hart, and these programs never enable interrupts, so nothing can preempt the
    // section; acquire/release still save and restore MIE to stay correct if one ever does.
    unsafe impl critical_section::Impl for SingleHart {
        unsafe fn acquire() -> bool {
            let mstatus: usize;
            // SAFETY: clearing MIE in machine mode only masks interrupts.
            unsafe { core::arch::asm!("csrrci {0}, mstatus, 8", out(reg) mstatus) };
            mstatus & 8 != 0
        }
        unsafe fn release(was_enabled: bool) {
            if was_enabled {
                // SAFETY: restores the MIE bit saved by `acquire`.
                unsafe { core::arch::asm!("csrsi mstatus, 8") };
            }
        }
    }
}

#[cfg(target_arch = "riscv32")]
#[unsafe(no_mangle)]
extern "C" fn __rv32_start() -> ! {
    #[cfg(feature = "alloc")]
    heap::init();
    unsafe extern "C" {
        fn __rv32_main() -> u32;
    }
    // SAFETY: `__rv32_main` is defined by the program through `entry!` with this exact signature.
    let code = unsafe { __rv32_main() };
    exit(code)
}

#[cfg(target_arch = "riscv32")]
#[unsafe(no_mangle)]
extern "C" fn __rv32_trap_rust(mcause: u32, mepc: u32, mtval: u32) -> ! {
    println!("TRAP mcause={mcause:#x} mepc={mepc:#010x} mtval={mtval:#010x}");
    println!("RESULT fail: trap");
    exit(2)
}

#[cfg(all(target_arch = "riscv32", not(test)))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("PANIC {info}");
    println!("RESULT fail: panic");
    exit(3)
}
