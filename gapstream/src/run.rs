//! The CLI's composite runs: `demo` (node + bridge + receiver + viewer in one process), `view`,
//! `node`, and `bench` (every suite and transport on localhost).

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use esp32_bridge::host::{HostBridge, HostConfig};
use gapstream_drone::{DroneConfig, Mode};

use crate::images::{FrameSource, SourceSpec};
use crate::receiver::{self, ReceiverConfig, SessionKind, Sinks, Summary, Transport};
use crate::sim::{self, NodeConfig};
use crate::viewer::{Viewer, ViewerState};

/// Errors of a composite run, one line each.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Receiver(#[from] receiver::ReceiverError),
    #[error("the drone node failed: {0}")]
    Node(String),
    #[error("no frame was delivered in {0:.1} s (is the bridge / drone running?)")]
    NoFrames(f64),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Receiver-side settings shared by `demo`, `view` and `record`.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    pub transport: Transport,
    pub duration: Option<Duration>,
    pub metrics: Option<PathBuf>,
    pub viewer: Option<String>,
    pub bayer: bool,
    pub record: Option<PathBuf>,
}

/// The simulated drone's settings.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    pub source: SourceSpec,
    pub fps: f64,
    pub packet_payload: usize,
    pub spi_hz: Option<u64>,
}

fn start_viewer(addr: &str, bayer: bool) -> Result<(Arc<ViewerState>, Viewer), RunError> {
    let state = ViewerState::new(bayer);
    let v = match Viewer::start(addr, state.clone()) {
        Ok(v) => v,
        Err(e) if addr.starts_with("127.0.0.1:") => {
            eprintln!("gapstream: {e}; using a free port instead");
            Viewer::start("127.0.0.1:0", state.clone())
                .map_err(|e| RunError::Setup(e.to_string()))?
        }
        Err(e) => return Err(RunError::Setup(e.to_string())),
    };
    Ok((state, v))
}

/// Starts the host bridge on the stock ports (SPI side 5100, TCP/UDP 5000), or on free ports when
/// those are taken.
pub fn start_bridge(verbose: bool) -> Result<HostBridge, RunError> {
    let cfg = HostConfig {
        verbose,
        ..HostConfig::default()
    };
    match HostBridge::start(cfg.clone()) {
        Ok(b) => Ok(b),
        Err(e) => {
            eprintln!("gapstream: ports 5000/5100 unavailable ({e}); the bridge uses free ports");
            let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
            HostBridge::start(HostConfig {
                spi_listen: any,
                tcp_listen: any,
                udp_listen: Some(any),
                ..cfg
            })
            .map_err(|e| RunError::Setup(format!("cannot start the bridge: {e}")))
        }
    }
}

fn drone_config(n: &NodeSettings) -> DroneConfig {
    DroneConfig {
        mode: Mode::StockPlaintext,
        packet_payload: n.packet_payload,
    }
}

fn session_kind() -> SessionKind {
    SessionKind::StockPlaintext
}

fn print_summary(s: &Summary) {
    let c = &s.counters;
    let lat = match s.latency {
        Some(p) => format!(
            "latency p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
            p.p50, p.p95, p.p99
        ),
        None => "no latency samples".into(),
    };
    eprintln!(
        "gapstream: {} frames in {:.1} s ({:.1} fps), {lat}; lost {}, tag failures {}, replays {}, malformed {}, connections {}",
        c.frames,
        s.elapsed_s,
        c.frames as f64 / s.elapsed_s.max(1e-9),
        c.lost,
        c.tag_failures,
        c.replays,
        c.malformed,
        s.connects
    );
}

/// `gapstream demo`.
pub fn demo(node: NodeSettings, s: StreamSettings, stop: Arc<AtomicBool>) -> Result<(), RunError> {
    let bridge = start_bridge(false)?;
    let viewer = match &s.viewer {
        Some(a) => Some(start_viewer(a, s.bayer)?),
        None => None,
    };
    let source = FrameSource::open(&node.source).map_err(|e| RunError::Setup(e.to_string()))?;
    let (w, h) = (source.width(), source.height());
    eprintln!("gapstream demo: simulated drone -> ESP32 bridge -> receiver, all on this machine");
    eprintln!(
        "  bridge   SPI side {}, TCP {}, UDP {}",
        bridge.spi_addr,
        bridge.tcp_addr,
        bridge
            .udp_addr
            .map(|u| u.to_string())
            .unwrap_or_else(|| "off".into())
    );
    eprintln!(
        "  drone    {} {w}x{h} at {} fps, CPX packets of {} bytes, SPI {}",
        match node.source {
            SourceSpec::Synthetic { .. } => "synthetic pattern",
            SourceSpec::Folder(_) => "image folder",
            SourceSpec::Raw { .. } => "raw file",
        },
        node.fps,
        node.packet_payload,
        match node.spi_hz {
            Some(hz) => format!("paced at {:.1} MHz", hz as f64 / 1e6),
            None => "unpaced".into(),
        }
    );
    eprintln!("  session  {} over {}", session_kind().label(), s.transport);
    if let Some((_, v)) = &viewer {
        eprintln!(
            "  viewer   {}   (open it in a browser; Ctrl-C stops)",
            v.url()
        );
    }
    let n = sim::start_node(NodeConfig {
        source,
        fps: node.fps,
        bridge_spi: bridge.spi_addr,
        spi_hz: node.spi_hz,
        drone: drone_config(&node),
        frames: None,
    })
    .map_err(RunError::Node)?;
    let bridge_addr = match s.transport {
        Transport::Tcp => bridge.tcp_addr,
        Transport::Udp => bridge
            .udp_addr
            .ok_or_else(|| RunError::Setup("the bridge has no UDP socket".into()))?,
    };
    let summary = receiver::run(
        ReceiverConfig {
            bridge: bridge_addr,
            transport: s.transport,
            session: session_kind(),
            stop: stop.clone(),
            duration: s.duration,
            max_frames: None,
            idle_timeout: Duration::from_secs(3),
        },
        Sinks {
            viewer: viewer.as_ref().map(|(st, _)| st.clone()),
            metrics_csv: s.metrics.clone(),
            record_dir: s.record.clone(),
            frames: None,
            status_line: true,
            log_errors: true,
        },
        s.bayer,
    )?;
    let rep = n.stop();
    bridge.stop();
    print_summary(&summary);
    if let Some(e) = rep.error {
        return Err(RunError::Node(e));
    }
    if summary.counters.frames == 0 {
        return Err(RunError::NoFrames(summary.elapsed_s));
    }
    Ok(())
}

/// `gapstream view` / `gapstream record`.
pub fn view(bridge: SocketAddr, s: StreamSettings, stop: Arc<AtomicBool>) -> Result<(), RunError> {
    let viewer = match &s.viewer {
        Some(a) => Some(start_viewer(a, s.bayer)?),
        None => None,
    };
    eprintln!(
        "gapstream view: receiving from {bridge} over {} ({})",
        s.transport,
        session_kind().label()
    );
    if let Some((_, v)) = &viewer {
        eprintln!("  viewer   {}   (Ctrl-C stops)", v.url());
    }
    let summary = receiver::run(
        ReceiverConfig {
            bridge,
            transport: s.transport,
            session: session_kind(),
            stop,
            duration: s.duration,
            max_frames: None,
            idle_timeout: Duration::from_secs(3),
        },
        Sinks {
            viewer: viewer.as_ref().map(|(st, _)| st.clone()),
            metrics_csv: s.metrics.clone(),
            record_dir: s.record.clone(),
            frames: None,
            status_line: true,
            log_errors: true,
        },
        s.bayer,
    )?;
    print_summary(&summary);
    if summary.counters.frames == 0 {
        return Err(RunError::NoFrames(summary.elapsed_s));
    }
    Ok(())
}

/// `gapstream node`: the simulated drone alone.
pub fn node_only(
    bridge_spi: SocketAddr,
    node: NodeSettings,
    duration: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> Result<(), RunError> {
    let source = FrameSource::open(&node.source).map_err(|e| RunError::Setup(e.to_string()))?;
    eprintln!("gapstream node: streaming into {bridge_spi} (Ctrl-C stops)");
    let n = sim::start_node(NodeConfig {
        source,
        fps: node.fps,
        bridge_spi,
        spi_hz: node.spi_hz,
        drone: drone_config(&node),
        frames: None,
    })
    .map_err(RunError::Node)?;
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed)
        && duration.is_none_or(|d| t0.elapsed() < d)
        && !n.is_finished()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = n.stop();
    eprintln!(
        "gapstream node: {} frames captured, {} sent, {} bytes; {} bytes dropped while the bridge was away, {} reconnects",
        r.drone.frames_captured,
        r.drone.frames_sent,
        r.drone.bytes_sent,
        r.link.bytes_dropped,
        r.link.reconnects
    );
    match r.error {
        Some(e) => Err(RunError::Node(e)),
        None => Ok(()),
    }
}

/// One bench result row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub suite: String,
    pub transport: Transport,
    pub frames: u64,
    pub fps: f64,
    pub goodput_mbps: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub lost: u64,
    pub tag_failures: u64,
}

/// The bench CSV header (issue 6).
pub const BENCH_HEADER: &str = "suite,transport,frames,fps,goodput_mbps,latency_p50_ms,latency_p95_ms,latency_p99_ms,lost,tag_failures";

/// Streams `frames` frames through node -> bridge -> receiver on localhost and measures.
pub fn bench_one(
    suite: &str,
    transport: Transport,
    frames: u64,
    fps: f64,
    spi_hz: Option<u64>,
) -> Result<BenchRow, RunError> {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("static");
    let bridge = HostBridge::start(HostConfig {
        spi_listen: any,
        tcp_listen: any,
        udp_listen: Some(any),
        ..HostConfig::default()
    })?;
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let addr = match transport {
        Transport::Tcp => bridge.tcp_addr,
        Transport::Udp => bridge.udp_addr.expect("bound above"),
    };
    let st = stop.clone();
    let recv = std::thread::spawn(move || {
        receiver::run(
            ReceiverConfig {
                bridge: addr,
                transport,
                session: session_kind(),
                stop: st,
                duration: None,
                max_frames: None,
                idle_timeout: Duration::from_secs(3),
            },
            Sinks {
                viewer: None,
                metrics_csv: None,
                record_dir: None,
                frames: Some(tx),
                status_line: false,
                log_errors: false,
            },
            false,
        )
    });
    // Let the receiver connect (and handshake) before frames flow.
    std::thread::sleep(Duration::from_millis(300));
    let source = FrameSource::open(&SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    })
    .map_err(|e| RunError::Setup(e.to_string()))?;
    let node = sim::start_node(NodeConfig {
        source,
        fps,
        bridge_spi: bridge.spi_addr,
        spi_hz,
        drone: DroneConfig {
            mode: Mode::StockPlaintext,
            packet_payload: 1020,
        },
        frames: Some(frames),
    })
    .map_err(RunError::Node)?;
    let mut lat = Vec::new();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut got = 0u64;
    let mut bytes = 0u64;
    let deadline =
        Instant::now() + Duration::from_secs_f64(frames as f64 / fps.max(1.0) * 3.0 + 10.0);
    while got < frames && Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(d) => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                got += 1;
                bytes += d.pixels.len() as u64;
                if let Some(c) = d.capture_ns {
                    lat.push((sim::unix_ns().saturating_sub(c)) as f64 / 1e6);
                }
            }
            Err(_) if node.is_finished() && got > 0 => {
                // The node is done; wait a little for the tail, then stop.
                if let Ok(d) = rx.recv_timeout(Duration::from_secs(1)) {
                    got += 1;
                    bytes += d.pixels.len() as u64;
                    last = Instant::now();
                    continue;
                }
                break;
            }
            Err(_) => {}
        }
    }
    let rep = node.stop();
    stop.store(true, Ordering::Relaxed);
    let summary = recv
        .join()
        .map_err(|_| RunError::Setup("receiver thread panicked".into()))??;
    bridge.stop();
    if let Some(e) = rep.error {
        return Err(RunError::Node(e));
    }
    let span = first
        .map(|f| last.duration_since(f).as_secs_f64())
        .unwrap_or(0.0);
    let rate = if got > 1 && span > 0.0 {
        (got - 1) as f64 / span
    } else {
        0.0
    };
    let p = crate::metrics::Percentiles::of(&mut lat).unwrap_or_default();
    Ok(BenchRow {
        suite: suite.into(),
        transport,
        frames: got,
        fps: rate,
        goodput_mbps: if span > 0.0 {
            bytes as f64 * 8.0 / span / 1e6
        } else {
            0.0
        },
        p50: p.p50,
        p95: p.p95,
        p99: p.p99,
        lost: frames.saturating_sub(got).max(summary.counters.lost),
        tag_failures: summary.counters.tag_failures,
    })
}

/// `gapstream bench`: every suite and transport; prints a table and writes the CSV.
pub fn bench(frames: u64, fps: f64, spi_hz: Option<u64>, csv: &Path) -> Result<(), RunError> {
    let suites = ["stock-plaintext"];
    let mut rows = Vec::new();
    eprintln!(
        "gapstream bench: {frames} frames of 324x244 per run, camera at {fps} fps, SPI {}, localhost",
        match spi_hz {
            Some(hz) => format!("paced at {hz} Hz"),
            None => "unpaced (software chain only)".into(),
        }
    );
    for suite in suites {
        for t in [Transport::Tcp, Transport::Udp] {
            let r = bench_one(suite, t, frames, fps, spi_hz)?;
            eprintln!(
                "  {suite:<26} {t}: {} frames, {:.1} fps, p95 {:.2} ms",
                r.frames, r.fps, r.p95
            );
            rows.push(r);
        }
    }
    let mut out = String::new();
    writeln!(out, "{BENCH_HEADER}").expect("string");
    for r in &rows {
        writeln!(
            out,
            "{},{},{},{:.2},{:.3},{:.3},{:.3},{:.3},{},{}",
            r.suite,
            r.transport,
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures
        )
        .expect("string");
    }
    if let Some(d) = csv.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(d)?;
    }
    fs::write(csv, &out)?;
    println!(
        "{:<26} {:<9} {:>6} {:>7} {:>9} {:>8} {:>8} {:>8} {:>5} {:>8}",
        "suite",
        "transport",
        "frames",
        "fps",
        "Mb/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "lost",
        "tag-fail"
    );
    for r in &rows {
        println!(
            "{:<26} {:<9} {:>6} {:>7.1} {:>9.2} {:>8.3} {:>8.3} {:>8.3} {:>5} {:>8}",
            r.suite,
            r.transport.to_string(),
            r.frames,
            r.fps,
            r.goodput_mbps,
            r.p50,
            r.p95,
            r.p99,
            r.lost,
            r.tag_failures
        );
    }
    println!("wrote {}", csv.display());
    Ok(())
}
