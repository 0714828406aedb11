//! Against an independent encoder and decoder: libjpeg-turbo through Pillow in the project venv
//! (`scripts/pillow_jpeg.py`), on the frame set (`frameset::standard_set`: ten photographs at
//! 324×244 and the synthetic pattern).
//!
//! For every picture, quality 50 / 75 / 90 and 1 / 8 bands, with the same quantisation table and
//! the same restart intervals (`restart_marker_rows`): our file decodes in Pillow and in
//! zune-jpeg, its PSNR is within 0.3 dB of Pillow's own file's and its size at most 1.03 times
//! Pillow's; the header segments (JFIF, DQT, SOF0, DHT, DRI) are byte-identical to Pillow's.
mod common;

use common::{psnr, segments, zune_decode};
use gapstream_jpeg::{FrameSpec, Portable, encode};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn python() -> PathBuf {
    let venv = std::env::var_os("GAPSTREAM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv"));
    let p = venv.join("bin/python");
    assert!(
        p.exists(),
        "no project venv at {} (run `scripts/setup.sh test`, which installs Pillow)",
        venv.display()
    );
    p
}

fn read_pgm(path: &Path) -> (usize, usize, Vec<u8>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // "P5\n<w> <h>\n255\n" (Pillow writes exactly one whitespace between fields).
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while b[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while !b[at].is_ascii_whitespace() {
            at += 1;
        }
        fields.push(String::from_utf8_lossy(&b[start..at]).into_owned());
    }
    assert_eq!(fields[0], "P5");
    let (w, h): (usize, usize) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let data = b[at + 1..].to_vec();
    assert_eq!(data.len(), w * h);
    (w, h, data)
}

struct Case {
    name: String,
    quality: u8,
    bands: u8,
    ours: Vec<u8>,
}

#[test]
fn against_pillow_on_the_frame_set() {
    let set = frameset::standard_set().expect("the frame set (scripts/setup.sh test installs it)");
    let dir = std::env::temp_dir().join(format!("gapstream-jpeg-pillow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut jobs = String::new();
    let mut cases = Vec::new();
    for p in &set {
        frameset::write_pgm(&dir.join(format!("{}.pgm", p.name)), p).unwrap();
        for quality in [50u8, 75, 90] {
            for bands in [1u8, 8] {
                let spec = FrameSpec {
                    width: p.width as u16,
                    height: p.height as u16,
                    quality,
                    bands,
                };
                let l = spec.layout().unwrap();
                let mut out = vec![0u8; l.max_len()];
                let n = encode::<Portable>(&spec, &p.pixels, &mut out).unwrap();
                out.truncate(n);
                let tag = format!("{}_{quality}_{bands}", p.name);
                std::fs::write(dir.join(format!("ours_{tag}.jpg")), &out).unwrap();
                let rows = if l.restart { l.interval_rows } else { 0 };
                let _ = writeln!(jobs, "encode {}.pgm pil_{tag}.jpg {quality} {rows}", p.name);
                let _ = writeln!(jobs, "decode ours_{tag}.jpg ours_{tag}.pgm");
                let _ = writeln!(jobs, "decode pil_{tag}.jpg pil_{tag}.pgm");
                cases.push(Case {
                    name: p.name.clone(),
                    quality,
                    bands,
                    ours: out,
                });
            }
        }
    }
    std::fs::write(dir.join("jobs.txt"), jobs).unwrap();
    let out = Command::new(python())
        .arg(root().join("scripts/pillow_jpeg.py"))
        .arg(dir.join("jobs.txt"))
        .output()
        .expect("run pillow_jpeg.py");
    assert!(
        out.status.success(),
        "pillow_jpeg.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut report =
        String::from("picture      q bands   ours B  pillow B  ratio  ours dB  pillow dB   diff\n");
    let mut failures = Vec::new();
    for c in &cases {
        let tag = format!("{}_{}_{}", c.name, c.quality, c.bands);
        let src = &set.iter().find(|p| p.name == c.name).unwrap().pixels;
        let pil = std::fs::read(dir.join(format!("pil_{tag}.jpg"))).unwrap();
        let (w, h, ours_dec) = read_pgm(&dir.join(format!("ours_{tag}.pgm")));
        let (_, _, pil_dec) = read_pgm(&dir.join(format!("pil_{tag}.pgm")));
        assert_eq!((w, h), (324, 244), "{tag}: Pillow's decoding of our file");
        let (zw, zh, zune) = zune_decode(&c.ours).unwrap();
        assert_eq!((zw, zh), (w, h));
        // Two decoders with different inverse DCTs: close, not necessarily identical.
        assert!(
            psnr(&ours_dec, &zune) > 40.0,
            "{tag}: zune and Pillow disagree"
        );
        let (po, pp) = (psnr(src, &ours_dec), psnr(src, &pil_dec));
        let ratio = c.ours.len() as f64 / pil.len() as f64;
        let _ = writeln!(
            report,
            "{:<12} {:>2} {:>5} {:>8} {:>9} {:>6.3} {:>8.3} {:>10.3} {:>+6.3}",
            c.name,
            c.quality,
            c.bands,
            c.ours.len(),
            pil.len(),
            ratio,
            po,
            pp,
            po - pp
        );
        if po < pp - 0.3 || ratio > 1.03 {
            failures.push(tag.clone());
        }
        // Same headers as libjpeg-turbo writes: JFIF, DQT, SOF0, DHT DC and AC, DRI, SOS.
        let (so, sp) = (segments(&c.ours), segments(&pil));
        for m in [0xe0u8, 0xdb, 0xc0, 0xc4, 0xdd, 0xda] {
            let a: Vec<_> = so.iter().filter(|s| s.0 == m).collect();
            let b: Vec<_> = sp.iter().filter(|s| s.0 == m).collect();
            assert_eq!(a, b, "{tag}: segment {m:#x} differs from Pillow's");
        }
    }
    eprintln!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "outside 0.3 dB / 1.03x of Pillow: {failures:?}\n{report}"
    );
}
