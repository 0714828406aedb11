//! Poly1305 instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): the two portable
//! limb radices of `gap_rust_cipher_s::poly1305` (2^26: 25 products of 64 bits per block; 2^32:
//! 16 of 64 and 4 of 32 bits) over whole blocks from a word-aligned buffer, and RustCrypto's
//! `poly1305` (soft backend) as the anchor, at 64 B, 1 KiB, 8 KiB, 32 KiB. Only the block loop
//! is counted; every measured accumulator is turned into a tag and checked against RustCrypto.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use gap_rust_cipher_s::poly1305::{BlockKernel, Fe, Poly1305Key, Radix26, Radix32};
use poly1305::universal_hash::KeyInit;
use rv32_qemu::{Rng, bench, count_instructions};

const SIZES: [usize; 4] = [64, 1024, 8 * 1024, 32 * 1024];
const MAX: usize = 32 * 1024;

#[repr(C, align(16))]
struct Buf([u8; MAX]);

fn reference(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    poly1305::Poly1305::new(key.into())
        .compute_unpadded(msg)
        .into()
}

fn run<K: BlockKernel>(variant: &str, key: &[u8; 32], data: &Buf) -> Result<(), &'static str> {
    let k = Poly1305Key::new(key);
    for &n in &SIZES {
        let mut acc = Fe::ZERO;
        let ((), instr) =
            count_instructions(|| K::blocks(&k, &mut acc, core::hint::black_box(&data.0[..n])));
        if k.tag(&acc) != reference(key, &data.0[..n]) {
            return Err("benchmarked Poly1305 differs from RustCrypto poly1305");
        }
        bench("poly1305", variant, n, instr);
    }
    Ok(())
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0x9017_1305);
    let mut key = [0u8; 32];
    rng.fill(&mut key);
    let mut data = Box::new(Buf([0; MAX]));
    rng.fill(&mut data.0);
    run::<Radix26>("radix26", &key, &data)?;
    run::<Radix32>("radix32", &key, &data)?;
    for &n in &SIZES {
        let (t, instr) =
            count_instructions(|| reference(&key, core::hint::black_box(&data.0[..n])));
        core::hint::black_box(t);
        bench("poly1305", "rustcrypto", n, instr);
    }
    Ok(())
}
rv32_qemu::entry!(main);
