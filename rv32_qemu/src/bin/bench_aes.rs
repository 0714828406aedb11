//! AES-128-CTR instruction counts per variant (QEMU `-icount shift=0`, `minstret` around the
//! `apply_keystream` call only; key setup is a separate METRIC).
//!
//! Variants: `portable` (gap_rust_cipher_s::aes, plain Rust), `rv32` (rv32imc assembly), `pulp`
//! (PULP assembly; `p.ror` emulated by a trap handler and each one counted as one instruction, as
//! a RI5CY core retires it), and `rustcrypto` (`ctr::Ctr128BE<aes::Aes128>`, the reference).
#![no_std]
#![no_main]

extern crate alloc;
use alloc::vec::Vec;
use cipher::{KeyIvInit, StreamCipher};
use gap_rust_cipher_s::aes::{self, Aes128CtrWith, Backend};
use rv32_qemu::{bench, count_instructions, metric};

#[path = "aes_support/pulp_emu.rs"]
mod pulp_emu;

const SIZES: [usize; 4] = [64, 1024, 8 * 1024, 32 * 1024];
const KEY: [u8; 16] = *b"gapstream-aes-k!";
/// A counter whose low byte is odd, so the first pair is partial as in general use.
const IV: [u8; 16] = [
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0x12, 0x35,
];

/// Retired instructions of a closure (`count_instructions`, or the PULP emulator's count).
type Counter<'a> = &'a dyn Fn(&mut dyn FnMut()) -> u64;

fn measure<C: KeyIvInit + StreamCipher>(
    variant: &str,
    buf: &mut [u8],
    check: &[Vec<u8>],
    count: Counter<'_>,
) -> Result<(), &'static str> {
    let (c, setup) = count_instructions(|| C::new_from_slices(&KEY, &IV));
    c.map_err(|_| "key/IV length")?;
    metric(&alloc::format!("aes128ctr_key_setup_{variant}"), setup);
    for (i, &n) in SIZES.iter().enumerate() {
        let data = &mut buf[..n];
        data.fill(0);
        let mut c = C::new_from_slices(&KEY, &IV).map_err(|_| "key/IV length")?;
        let instr = count(&mut || c.apply_keystream(core::hint::black_box(&mut *data)));
        if data != &check[i][..] {
            return Err("keystream differs from the reference");
        }
        bench("aes128ctr", variant, n, instr);
    }
    Ok(())
}

fn plain(f: &mut dyn FnMut()) -> u64 {
    count_instructions(f).1
}

fn run<B: Backend>(
    buf: &mut [u8],
    check: &[Vec<u8>],
    count: Counter<'_>,
) -> Result<(), &'static str> {
    measure::<Aes128CtrWith<B>>(B::NAME, buf, check, count)
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
    run::<aes::Portable>(&mut buf, &check, &plain)?;
    run::<aes::Rv32>(&mut buf, &check, &plain)?;
    // PULP: QEMU cannot execute p.ror; a trap handler emulates it and the count is corrected to
    // one instruction per p.ror (what a RI5CY core retires).
    let emu = pulp_emu::PulpEmu::install()?;
    metric("pulp_emulation_extra_instructions_per_pror", emu.extra());
    let pulp_count = |f: &mut dyn FnMut()| emu.count(f).1;
    run::<aes::Pulp>(&mut buf, &check, &pulp_count)?;
    drop(emu);
    measure::<aes::Reference>("rustcrypto", &mut buf, &check, &plain)?;
    Ok(())
}
rv32_qemu::entry!(main);
