//! AES-128-CTR instruction counts per variant (QEMU `-icount shift=0`, `minstret` around the
//! `apply_keystream` call only; key setup is a separate METRIC).
//!
//! Variants: `portable` (gap_rust_cipher_s::aes, plain Rust), the assembly kernels compiled for
//! this target, and `rustcrypto` (`ctr::Ctr128BE<aes::Aes128>`, the reference).
#![no_std]
#![no_main]

extern crate alloc;
use alloc::vec::Vec;
use cipher::{KeyIvInit, StreamCipher};
use gap_rust_cipher_s::aes::{self, Aes128CtrWith, Backend};
use rv32_qemu::{Rng, bench, count_instructions, metric};

const SIZES: [usize; 4] = [64, 1024, 8 * 1024, 32 * 1024];
const KEY: [u8; 16] = *b"gapstream-aes-k!";
/// A counter whose low byte is odd, so the first pair is partial as in general use.
const IV: [u8; 16] = [
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0x12, 0x35,
];

fn measure<C: KeyIvInit + StreamCipher>(
    variant: &str,
    buf: &mut [u8],
    check: &[Vec<u8>],
) -> Result<(), &'static str> {
    let (c, setup) = count_instructions(|| C::new_from_slices(&KEY, &IV));
    c.map_err(|_| "key/IV length")?;
    metric(&alloc::format!("aes128ctr_key_setup_{variant}"), setup);
    for (i, &n) in SIZES.iter().enumerate() {
        let data = &mut buf[..n];
        data.fill(0);
        let mut c = C::new_from_slices(&KEY, &IV).map_err(|_| "key/IV length")?;
        let ((), instr) =
            count_instructions(|| c.apply_keystream(core::hint::black_box(&mut *data)));
        if data != &check[i][..] {
            return Err("keystream differs from the reference");
        }
        bench("aes128ctr", variant, n, instr);
    }
    Ok(())
}

fn run<B: Backend>(buf: &mut [u8], check: &[Vec<u8>]) -> Result<(), &'static str> {
    measure::<Aes128CtrWith<B>>(B::NAME, buf, check)
}

fn main() -> Result<(), &'static str> {
    let mut buf = alloc::vec![0u8; 32 * 1024];
    if buf.as_ptr() as usize % 4 != 0 {
        return Err("benchmark buffer is not word aligned");
    }
    // Expected keystreams from the reference (computed outside the measured region).
    let check: Vec<Vec<u8>> = SIZES
        .iter()
        .map(|&n| {
            let mut v = alloc::vec![0u8; n];
            aes::Reference::new(&KEY.into(), &IV.into()).apply_keystream(&mut v);
            v
        })
        .collect();
    let _ = Rng::new(1);
    run::<aes::Portable>(&mut buf, &check)?;
    run::<aes::Rv32>(&mut buf, &check)?;
    measure::<aes::Reference>("rustcrypto", &mut buf, &check)?;
    Ok(())
}
rv32_qemu::entry!(main);
