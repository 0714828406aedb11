//! Binary greyscale PGM (P5, maxval 255) frames: the camera model's input (`camera/image-stream`).

use std::path::Path;

/// Width and height of the AI-deck's HM01B0 frames.
pub const WIDTH: usize = 324;
pub const HEIGHT: usize = 244;

/// Why a PGM could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PgmError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}: not a binary 8-bit PGM (P5, maxval 255)")]
    Format(String),
}

/// The P5 file for `pixels` (`width * height` bytes).
pub fn encode(width: usize, height: usize, pixels: &[u8]) -> Vec<u8> {
    let mut out = format!("P5\n{width} {height}\n255\n").into_bytes();
    out.extend_from_slice(pixels);
    out
}

/// Pixels, width, height of a P5 file.
pub fn decode(bytes: &[u8], name: &str) -> Result<(Vec<u8>, usize, usize), PgmError> {
    let bad = || PgmError::Format(name.to_string());
    // Header: magic, width, height, maxval, separated by whitespace (no comments written by us).
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let s = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if s == i {
            return Err(bad());
        }
        fields.push(std::str::from_utf8(&bytes[s..i]).map_err(|_| bad())?);
    }
    if fields[0] != "P5" || fields[3] != "255" {
        return Err(bad());
    }
    let w: usize = fields[1].parse().map_err(|_| bad())?;
    let h: usize = fields[2].parse().map_err(|_| bad())?;
    let data = bytes.get(i + 1..).ok_or_else(bad)?;
    if data.len() != w * h {
        return Err(bad());
    }
    Ok((data.to_vec(), w, h))
}

pub fn read(path: &Path) -> Result<Vec<u8>, PgmError> {
    let name = path.display().to_string();
    let b = std::fs::read(path).map_err(|source| PgmError::Io {
        path: name.clone(),
        source,
    })?;
    let (p, w, h) = decode(&b, &name)?;
    if (w, h) != (WIDTH, HEIGHT) {
        return Err(PgmError::Format(name));
    }
    Ok(p)
}

/// Input frame `index` of a run: seeded noise over the whole 8-bit range (so every bit of every
/// pixel is checked), with the index in the first pixel row; two different indices never give the
/// same frame.
pub fn input_frame(seed: u64, index: u32) -> Vec<u8> {
    let mut x = seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index as u64 + 1)) | 1;
    let mut px: Vec<u8> = (0..WIDTH * HEIGHT)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    px[..4].copy_from_slice(&index.to_le_bytes());
    px
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_errors() {
        let f = input_frame(1, 3);
        let (p, w, h) = decode(&encode(WIDTH, HEIGHT, &f), "x").unwrap();
        assert_eq!((w, h), (WIDTH, HEIGHT));
        assert_eq!(p, f);
        assert!(decode(b"P6\n1 1\n255\n\0\0\0", "x").is_err());
        assert!(decode(b"P5\n2 2\n255\n\0", "x").is_err());
        assert!(decode(b"P5\n# c\n1 1\n255\n\x07", "x").is_ok());
    }

    #[test]
    fn input_frames_are_distinct_and_use_every_bit() {
        let a = input_frame(7, 0);
        let b = input_frame(7, 1);
        assert_ne!(a, b);
        assert_eq!(a[..4], 0u32.to_le_bytes());
        let or = a.iter().fold(0u8, |x, y| x | y);
        let and = a.iter().fold(0xFFu8, |x, y| x & y);
        assert_eq!((or, and), (0xFF, 0));
    }
}
