//! GHASH instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): this crate's three
//! constant-time multiply kernels (`half`: 16×16 products with `mul`, the default; `wide`: 32×32→64
//! products with `mul`+`mulhu`; `low`: low halves only with bit-reversed operands) and RustCrypto
//! `ghash` (its portable soft backend), over
//! 256 B, 1 KiB, 8 KiB. Only the hashing is counted (key preparation is a separate METRIC), and
//! every result is checked against RustCrypto. Also counts one `y·H^k` (the per-core combination
//! factor) for a 128 KiB frame split in 8.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use gap_rust_cipher_s::ghash::{Ghash, field};
use ghash::universal_hash::UniversalHash;
use rv32_qemu::{Rng, bench, count_instructions, metric};

const SIZES: [usize; 3] = [256, 1024, 8 * 1024];
const MAX: usize = 8 * 1024;

#[repr(C, align(16))]
struct Buf([u8; MAX]);

fn reference(h: &[u8; 16], data: &[u8]) -> [u8; 16] {
    let mut g = ghash::GHash::new(&(*h).into());
    g.update_padded(data);
    g.finalize().into()
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0x6A45_11C0);
    let mut h = [0u8; 16];
    rng.fill(&mut h);
    let mut data = Box::new(Buf([0; MAX]));
    rng.fill(&mut data.0);
    let (g, setup) = count_instructions(|| Ghash::new(core::hint::black_box(&h)));
    drop(g);
    metric("ghash_key_setup_instructions", setup);
    fn run<M: field::Multiplier>(name: &str, h: &[u8; 16], data: &Buf) -> Result<(), &'static str> {
        for &n in &SIZES {
            let mut g = Ghash::<M>::with_kernel(h);
            let (_, instr) =
                count_instructions(|| g.update_blocks(core::hint::black_box(&data.0[..n])));
            if g.state() != reference(h, &data.0[..n]) {
                return Err("GHASH differs from RustCrypto ghash");
            }
            bench("ghash", name, n, instr);
        }
        Ok(())
    }
    run::<field::Wide>("wide", &h, &data)?;
    run::<field::Low>("low", &h, &data)?;
    run::<field::Half>("half", &h, &data)?;
    for &n in &SIZES {
        let mut g = ghash::GHash::new(&h.into());
        let (_, instr) =
            count_instructions(|| g.update_padded(core::hint::black_box(&data.0[..n])));
        if <[u8; 16]>::from(g.finalize()) != reference(&h, &data.0[..n]) {
            return Err("RustCrypto ghash is not deterministic");
        }
        bench("ghash", "rustcrypto", n, instr);
    }
    // The last-but-one core's factor for 128 KiB on 8 cores: H^(1024 + 1).
    let y = field::load(&h);
    let (_, pow) = count_instructions(|| field::mul_pow(core::hint::black_box(&y), &y, 1025));
    metric("ghash_mul_pow_1025_instructions", pow);
    Ok(())
}
rv32_qemu::entry!(main);
