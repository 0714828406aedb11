//! Helpers shared by the integration tests: decoding with zune-jpeg, PSNR.
#![allow(dead_code)]

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

/// Decodes a greyscale JPEG with zune-jpeg in strict mode: `(width, height, pixels)`.
pub fn zune_decode(jpeg: &[u8]) -> Result<(usize, usize, Vec<u8>), String> {
    let opts = DecoderOptions::default()
        .set_strict_mode(true)
        .jpeg_set_out_colorspace(ColorSpace::Luma);
    let mut d = JpegDecoder::new_with_options(ZCursor::new(jpeg), opts);
    let pixels = d.decode().map_err(|e| format!("{e:?}"))?;
    let info = d.info().ok_or("no image info")?;
    Ok((info.width as usize, info.height as usize, pixels))
}

/// PSNR in dB of `b` against `a` (8-bit samples); infinite for identical pictures.
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    if se == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (255.0f64 * 255.0 * a.len() as f64 / se).log10()
}

/// The segments of a JPEG file before the scan: `(marker, payload)` (SOI excluded, SOS included).
pub fn segments(jpeg: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 2;
    while at + 4 <= jpeg.len() {
        assert_eq!(jpeg[at], 0xff, "marker expected at {at}");
        let m = jpeg[at + 1];
        let len = u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]) as usize;
        v.push((m, jpeg[at + 4..at + 2 + len].to_vec()));
        at += 2 + len;
        if m == 0xda {
            break;
        }
    }
    v
}
