//! decode(encode(x)) == x over sizes, band counts, layouts and image kinds (property tests).
use gapstream_jpegls::{
    DecodeError, Layout, Plan, Preset, decode, decode_bayer, encode, encode_to_vec,
};
use proptest::prelude::*;

/// A picture of one of four kinds: random noise, a smooth gradient with a little noise, flat
/// areas with edges (runs), and a mix.
fn picture(w: usize, h: usize, kind: u8, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            match kind % 4 {
                0 => rnd() as u8,
                1 => ((x * 3 + y * 2) as u64).wrapping_add(rnd() % 3) as u8,
                2 => {
                    if (x / 7 + y / 5) % 3 == 0 {
                        200
                    } else {
                        ((x / 32) % 6 * 40) as u8
                    }
                }
                _ => {
                    if x < w / 2 {
                        ((x + y) as u64 / 4).wrapping_add(rnd() % 2) as u8
                    } else {
                        rnd() as u8 & 0xf0
                    }
                }
            }
        })
        .collect()
}

fn round_trip(w: usize, h: usize, bands: usize, layout: Layout, px: &[u8]) {
    round_trip_plan(&Plan::new(w, h, layout, bands).unwrap(), px);
}

fn round_trip_plan(plan: &Plan, px: &[u8]) {
    let plan = *plan;
    let (w, h, layout, bands) = (plan.width(), plan.height(), plan.layout(), plan.bands());
    let code = encode_to_vec(&plan, px).unwrap();
    assert!(code.len() <= plan.max_encoded_len());
    // The stack encoder gives the same bytes, and fails cleanly on a short buffer.
    let mut out = vec![0u8; plan.max_encoded_len()];
    let n = encode(&plan, px, &mut out).unwrap();
    assert_eq!(&out[..n], &code[..]);
    if n > 1 {
        let mut short = vec![0u8; n - 1];
        assert_eq!(
            encode(&plan, px, &mut short),
            Err(gapstream_jpegls::EncodeError::OutputFull)
        );
    }
    match layout {
        Layout::Grey => {
            let img = decode(&code).unwrap();
            assert_eq!((img.width, img.height, img.components), (w, h, 1));
            assert!(img.samples == px, "{w}x{h} bands {bands}");
        }
        Layout::BayerRggb => {
            let (dw, dh, m) = decode_bayer(&code).unwrap();
            assert_eq!((dw, dh), (w, h));
            assert!(m == px, "{w}x{h} bands {bands} (Bayer)");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn grey_round_trips(w in 1usize..=400, h in 1usize..=300, bands in 1usize..=8, kind in 0u8..4, seed: u64) {
        let px = picture(w, h, kind, seed);
        round_trip(w, h, bands, Layout::Grey, &px);
    }

    /// Any valid preset coding parameters: an LSE segment the decoder honours.
    #[test]
    fn preset_round_trips(w in 1usize..=300, h in 1usize..=200, bands in 1usize..=8, kind in 0u8..4, seed: u64,
                          mut t in proptest::array::uniform3(1u8..=255), reset in 3u8..=255, bayer: bool) {
        t.sort_unstable();
        let preset = Preset::new(t[0], t[1], t[2], reset).unwrap();
        let (w, h, layout) = if bayer { (2 * w, 2 * h, Layout::BayerRggb) } else { (w, h, Layout::Grey) };
        let plan = Plan::new(w, h, layout, bands).unwrap().with_preset(preset);
        round_trip_plan(&plan, &picture(w, h, kind, seed));
    }

    #[test]
    fn bayer_round_trips(w in 1usize..=200, h in 1usize..=150, bands in 1usize..=8, kind in 0u8..4, seed: u64) {
        let (w, h) = (2 * w, 2 * h);
        let px = picture(w, h, kind, seed);
        round_trip(w, h, bands, Layout::BayerRggb, &px);
    }
}

#[test]
fn tiny_and_flat_pictures() {
    for (w, h) in [(1, 1), (1, 7), (7, 1), (2, 2), (3, 300), (400, 1)] {
        for v in [0u8, 1, 128, 255] {
            for bands in [1, 2, 8] {
                round_trip(w, h, bands, Layout::Grey, &vec![v; w * h]);
            }
        }
    }
    // Long runs, every run index.
    let w = 400;
    let mut px = vec![7u8; w * 30];
    for y in 0..30 {
        px[y * w + (y * 13) % w] = 9;
    }
    round_trip(w, 30, 3, Layout::Grey, &px);
}

/// The LSE segment of a stream coded with `preset` (15 bytes after SOF55).
fn lse_of(code: &[u8]) -> usize {
    code.windows(2)
        .position(|w| w == [0xff, 0xf8])
        .expect("an LSE segment")
}

#[test]
fn the_lse_segment_is_written_only_when_needed() {
    let px = picture(40, 30, 1, 5);
    for bands in 1..=8 {
        let plan = Plan::new(40, 30, Layout::Grey, bands).unwrap();
        let code = encode_to_vec(&plan, &px).unwrap();
        let has = code.windows(2).any(|w| w == [0xff, 0xf8]);
        assert_eq!(has, !plan.preset().is_default(), "{bands} bands");
        assert_eq!(plan.preset(), Preset::for_bands(plan.bands()));
    }
    let plan = Plan::new(40, 30, Layout::Grey, 8)
        .unwrap()
        .with_preset(Preset::DEFAULT);
    let code = encode_to_vec(&plan, &px).unwrap();
    assert!(!code.windows(2).any(|w| w == [0xff, 0xf8]));
    let preset = Preset::new(2, 9, 33, 17).unwrap();
    let plan = Plan::new(40, 30, Layout::Grey, 1)
        .unwrap()
        .with_preset(preset);
    let code = encode_to_vec(&plan, &px).unwrap();
    let p = lse_of(&code);
    assert_eq!(
        &code[p..p + 15],
        &[0xff, 0xf8, 0, 13, 1, 0, 255, 0, 2, 0, 9, 0, 33, 0, 17]
    );
}

/// LSE values the decoder must take (0 = the default) or reject with a typed error.
#[test]
fn preset_parameters_are_validated() {
    let px = picture(40, 30, 3, 9);
    let preset = Preset::new(2, 9, 33, 17).unwrap();
    let plan = Plan::new(40, 30, Layout::Grey, 2)
        .unwrap()
        .with_preset(preset);
    let code = encode_to_vec(&plan, &px).unwrap();
    let p = lse_of(&code) + 5;
    let with = |vals: [u16; 5]| {
        let mut c = code.clone();
        for (i, v) in vals.iter().enumerate() {
            c[p + 2 * i..p + 2 * i + 2].copy_from_slice(&v.to_be_bytes());
        }
        decode(&c)
    };
    assert_eq!(with([255, 2, 9, 33, 17]).unwrap().samples, px);
    assert_eq!(with([0, 2, 9, 33, 17]).unwrap().samples, px);
    // Zeros stand for the defaults: the stream coded with the defaults decodes.
    let plain = Plan::new(40, 30, Layout::Grey, 2)
        .unwrap()
        .with_preset(Preset::DEFAULT);
    let mut c = encode_to_vec(&plain, &px).unwrap();
    let lse = [0xff, 0xf8, 0, 13, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    c.splice(2..2, lse);
    assert_eq!(decode(&c).unwrap().samples, px);
    for bad in [
        [255, 10, 9, 33, 17], // T1 > T2
        [255, 2, 40, 33, 17], // T2 > T3
        [255, 2, 9, 256, 17], // T3 > MAXVAL
        [255, 2, 9, 33, 2],   // RESET < 3
        [255, 2, 9, 33, 256], // RESET > 255
        [255, 0, 2, 33, 17],  // T1 = 3 (default) > T2
        [255, 300, 400, 500, 17],
    ] {
        assert_eq!(with(bad), Err(DecodeError::Preset), "{bad:?}");
    }
    assert_eq!(with([254, 2, 9, 33, 17]), Err(DecodeError::Unsupported));
    // A wrong length is a malformed header; another LSE id is not supported.
    let mut c = code.clone();
    c[p - 2] = 12;
    assert!(decode(&c).is_err());
    let mut c = code.clone();
    c[p - 1] = 2;
    assert_eq!(decode(&c), Err(DecodeError::Unsupported));
}
