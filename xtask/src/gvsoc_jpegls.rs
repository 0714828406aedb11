//! `cargo xtask gvsoc-bench`: the lossless JPEG-LS rows (kernel `jpegls`). One GVSOC launch per
//! frame of the frame set (`frameset::standard_set()`: ten photographs at 324×244 and the
//! synthetic pattern), the frame patched into the ELF's `GVSOC_BENCH_FRAME`, one run per variant
//! and core count; each run's output digest and length checked against `gapstream_jpegls` on the
//! host (whose streams CharLS decodes bit-exact: `gapstream_jpegls/tests/charls.rs`). Next to the
//! cycles: the coded bytes, and CharLS's (imagecodecs, the project venv) for the same frame.
use crate::gvsoc::{
    MODE_DMA, Options, Point, build_elf, config_bytes, launch, parse_device_line, patch_symbol,
    target_dir, workspace_root,
};
use std::fmt::Write as _;
use std::{env, fs};

#[allow(dead_code)]
mod common {
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gvsoc/src/common.rs"
    ));
}
use common::*;

const PIXELS: usize = BENCH_FRAME_W * BENCH_FRAME_H;
/// Cycle target of a frame on 8 cores (GVSOC GAP8 model, worst frame).
pub const TARGET_8_CORES: u64 = 750_000;
/// Speed-up target of 8 cores over 1.
pub const TARGET_SPEEDUP: f64 = 6.0;

/// The JPEG-LS kernels selected: `--quick` measures the PULP variant only.
fn variants(o: &Options) -> Vec<usize> {
    (0..BENCH_KERNELS.len())
        .filter(|&k| is_jpegls_kernel(k))
        .filter(|&k| !o.quick || BENCH_KERNELS[k].1 == "pulp")
        .filter(|&k| {
            let (a, b) = BENCH_KERNELS[k];
            let name = format!("{a}/{b}");
            o.kernel.as_ref().is_none_or(|f| name.contains(f.as_str()))
        })
        .collect()
}

/// True when the options select a JPEG-LS row (no kernel filter, or one that matches).
pub fn selected(o: &Options) -> bool {
    !variants(o).is_empty() && (o.bytes.is_empty() || o.bytes.contains(&(PIXELS as u32)))
}

/// One measured run.
struct Run {
    frame: String,
    variant: String,
    cores: u32,
    cycles: u64,
    instructions: u64,
    coded: usize,
    /// Bands of the measured coding (the device's `BandChooser`, from the frame itself).
    bands: usize,
    /// The plan's estimate on the FC (cycles, instructions).
    est_cycles: u64,
    est_instructions: u64,
}

/// CharLS's stream length for each frame (imagecodecs in the project venv).
fn charls_sizes(frames: &[frameset::Picture]) -> Result<Vec<usize>, String> {
    let dir = env::temp_dir().join(format!("gvsoc-jpegls-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for (i, f) in frames.iter().enumerate() {
        fs::write(dir.join(format!("{i}.raw")), &f.pixels).map_err(|e| e.to_string())?;
    }
    let py = env::var_os("GAPSTREAM_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv"))
        .join("bin/python");
    let script = format!(
        "import imagecodecs, numpy as np\n\
         for i in range({n}):\n    a = np.fromfile('{d}/%d.raw' % i, np.uint8).reshape({h}, {w})\n    \
         print(len(imagecodecs.jpegls_encode(a, level=0)))\n",
        n = frames.len(),
        d = dir.display(),
        h = BENCH_FRAME_H,
        w = BENCH_FRAME_W
    );
    let out = std::process::Command::new(&py)
        .args(["-c", &script])
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (scripts/setup.sh test installs imagecodecs)",
                py.display()
            )
        });
    let _ = fs::remove_dir_all(&dir);
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "CharLS sizes: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse::<usize>().map_err(|e| e.to_string()))
        .collect()
}

/// Made-up 324 × 244 pictures that take the PULP kernel's rare paths (`--stress`): flat areas
/// over many lines (RUNindex up to 25, J up to 9: the most a 324-sample line allows) broken by
/// spikes (escape codes in the run interruption, its context's RESET halving), short runs ending at every column, 6-bit noise
/// (long codes, 0xFF stuffing), saturated extremes (errors modulo 256), a smooth ramp with jumps
/// (escape codes in the regular mode). Deterministic (xorshift).
fn stress_pictures() -> Vec<frameset::Picture> {
    let (w, h) = (BENCH_FRAME_W, BENCH_FRAME_H);
    let mut st = 0x1234_5678u32;
    let mut make = |name: &str, f: &dyn Fn(usize, usize, u32) -> u8| {
        let mut pixels = vec![0u8; w * h];
        for (i, p) in pixels.iter_mut().enumerate() {
            st ^= st << 13;
            st ^= st >> 17;
            st ^= st << 5;
            *p = f(i % w, i / w, st);
        }
        frameset::Picture {
            name: name.into(),
            width: w,
            height: h,
            pixels,
        }
    };
    vec![
        make("flat_spikes", &|x, y, r| {
            if (y * w + x) % 997 == 500 {
                (r >> 8) as u8
            } else {
                100
            }
        }),
        make("noise6", &|_, _, r| ((r >> 11) as u8 & 0x3f) + 96),
        make("runs_noise", &|x, y, r| {
            if x + (y % 7) * 40 < 300 {
                (y / 3) as u8 ^ 0x55
            } else {
                (r >> 9) as u8
            }
        }),
        make("extremes", &|x, y, r| {
            if (x / 5 + y / 3 + (r as usize & 1)) % 4 == 0 || (x + y) % 11 >= 6 {
                255
            } else {
                0
            }
        }),
        make("long_then_spike", &|x, y, r| {
            if y % 40 == 39 && x % 50 == 7 {
                (r >> 3) as u8
            } else {
                37
            }
        }),
        make("smooth_jumps", &|x, y, r| {
            if (x * 7 + y * 13 + (r as usize % 3)) % 61 == 0 {
                (r >> 20) as u8
            } else {
                ((x + y) / 4) as u8
            }
        }),
    ]
}

/// The JPEG-LS sweep.
pub fn bench(o: &Options) -> Result<(), String> {
    let mut frames = if o.stress {
        stress_pictures()
    } else {
        frameset::standard_set().map_err(|e| e.to_string())?
    };
    if !o.pictures.is_empty() {
        frames.retain(|f| o.pictures.contains(&f.name));
        if frames.is_empty() {
            return Err(format!(
                "--pictures {}: no such picture",
                o.pictures.join(",")
            ));
        }
    }
    let cores: Vec<u32> = if o.quick {
        vec![1, 8]
    } else {
        vec![1, 2, 4, 8]
    }
    .into_iter()
    .filter(|c| o.cores.is_empty() || o.cores.contains(c))
    .collect();
    let vars = variants(o);
    let repeat = o.repeat.max(1);
    // What the device codes (gvsoc/src/jpegls_bench.rs): the frame with the plan the chooser
    // takes from the frame itself (the same function on both sides).
    let chosen = |pixels: &[u8]| -> Result<(gapstream_jpegls::Plan, Vec<u8>), String> {
        let p = gapstream_jpegls::BandChooser::new(JPEGLS_BANDS)
            .plan(
                BENCH_FRAME_W,
                BENCH_FRAME_H,
                gapstream_jpegls::Layout::Grey,
                pixels,
            )
            .map_err(|e| e.to_string())?;
        let v = gapstream_jpegls::encode_to_vec(&p, pixels).map_err(|e| e.to_string())?;
        Ok((p, v))
    };
    let elf = build_elf()?;
    let image = fs::read(&elf).map_err(|e| format!("cannot read {}: {e}", elf.display()))?;
    let scratch = env::temp_dir().join(format!("gvsoc-bench-jls-{}", std::process::id()));
    fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let mut runs: Vec<Run> = Vec::new();
    let started = std::time::Instant::now();
    let mut result = Ok(());
    for (fi, f) in frames.iter().enumerate() {
        let (plan, want) = chosen(&f.pixels)?;
        let d = digest(&want);
        let points: Vec<(Point, u64)> = vars
            .iter()
            .flat_map(|&k| cores.iter().map(move |&c| (k, c)))
            .flat_map(|(k, c)| {
                std::iter::repeat_n(
                    (
                        Point {
                            kernel: k,
                            mode: MODE_DMA,
                            cores: c,
                            buffer: 8192,
                            bytes: PIXELS as u32,
                        },
                        d,
                    ),
                    repeat,
                )
            })
            .collect();
        let mut e = image.clone();
        patch_symbol(&mut e, BENCH_SYMBOL, &config_bytes(&points, o.cold))?;
        patch_symbol(&mut e, BENCH_FRAME_SYMBOL, &f.pixels)?;
        let path = scratch.join(format!("gvsoc_bench_jls_{fi}.elf"));
        fs::write(&path, &e).map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        let (status, other) = launch(&path, &scratch.join("work"), o.trace.as_ref(), |line| {
            if let Some(dl) = parse_device_line(line) {
                let coded = line
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix("coded="))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                let num = |k: &str| {
                    line.split_whitespace()
                        .find_map(|kv| kv.strip_prefix(k))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                let bands = num("bands=") as usize;
                let est = (num("est_fc_cycles="), num("est_fc_instructions="));
                got.push((dl, coded, bands, est));
            }
        })?;
        let _ = fs::remove_file(&path);
        let mut bad = Vec::new();
        for (i, (p, want_d)) in points.iter().enumerate() {
            let (k, v) = BENCH_KERNELS[p.kernel];
            match got.iter().find(|(dl, _, _, _)| dl.index == i) {
                Some((dl, coded, bands, est))
                    if dl.ok
                        && dl.digest == *want_d
                        && *coded == want.len()
                        && *bands == plan.bands() =>
                {
                    runs.push(Run {
                        frame: f.name.clone(),
                        variant: format!("{k}/{v}"),
                        cores: p.cores,
                        cycles: dl.cycles,
                        instructions: dl.instructions,
                        coded: *coded,
                        bands: *bands,
                        est_cycles: est.0,
                        est_instructions: est.1,
                    })
                }
                Some((dl, coded, bands, _)) => bad.push(format!(
                    "{k}/{v} {} cores, {}: {} (digest {:016x}, want {want_d:016x}; {coded} B, want {}; {bands} bands, want {})",
                    p.cores,
                    f.name,
                    dl.verdict,
                    dl.digest,
                    want.len(),
                    plan.bands()
                )),
                None => bad.push(format!(
                    "{k}/{v} {} cores, {}: no result (exit status {status:?})",
                    p.cores, f.name
                )),
            }
        }
        eprintln!(
            "gvsoc-bench: jpegls {}/{} {} ({:.1}s)",
            fi + 1,
            frames.len(),
            f.name,
            started.elapsed().as_secs_f64()
        );
        if !bad.is_empty() {
            let tail: Vec<String> = other.iter().rev().take(20).rev().cloned().collect();
            result = Err(format!(
                "{} JPEG-LS run(s) failed:\n  {}\nlast simulator output:\n  {}",
                bad.len(),
                bad.join("\n  "),
                tail.join("\n  ")
            ));
            break;
        }
    }
    let _ = fs::remove_dir_all(&scratch);
    result?;
    let runs = median(runs, repeat);
    let charls = charls_sizes(&frames)?;
    // A run over some frames only does not overwrite the whole set's CSV.
    let csv = match &o.csv {
        Some(p) => p.clone(),
        None => target_dir()
            .join("bench")
            .join(if !o.pictures.is_empty() || o.stress {
                "gvsoc-jpegls-adhoc.csv"
            } else if o.quick {
                "gvsoc-jpegls-quick.csv"
            } else {
                "gvsoc-jpegls.csv"
            }),
    };
    if let Some(dir) = csv.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let mut text = String::from(
        "kernel,variant,frame,cores,pixels,cycles,instructions,cycles_per_pixel,coded_bytes,charls_bytes,bands,estimate_fc_cycles,estimate_fc_instructions\n",
    );
    for r in &runs {
        let fi = frames.iter().position(|f| f.name == r.frame).unwrap_or(0);
        let (k, v) = r.variant.split_once('/').unwrap_or((&r.variant, ""));
        let _ = writeln!(
            text,
            "{k},{v},{},{},{PIXELS},{},{},{:.2},{},{},{},{},{}",
            r.frame,
            r.cores,
            r.cycles,
            r.instructions,
            r.cycles as f64 / PIXELS as f64,
            r.coded,
            charls[fi],
            r.bands,
            r.est_cycles,
            r.est_instructions
        );
    }
    fs::write(&csv, text).map_err(|e| format!("cannot write {}: {e}", csv.display()))?;
    print!("{}", summary(&runs, &frames, &charls, &cores));
    println!(
        "gvsoc-bench: {} JPEG-LS runs verified, wrote {}",
        runs.len(),
        csv.display()
    );
    Ok(())
}

fn median(runs: Vec<Run>, n: usize) -> Vec<Run> {
    if n <= 1 {
        return runs;
    }
    let mut out = Vec::new();
    let mut it = runs.into_iter().peekable();
    while it.peek().is_some() {
        let mut g: Vec<Run> = it.by_ref().take(n).collect();
        g.sort_by_key(|r| r.cycles);
        out.push(g.swap_remove(g.len() / 2));
    }
    out
}

fn summary(runs: &[Run], frames: &[frameset::Picture], charls: &[usize], cores: &[u32]) -> String {
    let mut s = String::new();
    let mut vars: Vec<&str> = Vec::new();
    for r in runs {
        if !vars.contains(&r.variant.as_str()) {
            vars.push(&r.variant);
        }
    }
    for v in vars {
        let _ = writeln!(
            s,
            "\n{v}: 324x244 frames, bands (restart intervals) chosen from the frame's own estimate (at most {JPEGLS_BANDS}), cycles of the cluster job (bands, DMA, join); \"est FC\": the estimate's FC cycles, before the job:"
        );
        let _ = write!(s, "  {:<16}", "frame");
        for c in cores {
            let _ = write!(
                s,
                " {:>9}",
                format!("{c} core{}", if *c == 1 { "" } else { "s" })
            );
        }
        let _ = writeln!(
            s,
            " {:>7} {:>8} {:>5} {:>8} {:>8} {:>7} {:>7}",
            "c/px@8", "8 vs 1", "bands", "coded B", "CharLS B", "ratio", "est FC"
        );
        let find = |f: &str, c: u32| {
            runs.iter()
                .find(|r| r.variant == v && r.frame == f && r.cores == c)
        };
        let (mut worst8, mut worst_sp, mut worst_f, mut worst_sp_f) = (0u64, f64::MAX, "", "");
        let mut worst_est = 0u64;
        // The frame set as a whole (its 1-core cycles over its 8-core cycles, frames with both).
        let (mut sum1, mut sum8) = (0u64, 0u64);
        for (fi, f) in frames.iter().enumerate() {
            let _ = write!(s, "  {:<16}", f.name);
            for &c in cores {
                let cell = find(&f.name, c).map_or("-".to_string(), |r| r.cycles.to_string());
                let _ = write!(s, " {cell:>9}");
            }
            let (one, eight) = (find(&f.name, 1), find(&f.name, 8));
            let cpx = eight.map_or("-".into(), |r| {
                format!("{:.1}", r.cycles as f64 / PIXELS as f64)
            });
            let sp = match (one, eight) {
                (Some(a), Some(b)) => {
                    sum1 += a.cycles;
                    sum8 += b.cycles;
                    let x = a.cycles as f64 / b.cycles as f64;
                    if x < worst_sp {
                        (worst_sp, worst_sp_f) = (x, &f.name);
                    }
                    format!("{x:.2}x")
                }
                _ => "-".into(),
            };
            if let Some(e) = eight {
                if e.cycles > worst8 {
                    (worst8, worst_f) = (e.cycles, &f.name);
                }
            }
            let (coded, bands, est) = runs
                .iter()
                .find(|r| r.variant == v && r.frame == f.name)
                .map_or((0, 0, 0), |r| (r.coded, r.bands, r.est_cycles));
            worst_est = worst_est.max(est);
            let _ = writeln!(
                s,
                " {cpx:>7} {sp:>8} {bands:>5} {coded:>8} {:>8} {:>7.4} {est:>7}",
                charls[fi],
                coded as f64 / charls[fi] as f64
            );
        }
        if worst8 > 0 {
            let ok = worst8 <= TARGET_8_CORES;
            let _ = writeln!(
                s,
                "  {} {v}: worst frame on 8 cores <= {TARGET_8_CORES} cycles: {worst8} ({worst_f}, {:.2} ms at 150 MHz)",
                if ok { "met   " } else { "MISSED" },
                worst8 as f64 / 150e3
            );
        }
        if worst_est > 0 {
            let _ = writeln!(
                s,
                "  the plan's estimate on the FC: at most {worst_est} cycles a frame ({:.3} ms at 240 MHz), apart from the cluster job's cycles",
                worst_est as f64 / 240e3
            );
        }
        if worst_sp < f64::MAX {
            let ok = worst_sp >= TARGET_SPEEDUP;
            let _ = writeln!(
                s,
                "  {} {v}: 8 cores >= {TARGET_SPEEDUP}x 1 core on every frame: {worst_sp:.2}x ({worst_sp_f})",
                if ok { "met   " } else { "MISSED" }
            );
            let _ = writeln!(
                s,
                "  (the frame set as a whole, its 1-core cycles over its 8-core cycles: {:.2}x)",
                sum1 as f64 / sum8 as f64
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(frame: &str, cores: u32, cycles: u64, bands: usize) -> Run {
        Run {
            frame: frame.into(),
            variant: "jpegls/pulp".into(),
            cores,
            cycles,
            instructions: cycles,
            coded: 1000,
            bands,
            est_cycles: 50_000,
            est_instructions: 40_000,
        }
    }

    fn picture(name: &str) -> frameset::Picture {
        frameset::Picture {
            name: name.into(),
            width: 1,
            height: 1,
            pixels: vec![0],
        }
    }

    #[test]
    fn summary_gives_each_frame_and_the_set_its_speed_up_and_the_verdicts() {
        // A photograph 7x faster on 8 cores, a sparse frame (5 bands) 4.5x: the per-frame
        // target is missed on the sparse one, the set as a whole is (7 M + 2.7 M) / (1 M + 0.6 M).
        let runs = [
            run("grass", 1, 7_000_000, 8),
            run("grass", 8, 1_000_000, 8),
            run("synthetic", 1, 2_700_000, 5),
            run("synthetic", 8, 600_000, 5),
        ];
        let s = summary(
            &runs,
            &[picture("grass"), picture("synthetic")],
            &[990, 950],
            &[1, 8],
        );
        assert!(s.contains("7.00x"), "{s}");
        assert!(s.contains("4.50x"), "{s}");
        assert!(
            s.contains(
                "MISSED jpegls/pulp: worst frame on 8 cores <= 750000 cycles: 1000000 (grass"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "MISSED jpegls/pulp: 8 cores >= 6x 1 core on every frame: 4.50x (synthetic)"
            ),
            "{s}"
        );
        assert!(
            s.contains("its 1-core cycles over its 8-core cycles: 6.06x"),
            "{s}"
        );
    }
}
