//! Smoke test of the runtime itself: UART, heap, instruction counter, exit status.
#![no_std]
#![no_main]

extern crate alloc;
use rv32_qemu::{count_instructions, println};

fn main() -> Result<(), &'static str> {
    let v: alloc::vec::Vec<u32> = (0..1000).collect();
    let (sum, n) = count_instructions(|| core::hint::black_box(&v).iter().sum::<u32>());
    println!("hello from rv32: sum={sum} instructions={n}");
    if sum != 499_500 {
        return Err("heap-backed sum is wrong");
    }
    if n == 0 {
        return Err("minstret did not count (run QEMU with -icount shift=0)");
    }
    Ok(())
}
rv32_qemu::entry!(main);
