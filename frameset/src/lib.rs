//! The picture set the codecs and the stream are measured on: real photographs that anyone can
//! install by package, cut to the HM01B0's frame, plus the synthetic test pattern.
//!
//! The photographs are ten of the PNG files scikit-image ships in its wheel (`skimage/data/`: the
//! cameraman, astronaut, brick, grass, gravel, coins, moon, coffee, chelsea, motorcycle), installed
//! into the project venv `.venv` by the set-up step (`scripts/setup.d/frames.test.pip`).
//! Each is converted to 8-bit grey (ITU-R BT.601 luma, as the HM01B0's monochrome variant sees a
//! scene) and its centre cut to the requested size without scaling, so the pixel statistics
//! (noise, edges, texture) are the camera's, not an interpolator's.
//!
//! | item | what |
//! |---|---|
//! | [`photos`] | the photographs at a given size |
//! | [`synthetic`] | the drone's synthetic pattern (moving stripes and burned-in stamps) |
//! | [`standard_set`] | the photographs + one synthetic frame at 324×244: what the benchmarks use |
//! | [`photo_dir`] | where the PNGs are found (`GAPSTREAM_PHOTO_DIR`, else the project venv's scikit-image) |
//!
//! The `frameset` binary writes the set as PGM files (`frameset --out DIR [--size WxH]`) for the
//! tools that read files (Pillow, CharLS, the GVSOC camera model).

use std::path::{Path, PathBuf};

/// Width of the HM01B0's QVGA frame, as the drone streams it.
pub const WIDTH: usize = 324;
/// Height of the HM01B0's QVGA frame.
pub const HEIGHT: usize = 244;

/// scikit-image's photographs used, in this order (files under `skimage/data/`). Only pictures at
/// least 324 × 244 and taken by a camera: no drawings or silhouettes (`horse`), no synthetic blur
/// (`clock_motion`), no microscopy, no JPEG sources whose 8 × 8 blocks would flatter a JPEG encoder.
pub const PHOTOS: &[&str] = &[
    "camera.png",
    "astronaut.png",
    "brick.png",
    "grass.png",
    "gravel.png",
    "coins.png",
    "moon.png",
    "coffee.png",
    "chelsea.png",
    "motorcycle_left.png",
];

/// One greyscale picture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// File stem (`camera`) or `synthetic`.
    pub name: String,
    pub width: usize,
    pub height: usize,
    /// `width * height` bytes, row-major, 8 bits per pixel.
    pub pixels: Vec<u8>,
}

/// Why the set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum FramesetError {
    #[error(
        "the photographs are not installed: {0} (run `scripts/setup.sh test`, which installs scikit-image into .venv, or set GAPSTREAM_PHOTO_DIR to a folder of PNG files)"
    )]
    NotInstalled(String),
    #[error("{path}: {msg}")]
    Png { path: PathBuf, msg: String },
    #[error("{path} is {width}x{height}, smaller than the {want_w}x{want_h} asked for")]
    TooSmall {
        path: PathBuf,
        width: usize,
        height: usize,
        want_w: usize,
        want_h: usize,
    },
    #[error("the synthetic pattern: {0:?}")]
    Pattern(gapstream_drone::testpattern::PatternError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The repository's top (where `.venv` lives).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("frameset/ has a parent")
        .to_path_buf()
}

/// The folder holding the photographs: `GAPSTREAM_PHOTO_DIR` when set, else scikit-image's data
/// folder in the project venv (`GAPSTREAM_VENV` or `.venv` at the repository's top).
pub fn photo_dir() -> Result<PathBuf, FramesetError> {
    if let Some(d) = std::env::var_os("GAPSTREAM_PHOTO_DIR") {
        return Ok(PathBuf::from(d));
    }
    let venv = std::env::var_os("GAPSTREAM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv"));
    let python = venv.join("bin/python");
    if !python.exists() {
        return Err(FramesetError::NotInstalled(format!(
            "no Python venv at {}",
            venv.display()
        )));
    }
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import os, skimage.data as d; print(os.path.dirname(d.__file__))",
        ])
        .output()
        .map_err(|e| FramesetError::NotInstalled(format!("{}: {e}", python.display())))?;
    if !out.status.success() {
        return Err(FramesetError::NotInstalled(format!(
            "{} cannot import skimage",
            python.display()
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// Reads a PNG (grey, grey + alpha, RGB or RGBA, 8 or 16 bits) as 8-bit grey (BT.601 luma,
/// rounded; alpha ignored).
pub fn read_grey_png(path: &Path) -> Result<Picture, FramesetError> {
    let png_err = |msg: String| FramesetError::Png {
        path: path.to_path_buf(),
        msg,
    };
    let file = std::fs::File::open(path).map_err(|source| FramesetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().map_err(|e| png_err(e.to_string()))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| png_err("image too large".into()))?;
    let mut buf = vec![0u8; size];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| png_err(e.to_string()))?;
    buf.truncate(info.buffer_size());
    let (w, h) = (info.width as usize, info.height as usize);
    let luma = |r: u8, g: u8, b: u8| {
        ((299 * r as u32 + 587 * g as u32 + 114 * b as u32 + 500) / 1000) as u8
    };
    let pixels: Vec<u8> = match info.color_type {
        png::ColorType::Grayscale => buf,
        png::ColorType::GrayscaleAlpha => buf.chunks_exact(2).map(|c| c[0]).collect(),
        png::ColorType::Rgb => buf
            .chunks_exact(3)
            .map(|c| luma(c[0], c[1], c[2]))
            .collect(),
        png::ColorType::Rgba => buf
            .chunks_exact(4)
            .map(|c| luma(c[0], c[1], c[2]))
            .collect(),
        png::ColorType::Indexed => return Err(png_err("palette left after EXPAND".into())),
    };
    if pixels.len() != w * h {
        return Err(png_err(format!("{} pixels for {w}x{h}", pixels.len())));
    }
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Picture {
        name,
        width: w,
        height: h,
        pixels,
    })
}

/// The centre `width × height` of a picture (no scaling).
pub fn centre_crop(p: &Picture, width: usize, height: usize) -> Option<Picture> {
    if p.width < width || p.height < height {
        return None;
    }
    let (x0, y0) = ((p.width - width) / 2, (p.height - height) / 2);
    let mut pixels = Vec::with_capacity(width * height);
    for y in y0..y0 + height {
        pixels.extend_from_slice(&p.pixels[y * p.width + x0..y * p.width + x0 + width]);
    }
    Some(Picture {
        name: p.name.clone(),
        width,
        height,
        pixels,
    })
}

/// The photographs of [`PHOTOS`], each cut to `width × height`.
pub fn photos(width: usize, height: usize) -> Result<Vec<Picture>, FramesetError> {
    let dir = photo_dir()?;
    PHOTOS
        .iter()
        .map(|f| {
            let path = dir.join(f);
            if !path.exists() {
                return Err(FramesetError::NotInstalled(format!(
                    "{} does not exist",
                    path.display()
                )));
            }
            let p = read_grey_png(&path)?;
            centre_crop(&p, width, height).ok_or(FramesetError::TooSmall {
                path,
                width: p.width,
                height: p.height,
                want_w: width,
                want_h: height,
            })
        })
        .collect()
}

/// Frame `frame` of the drone's synthetic pattern (`gapstream_drone::testpattern`), captured at
/// `frame` × 33.3 ms.
pub fn synthetic(width: usize, height: usize, frame: u32) -> Result<Picture, FramesetError> {
    let mut pixels = vec![0u8; width * height];
    let stamp = gapstream_drone::testpattern::Stamp {
        frame,
        capture_ns: frame as u64 * 33_333_333,
    };
    gapstream_drone::testpattern::render(&mut pixels, width, height, stamp)
        .map_err(FramesetError::Pattern)?;
    Ok(Picture {
        name: "synthetic".into(),
        width,
        height,
        pixels,
    })
}

/// What the codec benchmarks and the end-to-end runs use: every photograph at 324 × 244, then one
/// frame of the synthetic pattern.
pub fn standard_set() -> Result<Vec<Picture>, FramesetError> {
    let mut set = photos(WIDTH, HEIGHT)?;
    set.push(synthetic(WIDTH, HEIGHT, 1)?);
    Ok(set)
}

/// Writes a picture as binary PGM (P5).
pub fn write_pgm(path: &Path, p: &Picture) -> Result<(), FramesetError> {
    let mut out = format!("P5\n{} {}\n255\n", p.width, p.height).into_bytes();
    out.extend_from_slice(&p.pixels);
    std::fs::write(path, out).map_err(|source| FramesetError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centre_crop_takes_the_middle() {
        let p = Picture {
            name: "t".into(),
            width: 4,
            height: 3,
            pixels: (0..12).collect(),
        };
        let c = centre_crop(&p, 2, 1).unwrap();
        assert_eq!(c.pixels, vec![5, 6]);
        assert!(centre_crop(&p, 5, 1).is_none());
    }

    #[test]
    fn synthetic_frame_carries_its_stamp() {
        let p = synthetic(WIDTH, HEIGHT, 7).unwrap();
        let s = gapstream_drone::testpattern::decode(&p.pixels, WIDTH, HEIGHT).unwrap();
        assert_eq!(s.frame, 7);
    }

    /// The photographs load, have the frame's size, and are real pictures (many distinct levels,
    /// not a flat or synthetic image).
    #[test]
    fn the_standard_set_is_real_photographs() {
        let set = standard_set().expect("the frame set (scripts/setup.sh test installs it)");
        assert_eq!(set.len(), PHOTOS.len() + 1);
        for p in &set {
            assert_eq!(
                (p.width, p.height, p.pixels.len()),
                (WIDTH, HEIGHT, WIDTH * HEIGHT)
            );
            let mut seen = [false; 256];
            p.pixels.iter().for_each(|&v| seen[v as usize] = true);
            let levels = seen.iter().filter(|&&s| s).count();
            assert!(levels >= 2, "{}: {levels} grey levels", p.name);
            if p.name != "synthetic" {
                assert!(levels >= 48, "{}: only {levels} grey levels", p.name);
            }
        }
    }
}
