//! Sweep of the preset coding parameters (T1, T2, T3, RESET; an LSE segment) against the band
//! count on the frame set: does a setting other than the defaults win back what restart markers
//! cost? docs/jpegls.md ("Bands and restart markers") quotes its output.
//!
//! The baseline is CharLS at its default parameters: its stream is our one-band stream with the
//! defaults plus its 44-byte SPIFF header (`tests/charls.rs` checks that the scan data is CharLS's
//! byte for byte and prints CharLS's own sizes).
//!
//! ```sh
//! cargo run --release -p gapstream_jpegls --example preset_sweep
//! ```
use gapstream_jpegls::model::{Model, Preset};
use gapstream_jpegls::{Layout, NoSpill, Plan, Portable, Writer, encode_to_vec};

const SPIFF: usize = 44;

fn size(p: &frameset::Picture, bands: usize, preset: Preset) -> usize {
    let plan = Plan::new(p.width, p.height, Layout::Grey, bands)
        .unwrap()
        .with_preset(preset);
    encode_to_vec(&plan, &p.pixels).unwrap().len()
}

/// Entropy-coded bytes of a grey picture in `bands` bands with the defaults, where after each
/// band boundary the coder either restarts as the standard requires (`fresh_model`,
/// `zero_line`) or, for this measurement only (no conforming decoder reads such a stream),
/// keeps the previous band's contexts and/or predicts the band's first line from the real line
/// above. Markers excluded.
fn restart_parts(p: &frameset::Picture, bands: usize, fresh_model: bool, zero_line: bool) -> usize {
    let (w, h) = (p.width, p.height);
    let plan = Plan::new(w, h, Layout::Grey, bands).unwrap();
    let mut model = Model::new();
    let mut out = vec![0u8; plan.max_encoded_len()];
    let mut total = 0;
    let mut prev = vec![0u8; w + 2];
    let mut cur = vec![0u8; w + 2];
    for i in 0..plan.segments() {
        let seg = plan.segment(i);
        if i == 0 || fresh_model {
            model.reset();
        }
        prev.fill(0);
        if i > 0 && !zero_line {
            let y = seg.first_line - 1;
            prev[1..=w].copy_from_slice(&p.pixels[y * w..][..w]);
            // The left edge of the line above: the first sample two lines up (A.2.1).
            prev[0] = if y > 0 { p.pixels[(y - 1) * w] } else { 0 };
        }
        let mut wr = Writer::new(&mut out[..], NoSpill);
        for y in seg.first_line..seg.first_line + seg.lines {
            cur[1..=w].copy_from_slice(&p.pixels[y * w..][..w]);
            gapstream_jpegls::line::encode_line::<Portable, _>(
                &mut model,
                &gapstream_jpegls::model::QUANT,
                &mut wr,
                &mut prev,
                &mut cur,
                w,
            );
            core::mem::swap(&mut prev, &mut cur);
        }
        wr.finish();
        total += wr.len();
    }
    total
}

/// Band counts: `PRESET_BANDS=8` (comma-separated) or 1, 2, 4 and 8.
fn bands_list() -> Vec<usize> {
    std::env::var("PRESET_BANDS")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8])
}

fn main() {
    let mut pics = frameset::standard_set().expect("frame set (scripts/setup.sh test)");
    // `PRESET_PICTURES=synthetic` (comma-separated names): only those pictures.
    if let Ok(names) = std::env::var("PRESET_PICTURES") {
        let names: Vec<&str> = names.split(',').map(str::trim).collect();
        pics.retain(|p| names.contains(&p.name.as_str()));
        assert!(!pics.is_empty(), "PRESET_PICTURES: no such picture");
    }
    let base: Vec<usize> = pics
        .iter()
        .map(|p| size(p, 1, Preset::DEFAULT) + SPIFF)
        .collect();
    // `PRESET_GRID=fine`: around the best setting of the coarse grid; `PRESET_GRID=sparse`: small
    // RESET and a wide range of thresholds (for pictures that code in few bits a sample, cut into
    // fewer bands: `BandChooser`).
    let grid_name = std::env::var("PRESET_GRID").unwrap_or_default();
    let fine = grid_name == "fine";
    let (t1s, t2s, t3s, resets): (&[u8], &[u8], &[u8], &[u8]) = if grid_name == "sparse" {
        (
            &[1, 2, 3, 4, 5, 6],
            &[2, 3, 4, 5, 6, 8, 10, 12, 16, 24],
            &[8, 12, 14, 16, 21, 28, 40, 64, 96, 128, 192, 255],
            &[3, 4, 5, 6, 7, 8, 10, 12],
        )
    } else if fine {
        (
            &[3, 4, 5],
            &[5, 6, 7, 8, 9],
            &[48, 64, 96, 128, 192, 255],
            &[20, 24, 28, 32, 40, 48, 64],
        )
    } else {
        (
            &[2, 3, 4, 5, 6, 8],
            &[5, 7, 9, 12, 16],
            &[14, 21, 28, 40, 64, 128],
            &[8, 12, 16, 24, 32, 48, 64, 96, 128],
        )
    };
    let mut grid = vec![Preset::DEFAULT];
    // `PRESET=T1,T2,T3,RESET`: only that setting (and the defaults).
    if let Ok(p) = std::env::var("PRESET") {
        let v: Vec<u8> = p.split(',').map(|x| x.trim().parse().unwrap()).collect();
        grid.push(Preset::new(v[0], v[1], v[2], v[3]).expect("a valid preset"));
    }
    let (t1s, t2s, t3s, resets) = if grid.len() > 1 {
        (&[][..], &[][..], &[][..], &[][..])
    } else {
        (t1s, t2s, t3s, resets)
    };
    for &t1 in t1s {
        for &t2 in t2s {
            for &t3 in t3s {
                for &reset in resets {
                    if let Some(p) = Preset::new(t1, t2, t3, reset).filter(|p| !p.is_default()) {
                        grid.push(p);
                    }
                }
            }
        }
    }
    // What a restart costs (defaults, 8 bands against 1): the line against zeros, the contexts
    // learnt again, both; (B/restart: the difference over the 7 restarts, markers excluded).
    println!("restart cost, 8 bands, defaults (bytes per restart, markers excluded):");
    println!("  picture           both  zero line only  contexts only  1 band");
    for p in &pics {
        let one = restart_parts(p, 1, true, true);
        let per = |f: bool, z: bool| (restart_parts(p, 8, f, z) as f64 - one as f64) / 7.0;
        println!(
            "  {:<16} {:>6.1} {:>14.1} {:>14.1} {:>7}",
            p.name,
            per(true, true),
            per(false, true),
            per(true, false),
            one
        );
    }
    println!(
        "{} settings; ratio = our size / CharLS (defaults, one scan)",
        grid.len()
    );
    for bands in bands_list() {
        // (worst ratio over the photographs, worst with the synthetic pattern, set total, preset)
        let mut rows: Vec<(f64, f64, usize, Preset, Vec<f64>)> = grid
            .iter()
            .map(|&pr| {
                let r: Vec<f64> = pics
                    .iter()
                    .zip(&base)
                    .map(|(p, &b)| size(p, bands, pr) as f64 / b as f64)
                    .collect();
                let photos = r[..r.len() - 1].iter().cloned().fold(0.0, f64::max);
                let all = r.iter().cloned().fold(0.0, f64::max);
                let total: usize = pics.iter().map(|p| size(p, bands, pr)).sum();
                (photos, all, total, pr, r)
            })
            .collect();
        let default = rows
            .iter()
            .find(|r| r.3 == Preset::DEFAULT)
            .cloned()
            .unwrap();
        let show = |tag: &str, r: &(f64, f64, usize, Preset, Vec<f64>)| {
            let p = r.3;
            print!(
                "  {tag:<22} T1={:<2} T2={:<2} T3={:<2} RESET={:<2} photos<= {:.4} all<= {:.4} set {:>6} B:",
                p.t1, p.t2, p.t3, p.reset, r.0, r.1, r.2
            );
            for x in &r.4 {
                print!(" {x:.3}");
            }
            println!();
        };
        println!(
            "{bands} bands (per frame: {})",
            pics.iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        show("defaults", &default);
        if std::env::var("PRESET").is_ok() {
            if let Some(r) = rows.iter().find(|r| r.3 == grid[grid.len() - 1]) {
                show("PRESET", r);
            }
        }
        rows.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        show("best photo worst", &rows[0]);
        rows.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap());
        show("best worst (all)", &rows[0]);
        rows.sort_by_key(|r| r.2);
        show("smallest set", &rows[0]);
        // The best setting of each frame on its own (what a per-frame choice could reach).
        for (f, p) in pics.iter().enumerate() {
            let best = rows
                .iter()
                .min_by(|a, b| a.4[f].partial_cmp(&b.4[f]).unwrap())
                .unwrap();
            let q = best.3;
            println!(
                "    best for {:<16} {:.4} (defaults {:.4}) T1={} T2={} T3={} RESET={}",
                p.name, best.4[f], default.4[f], q.t1, q.t2, q.t3, q.reset
            );
        }
    }
}
