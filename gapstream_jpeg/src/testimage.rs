//! Deterministic test frames (no files, no allocation) and a digest, so that a bare-metal program
//! (QEMU, GVSOC) and the host can code the same pictures and compare the files they get.
//!
//! A frame mixes what a camera sees: a smooth gradient, a few hard-edged shapes, fine texture
//! and sensor-like noise, in proportions set by the frame's `seed`.

/// xorshift32 step.
fn next(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

/// Fills `pixels` (`width × height`, row-major) with test frame `seed`.
pub fn fill(pixels: &mut [u8], width: usize, height: usize, seed: u32) {
    let mut rng = seed.wrapping_mul(0x9e37_79b9) | 1;
    let noise = (seed % 4) * 6; // 0, 6, 12, 18 levels of noise
    let texture = seed % 3; // none, fine, coarse
    let (cx, cy) = (
        (seed as usize * 37) % width.max(1),
        (seed as usize * 53) % height.max(1),
    );
    for y in 0..height {
        for x in 0..width {
            // Gradient across the frame.
            let mut v = (x * 160 / width.max(1) + y * 80 / height.max(1)) as i32 + 8;
            // A disc and a bar with hard edges.
            let (dx, dy) = (x as i32 - cx as i32, y as i32 - cy as i32);
            if dx * dx + dy * dy < (width.min(height) as i32 / 4).pow(2) {
                v = 255 - v;
            }
            if (y / 8 + x / 16) % 7 == 3 {
                v = v / 3 + 10;
            }
            // Texture: a checker of period 2 or 6 pixels.
            match texture {
                1 => v += if (x ^ y) & 1 == 0 { 12 } else { -12 },
                2 => v += if (x / 3 + y / 3) % 2 == 0 { 20 } else { -20 },
                _ => {}
            }
            if noise > 0 {
                v += (next(&mut rng) % (2 * noise + 1)) as i32 - noise as i32;
            }
            pixels[y * width + x] = v.clamp(0, 255) as u8;
        }
    }
}

/// FNV-1a (64-bit) over the bytes of `data`.
pub fn digest(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The frames the rv32 programs check against the host (`width, height, seed, quality, bands`):
/// non-multiples of 8, a single pixel, a single block row, the camera frame, every band count.
pub const CASES: [(u16, u16, u32, u8, u8); 12] = [
    (1, 1, 1, 75, 1),
    (7, 9, 2, 50, 2),
    (8, 8, 3, 100, 1),
    (13, 21, 4, 1, 3),
    (64, 8, 5, 90, 8),
    (100, 75, 6, 75, 4),
    (161, 40, 7, 60, 5),
    (200, 130, 8, 95, 6),
    (324, 244, 9, 75, 8),
    (324, 244, 10, 50, 1),
    (324, 244, 11, 90, 7),
    (400, 300, 12, 75, 8),
];

/// `(length, digest)` of the file [`crate::encode`] writes for each of [`CASES`], as the host
/// computes it (checked by this module's test; the rv32 programs compare their own output with
/// it, so a QEMU run proves the rv32 build writes the host's bytes).
pub const GOLDEN: [(u32, u64); 12] = [
    (332, 0x3b10_65e8_a6c5_1463),
    (363, 0xf2c0_59da_1f26_cc2a),
    (406, 0xdd79_4958_75f6_5e27),
    (351, 0x4ddc_cbbb_1c10_4572),
    (577, 0x63d9_0efa_4545_6cfe),
    (1763, 0x1f35_0cab_6818_9981),
    (1668, 0xa72f_8b17_a038_b939),
    (15672, 0xc2a9_bef4_a9c7_e078),
    (6988, 0x7977_cb31_954d_deac),
    (12580, 0xf68d_f853_eba1_73fe),
    (39043, 0xde2d_474e_e316_155a),
    (4523, 0xfdb9_193b_856c_be43),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameSpec, Portable, encode};

    #[test]
    fn golden_files_are_the_hosts() {
        let mut got = std::vec::Vec::new();
        for &(w, h, seed, quality, bands) in &CASES {
            let mut px = std::vec![0u8; w as usize * h as usize];
            fill(&mut px, w as usize, h as usize, seed);
            let spec = FrameSpec {
                width: w,
                height: h,
                quality,
                bands,
            };
            let mut out = std::vec![0u8; spec.layout().unwrap().max_len()];
            let n = encode::<Portable>(&spec, &px, &mut out).unwrap();
            got.push((n as u32, digest(&out[..n])));
        }
        let text: std::vec::Vec<std::string::String> = got
            .iter()
            .map(|(n, d)| std::format!("({n}, {d:#018x})"))
            .collect();
        assert_eq!(
            got[..],
            GOLDEN[..],
            "the encoder's output changed: if intended, set GOLDEN to [{}]",
            text.join(", ")
        );
    }
}
