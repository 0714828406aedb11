//! JPEG instruction counts on rv32 (QEMU `-icount shift=0`, `minstret`): the portable encoder of
//! `gapstream_jpeg` (the arithmetic of the GAP8 cluster's PULP kernels in plain rv32imc) on
//! 324x244 test frames at quality 50 / 75 / 90, one band (the whole frame on one core, as a
//! cluster core codes its band); `bytes` in the BENCH line is the frame's pixel count, so the
//! table's last column is instructions per pixel. The files' sizes are printed as METRIC lines
//! (`jpeg_check` proves on QEMU that this encoder writes the host's bytes).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use gapstream_jpeg::testimage::fill;
use gapstream_jpeg::{FrameSpec, Portable, encode};
use rv32_qemu::{bench, count_instructions, metric};

fn main() -> Result<(), &'static str> {
    let (w, h) = (324usize, 244usize);
    let mut px = vec![0u8; w * h];
    // Frame 9: gradient, shapes, fine checker texture and noise.
    fill(&mut px, w, h, 9);
    for quality in [50u8, 75, 90] {
        let spec = FrameSpec {
            width: w as u16,
            height: h as u16,
            quality,
            bands: 1,
        };
        let mut out = vec![0u8; spec.layout().map_err(|_| "layout")?.max_len()];
        let (r, instr) = count_instructions(|| encode::<Portable>(&spec, &px, &mut out));
        let n = r.map_err(|_| "encode failed")?;
        let name = match quality {
            50 => "portable-q50",
            75 => "portable-q75",
            _ => "portable-q90",
        };
        bench("jpeg", name, w * h, instr);
        metric(
            match quality {
                50 => "jpeg_q50_bytes",
                75 => "jpeg_q75_bytes",
                _ => "jpeg_q90_bytes",
            },
            n as u64,
        );
    }
    Ok(())
}

rv32_qemu::entry!(main);
