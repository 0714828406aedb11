//! `jpegls_decode`: any bytes → the receiver's JPEG-LS decoder ([`gapstream_jpegls::decode`]) and
//! its wrapper on the receiver's path ([`gapstream::codec::decode`], pixel formats JPEG-LS and
//! JPEG-LS of an RGGB mosaic).
//!
//! Invariants besides "no panic": a decoded picture has exactly `width × height × components`
//! samples; what decodes, re-encoded by our encoder (grey, or the Bayer mosaic of a
//! four-component picture), decodes to the same samples; the receiver's wrapper, told the
//! picture's own size, delivers exactly those samples (grey) or that mosaic (four components) and
//! refuses the other format; every prefix of the input is decoded without a panic too (a
//! truncated payload).
use gapstream::codec;
use gapstream_drone::PixelFormat;
use gapstream_jpegls::{Layout, Plan, Preset, decode_with_limit, encode_to_vec};

/// Samples the fuzzed decoder may allocate (a 1 MiB picture).
pub const MAX_SAMPLES: usize = 1 << 20;

/// The body of the `jpegls_decode` target.
pub fn jpegls_decode(data: &[u8]) {
    if let Ok(img) = decode_with_limit(data, MAX_SAMPLES) {
        assert_eq!(
            img.samples.len(),
            img.width * img.height * img.components,
            "sample count"
        );
        // The receiver's path, with the size the authenticated header would carry.
        let (w, h) = (img.width, img.height);
        let grey = codec::decode(PixelFormat::JpegLs, w, h, data).expect("a coded format");
        let bayer = codec::decode(PixelFormat::JpegLsBayerRggb, 2 * w, 2 * h, data)
            .expect("a coded format");
        match img.components {
            1 => {
                assert!(grey.as_ref() == Ok(&img.samples), "grey frame differs");
                assert!(bayer.is_err(), "one component delivered as a mosaic");
            }
            4 => {
                assert!(grey.is_err(), "four components delivered as grey");
                assert!(
                    bayer.as_ref().ok() == img.to_bayer().ok().as_ref(),
                    "mosaic differs"
                );
            }
            _ => assert!(
                grey.is_err() && bayer.is_err(),
                "{} components",
                img.components
            ),
        }
        let again = match img.components {
            1 => Plan::new(img.width, img.height, Layout::Grey, 3)
                .ok()
                .map(|p| (p, img.samples.clone())),
            4 => Plan::new(2 * img.width, 2 * img.height, Layout::BayerRggb, 2)
                .ok()
                .map(|p| (p, img.to_bayer().expect("four components"))),
            _ => None,
        };
        if let Some((plan, px)) = again {
            let code = encode_to_vec(&plan, &px).expect("re-encode");
            let back = decode_with_limit(&code, MAX_SAMPLES).expect("decode our own stream");
            assert!(back.samples == img.samples, "re-encoded picture differs");
        }
    }
    // Truncated at a few places.
    for cut in [
        data.len() / 2,
        data.len().saturating_sub(1),
        data.len() * 7 / 8,
    ] {
        let _ = decode_with_limit(&data[..cut], MAX_SAMPLES);
    }
}

/// Seeds: our streams of small pictures (grey with 1 and 3 bands, a Bayer mosaic with 2 bands
/// per plane, preset coding parameters in an LSE segment, flat and noisy pictures).
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let smooth = |w: usize, h: usize, r: &mut dyn FnMut() -> u64| -> Vec<u8> {
        (0..w * h)
            .map(|i| ((i % w) * 2 + (i / w) * 3) as u8 ^ (r() as u8 & 3))
            .collect()
    };
    for (name, w, h, layout, bands) in [
        ("grey-24x16-1band", 24, 16, Layout::Grey, 1),
        ("grey-33x20-3bands", 33, 20, Layout::Grey, 3),
        ("bayer-16x12-2bands", 16, 12, Layout::BayerRggb, 2),
    ] {
        let px = smooth(w, h, &mut rnd);
        let plan = Plan::new(w, h, layout, bands).expect("plan");
        v.push((name.to_string(), encode_to_vec(&plan, &px).expect("encode")));
    }
    let flat = vec![200u8; 40 * 6];
    let plan = Plan::new(40, 6, Layout::Grey, 2).expect("plan");
    v.push((
        "grey-40x6-flat-runs".into(),
        encode_to_vec(&plan, &flat).expect("encode"),
    ));
    let noise: Vec<u8> = (0..12 * 9).map(|_| rnd() as u8).collect();
    let plan = Plan::new(12, 9, Layout::Grey, 1).expect("plan");
    v.push((
        "grey-12x9-noise".into(),
        encode_to_vec(&plan, &noise).expect("encode"),
    ));
    // Preset coding parameters in an LSE segment (what 8 bands code with, and others).
    for (name, preset) in [
        ("grey-40x24-8bands-lse", Preset::BANDED),
        (
            "grey-40x24-2bands-lse-t1-reset3",
            Preset::new(1, 1, 2, 3).expect("preset"),
        ),
    ] {
        let px = smooth(40, 24, &mut rnd);
        let plan = Plan::new(
            40,
            24,
            Layout::Grey,
            if preset == Preset::BANDED { 8 } else { 2 },
        )
        .expect("plan")
        .with_preset(preset);
        v.push((name.to_string(), encode_to_vec(&plan, &px).expect("encode")));
    }
    v
}
