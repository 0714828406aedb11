//! `jpeg_decode`: any bytes → the receiver's decoder of verified JPEG frames
//! ([`gapstream::codec::decode`] with pixel format JPEG, `jpeg-decoder` underneath).
//!
//! Input: width u16, height u16 (little-endian: what the authenticated header claims), then the
//! payload. Invariants besides "no panic": a decoded frame has exactly `width × height` samples
//! (a file of another size is refused, not delivered); every prefix tried decodes without a panic
//! too (a truncated payload).
use gapstream::codec::{self, Codec, HostCoder};
use gapstream_drone::{FrameCoder, FrameFormat, PixelFormat};

/// The body of the `jpeg_decode` target.
pub fn jpeg_decode(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let w = u16::from_le_bytes([data[0], data[1]]) as usize;
    let h = u16::from_le_bytes([data[2], data[3]]) as usize;
    let payload = &data[4..];
    if let Some(Ok(px)) = codec::decode(PixelFormat::Jpeg, w, h, payload) {
        assert_eq!(px.len(), w * h, "sample count");
    }
    for cut in [payload.len() / 2, payload.len().saturating_sub(1)] {
        if let Some(Ok(px)) = codec::decode(PixelFormat::Jpeg, w, h, &payload[..cut]) {
            assert_eq!(px.len(), w * h, "sample count of a prefix");
        }
    }
}

/// Seeds: the drone's JPEG files of small pictures (1 and 3 bands, qualities 10, 75 and 100,
/// sizes that are not multiples of 8), with their true size in front.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for (w, h, q) in [
        (16u16, 16u16, 75u8),
        (23, 9, 10),
        (40, 30, 100),
        (8, 64, 50),
    ] {
        let px: Vec<u8> = (0..w as usize * h as usize)
            .map(|i| ((i % w as usize) * 9 + (i / w as usize) * 5) as u8)
            .collect();
        let fmt = FrameFormat {
            width: w,
            height: h,
            pixel: PixelFormat::Grey8,
        };
        let mut out = Vec::new();
        let mut c = HostCoder::new(Codec::Jpeg, q);
        c.code(fmt, &px, &mut out).expect("seed picture codes");
        let mut b = Vec::new();
        b.extend_from_slice(&w.to_le_bytes());
        b.extend_from_slice(&h.to_le_bytes());
        b.extend_from_slice(&out);
        v.push((format!("seed-{w}x{h}-q{q}"), b));
    }
    v
}
