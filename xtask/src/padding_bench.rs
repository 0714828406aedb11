//! `cargo xtask bench-padding`: what length-hiding padding costs and what it leaves, measured on
//! the frame set.
//!
//! Two sets of 324×244 grey frames, coded as the simulated drone codes them (`gapstream_jpeg` at
//! quality 75 with 8 bands; `gapstream_jpegls` with the plan `BandChooser` takes from each
//! frame itself, at most 8 bands):
//! * `photos`: the frame set's photographs (one frame each: distinct scenes);
//! * `motion`: for each photograph, a 324×244 window moving in `STEPS` steps from the top-left
//!   corner of the full picture to its bottom-right (a drone panning over one scene).
//!
//! For each padding setting it prints the mean bytes per frame, the overhead over the coded bytes
//! (Σ padded / Σ coded − 1), the number of distinct sizes, and the Shannon entropy in bits of the
//! distribution of sizes over the set (what one frame's size tells an observer who knows the set;
//! at most log2 of the number of frames). For `motion` also the mean over the sequences of the
//! entropy of the sizes within one sequence (what the size says about where the camera is in a
//! scene it is known to be looking at).

use std::collections::BTreeMap;

use gapstream_protocol::padding::Padding;

/// Frames per moving-window sequence.
const STEPS: usize = 64;
const W: usize = frameset::WIDTH;
const H: usize = frameset::HEIGHT;

/// Shannon entropy (bits) of the empirical distribution of `sizes`.
fn entropy(sizes: &[usize]) -> f64 {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for &s in sizes {
        *counts.entry(s).or_default() += 1;
    }
    let n = sizes.len() as f64;
    let h: f64 = counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    // One size: 0 bits (the sum is -0.0, printed without the sign).
    if h > 0.0 { h } else { 0.0 }
}

fn distinct(sizes: &[usize]) -> usize {
    let mut v = sizes.to_vec();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// A coder of a sequence of frames (state: JPEG-LS's band choice).
trait Coder {
    fn code(&mut self, pixels: &[u8]) -> Result<usize, String>;
    /// Frames coded with fewer bands than the most (JPEG-LS's sparse plan).
    fn fewer_bands(&self) -> usize {
        0
    }
}

struct Jpeg;

impl Coder for Jpeg {
    fn code(&mut self, pixels: &[u8]) -> Result<usize, String> {
        jpeg(pixels)
    }
}

/// JPEG-LS as the drone codes a stream: each frame's plan from the frame itself.
struct Jpegls(gapstream_jpegls::BandChooser, usize);

impl Coder for Jpegls {
    fn code(&mut self, pixels: &[u8]) -> Result<usize, String> {
        let plan = self
            .0
            .plan(W, H, gapstream_jpegls::Layout::Grey, pixels)
            .map_err(|e| format!("JPEG-LS plan: {e:?}"))?;
        let n = gapstream_jpegls::encode_to_vec(&plan, pixels)
            .map(|v| v.len())
            .map_err(|e| format!("JPEG-LS encoder: {e:?}"))?;
        self.1 += usize::from(plan.bands() < self.0.max_bands());
        Ok(n)
    }
    fn fewer_bands(&self) -> usize {
        self.1
    }
}

/// A fresh coder of `codec` (the start of a stream).
fn coder(codec: &str) -> Box<dyn Coder> {
    match codec {
        "jpegls" => Box::new(Jpegls(gapstream_jpegls::BandChooser::new(8), 0)),
        _ => Box::new(Jpeg),
    }
}

fn jpeg(pixels: &[u8]) -> Result<usize, String> {
    let spec = gapstream_jpeg::FrameSpec {
        width: W as u16,
        height: H as u16,
        quality: 75,
        bands: 8,
    };
    let layout = spec.layout().map_err(|e| format!("JPEG layout: {e:?}"))?;
    let mut out = vec![0u8; layout.max_len()];
    gapstream_jpeg::encode::<gapstream_jpeg::Portable>(&spec, pixels, &mut out)
        .map_err(|e| format!("JPEG encoder: {e:?}"))
}

/// The window at step `k` of `STEPS` over `p` (top-left to bottom-right).
fn window(p: &frameset::Picture, k: usize) -> Vec<u8> {
    let (dx, dy) = (p.width - W, p.height - H);
    let x = dx * k / (STEPS - 1);
    let y = dy * k / (STEPS - 1);
    let mut out = Vec::with_capacity(W * H);
    for r in 0..H {
        let s = (y + r) * p.width + x;
        out.extend_from_slice(&p.pixels[s..s + W]);
    }
    out
}

pub fn run() -> Result<(), String> {
    let dir = frameset::photo_dir().map_err(|e| e.to_string())?;
    let mut full = Vec::new();
    for name in frameset::PHOTOS {
        let p = frameset::read_grey_png(&dir.join(name)).map_err(|e| e.to_string())?;
        if p.width < W || p.height < H {
            return Err(format!("{name} is smaller than {W}x{H}"));
        }
        full.push(p);
    }
    let cap = W * H;
    let coders = [("jpeg q75", "jpeg"), ("jpegls", "jpegls")];
    println!(
        "bench-padding: {W}x{H} grey, cap {cap} B (the raw frame); photos: {} frames, motion: {} sequences x {STEPS} frames",
        full.len(),
        full.len()
    );
    println!(
        "{:<9} {:<7} {:<6} {:>9} {:>9} {:>6} {:>9} {:>11}",
        "codec", "set", "pad", "B/frame", "overhead", "sizes", "H bits", "H/seq bits"
    );
    for (codec, kind) in coders {
        // Coded sizes: photos (centre crops), motion (sequences, one coder each).
        let mut photos = Vec::new();
        let mut fewer = [0usize; 2];
        for p in &full {
            let c = frameset::centre_crop(p, W, H).ok_or("centre crop")?;
            let mut still = coder(kind);
            photos.push(still.code(&c.pixels)?);
            fewer[0] += still.fewer_bands();
        }
        let mut motion: Vec<Vec<usize>> = Vec::new();
        for p in &full {
            let mut seq = Vec::with_capacity(STEPS);
            let mut c = coder(kind);
            for k in 0..STEPS {
                seq.push(c.code(&window(p, k))?);
            }
            motion.push(seq);
            fewer[1] += c.fewer_bands();
        }
        if kind == "jpegls" {
            println!(
                "{codec}: frames coded with fewer than 8 bands (BandChooser's sparse plan): photos {} of {}, motion {} of {}",
                fewer[0],
                photos.len(),
                fewer[1],
                motion.len() * STEPS
            );
        }
        for pad in Padding::ALL {
            let padded = |n: usize| pad.padded_len(n, cap).unwrap_or(n);
            for (set, seqs) in [("photos", vec![photos.clone()]), ("motion", motion.clone())] {
                let coded: Vec<usize> = seqs.concat();
                let sizes: Vec<usize> = coded.iter().map(|&n| padded(n)).collect();
                let sum_c: usize = coded.iter().sum();
                let sum_p: usize = sizes.iter().sum();
                let within = if set == "motion" {
                    let h: f64 = seqs
                        .iter()
                        .map(|s| entropy(&s.iter().map(|&n| padded(n)).collect::<Vec<_>>()))
                        .sum();
                    format!("{:.2}", h / seqs.len() as f64)
                } else {
                    "-".to_string()
                };
                println!(
                    "{:<9} {:<7} {:<6} {:>9} {:>8.1}% {:>6} {:>9.2} {:>11}",
                    codec,
                    set,
                    pad.name(),
                    sum_p / sizes.len(),
                    (sum_p as f64 / sum_c as f64 - 1.0) * 100.0,
                    distinct(&sizes),
                    entropy(&sizes),
                    within
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_of_known_distributions() {
        assert_eq!(entropy(&[5, 5, 5, 5]), 0.0);
        assert!((entropy(&[1, 2, 3, 4]) - 2.0).abs() < 1e-12);
        assert!((entropy(&[1, 1, 2, 3]) - 1.5).abs() < 1e-12);
        assert_eq!(distinct(&[3, 1, 3]), 2);
    }

    #[test]
    fn the_window_moves_corner_to_corner() {
        let p = frameset::Picture {
            name: "t".into(),
            width: W + 3,
            height: H + 2,
            pixels: (0..(W + 3) * (H + 2)).map(|i| (i % 251) as u8).collect(),
        };
        let first = window(&p, 0);
        let last = window(&p, STEPS - 1);
        assert_eq!(first[0], p.pixels[0]);
        assert_eq!(last[0], p.pixels[2 * (W + 3) + 3]);
        assert_eq!(*last.last().unwrap(), *p.pixels.last().unwrap());
    }
}
