//! The receiver's own outputs on the bus: the console (status line and diagnostic lines), the
//! metrics CSV, the PNG recorder. The viewer ([`crate::viewer::ViewerOutput`]), MCAP
//! ([`crate::mcap_out`]), Zenoh and the Python queue are consumers of the same bus.

use std::io::IsTerminal;
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

/// The console: the status line every 0.5 s (rewritten in place on a terminal, one line per
/// interval in a log) and one line per diagnostic, on stderr.
pub struct Console {
    pub status_line: bool,
    pub notes: bool,
    pub label: String,
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
            if std::io::stderr().is_terminal() {
                eprint!("\r{line}\x1b[K");
                self.drew = true;
            } else {
                eprintln!("{line}");
                // The drone's state with the row's last frame, on a line of its own (only when
                // not redrawing in place: a terminal keeps the one status line).
                if let Some(st) = &s.state {
                    eprintln!("          {st}");
                }
            }
        }
        Ok(())
    }
    fn note(&mut self, n: &Note) -> Result<(), String> {
        if self.notes {
            if self.drew {
                eprintln!();
                self.drew = false;
            }
            if n.error {
                eprintln!("gapstream: error: {}", n.text);
            } else {
                eprintln!("gapstream: {}", n.text);
            }
        }
        Ok(())
    }
    fn finish(&mut self, _: &Counts) -> Result<Option<String>, String> {
        if self.drew {
            eprintln!();
        }
        Ok(None)
    }
}

/// `--metrics FILE`: a row every 0.5 s and a line per frame (`FILE.frames.csv`). Never blocks the
/// receiver; frames it could not keep up with are counted and reported.
pub struct MetricsCsv {
    log: CsvLog,
    path: PathBuf,
    /// Unix ns when the run started (the per-frame lines' `t_s` counts from it).
    start_ns: u64,
}

impl MetricsCsv {
    pub fn create(path: &Path, start_ns: u64) -> Result<Self, String> {
        let log = CsvLog::create(path).map_err(|e| format!("metrics {}: {e}", path.display()))?;
        Ok(MetricsCsv {
            log,
            path: path.to_owned(),
            start_ns,
        })
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
        self.log
            .frame(
                t,
                f.seq(),
                f.pixels.len(),
                f.latency_ms,
                f.receive_ns,
                &state,
            )
            .map_err(|e| format!("metrics {}: {e}", self.path.display()))
    }
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if s.new_row {
            self.log
                .row(&s.row)
                .map_err(|e| format!("metrics {}: {e}", self.path.display()))?;
        }
        Ok(())
    }
}

/// The file a recorded frame goes to: `frame_NNNNNNNN.png`, numbered with the frame number burned
/// into the image (the synthetic source, a test-pattern stock stream) so files and pixels agree,
/// else with the stream's sequence number (which in the secure stream starts at the handshake,
/// not at the drone's first frame).
pub fn frame_file_name(f: &Frame) -> String {
    let n =
        testpattern::decode(&f.pixels, f.width(), f.height()).map_or(f.seq(), |s| s.frame as u64);
    format!("frame_{n:08}.png")
}

/// `gapstream record DIR`: every verified frame as a PNG (RGGB mosaics demosaiced to RGB).
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
        let png = if f.is_bayer() {
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
