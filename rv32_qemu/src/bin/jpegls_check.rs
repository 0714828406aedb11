//! `gapstream_jpegls` on rv32 (`make qemu-test`): pictures of several sizes, kinds and band
//! counts, grey and Bayer, coded by the no_std encoder (`encode`, no allocation) and decoded
//! again by the decoder, both compiled for riscv32imc; every picture must come back unchanged and
//! every stream must be the one the portable coder's host build writes for it (its length and
//! FNV-1a digest, pinned below from a host run of the same pictures).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use gapstream_jpegls::{Layout, Plan, decode, decode_bayer, encode};
use rv32_qemu::{Rng, println};

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0x0151_e5ed);
    let mut total = 0u64;
    let mut streams = 0u64;
    for (w, h, layout, bands) in [
        (1, 1, Layout::Grey, 1),
        (37, 23, Layout::Grey, 3),
        (324, 40, Layout::Grey, 8),
        (64, 48, Layout::BayerRggb, 2),
    ] {
        for kind in 0..3u32 {
            let mut px = vec![0u8; w * h];
            for (i, p) in px.iter_mut().enumerate() {
                let (x, y) = (i % w, i / w);
                *p = match kind {
                    0 => rng.next_u32() as u8,
                    1 => ((x * 2 + y * 3) as u32 + rng.next_u32() % 5) as u8,
                    _ => {
                        if (x / 8 + y / 6) % 2 == 0 {
                            40
                        } else {
                            200
                        }
                    }
                };
            }
            let plan = Plan::new(w, h, layout, bands).map_err(|_| "plan")?;
            let mut out = vec![0u8; plan.max_encoded_len()];
            let n = encode(&plan, &px, &mut out).map_err(|_| "encode")?;
            let back = match layout {
                Layout::Grey => decode(&out[..n]).map_err(|_| "decode")?.samples,
                Layout::BayerRggb => decode_bayer(&out[..n]).map_err(|_| "decode Bayer")?.2,
            };
            if back != px {
                return Err("the decoded picture differs");
            }
            total = total.wrapping_mul(31).wrapping_add(fnv(&out[..n]));
            streams += 1;
        }
    }
    println!("jpegls_check: {streams} streams round-trip, combined digest {total:016x}");
    if total != EXPECTED {
        return Err("the streams differ from the host encoder's");
    }
    Ok(())
}

/// The combined digest of the same streams from the host build (`cargo test -p
/// gapstream_jpegls --test rv32_digest`).
const EXPECTED: u64 = 0x2c73_cc30_a1b3_df52;

rv32_qemu::entry!(main);
