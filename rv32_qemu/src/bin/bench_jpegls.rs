//! JPEG-LS instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): the portable line
//! coder of `gapstream_jpegls` over a 324×244 frame (the HM01B0's) in one and in 8 bands (what 8
//! cluster cores code), for two pictures made here: a smooth scene with sensor-like noise (a
//! photograph's statistics: mostly regular mode) and a flat scene with edges (mostly run mode).
//! Only `encode` is counted; every stream is decoded again and compared with the picture.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use gapstream_jpegls::{Layout, Plan, decode, encode};
use rv32_qemu::{Rng, bench, count_instructions};

const W: usize = 324;
const H: usize = 244;

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0x7a5e_1505);
    let mut noisy = vec![0u8; W * H];
    for (i, p) in noisy.iter_mut().enumerate() {
        let (x, y) = ((i % W) as i32, (i / W) as i32);
        let v = 128 + (x - 160) * (y - 120) / 120 + ((x / 9 + y / 7) % 5) * 6;
        *p = (v + (rng.next_u32() % 9) as i32 - 4).clamp(0, 255) as u8;
    }
    let mut flat = vec![0u8; W * H];
    for (i, p) in flat.iter_mut().enumerate() {
        let (x, y) = (i % W, i / W);
        *p = if (x / 40 + y / 30) % 2 == 0 { 60 } else { 190 };
    }
    for (name, px) in [("noisy", &noisy), ("flat", &flat)] {
        for bands in [1, 8] {
            let plan = Plan::new(W, H, Layout::Grey, bands).map_err(|_| "plan")?;
            let mut out = vec![0u8; plan.max_encoded_len()];
            let (r, instr) = count_instructions(|| {
                encode(
                    &plan,
                    core::hint::black_box(px),
                    core::hint::black_box(&mut out),
                )
            });
            let n = r.map_err(|_| "encode failed")?;
            let img = decode(&out[..n]).map_err(|_| "our stream does not decode")?;
            if img.samples != *px {
                return Err("decoded picture differs");
            }
            let variant = alloc::format!("portable-{name}-{bands}b");
            bench("jpegls", &variant, W * H, instr);
            rv32_qemu::metric(
                &alloc::format!("jpegls_{name}_{bands}b_coded_bytes"),
                n as u64,
            );
        }
    }
    Ok(())
}
rv32_qemu::entry!(main);
