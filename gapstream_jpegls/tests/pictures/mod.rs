//! Pictures the band plan's rule is calibrated and checked on (shared by `tests/charls.rs` and
//! `examples/plan_estimate.rs`): the frame set, the same photographs cut elsewhere, the synthetic
//! pattern at other frames, the colour photographs and the pattern as RGGB mosaics, and test
//! pictures (noise, flat).
#![allow(dead_code)]
use gapstream_jpegls::Layout;

pub struct Pic {
    pub name: String,
    pub w: usize,
    pub h: usize,
    pub layout: Layout,
    pub px: Vec<u8>,
    /// A 324 × 244 frame of the kind the drone streams (the target holds on it).
    pub frame: bool,
}

const W: usize = frameset::WIDTH;
const H: usize = frameset::HEIGHT;

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// The frame set (`frameset::standard_set()`): ten photographs at 324×244 + the synthetic
/// pattern (frame 1).
pub fn frame_set() -> Vec<Pic> {
    frameset::standard_set()
        .expect("frame set (scripts/setup.sh test)")
        .into_iter()
        .map(|p| Pic {
            name: p.name,
            w: p.width,
            h: p.height,
            layout: Layout::Grey,
            px: p.pixels,
            frame: true,
        })
        .collect()
}

/// The small test pictures: 37×23 noise, 5×3 flat.
pub fn small_tests() -> Vec<Pic> {
    let mut r = xorshift(0x9e37_79b9_7f4a_7c15);
    vec![
        Pic {
            name: "noise".into(),
            w: 37,
            h: 23,
            layout: Layout::Grey,
            px: (0..37 * 23).map(|_| r() as u8).collect(),
            frame: false,
        },
        Pic {
            name: "flat".into(),
            w: 5,
            h: 3,
            layout: Layout::Grey,
            px: vec![255; 15],
            frame: false,
        },
    ]
}

/// Full 324×244 frames of the test kinds: noise, flat, a smooth ramp with ±1 noise, a flat
/// frame with low noise.
pub fn full_tests() -> Vec<Pic> {
    let mut r = xorshift(0x0123_4567_89ab_cdef);
    let mut pics = Vec::new();
    let mut add = |name: &str, px: Vec<u8>| {
        pics.push(Pic {
            name: name.into(),
            w: W,
            h: H,
            layout: Layout::Grey,
            px,
            frame: true,
        })
    };
    add("noise-full", (0..W * H).map(|_| r() as u8).collect());
    add("flat-full", vec![128; W * H]);
    add(
        "ramp+noise",
        (0..W * H)
            .map(|i| ((i % W + i / W) / 3 + (r() % 3) as usize) as u8)
            .collect(),
    );
    add(
        "flat+noise1",
        (0..W * H).map(|_| 100 + (r() % 2) as u8).collect(),
    );
    pics
}

/// Full-size photographs of the frame set (grey).
fn full_photos() -> Vec<frameset::Picture> {
    let dir = frameset::photo_dir().expect("frame set (scripts/setup.sh test)");
    frameset::PHOTOS
        .iter()
        .map(|f| frameset::read_grey_png(&dir.join(f)).unwrap())
        .collect()
}

fn crop(p: &frameset::Picture, x0: usize, y0: usize) -> Vec<u8> {
    (y0..y0 + H)
        .flat_map(|y| p.pixels[y * p.width + x0..][..W].iter().copied())
        .collect()
}

/// Each photograph cut at 324×244 elsewhere than the centre: the four corners, and 8 places
/// drawn at random (a fixed seed; any offset, odd ones too).
pub fn photo_crops() -> Vec<Pic> {
    let mut r = xorshift(0x5eed_c0ff_ee00_1234);
    let mut v = Vec::new();
    for p in full_photos() {
        let (mx, my) = (p.width - W, p.height - H);
        let mut at = vec![(0, 0), (mx, 0), (0, my), (mx, my)];
        for _ in 0..8 {
            at.push((
                (r() % (mx as u64 + 1)) as usize,
                (r() % (my as u64 + 1)) as usize,
            ));
        }
        for (x0, y0) in at {
            v.push(Pic {
                name: format!("{}@{x0},{y0}", p.name),
                w: W,
                h: H,
                layout: Layout::Grey,
                px: crop(&p, x0, y0),
                frame: true,
            });
        }
    }
    v
}

/// The synthetic pattern at frames `frames` (stripes and square moved, other stamps).
pub fn synthetic_phases(frames: impl IntoIterator<Item = u32>) -> Vec<Pic> {
    frames
        .into_iter()
        .map(|f| Pic {
            name: format!("synthetic#{f}"),
            w: W,
            h: H,
            layout: Layout::Grey,
            px: frameset::synthetic(W, H, f).unwrap().pixels,
            frame: true,
        })
        .collect()
}

/// The RGB photographs of the frame set mosaicked RGGB at 324×244 (the cut at `(dx, dy)` from
/// the centre, clamped): R at (even row, even column), G at (even, odd) and (odd, even), B at
/// (odd, odd); then the drone's synthetic Bayer scene (frame 7).
pub fn bayer_photos(dx: isize, dy: isize) -> Vec<Pic> {
    let dir = frameset::photo_dir().expect("frame set (scripts/setup.sh test)");
    let mut v = Vec::new();
    for f in frameset::PHOTOS {
        let file = std::fs::File::open(dir.join(f)).unwrap();
        let mut dec = png::Decoder::new(std::io::BufReader::new(file));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![0u8; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        let ch = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            _ => continue,
        };
        let (iw, ih) = (info.width as usize, info.height as usize);
        let clamp = |c: usize, d: isize, m: usize| (c as isize + d).clamp(0, m as isize) as usize;
        let (x0, y0) = (
            clamp((iw - W) / 2, dx, iw - W),
            clamp((ih - H) / 2, dy, ih - H),
        );
        let px = (0..W * H)
            .map(|i| {
                let (x, y) = (i % W, i / W);
                let c = match (y % 2, x % 2) {
                    (0, 0) => 0,
                    (1, 1) => 2,
                    _ => 1,
                };
                buf[((y0 + y) * iw + x0 + x) * ch + c]
            })
            .collect();
        let at = if (dx, dy) == (0, 0) {
            String::new()
        } else {
            format!("@{x0},{y0}")
        };
        v.push(Pic {
            name: format!("bayer-{}{at}", f.trim_end_matches(".png")),
            w: W,
            h: H,
            layout: Layout::BayerRggb,
            px,
            frame: true,
        });
    }
    if (dx, dy) == (0, 0) {
        let mut px = vec![0u8; W * H];
        gapstream_drone::testpattern::render_bayer(
            &mut px,
            W,
            H,
            gapstream_drone::testpattern::Stamp {
                frame: 7,
                capture_ns: 123_456_000,
            },
        )
        .unwrap();
        v.push(Pic {
            name: "bayer-synthetic".into(),
            w: W,
            h: H,
            layout: Layout::BayerRggb,
            px,
            frame: true,
        });
    }
    v
}

/// Every picture of the calibration: the frame set, the crops, the pattern at 48 other frames,
/// the full-size test frames, the small test pictures, the mosaics (centre and one other cut).
pub fn calibration_set() -> Vec<Pic> {
    let mut v = frame_set();
    v.extend(photo_crops());
    v.extend(synthetic_phases((2..50).map(|f| f * 37)));
    v.extend(full_tests());
    v.extend(small_tests());
    v.extend(bayer_photos(0, 0));
    v.extend(bayer_photos(-40, 17));
    v
}
