//! The receiver's own outputs on the bus: the console (status line and diagnostic lines), the
//! metrics CSV, the PNG recorder. The viewer ([`crate::viewer::ViewerOutput`]), MCAP
//! ([`crate::mcap_out`]), Zenoh and the Python queue are consumers of the same bus.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bus::{Consumer, Counts, Note, Policy, Status};
use super::frame::Frame;
use crate::images;
use crate::metrics::{self, Counters, CsvLog};
use gapstream_drone::testpattern;

/// Frames a recorder may have waiting before it counts the next ones as not written (about 4 s
/// of the 30 fps stream; the frames are shared with the other outputs, not copied).
pub const RECORDER_QUEUE: usize = 128;

/// The console: the status line every 0.5 s on stdout (rewritten in place on a terminal, one line
/// per interval in a log) and one line per diagnostic on stderr, so `gapstream view > run.log`
/// keeps the figures and the terminal shows what went wrong.
pub struct Console {
    pub status_line: bool,
    pub notes: bool,
    pub label: String,
    /// A status line is on the terminal without its newline yet.
    drew: bool,
}

impl Console {
    pub fn new(status_line: bool, notes: bool) -> Self {
        Console {
            status_line,
            notes,
            label: String::new(),
            drew: false,
        }
    }

    /// Ends a status line drawn in place, so that the next line starts on a line of its own.
    fn end_line(&mut self) {
        if self.drew {
            out!();
            self.drew = false;
        }
    }
}

impl Consumer for Console {
    fn name(&self) -> String {
        "console".into()
    }
    fn policy(&self) -> Policy {
        Policy::NoFrames
    }
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if self.status_line && s.new_row {
            let line = metrics::status_line(&s.row, &s.suite);
            let mut out = std::io::stdout().lock();
            // A closed stdout (`| head`) is no reason to stop receiving: the line is lost.
            if out.is_terminal() {
                let _ = write!(out, "\r{line}\x1b[K");
                let _ = out.flush();
                self.drew = true;
            } else {
                let _ = writeln!(out, "{line}");
                // The drone's state with the row's last frame, on a line of its own (only when
                // not redrawing in place: a terminal keeps the one status line).
                if let Some(st) = &s.state {
                    let _ = writeln!(out, "          {st}");
                }
            }
        }
        Ok(())
    }
    fn note(&mut self, n: &Note) -> Result<(), String> {
        if self.notes {
            self.end_line();
            if n.error {
                eprintln!("gapstream: error: {}", n.text);
            } else {
                eprintln!("gapstream: {}", n.text);
            }
        }
        Ok(())
    }
    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        self.end_line();
        Ok(None)
    }
}

/// `--metrics FILE`: a row every 0.5 s and a line per frame (`FILE.frames.csv`). Never blocks the
/// receiver; frames it could not keep up with are counted and reported. On a ground station
/// ([`MetricsCsv::per_drone`]) each drone has its own pair of files, `FILE` with `-<drone>`
/// before the extension (`run.csv`: `run-alpha.csv`, `run-alpha.frames.csv`, ...).
pub struct MetricsCsv {
    log: Option<CsvLog>,
    /// Per drone: its files, opened with its first frame or status.
    per_drone: Option<std::collections::BTreeMap<String, CsvLog>>,
    path: PathBuf,
    /// Unix ns when the run started (the per-frame lines' `t_s` count from it).
    start_ns: u64,
}

/// A drone's metrics file on a ground station: `run.csv` → `run-<drone>.csv`.
pub fn per_drone_path(path: &Path, drone: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}-{drone}.{}", e.to_string_lossy()),
        None => format!("{stem}-{drone}"),
    };
    path.with_file_name(name)
}

impl MetricsCsv {
    pub fn create(path: &Path, start_ns: u64) -> Result<Self, String> {
        let log = CsvLog::create(path).map_err(|e| format!("metrics {}: {e}", path.display()))?;
        Ok(MetricsCsv {
            log: Some(log),
            per_drone: None,
            path: path.to_owned(),
            start_ns,
        })
    }

    /// A pair of files per drone ([`per_drone_path`]), each opened when its drone first reports.
    pub fn per_drone(path: &Path, start_ns: u64) -> Result<Self, String> {
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).map_err(|e| format!("metrics {}: {e}", path.display()))?;
        }
        Ok(MetricsCsv {
            log: None,
            per_drone: Some(Default::default()),
            path: path.to_owned(),
            start_ns,
        })
    }

    fn log_for(&mut self, drone: &str) -> Result<&mut CsvLog, String> {
        match (&mut self.log, &mut self.per_drone) {
            (Some(l), _) => Ok(l),
            (None, Some(m)) => {
                if !m.contains_key(drone) {
                    let p = per_drone_path(&self.path, drone);
                    let l =
                        CsvLog::create(&p).map_err(|e| format!("metrics {}: {e}", p.display()))?;
                    m.insert(drone.to_string(), l);
                }
                Ok(m.get_mut(drone).expect("inserted above"))
            }
            (None, None) => Err(format!("metrics {}: closed", self.path.display())),
        }
    }
}

impl Consumer for MetricsCsv {
    fn name(&self) -> String {
        format!("metrics CSV {}", self.path.display())
    }
    fn policy(&self) -> Policy {
        Policy::Every(4 * RECORDER_QUEUE)
    }
    fn frame(&mut self, f: &Arc<Frame>, _: &Counters) -> Result<(), String> {
        let t = f.receive_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let state = crate::metrics::state_columns(
            f.stamp_ns(),
            f.capture.and_then(|c| c.bound_ns()).map(|b| b as f64 / 1e6),
            f.state.as_ref(),
        );
        let path = self.path.display().to_string();
        self.log_for(&f.source)?
            .frame(
                t,
                f.seq(),
                f.pixels.len(),
                f.latency_ms,
                f.receive_ns,
                &state,
            )
            .map_err(|e| format!("metrics {path}: {e}"))
    }
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if s.new_row {
            let path = self.path.display().to_string();
            self.log_for(&s.source)?
                .row(&s.row)
                .map_err(|e| format!("metrics {path}: {e}"))?;
        }
        Ok(())
    }
}

/// The file a recorded frame goes to: `frame_NNNNNNNN.png`, numbered with the frame number burned
/// into the image (the synthetic source, a test-pattern stock stream) so files and pixels agree,
/// else with the stream's sequence number (which in the secure stream starts at the handshake,
/// not at the drone's first frame). A JPEG frame keeps its coded file: `frame_NNNNNNNN.jpg`.
pub fn frame_file_name(f: &Frame) -> String {
    let n =
        testpattern::decode(&f.pixels, f.width(), f.height()).map_or(f.seq(), |s| s.frame as u64);
    let ext = if jpeg_file(f).is_some() { "jpg" } else { "png" };
    format!("frame_{n:08}.{ext}")
}

/// A JPEG frame's coded file, as it verified.
fn jpeg_file(f: &Frame) -> Option<&[u8]> {
    (f.format() == Ok(gapstream_protocol::wire::PixelFormat::Jpeg))
        .then_some(f.coded.as_deref())
        .flatten()
}

/// `gapstream record DIR`: every verified frame as a PNG (RGGB mosaics demosaiced to RGB); a JPEG
/// frame as the JPEG file the drone coded (byte for byte what verified), a JPEG-LS frame as the
/// PNG of its decoded samples (lossless: the same samples, in a format every viewer opens).
pub struct PngRecorder {
    dir: PathBuf,
    written: u64,
}

impl PngRecorder {
    pub fn create(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("recording: {}: {e}", dir.display()))?;
        Ok(PngRecorder {
            dir: dir.to_owned(),
            written: 0,
        })
    }
}

impl Consumer for PngRecorder {
    fn name(&self) -> String {
        format!("PNG recorder {}", self.dir.display())
    }
    fn policy(&self) -> Policy {
        Policy::Every(RECORDER_QUEUE)
    }
    fn frame(&mut self, f: &Arc<Frame>, _: &Counters) -> Result<(), String> {
        let (w, h) = (f.width(), f.height());
        let png = if let Some(jpeg) = jpeg_file(f) {
            Ok(jpeg.to_vec())
        } else if f.is_bayer() {
            images::encode_png(w, h, 3, &images::demosaic_rggb(&f.pixels, w, h))
        } else {
            images::encode_png(w, h, 1, &f.pixels)
        }
        .map_err(|e| format!("recording: {e}"))?;
        let path = self.dir.join(frame_file_name(f));
        std::fs::write(&path, png).map_err(|e| format!("recording: {}: {e}", path.display()))?;
        self.written += 1;
        Ok(())
    }
}
