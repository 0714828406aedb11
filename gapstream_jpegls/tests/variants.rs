//! Every kernel variant codes the portable coder's stream, bit for bit: [`PulpModel`] (the PULP
//! assembly kernel's arithmetic in Rust) on the frame set, on synthetic pictures of every kind and
//! size (property tests), through the whole-picture encoder, per segment with a spilling sink,
//! and through the cluster job on the host backend, with the default and any other valid preset
//! coding parameters; with a short output buffer both fail alike.
use gap_rust_sdk::host::HostCluster;
use gapstream_jpegls::cluster;
use gapstream_jpegls::{
    EncodeError, Layout, Ops, Plan, Portable, Preset, PulpModel, Sink, Writer, encode,
    encode_segment_with, encode_to_vec, encode_with,
};
use proptest::prelude::*;

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
            match kind % 6 {
                0 => rnd() as u8,
                1 => ((x * 3 + y * 2) as u64).wrapping_add(rnd() % 3) as u8,
                2 => {
                    if (x / 7 + y / 5) % 3 == 0 {
                        200
                    } else {
                        ((x / 32) % 6 * 40) as u8
                    }
                }
                // Large steps: escapes and long codes, saturated bias corrections.
                3 => {
                    if (x + y) % 2 == 0 {
                        ((x * 37 + y * 11) % 256) as u8
                    } else {
                        255 - (rnd() % 4) as u8
                    }
                }
                // A steep ramp with noise: C drifts to its limits.
                4 => ((x * 97 + y * 13) as u64 + rnd() % 2) as u8,
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

/// Takes everything (a `Vec`), like the cluster's L1 chunks going to L2.
struct VecSink(Vec<u8>);

impl Sink for VecSink {
    fn spill(&mut self, bytes: &[u8]) -> bool {
        self.0.extend_from_slice(bytes);
        true
    }
}

/// Every segment through a small spilling buffer (`chunk` bytes), concatenated.
fn segments_with<K: Ops>(plan: &Plan, px: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let mut model = gapstream_jpegls::model::Model::new();
    let mut lines = vec![0u8; 2 * (plan.plane_width() + 2)];
    let mut buf = vec![0u8; chunk];
    (0..plan.segments())
        .map(|i| {
            let mut w = Writer::new(&mut buf, VecSink(Vec::new()));
            encode_segment_with::<K, _>(plan, i, px, &mut model, &mut lines, &mut w).unwrap();
            w.spill();
            assert!(!w.overflowed());
            w.sink.0
        })
        .collect()
}

fn same_stream<K: Ops>(w: usize, h: usize, layout: Layout, bands: usize, px: &[u8]) {
    same_stream_plan::<K>(&Plan::new(w, h, layout, bands).unwrap(), px);
}

fn same_stream_plan<K: Ops>(plan: &Plan, px: &[u8]) {
    let plan = *plan;
    let (w, h, layout, bands) = (plan.width(), plan.height(), plan.layout(), plan.bands());
    let want = encode_to_vec(&plan, px).unwrap();
    let mut out = vec![0u8; plan.max_encoded_len()];
    let n = encode_with::<K>(&plan, px, &mut out).unwrap();
    assert!(out[..n] == want[..], "{w}x{h} {layout:?} {bands} bands");
    // Per segment through 64- and 512-byte chunks: the portable segments.
    for chunk in [64, 512] {
        assert_eq!(
            segments_with::<K>(&plan, px, chunk),
            segments_with::<Portable>(&plan, px, chunk),
            "{w}x{h} {layout:?} {bands} bands, {chunk}-byte chunks"
        );
    }
    // A buffer one byte short fails alike.
    if n > 1 {
        let mut short = vec![0u8; n - 1];
        assert_eq!(
            encode_with::<K>(&plan, px, &mut short),
            Err(EncodeError::OutputFull)
        );
        assert_eq!(encode(&plan, px, &mut short), Err(EncodeError::OutputFull));
    }
}

#[test]
fn the_frame_set_codes_alike() {
    let frames = frameset::standard_set().expect("frame set (scripts/setup.sh test)");
    let cl = HostCluster::new();
    for f in &frames {
        for bands in [1, 8] {
            same_stream::<PulpModel>(f.width, f.height, Layout::Grey, bands, &f.pixels);
        }
        let plan = Plan::new(f.width, f.height, Layout::Grey, 8).unwrap();
        let want = encode_to_vec(&plan, &f.pixels).unwrap();
        let mut out = vec![0u8; 128 * 1024];
        for cores in [1, 8] {
            let n =
                cluster::encode::<PulpModel, _>(&cl, cores, &plan, &f.pixels, &mut out).unwrap();
            assert!(out[..n] == want[..], "{} on {cores} cores", f.name);
        }
    }
}

#[test]
fn tiny_flat_and_extreme_pictures_code_alike() {
    for (w, h) in [(1, 1), (1, 7), (7, 1), (2, 2), (3, 300), (400, 1)] {
        for v in [0u8, 1, 128, 255] {
            same_stream::<PulpModel>(w, h, Layout::Grey, 2, &vec![v; w * h]);
        }
    }
    for kind in 0..6 {
        same_stream::<PulpModel>(324, 61, Layout::Grey, 2, &picture(324, 61, kind, 7));
    }
    // Long runs: flat lines take RUNindex to 31 (J up to 15); a few interruptions on some lines.
    let w = 400;
    for (every, v) in [(0usize, 9u8), (3, 200), (7, 0)] {
        let px: Vec<u8> = (0..w * 24)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                if every > 0 && y % every == 0 && x == (y * 37) % w {
                    v
                } else {
                    5
                }
            })
            .collect();
        same_stream::<PulpModel>(w, 24, Layout::Grey, 1, &px);
    }
    // All-0xFF stripes and alternating extremes: stuffing everywhere.
    let w = 64;
    let px: Vec<u8> = (0..w * 40)
        .map(|i| if (i / 3) % 2 == 0 { 255 } else { 0 })
        .collect();
    same_stream::<PulpModel>(w, 40, Layout::Grey, 1, &px);
}

/// Extreme preset parameters (every gradient in one region, RESET at its smallest and largest)
/// on pictures with long runs, noise and extremes: the same stream.
#[test]
fn extreme_presets_code_alike() {
    for (t1, t2, t3, reset) in [
        (1, 1, 1, 3),
        (255, 255, 255, 255),
        (1, 2, 255, 4),
        (3, 8, 128, 40),
        (2, 200, 201, 128),
    ] {
        let preset = Preset::new(t1, t2, t3, reset).unwrap();
        for kind in 0..6 {
            for bands in [1, 5] {
                let plan = Plan::new(324, 61, Layout::Grey, bands)
                    .unwrap()
                    .with_preset(preset);
                same_stream_plan::<PulpModel>(&plan, &picture(324, 61, kind, 11));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn grey_codes_alike(w in 1usize..=400, h in 1usize..=300, bands in 1usize..=8, kind in 0u8..6, seed: u64) {
        same_stream::<PulpModel>(w, h, Layout::Grey, bands, &picture(w, h, kind, seed));
    }

    /// Any valid preset coding parameters (thresholds, RESET 3..=255): the same stream, alone
    /// and on the cluster job.
    #[test]
    fn presets_code_alike(w in 1usize..=200, h in 1usize..=120, bands in 1usize..=8, kind in 0u8..6, seed: u64,
                          mut t in proptest::array::uniform3(1u8..=255), reset in 3u8..=255) {
        t.sort_unstable();
        let preset = Preset::new(t[0], t[1], t[2], reset).unwrap();
        let plan = Plan::new(w, h, Layout::Grey, bands).unwrap().with_preset(preset);
        let px = picture(w, h, kind, seed);
        same_stream_plan::<PulpModel>(&plan, &px);
        let want = encode_to_vec(&plan, &px).unwrap();
        // The cluster's layout: every segment's worst case in its own region (a 1x1 frame's
        // `max_encoded_len` is shorter than its region's separator room).
        let room = plan.prefix_len()
            + plan.segments() * (plan.max_segment_len(0) + gapstream_jpegls::encode::MAX_SEPARATOR);
        let mut out = vec![0u8; room];
        let n = cluster::encode::<PulpModel, _>(&HostCluster::new(), 3, &plan, &px, &mut out).unwrap();
        prop_assert!(out[..n] == want[..]);
    }

    #[test]
    fn bayer_codes_alike(w in 1usize..=100, h in 1usize..=80, bands in 1usize..=8, kind in 0u8..6, seed: u64) {
        let (w, h) = (2 * w, 2 * h);
        same_stream::<PulpModel>(w, h, Layout::BayerRggb, bands, &picture(w, h, kind, seed));
    }
}
