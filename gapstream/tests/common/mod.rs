//! Helpers shared by the stream test binaries (`mod common;` in each): addresses and the raw
//! frame files the simulated drone streams. Each binary uses a part of them.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use gapstream::images::SourceSpec;

/// Any free port on the loopback interface.
pub fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// `frames` (324x244 each) written one after the other to `dir/name`: the source the simulated
/// drone reads, and the frames themselves for the comparison.
pub fn raw_file(dir: &Path, name: &str, frames: Vec<Vec<u8>>) -> (SourceSpec, Vec<Vec<u8>>) {
    let p = dir.join(name);
    std::fs::write(&p, frames.concat()).unwrap();
    (
        SourceSpec::Raw {
            path: p,
            width: 324,
            height: 244,
        },
        frames,
    )
}

/// `n` 324x244 frames of random-looking bytes (xorshift), each carrying its index in its first
/// 4 bytes, in `dir/frames.raw`.
pub fn raw_frames(dir: &Path, n: usize) -> (SourceSpec, Vec<Vec<u8>>) {
    let mut x = 0x1234_5678u32;
    let frames = (0..n)
        .map(|i| {
            let mut f: Vec<u8> = (0..324 * 244)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            f[..4].copy_from_slice(&(i as u32).to_le_bytes());
            f
        })
        .collect();
    raw_file(dir, "frames.raw", frames)
}
