//! Frame sources for the simulated camera (synthetic pattern, a folder of PGM/PNG images, a raw
//! file of concatenated frames) and PNG / PGM reading and writing for recording and the viewer.

use std::fs;
use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};

use gapstream_drone::testpattern::{self, Stamp};

/// Why images could not be loaded or written.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a PGM or PNG image ({why})")]
    Format { path: PathBuf, why: String },
    #[error("{path}: image is {w}x{h} but the stream is {sw}x{sh}")]
    SizeMismatch {
        path: PathBuf,
        w: usize,
        h: usize,
        sw: usize,
        sh: usize,
    },
    #[error("{path}: no .pgm or .png images in this folder")]
    EmptyFolder { path: PathBuf },
    #[error("{path}: raw file of {len} bytes holds no whole {w}x{h} frame")]
    RawTooShort {
        path: PathBuf,
        len: u64,
        w: usize,
        h: usize,
    },
    #[error("PNG encoding failed: {0}")]
    Encode(String),
}

/// An 8-bit single-channel image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grey {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// Parses a binary (P5) or ASCII (P2) PGM with maxval ≤ 255.
pub fn parse_pgm(bytes: &[u8]) -> Result<Grey, String> {
    let mut pos = 0usize;
    // Reads one whitespace-separated token, skipping `#` comments.
    let token = |pos: &mut usize| -> Result<String, String> {
        loop {
            while *pos < bytes.len() && bytes[*pos].is_ascii_whitespace() {
                *pos += 1;
            }
            if *pos < bytes.len() && bytes[*pos] == b'#' {
                while *pos < bytes.len() && bytes[*pos] != b'\n' {
                    *pos += 1;
                }
                continue;
            }
            break;
        }
        let start = *pos;
        while *pos < bytes.len() && !bytes[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
        if start == *pos {
            return Err("truncated header".into());
        }
        Ok(String::from_utf8_lossy(&bytes[start..*pos]).into_owned())
    };
    let magic = token(&mut pos)?;
    let num = |s: String| s.parse::<usize>().map_err(|_| format!("bad number {s:?}"));
    let width = num(token(&mut pos)?)?;
    let height = num(token(&mut pos)?)?;
    let maxval = num(token(&mut pos)?)?;
    if maxval == 0 || maxval > 255 {
        return Err(format!("maxval {maxval} not supported (8-bit only)"));
    }
    let n = width
        .checked_mul(height)
        .filter(|&n| n > 0 && n <= 1 << 26)
        .ok_or("bad size")?;
    let scale = |v: usize| ((v * 255 + maxval / 2) / maxval) as u8;
    let pixels = match magic.as_str() {
        "P5" => {
            let data = bytes
                .get(pos + 1..pos + 1 + n)
                .ok_or("truncated pixel data")?;
            data.iter().map(|&v| scale(v as usize)).collect()
        }
        "P2" => {
            let mut px = Vec::with_capacity(n);
            for _ in 0..n {
                let v = num(token(&mut pos)?)?;
                px.push(scale(v.min(maxval)));
            }
            px
        }
        m => return Err(format!("magic {m:?} is not P5 or P2")),
    };
    Ok(Grey {
        width,
        height,
        pixels,
    })
}

/// Binary PGM (P5).
pub fn encode_pgm(img: &Grey) -> Vec<u8> {
    let mut out = format!("P5\n{} {}\n255\n", img.width, img.height).into_bytes();
    out.extend_from_slice(&img.pixels);
    out
}

/// Decodes a PNG into 8-bit grey (colour is converted with Rec. 601 luma, alpha dropped).
pub fn parse_png(bytes: &[u8]) -> Result<Grey, String> {
    let mut dec = png::Decoder::new(BufReader::new(Cursor::new(bytes)));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("image too large")?];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let (w, h) = (info.width as usize, info.height as usize);
    let ch = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err("indexed PNG was not expanded".into()),
    };
    let buf = &buf[..info.buffer_size()];
    let pixels = buf
        .chunks_exact(ch)
        .map(|p| match ch {
            1 | 2 => p[0],
            _ => ((p[0] as u32 * 299 + p[1] as u32 * 587 + p[2] as u32 * 114 + 500) / 1000) as u8,
        })
        .collect::<Vec<u8>>();
    if pixels.len() != w * h {
        return Err("unexpected PNG row layout".into());
    }
    Ok(Grey {
        width: w,
        height: h,
        pixels,
    })
}

/// Encodes grey (1 channel) or RGB (3 channels) pixels as PNG with fast compression.
pub fn encode_png(
    width: usize,
    height: usize,
    channels: usize,
    pixels: &[u8],
) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(pixels.len() / 2 + 1024);
    let mut enc = png::Encoder::new(&mut out, width as u32, height as u32);
    enc.set_color(if channels == 3 {
        png::ColorType::Rgb
    } else {
        png::ColorType::Grayscale
    });
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    let mut w = enc
        .write_header()
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    w.write_image_data(pixels)
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    w.finish().map_err(|e| ImageError::Encode(e.to_string()))?;
    Ok(out)
}

/// Reads a PGM or PNG file (chosen by content).
pub fn load_image(path: &Path) -> Result<Grey, ImageError> {
    let bytes = fs::read(path).map_err(|source| ImageError::Io {
        path: path.into(),
        source,
    })?;
    let r = if bytes.starts_with(b"\x89PNG") {
        parse_png(&bytes)
    } else {
        parse_pgm(&bytes)
    };
    r.map_err(|why| ImageError::Format {
        path: path.into(),
        why,
    })
}

/// Bilinear demosaicing of an RGGB Bayer mosaic into RGB (3 bytes per pixel).
pub fn demosaic_rggb(raw: &[u8], width: usize, height: usize) -> Vec<u8> {
    let at = |x: isize, y: isize| -> u32 {
        let x = x.clamp(0, width as isize - 1) as usize;
        let y = y.clamp(0, height as isize - 1) as usize;
        raw[y * width + x] as u32
    };
    let mut out = vec![0u8; width * height * 3];
    for y in 0..height as isize {
        for x in 0..width as isize {
            let cross = (at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1)) / 4;
            let diag =
                (at(x - 1, y - 1) + at(x + 1, y - 1) + at(x - 1, y + 1) + at(x + 1, y + 1)) / 4;
            let horiz = (at(x - 1, y) + at(x + 1, y)) / 2;
            let vert = (at(x, y - 1) + at(x, y + 1)) / 2;
            let c = at(x, y);
            let (r, g, b) = match (y & 1, x & 1) {
                (0, 0) => (c, cross, diag), // red site
                (1, 1) => (diag, cross, c), // blue site
                (0, _) => (horiz, c, vert), // green on a red row
                _ => (vert, c, horiz),      // green on a blue row
            };
            let i = (y as usize * width + x as usize) * 3;
            out[i] = r as u8;
            out[i + 1] = g as u8;
            out[i + 2] = b as u8;
        }
    }
    out
}

/// Where the simulated camera's frames come from.
#[derive(Clone, Debug)]
pub enum SourceSpec {
    /// The moving test pattern with frame number and capture time burned in (optionally as an RGGB
    /// Bayer mosaic, like the colour HM01B0).
    Synthetic {
        width: usize,
        height: usize,
        bayer: bool,
    },
    /// Every `.pgm` / `.png` in a folder, in name order, looped.
    Folder(PathBuf),
    /// A file of concatenated `width * height` 8-bit frames, looped.
    Raw {
        path: PathBuf,
        width: usize,
        height: usize,
    },
}

/// A loaded frame source.
pub struct FrameSource {
    width: usize,
    height: usize,
    kind: Kind,
    /// A name burned into every synthetic frame ([`FrameSource::with_label`]).
    label: Option<Vec<u8>>,
}

enum Kind {
    Synthetic { bayer: bool },
    Frames(Vec<Vec<u8>>),
}

impl FrameSource {
    pub fn open(spec: &SourceSpec) -> Result<Self, ImageError> {
        match spec {
            SourceSpec::Synthetic {
                width,
                height,
                bayer,
            } => Ok(FrameSource {
                width: *width,
                height: *height,
                kind: Kind::Synthetic { bayer: *bayer },
                label: None,
            }),
            SourceSpec::Folder(dir) => {
                let rd = fs::read_dir(dir).map_err(|source| ImageError::Io {
                    path: dir.clone(),
                    source,
                })?;
                let mut files: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.extension().is_some_and(|e| {
                            e.eq_ignore_ascii_case("pgm") || e.eq_ignore_ascii_case("png")
                        })
                    })
                    .collect();
                files.sort();
                let first = files
                    .first()
                    .ok_or_else(|| ImageError::EmptyFolder { path: dir.clone() })?;
                let g0 = load_image(first)?;
                let (w, h) = (g0.width, g0.height);
                let mut frames = vec![g0.pixels];
                for f in &files[1..] {
                    let g = load_image(f)?;
                    if (g.width, g.height) != (w, h) {
                        return Err(ImageError::SizeMismatch {
                            path: f.clone(),
                            w: g.width,
                            h: g.height,
                            sw: w,
                            sh: h,
                        });
                    }
                    frames.push(g.pixels);
                }
                Ok(FrameSource {
                    width: w,
                    height: h,
                    kind: Kind::Frames(frames),
                    label: None,
                })
            }
            SourceSpec::Raw {
                path,
                width,
                height,
            } => {
                let bytes = fs::read(path).map_err(|source| ImageError::Io {
                    path: path.clone(),
                    source,
                })?;
                let n = width * height;
                if n == 0 || bytes.len() < n {
                    return Err(ImageError::RawTooShort {
                        path: path.clone(),
                        len: bytes.len() as u64,
                        w: *width,
                        h: *height,
                    });
                }
                let frames = bytes.chunks_exact(n).map(<[u8]>::to_vec).collect();
                Ok(FrameSource {
                    width: *width,
                    height: *height,
                    kind: Kind::Frames(frames),
                    label: None,
                })
            }
        }
    }

    /// Burns `name` (upper-cased; letters, digits, `-`, `_`) into every synthetic frame, on a
    /// black band along the bottom edge (the stamp rows at the top stay as they are): a ground
    /// station's tiles show which drone each picture came from. Other sources are left as they are.
    pub fn with_label(mut self, name: &str) -> Self {
        self.label = Some(name.bytes().map(|b| b.to_ascii_uppercase()).collect());
        self
    }

    pub fn width(&self) -> usize {
        self.width
    }
    pub fn height(&self) -> usize {
        self.height
    }
    /// True when the frames are an RGGB mosaic.
    pub fn bayer(&self) -> bool {
        matches!(self.kind, Kind::Synthetic { bayer: true })
    }
    /// Number of distinct frames before the source loops (`None`: endless synthetic scene).
    pub fn distinct_frames(&self) -> Option<usize> {
        match &self.kind {
            Kind::Synthetic { .. } => None,
            Kind::Frames(f) => Some(f.len()),
        }
    }

    /// Writes frame `index` (captured at `capture_ns`) into `out` (`width * height` bytes).
    pub fn fill(&self, index: u64, capture_ns: u64, out: &mut [u8]) -> Result<(), ImageError> {
        match &self.kind {
            Kind::Synthetic { bayer } => {
                let stamp = Stamp {
                    frame: index as u32,
                    capture_ns,
                };
                let r = if *bayer {
                    testpattern::render_bayer(out, self.width, self.height, stamp)
                } else {
                    testpattern::render(out, self.width, self.height, stamp)
                };
                r.map_err(|e| ImageError::Format {
                    path: "<synthetic>".into(),
                    why: e.to_string(),
                })?;
                if let Some(l) = &self.label {
                    draw_label(out, self.width, self.height, l);
                }
                Ok(())
            }
            Kind::Frames(frames) => {
                let f = &frames[(index % frames.len() as u64) as usize];
                out.copy_from_slice(f);
                Ok(())
            }
        }
    }
}

/// 5 × 7 glyphs (one byte per row, bit 4 = leftmost column) for the names burned into frames.
fn label_glyph(c: u8) -> [u8; 7] {
    match c {
        b'A' => [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        b'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        b'C' => [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        b'D' => [0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E],
        b'E' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        b'F' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
        b'G' => [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
        b'H' => [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        b'I' => [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        b'J' => [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
        b'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        b'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        b'M' => [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
        b'N' => [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        b'O' => [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        b'P' => [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        b'Q' => [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
        b'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        b'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
        b'T' => [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        b'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        b'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        b'W' => [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
        b'X' => [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        b'Y' => [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04],
        b'Z' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        b'0' => [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
        b'1' => [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        b'2' => [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
        b'3' => [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        b'4' => [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
        b'5' => [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        b'6' => [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
        b'7' => [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        b'8' => [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
        b'9' => [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        b'-' => [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
        b'_' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F],
        _ => [0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F],
    }
}

/// Rows of the label band at the bottom of a frame (2× glyphs with a 2-pixel margin).
pub const LABEL_BAND: usize = 18;

/// Burns `text` in white at 2× scale on a black band along the bottom edge of a `width × height`
/// grey frame (as many characters as fit). Frames lower than the band are left as they are.
pub fn draw_label(buf: &mut [u8], width: usize, height: usize, text: &[u8]) {
    if height < LABEL_BAND + 48 || buf.len() != width * height {
        return;
    }
    let y0 = height - LABEL_BAND;
    buf[y0 * width..].fill(0);
    for (i, &c) in text.iter().enumerate() {
        let cx = 8 + i * 12;
        if cx + 10 > width {
            break;
        }
        for (ry, bits) in label_glyph(c).iter().enumerate() {
            for rx in 0..5 {
                if bits & (0x10 >> rx) != 0 {
                    for dy in 0..2 {
                        let o = (y0 + 2 + ry * 2 + dy) * width + cx + rx * 2;
                        buf[o] = 255;
                        buf[o + 1] = 255;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pgm_ascii_with_comments_and_maxval() {
        let g = parse_pgm(b"P2\n# comment\n3 1\n# another\n15\n0 15 7\n").unwrap();
        assert_eq!(
            g,
            Grey {
                width: 3,
                height: 1,
                pixels: vec![0, 255, 119]
            }
        );
    }

    #[test]
    fn pgm_errors_are_clear() {
        assert!(
            parse_pgm(b"P6\n1 1\n255\n\0\0\0")
                .unwrap_err()
                .contains("P6")
        );
        assert!(
            parse_pgm(b"P5\n4 4\n255\n\0")
                .unwrap_err()
                .contains("truncated")
        );
        assert!(
            parse_pgm(b"P5\n4 4\n65535\n")
                .unwrap_err()
                .contains("8-bit")
        );
        assert!(parse_pgm(b"").is_err());
    }

    #[test]
    fn png_rgb_becomes_grey() {
        let rgb = [255u8, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255];
        let png = encode_png(4, 1, 3, &rgb).unwrap();
        let g = parse_png(&png).unwrap();
        assert_eq!(g.pixels, vec![76, 150, 29, 255]);
    }

    #[test]
    fn folder_source_loops_in_name_order_and_checks_sizes() {
        let d = tempfile::tempdir().unwrap();
        let a = Grey {
            width: 2,
            height: 2,
            pixels: vec![1, 2, 3, 4],
        };
        let b = Grey {
            width: 2,
            height: 2,
            pixels: vec![5, 6, 7, 8],
        };
        fs::write(
            d.path().join("b.png"),
            encode_png(2, 2, 1, &b.pixels).unwrap(),
        )
        .unwrap();
        fs::write(d.path().join("a.pgm"), encode_pgm(&a)).unwrap();
        fs::write(d.path().join("notes.txt"), "ignored").unwrap();
        let src = FrameSource::open(&SourceSpec::Folder(d.path().into())).unwrap();
        assert_eq!(
            (src.width(), src.height(), src.distinct_frames()),
            (2, 2, Some(2))
        );
        let mut out = [0u8; 4];
        src.fill(0, 0, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        src.fill(3, 0, &mut out).unwrap();
        assert_eq!(out, [5, 6, 7, 8]);
        fs::write(
            d.path().join("c.pgm"),
            encode_pgm(&Grey {
                width: 1,
                height: 1,
                pixels: vec![0],
            }),
        )
        .unwrap();
        let e = FrameSource::open(&SourceSpec::Folder(d.path().into()))
            .err()
            .unwrap();
        assert!(e.to_string().contains("1x1 but the stream is 2x2"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            FrameSource::open(&SourceSpec::Folder(empty.path().into())),
            Err(ImageError::EmptyFolder { .. })
        ));
    }

    #[test]
    fn raw_source() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.raw");
        fs::write(&p, [1u8, 2, 3, 4, 5, 6, 7]).unwrap();
        let src = FrameSource::open(&SourceSpec::Raw {
            path: p.clone(),
            width: 3,
            height: 1,
        })
        .unwrap();
        assert_eq!(src.distinct_frames(), Some(2));
        let mut out = [0u8; 3];
        src.fill(1, 0, &mut out).unwrap();
        assert_eq!(out, [4, 5, 6]);
        assert!(
            FrameSource::open(&SourceSpec::Raw {
                path: p,
                width: 8,
                height: 1
            })
            .is_err()
        );
    }

    #[test]
    fn synthetic_bayer_demosaics_to_colour_and_keeps_the_stamp() {
        let src = FrameSource::open(&SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer: true,
        })
        .unwrap();
        let mut raw = vec![0u8; 324 * 244];
        src.fill(9, 42, &mut raw).unwrap();
        assert_eq!(
            testpattern::decode(&raw, 324, 244),
            Some(Stamp {
                frame: 9,
                capture_ns: 42
            })
        );
        let rgb = demosaic_rggb(&raw, 324, 244);
        // Somewhere in the scene (below the stamp) the channels must differ: it is colour.
        let coloured = rgb[60 * 324 * 3..]
            .chunks(3)
            .filter(|p| p[0].abs_diff(p[1]) > 40 || p[1].abs_diff(p[2]) > 40)
            .count();
        assert!(coloured > 1000, "{coloured}");
    }

    #[test]
    fn demosaic_of_flat_grey_is_flat() {
        let raw = vec![100u8; 16 * 8];
        assert!(demosaic_rggb(&raw, 16, 8).iter().all(|&v| v == 100));
    }

    proptest! {
        #[test]
        fn pgm_roundtrip(w in 1usize..40, h in 1usize..40, seed: u8) {
            let pixels: Vec<u8> = (0..w * h).map(|i| (i as u8).wrapping_mul(seed | 1)).collect();
            let g = Grey { width: w, height: h, pixels };
            prop_assert_eq!(parse_pgm(&encode_pgm(&g)).unwrap(), g.clone());
            prop_assert_eq!(parse_png(&encode_png(w, h, 1, &g.pixels).unwrap()).unwrap(), g);
        }

        #[test]
        fn pgm_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_pgm(&bytes);
            let _ = parse_png(&bytes);
        }
    }

    /// The name is burned in below the stamp, which still decodes.
    #[test]
    fn a_label_is_burned_in_and_the_stamp_still_decodes() {
        let src = FrameSource::open(&SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer: false,
        })
        .unwrap()
        .with_label("drone-07");
        let mut a = vec![0u8; 324 * 244];
        src.fill(5, 123, &mut a).unwrap();
        let s = testpattern::decode(&a, 324, 244).unwrap();
        assert_eq!((s.frame, s.capture_ns), (5, 123));
        let band = &a[(244 - LABEL_BAND) * 324..];
        assert!(band.iter().all(|&p| p == 0 || p == 255));
        // 8 characters of 12 pixels, each with white pixels in its cell.
        for i in 0..8 {
            let lit = (0..LABEL_BAND)
                .flat_map(|y| (8 + i * 12..8 + i * 12 + 10).map(move |x| (x, y)))
                .filter(|&(x, y)| band[y * 324 + x] == 255)
                .count();
            assert!(lit > 4, "character {i} is blank");
        }
        let other = FrameSource::open(&SourceSpec::Synthetic {
            width: 324,
            height: 244,
            bayer: false,
        })
        .unwrap()
        .with_label("drone-08");
        let mut b = vec![0u8; 324 * 244];
        other.fill(5, 123, &mut b).unwrap();
        assert_ne!(a, b, "two names, two pictures");
    }
}
