//! decode(encode(x)) == x over sizes, band counts, layouts and image kinds (property tests).
use gapstream_jpegls::{Layout, Plan, decode, decode_bayer, encode, encode_to_vec};
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
    let plan = Plan::new(w, h, layout, bands).unwrap();
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
