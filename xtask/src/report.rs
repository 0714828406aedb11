//! `cargo xtask bench-report [--csv PATH] [--out DIR]`: PNG plots and a Markdown report from the
//! benchmark CSVs. "The paper": F. Barchi et al., "RUST-Encoded Stream Ciphers on a RISC-V
//! Parallel Ultra-Low-Power Processor", PARMA-DITAM 2023.
//!
//! Input: the GVSOC sweep (`target/bench/gvsoc.csv`, or `--csv`), and, when present, the QEMU
//! instruction counts (`target/bench/qemu.csv`). Output (in `target/bench`, or `--out`):
//!
//! | file | what |
//! |---|---|
//! | `speedup_<kernel>_<variant>.png` | speed-up of 2, 4 and 8 cores over 1 core against the payload, one line per core count (the engine's rounds, and the paper's fixed rounds dashed where measured) |
//! | `cpb_<kernel>.png` | cycles per byte at 128 KiB against the core count, one line per variant, the paper's figures as anchors |
//! | `report.md` | the tables (cycles per byte, speed-ups, DMA against no DMA, the camera-frame budget, targets) with the plots embedded |
//!
//! Plots are drawn with `plotters` (bitmap backend, `ab_glyph` text: pure Rust) in DejaVu Sans
//! (Debian `fonts-dejavu-core`, installed by the set-up step) and encoded with `png`.
use crate::gvsoc::{self, CLOCKS_MHZ, FRAME_BYTES, Row, SWEEP_BUFFERS, SWEEP_BYTES, SWEEP_CORES};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// The paper's cycles per byte on 1, 2, 4, 8 cores (its Figure 2 / text).
pub const PAPER_CHACHA20: [f64; 4] = [16.0, 8.4, 4.3, 2.2];
/// See [`PAPER_CHACHA20`].
pub const PAPER_AES_CTR: [f64; 4] = [128.0, 79.0, 36.0, 18.0];

const W: u32 = 900;
const H: u32 = 520;

fn font() -> Result<(), String> {
    for p in FONT_PATHS {
        if let Ok(bytes) = fs::read(p) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(format!(
        "bench-report: no font for the plots: install fonts-dejavu-core (make setup); looked for {}",
        FONT_PATHS.join(", ")
    ))
}

fn render(
    path: &Path,
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<(), String> {
    let mut buf = vec![0u8; (W * H * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, W, H);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(|e| e.to_string())?;
    w.write_image_data(&buf).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Speed-up `T(1) / T(n)` of a series at each payload (the frame included) for one buffer size.
fn speedups(rows: &[Row], kernel: &str, variant: &str, buffer: u32, cores: u32) -> Vec<(u32, f64)> {
    let mut sizes: Vec<u32> = SWEEP_BYTES.iter().copied().chain([FRAME_BYTES]).collect();
    sizes.sort_unstable();
    sizes
        .into_iter()
        .filter_map(|b| {
            let one = gvsoc::find(rows, kernel, variant, 1, buffer, b)?;
            let n = gvsoc::find(rows, kernel, variant, cores, buffer, b)?;
            Some((b, one.cycles as f64 / n.cycles.max(1) as f64))
        })
        .collect()
}

fn plot_speedup(path: &Path, rows: &[Row], kernel: &str, variant: &str) -> Result<bool, String> {
    let buffer = 8192;
    let lines: Vec<(u32, Vec<(u32, f64)>)> = [2, 4, 8]
        .iter()
        .map(|&c| (c, speedups(rows, kernel, variant, buffer, c)))
        .collect();
    if lines.iter().all(|(_, v)| v.len() < 2) {
        return Ok(false);
    }
    let fixed = format!("{variant}+fixed");
    let fixed_lines: Vec<(u32, Vec<(u32, f64)>)> = [2, 4, 8]
        .iter()
        .map(|&c| (c, speedups(rows, kernel, &fixed, buffer, c)))
        .collect();
    let ymax = lines
        .iter()
        .chain(&fixed_lines)
        .flat_map(|(_, v)| v.iter().map(|p| p.1))
        .fold(8.0f64, f64::max)
        .ceil()
        + 0.5;
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "{kernel}/{variant}: speed-up over 1 core (8 KiB L1 buffers, payload in L2)"
                ),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(52)
            .build_cartesian_2d(-0.5f64..17.5f64, 0f64..ymax)
            .map_err(|e| e.to_string())?;
        // x is log2(bytes); labelled at the sweep's sizes.
        chart
            .configure_mesh()
            .x_desc("payload (bytes, log scale)")
            .y_desc("speed-up T(1)/T(n)")
            .x_labels(19)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.05
                    && [0.0, 6.0, 10.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0].contains(&i)
                {
                    gvsoc::human(1u32 << i as u32)
                } else {
                    String::new()
                }
            })
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        let lx = |b: u32| (b as f64).log2();
        for (i, (cores, pts)) in lines.iter().enumerate() {
            let color = PALETTE[i];
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(b, s)| (lx(b), s)),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(format!("{cores} cores"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(b, s)| Circle::new((lx(b), s), 3, color.filled())),
                )
                .map_err(|e| e.to_string())?;
            // Ideal.
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, *cores as f64), (17.5, *cores as f64)],
                    color.mix(0.3),
                ))
                .map_err(|e| e.to_string())?;
        }
        for (i, (cores, pts)) in fixed_lines.iter().enumerate() {
            if pts.len() < 2 {
                continue;
            }
            let color = PALETTE[i].mix(0.6);
            chart
                .draw_series(DashedLineSeries::new(
                    pts.iter().map(|&(b, s)| (lx(b), s)),
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(format!("{cores} cores, fixed 8 KiB rounds"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(|e| e.to_string())
    })?;
    Ok(true)
}

fn plot_cpb(path: &Path, rows: &[Row], kernel: &str, paper: &[f64; 4]) -> Result<bool, String> {
    let big = 128 * 1024;
    let variants: Vec<String> = gvsoc::series(rows)
        .into_iter()
        .filter(|(k, v)| k == kernel && !v.contains("+fixed"))
        .map(|(_, v)| v)
        .collect();
    let lines: Vec<(String, Vec<(u32, f64)>)> = variants
        .iter()
        .map(|v| {
            let b = if v.ends_with("+nodma") { 0 } else { 8192 };
            let pts = SWEEP_CORES
                .iter()
                .filter_map(|&c| gvsoc::find(rows, kernel, v, c, b, big).map(|r| (c, r.cpb())))
                .collect();
            (v.clone(), pts)
        })
        .filter(|(_, p): &(String, Vec<(u32, f64)>)| !p.is_empty())
        .collect();
    if lines.is_empty() {
        return Ok(false);
    }
    let ymax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .chain(paper.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.5;
    let ymin = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1))
        .chain(paper.iter().copied())
        .fold(f64::MAX, f64::min)
        / 1.5;
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{kernel}: cycles per byte, 128 KiB in L2 (8 KiB L1 buffers), GAP8 GVSOC"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.3f64..3.3f64, (ymin..ymax).log_scale())
            .map_err(|e| e.to_string())?;
        // x is log2(cores): 1, 2, 4, 8 evenly spaced.
        chart
            .configure_mesh()
            .x_desc("cores")
            .y_desc("cycles per byte (log scale)")
            .x_labels(4)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.05 && (0.0..=3.0).contains(&i) {
                    format!("{}", 1u32 << i as u32)
                } else {
                    String::new()
                }
            })
            .y_labels(8)
            .y_label_formatter(&|y| format!("{y:.1}"))
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        let lx = |c: u32| (c as f64).log2();
        // A mode variant (`pulp+nodma`, `pulp+fixed`) takes its kernel's colour, dashed, so the
        // colours never repeat for different kernels.
        let mut bases: Vec<&str> = Vec::new();
        for (v, _) in lines.iter() {
            let b = v.split('+').next().unwrap_or(v);
            if !bases.contains(&b) {
                bases.push(b);
            }
        }
        for (v, pts) in lines.iter() {
            let base = v.split('+').next().unwrap_or(v);
            let i = bases.iter().position(|b| *b == base).unwrap_or(0);
            let color = PALETTE[i % PALETTE.len()];
            let style = color.stroke_width(2);
            let series = pts.iter().map(|&(c, y)| (lx(c), y));
            let drawn = if v.contains('+') {
                chart.draw_series(DashedLineSeries::new(series, 6, 4, style))
            } else {
                chart.draw_series(LineSeries::new(series, style))
            };
            let dashed = v.contains('+');
            drawn
                .map_err(|e| e.to_string())?
                .label(v.clone())
                .legend(move |(x, y)| {
                    if dashed {
                        PathElement::new(vec![(x, y), (x + 8, y)], style)
                    } else {
                        PathElement::new(vec![(x, y), (x + 20, y)], style)
                    }
                });
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(c, y)| Circle::new((lx(c), y), 3, color.filled())),
                )
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series(
                SWEEP_CORES
                    .iter()
                    .zip(paper)
                    .map(|(&c, &y)| Cross::new((lx(c), y), 7, BLACK.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?
            .label("paper (board)")
            .legend(|(x, y)| Cross::new((x + 10, y), 6, BLACK.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(|e| e.to_string())
    })?;
    Ok(true)
}

fn md_cpb_table(rows: &[Row], buffer: u32) -> String {
    let big = 128 * 1024;
    let mut s = String::from(
        "| kernel / variant | 1 core | 2 cores | 4 cores | 8 cores | 8 cores vs 1 |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let mut any = false;
    for (k, v) in gvsoc::series(rows) {
        if v.ends_with("+nodma") && buffer != SWEEP_BUFFERS[SWEEP_BUFFERS.len() - 1] {
            continue;
        }
        let b = if v.ends_with("+nodma") { 0 } else { buffer };
        let c: Vec<Option<&Row>> = SWEEP_CORES
            .iter()
            .map(|&n| gvsoc::find(rows, &k, &v, n, b, big))
            .collect();
        if c.iter().all(Option::is_none) {
            continue;
        }
        any = true;
        let cell = |r: &Option<&Row>| r.map_or("–".to_string(), |r| format!("{:.2}", r.cpb()));
        let sp = match (c[0], c[3]) {
            (Some(a), Some(e)) => format!("{:.2}×", a.cycles as f64 / e.cycles as f64),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {k} / {v} | {} | {} | {} | {} | {sp} |",
            cell(&c[0]),
            cell(&c[1]),
            cell(&c[2]),
            cell(&c[3])
        );
    }
    if any { s } else { String::new() }
}

fn md_speedup_table(rows: &[Row]) -> String {
    let mut sizes: Vec<u32> = SWEEP_BYTES.iter().copied().chain([FRAME_BYTES]).collect();
    sizes.sort_unstable();
    let mut s = String::from("| kernel / variant |");
    for b in &sizes {
        let _ = write!(s, " {} |", gvsoc::human(*b));
    }
    s.push_str("\n|---|");
    for _ in &sizes {
        s.push_str("---:|");
    }
    s.push('\n');
    let mut any = false;
    for (k, v) in gvsoc::series(rows) {
        let b = if v.ends_with("+nodma") { 0 } else { 8192 };
        let cells: Vec<String> = sizes
            .iter()
            .map(|&n| {
                match (
                    gvsoc::find(rows, &k, &v, 1, b, n),
                    gvsoc::find(rows, &k, &v, 8, b, n),
                ) {
                    (Some(a), Some(e)) => format!("{:.2}", a.cycles as f64 / e.cycles as f64),
                    _ => "–".into(),
                }
            })
            .collect();
        if cells.iter().all(|c| c == "–") {
            continue;
        }
        any = true;
        let _ = write!(s, "| {k} / {v} |");
        for c in cells {
            let _ = write!(s, " {c} |");
        }
        s.push('\n');
    }
    if any { s } else { String::new() }
}

fn md_dma_table(rows: &[Row]) -> String {
    let big = 128 * 1024;
    let mut s = String::from(
        "| kernel / variant | cores | DMA rounds (8 KiB buffers) | no DMA (cores on L2) |\n|---|---:|---:|---:|\n",
    );
    let mut any = false;
    for (k, v) in gvsoc::series(rows) {
        if v.contains('+') {
            continue;
        }
        let nodma = format!("{v}+nodma");
        for c in SWEEP_CORES {
            if let (Some(d), Some(n)) = (
                gvsoc::find(rows, &k, &v, c, 8192, big),
                gvsoc::find(rows, &k, &nodma, c, 0, big),
            ) {
                any = true;
                let _ = writeln!(
                    s,
                    "| {k} / {v} | {c} | {:.2} cB | {:.2} cB |",
                    d.cpb(),
                    n.cpb()
                );
            }
        }
    }
    if any { s } else { String::new() }
}

fn md_frame_table(rows: &[Row]) -> String {
    let mut s = String::from("| kernel / variant | cores | cycles | cB |");
    for m in CLOCKS_MHZ {
        let _ = write!(s, " {m} MHz |");
    }
    s.push_str("\n|---|---:|---:|---:|");
    for _ in CLOCKS_MHZ {
        s.push_str("---:|");
    }
    s.push('\n');
    let mut any = false;
    for (k, v) in gvsoc::series(rows) {
        let b = if v.ends_with("+nodma") { 0 } else { 8192 };
        for cores in SWEEP_CORES {
            if let Some(r) = gvsoc::find(rows, &k, &v, cores, b, FRAME_BYTES) {
                any = true;
                let _ = write!(s, "| {k} / {v} | {cores} | {} | {:.2} |", r.cycles, r.cpb());
                for m in CLOCKS_MHZ {
                    let _ = write!(s, " {:.3} ms |", r.cycles as f64 / (m as f64 * 1e3));
                }
                s.push('\n');
            }
        }
    }
    if any { s } else { String::new() }
}

fn qemu_table(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()?.trim() != "kernel,variant,bytes,instructions,instructions_per_byte" {
        return None;
    }
    let mut s = String::from(
        "| kernel | variant | bytes | instructions | instructions / byte |\n|---|---|---:|---:|---:|\n",
    );
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() == 5 {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                f[0], f[1], f[2], f[3], f[4]
            );
        }
    }
    Some(s)
}

/// `cargo xtask bench-report`.
pub fn run(csv: Option<PathBuf>, out: Option<PathBuf>) -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let bench = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("bench");
    let csv = csv.unwrap_or_else(|| bench.join("gvsoc.csv"));
    let out = out.unwrap_or_else(|| bench.clone());
    let text = fs::read_to_string(&csv).map_err(|e| {
        format!(
            "bench-report: no benchmark CSV at {} ({e}): run `make gvsoc-bench` with the GAP SDK environment loaded, or give one with `make bench-report CSV=path`",
            csv.display()
        )
    })?;
    let rows =
        gvsoc::parse_csv(&text).map_err(|e| format!("bench-report: {}: {e}", csv.display()))?;
    if rows.is_empty() {
        return Err(format!("bench-report: {} has no rows", csv.display()));
    }
    font()?;
    fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;

    let mut plots: Vec<(String, String)> = Vec::new();
    for (k, v) in gvsoc::series(&rows) {
        if v.contains('+') {
            continue;
        }
        let name = format!("speedup_{k}_{v}.png");
        if plot_speedup(&out.join(&name), &rows, &k, &v)? {
            plots.push((format!("Speed-up of {k} / {v} against the payload"), name));
        }
    }
    for (k, paper) in [("chacha20", &PAPER_CHACHA20), ("aes128ctr", &PAPER_AES_CTR)] {
        let name = format!("cpb_{k}.png");
        if plot_cpb(&out.join(&name), &rows, k, paper)? {
            plots.push((
                format!("Cycles per byte of every {k} variant against the paper"),
                name,
            ));
        }
    }

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# gapstream cluster-engine benchmark on the GAP8 GVSOC model\n"
    );
    let _ = writeln!(
        md,
        "Generated by `cargo xtask bench-report` from `{}` ({} measured runs). Every run's output was \
         checked against a digest computed on the host with RustCrypto, and the bytes around the payload \
         against guard patterns. Cycles are elapsed cluster clock cycles (cluster timer) of the engine's \
         cluster job, measured on cluster core 0 after one warm-up call of the same configuration; \
         instructions are core 0's PULP performance counter. See `docs/bench.md` for the method.\n",
        csv.display(),
        rows.len()
    );
    let t = gvsoc::targets(&rows);
    if !t.is_empty() {
        let _ = writeln!(md, "## Targets\n\n| target | measured | |\n|---|---:|---|");
        for (what, got, ok) in t {
            let _ = writeln!(
                md,
                "| {what} | {got} | {} |",
                if ok { "met" } else { "**missed**" }
            );
        }
        md.push('\n');
    }
    for buffer in SWEEP_BUFFERS.iter().rev() {
        let table = md_cpb_table(&rows, *buffer);
        if !table.is_empty() {
            let _ = writeln!(
                md,
                "## Cycles per byte, 128 KiB in L2, {} KiB L1 buffers\n\n{table}",
                buffer / 1024
            );
        }
    }
    let _ = writeln!(
        md,
        "Paper (F. Barchi et al., \"RUST-Encoded Stream Ciphers on a RISC-V Parallel Ultra-Low-Power \
         Processor\", PARMA-DITAM 2023; GAP8 board): ChaCha20 {} and AES-CTR {} cycles per byte on 1 / 2 / 4 / 8 cores. \
         `+fixed`: every round one whole 8 KiB buffer (the paper's scheme); `+nodma`: no DMA, the cores \
         read and write the payload in L2 directly.\n",
        PAPER_CHACHA20.map(|x| x.to_string()).join(" / "),
        PAPER_AES_CTR.map(|x| x.to_string()).join(" / ")
    );
    for (title, name) in &plots {
        let _ = writeln!(md, "### {title}\n\n![{title}]({name})\n");
    }
    let sp = md_speedup_table(&rows);
    if !sp.is_empty() {
        let _ = writeln!(
            md,
            "## 8 cores against 1 core, by payload (8 KiB L1 buffers)\n\n{sp}"
        );
    }
    let dma = md_dma_table(&rows);
    if !dma.is_empty() {
        let _ = writeln!(
            md,
            "## DMA against no DMA, 128 KiB\n\n{dma}\nThe paper measured 2.3 cB with DMA against 2.9 cB without on the board (ChaCha20, 8 cores).\n"
        );
    }
    let fr = md_frame_table(&rows);
    if !fr.is_empty() {
        let _ = writeln!(
            md,
            "## Frame budget: one 324×244 8-bit frame ({FRAME_BYTES} bytes)\n\n{fr}\nThe paper measured 3.7 / 2.0 / 1.2 ms for ChaCha20 on 8 cores at 50 / 100 / 150 MHz.\n"
        );
    }
    if let Some(q) = qemu_table(&bench.join("qemu.csv")) {
        let _ = writeln!(
            md,
            "## Instructions per byte on QEMU (`make bench-qemu`)\n\n{q}"
        );
    }
    let _ = writeln!(
        md,
        "## Summary as printed by the sweep\n\n```text{}```",
        gvsoc::summary(&rows)
    );
    let report = out.join("report.md");
    fs::write(&report, md).map_err(|e| format!("cannot write {}: {e}", report.display()))?;
    println!(
        "bench-report: {} plots and {}",
        plots.len(),
        report.display()
    );
    Ok(())
}
