//! `gapstream._gapstream`: the Rust receiver of `gapstream view` behind a small Python API. The
//! pure-Python package `gapstream` (python/gapstream/__init__.py) wraps it into `Receiver` and
//! `Frame` objects with numpy arrays. Nothing of the protocol is re-implemented here: frames come
//! from `gapstream::receiver::run` (handshake, AEAD verification, replay window, rekeys,
//! reconnects) through a mailbox on the receiver's bus that the Python side drains: bounded, the
//! freshest frames kept when Python falls behind (the older ones dropped and counted in
//! `stats()["dropped"]`); the receiver never waits for Python.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use gapstream::receiver::bus::Status;
use gapstream::receiver::outputs::Console;
use gapstream::receiver::{
    self, Bus, Frame, Policy, ReceiverConfig, ReceiverError, Subscription, Summary,
};
use gapstream::run::{self, Security};
use gapstream_protocol::handshake::Role;
use gapstream_protocol::suite::{KexMode, Suite};

create_exception!(
    gapstream,
    GapstreamError,
    PyException,
    "A gapstream error, with the message the CLI prints (`gapstream: error: ...`)."
);

fn error(e: impl std::fmt::Display) -> PyErr {
    GapstreamError::new_err(e.to_string())
}

/// Frames waiting for Python, at most (about 2 s of the 30 fps stream); when Python falls behind
/// the oldest waiting frame is dropped and counted (`stats()["dropped"]`).
const QUEUE: usize = 64;

/// The drone's state of a frame as Python gets it: (flags, STM32 µs, arrival µs, exposure end µs,
/// position m, velocity m/s, acceleration m/s², orientation [x, y, z, w], body rates rad/s).
type StateTuple = (
    u16,
    u32,
    u64,
    u64,
    [f64; 3],
    [f64; 3],
    [f64; 3],
    [f64; 4],
    [f64; 3],
);

/// A frame as `Receiver.next_frame` hands it to Python: (sequence, key epoch, capture ns, receive
/// ns, latency ms, suite, width, height, pixels (decoded samples), (pixel-format code of the
/// payload, the coded payload of a JPEG / JPEG-LS frame as it verified), (stamp ns, stamp
/// uncertainty ns), state): at most 12 elements, what pyo3 converts.
type FrameTuple<'py> = (
    u64,
    Option<u32>,
    Option<u64>,
    u64,
    Option<f64>,
    String,
    usize,
    usize,
    Bound<'py, PyBytes>,
    (u8, Option<Bound<'py, PyBytes>>),
    (u64, Option<u64>),
    Option<StateTuple>,
);

fn frame_tuple(py: Python<'_>, f: Arc<Frame>) -> FrameTuple<'_> {
    (
        f.seq(),
        f.epoch(),
        f.capture_ns(),
        f.receive_ns,
        f.latency_ms,
        f.suite.to_string(),
        f.width(),
        f.height(),
        PyBytes::new(py, &f.pixels),
        (
            f.header.pixel_format,
            f.coded.as_deref().map(|c| PyBytes::new(py, c)),
        ),
        (f.stamp_ns(), f.capture.and_then(|c| c.bound_ns())),
        f.state.map(|s| {
            (
                s.record.flags,
                s.record.sample.stm32_us,
                s.record.arrival_us,
                s.record.exposure_end_us,
                s.position_m,
                s.velocity_m_s,
                s.accel_m_s2,
                s.orientation,
                s.rates_rad_s,
            )
        }),
    )
}

type Outcome = Result<Summary, ReceiverError>;

/// The receiver thread and what it hands over.
#[pyclass(module = "gapstream._gapstream")]
struct RawReceiver {
    frames: Subscription,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<Outcome>>>,
    /// The run's end: its summary, or the error's message.
    outcome: Mutex<Option<Result<Summary, String>>>,
    keys: PathBuf,
}

fn security(suite: &str, kex: &str) -> PyResult<Security> {
    if suite == "stock" {
        return Ok(Security::StockPlaintext);
    }
    let s = Suite::from_name(suite).ok_or_else(|| {
        error(format!(
            "unknown suite {suite:?} (chacha20poly1305, aes128gcm, chacha20, aes128ctr, none, stock)"
        ))
    })?;
    let k = KexMode::from_name(kex).ok_or_else(|| {
        error(format!(
            "unknown key establishment {kex:?} (x25519, p256, rsa2048)"
        ))
    })?;
    Ok(Security::Secure { suite: s, kex: k })
}

impl RawReceiver {
    /// Joins the finished thread and keeps its outcome.
    fn reap(&self) {
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let r = t
                .join()
                .unwrap_or_else(|_| {
                    Err(ReceiverError::Fatal("the receiver thread panicked".into()))
                })
                .map_err(|e| e.to_string());
            *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
    }

    /// The error of `next_frame` after `t` seconds without a frame: the receiver's diagnosis
    /// (the likely cause, naming the key file when the drone refuses it), else its last line.
    fn no_frame(&self, t: f64) -> PyErr {
        let s: Status = self
            .frames
            .status()
            .map(|s| (*s).clone())
            .unwrap_or_default();
        // With a diagnosis, the line that shows it (a refusal) rather than the last error (a
        // reconnect after the refusals).
        let last = if s.diagnosis.is_some() {
            s.last_message.or(s.last_error)
        } else {
            s.last_error.or(s.last_message)
        };
        match (s.diagnosis, last) {
            (Some(d), last) => {
                let d = d.replace(
                    "this receiver's key",
                    &format!("the receiver key {}", self.keys.display()),
                );
                let last = last.map(|m| format!("; last: {m}")).unwrap_or_default();
                error(format!("no frame in {t:.1} s: {d}{last}"))
            }
            (None, Some(m)) => error(format!("no frame in {t:.1} s; last: {m}")),
            (None, None) => {
                pyo3::exceptions::PyTimeoutError::new_err(format!("no frame in {t:.1} s"))
            }
        }
    }

    fn finished(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|t| t.is_finished())
    }
}

#[pymethods]
impl RawReceiver {
    #[new]
    #[pyo3(signature = (connect, keys, transport, suite, kex, packet_size, duration, max_frames, idle_timeout, keylog, verbose, fec=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        connect: &str,
        keys: PathBuf,
        transport: &str,
        suite: &str,
        kex: &str,
        packet_size: usize,
        duration: Option<f64>,
        max_frames: Option<u64>,
        idle_timeout: f64,
        keylog: Option<PathBuf>,
        verbose: bool,
        fec: bool,
    ) -> PyResult<Self> {
        let transport = match transport {
            "tcp" => receiver::Transport::Tcp,
            "udp" => receiver::Transport::Udp,
            t => return Err(error(format!("unknown transport {t:?} (tcp or udp)"))),
        };
        if fec && transport != receiver::Transport::Udp {
            return Err(error("fec=True works over UDP: transport=\"udp\""));
        }
        if ![128, 256, 512, 1020].contains(&packet_size) {
            return Err(error(format!(
                "packet_size {packet_size}: one of 128, 256, 512, 1020"
            )));
        }
        let bridge = connect
            .to_socket_addrs()
            .map_err(|e| error(format!("{connect}: {e}")))?
            .next()
            .ok_or_else(|| error(format!("{connect}: no address")))?;
        let security = security(suite, kex)?;
        let id = match security {
            Security::StockPlaintext => None,
            _ => Some(run::load_identity(&keys, Role::Receiver).map_err(error)?),
        };
        let mut session = run::receiver_session(&security, id, packet_size).map_err(error)?;
        if let (receiver::SessionKind::Secure(s), Some(f)) = (&mut session, keylog) {
            s.keylog = Some(f);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = ReceiverConfig {
            stop: stop.clone(),
            duration: duration.map(Duration::from_secs_f64),
            max_frames,
            idle_timeout: Duration::from_secs_f64(idle_timeout.max(0.1)),
            fec,
            ..ReceiverConfig::new(bridge, transport, session)
        };
        let mut bus = Bus::new();
        let frames = bus.subscribe("Python queue", Policy::Freshest(QUEUE));
        bus.attach(Box::new(Console::new(false, verbose)));
        let thread = std::thread::Builder::new()
            .name("gapstream-receiver".into())
            .spawn(move || receiver::run(cfg, bus))
            .map_err(error)?;
        Ok(RawReceiver {
            frames,
            stop,
            thread: Mutex::new(Some(thread)),
            outcome: Mutex::new(None),
            keys,
        })
    }

    /// The next frame as a tuple (sequence, key epoch, capture ns, receive ns, latency ms, suite,
    /// width, height, pixels), None at the end of the stream (duration, max_frames, close()).
    /// Raises GapstreamError when the receiver gave up, TimeoutError after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn next_frame<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<FrameTuple<'py>>> {
        let t0 = Instant::now();
        loop {
            if let Some(f) = py.detach(|| self.frames.frame(Duration::from_millis(100))) {
                return Ok(Some(frame_tuple(py, f)));
            }
            if self.frames.is_closed() || self.finished() {
                // Finished: whatever is still queued first, then the end.
                if let Some(f) = self.frames.frame(Duration::ZERO) {
                    return Ok(Some(frame_tuple(py, f)));
                }
                py.detach(|| self.reap());
                return match &*self.outcome.lock().unwrap_or_else(|e| e.into_inner()) {
                    Some(Err(m)) if !self.stop.load(Ordering::Relaxed) => Err(error(m)),
                    _ => Ok(None),
                };
            }
            py.check_signals()?;
            if let Some(t) = timeout.filter(|&t| t0.elapsed().as_secs_f64() >= t) {
                return Err(self.no_frame(t));
            }
        }
    }

    /// The receiver's counters: live ones (updated every 0.5 s) while it runs, the final ones
    /// once it stopped.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let s = self
            .frames
            .status()
            .map(|s| (*s).clone())
            .unwrap_or_default();
        d.set_item("state", &s.connection)?;
        d.set_item("suite", &s.suite)?;
        d.set_item("transport", &s.transport)?;
        d.set_item("source", &s.source)?;
        d.set_item("last_error", &s.last_error)?;
        d.set_item("last_message", &s.last_message)?;
        d.set_item("diagnosis", &s.diagnosis)?;
        d.set_item("dropped", self.frames.counts().dropped)?;
        let outcome = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        let (c, running) = match &*outcome {
            Some(Ok(sum)) => (&sum.counters, false),
            _ => (&s.counters, outcome.is_none()),
        };
        d.set_item("running", running)?;
        d.set_item("frames", c.frames)?;
        d.set_item("lost", c.lost)?;
        d.set_item("tag_failures", c.tag_failures)?;
        d.set_item("replays", c.replays)?;
        d.set_item("malformed", c.malformed)?;
        d.set_item("without_key", c.no_key)?;
        d.set_item("handshakes", c.handshakes)?;
        d.set_item("handshake_failures", c.handshake_failures)?;
        d.set_item("rekeys", c.rekeys)?;
        d.set_item("key_epoch", c.key_epoch)?;
        d.set_item("fec_recovered", c.fec.recovered)?;
        d.set_item("fec_unrecoverable_blocks", c.fec.unrecoverable_blocks)?;
        d.set_item("fec_redundancy_pct", c.fec.redundancy_pct)?;
        match &*outcome {
            Some(Ok(sum)) => {
                d.set_item("fps", c.frames as f64 / sum.elapsed_s.max(1e-9))?;
                d.set_item("latency_p50_ms", sum.latency.map(|p| p.p50))?;
                d.set_item("latency_p95_ms", sum.latency.map(|p| p.p95))?;
                d.set_item("latency_p99_ms", sum.latency.map(|p| p.p99))?;
                d.set_item("elapsed_s", sum.elapsed_s)?;
                d.set_item("connections", sum.connects)?;
            }
            _ => {
                d.set_item("fps", s.row.fps)?;
                d.set_item("latency_p50_ms", s.row.latency.map(|p| p.p50))?;
                d.set_item("latency_p95_ms", s.row.latency.map(|p| p.p95))?;
            }
        }
        Ok(d)
    }

    /// Stops the receiver (it leaves the drone's group properly) and waits for it.
    fn close(&self, py: Python<'_>) {
        self.stop.store(true, Ordering::Relaxed);
        py.detach(|| self.reap());
    }
}

impl Drop for RawReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.reap();
    }
}

/// A ground station's frame as `Ground.next_frame` hands it over: (drone name, frame tuple).
type GroundItem<'py> = (String, FrameTuple<'py>);

/// The ground station: a receiver per fleet member (`gapstream ground`), every verified frame in
/// one mailbox whose bound is per drone (the freshest QUEUE of each drone: a drone Python is slow
/// for never pushes another drone's frames out).
#[pyclass(module = "gapstream._gapstream")]
struct RawGround {
    frames: Subscription,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<gapstream::ground::GroundSummary>>>,
    /// Each drone's end: its summary, or the error's message.
    outcome: Mutex<Option<DroneOutcomes>>,
    names: Vec<String>,
}

/// Each drone's end by name: its summary, or the error's message.
type DroneOutcomes = Vec<(String, Result<Summary, String>)>;

#[pymethods]
impl RawGround {
    #[new]
    #[pyo3(signature = (fleet, transport, suite, kex, packet_size, duration, discover, discover_secs, verbose))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        fleet: PathBuf,
        transport: &str,
        suite: &str,
        kex: &str,
        packet_size: usize,
        duration: Option<f64>,
        discover: Option<String>,
        discover_secs: f64,
        verbose: bool,
    ) -> PyResult<Self> {
        use gapstream::ground;
        let transport = match transport {
            "tcp" => receiver::Transport::Tcp,
            "udp" => receiver::Transport::Udp,
            t => return Err(error(format!("unknown transport {t:?} (tcp or udp)"))),
        };
        if ![128, 256, 512, 1020].contains(&packet_size) {
            return Err(error(format!(
                "packet_size {packet_size}: one of 128, 256, 512, 1020"
            )));
        }
        let sec = security(suite, kex)?;
        let f = ground::Fleet::load(&fleet).map_err(error)?;
        let found = match discover {
            None => Default::default(),
            Some(i) => {
                let ifs: esp32_bridge::mdns::Interfaces = i.parse().map_err(error)?;
                let decks = gapstream::discovery::browse(
                    &ifs,
                    Duration::from_secs_f64(discover_secs.max(0.1)),
                    |_| false,
                )
                .map_err(error)?;
                gapstream::discovery::index(&decks)
            }
        };
        let (members, missing) = ground::members(&f, &sec, packet_size, &found).map_err(error)?;
        if members.is_empty() {
            return Err(error(format!(
                "no fleet member to receive (not found: {})",
                missing.join(", ")
            )));
        }
        let names = members.iter().map(|m| m.name.clone()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let g = ground::GroundConfig {
            transport,
            duration: duration.map(Duration::from_secs_f64),
            stop: stop.clone(),
            bayer: false,
            idle_timeout: Duration::from_secs(3),
        };
        let mut bus = Bus::new();
        let frames = bus.subscribe("Python queue", Policy::Freshest(QUEUE));
        bus.attach(Box::new(ground::FleetConsole::new(members.len(), verbose)));
        let thread = std::thread::Builder::new()
            .name("gapstream-ground".into())
            .spawn(move || ground::receive(members, &g, bus))
            .map_err(error)?;
        Ok(RawGround {
            frames,
            stop,
            thread: Mutex::new(Some(thread)),
            outcome: Mutex::new(None),
            names,
        })
    }

    /// The drones received, by name.
    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    /// The next frame of any drone as (name, frame tuple), None when every receiver stopped and
    /// every frame was taken; TimeoutError after `timeout` seconds without one.
    #[pyo3(signature = (timeout=None))]
    fn next_frame<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<GroundItem<'py>>> {
        let t0 = Instant::now();
        loop {
            if let Some(f) = py.detach(|| self.frames.frame(Duration::from_millis(100))) {
                return Ok(Some((f.source.to_string(), frame_tuple(py, f))));
            }
            let finished = self
                .thread
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_none_or(|t| t.is_finished());
            if finished {
                if let Some(f) = self.frames.frame(Duration::ZERO) {
                    return Ok(Some((f.source.to_string(), frame_tuple(py, f))));
                }
                py.detach(|| self.reap());
                return Ok(None);
            }
            py.check_signals()?;
            if let Some(t) = timeout.filter(|&t| t0.elapsed().as_secs_f64() >= t) {
                return Err(pyo3::exceptions::PyTimeoutError::new_err(format!(
                    "no frame from any drone in {t:.1} s"
                )));
            }
        }
    }

    /// Each drone's counters by name: live while running, final once stopped.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let live: std::collections::BTreeMap<String, Status> = self
            .frames
            .statuses()
            .into_iter()
            .map(|s| (s.source.clone(), (*s).clone()))
            .collect();
        let outcome = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        for name in &self.names {
            let d = PyDict::new(py);
            let s = live.get(name).cloned().unwrap_or_default();
            d.set_item("state", &s.connection)?;
            d.set_item("suite", &s.suite)?;
            d.set_item("last_error", &s.last_error)?;
            d.set_item("diagnosis", &s.diagnosis)?;
            let fin = outcome
                .as_ref()
                .and_then(|v| v.iter().find(|(n, _)| n == name))
                .map(|(_, r)| r);
            let c = match fin {
                Some(Ok(sum)) => sum.counters.clone(),
                _ => s.counters.clone(),
            };
            if let Some(Err(e)) = fin {
                d.set_item("error", e)?;
            }
            d.set_item("running", outcome.is_none())?;
            d.set_item("frames", c.frames)?;
            d.set_item("lost", c.lost)?;
            d.set_item("tag_failures", c.tag_failures)?;
            d.set_item("replays", c.replays)?;
            d.set_item("malformed", c.malformed)?;
            d.set_item("handshakes", c.handshakes)?;
            d.set_item("rekeys", c.rekeys)?;
            d.set_item("key_epoch", c.key_epoch)?;
            d.set_item("fps", s.row.fps)?;
            d.set_item("latency_p95_ms", s.row.latency.map(|p| p.p95))?;
            out.set_item(name, d)?;
        }
        Ok(out)
    }

    /// Stops every drone's receiver and waits for them.
    fn close(&self, py: Python<'_>) {
        self.stop.store(true, Ordering::Relaxed);
        py.detach(|| self.reap());
    }
}

impl RawGround {
    fn reap(&self) {
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t
            && let Ok(sum) = t.join()
        {
            let v = sum
                .drones
                .into_iter()
                .map(|d| (d.name, d.outcome))
                .collect();
            *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
        }
    }
}

impl Drop for RawGround {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.reap();
    }
}

/// `gapstream pair`: writes DIR/drone.key and DIR/receiver.key (receiver2.key, ... with
/// receivers > 1); the last `watchers` receivers watch only (no SET_QUALITY).
#[pyfunction]
#[pyo3(signature = (dir, receivers=1, force=false, watchers=0))]
fn pair(
    py: Python<'_>,
    dir: PathBuf,
    receivers: usize,
    force: bool,
    watchers: usize,
) -> PyResult<()> {
    py.detach(|| run::pair(&dir, receivers, watchers, force))
        .map_err(error)
}

/// RGGB mosaic -> RGB (3 bytes per pixel), the viewer's and recorder's demosaicing.
#[pyfunction]
fn demosaic_rggb<'py>(
    py: Python<'py>,
    raw: &[u8],
    width: usize,
    height: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if raw.len() != width * height || width < 2 || height < 2 {
        return Err(error(format!(
            "demosaic: {} bytes is not a {width}x{height} mosaic",
            raw.len()
        )));
    }
    Ok(PyBytes::new(
        py,
        &gapstream::images::demosaic_rggb(raw, width, height),
    ))
}

/// Grey (1 channel) or RGB (3 channels) pixels as PNG bytes, the recorder's encoder: saving a
/// frame needs nothing beyond this package.
#[pyfunction]
fn encode_png<'py>(
    py: Python<'py>,
    pixels: &[u8],
    width: usize,
    height: usize,
    channels: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if !matches!(channels, 1 | 3) || pixels.len() != width * height * channels {
        return Err(error(format!(
            "encode_png: {} bytes is not a {width}x{height} image of {channels} channel(s)",
            pixels.len()
        )));
    }
    let png = py
        .detach(|| gapstream::images::encode_png(width, height, channels, pixels))
        .map_err(error)?;
    Ok(PyBytes::new(py, &png))
}

#[pymodule]
fn _gapstream(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RawReceiver>()?;
    m.add_class::<RawGround>()?;
    m.add_function(wrap_pyfunction!(pair, m)?)?;
    m.add_function(wrap_pyfunction!(demosaic_rggb, m)?)?;
    m.add_function(wrap_pyfunction!(encode_png, m)?)?;
    m.add("GapstreamError", m.py().get_type::<GapstreamError>())?;
    Ok(())
}
