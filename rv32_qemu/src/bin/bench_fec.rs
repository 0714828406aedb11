//! FEC encoder instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): the parity of one
//! block of CPX packets as the ESP32 bridge computes it (`gapstream_fec::code::encode`), for the
//! block shapes the bridge uses — WFB-ng's default k = 8, m = 4; a raw frame's half block with the
//! default redundancy (k = 39, m = 10); the adaptive mode's floor (k = 39, m = 2); a whole frame
//! as one block (k = 78, m = 14) — with 1,024-byte packets (the CPX wire packet of 1,020 bytes of
//! payload). `bytes` = the block's data bytes (the protected bytes), so instructions per byte is
//! the cost per protected byte. Each parity is checked by rebuilding m lost data packets from it.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use gapstream_fec::code;
use rv32_qemu::{Rng, bench, count_instructions};

const PACKET: usize = 1024;

fn run(rng: &mut Rng, k: usize, m: usize) -> Result<(), &'static str> {
    let data: Vec<Vec<u8>> = (0..k)
        .map(|_| {
            let mut p = vec![0u8; PACKET];
            rng.fill(&mut p);
            p
        })
        .collect();
    let l = code::symbol_len(PACKET);
    let mut parity = vec![vec![0u8; l]; m];
    let mut refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..]).collect();
    let (r, instr) = count_instructions(|| code::encode(core::hint::black_box(&data), &mut refs));
    if r != Ok(l) {
        return Err("encode failed");
    }
    let mut variant = heapless_name(k, m);
    bench("fec_encode", variant.as_str(), k * PACKET, instr);
    variant.clear();
    // Lose m data packets, rebuild them from the parity.
    let mut shards: Vec<Option<Vec<u8>>> = data
        .iter()
        .map(|d| code::data_symbol(d, l))
        .chain(parity.into_iter().map(Some))
        .collect();
    for i in 0..m.min(k) {
        shards[(i * 7) % k] = None;
    }
    code::reconstruct_data(k, &mut shards).map_err(|_| "reconstruct failed")?;
    for (i, d) in data.iter().enumerate() {
        if code::symbol_datagram(shards[i].as_ref().ok_or("missing")?) != Some(&d[..]) {
            return Err("a rebuilt packet differs");
        }
    }
    Ok(())
}

fn heapless_name(k: usize, m: usize) -> alloc::string::String {
    alloc::format!("k{k}m{m}")
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0xFEC0_2026);
    for (k, m) in [(8, 4), (39, 10), (39, 2), (78, 14)] {
        run(&mut rng, k, m)?;
    }
    Ok(())
}
rv32_qemu::entry!(main);
