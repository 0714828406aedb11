//! `gapstream report`: turns a metrics CSV (and the per-frame log next to it) into PNG plots like
//! the Raspberry Pi studies': fps over time, goodput over time, latency CDF with p50 / p95 marked,
//! tag failures over time. Rendered with `plotters`' bitmap backend and the `ab_glyph` rasteriser
//! (pure Rust, no system font libraries); the font is DejaVu Sans from Debian's `fonts-dejavu-core`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::images;
use crate::metrics::{self, Percentiles};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a gapstream metrics CSV ({why})")]
    Csv { path: PathBuf, why: String },
    #[error("{path}: no rows to plot")]
    Empty { path: PathBuf },
    #[error("no usable font: install fonts-dejavu-core (looked for {0})")]
    Font(String),
    #[error("plotting failed: {0}")]
    Plot(String),
    #[error(transparent)]
    Image(#[from] images::ImageError),
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

fn ensure_font() -> Result<(), ReportError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        FONT_PATHS.iter().any(|p| match fs::read(p) {
            Ok(bytes) => {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            }
            Err(_) => false,
        })
    });
    if ok {
        Ok(())
    } else {
        Err(ReportError::Font(FONT_PATHS.join(", ")))
    }
}

/// A parsed metrics CSV: column name -> values (empty cells are `None`).
#[derive(Debug)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<Option<f64>>>,
}

impl Table {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Vec<String> = lines
            .next()
            .ok_or("empty file")?
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect();
        let mut rows = Vec::new();
        for (i, l) in lines.enumerate() {
            let cells: Vec<&str> = l.split(',').collect();
            if cells.len() != header.len() {
                return Err(format!(
                    "line {} has {} fields, header has {}",
                    i + 2,
                    cells.len(),
                    header.len()
                ));
            }
            let row = cells
                .iter()
                .map(|c| {
                    let c = c.trim();
                    if c.is_empty() {
                        Ok(None)
                    } else {
                        c.parse::<f64>()
                            .map(Some)
                            .map_err(|_| format!("line {}: {c:?} is not a number", i + 2))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            rows.push(row);
        }
        Ok(Table { header, rows })
    }

    pub fn col(&self, name: &str) -> Option<Vec<Option<f64>>> {
        let i = self.header.iter().position(|h| h == name)?;
        Some(self.rows.iter().map(|r| r[i]).collect())
    }

    fn series(&self, x: &str, y: &str) -> Vec<(f64, f64)> {
        match (self.col(x), self.col(y)) {
            (Some(xs), Some(ys)) => xs
                .into_iter()
                .zip(ys)
                .filter_map(|(a, b)| Some((a?, b?)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

const W: u32 = 800;
const H: u32 = 480;

fn render(
    path: &Path,
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<(), ReportError> {
    let mut buf = vec![0u8; (W * H * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| ReportError::Plot(e.to_string()))?;
        draw(root.clone()).map_err(ReportError::Plot)?;
        root.present()
            .map_err(|e| ReportError::Plot(e.to_string()))?;
    }
    let png = images::encode_png(W as usize, H as usize, 3, &buf)?;
    fs::write(path, png).map_err(|source| ReportError::Io {
        path: path.into(),
        source,
    })
}

fn time_plot(
    path: &Path,
    title: &str,
    ylabel: &str,
    pts: &[(f64, f64)],
    colour: RGBColor,
) -> Result<(), ReportError> {
    let xmax = pts.iter().map(|p| p.0).fold(0.5, f64::max);
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
    render(path, |root| {
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .x_desc("time (s)")
            .y_desc(ylabel)
            .draw()
            .map_err(|e| e.to_string())?;
        c.draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// What `report` wrote.
#[derive(Debug)]
pub struct Written {
    pub files: Vec<PathBuf>,
    pub summary: String,
}

/// The latency CDF's x range and legend corner, from the sorted latencies. The range starts near
/// the data, not at 0 (latencies sit in a narrow band far from 0: from 0 the curve would be a
/// vertical line at the right). The legend goes where the curve is not: an empirical CDF leaves
/// the upper left free unless it has nearly reached 1 within the left third of the range (a few
/// late outliers), and then it has left the lower right free.
fn cdf_layout(sorted: &[f64]) -> (std::ops::Range<f64>, SeriesLabelPosition) {
    let (lo, hi) = match (sorted.first(), sorted.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => return (0.0..1.0, SeriesLabelPosition::UpperLeft),
    };
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.01).max(0.01);
    let range = (lo - pad).max(0.0)..hi + pad;
    // The legend box spans at most a third of the width and a quarter of the height.
    let x_third = range.start + (range.end - range.start) / 3.0;
    let below = sorted.partition_point(|&v| v <= x_third);
    let cdf_at_third = below as f64 / sorted.len() as f64;
    let at = if cdf_at_third < 0.75 {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::LowerRight
    };
    (range, at)
}

/// Reads `metrics_csv` (and `<stem>.frames.csv` beside it when present) and writes PNG plots into `out_dir`.
pub fn report(metrics_csv: &Path, out_dir: &Path) -> Result<Written, ReportError> {
    ensure_font()?;
    let text = fs::read_to_string(metrics_csv).map_err(|source| ReportError::Io {
        path: metrics_csv.into(),
        source,
    })?;
    let t = Table::parse(&text).map_err(|why| ReportError::Csv {
        path: metrics_csv.into(),
        why,
    })?;
    for needed in ["t_s", "fps", "goodput_mbps", "tag_failures"] {
        if t.col(needed).is_none() {
            return Err(ReportError::Csv {
                path: metrics_csv.into(),
                why: format!("no column {needed}"),
            });
        }
    }
    if t.rows.is_empty() {
        return Err(ReportError::Empty {
            path: metrics_csv.into(),
        });
    }
    fs::create_dir_all(out_dir).map_err(|source| ReportError::Io {
        path: out_dir.into(),
        source,
    })?;
    let mut files = Vec::new();

    let p = out_dir.join("fps.png");
    time_plot(
        &p,
        "Frames per second",
        "fps",
        &t.series("t_s", "fps"),
        BLUE,
    )?;
    files.push(p);
    let p = out_dir.join("goodput.png");
    time_plot(
        &p,
        "Goodput",
        "Mb/s",
        &t.series("t_s", "goodput_mbps"),
        RGBColor(0, 140, 70),
    )?;
    files.push(p);
    let p = out_dir.join("tag_failures.png");
    time_plot(
        &p,
        "Tag failures (cumulative)",
        "frames",
        &t.series("t_s", "tag_failures"),
        RED,
    )?;
    files.push(p);

    // Latency CDF: per-frame latencies from the frame log when there is one, else the window p50s.
    let frames_csv = metrics::frames_path(metrics_csv);
    let (mut lat, source) = match fs::read_to_string(&frames_csv)
        .ok()
        .and_then(|s| Table::parse(&s).ok())
    {
        Some(ft) => (
            ft.col("latency_ms")
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .collect::<Vec<f64>>(),
            "per frame",
        ),
        None => (
            t.col("latency_p50_ms")
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .collect(),
            "window medians",
        ),
    };
    let pct = Percentiles::of(&mut lat);
    let p = out_dir.join("latency_cdf.png");
    let n = lat.len();
    let (xr, legend_at) = cdf_layout(&lat);
    render(&p, |root| {
        let mut c = ChartBuilder::on(&root)
            .caption(
                format!("Latency CDF ({source}, n = {n})"),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(xr.clone(), 0.0..1.0)
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .x_desc("latency (ms)")
            .y_desc("fraction of frames")
            .draw()
            .map_err(|e| e.to_string())?;
        c.draw_series(LineSeries::new(
            lat.iter()
                .enumerate()
                .map(|(i, &v)| (v, (i + 1) as f64 / n as f64)),
            BLUE.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
        if let Some(pc) = pct {
            for (v, label, col) in [(pc.p50, "p50", RGBColor(0, 140, 70)), (pc.p95, "p95", RED)] {
                c.draw_series(LineSeries::new([(v, 0.0), (v, 1.0)], col.stroke_width(1)))
                    .map_err(|e| e.to_string())?
                    .label(format!("{label} = {v:.2} ms"))
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], col));
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(legend_at)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })?;
    files.push(p);

    let fps = t
        .col("fps")
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    let mean_fps = if fps.is_empty() {
        0.0
    } else {
        fps.iter().sum::<f64>() / fps.len() as f64
    };
    let summary = match pct {
        Some(pc) => format!(
            "{} rows, mean fps {mean_fps:.1}, latency p50 {:.2} ms p95 {:.2} ms p99 {:.2} ms ({source}, n = {n})",
            t.rows.len(),
            pc.p50,
            pc.p95,
            pc.p99
        ),
        None => format!(
            "{} rows, mean fps {mean_fps:.1}, no latency samples",
            t.rows.len()
        ),
    };
    Ok(Written { files, summary })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Counters, MetricsLog};

    #[test]
    fn csv_errors_are_clear() {
        assert!(Table::parse("").is_err());
        assert!(
            Table::parse("a,b\n1\n")
                .unwrap_err()
                .contains("line 2 has 1 fields")
        );
        assert!(
            Table::parse("a,b\n1,x\n")
                .unwrap_err()
                .contains("\"x\" is not a number")
        );
        let t = Table::parse("a,b\n1,\n2,3\n").unwrap();
        assert_eq!(t.col("b").unwrap(), vec![None, Some(3.0)]);
    }

    /// The CDF's x axis starts near the data, and the legend's corner (a box of a third of the
    /// width and a quarter of the height) holds no point of the curve, whatever the shape.
    #[test]
    fn latency_cdf_axis_starts_near_the_data_and_the_legend_is_off_the_curve() {
        let band: Vec<f64> = (0..200).map(|i| 68.0 + (i % 50) as f64 * 0.08).collect();
        let mut tail = vec![69.0; 190];
        tail.extend((0..10).map(|i| 150.0 + i as f64 * 10.0));
        let mut uniform: Vec<f64> = (0..100).map(|i| 10.0 + i as f64).collect();
        let mut one = vec![5.0];
        for (name, v) in [
            ("band", band),
            ("tail", tail),
            ("uniform", core::mem::take(&mut uniform)),
            ("one", core::mem::take(&mut one)),
        ] {
            let mut v = v;
            v.sort_by(f64::total_cmp);
            let (r, at) = cdf_layout(&v);
            assert!(r.start <= v[0] && r.end >= v[v.len() - 1], "{name}: {r:?}");
            let span = r.end - r.start;
            assert!(
                r.start >= 0.5 * v[0],
                "{name}: starts far below the data: {r:?}"
            );
            let n = v.len() as f64;
            let in_box = |x: f64, y: f64| match at {
                SeriesLabelPosition::UpperLeft => x <= r.start + span / 3.0 && y >= 0.75,
                SeriesLabelPosition::LowerRight => x >= r.end - span / 3.0 && y <= 0.25,
                _ => panic!("{name}: unexpected corner"),
            };
            // The CDF's steps: at each sample, from (i / n) up to ((i + 1) / n).
            for (i, &x) in v.iter().enumerate() {
                for y in [i as f64 / n, (i + 1) as f64 / n] {
                    assert!(
                        !in_box(x, y),
                        "{name}: the legend covers the curve at ({x}, {y})"
                    );
                }
            }
        }
        let (r, _) = cdf_layout(&[68.0, 70.0, 72.0]);
        assert!(r.start > 60.0, "{r:?}");
    }

    #[test]
    fn report_writes_plots_from_a_real_metrics_log() {
        let d = tempfile::tempdir().unwrap();
        let csv = d.path().join("run.csv");
        let mut log = MetricsLog::new(Some(&csv)).unwrap();
        let mut c = Counters::default();
        for i in 0..40u64 {
            log.frame(i, 79056, Some(1.0 + (i % 7) as f64 * 0.3))
                .unwrap();
            c.frames += 1;
            if i % 10 == 0 {
                c.tag_failures += 1;
                log.tick(&c, true).unwrap();
            }
        }
        drop(log);
        let out = d.path().join("plots");
        let w = report(&csv, &out).unwrap();
        assert_eq!(w.files.len(), 4);
        assert!(w.summary.contains("n = 40"), "{}", w.summary);
        for f in &w.files {
            let g = images::parse_png(&fs::read(f).unwrap()).unwrap();
            assert_eq!((g.width, g.height), (W as usize, H as usize));
            // Not a blank image: some dark pixels (axes, text, lines).
            assert!(
                g.pixels.iter().filter(|&&p| p < 100).count() > 500,
                "{}",
                f.display()
            );
        }
        let bad = d.path().join("bad.csv");
        fs::write(&bad, "x,y\n1,2\n").unwrap();
        assert!(
            report(&bad, &out)
                .unwrap_err()
                .to_string()
                .contains("no column t_s")
        );
    }
}
