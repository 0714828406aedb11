//! Round trips through zune-jpeg (strict mode), the cluster encoder on the host backend against
//! the sequential one, sizes, qualities, band counts, and the output-buffer contract.
mod common;

use common::{psnr, zune_decode};
use gap_rust_sdk::host::HostCluster;
use gapstream_jpeg::cluster::{ClusterEncoder, Config};
use gapstream_jpeg::{Error, FrameSpec, Portable, encode, testimage};
use proptest::prelude::*;

fn frame(w: usize, h: usize, seed: u32) -> Vec<u8> {
    let mut p = vec![0u8; w * h];
    testimage::fill(&mut p, w, h, seed);
    p
}

fn spec(w: usize, h: usize, quality: u8, bands: u8) -> FrameSpec {
    FrameSpec {
        width: w as u16,
        height: h as u16,
        quality,
        bands,
    }
}

fn encode_vec(s: &FrameSpec, pixels: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; s.layout().unwrap().max_len()];
    let n = encode::<Portable>(s, pixels, &mut out).unwrap();
    out.truncate(n);
    out
}

#[test]
fn the_camera_frame_decodes_at_every_quality_and_band_count() {
    let (w, h) = (324, 244);
    let px = frame(w, h, 9);
    for quality in [1, 25, 50, 75, 90, 100] {
        let one = encode_vec(&spec(w, h, quality, 1), &px);
        let (dw, dh, d1) = zune_decode(&one).unwrap();
        assert_eq!((dw, dh), (w, h));
        let p = psnr(&px, &d1);
        // Quality 100 quantises by 1: only the DCT's and the decoder's rounding are left.
        if quality == 100 {
            assert!(p > 45.0, "quality 100: {p:.2} dB");
        }
        for bands in 2..=8 {
            let many = encode_vec(&spec(w, h, quality, bands), &px);
            let (_, _, d) = zune_decode(&many).unwrap();
            assert_eq!(d, d1, "quality {quality}, {bands} bands decode differently");
            // The restart markers and the DC restarts cost a few bytes per band.
            assert!(
                many.len() <= one.len() + 8 * bands as usize,
                "{} vs {}",
                many.len(),
                one.len()
            );
        }
    }
}

#[test]
fn restart_markers_count_through_the_bands() {
    let (w, h) = (64, 8 * 20);
    let px = frame(w, h, 3);
    let jpeg = encode_vec(&spec(w, h, 75, 8), &px);
    // 20 MCU rows on 8 cores: bands of 3 rows, 7 bands, RST0..RST5 between them.
    let rst: Vec<u8> = jpeg
        .windows(2)
        .filter(|p| p[0] == 0xff && (0xd0..=0xd7).contains(&p[1]))
        .map(|p| p[1] - 0xd0)
        .collect();
    assert_eq!(rst, vec![0, 1, 2, 3, 4, 5]);
    let dri = jpeg.windows(2).position(|p| p == [0xff, 0xdd]).unwrap();
    assert_eq!(&jpeg[dri + 2..dri + 6], &[0, 4, 0, 3 * 8]);
}

#[test]
fn every_too_short_buffer_fails_and_the_exact_one_works() {
    let (w, h) = (37, 19);
    let px = frame(w, h, 4);
    let s = spec(w, h, 90, 3);
    let want = encode_vec(&s, &px);
    for len in 0..want.len() {
        let mut out = vec![0u8; len];
        assert_eq!(
            encode::<Portable>(&s, &px, &mut out),
            Err(Error::OutputFull),
            "{len}"
        );
    }
    let mut out = vec![0u8; want.len()];
    assert_eq!(encode::<Portable>(&s, &px, &mut out), Ok(want.len()));
    assert_eq!(out, want);
}

#[test]
fn noise_at_quality_100_stays_within_the_bound() {
    let (w, h) = (160, 64);
    let mut x = 0x1234_5678u32;
    let px: Vec<u8> = (0..w * h)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    for bands in [1, 8] {
        let s = spec(w, h, 100, bands);
        let l = s.layout().unwrap();
        let mut out = vec![0u8; l.max_len()];
        let n = encode::<Portable>(&s, &px, &mut out).unwrap();
        assert!(n < l.max_len());
        let (_, _, d) = zune_decode(&out[..n]).unwrap();
        assert!(psnr(&px, &d) > 45.0);
    }
}

#[test]
fn bad_parameters_are_typed_errors() {
    let px = frame(16, 16, 1);
    let mut out = vec![0u8; 4096];
    assert_eq!(
        encode::<Portable>(&spec(16, 16, 0, 1), &px, &mut out),
        Err(Error::Quality)
    );
    assert_eq!(
        encode::<Portable>(&spec(16, 16, 101, 1), &px, &mut out),
        Err(Error::Quality)
    );
    assert_eq!(
        encode::<Portable>(&spec(0, 16, 75, 1), &[], &mut out),
        Err(Error::Size)
    );
    assert_eq!(
        encode::<Portable>(&spec(16, 15, 75, 1), &px, &mut out),
        Err(Error::Size)
    );
    assert_eq!(
        encode::<Portable>(&spec(16, 16, 75, 0), &px, &mut out),
        Err(Error::Bands)
    );
    let cl = HostCluster::new();
    let mut e = ClusterEncoder::new(&cl, Config::new(4)).unwrap();
    assert_eq!(
        e.encode::<Portable>(&spec(16, 16, 75, 5), &px, &mut out),
        Err(Error::Bands)
    );
    assert_eq!(
        e.encode::<Portable>(&spec(16, 16, 75, 2), &px, &mut out[..10]),
        Err(Error::OutputFull)
    );
    assert!(matches!(
        ClusterEncoder::new(&cl, Config::new(9)),
        Err(Error::Bands)
    ));
    let mut small = Config::new(2);
    small.chunk = 256;
    assert!(matches!(
        ClusterEncoder::new(&cl, small),
        Err(Error::Config)
    ));
}

#[test]
fn the_cluster_encoder_fails_cleanly_on_a_small_buffer() {
    let (w, h) = (120, 96);
    let px = frame(w, h, 2);
    let cl = HostCluster::new();
    let mut e = ClusterEncoder::new(&cl, Config::new(8)).unwrap();
    let s = spec(w, h, 95, 8);
    let want = encode_vec(&s, &px);
    let mut seen_ok = false;
    for len in (want.len() / 2..want.len() * 2).step_by(97) {
        let mut out = vec![0u8; len];
        match e.encode::<Portable>(&s, &px, &mut out) {
            Ok(n) => {
                assert_eq!(&out[..n], &want[..]);
                seen_ok = true;
            }
            Err(err) => assert_eq!(err, Error::OutputFull),
        }
    }
    assert!(seen_ok);
    // The pixel count plus the header is enough for a camera-like frame.
    let mut out = vec![0u8; w * h + 400];
    assert_eq!(e.encode::<Portable>(&s, &px, &mut out), Ok(want.len()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any size 1x1..=400x300, quality, band count: zune-jpeg decodes it (strict) to the right
    /// size, the bands decode exactly like one band, and the cluster encoder (host backend, one
    /// core per band, L1 strips narrower than the frame) writes the same bytes as the
    /// sequential encoder.
    #[test]
    fn sizes_qualities_and_bands(w in 1usize..=400, h in 1usize..=300, quality in 1u8..=100, bands in 1u8..=8, seed in 0u32..1000) {
        let px = frame(w, h, seed);
        let one = encode_vec(&spec(w, h, quality, 1), &px);
        let (dw, dh, d1) = zune_decode(&one).map_err(TestCaseError::fail)?;
        prop_assert_eq!((dw, dh), (w, h));
        let s = spec(w, h, quality, bands);
        let many = encode_vec(&s, &px);
        let (_, _, d) = zune_decode(&many).map_err(TestCaseError::fail)?;
        prop_assert_eq!(d, d1);
        let cl = HostCluster::new();
        let mut cfg = Config::new(bands as usize);
        cfg.strip_blocks = 1 + seed as usize % 12;
        let mut e = ClusterEncoder::new(&cl, cfg).unwrap();
        let mut out = vec![0u8; s.layout().unwrap().max_len()];
        let n = e.encode::<Portable>(&s, &px, &mut out).unwrap();
        prop_assert_eq!(&out[..n], &many[..]);
    }
}
