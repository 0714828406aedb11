//! The JPEG rows of `cargo xtask gvsoc-bench` (kernel `jpeg`): the cluster encoder of
//! `gapstream_jpeg` on the GAP8 GVSOC model over the frame set (`frameset::standard_set`: ten
//! photographs at 324×244 and the synthetic pattern), variants `pulp` and `portable`, qualities
//! 50 / 75 / 90, cores 1 / 2 / 4 / 8, each run verified, each point measured in several code
//! layouts (`GVSOC_HOT_PAD`, see docs/bench.md) and judged on the worst.
//!
//! One ELF (`gvsoc/src/bin/gvsoc_jpeg.rs`) per layout; one launch per picture, the picture and
//! its runs patched into the ELF's `GVSOC_JPEG_CONFIG` symbol with the length and digest of the
//! file the host writes for each run (`gapstream_jpeg::encode` with the portable model, which
//! computes the same bits as the PULP kernel). Next to the cycles, libjpeg-turbo through Pillow
//! (`scripts/pillow_jpeg.py`, project venv) codes the same pictures with the same quantisation
//! table and restart interval: its bytes, and the PSNR of both files as Pillow decodes them.
//! Its time on the host is not comparable with GAP8 cycles and is not measured.
//!
//! Writes `target/bench/gvsoc-jpeg.csv` (`gvsoc-jpeg-quick.csv` with `--quick`,
//! `gvsoc-jpeg-adhoc.csv` when filtered; `--csv` otherwise, see `gvsoc::codec_csv`):
//! `kernel,variant,quality,picture,cores,width,height,layouts,cycles,instructions,bytes,cycles_per_pixel`
//! (`cycles`: the worst over the layouts measured).
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

use gapstream_jpeg::{FrameSpec, Portable, encode, testimage};

use crate::gvsoc::{Options, launch, on_path, target_dir, workspace_root};

#[allow(dead_code)]
mod config {
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gvsoc/src/jpeg_common.rs"
    ));
}
use config::*;

/// Qualities of the sweep.
pub const QUALITIES: [u32; 3] = [50, 75, 90];
/// Core counts of the sweep.
pub const CORES: [u32; 4] = [1, 2, 4, 8];
/// The code layouts the sweep measures each point in (`GVSOC_HOT_PAD` bytes).
pub const PADS: [u32; 8] = [0, 128, 256, 384, 512, 640, 768, 896];
/// Cluster clock of the frame-time figures, MHz.
const CLUSTER_MHZ: f64 = 150.0;

/// Whether the options ask for JPEG rows: no kernel filter, or one that is part of
/// `jpeg/pulp` or `jpeg/portable` (`--kernel jpeg/` selects these rows alone: `jpeg` also
/// matches the JPEG-LS kernels).
pub fn selected(o: &Options) -> bool {
    o.kernel.as_deref().is_none_or(|k| {
        let k = k.trim();
        "jpeg/pulp".contains(k) || "jpeg/portable".contains(k)
    })
}

/// One point of the plan (per picture).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    variant: u32,
    quality: u32,
    cores: u32,
}

/// The runs of one picture: the full sweep, or `--quick` (the `pulp` rows on 1 and 8 cores).
fn plan(o: &Options) -> Vec<Point> {
    let mut v = Vec::new();
    for (variant, name) in JPEG_VARIANTS.iter().enumerate() {
        if o.quick && *name != "pulp" {
            continue;
        }
        if let Some(k) = o.kernel.as_deref() {
            let full = format!("jpeg/{name}");
            let exact = ["jpeg/pulp", "jpeg/portable"].contains(&k);
            if (exact && full != k) || (!exact && !full.contains(k)) {
                continue;
            }
        }
        for &quality in &QUALITIES {
            if !o.quality.is_empty() && !o.quality.contains(&quality) {
                continue;
            }
            for &cores in &CORES {
                if o.quick && cores != 1 && cores != 8 {
                    continue;
                }
                if !o.cores.is_empty() && !o.cores.contains(&cores) {
                    continue;
                }
                v.push(Point {
                    variant: variant as u32,
                    quality,
                    cores,
                });
            }
        }
    }
    v
}

/// A measured point: the worst cycles over the layouts.
#[derive(Clone, Debug, PartialEq)]
pub struct JpegRow {
    pub variant: String,
    pub quality: u32,
    pub picture: String,
    pub cores: u32,
    pub width: u32,
    pub height: u32,
    pub layouts: u32,
    pub cycles: u64,
    pub instructions: u64,
    pub bytes: u64,
}

impl JpegRow {
    fn cpp(&self) -> f64 {
        self.cycles as f64 / (self.width as f64 * self.height as f64)
    }
}

const CSV_HEADER: &str = "kernel,variant,quality,picture,cores,width,height,layouts,cycles,instructions,bytes,cycles_per_pixel";

fn to_csv(rows: &[JpegRow]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for r in rows {
        let _ = writeln!(
            s,
            "jpeg,{},{},{},{},{},{},{},{},{},{},{:.3}",
            r.variant,
            r.quality,
            r.picture,
            r.cores,
            r.width,
            r.height,
            r.layouts,
            r.cycles,
            r.instructions,
            r.bytes,
            r.cpp()
        );
    }
    s
}

/// A stack's high-water mark and size in bytes, `(used, size)`.
type StackMark = (u32, u32);

/// A parsed `jpeg i=…` line of the device.
#[derive(Debug, PartialEq)]
struct DeviceLine {
    index: usize,
    cycles: u64,
    instructions: u64,
    bytes: u64,
    digest: u64,
    ok: bool,
    verdict: String,
    /// The FC's stack high-water mark so far.
    fc_stack: Option<StackMark>,
}

fn parse_device_line(line: &str) -> Option<DeviceLine> {
    let rest = line.strip_prefix("jpeg i=")?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
    };
    let verdict = line
        .split_whitespace()
        .skip_while(|w| !w.starts_with("digest="))
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ");
    Some(DeviceLine {
        index: rest.split_whitespace().next()?.parse().ok()?,
        cycles: field("cycles")?.parse().ok()?,
        instructions: field("instructions")?.parse().ok()?,
        bytes: field("bytes")?.parse().ok()?,
        digest: u64::from_str_radix(field("digest")?, 16).ok()?,
        ok: verdict == "ok",
        verdict,
        fc_stack: field("fcstack")
            .and_then(|v| v.split_once('/'))
            .and_then(|(u, z)| Some((u.parse().ok()?, z.parse().ok()?))),
    })
}

/// The config bytes of one launch.
fn config_bytes(p: &frameset::Picture, runs: &[JpegRun], cold: bool) -> Vec<u8> {
    let mut w: Vec<u32> = vec![
        JPEG_MAGIC,
        JPEG_VERSION,
        runs.len() as u32,
        if cold { JPEG_FLAG_COLD } else { 0 },
        p.width as u32,
        p.height as u32,
    ];
    for r in runs {
        w.extend(r.words());
    }
    w.resize(JPEG_FRAME_AT / 4, 0);
    let mut b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.extend_from_slice(&p.pixels);
    b.resize(JPEG_CONFIG_BYTES, 0);
    b
}

/// The file the host writes for a run (the device must write the same).
fn reference(p: &frameset::Picture, quality: u32, cores: u32) -> Result<Vec<u8>, String> {
    let spec = FrameSpec {
        width: p.width as u16,
        height: p.height as u16,
        quality: quality as u8,
        bands: cores as u8,
    };
    let layout = spec.layout().map_err(|e| e.to_string())?;
    let mut out = vec![0u8; layout.max_len()];
    let n = encode::<Portable>(&spec, &p.pixels, &mut out).map_err(|e| e.to_string())?;
    out.truncate(n);
    Ok(out)
}

fn build_elf(pad: u32) -> Result<PathBuf, String> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace_root())
        .args([
            "build",
            "--locked",
            "--quiet",
            "-p",
            "gvsoc",
            "--features",
            "pulp",
        ])
        .args([
            "--bin",
            "gvsoc_jpeg",
            "--target",
            crate::qemu::TARGET,
            "--profile",
            "rv32",
        ]);
    if pad == 0 {
        cmd.env_remove("GVSOC_HOT_PAD");
    } else {
        cmd.env("GVSOC_HOT_PAD", pad.to_string());
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("building gvsoc_jpeg failed".into());
    }
    let elf = target_dir()
        .join(crate::qemu::TARGET)
        .join("rv32")
        .join("gvsoc_jpeg");
    fs::read(&elf)
        .map_err(|e| format!("cannot read {}: {e}", elf.display()))
        .map(|_| elf)
}

/// Pillow's figures for one picture and quality: `(pillow bytes, pillow PSNR, our PSNR)`, both
/// files decoded by Pillow.
type PillowFigures = BTreeMap<(String, u32), (u64, f64, f64)>;

fn python() -> PathBuf {
    env::var_os("GAPSTREAM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv"))
        .join("bin/python")
}

fn read_pgm(path: &Path) -> Result<Vec<u8>, String> {
    let b = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut fields = 0;
    let mut at = 0;
    while fields < 4 {
        while b.get(at).is_some_and(|c| c.is_ascii_whitespace()) {
            at += 1;
        }
        while b.get(at).is_some_and(|c| !c.is_ascii_whitespace()) {
            at += 1;
        }
        fields += 1;
    }
    Ok(b[at + 1..].to_vec())
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    10.0 * (255.0f64 * 255.0 * a.len() as f64 / se.max(1e-9)).log10()
}

/// libjpeg-turbo through Pillow on every picture and quality, with the table and the restart
/// interval of the 8-core file; our 8-core file beside it.
fn pillow(
    pictures: &[frameset::Picture],
    qualities: &[u32],
    scratch: &Path,
) -> Result<(PillowFigures, String), String> {
    let dir = scratch.join("pillow");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut jobs = String::from("version\n");
    for p in pictures {
        frameset::write_pgm(&dir.join(format!("{}.pgm", p.name)), p).map_err(|e| e.to_string())?;
        for &q in qualities {
            let ours = reference(p, q, 8)?;
            let layout = FrameSpec {
                width: p.width as u16,
                height: p.height as u16,
                quality: q as u8,
                bands: 8,
            }
            .layout()
            .map_err(|e| e.to_string())?;
            let rows = if layout.restart {
                layout.interval_rows
            } else {
                0
            };
            let tag = format!("{}_{q}", p.name);
            fs::write(dir.join(format!("ours_{tag}.jpg")), ours).map_err(|e| e.to_string())?;
            let _ = writeln!(jobs, "encode {}.pgm pil_{tag}.jpg {q} {rows}", p.name);
            let _ = writeln!(jobs, "decode ours_{tag}.jpg ours_{tag}.pgm");
            let _ = writeln!(jobs, "decode pil_{tag}.jpg pil_{tag}.pgm");
        }
    }
    fs::write(dir.join("jobs.txt"), jobs).map_err(|e| e.to_string())?;
    let py = python();
    let out = Command::new(&py)
        .arg(workspace_root().join("scripts/pillow_jpeg.py"))
        .arg(dir.join("jobs.txt"))
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} (run `scripts/setup.sh test`): {e}",
                py.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "pillow_jpeg.py failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let version = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let mut f = PillowFigures::new();
    for p in pictures {
        for &q in qualities {
            let tag = format!("{}_{q}", p.name);
            let pil = fs::metadata(dir.join(format!("pil_{tag}.jpg")))
                .map_err(|e| e.to_string())?
                .len();
            let pp = psnr(&p.pixels, &read_pgm(&dir.join(format!("pil_{tag}.pgm")))?);
            let po = psnr(&p.pixels, &read_pgm(&dir.join(format!("ours_{tag}.pgm")))?);
            f.insert((p.name.clone(), q), (pil, pp, po));
        }
    }
    Ok((f, version))
}

/// `cargo xtask gvsoc-bench` with kernel `jpeg` selected.
pub fn bench(o: &Options) -> Result<(), String> {
    if !on_path("gapy") {
        println!(
            "gvsoc-bench: jpeg: skipped: the GAP8 GVSOC simulator is not set up (run: make gvsoc-setup; or load a GAP SDK environment with gapy on PATH)"
        );
        return Ok(());
    }
    let plan = plan(o);
    if plan.is_empty() {
        return Err("no jpeg point matches the filters".into());
    }
    let pictures: Vec<frameset::Picture> = frameset::standard_set()
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|p| o.pictures.is_empty() || o.pictures.contains(&p.name))
        .collect();
    if pictures.is_empty() {
        return Err("no picture of the frame set matches --pictures".into());
    }
    // Every layout for the full sweep (the targets are judged on the worst), one otherwise.
    let layouts = match o.layouts {
        0 if o.quick || o.trace.is_some() => 1,
        0 => PADS.len(),
        n => n.min(PADS.len()),
    };
    let csv_path = o.csv.clone().unwrap_or_else(|| {
        let filtered = o.kernel.is_some()
            || !o.cores.is_empty()
            || !o.quality.is_empty()
            || !o.pictures.is_empty()
            || o.cold;
        target_dir().join("bench").join(if filtered {
            "gvsoc-jpeg-adhoc.csv"
        } else if o.quick {
            "gvsoc-jpeg-quick.csv"
        } else {
            "gvsoc-jpeg.csv"
        })
    });
    let scratch = env::temp_dir().join(format!("gvsoc-jpeg-{}", std::process::id()));
    fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let r = sweep(o, &plan, &pictures, &PADS[..layouts], &scratch);
    let qualities: Vec<u32> = {
        let mut q: Vec<u32> = plan.iter().map(|p| p.quality).collect();
        q.dedup();
        q.sort();
        q.dedup();
        q
    };
    let pil = r.and_then(|rows| Ok((rows, pillow(&pictures, &qualities, &scratch)?)));
    let _ = fs::remove_dir_all(&scratch);
    let ((rows, fc_stack), (pil, version)) = pil?;
    if let Some(dir) = csv_path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    fs::write(&csv_path, to_csv(&rows))
        .map_err(|e| format!("cannot write {}: {e}", csv_path.display()))?;
    print!("{}", summary(&rows, &pil, &version, layouts));
    let shown = csv_path
        .strip_prefix(workspace_root())
        .unwrap_or(&csv_path)
        .display()
        .to_string();
    println!(
        "gvsoc-bench: jpeg: {} runs verified ({} points x {layouts} layouts), wrote {shown}",
        rows.len() * layouts,
        rows.len(),
    );
    if let Some((u, z)) = fc_stack {
        println!("FC stack (high-water, stack paint): {u} of {z} B");
    }
    Ok(())
}

fn sweep(
    o: &Options,
    plan: &[Point],
    pictures: &[frameset::Picture],
    pads: &[u32],
    scratch: &Path,
) -> Result<(Vec<JpegRow>, Option<StackMark>), String> {
    // Expected files per (picture, quality, cores).
    let mut runs_of = Vec::new();
    for p in pictures {
        let mut runs = Vec::new();
        for pt in plan {
            let f = reference(p, pt.quality, pt.cores)?;
            let d = testimage::digest(&f);
            runs.push(JpegRun {
                variant: pt.variant,
                quality: pt.quality,
                cores: pt.cores,
                len: f.len() as u32,
                digest_lo: d as u32,
                digest_hi: (d >> 32) as u32,
            });
        }
        runs_of.push(runs);
    }
    let mut worst: BTreeMap<(String, Point), JpegRow> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut fc_stack: Option<StackMark> = None;
    let start = std::time::Instant::now();
    for &pad in pads {
        let elf = build_elf(pad)?;
        let image = fs::read(&elf).map_err(|e| e.to_string())?;
        for (p, runs) in pictures.iter().zip(&runs_of) {
            for chunk in runs.chunks(JPEG_MAX_RUNS) {
                let mut bytes = image.clone();
                crate::gvsoc::patch_symbol(
                    &mut bytes,
                    JPEG_SYMBOL,
                    &config_bytes(p, chunk, o.cold),
                )?;
                let path = scratch.join(format!("gvsoc_jpeg_{pad}_{}.elf", p.name));
                fs::write(&path, &bytes).map_err(|e| e.to_string())?;
                let mut got: Vec<Option<DeviceLine>> = (0..chunk.len()).map(|_| None).collect();
                let (status, other) =
                    launch(&path, &scratch.join("work"), o.trace.as_ref(), |line| {
                        if let Some(d) = parse_device_line(line) {
                            if let Some((u, z)) = d.fc_stack {
                                fc_stack = Some((fc_stack.map_or(u, |(m, _)| m.max(u)), z));
                            }
                            if d.index < got.len() {
                                let i = d.index;
                                got[i] = Some(d);
                            }
                        }
                    })?;
                let _ = fs::remove_file(&path);
                for (r, g) in chunk.iter().zip(&got) {
                    let variant = JPEG_VARIANTS[r.variant as usize];
                    let what = format!(
                        "jpeg/{variant} q{} {} cores {} (layout pad {pad})",
                        r.quality, r.cores, p.name
                    );
                    let want = (r.digest_hi as u64) << 32 | r.digest_lo as u64;
                    match g {
                        Some(d) if d.ok && d.digest == want && d.bytes == r.len as u64 => {
                            let key = (
                                p.name.clone(),
                                Point {
                                    variant: r.variant,
                                    quality: r.quality,
                                    cores: r.cores,
                                },
                            );
                            let row = worst.entry(key).or_insert(JpegRow {
                                variant: variant.to_string(),
                                quality: r.quality,
                                picture: p.name.clone(),
                                cores: r.cores,
                                width: p.width as u32,
                                height: p.height as u32,
                                layouts: 0,
                                cycles: 0,
                                instructions: 0,
                                bytes: d.bytes,
                            });
                            row.layouts += 1;
                            if d.cycles >= row.cycles {
                                row.cycles = d.cycles;
                                row.instructions = d.instructions;
                            }
                        }
                        Some(d) => failures.push(format!(
                            "{what}: {} ({} bytes, digest {:016x}; want {} bytes, {want:016x})",
                            d.verdict, d.bytes, d.digest, r.len
                        )),
                        None => failures.push(format!(
                            "{what}: no result (launch exit status {status:?}); last output: {}",
                            other
                                .iter()
                                .rev()
                                .take(5)
                                .rev()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(" | ")
                        )),
                    }
                }
            }
            eprintln!(
                "gvsoc-bench: jpeg: layout pad {pad}: {} done ({:.0} s)",
                p.name,
                start.elapsed().as_secs_f64()
            );
        }
    }
    if !failures.is_empty() {
        return Err(format!(
            "{} jpeg runs failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        ));
    }
    // Sweep order: pulp first, quality, picture (frame-set order), cores.
    let mut rows: Vec<JpegRow> = worst.into_values().collect();
    rows.sort_by(|a, b| {
        let order = |r: &JpegRow| {
            let pi = pictures
                .iter()
                .position(|p| p.name == r.picture)
                .unwrap_or(0);
            (r.variant != "pulp", r.quality, pi, r.cores)
        };
        order(a).cmp(&order(b))
    });
    Ok((rows, fc_stack))
}

fn find<'a>(
    rows: &'a [JpegRow],
    variant: &str,
    quality: u32,
    picture: &str,
    cores: u32,
) -> Option<&'a JpegRow> {
    rows.iter().find(|r| {
        r.variant == variant && r.quality == quality && r.picture == picture && r.cores == cores
    })
}

/// The summary printed after the sweep: per variant and quality the worst picture's cycles per
/// frame and per pixel on each core count, the speed-up, then per picture the bytes next to
/// Pillow's and the PSNRs, then the targets.
fn summary(rows: &[JpegRow], pil: &PillowFigures, version: &str, layouts: usize) -> String {
    let mut s = String::new();
    let mut pictures: Vec<&str> = Vec::new();
    for r in rows {
        if !pictures.contains(&r.picture.as_str()) {
            pictures.push(&r.picture);
        }
    }
    let _ = writeln!(
        s,
        "\nJPEG on the cluster: cycles per frame, worst of {layouts} code layout(s) and of {} picture(s) ({}x{}):",
        pictures.len(),
        rows.first().map_or(0, |r| r.width),
        rows.first().map_or(0, |r| r.height)
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>3} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
        "kernel/variant",
        "q",
        "1 core",
        "2 cores",
        "4 cores",
        "8 cores",
        "8c vs 1c",
        "c/px 8c",
        "ms@150 8c"
    );
    let mut series: Vec<(String, u32)> = Vec::new();
    for r in rows {
        if !series.contains(&(r.variant.clone(), r.quality)) {
            series.push((r.variant.clone(), r.quality));
        }
    }
    let worst = |v: &str, q: u32, c: u32| {
        rows.iter()
            .filter(|r| r.variant == v && r.quality == q && r.cores == c)
            .max_by_key(|r| r.cycles)
    };
    for (v, q) in &series {
        let cells: Vec<Option<&JpegRow>> = CORES.iter().map(|&c| worst(v, *q, c)).collect();
        let cell = |r: &Option<&JpegRow>| r.map_or("-".to_string(), |r| r.cycles.to_string());
        // Speed-up per picture, the smallest.
        let sp = pictures
            .iter()
            .filter_map(|p| {
                Some(
                    find(rows, v, *q, p, 1)?.cycles as f64 / find(rows, v, *q, p, 8)?.cycles as f64,
                )
            })
            .fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            s,
            "  {:<16} {:>3} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
            format!("jpeg/{v}"),
            q,
            cell(&cells[0]),
            cell(&cells[1]),
            cell(&cells[2]),
            cell(&cells[3]),
            if sp.is_finite() {
                format!("{sp:.2}x")
            } else {
                "-".into()
            },
            cells[3].map_or("-".into(), |r| format!("{:.2}", r.cpp())),
            cells[3].map_or("-".into(), |r| format!(
                "{:.3}",
                r.cycles as f64 / (CLUSTER_MHZ * 1e3)
            )),
        );
    }
    let _ = writeln!(
        s,
        "  (8c vs 1c: the smallest speed-up over the pictures; c/px: cycles per pixel)"
    );
    // Per picture: bytes and quality against libjpeg-turbo.
    let _ = writeln!(
        s,
        "\nper picture (8 cores; Pillow = libjpeg-turbo with the same table and restart interval, {version}; its host time is not comparable and not measured):"
    );
    let _ = writeln!(
        s,
        "  {:<16} {:>3} {:>11} {:>11} {:>9} {:>10} {:>6} {:>8} {:>8} {:>7}",
        "picture",
        "q",
        "pulp c 8c",
        "pulp c 1c",
        "bytes",
        "Pillow B",
        "ratio",
        "dB",
        "Pillow dB",
        "raw:B"
    );
    for (v, q) in series
        .iter()
        .filter(|(v, _)| v == "pulp" || !series.iter().any(|s| s.0 == "pulp"))
    {
        for p in &pictures {
            let (Some(r8), Some(&(pb, pp, po))) =
                (find(rows, v, *q, p, 8), pil.get(&(p.to_string(), *q)))
            else {
                continue;
            };
            let r1 = find(rows, v, *q, p, 1);
            let _ = writeln!(
                s,
                "  {:<16} {:>3} {:>11} {:>11} {:>9} {:>10} {:>6.3} {:>8.2} {:>8.2} {:>7.1}",
                p,
                q,
                r8.cycles,
                r1.map_or("-".into(), |r| r.cycles.to_string()),
                r8.bytes,
                pb,
                r8.bytes as f64 / pb as f64,
                po,
                pp,
                (r8.width * r8.height) as f64 / r8.bytes as f64
            );
        }
    }
    let t = targets(rows, pil, &pictures);
    if !t.is_empty() {
        let _ = writeln!(s, "\ntargets (GVSOC GAP8 model, cluster at 150 MHz):");
        for (what, got, ok) in t {
            let _ = writeln!(
                s,
                "  {} {what}: {got}",
                if ok { "met   " } else { "MISSED" }
            );
        }
    }
    s
}

/// The JPEG targets, on the worst picture and the worst layout measured.
fn targets(
    rows: &[JpegRow],
    pil: &PillowFigures,
    pictures: &[&str],
) -> Vec<(String, String, bool)> {
    let mut t = Vec::new();
    let frame = |r: &JpegRow| r.width == 324 && r.height == 244;
    let mut q75: Vec<&JpegRow> = rows
        .iter()
        .filter(|r| r.variant == "pulp" && r.quality == 75 && r.cores == 8 && frame(r))
        .collect();
    q75.sort_by_key(|r| r.cycles);
    if let Some(w) = q75.last() {
        let met = q75.iter().filter(|r| r.cycles <= 330_000).count();
        let median = q75[q75.len() / 2];
        t.push((
            "JPEG 324x244 quality 75 on 8 cores (entropy coding and DMA included) <= 330,000 cycles, every picture".into(),
            format!(
                "worst {} cycles ({}, {:.3} ms), median {} ({}), met on {met} of {}",
                w.cycles,
                w.picture,
                w.cycles as f64 / 150e3,
                median.cycles,
                median.picture,
                q75.len()
            ),
            w.cycles <= 330_000,
        ));
    }
    let sp = pictures
        .iter()
        .filter_map(|p| {
            let (a, b) = (find(rows, "pulp", 75, p, 1)?, find(rows, "pulp", 75, p, 8)?);
            Some((a.cycles as f64 / b.cycles as f64, *p))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((s, p)) = sp {
        t.push((
            "JPEG quality 75: 8 cores >= 6x one core".into(),
            format!("{s:.2}x (smallest, {p})"),
            s >= 6.0,
        ));
    }
    let mut worst_db = (f64::INFINITY, String::new());
    let mut worst_ratio = (0.0f64, String::new());
    for ((p, q), &(pb, pp, po)) in pil {
        if let Some(r) = find(rows, "pulp", *q, p, 8).or_else(|| find(rows, "portable", *q, p, 8)) {
            if po - pp < worst_db.0 {
                worst_db = (po - pp, format!("{p} q{q}"));
            }
            let ratio = r.bytes as f64 / pb as f64;
            if ratio > worst_ratio.0 {
                worst_ratio = (ratio, format!("{p} q{q}"));
            }
        }
    }
    if worst_db.0.is_finite() {
        t.push((
            "JPEG PSNR within 0.3 dB of libjpeg-turbo's (same tables), every picture".into(),
            format!("{:+.3} dB (worst, {})", worst_db.0, worst_db.1),
            worst_db.0 >= -0.3,
        ));
        t.push((
            "JPEG size <= 1.03x libjpeg-turbo's (same tables), every picture".into(),
            format!("{:.4}x (worst, {})", worst_ratio.0, worst_ratio.1),
            worst_ratio.0 <= 1.03,
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lines_parse_and_plans_fit() {
        let l = "jpeg i=2 variant=pulp quality=75 cores=8 width=324 height=244 cycles=300000 instructions=250000 bytes=12345 stack0=100/8192 stack=90/3072 digest=0123456789abcdef ok";
        let d = parse_device_line(l).unwrap();
        assert_eq!(
            (d.index, d.cycles, d.bytes, d.digest, d.ok),
            (2, 300_000, 12_345, 0x0123_4567_89ab_cdef, true)
        );
        assert_eq!(d.fc_stack, None);
        let f = parse_device_line(&l.replace(" ok", " FAIL digest")).unwrap();
        assert!(!f.ok);
        let g = parse_device_line(
            &l.replace(" digest=", " fcstack=7990/8192 digest=")
                .replace(" ok", " FAIL fc-stack-near-overflow"),
        )
        .unwrap();
        assert_eq!(g.fc_stack, Some((7990, 8192)));
        assert_eq!(
            (g.ok, g.verdict.as_str()),
            (false, "FAIL fc-stack-near-overflow")
        );
        let full = plan(&Options::default());
        assert_eq!(full.len(), 2 * 3 * 4);
        assert!(full.len() <= JPEG_MAX_RUNS);
        let quick = plan(&Options {
            quick: true,
            ..Options::default()
        });
        assert_eq!(quick.len(), 3 * 2);
        assert!(
            quick
                .iter()
                .all(|p| JPEG_VARIANTS[p.variant as usize] == "pulp")
        );
        let only = plan(&Options {
            kernel: Some("jpeg/portable".into()),
            ..Options::default()
        });
        assert!(
            only.iter()
                .all(|p| JPEG_VARIANTS[p.variant as usize] == "portable")
        );
        assert!(selected(&Options::default()));
        assert!(!selected(&Options {
            kernel: Some("chacha20".into()),
            ..Options::default()
        }));
        assert!(!selected(&Options {
            kernel: Some("jpegls".into()),
            ..Options::default()
        }));
        assert!(selected(&Options {
            kernel: Some("jpeg/".into()),
            ..Options::default()
        }));
    }

    #[test]
    fn config_carries_the_runs_and_the_frame() {
        let p = frameset::Picture {
            name: "t".into(),
            width: 3,
            height: 2,
            pixels: vec![1, 2, 3, 4, 5, 6],
        };
        let r = JpegRun {
            variant: 1,
            quality: 75,
            cores: 8,
            len: 100,
            digest_lo: 7,
            digest_hi: 9,
        };
        let b = config_bytes(&p, &[r], true);
        assert_eq!(b.len(), JPEG_CONFIG_BYTES);
        let w = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!(
            (w(0), w(1), w(2), w(3), w(4), w(5)),
            (JPEG_MAGIC, JPEG_VERSION, 1, JPEG_FLAG_COLD, 3, 2)
        );
        assert_eq!((w(6), w(7), w(8), w(9)), (1, 75, 8, 100));
        assert_eq!(&b[JPEG_FRAME_AT..JPEG_FRAME_AT + 6], &[1, 2, 3, 4, 5, 6]);
    }
}
