//! ChaCha20 instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): portable (RustCrypto
//! `chacha20`) and the RV32IMC assembly backend, in-place on a word-aligned buffer of 64 B, 1 KiB,
//! 8 KiB, 32 KiB. Only the `apply_keystream` call is counted; key/nonce setup (for the assembly
//! backend: the precomputed column round) is a separate METRIC. Every measured output is checked
//! against RustCrypto, so the figures are for real work.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use cipher::{KeyIvInit, StreamCipher};
use gap_rust_cipher_s::chacha::{ChaCha20Portable, ChaCha20Rv32};
use rv32_qemu::{Rng, bench, count_instructions, metric};

const SIZES: [usize; 4] = [64, 1024, 8 * 1024, 32 * 1024];
const MAX: usize = 32 * 1024;

#[repr(C, align(16))]
struct Buf([u8; MAX]);

fn run<C: KeyIvInit + StreamCipher>(
    variant: &str,
    key: &[u8; 32],
    nonce: &[u8; 12],
    data: &Buf,
) -> Result<(), &'static str> {
    let (c, setup) = count_instructions(|| C::new_from_slices(key, nonce));
    drop(c);
    metric(
        &alloc::format!("chacha20_key_setup_{variant}_instructions"),
        setup,
    );
    let mut buf = Box::new(Buf([0; MAX]));
    for &n in &SIZES {
        buf.0[..n].copy_from_slice(&data.0[..n]);
        let mut c = C::new_from_slices(key, nonce).map_err(|_| "key/nonce length")?;
        let ((), instr) =
            count_instructions(|| c.apply_keystream(core::hint::black_box(&mut buf.0[..n])));
        let mut want = data.0[..n].to_vec();
        chacha20::ChaCha20::new(key.into(), nonce.into()).apply_keystream(&mut want);
        if buf.0[..n] != want[..] {
            return Err("benchmarked output differs from RustCrypto chacha20");
        }
        bench("chacha20", variant, n, instr);
    }
    Ok(())
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0xC4AC_4A20);
    let mut key = [0u8; 32];
    let mut nonce = [0u8; 12];
    rng.fill(&mut key);
    rng.fill(&mut nonce);
    let mut data = Box::new(Buf([0; MAX]));
    rng.fill(&mut data.0);
    run::<ChaCha20Portable>("portable", &key, &nonce, &data)?;
    run::<ChaCha20Rv32>("rv32-asm", &key, &nonce, &data)?;
    Ok(())
}
rv32_qemu::entry!(main);
