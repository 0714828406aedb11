//! gapstream_jpeg on rv32 (QEMU): the portable encoder writes exactly the host's files (lengths
//! and digests of `gapstream_jpeg::testimage::GOLDEN`, computed on the host) for every test frame
//! (1x1 to 400x300, sizes that are not multiples of 8, qualities 1 to 100, 1 to 8 bands), every
//! shorter output buffer fails with `OutputFull` for a small frame, and a band coded on its own
//! is the same bytes as inside the whole file.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use gapstream_jpeg::band::encode_band;
use gapstream_jpeg::entropy::Out;
use gapstream_jpeg::tables::Tables;
use gapstream_jpeg::testimage::{CASES, GOLDEN, digest, fill};
use gapstream_jpeg::{Error, FrameSpec, Portable, encode};
use rv32_qemu::println;

fn main() -> Result<(), &'static str> {
    for (&(w, h, seed, quality, bands), &(len, want)) in CASES.iter().zip(GOLDEN.iter()) {
        let mut px = vec![0u8; w as usize * h as usize];
        fill(&mut px, w as usize, h as usize, seed);
        let spec = FrameSpec {
            width: w,
            height: h,
            quality,
            bands,
        };
        let layout = spec.layout().map_err(|_| "layout")?;
        let mut out = vec![0u8; layout.max_len()];
        let n = encode::<Portable>(&spec, &px, &mut out).map_err(|_| "encode failed")?;
        let d = digest(&out[..n]);
        println!("{w}x{h} q{quality} {bands} bands: {n} bytes, digest {d:016x}");
        if n != len as usize || d != want {
            println!("  want {len} bytes, digest {want:016x}");
            return Err("the rv32 encoder's file differs from the host's");
        }
        // Band by band into separate buffers: each band's bytes are a slice of the file.
        let t = Tables::new(quality);
        let mut at = layout.header_len();
        for i in 0..layout.bands {
            let mut buf = vec![0u8; layout.max_band_len(i)];
            let mut o = Out::new(&mut buf);
            encode_band::<Portable>(&layout, &t, i, &px, &mut o).map_err(|_| "band failed")?;
            if out[at..at + o.pos] != o.buf[..o.pos] {
                return Err("a band coded alone differs from the same band in the file");
            }
            at += o.pos;
        }
        if at + 2 != n {
            return Err("the bands do not add up to the file");
        }
    }
    // Every buffer shorter than the file fails cleanly.
    let (w, h) = (23usize, 17usize);
    let mut px = vec![0u8; w * h];
    fill(&mut px, w, h, 5);
    let spec = FrameSpec {
        width: w as u16,
        height: h as u16,
        quality: 90,
        bands: 2,
    };
    let mut out = vec![0u8; 4096];
    let n = encode::<Portable>(&spec, &px, &mut out).map_err(|_| "encode failed")?;
    for len in 0..n {
        if encode::<Portable>(&spec, &px, &mut out[..len]) != Err(Error::OutputFull) {
            return Err("a short buffer did not fail with OutputFull");
        }
    }
    println!("{} frames match the host, short buffers fail", CASES.len());
    Ok(())
}

rv32_qemu::entry!(main);
